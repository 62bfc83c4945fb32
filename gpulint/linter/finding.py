"""What a lint reports: findings, and the fixes they carry (plain data, JSON round trip, no libcst)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpulint.project.facts import Frame

DOCS_URL = "https://github.com/gpulint/gpulint/blob/main/docs/rules.md#{anchor}"


def rule_url(code: str, name: str) -> str:
    """Where a rule's documentation is (its section of docs/rules.md)."""
    return DOCS_URL.format(anchor=f"{code.lower()}-{name}")


def one_line(message: str) -> str:
    """A message quoting a multi-line expression, on one line: `f(\n    a,\n)` reads `f(a)`. A line break inside
    brackets goes with its indent (and a trailing comma before the closing bracket); any other becomes one space."""
    message = re.sub(r"([(\[{])\s*\n\s*", r"\1", message)
    message = re.sub(r",?\s*\n\s*([)\]}])", r"\1", message)
    return re.sub(r"\s*\n\s*", " ", message)


# How sure a finding is to run every step, surest first (`Finding.confidence`; `gpulint check --confidence`).
CONFIDENCE_LEVELS = ("certain", "likely", "possible")


@dataclass(frozen=True)
class Edit:
    """Replace [line:column, end_line:end_column) with content. Lines and columns are 1-based; end is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_json(self) -> dict:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }


@dataclass(frozen=True)
class Fix:
    applicability: Literal["safe", "unsafe"]
    edits: tuple[Edit, ...]

    def to_json(self) -> dict:
        return {"applicability": self.applicability, "edits": [e.to_json() for e in self.edits]}


@dataclass(frozen=True)
class Cost:
    """A finding's estimated cost per training step (gpulint check --plan; linter/pricing.py): a model estimate."""

    seconds: float
    share: float  # of the predicted step
    method: str  # how the estimate was made, in words

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "share": self.share, "method": self.method}


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    severity: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Fix | None = None
    url: str = ""
    # How sure gpulint is that the code runs every step: "certain" when the training step reaches it through calls
    # it resolved, "likely" through a guess (an object of unknown class, a callback, a name, an opt-in flag),
    # "possible" only through a guess among many candidates (one of a project's dozens of models).
    confidence: str = "certain"
    chain: tuple = ()  # Frames (gpulint.project.facts) from the training entry point to the finding's function
    cost: Cost | None = None  # with --plan: what it costs per step

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def to_json(self) -> dict:
        out = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": self.fix.to_json() if self.fix else None,
            "url": self.url,
            "confidence": self.confidence,
            "chain": [frame.to_json() for frame in self.chain],
        }
        if self.cost is not None:
            out["cost"] = self.cost.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Finding":
        fix = data.get("fix")
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            severity=data["severity"],
            path=data["path"],
            line=data["line"],
            column=data["column"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            fix=Fix(fix["applicability"], tuple(Edit(**e) for e in fix["edits"])) if fix else None,
            url=data.get("url", ""),
            confidence=data.get("confidence", "certain"),
            chain=tuple(Frame(f["path"], f["line"], f["name"]) for f in data.get("chain", ())),
            cost=Cost(**data["cost"]) if data.get("cost") else None,
        )
