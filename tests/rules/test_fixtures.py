"""The rules on real-code shapes beyond their own examples: fixture files with the expected findings marked on the
lines they judge (as flake8-bugbear's tests/eval_files do).

A fixture file, tests/rules/fixtures/<family>/<topic>.py, holds cases. Each case is a whole file, linted on its own
with every rule enabled:

    # checks: GPL4                                  first line: the code prefixes this file's cases are checked for
    # case: item_every_step_is_flagged_once         a case starts here (add `  path=src/x.py` to lint it as that
    #: why the case exists                          path; the default is train.py); `#:` lines describe it
    import torch                                    from here to the next `# case:` line: the source
    ...
            loss_value = loss.item()  # expect: GPL401

A line's `# expect:` codes (one per finding: `# expect: GPL411 GPL411` for two) are exactly the findings on that line
whose code starts with a checked prefix: every marked finding must be reported, and nothing unmarked. The markers are
removed before linting, so the linted source is the case as written without them; blank lines at the end of a case
are not part of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = all_rules()
FIXTURES = Path(__file__).parent / "fixtures"
CHECKS = re.compile(r"^# checks: ((?:GPL\d{0,3} ?)+)$")
CASE = re.compile(r"^# case: (\S.*?)(?:  path=(\S+))?$")
EXPECT = re.compile(r"\s*# expect: ((?:GPL\d{3} ?)+)$")


@dataclass
class Case:
    file: Path
    name: str
    path: str
    first_line: int  # the fixture file's line number of the case's line 1
    source: str
    expected: list[tuple[int, str]]  # (line in the case, code), sorted
    prefixes: tuple[str, ...]


def read_fixture(file: Path) -> list[Case]:
    lines = file.read_text().splitlines()
    checks = CHECKS.match(lines[0]) if lines else None
    if checks is None:
        raise ValueError(f"{file}: the first line must be `# checks: GPLn ...`")
    prefixes = tuple(checks.group(1).split())
    cases: list[Case] = []
    index = 1
    while index < len(lines):
        header = CASE.match(lines[index])
        if header is None:
            if lines[index].strip():
                raise ValueError(f"{file}:{index + 1}: text outside a case (a case starts with `# case: NAME`)")
            index += 1
            continue
        index += 1
        while index < len(lines) and lines[index].startswith("#:"):
            index += 1
        start = index
        while index < len(lines) and not CASE.match(lines[index]):
            index += 1
        body = lines[start:index]
        while body and not body[-1].strip():
            body.pop()
        source, expected = [], []
        for number, line in enumerate(body, 1):
            marker = EXPECT.search(line)
            if marker:
                expected += [(number, code) for code in marker.group(1).split()]
                line = line[: marker.start()]
            source.append(line)
        cases.append(
            Case(file, header.group(1), header.group(2) or "train.py", start + 1, "\n".join(source) + "\n",
                 sorted(expected), prefixes)
        )
    if not cases:
        raise ValueError(f"{file}: no `# case:` in it")
    return cases


CASES = [case for file in sorted(FIXTURES.rglob("*.py")) for case in read_fixture(file)]


def mismatches(case: Case) -> list[str]:
    """One line per finding that is marked and not reported, or reported and not marked, at its fixture line."""
    found = sorted(
        (f.line, f.code) for f in lint_text(case.path, case.source, RULES) if f.code.startswith(case.prefixes)
    )
    missing = [(line, code, "marked, not reported") for line, code in case.expected if (line, code) not in found]
    extra = [(line, code, "reported, not marked") for line, code in found if (line, code) not in case.expected]
    return [f"{case.file}:{line + case.first_line - 1}: {code} {what}" for line, code, what in missing + extra]


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.file.relative_to(FIXTURES)}::{c.name}") for c in CASES])
def test_fixture_case(case: Case):
    wrong = mismatches(case)
    assert not wrong, f"case {case.name!r}:\n" + "\n".join(wrong)


def test_fixture_names_are_unique_per_file():
    seen: set[tuple[Path, str]] = set()
    for case in CASES:
        assert (case.file, case.name) not in seen, f"{case.file}: two cases named {case.name!r}"
        seen.add((case.file, case.name))


def test_a_missing_and_an_unmarked_finding_are_both_named(tmp_path):
    fixture = tmp_path / "f.py"
    fixture.write_text(
        "# checks: GPL4\n\n# case: one\n#: the marker is one line below the finding\nimport torch\n\n"
        "def train(model, loader, optimizer, device):\n"
        "    for x, y in loader:\n        loss = model(x.to(device, non_blocking=True)).sum()\n"
        "        loss.backward()\n        optimizer.step()\n        print(loss.item())\n"
        "        z = 1  # expect: GPL401\n\n"
    )
    (case,) = read_fixture(fixture)
    assert case.first_line == 5 and "# expect" not in case.source and case.source.endswith("z = 1\n")
    assert mismatches(case) == [f"{fixture}:13: GPL401 marked, not reported", f"{fixture}:12: GPL401 reported, not marked"]


def test_a_file_without_its_checks_line_is_an_error(tmp_path):
    fixture = tmp_path / "f.py"
    fixture.write_text("# case: one\nx = 1\n")
    with pytest.raises(ValueError, match="checks"):
        read_fixture(fixture)
