"""Notebooks stored as Python files, read as the scripts they run.

A marimo notebook is a Python file whose cells are functions decorated with `@app.cell`: marimo runs each cell's
body once, in the order of its data flow, as one script (the cell's parameters are the names other cells define,
its `return` hands its own names on). Read as written, every statement would sit inside a function that nothing calls,
and the training loop a notebook runs would be invisible. The *script view* is the same file with each cell's body
moved to the top level: the decorator and `def` lines blanked, the body dedented, the cell's own `return` made an
assignment. Lines keep their numbers; `ScriptView.restore` puts the columns of a finding found in the view back on
the notebook's lines.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, replace

from gpulint.linter.finding import Edit, Finding

# A cell's own `return` as a statement of the same width, so that the columns after it keep their place.
_RETURN, _RETURN_VALUE, _RETURN_NOTHING = "return", "_ =   ", "pass  "


@dataclass(frozen=True)
class ScriptView:
    text: str
    shifts: dict[int, int]  # 1-based line -> the columns taken off its start

    def restore(self, finding: Finding) -> Finding:
        """`finding` (found in the view) on the notebook's own lines and columns. A fix inserting lines is dropped:
        its new lines are indented for the view."""
        fix = finding.fix
        if fix is not None:
            if any("\n" in edit.content for edit in fix.edits):
                fix = None
            else:
                fix = replace(fix, edits=tuple(self._edit(edit) for edit in fix.edits))
        return replace(
            finding, column=finding.column + self.shifts.get(finding.line, 0),
            end_column=finding.end_column + self.shifts.get(finding.end_line, 0), fix=fix,
        )

    def _edit(self, edit: Edit) -> Edit:
        return replace(edit, column=edit.column + self.shifts.get(edit.line, 0),
                       end_column=edit.end_column + self.shifts.get(edit.end_line, 0))


def script_view(text: str) -> ScriptView | None:
    """The script a marimo notebook runs (see the module docstring); None for any other file."""
    if "@app.cell" not in text or "marimo" not in text:
        return None
    tree = _parse(text)
    if tree is None:
        return None
    cells = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and any(map(_is_cell, node.decorator_list))]
    if not cells:
        return None
    lines = text.split("\n")
    shifts: dict[int, int] = {}
    for cell in cells:
        first = cell.body[0]
        if first.lineno == cell.lineno:  # `def _(): return` on one line: nothing to move
            continue
        for number in range(cell.decorator_list[0].lineno, first.lineno):
            lines[number - 1] = ""
        for number in range(first.lineno, (cell.end_lineno or first.lineno) + 1):
            line = lines[number - 1]
            taken = min(len(line) - len(line.lstrip(" \t")), first.col_offset)
            lines[number - 1], shifts[number] = line[taken:], taken
        for statement in cell.body:
            if isinstance(statement, ast.Return):
                _replace_return(lines, statement, shifts[statement.lineno])
    view = "\n".join(lines)
    return ScriptView(view, shifts) if _parse(view) is not None else None


def analysed_text(text: str) -> str:
    """What the project model reads of a file: a notebook's script view, any other file as it is."""
    view = script_view(text)
    return text if view is None else view.text


def _is_cell(decorator: ast.expr) -> bool:
    """`@app.cell` or `@app.cell(hide_code=True)`."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "cell" and isinstance(target.value, ast.Name)


def _replace_return(lines: list[str], statement: ast.Return, shift: int) -> None:
    line, column = lines[statement.lineno - 1], statement.col_offset - shift
    if line[column:column + len(_RETURN)] == _RETURN:
        word = _RETURN_VALUE if statement.value is not None else _RETURN_NOTHING
        lines[statement.lineno - 1] = line[:column] + word + line[column + len(_RETURN):]


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
