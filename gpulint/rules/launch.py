"""GPL5xx: launch overhead — many small kernels (or per-step setup) where a batched, fused or one-time form exists."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.context import is_cold_function_name
from gpulint.linter.names import last_name, name_parts, target_names
from gpulint.linter.rule import Invalid, Replace, Report, Rule, RuleDocs
from gpulint.rules.common import is_false, is_true, keyword_arg, new_keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.per_tensor import (
    PARAM_FOR_STATEMENT,
    PARAM_TRIGGERS,
    UPDATE_WORDS,
    binds_tensor_dict,
    has_loop,
    in_test_error_or_one_off_code,
    scan_model_tensor_for,
)

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# Calls that mark a loop as the training loop (`loss.backward()`, `optimizer.step()`, `optimizer.zero_grad()`).
STEP_CALLS = frozenset({"backward", "zero_grad", "step"})
# An assignment of what `binds_tensor_dict` accepts: `sd = model.state_dict()`, `p = dict(model.named_parameters())`.
_TENSOR_DICT = re.compile(
    r"(?<![=!<>])=(?!=)[^\n]{0,100}?(?:(?<!\w)state_dict\(|(?<!\w)(?:Ordered)?[dD]ict\([^)]{0,200}?"
    r"(?:param|grad|state_dict|buffers))",
    re.IGNORECASE,
)


def one_time_branch(context: FileContext) -> bool:
    """Under `if x == N:` or `if x is None:` in the same function: a switch (`if step == warmup:`), a lazy build or
    a first-step state init (`if len(state) == 0:`), not per step."""
    chain = context.ancestors
    for index in range(len(chain) - 2, -1, -1):
        node = chain[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.If) and chain[index + 1] is node.body and _tests_one_time(node.test):
            return True
    return False


def _tests_one_time(test: cst.BaseExpression) -> bool:
    """`x == N`, `x is None`, or one of them and-ed with other conditions (`n_iter == 0 and state_dict`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_one_time(test.left) or _tests_one_time(test.right)
    return isinstance(test, cst.Comparison) and any(isinstance(t.operator, (cst.Equal, cst.Is)) for t in test.comparisons)


def _singular(name: str) -> str:
    return "_".join(part.removesuffix("s") for part in name.split("_"))


class _WhereItRuns(Rule):
    """Decides, per function, when a finding counts. Code in a function that holds the training loop counts only
    inside that loop ("per_step": the setup before it runs once); code at module level likewise; code in a helper
    without a training loop (a forward-like method, an EMA `update`, a per-step utility in another module) counts
    wherever it is not known to be cold ("training"). Findings in a function wait for the end of the function, where
    that is known."""

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._pending: dict[int, list[Report]] = {}
        self._training_functions: set[int] = set()

    def _track_call(self, node: cst.Call) -> None:
        if last_name(node.func) in STEP_CALLS and isinstance(node.func, cst.Attribute) and self.context.innermost_loop():
            self._note_training_function()

    def _track_for(self, node: cst.For) -> None:
        iterable = node.iter
        while isinstance(iterable, cst.Call) and iterable.args and last_name(iterable.func) in ("enumerate", "tqdm", "iter"):
            iterable = iterable.args[0].value
        name = last_name(iterable.func if isinstance(iterable, cst.Call) else iterable) or ""
        if "loader" in name.lower():
            self._note_training_function()

    def _note_training_function(self) -> None:
        function = self.context.enclosing_function()
        if function is not None:
            self._training_functions.add(id(function))

    def _report_where_it_runs(
        self, node: cst.CSTNode, message: str | None = None, fix: Sequence[Replace] = (), unsafe: bool = False
    ) -> None:
        function = self.context.enclosing_function()
        if in_test_error_or_one_off_code(self.context):
            return
        if function is None:
            self.report(node, message, when="per_step", fix=fix, unsafe_fix=unsafe)
        elif "forward" in name_parts(function.name.value):
            self.report(node, message, when="training", fix=fix, unsafe_fix=unsafe)
        elif is_cold_function_name(_singular(function.name.value)):
            return  # `print_samples`, `save_checkpoints`: the plural of a cold name is cold too
        else:
            snapshot = self.context.ancestors_snapshot()
            report = Report(self, node, message or self.message, "training", snapshot, tuple(fix), unsafe)
            self._pending.setdefault(id(function), []).append(report)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        pending = self._pending.pop(id(original_node), ())
        when = "per_step" if id(original_node) in self._training_functions else "training"
        for report in pending:
            self.context.add_report(
                Report(self, report.node, report.message, when, report.ancestors, report.fix, report.unsafe_fix)
            )


class PerParameterUpdateLoop(_WhereItRuns):
    code = "GPL501"
    name = "per-parameter-update-loop"
    message = (
        "a Python loop does in-place arithmetic on each parameter: one or more kernel launches per tensor every step; "
        "use `torch._foreach_*` (e.g. `_foreach_lerp_` for EMA) or a fused/foreach optimizer"
    )
    triggers = PARAM_TRIGGERS
    requires = (UPDATE_WORDS,)  # a reported loop updates its tensors

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # The loop iterates a model's tensors, or a dict of them bound in the same function (`binds_tensor_dict`).
        return super().may_report_in(code, name, class_name) and (
            has_loop(PARAM_FOR_STATEMENT, code) or _TENSOR_DICT.search(code) is not None
        )
    docs = RuleDocs(
        what_it_does="Flags `for` loops over `parameters()`, `buffers()`, parameter lists, `group[\"params\"]`, "
        "`zip(ema.parameters(), model.parameters())`, `state_dict()` values or the keys of a "
        "`dict(model.named_parameters())` whose body updates each tensor: in-place arithmetic (`add_`, `mul_`, "
        "`lerp_`, `addcdiv_`, `copy_`, `p.grad.zero_()`, `torch.nan_to_num(g, out=g)`), `p.data = ...`, or per-parameter "
        "state stored in a dict. Only per-step shapes count: the loop reads gradients, blends one set of tensors into "
        "another (EMA), keeps per-parameter state, or sits in a function named like an update (`update`, `step`, "
        "`ema`, `accumulate`). Hand-written optimizers, EMA/teacher updates, gradient scaling and manual zeroing are "
        "the usual cases. In a function that holds the training loop, only loops inside it count.",
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
        "CPU-only toy models (no launches to save). Skipped: functions named like `init`/`setup`/`checkpoint`, loops "
        "that scale weights by a constant (initialisation), loops that only copy tensors unchanged outside update "
        "functions, loops that sort tensors into lists for a `torch._foreach_*` call, and loops under a logging gate.",
    )
    valid = (
        training_script("with torch.no_grad():\n"
                "    torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.001)"),
        ("import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        for p in self.parameters():\n            p.data.mul_(0.5)\n"),
        training_script("for p in model.parameters():\n    p.grad = None"),
        training_script("grads = []\nfor p in model.parameters():\n    if p.grad is not None:\n        grads.append(p.grad)\n"
                "torch._foreach_mul_(grads, 0.5)"),
        ("import torch\n\ndef load_weights(dst, src):\n    for a, b in zip(dst.parameters(), src.parameters()):\n"
         "        a.copy_(b)\n"),
        training_script("for group in optimizer.param_groups:\n    group[\"lr\"] = group[\"lr\"] * 0.99"),
        ("import torch\n\ndef scale_module(module, scale):\n    for p in module.parameters():\n"
         "        p.detach().mul_(scale)\n    return module\n"),
    )
    invalid = (
        Invalid(training_script("with torch.no_grad():\n    for ema_p, p in zip(ema.parameters(), model.parameters()):\n"
                        "        ema_p.mul_(0.999).add_(p, alpha=0.001)")),
        Invalid(training_script("with torch.no_grad():\n    for p in model.parameters():\n        p.data -= 0.01 * p.grad")),
        Invalid(
            "import torch\n\nclass ModelEma:\n    def update(self, model, decay):\n        with torch.no_grad():\n"
            "            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):\n"
            "                ema_v.copy_(ema_v * decay + (1.0 - decay) * model_v)\n"
        ),
        Invalid(training_script("for p in model.parameters():\n    if p.grad is not None:\n        p.grad.zero_()")),
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

    def visit_For(self, node: cst.For) -> None:
        self._track_for(node)
        known = frozenset(self._tensor_dicts.get(id(self.context.enclosing_function()), ()))
        scan = scan_model_tensor_for(node, self.context, known)
        if scan is None or scan.kind != "arithmetic" or self.context.gated_here(switches_gate=False):
            return
        # A per-step update reads gradients, blends two sets of tensors (EMA: `zip(ema..., model...)`), keeps state
        # per parameter, or lives in an update/step function. Scaling weights by a constant (`scale_module`) is
        # initialisation.
        zipped = isinstance(node.iter, cst.Call) and last_name(node.iter.func) == "zip" and len(node.iter.args) >= 2
        if scan.touches_grad or scan.blends or zipped or scan.stores_state or scan.in_update_function:
            self._report_where_it_runs(node.iter)


def _without_arg(call: cst.Call, removed: cst.Arg) -> cst.Call:
    """`call` without the argument `removed`, keeping the commas and spacing of the others valid."""
    args = [arg for arg in call.args if arg is not removed]
    if args and call.args[-1] is removed:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


class ForeachDisabled(Rule):
    code = "GPL502"
    name = "foreach-disabled"
    message = "`foreach=False` makes the optimizer (or clipping) launch kernels one tensor at a time"
    triggers = ("foreach=False", "foreach = False")
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `foreach=False` passed to an optimizer, `clip_grad_norm_` or any other call that accepts "
        "it.",
        why_slow="Kernel launch count: the single-tensor path runs each elementwise step of the update (Adam: about "
        "ten ops) as its own launch for every parameter tensor. The default (`foreach=None`) picks the multi-tensor "
        "path on CUDA, which applies each op to every tensor in a few launches.",
        example="optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)",
        use_instead="optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)  # or fused=True on CUDA",
        fix_safety="Unsafe: the fix removes the argument. The multi-tensor path holds intermediate results for a whole "
        "group of tensors at once, so peak memory grows by up to about one copy of the parameters (the usual reason "
        "for `foreach=False`), and results can differ from the per-tensor path in the last bits.",
        false_positives="Memory-bound runs where `foreach=False` is set on purpose to cut the optimizer's peak: add "
        "`# noqa: GPL502`.",
    )
    valid = (
        "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n",
        "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True)\n",
    )
    invalid = (
        Invalid(
            "import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)\n",
            fixed="import torch\n\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n",
        ),
        Invalid(
            training_script("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)"),
            fixed=training_script("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        ),
        Invalid(
            "import torch\n\nopt = torch.optim.SGD(\n    model.parameters(),\n    foreach=False,\n    lr=0.1,\n)\n",
            fixed="import torch\n\nopt = torch.optim.SGD(\n    model.parameters(),\n    lr=0.1,\n)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        arg = keyword_arg(node, "foreach")
        if arg is not None and is_false(arg.value) and not self.context.in_tests:
            self.report(arg, when="always", fix=[Replace(node, _without_arg(node, arg))], unsafe_fix=True)


def _zeroing_step(zero_grad: str) -> str:
    """A training script (as `training_script`'s, for the same harnesses) that zeroes the gradients with `zero_grad` at
    the start of each step."""
    return (
        "import torch\nimport torch.nn.functional as F\n\n\ndef train(model, loader, optimizer, device):\n"
        "    for step, (x, y) in enumerate(loader):\n"
        f"        {zero_grad}\n        loss = F.cross_entropy(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
    )


class ZeroGradKeepsTensors(Rule):
    code = "GPL503"
    name = "zero-grad-set-to-none-false"
    message = "`zero_grad(set_to_none=False)` launches a memset per gradient every step; the default frees them instead"
    triggers = ("zero_grad(",)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `optimizer.zero_grad(set_to_none=False)` and `model.zero_grad(False)`.",
        why_slow="Kernel launch count and memory traffic: zeroing keeps every gradient allocated and launches one "
        "memset (or `zero_` kernel) per parameter tensor every step, then the backward pass reads the zeros back to "
        "accumulate into them. `set_to_none=True` (the default since PyTorch 2.0) launches nothing and lets backward "
        "write the first gradient directly.",
        example="optimizer.zero_grad(set_to_none=False)",
        use_instead="optimizer.zero_grad()  # set_to_none=True",
        fix_safety="Unsafe: after the fix, a parameter that gets no gradient in the next backward has `p.grad is None` "
        "instead of zeros, so optimizers skip it (no weight decay or momentum step for it that iteration), and code "
        "that reads or updates `p.grad` in place (`p.grad.add_(...)`) before backward fails.",
        false_positives="Code that accumulates into `p.grad` by hand before the backward pass needs the zeros: add "
        "`# noqa: GPL503`.",
    )
    valid = (
        _zeroing_step("optimizer.zero_grad(set_to_none=True)"),
        _zeroing_step("model.zero_grad()"),
        "import torch\n\ndef evaluate(model):\n    model.zero_grad(set_to_none=False)\n",
    )
    invalid = (
        Invalid(
            _zeroing_step("optimizer.zero_grad(set_to_none=False)"),
            fixed=_zeroing_step("optimizer.zero_grad(set_to_none=True)"),
        ),
        Invalid(_zeroing_step("model.zero_grad(False)"), fixed=_zeroing_step("model.zero_grad(True)")),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if last_name(node.func) != "zero_grad" or not isinstance(node.func, cst.Attribute) or self.context.in_tests:
            return
        arg = keyword_arg(node, "set_to_none")
        if arg is None and node.args and node.args[0].keyword is None:
            arg = node.args[0]
        if arg is not None and is_false(arg.value):
            self.report(node, when="training", fix=[Replace(arg.value, "True")], unsafe_fix=True)


# Factories whose values do not depend on the device (zeros on the CPU are zeros on the GPU).
DETERMINISTIC_FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "arange", "eye", "linspace", "logspace", "tril_indices", "triu_indices"}
)
# Random factories draw from a different generator on each device: moving the creation changes the numbers.
RANDOM_FACTORIES = frozenset({"rand", "randn", "randint", "randperm", "bernoulli", "normal"})
DTYPE_NAMES = frozenset(
    {"float", "float16", "float32", "float64", "bfloat16", "half", "double", "long", "int", "int8", "int16", "int32",
     "int64", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble", "short"}
)
# Legacy typed constructors allocate on the CPU: `torch.LongTensor(n)`.
LEGACY_CONSTRUCTORS = frozenset(
    {"FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
     "ByteTensor", "CharTensor", "BoolTensor", "Tensor"}
)
# Reshapes and casts between a factory and the move: `torch.arange(n).view(-1, 1).to(device)`.
RESHAPES = frozenset(
    {"view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "flatten", "t", "transpose", "permute",
     "contiguous", "long", "float", "int", "half", "bool", "double", "tril", "triu"}
)
# In-place fills applied right after creation: `torch.LongTensor(n).random_(8)`.
FILLS = frozenset({"random_", "uniform_", "normal_", "fill_", "zero_", "bernoulli_", "exponential_", "geometric_"})
CREATION_WORDS = tuple(
    f"{name}(" for name in sorted(DETERMINISTIC_FACTORIES | RANDOM_FACTORIES | LEGACY_CONSTRUCTORS)
) + ("random.",)
NUMPY_RANDOM_MESSAGE = (
    "random numbers drawn with numpy on the CPU and copied to the device; draw them on the device with "
    "`torch.randn(..., device=...)` / `torch.rand(..., device=...)`"
)
_DEVICE_WORD = re.compile(r"(device|dev$|^dev|rank|gpu|cuda)", re.IGNORECASE)


class CreatedOnCpuThenMoved(_WhereItRuns):
    code = "GPL504"
    name = "tensor-created-then-moved"
    message = (
        "the tensor is created on the CPU and then copied to the device; pass `device=` to the factory so it is "
        "created there"
    )
    triggers = (".cuda(", ".to(", ".type_as(", "random.")
    # What is moved was made here by a torch factory (`torch.zeros(`, `torch.LongTensor(n).random_(`), or by numpy's
    # random module.
    requires = (CREATION_WORDS,)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `torch.zeros(...).cuda()`, `torch.arange(n).view(-1, 1).to(device)`, "
        "`(torch.arange(n) + offset).cuda()`, `torch.LongTensor(n).random_(k).to(device)` and the like (factories "
        "`zeros`, `ones`, `empty`, `full`, `arange`, `eye`, `linspace`, `rand*`), and numpy random numbers wrapped in a "
        "device tensor type (`Tensor(np.random.normal(...))` with `Tensor = torch.cuda.FloatTensor`). It counts code "
        "inside the training loop, in a `forward`, and in helpers that hold no training loop; the setup before a "
        "training loop is not flagged.",
        why_slow="Host-device round trip: the tensor is allocated and filled by the CPU, then copied from pageable "
        "memory with a host-to-device transfer that blocks the Python thread until the copy is done, and the CPU "
        "buffer is thrown away. With `device=` the GPU allocates it from its cache and fills it with one kernel, "
        "asynchronously.",
        example="mask = torch.ones(seq_len, seq_len).tril().cuda()\npos = torch.arange(t).to(x.device)",
        use_instead="pos = torch.arange(t, device=x.device)",
        fix_safety="Safe for deterministic factories (`zeros`, `ones`, `full`, `arange`, `eye`, `linspace`, `empty`): "
        "the fix adds `device=` and removes the move, values are identical. Unsafe for random factories (`rand`, "
        "`randn`, `randint`, `randperm`): the numbers then come from the device's generator, not the CPU's, so a "
        "seeded run draws different values. No fix when the factory already names a device or the move also changes "
        "the dtype.",
        false_positives="A helper called only at setup or every N steps from another module (gpulint cannot see the "
        "caller): add `# noqa: GPL504`. `.to(x)` with `x` named like a tensor is flagged without a fix; with `x` "
        "named like a dtype it is not flagged. Zero-element tensors and pinned staging buffers are skipped.",
    )
    valid = (
        training_script("pos = torch.arange(128, device=\"cuda\")"),
        "import torch\n\nbuf = torch.zeros(1024).cuda()\n",
        training_script("x = torch.zeros(4).to(torch.float16)"),
        training_script("x = torch.tensor([1, 2, 3]).to(\"cpu\")"),
        ("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
         "        return x + torch.arange(x.size(1), device=x.device)\n"),
        ("import torch\n\ndef train(model, loader, opt, rank):\n    total = torch.zeros(2).to(rank)\n"
         "    for batch in loader:\n        model(batch).backward()\n        opt.step()\n"),
        training_script("out = torch.empty(0).to(x.device)"),
        training_script("buf = torch.ByteTensor(storage).to(\"cuda\")"),
        training_script("pos = torch.arange(64, device=x.device).type_as(loss)"),
        training_script("if len(state) == 0:\n    state[\"row\"] = torch.zeros(64).to(loss)"),
        training_script("labels = torch.arange(8)\nlabels = batch_labels\nlabels = labels.to(device)"),
    )
    invalid = (
        Invalid(
            training_script("mask = torch.ones(8, 8).cuda()"),
            fixed=training_script("mask = torch.ones(8, 8, device=\"cuda\")"),
        ),
        Invalid(
            "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x + torch.arange(x.size(1)).to(x.device)\n",
            fixed="import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x + torch.arange(x.size(1), device=x.device)\n",
        ),
        Invalid(
            training_script("noise = torch.randn(4, 16).to(device, non_blocking=True)"),
            fixed=training_script("noise = torch.randn(4, 16, device=device)"),
        ),
        Invalid(
            training_script("acc = torch.zeros(2).cuda(local_rank)"),
            fixed=training_script("acc = torch.zeros(2, device=local_rank)"),
        ),
        Invalid(training_script("z = torch.zeros(3, device=\"cpu\").cuda()")),
        Invalid(training_script("target = torch.LongTensor(16).random_(8).to(device)")),
        Invalid(
            training_script("idx = torch.arange(16).view(-1, 1).to(device)"),
            fixed=training_script("idx = torch.arange(16, device=device).view(-1, 1)"),
        ),
        Invalid(training_script("labels = (torch.arange(8, dtype=torch.long) + 8 * rank).cuda()")),
        Invalid(training_script("labels = torch.cat([torch.arange(8) for _ in range(2)])\n"
                        "labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()\nlabels = labels.to(device)")),
        Invalid(
            "import numpy as np\nimport torch\n\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
            "for imgs, _ in dataloader:\n    z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))\n"
            "    loss = model(imgs, z)\n    loss.backward()\n    optimizer.step()\n"
        ),
        Invalid(
            "import torch\n\nclass Resampler:\n    def gather(self, local_ts, sizes):\n"
            "        return [torch.zeros(max(sizes)).to(local_ts) for _ in sizes]\n"
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._cpu_built: dict[int, set[str]] = {}  # per function: names of tensors built on the CPU from factories

    def visit_Call(self, node: cst.Call) -> None:
        self._track_call(node)
        func = node.func
        if self._numpy_random_to_device(node):
            self._report_where_it_runs(node, NUMPY_RANDOM_MESSAGE)
            return
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to", "type_as"):
            return
        created = self._cpu_creation(func.value)
        if created is None and self._built_here(func.value):
            created = (func.value, "")  # `labels = torch.cat([torch.arange(n), ...])` ... `labels.to(device)`
        if created is None or one_time_branch(self.context):
            return
        factory, kind = created
        device = self._target_device(node, func.attr.value)
        if device is None:
            return
        fix: list[Replace] = []
        if kind and keyword_arg(factory, "device") is None and isinstance(device, cst.BaseExpression):
            on_device = self._with_device(factory, node, func.attr.value, device)
            created = func.value  # the factory call, or the factory followed by reshapes / casts
            fix = [Replace(node, on_device if created is factory else created.deep_replace(factory, on_device))]
        self._report_where_it_runs(node, fix=fix, unsafe=kind in RANDOM_FACTORIES)

    def visit_For(self, node: cst.For) -> None:
        self._track_for(node)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        # Names bound to tensors built on the CPU in this function (factories and what is computed from them only).
        built = self._cpu_built.setdefault(id(self.context.enclosing_function()), set())
        on_cpu = self._is_cpu_built(original_node.value, built)
        for target in original_node.targets:
            if isinstance(target.target, cst.Name):
                (built.add if on_cpu else built.discard)(target.target.value)

    def _built_here(self, expr: cst.BaseExpression) -> bool:
        built = self._cpu_built.get(id(self.context.enclosing_function()), set())
        return isinstance(expr, cst.Name) and expr.value in built

    def _is_cpu_built(self, expr: cst.BaseExpression, built: set[str]) -> bool:
        """A tensor built on the CPU from torch factories: `torch.arange(n)`, `torch.cat([torch.arange(n)] * 2)`,
        `(labels.unsqueeze(0) == labels.unsqueeze(1)).float()` with `labels` built so."""
        if isinstance(expr, cst.Name):
            return expr.value in built
        if isinstance(expr, cst.Comparison):
            return self._is_cpu_built(expr.left, built) and all(
                self._is_cpu_built(c.comparator, built) for c in expr.comparisons
            )
        if isinstance(expr, cst.BinaryOperation):
            return self._is_cpu_built(expr.left, built) and self._is_cpu_built(expr.right, built)
        if not isinstance(expr, cst.Call):
            return False
        if self._cpu_creation(expr) is not None:
            return True
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in RESHAPES:
            return self._is_cpu_built(func.value, built)
        if self.context.resolve(func) in ("torch.cat", "torch.stack") and expr.args:
            parts = expr.args[0].value
            if isinstance(parts, (cst.ListComp, cst.GeneratorExp)):
                return self._is_cpu_built(parts.elt, built)
            if isinstance(parts, (cst.List, cst.Tuple)) and parts.elements:
                return all(self._is_cpu_built(e.value, built) for e in parts.elements)
        return False

    def _numpy_random_to_device(self, call: cst.Call) -> bool:
        """`Tensor(np.random.normal(...))` with `Tensor` a device tensor type (`torch.cuda.FloatTensor`, or an alias
        of it chosen at run time): random numbers drawn by numpy on the CPU, then copied to the device."""
        if not call.args or not isinstance(call.args[0].value, cst.Call):
            return False
        source = self.context.resolve(call.args[0].value.func) or ""
        if not source.startswith(("numpy.random.", "np.random.")):
            return False
        target = self.context.resolve(call.func) or ""
        if target.startswith("torch.cuda.") and target.endswith("Tensor"):
            return True
        # A local alias (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`), not torch's CPU types.
        return isinstance(call.func, cst.Name) and target.endswith("Tensor") and not target.startswith("torch.")

    def _cpu_creation(self, expr: cst.BaseExpression) -> tuple[cst.Call, str] | None:
        """(factory call, factory kind) when `expr` creates a tensor on the CPU: `torch.zeros(n)`,
        `torch.LongTensor(n).random_(8)` (kind "" for legacy constructors, which the fix does not rewrite)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in FILLS:
            inner = expr.func.value
            if isinstance(inner, cst.Call) and self._is_legacy_constructor(inner):
                return inner, ""
            created = self._cpu_creation(inner) if isinstance(inner, cst.Call) else None
            return (created[0], "") if created else None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in RESHAPES:
            # `torch.arange(n).view(-1, 1).to(device)`: the fix moves `device=` into the factory, the reshape stays.
            return self._cpu_creation(expr.func.value)
        if isinstance(expr, cst.BinaryOperation):
            # `(torch.arange(n) + offset).cuda()`: built on the CPU, then moved (no fix: the arithmetic stays).
            created = self._cpu_creation(expr.left) or self._cpu_creation(expr.right)
            return (created[0], "") if created else None
        if not isinstance(expr, cst.Call):
            return None
        resolved = self.context.resolve(expr.func) or ""
        if not resolved.startswith("torch.") or resolved.count(".") != 1:
            return None
        kind = resolved.rsplit(".", 1)[-1]
        if kind in LEGACY_CONSTRUCTORS:
            return None  # `torch.ByteTensor(storage)` copies data; only a fill after it (above) makes it a factory
        if kind not in DETERMINISTIC_FACTORIES and kind not in RANDOM_FACTORIES:
            return None
        if keyword_arg(expr, "pin_memory") is not None:
            return None  # staged in pinned memory on purpose
        device = keyword_arg(expr, "device")
        if device is not None and self._device_verdict(device.value) is not None:
            return None  # already created on a device; the move is a cast (`.type_as(x)`) or a no-op
        if expr.args and isinstance(expr.args[0].value, cst.Integer) and expr.args[0].value.value == "0" and kind != "full":
            return None  # zero elements: nothing is copied
        return expr, kind

    def _is_legacy_constructor(self, call: cst.Call) -> bool:
        resolved = self.context.resolve(call.func) or ""
        return resolved.startswith("torch.") and resolved.rsplit(".", 1)[-1] in LEGACY_CONSTRUCTORS

    @staticmethod
    def _with_device(factory: cst.Call, move: cst.Call, method: str, device: cst.BaseExpression) -> cst.Call:
        extra = [new_keyword_arg("device", device)]
        if method == "type_as":
            other = move.args[0].value
            extra = [
                new_keyword_arg("dtype", cst.Attribute(other, cst.Name("dtype"))),
                new_keyword_arg("device", cst.Attribute(other, cst.Name("device"))),
            ]
        args = list(factory.args)
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return factory.with_changes(args=args + extra)

    def _target_device(self, move: cst.Call, method: str) -> cst.BaseExpression | bool | None:
        """The device expression the move targets; True when it surely or probably moves to an accelerator but the
        fix cannot express it (`.to(other_tensor)`, `.to(device, dtype)`); None when it is not a device move."""
        args = [a for a in move.args if not (a.keyword and a.keyword.value in ("non_blocking", "copy"))]
        if method == "cuda":
            if not args:
                return cst.SimpleString('"cuda"')
            if len(args) == 1 and (args[0].keyword is None or args[0].keyword.value == "device"):
                return args[0].value
            return True
        if method == "type_as":
            other = move.args[0].value if len(move.args) == 1 else None
            return other if isinstance(other, (cst.Name, cst.Attribute)) else None
        if not args:
            return None
        first = args[0]
        if first.keyword is not None and first.keyword.value != "device":
            return None
        verdict = self._device_verdict(first.value)
        if verdict is None:
            return None
        if verdict == "device" and len(args) == 1:
            return first.value
        return True

    def _device_verdict(self, expr: cst.BaseExpression) -> str | None:
        """"device" for a device (`"cuda"`, `0`, `device`, `x.device`, `torch.device("cuda")`), "tensor" for what is
        probably another tensor (`.to(local_ts)` moves to its device and dtype), None for a dtype or the CPU."""
        if isinstance(expr, cst.SimpleString):
            return None if expr.raw_value.split(":")[0] in ("cpu", "meta") else "device"
        if isinstance(expr, cst.Integer):
            return "device"
        if isinstance(expr, cst.Call):
            name = self.context.resolve(expr.func)
            if name == "torch.device" and expr.args and self._device_verdict(expr.args[0].value) == "device":
                return "device"
            return None
        resolved = self.context.resolve(expr) or ""
        if resolved.startswith("torch.") and resolved.rsplit(".", 1)[-1] in DTYPE_NAMES:
            return None
        name = last_name(expr)
        if name is None:
            return None
        if name_parts(name) & {"dtype", "type", "cpu", "precision"} or name in DTYPE_NAMES:
            return None
        return "device" if _DEVICE_WORD.search(name) else "tensor"


OPTIMIZER_MODULES = ("torch.optim.", "apex.optimizers.", "bitsandbytes.optim.", "bnb.optim.", "timm.optim.")
COMPILERS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


class ConstructionInStep(Rule):
    code = "GPL505"
    name = "construction-in-step"
    message = "`{name}(...)` is built inside the training step; build it once before the loop"
    triggers = ("compile(", "optim.", "DataLoader(", "jit.", "AdamW(", "Adam(", "SGD(")
    hot_only = True  # every finding is "in_step"
    docs = RuleDocs(
        what_it_does="Flags `torch.compile`, `torch.jit.script/trace`, optimizer constructors (`torch.optim.*`, apex, "
        "bitsandbytes) and `DataLoader(...)` called inside the training step loop or a function it calls.",
        why_slow="Rebuilding per step repeats one-time work: `torch.compile` re-checks guards and may recompile "
        "(seconds of CPU while the GPU idles), a new optimizer allocates fresh state and loses momentum, and a new "
        "DataLoader restarts its worker processes and prefetch queue, so the GPU waits on the first batch every time.",
        example="for batch in loader:\n    model_c = torch.compile(model)\n    loss = model_c(batch)",
        use_instead="model_c = torch.compile(model)  # once\nfor batch in loader:\n    loss = model_c(batch)",
        fix_safety="No automatic fix: moving a construction out of the loop changes which objects later code "
        "refers to.",
        false_positives="A one-time switch inside the loop (`if step == warmup_steps:` or a lazy `if self.opt is "
        "None:`) is not flagged; other one-time conditions are: add `# noqa: GPL505`.",
    )
    valid = (
        ("import torch\n\ndef train(model, loader):\n    opt = torch.optim.AdamW(model.parameters())\n"
         "    model = torch.compile(model)\n    for batch in loader:\n        model(batch).backward()\n        opt.step()\n"),
        training_script("if step == 1000:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)"),
        training_script("if compiled is None:\n    compiled = torch.compile(model)"),
    )
    invalid = (
        Invalid(training_script("fast = torch.compile(model)")),
        Invalid(training_script("opt2 = torch.optim.Adam(model.parameters(), lr=1e-3)")),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\ndef train(model, dataset, opt):\n"
            "    for epoch in range(3):\n        for i in range(100):\n"
            "            batch = next(iter(DataLoader(dataset, batch_size=32)))\n            model(batch).backward()\n"
            "            opt.step()\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if not (name in COMPILERS or name in DATA_LOADERS or self._is_optimizer(name)):
            return
        if one_time_branch(self.context) or self.context.in_tests:
            return
        self.report(node, self.message.format(name=name), when="in_step")

    @staticmethod
    def _is_optimizer(name: str) -> bool:
        if not name.startswith(OPTIMIZER_MODULES) or ".lr_scheduler." in name:
            return False
        last = name.rsplit(".", 1)[-1]
        return last[:1].isupper() and last != "Optimizer"


def _under_any_if(context: FileContext) -> bool:
    """Inside the body of any `if` in the same function (`if args.debug:`): switched by a flag, not always on."""
    chain = context.ancestors
    for index in range(len(chain) - 2, -1, -1):
        node = chain[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, (cst.If, cst.IfExp)) and chain[index + 1] is not node.test:
            return True
    return False


class AnomalyDetectionOn(Rule):
    code = "GPL506"
    name = "anomaly-detection-on"
    message = "autograd anomaly detection is switched on unconditionally: it slows every backward pass and syncs"
    triggers = ("detect_anomaly",)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `torch.autograd.set_detect_anomaly(True)` and `torch.autograd.detect_anomaly()` outside "
        "test files, unless they sit under an `if` (a debug flag).",
        why_slow="Anomaly mode records a Python stack trace for every autograd node in the forward pass and checks "
        "every backward output for NaN, which reads values back to the host: backward runs several times slower and "
        "synchronizes the device repeatedly.",
        example="torch.autograd.set_detect_anomaly(True)",
        use_instead="if args.detect_anomaly:\n    torch.autograd.set_detect_anomaly(True)",
        fix_safety="Unsafe, offered for `set_detect_anomaly(True)` only: the fix turns it off (`False`). Values are "
        "unchanged, but a NaN in backward no longer raises with the forward trace that produced it.",
        false_positives="Debugging scripts that are never run for real training: add `# noqa: GPL506`.",
    )
    valid = (
        "import torch\n\nif args.debug:\n    torch.autograd.set_detect_anomaly(True)\n",
        "import torch\n\ntorch.autograd.set_detect_anomaly(False)\n",
        "import torch\n\ntorch.autograd.set_detect_anomaly(args.debug)\n",
    )
    invalid = (
        Invalid(
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n",
            fixed="import torch\n\ntorch.autograd.set_detect_anomaly(False)\n",
        ),
        Invalid(
            "import torch\n\ndef train(model, loader, opt):\n    with torch.autograd.detect_anomaly():\n"
            "        for batch in loader:\n            model(batch).backward()\n            opt.step()\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func) or ""
        if self.context.in_tests or _under_any_if(self.context):
            return
        if name == "torch.autograd.set_detect_anomaly":
            mode = keyword_arg(node, "mode") or (node.args[0] if node.args and node.args[0].keyword is None else None)
            if mode is not None and is_true(mode.value):
                self.report(node, when="always", fix=[Replace(mode.value, "False")], unsafe_fix=True)
        elif name in ("torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"):
            check = keyword_arg(node, "check_nan")
            if check is None or not is_false(check.value):
                self.report(node, when="always")


PROFILERS = frozenset(
    {"torch.profiler.profile", "torch.autograd.profiler.profile", "torch.autograd.profiler_legacy.profile",
     "torch.autograd.profiler.emit_nvtx", "torch.cuda.profiler.profile"}
)


class AlwaysOnProfiler(Rule):
    code = "GPL507"
    name = "always-on-profiler"
    message = "a profiler records every step without a `schedule=` or an off switch; it slows the whole run"
    triggers = ("profile(", "emit_nvtx(")
    docs = RuleDocs(
        what_it_does="Flags `torch.profiler.profile(...)` and the autograd profilers created without a `schedule=` "
        "and without `enabled=` set to something other than `True`, outside test files and outside any `if`.",
        why_slow="The profiler hooks every operator launch (and with `record_shapes`/`with_stack`, records shapes and "
        "Python stacks): CPU-side overhead per kernel launch grows several times, the trace buffer grows without bound, "
        "and CUPTI collection adds device-side overhead. Left on for a whole run, every step pays it.",
        example="with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:\n    for batch in loader:\n"
        "        train_step(batch)",
        use_instead="with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, "
        "repeat=1)) as prof:\n    for batch in loader:\n        train_step(batch)\n        prof.step()",
        fix_safety="No automatic fix: which steps to profile is the author's choice.",
        false_positives="Short profiling scripts that run a few steps on purpose: functions named `profile*`/"
        "`benchmark*` are skipped; otherwise add `# noqa: GPL507`.",
    )
    valid = (
        ("import torch\n\ndef train(loader):\n    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)\n"
         "    with torch.profiler.profile(schedule=sched) as prof:\n        for batch in loader:\n            step(batch)\n"
         "            prof.step()\n"),
        ("import torch\n\ndef train(loader, args):\n    with torch.autograd.profiler.profile(enabled=args.profile):\n"
         "        for batch in loader:\n            step(batch)\n"),
        "import torch\n\ndef profile_model(model, x):\n    with torch.profiler.profile() as prof:\n        model(x)\n",
    )
    invalid = (
        Invalid(
            "import torch\nfrom torch.profiler import profile, ProfilerActivity\n\ndef train(loader):\n"
            "    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True):\n"
            "        for batch in loader:\n            step(batch)\n"
        ),
        Invalid("import torch\n\nprof = torch.autograd.profiler.profile(use_cuda=True)\nprof.__enter__()\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.resolve(node.func) not in PROFILERS:
            return
        if self.context.in_tests or _under_any_if(self.context):
            return
        if keyword_arg(node, "schedule") is not None:
            return
        enabled = keyword_arg(node, "enabled")
        if enabled is not None and not is_true(enabled.value):
            return
        self.report(node, when="training")
