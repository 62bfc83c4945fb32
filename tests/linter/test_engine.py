"""Engine details: one finding per node across families, step-evidence pre-filter."""

from __future__ import annotations

from gpulint.linter.engine import _one_finding_per_node, lint_text
from gpulint.linter.finding import Finding
from gpulint.linter.rule import all_rules, rules_by_code


def _f(code, line, column, end_line, end_column):
    return Finding(code, "n", "m", "warning", "x.py", line, column, end_line, end_column)


def test_a_sync_inside_another_familys_finding_gives_way():
    meter = _f("GPL202", 5, 9, 5, 40)
    inner_item = _f("GPL401", 5, 22, 5, 33)
    elsewhere = _f("GPL401", 6, 9, 6, 20)
    same_node = _f("GPL401", 5, 9, 5, 40)
    kept = _one_finding_per_node([meter, inner_item, elsewhere, same_node])
    assert kept == [meter, elsewhere, same_node]


def test_hot_only_rules_skip_files_without_a_training_step():
    rule = rules_by_code()["GPL401"]
    assert rule.hot_only
    helper = "import torch\n\ndef total_value(t):\n    return t.cuda().sum().item()\n"
    in_step = helper + "\ndef train(loader, opt):\n    for b in loader:\n        total_value(b)\n        opt.step()\n"
    assert lint_text("x.py", helper, [rule]) == []
    assert [f.code for f in lint_text("x.py", in_step, [rule])] == ["GPL401"]


def test_a_file_whose_only_step_work_is_hot_by_name_is_checked_by_step_rules():
    rules = [r for r in all_rules() if r.default_enabled]
    source = "import torch\n\n\nclass SetCriterion:\n    def match(self, out):\n        return out.argmax(-1).tolist()\n"
    assert [f.code for f in lint_text("criterion.py", source, rules)] == ["GPL401"]


def test_a_jax_program_gets_no_pytorch_only_findings():
    """tevatron's `tevax` trainers tokenize with `padding="max_length"` (a compiled step wants fixed shapes) and load
    with a torch DataLoader whose numpy batches `device_put` moves: in a module importing JAX or Flax the rules that
    hold for PyTorch alone are skipped. A host sync (`.item()` of a JAX array, skrl's JAX agents) costs the same."""
    step = ("\n\ndef train(tokenizer, texts, loader, state, step_fn):\n"
            "    for batch in loader:\n"
            "        batch = batch.cuda()\n"
            "        tokens = tokenizer(texts, padding=\"max_length\", max_length=512)\n"
            "        loss = step_fn(state, tokens)\n"
            "        loss.backward()\n"
            "        print(loss.item())\n")
    rules = all_rules()
    assert {f.code for f in lint_text("train.py", "import torch" + step, rules)} >= {"GPL301", "GPL401", "GPL411"}
    for header in ("import jax\nimport torch", "from flax import linen\nimport torch"):
        codes = {f.code for f in lint_text("train.py", header + step, rules)}
        assert "GPL401" in codes and not any(rule.pytorch_only and rule.code in codes for rule in rules)
    assert {rule.code for rule in rules if rule.pytorch_only} >= {"GPL301", "GPL411"}
