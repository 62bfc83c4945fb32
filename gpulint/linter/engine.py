"""Lint one file: decode, pre-filter, parse once, run every enabled rule in one traversal, resolve findings.

The cost of a lint is parsing, so the engine parses as little as it can: a file holding no trigger word of an enabled
rule is not parsed at all, and in the others only the functions some rule needs are (regions.py stands in for the
rest with string literals over the same lines, keeping lines and columns). The hot-path analysis runs only for files
with reports, and positions are computed only for the statements that hold a finding (positions.py).

A syntax error in the code left out is still reported: Python's own parser checks that code (building no tree of
Python objects, a fraction of the cost of parsing it with libcst).
"""

from __future__ import annotations

import ast
import gc
import re
import symtable
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState  # to generate a node with its block's indentation

from gpulint.linter.context import FileContext
from gpulint.linter.devices import DeviceEvidence
from gpulint.linter.finding import Edit, Finding, Fix, one_line
from gpulint.linter.noqa import Suppressions, check_directives
from gpulint.linter.notebooks import script_view
from gpulint.linter.options import LintOptions
from gpulint.linter.positions import positions_of
from gpulint.linter.regions import Cut, prune
from gpulint.linter.rule import InsertBefore, Replace, Report, Rule
from gpulint.linter.source import DecodeError, SourceFile, decode
from gpulint.linter.syntax import child_fields, is_syntax, qualname_of
from gpulint.project import single_file_facts
from gpulint.project.facts import ExecState, FileFacts, state_at
from gpulint.project.local import (
    MODULE_SCOPE, Scope, class_attributes, dotted, holder_at, module_aliases, read_scope, text_step_flags,
)

PARSE_ERROR_CODE, PARSE_ERROR_NAME = "GPL001", "parse-error"


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    source: SourceFile | None = None


@lru_cache(maxsize=64)
def _trigger_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)))


def lint_bytes(
    path: str, data: bytes, rules: Sequence[type[Rule]], options: LintOptions = LintOptions(),
    facts: FileFacts | None = None,
) -> FileResult:
    result = FileResult(path=path)
    try:
        result.source = decode(data)
    except DecodeError as exc:
        result.findings.append(parse_error(path, str(exc), exc.line, 1))
        return result
    result.findings = lint_text(path, result.source.text, rules, options, facts)
    return result


def lint_text(
    path: str,
    text: str,
    rules: Sequence[type[Rule]],
    options: LintOptions = LintOptions(),
    facts: FileFacts | None = None,
) -> list[Finding]:
    """Findings of `rules` on `text`, sorted by line and column. `facts` are the project model's for this file;
    without them the file is modelled alone (its own training loops, or its functions' names). A marimo notebook
    is read as the script it runs (notebooks.py)."""
    view = script_view(text)
    if view is None:
        return _lint_script(path, text, rules, options, facts)
    return [view.restore(f) for f in _lint_script(path, view.text, rules, options, facts)]


def _lint_script(
    path: str, text: str, rules: Sequence[type[Rule]], options: LintOptions, facts: FileFacts | None
) -> list[Finding]:
    suppressions = Suppressions(text=text) if options.ignore_noqa else Suppressions.from_text(text)
    with _collector_paused():
        if facts is None:
            facts = single_file_facts(path, text, options.hot_functions, options.gate_names)
        findings = _lint_text(path, text, rules, options, facts, suppressions)
    return check_directives(path, findings, suppressions, {r.code for r in rules})


@contextmanager
def _collector_paused():
    """Python's cycle collector off while one file is linted. A parse allocates up to a million objects, and every
    700 allocations the collector would run, its passes walking the tree being built again and again. A libcst tree
    holds no cycles (children never point back), and `_lint_parsed` breaks the rules' cycles, so the tree is freed
    by reference counting as soon as the file is done."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _lint_text(
    path: str, text: str, rules: Sequence[type[Rule]], options: LintOptions, facts: FileFacts,
    suppressions: Suppressions,
) -> list[Finding]:
    if facts.problem is not None:  # Python's parser found it while the project was read: no rule can run
        line, column, message = facts.problem
        return [parse_error(path, f"syntax error: {message}", line, column)]
    if _JAX_IMPORT.search(text):  # a JAX program (tevatron's `tevax` trainers): see `Rule.pytorch_only`
        rules = [r for r in rules if not r.pytorch_only]
    active = [r for r in rules if r.triggers]
    words = tuple(w for r in active for w in r.triggers)
    by_facts = [r for r in active if r.runs_for_facts(facts)]
    if not by_facts and (not words or not _trigger_pattern(words).search(text)):
        return _syntax_errors(path, text)
    if not facts.step_code():  # nothing here runs in the training step: the step-only rules stay out
        active = [r for r in active if not r.hot_only]
    active = [r for r in active if r.has_words_in(text) or r in by_facts]
    if not active:
        return _syntax_errors(path, text)
    if _may_nest_too_deep(text):
        # libcst's native parser overflows its stack (a crash, not an exception) on nesting far deeper than Python
        # allows (200 brackets); Python's own parser rejects such files cleanly.
        try:
            error = _grammar_error(path, text)
        except (RecursionError, MemoryError, ValueError):
            return [parse_error(path, "too deeply nested for the parser", 1, 1)]
        if error is not None:
            return [error]
    cut = _pruned(text, active, facts, [r for r in by_facts if r in active]) if options.prune else None
    if cut is not None:
        pruned = "\n".join(cut.kept)
        try:
            module = _parse(pruned)
        except Exception:  # the line-based cut was fooled (e.g. by a string), or the file has an error: parse it whole
            module = None
        if module is not None:
            # (the project model's read of the whole file found no syntax error: the left-out code has none)
            error = None if facts.syntax_checked else _error_in_left_out_code(path, text, "\n".join(cut.left_out))
            return [error] if error else _lint_parsed(path, suppressions, pruned, module, active, options, facts)
    try:
        module = _parse(text)
    except cst.ParserSyntaxError as exc:
        return [_syntax_error(path, text, exc)]
    except RecursionError:
        return [parse_error(path, "too deeply nested for the parser", 1, 1)]
    except Exception as exc:  # the native parser can raise other errors on exotic input
        return [parse_error(path, f"could not parse: {type(exc).__name__}: {exc}", 1, 1)]
    return _lint_parsed(path, suppressions, text, module, active, options, facts)


def _syntax_errors(path: str, text: str) -> list[Finding]:
    """A file no rule reads is still checked for syntax errors ("all checks passed" would be a false promise), by
    Python's symbol-table builder: its parser without a tree of Python objects."""
    error = _error_in_left_out_code(path, text, text)
    return [error] if error else []


def _parse(text: str) -> cst.Module:
    """libcst's parse, without re-validating each node the parser builds.

    Every libcst node checks its fields when it is constructed (`CSTNode.__post_init__` calls `_validate`), which is
    for trees built by hand: the parser's own output is valid by construction (libcst notes the same in a PERF
    comment there). Skipping it saves about a seventh of a parse. Safe here: the engine's process builds no other
    nodes meanwhile (one file at a time, one thread), and the check is restored even when the parse fails."""
    node_class = cst.CSTNode
    validate = node_class.__dict__.get("__post_init__")
    if validate is None:  # a libcst that no longer validates this way: nothing to skip
        return cst.parse_module(text)
    node_class.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        node_class.__post_init__ = validate  # type: ignore[method-assign]


def _no_validation(self: cst.CSTNode) -> None:
    return None


def _error_in_left_out_code(path: str, text: str, left_out: str) -> Finding | None:
    """A syntax error in the code pruning left out, which the parse of the rest could not see.

    Python builds the symbol table of the left-out code (the same lines, the rest blank): that runs Python's parser
    without building a tree of Python objects or compiling, a fraction of the cost of a libcst parse. It also rejects
    code that parses (`nonlocal` at module level): only a grammar error of the whole file is reported, as when the
    whole file is parsed, so an error is confirmed with `ast`.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like: not gpulint's business
            symtable.symtable(left_out, path, "exec")
        return None
    except (ValueError, RecursionError, MemoryError):
        return None
    except SyntaxError:
        pass
    try:
        return _grammar_error(path, text)
    except (ValueError, RecursionError, MemoryError):
        return None


def _grammar_error(path: str, text: str) -> Finding | None:
    """Python's own parser (the grammar alone, no compilation) on the text: its syntax error as a GPL001 finding,
    or None when the text parses. Python words syntax errors better than libcst's grammar engine."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like: not gpulint's business
            compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return parse_error(path, f"syntax error: {exc.msg}", exc.lineno or 1, exc.offset or 1)
    return None


def _lint_parsed(
    path: str, suppressions: Suppressions, parsed_text: str, module: cst.Module, active: Sequence[type[Rule]],
    options: LintOptions, facts: FileFacts,
) -> list[Finding]:
    """Run the rules over a parsed module. `parsed_text` is what was parsed: the file, or its pruned copy (same
    lines and columns), which positions are computed from; `suppressions` were read from the file itself."""
    context = FileContext(path, module, options.gate_names, facts, parsed_text)
    instances = [rule(context) for rule in active]
    try:
        return _run_rules(path, suppressions, parsed_text, module, instances, context, options)
    except Exception as exc:  # noqa: BLE001  (a bug in one rule must not lose the file's other findings)
        failed = _rule_raising(exc, instances)
        if failed is None:
            raise
        where = exc.__traceback__
        while where.tb_next is not None:
            where = where.tb_next
        print(f"gpulint: warning: rule {failed.code} failed on {path} ({type(exc).__name__}: {exc}, at "
              f"{where.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{where.tb_lineno}); the file is checked "
              "without it (please report this)", file=sys.stderr)
        rest = [rule for rule in active if rule is not failed]
        return _lint_parsed(path, suppressions, parsed_text, module, rest, options, facts) if rest else []
    finally:
        # The file's rules, their helpers, its reports and its context point at one another and at its tree. Their
        # state dropped here, the tree is freed at once, not by the cycle collector's next pass over everything
        # allocated meanwhile (a tenth of a lint). Findings are plain data and outlive them.
        for instance in (*instances, *context.shared.values(), context):
            instance.__dict__.clear()


def _rule_raising(exc: BaseException, instances: Sequence[Rule]) -> type[Rule] | None:
    """The rule whose code raised `exc`: the innermost frame of the traceback whose `self` is one of the rules (an
    error in a helper a rule called is that rule's too); None when no rule's frame is in it (the engine's own)."""
    rules = {id(instance): type(instance) for instance in instances}
    found = None
    where = exc.__traceback__
    while where is not None:
        owner = where.tb_frame.f_locals.get("self")
        if owner is not None and id(owner) in rules:
            found = rules[id(owner)]
        where = where.tb_next
    return found


def _run_rules(
    path: str, suppressions: Suppressions, parsed_text: str, module: cst.Module, instances: Sequence[Rule],
    context: FileContext, options: LintOptions,
) -> list[Finding]:
    try:
        _Traversal(context, instances).walk(module)
    except RecursionError:
        return [parse_error(path, "too deeply nested to analyse", 1, 1)]
    if any(type(rule).gpu_only for rule in instances):
        evidence = context.helper(DeviceEvidence)
        if context.facts.cpu_project or not context.facts.device_fed and evidence.cpu_only(context):
            context.reports[:] = [report for report in context.reports if not report.rule.gpu_only]
        elif cpu_classes := evidence.cpu_classes():
            context.reports[:] = [report for report in context.reports
                                  if not (report.rule.gpu_only and cpu_classes.intersection(report.ancestors))]
    reports = _may_apply(context.reports, context.facts)
    if not reports:
        return []
    tree = context.syntax_tree()
    positions = positions_of(parsed_text, module, reports, tree)
    where = _Where(tree, parsed_text, options.gate_names) if tree is not None else None
    kept = []
    for report in reports:
        state = _state_of(report, positions, where, context.facts)
        if _applies(report, state, context.facts):
            kept.append((report, state))
    if not kept:
        return []
    return _resolve(path, suppressions, module, kept, positions, parsed_text.split("\n"))


def _may_apply(reports: Sequence[Report], facts: FileFacts) -> list[Report]:
    """The reports that can be findings, judged by their function alone, before anything is placed: a per-step
    report needs a function the step runs (or a step loop in it), a training report one the program runs (when the
    project has entry points), and neither counts in a project that never trains (`FileFacts.inference_only`).
    Placing a report costs a regeneration of its statement."""
    if facts.inference_only:  # a project that samples or evaluates and never trains: nothing runs per training step
        return [report for report in reports if report.when == "always"]
    step, program = facts.step_code(), facts.program_code()
    kept = []
    for report in reports:
        if report.when == "always":
            kept.append(report)
            continue
        function = _qualname_of(report)
        if report.when == "per_step":
            if function in step:
                kept.append(report)
        elif function in program or not facts.entries:
            kept.append(report)
    return kept


def _qualname_of(report: Report) -> str:
    """The qualified name of the function (or class body, or the module) a report is in, as the model names it."""
    return qualname_of(report.ancestors) or MODULE_SCOPE


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_ENVIRONMENT_READS = frozenset({"os.environ", "os.getenv", "os.environ.get", "environ", "getenv"})


def _reads_environment(test: ast.AST) -> bool:
    """`os.environ.get("CHECK_NAN")`, `"DEBUG" in os.environ`, `os.getenv("X") == "1"`."""
    return any(isinstance(n, (ast.Attribute, ast.Name)) and dotted(n) in _ENVIRONMENT_READS for n in ast.walk(test))


def _extends(definition: ast.stmt, name: str) -> bool:
    """`@lr.setter def lr(...)`, `@fn.register`: a later definition that adds to the earlier one of its name."""
    return any(name in {n.id for n in ast.walk(d) if isinstance(n, ast.Name)}
               for d in getattr(definition, "decorator_list", ()))


class _Where:
    """The scopes of the parsed text that hold reports, each read once (local.read_scope), and positions in ast's
    columns."""

    def __init__(self, tree: ast.Module, text: str, gate_names: Sequence[str]) -> None:
        self.tree = tree
        self.lines = text.split("\n")
        self.gates = tuple(gate_names)
        self.aliases = module_aliases(tree)
        self.flags = text_step_flags(text)
        self.scopes: dict[int, Scope] = {}
        self.holders: dict[tuple[int, int], tuple[ast.AST, list[ast.AST]]] = {}  # by position: `_holder`
        self.options: dict[int, tuple[dict[str, str], frozenset[str]]] = {}  # by class node: `_class_facts`

    def position(self, line: int, column: int) -> tuple[int, int]:
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        # ast counts columns in UTF-8 bytes, libcst in characters.
        return line, column if text.isascii() else len(text[:column].encode("utf-8"))

    def _holder(self, pos: tuple[int, int]) -> tuple[ast.AST, list[ast.AST]]:
        """The innermost definition holding `pos`, and those it is nested in (`holder_at`), found once per position:
        `scope` and `replaced` both ask."""
        found = self.holders.get(pos)
        if found is None:
            found = self.holders[pos] = holder_at(self.tree, pos)
        return found

    def scope(self, pos: tuple[int, int]) -> Scope:
        node, parents = self._holder(pos)
        if id(node) not in self.scopes:
            options, resets = self._class_facts(parents)
            self.scopes[id(node)] = read_scope(node, parents, self.gates, self.aliases, self.flags, options, resets)
        return self.scopes[id(node)]

    def _nesting(self, pos: tuple[int, int]) -> list[tuple[ast.AST, ast.AST]]:
        """(outer, inner) for each definition holding `pos` and the body it is defined in, outermost first."""
        node, parents = self._holder(pos)
        chain = [self.tree, *parents, node] if node is not self.tree else []
        return list(zip(chain, chain[1:]))

    def replaced(self, pos: tuple[int, int]) -> str:
        """The name of the definition holding `pos` (or of one it is nested in) when the same body defines that name
        again further down (co-tracker's first `def bilinear_sampler`): it never runs. "" otherwise."""
        for outer, inner in self._nesting(pos):
            name = inner.name  # type: ignore[attr-defined]
            if any(isinstance(s, _DEFINITIONS) and s.name == name and s.lineno > inner.lineno
                   and not _extends(s, name) for s in outer.body):  # type: ignore[attr-defined]
                return name
        return ""

    def opt_in_variant(self, pos: tuple[int, int]) -> str:
        """The name of the definition holding `pos` when it is the variant an `if` on the environment defines, and the
        `else` defines the default one (minimal-llama's `if os.environ.get("CHECK_NAN"): def check_nan(x): ...` with
        a `def check_nan(x): pass` below): it runs only when the variable is set. "" otherwise."""
        for outer, inner in self._nesting(pos):
            for statement in getattr(outer, "body", ()):
                if isinstance(statement, ast.If) and any(s is inner for s in statement.body) \
                        and _reads_environment(statement.test) \
                        and any(isinstance(s, _DEFINITIONS) and s.name == inner.name for s in statement.orelse):
                    return inner.name  # type: ignore[attr-defined]
        return ""

    def _class_facts(self, parents: list[ast.AST]) -> tuple[dict[str, str], frozenset[str]]:
        """The enclosing class's attributes set once to a configuration option, and those it empties again after
        filling them (local.class_attributes)."""
        cls = next((p for p in reversed(parents) if isinstance(p, ast.ClassDef)), None)
        if cls is None:
            return {}, frozenset()
        if id(cls) not in self.options:
            text = "\n".join(self.lines[cls.lineno - 1:cls.end_lineno or cls.lineno])
            self.options[id(cls)] = class_attributes(text)
        return self.options[id(cls)]


def _state_of(report: Report, positions, where: _Where | None, facts: FileFacts) -> ExecState:
    """How often the reported node runs (the project model's facts and the regions around the node)."""
    if where is None:
        return ExecState(False, False, False, "not analysed", reached=False)
    start = positions[report.node].start
    pos = where.position(start.line, start.column)
    scope = where.scope(pos)
    replaced = where.replaced(pos)
    if replaced:  # the model knows a name by its last definition: an earlier one's code never runs
        return ExecState(False, False, True, f"in a `{replaced}` defined again below, which replaces it",
                         reached=False)
    variant = where.opt_in_variant(pos)
    if variant:
        return ExecState(False, False, True, f"in the `{variant}` defined only when an environment variable is set "
                         "(a debugging switch, off by default)", reached=False)
    return state_at(scope, pos, facts.functions.get(scope.qualname), facts)


# A training script that calls backward and never names a device is CPU-only (`Rule.gpu_only` rules stay silent there),
# so where the file calls backward every function that names a device is kept for devices.py to see.
_BACKWARD_CALL = re.compile(r"backward\s*\(")
_DEVICE_WORDS = re.compile(
    r"cuda|device|gpu|accelerat|fabric|lightning|distributed|rank|xla|mps|xpu|npu|pin_memory|non_blocking"
)


def _starts_word(pattern: re.Pattern[str], text: str) -> bool:
    """Does `pattern` match `text` where a word starts (not inside `platform` or `my_forward(`)?"""
    match = pattern.search(text)
    while match is not None:
        start = match.start()
        if start == 0 or not _is_word_char(text[start - 1]):
            return True
        match = pattern.search(text, start + 1)
    return False


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _calls_backward(text: str) -> bool:
    """`loss.backward(`, `accelerator.backward(`, as the GPL4 rules see a backward call; not "backward
    compatibility" or `manual_backward(`."""
    return _starts_word(_BACKWARD_CALL, text)


def _pruned(
    text: str, active: Sequence[type[Rule]], facts: FileFacts, by_facts: Sequence[type[Rule]] = (),
) -> Cut | None:
    """The file cut into the functions some active rule needs and the rest (see regions.py), or None to parse it
    whole.

    A step-only rule (`hot_only`) needs the functions the project model says run in the step; any other rule needs
    the functions it may report in (`Rule.may_report_in`); every rule needs those holding its `facts`. `by_facts`:
    the active rules the project model's facts keep (`Rule.runs_for_facts`), asked `Rule.may_report_for_facts` too."""
    # Where the project has entry points, a rule looks only at what the training program runs (its findings
    # elsewhere are dropped), except a rule with findings real wherever they are.
    anywhere = [r for r in active if r.reports_anywhere or (not r.hot_only and not facts.entries)]
    in_program = [r for r in active if not r.hot_only and r not in anywhere]
    fact_words = tuple(w for r in active for w in r.facts)
    facts_pattern = _trigger_pattern(fact_words) if fact_words else None
    devices = _DEVICE_WORDS if any(r.gpu_only for r in active) and _calls_backward(text) else None
    in_step, program = facts.step_code(), facts.program_code()

    def holds(names: frozenset[str], qualname: str) -> bool:
        prefix = qualname + "."
        return any(name == qualname or name.startswith(prefix) for name in names)

    def needs(code: str, name: str, class_name: str) -> bool:
        qualname = f"{class_name}.{name}" if class_name else name
        return bool(
            any(r.may_report_in(code, name, class_name) for r in anywhere)
            or (in_program and holds(program, qualname) and any(r.may_report_in(code, name, class_name) for r in in_program))
            or (facts_pattern is not None and facts_pattern.search(code))
            or (devices is not None and devices.search(code))
            or any(r.may_report_for_facts(code, facts) for r in by_facts)
        )

    def hot(qualname: str) -> bool:  # also for rules that run anywhere: some report only what runs every step
        return holds(in_step, qualname)

    linked = {
        name for r in active for keyword in r.linked_by if keyword in text
        for name in re.findall(rf"\b{re.escape(keyword)}\s*=\s*(?:self\.|cls\.)?(\w+)", text)
    }
    return prune(text, needs, hot, linked)


_MAX_PYTHON_NESTING = 200
# A module importing JAX or Flax at its top level.
_JAX_IMPORT = re.compile(r"^(?:import|from)[ \t]+(?:jax|flax)\b", re.MULTILINE)
_NOT_BRACKETS = re.compile(r"[^()\[\]{}]+")
_NESTING_BLOCK = 4096


def _may_nest_too_deep(text: str) -> bool:
    """A cheap over-estimate of bracket depth (brackets in strings count too). Counted a block of text at a time:
    inside a block the depth is at most the depth before it plus the block's opening brackets, so only a block that
    could go too deep is looked at bracket by bracket."""
    depth = 0
    for start in range(0, len(text), _NESTING_BLOCK):
        block = text[start:start + _NESTING_BLOCK]
        opening = block.count("(") + block.count("[") + block.count("{")
        if depth + opening <= _MAX_PYTHON_NESTING:
            depth += opening - block.count(")") - block.count("]") - block.count("}")
            continue
        for char in _NOT_BRACKETS.sub("", block):
            depth += 1 if char in "([{" else -1
            if depth > _MAX_PYTHON_NESTING:
                return True
    return False


def _syntax_error(path: str, text: str, exc: cst.ParserSyntaxError) -> Finding:
    """Python's own parser words syntax errors better than libcst's grammar engine; ask it (only on failure)."""
    try:
        error = _grammar_error(path, text)
    except (ValueError, RecursionError, MemoryError):
        error = None
    if error is not None:
        return error
    # Python accepts the file but libcst's grammar does not (e.g. tens of thousands of implicitly joined strings).
    first_line = exc.message.splitlines()[0] if exc.message else "invalid syntax"
    return parse_error(path, f"libcst cannot parse this file (Python can): {first_line}", exc.raw_line, exc.raw_column + 1)


def parse_error(path: str, message: str, line: int, column: int) -> Finding:
    from gpulint.linter.rule import rules_by_code

    rule = rules_by_code().get(PARSE_ERROR_CODE)
    return Finding(
        code=PARSE_ERROR_CODE,
        name=PARSE_ERROR_NAME,
        message=f"{message}; gpulint could not check this file",
        severity="error",
        path=path,
        line=max(line, 1),
        column=max(column, 1),
        end_line=max(line, 1),
        end_column=max(column, 1),
        url=rule.url() if rule else "",
    )


def _applies(report: Report, state: ExecState, facts: FileFacts) -> bool:
    if report.when == "always":
        return True
    if report.when == "per_step":
        return state.per_step
    if report.when == "repeated":
        return not state.cold and not state.gated and (state.hot or not facts.entries)
    # "training": code the training program runs, not only on some steps (a gate here or in a caller), setup
    # included (a trainer's `__init__` building its loader); with no entry point in sight, anything not cold.
    return (not state.cold or state.setup) and not state.gated and (state.reached or not facts.entries)


def _resolve(
    path: str, suppressions: Suppressions, module: cst.Module, reports: list[tuple[Report, ExecState]], positions,
    lines: list[str],
) -> list[Finding]:
    findings: dict[tuple, Finding] = {}
    for report, state in reports:
        span = positions[report.node]
        line, column = span.start.line, span.start.column + 1
        end_line, end_column = span.end.line, span.end.column + 1
        if suppressions.suppressed(report.rule.code, line, end_line):
            continue
        finding = Finding(
            code=report.rule.code,
            name=report.rule.name,
            message=one_line(report.message + _opt_in(state)),
            severity=report.rule.severity,
            path=path,
            line=line,
            column=column,
            end_line=end_line,
            end_column=end_column,
            fix=_fix_of(report, module, positions, lines),
            url=report.rule.url(),
            confidence=state.confidence,
            chain=state.chain,
        )
        # Two visits of the same node by one rule give one finding.
        findings.setdefault((finding.code, line, column, end_line, end_column), finding)
    return sorted(_one_finding_per_node(list(findings.values())), key=Finding.sort_key)


def _one_finding_per_node(findings: list[Finding]) -> list[Finding]:
    """A GPL4xx sync inside another family's finding gives way to it: the `.item()` of `meter.update(loss.item())`,
    the reads inside a per-metric logging loop, the `.cuda()` of a tensor GPL504 says to create on the device. GPL4 is
    the general family; the others explain the same cost more precisely. (Two families on exactly the same node are
    both kept: the labelled corpus names either family there, and each diagnosis has its own fix.)"""
    others = [f for f in findings if not f.code.startswith("GPL4")]
    if not others:
        return findings

    def inside(inner: Finding, outer: Finding) -> bool:
        starts_after = (outer.line, outer.column) <= (inner.line, inner.column)
        ends_before = (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)
        return starts_after and ends_before and (inner.line, inner.column, inner.end_line, inner.end_column) != (
            outer.line, outer.column, outer.end_line, outer.end_column)

    return [f for f in findings if not (f.code.startswith("GPL4") and any(inside(f, o) for o in others))]


def _opt_in(state: ExecState) -> str:
    """The configuration switches a finding needs on (`if args.log_norms:`): said in the message, so that a reader
    knows the cost is there only when they are set."""
    if not state.flags:
        return ""
    names = ", ".join(f"`{flag}`" for flag in state.flags)
    off = ", ".join(f"`{flag}`" for flag in state.off_flags)
    unset = f"; no shipped setting turns {off} on" if off else ""
    return f" (when {names} {'is' if len(state.flags) == 1 else 'are'} on{unset})"


def _fix_of(report: Report, module: cst.Module, positions, lines: list[str]) -> Fix | None:
    if not report.fix:
        return None
    edits = []
    for part in report.fix:
        span = positions[part.node]
        if isinstance(part, Replace):
            content = part.new if isinstance(part.new, str) else _code_in_place(module, part.new, lines, span.start.line)
            edits.append(Edit(span.start.line, span.start.column + 1, span.end.line, span.end.column + 1, content))
        elif isinstance(part, InsertBefore):
            indent = " " * span.start.column
            edits.append(
                Edit(span.start.line, span.start.column + 1, span.start.line, span.start.column + 1, f"{part.text}\n{indent}")
            )
    return Fix("unsafe" if report.unsafe_fix else "safe", tuple(edits))


def _code_in_place(module: cst.Module, node: cst.CSTNode, lines: list[str], line: int) -> str:
    """The code of a replacement node as it reads where it goes: the lines it continues inside brackets are indented
    by its statement's block (libcst's `code_for_node` alone drops that indentation)."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = [text[: len(text) - len(text.lstrip())]]
    node._codegen(state)
    return "".join(state.tokens)


class _Traversal:
    """Calls every rule's visit_/leave_ methods for each node, in one walk of the tree.

    The walk goes over the syntax nodes in source order (syntax.py): about three times faster than libcst's own
    visitor machinery, which also dispatches per attribute and rebuilds the nodes it passes.
    """

    def __init__(self, context: FileContext, rules: Sequence[Rule]) -> None:
        self.context = context
        self.visits: dict[type, list[Callable]] = {}
        self.leaves: dict[type, list[Callable]] = {}
        # The rules' shared helpers first: each node updates them once, before any rule looks.
        kinds = [k for rule in rules for k in type(rule).shared]
        if any(type(rule).gpu_only for rule in rules):
            kinds.insert(0, DeviceEvidence)  # the engine asks it whether the file runs on the CPU (`_run_rules`)
        helpers = [context.helper(kind) for kind in dict.fromkeys(kinds)]
        for rule in [*helpers, *rules]:
            for node_type, method_name in _handlers(type(rule), "visit_"):
                self.visits.setdefault(node_type, []).append(getattr(rule, method_name))
            for node_type, method_name in _handlers(type(rule), "leave_"):
                self.leaves.setdefault(node_type, []).append(getattr(rule, method_name))

    def walk(self, node: cst.CSTNode) -> None:
        context, visits, leaves = self.context, self.visits, self.leaves
        kind = type(node)
        context.enter(node)
        for handler in visits.get(kind, ()):
            handler(node)
        for name in child_fields(kind):
            value = getattr(node, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for child in value:
                    if is_syntax(type(child)):
                        self.walk(child)
            elif is_syntax(value_kind) and value_kind is not cst.Annotation:
                # An annotation names types: `-> Tuple[Tensor, Mask]` indexes no tensor, `x: List[int]` reads none.
                self.walk(value)
        for handler in leaves.get(kind, ()):
            handler(node)
        context.leave(node)


@lru_cache(maxsize=None)
def _handlers(rule_class: type, prefix: str) -> tuple[tuple[type, str], ...]:
    found = []
    for attribute in dir(rule_class):
        if attribute.startswith(prefix):
            node_type = getattr(cst, attribute[len(prefix):], None)
            if not isinstance(node_type, type) or not issubclass(node_type, cst.CSTNode):
                raise TypeError(f"{rule_class.__name__}.{attribute}: libcst has no node type {attribute[len(prefix):]}")
            found.append((node_type, attribute))
    return tuple(found)
