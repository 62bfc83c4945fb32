"""The project model kept between runs, as JSON: each file's outline and the definitions the model has read, keyed by
the file's content, the facts of the last run, keyed by the content of every file, and each config file's facts.

A warm run with no file changed reuses the facts as they are; a run after some files changed reads only those files
anew (an outline, and the definitions the model reaches) and runs the model over the rest as stored. JSON, not
pickle: the cache folder lives in the user's checkout, where a pull request could plant a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from gpulint.project.configs import TrainingConfigs
from gpulint.project.facts import FileFacts, Frame, FunctionFacts, Reach
from gpulint.project.index import Definition, ModuleIndex, SyntaxProblem
from gpulint.project.local import Assign, Call, FileLocal, Loop, Region, Scope

FORMAT = "gpulint.project/78"


# ---------------------------------------------------------------------------------------------------- scopes
_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...]] = {}  # by dataclass: its field names (`dataclasses.fields` is slow)


def _plain(value: Any) -> Any:
    """`value` as JSON data: a dataclass as a dict of its fields, sets sorted. Exact types are tested first: an
    outline holds some 200,000 values, mostly strings and numbers, and a cold run dumps every outline."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    names = _FIELDS.get(kind)
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
        return _plain(value)
    return value


def _pos(value: list) -> tuple[int, int]:
    return (value[0], value[1])


def scope_from(data: dict) -> Scope:
    return Scope(
        **{
            **data,
            "start": _pos(data["start"]),
            "end": _pos(data["end"]),
            "params": tuple(data["params"]),
            "none_params": tuple(data["none_params"]),
            "false_params": tuple(data["false_params"]),
            "true_params": tuple(data["true_params"]),
            "word_defaults": tuple(tuple(pair) for pair in data["word_defaults"]),
            "config_defaults": tuple(tuple(pair) for pair in data["config_defaults"]),
            "required_params": tuple(data["required_params"]),
            "decorators": tuple(data["decorators"]),
            "decorator_args": tuple(data["decorator_args"]),
            "bases": tuple(data["bases"]),
            "method_refs": tuple((name, tuple(pos)) for name, pos in data["method_refs"]),
            "copied_params": tuple(data["copied_params"]),
            "moved_params": tuple(data["moved_params"]),
            "read_params": tuple(data["read_params"]),
            "loops": [Loop(**{**loop, "start": _pos(loop["start"])}) for loop in data["loops"]],
            "regions": [
                Region(r["kind"], _pos(r["start"]), _pos(r["end"]), r["loop"], tuple(r["flags"])) for r in data["regions"]
            ],
            "calls": [
                Call(**{
                    **call, "pos": _pos(call["pos"]), "arg_kinds": tuple(call["arg_kinds"]),
                    "kw_kinds": tuple(tuple(k) for k in call["kw_kinds"]),
                    "interval_args": tuple(call["interval_args"]), "name_args": tuple(call["name_args"]),
                    "arg_names": tuple(call["arg_names"]),
                    "arg_callees": tuple(call["arg_callees"]), "kw_names": tuple(tuple(k) for k in call["kw_names"]),
                    "param_args": tuple(tuple(pair) for pair in call["param_args"]),
                    "none_args": tuple(call["none_args"]), "false_args": tuple(call["false_args"]),
                    "true_args": tuple(call["true_args"]),
                    "word_args": tuple(tuple(pair) for pair in call["word_args"]),
                    "setting_args": tuple(call["setting_args"]),
                })
                for call in data["calls"]
            ],
            "assigns": [Assign(**{**a, "calls": tuple(a["calls"]), "entries": tuple(a["entries"]), "pos": _pos(a["pos"])})
                        for a in data["assigns"]],
            "imports": [tuple(i) for i in data["imports"]],
            "self_sets": [(attribute, host) for attribute, host in data["self_sets"]],
            "unpacked": [(name, callee, position) for name, callee, position in data["unpacked"]],
        }
    )


def _scopes_from(data: dict) -> dict[str, Scope]:
    return {name: scope_from(scope) for name, scope in data.items()}


# ---------------------------------------------------------------------------------------------------- outlines
def dump_index(index: ModuleIndex) -> dict:
    return {
        "definitions": [
            [d.qualname, d.name, d.cls, d.start, d.end, d.is_class, d.code] for d in index.definitions.values()
        ],
        "skeleton": _plain(index.skeleton.scopes) if index.skeleton else None,
        "problem": _plain(index.problem) if index.problem else None,
        "aliases": index.aliases,
        "step_flags": sorted(index.step_flags),
        "on_flags": sorted(index.on_flags),
        "intervals": sorted(index.intervals),
        "values": sorted(index.values),
        "switches": sorted(index.switches),
        "class_names": index.class_names,
        "analysed": {name: _plain(scopes) for name, scopes in index._analysed.items()},
    }


def load_index(path: str, text: str, data: dict) -> ModuleIndex:
    lines = text.split("\n")
    index = ModuleIndex(path, text, aliases=dict(data["aliases"]), step_flags=frozenset(data["step_flags"]),
                        on_flags=frozenset(data["on_flags"]), lines=lines, changed=False,
                        intervals=frozenset((name, value) for name, value in data["intervals"]),
                        values=frozenset((name, value) for name, value in data["values"]),
                        switches=frozenset((name, value) for name, value in data["switches"]),
                        class_names=dict(data["class_names"]))
    for qualname, name, cls, start, end, is_class, code in data["definitions"]:
        index.definitions[qualname] = Definition(qualname, name, cls, start, end, is_class, code)
    if data["skeleton"] is not None:
        index.skeleton = FileLocal(_scopes_from(data["skeleton"]), set(index.step_flags), index.aliases)
    if data["problem"] is not None:
        index.problem = SyntaxProblem(**data["problem"])
    index._analysed = {name: _scopes_from(scopes) for name, scopes in data["analysed"].items()}
    return index


# ---------------------------------------------------------------------------------------------------- facts
def _frames(data: list) -> tuple[Frame, ...]:
    return tuple(Frame(*frame) for frame in data)


def dump_facts(facts: FileFacts) -> dict:
    return _plain(facts)


def load_facts(data: dict) -> FileFacts:
    """`dump_facts` read back (by field name: a field added to FileFacts in the middle cannot shift the others)."""
    functions = {}
    for name, f in data["functions"].items():
        reach = f["reach"]
        functions[name] = FunctionFacts(
            reach=Reach(reach["rank"], reach["likely"], _frames(
                [[fr["path"], fr["line"], fr["label"]] for fr in reach["chain"]]
            ), tuple(reach["flags"]), reach["reason"], reach["guessed"], reach["among"]) if reach else None,
            step_loops=frozenset(f["step_loops"]),
            loop_frames=tuple((index, Frame(frame["path"], frame["line"], frame["label"]))
                              for index, frame in f["loop_frames"]),
            epoch=f["epoch"],
            rollout_loops=frozenset(f["rollout_loops"]),
            gate_params=frozenset(f["gate_params"]),
            param_kinds=tuple(tuple(pair) for pair in f["param_kinds"]),
            unset_params=frozenset(f["unset_params"]),
            open_params=frozenset(f["open_params"]),
            called_every_step=f["called_every_step"],
            given_params=frozenset(f["given_params"]),
            false_params=frozenset(f["false_params"]),
            word_params=tuple((param, tuple(words)) for param, words in f["word_params"]),
        )
    return FileFacts(
        functions=functions,
        entries=data["entries"],
        hot_names=frozenset(data["hot_names"]),
        return_kinds=tuple(tuple(pair) for pair in data["return_kinds"]),
        on_flags=frozenset(data["on_flags"]),
        problem=tuple(data["problem"]) if data["problem"] else None,
        every_step_intervals=frozenset(data["every_step_intervals"]),
        option_values=tuple((option, tuple(words)) for option, words in data["option_values"]),
        off_flags=frozenset(data["off_flags"]),
        lightning_classes=frozenset(data["lightning_classes"]),
        batch_classes=frozenset(data["batch_classes"]),
        unit_intervals=frozenset(data["unit_intervals"]),
        copy_calls=tuple((func, tuple(positions), tuple(keywords)) for func, positions, keywords in data["copy_calls"]),
        host_attributes=frozenset(data["host_attributes"]),
        device_attributes=frozenset(data["device_attributes"]),
        layer_classes=frozenset(data["layer_classes"]),
        device_fed=data["device_fed"],
        batches_copied=data["batches_copied"],
        loop_batches_copied=data["loop_batches_copied"],
        used_by_code=data["used_by_code"],
        library_objects=tuple(tuple(pair) for pair in data["library_objects"]),
        device_kwargs=frozenset(data["device_kwargs"]),
        own_loaders=frozenset(data["own_loaders"]),
        nonblocking_movers=frozenset(data["nonblocking_movers"]),
        loader_factories=frozenset(data["loader_factories"]),
        trainer_loader_builders=frozenset(data["trainer_loader_builders"]),
        move_calls=tuple((func, tuple(positions), tuple(keywords)) for func, positions, keywords in data["move_calls"]),
        read_calls=tuple((func, tuple(positions), tuple(keywords)) for func, positions, keywords in data["read_calls"]),
        validation_off=data["validation_off"],
        asserts_off=data["asserts_off"],
        default_device_gpu=data["default_device_gpu"],
        torch_pin=str(data["torch_pin"]),
        list_returning=frozenset(data["list_returning"]),
        host_tensor_returning=frozenset(data["host_tensor_returning"]),
        cpu_project=data["cpu_project"],
        inference_only=data["inference_only"],
        syntax_checked=data["syntax_checked"],
    )


def dump_configs(facts: TrainingConfigs) -> dict:
    """One config file's facts (configs.config_file_facts) as JSON data."""
    return {"classes": sorted(facts.classes), "names": sorted(facts.names),
            "intervals": [list(i) for i in facts.intervals], "values": sorted(map(list, facts.values)),
            "switches": sorted(map(list, facts.switches)), "keys": sorted(facts.keys),
            "torch_pins": sorted(map(list, facts.torch_pins)), "python_optimize": sorted(facts.python_optimize)}


def load_configs(data: dict) -> TrainingConfigs:
    """`dump_configs` read back; KeyError, TypeError or ValueError for data of another shape."""
    return TrainingConfigs(
        frozenset(map(str, data["classes"])), frozenset(map(str, data["names"])),
        tuple((str(name), int(value)) for name, value in data["intervals"]),
        frozenset((str(name), str(value)) for name, value in data["values"]),
        frozenset((str(name), str(value)) for name, value in data["switches"]), frozenset(map(str, data["keys"])),
        frozenset((str(folder), str(pin)) for folder, pin in data["torch_pins"]),
        frozenset(map(str, data["python_optimize"])),
    )


def facts_digest(dumped: dict) -> str:
    """What a file's cached findings depend on besides its own text (its dumped facts, `dump_facts`)."""
    return hashlib.blake2b(json.dumps(dumped, sort_keys=True).encode(), digest_size=16).hexdigest()
