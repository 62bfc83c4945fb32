"""The whole chain as CI runs it: `gpulint check`, `gpulint report`, then `gpulint bot comment`, `review` and `check`
against the loopback GitHub, three runs at once, with faults on the way. It must end with exactly one sticky comment,
no comment lost, each review comment once, no token in any output, no traceback, and every request valid against
GitHub's OpenAPI description (the fixture checks that last one when the server stops)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from gpulint.bot.github import FINGERPRINT
from gpulint.bot.report import MARKER

from .fakegithub import TOKEN, Fault

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "github-actions[bot]"


def _gpulint(*argv, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpulint", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_check_report_and_three_concurrent_bot_runs_under_faults(fake_dotcom, tmp_path):
    fake = fake_dotcom
    workspace = tmp_path / "ws"
    shutil.copytree(ROOT / "examples", workspace)
    env = {**os.environ, "GITHUB_WORKSPACE": str(workspace)}
    env.pop("GITHUB_TOKEN", None)
    checked = _gpulint("check", ".", "--format", "json", "--output-file", str(tmp_path / "findings.json"),
                       "--exit-zero", "--no-cache", cwd=workspace, env=env)
    assert checked.returncode == 0, checked.stderr
    report = _gpulint("report", "--lint", str(tmp_path / "findings.json"), "--format", "md", "--output",
                      str(tmp_path / "report.md"), cwd=workspace, env=env)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.md").read_text().startswith(MARKER)

    source = (workspace / "train.py").read_text().splitlines()
    fake.files = [{"filename": "train.py", "status": "added",
                   "patch": f"@@ -0,0 +1,{len(source)} @@\n" + "".join(f"+{line}\n" for line in source)}]
    fake.page_sizes["list_comments"] = 2
    for n in range(3):
        fake.add_comment(f"a maintainer's remark {n} (@octocat)", "maintainer")
    human = dict(fake.comments)
    fake.fail("create_comment", Fault.dropped())  # the comment lands, its answer is lost
    fake.fail("list_comments", Fault(502))
    fake.fail("create_review", Fault(502, after_handling=True))
    fake.fail("create_check_run", Fault.secondary_limit("1"))
    fake.fail_nth(7, Fault(503, {}, {"message": "Service Unavailable"}))  # whichever request comes seventh
    fake.fail_nth(2, Fault(500, {}, {"message": f"echoing {TOKEN}"}), operation="list_files")

    event = tmp_path / "event.json"
    event.write_text(f'{{"pull_request": {{"number": {fake.number}, "head": {{"sha": "{fake.head_sha}"}}}}}}')
    bot_env = {**env, "GITHUB_TOKEN": TOKEN + "\n", "GITHUB_API_URL": fake.base_url, "GITHUB_EVENT_PATH": str(event),
               "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    results: list[subprocess.CompletedProcess] = []
    lock = threading.Lock()

    def one_run():
        for action in ("comment", "review", "check"):
            done = _gpulint("bot", action, "--lint", str(tmp_path / "findings.json"), "--plan",
                            str(ROOT / "tests/bot/fixtures/plan.json"), cwd=tmp_path, env=bot_env)
            with lock:
                results.append(done)

    runs = [threading.Thread(target=one_run) for _ in range(3)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()

    outputs = "\n".join(r.stdout + r.stderr for r in results)
    assert [r.returncode for r in results] == [0] * 9, outputs
    assert "Traceback" not in outputs and TOKEN not in outputs
    ours = [c for c in fake.comments.values() if c["login"] == LOGIN]
    assert len(ours) == 1 and ours[0]["body"].startswith(MARKER)  # exactly one sticky comment, not none
    assert "train.py:" in ours[0]["body"] and "Peak memory" in ours[0]["body"]
    assert {cid: fake.comments.get(cid) for cid in human} == human  # no one else's comment touched
    fingerprints = [FINGERPRINT.match(c["body"]).group(1) for c in fake.review_comments.values()]
    assert fingerprints and len(fingerprints) == len(set(fingerprints))  # each review comment once
    assert fake.check_runs and all(r["head_sha"] == fake.head_sha for r in fake.check_runs.values())
    for text in [c["body"] for c in fake.comments.values()] + [c["body"] for c in fake.review_comments.values()]:
        assert TOKEN not in text
    assert not (tmp_path / "summary.md").exists() or TOKEN not in (tmp_path / "summary.md").read_text()
