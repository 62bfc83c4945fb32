"""Hardware profiles: one YAML per device in `gpulint/planner/hardware/` with dense (not sparse) figures, or one
`gpulint calibrate` measured on this machine (with the matmul FLOP/s at each size it ran)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpulint.planner.errors import PlanError

HARDWARE_DIR = Path(__file__).parent / "hardware"
DTYPES = ("fp32", "bf16", "fp16")
KERNELS = ("matmul", "batched_matmul", "conv")  # the FLOP curves a calibrated profile holds


@dataclass(frozen=True)
class Hardware:
    name: str
    kind: str  # "cuda" or "cpu"
    flops: dict[str, float]  # dense peak FLOP/s per dtype name
    memory_bandwidth: float  # bytes/s
    memory_capacity: int  # bytes
    launch_overhead_s: float
    allocation_rounding: int  # the allocator rounds each block up to this many bytes
    # Measured profiles (calibrate.py): per kind of kernel (matmul, batched_matmul, conv) and dtype, its smallest
    # dimension -> the FLOP/s it reached, ascending; elements per second of random and of transcendental ops.
    curves: dict[str, dict[str, tuple[tuple[float, float], ...]]] = field(default_factory=dict)
    element_rates: dict[str, float] = field(default_factory=dict)
    threads: int | None = None  # the torch thread count it was measured with
    eager_overhead_s: float | None = None  # per op of an eager step (Python modules, autograd); None: launch_overhead_s
    checkpoint_overhead_s: float = 0.0  # more per op that gpulint.apply's checkpoint policy sees (forward, recompute)
    # What the launch profile (launch.py) prices beyond the kernels: a host-device round trip (`.item()` on a ready
    # value), a kernel inside a replayed CUDA graph, host-to-device copies of the batch, collectives. Each `*_source`
    # says where its figure comes from (a spec sheet, an assumption, or a measurement), for the report to state.
    op_overhead_s: float | None = None  # per tensor op called from Python, no module or autograd; None: launch's
    foreach_tensor_overhead_s: float | None = None  # on a CPU, per tensor of a foreach op (a loop in C++ there)
    sync_overhead_s: float = 0.0
    sync_source: str = ""
    graph_kernel_overhead_s: float = 0.0
    graph_source: str = ""
    h2d_bandwidth: float | None = None  # bytes/s of a pinned host-to-device copy; None: the host is the device
    h2d_source: str = ""
    interconnect_bandwidth: float | None = None  # bytes/s one GPU sends to its peers; None: collectives unpriced
    interconnect_source: str = ""

    def flops_rate(self, kernel: str, min_dim: int, dtype: str) -> float:
        """FLOP/s of a `kernel` whose smallest dimension is `min_dim`: read off the measured curve (log-log between
        its points, its ends beyond), else the peak (a shipped profile, or an op of no known kernel)."""
        curve = self.curves.get(kernel, {}).get(dtype)
        if not curve or min_dim <= 0:
            return self.flops[dtype]
        if min_dim <= curve[0][0]:
            return curve[0][1]
        for (d0, r0), (d1, r1) in itertools.pairwise(curve):
            if min_dim <= d1:
                t = (math.log(min_dim) - math.log(d0)) / (math.log(d1) - math.log(d0))
                return math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0)))
        return curve[-1][1]

    def round_up(self, nbytes: int) -> int:
        r = self.allocation_rounding
        return nbytes if r <= 1 else -(-nbytes // r) * r


def _curves(raw: dict | None) -> dict[str, tuple[tuple[float, float], ...]]:
    return {str(k): tuple(sorted((float(f), float(r)) for f, r in v)) for k, v in (raw or {}).items() if v}


def _optional_rate(value: object) -> float | None:
    """A bandwidth that may be left out (None); a rate of 0 or less is an error, not "unknown"."""
    if value is None:
        return None
    rate = float(value)  # type: ignore[arg-type]
    if rate <= 0:
        raise ValueError(f"a bandwidth must be positive, got {value!r}")
    return rate


def available() -> list[str]:
    return sorted(p.stem for p in HARDWARE_DIR.glob("*.yaml"))


def load_hardware(name: str) -> Hardware:
    """A profile by name (`h100-sxm`, `cpu`, ...) or by path to a YAML file of the same shape."""
    path = Path(name)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = HARDWARE_DIR / f"{name.lower()}.yaml"
    if not path.is_file():
        raise PlanError(f"unknown hardware {name!r}; known: {', '.join(available())} (or a path to a YAML profile)")
    try:
        data = yaml.safe_load(path.read_text())
        flops = {k: float(data["flops"][k]) for k in DTYPES}
        return Hardware(
            name=str(data["name"]),
            kind=str(data.get("kind", "cuda")),
            flops=flops,
            memory_bandwidth=float(data["memory_bandwidth"]),
            memory_capacity=int(data["memory_capacity"]),
            launch_overhead_s=float(data.get("launch_overhead_s", 5e-6)),
            allocation_rounding=int(data.get("allocation_rounding", 1)),
            curves={kernel: _curves(data.get(kernel)) for kernel in KERNELS if data.get(kernel)},
            element_rates={str(k): float(v) for k, v in (data.get("element_rates") or {}).items()},
            threads=int(data["threads"]) if data.get("threads") else None,
            eager_overhead_s=float(data["eager_overhead_s"]) if data.get("eager_overhead_s") is not None else None,
            checkpoint_overhead_s=float(data.get("checkpoint_overhead_s") or 0.0),
            op_overhead_s=float(data["op_overhead_s"]) if data.get("op_overhead_s") is not None else None,
            foreach_tensor_overhead_s=(float(data["foreach_tensor_overhead_s"])
                                       if data.get("foreach_tensor_overhead_s") is not None else None),
            sync_overhead_s=float(data.get("sync_overhead_s") or 0.0),
            sync_source=str(data.get("sync_source") or ""),
            graph_kernel_overhead_s=float(data.get("graph_kernel_overhead_s") or 0.0),
            graph_source=str(data.get("graph_source") or ""),
            h2d_bandwidth=_optional_rate(data.get("h2d_bandwidth")),
            h2d_source=str(data.get("h2d_source") or ""),
            interconnect_bandwidth=_optional_rate(data.get("interconnect_bandwidth")),
            interconnect_source=str(data.get("interconnect_source") or ""),
        )
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"{path}: bad hardware profile ({type(exc).__name__}: {exc})") from None
