"""What a rule is and how the engine finds every rule (what a rule reports is in reports.py).

A rule is a class with a code (`GPL401`), a kebab-case name, trigger words for the pre-filter, documentation, and
VALID / INVALID examples. It defines `visit_<Node>` / `leave_<Node>` methods like a libcst visitor; the engine calls
every enabled rule from ONE traversal of the file. A rule reports a node with `self.report(...)`, saying under which
execution condition the finding is real (`when=`): the engine resolves that after the traversal, when it knows the whole
file (which functions the training loop calls, which branches are gated), so a rule never has to.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Sequence

import libcst as cst

from gpulint.linter.finding import rule_url
from gpulint.linter.reports import FixPart, InsertBefore, Replace, Report, When

if TYPE_CHECKING:
    from gpulint.linter.context import FileContext


@dataclass(frozen=True)
class RuleDocs:
    """The sections every rule documents (shown by `gpulint rule CODE` and in docs/rules.md)."""

    what_it_does: str
    why_slow: str  # the mechanism: launch count, host-device round trip, wasted FLOPs
    example: str
    use_instead: str
    fix_safety: str = "This rule has no automatic fix."
    false_positives: str = "None known."


@dataclass(frozen=True)
class Invalid:
    """An INVALID example: `code` must produce exactly `count` findings of the rule; `fixed` (if given) is the code after
    applying the rule's fixes (safe and unsafe) until stable."""

    code: str
    fixed: str | None = None
    count: int = 1


class Rule:
    """Base class of every rule. Subclasses set the class attributes and define visit_/leave_ methods."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]  # the default finding message (one sentence, what is slow and what to do)
    docs: ClassVar[RuleDocs]
    triggers: ClassVar[tuple[str, ...]]  # words one of which must occur in the source for the rule to run
    # Further groups of words, each of which must also have one word in the source for the rule to run, and in a
    # function for the rule to need it parsed (regions.py): e.g. a loop over a dict of metrics is only reported when
    # something in it reads a value on the host, so `.items()` alone does not make a function worth parsing.
    requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # Words marking code the rule reads outside the function it reports in (an `nn.LSTM` built anywhere in the file,
    # a `collate_fn=` naming a function): functions holding one are parsed too (regions.py).
    facts: ClassVar[tuple[str, ...]] = ()
    # Keyword arguments whose value names a function the rule checks wherever it is (`collate_fn=pad_batch`).
    linked_by: ClassVar[tuple[str, ...]] = ()
    # Helpers several rules share per file: classes made once per file with the context (`context.helper(kind)`),
    # whose visit_/leave_ methods the traversal calls once per node, before the rules'.
    shared: ClassVar[tuple[type, ...]] = ()
    valid: ClassVar[Sequence[str]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()
    default_enabled: ClassVar[bool] = True
    severity: ClassVar[str] = "warning"
    fixable: ClassVar[bool] = False  # True when the rule can offer a fix for at least some findings
    # True when every finding of the rule is in code that runs in the training step (reported with when="per_step"):
    # the engine then skips the rule in files that show no sign of a training step at all.
    hot_only: ClassVar[bool] = False
    # True when some findings of the rule are real wherever the code is (reported with when="always"): the engine
    # then parses the functions holding its words even where no training code reaches them.
    reports_anywhere: ClassVar[bool] = False
    # True when the rule's cost exists only on a GPU (a host-device sync, a kernel launch saved): the engine drops its
    # findings in a training script that never names a device (devices.py), which runs on the CPU.
    gpu_only: ClassVar[bool] = False
    # True when the rule's advice holds for PyTorch alone: fixed-length padding (a JAX step compiled with `jax.jit`
    # wants fixed shapes), pinned loaders and `.to()` copies (JAX moves its numpy batches with `device_put`). The
    # engine skips it in a module that imports JAX or Flax; host syncs (`.item()`) cost the same there and stay.
    pytorch_only: ClassVar[bool] = False

    def __init__(self, context: "FileContext") -> None:
        self.context = context

    @classmethod
    def has_words_in(cls, text: str) -> bool:
        """Does `text` hold one of the rule's trigger words and a word of each `requires` group? The engine runs
        a rule only on files that do."""
        return any(w in text for w in cls.triggers) and all(any(w in text for w in group) for group in cls.requires)

    @classmethod
    def runs_for_facts(cls, facts) -> bool:
        """Must the rule run on a file whatever its words, for what the project model says of it? (A call of a
        project helper that copies host data to the device has none of the words of a copy.)"""
        return False

    @classmethod
    def may_report_for_facts(cls, code: str, facts) -> bool:
        """Could the rule report inside a function whose code is `code` because of what the project model says of
        the file (a call of a project function returning a CPU tensor, then moved), though `may_report_in` says no?
        Asked only of rules `runs_for_facts` keeps."""
        return False

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        """Could the rule report inside the function `name` (a method of `class_name`, or "") whose code, without
        docstrings and comments, is `code`? The engine parses only the functions some rule may report in (see
        regions.py); by default those that have the rule's words (`has_words_in`). A rule whose trigger words are
        common (`pad`, `.to(`) narrows this to the shapes it reports. It must never answer False where the rule can
        report: `python bench/prune_check.py` checks that on real code."""
        return cls.has_words_in(code)

    @classmethod
    def family(cls) -> str:
        return FAMILIES.get(cls.code[:4], "engine")

    @classmethod
    def url(cls) -> str:
        return rule_url(cls.code, cls.name)

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        when: When = "per_step",
        fix: Sequence[FixPart] = (),
        unsafe_fix: bool = False,
    ) -> None:
        self.context.add_report(
            Report(self, node, message or self.message, when, self.context.ancestors_snapshot(), tuple(fix), unsafe_fix)
        )


FAMILIES = {
    "GPL0": "engine",
    "GPL1": "per-tensor logging and reduction loops",
    "GPL2": "unvectorized metrics",
    "GPL3": "padded computation",
    "GPL4": "host-device sync and synchronous communication",
    "GPL5": "launch overhead",
}

_CODE_RE = re.compile(r"^GPL[0-9]{3}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_registry: list[type[Rule]] | None = None


def all_rules() -> list[type[Rule]]:
    """Every rule class in the modules of the `gpulint.rules` package and its family sub-packages (`gpulint.rules.sync`),
    sorted by code (imported once)."""
    global _registry
    if _registry is None:
        import gpulint.rules as package

        found: dict[str, type[Rule]] = {}
        modules = pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
        for info in sorted(modules, key=lambda i: i.name):
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__ and "code" in vars(obj):
                    _check_rule_class(obj, found)
                    found[obj.code] = obj
        _registry = sorted(found.values(), key=lambda r: r.code)
    return list(_registry)


def _check_rule_class(rule: type[Rule], found: dict[str, type[Rule]]) -> None:
    # A broken rule definition is a bug in gpulint, not a user error: fail loudly at import.
    if not _CODE_RE.match(rule.code):
        raise TypeError(f"rule {rule.__name__}: code {rule.code!r} is not GPLnnn")
    if rule.code in found:
        raise TypeError(f"rule code {rule.code} defined twice ({found[rule.code].__name__}, {rule.__name__})")
    if not _NAME_RE.match(rule.name):
        raise TypeError(f"rule {rule.code}: name {rule.name!r} is not kebab-case")
    for attr in ("message", "docs", "triggers"):
        if not hasattr(rule, attr):
            raise TypeError(f"rule {rule.code}: missing {attr}")


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.code: r for r in all_rules()}


__all__ = [
    "FixPart",
    "InsertBefore",
    "Invalid",
    "Replace",
    "Report",
    "Rule",
    "RuleDocs",
    "When",
    "all_rules",
    "rules_by_code",
]
