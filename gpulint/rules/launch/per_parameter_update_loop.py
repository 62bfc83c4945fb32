"""GPL501 per-parameter-update-loop."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.names import last_name, params_of, root_name, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import innermost
from gpulint.project.vocab import name_parts
from gpulint.rules.common import is_false
from gpulint.rules.examples import training_script
from gpulint.rules.launch.helpers import WhereItRuns
from gpulint.rules.per_tensor.helpers import (
    PARAM_FOR_STATEMENT,
    PARAM_TRIGGERS,
    UPDATE_WORDS,
    binds_tensor_dict,
    has_loop,
    scan_model_tensor_for,
)

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# An assignment of what `binds_tensor_dict` accepts: `sd = model.state_dict()`, `p = dict(model.named_parameters())`.
_TENSOR_DICT = re.compile(
    r"(?<![=!<>])=(?!=)[^\n]{0,100}?(?:(?<!\w)state_dict\(|(?<!\w)(?:Ordered)?[dD]ict\([^)]{0,200}?"
    r"(?:param|grad|state_dict|buffers))",
    re.IGNORECASE,
)


# An EMA's update call (`model_ema.update(model)`, `self.ema_model.update(net)`): the receiver's name says EMA.
_EMA_NAME = re.compile(r"ema", re.IGNORECASE)
_EMA_UPDATE = re.compile(r"ema\w*\.(?:update|step)\(", re.IGNORECASE)
# The method of each library EMA class that loops over the tensors (`FileFacts.library_objects` kinds).
_LIBRARY_EMA_UPDATES = {"timm_ema": "update", "diffusers_ema": "step"}


class PerParameterUpdateLoop(WhereItRuns):
    code = "GPL501"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "per-parameter-update-loop"
    message = (
        "a Python loop does in-place arithmetic on each parameter: one or more kernel launches per tensor every step; "
        "use `torch._foreach_*` (e.g. `_foreach_lerp_` for EMA) or a fused/foreach optimizer"
    )
    message_library = (
        "timm's `{call}` loops over every tensor of the model in Python: several kernel launches per tensor every "
        "step; timm's `ModelEmaV3` updates them with `torch._foreach_*` calls"
    )
    message_diffusers = (
        "diffusers' `{call}` of an `EMAModel` built without `foreach=True` loops over every parameter in Python: "
        "several kernel launches per tensor every step; build it with `foreach=True`"
    )
    triggers = PARAM_TRIGGERS
    requires = (UPDATE_WORDS,)  # a reported loop updates its tensors

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        # `model_ema.update(model)` where another file built `model_ema = ModelEmaV2(model)`
        return any(kind in _LIBRARY_EMA_UPDATES for _, kind in facts.library_objects)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # The loop iterates a model's tensors, or a dict of them bound in the same function (`binds_tensor_dict`); or
        # the function updates an EMA (`model_ema.update(model)`, `ema_unet.step(unet.parameters())`, of a library).
        return super().may_report_in(code, name, class_name) and (
            has_loop(PARAM_FOR_STATEMENT, code) or _TENSOR_DICT.search(code) is not None
        ) or _EMA_UPDATE.search(code) is not None
    docs = RuleDocs(
        what_it_does="Flags `for` loops over `parameters()`, `buffers()`, parameter lists, `group[\"params\"]`, "
        "`zip(ema.parameters(), model.parameters())`, `state_dict()` values or the keys of a "
        "`dict(model.named_parameters())` (or of another dict, indexing such a dict by its keys: `for key, v in "
        "self.ema_state.items(): self.ema_state[key].mul_(r).add_(source[key])`) whose body updates each tensor, "
        "or its counterpart found by the parameter's name (`ema[name].mul_(d)`, `self.shadow[name].lerp_(p, w)`, "
        "or bound first: `ema_val = self.state[name]`; also over a project method walking the model's tensors by name, "
        "`self._get_model_state_iterator(model)`): in-place arithmetic (`add_`, `mul_`, "
        "`lerp_`, `addcdiv_`, `copy_`, `p.grad.zero_()`, `torch.nan_to_num(g, out=g)`), `p.data = ...`, or per-parameter "
        "state stored in a dict. Only per-step shapes count: the loop reads gradients, blends one set of tensors into "
        "another (EMA), keeps per-parameter state, or sits in a function named like an update (`update`, `step`, "
        "`ema`, `accumulate`) or one the training step reaches through calls gpulint resolves (a gradient-clipping "
        "helper's `for g in grads: g.mul_(coeff)`). Hand-written optimizers, EMA/teacher updates, gradient scaling "
        "and manual zeroing are the usual cases. In a function that holds the training loop, only loops inside it "
        "count. A loop in the `else` of an `if` whose body makes `torch._foreach_*` calls is the fallback of the "
        "foreach form and is not flagged, unless the switch is an attribute the constructor defaults to `False` "
        "(`EMAModel(..., foreach=False)`: the loop is what runs). Also flags `model_ema.update(model)` of timm's "
        "`ModelEma` / `ModelEmaV2`, and `ema_unet.step(unet.parameters())` of diffusers' `EMAModel` built without "
        "`foreach=True`, which run such a loop inside the library.",
        why_slow="Kernel launch count: each in-place op on each tensor is its own launch. An EMA update of a 300-tensor "
        "model with `mul_` + `add_` is 600 launches per step, each paying Python and dispatcher time on the CPU for a "
        "tiny amount of GPU work, so the GPU waits on the Python loop. The `torch._foreach_*` ops and `foreach=True`/`fused=True` "
        "optimizers process whole tensor lists in a few multi-tensor kernels.",
        example="with torch.no_grad():\n    for ema_p, p in zip(ema.parameters(), model.parameters()):\n"
        "        ema_p.mul_(decay).add_(p, alpha=1 - decay)",
        use_instead="with torch.no_grad():\n    ema_params = list(ema.parameters())\n"
        "    torch._foreach_lerp_(ema_params, list(model.parameters()), 1 - decay)\n"
        "# hand-written SGD: torch.optim.SGD(params, lr=lr, foreach=True) or torch._foreach_add_(params, grads, alpha=-lr)",
        fix_safety="No automatic fix: the loop body often mixes the update with conditions per tensor (frozen layers, "
        "buffers vs parameters) that a rewrite must keep.",
        false_positives="Weight loading or averaging that runs once but sits in a helper named like an update, and "
        "CPU-only toy models trained from a module that names no device (no launches to save; a training script that "
        "names none is skipped). Skipped: functions named like `init`/`setup`/`checkpoint`, loops "
        "that scale weights by a constant (initialisation), loops that only copy tensors unchanged outside update "
        "functions and functions the step surely reaches (DARTS's `_restore_weights`, after each virtual step), "
        "loops that sort tensors into lists for a `torch._foreach_*` call, loops doing matrix products per "
        "tensor (Muon's Newton-Schulz iterations: compute-bound, with no foreach form), loops over a loss's own parameters "
        "(`center_criterion.parameters()`: a tensor or two), and loops under a logging gate.",
    )
    valid = (
        # diffusers' EMA built for the foreach form
        training_script("ema_unet.step(model.parameters())",
                        header="from diffusers.training_utils import EMAModel\n\n"
                        "ema_unet = EMAModel(torch.nn.Linear(2, 2).parameters(), foreach=True)"),
        # schedule-free's optimizers: the loop is the fallback for `foreach=False`; the default takes the foreach form
        ("import torch\n\n\nclass Lookahead(torch.optim.Optimizer):\n    def step(self):\n"
         "        for group in self.param_groups:\n            if group[\"foreach\"]:\n"
         "                params = [p for p in group[\"params\"] if p.grad is not None]\n"
         "                torch._foreach_add_(params, [p.grad for p in params], alpha=-0.1)\n"
         "            else:\n                for p in group[\"params\"]:\n"
         "                    p.add_(p.grad, alpha=-0.1)\n"),
        training_script("with torch.no_grad():\n"
                        "    torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.001)"),
        ("import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        for p in self.parameters():\n            p.data.mul_(0.5)\n"),
        training_script("for p in model.parameters():\n    p.grad = None"),
        # a center loss's one `centers` tensor, its gradient rescaled every step: nothing for a foreach call to batch
        training_script("for param in center_criterion.parameters():\n    param.grad.data *= 2.0",
                        header="center_criterion = torch.nn.Module()"),
        training_script("for p in model.parameters():\n    p.grad = p.grad.detach().view_as(p)"),
        training_script("grads = []\nfor p in model.parameters():\n    if p.grad is not None:\n"
                        "        grads.append(p.grad)\n"
                        "torch._foreach_mul_(grads, 0.5)"),
        ("import torch\n\ndef load_weights(dst, src):\n    for a, b in zip(dst.parameters(), src.parameters()):\n"
         "        a.copy_(b)\n"),
        training_script("for group in optimizer.param_groups:\n    group[\"lr\"] = group[\"lr\"] * 0.99"),
        ("import torch\n\ndef scale_module(module, scale):\n    for p in module.parameters():\n"
         "        p.detach().mul_(scale)\n    return module\n"),
        ("import torch\n\nclass Shadow:\n    @torch.no_grad()\n    def update(self, model):\n"
         "        names = [name for name, _ in model.named_parameters()]\n"
         "        mine = [self.shadow[name] for name in names]\n"
         "        torch._foreach_lerp_(mine, [p for _, p in model.named_parameters()], 1 - self.decay)\n"),
    )
    invalid = (
        # diffusers' EMAModel: the foreach form is opt-in (`foreach=False`), so the loop is what runs
        Invalid("import torch\n\n\nclass EMAModel:\n    def __init__(self, parameters, decay=0.999, foreach=False):\n"
                "        self.shadow = [p.clone().detach() for p in parameters]\n        self.decay = decay\n"
                "        self.foreach = foreach\n\n    @torch.no_grad()\n    def step(self, parameters):\n"
                "        if self.foreach:\n            torch._foreach_lerp_(self.shadow, list(parameters), 1 - self.decay)\n"
                "        else:\n            for s_param, param in zip(self.shadow, parameters):\n"
                "                s_param.sub_((1 - self.decay) * (s_param - param))\n"),
        Invalid(training_script("with torch.no_grad():\n"
                                "    for ema_p, p in zip(ema.parameters(), model.parameters()):\n"
                                "        ema_p.mul_(0.999).add_(p, alpha=0.001)")),
        Invalid(training_script("with torch.no_grad():\n    for p in model.parameters():\n"
                                "        p.data -= 0.01 * p.grad")),
        Invalid(
            "import torch\n\nclass ModelEma:\n    def update(self, model, decay):\n        with torch.no_grad():\n"
            "            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):\n"
            "                ema_v.copy_(ema_v * decay + (1.0 - decay) * model_v)\n"
        ),
        Invalid(training_script("for p in model.parameters():\n    if p.grad is not None:\n        p.grad.zero_()")),
        Invalid(
            "import torch\n\nclass Shadow:\n    @torch.no_grad()\n    def update(self, model):\n"
            "        for name, p in model.named_parameters():\n"
            "            self.shadow[name].mul_(self.decay).add_(p, alpha=1 - self.decay)\n"
        ),
        Invalid(
            "import torch\n\n@torch.no_grad()\ndef average_into(averaged, model, decay):\n"
            "    current = dict(model.named_parameters())\n    target = dict(averaged.named_parameters())\n"
            "    for name, p in current.items():\n        target[name].lerp_(p, 1 - decay)\n"
        ),
        Invalid(training_script("model_ema.update(model)",
                                header="from timm.utils import ModelEmaV2\n\nmodel_ema = ModelEmaV2(torch.nn.Linear(2, 2))")),
        # diffusers' training scripts with `--use_ema`: a copy of the model, then the EMA of its parameters
        Invalid(training_script("ema_unet.step(model.parameters())",
                                header="from diffusers.training_utils import EMAModel\n\n"
                                "ema_unet = torch.nn.Linear(2, 2)\n"
                                "ema_unet = EMAModel(ema_unet.parameters(), decay=0.999)")),
        # ResShift's EMA: its own dict of copies walked key by key, each blended with the model's tensor of that key
        Invalid(
            "import torch\n\n\nclass Trainer:\n    def update_ema_model(self, rate):\n"
            "        source_state = self.model.state_dict()\n"
            "        for key, value in self.ema_state.items():\n"
            "            self.ema_state[key].mul_(rate).add_(source_state[key].detach(), alpha=1 - rate)\n"
        ),
        # DARTS's unrolled step: every step copies each weight back from its backup, in a helper the loop calls
        Invalid(
            "import torch\n\n\ndef restore_weights(model, backup):\n    with torch.no_grad():\n"
            "        for p, b in zip(model.parameters(), backup):\n            p.copy_(b)\n\n\n"
            "def train(model, loader, optimizer):\n    for x in loader:\n"
            "        backup = [p.detach().clone() for p in model.parameters()]\n"
            "        model(x.cuda(non_blocking=True)).mean().backward()\n"
            "        restore_weights(model, backup)\n        optimizer.step()\n"
        ),
        # detectron2-style EMA (nanodet, d2go): a project method walks the model's tensors by name, the EMA's copy of
        # each is looked up by it and updated in place
        Invalid(
            "import itertools\nimport torch\n\n\nclass EMA:\n    def __init__(self, model):\n"
            "        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}\n\n"
            "    def _get_model_state_iterator(self, model):\n"
            "        return itertools.chain(model.named_parameters(), model.named_buffers())\n\n"
            "    def update(self, model, decay):\n        with torch.no_grad():\n"
            "            for name, val in self._get_model_state_iterator(model):\n"
            "                ema_val = self.state[name]\n"
            "                ema_val.copy_(ema_val * (1 - decay) + val * decay)\n\n\n"
            "def train(model, loader, optimizer):\n    ema = EMA(model)\n    for x in loader:\n"
            "        model(x.cuda(non_blocking=True)).mean().backward()\n        optimizer.step()\n"
            "        ema.update(model, 0.999)\n"
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._tensor_dicts: dict[int, set[str]] = {}  # per function: names bound to dicts of model tensors

    def visit_Assign(self, node: cst.Assign) -> None:
        if binds_tensor_dict(node.value):
            names = self._tensor_dicts.setdefault(id(self.context.enclosing_function()), set())
            for target in node.targets:
                names |= target_names(target.target)

    def visit_Call(self, node: cst.Call) -> None:
        self._track_call(node)
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("update", "step") and node.args):
            return
        receiver = last_name(func.value) or ""
        kind = self.context.facts.library_kind(receiver) if _EMA_NAME.search(receiver) else ""
        if _LIBRARY_EMA_UPDATES.get(kind) != func.attr.value:
            return
        message = self.message_library if kind == "timm_ema" else self.message_diffusers
        self.report(node, message.format(call=f"{receiver}.{func.attr.value}()"), when="per_step")

    def visit_For(self, node: cst.For) -> None:
        self._track_for(node)
        known = frozenset(self._tensor_dicts.get(id(self.context.enclosing_function()), ()))
        scan = scan_model_tensor_for(node, self.context, known)
        if scan is None or scan.kind != "arithmetic" or self.context.gated_here(switches_gate=False) \
                or self._foreach_fallback():
            return
        # A per-step update reads gradients, blends two sets of tensors (EMA: `zip(ema..., model...)`), keeps state
        # per parameter, or lives in an update/step function or one the step surely reaches (NeMo-RL's gradient
        # clipping, `for g in grads: g.mul_(coeff)`). Scaling weights by a constant (`scale_module`) is
        # initialisation.
        zipped = isinstance(node.iter, cst.Call) and last_name(node.iter.func) == "zip" and len(node.iter.args) >= 2
        if (scan.touches_grad or scan.blends or zipped or scan.stores_state or scan.in_update_function
                or scan.surely_per_step) \
                and not _multiplies_matrices(self.context.module.code_for_node(node.body)) \
                and not _loss_parameters(node.iter):
            self._report_where_it_runs(node.iter)


    def _foreach_fallback(self) -> bool:
        """In the `else` of an `if` whose body makes `torch._foreach_*` calls (schedule-free's optimizers: `if
        group['foreach']: torch._foreach_lerp_(y, z, ...)` `else: for p in ...`): the loop is the fallback for when
        the foreach form is switched off, and the code already has the fix."""
        stack = self.context.ancestors
        for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
            if isinstance(parent, cst.If) and child is parent.orelse and "_foreach_" in \
                    self.context.module.code_for_node(parent.body):
                return not self._off_by_default(parent.test)
        return False

    def _off_by_default(self, test: cst.BaseExpression) -> bool:
        """`if self.foreach:` where the class's constructor takes `foreach=False` (diffusers' `EMAModel`): the loop is
        what runs unless the user opts in."""
        attribute = test.attr.value if isinstance(test, cst.Attribute) and root_name(test) == "self" else None
        cls = innermost(self.context.ancestors, cst.ClassDef)
        if attribute is None or cls is None:
            return False
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                return any(param.name.value == attribute and param.default is not None and is_false(param.default)
                           for param in params_of(statement))
        return False


def _loss_parameters(iterable: cst.BaseExpression) -> bool:
    """`center_criterion.parameters()`: the parameters of a loss (a center loss's one `centers` tensor), a tensor or
    two, with nothing for a foreach call to batch."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value in ("parameters", "named_parameters")):
        return False
    return bool(name_parts(last_name(iterable.func.value) or "") & {"criterion", "loss"})


# Muon's Newton-Schulz iterations, Shampoo's roots, GaLore's projections: matrix products per weight, which dominate
# the step's time; no `torch._foreach_*` call batches them.
_MATRIX_WORK = re.compile(r"@|(?:matmul|mm|bmm|einsum|svd|qr|eigh|linalg)|newton|zeropower|orthogonali[sz]", re.I)


def _multiplies_matrices(code: str) -> bool:
    """Does a loop body do matrix products per tensor (not elementwise updates a foreach call would batch)?"""
    return bool(_MATRIX_WORK.search(code))
