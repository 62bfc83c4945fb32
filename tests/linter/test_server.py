"""`gpulint server` driven over stdio by a real LSP client (pygls's): diagnostics as the user types, fixes, noqa and
docs as code actions, fix-all, UTF-16 positions, settings errors."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Union

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from .conftest import TRAIN  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60


class Editor:
    """A client session with one server process: what the server sent, and helpers to act as an editor."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.client = LanguageClient("gpulint-test", "1")
        self.diagnostics: asyncio.Queue = asyncio.Queue()
        self.shown: list[types.ShowDocumentParams] = []
        self.messages: list[types.ShowMessageParams] = []

        # lsprotocol reads any code action that has a `command` as a bare Command, though a CodeAction's `command` is
        # an object and a Command's a string (as editors tell them apart).
        converter = self.client.protocol._converter
        converter.register_structure_hook(
            Union[types.Command, types.CodeAction],
            lambda data, _: converter.structure(
                data, types.Command if isinstance(data.get("command"), str) else types.CodeAction),
        )

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics.put_nowait(params)

        @self.client.feature(types.WINDOW_SHOW_DOCUMENT)
        def on_show_document(params: types.ShowDocumentParams) -> types.ShowDocumentResult:
            self.shown.append(params)
            return types.ShowDocumentResult(success=True)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params: types.ShowMessageParams) -> None:
            self.messages.append(params)

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        await self.client.start_io(sys.executable, "-m", "gpulint", "server", cwd=str(self.folder), env=env)
        capabilities = types.ClientCapabilities(
            window=types.WindowClientCapabilities(show_document=types.ShowDocumentClientCapabilities(support=True))
        )
        await asyncio.wait_for(self.client.initialize_async(
            types.InitializeParams(capabilities=capabilities, root_uri=self.folder.as_uri())), TIMEOUT_S)
        self.client.initialized(types.InitializedParams())

    async def stop(self) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), TIMEOUT_S)
        self.client.exit(None)
        await self.client.stop()

    async def next_diagnostics(self) -> list[types.Diagnostic]:
        return list((await asyncio.wait_for(self.diagnostics.get(), TIMEOUT_S)).diagnostics)

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

    def type(self, uri: str, version: int, text: str) -> None:
        """Replace the whole text, as an edit (`didChange`) without a save."""
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    async def actions(self, uri: str, line: int, only: list[str] | None = None) -> list[types.CodeAction]:
        position = types.Position(line, 0)
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(position, position),
            context=types.CodeActionContext(diagnostics=[], only=only))
        return await asyncio.wait_for(self.client.text_document_code_action_async(params), TIMEOUT_S)


def _session(folder: Path, script) -> None:
    async def main() -> None:
        editor = Editor(folder)
        await editor.start()
        try:
            await script(editor)
        finally:
            await editor.stop()

    asyncio.run(main())


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (ASCII text here, so UTF-16 units are characters)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(position: types.Position) -> int:
        return offsets[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def test_diagnostics_as_the_user_types_and_code_actions(tmp_path):
    uri = (tmp_path / "train.py").as_uri()

    async def script(editor: Editor) -> None:
        editor.open(uri, TRAIN)
        (finding,) = await editor.next_diagnostics()
        assert (finding.code, finding.source, finding.range.start.line, finding.range.start.character) == (
            "GPL401", "gpulint", 7, 16)
        assert finding.code_description.href.endswith("#gpl401-scalar-sync-in-step")

        titles = {a.title: a for a in await editor.actions(uri, 7)}
        noqa = titles["gpulint: suppress GPL401 with `# noqa`"]
        fixed = _apply(TRAIN, noqa.edit.changes[uri])
        assert "value = loss.item()  # noqa: GPL401\n" in fixed

        docs = titles["gpulint: show documentation for GPL401"]
        text = await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=docs.command.command, arguments=docs.command.arguments)), TIMEOUT_S)
        assert "## Why it is slow" in text
        (shown,) = editor.shown
        assert shown.uri.endswith("GPL401-scalar-sync-in-step.md") and "## Use instead" in Path(
            shown.uri.removeprefix("file://")).read_text()

        # Typing the suppression in: the finding goes away without a save.
        editor.type(uri, 2, fixed)
        assert await editor.next_diagnostics() == []

    _session(tmp_path, script)


def test_fix_action_fix_all_and_utf16_columns(tmp_path):
    source = (
        "import torch\n\ndef train(model, loader, optimizer):\n    for batch in loader:\n"
        "        loss = model(batch)\n        loss.backward()\n        optimizer.step()\n"
        '        label = "∑😀"; mask = torch.ones(8, 8).cuda()\n'
    )
    uri = (tmp_path / "a.py").as_uri()

    async def script(editor: Editor) -> None:
        editor.open(uri, source)
        diagnostics = await editor.next_diagnostics()
        (cuda,) = [d for d in diagnostics if d.code == "GPL504"]
        # The emoji is one code point and two UTF-16 units: the client counts one more than the finding's column.
        line = source.splitlines()[7]
        assert (cuda.range.start.line, cuda.range.start.character) == (7, line.index("torch.ones") + 1)
        fixes = [a for a in await editor.actions(uri, 7) if a.title.startswith("gpulint: fix GPL504")]
        assert fixes and fixes[0].is_preferred
        (fix_all,) = await editor.actions(uri, 0, only=["source"])
        assert fix_all.kind == "source.fixAll.gpulint"
        (edit,) = fix_all.edit.changes[uri]
        assert 'torch.ones(8, 8, device="cuda")' in edit.new_text and ".cuda()" not in edit.new_text

    _session(tmp_path, script)


def test_settings_apply_and_a_broken_config_is_one_message(tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPL401"]\n')

    async def script(editor: Editor) -> None:
        editor.open(uri, TRAIN)
        assert await editor.next_diagnostics() == []
        (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nselectt = ["GPL4"]\n')
        editor.type(uri, 2, TRAIN + "\n")
        editor.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
        assert await editor.next_diagnostics() == []
        await editor.next_diagnostics()
        assert [m.message for m in editor.messages if "selectt" in m.message] == [
            f"gpulint: {tmp_path / 'pyproject.toml'}: unknown key `selectt` in gpulint settings "
            "(known: exclude, extend-exclude, extend-select, hot-functions, ignore, log-gates, per-file-ignores, "
            "select, unsafe-fixes)"]

    _session(tmp_path, script)
