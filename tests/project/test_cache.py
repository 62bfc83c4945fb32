"""The project model between runs: stored outlines and facts, and cached findings that follow other files' changes."""

from __future__ import annotations

import json
import textwrap

from gpulint.cli import main

TRAIN = """
    import torch
    from helpers import report

    def train(model, loader, opt):
        model.cuda()
        for batch in loader:
            loss = model(batch)
            loss.backward()
            opt.step()
            report(loss)
"""
HELPERS = """
    def report(loss):
        print(loss.item())
"""


def lint(root, monkeypatch, capsys) -> list[tuple[str, int]]:
    monkeypatch.chdir(root)
    main(["check", ".", "--format", "json", "--exit-zero"])
    return [(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)]


def test_a_cached_file_follows_a_change_in_its_caller(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]  # warm: all from the cache
    # helpers.py is unchanged, but no step calls `report` any more: its cached finding must go.
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN).replace("        report(loss)\n", ""))
    assert lint(tmp_path, monkeypatch, capsys) == []
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]


def test_unchanged_files_come_from_the_stored_outlines(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    lint(tmp_path, monkeypatch, capsys)
    import gpulint.linter.runner as runner

    read = []
    real = runner.outline
    monkeypatch.setattr(runner, "outline", lambda path, text: read.append(path) or real(path, text))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN) + "\n# changed\n")
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert read == ["train.py"]
    read.clear()
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert read == []  # nothing changed: the stored facts serve as they are


def test_a_broken_project_store_is_read_anew(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    lint(tmp_path, monkeypatch, capsys)
    stores = list((tmp_path / ".gpulint_cache").rglob("project-*.jsonl"))
    assert len(stores) == 1
    header, *entries = stores[0].read_text().splitlines()
    for broken in ['{"format": "gpulint.project/1"}\n' + "\n".join(entries),  # another version's store
                   header + '\n["helpers.py", "x", 5]\n{not json',  # entries of another shape, a line cut short
                   header + "\n" + "\n".join(entry.replace('"skeleton"', '"skeletons"') for entry in entries)]:
        stores[0].write_text(broken)
        (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN) + f"\n# changed {len(broken)}\n")
        assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]


def test_the_model_gives_the_same_facts_whatever_the_hash_seed(tmp_path):
    # Cached findings serve only if the facts (chains, guesses) do not change from one run to the next.
    import subprocess
    import sys

    # Two classes the object may hold, whose forwards both call one helper: which chain the helper gets must not
    # depend on the order Python happens to walk a set of classes in.
    names = [f"Net{i}" for i in range(8)]
    classes = "".join(f"class {n}:\n    def forward(self, x):\n        return helper(x)\n\n" for n in names)
    (tmp_path / "nets.py").write_text("def helper(x):\n    return x.sum().item()\n\n" + classes)
    build = "".join(f"    if flag == {i}:\n        return {n}()\n" for i, n in enumerate(names))
    (tmp_path / "train.py").write_text(
        f"from nets import {', '.join(names)}\n\ndef build(flag):\n{build}\n"
        "def train(loader, opt, flag):\n    model = build(flag)\n"
        "    for batch in loader:\n        model(batch).backward()\n        opt.step()\n"
    )
    script = (
        "import json, sys\nfrom pathlib import Path\nfrom gpulint.project import Project, outline\n"
        "from gpulint.project.store import dump_facts\nroot = Path(sys.argv[1])\n"
        "ixs = [outline(p.name, p.read_text()) for p in sorted(root.glob('*.py'))]\nproject = Project(ixs)\n"
        "print(json.dumps({ix.path: dump_facts(project.file_facts(ix.path)) for ix in ixs}, sort_keys=True))\n"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True,
                       env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(outputs) == 1


def test_a_stored_copy_helper_serves_its_callers_after_an_edit(tmp_path, monkeypatch, capsys):
    """A file read from the stored outlines keeps what the model learnt of it (a copy helper's copied parameters),
    in the types the model uses: the run after an edit finds what a cold run finds, with no model failure."""
    helper = "import numpy as np\nimport torch\n\n\ndef tensor(x):\n    return torch.from_numpy(np.asarray(x)).to('cuda')\n"
    train = textwrap.dedent("""
        import torch
        from utils import tensor

        def train(model, replay, opt):
            model.cuda()
            for step in range(1000):
                rewards = tensor(replay.sample().reward)
                loss = (model(rewards) - rewards).pow(2).mean()
                loss.backward()
                opt.step()
    """)
    (tmp_path / "utils.py").write_text(helper)
    (tmp_path / "train.py").write_text(train)
    cold = lint(tmp_path, monkeypatch, capsys)
    assert ("train.py", 8) in cold
    (tmp_path / "train.py").write_text(train + "\n# changed\n")
    assert lint(tmp_path, monkeypatch, capsys) == cold
    assert "project model failed" not in capsys.readouterr().err


def test_the_facts_of_a_file_do_not_depend_on_which_of_its_functions_were_read(tmp_path):
    """The model reads a function's body only when it needs it, and the stored outline keeps every body read by an
    earlier run (transformers' `AccurateGELUActivation.__init__`, read for what its class keeps on the host after its
    file's facts were written). A file's facts, and so their digest, which decides whether its cached findings still
    hold, must come out the same either way: else a comment added to one file relints two dozen others."""
    from gpulint.project import Project, outline
    from gpulint.project.store import dump_facts, facts_digest

    files = {"train.py": TRAIN, "helpers.py": HELPERS + """
    def unused(x):
        return x + 1

    class Meter:
        def __init__(self):
            self.total = 0
"""}
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    project = Project(outline(name, (tmp_path / name).read_text()) for name in files)
    before = facts_digest(dump_facts(project.file_facts("helpers.py")))
    helpers = project.files["helpers.py"]
    for definition in helpers.definitions.values():
        helpers.scopes_of(definition)
    assert facts_digest(dump_facts(project.file_facts("helpers.py"))) == before


def test_stored_facts_read_back_as_they_were_made():
    """Every field of the facts survives the store (a warm run lints with facts read back, and a run after an edit
    keeps the stored facts of files whose facts compare equal): the fields are given distinct values, so two read
    back into each other's places are caught."""
    import dataclasses

    from gpulint.project.facts import FileFacts, Frame, FunctionFacts, Reach
    from gpulint.project.store import dump_facts, load_facts

    samples = {bool: True, str: "nonblocking", int: 7}
    reach = Reach(2, True, (Frame("train.py", 12, "loop"),), ("use_ema",), "why", True)
    function = FunctionFacts(reach, frozenset({1}), ((1, Frame("train.py", 12, "loop")),), True, frozenset({"g"}),
                             (("x", "host"),), frozenset({"u"}), frozenset({"o"}), True, frozenset({"p"}),
                             rollout_loops=frozenset({1}))
    values = {}
    for spec in dataclasses.fields(FileFacts):
        kind = spec.type
        if spec.name == "functions":
            values[spec.name] = {"train": function}
        elif kind in ("bool", "str"):
            values[spec.name] = samples[{"bool": bool, "str": str}[kind]]
        elif kind.startswith("frozenset"):
            values[spec.name] = frozenset({spec.name})
        elif spec.name == "problem":
            values[spec.name] = (3, 4, "bad")
        elif spec.name == "option_values":
            values[spec.name] = (("mode", ("a", "b")),)
        elif spec.name in ("copy_calls", "move_calls", "read_calls"):
            values[spec.name] = ((spec.name, (0, 1), ("x",)),)
        else:  # pairs of names
            values[spec.name] = ((spec.name, "value"),)
    facts = FileFacts(**values)
    assert load_facts(json.loads(json.dumps(dump_facts(facts)))) == facts


def test_config_files_are_read_again_only_when_they_change(tmp_path, monkeypatch, capsys):
    """Each config file's facts are cached by its bytes (torchtune's 237 recipes took a third of every warm run):
    a warm run reads none, an edited config is read again, and what it says still reaches the model."""
    import gpulint.linter.runner as runner

    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "train.yaml").write_text("log_every: 100\n")
    (tmp_path / "configs" / "sample.yaml").write_text("steps: 50\n")
    read = []
    real = runner.config_file_facts
    monkeypatch.setattr(runner, "config_file_facts", lambda text, display: read.append(display) or real(text, display))
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert sorted(read) == ["configs/sample.yaml", "configs/train.yaml"]
    read.clear()
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN) + "\n# changed\n")
    assert lint(tmp_path, monkeypatch, capsys) == [("helpers.py", 3)]
    assert read == []
    (tmp_path / "configs" / "train.yaml").write_text("log_every: 1\n")
    lint(tmp_path, monkeypatch, capsys)
    assert read == ["configs/train.yaml"]
    stored = json.loads(next((tmp_path / ".gpulint_cache").rglob("[!p]*.json")).read_text())["configs"]
    assert stored["configs/train.yaml"][1]["intervals"] == [["log_every", 1]]


def test_stored_outlines_read_back_as_they_were_made():
    """A file's outline survives the store with every position a tuple again (a position read back as a list would
    not compare with a region's bounds: `if args.model == "gaussian": model = GaussianVAE(args)`)."""
    from gpulint.project import outline
    from gpulint.project.store import dump_index, load_index

    text = textwrap.dedent("""
        import torch
        if args.model == "gaussian":
            model = GaussianVAE(args)
        else:
            model = FlowVAE(args)
        for x in loader:
            loss = model.get_loss(x.cuda())
            loss.backward()
    """)
    made = outline("train.py", text)
    read = load_index("train.py", text, json.loads(json.dumps(dump_index(made))))
    assert read.module_scope == made.module_scope
    assert all(isinstance(a.pos, tuple) for a in read.module_scope.assigns)
