"""`--patch`: a libcst-made diff that `git apply` accepts and that leaves the rest of the script untouched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.planner import patch, planfile

ROOT = Path(__file__).resolve().parents[2]
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [GIT, "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=repo, input=stdin, text=True, capture_output=True, check=False,
    )


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    assert git(repo, "init", "-q").returncode == 0
    git(repo, "add", ".")
    assert git(repo, "commit", "-qm", "init").returncode == 0
    return repo


def assert_applies(repo: Path, diff: str) -> None:
    result = git(repo, "apply", "-", stdin=diff)
    assert result.returncode == 0, result.stderr


def assert_only_additions(before: str, after: str) -> None:
    """Every original line (comments, formatting) is still there, in order."""
    remaining = iter(after.splitlines())
    for line in before.splitlines():
        assert any(line == other for other in remaining), f"lost or changed: {line!r}"


@needs_git
def test_the_bundled_training_script_patches_and_git_applies(tmp_path):
    original = (ROOT / "examples" / "train.py").read_text()
    repo = make_repo(tmp_path, {"examples/train.py": original})
    diff = patch.make_patch(repo / "examples" / "train.py", repo / "examples" / "gpulint-plan.json", factory="build_model")
    assert diff.startswith("diff --git a/examples/train.py b/examples/train.py\n")
    assert_applies(repo, diff)
    patched = (repo / "examples" / "train.py").read_text()
    assert_only_additions(original, patched)
    compile(patched, "train.py", "exec")
    assert "import gpulint\n" in patched and "from pathlib import Path\n" in patched
    lines = patched.splitlines()
    built = next(i for i, line in enumerate(lines) if "model = build_model(cfg)" in line)
    assert lines[built + 1].strip().startswith("# gpulint: activation recompute plan")
    assert lines[built + 2] == '    gpulint.apply(model, Path(__file__).parent / "gpulint-plan.json")'


SCRIPT = '''\
"""Train a net."""
import torch  # the framework
from pathlib import Path

net = torch.nn.Sequential(torch.nn.Linear(4, 4))   # odd spacing stays
opt = torch.optim.SGD(net.parameters(), lr=0.1)
'''


@needs_git
def test_model_found_from_the_optimizer_and_path_relative_to_the_script(tmp_path):
    repo = make_repo(tmp_path, {"src/train.py": SCRIPT})
    diff = patch.make_patch(repo / "src" / "train.py", repo / "plans" / "p.json")
    assert_applies(repo, diff)
    patched = (repo / "src" / "train.py").read_text()
    assert_only_additions(SCRIPT, patched)
    assert patched.count("from pathlib import Path") == 1
    assert 'gpulint.apply(net, Path(__file__).parent / "../plans/p.json")' in patched
    assert patched.index("import gpulint") < patched.index("net = ")


@needs_git
def test_a_file_without_final_newline_still_applies(tmp_path):
    text = SCRIPT.rstrip("\n")
    repo = make_repo(tmp_path, {"train.py": text})
    diff = patch.make_patch(repo / "train.py", repo / "gpulint-plan.json")
    assert_applies(repo, diff)
    assert_only_additions(text, (repo / "train.py").read_text())


def test_a_script_that_already_applies_a_plan_is_refused(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT + "gpulint.apply(net, 'x.json')\n")
    with pytest.raises(patch.PatchError, match="already applies a plan"):
        patch.make_patch(script, tmp_path / "p.json")


def test_no_model_found_names_the_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    with pytest.raises(patch.PatchError, match=r"cannot find where .*train\.py builds the model"):
        patch.make_patch(script, tmp_path / "p.json", factory="build_model")


def test_syntax_error_names_the_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("x = 1\ndef broken(:\n")
    with pytest.raises(patch.PatchError, match=r"train\.py:2: does not parse"):
        patch.make_patch(script, tmp_path / "p.json")


def test_missing_script(tmp_path):
    with pytest.raises(patch.PatchError, match="does not exist"):
        patch.make_patch(tmp_path / "nope.py", tmp_path / "p.json")


def test_find_script_picks_the_one_that_trains(tmp_path):
    (tmp_path / "model.py").write_text("def build_model():\n    return 1\n")
    (tmp_path / "train.py").write_text("m = build_model()\nloss.backward()\n")
    assert patch.find_script(tmp_path, "build_model") == tmp_path / "train.py"
    with pytest.raises(patch.PatchError, match="--script"):
        patch.find_script(tmp_path, "make_net")


# --- the walk-through: gpulint plan --patch, git apply, train with the same losses ----------------------------------

MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 64)
        self.out = nn.Linear(64, 16)

    def forward(self, x):
        return x + self.out(torch.tanh(self.fc(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.layers = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return h.square().mean()


def build_model():
    return Net()


def make_batch():
    return torch.randn(32, 8, generator=torch.Generator().manual_seed(0))
'''

TRAIN = '''\
"""A training loop to patch."""
import torch

from model import build_model, make_batch


def main():
    torch.manual_seed(0)
    model = build_model()  # built here
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = make_batch()
    for _ in range(3):
        loss = model(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(repr(loss.item()))


if __name__ == "__main__":
    main()
'''

CONFIG = """\
plan:
  model: model.py:build_model
  batch: model.py:make_batch
  optimizer: sgd
  hardware: cpu
"""


def _plan_and_patch(tmp_path: Path, capsys, *flags: str) -> tuple[Path, str, str]:
    """A repo with the example training script: its output before, then `gpulint plan --patch` for 90% of today's
    peak (with `flags`). Returns the repo, that output and the patch the plan printed."""
    from gpulint.cli import main

    repo = make_repo(tmp_path, {"model.py": MODEL, "train.py": TRAIN, "gpulint.yaml": CONFIG})
    before = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True, text=True, check=True).stdout
    config = str(repo / "gpulint.yaml")
    assert main(["plan", config, "--format", "json", "--budget", "1GB"]) == 0
    today = json.loads(capsys.readouterr().out)["baseline"]["peak_bytes"]
    code = main(["plan", config, "--budget", str(int(today * 0.9)), "--patch", *flags])
    out = capsys.readouterr().out
    assert code == (1 if "is NOT met" in out else 0)  # the patch is written either way; exit 1 says no form fits
    return repo, before, out


def _train_patched(repo: Path, tmp_path: Path) -> str:
    """Run the patched training script with gpulint importable from this checkout; its output."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    after = subprocess.run(
        [sys.executable, "-W", "ignore", str(repo / "train.py")],
        cwd=tmp_path, capture_output=True, text=True, env=env, check=False,
    )
    assert after.returncode == 0, after.stderr
    return after.stdout


@pytest.mark.slow
@needs_git
def test_plan_patch_git_apply_and_train_the_same(tmp_path, capsys):
    repo, before, out = _plan_and_patch(tmp_path, capsys)
    assert (repo / "gpulint-plan.json").is_file()
    assert_applies(repo, out)  # the report after the diff is ignored by git apply
    patched = (repo / "train.py").read_text()
    assert "gpulint.apply(model, Path(__file__).parent / \"gpulint-plan.json\")" in patched
    plan = json.loads((repo / "gpulint-plan.json").read_text())
    assert any(d["action"] == "recompute" for d in plan["decisions"])
    from gpulint.planner import eager_apply
    from gpulint.planner.config import load_factory

    build_model = load_factory("model.py:build_model", repo)
    assert eager_apply.applied_plan(eager_apply.apply(build_model(), plan)).regions  # layers are checkpointed

    assert _train_patched(repo, tmp_path) == before


def test_run_patch_writes_the_plan_and_warns_when_the_eager_step_exceeds_the_budget(tmp_path, capsys):
    import argparse

    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "gpulint.yaml").write_text(CONFIG)
    plan = {"schema": "gpulint.plan/1", "budget_bytes": 1000, "decisions": [],
            "eager": {"peak_bytes": 1200, "fits_budget": False}}
    args = argparse.Namespace(config=str(tmp_path / "gpulint.yaml"), script=None, out=None, budget="1000", patch=True)
    patch.run_patch(args, planfile.from_dict(plan))
    captured = capsys.readouterr()
    assert captured.out.startswith("diff --git a/")
    assert "gpulint.apply(model" in captured.out
    assert planfile.load(tmp_path / "gpulint-plan.json") == planfile.from_dict(plan)
    assert ("no plan holds the budget in eager mode: the patched step peaks at 1.20 kB; the compiled form fits: "
            "`--patch-mode compile`") in captured.err  # in the budget's unit (1000 bytes: kB)
    patch.run_patch(args, planfile.from_dict({**plan, "feasible": False}))
    assert "peaks at 1.20 kB; no form fits: raise the budget" in capsys.readouterr().err  # never the compiled form


def test_a_model_held_by_an_attribute(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "class Trainer:\n"
        "    def __init__(self):\n"
        "        self.net = make_net()\n"
        "        self.opt = SGD(self.net.parameters())\n"
    )
    diff = patch.make_patch(script, tmp_path / "p.json")
    assert '+        gpulint.apply(self.net, Path(__file__).parent / "p.json")' in diff


# --- --patch-mode compile: torch.compile with the gpulint backend ----------------------------------------------------


@needs_git
def test_compile_mode_patches_the_bundled_script_and_git_applies(tmp_path):
    original = (ROOT / "examples" / "train.py").read_text()
    repo = make_repo(tmp_path, {"examples/train.py": original})
    diff = patch.make_patch(repo / "examples" / "train.py", repo / "examples" / "gpulint-plan.json",
                            factory="build_model", mode="compile")
    assert_applies(repo, diff)
    patched = (repo / "examples" / "train.py").read_text()
    assert_only_additions(original, patched)
    compile(patched, "train.py", "exec")
    assert patched.count("import torch\n") == 1  # already imported: not added again
    assert "from gpulint.planner import gpulint_backend\n" in patched and "import gpulint\n" not in patched
    lines = patched.splitlines()
    built = next(i for i, line in enumerate(lines) if "model = build_model(cfg)" in line)
    assert lines[built + 1].strip().startswith("# gpulint: activation recompute plan")
    assert lines[built + 2] == ('    model = torch.compile(model, backend=gpulint_backend(Path(__file__).parent / '
                                '"gpulint-plan.json"))')


def test_compile_mode_adds_the_torch_import_and_keeps_attribute_targets(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("class Trainer:\n    def __init__(self):\n        self.net = make_net()\n")
    diff = patch.make_patch(script, tmp_path / "p.json", factory="make_net", mode="compile")
    assert "+import torch\n" in diff and "+from gpulint.planner import gpulint_backend\n" in diff
    assert '+        self.net = torch.compile(self.net, backend=gpulint_backend(Path(__file__).parent / "p.json"))' in diff
    script.write_text("net = make_net()\nnet = torch.compile(net, backend=gpulint_backend('p.json'))\n")
    with pytest.raises(patch.PatchError, match="already applies a plan"):
        patch.make_patch(script, tmp_path / "p.json", factory="make_net", mode="compile")


def test_compile_mode_refuses_a_plan_with_value_reads_and_writes_nothing(tmp_path):
    import argparse

    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "gpulint.yaml").write_text(CONFIG)
    plan = {"schema": "gpulint.plan/1", "budget_bytes": 1000, "decisions": [],
            "data_dependent": [{"op": "Tensor.item()", "path": "model.py", "line": 9}]}
    args = argparse.Namespace(config=str(tmp_path / "gpulint.yaml"), script=None, out=None, budget=None, patch=True,
                              patch_mode="compile")
    with pytest.raises(patch.PlanError, match=r"model.py:9.*eager mode"):
        patch.run_patch(args, planfile.from_dict(plan))
    assert not (tmp_path / "gpulint-plan.json").exists()


def test_patch_mode_is_in_the_help(capsys):
    from gpulint.cli import main

    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "--patch-mode {eager,compile}" in capsys.readouterr().out


@pytest.mark.slow
@needs_git
def test_plan_patch_compile_mode_git_apply_and_train_the_same(tmp_path, capsys):
    repo, before, out = _plan_and_patch(tmp_path, capsys, "--patch-mode", "compile")
    assert_applies(repo, out)
    patched = (repo / "train.py").read_text()
    assert 'model = torch.compile(model, backend=gpulint_backend(Path(__file__).parent / "gpulint-plan.json"))' in patched
    plan = json.loads((repo / "gpulint-plan.json").read_text())
    assert any(d["action"] == "recompute" for d in plan["decisions"])

    losses = [float(x) for x in _train_patched(repo, tmp_path).split()]
    assert losses == pytest.approx([float(x) for x in before.split()], rel=1e-6)
