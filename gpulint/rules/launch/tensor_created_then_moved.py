"""GPL504 tensor-created-then-moved."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, name_parts, root_name
from gpulint.linter.rule import Invalid, Replace, RuleDocs
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.project.local import tuple_kinds
from gpulint.rules.common import (
    HOST_DATA_CONSTRUCTORS, by_callee, in_data_class, is_number, keyword_arg, new_keyword_arg,
)
from gpulint.rules.examples import training_script
from gpulint.rules.launch.helpers import WhereItRuns, one_time_branch

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


# Factories whose values do not depend on the device (zeros on the CPU are zeros on the GPU).
DETERMINISTIC_FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "arange", "eye", "linspace", "logspace", "tril_indices", "triu_indices",
     "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"}
)
# torch functions whose result lives where their tensor argument does: `torch.exp(torch.arange(n))` is on the CPU.
SAME_DEVICE_FUNCTIONS = frozenset(
    {"exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "sqrt", "rsqrt", "pow", "sigmoid", "tanh", "abs",
     "neg", "reciprocal", "floor", "ceil", "round", "outer", "polar", "sinc", "clamp", "cumsum", "cumprod", "tril",
     "triu", "flip", "roll", "diag", "square",
     # draws from probabilities it is given, where they are (`torch.bernoulli(torch.zeros_like(c) + p)`)
     "bernoulli"}
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
     "contiguous", "long", "float", "int", "half", "bool", "double", "tril", "triu", "unfold", "clone", "detach"}
)
# Wrappers handing back a tensor of what they wrap, where it is: the deprecated autograd `Variable`, and
# `torch.Tensor(t)` of a tensor (Dual-Path-RNN's `torch.Tensor(torch.zeros(B, N, gap))`).
_TENSOR_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.Variable",
                              "torch.Tensor"})
# In-place fills applied right after creation: `torch.LongTensor(n).random_(8)`.
FILLS = frozenset({"random_", "uniform_", "normal_", "fill_", "zero_", "bernoulli_", "exponential_", "geometric_"})
CREATION_WORDS = tuple(
    f"{name}(" for name in sorted(DETERMINISTIC_FACTORIES | RANDOM_FACTORIES | LEGACY_CONSTRUCTORS)
) + ("random.", "new_tensor(", "[range(")
NUMPY_RANDOM_MESSAGE = (
    "random numbers drawn with numpy on the CPU and copied to the device; draw them on the device with "
    "`torch.randn(..., device=...)` / `torch.rand(..., device=...)`"
)
# Factories whose first argument is a value, not a size: `torch.arange(0, n)`, `torch.randint(0, 10, (n,))`,
# `torch.normal(0, 1, size=(n,))` (a mean).
_FIRST_ARGUMENT_NOT_A_SIZE = frozenset({"full", "arange", "linspace", "logspace", "randint", "normal"})
CONSTANT_NEW_TENSOR_MESSAGE = (
    "`new_tensor` of constant host data copies it to the device on every call; build it once (a registered buffer, "
    "or a module-level tensor moved to the device once)"
)
CPU_ATTRIBUTE_MESSAGE = (
    "`self.{attr}` is built on the CPU in `__init__` and copied to the device on every call (a plain attribute, which "
    "`module.to(device)` does not move); register it as a buffer, or build it on the device once"
)
CPU_INDEX_MESSAGE = (
    "a tensor built on the CPU indexes a tensor that may be on the device: the index is copied to the device on every "
    "call; build it there (`torch.arange(n, device=x.device)`)"
)
NUMPY_INDEX_MESSAGE = (
    "the numpy array `{name}` indexes device tensors: each indexing turns it into a CPU tensor and copies it to the "
    "device; move it once (`torch.as_tensor({name}, device=device)`) or draw the indices there "
    "(`torch.randperm(n, device=device)`)"
)
FILLED_FROM_DEVICE_MESSAGE = (
    "writing into `{name}`, a tensor built on the CPU and then moved to the device, copies device data to the host "
    "(a blocking copy) before it goes back; build `{name}` on the device"
)
MOVED_BY_CALLEE_MESSAGE = (
    "the tensor is created on the CPU and `{callee}` copies it to the device on every call; pass `device=` to the "
    "factory so it is created there"
)
RETURNED_ON_CPU_MESSAGE = (
    "`{name}` is a tensor `{callee}` returns on the CPU (built from host data), copied to the device on every call; "
    "have `{callee}` build it on the device"
)
# `torch.zeros(` and the other factories (`may_report_in`: a tensor handed to a function that moves it)
_FACTORY_CALLS = tuple(f"{name}(" for name in sorted(DETERMINISTIC_FACTORIES | RANDOM_FACTORIES))
# Factories whose tensors serve as indices (`logits[torch.arange(n), labels]`, `x[torch.randperm(n)]`).
_INDEX_FACTORIES = frozenset({"arange", "randperm", "randint"})
# numpy's, whose arrays index device tensors in RL minibatch loops (`b_obs[mb_inds]`)
_NUMPY_INDEX_FACTORIES = frozenset({"numpy.arange", "numpy.random.permutation", "numpy.random.choice",
                                    "numpy.random.randint"})
_MOVES_SELF_ATTRIBUTE = re.compile(r"\bself\.\w+\.(?:to|cuda)\(")
_DEVICE_WORD = re.compile(r"(device|dev$|^dev|rank|gpu|cuda)", re.IGNORECASE)


# torch functions giving several tensors, each where its inputs are
# (`torch.meshgrid(torch.arange(H), torch.arange(W))`).
_SEVERAL_OF_THE_SAME_PLACE = frozenset({"torch.meshgrid", "torch.broadcast_tensors"})
# A program that builds its model under a GPU default device, then makes the CPU the default again (LLaMA-Adapter).
_BUILT_ON_THE_GPU = ("def build():\n    torch.set_default_tensor_type(torch.cuda.HalfTensor)\n"
                     "    net = torch.nn.Linear(8, 8)\n    torch.set_default_tensor_type(torch.FloatTensor)\n    return net")


class CreatedOnCpuThenMoved(WhereItRuns):
    code = "GPL504"
    gpu_only = True  # kernel launches saved: none on the CPU
    name = "tensor-created-then-moved"
    message = (
        "the tensor is created on the CPU and then copied to the device; pass `device=` to the factory so it is "
        "created there"
    )
    # (and the index factories: `rewards[jidx]` with `jidx = torch.arange(0, bsz, 2)` moves nothing itself)
    triggers = (".cuda(", ".to(", ".type_as(", ".type(", "random.", "new_tensor(", "arange(", "randperm(", "randint(")
    # What is moved was made here by a torch factory (`torch.zeros(`, `torch.LongTensor(n).random_(`), or by numpy's
    # random module.
    requires = (CREATION_WORDS,)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags `torch.zeros(...).cuda()`, `torch.arange(n).view(-1, 1).to(device)`, "
        "`(torch.arange(n) + offset).cuda()`, `torch.LongTensor(n).random_(k).to(device)` and the like (factories "
        "`zeros`, `ones`, `empty`, `full`, `arange`, `eye`, `linspace`, `rand*`, the window functions such as "
        "`hann_window`), what is computed from them on the CPU before the move (`torch.exp(torch.arange(n)).to(dev)`, "
        "`torch.eye(n)[y].to(dev)`, "
        "`counts = torch.ones(n) * k` then `counts.to(z.device)` (and each store of a tensor not on the host into "
        "such a buffer before it is moved: `x_pad[:, :n] = x` copies `x` to the host first), "
        "`torch.zeros(n).fill_(s).type_as(x[0])`, "
        "`Variable(torch.zeros(n)).type(x.type())`, `torch.Tensor(torch.zeros(n)).type(x.type())`), "
        "`x.new_tensor([0.5, 0.25])` of constant host data (a number too, `x.new_tensor(0.0)`, or a setting, "
        "`x.new_tensor(args.alpha)`) or of a tensor built on the CPU "
        "(`x.new_tensor(torch.arange(n))`), CPU-built index tensors (also a slice of a CPU permutation, a PPO "
        "minibatch's `perm[start:end]`) that index a tensor not known to "
        "be on the host (`logits[torch.arange(n), labels]`: the index is copied over), numpy index arrays that index a "
        "device tensor (`b_obs[mb_inds]` with `mb_inds` a slice of `np.arange(n)` or `np.random.permutation(n)`), "
        "attributes `__init__` builds so or wraps from host data "
        "(`self.base = torch.tensor(offsets)`) and a method moves every call (a noise schedule's "
        "`self.betas.to(x.device)`, a head's `self.base.type_as(x)`), tensors built so and handed "
        "to a "
        "project function that moves that parameter to the device as it is (`cross_entropy_logits(d, "
        "torch.zeros(n))`, whose `target.type_as(logits)` copies it; the project model finds such functions), and "
        "a CPU tensor a project function returns and the caller moves (`index, lam = mixup(n)`, where `mixup` "
        "builds `lam` with `torch.FloatTensor(np.random.beta(...))`, then `lam.to(x.device)`; the project model says "
        "what it returns), CPU-drawn indices sorted before they index (`torch.randperm(n)[:k].sort().values`), and "
        "numpy random numbers wrapped in a "
        "device tensor type (`Tensor(np.random.normal(...))` with `Tensor = torch.cuda.FloatTensor`). It counts code "
        "inside the training loop, in a `forward`, and in helpers that hold no training loop; the setup before a "
        "training loop is not flagged, nor is a project that makes the GPU torch's default device "
        "(`torch.set_default_device(\"cuda\")`, `torch.set_default_tensor_type(\"torch.cuda.FloatTensor\")`), "
        "where a factory without `device=` builds on the GPU.",
        why_slow="Host-device round trip: the tensor is allocated and filled by the CPU, then copied from pageable "
        "memory with a host-to-device transfer that blocks the Python thread until the copy is done, and the CPU "
        "buffer is thrown away. With `device=` the GPU allocates it from its cache and fills it with one kernel, "
        "asynchronously.",
        example="mask = torch.ones(seq_len, seq_len).tril().cuda()\npos = torch.arange(t).to(x.device)",
        use_instead="pos = torch.arange(t, device=x.device)\n"
        "# constants: self.register_buffer(\"mean\", torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1))",
        fix_safety="Safe for deterministic factories (`zeros`, `ones`, `full`, `arange`, `eye`, `linspace`, `empty`): "
        "the fix adds `device=` and removes the move, values are identical. Unsafe for random factories (`rand`, "
        "`randn`, `randint`, `randperm`): the numbers then come from the device's generator, not the CPU's, so a "
        "seeded run draws different values. No fix when the factory already names a device or the move also changes "
        "the dtype, when the tensor is computed from the factory before the move, and for `new_tensor` of constants "
        "(hoisting it needs a place to keep it).",
        false_positives="A helper called only at setup or every N steps from another module (gpulint cannot see the "
        "caller): add `# noqa: GPL504`. `.to(x)` with `x` named like a tensor is flagged without a fix; with `x` "
        "named like a dtype it is not flagged. Zero-element tensors and pinned staging buffers are skipped.",
    )
    valid = (
        # the program makes the GPU torch's default device: the factory builds there, the move moves nothing
        training_script("noise = torch.randn(x.shape[0], 8).to(device)", header='torch.set_default_device("cuda")'),
        training_script("picked = out[torch.arange(x.shape[0]), y]",
                        header='torch.set_default_tensor_type("torch.cuda.FloatTensor")'),
        # a sampler shuffling the dataset's CPU indices once an epoch (LoFTR's `RandomConcatSampler`)
        "import torch\nfrom torch.utils.data import Sampler\n\n\nclass ConcatSampler(Sampler):\n"
        "    def __iter__(self):\n        indices = []\n        for low, high in self.ranges:\n"
        "            indices.append(torch.randperm(high - low) + low)\n        indices = torch.cat(indices)\n"
        "        order = torch.randperm(len(indices))\n        return iter(indices[order].tolist())\n\n\n"
        "def train(model, dataset, opt, device):\n"
        "    loader = torch.utils.data.DataLoader(dataset, sampler=ConcatSampler(), pin_memory=True)\n"
        "    for x in loader:\n        model(x.to(device, non_blocking=True)).mean().backward()\n        opt.step()\n",
        # numpy indices into a numpy buffer: no device involved
        training_script("buffer = np.zeros((64, 4))\ninds = np.random.permutation(64)\nrows = buffer[inds]",
                        header="import numpy as np"),
        # a slice of a CPU permutation that indexes a CPU tensor: nothing is copied
        training_script("rows = torch.zeros(64, 4)\nperm = torch.randperm(64)\nmb = perm[0:8]\npicked = rows[mb]"),
        # one index drawn by numpy is a number, not an array (nerf-pytorch's `img_i = np.random.choice(i_train)`)
        training_script("img_i = np.random.choice(x.shape[0])\nrow = x[img_i]", header="import numpy as np"),
        training_script("pos = torch.arange(128, device=\"cuda\")"),
        "import torch\n\nbuf = torch.zeros(1024).cuda()\n",
        training_script("x = torch.zeros(4).to(torch.float16)"),
        training_script("x = torch.tensor([1, 2, 3]).to(\"cpu\")"),
        ("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
         "        return x + torch.arange(x.size(1), device=x.device)\n"),
        ("import torch\n\ndef train(model, loader, opt, rank):\n    total = torch.zeros(2).to(rank)\n"
         "    for batch in loader:\n        model(batch).backward()\n        opt.step()\n"),
        training_script("out = torch.empty(0).to(x.device)"),
        training_script("probs = out.softmax(-1).cpu().numpy()\npicked = probs[range(len(probs)), y.cpu().numpy()]"),
        training_script("buf = torch.ByteTensor(storage).to(\"cuda\")"),
        training_script("pos = torch.arange(64, device=x.device).type_as(loss)"),
        training_script("if len(state) == 0:\n    state[\"row\"] = torch.zeros(64).to(loss)"),
        ("import torch\n\nclass Loss(torch.nn.Module):\n    def forward(self, x):\n        if self.eye is None:\n"
         "            self.eye = torch.eye(x.shape[0]).to(x.device)\n        return (x * self.eye).sum()\n"),
        training_script("labels = torch.arange(8)\nlabels = batch_labels\nlabels = labels.to(device)"),
        training_script("window = torch.hann_window(400, device=x.device)"),
        training_script("scale = x.new_tensor(step_sizes)"),
        training_script("counts = torch.ones(4, device=device) * x.shape[0]\ncounts = counts.to(x.device)"),
        training_script("picked = model(x)[torch.arange(len(y), device=x.device), y]"),
        training_script("if key not in windows:\n    windows[key] = torch.hann_window(400).to(device)",
                        header="windows = {}\nkey = 400"),
        training_script("order = np.arange(8)\nsizes = [4, 5, 6][order[0]]", header="import numpy as np"),
        "import torch\n\n\nclass Scheduler:\n    def __init__(self, n):\n        self.betas = torch.linspace(1e-4, 0.02, n)\n        self.keep = torch.cumprod(1.0 - self.betas, dim=0)\n\n    def add_noise(self, x, t):\n        self.keep = self.keep.to(x.device)\n        return x * self.keep[t].view(-1, 1)\n\n\ndef main(model, loader, opt, device):\n    sched = Scheduler(1000)\n    for x in loader:\n        x = x.to(device, non_blocking=True)\n        t = torch.randint(0, 1000, (x.shape[0],), device=device)\n        model(sched.add_noise(x, t)).mean().backward()\n        opt.step()\n",
        # the same attribute cast to a tensor known to be on the host: a dtype cast, nothing is copied
        "import numpy as np\nimport torch\n\n\nclass Head(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.base = torch.tensor(np.arange(18.0))\n\n"
        "    def forward(self, x):\n        return x.sum() + self.base.type_as(x.cpu()).sum().item()\n\n\n"
        "def main(loader, opt, device):\n    head = Head().to(device)\n    for x in loader:\n"
        "        head(x.to(device, non_blocking=True)).backward()\n        opt.step()\n",
    )
    invalid = (
        # the GPU is the default device only while the model is built (LLaMA-Adapter), then the CPU again
        Invalid(training_script("noise = torch.randn(x.shape[0], 8).to(device)", header=_BUILT_ON_THE_GPU),
                fixed=training_script("noise = torch.randn(x.shape[0], 8, device=device)", header=_BUILT_ON_THE_GPU)),
        # a flow-warping grid: both halves of a CPU meshgrid moved every step
        Invalid("import torch\n\n\ndef flow_warp(x, flow):\n    H, W = x.shape[-2:]\n"
                "    h_grid, w_grid = torch.meshgrid(torch.arange(H), torch.arange(W))\n"
                "    grid = torch.stack((w_grid.to(flow), h_grid.to(flow))) + flow\n"
                "    return torch.nn.functional.grid_sample(x, grid.permute(0, 2, 3, 1))\n\n\n"
                "def train(model, loader, opt):\n    for x, flow in loader:\n"
                "        x, flow = x.cuda(non_blocking=True), flow.cuda(non_blocking=True)\n"
                "        flow_warp(model(x), flow).mean().backward()\n        opt.step()\n", count=2),
        # a VAE's reparameterization trick, sampled on the CPU for a device mean at every step (its name is also
        # that of RepVGG's one-off branch fusion: the step calling it decides)
        Invalid("import torch\n\n\ndef reparameterize_gaussian(mean, logvar):\n"
                "    eps = torch.randn(mean.size()).to(mean)\n    return mean + eps * torch.exp(0.5 * logvar)\n\n\n"
                "def train(model, loader, optimizer, device):\n    for x in loader:\n"
                "        mean, logvar = model(x.to(device, non_blocking=True))\n"
                "        z = reparameterize_gaussian(mean, logvar)\n        z.pow(2).mean().backward()\n"
                "        optimizer.step()\n"),
        # a pairwise reward model's loss (RLHF reward-model recipes): the chosen and rejected rows picked with
        # positions made on the CPU, in a file that moves nothing itself
        Invalid(
            "import torch\nimport torch.nn as nn\nfrom transformers import Trainer\n\n\n"
            "class RewardTrainer(Trainer):\n    def compute_loss(self, model, inputs, return_outputs=False):\n"
            "        rewards = model(input_ids=inputs[\"input_ids\"])[0]\n"
            "        jidx = torch.arange(0, rewards.size(0), 2)\n        kidx = jidx + 1\n"
            "        return -nn.functional.logsigmoid(rewards[jidx] - rewards[kidx]).mean()\n",
            count=2,
        ),
        # CPM-Bee's rotary embedding: `inv_freq` cast in `__init__` (still on the CPU), moved in every forward
        Invalid("import torch\n\n\nclass Rotary(torch.nn.Module):\n    def __init__(self, dim, dtype=torch.half):\n"
                "        super().__init__()\n        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))\n"
                "        inv_freq = inv_freq.to(dtype)\n        self.inv_freq = inv_freq\n\n"
                "    def forward(self, x):\n        return x * self.inv_freq.to(device=x.device, dtype=x.dtype)\n"),
        # StyleTTS's encoders: the LSTM's output padded in a CPU buffer, then moved back (the fill and the move)
        Invalid("import torch\n\n\nclass Encoder(torch.nn.Module):\n    def forward(self, x, mask):\n"
                "        x = self.lstm(x)\n        x_pad = torch.zeros([x.shape[0], x.shape[1], mask.shape[-1]])\n"
                "        x_pad[:, :, :x.shape[-1]] = x\n        return x_pad.to(x.device)\n", count=2),
        Invalid("import torch\n\n\nclass Decoder(torch.nn.Module):\n    def forward(self, signal):\n"
                "        frame = torch.arange(0, 64).unfold(0, 4, 2)\n        frame = signal.new_tensor(frame).long()\n"
                "        return signal.new_zeros(64, 4).index_add_(0, frame.view(-1), signal)\n"),
        # a timestep embedding's frequencies: negated and scaled on the CPU, then moved
        Invalid("import torch\n\n\nclass TimeEmbedding(torch.nn.Module):\n    def forward(self, t):\n"
                "        freqs = torch.exp(-torch.arange(64, dtype=torch.float32) / 64).to(t.device)\n"
                "        return t[:, None] * freqs[None]\n"),
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
        Invalid(training_script("logits = model(x)\npicked = logits[torch.arange(len(y)), y]")),
        Invalid(training_script("rows = torch.arange(y.shape[0])\npicked = model(x)[rows, y]")),
        Invalid(
            "import torch\n\nclass M(torch.nn.Module):\n    kind = \"byol\"\n\n    def forward(self, x):\n"
            "        if self.kind == \"byol\":\n            x = x + torch.ones((len(x), 1)).cuda()\n"
            "        return x.sum()\n",
            fixed="import torch\n\nclass M(torch.nn.Module):\n    kind = \"byol\"\n\n    def forward(self, x):\n"
            "        if self.kind == \"byol\":\n            x = x + torch.ones((len(x), 1), device=\"cuda\")\n"
            "        return x.sum()\n",
        ),
        Invalid(training_script("target = torch.LongTensor(16).random_(8).to(device)")),
        Invalid(training_script("logdet = torch.zeros(x.size(0)).to(dtype=x.dtype, device=x.device)")),
        Invalid(
            training_script("idx = torch.arange(16).view(-1, 1).to(device)"),
            fixed=training_script("idx = torch.arange(16, device=device).view(-1, 1)"),
        ),
        Invalid(training_script("labels = (torch.arange(8, dtype=torch.long) + 8 * rank).cuda()")),
        Invalid(training_script("labels = torch.cat([torch.arange(8) for _ in range(2)])\n"
                                "labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()\nlabels = labels.to(device)")),
        Invalid(
            training_script("window = torch.hann_window(400).to(x.device)"),
            fixed=training_script("window = torch.hann_window(400, device=x.device)"),
        ),
        Invalid(training_script("freqs = torch.exp(-0.5 * torch.arange(0, 16, 2)).to(device)")),
        Invalid(training_script("mask = torch.tril(torch.ones(8, 8)).to(x.device)")),
        Invalid(training_script("onehot = torch.eye(10)[y.cpu().long()].to(x.device)")),
        Invalid("import torch\n\n\nclass Scheduler:\n    def __init__(self, n):\n        self.betas = torch.linspace(1e-4, 0.02, n)\n        self.keep = torch.cumprod(1.0 - self.betas, dim=0)\n\n    def add_noise(self, x, t):\n        return x * self.keep.to(x.device)[t].view(-1, 1)\n\n\ndef main(model, loader, opt, device):\n    sched = Scheduler(1000)\n    for x in loader:\n        x = x.to(device, non_blocking=True)\n        t = torch.randint(0, 1000, (x.shape[0],), device=device)\n        model(sched.add_noise(x, t)).mean().backward()\n        opt.step()\n"),
        # a plain attribute wrapped from host data in `__init__`, cast to the input's type in every forward (RepPoints
        # heads' `self.dcn_base_offset = torch.tensor(offsets).view(...)`)
        Invalid("import numpy as np\nimport torch\n\n\nclass Head(torch.nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.conv = torch.nn.Conv2d(8, 18, 3)\n"
                "        self.base = torch.tensor(np.arange(18.0)).view(1, -1, 1, 1)\n\n"
                "    def forward(self, x):\n        return self.conv(x) - self.base.type_as(x)\n\n\n"
                "def main(loader, opt, device):\n    head = Head().to(device)\n    for x in loader:\n"
                "        head(x.to(device, non_blocking=True)).mean().backward()\n        opt.step()\n"),
        Invalid(training_script("mask = torch.ones(8, 8).tril().type(torch.ByteTensor).to(device)")),
        Invalid(training_script("counts = torch.ones((x.shape[0],)) * n_levels + 1\n"
                                "counts[:2] = torch.randint(1, n_levels, (2,))\ncounts = counts.to(x.device)",
                                header="n_levels = 8")),
        Invalid(training_script("picked = out[range(out.shape[0]), y]")),
        Invalid(training_script("strides = torch.zeros(1, out.shape[1]).fill_(8).type_as(x[0])")),
        Invalid(
            "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, features, mask=None):\n"
            "        if mask is None:\n            mask = torch.eye(features.shape[0]).to(features.device)\n"
            "        return (features @ features.T * mask).sum()\n",
            fixed="import torch\n\nclass M(torch.nn.Module):\n    def forward(self, features, mask=None):\n"
            "        if mask is None:\n            mask = torch.eye(features.shape[0], device=features.device)\n"
            "        return (features @ features.T * mask).sum()\n",
        ),
        Invalid(training_script("mean = x.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)\nx = x - mean")),
        # SimpleSAC's fixed temperature and zero losses: a scalar copied over (and waited for) at every update
        Invalid(training_script("alpha_loss = x.new_tensor(0.0)\nalpha = x.new_tensor(args.alpha_multiplier)\n"
                                "loss = loss + alpha * alpha_loss")),
        Invalid(
            "import numpy as np\nimport torch\n\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
            "for imgs, _ in dataloader:\n    z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))\n"
            "    loss = model(imgs, z)\n    loss.backward()\n    optimizer.step()\n"
        ),
        Invalid(
            "import torch\n\nclass Resampler:\n    def gather(self, local_ts, sizes):\n"
            "        return [torch.zeros(max(sizes)).to(local_ts) for _ in sizes]\n"
        ),
        # CleanRL's PPO minibatches: a numpy index array picks rows of device tensors
        Invalid(training_script("inds = np.arange(x.shape[0])\nnp.random.shuffle(inds)\nmb_inds = inds[:8]\n"
                                "picked = x[mb_inds]", header="import numpy as np")),
        # Lumina-T2X's flow-matching timesteps: drawn on the CPU in either branch, then moved to the batch's device
        Invalid(training_script("if uniform:\n    t = torch.rand((len(x),))\nelse:\n"
                                "    u = torch.normal(mean=0.0, std=1.0, size=(len(x),))\n"
                                "    t = 1 / (1 + torch.exp(-u))\n"
                                "t = t.to(x)\nloss = loss + (t * out.sum()).mean()", header="uniform = False")),
        # PaSST's mixup: a helper draws the weights on the CPU from numpy, the step moves them to the device
        Invalid(training_script(
            "index, lam = mixup(out.shape[0])\nlam = lam.to(out.device)\npicked = out * lam",
            header="import numpy as np\n\n\ndef mixup(size):\n    index = torch.randperm(size)\n"
                   "    lam = torch.FloatTensor(np.random.beta(0.3, 0.3, size))\n    return index, lam\n")),
        # a PPO update: each minibatch is a slice of a permutation drawn on the CPU, copied over at every indexing
        Invalid(training_script("perm = torch.randperm(x.shape[0])\nfor start in range(0, x.shape[0], 8):\n"
                                "    mb = perm[start:start + 8]\n    picked = x[mb]")),
        # PaSST's structured patchout: indices drawn and sorted on the CPU pick columns of the device batch
        Invalid(training_script("keep = torch.randperm(out.shape[1])[:4].sort().values\npicked = out[:, keep]")),
    )

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # also a method moving an attribute that `__init__` may have built on the CPU (`self.betas.to(x.device)`), and
        # one handing a factory's tensor to a project function that moves it (`loss(d, torch.zeros(n))`)
        return cls.has_words_in(code) or bool(class_name and _MOVES_SELF_ATTRIBUTE.search(code)) \
            or any(word in code for word in _FACTORY_CALLS)

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        # `loss(d, torch.zeros(n))` need not hold a move itself; `lam.to(x.device)` of a helper's CPU tensor no factory
        return bool(facts.move_calls) or bool(_host_returning(facts))

    @classmethod
    def may_report_for_facts(cls, code: str, facts) -> bool:
        # a function moving what a project function it calls returns on the host (`lam = lam.to(x.device)`)
        return (".to(" in code or ".cuda(" in code) and any(f"{callee}(" in code for callee in _host_returning(facts))

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._cpu_built: dict[int, set[str]] = {}  # per function: names of tensors built on the CPU from factories
        # Per (function, name) of a CPU-built tensor: the stores into it of values not on the host (`x_pad[:, :n] =
        # x`), with their enclosing nodes, reported when the tensor is moved to the device
        self._filled: dict[tuple[int, str], list[tuple[cst.Name, cst.BaseExpression, tuple[cst.CSTNode, ...]]]] = {}
        self._cpu_attributes: list[set[str]] = []  # per enclosing class: `self.` attributes `_cpu_attributes_of` finds
        self._movers = by_callee(context.facts.move_calls)  # the project functions called here that move arguments
        self._numpy_indices: dict[int, set[str]] = {}  # per function: names of numpy index arrays (`_numpy_index`)
        self._numpy_reported: set[tuple[int, str]] = set()  # (function, index name) already reported
        self._returned_on_cpu: dict[int, dict[str, str]] = {}  # per function: name -> the project function it is from

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._cpu_attributes.append(self._cpu_attributes_of(node))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._cpu_attributes.pop()

    def _cpu_attributes_of(self, cls: cst.ClassDef) -> set[str]:
        """The attributes `__init__` sets, in its own body, to tensors built on the CPU from factories and what is
        computed from them (DDPM schedulers' `self.betas = torch.linspace(...)`, `self.sqrt_alpha_cum_prod =
        torch.sqrt(...)`), that no other method sets again (`self.x = self.x.to(device)` moves it once)."""
        methods = [m for m in cls.body.body if isinstance(m, cst.FunctionDef)]
        init = next((m for m in methods if m.name.value == "__init__"), None)
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            return set()
        built: set[str] = set()
        for line in init.body.body:
            assign = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                continue
            target = dotted_name(assign.targets[0].target) or ""
            if target.count(".") <= 1 and (target.startswith("self.") or "." not in target):
                cpu = self._is_cpu_built(assign.value, built) or self._host_data_tensor(assign.value)
                (built.add if cpu else built.discard)(target)
        built = {name for name in built if name.startswith("self.")}
        if not built:
            return set()  # (most classes: the other methods need not be walked)
        reset = set().union(*(_assigned_targets(m) for m in methods if m is not init))
        return {name[5:] for name in built if name not in reset}

    def _host_data_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor `__init__` wraps from host data without naming a device, through reshapes: RepPoints heads'
        `self.dcn_base_offset = torch.tensor(offsets).view(1, -1, 1, 1)`."""
        while isinstance(expr, cst.Call) and self._reshape_or_cast(expr):
            expr = expr.func.value  # type: ignore[attr-defined]
        return isinstance(expr, cst.Call) and self.context.resolve(expr.func) in HOST_DATA_CONSTRUCTORS \
            and bool(expr.args) and keyword_arg(expr, "device") is None

    def _moves_attribute(self, move: cst.Call, method: str) -> bool:
        """Whether `self.attr.<method>(...)` moves a CPU attribute to the device: `.type_as(x)` does unless `x` is
        known to be on the host (a module's per-step input is a device tensor)."""
        target = self._target_device(move, method)
        if method == "type_as":
            return isinstance(target, cst.BaseExpression) and self.context.location_of(target) != "host"
        return target is not None

    def visit_Call(self, node: cst.Call) -> None:
        self._track_call(node)
        func = node.func
        if self._movers and not self.context.facts.default_device_gpu \
                and (moved := self._movers.get(dotted_name(func) or "")):
            self._check_moved_arguments(node, *moved)
        if self._numpy_random_to_device(node):
            self._report_where_it_runs(node, NUMPY_RANDOM_MESSAGE)
            return
        if self._constant_new_tensor(node):
            if not one_time_branch(self.context):
                self._report_where_it_runs(node, CONSTANT_NEW_TENSOR_MESSAGE)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "new_tensor" and node.args:
            # `signal.new_tensor(frame)` with `frame = torch.arange(n).unfold(...)`: a copy to `signal`'s device
            data = node.args[0].value
            if (self._cpu_creation(data) is not None or self._built_here(self._before_reshapes(data))) \
                    and not one_time_branch(self.context):
                self._report_where_it_runs(node)
            return
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to", "type_as", "type"):
            return
        if self.context.facts.default_device_gpu:
            return  # factories build on the GPU: the move moves nothing (`torch.set_default_device("cuda")`)
        if self._moves_returned_on_cpu(node, func):
            return
        created = self._cpu_creation(func.value)
        if created is None and self._built_here(self._before_reshapes(func.value)):
            # `labels = torch.cat([torch.arange(n), ...])` ... `labels.to(device)` (or `labels.long().to(device)`)
            created = (func.value, "")
        attribute = _self_attribute(func.value)
        if created is None and attribute and self._cpu_attributes and attribute in self._cpu_attributes[-1] \
                and self._moves_attribute(node, func.attr.value):
            if not one_time_branch(self.context):
                self._report_where_it_runs(node, CPU_ATTRIBUTE_MESSAGE.format(attr=attribute))
            return
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
        self._report_fills(self._before_reshapes(func.value), device)

    def _moves_returned_on_cpu(self, move: cst.Call, func: cst.Attribute) -> bool:
        """`rn_indices, lam = my_mixup(n, alpha)`, then `lam.to(x.device)` (PaSST's mixup): a tensor a project
        function builds on the CPU from host data every call (`torch.FloatTensor(np.random.beta(...))`), which the
        model says it returns on the host, moved here to the device. Reported when so; True then."""
        if not isinstance(func.value, cst.Name) or func.attr.value not in ("cuda", "to"):
            return False
        callee = self._returned_on_cpu.get(id(self.context.enclosing_function()), {}).get(func.value.value)
        if callee is None or keyword_arg(move, "non_blocking") is not None \
                or self._target_device(move, func.attr.value) is None or one_time_branch(self.context):
            return False
        self._report_where_it_runs(move, RETURNED_ON_CPU_MESSAGE.format(name=func.value.value, callee=callee))
        return True

    def _bind_returned(self, function: int, assign: cst.Assign) -> None:
        """Keep the names `assign` binds to what a project function returns on the host (a CPU tensor, if it is then
        moved): `lam = make()`, or `idx, lam = my_mixup(...)` element by element; forget the others it rebinds."""
        found = self._returned_on_cpu.setdefault(function, {})
        value = assign.value
        callee = dotted_name(value.func) or "" if isinstance(value, cst.Call) else ""
        kind = self.context.returned_kind(callee) if callee else ""
        for target in assign.targets:
            names = [target.target] if isinstance(target.target, cst.Name) else \
                [e.value for e in target.target.elements] if isinstance(target.target, cst.Tuple) else []
            kinds = tuple_kinds(kind) if isinstance(target.target, cst.Tuple) else None
            for position, name in enumerate(names):
                if not isinstance(name, cst.Name):
                    continue
                here = kinds[position] if kinds is not None and position < len(kinds) else kind
                if here == "host":
                    found[name.value] = callee
                else:
                    found.pop(name.value, None)

    def visit_For(self, node: cst.For) -> None:
        self._track_for(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`values[torch.arange(n), actions]`: indexing a device tensor with a CPU tensor copies the index over; so
        does a Python `range` beside a tensor index (`log_ps[range(n), actions]`, or `list(range(n))`), which PyTorch
        makes a CPU tensor."""
        if self.context.location_of(node.value) == "host" or in_data_class(self.context) \
                or self.context.facts.default_device_gpu:
            return  # (a dataset's or a sampler's indices index CPU tensors; under a GPU default device, none is CPU)
        indices = [e.slice.value if isinstance(e.slice, cst.Index) else None for e in node.slice]
        for index in indices:
            while isinstance(index, cst.Subscript) and _only_reshapes(index):
                index = index.value  # `torch.arange(B)[:, None, None]`: the CPU tensor, reshaped
            created = self._cpu_creation(index) if index is not None else None
            if created is not None and created[1] in _INDEX_FACTORIES or index is not None and self._built_here(index) \
                    or self._range_beside_tensor(index, indices):
                if not one_time_branch(self.context):
                    self._report_where_it_runs(index, CPU_INDEX_MESSAGE)
                return
            if self._numpy_index_of_tensor(node, index):
                # Once per index array and function: the minibatch loop indexes a handful of rollout tensors with it,
                # and one `torch.as_tensor(mb_inds, device=...)` (or indices drawn on the device) mends them all.
                first = (id(self.context.enclosing_function()), index.value) not in self._numpy_reported
                self._numpy_reported.add((id(self.context.enclosing_function()), index.value))
                if first and not one_time_branch(self.context):
                    self._report_where_it_runs(index, NUMPY_INDEX_MESSAGE.format(name=dotted_name(index)))
                return

    def _numpy_index_of_tensor(self, node: cst.Subscript, index: cst.BaseExpression | None) -> bool:
        """`b_obs[mb_inds]` with `mb_inds` a slice of `np.arange(n)` (CleanRL's PPO minibatches): PyTorch turns the
        numpy array into a CPU index tensor and copies it to the device, for every tensor it indexes. Not an array
        indexed with it (`self.observations[batch_inds]`, a numpy buffer)."""
        numpy_names = self._numpy_indices.get(id(self.context.enclosing_function()), set())
        if not (isinstance(index, cst.Name) and index.value in numpy_names):
            return False
        indexed = node.value
        return not (isinstance(indexed, cst.Name) and indexed.value in numpy_names) \
            and self.context.location_of(indexed) == "device"

    def _range_beside_tensor(self, index: cst.BaseExpression | None, indices: list) -> bool:
        if isinstance(index, cst.Call) and isinstance(index.func, cst.Name) and index.func.value == "list" \
                and len(index.args) == 1:
            index = index.args[0].value  # `list(range(n))`: the same index as a list
        if not (isinstance(index, cst.Call) and isinstance(index.func, cst.Name) and index.func.value == "range"):
            return False
        return any(isinstance(other, (cst.Name, cst.Attribute, cst.Subscript)) and other is not index
                   and self.context.location_of(other) != "host" for other in indices)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        # Names bound to tensors built on the CPU in this function (factories and what is computed from them only).
        function = id(self.context.enclosing_function())
        if self.context.facts.return_kinds:
            self._bind_returned(function, original_node)
        built = self._cpu_built.setdefault(function, set())
        on_cpu = self._is_cpu_built(original_node.value, built)
        numpy_names = self._numpy_indices.setdefault(function, set())
        numpy_index = self._numpy_index(original_node.value, numpy_names)
        for target in original_node.targets:
            if isinstance(target.target, cst.Name):
                (built.add if on_cpu else built.discard)(target.target.value)
                (numpy_names.add if numpy_index else numpy_names.discard)(target.target.value)
                self._filled.pop((function, target.target.value), None)
            elif isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(original_node.value, cst.Call) \
                    and (self.context.resolve(original_node.value.func) or "") in _SEVERAL_OF_THE_SAME_PLACE:
                for element in target.target.elements:  # `h_grid, w_grid = torch.meshgrid(...)`: each one
                    if isinstance(element.value, cst.Name):
                        (built.add if on_cpu else built.discard)(element.value.value)
                        self._filled.pop((function, element.value.value), None)
            elif isinstance(target.target, cst.Subscript) and isinstance(target.target.value, cst.Name) \
                    and target.target.value.value in built and not self._on_the_host(original_node.value, built):
                # (reported on the buffer's name: a sync inside the store, `x[:, :n[i]] = y`, is a finding of its own)
                self._filled.setdefault((function, target.target.value.value), []).append(
                    (target.target.value, original_node.value, self.context.ancestors_snapshot()))

    def _numpy_index(self, value: cst.BaseExpression, numpy_names: set[str]) -> bool:
        """An array of indices numpy builds: `np.arange(n)`, `np.random.permutation(n)`, `np.random.choice(...)`,
        a slice of one (`b_inds[start:end]`) or one shifted (`inds + i`)."""
        if isinstance(value, cst.Call):
            resolved = self.context.resolve(value.func) or ""
            if resolved in ("numpy.random.choice", "numpy.random.randint"):  # an array only when given a size
                positional = [arg for arg in value.args if arg.keyword is None and not arg.star]
                return len(positional) > (1 if resolved.endswith("choice") else 2) \
                    or keyword_arg(value, "size") is not None
            return resolved in _NUMPY_INDEX_FACTORIES
        if isinstance(value, cst.Subscript):
            return isinstance(value.value, cst.Name) and value.value.value in numpy_names \
                and all(isinstance(e.slice, cst.Slice) for e in value.slice)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)):
            return isinstance(value.left, cst.Name) and value.left.value in numpy_names \
                and isinstance(value.right, (cst.Name, cst.Integer))
        return False

    def _on_the_host(self, value: cst.BaseExpression, built: set[str]) -> bool:
        """A value known on the host: a host value, a CPU-built tensor, or rows of an attribute `__init__` builds on
        the CPU (TencentPretrain's `self.emb[2:n + 2]`, a plain tensor attribute)."""
        while isinstance(value, cst.Subscript):
            value = value.value
        return self.context.is_host_value(value) or self._is_cpu_built(value, built) or bool(
            self._cpu_attributes and _self_attribute(value) in self._cpu_attributes[-1])

    def _report_fills(self, moved: cst.BaseExpression, device: cst.BaseExpression | bool) -> None:
        """The stores into a CPU-built tensor that is now moved to the device that copied device data to the host: of
        a value on the device, or of the tensor whose device the buffer moves to (StyleTTS's `x_pad[:, :n] = x`, then
        `x_pad.to(x.device)`)."""
        if not isinstance(moved, cst.Name):
            return
        owner = device.value if isinstance(device, cst.Attribute) and device.attr.value == "device" else None
        for store, value, ancestors in self._filled.pop((id(self.context.enclosing_function()), moved.value), ()):
            if self.context.location_of(value) == "device" \
                    or owner is not None and root_name(value) == root_name(owner):
                self._report_where_it_runs(store, FILLED_FROM_DEVICE_MESSAGE.format(name=moved.value),
                                           ancestors=ancestors)

    def _before_reshapes(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """`frame` of `frame.clone().detach().long()`: the tensor the reshapes and casts start from."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and self._reshape_or_cast(expr):
            expr = expr.func.value
        return expr

    def _built_here(self, expr: cst.BaseExpression) -> bool:
        built = self._cpu_built.get(id(self.context.enclosing_function()), set())
        return isinstance(expr, cst.Name) and expr.value in built

    def _is_cpu_built(self, expr: cst.BaseExpression, built: set[str]) -> bool:
        """A tensor built on the CPU from torch factories: `torch.arange(n)`, `torch.cat([torch.arange(n)] * 2)`,
        `(labels.unsqueeze(0) == labels.unsqueeze(1)).float()` with `labels` built so (or `self.betas`, in
        `__init__`)."""
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return (dotted_name(expr) or "") in built \
                or type(expr) is cst.Attribute and self._cpu_creation(expr) is not None  # `....sort().values`
        if isinstance(expr, cst.UnaryOperation):  # `torch.exp(-u)` of a `u` drawn on the CPU (Lumina-T2X's timesteps)
            return self._is_cpu_built(expr.expression, built)
        if isinstance(expr, cst.Subscript):  # `perm[start:end]`: a minibatch's slice of a CPU permutation
            return all(isinstance(e.slice, cst.Slice) for e in expr.slice) and self._is_cpu_built(expr.value, built)
        if isinstance(expr, cst.Comparison):
            # `torch.arange(n) % 4 == 0`: a CPU tensor compared with CPU tensors or host values stays on the CPU
            return self._is_cpu_built(expr.left, built) and all(
                self._is_cpu_built(c.comparator, built) or self._not_a_device_tensor(c.comparator)
                for c in expr.comparisons
            )
        if isinstance(expr, cst.BinaryOperation):
            # `torch.ones(n) * self.n_codebooks + 1`: a CPU tensor and anything not on the device stay on the CPU.
            left, right = self._is_cpu_built(expr.left, built), self._is_cpu_built(expr.right, built)
            if left and right:
                return True
            other = expr.right if left else expr.left
            return (left or right) and self._not_a_device_tensor(other)
        if not isinstance(expr, cst.Call):
            return False
        if self._cpu_creation(expr) is not None:
            return True
        func = expr.func
        if self._reshape_or_cast(expr):
            return self._is_cpu_built(func.value, built)
        resolved = self.context.resolve(func) or ""
        if _torch_function(resolved) in SAME_DEVICE_FUNCTIONS and expr.args:
            return self._is_cpu_built(expr.args[0].value, built)  # `torch.cumprod(self.alphas, 0)`: where its input is
        if resolved in _SEVERAL_OF_THE_SAME_PLACE and expr.args:
            # `torch.meshgrid(torch.arange(H), torch.arange(W))`: grids built where their inputs are
            return all(a.keyword is None and self._is_cpu_built(a.value, built) for a in expr.args)
        if resolved in ("torch.cat", "torch.stack") and expr.args:
            parts = expr.args[0].value
            if isinstance(parts, (cst.ListComp, cst.GeneratorExp)):
                return self._is_cpu_built(parts.elt, built)
            if isinstance(parts, (cst.List, cst.Tuple)) and parts.elements:
                return all(self._is_cpu_built(e.value, built) for e in parts.elements)
        return False

    def _not_a_device_tensor(self, expr: cst.BaseExpression) -> bool:
        """A number or a Python value (`1`, `self.n_codebooks`, `scale`), not a tensor that may live on the device."""
        location = self.context.location_of(expr)
        if location != "unknown":
            return location == "host"
        if isinstance(expr, cst.BinaryOperation):  # `(args.w_max - args.w_min)`: arithmetic of such values
            return self._not_a_device_tensor(expr.left) and self._not_a_device_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self._not_a_device_tensor(expr.expression)
        return isinstance(expr, cst.Name) or (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name))

    def _constant_new_tensor(self, call: cst.Call) -> bool:
        """`x.new_tensor([0.485, 0.456, 0.406])`, `x.new_tensor(0.0)`, `x.new_tensor(self.config.alpha)`: numbers
        written in the code or a setting's, copied to x's device (and waited for) on every call."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "new_tensor" and call.args):
            return False
        data = call.args[0].value
        if is_number(data) or isinstance(data, cst.Attribute) and self.context.is_host_value(data):
            return True
        if isinstance(data, cst.Call) and isinstance(data.func, cst.Name) and data.func.value in ("list", "tuple") \
                and len(data.args) == 1 and isinstance(data.args[0].value, cst.Call):
            # `list(permutations(range(C)))`: host numbers from the standard library's iterators
            source = self.context.resolve(data.args[0].value.func) or ""
            return source.startswith("itertools.") or source == "range"
        return isinstance(data, (cst.List, cst.Tuple)) and len(data.elements) > 1 and all(
            is_number(e.value) for e in data.elements if isinstance(e, cst.Element)
        )

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

    def _check_moved_arguments(self, call: cst.Call, positions: tuple[int, ...], keywords: tuple[str, ...]) -> None:
        """Arguments built on the CPU by a factory (`torch.zeros(batch_size)`) where the callee moves them to the
        device (pykale's `cross_entropy_logits(d_hat, torch.zeros(batch_size))`, whose `target.type_as(y_hat)` copies
        it): one copy per call."""
        if one_time_branch(self.context):
            return
        for index, arg in enumerate(call.args):
            if arg.star:
                return  # which parameters the rest fill is unknown
            if not (arg.keyword.value in keywords if arg.keyword is not None else index in positions):
                continue
            created = self._cpu_creation(arg.value)
            if created is not None and keyword_arg(created[0], "device") is None:
                self._report_where_it_runs(arg.value, MOVED_BY_CALLEE_MESSAGE.format(callee=dotted_name(call.func)))

    def _cpu_creation(self, expr: cst.BaseExpression) -> tuple[cst.Call, str] | None:
        """(factory call, factory kind) when `expr` creates a tensor on the CPU: `torch.zeros(n)`,
        `torch.LongTensor(n).random_(8)` (kind "" for legacy constructors, which the fix does not rewrite)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in FILLS:
            inner = expr.func.value
            if isinstance(inner, cst.Call) and self._is_legacy_constructor(inner):
                return inner, ""
            created = self._cpu_creation(inner) if isinstance(inner, cst.Call) else None
            return (created[0], "") if created else None
        if isinstance(expr, cst.Call) and self._reshape_or_cast(expr):
            # `torch.arange(n).view(-1, 1).to(device)`: the fix moves `device=` into the factory, the reshape stays.
            created = self._cpu_creation(expr.func.value)  # type: ignore[attr-defined]
            if created and expr.func.attr.value == "type" and (  # type: ignore[attr-defined]
                    self.context.resolve(expr.args[0].value) or "").endswith("Tensor"):
                return created[0], ""  # no fix: `.type(torch.ByteTensor)` of a device tensor copies it to the CPU
            return created
        if isinstance(expr, cst.Call) and len(expr.args) == 1 and self.context.resolve(expr.func) in _TENSOR_WRAPPERS \
                and isinstance(expr.args[0].value, cst.Call):
            created = self._cpu_creation(expr.args[0].value)  # `Variable(torch.zeros(n))`: the tensor itself
            return (created[0], "") if created else None
        if isinstance(expr, cst.Subscript):
            # `torch.eye(n)[labels].to(device)`: a one-hot picked from an identity built on the CPU (no fix).
            created = self._cpu_creation(expr.value)
            return (created[0], "") if created else None
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices") \
                and isinstance(expr.value, cst.Call) and isinstance(expr.value.func, cst.Attribute) \
                and expr.value.func.attr.value in _SORTING_METHODS:
            # `torch.randperm(n)[:k].sort().values` (PaSST's patchout indices): sorted where they were drawn (no fix).
            created = self._cpu_creation(expr.value.func.value)
            return (created[0], "") if created else None
        if isinstance(expr, cst.UnaryOperation):
            # `-torch.arange(n) / d` inside `torch.exp(...)`: negated where it was built (no fix).
            created = self._cpu_creation(expr.expression)
            return (created[0], "") if created else None
        if isinstance(expr, cst.BinaryOperation):
            # `(torch.arange(n) + offset).cuda()`: built on the CPU, then moved (no fix: the arithmetic stays).
            created = self._cpu_creation(expr.left) or self._cpu_creation(expr.right)
            return (created[0], "") if created else None
        if not isinstance(expr, cst.Call):
            return None
        kind = _torch_function(self.context.resolve(expr.func) or "")
        if not kind:
            return None
        if kind in SAME_DEVICE_FUNCTIONS and expr.args:
            # `torch.exp(torch.arange(n) * -0.5)`: computed on the CPU from a CPU factory (no fix: the call stays).
            created = self._cpu_creation(expr.args[0].value)
            return (created[0], "") if created else None
        if kind in LEGACY_CONSTRUCTORS:
            return None  # `torch.ByteTensor(storage)` copies data; only a fill after it (above) makes it a factory
        if kind not in DETERMINISTIC_FACTORIES and kind not in RANDOM_FACTORIES:
            return None
        if keyword_arg(expr, "pin_memory") is not None:
            return None  # staged in pinned memory on purpose
        device = keyword_arg(expr, "device")
        if device is not None and self._device_verdict(device.value) is not None:
            return None  # already created on a device; the move is a cast (`.type_as(x)`) or a no-op
        if expr.args and isinstance(expr.args[0].value, cst.Integer) and expr.args[0].value.value == "0" and (
            kind not in _FIRST_ARGUMENT_NOT_A_SIZE
        ):
            return None  # zero elements: nothing is copied
        return expr, kind

    def _reshape_or_cast(self, call: cst.Call) -> bool:
        """A tensor method that keeps the tensor where it is: `x.view(-1, 1)`, `x.tril()`, `x.type(torch.ByteTensor)`
        (a CPU type; `torch.tril(x)`, the function of the same name, is torch's own and is read as such)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or self.context.resolve(func.value) == "torch":
            return False
        if func.attr.value == "type":
            if len(call.args) != 1:
                return False
            target = self.context.resolve(call.args[0].value) or ""
            # (or `.type(dtype)`, a dtype kept in a variable: GLIGEN's null inputs, cast where the tensor is)
            return target.startswith("torch.") and not target.startswith("torch.cuda.") \
                or (last_name(call.args[0].value) or "").lower().endswith("dtype")
        if func.attr.value == "to":
            return self._dtype_cast(call)
        return func.attr.value in RESHAPES

    def _dtype_cast(self, call: cst.Call) -> bool:
        """`x.to(dtype)`, `x.to(torch.float16)`, `x.to(dtype=dtype)`: a cast that leaves the tensor where it is
        (CPM-Bee's rotary `inv_freq = inv_freq.to(dtype)` in `__init__`)."""
        if len(call.args) != 1:
            return False
        arg = call.args[0]
        if arg.keyword is not None:
            return arg.keyword.value == "dtype"
        name = self.context.resolve(arg.value) or dotted_name(arg.value) or ""
        return name.rsplit(".", 1)[-1] == "dtype" or name.removeprefix("torch.") in DTYPE_NAMES

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
            return other if isinstance(other, (cst.Name, cst.Attribute, cst.Subscript)) else None
        if method == "type":
            # `.type(x.type())`: to the type, and so the device, of another tensor (no fix: the type string stays)
            other = move.args[0].value if len(move.args) == 1 and move.args[0].keyword is None else None
            moved = isinstance(other, cst.Call) and not other.args and isinstance(other.func, cst.Attribute) \
                and other.func.attr.value == "type" and self.context.location_of(other.func.value) != "host"
            return True if moved else None
        if not args:
            return None
        # `.to(dtype=x.dtype, device=x.device)`: the device may come after the dtype, by keyword
        first = next((a for a in args if a.keyword is not None and a.keyword.value == "device"), args[0])
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
        if isinstance(expr, cst.Attribute) and expr.attr.value == "device" \
                and self.context.location_of(expr.value) == "host":
            return None  # `.to(y.device)` of a CPU tensor `y` (a waveform every caller loads on the host): the CPU
        resolved = self.context.resolve(expr) or ""
        if resolved.startswith("torch.") and resolved.rsplit(".", 1)[-1] in DTYPE_NAMES:
            return None
        name = last_name(expr)
        if name is None:
            return None
        if name_parts(name) & {"dtype", "type", "cpu", "precision"} or name in DTYPE_NAMES:
            return None
        return "device" if _DEVICE_WORD.search(name) else "tensor"


# Tensor methods returning a named tuple of values and indices, on the device of the tensor they read.
_SORTING_METHODS = frozenset({"sort", "topk", "max", "min", "kthvalue", "median", "mode"})


def _host_returning(facts) -> list[str]:
    """The project functions called in the file (as written) that return host values, whole or some of a tuple."""
    return [callee for callee, kind in facts.return_kinds
            if kind == "host" or kind.startswith("tuple:") and "host" in tuple_kinds(kind)]


def _torch_function(resolved: str) -> str:
    """`cumprod` for `torch.cumprod`: a function of torch's top-level namespace; "" for anything else."""
    return resolved[6:] if resolved.startswith("torch.") and resolved.count(".") == 1 else ""


def _only_reshapes(subscript: cst.Subscript) -> bool:
    """`t[:, None, None]`, `ind[0]`: slices, new axes and a fixed row keep a tensor index (yolov9's `ind[0]` of a
    `[2, b, n]` CPU tensor); `t[i]` with a loop's `i` picks an element, a 0-dim integer that indexes like a Python
    int, copying nothing."""
    return all(isinstance(e.slice, cst.Slice) or isinstance(e.slice, cst.Index) and (
        isinstance(e.slice.value, cst.Integer)
        or isinstance(e.slice.value, cst.Name) and e.slice.value.value == "None") for e in subscript.slice)


def _self_attribute(expr: cst.BaseExpression) -> str:
    """`betas` for `self.betas`; "" for anything else."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return ""


class _AssignedTargets(SyntaxVisitor):
    """The dotted names assignment statements bind (`self.keep = ...`), at any depth of the blocks walked."""

    def __init__(self) -> None:
        self.targets: set[str | None] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        self.targets |= {dotted_name(target.target) for target in node.targets}


def _assigned_targets(function: cst.FunctionDef) -> set[str | None]:
    scan = _AssignedTargets()
    scan.walk(function.body)
    return scan.targets
