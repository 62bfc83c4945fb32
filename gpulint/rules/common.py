"""Knowledge several rule families share: reading a call's arguments and literal values.

One place for each fact, so that two families never disagree on it (TorchFix keeps the same kind of helpers in
`torchfix/common.py`).
"""

from __future__ import annotations

import libcst as cst


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    """The argument `name=...` of `call`, or None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def is_false(expr: cst.BaseExpression | None) -> bool:
    """The literal `False`."""
    return isinstance(expr, cst.Name) and expr.value == "False"
