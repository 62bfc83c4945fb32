"""Reading a Python source file: its declared encoding (PEP 263, a BOM) and newline style, kept for writing fixes."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass


@dataclass
class SourceFile:
    """Decoded text of a file, with what a fix needs to write it back unchanged in style."""

    text: str
    encoding: str
    newline: str


def decode(data: bytes) -> SourceFile:
    """Decode with the source's declared encoding (PEP 263, BOM). Raises ValueError with a one-line reason."""
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise DecodeError("source contains a NUL byte", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in exc.msg:
            raise DecodeError(f"bad encoding declaration: {exc.msg}", 1) from None
        encoding = "utf-8"  # no declaration and undecodable first lines: let the decode below name the byte
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DecodeError(f"cannot decode as {encoding}: byte {data[exc.start]:#04x}", line) from None
    except LookupError:
        raise DecodeError(f"unknown encoding {encoding!r}", 1) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    newline = "\r\n" if "\r\n" in text[:10000] else "\n"
    return SourceFile(text=text, encoding=encoding, newline=newline)


class DecodeError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line
