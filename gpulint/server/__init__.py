"""`gpulint server`: a language server for editors (LSP over stdio), on pygls (the `server` extra).

It lints each open Python file as it is edited, with the settings the command line would use for that file (the
nearest `[tool.gpulint]`), and publishes the findings as diagnostics. Code actions: each finding's fix (an unsafe
one is labelled so and never preferred), "suppress with `# noqa`", "show the rule's documentation", and
`source.fixAll.gpulint` for every safe fix of the file. pygls is imported only when the server runs, so
`gpulint --help` and the linter work without it.
"""

from __future__ import annotations

import argparse

from gpulint.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default and only transport; editors pass it)")


def run(args: argparse.Namespace) -> int:
    try:
        from gpulint.server.lsp import build_server
    except ImportError as exc:
        raise UsageError(f"the language server needs pygls ({exc.name} is not installed): "
                         "pip install 'gpulint[server]'") from None
    build_server().start_io()
    return 0
