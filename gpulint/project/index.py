"""Every Python file of the project, outlined cheaply; each definition analysed only when the model reaches it.

Reading every file with `ast` costs about half a cold lint (ast builds an object per node), so a file is read in
two parts:

- its *outline*, for every file: the line-based definitions of gpulint/linter/regions.py (top-level functions and
  classes, and the members of top-level classes), and a *skeleton*, the file with every definition stood in for by
  a string literal over its lines, parsed with `ast` and analysed (local.py). The skeleton holds what runs at import
  and in a script's main body: imports, class headers and their bases, module-level loops and calls;
- each definition's own analysis, made when the model first needs it (a function that no training code reaches is
  never analysed). A member of a class is parsed inside a stand-in class of the same name, after blank lines, so
  its lines and qualified names are the file's own.

Module names follow the folders: `pkg/sub/mod.py` is `pkg.sub.mod`, and also `sub.mod` and `mod` (a script that
imports a module beside it, a folder put on `sys.path`). The model picks among such candidates.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from gpulint.linter.regions import code_of, split_units, stand_in
from gpulint.project.configs import interval_settings, option_values, switch_settings
from gpulint.project.local import (
    MODULE_SCOPE, FileLocal, Scope, analyze, class_attributes, device_attributes, may_set_period, module_aliases,
    text_step_flags,
)
from gpulint.project.vocab import is_training_path

# Text that can make a definition an entry of the training step by itself (a step marker, a loop over a loader,
# fetching from one): only definitions holding some of it are analysed before anything reaches them.
_ENTRY_TEXT = re.compile(
    r"backward\s*\(|zero_grad\s*\(|\.step\s*\(|for\b[^:\n]{0,200}?(?:loader|Loader|batches|iterator|prefetcher|data)"
    r"|next\([^)\n]{0,100}?(?:loader|Loader|batches|iterator|prefetcher|data)"
    # `agent.update_net(buffer)`, `ppo.update(rollouts)`: a reinforcement-learning update on collected experience
    r"|\.\w*(?:update|learn|train|optimi[sz]e)\w*\s*\(\s*[\w.]*(?:uffer|ollout|emory|xperience|torage)"
)


_SETS_ATTRIBUTE = re.compile(r"self\.(\w+)\s*(?::[^=\n]*)?=(?!=)")
_NAMES_A_DEVICE = re.compile(r"\bdevice\s*=|\.cuda\(|\.to\(")  # an `__init__` that may keep a tensor on the device


_ENTRY_WORDS = ("backward", "zero_grad", ".step", "next(", "oader", "batches", "iterator", "prefetcher", "data",
                "uffer", "ollout", "emory", "xperience", "torage")


@dataclass
class Definition:
    qualname: str  # "train", "Trainer.step", "Outer.Inner"
    name: str
    cls: str  # the class it is a member of ("" for a top-level function or class)
    start: int  # 0-based first line (decorators included)
    end: int  # 0-based line after it
    is_class: bool
    code: str = ""  # its text without docstrings and comments

    @cached_property
    def may_enter(self) -> bool:
        code = self.code
        if self.is_class or not any(word in code for word in _ENTRY_WORDS):
            return False
        return _ENTRY_TEXT.search(code) is not None

    @cached_property
    def sets_attributes(self) -> frozenset[str]:
        """The attributes it assigns (`self.ema = ...`): where to look for the classes an object holds."""
        return frozenset(_SETS_ATTRIBUTE.findall(self.code)) if "self." in self.code else frozenset()


@dataclass
class SyntaxProblem:
    line: int
    column: int
    message: str


@dataclass
class ModuleIndex:
    path: str  # as gpulint displays it, '/'-separated, relative to where it was run
    text: str
    definitions: dict[str, Definition] = field(default_factory=dict)
    skeleton: FileLocal | None = None
    problem: SyntaxProblem | None = None
    aliases: dict[str, str] = field(default_factory=dict)  # module-level absolute import aliases
    step_flags: frozenset[str] = frozenset()  # names assigned an interval test anywhere in the file
    on_flags: frozenset[str] = frozenset()  # configuration switches it defines with a default that is on
    intervals: frozenset[tuple[str, int]] = frozenset()  # values it gives intervals (configs.interval_settings)
    values: frozenset[tuple[str, str]] = frozenset()  # words it gives options (configs.option_values)
    switches: frozenset[tuple[str, str]] = frozenset()  # what it says of switches (configs.switch_settings)
    # How often each capitalised word occurs in its text (`class_name_counts`): what names a class, counted once per
    # file when it is outlined rather than searched for in every file at every build of the model.
    class_names: dict[str, int] = field(default_factory=dict)
    changed: bool = True  # read or analysed anew in this run (its stored form must be written again)
    lines: list[str] = field(default_factory=list)
    _analysed: dict[str, dict[str, Scope]] = field(default_factory=dict)
    _scopes: dict[str, Scope | None] = field(default_factory=dict)
    _attributes: dict[str, tuple[dict[str, str], frozenset[str]]] = field(default_factory=dict)  # `class_attributes`
    _devices: dict[str, frozenset[str]] = field(default_factory=dict)  # by class: `device_attributes`
    _members: dict[str, list[Definition]] | None = None  # by class: `members`

    @property
    def module_scope(self) -> Scope | None:
        return self.skeleton.scopes.get(MODULE_SCOPE) if self.skeleton else None

    def read_scopes(self) -> list[Scope]:
        """Every scope read so far: the skeleton's (what runs at import) and those of the definitions analysed."""
        return [*(self.skeleton.scopes.values() if self.skeleton else ()),
                *(scope for found in self._analysed.values() for scope in found.values())]

    def members(self, cls: str) -> list[Definition]:
        """The definitions of a top-level class's members, in the file's order (grouped once per file: the model asks
        for them class by class, and a model file has hundreds of definitions)."""
        if self._members is None:
            self._members = {}
            for definition in self.definitions.values():
                if definition.cls:
                    self._members.setdefault(definition.cls, []).append(definition)
        return self._members.get(cls, [])

    def scopes_of(self, definition: Definition) -> dict[str, Scope]:
        """The analysis of one definition: its own scope and those nested in it, keyed by qualified name."""
        found = self._analysed.get(definition.qualname)
        if found is None:
            found = self._analysed[definition.qualname] = self._analyse(definition)
            self.changed = True
        return found

    def scope(self, qualname: str) -> Scope | None:
        """The scope of a function, method or class by qualified name (analysing its definition if needed)."""
        if qualname not in self._scopes:
            self._scopes[qualname] = self._find_scope(qualname)
        return self._scopes[qualname]

    def _find_scope(self, qualname: str) -> Scope | None:
        head = qualname
        while head not in self.definitions and "." in head:
            head = head.rsplit(".", 1)[0]
        definition = self.definitions.get(head)
        if definition is not None and not definition.is_class:
            return self.scopes_of(definition).get(qualname)
        return self.skeleton.scopes.get(qualname) if self.skeleton else None

    def class_attributes(self, cls: str) -> tuple[dict[str, str], frozenset[str]]:
        """The class's attributes set once to a configuration option, and those it empties again after filling them
        (local.class_attributes)."""
        if cls not in self._attributes:
            definition = self.definitions.get(cls)
            text = "\n".join(self.lines[definition.start:definition.end]) if definition is not None else ""
            self._attributes[cls] = class_attributes(text)
        return self._attributes[cls]

    def device_attributes(self, cls: str) -> frozenset[str]:
        """The class's attributes that hold device tensors (local.device_attributes). The class is parsed only when
        its `__init__` mentions a device."""
        if cls not in self._devices:
            found: frozenset[str] = frozenset()
            definition, init = self.definitions.get(cls), self.definitions.get(f"{cls}.__init__")
            if definition is not None and init is not None and _NAMES_A_DEVICE.search(init.code):
                tree = _parse(textwrap.dedent("\n".join(self.lines[definition.start:definition.end])))
                if tree is not None and tree.body and isinstance(tree.body[0], ast.ClassDef):
                    found = device_attributes(tree.body[0], self.aliases)
            self._devices[cls] = found
        return self._devices[cls]

    def _analyse(self, definition: Definition) -> dict[str, Scope]:
        lines = self.lines[definition.start:definition.end]
        text = "\n".join(lines)
        if definition.cls:
            # Inside a stand-in class of the member's own class, so that it gets its qualified name; the walker
            # adds the lines before it.
            tree = _parse(f"class {definition.cls}:\n" + text)
            offset = definition.start - 1
        else:
            tree = _parse(text)
            offset = definition.start
        if tree is None:
            return {}
        options, resets = self.class_attributes(definition.cls) if definition.cls else ({}, frozenset())
        try:
            local = analyze(tree, aliases=self.aliases, step_flags=self.step_flags,
                            local_imports=any("import" in line for line in lines), line_offset=offset,
                            attribute_options=options, resets=resets,
                            device_attributes=self.device_attributes(definition.cls) if definition.cls else None,
                            periods=may_set_period(text))
        except RecursionError:  # nesting too deep to walk: the definition stays unknown to the model
            return {}
        # Without the stand-in's module and class.
        return {q: s for q, s in local.scopes.items() if s.kind != "module" and q != definition.cls}


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences: not gpulint's business
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _property_writer(first_line: str, name: str) -> bool:
    """`@alpha.setter` (or `.deleter`) on the first line of the definition of `alpha`."""
    return first_line.strip() in (f"@{name}.setter", f"@{name}.deleter")


def outline(path: str, text: str) -> ModuleIndex:
    """The outline of one file: its definitions and its analysed skeleton (see the module docstring)."""
    lines = text.split("\n")
    training = is_training_path(path)
    index = ModuleIndex(path, text, lines=lines, step_flags=text_step_flags(text), on_flags=on_flags(text),
                        intervals=frozenset(interval_settings(text)) if training else frozenset(),
                        values=frozenset(option_values(text, path)) if training else frozenset(),
                        switches=frozenset(switch_settings(text, path)) if training else frozenset(),
                        class_names=class_name_counts(text, exports=_public_api(path)))
    units = split_units(text, lines)
    skeleton = list(lines)
    for unit in units:
        owner = units[unit.owner] if unit.owner is not None else None
        qualname = f"{owner.name}.{unit.name}" if owner else unit.name
        code = "" if unit.is_class else code_of("\n".join(lines[unit.start:unit.end]))
        if qualname not in index.definitions or not _property_writer(lines[unit.start], unit.name):
            # a property's setter keeps its getter's name: reading `self.alpha` runs the getter, not the setter
            index.definitions[qualname] = Definition(
                qualname, unit.name, owner.name if owner else "", unit.start, unit.end, unit.is_class, code
            )
        if not unit.is_class:
            skeleton[unit.start:unit.end] = stand_in(lines[unit.start], unit.end - unit.start)
    tree = _parse("\n".join(skeleton))
    if tree is None:
        index.problem = _syntax_problem(path, text)
        if index.problem is None:  # the cut was fooled by a string: read the file whole
            tree = _parse(text)
            index.definitions = {}
    if tree is not None:
        index.aliases = module_aliases(tree)
        index.skeleton = analyze(tree, aliases=index.aliases, step_flags=index.step_flags)
    return index


# Configuration switches whose default is on: `add_argument("--amp", default=True)`, `store_false`, `amp: bool = True`.
_ON_ARGUMENT = re.compile(
    r"add_argument\(\s*[\"']-{0,2}([\w-]+)[\"'][^()]*?(?:default\s*=\s*True|action\s*=\s*[\"']store_false)"
)
# Searched from its colon (a pattern that starts with `\w+` is tried at every letter of the file), then the name
# before it is read.
_ON_FIELD = re.compile(r":[ \t]*bool[ \t]*=[ \t]*(?:True|field\(\s*default\s*=\s*True)")
_NAME_BEFORE = re.compile(r"(\w+)[ \t]*$")


CLASS_LIKE_NAME = re.compile(r"\b[A-Z]\w*")


# What names a class without using it: an import or re-export (`from .loss import MultiBoxLoss`, `__all__ = [...]`),
# and the class's own old-style `super(MultiBoxLoss, self)`. A class named only there is built by nothing. An import
# under another name is a use (`from models.network_rvrt import RVRT as net`, then `net(...)`).
# (Three patterns, each run only where its word occurs: one alternation of them costs twice as much.)
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.M)
_ALL = re.compile(r"^__all__[ \t]*\+?=[ \t]*(?:\[[^\]]*\]|\([^)]*\))", re.M)
_OLD_SUPER = re.compile(r"\bsuper\([ \t]*\w+[ \t]*,")


def _uses_only(text: str) -> str:
    """`text` without its imports (but those renaming: `import X as y`), `__all__` and `super(Name, self)`."""
    text = _IMPORT.sub(_unless_renamed, text) if "import" in text else text
    text = _ALL.sub("", text) if "__all__" in text else text
    return _OLD_SUPER.sub("", text) if "super(" in text else text


def _unless_renamed(match: re.Match[str]) -> str:
    found = match.group()
    return found if " as " in found else ""


def _public_api(path: str) -> bool:
    """A top-level package's `__init__.py` (`video_diffusion_pytorch/__init__.py`, also under `src/`): what it
    exports is the library's API, which its users build."""
    parts = path.split("/")
    if parts[0] == "src":
        parts = parts[1:]
    return len(parts) == 2 and parts[1] == "__init__.py"


def class_name_counts(text: str, exports: bool = False) -> dict[str, int]:
    """How often each word starting with a capital letter is used in `text` (a class's name, or anything else),
    leaving out imports, `__all__` and old-style `super(Name, self)` calls; `exports`: counting the imports and
    `__all__` of a library's public API (`_public_api`) as uses."""
    counts: dict[str, int] = {}
    for name in CLASS_LIKE_NAME.findall(text if exports else _uses_only(text)):
        counts[name] = counts.get(name, 0) + 1
    return counts


def on_flags(text: str) -> frozenset[str]:
    """The configuration switches a file defines whose default is on (argparse, dataclasses)."""
    found = set()
    if "add_argument" in text:
        found.update(name.replace("-", "_") for name in _ON_ARGUMENT.findall(text))
    if "bool" in text:
        for match in _ON_FIELD.finditer(text):
            start = text.rfind("\n", 0, match.start()) + 1
            name = _NAME_BEFORE.search(text, start, match.start())
            if name:
                found.add(name.group(1))
    return frozenset(found)


def _syntax_problem(path: str, text: str) -> SyntaxProblem | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return SyntaxProblem(exc.lineno or 1, exc.offset or 1, exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:
        return SyntaxProblem(1, 1, f"could not parse: {type(exc).__name__}")
    return None
