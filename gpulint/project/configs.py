"""What a project's shipped configuration says, read as text (no YAML parser; nothing in a config is ever run):

- the classes its configs build by name: `target: sgm.models.diffusion.DiffusionEngine` (ldm's
  `instantiate_from_config`), Hydra's `_target_:`, Lightning CLI's `class_path:`. Where a program builds its modules
  from configs, no Python file names the model it trains; the project model takes the classes its *training* configs
  name as built. A class only a sampling or inference config names (a folder or file named for one, by
  `vocab.is_training_path`) is not built by training. A registry's configs name classes bare (`criterion:
  DFINECriterion`): a registered class no training config names is not built;
- the values it gives intervals (`log_every: 1`, `--logging_steps 1`, `default=10`, `log_interval = 50`): a logging
  gate whose interval every shipped setting makes 1 runs every step (`every_step_intervals`);
- the words it gives options (`adv_loss: hinge`, `--pp_engine 1f1b`, `default="1f1b"`): a branch for a value that no
  shipped setting gives (`if args.pp_engine == "afab":`) is not the training a user runs (`option_values`);
- what it says of switches (`action="store_true"`, `use_fsdp: false`, `--use_ema`): a switch some setting turns off
  and none turns on (`off_switches`) guards code that shipped training does not run;
- the keywords a Python config gives each class it builds (`model = dict(type="CliffImageBodyModelEstimator",
  backbone=...)`): a constructor argument defaulting to None that no config gives leaves its attribute None, and the
  branches testing it do not run (`class_keywords`);
- the PyTorch its dependency files pin (`torch==1.8.1` in `requirements.txt`, `pytorch=1.10` in a conda
  `environment.yml`, `torchvision==0.9.1` in `setup.py`): where the defaults differ by version (`zero_grad()` keeps
  the gradients below 2.0), the project runs the version it pins (`torch_pin`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from gpulint.project.vocab import CONFIG_ROOTS, SHORT_INTERVAL, is_training_path, name_parts

# A config larger than this is data (a vocabulary, a dataset index), not a description of what to build.
MAX_CONFIG_BYTES = 512 * 1024
_TARGET = re.compile(r"""^[ \t-]*["']?(?:_target_|target|class_path)["']?[ \t]*:[ \t]*["']?([A-Za-z_][\w.]*)""",
                     re.MULTILINE)


# ... and a module path given under another key that names what a builder makes (`obj:`, `class:`, `type:`).
_DOTTED_CLASS = re.compile(
    r"""^[ \t-]*["']?(?:obj|_obj_|class|cls|type)["']?[ \t]*:[ \t]*["']?([A-Za-z_]\w*(?:\.\w+){2,})["']?[ \t]*$""",
    re.MULTILINE)


# Names of intervals (`log_every`, `logging_steps`, `print_freq`, `log_interval`) and the settings that give them a
# whole number: argparse defaults, assignments, keyword arguments and annotated fields (`x: int = 1`), YAML and JSON
# keys, command-line options in scripts and READMEs.
# TD3's `--policy_delay 2`: the actor and targets update every second critic step.
_INTERVAL_PARTS = frozenset(
    {"every", "interval", "freq", "frequency", "steps", "step", "period", "iters", "iter", "delay"})
_ARGPARSE_DEFAULT = re.compile(r"""add_argument\(\s*["']-{1,2}([\w-]+)["'][^)]*?\bdefault\s*=\s*(\d+)\b(?![.\w])""")
_OPTION = re.compile(r"--([A-Za-z][\w-]*)(?:[ \t]+|=)(\d+)\b(?![.\w])")
# A whole number after `=` or `:` (`log_every = 1`, `log_every: 1`, `log_every: int = field(default=1`), whose name is
# read before it: searched from the value, as a pattern starting with a name is tried at every letter of a file.
_VALUE = re.compile(r"[=:][ \t]*(?:field\(\s*default\s*=\s*)?(\d+)\b(?![.\w])")
_NAME_BEFORE_VALUE = re.compile(r"""([A-Za-z_][\w-]*)["']?[ \t]*(?::[^=\n:]*)?[ \t]*$""")
_KEY_BEFORE_VALUE = re.compile(r"""([A-Za-z_][\w-]*)["']?[ \t]*$""")


def interval_settings(text: str) -> set[tuple[str, int]]:
    """The whole-number values a text gives names of intervals: `{("log_every", 1), ("print_freq", 10)}`."""
    found: list[tuple[str, str]] = []
    if "add_argument" in text:
        found += _ARGPARSE_DEFAULT.findall(text)
    if "--" in text:
        found += _OPTION.findall(text)
    for match in _VALUE.finditer(text):
        start = match.start()
        name = _NAME_BEFORE_VALUE.search(text, max(0, start - 80), start)
        if name is not None:
            found.append((name.group(1), match.group(1)))
    settings = set()
    for name, value in found:
        name = name.replace("-", "_")
        if name_parts(name) & _INTERVAL_PARTS:
            settings.add((name, int(value)))
    return settings


def argparse_intervals(text: str) -> set[tuple[str, int]]:
    """The whole-number defaults a script's own command line gives intervals (`--log_interval`, default 1): what the
    script's gates run on unless a command says otherwise."""
    if "add_argument" not in text:
        return set()
    return {(name.replace("-", "_"), int(value)) for name, value in _ARGPARSE_DEFAULT.findall(text)
            if name_parts(name.replace("-", "_")) & _INTERVAL_PARTS}


# The share of a name's shipped settings that must be 1 for its gate to run every step: open-instruct's 146 training
# configs log every step, and three of its scripts every 10.
_EVERY_STEP_SHARE = 0.8


def every_step_intervals(settings: Iterable[tuple[str, int]], below: int = SHORT_INTERVAL) -> frozenset[str]:
    """The intervals shipped settings make 1 or a few steps (below SHORT_INTERVAL; one setting per file that gives
    it, `interval_settings`): `step % args.logging_steps == 0` gates nothing where the training scripts pass
    `--logging_steps 1`, and little where TD3 updates its targets every `policy_freq=2` steps. `below=2`: the
    intervals they make exactly 1 (an accumulation of one step accumulates nothing). Where more
    than a few settings give another value (a default of 10, half the scripts), the gate stays."""
    ones: dict[str, int] = {}
    total: dict[str, int] = {}
    for name, value in settings:
        total[name] = total.get(name, 0) + 1
        ones[name] = ones.get(name, 0) + (0 < value < below)  # 0 turns the gated work off
    return frozenset(name for name, n in total.items() if ones[name] >= _EVERY_STEP_SHARE * n)


# A class a registry builds by its bare name: `criterion: DFINECriterion`, `{type: RandomZoomOut, p: 0.5}`.
_NAMED_CLASS = re.compile(r""":[ \t]*["']?([A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*)["']?[ \t]*(?=[,}\]\n#]|$)""", re.MULTILINE)
_NOT_CLASS_NAMES = frozenset({"True", "False", "None", "Null", "NULL", "TRUE", "FALSE"})


def registry_keys(text: str) -> set[str]:
    """The lower-case words a YAML or JSON config gives as values (`arch: blip2_opt`, `"task": "captioning"`): the
    keys a registry builds its classes by (`@registry.register_model("blip2_opt")`)."""
    return {word for word in _REGISTRY_KEY.findall(text) if word not in _NOT_KEYS}


_REGISTRY_KEY = re.compile(r""":[ \t]*["']?([a-z][a-z0-9_]*[a-z0-9])["']?[ \t]*(?=[,}\]\n#]|$)""", re.MULTILINE)
_NOT_KEYS = frozenset({"true", "false", "null", "none", "yes", "no"})


def class_keywords(text: str) -> tuple[dict[str, set[str]], set[str]]:
    """The keywords a Python config (mmengine's) gives each class it names: `dict(type="CliffHead", in_channels=2048)`
    gives `CliffHead` `in_channels`; `{"type": "L1Loss", "loss_weight": 1.0}` too. Also the keywords of dicts naming
    no class, which may fill any class's: a child config's `model = dict(registration=...)` merges into the `model`
    its `_base_` file builds. Nothing for a file that does not parse."""
    by_class: dict[str, set[str]] = {}
    loose: set[str] = set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return by_class, loose
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            entries = [(k.arg, k.value) for k in node.keywords if k.arg]
        elif isinstance(node, ast.Dict):
            entries = [(k.value, v) for k, v in zip(node.keys, node.values)
                       if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        else:
            continue
        named = next((_class_named(value) for key, value in entries if key == "type"), None)
        given = {key for key, _ in entries if key != "type"}
        if named:
            by_class.setdefault(named, set()).update(given)
        else:
            loose |= given
    return by_class, loose


def _class_named(node: ast.AST) -> str:
    """The class a config's `type` names: `"CliffHead"`, `CliffHead`, `heads.CliffHead` -> "CliffHead"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rsplit(".", 1)[-1]
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def named_classes(text: str) -> set[str]:
    """The bare class names a YAML or JSON config gives as values (for a registry to build)."""
    return {name for name in _NAMED_CLASS.findall(text) if name not in _NOT_CLASS_NAMES}


# The words and numbers settings give options. Python and JSON: a quoted word or a number after `=` or `:` that ends
# the value (`adv_loss="hinge",`, `"adv_loss": "hinge"`, `clip_grad=0.1`; not `mode = "train" if x else "eval"`),
# and argparse's `default="hinge"` or `default=0.1`. YAML also gives bare words (`adv_loss: hinge`); scripts and
# READMEs give options (`--pp_engine 1f1b`) and Hydra overrides (`solver.adv_loss=mse`).
_QUOTED_WORD = re.compile(r"""[=:][ \t]*(?:field\(\s*default\s*=\s*)?["']([\w.+/-]{1,40})["'][ \t]*(?=[,)\]}\n#]|$)""")
_BARE_WORD = re.compile(r""":[ \t]*([A-Za-z_][\w.+-]{0,39})[ \t]*(?=#|$)""", re.MULTILINE)
_ARGPARSE_WORD = re.compile(
    r"""add_argument\(\s*["']-{1,2}([\w-]+)["'][^)]*?\bdefault\s*=\s*"""
    r"""(?:["']([\w.+/-]{1,40})["']|(-?[\d.]+(?:e-?\d+)?)\b)""")
# A number after `=` or `:` that ends the value (`clip_grad: 0.1`, `max_norm=0,`).
_NUMBER_VALUE = re.compile(r"""[=:][ \t]*(?:field\(\s*default\s*=\s*)?(-?\d[\d.]*(?:e-?\d+)?)[ \t]*(?=[,)\]}\n#]|$)""")
_OPTION_WORD = re.compile(r"--([A-Za-z][\w-]*)(?:[ \t]+|=)[\"']?(\w[\w.+/-]{0,39})")
_OVERRIDE_WORD = re.compile(r"(?<![\w.=/-])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)=[\"']?(\w[\w.+/-]{0,39})")


# What settings say of on/off switches, as "true", "false", "zero" (an attribute set to 0) or "set" (given a value
# the text cannot read):
# argparse's `store_true` (off unless a command passes it) and boolean defaults, `name: bool = False` fields,
# YAML/JSON booleans, `--name` alone in a command (on), `name=True` keywords, and `args.name = <expression>`.
_ARGPARSE_SWITCH = re.compile(
    r"""add_argument\(\s*((?:["']-{1,2}[\w-]+["']\s*,\s*)+)((?:[^()]|\([^()]*\))*?)\b"""
    r"""(?:action\s*=\s*["']store_(true|false)["']|default\s*=\s*(True|False|[01])\b(?![.\w]))""")
_ARGPARSE_NAME = re.compile(r"""["'](-{1,2})([\w-]+)["']""")
_ARGPARSE_DEST = re.compile(r"""\bdest\s*=\s*["'](\w+)["']""")
# `type=int, default=0, choices=[0, 1]` (SAC extensions' `-per`, `-munchausen`): a switch written as a number.
_ZERO_ONE_CHOICES = re.compile(r"""\bchoices\s*=\s*[\[(]\s*0\s*,\s*1\s*[\])]""")
# Matched from the distinctive part on, with the name read off the text before it (`_word_before`): a pattern
# starting with `\b(\w+)` is tried at every word of a file, which made these two a third of reading the settings.
_BOOL_FIELD = re.compile(r"""[ \t]*:[ \t]*bool[ \t]*=[ \t]*(?:field\(\s*default\s*=\s*)?(True|False)\b""")
_BOOL_KEYWORD = re.compile(r"""[(,]\s*(\w+)[ \t]*=[ \t]*(True|False)[ \t]*(?=[,)\n])""")
_ATTRIBUTE_SET = re.compile(r"""\.(\w+)[ \t]*=[ \t]*(?!=)(True\b|False\b|[^\n]*)""")
# `self.collect_stats = collect_stats`, `(c_f.COLLECT_STATS if collect_stats is None else collect_stats)`: the
# attribute keeps what the constructor is given, or a module default; those settings say what it is.
_PASSED_THROUGH = re.compile(
    r"""[ \t(]*(?:([\w.]+)[ \t]+if[ \t]+(\w+)[ \t]+is[ \t]+None[ \t]+else[ \t]+)?(\w+)[ \t)]*""")
# `COLLECT_STATS = False` at a module's top: a library-wide default its objects read; `enable_amp = True` in a
# Python config file (Pointcept's, mmcv's), which sets the switch of that name.
_MODULE_SWITCH = re.compile(r"""^([A-Za-z_]\w*)[ \t]*=[ \t]*(True|False)[ \t]*(?:#.*)?$""", re.MULTILINE)
# `opt['dist'] = True` (BasicSR's options, set by the launcher): a setting of the switch the key names.
_KEY_SWITCH_SET = re.compile(r"""\[[ \t]*["'](\w+)["'][ \t]*\][ \t]*=[ \t]*(True|False)\b""")
_BOOL_KEY = re.compile(r"""^[ \t-]*["']?(\w+)["']?[ \t]*:[ \t]*(true|false|True|False)\b""", re.MULTILINE)
# A flag may close a quoted piece of a command (`OPTS+=" --student-gen"`, DistiLLM's scripts) or precede a quoted
# option (`--fp16 "--seed" 1`).
_FLAG_ALONE = re.compile(r"""--([A-Za-z][\w-]*)(?=[ \t]*["']?[ \t]*(?:\\?\n|$|["']?--|[;&|]))""", re.MULTILINE)
_FLAG_WORDS = {"true": "true", "false": "false", "1": "true", "0": "false"}
# A one-dash option given 0 or 1 in a command (`python run.py -per 1`): argparse's numbered switches.
_SHORT_OPTION_SWITCH = re.compile(r"(?<![\w-])-([A-Za-z][\w-]*)[ \t]+([01])(?![\w.])")
# An override in a command: Hydra's `model.use_ema=true`, tacotron2's `--hparams=distributed_run=True,fp16_run=True`.
_OVERRIDE_SWITCH = re.compile(r"(?<![\w-])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)=(true|false|True|False)\b")


def switch_settings(text: str, path: str) -> set[tuple[str, str]]:
    """What a file's settings say of switches: `{("use_ema", "false"), ("amp", "true"), ("x", "set")}`."""
    found: list[tuple[str, str]] = []
    suffix = path.rsplit(".", 1)[-1]
    if suffix == "py":
        found += _argparse_switches(text) if "add_argument" in text else []
        if "bool" in text:
            found += [(name, match.group(1).lower()) for match in _BOOL_FIELD.finditer(text)
                      if (name := _word_before(text, match.start()))]
        found += [(name, value.lower()) for name, value in _BOOL_KEYWORD.findall(text)]
        for match in _ATTRIBUTE_SET.finditer(text):
            name, value = match.groups()
            if value.strip() == "(":  # the value spans lines
                value = _parenthesised(text, match.end(2) - len(value) + value.index("("))
            if value in ("True", "False"):
                found.append((name, value.lower()))
            elif value.split("#", 1)[0].strip() == "0":
                found.append((name, "zero"))
            elif not _passed_through(name, value):
                found.append((name, "set"))
        found += [(name.lower(), value.lower()) for name, value in _MODULE_SWITCH.findall(text)]
        found += [(name, value.lower()) for name, value in _KEY_SWITCH_SET.findall(text)] if "']" in text \
            or '"]' in text else []
        found += [(name, value.lower()) for name, value in _GET_WITH_DEFAULT.findall(text)] if ".get(" in text else []
    elif suffix in ("yaml", "yml", "json"):
        found += [(name, value.lower()) for name, value in _BOOL_KEY.findall(text)]
    else:
        found += [(name, "true") for name in _FLAG_ALONE.findall(text)]
        found += [(name, _FLAG_WORDS[value.lower()]) for name, value in _OPTION_WORD.findall(text)
                  if value.lower() in _FLAG_WORDS]
        found += [(name, value.lower()) for name, value in _OVERRIDE_SWITCH.findall(text)]
        found += [(name, _FLAG_WORDS[value]) for name, value in _SHORT_OPTION_SWITCH.findall(text)]
    return {(name.replace("-", "_"), value) for name, value in found}


# A command running a Python file: `python -O twm/main.py`, `python3.10 -u train.py`; the interpreter's options are
# group 1. Launchers that start the interpreter themselves (`torchrun`, `accelerate launch`, `deepspeed`) give none.
_PYTHON_COMMAND = re.compile(r"(?<![\w/.-])(?:python[\d.]*((?:[ \t]+-[A-Za-z]+)*)|torchrun|deepspeed"
                             r"|accelerate[ \t]+launch|torch\.distributed\.(?:launch|run))[ \t]+"
                             r"(?:--?[\w-]+(?:[= \t]+[\w.:/-]+)?[ \t]+)*?([\w./-]+\.py)\b")


def python_optimize_settings(text: str) -> set[str]:
    """Whether the commands of a script or README that run a training file run Python with `-O` (TWM's
    `python -O twm/main.py`): "on", "off" or both. Under `-O` Python skips `assert` statements, and
    torch.distributions leave their argument checks off (their default is `__debug__`)."""
    if ".py" not in text:
        return set()
    return {"on" if "O" in options.replace("-", "") else "off"
            for options, script in _PYTHON_COMMAND.findall(text) if is_training_path(script)}


def _argparse_switches(text: str) -> list[tuple[str, str]]:
    """argparse's switches and what their defaults say (`store_true`: "false"), each under the name the program
    reads (`dest`: the first long option, `-dist, --distributional` -> "distributional")."""
    found = []
    for match in _ARGPARSE_SWITCH.finditer(text):
        names, _, store, default = match.groups()
        call = _parenthesised(text, match.start() + len("add_argument"))
        if default in ("0", "1") and not _ZERO_ONE_CHOICES.search(call):
            continue  # a number, not a switch
        options = _ARGPARSE_NAME.findall(names)
        dest = _ARGPARSE_DEST.search(call)
        name = dest.group(1) if dest else next((name for dashes, name in options if dashes == "--"), options[0][1])
        value = {"true": "false", "false": "true"}[store] if store else {"0": "false", "1": "true"}.get(default, default)
        found.append((name, value.lower()))
    return found


# `config.get('debug_nan', False)`: a switch read with its default (a config that never names it leaves it there).
_GET_WITH_DEFAULT = re.compile(r"""\b(?:args|config|cfg|conf|opt|opts|hparams)\.get\(\s*["'](\w+)["']\s*,\s*(True|False)\s*\)""")


def _passed_through(name: str, value: str) -> bool:
    """Does an attribute keep the same-named value it is given (`self.x = x`, `X if x is None else x`)?"""
    match = _PASSED_THROUGH.fullmatch(value.strip())
    if match is None:
        return False
    default, tested, kept = match.groups()
    return kept == name and (default is None or (tested == name and default.rsplit(".", 1)[-1].lower() == name))


def _parenthesised(text: str, start: int) -> str:
    """The text of the parenthesised expression opening at `start` (at most 400 characters), parentheses kept."""
    depth = 0
    for index in range(start, min(len(text), start + 400)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return " ".join(text[start:index + 1].split())
    return text[start:start + 400]


def off_switches(settings: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The switches some setting turns off and none turns on or sets to what the text cannot read (an attribute set
    to 0, "zero", agrees with a switch written as a number: SAC extensions' `self.per = 0` for `-per` 0)."""
    said: dict[str, set[str]] = {}
    for name, value in settings:
        said.setdefault(name, set()).add(value)
    return frozenset(name for name, values in said.items() if values - {"zero"} == {"false"})


# An option the program assigns on a configuration object (`args.optimizer_type = ...`, whatever the value): its
# settings do not tell which branch runs.
SET_IN_CODE = "\0set"
_CONFIG_ATTRIBUTE_SET = re.compile(r"\.(\w+)[ \t]*=(?!=)")  # the root before the dot: `_word_before`


# fairseq's architectures give an option its default where no command gave it one: `args.pbc_approach =
# getattr(args, "pbc_approach", "none")` keeps what was given, else sets "none".
_DEFAULT_KEPT = re.compile(r"""[ \t]*(?:safe_)?getattr\(\s*\w+\s*,\s*["'](\w+)["']\s*,\s*"""
                           r"""(?:["']([\w.+/-]{1,40})["']|(-?\d[\d.]*(?:e-?\d+)?|True|False))\s*\)""")


def _value_set_in_code(text: str, match: re.Match) -> str:
    """The word an assignment to a configuration's option gives it: the default of `args.x = getattr(args, "x",
    "none")`, else `SET_IN_CODE`."""
    kept = _DEFAULT_KEPT.match(text, match.end())
    if kept is not None and kept.group(1) == match.group(1):
        return kept.group(2) or kept.group(3)
    return SET_IN_CODE


def _word_before(text: str, end: int) -> str:
    """The word that ends where `end` is in `text` ("" when none does)."""
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:end]


# absl's `flags.DEFINE_enum("mode", None, ["train", "eval"], ...)`: with no default, a command gives one of them.
_ABSL_ENUM_NO_DEFAULT = re.compile(r"""DEFINE_enum\(\s*["'](\w+)["']\s*,\s*None\s*,\s*\[([^\]]*)\]""")
_QUOTED = re.compile(r"""["']([\w.+/-]{1,40})["']""")
# Keyword arguments of library calls set the library's parameters, not the program's options: `mode="bilinear"` in
# `F.interpolate(...)` says nothing of `if FLAGS.mode == "train":`.
_LIBRARY_ROOTS = frozenset({"F", "torch", "nn", "np", "numpy", "functional", "math", "jnp", "jax", "tf", "scipy",
                            "cv2", "transforms", "T", "plt", "os", "logging", "warnings", "re", "json", "yaml"})
_CALLEE_BEFORE = re.compile(r"([A-Za-z_][\w.]*)[ \t]*$")


def _library_keyword(text: str, start: int) -> bool:
    """Is the name at `start` a keyword argument of a call to a library function (`F.interpolate(x, mode=...)`)?"""
    depth = 0
    for index in range(start - 1, max(-1, start - 400), -1):
        char = text[index]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                if char != "(":
                    return False
                callee = _CALLEE_BEFORE.search(text, max(0, index - 80), index)
                return callee is not None and callee.group(1).split(".", 1)[0] in _LIBRARY_ROOTS
            depth -= 1
    return False


def option_values(text: str, path: str) -> set[tuple[str, str]]:
    """The words a file's settings give names (`{("adv_loss", "hinge")}`); which forms are read depends on the kind
    of file (`path`), as a word after a colon is a YAML value but a Python annotation."""
    found: list[tuple[str, str]] = []
    suffix = path.rsplit(".", 1)[-1]
    if suffix in ("py", "json", "yaml", "yml"):
        for pattern in (_QUOTED_WORD, _BARE_WORD, _NUMBER_VALUE) if suffix in ("yaml", "yml") else (
                _QUOTED_WORD, _NUMBER_VALUE):
            for match in pattern.finditer(text):
                start = match.start()
                # `"kind": "l1"` is a key's value; `mode: str = "train"` an annotated name's.
                before = _KEY_BEFORE_VALUE if text[start] == ":" else _NAME_BEFORE_VALUE
                name = before.search(text, max(0, start - 80), start)
                if name is not None and not (suffix == "py" and _library_keyword(text, name.start(1))):
                    found.append((name.group(1), match.group(1)))
        if "DEFINE_enum" in text:
            found += [(name, word) for name, choices in _ABSL_ENUM_NO_DEFAULT.findall(text)
                      for word in _QUOTED.findall(choices)]
        if "add_argument" in text:
            found += [(name, word or number) for name, word, number in _ARGPARSE_WORD.findall(text)]
        if suffix == "py":  # `neox_args.optimizer_type = "adam"`: the program sets it, from what no text says
            found += [(match.group(1), _value_set_in_code(text, match))
                      for match in _CONFIG_ATTRIBUTE_SET.finditer(text)
                      if name_parts(_word_before(text, match.start())) & CONFIG_ROOTS]
    else:
        text = _shell_expanded(text) if "$" in text else text
        if "--" in text:
            found += _OPTION_WORD.findall(text)
        found += _OVERRIDE_WORD.findall(text)
        # (a value made of a variable the script does not set, `--criterion $1`: no text says it)
        found = [(name, SET_IN_CODE if _UNSET_VARIABLE in value else value) for name, value in found]
    return {(name.replace("-", "_"), value) for name, value in found}


# A script's variables (`CRITERION=diffusion_loss`, then `--criterion ${CRITERION}`), set once; `${ARCH:-base}`.
_SHELL_ASSIGNMENT = re.compile(r"""^[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)=["']?([\w.+/-]*)["']?[ \t]*(?:#.*)?$""",
                               re.MULTILINE)
_SHELL_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([\w.+/-]*))?\}|\$(\w+)")
_UNSET_VARIABLE = "gpulintunsetvariable"


def _shell_expanded(text: str) -> str:
    """A script's text with the variables it sets once put in their places (`--arch graphormer_diff_${ARCH}` after
    `ARCH=base`); a variable it sets to several values, or not at all (`$1`), becomes `_UNSET_VARIABLE`."""
    values: dict[str, set[str]] = {}
    for name, value in _SHELL_ASSIGNMENT.findall(text):
        values.setdefault(name, set()).add(value)

    def value_of(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        given = values.get(name, {match.group(2)} if match.group(2) else set())
        return next(iter(given)) if len(given) == 1 else _UNSET_VARIABLE

    return _SHELL_VARIABLE.sub(value_of, text)


@dataclass(frozen=True)
class TrainingConfigs:
    classes: frozenset[str] = frozenset()  # dotted names the training configs build
    names: frozenset[str] = frozenset()  # bare class names they give a registry (`named_classes`)
    intervals: tuple[tuple[str, int], ...] = ()  # the values they give intervals, each file's (`interval_settings`)
    values: frozenset[tuple[str, str]] = frozenset()  # the words they give options (`option_values`)
    switches: frozenset[tuple[str, str]] = frozenset()  # what they say of switches (`switch_settings`)
    keys: frozenset[str] = frozenset()  # the lower-case words they give as values (`registry_keys`)
    # (folder, "major.minor") of the dependency files pinning PyTorch (`torch_pin`): "" is the project's root
    torch_pins: frozenset[tuple[str, str]] = frozenset()
    # whether the commands of scripts and READMEs that run training files run Python with `-O`: "on", "off"
    # (`python_optimize_settings`)
    python_optimize: frozenset[str] = frozenset()


# The files that say which packages a project installs: pip's requirements, setuptools', poetry's and PEP 621's
# metadata, conda environments.
_DEPENDENCY_FILE = re.compile(r"(?:^|/)(?:[\w.-]*requirements[\w.-]*\.txt|setup\.py|setup\.cfg|pyproject\.toml|"
                              r"(?:environment[\w.-]*|conda[\w.-]*|env)\.ya?ml)$")
# `torch==1.8.1`, `torch>=1.7,<1.9`, `torch==1.13.1+cu117`, `pytorch=1.10.0` (conda), `torch~=1.12`, poetry's
# `torch = "^1.13"`; and torchvision's pins, which fix the torch they build against (0.15 is the first for torch
# 2.0). The name, then its specifiers up to the end of the requirement.
_TORCH_REQUIREMENT = re.compile(r"""(?<![\w.\[-])(?:py)?torch(vision)?(?:\[[\w,]*\])?["']?[ \t]*(=?[ \t]*["']?[=<>~^!]*[ \t]*\d[^"'\n;#]*)""")
# A conda environment's list of channels, up to the next top-level key.
_CONDA_CHANNELS = re.compile(r"^channels:.*\n(?:[ \t-].*\n|\n)*", re.MULTILINE)
# A torch requirement naming no version: a requirements line (`torch`, conda's `- pytorch`) or a quoted one in
# setup.py or pyproject.toml (`'torch'`, `"torch[opt]"`); not `import torch`.
_OPEN_TORCH = re.compile(r"""(?:^[ \t-]*|["'])(?:py)?torch(?:\[[\w,]*\])?(?:["']|[ \t]*$)""", re.MULTILINE)
# One specifier (`>=1.7`, `<1.9`, `==1.8.1`, conda's `=1.10`, poetry's `^1.13` or a bare `1.13.1`). Those that bound
# the version from above pin it; a lower bound alone (`torch>=1.7`) pins nothing: pip takes the newest.
_SPECIFIER = re.compile(r"(==|=|~=|<=|<|>=|>|!=|\^)?(\d+)(?:\.(\d+))?")
_UPPER_BOUNDS = frozenset({"==", "=", "~=", "<=", "<", "^", ""})


# The suffixes of dependency files that are no configs (read for their pins alone, by name: `is_dependency_file`).
DEPENDENCY_SUFFIXES = (".txt", ".toml", ".cfg")


def is_dependency_file(path: str) -> bool:
    """`requirements.txt`, `requirements/train.txt`, `setup.py`, `pyproject.toml`, `environment.yml`."""
    return bool(_DEPENDENCY_FILE.search(path)) or path.startswith("requirements/") and path.endswith(".txt")


def torch_pin(text: str) -> str | None:
    """The newest PyTorch a dependency file lets the project install, as "major.minor": None where it requires no
    torch, "" where some requirement leaves the version open (`torch`, `torch>=1.7`; horovod's `setup.py` requires
    `torch` and pins `torch==1.4.0` only for its developers), else the highest of its torch (or torchvision)
    requirements' upper bounds."""
    text = _CONDA_CHANNELS.sub("", text)  # `channels: [pytorch, conda-forge]` names where to look, not a package
    bounds: list[tuple[int, int] | None] = []
    for match in _TORCH_REQUIREMENT.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start:match.start()].lstrip().startswith("#"):
            continue  # a commented-out pin
        vision, specifiers = match.groups()
        bounds.append(_upper_bound(specifiers, bool(vision)))
    bounds += [None for _ in _OPEN_TORCH.finditer(text)]
    if not bounds:
        return None
    if None in bounds:
        return ""
    major, minor = max(bound for bound in bounds if bound is not None)
    return f"{major}.{minor}"


def _upper_bound(specifiers: str, vision: bool) -> tuple[int, int] | None:
    """The lowest upper bound of one requirement's specifiers (`>=1.7,<1.9`: 1.8), as torch's version (torchvision
    0.N builds against torch 1.(N-1) up to 0.14, 0.15 onwards against 2.x); None where none bounds it."""
    found: list[tuple[int, int]] = []
    for specifier in specifiers.replace(" ", "").replace("\t", "").lstrip("=\"'").split(","):
        if (parsed := _SPECIFIER.match(specifier)) is None or (parsed.group(1) or "") not in _UPPER_BOUNDS:
            continue
        operator, major, minor = parsed.groups()
        version = (int(major), int(minor or 0))
        if operator == "<":  # `torch<2`: any 1.x; `torch<1.10`: 1.9 at most
            version = (version[0] - 1, 99) if not minor else (version[0], version[1] - 1)
        if vision:
            if version[0] != 0:
                continue
            version = (1, version[1] - 1) if version[1] < 15 else (2, version[1] - 15)
        found.append(version)
    return min(found) if found else None


def pins_by_folder(pins: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The pins of several dependency files (`dependency_pins`) by folder: the highest where a folder's files all pin
    PyTorch, "" where one of them leaves it open."""
    found: dict[str, str] = {}
    for folder, pin in sorted(set(pins)):
        known = found.get(folder)
        if known is None:
            found[folder] = pin
        else:
            found[folder] = max(known, pin, key=pin_version) if known and pin else ""
    return found


def pin_version(pin: str) -> tuple[int, ...]:
    """"1.13" -> (1, 13), for comparing pins."""
    return tuple(int(part) for part in pin.split("."))


def dependency_pins(text: str, display: str) -> frozenset[tuple[str, str]]:
    """For a dependency file that requires PyTorch: (its folder, `torch_pin`), "" for a version left open."""
    if not is_dependency_file(display) or (pin := torch_pin(text)) is None:
        return frozenset()
    return frozenset({(display.rpartition("/")[0], pin)})


# A module and a class given under two keys, one line after the other (Dual Diffusion's `"module_trainer":
# {"package": "training.module_trainers.dae_trainer_d3", "class": "DAETrainer_D3"}`, for `importlib.import_module`).
_PACKAGE_THEN_CLASS = re.compile(
    r"""["']?(?:package|module)["']?[ \t]*:[ \t]*["']?([A-Za-z_]\w*(?:\.\w+)*)["']?[ \t]*,?[ \t]*\r?\n"""
    r"""[ \t]*["']?(?:class|class_name|cls)["']?[ \t]*:[ \t]*["']?([A-Za-z_]\w*)["']?""")


# ... or as a pair in a list (its older configs' `"module_trainer_class": ["training.module_trainers.unet_trainer",
# "UNetTrainer"]`).
_MODULE_CLASS_PAIR = re.compile(r"""\[[ \t]*["']([A-Za-z_]\w*(?:\.\w+)+)["'][ \t]*,[ \t]*["']([A-Z]\w*)["'][ \t]*\]""")


def classes_in(text: str) -> set[str]:
    """The dotted class names a config's `target:` lines build (`sgm.models.diffusion.DiffusionEngine`), the
    dotted paths of other keys that name what to build (3D-Speaker's `obj: speakerlab.loss.margin_loss.ArcMarginLoss`),
    and a module and a class named apart (`package:` then `class:`, or `["pkg.module", "Class"]`)."""
    found = set(_TARGET.findall(text)) | set(_DOTTED_CLASS.findall(text))
    if "class" in text:
        found |= {f"{module}.{name}" for module, name in _PACKAGE_THEN_CLASS.findall(text)}
    if "[" in text:
        found |= {f"{module}.{name}" for module, name in _MODULE_CLASS_PAIR.findall(text)}
    return found


def is_training_config(path: str) -> bool:
    """`configs/example_training/sd.yaml` is; `configs/inference/sv4d.yaml` and `sampling.yaml` are not. A folder
    named `sample` holds sample configs (torchdistill's `configs/sample/ilsvrc2012/rkd/*.yaml`), not sampling ones."""
    folder, _, name = path.rpartition("/")
    kept = [part for part in folder.split("/") if part and part not in _SAMPLE_FOLDERS]
    return is_training_path("/".join([*kept, name.rsplit(".", 1)[0] + ".py"]))


_SAMPLE_FOLDERS = frozenset({"sample", "samples"})


def config_bytes(path: Path) -> bytes | None:
    """A config file's bytes; None for one that cannot be read or is too large to be a config."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def config_text(data: bytes) -> str:
    """A config's text as text-mode reading gives it (undecodable bytes replaced, newlines made `\\n`)."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def config_file_facts(text: str, display: str) -> TrainingConfigs:
    """What one config file says (`display`: its path as gpulint shows it, which tells its kind and whether it
    configures training). `united` joins the files' facts."""
    # Any shipped setting may choose an option (a benchmark's script, an inference config): reading more of
    # them only keeps more branches that the training may take.
    pins = dependency_pins(text, display)
    if display.endswith(DEPENDENCY_SUFFIXES):
        return TrainingConfigs(torch_pins=pins)  # a dependency file, and no more
    values = frozenset(option_values(text, display))
    switches = frozenset(switch_settings(text, display))
    commands = frozenset(python_optimize_settings(text)) if display.endswith((".sh", ".md")) else frozenset()
    if not is_training_config(display):
        return TrainingConfigs(values=values, switches=switches, torch_pins=pins, python_optimize=commands)
    classes = frozenset(classes_in(text))
    names = keys = frozenset()
    if display.endswith((".yaml", ".yml", ".json", ".jsonnet", ".libsonnet")):  # (AllenNLP's configs: jsonnet)
        names, keys = frozenset(named_classes(text)), frozenset(registry_keys(text))
    return TrainingConfigs(classes, names, tuple(sorted(interval_settings(text))), values, switches, keys, pins,
                           commands)


def united(parts: Iterable[TrainingConfigs]) -> TrainingConfigs:
    """The facts of many config files as one (their intervals in the order of the files)."""
    parts = list(parts)
    return TrainingConfigs(
        frozenset().union(*(p.classes for p in parts)), frozenset().union(*(p.names for p in parts)),
        tuple(setting for p in parts for setting in p.intervals), frozenset().union(*(p.values for p in parts)),
        frozenset().union(*(p.switches for p in parts)), frozenset().union(*(p.keys for p in parts)),
        frozenset().union(*(p.torch_pins for p in parts)), frozenset().union(*(p.python_optimize for p in parts)),
    )
