"""GPL403 cpu-copy-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, name_parts
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.project.vocab import LEGACY_CPU_TENSOR_TYPES
from gpulint.rules.common import arguments_at, by_callee, is_false, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, cpu_target, is_cuda_tensor_type, known_false_positives


# Function-name parts of experience collection in RL (`make_experience`, `collect_rollouts`): the rollout is copied
# to a host buffer by design, once per rollout, and the copy is the point.
_EXPERIENCE_PARTS = frozenset({"experience", "experiences", "rollout", "rollouts"})


# Library functions that copy the tensor they are given to host memory (PIL images are host data).
_TO_HOST_FUNCTIONS = frozenset({
    "torchvision.transforms.functional.to_pil_image", "torchvision.transforms.v2.functional.to_pil_image",
})


class CpuCopyInStep(SyncRule):
    code = "GPL403"
    reads_to_host = True
    name = "cpu-copy-in-step"
    message = "`{call}` copies a device tensor to host memory every step, waiting for the GPU to finish"
    triggers = (".cpu(", "cpu\"", "cpu'", "to_pil_image(", ".type(")
    docs = RuleDocs(
        what_it_does="Flags `.cpu()`, `.to(\"cpu\")` and `.type(torch.LongTensor)` (a legacy CPU tensor type, also "
        "as a string) on tensors in code that runs every training step and is not "
        "gated (`.numpy()` needs a CPU tensor, so the copy before it is what is flagged), and torchvision's "
        "`to_pil_image(tensor)`, which copies the tensor to the host to make an image. `.to(\"cpu\", "
        "non_blocking=True)` copies into pinned memory without waiting and is not flagged. A call of the project's "
        "own converter (`to_numpy(pred)`, a function that returns `x.detach().cpu().numpy()`) is the same copy, "
        "flagged at the call in the step as well as in the converter.",
        why_slow="A device-to-host copy into pageable memory is synchronous: the host waits for the copy, and the copy "
        "waits for every kernel queued before it. The CPU loses its lead and the GPU idles between steps.",
        example="for x, y in loader:\n    out = model(x)\n    loss = F.cross_entropy(out, y)\n    loss.backward()\n"
        "    optimizer.step()\n    all_preds.append(out.argmax(1).cpu())",
        use_instead="Keep per-step results on the device (`preds.append(out.argmax(1))`, or a running device tensor) "
        "and move them once at the end of the epoch or at a logging interval.",
        fix_safety="No fix: where the host copy should move (epoch end, log interval) depends on how the result is used.",
        false_positives=known_false_positives("Code that must hand results to the host every step (a replay buffer, an environment "
        "simulator) pays the copy on purpose: add `# noqa: GPL403`. Functions named for experience collection "
        "(`make_experience`, `collect_rollouts`) fill a host rollout store by design: their whole-batch copies are not "
        "flagged, their copies once per sample in a loop are. Numpy/sklearn metrics on `.cpu().numpy()` are "
        "reported by GPL2xx instead."),
    )
    valid = (
        training_script("if step % 100 == 0:\n    history.append(loss.detach().cpu())", header="history = []"),
        training_script("snapshot = torch.tensor([1.0, 2.0]).cpu()"),
        training_script("staged = model(x).detach().to(\"cpu\", non_blocking=True)"),
        # schedule-free's AlgoPerf submission: each parameter's starting point kept on the host, at its first step
        ("import torch\n\n\nclass Anchored(torch.optim.Optimizer):\n    @torch.no_grad()\n    def step(self):\n"
         "        for group in self.param_groups:\n            for p in group[\"params\"]:\n"
         "                state = self.state[p]\n                if \"x0\" not in state:\n"
         "                    state[\"x0\"] = p.detach().cpu()\n                p.add_(p.grad, alpha=-0.1)\n\n\n"
         "def train(model, loader, device):\n    optimizer = Anchored(model.parameters(), {})\n    for x, y in loader:\n"
         "        model(x.to(device, non_blocking=True)).sum().backward()\n        optimizer.step()\n"),
        # a dtype, or a CUDA tensor type: the tensor stays on the device
        training_script("ends = model(x).type(torch.long)\nstarts = model(x).type(torch.cuda.LongTensor)"),
        # the CPU type is the branch for a run without a GPU
        training_script("gpu = torch.cuda.is_available()\nout = x.float()\n"
                        "y = out.type(torch.cuda.FloatTensor) if gpu else out.type(torch.FloatTensor)"),
        training_script("snapshot = torch.from_numpy(grid).type(torch.FloatTensor)",
                        header="import numpy as np\n\ngrid = np.ones((16, 16))"),
        ("import torch\n\n\nclass Trainer:\n    def make_experience(self, prompts):\n"
         "        samples = self.model.generate(prompts)\n        logprobs = self.model(samples).log_softmax(-1)\n"
         "        self.store.push(samples.cpu(), logprobs.cpu())\n"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
        "    torch.save(model.cpu().state_dict(), \"model.pt\")\n"),
    )
    invalid = (
        Invalid(training_script("history.append(loss.detach().cpu())", header="history = []")),
        Invalid(training_script("pred = model(x).argmax(1).to(\"cpu\")")),
        # NaturalSpeech's learnable upsampling: rounded duration sums made a CPU LongTensor, then moved back
        Invalid(training_script("ends = torch.round(torch.cumsum(x, dim=-1)).type(torch.LongTensor).to(device)")),
        # MMGeneration's translation models: images kept for visualisation in a dict made empty by `dict()`
        Invalid(training_script("images = dict()\nimages[\"pred\"] = out\nshown = images[\"pred\"].cpu()")),
        # InstantMesh's zero123plus step: each generated image made a PIL image for the CLIP processor
        Invalid(training_script("out = model(x)\n"
                                "images = [v2.functional.to_pil_image(out[i]) for i in range(len(out))]",
                                header="from torchvision.transforms import v2")),
        Invalid(training_script("top = to_numpy(model(x)).argmax(1)",
                                header="\n\ndef to_numpy(x):\n    return x.detach().cpu().numpy()"), count=2),  # and the converter
    )

    message_helper = (
        "`{func}(...)` reads its tensor argument to host memory (the project's `{func}` calls `.cpu()` on it) every "
        "step, waiting for the GPU to finish"
    )

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        return bool(facts.read_calls)  # `to_numpy(pred)`, a project's converter, has none of the rule's words

    def __init__(self, context) -> None:
        super().__init__(context)
        self._converters = by_callee(context.facts.read_calls)  # the project's converters called in this file

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if self._converters and (read := self._converters.get(dotted_name(func) or "")) is not None:
            self._check_converter_call(node, *read)
            return
        if self._library_read(node):
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "cpu" and not node.args:
            call = ".cpu()"
        elif method == "to" and node.args and cpu_target(node) and not _truthy(keyword_arg(node, "non_blocking")):
            call = ".to(\"cpu\")"  # with `non_blocking=True` the copy goes to pinned memory and the host does not wait
        elif method == "type" and len(node.args) == 1 and (tensor_type := self._cpu_tensor_type(node.args[0].value)):
            call = f".type({tensor_type})"  # a legacy CPU tensor type is a CPU tensor: a device tensor is copied over
        else:
            return
        if call.startswith(".type(") and (self.context.location_of(func.value) != "device" or self._cpu_side(node)):
            return  # a loader's batch is still on the CPU: `imgs.type(torch.HalfTensor)` only casts it
        if self.context.is_host_value(func.value) or self._feeds_numpy_metric() or self.in_per_tensor_loop():
            return
        function = self.context.enclosing_function()
        if function is not None and name_parts(function.name.value) & _EXPERIENCE_PARTS and not self.context.innermost_loop():
            return  # the rollout's batch copied once into the host store; one copy per sample in a loop still counts
        self.report(node, self.message.format(call=call))

    def _cpu_side(self, call: cst.Call) -> bool:
        """`y.type(torch.cuda.FloatTensor) if use_gpu else y.type(torch.FloatTensor)` (las-pytorch's solver): the CPU
        type is the run without a GPU, where the tensor is on the CPU already."""
        parent = self.context.parent()
        return isinstance(parent, cst.IfExp) and parent.orelse is call and isinstance(parent.body, cst.Call) \
            and last_name(parent.body.func) == "type" and len(parent.body.args) == 1 \
            and is_cuda_tensor_type(parent.body.args[0].value, self.context, set())

    def _cpu_tensor_type(self, value: cst.BaseExpression) -> str | None:
        """`torch.LongTensor`, `"torch.FloatTensor"`: a legacy tensor type of the CPU (not `torch.cuda.LongTensor`,
        nor a dtype such as `torch.long`); its text, else None."""
        if isinstance(value, cst.SimpleString):
            name = value.evaluated_value if isinstance(value.evaluated_value, str) else ""
        else:
            name = self.context.resolve(value) or ""
        return name if name in LEGACY_CPU_TENSOR_TYPES else None

    def _library_read(self, call: cst.Call) -> bool:
        """`v2.functional.to_pil_image(images[i])` (InstantMesh's zero123plus step, per image): torchvision copies the
        tensor to the host to make a PIL image. Reported (when the tensor is no host value); True for such a call."""
        if not call.args or last_name(call.func) != "to_pil_image":  # (no import lookup for every call of the file)
            return False
        resolved = self.context.resolve(call.func) or ""
        if resolved not in _TO_HOST_FUNCTIONS:
            return False
        if not self.context.is_host_value(call.args[0].value):  # (one copy per image, also in a comprehension)
            self.report(call, self.message.format(call=f"{resolved.rsplit('.', 1)[-1]}(...)"))
        return True

    def _check_converter_call(self, call: cst.Call, positions: tuple[int, ...], keywords: tuple[str, ...]) -> None:
        """`to_numpy(pred_heatmaps)` in the step, where the project's `to_numpy` does `x.detach().cpu().numpy()`: a
        blocking copy of each argument it reads that is no host value."""
        read = arguments_at(call, positions, keywords)
        if self.in_per_tensor_loop() or not read or all(self.context.is_host_value(value) for value in read):
            return
        self.report(call, self.message_helper.format(func=dotted_name(call.func)))

    def _feeds_numpy_metric(self) -> bool:
        """`metric(y, t.cpu().numpy())`: numpy/sklearn metrics on the host are GPL2xx's finding."""
        chain = self.context.ancestors
        if len(chain) < 5:
            return False
        attribute, call, arg, outer = chain[-2], chain[-3], chain[-4], chain[-5]
        if not (isinstance(attribute, cst.Attribute) and attribute.attr.value == "numpy" and isinstance(call, cst.Call)):
            return False
        if not (isinstance(arg, cst.Arg) and isinstance(outer, cst.Call)):
            return False
        resolved = self.context.resolve(outer.func) or ""
        return resolved.startswith(("sklearn.", "numpy.", "np.", "scipy."))


def _truthy(arg: cst.Arg | None) -> bool:
    return arg is not None and not is_false(arg.value)
