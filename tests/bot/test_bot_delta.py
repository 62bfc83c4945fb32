"""Base and head plans compared (gpulint/bot/delta.py), the memory gate, and the plan's patch, on hand-made plans."""

from __future__ import annotations

import json

import pytest

from gpulint.bot import delta, planpatch
from gpulint.bot.data import BotInputError, load_plan
from gpulint.bot.diff import PullDiff, parse_patch
from gpulint.bot.report import ReportInput, render_html, render_markdown
from gpulint.cli import main
from gpulint.errors import UsageError

LAYER_BYTES = {"fc": 8_000_000, "qkv": 6_000_000, "ln_1": 2_000_000}


def plan_dict(layers: int, *, budget: int | None = None, fc_bytes: int = 8_000_000, floor: int = 50_000_000) -> dict:
    """A plan as `gpulint plan` writes it: each layer saves three activations; today's peak is the floor plus all of
    them, and the plan recomputes every `fc` (the planned peak is what stays)."""
    decisions = []
    for i in range(layers):
        for name, size in {**LAYER_BYTES, "fc": fc_bytes}.items():
            line = {"fc": 52, "qkv": 45, "ln_1": 51}[name]
            decisions.append({"id": f"{name}_{i}", "op": "aten.addmm.default", "bytes": size,
                              "action": "recompute" if name == "fc" else "save", "module": f"h.{i}.{name}",
                              "call_index": 0, "source": {"path": "examples/model.py", "line": line}})
    today = floor + sum(d["bytes"] for d in decisions)
    planned = today - sum(d["bytes"] for d in decisions if d["action"] == "recompute")
    return {
        "schema": "gpulint.plan/1", "model": "model.py:build_model", "hardware": "h100-sxm", "dtype": "fp32",
        "budget_bytes": budget, "feasible": budget is None or planned <= budget, "lowest_peak_bytes": planned,
        "baseline": {"peak_bytes": today, "step_time_s": 0.001 * layers},
        "planned": {"peak_bytes": planned, "step_time_s": 0.0012 * layers, "recompute_time_s": 0.0002 * layers},
        "decisions": decisions,
        "timeline": {"baseline": [floor, today, floor], "planned": [floor, planned, floor]},
    }


def write(tmp_path, name: str, value) -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def test_the_delta_is_the_difference_of_the_two_plans(tmp_path):
    base, head = plan_dict(4), plan_dict(6, fc_bytes=8_000_000)
    d = delta.compare(load_plan(write(tmp_path, "b.json", base)), load_plan(write(tmp_path, "h.json", head)), 2.0)
    out = d.to_dict()
    assert out["schema"] == "gpulint.delta/1"
    assert out["change"]["peak_bytes"] == head["baseline"]["peak_bytes"] - base["baseline"]["peak_bytes"]
    assert out["change"]["planned_peak_bytes"] == head["planned"]["peak_bytes"] - base["planned"]["peak_bytes"]
    assert out["change"]["step_time_s"] == pytest.approx(0.002)
    assert {(a["module"], a["status"]) for a in out["activations"]} == {
        (f"h.{i}.{n}", "new") for i in (4, 5) for n in LAYER_BYTES}
    assert out["unchanged_activations"] == 12
    assert sum(a["change_bytes"] for a in out["activations"]) == 2 * sum(LAYER_BYTES.values())
    assert [c["layer"] for c in out["contributors"]] == ["h.4", "h.5"]
    assert out["gate"]["conclusion"] == "failure" and "grew" in out["gate"]["reason"]


def test_grown_shrunk_and_gone_are_matched_by_module_op_and_call(tmp_path):
    base, head = plan_dict(3), plan_dict(2, fc_bytes=12_000_000)
    head["decisions"][1]["bytes"] = 1_000_000  # h.0.qkv shrinks
    d = delta.compare(load_plan(write(tmp_path, "b.json", base)), load_plan(write(tmp_path, "h.json", head)), 2.0)
    status = {a.module: a.status for a in d.activations}
    assert status == {"h.0.fc": "grown", "h.1.fc": "grown", "h.0.qkv": "shrunk",
                      "h.2.fc": "gone", "h.2.qkv": "gone", "h.2.ln_1": "gone"}
    assert d.contributors[0].layer == "h.2" and d.contributors[0].change_bytes == -16_000_000


def test_activations_on_lines_the_pr_changed_come_first(tmp_path):
    base, head = plan_dict(1), plan_dict(3)
    diff = PullDiff({"examples/model.py": parse_patch("examples/model.py", "@@ -51,1 +51,1 @@\n-old\n+new\n")})
    d = delta.compare(load_plan(write(tmp_path, "b.json", base)), load_plan(write(tmp_path, "h.json", head)), 2.0,
                      diff)
    assert [a.module for a in d.activations[:2]] == ["h.1.ln_1", "h.2.ln_1"]  # line 51, though the smallest
    assert all(a.on_changed_line for a in d.activations[:2]) and not d.activations[2].on_changed_line


def test_gate_fails_when_the_head_passes_the_budget_and_says_why(tmp_path):
    base = load_plan(write(tmp_path, "b.json", plan_dict(4, budget=90_000_000)))  # with the plan: 82 MB
    head = load_plan(write(tmp_path, "h.json", plan_dict(6, budget=90_000_000)))  # 98 MB
    gate = delta.memory_gate(head, base, 1000.0)  # growth alone would pass
    assert gate.conclusion == "failure"
    assert gate.reason == "peak memory 98.00 MB even with the plan, over the 90.00 MB budget; the base fitted"
    assert "\n" not in gate.reason
    d = delta.compare(base, head, 1000.0)
    assert d.budget_lost


def test_gate_passes_within_threshold_and_budget(tmp_path):
    base = load_plan(write(tmp_path, "b.json", plan_dict(4, budget=100_000_000)))
    head = load_plan(write(tmp_path, "h.json", plan_dict(4, budget=100_000_000, fc_bytes=8_100_000)))
    gate = delta.memory_gate(head, base, 2.0)
    assert gate.passed and "within the 2% threshold" in gate.reason and "fits the 100.00 MB budget" in gate.reason
    assert not delta.memory_gate(head, base, 0.1).passed


@pytest.mark.parametrize("text, expected", [("2%", 2.0), ("0.5 %", 0.5), ("0%", 0.0)])
def test_threshold_is_a_percentage(text, expected):
    assert delta.parse_threshold(text) == expected


@pytest.mark.parametrize("text", ["2", "-1%", "two%", "5000%", ""])
def test_bad_threshold_is_one_line(text):
    with pytest.raises(UsageError, match="--memory-threshold: expected a percentage"):
        delta.parse_threshold(text)


def test_layer_of():
    assert delta.layer_of("h.4.fc") == "h.4"
    assert delta.layer_of("model.layers.10.mlp.up") == "model.layers.10"
    assert delta.layer_of("lm_head") == "lm_head" and delta.layer_of("") == "<root>"


def test_comment_opens_with_the_delta(tmp_path):
    base, head = (load_plan(write(tmp_path, f"{n}.json", plan_dict(k, budget=100_000_000)))
                  for n, k in (("b", 4), ("h", 6)))
    base.budget_bytes = head.budget_bytes = 90_000_000
    base.feasible, head.feasible = True, False
    data = ReportInput(plan=head, base_plan=base, link_base="https://github.com/o/r/blob/abc/")
    data.compare_plans()
    body = render_markdown(data)
    assert body.index("### Memory: base → head") < body.index("No findings")
    assert "| Peak memory today | 114.00 MB | 146.00 MB | **+28.1%** |" in body
    assert "**fitted, now does not** 🛑" in body
    assert "🛑 **`gpulint/memory` fails**: peak memory 98.00 MB even with the plan" in body
    assert "**Saved activations behind the change, by layer**: `h.4` +16.00 MB (3 new); `h.5` +16.00 MB (3 new)." in body
    assert "[`examples/model.py:52`](https://github.com/o/r/blob/abc/examples/model.py#L52)" in body
    assert "title \"Memory over one training step (MB): base and head\"" in body
    assert "🟪 base · 🟥 head · 🟩 budget 90.00 MB" in body  # the chart's legend
    assert "made for different settings" not in body
    base.hardware = "a100-80gb"
    assert "> The two plans were made for different settings: base a100-80gb, fp32, budget 90.00 MB; head h100-sxm" in \
        render_markdown(data)
    html = render_html(data)
    assert "Memory: base → head" in html and "fitted, now does not" in html


def test_report_cli_writes_the_delta_json_and_rejects_a_lone_base(tmp_path, capsys):
    b, h = write(tmp_path, "b.json", plan_dict(4)), write(tmp_path, "h.json", plan_dict(5))
    out = tmp_path / "delta.json"
    assert main(["report", "--plan", h, "--base-plan", b, "--format", "delta", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["change"]["peak_bytes"] == 16_000_000
    assert main(["report", "--base-plan", b]) == 2
    assert "--base-plan needs --plan" in capsys.readouterr().err


def test_a_hostile_base_plan_is_one_line_naming_the_file_and_field(tmp_path, capsys):
    bad = plan_dict(2)
    bad["decisions"][0]["call_index"] = -3
    b, h = write(tmp_path, "base.json", bad), write(tmp_path, "h.json", plan_dict(2))
    assert main(["report", "--plan", h, "--base-plan", b]) == 2
    err = capsys.readouterr().err.strip()
    assert "base.json: plan.decisions[0].call_index" in err and "\n" not in err


PATCH = """diff --git a/examples/train.py b/examples/train.py
--- a/examples/train.py
+++ b/examples/train.py
@@ -20,3 +20,4 @@
 from torch import nn
 
 from model import build_model
+import gpulint
@@ -121,3 +122,5 @@
     cfg = GPTConfig()
     model = build_model(cfg).to(device)
+    # gpulint: activation recompute plan
+    gpulint.apply(model, "plan.json")
     optimizer = make_optimizer(model)
"""


def test_plan_patch_in_the_comment_with_the_figures_it_buys(tmp_path):
    head = load_plan(write(tmp_path, "h.json", plan_dict(4)))
    data = ReportInput(plan=head, plan_patch=planpatch.load(write(tmp_path, "plan.diff", PATCH)))
    body = render_markdown(data)
    assert "### Suggested patches" in body
    assert "The memory plan: peak 108.72 MiB → 78.20 MiB, +20.0% step time" in body
    assert "+    gpulint.apply(model, \"plan.json\")" in body


def test_plan_patch_suggested_only_where_it_touches_added_lines(tmp_path):
    patch = planpatch.load(write(tmp_path, "plan.diff", PATCH))
    pr = ("@@ -119,4 +120,4 @@\n     device = cpu\n     cfg = GPTConfig()\n-    model = old()\n"
          "+    model = build_model(cfg).to(device)\n     optimizer = make_optimizer(model)\n")
    diff = PullDiff({"examples/train.py": parse_patch("examples/train.py", pr)})
    (s,) = planpatch.suggestions(patch, diff.files)  # the import hunk is on lines the PR did not touch
    assert (s.path, s.start_line, s.line) == ("examples/train.py", 122, 122)
    assert s.replacement.splitlines() == ["    model = build_model(cfg).to(device)",
                                          "    # gpulint: activation recompute plan",
                                          "    gpulint.apply(model, \"plan.json\")"]
    moved = PullDiff({"examples/train.py": parse_patch("examples/train.py", pr.replace("build_model(cfg)", "x"))})
    assert planpatch.suggestions(patch, moved.files) == []  # the PR's line is not the one the patch expects


@pytest.mark.parametrize("text, message", [
    ("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "not a plain relative path"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n", "ends before its 3 old and 3 new lines"),
    ("just text\n", "no hunk"),
    ("@@ -1 +1 @@\n-a\n+b\n", "a hunk before any file header"),
])
def test_a_bad_plan_patch_is_one_line(tmp_path, text, message):
    with pytest.raises(BotInputError, match=message):
        planpatch.load(write(tmp_path, "plan.diff", text))


def test_an_oversized_plan_patch_is_refused_before_reading(tmp_path):
    path = tmp_path / "plan.diff"
    path.write_bytes(b"x" * (planpatch.MAX_PATCH_BYTES + 1))
    with pytest.raises(BotInputError, match="over the 1048576 byte limit"):
        planpatch.load(path)


# ---------------------------------------------------------------------------------------------- against fake GitHub

TRAIN_PR = ("@@ -119,4 +120,4 @@\n     device = cpu\n     cfg = GPTConfig()\n-    model = old()\n"
            "+    model = build_model(cfg).to(device)\n     optimizer = make_optimizer(model)\n")


@pytest.mark.parametrize("head_layers, budget, conclusion", [(4, 90_000_000, "success"), (6, 90_000_000, "failure")])
def test_one_sticky_comment_with_delta_and_plan_patch_and_the_gate_as_a_check_run(
        fake_dotcom, tmp_path, head_layers, budget, conclusion):
    from .test_bot_comment import _bot

    fake_dotcom.files = [{"filename": "examples/train.py", "status": "modified", "patch": TRAIN_PR}]
    head = plan_dict(head_layers, budget=budget)
    args = ["--plan", write(tmp_path, "plan.json", head),
            "--base-plan", write(tmp_path, "base.json", plan_dict(4, budget=budget)),
            "--plan-patch", write(tmp_path, "plan.diff", PATCH)]
    for _ in range(2):  # a re-run edits the one comment
        code, out = _bot(fake_dotcom, tmp_path, "comment", *args)
        assert code == 0
    (body,) = [c["body"] for c in fake_dotcom.comments.values()]
    assert body.index("### Memory: base → head") < body.index("### Suggested patches")
    assert "gpulint.apply(model" in body and "The memory plan: peak" in body
    verdict = "passes" if conclusion == "success" else "fails"
    assert f"**`gpulint/memory` {verdict}**" in body

    code, out = _bot(fake_dotcom, tmp_path, "check", *args)
    assert code == 0
    (run,) = fake_dotcom.check_runs.values()  # no --lint: only the memory check
    assert run["name"] == "gpulint/memory" and run["conclusion"] == conclusion
    assert "\n" not in run["output"]["title"]
    assert ("Peak memory 98.00 MB even with the plan, over the 90.00 MB budget" in run["output"]["title"]) == (
        conclusion == "failure")

    lint = write(tmp_path, "findings.json", "[]")
    code, out = _bot(fake_dotcom, tmp_path, "review", "--lint", lint, *args)
    assert code == 0 and "review: 1 new" in out and "1 of them the memory plan's" in out
    (comment,) = fake_dotcom.review_comments.values()
    assert comment["path"] == "examples/train.py" and comment["line"] == 122
    assert "```suggestion\n    model = build_model(cfg).to(device)\n    # gpulint" in comment["body"]
    code, out = _bot(fake_dotcom, tmp_path, "review", "--lint", lint, *args)
    assert "review: 0 new, 1 already posted" in out


def test_a_read_only_token_still_says_the_gate_failed(fake_dotcom, tmp_path):
    from .fakegithub import DENIED
    from .test_bot_comment import _bot

    fake_dotcom.deny_writes = DENIED
    fake_dotcom.files = [{"filename": "examples/train.py", "status": "modified", "patch": TRAIN_PR}]
    code, out = _bot(fake_dotcom, tmp_path, "check", "--plan", write(tmp_path, "h.json", plan_dict(6)),
                     "--base-plan", write(tmp_path, "b.json", plan_dict(4)))
    assert code == 0 and fake_dotcom.check_runs == {}
    # A workflow command escapes `%` as %25; GitHub shows "28.1%".
    expected = "::error title=gpulint/memory::peak memory grew 28.1%25 (108.72 MiB → 139.24 MiB), over the 2%25 threshold"
    assert f"\n{expected}\n" in out
    assert "### Memory: base → head" in (tmp_path / "summary.md").read_text()
