"""GPL412 tensor-from-host-data-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import dotted_name, target_names
from gpulint.linter.syntax import descendants
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.project.vocab import HOST_RESHAPES, JOINING_FUNCTIONS
from gpulint.rules.common import (
    HOST_DATA_CONSTRUCTORS,
    arguments_at,
    by_callee,
    is_cpu_string,
    is_false,
    keyword_arg,
)
from gpulint.rules.examples import lightning_module, training_script
from gpulint.rules.sync.helpers import (
    SyncRule,
    cpu_target,
    is_cuda_tensor_type,
    is_lightning_log,
    known_false_positives,
    selects_action,
)


# A LightningModule's counters, Python ints Lightning keeps on the host.
_LIGHTNING_COUNTERS = frozenset({"self.current_epoch", "self.global_step", "self.trainer.current_epoch",
                                 "self.trainer.global_step"})


# The legacy typed constructors of CUDA tensors: given a list (`torch.cuda.IntTensor([0])`), they copy it from the host;
# given sizes (`torch.cuda.FloatTensor(4, 8)`), they only allocate.
_CUDA_CONSTRUCTORS = frozenset(
    {"torch.cuda.FloatTensor", "torch.cuda.LongTensor", "torch.cuda.IntTensor", "torch.cuda.BoolTensor",
     "torch.cuda.ByteTensor", "torch.cuda.HalfTensor", "torch.cuda.DoubleTensor", "torch.cuda.BFloat16Tensor"}
)


class TensorFromHostDataInStep(SyncRule):
    code = "GPL412"
    name = "tensor-from-host-data-in-step"
    message = "`{func}(..., device=...)` from host data is a synchronous pageable copy every step"
    message_moved = "`{func}(host data)` then moved to the device: a synchronous pageable copy every step"
    message_pageable = ("`{func}(host data)` then moved with `non_blocking=True`: from pageable memory the copy is "
                        "synchronous all the same, every step; pin the data first (`.pin_memory()`)")
    message_kept = ("`{name}.type_as(...)` copies a CPU tensor (`{name}` is made on the host) to the device: a "
                    "synchronous pageable copy every step")
    message_cuda = "`{func}(host data)` copies host data into a new device tensor: a synchronous pageable copy every step"
    message_helper = ("`{func}(...)` copies its argument's host data to the device (a helper of this project that "
                      "moves it with a blocking copy): a synchronous pageable copy every step")
    message_stored = ("`{func}(host data)` stored into a slice of a device tensor: a synchronous pageable copy every "
                      "step")
    message_lightning = ("`self.{method}(...)` of a Python number: Lightning makes it a tensor on the module's device "
                         "(`torch.tensor(value, device=self.device)`), a synchronous pageable copy every step")
    # (`torch.cuda.IntTensor(ids)`, `FloatTensor(x)`; `factor[2:6] = torch.tensor(shape)`)
    triggers = ("device=", ".to(", ".cuda(", "Tensor(", "self.log", "] = torch.tensor(", "] = torch.as_tensor(",
                "] = torch.from_numpy(", ".type_as(")
    docs = RuleDocs(
        what_it_does="Flags `torch.tensor(data, device=...)` and `torch.as_tensor(data, device=...)` of host data "
        "(Python lists and numbers, numpy arrays; for `torch.tensor`, which always copies, anything not known to be a "
        "tensor, such as `self.anchors`), and host data wrapped then moved "
        "(`torch.tensor(ids).to(device)`, `torch.LongTensor(lengths).cuda()`, `torch.tensor(ignore_index).type_as("
        "labels)`, also through a cast or reshape: "
        "`torch.from_numpy(pos).float().unsqueeze(0).to(device)`, `torch.stack` of CPU-built tensors moved, also "
        "with `non_blocking=True` but no `.pin_memory()` first (from pageable memory the copy is synchronous); a CPU "
        "tensor a project function returns, cast to a step tensor's type: `mask = causal_mask(size)`, then "
        "`mask.type_as(query)`), the "
        "legacy CUDA constructors given a list (`torch.cuda.IntTensor([0])`, `torch.cuda.LongTensor(sizes)`, also "
        "through a name bound to one: `FloatTensor = th.cuda.FloatTensor if use_cuda else th.FloatTensor`, then "
        "`FloatTensor(np.array(x).tolist())`), host data wrapped on the CPU and stored into a slice of a device tensor "
        "(`factor[2:6] = torch.tensor(feature.shape)[[3, 2, 3, 2]]`, with `factor` made with `device=`, or a replay "
        "buffer's `self.obs[i] = torch.from_numpy(obs)`, where `__init__` makes `self.obs` on the device), and "
        "each call of a project helper that does so to "
        "its argument (`def tensor(x): return torch.from_numpy(np.asarray(x)).to(device)`, then `tensor(rewards)`) "
        "with data not known to be a tensor, and Lightning's `self.log(name, value)` / `self.log_dict({...})` of a "
        "Python number (`len(episodes)`, `self.current_epoch`, a float the step computed on the host), which "
        "Lightning turns into `torch.tensor(value, device=self.device)`, in code that runs every step, ungated.",
        why_slow="The data is copied from pageable host memory, which CUDA does synchronously: the host waits until "
        "the copy, queued behind all earlier kernels, is done. It is a sync hidden in a constructor.",
        example="for x, y in loader:\n    weights = torch.tensor(class_weights, device=\"cuda\")\n"
        "    loss = F.cross_entropy(model(x), y, weight=weights)",
        use_instead="Build constants once before the loop; for per-step host data use "
        "`torch.tensor(data).pin_memory().to(device, non_blocking=True)`, or create the values on the device.",
        fix_safety="No fix: the remedy (hoist a constant out of the loop, or pin and copy asynchronously) depends on "
        "whether the data changes between steps. For Lightning, log the tensor the value came from, or log host "
        "numbers at an interval (`if batch_idx % 50 == 0:`) or from a callback that runs less often.",
        false_positives=known_false_positives("A list that holds device tensors is GPL2xx's finding (`torch.tensor([...])` of step values), "
        "not this rule's."),
    )
    valid = (
        # a cast to the type of a tensor on the host (`float` of host data, whatever its shape) moves nothing
        training_script("w = torch.ones(2).float()\nscale = torch.tensor(0.5).type_as(w)"),
        # a tensor already on the device, cast to the step's type: no copy
        training_script("mask = torch.ones(4, 4, device=device).tril()\nscores = model(x) * mask.type_as(x)"),
        # stored into a slice of a tensor on the host: nothing is copied to the device
        training_script("factor = torch.ones(7)\nfactor[2:6] = torch.tensor(out.shape)[[1, 0, 1, 0]]"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n"
        "    weights = torch.tensor([1.0, 2.0, 1.0, 1.0], device=device)\n    for x, y in loader:\n"
        "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y, weight=weights)\n        loss.backward()\n"
        "        optimizer.step()\n"),
        training_script("offsets = torch.tensor([0, 1, 2])"),
        # pinned first: the copy overlaps with the GPU's work
        training_script("pos = torch.from_numpy(grid).pin_memory().to(device, non_blocking=True)",
                        header="import numpy as np\n\ngrid = np.ones((16, 16))"),
        # only what is no tensor yet is converted: the step's own values are tensors
        training_script("out = model(x)\nmean, logvar = out, out.log()\n"
                        "mean, logvar = [v if isinstance(v, torch.Tensor) else torch.tensor(v).to(out) "
                        "for v in (mean, logvar)]\nloss = (mean - logvar).pow(2).mean()"),
        training_script("kept = model(x).flatten()\n"
                        "mean = kept.mean() if kept.numel() > 0 else torch.tensor(0.0, device=device)"),
        training_script("offsets = torch.arange(4, device=device)"),
        training_script("buffer = torch.cuda.FloatTensor(4, 8)"),
        lightning_module('self.log("train_loss", loss)\nself.log_dict({"loss": loss.detach()})'),
        lightning_module('if batch_idx % 50 == 0:\n    self.log("episodes", len(self.episodes))'),
        # a norm the module's helper builds on the host, though annotated `float`: Lightning clones the CPU tensor
        lightning_module('self.log("grad_norm", self.grad_norm())')
        + "\n    def grad_norm(self) -> float:\n"
          "        norms = torch.tensor([p.grad.norm() ** 2 for p in self.parameters()])\n"
          "        return norms.sum().sqrt()\n",
        # No elements, nothing to copy: an empty placeholder for a batch with no matches.
        training_script("matched = torch.tensor([], device=device, dtype=torch.int64)"),
        # diffusers' UNet: a timestep given as a number is made a tensor; the step passes a tensor of timesteps
        ("import torch\n\n\nclass UNet(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.proj = torch.nn.Linear(8, 8)\n\n    def forward(self, sample, timestep):\n"
         "        timesteps = timestep\n        if not torch.is_tensor(timesteps):\n"
         "            timesteps = torch.tensor([timesteps], dtype=torch.int64, device=sample.device)\n"
         "        return self.proj(sample) * timesteps.float().mean()\n\n\n"
         "def train(loader, device, timesteps_of=lambda x: x.sum(dim=1).long()):\n    unet = UNet().to(device)\n"
         "    optimizer = torch.optim.SGD(unet.parameters(), 0.1)\n    for x, y in loader:\n"
         "        x = x.to(device, non_blocking=True)\n        unet(x, timesteps_of(x)).mean().backward()\n"
         "        optimizer.step()\n"),
        # InstantMesh's renderer: only cameras given as lists are converted; the step passes its batch's tensors
        ("import torch\n\n\ndef render(cam, points, device=\"cuda\"):\n"
         "    mtx = torch.tensor(cam, device=device) if not torch.is_tensor(cam) else cam\n"
         "    return points * mtx.float().mean()\n\n\ndef train(model, loader, optimizer, device):\n"
         "    for x, y in loader:\n        cams = [y.to(device, non_blocking=True)]\n"
         "        render(cams[0], model(x.to(device, non_blocking=True))).mean().backward()\n        optimizer.step()\n"),
    )
    invalid = (
        Invalid(training_script("weights = torch.tensor([1.0, 2.0, 1.0, 1.0], device=device)")),
        # the ignore index as a tensor on the labels' device (transformers' token-classification loss)
        Invalid(training_script("ignored = torch.tensor(-100).type_as(y)\ny = torch.where(y > 0, y, ignored)")),
        Invalid(training_script("sizes = [len(x), len(y)]\nt = torch.tensor(sizes).to(device)")),
        Invalid(training_script("sizes = x.shape\nt = torch.as_tensor(sizes, device=device)")),
        Invalid(training_script("pos = torch.from_numpy(grid).float().unsqueeze(0).to(x.device)",
                                header="import numpy as np\n\ngrid = np.ones((16, 16))")),
        Invalid(training_script("rows = torch.stack([torch.as_tensor([i, i + 1]) for i in range(4)]).to(device)")),
        Invalid(training_script("overflow = torch.cuda.IntTensor([0])")),
        # Lightning Bolts' RL modules log episode statistics kept as Python numbers at every step
        Invalid(lightning_module('self.log_dict({"episodes": len(self.episodes), "epoch": self.current_epoch})')),
        Invalid(lightning_module('steps = float(len(batch))\nself.log("steps", steps, prog_bar=True)')),
        Invalid(training_script("sizes = [len(x), len(y)]\nt = torch.cuda.LongTensor(sizes)")),
        # MMYOLO's YOLOv5 head: each feature level's size wrapped on the CPU, then stored into the device scale factor
        Invalid(training_script("factor = torch.ones(7, device=device)\n"
                                "factor[2:6] = torch.tensor(out.shape)[[1, 0, 1, 0]]\nloss = loss * factor.sum()")),
        # SimpleSAC's replay batches: numpy arrays wrapped and moved "without blocking", from pageable memory
        Invalid(training_script("batch = {k: torch.from_numpy(v).to(device=device, non_blocking=True)\n"
                                "         for k, v in replay.sample(256).items()}\nloss = model(batch[\"obs\"]).mean()",
                                header="import numpy as np\n\n\nclass Replay:\n    def sample(self, n):\n"
                                       "        return {\"obs\": np.zeros((n, 8), dtype=np.float32)}\n\n\n"
                                       "replay = Replay()")),
        # PixelSNAIL's causal attention: a mask built with numpy once per size (`lru_cache`), cast to the queries
        Invalid(training_script("mask = causal_mask(x.shape[1])\nscores = x @ mask.type_as(x)",
                                header="import numpy as np\n\n\ndef causal_mask(size):\n"
                                       "    return torch.from_numpy(np.tril(np.ones((size, size))))")),
        # a replay buffer whose storage `__init__` makes on the device: each observation stored is a blocking copy
        Invalid(training_script("replay.append(np.zeros(8, dtype=np.float32), device)",
                                header="import numpy as np\n\n\nclass Replay:\n    def __init__(self, size):\n"
                                       "        self.obs = torch.zeros(size, 8, device=\"cuda\")\n"
                                       "        self.pointer = 0\n\n    def append(self, obs, device):\n"
                                       "        self.obs[self.pointer] = torch.from_numpy(obs)\n"
                                       "        self.pointer = (self.pointer + 1) % 64\n\n\nreplay = Replay(64)")),
    )

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        return bool(facts.copy_calls)  # `tensor(x)`, a project's copy helper, has none of the rule's words

    def __init__(self, context) -> None:
        super().__init__(context)
        self._copy_helpers = by_callee(context.facts.copy_calls)  # the project's copy helpers called in this file
        self._cuda_type_names: set[str] = set()  # `FloatTensor = th.cuda.FloatTensor if use_cuda else th.FloatTensor`
        self._lists: set[tuple[int, str]] = set()  # (function, name) bound to a list: `x = np.array(x).tolist()`

    def leave_Assign(self, node: cst.Assign) -> None:
        names = set().union(*(target_names(target.target) for target in node.targets))
        if is_cuda_tensor_type(node.value, self.context, set()):
            self._cuda_type_names |= names
        function = id(self.context.enclosing_function())
        is_list = isinstance(node.value, (cst.List, cst.ListComp)) or isinstance(node.value, cst.Call) \
            and isinstance(node.value.func, cst.Attribute) and node.value.func.attr.value == "tolist"
        for name in names:
            (self._lists.add if is_list else self._lists.discard)((function, name))
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._check_stored(target.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if is_lightning_log(func):
            if any(self._host_number(value) for value in _logged_values(node)):
                self.report(node, self.message_lightning.format(method=func.attr.value))  # type: ignore[attr-defined]
            return
        copied = self._copy_helpers.get(dotted_name(func) or "") if self._copy_helpers else None
        if copied is not None:
            self._check_helper_call(node, *copied)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and isinstance(func.value, cst.Call):
            self._check_moved(node, _unreshaped(func.value))
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "type_as" \
                and len(node.args) == 1 and not self.context.is_host_value(node.args[0].value):
            # `torch.tensor(loss_fct.ignore_index).type_as(labels)` (transformers' token-classification loss): to the
            # device of `labels`, a tensor of the step
            if isinstance(func.value, cst.Call):
                self._check_moved(node, _unreshaped(func.value))
            elif self._cpu_tensor_named(func.value):
                self.report(node, self.message_kept.format(name=dotted_name(func.value)))
            return
        resolved = self.context.resolve(func)
        if resolved in _CUDA_CONSTRUCTORS or isinstance(func, cst.Name) and func.value in self._cuda_type_names:
            self._check_cuda_constructor(node, resolved or func.value)
            return
        if resolved not in ("torch.tensor", "torch.as_tensor") or not node.args or node.args[0].keyword is not None:
            return
        device = keyword_arg(node, "device")
        if device is None or is_cpu_string(device.value):
            return
        data = node.args[0].value
        if _is_empty_literal(data) or self.in_per_tensor_loop() or self._normalises_argument(data):
            return
        # `torch.tensor(data)` copies its data: what it is given is host data (lists, numbers, arrays) unless it is
        # known to be a tensor. `torch.as_tensor` is also how code passes a tensor through unchanged: only host data.
        if not (self.context.is_host_value(data) or resolved == "torch.tensor" and not self.tensors.is_tensor(data)):
            return
        self.report(node, self.message.format(func=resolved))

    def _cpu_tensor_named(self, value: cst.BaseExpression) -> bool:
        """`mask`, bound to what a project function returns on the host (PixelSNAIL's `causal_mask(size)`, cached
        with `lru_cache`, returns `torch.from_numpy(mask)`): only a tensor has `type_as`, so this one is on the CPU."""
        return isinstance(value, cst.Name) and self.context.is_host_value(value) and not self.in_per_tensor_loop()

    def _normalises_argument(self, data: cst.BaseExpression) -> bool:
        """`if not isinstance(lengths, torch.Tensor): lengths = torch.tensor(lengths, device=device)` on a parameter
        no caller is known to hand host data: the branch converts a list a caller might pass and takes the tensors
        callers pass as they are (texar's `sequence_mask`); it copies only where a caller's host data is known."""
        if isinstance(data, (cst.List, cst.Tuple)) and len(data.elements) == 1:
            data = data.elements[0].value  # `torch.tensor([timesteps], device=d)`: a number made a one-element tensor
        function = self.context.enclosing_function()
        if not isinstance(data, cst.Name) or function is None:
            return False
        params = {p.name.value for p in (*function.params.params, *function.params.kwonly_params)}
        # (diffusers' UNets: `timesteps = timestep`, then `if not torch.is_tensor(timesteps):`; what callers pass is
        # the parameter's)
        passed = _aliased_parameter(function, data.value, params) or data
        if self.context.is_host_value(passed):
            return False
        if passed.value not in params or passed is data and self.context.bound_here(data.value):
            return False  # `lengths = [0] * n if lengths is None else lengths`: no longer what callers passed
        # (or the value of a conditional expression for it: `torch.tensor(cam, device=d) if not torch.is_tensor(cam)
        # else cam`, InstantMesh's renderer)
        return self._in_branch_for_non_tensor(data.value, (cst.If, cst.IfExp))

    def _in_branch_for_non_tensor(self, name: str, branch: type | tuple[type, ...]) -> bool:
        """Inside the branch of an `if` (or of a conditional expression) where `name` is known to be no tensor: the
        innermost test of its type decides (`typed_test`)."""
        stack = self.context.ancestors_snapshot()
        for node, child in reversed(list(zip(stack, stack[1:]))):
            if isinstance(node, branch) and child is not node.test:
                typed = typed_test(node.test, child is node.body)
                if typed is not None and typed[0] == name:
                    return typed[1]
        return False

    def _check_cuda_constructor(self, call: cst.Call, resolved: str) -> None:
        """`torch.cuda.IntTensor([0])`, `torch.cuda.LongTensor(sizes)`: one argument of host data (a list or tuple, or
        a name bound to one), copied to the device. Sizes (`torch.cuda.FloatTensor(4, 8)`) allocate only."""
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return
        data = call.args[0].value
        # A host value named as a collection (`sizes`, `id_list`): a lone size (`n`) would only allocate.
        named = (dotted_name(data) or "").rsplit(".", 1)[-1].lower()
        sequence = isinstance(data, (cst.List, cst.Tuple, cst.ListComp)) or self.context.is_host_value(data) \
            and named.endswith(("s", "list")) or isinstance(data, cst.Name) \
            and (id(self.context.enclosing_function()), data.value) in self._lists
        if not sequence or _is_empty_literal(data) or self.in_per_tensor_loop() or self.tensors.is_tensor(data):
            return
        self.report(call, self.message_cuda.format(func=resolved))

    def _host_number(self, value: cst.BaseExpression) -> bool:
        """A Python number Lightning will make a tensor of: a counter of the module (`self.current_epoch`), a size
        (`len(self.episodes)`), a value the step keeps on the host; not a tensor read to the host for the log
        (`loss.item()`, `float(loss)`: GPL401/GPL402's findings, whose fix logs the tensor itself)."""
        if (dotted_name(value) or "") in _LIGHTNING_COUNTERS:
            return True
        if isinstance(value, cst.Call) and dotted_name(value.func) in self.context.facts.host_tensor_returning:
            return False  # a CPU tensor (boltz's `gradient_norm`): Lightning clones it where it is
        return self.context.is_host_value(value) and not _reads_device_value(value, self.context)

    def _check_helper_call(self, call: cst.Call, positions: tuple[int, ...], keywords: tuple[str, ...]) -> None:
        """`tensor(transitions.reward)`, where the project's `tensor` does `torch.from_numpy(x).to(device)`: the
        arguments the helper copies, when they are not known to be tensors already."""
        if selects_action((dotted_name(call.func) or "").rsplit(".", 1)[-1]):
            return  # the observation an action is chosen for must reach the device (SyncRule's environment exchange)
        copied = arguments_at(call, positions, keywords)
        if self.in_per_tensor_loop() or not any(
                not _is_empty_literal(data) and self.context.location_of(data) != "device"
                and not self.tensors.is_tensor(data) for data in copied):
            return
        self.report(call, self.message_helper.format(func=dotted_name(call.func)))

    def _check_moved(self, move: cst.Call, made: cst.Call) -> None:
        """`torch.tensor(host_list).to(device)`, `torch.LongTensor(lengths).cuda()`: host data, then a blocking copy
        (factories without data, `torch.zeros(n).cuda()`, are GPL5xx's: create them on the device)."""
        resolved = self.context.resolve(made.func) or ""
        non_blocking = keyword_arg(move, "non_blocking")
        if non_blocking is not None and is_false(non_blocking.value) \
                or move.func.attr.value == "to" and cpu_target(move):
            return  # (`non_blocking=False` written out: GPL411's blocking copy)
        # `torch.from_numpy(v).to(device, non_blocking=True)` (SimpleSAC's replay batches): the data is in pageable
        # memory, so the copy is staged synchronously all the same; only pinned memory (`.pin_memory()` before the
        # move, which `made` then is) lets it overlap.
        message = self.message_moved if non_blocking is None else self.message_pageable
        if resolved in JOINING_FUNCTIONS and self.context.is_host_value(made):
            # `torch.stack([torch.as_tensor(f(r.tolist())) for r in rows]).to(dev)`: CPU tensors joined, then copied
            self.report(move, message.format(func=resolved))
            return
        if not self._wraps_host_data(made, resolved) or self._fallback_for_non_tensors(made.args[0].value):
            return
        self.report(move, message.format(func=resolved))

    def _wraps_host_data(self, made: cst.Call, resolved: str) -> bool:
        """`torch.tensor(ids)`, `torch.LongTensor(lengths)` (`resolved`: the constructor called): data that is not
        known to be a tensor, nor empty, wrapped on the CPU. A device tensor wrapped again is GPL2xx's finding
        (`torch.tensor` of step values)."""
        if resolved not in HOST_DATA_CONSTRUCTORS or not made.args or made.args[0].keyword is not None:
            return False
        data = made.args[0].value
        return not _is_empty_literal(data) and not self.tensors.is_tensor(data)

    def _check_stored(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        """`factor[2:6] = torch.tensor(pred.shape)[[3, 2, 3, 2]]` with `factor` on the device (MMYOLO's YOLOv5 head
        scales its targets so for every feature level): the data is wrapped on the CPU, then copied into the device
        tensor, a blocking copy."""
        made = value
        while isinstance(made, cst.Subscript):
            made = made.value
        if not isinstance(made, cst.Call):
            return
        made = _unreshaped(made)
        resolved = self.context.resolve(made.func) or ""
        if keyword_arg(made, "device") is not None or not self._wraps_host_data(made, resolved) \
                or self.in_per_tensor_loop() or self.context.location_of(target.value) != "device":
            return
        self.report(value, self.message_stored.format(func=resolved))

    def _fallback_for_non_tensors(self, data: cst.BaseExpression) -> bool:
        """`x if isinstance(x, th.Tensor) else th.tensor(x).to(tensor)` (guided diffusion's `normal_kl`, copied into
        most diffusion codebases): only what is no tensor yet is converted, and the step passes tensors (the
        floats come from evaluation's prior term)."""
        return isinstance(data, cst.Name) and self._in_branch_for_non_tensor(data.value, cst.IfExp)


def _aliased_parameter(function: cst.FunctionDef, name: str, params: set[str]) -> cst.Name | None:
    """The parameter the first binding of the local `name` in `function` copies, if it copies one (diffusers' UNets:
    `timesteps = timestep`, then `timesteps = torch.tensor([timesteps], ...)` where it is no tensor)."""
    for node in descendants(function.body):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                for t in node.targets):
            value = node.value
            return value if isinstance(value, cst.Name) and value.value in params and name not in params else None
    return None


def _unreshaped(made: cst.Call) -> cst.Call:
    """`torch.from_numpy(pos).float().unsqueeze(0)` -> `torch.from_numpy(pos)`: the call that made the data."""
    while isinstance(made.func, cst.Attribute) and made.func.attr.value in HOST_RESHAPES \
            and isinstance(made.func.value, cst.Call):
        made = made.func.value
    return made


def _reads_device_value(value: cst.CSTNode, context) -> bool:
    """Does `value` read a tensor to the host (`.item()`, `.tolist()`, `float(t)` of what is not known host data)?"""
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "cpu", "numpy"):
            return True
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool") and value.args \
                and not context.is_host_value(value.args[0].value):
            return True
    return any(_reads_device_value(child, context) for child in value.children)


def _logged_values(call: cst.Call) -> list[cst.BaseExpression]:
    """What `self.log(name, value)` logs (its second argument, or `value=`), or the values of the dict display
    `self.log_dict({...})` logs."""
    method = call.func.attr.value  # type: ignore[attr-defined]
    if method == "log":
        value = arguments_at(call, (1,), ("value",))
        return [value[0]] if value else []
    mapping = arguments_at(call, (0,), ("dictionary",))
    if not mapping or not isinstance(mapping[0], cst.Dict):
        return []
    return [element.value for element in mapping[0].elements if isinstance(element, cst.DictElement)]


def _is_empty_literal(data: cst.BaseExpression) -> bool:
    """`[]`, `()`: a tensor of no elements copies nothing."""
    return isinstance(data, (cst.List, cst.Tuple)) and not data.elements


def typed_test(test: cst.BaseExpression, in_body: bool) -> tuple[str, bool] | None:
    """The name a branch of an `if` knows the type of, and whether the branch is where it is no tensor: ("lengths",
    True) in the body of `if not isinstance(lengths, torch.Tensor):` (or `not torch.is_tensor(lengths)`) and in the
    `else` of the test without `not`; ("x", False) in the body of `isinstance(x, np.ndarray)`, of a named type."""
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    call = test.expression if negated else test
    if not isinstance(call, cst.Call) or not call.args or not isinstance(call.args[0].value, cst.Name):
        return None
    func = dotted_name(call.func) or ""
    name = call.args[0].value.value
    if func in ("torch.is_tensor", "is_tensor") and len(call.args) == 1 or func == "isinstance" \
            and len(call.args) == 2 and (dotted_name(call.args[1].value) or "").rsplit(".", 1)[-1] == "Tensor":
        return (name, True) if in_body == negated else None
    if func == "isinstance" and len(call.args) == 2 and in_body != negated:
        return (name, False)
    return None
