"""GPL0xx: the engine's own findings (a file gpulint could not check)."""

from __future__ import annotations

from gpulint.linter.rule import Invalid, Rule, RuleDocs


class ParseError(Rule):
    """Reported by the engine itself (it has no trigger words and visits nothing)."""

    code = "GPL001"
    name = "parse-error"
    message = "gpulint could not parse this file"
    severity = "error"
    triggers = ()
    docs = RuleDocs(
        what_it_does="Reports a file gpulint could not check: a syntax error (including Python 2 code), bytes that do "
        "not decode in the file's declared encoding, a NUL byte, or nesting too deep for the parser.",
        why_slow="Not a performance finding: a file that does not parse is a file no other rule has looked at, so a "
        "clean report would be a false promise.",
        example="def train_step(batch:\n    ...",
        use_instead="Fix the syntax error, or exclude generated files with `exclude` in `[tool.gpulint]`.",
        false_positives="Files written for another Python version (gpulint parses the grammar of Python 3.0-3.12 that "
        "libcst supports).",
    )
    valid = ("x = 1\n",)
    invalid = (Invalid("def train_step(batch:\n    return batch.item()\n"),)


class IoError(Rule):
    """Reported by the runner for a path it could not read (permissions, a broken symlink, a vanished file)."""

    code = "GPL002"
    name = "io-error"
    message = "cannot read file"
    severity = "error"
    triggers = ()
    docs = RuleDocs(
        what_it_does="Reports a path gpulint was asked to check but could not read: no permission, a broken symbolic "
        "link, a file that vanished during the run.",
        why_slow="Not a performance finding: an unread file is an unchecked file, and saying so is better than a silent "
        "pass.",
        example="gpulint check missing.py",
        use_instead="Fix the path or its permissions, or exclude it.",
        false_positives="None known.",
    )
    valid = ("x = 1\n",)
    invalid = ()


class UnusedNoqa(Rule):
    """Reported by the engine, which reads the `# noqa` directives (gpulint/linter/noqa.py)."""

    code = "GPL003"
    name = "unused-noqa"
    message = "`noqa` directive suppresses nothing"
    triggers = ()
    fixable = True
    docs = RuleDocs(
        what_it_does="Reports a `# noqa` directive that lists a GPL code naming no rule (`# noqa: GPL999`, often a "
        "typo), or a GPL code that suppressed no finding in this run (the code it silenced was fixed or moved).",
        why_slow="Not a performance finding: a stale suppression hides the next real finding on its line, and a "
        "mistyped one suppresses nothing while looking as if it did.",
        example="value = loss.item()  # noqa: GPL999",
        use_instead="value = loss.item()  # noqa: GPL401",
        fix_safety="Safe: the fix removes only the codes reported (the whole comment when none is left; an explanation "
        "after it goes too). Codes of other tools (`E501`) and a bare `# noqa` are never touched.",
        false_positives="A code is judged unused only when every rule it names ran on the file: a code of a rule turned "
        "off by `select`, `ignore` or `per-file-ignores` is left alone, as are GPL0xx codes. With `--ignore-noqa` "
        "nothing is reported.",
    )
    valid = (
        "x = 1  # noqa: E501\n",
        "import torch\n\ndef train(model, loader, opt, device=\"cuda\"):\n    for batch in loader:\n        loss = model(batch)\n"
        "        loss.backward()\n        opt.step()\n        value = loss.item()  # noqa: GPL401\n",
    )
    invalid = (
        Invalid("x = 1  # noqa: GPL999\n", fixed="x = 1\n"),
        Invalid("x = 1  # noqa: E501, GPL999\n", fixed="x = 1  # noqa: E501\n"),
    )
