"""Does a file show any sign of a GPU? A training script (it calls backward) that never names a device, an
accelerator or a distributed backend runs on the CPU: it has no GPU to wait for and no kernels to launch, so the
rules whose cost exists only on a GPU (`Rule.gpu_only`) stay silent there. Helper modules (losses, matchers) and
modules another project file imports where the project names a device (an algorithm's `update()` that calls
backward: `FileFacts.device_fed`) get their tensors from elsewhere and are checked as usual."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import dotted_name, last_name
from gpulint.project.vocab import GPU_EVIDENCE

_GPU_PACKAGES = ("accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "deepspeed", "torch.distributed",
                 "torch_xla", "apex", "torch.cuda")


class DeviceEvidence:
    """A shared helper (`Rule.shared`): whether the file calls backward, and whether it names a device."""

    def __init__(self, context) -> None:
        self.gpu = False
        self.backward = False
        self._classes: list[cst.ClassDef] = []
        # The classes that set `self.device` to the CPU, and those that set it to anything else
        self._cpu_device: set[cst.ClassDef] = set()
        self._other_device: set[cst.ClassDef] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._classes or not any(dotted_name(t.target) == "self.device" for t in node.targets):
            return
        cls = self._classes[-1]
        (self._cpu_device if _names_the_cpu(node.value) else self._other_device).add(cls)

    def cpu_classes(self) -> frozenset[cst.ClassDef]:
        """The classes that fix `self.device` to the CPU and never set it otherwise (pfrl's A3C and ACER agents,
        hogwild learners whose tensors all live on the CPU)."""
        return frozenset(self._cpu_device - self._other_device)

    def leave_Call(self, call: cst.Call) -> None:
        method = last_name(call.func)
        if method == "backward":
            self.backward = True
        if self.gpu:
            return
        if method in ("to", "cuda") or GPU_EVIDENCE.search(dotted_name(call.func) or ""):
            self.gpu = True
            return
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in ("device", "non_blocking", "pin_memory") \
                    and not _follows_a_tensor(arg):
                self.gpu = True
                return

    def visit_Param(self, param: cst.Param) -> None:
        if not self.gpu and GPU_EVIDENCE.search(param.name.value):
            self.gpu = True  # `def train(model, loader, device)`

    def shows_gpu(self, context) -> bool:
        """Does the file name a device, move tensors to one, or import a package that does?"""
        return self.gpu or any(context.imports.imported(package) for package in _GPU_PACKAGES)

    def cpu_only(self, context) -> bool:
        """A training script with no sign of a GPU."""
        return self.backward and not self.shows_gpu(context)


def _names_the_cpu(value: cst.BaseExpression) -> bool:
    """`torch.device("cpu")` or `"cpu"`."""
    if isinstance(value, cst.Call) and last_name(value.func) == "device" and len(value.args) == 1:
        value = value.args[0].value
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"


def _follows_a_tensor(arg: cst.Arg) -> bool:
    """`device=values.device`: made where another tensor is, which names no device (learn2learn's CPU-only RL
    examples build `torch.zeros(1, device=values.device)`)."""
    value = arg.value
    return arg.keyword is not None and arg.keyword.value == "device" and isinstance(value, cst.Attribute) \
        and value.attr.value == "device"
