"""--fix, --unsafe-fixes, --diff: repeated until stable, re-parsed, atomic, encoding and newlines kept."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from gpulint.linter.finding import Edit, Finding, Fix
from gpulint.linter.fixes import apply_edits, fix_text

SAFE = (
    "import torch\n\ndef train(model, loader, optimizer):\n    for batch in loader:\n"
    "        loss = model(batch)\n        loss.backward()\n        optimizer.step()\n"
    "        mask = torch.ones(8, 8).cuda()\n"
)
SAFE_FIXED = SAFE.replace("torch.ones(8, 8).cuda()", 'torch.ones(8, 8, device="cuda")')
SELECT = ("--select", "GPL504,GPL301")
UNSAFE = 'enc = tokenizer(texts, padding="max_length", truncation=True)\n'
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UNSAFE_FIXED = "enc = tokenizer(texts, padding=True, truncation=True)\n"


def test_fix_applies_safe_fixes_only(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE + UNSAFE)
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix", *SELECT)
    assert (tmp_path / "a.py").read_text() == SAFE_FIXED + UNSAFE
    assert code == 1 and "Fixed 1 finding." in out and "GPL301" in out


def test_unsafe_fixes(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE + UNSAFE)
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix", "--unsafe-fixes", *SELECT)
    assert (tmp_path / "a.py").read_text() == SAFE_FIXED + UNSAFE_FIXED
    assert code == 0 and "Fixed 2 findings." in out


def test_fix_alias_and_config_unsafe(run, tmp_path):
    (tmp_path / "a.py").write_text(UNSAFE)
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nunsafe-fixes = true\n")
    assert run(tmp_path, "fix", "a.py", "--no-cache", *SELECT)[0] == 0
    assert (tmp_path / "a.py").read_text() == UNSAFE_FIXED


def test_diff_writes_nothing(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE)
    code, out, err = run(tmp_path, "check", "a.py", "--no-cache", "--diff", *SELECT)
    assert code == 1 and (tmp_path / "a.py").read_text() == SAFE
    assert out.startswith("--- a/a.py\n+++ b/a.py\n") and "-        mask = torch.ones(8, 8).cuda()" in out and "+        mask" in out
    assert "1 fix would be applied" in err


def test_fix_is_idempotent(run, tmp_path):
    (tmp_path / "a.py").write_text(SAFE)
    run(tmp_path, "check", "a.py", "--no-cache", "--fix", *SELECT)
    first = (tmp_path / "a.py").read_bytes()
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix", *SELECT)
    assert (tmp_path / "a.py").read_bytes() == first and "Fixed" not in out


def test_fix_keeps_encoding_crlf_and_mode(run, tmp_path):
    source = "# -*- coding: latin-1 -*-\r\n# caf\xe9\r\n" + SAFE.replace("\n", "\r\n")
    path = tmp_path / "a.py"
    path.write_bytes(source.encode("latin-1"))
    path.chmod(0o750)
    run(tmp_path, "check", "a.py", "--no-cache", "--fix", *SELECT)
    data = path.read_bytes()
    assert data == ("# -*- coding: latin-1 -*-\r\n# caf\xe9\r\n" + SAFE_FIXED.replace("\n", "\r\n")).encode("latin-1")
    assert path.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fix_keeps_bom(run, tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"\xef\xbb\xbf" + SAFE.encode())
    run(tmp_path, "check", "a.py", "--no-cache", "--fix", *SELECT)
    assert path.read_bytes() == b"\xef\xbb\xbf" + SAFE_FIXED.encode()


def _finding(line, column, end_column, content, applicability="safe"):
    return Finding("GPL999", "t", "m", "warning", "x.py", line, column, line, end_column,
                   Fix(applicability, (Edit(line, column, line, end_column, content),)))


def test_fix_loop_stops_when_a_fix_breaks_the_code():
    text = "x = 1\n"
    broken = lambda t: [_finding(1, 5, 6, "(")] if t == text else []  # noqa: E731
    assert fix_text(text, broken, unsafe=False) == (text, [])


def test_fix_loop_repeats_until_stable_and_is_bounded():
    # Each pass increments the number: the loop must stop after its bound.
    def lint(t):
        value = int(t.split("=")[1])
        return [_finding(1, 5, 5 + len(str(value)), str(value + 1))]

    text, codes = fix_text("x = 1\n", lint, unsafe=False)
    assert text == "x = 11\n" and codes == ["GPL999"] * 10


def test_overlapping_fixes_apply_one_per_pass():
    text = "abcdef\n"
    edits = [Edit(1, 1, 1, 4, "X"), Edit(1, 3, 1, 6, "Y"), Edit(1, 6, 1, 7, "Z")]
    assert apply_edits(text, edits) == "XdeZ\n"


UNPINNED = (
    "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, dataset, optimizer, device):\n"
    "    loader = DataLoader(dataset, batch_size=4, shuffle=True)\n    for x, y in loader:\n"
    "        x, y = x.to(device), y.to(device)\n        loss = model(x, y)\n        loss.backward()\n"
    "        optimizer.step()\n"
)


def test_the_non_blocking_fix_pins_the_files_loader_too(run, tmp_path):
    # `non_blocking=True` alone, from pageable memory, changes nothing and draws GPL411's other finding: a
    # `gpulint-fix` hook with unsafe fixes could never pass.
    (tmp_path / "a.py").write_text(UNPINNED)
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--fix", "--unsafe-fixes")
    assert code == 0, out
    assert (tmp_path / "a.py").read_text() == UNPINNED.replace(
        "shuffle=True)", "shuffle=True, pin_memory=True)"
    ).replace("x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)")


def test_no_non_blocking_fix_where_the_loader_turns_pinning_off(run, tmp_path):
    (tmp_path / "a.py").write_text(UNPINNED.replace("shuffle=True)", "shuffle=True, pin_memory=False)"))
    code, out, _ = run(tmp_path, "check", "a.py", "--no-cache", "--select", "GPL411", "--output-format", "json")
    findings = json.loads(out)
    # The two copies and the loader itself, which turns pinning off: none gets a fix.
    assert code == 1 and [(f["line"], f["fix"]) for f in findings] == [(6, None), (8, None), (8, None)]


def test_unsafe_fixes_of_the_example_script_make_no_new_finding(run, tmp_path):
    for name in ("train.py", "model.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    before = Counter(f["code"] for f in json.loads(run(tmp_path, "check", ".", "--no-cache", "--output-format", "json")[1]))
    run(tmp_path, "check", ".", "--no-cache", "--fix", "--unsafe-fixes")
    after = Counter(f["code"] for f in json.loads(run(tmp_path, "check", ".", "--no-cache", "--output-format", "json")[1]))
    assert after - before == Counter() and sum(after.values()) < sum(before.values())
    assert "pin_memory=True" in (tmp_path / "train.py").read_text()


def test_a_fix_of_a_call_spanning_lines_keeps_its_block_indentation():
    # libcst regenerates a replacement node alone without the block's indentation: its continuation lines would
    # move left of where they were.
    import libcst as cst

    from gpulint.linter.engine import _code_in_place

    source = "def f():\n    loader = DataLoader(\n        ds,\n        batch_size=4,\n    )\n"
    module = cst.parse_module(source)
    call = module.body[0].body.body[0].body[0].value
    added = call.with_changes(args=[*call.args, cst.Arg(cst.Name("True"), keyword=cst.Name("pin_memory"))])
    assert _code_in_place(module, added, source.split("\n"), 2) == (
        "DataLoader(\n        ds,\n        batch_size=4,\n    pin_memory = True)"
    )
