"""The planner's modules stand on each other one way, and the plan file has one home."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gpulint"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The gpulint modules a file imports anywhere in it (function-level imports count: they are edges too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpulint"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (full.replace(".", "/") + ".py")).exists()
                out.add(full if is_module else node.module)
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name.startswith("gpulint")}
    return out


def _planner_graph() -> dict[str, set[str]]:
    graph = {}
    for path in (PACKAGE / "planner").glob("*.py"):
        name = _module_name(path)
        graph[name] = {m for m in _imports(path) if m.startswith("gpulint.planner.") and m != name}
    return graph


def test_planner_imports_have_no_cycle():
    graph = _planner_graph()
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph.get(module, ())):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*path, module, dep])
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_planner_imports_neither_the_cli_nor_the_linter_nor_the_bot():
    for path in (PACKAGE / "planner").glob("*.py"):
        bad = {m for m in _imports(path) if m == "gpulint.cli" or m.startswith(("gpulint.linter", "gpulint.bot"))}
        assert not bad, f"{path.name} imports {bad}"


def test_the_plan_file_module_stands_alone():
    """planfile imports only the error types, units.py (a leaf) and the atomic writer, so the bot can read plans
    through it."""
    allowed = {"gpulint.planner.errors", "gpulint.fileio", "gpulint.units"}
    assert _imports(PACKAGE / "planner" / "planfile.py") <= allowed
    assert _imports(PACKAGE / "planner" / "errors.py") <= {"gpulint.errors"}


def test_the_bot_reads_plans_only_through_the_plan_file_module():
    for path in (PACKAGE / "bot").glob("*.py"):
        planner = {m for m in _imports(path) if m.startswith("gpulint.planner")}
        assert planner <= {"gpulint.planner.planfile"}, f"{path.name} imports {planner}"


def test_the_schema_string_is_written_once():
    files = [p for p in PACKAGE.rglob("*.py") if '"gpulint.plan/' in p.read_text()]
    assert files == [PACKAGE / "planner" / "planfile.py"]
