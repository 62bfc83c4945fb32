"""Random ops in the compiled form: recompute them exactly by replaying the generator state they drew from.

Before partitioning, every random op of the forward (`native_dropout`, `rand_like`, ...) becomes

    state = rng_state(x)                     # the default generator's state just before the op (a small tensor)
    out = run_random(state, op, x, ...)      # the op itself, drawing from the generator as before

so the forward draws exactly what it drew before. When the plan recomputes the op, its copy in the backward graph
becomes `replay_random(state, op, x, ...)`: it sets the generator to the saved state, runs the op (the same mask),
and puts the generator back. The saved state replaces the mask: 5,056 bytes on CPU (the Mersenne Twister state), 16
bytes on CUDA (Philox seed and offset, kept in host memory), as torch's functionalized RNG does on CUDA.

Ops that take an explicit `generator=` are left alone (they stay excluded from recomputation).
"""

from __future__ import annotations

from typing import Any

STATE_REASON = "generator state of a random op (saved whenever the op is recomputed)"


def rng_state(like: Any) -> Any:
    """The default generator's state for `like`'s device (a uint8 tensor on the host). Copied through an op, so that
    a tracker of live storages (measure.py on CPU) sees the memory it takes, as the simulation counts it."""
    import torch

    if like.device.type == "cuda":
        return torch.cuda.get_rng_state(like.device).clone()
    return torch.get_rng_state().clone()


def run_random(_state: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """The random op as the forward runs it (the state, taken just before, is this op's recompute key)."""
    return op(*args, **kwargs)


def replay_random(state: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """The random op recomputed: the same draws as the forward's, from its saved generator state."""
    import torch

    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    if device.type == "cuda":
        current = torch.cuda.get_rng_state(device)
        torch.cuda.set_rng_state(state, device)
        try:
            return op(*args, **kwargs)
        finally:
            torch.cuda.set_rng_state(current, device)
    current = torch.get_rng_state()
    torch.set_rng_state(state)
    try:
        return op(*args, **kwargs)
    finally:
        torch.set_rng_state(current)


def state_bytes(device: Any) -> int:
    """Bytes of one saved generator state: the CPU Mersenne Twister's, or CUDA Philox's seed and offset."""
    import torch

    return 16 if device.type == "cuda" else torch.get_rng_state().numel()


def is_random(node: Any) -> bool:
    """An aten op that draws from the default generator (SDPA with dropout_p=0 draws nothing; an op given its own
    `generator=` is not replayed from the default one)."""
    import torch

    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded not in target.tags or "generator" in node.kwargs:
        return False
    return draws(node)


def draws(node: Any) -> bool:
    """A random-tagged op that really draws: every one but attention with `dropout_p=0`."""
    return _dropout_p(node) != 0.0


def _dropout_p(node: Any) -> float | None:
    """The `dropout_p` argument of an attention op (0.0 means it draws no random numbers), else None."""
    for i, arg in enumerate(node.target._schema.arguments):
        if arg.name == "dropout_p":
            if i < len(node.args):
                return float(node.args[i])
            if "dropout_p" in node.kwargs:
                return float(node.kwargs["dropout_p"])
            return float(arg.default_value) if arg.has_default_value() else None
    return None


def rewrite_random_ops(joint: Any) -> None:
    """Give every random op of the joint graph's forward its generator state (see the module docstring)."""
    import torch

    graph = joint.graph
    for node in list(graph.nodes):
        if node.meta.get("partitioner_tag") == "is_backward" or not is_random(node):
            continue
        like = next((a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)), None)
        if like is None:
            continue  # a random op with no tensor input (rand(shape)): its device is unknown here; left excluded
        value = like.meta["val"]
        with graph.inserting_before(node):
            state = graph.call_function(rng_state, (like,))
        state.meta = {key: node.meta[key] for key in ("custom", "stack_trace", "seq_nr") if key in node.meta}
        with value.fake_mode:
            state.meta["val"] = torch.empty(state_bytes(value.device), dtype=torch.uint8)
        node.args = (state, node.target, *node.args)
        node.target = run_random
    graph.lint()
    joint.recompile()


def replay_recomputed(bw_module: Any) -> None:
    """In the backward graph, the copies of random ops (recomputed) replay their saved state."""
    changed = False
    for node in bw_module.graph.nodes:
        if node.op == "call_function" and node.target is run_random:
            node.target = replay_random
            changed = True
    if changed:
        bw_module.recompile()


def wrapped_op(node: Any) -> Any:
    """The aten op a `run_random` node runs (else the node's own target)."""
    return node.args[1] if node.target is run_random else node.target
