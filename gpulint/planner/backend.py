"""Apply a plan: a partitioner that saves exactly the planned set, as a torch.compile backend or a compiled step.

The partition_fn receives the joint forward+backward graph of the real run, looks up the plan's saved nodes by
name (the planned trace and the real one trace the same step function, so names and ops match; a mismatch is
an error, never a silent fallback), splits it with torch's private `_extract_fwd_bwd_modules`, and reorders the
backward graph to the planner's schedule: each recomputed node right before its first use. The forward and
backward graphs then run as FX Python code (boxed_nop), which frees every value after its last use: the run
matches `simulate.simulate` op for op.

Supported torch: 2.13 (the private partitioner helpers move between releases; tests/planner pin them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gpulint.planner.errors import PlanError


def saved_names(plan: Any) -> set[str] | None:
    """The node names a plan saves; `plan` is a plan (planfile.Plan, its dict, or a plan file's path), an iterable
    of names, or None (save what the backward reads directly: no recompute). A plan that reads tensor values
    (graph breaks) holds the branch its sample batch took: one static compiled graph cannot apply it, so it is
    refused with the place and a pointer to eager mode."""
    from gpulint.planner import planfile

    if plan is None:
        return None
    if isinstance(plan, (planfile.Plan, Mapping, str, Path)):
        plan = planfile.coerce(plan)
        refuse_data_dependent(plan)
        # Excluded ops (collectives, ...) need no entry: the schedule saves them whenever they are needed.
        return plan.saved_ids()
    return set(plan)


def refuse_data_dependent(plan: Any) -> None:
    """Refuse a plan made for a step that reads tensor values (see `saved_names`)."""
    if plan.data_dependent:
        first = plan.data_dependent[0]
        raise PlanError(
            f"the step depends on tensor values ({first.op} at {first.path}:{first.line}; "
            f"{len(plan.data_dependent)} place(s)), where torch.compile breaks its graph: apply this plan in eager mode "
            "with gpulint.apply(model, plan)"
        )


def make_partition_fn(saved: Iterable[str] | None) -> Callable[..., Any]:
    """A partition_fn saving the named nodes; None saves what the backward reads directly (no recompute)."""
    wanted = None if saved is None else set(saved)

    def partition(joint: Any, _inputs: Any, *, num_fwd_outputs: int, **_kw: Any) -> tuple[Any, Any]:
        from torch._functorch.partitioners import _extract_fwd_bwd_modules

        from gpulint.planner import rng
        from gpulint.planner.graph import INPUT, PARAM, build_graph
        from gpulint.planner.simulate import schedule

        rng.rewrite_random_ops(joint)  # random ops get their generator state: recomputing one replays it
        graph = build_graph(joint, num_fwd_outputs, [INPUT] * len(joint.graph.nodes))
        if wanted is None:
            saved_idx = graph.default_saved()
        else:
            missing = sorted(wanted - graph.by_name.keys())
            if missing:
                raise PlanError(
                    f"the plan does not match this step: {len(missing)} planned node(s) such as {missing[0]!r} "
                    "are not in its graph; re-run `gpulint plan` for this model, batch and dtype"
                )
            saved_idx = {graph.by_name[name] for name in wanted}
        sched = schedule(graph, graph.alias_closure(saved_idx))  # a saved storage saves all its views
        fx_nodes = {n.name: n for n in joint.graph.nodes}
        # Parameters and inputs the backward reads are passed to it as saved values too (they cost nothing).
        bw_reads = {u for i in sched.bw for u in graph.nodes[i].inputs if graph.nodes[u].kind in (INPUT, PARAM)}
        saved_values = [fx_nodes[graph.nodes[i].name] for i in sorted(sched.saved | bw_reads)]
        fw_module, bw_module = _extract_fwd_bwd_modules(
            joint, saved_values, saved_sym_nodes=[], num_fwd_outputs=num_fwd_outputs
        )
        _drop_unscheduled(fw_module, {graph.nodes[i].name for i in sched.fw})
        _drop_unscheduled(bw_module, {graph.nodes[i].name for i in sched.bw})
        _reorder(bw_module, [graph.nodes[i].name for i in sched.bw])
        rng.replay_recomputed(bw_module)
        return fw_module, bw_module

    return partition


def _drop_unscheduled(module: Any, scheduled: set[str]) -> None:
    """Erase unused nodes the schedule does not run. The extraction copies every node whose inputs are
    available and its dead-code pass keeps "impure" ones, so an unused random-tagged op (SDPA has a dropout
    argument) would otherwise be recomputed in the backward for nothing."""
    for node in reversed(list(module.graph.nodes)):
        if node.op == "call_function" and node.name not in scheduled and not node.users:
            module.graph.erase_node(node)


def _reorder(module: Any, order: list[str]) -> None:
    """Put the backward graph's call nodes in `order` (names); nodes not named keep their relative place after."""
    graph = module.graph
    by_name = {n.name: n for n in graph.nodes}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = placeholders[-1] if placeholders else None
    for name in order:
        node = by_name.get(name)
        if node is None or node.op != "call_function":
            continue
        if anchor is None:
            first = next(iter(graph.nodes))
            first.prepend(node)
        else:
            anchor.append(node)
        anchor = node
    graph.lint()
    module.recompile()


def compile_step(step: Callable[..., Any], plan: Any) -> Callable[..., Any]:
    """aot-compile `step(state, batch) -> loss` so that its backward saves exactly the plan's saved set."""
    from torch._dynamo.backends.debugging import boxed_nop
    from torch._functorch.aot_autograd import aot_function

    return aot_function(step, fw_compiler=boxed_nop, bw_compiler=boxed_nop,
                        partition_fn=make_partition_fn(saved_names(plan)))


def compile(model: Any, plan: Any, loss_fn: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """A training-step callable for `model` under `plan`: `step(batch) -> loss`; call `.backward()` on the loss.

    `plan` is a plan (or its dict, or its file's path, or a set of saved node names) made for this model, batch
    shape and dtype;
    `loss_fn(output, batch)` must be the one the plan was made with (default: output.loss, else output.sum()).
    """
    from gpulint.planner.step import make_step_fn

    compiled = compile_step(make_step_fn(model, loss_fn), plan)

    def step(batch: Any) -> Any:
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        return compiled(state, batch)

    return step


def gpulint_backend(plan: Any) -> Callable[..., Any]:
    """A torch.compile backend applying `plan`: `torch.compile(step_fn, backend=gpulint_backend(plan))`.

    `plan` is a plan, its dict, the path of a plan file, or a set of saved node names. Compile the same
    step the plan traced (forward and loss); a graph whose node names differ from the planned ones is
    rejected with a PlanError.
    """
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop

    names = saved_names(plan)  # a plan file is read (and checked) now, not at the first compiled call
    return aot_autograd(fw_compiler=boxed_nop, bw_compiler=boxed_nop, partition_fn=make_partition_fn(names))
