"""The shipped workflows and the action, parsed: the fork-safety rules of docs/ci.md hold, and the matcher matches."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
# Values a PR author (or the artifact it produced) controls: never spliced into a shell line.
UNTRUSTED = re.compile(
    r"github\.event\.|github\.head_ref|inputs\.|steps\.[\w-]+\.outputs|needs\.[\w-]+\.outputs|env\.|artifact",
)
WRITE_SCOPES = {"write", "write-all"}


def _load(path: Path) -> dict:
    wf = yaml.safe_load(path.read_text())
    wf["on"] = wf.get("on", wf.pop(True, None))  # YAML 1.1 reads a bare `on:` key as True
    return wf


def _steps(wf: dict):
    for name, job in wf["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def _permissions_write(perms) -> bool:
    if perms is None:
        return True  # the default token may be write-all: a workflow must say what it needs
    if isinstance(perms, str):
        return perms in WRITE_SCOPES
    return any(v in WRITE_SCOPES for v in perms.values())


def check_comment_workflow(wf: dict) -> list[str]:
    problems = []
    if set(wf["on"]) != {"workflow_run"}:
        problems.append(f"comment workflow must run only on workflow_run, not {sorted(wf['on'])}")
    for name, _, step in _steps(wf):
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout"):
            problems.append(f"job {name}: checks out code (the PR's code must never run with a write token)")
        run = step.get("run", "")
        for expr in EXPRESSION.findall(run):
            problems.append(f"job {name}: `run:` interpolates ${{{{{expr.strip()}}}}} (pass it through env)")
        if re.search(r"\b(pip install|python -m pip install)\b[^\n]*(\./|\.\s|-e|\$)", run):
            problems.append(f"job {name}: installs from the workspace or a variable, not from PyPI")
        if re.search(r"\b(bash|sh|source|python)\s+[\"']?\$?\{?REPORT_DIR", run) or re.search(r"\beval\b", run):
            problems.append(f"job {name}: executes something from the artifact")
    return problems


def check_analysis_workflow(wf: dict) -> list[str]:
    problems = []
    if "pull_request_target" in wf["on"] or "workflow_run" in wf["on"]:
        problems.append("analysis workflow must run on pull_request, never pull_request_target/workflow_run")
    if _permissions_write(wf.get("permissions")):
        problems.append(f"analysis workflow permissions are not read-only: {wf.get('permissions')!r}")
    for name, job in wf["jobs"].items():
        if "permissions" in job and _permissions_write(job["permissions"]):
            problems.append(f"job {name}: asks for write permissions {job['permissions']!r}")
        if "self-hosted" in json.dumps(job.get("runs-on", "")):
            cond = str(job.get("if", ""))
            if "labeled" not in cond and "workflow_dispatch" not in cond:
                problems.append(f"job {name}: a self-hosted (GPU) runner without a maintainer's label or dispatch")
    for name, _, step in _steps(wf):
        for expr in EXPRESSION.findall(step.get("run", "")):
            if UNTRUSTED.search(expr):
                problems.append(f"job {name}: `run:` interpolates ${{{{{expr.strip()}}}}}")
        if step.get("uses", "").startswith("actions/checkout") and step.get("with", {}).get(
                "persist-credentials", True) is not False:
            problems.append(f"job {name}: checkout keeps the token in .git (persist-credentials: false)")
    return problems


def test_comment_workflow_never_runs_pr_code_nor_splices_values():
    assert check_comment_workflow(_load(WORKFLOWS / "gpulint-comment.yml")) == []


def test_analysis_workflow_is_read_only():
    wf = _load(WORKFLOWS / "gpulint.yml")
    assert check_analysis_workflow(wf) == []
    assert wf["permissions"] == {"contents": "read"}


def test_comment_workflow_has_only_the_write_it_needs():
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    writes = {k for k, v in wf["permissions"].items() if v == "write"}
    assert writes == {"pull-requests", "checks"}
    assert wf["on"]["workflow_run"]["workflows"] == ["gpulint"]


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda wf: wf["jobs"]["comment"]["steps"].insert(0, {"uses": "actions/checkout@v4", "with": {
            "ref": "${{ github.event.workflow_run.head_sha }}"}}), "checks out code"),
        (lambda wf: wf["jobs"]["comment"]["steps"].append({"run": "echo ${{ github.event.workflow_run.head_branch }}"}),
         "interpolates"),
        (lambda wf: wf["jobs"]["comment"]["steps"].append({"run": "bash \"$REPORT_DIR/post.sh\""}), "executes"),
        (lambda wf: wf["jobs"]["comment"]["steps"].append({"run": "pip install -e ."}), "installs from the workspace"),
    ],
)
def test_the_comment_check_catches_unsafe_edits(mutation, expected):
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    mutation(wf)
    assert any(expected in p for p in check_comment_workflow(wf))


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda wf: wf.__setitem__("permissions", {"contents": "read", "pull-requests": "write"}), "not read-only"),
        (lambda wf: wf.pop("permissions"), "not read-only"),
        (lambda wf: wf["jobs"]["lint"].__setitem__("permissions", "write-all"), "asks for write"),
        (lambda wf: wf["jobs"]["plan"].__setitem__("if", "always()"), "self-hosted"),
        (lambda wf: wf["on"].__setitem__("pull_request_target", {}), "never pull_request_target"),
        (lambda wf: wf["jobs"]["lint"]["steps"].append({"run": "echo ${{ github.event.pull_request.title }}"}),
         "interpolates"),
    ],
)
def test_the_analysis_check_catches_unsafe_edits(mutation, expected):
    wf = _load(WORKFLOWS / "gpulint.yml")
    mutation(wf)
    assert any(expected in p for p in check_analysis_workflow(wf))


def test_action_passes_inputs_through_env_only():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        assert not EXPRESSION.search(step.get("run", "")), f"step {step.get('name')} splices an expression"
    assert {"paths", "config", "budget", "hardware", "comment-mode"} <= set(action["inputs"])


def test_own_ci_runs_make_test():
    ci = _load(WORKFLOWS / "ci.yml")
    runs = [s.get("run", "") for _, _, s in _steps(ci)]
    assert "make test" in runs and not _permissions_write(ci["permissions"])


def test_problem_matcher_matches_the_text_format():
    matcher = json.loads((ROOT / ".github" / "gpulint-matcher.json").read_text())["problemMatcher"][0]
    pattern = matcher["pattern"][0]
    line = "src/train.py:12:9: GPL401 `loss.item()` in the step forces a sync: use it every N steps"
    m = re.match(pattern["regexp"], line)
    assert m is not None
    assert m.group(pattern["file"]) == "src/train.py" and m.group(pattern["line"]) == "12"
    assert m.group(pattern["column"]) == "9" and m.group(pattern["code"]) == "GPL401"
    assert m.group(pattern["message"]).startswith("`loss.item()`")
    assert re.match(pattern["regexp"], "Found 3 findings in 2 files") is None
