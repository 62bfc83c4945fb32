"""The linter's layering: which of its modules may import which (read from the source, imports under
TYPE_CHECKING included, so a cycle kept only for type hints counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import gpulint.linter

LINTER = Path(gpulint.linter.__file__).parent


def imported_modules(name: str) -> set[str]:
    tree = ast.parse((LINTER / f"{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_context_and_rule_do_not_import_each_other():
    """`Report` lives in the leaf module reports.py, which context.py stores and rule.py makes."""
    assert "gpulint.linter.rule" not in imported_modules("context")
    assert "gpulint.linter.context" not in imported_modules("reports")


def test_reports_is_a_leaf_at_run_time():
    tree = ast.parse((LINTER / "reports.py").read_text())
    runtime = [
        node for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and (getattr(node, "module", "") or "").startswith("gpulint")
    ]
    assert runtime == [], "reports.py must not import gpulint modules at run time (only under TYPE_CHECKING)"


def test_the_rule_table_is_the_rules():
    """`gpulint check`'s main process picks codes from `codes.RULE_CODES` without importing the rules."""
    from gpulint.linter.codes import RULE_CODES
    from gpulint.linter.rule import all_rules

    assert RULE_CODES == tuple((r.code, r.name, r.default_enabled) for r in all_rules())


def test_the_check_command_imports_no_libcst_until_a_file_is_linted(tmp_path):
    """libcst and the rules cost a fifth of a cold run to import: the main process of `gpulint check` leaves them to
    its workers, which import them while it builds the project model."""
    import subprocess
    import sys

    code = "import sys; import gpulint.linter.command; print(sorted(m for m in sys.modules if m.startswith('libcst')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
