"""Hardware profiles: one YAML per device in `gpulint/planner/hardware/` with dense (not sparse) figures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from gpulint.planner.errors import PlanError

HARDWARE_DIR = Path(__file__).parent / "hardware"
DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Hardware:
    name: str
    kind: str  # "cuda" or "cpu"
    flops: dict[str, float]  # dense peak FLOP/s per dtype name
    memory_bandwidth: float  # bytes/s
    memory_capacity: int  # bytes
    launch_overhead_s: float
    allocation_rounding: int  # the allocator rounds each block up to this many bytes

    def round_up(self, nbytes: int) -> int:
        r = self.allocation_rounding
        return nbytes if r <= 1 else -(-nbytes // r) * r


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
        )
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"{path}: bad hardware profile ({type(exc).__name__}: {exc})") from None
