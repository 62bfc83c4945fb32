"""Line and column of the nodes that findings (and their fixes) point at, without regenerating the whole file.

libcst computes positions by regenerating the code of the whole module, which costs more than parsing it. Here only
the smallest piece of code that holds a report is regenerated, on its own, and its positions shifted to where it
really is (Python's `ast` parser, many times faster, says on which line each statement starts):

1. the innermost simple statement (one line of code, possibly continued inside brackets) holding the report and
   its fix, regenerated inside a block with the statement's own indentation;
2. else (a report on the header of an `if`, `for`, `while` or `with`: its test, iterable or items) that statement
   with its body cut to `pass`, regenerated the same way;
3. else the top-level statement, or the member of a top-level class, holding it, regenerated with the class header
   around it so indentation is unchanged;
4. else the whole module.
"""

from __future__ import annotations

import ast
from typing import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from gpulint.linter.rule import Report


def positions_of(
    text: str, module: cst.Module, reports: Sequence[Report], tree: ast.Module | None
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every report's node and fix nodes; `text` is the code `module` was parsed from, `tree` its ast
    (None when ast could not parse it)."""
    if tree is None:
        return _whole(module)
    lines = text.split("\n")
    positions: dict[cst.CSTNode, CodeRange] = {}
    done: set[int] = set()
    for report in reports:
        needed = [report.node, *(part.node for part in report.fix)]
        if all(node in positions for node in needed):
            continue
        for finder in (_in_simple_statement, _in_compound_header, _in_top_level_unit):
            try:
                found = finder(module, tree, lines, report, done)
            except (ValueError, IndexError):  # libcst and ast disagree on a body: take the next way
                found = None
            if found is not None:
                positions.update(found)
                if all(node in positions for node in needed):
                    break
        else:
            return _whole(module)
    return positions


def _whole(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _chain(report: Report) -> tuple[cst.CSTNode, ...]:
    ancestors = report.ancestors
    return ancestors if ancestors and ancestors[-1] is report.node else ancestors + (report.node,)


def _in_simple_statement(module, tree, lines, report, done) -> dict[cst.CSTNode, CodeRange] | None:
    chain = _chain(report)
    path = _statement_path(chain)
    if not path or type(path[-1]) is not cst.SimpleStatementLine:
        return None
    statement = path[-1]
    if id(statement) in done:
        return {}
    return _regenerated(module, tree, lines, path, statement, statement, done)


_HEADED = (cst.If, cst.For, cst.While, cst.With)
_PASS = cst.IndentedBlock(body=(cst.SimpleStatementLine(body=(cst.Pass(),)),))


def _in_compound_header(module, tree, lines, report, done) -> dict[cst.CSTNode, CodeRange] | None:
    path = _statement_path(_chain(report))
    if not path or type(path[-1]) not in _HEADED:
        return None
    statement = path[-1]
    if len(path) > 1 and type(path[-2]) is cst.If and path[-2].orelse is statement:
        return None  # an `elif`: on its own it would print as `if`
    if id(statement) in done:
        return {}
    changes = {"orelse": None} if type(statement) is not cst.With else {}
    header = statement.with_changes(body=_PASS, **changes)
    return _regenerated(module, tree, lines, path, statement, header, done)


def _regenerated(module, tree, lines, path, statement, stand_in, done) -> dict[cst.CSTNode, CodeRange]:
    """Positions of the nodes of `stand_in` (the last statement of `path`, or a copy of it), regenerated alone inside
    a block with the statement's own indentation and shifted to the line it starts on."""
    line = _ast_line(module, tree, path)
    code_line = lines[line - 1]
    indent = code_line[: len(code_line) - len(code_line.lstrip())]
    # Inside a block with the statement's own indentation: libcst indents lines continued inside brackets relative to
    # the block, so only then do all its lines come out exactly as in the file.
    holder = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=(stand_in,), indent=indent)) if indent else stand_in
    alone = MetadataWrapper(module.with_changes(header=(), body=(holder,), footer=()), unsafe_skip_copy=True)
    local = alone.resolve(PositionProvider)
    shift = line - local[stand_in].start.line
    done.add(id(statement))
    return {
        node: CodeRange((span.start.line + shift, span.start.column), (span.end.line + shift, span.end.column))
        for node, span in local.items()
    }


def _statement_path(chain: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
    """The statements of the chain, outermost first, each one directly in a body of the one before."""
    return [node for node in chain if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]


def _ast_line(module: cst.Module, tree: ast.Module, path: Sequence[cst.CSTNode]) -> int:
    """The line where the last statement of `path` starts, found by walking libcst's and ast's bodies side by side."""
    bodies: list[Sequence[cst.CSTNode]] = [module.body]
    ast_bodies: list[list[ast.stmt]] = [tree.body]
    node: ast.stmt | None = None
    for statement in path:
        node = _matching(statement, bodies, ast_bodies)
        bodies, ast_bodies = _bodies(statement), _ast_bodies(node)
    if node is None:
        raise ValueError("empty statement path")
    return node.lineno


def _matching(statement: cst.CSTNode, bodies, ast_bodies) -> ast.stmt:
    for body, ast_body in zip(bodies, ast_bodies):
        index = 0
        for candidate in body:
            if candidate is statement:
                return ast_body[index]
            index += len(candidate.body) if type(candidate) is cst.SimpleStatementLine else 1
    raise ValueError("statement not found in its parent's bodies")


def _bodies(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement lists directly inside a compound statement, in the order `_ast_bodies` gives ast's."""
    if type(statement) is cst.SimpleStatementLine:
        return []
    if isinstance(statement, cst.Match):  # no body of its own: its cases' bodies
        return [_suite(case.body) for case in statement.cases]
    found: list[Sequence[cst.CSTNode]] = [_suite(statement.body)]
    if isinstance(statement, (cst.Try, cst.TryStar)):
        found.extend(_suite(handler.body) for handler in statement.handlers)
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):  # `elif`: ast holds it as a one-statement else body
        found.append((orelse,))
    elif orelse is not None:
        found.append(_suite(orelse.body))
    finalbody = getattr(statement, "finalbody", None)
    if finalbody is not None:
        found.append(_suite(finalbody.body))
    return found


def _ast_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(node, ast.Match):
        return [case.body for case in node.cases]
    found = [node.body] if isinstance(getattr(node, "body", None), list) else []
    if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        found.extend(handler.body for handler in node.handlers)
    if getattr(node, "orelse", None):
        found.append(node.orelse)
    if getattr(node, "finalbody", None):
        found.append(node.finalbody)
    return found


def _suite(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    # `if x: y` on one line holds small statements, never a statement of a report's path.
    return suite.body if isinstance(suite, cst.IndentedBlock) else ()


def _in_top_level_unit(module, tree, lines, report, done) -> dict[cst.CSTNode, CodeRange] | None:
    chain = _chain(report)
    if len(chain) < 2:
        return None
    top = chain[1]
    top_node = _matching(top, [module.body], [tree.body])
    if type(top) is cst.ClassDef and len(chain) > 3 and chain[2] is top.body and isinstance(top_node, ast.ClassDef):
        anchor, line = chain[3], _matching(chain[3], [top.body.body], [top_node.body]).lineno
        pruned = module.with_changes(header=(), body=(top.with_changes(body=top.body.with_changes(body=(anchor,))),), footer=())
    else:
        anchor, line = top, top_node.lineno
        pruned = module.with_changes(header=(), body=(top,), footer=())
    if id(anchor) in done:
        return {}
    done.add(id(anchor))
    local = MetadataWrapper(pruned, unsafe_skip_copy=True).resolve(PositionProvider)
    # Both parsers start a decorated def or class at its keyword, not at `@`.
    shift = line - local[anchor].start.line
    return {
        node: CodeRange((span.start.line + shift, span.start.column), (span.end.line + shift, span.end.column))
        for node, span in local.items()
    }
