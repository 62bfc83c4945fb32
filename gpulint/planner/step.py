"""The training step as the planner runs it: the user's model, batch and loss, in the planned dtype.

`make_step_fn(model, loss_fn)` is the one function that is traced (trace.py), compiled (backend.py) and measured
(measure.py): `(params and buffers, batch) -> scalar loss`. The batch is passed to the model as keyword arguments
(a dict), positional arguments (a tuple or list) or one argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpulint.planner.errors import PlanError

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def default_loss(output: Any) -> Any:
    """`output.loss` (HF style, or a dict's "loss"), else the sum of the output tensor."""
    import torch

    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is None and isinstance(output, torch.Tensor):
        loss = output.sum()
    if loss is None and isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        loss = output[0].sum()
    if loss is None:
        raise PlanError(f"plan.loss: the model returned {type(output).__name__} with no `.loss`; name a loss function")
    return loss


def split_batch(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A batch factory's result as (args, kwargs) for the model call."""
    if isinstance(batch, dict):
        return (), dict(batch)
    if isinstance(batch, (tuple, list)):
        return tuple(batch), {}
    return (batch,), {}


def cast_batch(batch: Any, dtype: Any) -> Any:
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(dtype) if batch.is_floating_point() else batch
    if isinstance(batch, dict):
        return {k: cast_batch(v, dtype) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(cast_batch(v, dtype) for v in batch)
    return batch


def make_step_fn(model: Any, loss_fn: Callable[..., Any] | None) -> Callable[[dict, Any], Any]:
    """The function that is traced and compiled: (params and buffers, batch) -> scalar loss."""
    import torch

    def step(state: dict[str, Any], batch: Any) -> Any:
        args, kwargs = split_batch(batch)
        # The step is only ever run to be traced into a graph: say so, as torch.compile does, so that libraries
        # (transformers' mask helpers) take their static, trace-friendly branches instead of data-dependent ones.
        compiling = torch.compiler._is_compiling_flag
        torch.compiler._is_compiling_flag = True
        try:
            with _identity_dropout():
                output = torch.func.functional_call(model, state, args, kwargs)
                loss = loss_fn(output, batch) if loss_fn is not None else default_loss(output)
        finally:
            torch.compiler._is_compiling_flag = compiling
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise PlanError(f"plan.loss: the loss must be a scalar tensor, got {shape}")
        return loss.reshape(())

    return step


@contextmanager
def _identity_dropout() -> Iterator[None]:
    """Dropout that drops nothing (p=0, or not training) returns its input, as eager mode does.

    Traced, it would become a copy (`aten.clone`) that eager never makes: the plan would then hold a tensor
    eager does not have and predict a copy's memory it never spends. Other dropouts trace as usual.
    """
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is F.dropout or func is torch.dropout:
                defaults = (0.5, True) if func is F.dropout else (None, None)
                p = args[1] if len(args) > 1 else kwargs.get("p", defaults[0])
                training = args[2] if len(args) > 2 else kwargs.get("training", kwargs.get("train", defaults[1]))
                if isinstance(args[0], torch.Tensor) and (p == 0 or training is False):
                    return args[0]
            return func(*args, **kwargs)

    with Mode():
        yield



def cast_module(model: Any, dtype: Any) -> None:
    """Cast floating parameters and buffers in place (Module.to() cannot swap fake tensors)."""
    import torch

    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None and p.is_floating_point() and p.dtype != dtype:
                module._parameters[name] = torch.nn.Parameter(p.detach().to(dtype), requires_grad=p.requires_grad)
        for name, b in list(module._buffers.items()):
            if b is not None and b.is_floating_point() and b.dtype != dtype:
                module._buffers[name] = b.to(dtype)
