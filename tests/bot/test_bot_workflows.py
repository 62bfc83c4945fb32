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
    problems = check_job_permissions(wf)
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


def check_job_permissions(wf: dict) -> list[str]:
    """zizmor's advice: the workflow grants nothing (`permissions: {}`), each job asks for what it needs."""
    problems = []
    if wf.get("permissions") != {}:
        problems.append(f"workflow-level permissions must be {{}}, not {wf.get('permissions')!r}")
    for name, job in wf["jobs"].items():
        if "permissions" not in job:
            problems.append(f"job {name}: no permissions of its own")
    return problems


def check_analysis_workflow(wf: dict) -> list[str]:
    problems = check_job_permissions(wf)
    if "pull_request_target" in wf["on"] or "workflow_run" in wf["on"]:
        problems.append("analysis workflow must run on pull_request, never pull_request_target/workflow_run")
    for name, job in wf["jobs"].items():
        if _permissions_write(job.get("permissions")):
            problems.append(f"job {name}: asks for write permissions {job.get('permissions')!r}")
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
    assert wf["jobs"]["lint"]["permissions"] == {"contents": "read"}


def test_comment_workflow_has_only_the_write_it_needs():
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    writes = {k for k, v in wf["jobs"]["comment"]["permissions"].items() if v == "write"}
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
        (lambda wf: wf.__setitem__("permissions", {"contents": "read"}), "workflow-level permissions must be {}"),
        (lambda wf: wf["jobs"]["lint"].pop("permissions"), "job lint: no permissions of its own"),
        (lambda wf: wf["jobs"]["plan"]["permissions"].__setitem__("pull-requests", "write"), "asks for write"),
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
    assert {"paths", "config", "budget", "hardware", "comment-mode", "base-plan", "memory-threshold"} <= set(
        action["inputs"])


def test_own_ci_runs_make_test():
    ci = _load(WORKFLOWS / "ci.yml")
    runs = [s.get("run", "") for _, _, s in _steps(ci)]
    assert "make test" in runs and check_job_permissions(ci) == []
    assert not _permissions_write(ci["jobs"]["test"]["permissions"])


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


# ---------------------------------------------------------------------------------------------- hardening (zizmor)

SHIPPED = [WORKFLOWS / "gpulint.yml", WORKFLOWS / "gpulint-comment.yml", WORKFLOWS / "ci.yml", ROOT / "action.yml"]
USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", re.MULTILINE)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_sha_with_the_tag_in_a_comment(path):
    found = USES.findall(path.read_text())
    assert found
    for ref, rest in found:
        pinned = re.fullmatch(r"[\w.-]+/[\w.-]+(?:/[\w.-]+)*@[0-9a-f]{40}", ref)  # actions/cache/restore@...
        assert pinned, f"{path.name}: {ref} is not pinned by commit SHA"
        assert re.fullmatch(r"\s+# v\d+\.\d+\.\d+", rest), f"{path.name}: {ref} has no `# vX.Y.Z` comment"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_pip_runs_isolated_from_the_checkout(path):
    """`python -m pip` puts the working folder first on sys.path: a PR adding `pip/__main__.py` would run its code."""
    text = path.read_text()
    for line in re.findall(r"^.*\bpip install\b.*$", text, re.MULTILINE):
        assert "python -I -m pip install" in line, f"{path.name}: {line.strip()}"


def test_isolated_pip_does_not_run_a_pip_folder_from_the_working_folder(tmp_path):
    import subprocess
    import sys

    (tmp_path / "pip").mkdir()
    (tmp_path / "pip" / "__init__.py").write_text("")
    (tmp_path / "pip" / "__main__.py").write_text("open('pwned', 'w').write('PR code ran')\n")
    subprocess.run([sys.executable, "-I", "-m", "pip", "--version"], cwd=tmp_path, capture_output=True, check=True)
    assert not (tmp_path / "pwned").exists()
    subprocess.run([sys.executable, "-m", "pip", "--version"], cwd=tmp_path, capture_output=True)
    assert (tmp_path / "pwned").exists()  # what `python -I` prevents


def test_comment_workflow_runs_one_at_a_time_per_pull_request():
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    group = wf["concurrency"]["group"]
    assert "workflow_run.head_repository.full_name" in group and "workflow_run.head_branch" in group
    assert wf["concurrency"]["cancel-in-progress"] is False  # never stop a run half-way through posting
    assert wf["jobs"]["comment"]["timeout-minutes"] * 60 >= 3 * 240 + 60  # three commands at --deadline 240


def _step(wf: dict, job: str, name_part: str) -> dict:
    return next(s for s in wf["jobs"][job]["steps"] if name_part in s.get("name", ""))


def test_the_write_token_job_installs_pinned_gpulint_with_hashes():
    import gpulint

    step = _step(_load(WORKFLOWS / "gpulint-comment.yml"), "comment", "Install gpulint")
    script = step["run"]
    assert re.search(r"python -I -m pip install .*--no-deps --require-hashes --only-binary :all:", script)
    block = script.split("# BEGIN gpulint-bot-requirements\n")[1].split("# END gpulint-bot-requirements")[0]
    pins = {}
    for line in block.strip().splitlines():
        m = re.fullmatch(r"([a-z0-9-]+)==(\S+)((?: --hash=sha256:[0-9a-f]{64})+)", line.strip())
        assert m, f"not pinned with a hash: {line!r}"
        pins[m.group(1)] = m.group(2)
    assert pins["gpulint"] == gpulint.__version__, "run `make bot-lock` after a version bump"
    assert {"jinja2", "markupsafe", "requests", "certifi", "charset-normalizer", "idna", "urllib3"} <= set(pins)


def test_the_artifact_is_never_extracted_by_download_artifact():
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    assert not any("download-artifact" in s.get("uses", "") for _, _, s in _steps(wf))


GH_STUB = """#!{python}
import os, pathlib, sys
stub = pathlib.Path(os.environ["STUB_DIR"])
with open(stub / "calls.log", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
path = next(a for a in sys.argv[2:] if not a.startswith("-"))
for name, answer in [("artifacts?name=", "artifacts.txt"), ("/zip", "artifact.zip"), ("/reviews", "reviews.json"),
                     ("/pulls/", "head.txt")]:
    if name in path:
        sys.stdout.buffer.write((stub / answer).read_bytes())
        break
"""


def _run_step(step: dict, tmp_path, env: dict) -> "subprocess.CompletedProcess":
    """Run a workflow step's script as the runner does (`shell: bash`), with `gh` answered from files."""
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(GH_STUB.format(python=sys.executable))
    gh.chmod(0o755)
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    path = f"{bin_dir}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}"
    (tmp_path / "runner").mkdir(exist_ok=True)
    full_env = {"PATH": path, "RUNNER_TEMP": str(tmp_path / "runner"), "STUB_DIR": str(tmp_path), "GH_TOKEN": "t",
                "REPO": "o/r", **env}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=full_env,
                          capture_output=True, text=True, timeout=60)


def _artifact(tmp_path, files: dict[str, bytes], declared: int | None = None) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "artifact.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    size = declared if declared is not None else (tmp_path / "artifact.zip").stat().st_size
    (tmp_path / "artifacts.txt").write_text(f"42 {size}\n")


def _download(tmp_path):
    step = _step(_load(WORKFLOWS / "gpulint-comment.yml"), "comment", "Download the report")
    return _run_step(step, tmp_path, {"RUN_ID": "7", "REPORT_DIR": str(tmp_path / "report")})


def test_download_extracts_only_the_two_reports(tmp_path):
    _artifact(tmp_path, {"findings.json": b"[]", "plan.json": b"{}", "run.sh": b"rm -rf /", "../up.json": b"x"})
    done = _download(tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["findings.json", "plan.json"]
    assert not (tmp_path / "up.json").exists()


def test_download_checks_the_size_before_downloading(tmp_path):
    _artifact(tmp_path, {"findings.json": b"[]"}, declared=40 * 1024 * 1024)
    done = _download(tmp_path)
    assert done.returncode != 0 and "over the 33554432 byte cap" in done.stdout
    assert "/zip" not in (tmp_path / "calls.log").read_text()  # never fetched
    assert not (tmp_path / "report").exists()


def test_download_refuses_a_zip_bomb_before_writing_it(tmp_path):
    _artifact(tmp_path, {"findings.json": b" " * (40 * 1024 * 1024)})  # 40 MB of spaces: about 40 kB zipped
    done = _download(tmp_path)
    assert done.returncode != 0 and "findings.json unpacks to over 33554432 bytes" in done.stdout + done.stderr
    assert not (tmp_path / "report" / "findings.json").exists()


# ---------------------------------------------------------------------------------------------- the plan label race

SHA = "1" * 40


def _approval(tmp_path, head: str, reviews: list[dict], event="pull_request", sha=SHA):
    wf = _load(WORKFLOWS / "gpulint.yml")
    steps = wf["jobs"]["plan"]["steps"]
    check = steps[0]
    assert "reviewed" in check["name"] and steps[1]["uses"].startswith("actions/checkout@")  # checked before checkout
    assert steps[1]["with"]["ref"] == "${{ github.event.pull_request.head.sha || inputs.sha }}"
    (tmp_path / "head.txt").write_text(head + "\n")
    half = len(reviews) // 2  # two pages, as `gh api --paginate` prints them
    (tmp_path / "reviews.json").write_text(json.dumps(reviews[:half]) + "\n" + json.dumps(reviews[half:]) + "\n")
    return _run_step(check, tmp_path, {"EVENT": event, "PR": "7", "HEAD_SHA": sha})


def _review(commit, state="APPROVED", who="MEMBER"):
    return {"state": state, "commit_id": commit, "author_association": who}


def test_the_label_plans_the_approved_head(tmp_path):
    done = _approval(tmp_path, SHA, [_review("0" * 40, "COMMENTED"), _review(SHA)])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "head, reviews, expected",
    [
        ("2" * 40, [_review(SHA)], "head is now 2222"),  # pushed to after the label
        (SHA, [_review("0" * 40)], f"no maintainer approved {SHA}"),  # approved an older commit, then a push
        (SHA, [_review(SHA, who="CONTRIBUTOR")], "no maintainer approved"),
        (SHA, [_review(SHA, state="CHANGES_REQUESTED")], "no maintainer approved"),
    ],
)
def test_the_label_refuses_an_unreviewed_head(tmp_path, head, reviews, expected):
    done = _approval(tmp_path, head, reviews)
    assert done.returncode != 0 and expected in done.stdout + done.stderr


def test_a_dispatch_plans_the_commit_it_names_while_it_is_the_head(tmp_path):
    assert _approval(tmp_path, SHA, [], event="workflow_dispatch").returncode == 0
    done = _approval(tmp_path, SHA, [], event="workflow_dispatch", sha="main")
    assert done.returncode != 0 and "full SHA" in done.stdout


def test_base_and_head_are_planned_on_the_cpu_runner_and_the_base_cached_before_pr_code_runs():
    wf = _load(WORKFLOWS / "gpulint.yml")
    lint = wf["jobs"]["lint"]
    assert lint["runs-on"] == "ubuntu-latest" and lint["permissions"] == {"contents": "read"}
    names = [s.get("name", s.get("uses", "")) for s in lint["steps"]]
    find = next(s for s in lint["steps"] if s.get("name") == "Find the base and head to plan")
    assert "if [ ! -f gpulint.yaml ]" in find["run"] and "download.pytorch.org/whl/cpu" in find["run"]
    # The PR's code runs only in "Plan the head": the base's cache entry is written before it.
    assert names.index("Cache the base's plan") < names.index("Plan the head")
    head = lint["steps"][names.index("Plan the head")]
    assert "--patch" in head["run"] and "base-plan.json" in head["run"] and head["timeout-minutes"] <= 30
    assert any("upload-artifact" in n for n in names[names.index("Plan the head"):])
    base_job = wf["jobs"]["base-plan"]
    assert "default_branch" in base_job["if"] and base_job["permissions"] == {"contents": "read"}
    assert "--measure" not in json.dumps(lint) and "--measure" in json.dumps(wf["jobs"]["plan"])


def test_the_comment_workflow_passes_base_plan_patch_and_threshold():
    wf = _load(WORKFLOWS / "gpulint-comment.yml")
    text = json.dumps(wf)
    for name in ("base-plan.json", "plan.diff"):
        assert name in text
    post = next(s for s in wf["jobs"]["comment"]["steps"] if s.get("name", "").startswith("Post"))
    assert "--base-plan" in post["run"] and "--plan-patch" in post["run"]
    assert "--memory-threshold \"$MEMORY_THRESHOLD\"" in post["run"] and "vars.GPULINT_MEMORY_THRESHOLD" in \
        post["env"]["MEMORY_THRESHOLD"]
