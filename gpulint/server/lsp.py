"""The language server: open documents in, diagnostics and code actions out (see gpulint/server/__init__.py).

Positions: findings count columns in code points; the client may count UTF-16 units (the LSP default), so every
range goes through the document's position codec.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from gpulint import __version__
from gpulint.config import LintConfig, load_config
from gpulint.errors import UsageError
from gpulint.fileio import atomic_write
from gpulint.linter import docs as rule_docs
from gpulint.linter.discovery import excluded, relative_to_root
from gpulint.linter.engine import lint_text
from gpulint.linter.finding import Edit, Finding
from gpulint.linter.fixes import fix_text
from gpulint.linter.noqa import UNUSED_NOQA_CODE, add_noqa
from gpulint.linter.options import LintOptions
from gpulint.linter.rule import Rule, rules_by_code

SOURCE = "gpulint"
SHOW_DOCS = "gpulint.showRuleDocs"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.gpulint"
QUICK_FIX = types.CodeActionKind.QuickFix.value
# Lint once the user pauses: a burst of keystrokes gives one lint, not one per key.
DEBOUNCE_S = 0.15


@dataclass
class Linted:
    """One lint of one version of a document, with what fixing it again needs."""

    version: int | None
    findings: list[Finding]
    display: str
    rules: list[type[Rule]]
    options: LintOptions
    unsafe: bool


class GpulintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("gpulint", __version__)
        self.linted: dict[str, Linted] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.shown_errors: set[str] = set()

    def lint(self, document: TextDocument) -> Linted:
        """The findings for the document's current text (kept until the next edit)."""
        known = self.linted.get(document.uri)
        if known is not None and known.version == document.version and document.version is not None:
            return known
        linted = self._lint(document)
        self.linted[document.uri] = linted
        return linted

    def _lint(self, document: TextDocument) -> Linted:
        path = Path(document.path) if document.uri.startswith("file:") else None
        registry = rules_by_code()
        try:
            config = load_config(start=path.parent if path else None, known_codes=list(registry))
        except UsageError as exc:  # a mistake in the settings: say it once, and report nothing rather than guess
            self._error_once(str(exc))
            return Linted(document.version, [], "", [], LintOptions(), False)
        options = LintOptions(hot_functions=config.hot_functions, gate_names=config.log_gates)
        if path is not None and excluded(path, config):
            return Linted(document.version, [], str(path), [], options, False)
        display = relative_to_root(path, config.root) if path else document.uri
        rules = [registry[code] for code in _enabled(config, display, registry)]
        findings = lint_text(display, document.source, rules, options)
        return Linted(document.version, findings, display, rules, options, config.unsafe_fixes)

    def _error_once(self, message: str) -> None:
        if message not in self.shown_errors:
            self.shown_errors.add(message)
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gpulint: {message}"))

    def publish(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        linted = self.lint(document)
        diagnostics = [diagnostic(document, finding) for finding in linted.findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
        )


def _enabled(config: LintConfig, display: str, registry: dict[str, type[Rule]]) -> list[str]:
    codes = config.enabled_codes(list(registry), [c for c, r in registry.items() if r.default_enabled])
    ignored = config.ignored_for(display)
    return [c for c in codes if not any(c.startswith(p) for p in ignored)]


def build_server() -> GpulintServer:
    server = GpulintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpulintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: GpulintServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        previous = ls.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        ls.pending[uri] = asyncio.ensure_future(_publish_after_pause(ls, uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GpulintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.linted.pop(params.text_document.uri, None)  # the settings may have changed with the file
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.linted.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]),
    )
    def code_action(ls: GpulintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        document = ls.workspace.get_text_document(params.text_document.uri)
        linted = ls.lint(document)
        only = params.context.only
        actions: list[types.CodeAction] = []
        if _wanted(QUICK_FIX, only):
            first, last = params.range.start.line + 1, params.range.end.line + 1
            for finding in linted.findings:
                if finding.line <= last and finding.end_line >= first:
                    actions.extend(_finding_actions(document, finding))
        if _wanted(FIX_ALL, only):
            fix_all = _fix_all(document, linted)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    @server.command(SHOW_DOCS)
    def show_docs(ls: GpulintServer, code) -> str:
        rule = rules_by_code().get(str(code).upper())
        if rule is None:
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gpulint: no rule {code}"))
            return ""
        text = rule_docs.rule_text(rule)
        window = ls.client_capabilities.window
        if window is not None and window.show_document is not None and window.show_document.support:
            # The docs as a file the editor opens beside the code: readable offline, in the editor's own viewer.
            page = Path(tempfile.gettempdir()) / f"gpulint-{__version__}-docs" / f"{rule.code}-{rule.name}.md"
            page.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(page, text)
            ls.window_show_document(types.ShowDocumentParams(uri=page.as_uri(), take_focus=True))
        else:
            ls.window_show_message(types.ShowMessageParams(
                types.MessageType.Info, f"{rule.code} {rule.name}: {rule.docs.what_it_does} {rule.url()}"))
        return text

    return server


async def _publish_after_pause(ls: GpulintServer, uri: str) -> None:
    await asyncio.sleep(DEBOUNCE_S)
    ls.pending.pop(uri, None)
    ls.publish(uri)


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Does the client's `only` filter (kinds, matched by prefix: `source` covers `source.fixAll.gpulint`) let `kind`
    through?"""
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def diagnostic(document: TextDocument, finding: Finding) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(document, finding.line, finding.column, finding.end_line, finding.end_column),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if finding.severity == "error" else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=finding.url) if finding.url else None,
        source=SOURCE,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == UNUSED_NOQA_CODE else None,
    )


def _range(document: TextDocument, line: int, column: int, end_line: int, end_column: int) -> types.Range:
    """A 1-based, code-point span as the client counts."""
    span = ServerTextRange(ServerTextPosition(line - 1, column - 1), ServerTextPosition(end_line - 1, end_column - 1))
    return document.range_to_client_units(span)


def _finding_actions(document: TextDocument, finding: Finding) -> list[types.CodeAction]:
    """The fix (if any), "suppress with noqa" and "show the docs", for one finding."""
    shown = diagnostic(document, finding)
    actions = []
    if finding.fix is not None:
        unsafe = finding.fix.applicability == "unsafe"
        actions.append(types.CodeAction(
            title=f"gpulint: fix {finding.code} ({finding.name})" + (" (unsafe: check the result)" if unsafe else ""),
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[shown],
            is_preferred=not unsafe,
            edit=_workspace_edit(document, [_text_edit(document, e) for e in finding.fix.edits]),
        ))
    if finding.code not in ("GPL001", UNUSED_NOQA_CODE):
        noqa = _noqa_edit(document, finding)
        if noqa is not None:
            actions.append(types.CodeAction(
                title=f"gpulint: suppress {finding.code} with `# noqa`",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[shown],
                edit=_workspace_edit(document, [noqa]),
            ))
    actions.append(types.CodeAction(
        title=f"gpulint: show documentation for {finding.code}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[shown],
        command=types.Command(title=f"gpulint: documentation for {finding.code}", command=SHOW_DOCS,
                              arguments=[finding.code]),
    ))
    return actions


def _noqa_edit(document: TextDocument, finding: Finding) -> types.TextEdit | None:
    """The line `--add-noqa` would change for this finding, as one edit (None: no line can take the comment)."""
    text = document.source
    new_text, changed, _ = add_noqa(text, [(finding.line, finding.code)])
    if not changed:
        return None
    old_lines, new_lines = text.splitlines(), new_text.splitlines()
    number = next(i for i, (old, new) in enumerate(zip(old_lines, new_lines), start=1) if old != new)
    edit = Edit(number, 1, number, len(old_lines[number - 1]) + 1, new_lines[number - 1])
    return _text_edit(document, edit)


def _fix_all(document: TextDocument, linted: Linted) -> types.CodeAction | None:
    """`source.fixAll.gpulint`: every safe fix (and the unsafe ones where `unsafe-fixes = true`), as one edit."""
    if not any(f.fix is not None for f in linted.findings):
        return None
    text = document.source
    newline = "\r\n" if "\r\n" in text else "\n"
    new_text, fixed = fix_text(
        text, lambda t: lint_text(linted.display, t, linted.rules, linted.options), linted.unsafe, newline=newline
    )
    if not fixed:
        return None
    lines = text.splitlines(keepends=True)
    whole = types.Range(types.Position(0, 0), types.Position(len(lines), 0))
    return types.CodeAction(
        title=f"gpulint: fix all ({len(fixed)} fix{'es' * (len(fixed) != 1)})",
        kind=FIX_ALL,
        edit=_workspace_edit(document, [types.TextEdit(range=whole, new_text=new_text)]),
    )


def _text_edit(document: TextDocument, edit: Edit) -> types.TextEdit:
    return types.TextEdit(range=_range(document, edit.line, edit.column, edit.end_line, edit.end_column),
                          new_text=edit.content)


def _workspace_edit(document: TextDocument, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(changes={document.uri: edits})
