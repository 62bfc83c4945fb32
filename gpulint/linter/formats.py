"""Output formats for findings: text (with code frames; `full` is its ruff name), concise (one line each), json,
sarif, github, gitlab, junit; and the `--statistics` table."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from xml.etree import ElementTree
from typing import TYPE_CHECKING, Callable, Sequence

from gpulint import __version__
from gpulint.linter.finding import Finding

if TYPE_CHECKING:
    from gpulint.linter.rule import Rule

FORMATS = ("text", "full", "concise", "json", "sarif", "github", "gitlab", "junit")
SourceLines = Callable[[str], "list[str] | None"]
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITLAB_SEVERITY = {"error": "critical", "warning": "major", "info": "minor"}


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text


def render(fmt: str, findings: Sequence[Finding], rules: dict[str, type[Rule]], source_lines: SourceLines,
           color: bool = False, fixed: int = 0, checked: int = 1, summary: bool = True) -> str:
    """The report in format `fmt`. For text: `fixed` fixes were applied, `checked` files were linted (none: say so
    rather than that all checks passed), and `summary` is False under `-q`."""
    if fmt == "json":
        return json.dumps([f.to_json() for f in findings], indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(findings, rules), indent=2) + "\n"
    if fmt == "github":
        return "".join(github_command(f) + "\n" for f in findings)
    if fmt == "gitlab":
        return json.dumps(gitlab(findings), indent=2) + "\n"
    if fmt == "junit":
        return junit(findings)
    frames = source_lines if fmt != "concise" else None
    return text(findings, frames, color, fixed, checked, summary)


def text(findings: Sequence[Finding], source_lines: SourceLines | None, color: bool = False, fixed: int = 0,
         checked: int = 1, summary: bool = True) -> str:
    """One line per finding, each followed by a code frame when `source_lines` is given, then a summary line."""
    style = _Style(color)
    out: list[str] = []
    for finding in findings:
        out.append(
            f"{style(finding.path, '1')}:{finding.line}:{finding.column}: "
            f"{style(finding.code, '1;31' if finding.severity == 'error' else '1;33')}{_marker(finding)} {finding.message}"
        )
        lines = source_lines(finding.path) if source_lines else None
        if lines and 0 < finding.line <= len(lines):
            out.extend(_frame(finding, lines, style))
        why = why_per_step(finding) if source_lines else None
        if why:
            out.append(f"  {style('=', '1;34')} {why}")
        if finding.cost is not None:
            out.append(f"  {style('=', '1;34')} costs {_cost(finding.cost)}")
    if not summary:
        return "".join(line + "\n" for line in out)
    return "\n".join(out + ([""] if out and source_lines else []) + _summary(findings, fixed, checked)) + "\n"


def _cost(cost) -> str:
    from gpulint.linter.pricing import cost_text

    return f"{cost_text(cost)}: {cost.method}"


def _marker(finding: Finding) -> str:
    return " [*]" if finding.fix and finding.fix.applicability == "safe" else ""


def _summary(findings: Sequence[Finding], fixed: int, checked: int) -> list[str]:
    fixable = sum(1 for f in findings if f.fix is not None)
    safe = sum(1 for f in findings if f.fix is not None and f.fix.applicability == "safe")
    summary = []
    if fixed:
        summary.append(f"Fixed {fixed} finding{'s' * (fixed != 1)}.")
    if findings:
        noun = "finding" if len(findings) == 1 else "findings"
        line = f"Found {len(findings)} {noun}"
        if fixable:
            line += f" ({safe} fixable with --fix" + (f", {fixable - safe} more with --unsafe-fixes" if fixable > safe else "") + ")"
        summary.append(line + ".")
    elif not checked:
        summary.append("No Python files were checked.")
    elif not fixed:
        summary.append("All checks passed.")
    return summary


def statistics(findings: Sequence[Finding], as_json: bool = False) -> str:
    """`--statistics`: how many findings of each code, most frequent first, `[*]` where a safe fix exists."""
    counts = Counter(f.code for f in findings)
    first = {}
    safe = set()
    for finding in findings:
        first.setdefault(finding.code, finding)
        if _marker(finding):
            safe.add(finding.code)
    order = sorted(counts, key=lambda code: (-counts[code], code))
    if as_json:
        rows = [{"code": c, "name": first[c].name, "count": counts[c], "fixable": c in safe} for c in order]
        return json.dumps(rows, indent=2) + "\n"
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "".join(
        f"{counts[c]:>{width}}  {c}  {'[*]' if c in safe else '   '} {first[c].name}\n" for c in order
    )


def junit(findings: Sequence[Finding]) -> str:
    """JUnit XML, as CI systems read test reports: a test suite per file, a failed test case per finding."""
    root = ElementTree.Element("testsuites", name="gpulint", tests=str(max(len(findings), 1)),
                               failures=str(len(findings)), errors="0")
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append(finding)
    if not by_path:
        suite = ElementTree.SubElement(root, "testsuite", name="gpulint", tests="1", failures="0", errors="0")
        ElementTree.SubElement(suite, "testcase", name="No findings", classname="gpulint")
    for path, items in by_path.items():
        suite = ElementTree.SubElement(root, "testsuite", name=path, tests=str(len(items)),
                                       failures=str(len(items)), errors="0")
        for finding in items:
            case = ElementTree.SubElement(
                suite, "testcase", name=f"{finding.code} {finding.name}", classname=path,
                file=path, line=str(finding.line), column=str(finding.column),
            )
            failure = ElementTree.SubElement(case, "failure", message=finding.message, type=finding.severity)
            failure.text = f"{path}:{finding.line}:{finding.column}: {finding.code} {finding.message}"
            if finding.url:
                failure.text += f"\n{finding.url}"
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def why_per_step(finding: Finding) -> str:
    """`per step via train.py:120 loop over loader -> trainer.py:88 Trainer.step() (likely)`: how the training step
    reaches the finding, so a reader can check it in seconds; "" when there is nothing to say."""
    if not finding.chain and finding.confidence == "certain":
        return ""
    chain = " -> ".join(str(frame) for frame in finding.chain)
    text = f"per step via {chain}" if chain else "per step"
    return text + (f" ({finding.confidence})" if finding.confidence != "certain" else "")


def _frame(finding: Finding, lines: list[str], style: _Style) -> list[str]:
    number = finding.line
    source = lines[number - 1].rstrip("\r\n").expandtabs(1)
    gutter = " " * len(str(number))
    start = finding.column - 1
    end = finding.end_column - 1 if finding.end_line == finding.line else len(source)
    width = max(1, min(end, len(source)) - start)
    return [
        f"{gutter} |",
        f"{number} | {source}",
        f"{gutter} | {' ' * start}{style('^' * width, '1;31')}",
    ]


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github_command(finding: Finding) -> str:
    level = "error" if finding.severity == "error" else "warning"
    props = ",".join(
        f"{key}={_escape_property(str(value))}"
        for key, value in (
            ("file", finding.path),
            ("line", finding.line),
            ("col", finding.column),
            ("endLine", finding.end_line),
            ("endColumn", finding.end_column),
            ("title", f"{finding.code} {finding.name}"),
        )
    )
    return f"::{level} {props}::{_escape_data(f'{finding.code} {finding.message}')}"


def fingerprint(finding: Finding, occurrence: int = 0) -> str:
    """Stable across line moves: path, code, message and the occurrence index among identical findings."""
    key = f"{finding.path}\0{finding.code}\0{finding.message}\0{occurrence}"
    return hashlib.md5(key.encode("utf-8")).hexdigest()


def _fingerprints(findings: Sequence[Finding]) -> list[str]:
    counts: dict[tuple, int] = {}
    result = []
    for finding in findings:
        key = (finding.path, finding.code, finding.message)
        result.append(fingerprint(finding, counts.get(key, 0)))
        counts[key] = counts.get(key, 0) + 1
    return result


def gitlab(findings: Sequence[Finding]) -> list[dict]:
    return [
        {
            "description": f"{finding.code} {finding.message}",
            "check_name": f"{finding.code} {finding.name}",
            "fingerprint": print_,
            "severity": _GITLAB_SEVERITY.get(finding.severity, "major"),
            "location": {
                "path": finding.path,
                "positions": {
                    "begin": {"line": finding.line, "column": finding.column},
                    "end": {"line": finding.end_line, "column": finding.end_column},
                },
            },
        }
        for finding, print_ in zip(findings, _fingerprints(findings))
    ]


def sarif(findings: Sequence[Finding], rules: dict[str, type[Rule]]) -> dict:
    used = sorted({f.code for f in findings} | set(rules))
    index = {code: i for i, code in enumerate(used)}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpulint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": "https://github.com/gpulint/gpulint",
                        "rules": [_sarif_rule(code, rules.get(code)) for code in used],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [
                    _sarif_result(finding, index[finding.code], print_)
                    for finding, print_ in zip(findings, _fingerprints(findings))
                ],
            }
        ],
    }


def _sarif_rule(code: str, rule: type[Rule] | None) -> dict:
    if rule is None:
        return {"id": code}
    docs = rule.docs
    markdown = (
        f"**What it does**: {docs.what_it_does}\n\n**Why it is slow**: {docs.why_slow}\n\n"
        f"**Use instead**: {docs.use_instead}\n\n[Rule documentation]({rule.url()})"
    )
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.name.replace("-", " ")},
        "fullDescription": {"text": docs.what_it_does},
        "helpUri": rule.url(),
        "help": {"text": f"{docs.what_it_does} {docs.use_instead}", "markdown": markdown},
        "defaultConfiguration": {"level": _SARIF_LEVEL.get(rule.severity, "warning"), "enabled": rule.default_enabled},
        "properties": {"tags": ["performance", rule.family()], "precision": "high"},
    }


def _sarif_result(finding: Finding, rule_index: int, print_: str) -> dict:
    result = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL.get(finding.severity, "warning"),
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": finding.path, "uriBaseId": "%SRCROOT%"},
                    "region": {
                        "startLine": finding.line,
                        "startColumn": finding.column,
                        "endLine": finding.end_line,
                        "endColumn": finding.end_column,
                    },
                }
            }
        ],
        "partialFingerprints": {"gpulint/v1": print_},
        "properties": {"confidence": finding.confidence},
    }
    if finding.chain:
        # The calls from the training entry point to the finding's function, as a thread flow a viewer can step.
        result["codeFlows"] = [{"threadFlows": [{"locations": [
            {
                "location": {
                    "physicalLocation": {
                        "artifactLocation": {"uri": frame.path, "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": frame.line},
                    },
                    "message": {"text": frame.label},
                },
                "nestingLevel": depth,
            }
            for depth, frame in enumerate(finding.chain)
        ]}]}]
    if finding.fix is not None:
        result["fixes"] = [
            {
                "description": {"text": f"{finding.fix.applicability} fix for {finding.code}"},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": finding.path, "uriBaseId": "%SRCROOT%"},
                        "replacements": [
                            {
                                "deletedRegion": {
                                    "startLine": e.line,
                                    "startColumn": e.column,
                                    "endLine": e.end_line,
                                    "endColumn": e.end_column,
                                },
                                "insertedContent": {"text": e.content},
                            }
                            for e in finding.fix.edits
                        ],
                    }
                ],
            }
        ]
    return result
