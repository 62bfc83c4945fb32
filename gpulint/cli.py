"""Command-line entry: check | fix | rules | rule | plan | report | bot.

Each subsystem owns its own arguments: this module only wires the subcommands together and turns a user's
mistake into one line on stderr and exit code 2 (never a traceback).
"""

from __future__ import annotations

import argparse
import sys

from gpulint import __version__
from gpulint.errors import UsageError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
__all__ = ["UsageError", "build_parser", "main"]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser. Subsystems with heavy imports (plan, report, bot) get their own flags only when `command`
    names them, so `gpulint check` and `gpulint --help` start without importing them."""
    from gpulint.linter import command as lint_command

    parser = argparse.ArgumentParser(
        prog="gpulint",
        description="Find where PyTorch training code leaves GPU time and memory on the table.",
    )
    parser.add_argument("--version", action="version", version=f"gpulint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser("check", help="lint files or folders (exit 0 clean, 1 findings, 2 error)")
    lint_command.add_check_arguments(check)
    check.set_defaults(run=lint_command.run_check)

    fix = sub.add_parser("fix", help="alias of `check --fix`: apply safe fixes")
    lint_command.add_check_arguments(fix)
    fix.set_defaults(run=lint_command.run_check, fix=True)

    rules = sub.add_parser("rules", help="list every rule (code, name, family, default, fixable)")
    lint_command.add_rules_arguments(rules)
    rules.set_defaults(run=lint_command.run_rules)

    rule = sub.add_parser("rule", help="print one rule's documentation")
    lint_command.add_rule_arguments(rule)
    rule.set_defaults(run=lint_command.run_rule)

    for name, help_text, module_name, add_name, run_name in SUBSYSTEMS:
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if command == name:
            _wire(sub_parser, module_name, add_name, run_name)
    return parser


SUBSYSTEMS = (
    ("plan", "trace a training step and plan recomputation under an absolute memory budget",
     "gpulint.planner.cli", "add_arguments", "run"),
    ("report", "render findings and a plan as a PR comment (md) or an HTML report",
     "gpulint.bot.cli", "add_report_arguments", "run_report"),
    ("bot", "GitHub integration: sticky PR comment, review suggestions, check run",
     "gpulint.bot.cli", "add_bot_arguments", "run_bot"),
)


def _wire(parser: argparse.ArgumentParser, module_name: str, add_name: str, run_name: str) -> None:
    """Let a subsystem declare its own flags; its heavy imports (torch) stay inside its `run`."""
    import importlib

    module = importlib.import_module(module_name)
    getattr(module, add_name)(parser)
    parser.set_defaults(run=getattr(module, run_name))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"gpulint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("gpulint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
