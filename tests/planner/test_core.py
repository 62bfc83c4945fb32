"""The planner core (graph IR, schedule, memory simulation, greedy) on small hand-made graphs, without torch.

In the style of PyTorch's test/functorch/test_ac_knapsack.py: each case is a tiny table (op sizes, recompute
times, a budget) with the answer worked out by hand in the comment beside it. Only numpy is needed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpulint.planner.graph import BWD, FWD, INPUT, PARAM, TANGENT, JointGraph, OpNode
from gpulint.planner.greedy import GreedyPlanner
from gpulint.planner.simulate import schedule, simulate, step_time


def build(rows: list[tuple], fwd_outputs: list[str], grad_outputs: list[str]) -> JointGraph:
    """A joint graph from rows (name, kind, inputs, bytes[, excluded reason]) in execution order.

    Every row with bytes > 0 creates one storage of that size; a row with 0 bytes is a view of its first input.
    """
    nodes: list[OpNode] = []
    index: dict[str, int] = {}
    storage_bytes: list[int] = []
    for row in rows:
        name, kind, inputs, nbytes = row[:4]
        excluded = row[4] if len(row) > 4 else None
        ins = [index[i] for i in inputs]
        if nbytes:
            storages = creates = [len(storage_bytes)]
            storage_bytes.append(nbytes)
        else:
            storages, creates = list(nodes[ins[0]].storages), []
        index[name] = len(nodes)
        nodes.append(OpNode(index=len(nodes), name=name, op=f"aten.{name}.default", kind=kind, inputs=ins,
                            storages=storages, creates=creates, is_tensor=True, nbytes=nbytes, excluded=excluded))
    return JointGraph(nodes=nodes, storage_bytes=storage_bytes, fwd_outputs=[index[n] for n in fwd_outputs],
                      grad_outputs=[index[n] for n in grad_outputs])


def mlp() -> JointGraph:
    """x @ w1 -> relu -> @ w2 -> sum, and its backward. Bytes: x 100, w1 200, w2 20, h 400, a 400, y 40."""
    return build([
        ("x", INPUT, [], 100),
        ("w1", PARAM, [], 200),
        ("w2", PARAM, [], 20),
        ("h", FWD, ["x", "w1"], 400),
        ("a", FWD, ["h"], 400),
        ("y", FWD, ["a", "w2"], 40),
        ("loss", FWD, ["y"], 4),
        ("t", TANGENT, [], 4),
        ("gy", BWD, ["t"], 40),
        ("gw2", BWD, ["a", "gy"], 20),
        ("ga", BWD, ["gy", "w2"], 400),
        ("gh", BWD, ["ga", "a"], 400),
        ("gw1", BWD, ["x", "gh"], 200),
    ], fwd_outputs=["loss"], grad_outputs=["gw1", "gw2"])


def names(graph: JointGraph, indices) -> set[str]:
    return {graph.nodes[i].name for i in indices}


def test_default_saved_is_what_the_backward_reads():
    graph = mlp()
    assert names(graph, graph.default_saved()) == {"a"}


def test_simulated_peak_by_hand():
    graph = mlp()
    sim = simulate(graph, graph.default_saved())
    # Static 320 (x, w1, w2). Forward: h 400 -> 720, a 400 -> 1120 (h then dies: 720), y 40 -> 760, loss 4 -> 764
    # (y dies: 724). Backward: tangent 4 and gy 40 -> 768, gw2 20 -> 788 (a gradient: kept), ga 400 -> 1188 (gy
    # dies: 1148), gh 400 -> 1548, the peak (a and ga die: 748), gw1 200 -> 948 (gh dies: 548).
    assert sim.static_bytes == 320
    assert [int(b) for b in sim.timeline] == [720, 1120, 760, 764, 768, 788, 1188, 1548, 948, 548]
    assert sim.peak == 1548 and sim.peak_position == 7
    assert names(graph, sim.schedule.recomputed) == set()


def test_dropping_recomputes_the_chain_where_the_backward_needs_it():
    graph = mlp()
    sched = schedule(graph, set())
    # Nothing saved: `a` is rebuilt from `h`, which is rebuilt from the batch and w1, right before gw2 needs it.
    assert names(graph, sched.recomputed) == {"h", "a"}
    order = [graph.nodes[i].name for i in sched.bw]
    assert order.index("h") < order.index("a") < order.index("gw2")
    assert names(graph, sched.fw) == {"h", "a", "y", "loss"}


def test_excluded_ops_are_saved_whenever_the_backward_needs_them():
    graph = build([
        ("x", INPUT, [], 100),
        ("w", PARAM, [], 100),
        ("h", FWD, ["x", "w"], 400),
        ("r", FWD, ["h"], 400, "random op"),
        ("loss", FWD, ["r"], 4),
        ("t", TANGENT, [], 4),
        ("g", BWD, ["t", "r"], 400),
        ("gw", BWD, ["g", "x"], 100),
    ], fwd_outputs=["loss"], grad_outputs=["gw"])
    sched = schedule(graph, set())
    assert names(graph, sched.saved) == {"r"} and not sched.recomputed


def independent(sizes: list[int]) -> JointGraph:
    """Activations a_i = f(x, w) of the given sizes, each reduced into the loss (r_i, 4 B) and read by the backward
    (g_i, 4 B each, last layer first). Static: x 100 and w 100, plus w's gradient (100) at the end."""
    rows: list[tuple] = [("x", INPUT, [], 100), ("w", PARAM, [], 100)]
    previous = None
    for i, size in enumerate(sizes):
        rows.append((f"a{i}", FWD, ["x", "w"], size))
        rows.append((f"r{i}", FWD, [f"a{i}"] + ([previous] if previous else []), 4))
        previous = f"r{i}"
    rows.append(("t", TANGENT, [], 4))
    previous = "t"
    for i in reversed(range(len(sizes))):
        rows.append((f"g{i}", BWD, [previous, f"a{i}"], 4))
        previous = f"g{i}"
    rows.append(("gw", BWD, [previous, "x"], 100))
    return build(rows, fwd_outputs=[f"r{len(sizes) - 1}"], grad_outputs=["gw"])


# (recompute seconds of a0, a1, a2 of sizes 100, 200, 300 B; budget; the activations the plan drops). The backward
# reads a2 first. Saving everything peaks at 812 B when it starts (static 200, 600 saved, the loss, the tangent and
# g2: 4 B each). Dropping a2 saves nothing: it is rebuilt for g2 while a0 and a1 are still held. Dropping a0 peaks
# at 712 (g2: 200 + a1 + a2), dropping a1 at 612 (g2: 200 + a0 + a2), dropping a0 and a1 at 512 (g2: 200 + a2).
KNAPSACK_CASES = [
    ([1.0, 1.0, 1.0], 10_000, set()),  # everything fits: nothing dropped
    ([1.0, 5.0, 1.0], 720, {"a0"}),  # a0 or a1 reach the budget; a0 is cheaper
    ([5.0, 1.0, 1.0], 720, {"a1"}),  # a1 is cheaper
    ([1.0, 1.0, 1.0], 650, {"a1"}),  # only a1 reaches it alone
    ([1.0, 1.0, 1.0], 550, {"a0", "a1"}),  # both; dropping a2 too would add time and lower nothing
]


@pytest.mark.parametrize(("dropped", "peak"), [((), 812), (("a2",), 812), (("a0",), 712), (("a1",), 612),
                                             (("a0", "a1"), 512)])
def test_the_peaks_of_the_choices_by_hand(dropped, peak):
    graph = independent([100, 200, 300])
    saved = {i for i in graph.default_saved() if graph.nodes[i].name not in dropped}
    assert simulate(graph, saved).peak == peak


@pytest.mark.parametrize(("seconds", "budget", "dropped"), KNAPSACK_CASES)
def test_greedy_drops_what_lowers_the_peak_for_the_least_time(seconds, budget, dropped):
    graph = independent([100, 200, 300])
    times = [seconds[int(n.name[1:])] if n.name.startswith("a") else 0.0 for n in graph.nodes]
    result = GreedyPlanner(graph, times).run(budget)
    assert result.feasible and result.chosen.peak <= budget
    assert names(graph, result.simulation.schedule.recomputed) == dropped
    _total, recompute = step_time(graph, result.simulation.schedule, times)
    assert recompute == pytest.approx(sum(seconds[int(n[1:])] for n in dropped))


def test_ops_under_selective_checkpointing_cost_their_overhead():
    graph = independent([100, 200, 300])
    times = [1.0 if n.name.startswith("a") else 0.0 for n in graph.nodes]
    sched = simulate(graph, set()).schedule
    plain, plain_recompute = step_time(graph, sched, times)
    sched.checkpointed_ops = 6  # three ops in the forward, three in the recompute
    total, recompute = step_time(graph, sched, times, checkpoint_overhead_s=0.5)
    assert total == pytest.approx(plain + 3.0) and recompute == pytest.approx(plain_recompute + 3.0)


def test_an_unreachable_budget_is_reported_with_the_lowest_peak():
    graph = independent([100, 200, 300])
    times = [1.0 if n.name.startswith("a") else 0.0 for n in graph.nodes]
    full = GreedyPlanner(graph, times).run(None)
    result = GreedyPlanner(graph, times).run(full.lowest_peak - 1)
    assert not result.feasible and result.lowest_peak == full.lowest_peak
    assert result.chosen.peak == full.lowest_peak


def test_a_budget_sweep_from_one_descent_equals_separate_runs():
    graph = independent([100, 200, 300, 50])
    times = [float(len(n.name)) if n.name.startswith("a") else 0.0 for n in graph.nodes]
    planner = GreedyPlanner(graph, times)
    full = planner.run(None)
    for budget in range(full.lowest_peak, full.baseline.peak + 1, 97):
        assert planner.for_budget(full, budget).chosen == GreedyPlanner(graph, times).run(budget).chosen


def test_rounding_to_allocator_blocks():
    graph = mlp()
    exact = simulate(graph, graph.default_saved()).peak
    rounded = simulate(graph, graph.default_saved(), rounding=512).peak
    assert rounded > exact and rounded % 512 == 0


def test_the_core_imports_without_torch():
    """graph, simulate, greedy, the plan file and the reports load in an environment where torch cannot import."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gpulint.planner.graph, gpulint.planner.simulate, gpulint.planner.greedy\n"
        "import gpulint.planner.planfile, gpulint.planner.report, gpulint.planner.address\n"
        "import gpulint.planner\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
