"""Price findings: an estimated cost per training step, in seconds and as a share of the step, from a plan's
launch profile (`gpulint check --plan plan.json`; the PR comment prices its findings the same way).

    launch = load_launch("out/plan.json")
    findings = priced(findings, launch)          # each with a Cost, most expensive first
    print(profile_text(launch, findings))       # the step's launch profile, CUDA Graphs and streams advice

Every price is a model estimate made from the trace (planner/launch.py): how many parameter tensors the step has,
how long its kernels run on the plan's hardware, what a launch and a host-device round trip cost there. The
`method` of each Cost says how it was made. A finding whose cost depends on something the trace cannot see (how
long a loop over a batch's elements runs, how often an opt-in flag fires) gets no price rather than a made-up one.

Torch-free: the linter and the bot import it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from gpulint.errors import UsageError
from gpulint.linter.finding import Cost
from gpulint.planner import planfile
from gpulint.planner.planfile import Launch
from gpulint.units import format_bytes
from gpulint.units import format_time as _time  # the one time formatter

EMA_OPS_PER_TENSOR = 2  # `mul_` and `add_` (or `sub_` and a scaled gradient) per tensor
MIN_SHOWN_SHARE = 0.05  # a CUDA Graphs saving or a copy below this share of the step is not worth a recommendation

# Lint codes that name a host-device sync (each one forfeits the host's lead over the device), and those that name
# what else blocks a CUDA graph's capture: the lint findings a blocker of that kind links to.
SYNC_CODES = frozenset({"GPL201", "GPL202", "GPL207", "GPL401", "GPL402", "GPL403", "GPL404", "GPL405", "GPL406",
                        "GPL410", "GPL412", "GPL413", "GPL421", "GPL504"})
BLOCKER_CODES = {"sync": SYNC_CODES | {"GPL101", "GPL411", "GPL420"}, "dynamic-shape": frozenset({"GPL406"}),
                 "cpu-op": frozenset({"GPL403", "GPL504", "GPL505"}), "rng": frozenset()}
PADDING_CODES = frozenset({"GPL301", "GPL302", "GPL303"})


class _Located(Protocol):
    code: str
    path: str
    line: int


def load_launch(path: str | Path) -> Launch:
    """The launch profile of a plan file; one line naming the file when it has none."""
    plan = planfile.load(path)
    if plan.launch is None:
        raise UsageError(f"{path}: the plan has no launch profile (it was made by an older gpulint): run "
                         "`gpulint plan` again")
    return plan.launch


def sync_seconds(launch: Launch, syncs: int = 1) -> float:
    """One host sync among `syncs` in the step: a round trip, plus the queue it drains. On a GPU the host runs ahead
    of the device; a sync makes it wait until the device catches up, so the work it dispatches next no longer
    overlaps the device's. Where the syncs sit is unknown: they are assumed to cut the step into equal parts, each
    sync forfeiting the overlap of one part (one sync: half the step's overlap). A CPU runs its kernels as they are
    dispatched: no queue, only the round trip."""
    overlap = min(launch.host_time_s, launch.device_time_s) if launch.kind == "cuda" else 0.0
    return launch.sync_overhead_s + overlap / (max(1, syncs) + 1)


def price(code: str, launch: Launch, syncs: int = 1) -> tuple[float, str] | None:
    """(seconds per step, how they were estimated) for a finding of rule `code` among `syncs` host syncs in the
    step; None when the trace cannot price it."""
    n = launch.parameter_tensors
    op = launch.op_overhead_s
    per_op = f"{_time(op)} ({launch.op_source})"
    foreach = f"the foreach form's {_time(launch.foreach_op_s)}"
    sync = sync_seconds(launch, syncs)
    sync_how = (f"one host-device round trip ({_time(launch.sync_overhead_s)}: {launch.sync_source or 'profile'})"
                + (f" plus the overlap of host and device it forfeits (1/{max(1, syncs) + 1} of the step's: "
                   f"{syncs} sync{'s' * (syncs != 1)} found)" if launch.kind == "cuda" else ""))
    if code == "GPL101":  # the fix reads once: its one sync (and the queue that drains) stays
        return (max(0.0, n * op - launch.foreach_op_s) + (n - 1) * launch.sync_overhead_s,
                f"{n} parameter tensors (the trace's) x (one op at {per_op} + one round trip at "
                f"{_time(launch.sync_overhead_s)}), less {foreach} (torch._foreach_norm) and its one read")
    if code == "GPL102":
        return (max(0.0, n * op - launch.foreach_op_s),
                f"{n} parameter tensors x one op at {per_op}, less {foreach} (torch._foreach_norm)")
    if code in SYNC_CODES:
        return sync, sync_how
    if code == "GPL411":
        return (launch.h2d_time_s + sync,
                f"the batch's copy ({_bytes(launch.batch_bytes)} at {_rate(launch.h2d_bandwidth)}: "
                f"{launch.h2d_source or 'profile'}) held by the host, and {sync_how}")
    if code == "GPL420":
        collective = (f"the traced collectives ({_bytes(launch.collective_bytes)}, twice over the interconnect: "
                      f"{launch.interconnect_source}) and " if launch.collectives else "")
        return launch.collective_time_s + sync, f"{collective}{sync_how}"
    if code == "GPL422" and launch.interconnect_bandwidth:
        seconds = 2 * launch.parameter_bytes / launch.interconnect_bandwidth
        return seconds, (f"one all-reduce of the gradients ({_bytes(launch.parameter_bytes)}, twice over the "
                         f"interconnect: {launch.interconnect_source}) per micro-step that no_sync would skip")
    if code == "GPL501":
        loop = EMA_OPS_PER_TENSOR * (n * op - launch.foreach_op_s)
        return (max(0.0, loop),
                f"{n} parameter tensors x {EMA_OPS_PER_TENSOR} ops (an EMA's or a hand-written update's mul_ and "
                f"add_) at {per_op}, less {foreach} for each")
    if code == "GPL502" and launch.optimizer_loop_host_s:
        return (max(0.0, launch.optimizer_loop_host_s - launch.optimizer_host_s),
                f"{launch.optimizer}'s for-loop step over {n} parameter tensors ({_time(launch.optimizer_loop_host_s)}"
                f" of ops at {per_op}, counted by running it) less its foreach form's "
                f"({_time(launch.optimizer_host_s)})")
    if code == "GPL503" and launch.memory_bandwidth:
        return (launch.foreach_op_s + launch.parameter_bytes / launch.memory_bandwidth,
                f"zeroing {_bytes(launch.parameter_bytes)} of gradients at {_rate(launch.memory_bandwidth)} and "
                f"{foreach} zero_, which set_to_none skips")
    if code in PADDING_CODES and launch.padding is not None:
        pad = launch.padding
        return (pad.share * launch.device_time_s,
                f"{pad.share:.0%} of the step's kernel time (1 - mean length {pad.mean_length:g} / padded length "
                f"{pad.padded_length}, from the config; attention's square term wastes more)")
    return None


def costs(findings: Sequence[_Located], launch: Launch) -> list[Cost | None]:
    """Each finding's Cost (None: not priced), in the findings' order. A share is of the step as the code runs it:
    the traced step plus every priced finding's cost."""
    syncs = sum(1 for f in findings if f.code in BLOCKER_CODES["sync"])
    estimates = [price(f.code, launch, syncs) for f in findings]
    step = launch.step_time_s + sum(e[0] for e in estimates if e is not None)
    return [None if e is None else Cost(seconds=e[0], share=e[0] / step if step else 0.0, method=e[1])
            for e in estimates]


def priced(findings: Sequence, launch: Launch) -> list:
    """The findings with their costs, the most expensive first and the unpriced last (in their order)."""
    out = [replace(f, cost=cost) for f, cost in zip(findings, costs(findings, launch))]
    return sorted(out, key=lambda f: -f.cost.seconds if f.cost else math.inf)


def blocker_links(launch: Launch, findings: Sequence[_Located]) -> list[tuple[planfile.Blocker, list[_Located]]]:
    """Each capture blocker the trace found, with the lint findings that name it: on its line, else of its kind;
    then the lint findings of syncs the trace did not see (the training loop around the step), each a blocker."""
    out = []
    linked: set[int] = set()
    for blocker in launch.blockers:
        codes = BLOCKER_CODES.get(blocker.kind, frozenset())
        same_line = [f for f in findings if f.code in codes and blocker.path and f.path == blocker.path
                     and f.line == blocker.line]
        names = same_line or ([f for f in findings if f.code in codes] if not blocker.path else [])
        linked.update(id(f) for f in names)
        out.append((blocker, names))
    for finding in findings:
        if finding.code in BLOCKER_CODES["sync"] and id(finding) not in linked:
            out.append((planfile.Blocker("sync", "a host-device sync in the step", finding.path, finding.line),
                        [finding]))
    return out


def profile_text(launch: Launch, findings: Sequence[_Located]) -> str:
    """The launch profile as text: kernels, launch share and verdict; CUDA Graphs with their saving and what blocks
    capture (each with the lint findings that name it); the batch's copy against compute; collectives."""
    step = launch.step_time_s
    lines = [
        f"Launch profile ({launch.kind}, a model estimate from the trace): {launch.kernels} ops launched per step "
        f"({launch.optimizer_ops} of them the {launch.optimizer or 'no'} optimizer's foreach step, its host reads "
        f"included); {launch.small_kernels} of the step's kernels run shorter than their launch",
        f"  device {_time(launch.device_time_s)} of kernels; host {_time(launch.host_time_s)} dispatching them at "
        f"{_time(launch.overhead_per_kernel_s)} each ({launch.overhead_source})",
        f"  step {_time(step)} ({'the longer of the two: the host runs ahead' if launch.kind == 'cuda' else 'their sum'}"
        f"); launch share {launch.launch_share:.0%}: "
        + ("launch-bound" if launch.launch_bound else "not launch-bound"),
    ]
    if launch.kind == "cuda":
        lines += _graphs_text(launch, findings)
        lines += _streams_text(launch)
    if launch.collectives:
        lines.append(f"  Collectives: {launch.collectives} in the step, {_bytes(launch.collective_bytes)}, holding it "
                     f"{_time(launch.collective_time_s)} when blocking ({launch.interconnect_source})")
    return "\n".join(lines) + "\n"


def _graphs_text(launch: Launch, findings: Sequence[_Located]) -> list[str]:
    saving, step = launch.graph_saving_s, launch.step_time_s
    if not (launch.launch_bound and step and saving / step >= MIN_SHOWN_SHARE):
        return [f"  CUDA Graphs: not worth it here (replayed as one graph the step would take "
                f"{_time(launch.graph_step_time_s)})"]
    lines = [f"  CUDA Graphs: capture the step (torch.compile(mode=\"reduce-overhead\"), or torch.cuda.graph) to save "
             f"~{_time(saving)} per step ({saving / step:.0%}): one launch and {_time(_graph_kernel(launch))} per kernel "
             f"instead of the host's dispatch ({launch.graph_source})"]
    blockers = blocker_links(launch, findings)
    if not blockers:
        lines.append("    nothing in the trace blocks capture")
    for blocker, named in blockers:
        at = f" at {blocker.path}:{blocker.line}" if blocker.path else ""
        shown = ", ".join(f"{f.path}:{f.line} {f.code}" for f in named[:3])
        see = f" (see {shown}{' ...' if len(named) > 3 else ''})" if named else ""
        lines.append(f"    blocks capture: {blocker.kind}{at}: {blocker.reason}{see}")
    return lines


def _graph_kernel(launch: Launch) -> float:
    fixed = launch.graph_step_time_s - launch.device_time_s
    return fixed / launch.kernels if launch.kernels else 0.0


def _streams_text(launch: Launch) -> list[str]:
    if launch.h2d_bandwidth is None:
        return []
    copy, compute, step = launch.h2d_time_s, launch.device_time_s, launch.step_time_s
    hidden = min(copy, compute)
    lines = [f"  Batch copy: {_bytes(launch.batch_bytes)} host to device in {_time(copy)} at "
             f"{_rate(launch.h2d_bandwidth)} ({launch.h2d_source}), against {_time(compute)} of compute"]
    if step and copy / step >= MIN_SHOWN_SHARE:
        lines.append(f"    a blocking copy holds the step {_time(copy)} ({copy / step:.0%}): pin the loader's memory "
                     f"(pin_memory=True), copy with non_blocking=True and prefetch the next batch on a side stream to "
                     f"save ~{_time(hidden)}")
    else:
        lines.append("    small next to the step: streams would save little")
    return lines


def cost_text(cost: Cost | None) -> str:
    """How a finding's cost reads in a report: `~1.2 ms per step (34%)`; empty when it has none."""
    if cost is None:
        return ""
    return f"~{_time(cost.seconds)} per step ({_percent(cost.share)})"


def _percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else "<1%"


def _bytes(n: float) -> str:
    """Decimal units, as the bandwidths beside them (GB/s)."""
    return format_bytes(n, like="GB")


def _rate(bandwidth: float | None) -> str:
    if not bandwidth:
        return "?"
    return f"{bandwidth / 1e12:.3g} TB/s" if bandwidth >= 1e12 else f"{bandwidth / 1e9:.3g} GB/s"
