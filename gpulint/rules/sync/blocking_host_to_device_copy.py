"""GPL411 blocking-host-to-device-copy."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

import libcst as cst

from gpulint.linter.context import DEFAULT_HOT_FUNCTIONS, preprocesses
from gpulint.linter.names import dotted_name, last_name, name_parts, params_of, root_name, target_names
from gpulint.linter.rule import Invalid, Replace, Report, RuleDocs
from gpulint.linter.syntax import descendants, innermost, qualname_of
from gpulint.project.vocab import (
    ACCELERATE_OR_FABRIC,
    BATCH_MOVE_HELPERS,
    EVAL_LOADER_WORD,
    JOINING_FUNCTIONS,
    LOADER_CLASSES,
    PREPARE_METHODS,
    SAME_PLACE_METHODS,
    TRAIN_LOADER_HOOKS,
    TRAIN_LOADER_KEYWORDS,
    builds_on_cpu_by_default,
    steps_environment,
)
from gpulint.rules.common import is_false, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.per_tensor.helpers import is_model_tensor_iterable
from gpulint.rules.sync.helpers import (
    SyncRule,
    cpu_target,
    holds_training_loop,
    in_error_path_or_first_step,
    is_cuda_tensor_type,
    known_false_positives,
)
from gpulint.rules.sync.tensors import MODULE_NAME

_DEVICE_WORDS = re.compile(r"device|rank|gpu|cuda|dev$", re.IGNORECASE)
# What names a device in a loop's body (a rank as a name, not a function: `bmt.print_rank(...)` logs), less the
# `torch.cuda` API (`torch.cuda.synchronize()`, `torch.cuda.max_memory_allocated()`), which copies nothing.
_BODY_DEVICE_WORDS = re.compile(r"device|gpu|cuda|rank(?!\s*\()", re.IGNORECASE)
_CUDA_API = re.compile(r"torch\.cuda\.\w+")
# `x.type(torch.cuda.FloatTensor)` is a host-to-device copy too (old scripts use it to move batches).


# An accelerate training script for the examples, with a stand-in `Accelerator` (they run as they are in the
# harnesses): `prepare` hands its objects back, `backward` runs the loss's backward.
_STEPS_SCRIPT = (
    "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
    "def train(model, dataset, optimizer, device, total_steps=3):\n    loader = DataLoader(dataset, batch_size=4{pin})\n"
    "    batches = iter(loader)\n    for step in range(total_steps):\n        x, y = next(batches)\n"
    "        x = x.to(device{blocking})\n"
    "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
)
_PREPARED_SCRIPT = (
    "import torch\nfrom torch.utils.data import DataLoader\n\n\nclass Accelerator:\n    def prepare(self, *objects):\n"
    "        return objects\n\n    def backward(self, loss):\n        loss.backward()\n\n\n"
    "def train(model, dataset, optimizer, device):\n    accelerator = Accelerator()\n"
    "    loader = DataLoader(dataset, batch_size=4{pin})\n"
    "    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n    for x, y in loader:\n"
    "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        accelerator.backward(loss)\n"
    "        optimizer.step()\n        optimizer.zero_grad()\n"
)


# A model's base class: `nn.Module`, `PreTrainedModel`, `ModelMixin`, `PreTrainedPolicy`, `Transformer`.
_MODEL_BASE = re.compile(r"(?:Module|Model|ModelMixin|Policy|Transformer|Net|Network)$")
_GUARDED_LOOP = (
    "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
    "        if x.device != device:\n            x = {copy}\n        loss = model(x).sum()\n"
    "        loss.backward()\n        optimizer.step()\n"
)

_SETTINGS_DICT_LOOP = (
    "import torch\n\n\ndef train(model, loader, optimizer, device):\n    args = {{\"device\": device}}\n"
    "    for x, y in loader:\n"
    "        x = x.to(args[\"device\"]{blocking})\n        loss = model(x).sum()\n"
    "        loss.backward()\n        optimizer.step()\n"
)

# A call that trains on a batch: `learner.train(data)`, `agent.update(batch)`, `loss.backward()`, `opt.step()`.
_TRAINS = re.compile(r"\.\w*(?:train|update|learn|step|optimi[sz]e|fit)\w*\s*\(|backward\s*\(")
# `nn.Module`, `torch.nn.Module`, `Optional[nn.Module]`, `pl.LightningModule`: an annotation naming a module class.
_MODULE_ANNOTATION = re.compile(r"(?:^|[.\[\s])\w*Module\b")
# An OpenMMLab project's data preprocessor (MMEngine's `ImgDataPreprocessor` and its kin), whose `cast_data` copies the
# batch to the device; its `forward` holds the copy (`_copies_in_mm_preprocessor`).
_PREPROCESSOR_BASE = re.compile(r"DataPreprocessor$")
# `non_blocking: Optional[bool] = True` in its `__init__` (MMYOLO's), or `non_blocking=True` handed on
_NON_BLOCKING_DEFAULT = re.compile(r"non_blocking\s*(?::[^=,)]*)?=\s*True\b")
_PREPROCESSOR_WORDS = ("cast_data(", "super().forward(")
_MM_IMPORT = re.compile(r"^\s*(?:from|import)\s+mm[a-z0-9_]*\b", re.MULTILINE)
_MM_PREPROCESSOR = (
    "import torch\nfrom mmengine.model import ImgDataPreprocessor\n\n\n"
    "class SelfSupDataPreprocessor(ImgDataPreprocessor):\n{init}"
    "    def forward(self, data, training=False):\n        data = self.cast_data(data)\n"
    "        return data[\"inputs\"], data[\"data_samples\"]\n"
)

_MM_CONFIG = (
    "_base_ = []\nmodel = dict(type=\"MoCo\", data_preprocessor=dict(type=\"SelfSupDataPreprocessor\"))\n"
    "train_dataloader = dict(\n    batch_size=32,\n    num_workers=8,{pin}\n"
    "    sampler=dict(type=\"DefaultSampler\", shuffle=True),\n"
    "    dataset=dict(type=\"ImageNet\", data_root=\"data/imagenet/\"))\n"
)


def _mm_config_loader(statement: cst.CSTNode) -> cst.Call | None:
    """An MMEngine config's training loader defined in full (`train_dataloader = dict(sampler=..., dataset=...)`)
    without `pin_memory`: the runner builds a DataLoader from it that pins nothing, and the data preprocessor copies
    its batches every step. A config of MMEngine's runner, by its words (its other sections name no loader)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 \
            or not isinstance(assign.targets[0].target, cst.Name) \
            or assign.targets[0].target.value != "train_dataloader":
        return None
    value = assign.value
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name) or value.func.value != "dict":
        return None
    keys = {arg.keyword.value for arg in value.args if arg.keyword is not None}
    return value if {"sampler", "dataset"} <= keys and "pin_memory" not in keys else None


def _has_base_configs(module: cst.Module) -> bool:
    """Does the config inherit from others (`_base_ = [...]`, non-empty)? What they set (`pin_memory`) is merged into
    its loader, which this file cannot see."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
            assign = statement.body[0]
            if any(isinstance(t.target, cst.Name) and t.target.value == "_base_" for t in assign.targets):
                return not (isinstance(assign.value, (cst.List, cst.Tuple)) and not assign.value.elements)
    return False


# A step fed by a server rather than a loader (simple_GRPO): each batch arrives serialised, its tensors `torch.load`-ed
# on the host; `{to}` is their move in the step function.
_FETCHED_BATCH = (
    "import io\nimport json\n\nimport torch\nimport torch.nn.functional as F\n\n\ndef served(x, y):\n"
    "    reply = io.BytesIO()\n    torch.save((x, y), reply)\n    reply.seek(0)\n    data = json.loads(\"{{}}\")\n"
    "    data[\"inputs\"], data[\"labels\"] = torch.load(reply)\n    return data\n\n\n"
    "def step(model, batch):\n    inputs = batch[\"inputs\"].{to}\n"
    "    return F.cross_entropy(model(inputs), batch[\"labels\"])\n\n\n"
    "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        batch = served(x, y)\n"
    "        loss = step(model, batch)\n        loss.backward()\n        optimizer.step()\n"
    "        optimizer.zero_grad()\n"
)


class BlockingHostToDeviceCopy(SyncRule):
    code = "GPL411"
    pytorch_only = True
    name = "blocking-host-to-device-copy"
    message = "`{call}` of a batch without `non_blocking=True` is a synchronous copy: the host waits for the GPU queue"
    message_unpinned = (
        "this DataLoader does not set `pin_memory=True`, and the training step copies its batches to the device with "
        "`non_blocking=True`: from pageable memory that copy is synchronous every step"
    )
    message_unpinned_blocking = (
        "this DataLoader does not set `pin_memory=True`, and the training step copies its batches to the device: "
        "from pageable memory no copy can overlap with compute; pin it and pass `non_blocking=True` to the copies"
    )
    message_host = (
        "`{call}` of a tensor built on the host in the step, without `non_blocking=True`, is a synchronous copy "
        "from pageable memory: the host waits for the GPU queue"
    )
    message_dataset = (
        "a Dataset's `__getitem__` copies each sample to the device: a blocking copy per sample, every step (and CUDA "
        "in DataLoader workers fails); return host tensors and copy the batch in the step from a pinned loader"
    )
    message_trainer = (
        "this DataLoader does not set `pin_memory=True`, and the trainer it feeds copies every batch to the device: "
        "from pageable memory that copy is synchronous every step"
    )
    message_prepared = (
        "this DataLoader does not set `pin_memory=True`, and `{prepare}` copies every batch it yields to the device: "
        "from pageable memory that copy is synchronous every step; pin it (and let accelerate copy without blocking: "
        "`DataLoaderConfiguration(non_blocking=True)`)"
    )
    message_preprocessor = (
        "an MMEngine data preprocessor copies each batch to the device here (`cast_data`) with MMEngine's default "
        "`non_blocking=False`: a synchronous copy every step; build it with `non_blocking=True` (and pin the loader: "
        "`pin_memory=True` in `train_dataloader`)"
    )
    message_mm_config = (
        "this config's training loader does not set `pin_memory=True`: the runner's data preprocessor copies every "
        "batch to the device from pageable memory, a synchronous copy every step"
    )
    triggers = (".to(", ".cuda(", ".type(", "to_device(", "move_to_cuda(", "DataLoader(", "WebLoader(",
                "train_dataloader = dict(", *_PREPROCESSOR_WORDS)
    # Its DataLoader findings are in setup code ("training"), which a file without a step (a Lightning script that
    # only calls `trainer.fit`) may hold too.
    hot_only = False
    # Read wherever they are in the file: the loaders whose batches the step copies, a hand-over of the loaders to
    # Accelerate or Fabric (the batches then arrive on the device), and to a trainer that copies them itself.
    # And a data preprocessor's `__init__` handing on its `non_blocking` (`_copies_in_mm_preprocessor`).
    facts = ("DataLoader(", "WebLoader(", ".prepare(", ".prepare_data_loader(", ".setup_dataloaders(", "train_dataloader",
             ".fit(", "non_blocking=non_blocking")
    fixable = True

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        # A call of the project's loader factory (`distrib.loader(...)`) builds a DataLoader without naming one.
        return bool(facts.loader_factories)

    docs = RuleDocs(
        what_it_does="Flags host-to-device copies of batches in the training step (`x.to(device)`, `x.to(args[\"device\"])`, `x.to(**self.tpdv)` "
        "where the file, or any file for an attribute (a base class's `self.tpdv`), binds those keyword arguments to a "
        "device (`self.tpdv = dict(dtype=..., device=device)`), `x.cuda()`, "
        "`x.type(torch.cuda.FloatTensor)` or a `Tensor` alias of it, `x.pin_memory().to(device)`, an entry of a "
        "container known to be on the host moved to any device (`batch[\"inputs\"].to(engine.device)` where the step "
        "receives what a project function `torch.load`-ed), batch helpers such "
        "as `move_to_device(batch, device)`, and the field copies in the own `to(device)` of a batch class a collate "
        "function builds, which runs for every batch the step or Lightning moves) without `non_blocking=True` (or with "
        "`non_blocking=False`); and a DataLoader that does not set "
        "`pin_memory` (or a webdataset `WebLoader`) in a file whose training step copies batches with "
        "`non_blocking=True`, or copies them in a loop over batches without it, or in a data module that copies "
        "nothing itself while another file's training step copies to the device (the finding is on the DataLoader: "
        "that is where the fix goes, and one loader feeds every copy of the step; a loader named or built for "
        "evaluation, where a training flag is off (the `else` of `if training:`), or after the training loops of "
        "its block (a script rebinding `loader` to the test set after its epochs), is left out; a call of a "
        "project function that hands its `**kwargs` to a DataLoader, such as "
        "`distrib.loader(dataset, batch_size=8)`, or of a project subclass of DataLoader, is a DataLoader "
        "construction, and so is `DataLoader(ds, **params)` where the function binds `params` to a dict display "
        "and never names `pin_memory`; a loader that a training loop of its own file iterates without copying its "
        "batches, such as a `TensorDataset` over tensors a rollout buffer keeps on the device, is reported only for "
        "the copies that loop reaches in other files, such as a model's `forward` moving the batch it is handed, "
        "and the copies of a program that accelerate or Lightning feeds do not count for another program's loader); "
        "also a training DataLoader without "
        "`pin_memory` that is handed to a trainer which "
        "copies its batches itself: `trainer.fit(model, loader)`, Composer's `Trainer(train_dataloader=loader)`, "
        "or built in a LightningModule's or LightningDataModule's `train_dataloader` hook (or a helper it calls, in "
        "any module of the project, two calls deep), or in a function whose result another file hands to "
        "`trainer.fit` as the training loader, or "
        "handed to `accelerator.prepare` / `fabric.setup_dataloaders` in a file with a training step, or built in a "
        "function whose result a training script hands to `accelerator.prepare` (`loader = build_data(ds)`, in any "
        "module) (they copy each batch to the device, blocking by default); and "
        "a copy to the device in a Dataset's `__getitem__` (one blocking copy per sample) in a file that trains "
        "(its loaders then yield device tensors, which cannot be pinned: they are not told to pin). A loop over a "
        "name the function bound to a wrapper of a loader (`pbar = tqdm(dataloader)`) is a loop over batches. In "
        "OpenMMLab projects (MMEngine's runner): the data preprocessor's copy of the batch, `self.cast_data(data)` "
        "or `super().forward(data, training)` of a library preprocessor in the `forward` of a class whose base is a "
        "`...DataPreprocessor`, unless the class defaults `non_blocking` to True (MMEngine's default is False); and "
        "a config's training loader defined in full (`train_dataloader = dict(sampler=..., dataset=...)`, in a "
        "config with no `_base_` to inherit `pin_memory` from) without `pin_memory=True`.",
        why_slow="A blocking copy is queued behind every kernel already launched and the host waits for it to finish, "
        "so the CPU cannot prepare the next step while the GPU works. From pinned memory, `non_blocking=True` lets the "
        "copy overlap with compute; from pageable memory CUDA stages the copy synchronously whatever the flag says.",
        example="train_loader = DataLoader(dataset, batch_size=64, shuffle=True)\nfor x, y in train_loader:\n"
        "    x, y = x.to(device), y.to(device)\n    loss = F.cross_entropy(model(x), y)",
        use_instead="`DataLoader(..., pin_memory=True)` and `x.to(device, non_blocking=True)`.",
        fix_safety="Unsafe: the fix adds `non_blocking=True` to `.to()` / `.cuda()` / `.type()`, and `pin_memory=True` "
        "to this file's DataLoaders that do not set it (without pinned memory the flag changes nothing, and this rule "
        "would report the fixed copy); on a reported DataLoader, only `pin_memory=True`. Helpers get no fix (they may not take the argument), nor does a file whose "
        "DataLoader sets `pin_memory=False`. Same values whenever the source tensor is not written again before the "
        "copy completes; a pinned host buffer that the code refills in place right after the call (a hand-written "
        "prefetcher reusing one buffer) could be overwritten while the copy is still in flight. Pinned batches take "
        "page-locked host memory, a little per worker.",
        false_positives=known_false_positives("Copies in a branch gpulint cannot tell is CPU-only (a `device` variable that is the CPU). "
        "`.to(dtype)`, `.to(other_tensor)`, `.to(other_tensor.device)` or `.to(self.head.weight.device)` in a module's "
        "`forward` or any function without a training loop (a move between devices of a split model, such as "
        "`labels.to(logits.device)`: the batch's copy from the host happens in the loop) and moves of tensors "
        "already on the device (registered buffers included) and of parameters annotated as modules (`tokenizer: "
        "nn.Module`) are not flagged, nor a move stored back where it came "
        "from on the object (`self.W.data = to_device(self.W.data, device)`: the first call moves it, later ones find "
        "it there), nor are files "
        "that hand their loaders to `accelerator.prepare` / `fabric.setup_dataloaders` (batches arrive on the device: "
        "only the loader is reported), "
        "nor `inputs.to(device)` in the `forward` of a class another module of the project builds as a layer (its "
        "inputs come from that module), or of any module where another file's step code copies the batches itself "
        "(the forward moves what the step moved), nor `inputs` in a Hugging Face Trainer's `compute_loss`, "
        "nor copies in the methods of a LightningModule or a Lightning callback (Lightning moves each batch before "
        "`training_step` and hands callbacks the batch it moved), "
        "nor a copy behind a comparison of the moved tensor's device (`if img.device != device: img = img.to(device)`) "
        "in a method of a model class (a module's, model's or policy's defensive move; in a training loop, a replay "
        "buffer or an environment it stays a finding), "
        "nor a copy in the branch of `if isinstance(x, nn.Module):` for the moved `x` (a helper moving models and "
        "batches alike), nor the observation a reinforcement-learning environment's `step` returned, "
        "nor a call of a batch helper of the project whose own copies all pass `non_blocking=True` "
        "(`move_to_cuda(batch, gpu)` defined as `batch.cuda(gpu, non_blocking=True)`)."),
    )
    valid = (
        _MM_CONFIG.format(pin="\n    pin_memory=True,"),
        # a module's own `to`, handing the move to `nn.Module.to`: the weights move, not a batch
        ("import torch\n\n\nclass Net(torch.nn.Module):\n    def to(self, device=None, dtype=None, **kwargs):\n"
         "        super().to(device=device, dtype=dtype, **kwargs)\n        self.device = device\n"
         "        return self\n\n\n"
         "def train(loader, opt, device):\n    model = Net()\n    for x in loader:\n        model.to(device)\n"
         "        model(x.to(device, non_blocking=True)).mean().backward()\n        opt.step()\n"),
        # MMYOLO's: the preprocessor is built with `non_blocking=True`, the copy does not block
        _MM_PREPROCESSOR.format(init="    def __init__(self, *args, non_blocking=True, **kwargs):\n"
                                     "        super().__init__(*args, non_blocking=non_blocking, **kwargs)\n\n"),
        # DGL-LifeSci: a DGL graph moved to the device carries its features; moving one popped from it copies nothing
        ("import torch\n\n\ndef run_a_train_epoch(args, model, loader, optimizer):\n    for bg, labels in loader:\n"
         "        bg = bg.to(args[\"device\"], non_blocking=True)\n        h = bg.ndata.pop(\"h\")\n"
         "        h = h.to(args[\"device\"])\n        loss = model(bg, h).sum()\n        loss.backward()\n"
         "        optimizer.step()\n"),
        training_script("z = x.to(torch.float16)"),
        # an EMA moving itself to the device of the weights it averages (`self.to(...)` of an object, no batch)
        ("import torch\n\n\nclass Shadow:\n    def __init__(self, params):\n"
         "        self.shadow = [p.detach().clone() for p in params]\n\n    def to(self, device):\n"
         "        self.shadow = [p.to(device, non_blocking=True) for p in self.shadow]\n\n"
         "    def update(self, params):\n        params = list(params)\n        self.to(device=params[0].device)\n"
         "        torch._foreach_lerp_(self.shadow, params, 0.001)\n\n\n"
         "def train(model, loader, optimizer, device):\n    shadow = Shadow(model.parameters())\n    for x, _ in loader:\n"
         "        model(x.to(device, non_blocking=True)).mean().backward()\n        optimizer.step()\n"
         "        shadow.update(model.parameters())\n"),
        # detectron2-style EMA: the model's weights, on the device already, moved to the EMA's device (the same)
        ("import itertools\nimport torch\n\n\nclass EMA:\n    def __init__(self, model, device):\n"
         "        self.device = device\n"
         "        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}\n\n"
         "    def model_state_iterator(self, model):\n"
         "        return itertools.chain(model.named_parameters(), model.named_buffers())\n\n"
         "    def update(self, model):\n        with torch.no_grad():\n"
         "            for name, val in self.model_state_iterator(model):\n"
         "                val = val.to(self.device)\n"
         "                self.state[name].copy_(self.state[name] * 0.999 + val * 0.001)\n\n\n"
         "def train(model, loader, optimizer, device):\n    ema = EMA(model, device)\n    for x, _ in loader:\n"
         "        model(x.to(device, non_blocking=True)).mean().backward()\n        optimizer.step()\n"
         "        ema.update(model)\n"),
        # a Hugging Face Trainer moved `inputs` to the device before `compute_loss`
        ("import torch\nfrom transformers import Trainer\n\n\nclass HeadsTrainer(Trainer):\n"
         "    def compute_loss(self, model, inputs, return_outputs=False):\n"
         "        logits = model(input_ids=inputs[\"input_ids\"])\n"
         "        labels = inputs[\"labels\"].to(logits.device)\n"
         "        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())\n"),
        # layers built lazily by the first forward and moved once (CUT's `create_mlp`): modules, not batches
        ("import torch\nfrom torch import nn\n\n\nclass PatchSampler(nn.Module):\n    def __init__(self):\n"
         "        super().__init__()\n        self.heads = None\n\n    def create_heads(self, feats):\n"
         "        heads = nn.ModuleList()\n        for feat in feats:\n"
         "            head = nn.Sequential(nn.Linear(feat.shape[-1], 16), nn.ReLU())\n            head.cuda()\n"
         "            heads.append(head)\n        self.heads = heads\n\n    def forward(self, feats):\n"
         "        if self.heads is None:\n            self.create_heads(feats)\n"
         "        return [head(f) for head, f in zip(self.heads, feats)]\n\n\n"
         "def train(model, sampler, loader, optimizer):\n    for x in loader:\n"
         "        feats = [model(x.cuda(non_blocking=True))]\n        loss = sum(f.mean() for f in sampler(feats))\n"
         "        loss.backward()\n        optimizer.step()\n"),
        # the project's batch helper copies without blocking, from a pinned loader
        ("import torch\nfrom torch.utils.data import DataLoader\n\n\ndef move_to_cuda(batch, gpu_id=0):\n"
         "    if isinstance(batch, dict):\n        return {k: move_to_cuda(v, gpu_id) for k, v in batch.items()}\n"
         "    return batch.cuda(gpu_id, non_blocking=True)\n\n\ndef train(model, dataset, optimizer):\n"
         "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n    for batch in loader:\n"
         "        batch = move_to_cuda(batch, 0)\n        loss = model(batch).sum()\n        loss.backward()\n"
         "        optimizer.step()\n"),
        ("import torch\n\n\nclass Head(torch.nn.Module):\n    def forward(self, hidden, labels):\n"
         "        logits = self.proj(hidden)\n        labels = labels.to(logits.device)\n"
         "        return torch.nn.functional.cross_entropy(logits, labels)\n"),
        training_script("w = y.to(device)"),
        # a mask drawn on the device is there already (Large-DiT's label dropout)
        training_script("keep = torch.rand(x.shape[0], device=device) < 0.1\nkeep = keep.cuda()"),
        ("import torch\n\n\ndef train(model, loader, optimizer, device):\n    device_type = \"cuda\"\n"
        "    for x, y in loader:\n        if device_type == \"cuda\":\n"
        "            x = x.pin_memory().to(device, non_blocking=True)\n        else:\n            x = x.to(device)\n"
        "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"),
        ("import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
        "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n    for x, y in loader:\n"
        "        x = x.to(device, non_blocking=True)\n        loss = model(x).sum()\n        loss.backward()\n"
        "        optimizer.step()\n"),
        training_script("z = x.type(torch.half)"),
        # the keywords passed on as a dict name `non_blocking` (fastNLP's `dict(non_blocking=non_blocking)`)
        ("import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
         "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n    copy = dict(non_blocking=True)\n"
         "    for x, y in loader:\n        x = x.to(device, **copy)\n        loss = model(x).sum()\n"
         "        loss.backward()\n        optimizer.step()\n"),
        _PREPARED_SCRIPT.format(pin=", pin_memory=True"),
        # diffusers' DreamBooth scripts: the prompts of prior-preservation images, generated once before training
        _PREPARED_SCRIPT.format(pin=", pin_memory=True").replace(
            "    loader = DataLoader(",
            "    sample_dataloader = DataLoader(dataset, batch_size=4)\n"
            "    (sample_dataloader,) = accelerator.prepare(sample_dataloader)\n"
            "    for x, y in sample_dataloader:\n        model(x)\n"
            "    loader = DataLoader("),
        # a mask a helper builds from a length already on the device is there too (StyleTTS's `length_to_mask`)
        ("import torch\nfrom torch.utils.data import DataLoader\n\n\ndef length_to_mask(lengths):\n"
         "    steps = torch.arange(int(lengths.max()), device=lengths.device)\n"
         "    return steps[None] >= lengths[:, None]\n\n\n"
         "def train(model, dataset, optimizer, device):\n"
         "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n"
         "    for batch in loader:\n        batch = [b.to(device, non_blocking=True) for b in batch]\n"
         "        mels, lengths = batch\n        mask = length_to_mask(lengths // 2).to(device)\n"
         "        loss = model(mels).sum() + mask.float().sum()\n        loss.backward()\n        optimizer.step()\n"),
        ("import torch\n\n\nclass Imagination:\n    def __init__(self, tokenizer: torch.nn.Module, device):\n"
         "        self.tokenizer = tokenizer.to(device).eval()\n\n\n"
         "def train(model, tokenizer, loader, optimizer, device):\n    for x in loader:\n"
         "        env = Imagination(tokenizer, device)\n        loss = model(x.to(device, non_blocking=True)).sum()\n"
         "        loss.backward()\n        optimizer.step()\n"),
        # a model's defensive move, behind a device comparison: its input arrives on the device in training
        ("import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n\n\nclass Head(nn.Module):\n"
         "    def forward(self, hidden, device):\n        if hidden.device != device:\n"
         "            hidden = hidden.to(device)\n        return hidden.mean()\n\n\n"
         "def train(model, head, dataset, optimizer, device):\n"
         "    loader = DataLoader(dataset, batch_size=4, pin_memory=True)\n    for x in loader:\n"
         "        loss = head(model(x.to(device, non_blocking=True)), device)\n        loss.backward()\n"
         "        optimizer.step()\n"),
    )
    invalid = (
        # simple_GRPO: each step's batch is fetched from a reference server, its tensors `torch.load`-ed on the host
        Invalid(_FETCHED_BATCH.format(to="to(model.weight.device)"), fixed=_FETCHED_BATCH.format(
            to="to(model.weight.device, non_blocking=True)")),
        # MMSelfSup's data preprocessor: MMEngine's `cast_data` copies each batch with its default `non_blocking=False`
        Invalid(_MM_PREPROCESSOR.format(init="")),
        # and its dataset configs: MMEngine's runner builds the training loader from the dict, without pinned memory
        Invalid(_MM_CONFIG.format(pin="")),
        # the same guard in the training loop is true every step: the batch comes from the host
        Invalid(_GUARDED_LOOP.format(copy="x.to(device)"), fixed=_GUARDED_LOOP.format(copy="x.to(device, non_blocking=True)")),
        # `non_blocking=False` written out (speech-resynthesis' loops) blocks as much as leaving it out
        Invalid(_GUARDED_LOOP.format(copy="x.to(device, non_blocking=False)"),
                fixed=_GUARDED_LOOP.format(copy="x.to(device, non_blocking=True)")),
        Invalid(_PREPARED_SCRIPT.format(pin=""), fixed=_PREPARED_SCRIPT.format(pin=", pin_memory=True")),
        # DGL-LifeSci's examples keep the device in a settings dict
        Invalid(_SETTINGS_DICT_LOOP.format(blocking=""), fixed=_SETTINGS_DICT_LOOP.format(blocking=", non_blocking=True")),
        # A loop over step numbers fetching each batch with `next`: the loader feeds the copy (the loader and the copy)
        Invalid(_STEPS_SCRIPT.format(pin="", blocking=""),
                fixed=_STEPS_SCRIPT.format(pin=", pin_memory=True", blocking=", non_blocking=True"), count=2),
        Invalid(  # the DataLoader calls `__getitem__` for every sample of every batch
            "import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\nclass TextSamplerDataset(Dataset):\n"
            "    def __init__(self, data, seq_len):\n        self.data, self.seq_len = data, seq_len\n\n"
            "    def __getitem__(self, index):\n        seq = self.data[index: index + self.seq_len + 1].long()\n"
            "        return seq.cuda()\n\n    def __len__(self):\n        return len(self.data) // self.seq_len\n\n\n"
            "def train(model, data, optimizer):\n"
            "    loader = DataLoader(TextSamplerDataset(data, 128), batch_size=4, pin_memory=True)\n"
            "    for batch in loader:\n        loss = model(batch).mean()\n        loss.backward()\n"
            "        optimizer.step()\n",
        ),
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x, y = x.to(device), y.to(device)\n        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            count=2,
        ),
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.cuda()\n        y = y.cuda()\n        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.cuda(non_blocking=True)\n        y = y.cuda(non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            count=2,
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
            "    loader = DataLoader(dataset, batch_size=4, shuffle=True)\n    for x, y in loader:\n"
            "        x = x.to(device, non_blocking=True)\n        y = y.to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        loss.backward()\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
            "    loader = DataLoader(dataset, batch_size=4, shuffle=True, pin_memory=True)\n    for x, y in loader:\n"
            "        x = x.to(device, non_blocking=True)\n        y = y.to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        loss.backward()\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
        ),
        Invalid(
            "import torch\n\nTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n\n\n"
            "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        x = x.type(Tensor)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\nTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n\n\n"
            "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        x = x.type(Tensor, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
        ),
        Invalid(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.pin_memory().to(device)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\n\n\ndef train(model, loader, optimizer, device):\n    for x, y in loader:\n"
            "        x = x.pin_memory().to(device, non_blocking=True)\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))\n"
            "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
            "    loader = DataLoader(dataset, batch_size=4, shuffle=True)\n    for x, y in loader:\n"
            "        x = x.to(device)\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
            "    loader = DataLoader(dataset, batch_size=4, shuffle=True, pin_memory=True)\n    for x, y in loader:\n"
            "        x = x.to(device, non_blocking=True)\n        loss = model(x).sum()\n        loss.backward()\n"
            "        optimizer.step()\n",
            count=2,  # the blocking copy, and the loader that is not pinned
        ),
    )

    @classmethod
    def has_words_in(cls, text: str) -> bool:
        # and an OpenMMLab data preprocessor's copy (`_copies_in_mm_preprocessor`): `super().forward(` alone is in
        # every other module file
        return any(word in text for word in cls.triggers if word not in _PREPROCESSOR_WORDS) \
            or "DataPreprocessor" in text and any(word in text for word in _PREPROCESSOR_WORDS)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        # an unpinned loader is reported where it is built; a data preprocessor's `forward` copies its batch
        return cls.has_words_in(code) or "DataLoader(" in code or "WebLoader(" in code \
            or name == "forward" and any(word in code for word in _PREPROCESSOR_WORDS)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._pinned_loader = False
        self._loaders_to_pin: list[cst.Call] = []  # DataLoaders that do not say `pin_memory`
        # DataLoaders that do not pin memory (no `pin_memory`, or `pin_memory=False`), with their ancestors
        self._unpinned_loaders: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []
        self._unpinned_on_purpose = False  # a DataLoader says `pin_memory=False`
        # accelerate / Fabric place the batches on the device themselves: how the file asks them
        # (`accelerator.prepare`, "" when it does not), and the names it hands them (`prepare(model, loader)`)
        self._prepare_call = ""
        self._prepared_names: set[str] = set()
        self._nonblocking: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []
        self._blocking: list[tuple[cst.Call, str, tuple[cst.CSTNode, ...]]] = []
        # Of those, the copies of values known to be built on the host (a tokenizer's output, `torch.from_numpy`):
        # copies whatever accelerate or Fabric do with the loader's batches
        self._host_built: set[int] = set()
        # The function `_built_on_host` last read: its nodes' positions in source order, and its assignments to a name
        self._function_order: dict[int, tuple[dict[int, int], list[cst.Assign]]] = {}
        self._cuda_type_names: set[str] = set()  # names bound to `torch.cuda.FloatTensor` and friends
        self._buffers: set[str] = set()  # `self.register_buffer("bias", ...)`: attributes that move with the module
        self._torch_built: set[tuple[int, str]] = set()  # (function, name) bound to a tensor made on the device
        # By function: the names it binds to what an environment's `step` returns (`_from_environment`)
        self._environment_outputs: dict[int, set[str]] = {}
        # Loaders handed to a trainer that copies their batches itself (Lightning, Composer): the names passed to
        # `trainer.fit(model, loader)` / `Trainer(train_dataloader=loader)`, and the functions that build the
        # training loader (`train_dataloader` hooks and the helpers they call).
        self._fed_to_trainer: set[str] = set()
        self._loader_builders: set[str] = set(TRAIN_LOADER_HOOKS)
        self._loops: list[cst.For] = []  # every `for` loop of the file (see `_iterated_without_training`)

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(node)

    def leave_Call(self, original_node: cst.Call) -> None:
        if last_name(original_node.func) in ("register_buffer", "register_parameter") and original_node.args:
            name = original_node.args[0].value
            if isinstance(name, cst.SimpleString):
                self._buffers.add(name.raw_value)

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            loader = _mm_config_loader(statement)
            if loader is not None and not _has_base_configs(node):
                self.report(loader, self.message_mm_config, when="always")

    def leave_Assign(self, node: cst.Assign) -> None:
        # `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (the classic GAN scripts' idiom)
        if self._is_cuda_type(node.value):
            for target in node.targets:
                self._cuda_type_names |= target_names(target.target)
        # `targets = torch.ones_like(classification) * -1`, then `targets = targets.cuda()`: made where its input
        # is, by a `*_like` factory, not a batch from the host. And `mlp = nn.Sequential(...)`, then `mlp.cuda()`: a
        # layer built lazily and moved once (CUT's `create_mlp`), no batch either.
        function = id(self.context.enclosing_function())
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                key = (function, target.target.value)
                made_there = self._made_like(node.value) or self._output_of_device_input(node.value) \
                    or self._builds_layer(node.value)
                (self._torch_built.add if made_there else self._torch_built.discard)(key)

    def _copies_in_mm_preprocessor(self, call: cst.Call) -> bool:
        """`self.cast_data(data)`, or `super().forward(data, training)` (MMEngine's `ImgDataPreprocessor.forward` runs
        `cast_data`), in the `forward` of a data preprocessor of an OpenMMLab project (a class whose base is named
        `...DataPreprocessor`, in a file importing an `mm*` package): MMEngine's runner runs it on every batch, and
        `cast_data` copies with `non_blocking=False` unless the preprocessor is built with `non_blocking=True`. A class
        that defaults `non_blocking` to True (MMYOLO's) is left out."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value == "cast_data":
            if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
                return False
        elif not (isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name)
                  and func.value.func.value == "super") or self._under_training_test():
            return False  # (`if not training: return super().forward(data, training)`: evaluation's batches)
        function = self.context.enclosing_function()
        owner = innermost(self.context.ancestors, cst.ClassDef)
        if function is None or function.name.value != "forward" or owner is None \
                or not any(_PREPROCESSOR_BASE.search(last_name(base.value) or "") for base in owner.bases):
            return False
        if func.attr.value == "forward" and any(isinstance(s, cst.ClassDef) and s.name.value == last_name(b.value)
                                                for s in self.context.module.body for b in owner.bases):
            return False  # the base is this file's own preprocessor: its `cast_data` is reported where it is
        return bool(_MM_IMPORT.search(self.context.source())) and not _NON_BLOCKING_DEFAULT.search(
            self.context.module.code_for_node(owner))

    def _under_training_test(self) -> bool:
        """Inside an `if` whose test reads `training`, the data preprocessor's flag: one branch is evaluation's."""
        return any(isinstance(node, cst.If) and any(isinstance(n, cst.Name) and n.value == "training"
                                                    for n in descendants(node.test))
                   for node in self.context.ancestors)

    def _builds_layer(self, expr: cst.BaseExpression) -> bool:
        """`nn.Sequential(...)`, `torch.nn.Linear(...)`: a module of torch.nn built here."""
        if not isinstance(expr, cst.Call):
            return False
        module, _, name = (self.context.resolve(expr.func) or "").rpartition(".")
        return module == "torch.nn" and name[:1].isupper() and name != "Parameter"

    def _is_cuda_type(self, expr: cst.BaseExpression) -> bool:
        return is_cuda_tensor_type(expr, self.context, self._cuda_type_names)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        self._note_trainer_loaders(node, method)
        if method in ("cast_data", "forward") and self._copies_in_mm_preprocessor(node):
            self.report(node, self.message_preprocessor)
            return
        if isinstance(func, cst.Attribute) and method in PREPARE_METHODS and (
                method == "setup_dataloaders" or ACCELERATE_OR_FABRIC.search(last_name(func.value) or "")):
            self._prepared_names |= {name for arg in node.args if (name := dotted_name(arg.value))}
            self._prepare_call = f"{last_name(func.value)}.{method}"
            return
        builds_loader = method in LOADER_CLASSES and not (
            isinstance(func, cst.Name) and method in self.context.facts.own_loaders)
        if builds_loader or method in self.context.facts.loader_factories:  # `distrib.loader(ds, **settings)` too
            pin = keyword_arg(node, "pin_memory")
            if any(arg.star == "**" for arg in node.args) and not self._unpacks_unpinned_settings(node):
                self._pinned_loader = True  # `**kwargs` may set pin_memory: do not claim it is unpinned
            elif pin is None:
                self._loaders_to_pin.append(node)
                self._unpinned_loaders.append((node, self.context.ancestors_snapshot()))
            elif is_false(pin.value):
                self._unpinned_on_purpose = True
                self._unpinned_loaders.append((node, self.context.ancestors_snapshot()))
            else:
                self._pinned_loader = True
            return
        if method in BATCH_MOVE_HELPERS and len(node.args) >= 2 and keyword_arg(node, "non_blocking") is None:
            if method in self.context.facts.nonblocking_movers:
                # the project's own helper, whose copies pass `non_blocking=True`: as fast as the loader's memory
                self._nonblocking.append((node, self.context.ancestors_snapshot()))
                return
            moved_by_lightning = self._in_lightning_module() and root_name(node.args[0].value) != "self"
            if self._stored_back(node.args[0].value):
                return
            if not self._on_cpu_branch() and not moved_by_lightning:
                self._blocking.append((node, f"{method}(batch, device)", self.context.ancestors_snapshot()))
            return
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda", "type"):
            return
        if isinstance(func.value, cst.Call) and last_name(func.value.func) == "super":
            return  # `super().to(device=device, dtype=dtype)` in a module's own `to`: the module moves, not a batch
        # (or a tensor a host value holds: simple_GRPO's `batch = get_batch()`, tensors `torch.load`-ed from an HTTP
        # reply, then `batch['inputs'].to(engine.device)` in the step function)
        on_host = self._built_on_host(func.value) or self._held_by_host_value(func.value)
        if func.attr.value == "to" and not self._device_target(node, on_host):
            return
        if func.attr.value == "type" and not (node.args and node.args[0].keyword is None and self._is_cuda_type(node.args[0].value)):
            return
        if self._input_of_a_layer(func.value) or self._stored_back(func.value) or self._from_environment(func.value) \
                or self._in_module_branch(func.value) or self._batch_moving_itself(func.value) \
                or self._prepared_by_trainer(func.value) or self._behind_device_mismatch(func.value):
            return
        pinned = _is_pinned_call(func.value)  # `x.pin_memory().to(device)`: pinned for nothing without non_blocking
        if (self._moves_device_value(func.value) and not pinned) or self._on_cpu_branch() \
                or (self._in_lightning_module() and root_name(func.value) != "self"):
            return
        non_blocking = keyword_arg(node, "non_blocking")
        if non_blocking is None and self._passes_non_blocking_in_keywords(node):
            return
        if non_blocking is not None and not is_false(non_blocking.value):
            if not pinned:
                self._nonblocking.append((node, self.context.ancestors_snapshot()))
            return
        call = {"cuda": "x.cuda()", "to": "x.to(device)", "type": "x.type(torch.cuda.FloatTensor)"}[func.attr.value]
        # (`non_blocking=False` written out, speech-resynthesis' loops: as blocking as leaving it out)
        self._blocking.append((node, call, self.context.ancestors_snapshot()))
        if on_host:
            self._host_built.add(id(node))

    def _unpacks_unpinned_settings(self, loader: cst.Call) -> bool:
        """Does the loader unpack only names its function binds to a dict display, in a function that never names
        `pin_memory` (drugban's `params = {"batch_size": ..., "shuffle": True}`, then `DataLoader(ds, **params)`)?"""
        function = self.context.enclosing_function()
        unpacked = [arg.value for arg in loader.args if arg.star == "**"]
        if function is None or not all(isinstance(value, cst.Name) for value in unpacked):
            return False
        names = {value.value for value in unpacked}  # type: ignore[attr-defined]
        bound = {name for node in descendants(function) if isinstance(node, cst.Assign)
                 and isinstance(node.value, cst.Dict) for name in target_names(node.targets[0].target)}
        return names <= bound and "pin_memory" not in self.context.module.code_for_node(function)

    def _in_module_branch(self, moved: cst.BaseExpression) -> bool:
        """Is the copy in the body of `if isinstance(x, nn.Module):` (or `if ... and isinstance(x, torch.nn.Module):`)
        for the moved `x`? A helper that moves both models and batches (Palette's `set_gpu`) moves a model there."""
        name = root_name(moved)
        stack = self.context.ancestors
        for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
            if not (isinstance(parent, cst.If) and child is parent.body):
                continue
            test = parent.test
            conjuncts = [test.left, test.right] if isinstance(test, cst.BooleanOperation) \
                and isinstance(test.operator, cst.And) else [test]
            if any(isinstance(c, cst.Call) and last_name(c.func) == "isinstance" and len(c.args) == 2
                   and root_name(c.args[0].value) == name and (last_name(c.args[1].value) or "").endswith("Module")
                   for c in conjuncts):
                return True
        return False

    def _behind_device_mismatch(self, moved: cst.BaseExpression) -> bool:
        """`if img.device != device: img = img.to(device)` in a model's method (a class deriving from a module,
        model or policy class): a defensive move that copies only when a caller hands in a tensor from elsewhere; in
        training the step's activations are on the device already (block-swapping models compare too, and move
        weights, not activations). Elsewhere the devices differ by design (TorchRL's CPU sampler indices for a CUDA
        storage, an environment's data for its device), and in a training loop the batch is on the host: findings."""
        function = self.context.enclosing_function()
        cls = innermost(self.context.ancestors, cst.ClassDef)
        if function is None or cls is None or holds_training_loop(self.context, function) \
                or self._is_step_function(function) \
                or not any(_MODEL_BASE.search(last_name(base.value) or "") for base in cls.bases):
            return False
        moved_code = self.context.module.code_for_node(moved)
        stack = self.context.ancestors
        for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
            if isinstance(parent, cst.If) and child is parent.body and _compares_device_of(
                    parent.test, moved_code, self.context.module.code_for_node):
                return True
        return False

    def _from_environment(self, moved: cst.BaseExpression) -> bool:
        """Is the moved tensor what a reinforcement-learning environment's `step` returned in this function (`obs,
        rewards, dones, extras = self.env.step(actions)`, then `obs.to(self.device)`)? The observation must reach the
        policy every environment step (and it is already there where the environment runs on the device); like the
        rest of the exchange with the environment, it is not reported."""
        name = root_name(moved)
        function = self.context.enclosing_function()
        if not name or function is None:
            return False
        if id(function) not in self._environment_outputs:
            self._environment_outputs[id(function)] = {
                returned for node in descendants(function)
                if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)
                and steps_environment(dotted_name(node.value.func) or "")
                for t in node.targets for returned in target_names(t.target)}
        return name in self._environment_outputs[id(function)]

    def leave_Module(self, node: cst.Module) -> None:
        self._emit()

    def _emit(self) -> None:
        if self._prepare_call:
            # The loaders' batches arrive on the device; what the step builds on the host itself is still copied.
            for call, text, ancestors in self._blocking:
                if id(call) in self._host_built and not _in_dataset_item(ancestors):
                    self.report_at(call, self.message_host.format(call=text), ancestors, fix=self._fix(call),
                                   unsafe_fix=True)
            self._emit_prepared_loaders()
            return
        for call, text, ancestors in self._blocking:
            if _in_dataset_item(ancestors):
                # The DataLoader calls it for every sample, out of the model's sight: wherever the file trains.
                if self.context.facts.step_code() and not in_error_path_or_first_step(ancestors):
                    self.context.add_report(Report(self, call, self.message_dataset, "always", ancestors))
                continue
            self.report_at(call, self.message.format(call=text), ancestors, fix=self._fix(call), unsafe_fix=True)
        # A batch copied in a loop over batches: the loader feeds it, whatever else the file moves.
        batch_copies = [call for call, _, ancestors in self._blocking if _in_batch_loop(ancestors, self.context)]
        # (Only in a file with a training step: a file without one copies batches for inference or a demo.)
        in_file = (self._nonblocking or batch_copies) and self.context.facts.step_code()
        # A data module that copies nothing itself (open_flamingo's `data.py`, guided-diffusion's `load_data`
        # generator) feeds the copies of another file's step.
        # A file whose own training loop takes the loader's batches as they are feeds only the copies that loop
        # reaches (ImageReward's `model(batch)`, whose `forward` moves the batch), not every file's: Safe-Policy-
        # Optimization's `DataLoader(TensorDataset(*rollout_tensors))` hands on tensors the rollout buffer keeps on
        # the device.
        facts = self.context.facts
        elsewhere = "" if self._nonblocking or batch_copies else \
            facts.loop_batches_copied if self._loops_over_own_loader() else facts.batches_copied
        # A Dataset whose `__getitem__` hands out device tensors (lucidrains' `TextSamplerDataset`): its loader's
        # batches are on the device already, where pinning cannot apply; the copy per sample is the finding.
        on_device_items = any(_in_dataset_item(ancestors) for _, _, ancestors in self._blocking)
        if (in_file or elsewhere) and not self._pinned_loader and not on_device_items:
            # Built once, at setup: the loader is real wherever the training program builds it ("training"); the
            # copies that make it slow are in the step.
            nonblocking = self._nonblocking if in_file else elsewhere == "nonblocking"
            message = self.message_unpinned if nonblocking else self.message_unpinned_blocking
            # A file with no training step looping over its own loader (tevatron's `encode.py`) feeds no step with it.
            own = self._iterated_without_training() if not in_file and not self.context.facts.step_code() else set()
            for loader, ancestors in self._unpinned_loaders:
                if _bound_to(ancestors, own):
                    continue
                pinned = self._pinned(loader) if loader in self._loaders_to_pin else None
                fix = (pinned,) if pinned is not None else ()
                if not in_error_path_or_first_step(ancestors) and not _bound_for_evaluation(ancestors) \
                        and (in_file or not _for_evaluation(ancestors)):
                    self.context.add_report(Report(self, loader, message, "training", ancestors, fix, True))
            return
        for loader, ancestors in self._unpinned_loaders:
            if loader in self._loaders_to_pin and self._feeds_trainer(ancestors) \
                    and not in_error_path_or_first_step(ancestors):
                pinned = self._pinned(loader)
                self.context.add_report(Report(self, loader, self.message_trainer, "training", ancestors,
                                               (pinned,) if pinned is not None else (), True))

    def _loops_over_own_loader(self) -> bool:
        """Does a training loop of this file iterate a name it binds to one of its unpinned loaders (`for obs_b, ret_b in
        dataloader:` with `dataloader = DataLoader(...)`), and name no device in its body? Its batches reach the step
        uncopied (not DeBERTa's `batch = batch_to(batch, self.device)`, a project helper's copy). ModelCenter's
        `torch.cuda.synchronize()` around the step, for timing, and `bmt.print_rank(...)` name no device to copy to."""
        if not self.context.facts.step_code():
            return False
        bound = {name for _, ancestors in self._unpinned_loaders
                 if (name := _bound_name(next((n for n in reversed(ancestors) if isinstance(n, cst.Assign)), None)))}
        for loop in self._loops:
            body = self.context.module.code_for_node(loop.body)
            if _names_in(loop.iter) & bound and _TRAINS.search(body) \
                    and not _BODY_DEVICE_WORDS.search(_CUDA_API.sub("", body)):
                return True
        return False

    def _emit_prepared_loaders(self) -> None:
        """The training loaders without `pin_memory` that accelerate or Fabric copy to the device, in a file with a
        training step."""
        if not self.context.facts.step_code():
            return
        for loader, ancestors in self._unpinned_loaders:
            # (bound to a name the file prepares, or built by a function whose result is prepared: `build_data()`)
            handed = _bound_to(ancestors, self._prepared_names) or self._in_fed_builder(ancestors)
            if loader not in self._loaders_to_pin or not handed \
                    or in_error_path_or_first_step(ancestors) \
                    or _bound_for_evaluation(ancestors) or _for_evaluation(ancestors):
                continue
            pinned = self._pinned(loader)
            self.context.add_report(Report(self, loader, self.message_prepared.format(prepare=self._prepare_call),
                                           "training", ancestors, (pinned,) if pinned is not None else (), True))

    def _note_trainer_loaders(self, node: cst.Call, method: str | None) -> None:
        receiver = last_name(node.func.value) if isinstance(node.func, cst.Attribute) else None
        if method == "fit" and "trainer" in (receiver or "").lower():
            # `fit(model, train_dataloaders, val_dataloaders)`: the second positional argument is the training loader
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if len(positional) >= 2 and (name := dotted_name(positional[1].value)):
                self._fed_to_trainer.add(name)
        if method in ("fit", "Trainer"):
            self._fed_to_trainer |= {n for a in node.args if a.keyword is not None
                                     and a.keyword.value in TRAIN_LOADER_KEYWORDS and (n := dotted_name(a.value))}
        function = self.context.enclosing_function()
        if function is not None and function.name.value in TRAIN_LOADER_HOOKS and method:
            self._loader_builders.add(method)  # `def train_dataloader(self): return self._dataloader()`

    def _iterated_without_training(self) -> set[str]:
        """The names the file's loops iterate without training on what they get (tevatron's `for ids, batch in
        tqdm(encode_loader):`; not DI-engine's `for i, data in enumerate(loader): learner.train(data)`). Read only
        when a loader might be reported: it regenerates each loop's body."""
        names: set[str] = set()
        for loop in self._loops:
            if not _TRAINS.search(self.context.module.code_for_node(loop.body)):
                names |= _names_in(loop.iter)
        return names

    def _feeds_trainer(self, ancestors: tuple[cst.CSTNode, ...]) -> bool:
        """Is the DataLoader built in a Lightning module's training-loader hook (or a helper it calls), or bound to
        a name the file hands to a trainer?"""
        function, owner = innermost(ancestors, cst.FunctionDef), innermost(ancestors, cst.ClassDef)
        if function is not None and function.name.value in self._loader_builders \
                and owner is not None and owner.name.value in self.context.facts.lightning_classes:
            return True
        if self._in_fed_builder(ancestors):
            return not _bound_for_evaluation(ancestors) and not _for_evaluation(ancestors)
        return _bound_to(ancestors, self._fed_to_trainer)

    def _in_fed_builder(self, ancestors: tuple[cst.CSTNode, ...]) -> bool:
        """Is the node in a function whose loaders a trainer or `accelerator.prepare` takes, from this file or another
        (the project model follows the calls: `FileFacts.trainer_loader_builders`)?"""
        return qualname_of(ancestors) in self.context.facts.trainer_loader_builders

    def _fix(self, call: cst.Call) -> list[Replace]:
        """`non_blocking=True` on the copy, and `pin_memory=True` on this file's loaders that do not set it: from
        pageable memory the flag alone changes nothing, and this rule would report the fixed copy. None for a helper
        (it may not take the argument), or where a loader turns pinning off on purpose."""
        if last_name(call.func) in BATCH_MOVE_HELPERS:
            return []
        copy = [Replace(call, _with_non_blocking(call))]
        if self._pinned_loader or _is_pinned_call(call.func.value):  # type: ignore[attr-defined]
            return copy
        pins = [self._pinned(loader) for loader in self._loaders_to_pin]
        if self._unpinned_on_purpose or None in pins:
            return []
        return copy + pins

    def _pinned(self, loader: cst.Call) -> Replace | None:
        """`pin_memory=True` after the loader's last argument, as text: libcst would write a whole call that spans
        lines without its block's indentation. None when the last argument spans lines itself (or there is none)."""
        if not loader.args:
            return None
        last = loader.args[-1].value
        code = self.context.module.code_for_node(last)
        return None if "\n" in code else Replace(last, f"{code}, pin_memory=True")

    def _device_target(self, call: cst.Call, on_host: bool = False) -> bool:
        """`.to(device)`, `.to("cuda")`, `.to(local_rank)`, `.to(device=...)`: a move to an accelerator. `on_host`:
        the moved value is built on the host, so a move to another tensor's device or to accelerate's is a copy too."""
        if cpu_target(call):
            return False
        keyword = keyword_arg(call, "device")
        if keyword is not None:
            return on_host or not self._to_other_tensors_device(dotted_name(keyword.value) or "")
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            # `x.to(**self.tpdv)`, where the file (or any file, for an attribute) binds `tpdv = dict(device=...)`
            unpacked = next((arg.value for arg in call.args if arg.star == "**"), None)
            return unpacked is not None \
                and (dotted_name(unpacked) or "").rsplit(".", 1)[-1] in self.context.facts.device_kwargs
        target = call.args[0].value
        if isinstance(target, cst.SimpleString):
            return target.raw_value.split(":")[0] in ("cuda", "xpu", "mps")
        if isinstance(target, cst.Integer):
            return True
        if isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) \
                and isinstance(key := target.slice[0].slice.value, cst.SimpleString):
            return bool(_DEVICE_WORDS.search(key.raw_value))  # `args['device']`: a settings dict's device (DGL-LifeSci)
        name = dotted_name(target.func) if isinstance(target, cst.Call) else dotted_name(target)  # `dist_util.dev()`
        if name is None or "dtype" in name:
            return False
        if re.search(r"accelerator|fabric", name):
            # accelerate / Fabric move batches themselves: a batch's `x.to(accelerator.device)` is a no-op
            return on_host
        if not isinstance(target, cst.Call) and self._to_other_tensors_device(name):
            # `x.to(logits.device)`; a call (`idist.device()`) names the run's device, not a tensor's
            return on_host
        return bool(_DEVICE_WORDS.search(name.rsplit(".", 1)[-1]))

    def _held_by_host_value(self, moved: cst.BaseExpression) -> bool:
        """`batch["inputs"]`, an entry of a container the project model knows is on the host (a parameter every caller
        passes host data for, what a project function returns from `json.loads` and `torch.load`): a CPU tensor."""
        # (a name: what a factory call makes and cuts, `torch.arange(n)[None].to(d)`, is GPL504's CPU-built tensor)
        return isinstance(moved, cst.Subscript) and isinstance(moved.value, cst.Name) \
            and self.context.location_of(moved.value) == "host"

    def _built_on_host(self, moved: cst.BaseExpression) -> bool:
        """Is `moved` built on the host by the function itself: a preprocessor's output (`tokenizer(...)`, its
        `.input_ids`), a tensor a torch factory or `torch.tensor` makes without `device=`, `torch.from_numpy`, and
        what is cut, cast or joined from such (SDXL's `add_time_ids`)? Names count when every binding of them up to the
        copy is such a value."""
        function = self.context.enclosing_function()
        if function is None:
            return False
        built: set[str] = set()
        if root_name(moved):  # (a name's bindings are read once per function, in source order)
            if id(function) not in self._function_order:
                nodes = list(descendants(function))
                self._function_order = {id(function): (
                    {id(node): index for index, node in enumerate(nodes)},
                    [node for node in nodes if isinstance(node, cst.Assign) and len(node.targets) == 1
                     and isinstance(node.targets[0].target, cst.Name)])}
            order, assigns = self._function_order[id(function)]
            at = order.get(id(moved), -1)
            enclosing = {id(node) for node in self.context.ancestors}  # (the copy's own `x = x.to(...)` binds after)
            for node in assigns:
                if order[id(node)] >= at:
                    break
                if id(node) not in enclosing:
                    if self._host_value(node.value, built):
                        built.add(node.targets[0].target.value)
                    else:
                        built.discard(node.targets[0].target.value)
        return self._host_value(moved, built)

    def _host_value(self, expr: cst.BaseExpression, built: set[str]) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in built
        if isinstance(expr, (cst.Attribute, cst.Subscript)):  # `text_inputs.input_ids`, `encoded["input_ids"]`
            return isinstance(expr.value, cst.Name) and expr.value.value in built
        if not isinstance(expr, cst.Call):
            return False
        if preprocesses(expr.func):
            return True
        resolved = self.context.resolve(expr.func) or ""
        keywords = [a.keyword.value for a in expr.args if a.keyword is not None]
        if "device" in keywords:
            return False
        if builds_on_cpu_by_default(resolved, keywords) or resolved in ("torch.tensor", "torch.from_numpy"):
            return True
        if resolved in JOINING_FUNCTIONS and expr.args and isinstance(expr.args[0].value, (cst.List, cst.Tuple)):
            parts = [e.value for e in expr.args[0].value.elements if isinstance(e, cst.Element)]
            return bool(parts) and all(self._host_value(part, built) for part in parts)
        func = expr.func
        return isinstance(func, cst.Attribute) and func.attr.value in SAME_PLACE_METHODS \
            and self._host_value(func.value, built)

    def _stored_back(self, moved: cst.BaseExpression) -> bool:
        """`self.W.data = to_device(self.W.data, ...)`, `self.pe = self.pe.to(x.device)`, `setattr(self, name,
        to_device(getattr(self, name), ...))`: state the object keeps, moved the first time; every later call finds it
        on the device and copies nothing."""
        if self._in_batch_class():
            return False  # `self.V = self.V.to(device)` in a batch's own `to`: a new batch every step
        code = self.context.module.code_for_node
        if self._indexes_state_stored_back(moved, code):
            return True
        depth = 1
        while isinstance(self.context.parent(depth), cst.Attribute) and isinstance(self.context.parent(depth + 1),
                                                                                   cst.Call):
            depth += 2  # `self.ref = self.ref.to(z.device).type(y.dtype)`: the moved tensor, cast, is stored back
        parent = self.context.parent(depth)
        if isinstance(parent, cst.Assign):
            return len(parent.targets) == 1 and root_name(parent.targets[0].target) == "self" \
                and code(parent.targets[0].target) == code(moved)
        setter = self.context.parent(2)
        if not (isinstance(parent, cst.Arg) and isinstance(setter, cst.Call) and last_name(setter.func) == "setattr"
                and len(setter.args) == 3 and setter.args[2] is parent):
            return False
        return isinstance(moved, cst.Call) and last_name(moved.func) == "getattr" and len(moved.args) == 2 \
            and [code(a.value) for a in moved.args] == [code(a.value) for a in setter.args[:2]]

    def _indexes_state_stored_back(self, moved: cst.BaseExpression, code) -> bool:
        """`self.logvar[t].cuda()` after `self.logvar = self.logvar.to(self.device)` earlier in the function: the
        state lives on the device from the first call on, and so does what is picked from it."""
        while isinstance(moved, cst.Subscript):
            moved = moved.value
        if not (isinstance(moved, cst.Attribute) and root_name(moved) == "self"):
            return False
        function = self.context.enclosing_function()
        if function is None:
            return False
        state = re.escape(code(moved))
        stored = re.compile(rf"^\s*{state}\s*=\s*{state}\s*\.\s*(?:to|cuda)\(", re.MULTILINE)
        return bool(stored.search(code(function)))

    def _batch_moving_itself(self, receiver: cst.BaseExpression) -> bool:
        """`self.to(device)`, `super().to(device)` in a batch class: the move of its fields, which are the copies."""
        own = isinstance(receiver, cst.Name) and receiver.value == "self" or isinstance(receiver, cst.Call) \
            and isinstance(receiver.func, cst.Name) and receiver.func.value == "super"
        return own and self._in_batch_class()

    def _in_batch_class(self) -> bool:
        """In a method of a class a collate function builds (chemprop's `BatchMolGraph.to`): its objects are batches."""
        if not self.context.facts.batch_classes:
            return False
        ancestors = self.context.ancestors
        cls = innermost(ancestors, cst.ClassDef)
        return cls is not None and qualname_of(ancestors[:ancestors.index(cls) + 1]) in self.context.facts.batch_classes

    def _to_other_tensors_device(self, target: str) -> bool:
        """`labels.to(logits.device)`, `hidden.to(self.lm_head.weight.device)` in model code (a `forward`, or any
        function that holds no training loop): a move between the devices of a split model (a no-op on one device),
        not the copy of a batch from the host, which the training loop makes."""
        owner, _, attribute = target.rpartition(".")
        if attribute != "device" or owner in ("self", "cls", "args", ""):
            return False
        if owner.rsplit(".", 1)[-1] not in ("weight", "bias") and ("." in owner or MODULE_NAME.search(owner)):
            return False
        function = self.context.enclosing_function()
        if function is None:
            return False
        if function.name.value == "forward":
            return True
        return not holds_training_loop(self.context, function) and not self._is_step_function(function)

    def _is_step_function(self, function: cst.FunctionDef) -> bool:
        """A training step the framework loops over (`def train_step(engine, batch)`): it copies the batch from the
        host, though it holds no loop."""
        if function.name.value in DEFAULT_HOT_FUNCTIONS and function.name.value not in ("forward", "__call__"):
            return True
        return ".backward(" in self.context.module.code_for_node(function.body)

    def _moves_device_value(self, receiver: cst.BaseExpression) -> bool:
        """Already on the device (or a gradient, or a registered buffer, or what a project function computes from a
        device tensor: StyleTTS's `length_to_mask(lengths).to(device)`), a module, or a CPU tensor built in the step
        (GPL5xx's `device=` finding)."""
        if self.context.location_of(receiver) == "device" or _mentions_grad(receiver) \
                or self._built_by_torch(receiver) or self._output_of_device_input(receiver):
            return True
        if isinstance(receiver, cst.Name) and (receiver.value == "self" or self._model_tensor(receiver.value)):
            return True  # the object itself (`self.to(device=...)`), or a model's weight an EMA reads
        if self._buffers and _self_attribute(receiver) in self._buffers:
            return True  # `self.bias[None, :n].to(device)`: buffers move with the module
        return bool(MODULE_NAME.search(last_name(receiver) or "")) or self._annotated_module(receiver)

    def _model_tensor(self, name: str) -> bool:
        """Is `name` the tensor a loop over a model's weights binds (detectron2-style EMAs: `for name, val in
        self._get_model_state_iterator(model): val = val.to(self.device)`, or `model.named_parameters()`)? The model
        lives on the device: such a move is no copy of a batch (and none at all where the EMA shares the device)."""
        loop = self.context.innermost_loop()
        return isinstance(loop, cst.For) and name in target_names(loop.target) and is_model_tensor_iterable(loop.iter)

    def _annotated_module(self, receiver: cst.BaseExpression) -> bool:
        """A parameter annotated as a module (iris's `WorldModelEnv(tokenizer: torch.nn.Module, ...)`, built every
        step, runs `tokenizer.to(self.device)`): moving a module that is on the device already copies nothing."""
        function = self.context.enclosing_function()
        if function is None or not isinstance(receiver, cst.Name):
            return False
        for param in params_of(function):
            if param.name.value == receiver.value and param.annotation is not None:
                return bool(_MODULE_ANNOTATION.search(self.context.module.code_for_node(param.annotation.annotation)))
        return False

    def _output_of_device_input(self, expr: cst.BaseExpression) -> bool:
        """`netG(s_t.cuda())`, `fft(x_t).detach()` with `x_t` on the device: what a module computes from a device
        tensor is on the device too (melgan's `x_pred_t.cuda()` copies nothing)."""
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in SAME_PLACE_METHODS:
            expr = expr.func.value
        if not isinstance(expr, cst.Call) or (self.context.resolve(expr.func) or "").startswith(("torch.", "numpy.")):
            return False
        return any(a.keyword is None and self.context.location_of(a.value) == "device" for a in expr.args)

    def _made_like(self, expr: cst.BaseExpression) -> bool:
        """`torch.ones_like(x) * alpha`: a tensor made on the device of another by a `*_like` factory."""
        if isinstance(expr, cst.BinaryOperation):
            return self._made_like(expr.left) or self._made_like(expr.right)
        if isinstance(expr, cst.Call):
            resolved = self.context.resolve(expr.func) or ""
            return resolved.startswith("torch.") and resolved.endswith("_like")
        return False

    def _built_by_torch(self, expr: cst.BaseExpression) -> bool:
        """`torch.arange(n) + offset`, `torch.ones(k).float()`, a name bound to `torch.ones_like(x)`: a tensor made in
        the step, not a batch."""
        if isinstance(expr, cst.Name):
            return (id(self.context.enclosing_function()), expr.value) in self._torch_built
        if isinstance(expr, cst.BinaryOperation):
            return self._built_by_torch(expr.left) or self._built_by_torch(expr.right)
        if isinstance(expr, cst.Call):
            if (self.context.resolve(expr.func) or "").startswith("torch."):
                return True
            if isinstance(expr.func, cst.Attribute):
                return self._built_by_torch(expr.func.value)
        return False

    def _input_of_a_layer(self, receiver: cst.BaseExpression) -> bool:
        """`inputs.to(self.device)` in the `forward` of a class another module builds as a layer (kospeech's
        `ConformerEncoder`): its inputs come from that module, already on the device. Likewise in any module's
        `forward` where the step code of another file copies the batches itself (DeBERTa's trainer moves each batch
        with `batch_to` before its task heads move `input_ids` again)."""
        function = self.context.enclosing_function()
        cls = innermost(self.context.ancestors, cst.ClassDef)
        if function is None or function.name.value != "forward" or cls is None \
                or (cls.name.value not in self.context.facts.layer_classes and not self.context.facts.batches_copied):
            return False
        root = root_name(receiver)
        # (unless every caller hands it host data: FUNIT's trainer passes the loader's batches on to its model,
        # whose `forward` copies `co_data[0].cuda()`)
        return root is not None and root != "self" and any(p.name.value == root for p in function.params.params) \
            and self.context.location_of(cst.Name(root)) != "host"

    def _prepared_by_trainer(self, receiver: cst.BaseExpression) -> bool:
        """`inputs["labels"].to(logits.device)` in the `compute_loss(self, model, inputs)` of a Hugging Face `Trainer`
        subclass (transformers, trl): the trainer's `training_step` moved `inputs` to the device before calling it
        (`_prepare_inputs`). An overridden `training_step` gets them unmoved, so only `compute_loss` is meant."""
        function = self.context.enclosing_function()
        cls = innermost(self.context.ancestors, cst.ClassDef)
        if function is None or cls is None or function.name.value != "compute_loss":
            return False
        params = [p.name.value for p in function.params.params]
        if root_name(receiver) not in params[2:3]:  # (self, model, inputs, ...)
            return False
        return any((self.context.resolve(base.value) or "").startswith(("transformers.", "trl."))
                   and (dotted_name(base.value) or "").endswith("Trainer") for base in cls.bases)

    def _in_lightning_module(self) -> bool:
        """In a method of a LightningModule (the project model follows its bases across files): Lightning moves
        each batch to the device before `training_step`, so `batch[k].to(self.device)` copies nothing (a tensor the
        module keeps, `self.logvar[t].to(self.device)`, may still be on the host)."""
        for node in reversed(self.context.ancestors):
            if isinstance(node, cst.ClassDef):
                return node.name.value in self.context.facts.lightning_classes
        return False

    def _passes_non_blocking_in_keywords(self, node: cst.Call) -> bool:
        """`data.to(device, **kwargs)` where its function binds `kwargs` to keywords naming `non_blocking` (fastNLP's
        `kwargs = dict(non_blocking=non_blocking) if isinstance(data, torch.Tensor) else {}`)."""
        names = {arg.value.value for arg in node.args if arg.star == "**" and isinstance(arg.value, cst.Name)}
        function = self.context.enclosing_function()
        if not names or function is None:
            return False
        for assign in descendants(function):
            if isinstance(assign, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value in names for t in assign.targets):
                if any(isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "non_blocking"
                       or isinstance(n, cst.SimpleString) and n.value.strip("'\"") == "non_blocking"
                       for n in descendants(assign.value)):
                    return True
        return False

    def _on_cpu_branch(self) -> bool:
        """Inside the `else` of `if device_type == "cuda":` (or the body of `if device == "cpu":`)."""
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, cst.FunctionDef):
                return False
            if isinstance(node, cst.If):
                compared = _compared_device_literal(node.test)
                if compared == "cuda" and child is node.orelse or compared == "cpu" and child is node.body:
                    return True
        return False


_BATCH_SOURCE = re.compile(r"loader|batch|next\(|data", re.IGNORECASE)
# `for batch in pbar:`, `for i, data in enumerate(bar)`: the loop variable names what the wrapper yields.
_BATCH_TARGET = re.compile(r"\b(batch|data|inputs)\b", re.IGNORECASE)
# The keywords that hand a training loader to a trainer.


def _in_batch_loop(ancestors: tuple[cst.CSTNode, ...], context) -> bool:
    """Is a node inside a loop over batches (`for x, y in train_loader:`, `while ...: batch = next(it)`, `for step in
    range(total_steps): x = next(datalooper)`)? Read off the loop's iterable, or its body's code."""
    for node in ancestors:
        if isinstance(node, cst.For) and (_BATCH_SOURCE.search(context.module.code_for_node(node.iter))
                                          or _BATCH_TARGET.search(context.module.code_for_node(node.target))
                                          or _wraps_a_loader(node.iter, ancestors, context)):
            return True
        if isinstance(node, (cst.For, cst.While)) and "next(" in context.module.code_for_node(node.body):
            return True
    return False


def _wraps_a_loader(iterated: cst.BaseExpression, ancestors: tuple[cst.CSTNode, ...], context) -> bool:
    """`for x, c in pbar:` where the function bound `pbar = tqdm(dataloader)`: a progress bar over a loader."""
    function = innermost(ancestors, cst.FunctionDef)
    if not isinstance(iterated, cst.Name) or function is None:
        return False
    name = re.escape(iterated.value)
    bound = re.compile(rf"(?<![\w.]){name}\s*=\s*[\w.]+\((?:[^()\n]*[^\w()\n])?\w*(?:loader|batches)\b",
                       re.IGNORECASE)
    return bound.search(context.module.code_for_node(function.body)) is not None


def _mentions_grad(expr: cst.BaseExpression) -> bool:
    """`p.grad.detach().abs().max()`: gradients are where their parameters are."""
    while True:
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "grad":
                return True
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return False


def _compared_device_literal(test: cst.BaseExpression) -> str | None:
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, cst.Equal) and isinstance(target.comparator, cst.SimpleString):
            value = target.comparator.raw_value.split(":")[0]
            return value if value in ("cuda", "cpu") else None
    return None


def _self_attribute(expr: cst.BaseExpression) -> str | None:
    """`bias` for `self.bias`, `self.bias[None, :n]`, `self.bias.view(...)`."""
    while isinstance(expr, (cst.Subscript, cst.Call)):
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _is_pinned_call(receiver: cst.BaseExpression) -> bool:
    return isinstance(receiver, cst.Call) and last_name(receiver.func) == "pin_memory"


def _with_non_blocking(call: cst.Call) -> cst.Call:
    """The call with `non_blocking=True`: added, or in place of a `non_blocking=False` it passes."""
    if any(arg.keyword is not None and arg.keyword.value == "non_blocking" for arg in call.args):
        return call.with_changes(args=[arg.with_changes(value=cst.Name("True"))
                                       if arg.keyword is not None and arg.keyword.value == "non_blocking" else arg
                                       for arg in call.args])
    args = list(call.args)
    if args:
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(keyword=cst.Name("non_blocking"), value=cst.Name("True"),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


def _in_dataset_item(ancestors: tuple[cst.CSTNode, ...]) -> bool:
    """Inside `__getitem__` of a class deriving from a `...Dataset` (lucidrains' `TextSamplerDataset(Dataset)`)."""
    function = innermost(ancestors, cst.FunctionDef)
    cls = innermost(ancestors, cst.ClassDef)
    return function is not None and function.name.value == "__getitem__" and cls is not None \
        and any((last_name(base.value) or "").endswith("Dataset") for base in cls.bases)


# Words of a loader's name that say evaluation: `cv_loader` and `tt_loader` (cross-validation and test sets in
# facebookresearch's audio recipes), `dev_loader` (a dev set), `sample_dataloader` (the prompts diffusers' DreamBooth
# scripts generate prior-preservation images from, once before training).
_TRAINING_PARTS = frozenset({"train", "training"})
_EVALUATION_PARTS = frozenset({"eval", "evaluate", "evaluation", "val", "valid", "validation", "validate", "test",
                               "testing", "cv", "tt", "dev", "sample", "sampling"})


def _names_in(expr: cst.BaseExpression) -> set[str]:
    """The names and dotted names in an expression (`tqdm(self.loader)`: `tqdm`, `self.loader`, `self`)."""
    return {name for node in descendants(expr) if isinstance(node, (cst.Name, cst.Attribute))
            and (name := dotted_name(node))}


def _compares_device_of(test: cst.BaseExpression, moved_code: str, code) -> bool:
    """Is `test` `moved.device != other` or `other != moved.device` (or `is not`), alone or in an `and` / `or`?"""
    if isinstance(test, cst.BooleanOperation):
        return _compares_device_of(test.left, moved_code, code) or _compares_device_of(test.right, moved_code, code)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.NotEqual, cst.IsNot))):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(side, cst.Attribute) and side.attr.value == "device" and code(side.value) == moved_code
               for side in sides)


def _bound_to(ancestors: Sequence[cst.CSTNode], names: set[str]) -> bool:
    """Is the node assigned to one of `names` (`loader = DataLoader(...)`, then `accelerator.prepare(model, loader)`)?"""
    assign = next((n for n in reversed(ancestors) if isinstance(n, cst.Assign)), None)
    return assign is not None and any(dotted_name(t.target) in names for t in assign.targets)


def _bound_for_evaluation(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Is the loader bound to a name that says evaluation (`validate_loader = DataLoader(...)`)? Its batches are
    copied in the evaluation pass after each epoch, not in the step, even where the file's step copies batches."""
    assign = next((n for n in reversed(ancestors) if isinstance(n, cst.Assign)), None)
    return _says_evaluation(_bound_name(assign)) or _off_the_training_branch(ancestors) \
        or _built_after_training(ancestors)


def _built_after_training(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Is the loader built after the training loops of its block end (pytorch-ood's segmentation examples: `loader =
    DataLoader(dataset_test, ...)` rebound after the epochs, for the evaluation below)? Only what follows it in the
    block uses it."""
    block: list[cst.CSTNode] = []
    statement = None
    for parent, child in pairwise(ancestors):  # the innermost block holding the loader's statement
        if isinstance(parent, (cst.Module, cst.IndentedBlock)):
            block, statement = list(parent.body), child
    if statement is None:
        return False
    index = next(i for i, s in enumerate(block) if s is statement)
    return any(_trains(s) for s in block[:index]) and not any(_trains(s) for s in block[index + 1:])


def _trains(statement: cst.CSTNode) -> bool:
    """A loop calling backward (at any depth)."""
    return isinstance(statement, (cst.For, cst.While)) and any(
        isinstance(n, cst.Call) and last_name(n.func) == "backward" for n in descendants(statement))


def _off_the_training_branch(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Is the loader built where a training flag is off: in the `else` of `if training:` (sam-hq's
    `create_dataloaders(..., training=False)` building its evaluation loaders), or under `if not is_train:`?"""
    for parent, child in pairwise(ancestors):
        if not isinstance(parent, cst.If):
            continue
        test, negated = parent.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negated = test.expression, True
        name = dotted_name(test)
        if not name or not name_parts(name.rsplit(".", 1)[-1]) & _TRAINING_PARTS:
            continue
        if child is parent.orelse if not negated else child is parent.body:
            return True
    return False


def _for_evaluation(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Is a loader built for evaluation: in a function, or bound to a name, that says so (`get_val_loader`,
    `test_loader = DataLoader(...)`)?"""
    return any(_says_evaluation(node.name.value if isinstance(node, cst.FunctionDef) else _bound_name(node))
               for node in ancestors)


def _bound_name(node: cst.CSTNode | None) -> str | None:
    """The dotted name an assignment of one target binds (`self.val_loader`), else None."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        return dotted_name(node.targets[0].target)
    return None


def _says_evaluation(name: str | None) -> bool:
    last = name.rsplit(".", 1)[-1] if name else ""
    return bool(name_parts(last) & _EVALUATION_PARTS) or bool(EVAL_LOADER_WORD.match(last.lower()))
