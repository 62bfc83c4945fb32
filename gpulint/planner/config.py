"""The `plan:` section of gpulint.yaml, parsed into a `PlanConfig`; budgets are absolute byte counts.

    plan:
      model: examples/model.py:build_model     # or package.module:factory; returns an nn.Module
      batch: examples/model.py:make_batch      # returns the step's inputs: dict (kwargs), tuple/list (args) or a tensor
      inputs: null                             # the part of the batch the model gets: an index (0 of `(x, y)`), a key,
                                               # or a list of keys (keyword arguments); default: the whole batch
      loss: null                               # optional function(output, batch) -> scalar; default output.loss, else sum
      step: null                               # optional function(model, batch) -> scalar loss: your own training step
                                               # (instead of inputs and loss)
      optimizer: adamw                         # none | sgd | sgd-momentum | adam | adamw (its state counts in the peak)
      dtype: fp32                              # fp32 | bf16 | fp16 (parameters and activations)
      hardware: h100-sxm                       # a name in gpulint/planner/hardware/ or a YAML path
      budget: 24GB                             # 24GB = 24G = 24e9 bytes, 24GiB = 24Gi = 24 * 2**30 bytes
      padding: null                            # optional: {padded_length: 512, mean_length: 180} (or `lengths:`, a
                                               # sample of real sequence lengths): prices padding findings

Paths in `model`, `batch`, `loss` and `step` are relative to the YAML file's folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpulint.planner.errors import PlanError
from gpulint.units import Size, parse_size

OPTIMIZERS = ("none", "sgd", "sgd-momentum", "adam", "adamw")
DTYPES = ("fp32", "bf16", "fp16")


@dataclass
class PlanConfig:
    model: str
    batch: str
    loss: str | None = None
    step: str | None = None
    inputs: int | str | list[str] | None = None
    optimizer: str = "adamw"
    dtype: str = "fp32"
    hardware: str = "h100-sxm"
    budget: Size | None = None  # bytes, and the unit the user wrote it in
    padding: tuple[int, float] | None = None  # (the length batches are padded to, the mean real length)
    base_dir: Path = Path(".")
    source: str = "<config>"  # the file this came from, for messages


def parse_budget(value: Any, field: str = "budget") -> Size:
    """`24GB`, `24G`, `24 gb` -> 24e9 bytes, `24GiB` -> 24 * 2**30, `1.5e9` -> 1.5e9 (units.py reads sizes), with the
    unit as written (reports show the budget in it). A fraction of something is refused with why."""
    text = repr(value) if isinstance(value, float) else str(value)
    number = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*", text) if isinstance(value, (int, float, str)) else None
    if text.strip().endswith("%") or (number and not isinstance(value, bool) and 0 < float(number.group(1)) <= 1):
        raise PlanError(
            f"{field}: {value!r} looks like a fraction; gpulint budgets are absolute (e.g. 24GB or 24GiB), "
            "because a ratio of saved activations does not bound the peak"
        )
    try:
        return parse_size(value)
    except ValueError as exc:
        raise PlanError(f"{field}: {exc}") from None


def load_plan_config(path: str | Path) -> PlanConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise PlanError(f"{path}{where}: malformed YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
        raise PlanError(f"{path}: no `plan:` section (a mapping with at least `model` and `batch`)")
    section = data["plan"]
    known = {"model", "batch", "inputs", "loss", "step", "optimizer", "dtype", "hardware", "budget", "padding"}
    for key in section:
        if key not in known:
            raise PlanError(f"{path}: plan.{key}: unknown field (known: {', '.join(sorted(known))})")
    for key in ("model", "batch"):
        if not isinstance(section.get(key), str) or ":" not in section[key]:
            raise PlanError(f"{path}: plan.{key}: expected 'path/file.py:factory' or 'package.module:factory'")
    loss = section.get("loss")
    if loss is not None and (not isinstance(loss, str) or ":" not in loss):
        raise PlanError(f"{path}: plan.loss: expected 'path/file.py:function' taking (output, batch)")
    step = section.get("step")
    if step is not None and (not isinstance(step, str) or ":" not in step):
        raise PlanError(f"{path}: plan.step: expected 'path/file.py:function' taking (model, batch)")
    if step is not None and (loss is not None or section.get("inputs") is not None):
        raise PlanError(f"{path}: plan.step: your step function computes the loss from the model and the batch; "
                        "leave out plan.loss and plan.inputs")
    inputs = section.get("inputs")
    valid_inputs = (inputs is None or (isinstance(inputs, (int, str)) and not isinstance(inputs, bool))
                    or (isinstance(inputs, list) and inputs and all(isinstance(k, str) for k in inputs)))
    if not valid_inputs:
        raise PlanError(f"{path}: plan.inputs: expected an index (0), a key (input_ids) or a list of keys, "
                        f"got {inputs!r}")
    optimizer = str(section.get("optimizer", "adamw")).lower()
    if optimizer not in OPTIMIZERS:
        raise PlanError(f"{path}: plan.optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    dtype = str(section.get("dtype", "fp32")).lower()
    if dtype not in DTYPES:
        raise PlanError(f"{path}: plan.dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    budget = section.get("budget")
    return PlanConfig(
        model=section["model"],
        batch=section["batch"],
        loss=loss,
        step=step,
        inputs=inputs,
        optimizer=optimizer,
        dtype=dtype,
        hardware=str(section.get("hardware", "h100-sxm")),
        budget=None if budget is None else parse_budget(budget, f"{path}: plan.budget"),
        padding=_padding(section.get("padding"), f"{path}: plan.padding"),
        base_dir=path.resolve().parent,
        source=str(path),
    )


def _padding(raw: Any, where: str) -> tuple[int, float] | None:
    """`{padded_length: 512, mean_length: 180}` or `{padded_length: 512, lengths: [120, 512, 80]}`."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"padded_length", "mean_length", "lengths"}:
        raise PlanError(f"{where}: expected {{padded_length: N, mean_length: M}} or {{padded_length: N, lengths: "
                        f"[...]}}, got {raw!r:.80}")
    padded = raw.get("padded_length")
    if isinstance(padded, bool) or not isinstance(padded, int) or padded <= 0:
        raise PlanError(f"{where}.padded_length: expected a positive integer, got {padded!r}")
    lengths = raw.get("lengths")
    if lengths is not None:
        if (not isinstance(lengths, list) or not lengths
                or not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= padded for n in lengths)):
            raise PlanError(f"{where}.lengths: expected a list of lengths between 1 and padded_length ({padded})")
        return padded, sum(lengths) / len(lengths)
    mean = raw.get("mean_length")
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not 0 < mean <= padded:
        raise PlanError(f"{where}.mean_length: expected a number between 0 and padded_length ({padded}), "
                        f"got {mean!r}")
    return padded, float(mean)


def load_factory(spec: str, base_dir: Path | str = ".", field: str = "factory") -> Callable[..., Any]:
    """Import `path/file.py:name` (relative to base_dir) or `package.module:name` and return the callable."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise PlanError(f"{field}: expected 'path/file.py:factory' or 'package.module:factory', got {spec!r}")
    try:
        if target.endswith(".py") or "/" in target:
            file = (Path(base_dir) / target).resolve()
            if not file.is_file():
                raise PlanError(f"{field}: {spec!r}: file {file} does not exist")
            module_name = f"_gpulint_user_{file.stem}_{abs(hash(str(file)))}"
            module = sys.modules.get(module_name)
            if module is None:
                module_spec = importlib.util.spec_from_file_location(module_name, file)
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[module_name] = module
                if str(file.parent) not in sys.path:
                    sys.path.insert(0, str(file.parent))  # let the file import its neighbours
                try:
                    module_spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[module_name]
                    raise
        else:
            module = importlib.import_module(target)
    except PlanError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; reported as one line
        raise PlanError(f"{field}: {spec!r} does not import ({type(exc).__name__}: {exc})") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise PlanError(f"{field}: {spec!r}: no callable named {name!r} in {target}")
    return factory
