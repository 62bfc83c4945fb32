"""The training step as the planner runs it: the user's model, batch and loss, in the planned dtype.

`UserStep` is what a config's `inputs:`, `loss:` and `step:` describe: `loss = step(model, batch)`. `make_step_fn`
turns it into the one function that is traced (trace.py), compiled (backend.py) and measured (measure.py):
`(params and buffers, batch) -> scalar loss`. The batch (or the part of it `inputs` names) is passed to the model as
keyword arguments (a dict), positional arguments (a tuple or list) or one argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    """A batch (or the part of it the model gets) as (args, kwargs) for the model call."""
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


Inputs = int | str | list[str] | None


def model_inputs(batch: Any, inputs: Inputs) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The model call's (args, kwargs): the whole batch (`inputs` None), one part of it (an index of a tuple batch
    or a key of a dict batch), or some keys of a dict batch as keyword arguments."""
    if inputs is None:
        return split_batch(batch)
    try:
        if isinstance(inputs, list):
            return (), {key: batch[key] for key in inputs}
        return split_batch(batch[inputs])
    except (KeyError, IndexError, TypeError):
        raise PlanError(f"plan.inputs: {inputs!r} does not select a part of the batch "
                        f"(a {type(batch).__name__}{_parts(batch)})") from None


def _parts(batch: Any) -> str:
    if isinstance(batch, dict):
        return f" with keys {', '.join(map(str, batch))}"
    if isinstance(batch, (tuple, list)):
        return f" of {len(batch)}"
    return ""


@dataclass
class UserStep:
    """What one training step computes from the model and a batch: `loss = step(model, batch)`.

    By default the model gets the whole batch (`inputs`) and the loss is `loss_fn(output, batch)`, else the output's
    `.loss`, else its sum. A user's own step function (`step_fn(model, batch) -> loss`) replaces both.
    """

    loss_fn: Callable[..., Any] | None = None
    step_fn: Callable[..., Any] | None = None
    inputs: Inputs = None

    def __call__(self, model: Any, batch: Any) -> Any:
        import torch

        if self.step_fn is not None:
            loss, what = self.step_fn(model, batch), "plan.step"
        else:
            args, kwargs = model_inputs(batch, self.inputs)
            output = model(*args, **kwargs)
            loss = self.loss_fn(output, batch) if self.loss_fn is not None else default_loss(output)
            what = "plan.loss"
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise PlanError(f"{what}: the loss must be a scalar tensor, got {shape}")
        return loss.reshape(())


def as_step(step: UserStep | Callable[..., Any] | None) -> UserStep:
    """A UserStep from a UserStep, a loss function `(output, batch) -> loss`, or None (the default loss)."""
    return step if isinstance(step, UserStep) else UserStep(loss_fn=step)


def make_step_fn(model: Any, step: UserStep | Callable[..., Any] | None,
                 compiling: bool = True) -> Callable[[dict, Any], Any]:
    """The function that is traced and compiled: (params and buffers, batch) -> scalar loss.

    `compiling`: run the step as torch.compile runs it (the compiled form): libraries see `is_compiling()` and take
    their compile branches, and the user's own `torch.utils.checkpoint` calls run their function plainly (the
    compiled form's partitioner decides what is saved). Without it the step runs the program eager mode runs.
    """
    import torch

    holder = _step_module(model, as_step(step))

    def run(state: dict[str, Any], batch: Any) -> Any:
        prefixed = {f"model.{name}": value for name, value in state.items()}
        with _compiling(compiling), _identity_dropout():
            return torch.func.functional_call(holder, prefixed, (batch,))

    return run


def _step_module(model: Any, step: UserStep) -> Any:
    """A module holding the model whose forward is the user's step, so that `functional_call` swaps the model's
    parameters for the traced ones however the step calls it (the root, submodules, several times)."""
    import torch

    class StepModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, batch: Any) -> Any:
            return step(self.model, batch)

    return StepModule()


@contextmanager
def _compiling(enabled: bool) -> Iterator[None]:
    """Say the step is being compiled (as torch.compile does), so that libraries take the branches they take under
    torch.compile (static, trace-friendly), and run `torch.utils.checkpoint` regions plainly. The compiled form only
    ever runs the step to trace it."""
    import torch
    from torch.utils import checkpoint

    if not enabled:
        yield
        return
    flag = torch.compiler._is_compiling_flag
    reentrant, non_reentrant = checkpoint.CheckpointFunction, checkpoint._checkpoint_without_reentrant_generator
    torch.compiler._is_compiling_flag = True
    checkpoint.CheckpointFunction = _PlainCheckpointFunction
    checkpoint._checkpoint_without_reentrant_generator = _plain_checkpoint_generator
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = flag
        checkpoint.CheckpointFunction = reentrant
        checkpoint._checkpoint_without_reentrant_generator = non_reentrant


class _PlainCheckpointFunction:
    """Stands in for torch's reentrant CheckpointFunction while the compiled form is traced: runs the function."""

    @staticmethod
    def apply(function: Callable[..., Any], _preserve_rng_state: bool, *args: Any) -> Any:
        return function(*args)


def _plain_checkpoint_generator(*_args: Any, **_kwargs: Any) -> Iterator[None]:
    """Stands in for torch's non-reentrant checkpoint context while the compiled form is traced: does nothing."""
    yield


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
