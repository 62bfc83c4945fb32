"""GPL413 host-list-index-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


class HostListIndexInStep(SyncRule):
    code = "GPL413"
    name = "host-list-index-in-step"
    message = ("indexing a device tensor with a Python list (or a NumPy array) copies the indices to the device with "
               "a blocking copy every step; build the index tensor on the device once, or use a slice")
    # `x[:, [0]]`, `x[[1, 2]]`, or a name bound to a list display (`leaf = [411, 2445]`, `ids = [i - 1 for i in ...]`)
    # or to the batches of indices a `BatchSampler` yields, or to a NumPy array of positions (`np.random.randint`)
    triggers = ("[[", ", [", "= [", "BatchSampler", "randint(", "choice(", "permutation(", "arange(", "argsort(",
                "flatnonzero(")
    docs = RuleDocs(
        what_it_does="Flags a tensor that lives on the device indexed (read or written) with a Python list: a list "
        "display of host values (`x[:, [0]]`, `x[..., [2, 1, 0]]`), a list comprehension, a name its function "
        "binds to one (`leaf = [411, 2445, 5905]`, then `v[:, leaf]`) or an attribute its class sets only to lists "
        "(`self.parents = [0, 0, 1]` in `__init__`, then `joints[:, self.parents]`) or to what a project function "
        "returns as a list (`return ts.tolist()`: a diffusion schedule's sampled time steps), to a batch of indices a `BatchSampler` "
        "yields (PPO's minibatches) or to a NumPy array of positions (`idxes = np.random.randint(0, n, size=b)`, a "
        "replay buffer's sampled rows), in code that runs every step, ungated.",
        why_slow="PyTorch turns the list into an index tensor on the CPU and copies it to the indexed tensor's "
        "device with a blocking copy from pageable memory: the host waits for every kernel queued before it. A "
        "3D-pose model indexing its joints this way at each level of its kinematic tree waits that many times a step.",
        example="for x, y in loader:\n    joints = model(x.to(device, non_blocking=True))\n"
        "    root_relative = joints - joints[:, [0]]",
        use_instead="A slice keeps the dimension without an index tensor (`joints[:, 0:1]`); otherwise build the "
        "index once on the device (`leaf = torch.tensor([411, 2445], device=device)` outside the loop, or a "
        "registered buffer) and index with it; draw sampled rows on the device (`torch.randint(0, n, (b,), "
        "device=device)`).",
        fix_safety="No fix: a slice is equivalent only for a run of consecutive indices, and where to build a device "
        "index depends on the code around it.",
        false_positives=known_false_positives("A receiver gpulint takes for a device tensor that is a NumPy array or "
        "a CPU tensor: add `# noqa: GPL413`."),
    )
    valid = (
        # an attribute a method also sets to what its callers pass (`set_select(indexes)`): not known to be a list
        ("import torch\n\n\nclass EnsembleLinear(torch.nn.Module):\n    def __init__(self, n):\n"
         "        super().__init__()\n        self.weight = torch.nn.Parameter(torch.randn(n, 8, 4))\n"
         "        self.select = list(range(n))\n\n    def set_select(self, indexes):\n        self.select = indexes\n\n"
         "    def forward(self, x):\n        return x @ self.weight[self.select]\n\n\n"
         "def train(model, loader, optimizer, device):\n    ensemble = EnsembleLinear(3).to(device)\n"
         "    for x, y in loader:\n        ensemble(x.to(device, non_blocking=True)).sum().backward()\n"
         "        optimizer.step()\n"),
        training_script("joints = model(x).view(x.shape[0], -1, 2)\nroot_relative = joints - joints[:, 0:1]"),
        training_script("joints = model(x).view(x.shape[0], -1, 2)\nleaf = torch.tensor([0, 1], device=device)\n"
                        "picked = joints[:, leaf]"),
        training_script("boxes = np.zeros((4, 5))\nswapped = boxes[:, [1, 0, 3, 2]]", header="import numpy as np"),
        training_script("if step % 100 == 0:\n    joints = model(x).view(x.shape[0], -1, 2)\n"
                        "    print(joints[:, [0, 1]].sum())"),
        training_script("rows = np.random.randint(0, 4, size=2)\npicked = np.zeros((4, 5))[rows]",
                        header="import numpy as np"),
    )
    invalid = (
        # a diffusion schedule's time steps drawn as a list (`return ts.tolist()`, the project model says so), then
        # used to index the schedule's buffer from the model that holds it
        Invalid("import torch\n\n\nclass Schedule(torch.nn.Module):\n    def __init__(self, n):\n"
                "        super().__init__()\n        self.n = n\n"
                "        self.register_buffer(\"alpha_bars\", torch.linspace(0.9, 0.1, n))\n\n"
                "    def uniform_sample_t(self, batch_size):\n"
                "        return torch.randint(1, self.n, (batch_size,)).numpy().tolist()\n\n\n"
                "class Diffusion(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.sched = Schedule(100)\n        self.net = torch.nn.Linear(8, 8)\n\n"
                "    def get_loss(self, x):\n        t = self.sched.uniform_sample_t(x.shape[0])\n"
                "        alpha_bar = self.sched.alpha_bars[t]\n        return (self.net(x) * alpha_bar[:, None]).sum()\n\n\n"
                "def train(model, loader, optimizer, device):\n    diffusion = Diffusion().to(device)\n"
                "    for x, y in loader:\n        diffusion.get_loss(x.to(device, non_blocking=True)).backward()\n"
                "        optimizer.step()\n"),
        # a pose head's kinematic tree kept as a list attribute (`self.parents`), indexed in every forward
        Invalid("import torch\n\n\nclass PoseHead(torch.nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = torch.nn.Linear(8, 6)\n        self.parents = [0, 0, 1]\n\n"
                "    def forward(self, x):\n        joints = self.fc(x).view(-1, 3, 2)\n"
                "        return joints - joints[:, self.parents]\n\n\n"
                "def train(model, loader, optimizer, device):\n    head = PoseHead().to(device)\n"
                "    for x, y in loader:\n        head(x.to(device, non_blocking=True)).sum().backward()\n"
                "        optimizer.step()\n"),
        # HybrIK's pose heads: joints made root-relative with a list index, in every forward
        Invalid(training_script("joints = model(x).view(x.shape[0], -1, 2)\nroot_relative = joints - joints[:, [0]]")),
        Invalid(training_script("joints = model(x).view(x.shape[0], -1, 2)\nleaf = [0, 1]\n"
                                "picked = joints[:, leaf].clone()")),
        Invalid(training_script("joints = model(x).view(x.shape[0], -1, 2)\nparents = [0, 0]\n"
                                "joints = joints.clone()\njoints[:, [i + 1 for i in parents]] = 0.0")),
        # PPO's minibatches (varibad's rollout storage): `BatchSampler` yields each batch of indices as a list
        Invalid(training_script("joints = model(x).view(x.shape[0], -1, 2)\n"
                                "for rows in BatchSampler(SubsetRandomSampler(range(x.shape[0])), 2, drop_last=True):\n"
                                "    picked = joints[rows]",
                                header="from torch.utils.data import BatchSampler, SubsetRandomSampler")),
        # an RL replay buffer kept on the device, sampled with NumPy's random positions every update
        Invalid(training_script("rows = np.random.randint(0, x.shape[0], size=16)\npicked = x.to(device)[rows]",
                                header="import numpy as np")),
    )

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not any(isinstance(element.slice, cst.Index) and self._host_list(element.slice.value)
                   for element in node.slice):
            return
        receiver = node.value
        if self.context.is_host_value(receiver) or not self.tensors.is_tensor(receiver) \
                or self.tensors.named_only(receiver):
            return
        self.report(node)

    def _host_list(self, index: cst.BaseExpression) -> bool:
        """`[0]`, `[2, 1, 0]`, `[i + 1 for i in parents]`, or a name bound to a list display; not a list holding
        tensors (`x[[rows, cols]]` indexes with tensors already where `x` is)."""
        if isinstance(index, cst.List):
            return bool(index.elements) and not any(
                isinstance(element, cst.StarredElement) or self.tensors.is_tensor(element.value)
                for element in index.elements)
        if isinstance(index, cst.ListComp):
            return not self.tensors.is_tensor(index.elt)
        return isinstance(index, (cst.Name, cst.Attribute)) and self.tensors.is_list(index) \
            or isinstance(index, cst.Name) and self.tensors.is_index_array(index)
