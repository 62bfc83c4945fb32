"""`gpulint plan ... --patch`: a unified diff that applies the plan to the user's training script.

The diff adds the imports it needs and one line right after the statement that builds the model, with a
comment above it saying where the plan came from. `--patch-mode eager` (the default) installs selective
activation checkpointing in place:

    gpulint.apply(model, Path(__file__).parent / "gpulint-plan.json")

and `--patch-mode compile` compiles the model with the planner's torch.compile backend, whose partitioner
saves exactly the planned activations:

    model = torch.compile(model, backend=gpulint_backend(Path(__file__).parent / "gpulint-plan.json"))
 The plan file's path is written relative to the
script, so the script finds it from any working directory. It is generated with libcst, so the rest of the
file (formatting, comments) is untouched, and its paths are relative to the repository root so that
`git apply` works there.

The script is `--script PATH`, or else the .py file near the config that calls the config's model factory
and runs a backward pass. The model is the variable assigned from a call to that factory or, failing that,
the one whose `.parameters()` the optimizer gets.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from gpulint.planner import planfile
from gpulint.planner.errors import PlanError

DEFAULT_PLAN_NAME = "gpulint-plan.json"
MODES = ("eager", "compile")


class PatchError(PlanError):
    """The script cannot be patched (not found, does not parse, no model to find); one line naming it."""


# --- CLI hooks (called by gpulint/planner/cli.py) ----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--patch",
        action="store_true",
        help="print a unified diff (for `git apply`) that applies the plan to the training script (with --out, "
        "also written to DIR/plan.diff)",
    )
    parser.add_argument(
        "--script",
        metavar="PATH",
        help="the training script to patch (default: the script near the config that calls the model factory)",
    )
    parser.add_argument(
        "--patch-mode",
        choices=MODES,
        default="eager",
        help="how the patch applies the plan: eager (gpulint.apply, selective checkpointing; default) or "
        "compile (torch.compile with the gpulint backend)",
    )


def run_patch(args: argparse.Namespace, plan: planfile.Plan) -> None:
    """Write the plan file the patch points to, then print the diff (the report follows it on stdout)."""
    from gpulint.planner.config import load_plan_config

    config = load_plan_config(args.config)
    mode = getattr(args, "patch_mode", "eager") or "eager"
    if mode == "compile":
        from gpulint.planner.backend import refuse_data_dependent

        refuse_data_dependent(plan)  # before anything is written
    factory = config.model.rpartition(":")[2]
    script = Path(args.script) if args.script else find_script(config.base_dir, factory)
    plan_path = Path(args.out) / "plan.json" if args.out else config.base_dir / DEFAULT_PLAN_NAME
    note = f"gpulint plan {args.config}" + (f" --budget {args.budget}" if args.budget else "")
    diff = make_patch(script, plan_path, factory=factory, regenerate=note, mode=mode)
    planfile.save(plan, plan_path)
    if args.out:  # for `gpulint bot comment --plan-patch`: the diff alone, without the report that follows it
        from gpulint.fileio import atomic_write

        atomic_write(Path(args.out) / "plan.diff", diff)
    print(diff, end="")
    eager = plan.eager
    if mode == "compile" or eager is None:
        return
    from gpulint.planner.report import unit
    from gpulint.units import format_bytes

    shown = unit(plan)
    if eager.decisions is not None and eager.fits_budget:
        print(
            f"gpulint: note: in eager mode gpulint.apply uses the plan's eager decisions (planned for "
            f"{format_bytes(eager.planned_for_bytes, shown)}): checkpointed layers keep their inputs and recompute "
            f"whole, and so the eager step peaks at {format_bytes(eager.peak_bytes, shown)}, within the budget",
            file=sys.stderr,
        )
    elif not eager.fits_budget:
        # Only a form that fits is ever recommended.
        instead = ("the compiled form fits: `--patch-mode compile`" if plan.feasible else
                   "no form fits: raise the budget")
        print(
            f"gpulint: note: no plan holds the budget in eager mode: the patched step peaks at "
            f"{format_bytes(eager.peak_bytes, shown)}; {instead}",
            file=sys.stderr,
        )


# --- locating the script ------------------------------------------------------------------------------------------


def find_script(base_dir: Path, factory: str) -> Path:
    """The training script: a .py file in the config's folder (or below) that calls `factory` and backward()."""
    candidates = []
    for path in sorted(Path(base_dir).rglob("*.py")):
        if any(part.startswith(".") or part in ("venv", "site-packages") for part in path.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if f"{factory}(" in text and ".backward(" in text:
            candidates.append(path)
    if not candidates:
        raise PatchError(
            f"--patch: no script under {base_dir} calls {factory}() and .backward(); name it with --script PATH"
        )
    return candidates[0]


# --- finding the model and building the new module ---------------------------------------------------------------


@dataclass
class _Target:
    statement: cst.SimpleStatementLine  # the statement that builds the model
    name: str  # the variable holding the model


def _called_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


class _Finder(cst.CSTVisitor):
    """Records assignments `x = ...factory(...)...` and the `x` of `x.parameters()` calls (x: a name or
    an attribute chain such as `self.model`)."""

    def __init__(self, factory: str | None) -> None:
        self.factory = factory
        self.by_factory: list[_Target] = []
        self.first_assignment: dict[str, cst.SimpleStatementLine] = {}
        self.parameter_owners: list[str] = []
        self.applied = False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        for small in node.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = _dotted(small.targets[0].target)
                if target is not None:
                    self.first_assignment.setdefault(target, node)
                    if self.factory and _calls(small.value, self.factory):
                        self.by_factory.append(_Target(node, target))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            self.applied = self.applied or (func.value.value, func.attr.value) == ("gpulint", "apply")
        self.applied = self.applied or _called_name(node) == "gpulint_backend"
        if _called_name(node) == "parameters" and isinstance(func, cst.Attribute):
            owner = _dotted(func.value)
            if owner is not None:
                self.parameter_owners.append(owner)


def _dotted(expression: cst.BaseExpression) -> str | None:
    """`model` or `self.model` as text; None for anything else (subscripts, calls)."""
    if isinstance(expression, cst.Name):
        return expression.value
    if isinstance(expression, cst.Attribute):
        base = _dotted(expression.value)
        return None if base is None else f"{base}.{expression.attr.value}"
    return None


def _calls(expression: cst.BaseExpression, name: str) -> bool:
    found = False

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found = found or _called_name(node) == name

    expression.visit(Visitor())
    return found


def _find_target(module: cst.Module, factory: str | None, script: Path) -> _Target:
    finder = _Finder(factory)
    module.visit(finder)
    if finder.applied:
        raise PatchError(
            f"--patch: {script} already applies a plan (gpulint.apply or gpulint_backend); edit the plan path there"
        )
    if finder.by_factory:
        return finder.by_factory[0]
    for owner in finder.parameter_owners:
        if owner in finder.first_assignment:
            return _Target(finder.first_assignment[owner], owner)
    wanted = f"a call to {factory}() or " if factory else ""
    raise PatchError(f"--patch: cannot find where {script} builds the model ({wanted}`x.parameters()`); use --script")


class _Inserter(cst.CSTTransformer):
    """Adds the imports at the top and the apply line right after the statement that builds the model."""

    def __init__(self, target: _Target, apply_line: cst.SimpleStatementLine, imports: list[cst.SimpleStatementLine]):
        self.target = target
        self.apply_line = apply_line
        self.imports = imports
        self.inserted = False

    def _after_target(self, original: list[Any], updated: list[Any]) -> list[Any]:
        out = []
        for before, after in zip(original, updated):
            out.append(after)
            if before is self.target.statement:
                out.append(self.apply_line)
                self.inserted = True
        return out

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self._after_target(list(original.body), list(updated.body)))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = self._after_target(list(original.body), list(updated.body))
        at = _import_position(body)
        return updated.with_changes(body=body[:at] + self.imports + body[at:])


def _import_position(body: list[Any]) -> int:
    """After the module's leading docstring and imports (top-level only)."""
    at = 0
    for i, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        small = statement.body[0]
        is_docstring = i == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)
        if is_docstring or isinstance(small, (cst.Import, cst.ImportFrom)):
            at = i + 1
        else:
            break
    return at


def _has_import(module: cst.Module, code: str) -> bool:
    return any(
        isinstance(statement, cst.SimpleStatementLine) and module.code_for_node(statement).strip() == code
        for statement in module.body
    )


def _imports_path(module: cst.Module) -> bool:
    """Does the module bind the name `Path` from pathlib at top level?"""
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            from_pathlib = (
                isinstance(small, cst.ImportFrom)
                and isinstance(small.module, cst.Name)
                and small.module.value == "pathlib"
                and not isinstance(small.names, cst.ImportStar)
            )
            if from_pathlib and any(a.evaluated_name == "Path" and a.asname is None for a in small.names):
                return True
    return False


def _apply_code(mode: str, model: str, plan_file: str) -> str:
    """The one line that applies the plan to `model` (a name or `self.x`), reading the plan from `plan_file`."""
    if mode == "compile":
        return f"{model} = torch.compile({model}, backend=gpulint_backend({plan_file}))\n"
    return f"gpulint.apply({model}, {plan_file})\n"


def _needed_imports(module: cst.Module, mode: str) -> list[cst.SimpleStatementLine]:
    wanted = ["import torch", "from gpulint.planner import gpulint_backend"] if mode == "compile" else ["import gpulint"]
    imports = [cst.parse_statement(code + "\n") for code in wanted if not _has_import(module, code)]
    if not _imports_path(module):
        imports.append(cst.parse_statement("from pathlib import Path\n"))
    return imports


def patched_source(source: str, script: Path, plan_path: Path, *, factory: str | None, regenerate: str,
                   mode: str = "eager") -> str:
    """The script's source with the plan applied (imports + one line); raises PatchError."""
    if mode not in MODES:
        raise PatchError(f"--patch-mode: {mode!r} is not one of {', '.join(MODES)}")
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise PatchError(f"--patch: {script}:{exc.raw_line}: does not parse ({exc.message})") from None
    target = _find_target(module, factory, script)
    relative = Path(os.path.relpath(Path(plan_path).resolve(), Path(script).resolve().parent)).as_posix()
    plan_file = f"Path(__file__).parent / {json.dumps(relative)}"
    apply_line = cst.parse_statement(_apply_code(mode, target.name, plan_file))
    apply_line = apply_line.with_changes(
        leading_lines=[cst.EmptyLine(comment=cst.Comment(f"# gpulint: activation recompute plan ({regenerate})"))]
    )
    imports = _needed_imports(module, mode)
    inserter = _Inserter(target, apply_line, imports)
    new = module.visit(inserter)
    if not inserter.inserted:
        raise PatchError(f"--patch: {script}: the model is built inside an expression gpulint cannot extend")
    return new.code


# --- the diff -----------------------------------------------------------------------------------------------------


def repository_root(path: Path) -> Path:
    """The nearest folder above `path` with a .git entry, else the current directory."""
    for folder in [Path(path).resolve().parent, *Path(path).resolve().parents]:
        if (folder / ".git").exists():
            return folder
    return Path.cwd()


def unified_diff(before: str, after: str, name: str) -> str:
    """A git-style unified diff of one file; handles a missing newline at the end of the file."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    out = [f"diff --git a/{name} b/{name}\n"]
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def make_patch(
    script: Path | str, plan_path: Path | str, *, factory: str | None = None, regenerate: str = "gpulint plan",
    mode: str = "eager",
) -> str:
    """The unified diff that makes `script` apply the plan at `plan_path` (paths relative to the repo root)."""
    script = Path(script)
    try:
        source = script.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchError(f"--script: {script} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PatchError(f"--script: cannot read {script} ({exc})") from None
    after = patched_source(source, script, Path(plan_path), factory=factory, regenerate=regenerate, mode=mode)
    name = Path(os.path.relpath(script.resolve(), repository_root(script))).as_posix()
    return unified_diff(source, after, name)
