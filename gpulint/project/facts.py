"""What the project model tells the engine about one file, and how often a piece of code runs.

The model (model.py) decides, for every function it reaches, how the training step reaches it: every step, on some
steps (a gate), in the training program but not per step (setup, epoch ends), or only from cold code; with what
confidence, through which calls (the chain a finding shows), and which of its loops are step loops. `state_at` then
says how often the code at one position runs, from that and the local regions (local.py) around it. The model uses
it for call sites while it propagates; the engine for the nodes rules report.

Everything here is plain data (sent to the worker processes) and imports no parser.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from gpulint.project.configs import SET_IN_CODE
from gpulint.project.local import Pos, Region, Scope, is_short_interval, names_a_gate
from gpulint.project.vocab import NOT_TRAINING_SWITCH_PARTS, OFFLOAD_SWITCH_PARTS, is_cold_method, name_parts

PER_STEP, GATED, PROGRAM, COLD = 0, 1, 2, 3
# A guess among more candidates than this (forwards or methods the object's unknown class may have) makes a finding
# reached only through it `possible`, not `likely`: on fresh batches 95-98 such findings were real 60 times in 529
# (11%; 3-44% by batch), the others 62% (a project's zoo of backbones, pipelines and layers, one of them trained).
WIDE_GUESS = 20
RANK_NAMES = {PER_STEP: "per step", GATED: "gated", PROGRAM: "in the training program", COLD: "cold"}


@dataclass(frozen=True)
class Frame:
    """One step of a chain: the code at path:line, and what it is (`loop over train_loader`, `Trainer.step()`)."""

    path: str
    line: int
    label: str

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "name": self.label}

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.label}"


@dataclass(frozen=True)
class Reach:
    """How the training step reaches a function."""

    rank: int
    likely: bool = False  # through a guess: a call the model could not resolve, a callback, a name
    chain: tuple[Frame, ...] = ()
    flags: tuple[str, ...] = ()  # opt-in configuration switches on the way (`use_ema`)
    reason: str = ""
    # Reached only through a guess that fans out (every module's `forward` where the class is unknown): such a
    # function's calls are followed on its text, by name, instead of reading it (a library's hundreds of forwards).
    guessed: bool = False
    # The most candidates one guess on the way chose among (0: no guess): `model(x)` with the class unknown, in a
    # project of 121 models, reaches each of them, though one at most is the model trained (`ExecState.confidence`).
    among: int = 0

    @property
    def wide(self) -> bool:
        return self.among > WIDE_GUESS

    def better_than(self, other: "Reach | None") -> bool:
        if other is None:
            return True
        mine = (self.rank, self.likely, self.wide, self.guessed, len(self.chain))
        return mine < (other.rank, other.likely, other.wide, other.guessed, len(other.chain))


@dataclass(frozen=True)
class FunctionFacts:
    reach: Reach | None  # None: no training code reaches it
    step_loops: frozenset[int] = frozenset()  # its loops (by index) that are step loops
    loop_frames: tuple[tuple[int, Frame], ...] = ()  # the entry frame of each step loop
    epoch: bool = False  # it loops over a loader: code outside that loop runs once per epoch
    gate_params: frozenset[str] = frozenset()  # parameters every caller binds to an interval test
    param_kinds: tuple[tuple[str, str], ...] = ()  # parameters every caller passes a host (or device) value
    # Parameters defaulting to None that no call in the training step passes (`n_res` of a generator's forward, given
    # only by its inference entry): their `if n_res is not None:` branches do not run in the step.
    unset_params: frozenset[str] = frozenset()
    # Parameters a resolved caller binds to a value that is no interval test (pytext's `run_step(..., report_metric)`,
    # set from a setting): `if report_metric:` is a setting, whatever its name says.
    open_params: frozenset[str] = frozenset()
    # Called by a call the model resolved, which the step runs every time it runs (no `if` or `except` around it),
    # and computing once on what it is given (`Project._one_pass`): it runs every step whatever its name says (PPO's
    # `policy.evaluate(states, actions)` in its update).
    called_every_step: bool = False
    # Parameters defaulting to None that every call in the training step passes a value (itself, or a parameter its
    # own callers always pass): their `if lengths is None:` branches do not run in the step (texar's `dynamic_rnn`,
    # handed the batch's lengths by every encoder that trains).
    given_params: frozenset[str] = frozenset()
    # Parameters every call in the training step passes a literal False (sam-hq's `multimask_output=False`), where
    # every way the step reaches the function is a call whose arguments are known: their `if p:` branches do not run.
    false_params: frozenset[str] = frozenset()
    # Parameters every call in the training step passes a literal string, with the strings (Show-o's
    # `uni_prompting(batch, "t2i")`): the branches of `if task == "t2v":` for other words do not run in the step.
    word_params: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Its step loops that step an environment and no optimizer (rollouts): code outside them runs once per rollout of
    # many steps (morl-baselines' `train_iteration`, whose setup moves the weight vector to the device before its loop).
    rollout_loops: frozenset[int] = frozenset()


@dataclass(frozen=True)
class FileFacts:
    """The model's facts for the functions of one file (keyed by qualified name)."""

    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    # True when the project has training entry points: code none of them reaches is not per step. False: the model
    # knows no entry (a lone module, a library), and functions named like step work are taken as likely per step.
    entries: bool = False
    hot_names: frozenset[str] = frozenset()
    # Calls in this file (the callee as written) of project functions whose value lives on the host or device.
    return_kinds: tuple[tuple[str, str], ...] = ()
    on_flags: frozenset[str] = frozenset()  # configuration switches whose default is on (argparse, dataclasses)
    problem: tuple[int, int, str] | None = None  # Python's syntax error in the file: (line, column, message)
    every_step_intervals: frozenset[str] = frozenset()  # intervals shipped settings make short (`log_every: 1`)
    # The words shipped settings give the options this file's branches choose on (`("pp_engine", ("1f1b",))`).
    option_values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    off_flags: frozenset[str] = frozenset()  # this file's switches that shipped settings leave off (`off_switches`)
    # Its classes deriving from Lightning's `LightningModule` (through any base): Lightning moves their batches.
    lightning_classes: frozenset[str] = frozenset()
    # Its classes a collate function builds (the batches a loader yields), by qualified name: each batch moves itself
    batch_classes: frozenset[str] = frozenset()
    # Intervals shipped settings make exactly 1 (`--accumulation_steps` default 1): gradient accumulation of one step.
    unit_intervals: frozenset[str] = frozenset()
    # Callees as written here (`tensor`) of project functions that copy an argument's host data to the device, with
    # the positions and keywords of the arguments they copy: each call passing host data is a pageable copy.
    copy_calls: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...] = ()
    # Likewise, callees of project functions that move an argument to the device as it is (`Scope.moved_params`):
    # a tensor built on the CPU and passed there is copied each call.
    move_calls: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...] = ()
    # And callees of project converters that read an argument to the host and return host values (mmpose's
    # `to_numpy(x)`, `x.detach().cpu().numpy()`; `Scope.read_params`): each call handing one a device tensor waits.
    read_calls: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...] = ()
    # `Class.attribute` for attributes its methods only ever set to host values (`self.add_z_loss = add_z_loss`, whose
    # parameter defaults to False): a Python flag or number, never a tensor, wherever a method reads it.
    host_attributes: frozenset[str] = frozenset()
    # `Class.attribute` for attributes its `__init__` sets to a tensor on the device and no method sets to anything
    # else (`self.obs = torch.zeros(n, d, device=device)`: a replay buffer's storage; `index.device_attributes`).
    device_attributes: frozenset[str] = frozenset()
    # Its classes another module of the project builds as a layer (`self.encoder = ConformerEncoder(...)`): the inputs
    # of their `forward` come from the module that calls them, already on the device.
    layer_classes: frozenset[str] = frozenset()
    # Another file of the project imports this one, and the project names a device: it gets its tensors from its
    # importers, so it is no CPU-only script for naming no device itself (linter/devices.py).
    device_fed: bool = False
    # How the project's training step copies its batches to the device, where another file's step code does:
    # "nonblocking", "blocking", or "" (none seen, or accelerate / Lightning places the batches). A DataLoader this
    # file builds without `pin_memory` feeds those copies from pageable memory.
    batches_copied: str = ""
    # How the code this file's training loops reach in other files copies values as they came (a name or an item of
    # one, not a tensor it made) to the device ("nonblocking", "blocking" or "", as `batches_copied`): a loop handing
    # its batches to a model whose `forward` moves them (ImageReward's `model(batch)`, whose `encode_pair` copies
    # each tensor) feeds those copies.
    loop_batches_copied: str = ""
    # A file other than a package's `__init__` imports it: a module other code uses, whose
    # `if __name__ == "__main__":` block is its self-test or demo, not the training program (a module only its
    # package re-exports may be a runnable entry: lightning-bolts' `dcgan_module.py`).
    used_by_code: bool = False
    # Names (last parts: `model_ema`, `ema_diffusion_prior`) the project binds only to objects of a library class
    # `vocab.LIBRARY_OBJECTS` knows, with what that class's methods cost ("ema_pytorch", "timm_ema").
    library_objects: tuple[tuple[str, str], ...] = ()
    # Names this file binds to keyword arguments that name a device (`self.tpdv = dict(dtype=torch.float32,
    # device=device)`): `x.to(**self.tpdv)` moves to that device.
    device_kwargs: frozenset[str] = frozenset()
    # Names of torch's loaders (`vocab.LOADER_CLASSES`) that this file binds to a class of the project deriving from
    # nothing (hyunwoongko/transformer's `DataLoader`, a holder of tokenizers): no `pin_memory` to set.
    own_loaders: frozenset[str] = frozenset()
    # Batch helpers (`vocab.BATCH_MOVE_HELPERS`) this file calls that are project functions whose every copy passes
    # `non_blocking=True` (FastDiff's `move_to_cuda`): not a blocking copy, whatever the call site passes.
    nonblocking_movers: frozenset[str] = frozenset()
    # Callees as written here (last names: `loader` of `distrib.loader(ds, batch_size=8)`) of project functions that
    # build a torch loader and hand it their `**kwargs` (denoiser's and svoice's `distrib.loader`): each call is a
    # DataLoader construction, pinned only if it passes `pin_memory`.
    loader_factories: frozenset[str] = frozenset()
    # Functions of this file (qualnames) whose loaders a trainer takes: those a Lightning module's `train_dataloader`
    # reaches (pykale's `create_loader`, two calls away), and those whose result is handed to `trainer.fit(model,
    # loader)` (drugban's `get_dataloader`, called by its `main.py`) or to `accelerator.prepare(..., loader)`. A
    # trainer (or accelerate) copies every batch they yield.
    trainer_loader_builders: frozenset[str] = frozenset()
    # Some file of the project (not a test) turns torch.distributions' argument checks off for the whole process
    # (`Distribution.set_default_validate_args(False)`, pydreamer's `train.py`): no distribution validates.
    validation_off: bool = False
    # Every shipped command running a training file runs Python with `-O` (TWM's `python -O twm/main.py`): no
    # `assert` statement runs (and distributions validate nothing: `validation_off`).
    asserts_off: bool = False
    # Some file of the project (not a test) makes the GPU torch's default device (`torch.set_default_device("cuda")`,
    # `torch.set_default_tensor_type("torch.cuda.FloatTensor")`): a factory given no `device=` builds on the GPU, where
    # the program does not pick the CPU around it (ALF's `with alf.device("cpu"):`), which gpulint does not follow: it
    # drops the findings a factory's CPU tensor makes (GPL504), and claims no factory's tensor is on the device.
    default_device_gpu: bool = False
    # The PyTorch the file runs under, "major.minor", as the nearest dependency file above it pins it (`torch==1.8.1`
    # in `requirements.txt`); "" where none pins it: defaults that changed (`zero_grad()` keeping gradients before
    # 2.0) are the pinned version's.
    torch_pin: str = ""
    # Callees as written here (`self.var_sched.uniform_sample_t`) of project functions every `return` of which gives
    # a Python list (`return ts.tolist()`): what they return indexes a tensor with a host list.
    list_returning: frozenset[str] = frozenset()
    # ... and those every `return` of which gives a tensor built on the host (`return torch.tensor([...]).sum()`): a
    # CPU tensor, not a Python number, whatever the annotation says.
    host_tensor_returning: frozenset[str] = frozenset()
    # The project has training entry points and no file names a device, an accelerator, a distributed backend or a
    # trainer that places the model (pytorch-trpo, under `set_default_tensor_type('torch.DoubleTensor')`): the whole
    # program runs on the CPU, so costs that exist only on a GPU (`Rule.gpu_only`) are none in any of its files.
    cpu_project: bool = False
    # The project runs programs (scripts with a `__main__` block) and nothing in it trains: no entry point, and no
    # file but tests calls backward or zero_grad, names an optimizer or builds a trainer (unidiffuser, which ships
    # sampling scripts only): its loops sample or evaluate, so no finding is per step or training code. (A library
    # with no programs of its own is not one: its layers run in its users' training.)
    inference_only: bool = False
    # Python's parser read the whole file without error while the project was read (`problem` is None): a lint that
    # parses only part of it need not check the rest for a syntax error.
    syntax_checked: bool = False

    def library_kind(self, name: str) -> str:
        """What the library object a name holds costs (`library_objects`): "ema_pytorch", "timm_ema", or ""."""
        return next((kind for bound, kind in self.library_objects if bound == name), "")

    def unselected(self, choice: tuple[str, ...]) -> bool:
        """Does no value shipped settings give the option of a "choice" region choose it? False when no setting
        gives the option a value, or gives one that is not a number where the branch compares numbers: then
        nothing is known."""
        option, op, *chosen = choice
        given = dict(self.option_values).get(option)
        if not given or SET_IN_CODE in given:
            return False
        if op == "in":
            numbers = [_number(v) for v in chosen]
            if all(n is not None for n in numbers):
                given_numbers = [_number(v) for v in given]
                return None not in given_numbers and not set(given_numbers) & set(numbers)
            return not {w.lower() for w in chosen} & {v.lower() for v in given}
        bound = _number(chosen[0])
        values = [_number(v) for v in given]
        if bound is None or None in values:
            return False
        return not any(_ORDER[op](value, bound) for value in values)

    def step_code(self) -> frozenset[str]:
        """The functions (qualified names) with code that may run in the training step: reached every step or on
        some steps, or holding a step loop."""
        return frozenset(
            name for name, f in self.functions.items()
            if f.step_loops or (f.reach is not None and f.reach.rank <= GATED)
        )

    def program_code(self) -> frozenset[str]:
        """The functions the training program runs (setup and epoch code too), and those holding a step loop."""
        return frozenset(
            name for name, f in self.functions.items()
            if f.step_loops or (f.reach is not None and f.reach.rank <= PROGRAM)
        )


def shown_at(facts: FileFacts, shown: dict[str, str]) -> FileFacts:
    """The facts with every frame's path as reports show it. The model reads each file by its path within the linted
    folder (`src/train.py`, wherever the run started), so that the folders above a project cannot change what it
    finds; `shown` maps those paths to the ones the user gave (`/home/me/repo/src/train.py`)."""
    def frame_shown(frame: Frame) -> Frame:
        return replace(frame, path=shown.get(frame.path, frame.path))

    functions = {}
    for name, function in facts.functions.items():
        reach = function.reach
        if reach is not None and reach.chain:
            reach = replace(reach, chain=tuple(frame_shown(f) for f in reach.chain))
        loop_frames = tuple((loop, frame_shown(frame)) for loop, frame in function.loop_frames)
        functions[name] = replace(function, reach=reach, loop_frames=loop_frames)
    return replace(facts, functions=functions)


_ORDER = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "!=": float.__ne__}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class ExecState:
    hot: bool
    gated: bool
    cold: bool
    reason: str
    reached: bool = True  # some training code reaches it (or the model knows no entry point)
    likely: bool = False
    chain: tuple[Frame, ...] = ()
    flags: tuple[str, ...] = ()
    # Among `flags`, the switches every shipped setting leaves off (`FileFacts.off_flags`): the code runs only for a
    # user who turns one on, so the finding is shown at the lowest confidence.
    off_flags: tuple[str, ...] = ()
    wide: bool = False  # reached only through a guess among many candidates (`Reach.wide`)
    by_name: bool = False  # cold only because its function is named for evaluation, setup or sampling
    # cold only because it is a constructor or named for setting up (`__init__`, `setup`; not `init_prompt`, named
    # like setup work but run for inference): it runs once, in the training program, where a loader or a
    # tokenizer's padding is set for every step to come
    setup: bool = False
    once: bool = False  # cold only because it is a branch that computes a value once and keeps it

    @property
    def per_step(self) -> bool:
        return self.hot and not self.gated and not self.cold

    @property
    def confidence(self) -> str:
        if self.wide or self.off_flags:
            return "possible"
        return "likely" if self.likely or self.flags else "certain"


def _keeps_data_on_cpu(flag: str) -> bool:
    """`cpu_offload`, `offloading`, `no_cuda`, `no_gpu`: a switch whose branch keeps the work on the CPU."""
    parts = name_parts(flag)
    return bool(parts & OFFLOAD_SWITCH_PARTS) or "no" in parts and bool(parts & {"cuda", "gpu"})


NEUTRAL = ExecState(hot=False, gated=False, cold=False, reason="not on the training path", reached=False)
_COLD_REASONS = {
    "backend": "in a branch for another device",
    "error": "in an error handler",
    "eval": "in the evaluation branch of a module",
    "epoch-end": "in the branch for the end of an epoch or of the run",
    "once": "in a branch that computes a value once and keeps it",
    "empty": "in the exit for a batch with nothing to compute, which normal steps do not take",
    "failure": "in a branch that reports a failure, a fallback normal steps do not take",
    "dead": "in a branch that never runs (`if False:`)",
    "debug": "in the branch for a debugging switch, which runs that train leave off",
}


# Decorators that keep what a function returns: its body runs once per distinct argument (mmf's causal mask for a
# length, edm2's toy distribution), not every step.
_CACHING_DECORATORS = frozenset({"lru_cache", "cache", "cached_property"})


def regions_at(scope: Scope, pos: Pos) -> list[Region]:
    """The regions of `scope` holding `pos`, innermost first."""
    return sorted((r for r in scope.regions if r.holds(pos)), key=lambda r: r.start, reverse=True)


def _unchosen_word(param: str, regions, word_params: tuple[tuple[str, tuple[str, ...]], ...]) -> bool:
    """Does no word the calls pass for `param` take the branches around the position: `if task == "t2v":` where
    every call passes "t2i" or "mmu", or the `else` of `if task == "t2i": ... elif task == "mmu": ...`?"""
    passed = dict(word_params).get(param)
    if passed is None:
        return False
    taken = set(passed)
    for region in regions:
        if region.kind == "word" and region.flags[0] == param:
            _, op, *words = region.flags
            taken = taken & set(words) if op == "in" else taken - set(words)
    return not taken


def _gated_step_loop(outer: list[Region], facts: FunctionFacts, file_facts: FileFacts) -> bool:
    """A loop of micro-steps inside a gate of the training loop around it (Sophia's Hessian step, the `else` of
    `if iter_num % hess_interval != hess_interval - 1:`): it runs on the gate's steps only."""
    for position, region in enumerate(outer):
        if region.kind == "gate" and region.flags \
                and not is_short_interval(region.flags[0], file_facts.every_step_intervals) \
                and not _tests_open_param(region, outer, facts):
            return any(r.kind == "loop" and r.loop in facts.step_loops for r in outer[position + 1:])
    return False


def state_at(scope: Scope, pos: Pos, facts: FunctionFacts | None, file_facts: FileFacts) -> ExecState:
    """How often the code at `pos` in `scope` runs: its regions, innermost first (a gate, a switch, a branch for
    another device, a step loop), then how the step reaches its function."""
    if scope.kind == "class":
        return NEUTRAL
    cache = next((d for d in scope.decorators if d.rsplit(".", 1)[-1] in _CACHING_DECORATORS), None)
    if cache is not None:
        return ExecState(False, False, False, f"in `{scope.name}`, cached by `@{cache}`: it runs once per argument")
    facts = facts or FunctionFacts(None)
    gated = False
    flags: list[str] = []
    regions = regions_at(scope, pos)
    if file_facts.used_by_code and any(region.kind == "main" for region in regions):  # its loops too
        return ExecState(False, False, True, "in the `__main__` block of a module the project imports (its "
                         "self-test), not in training")
    for index, region in enumerate(regions):
        kind = region.kind
        if kind in ("gate", "exit") and region.flags \
                and is_short_interval(region.flags[0], file_facts.every_step_intervals):
            continue  # `step % args.log_every == 0` where the shipped configurations set `log_every` to 1, `step % 2`
        if kind == "gate" and _tests_open_param(region, regions, facts):
            continue
        if kind in ("gate", "exit") or (kind == "param" and (region.flags[0] in facts.gate_params
                                                            or _gate_named_flag(region.flags[0], scope, facts))):
            gated = True
        elif kind == "switch" and all(not f.startswith("!") and name_parts(f) & NOT_TRAINING_SWITCH_PARTS
                                      for f in region.flags):
            names = " and ".join(f"`{f}`" for f in region.flags)
            return ExecState(False, gated, True, f"in the branch for {names}, which evaluates or samples, not trains")
        elif kind in ("switch", "kept-switch") and any(not f.startswith("!") and _keeps_data_on_cpu(f)
                                                       for f in region.flags):
            names = " and ".join(f"`{f}`" for f in region.flags)
            return ExecState(False, gated, True, f"in the branch for {names}, which keeps data on the CPU by design")
        elif kind == "kept-switch" and any(f in file_facts.off_flags for f in region.flags):
            names = " and ".join(f"`self.{f.lstrip('?')}`" for f in region.flags if f in file_facts.off_flags)
            return ExecState(False, gated, True, f"in the branch for {names}, which no shipped setting turns on")
        elif kind == "switch":
            # An opt-in feature: on every step once switched on, but off unless the user asks (or no default is known);
            # also when no shipped setting turns it on (HunyuanDiT's `--use-ema`): the user who passes it pays.
            flags.extend(f for f in region.flags if not f.startswith("!") and f not in file_facts.on_flags)
        elif kind == "choice" and file_facts.unselected(region.flags):
            option, op, *values = region.flags
            test = f"{op} {values[0]}" if op != "in" else "= " + " or ".join(map(repr, values))
            return ExecState(False, gated, True, f"in the branch for `{option}` {test}, which no shipped setting "
                             "selects")
        elif kind == "given" and region.flags[0] in facts.unset_params:
            return ExecState(False, gated, True, f"in the branch for `{region.flags[0]}`, which no call in the training "
                             "step passes")
        elif kind == "param" and region.flags[0] in facts.false_params:
            return ExecState(False, gated, True, f"in the branch for `{region.flags[0]}`, which every call in the "
                             "training step passes False")
        elif kind == "word" and _unchosen_word(region.flags[0], regions, facts.word_params):
            param, op, *words = region.flags
            test = " or ".join(map(repr, words))
            return ExecState(False, gated, True, f"in the branch for `{param}` {'=' if op == 'in' else '!='} {test}, "
                             "which no call in the training step passes")
        elif kind == "missing" and region.flags[0] in facts.given_params:
            return ExecState(False, gated, True, f"in the branch for `{region.flags[0]}` left out, which every call in "
                             "the training step passes")
        elif kind == "not-tensor" and dict(facts.param_kinds).get(region.flags[0]) == "device":
            return ExecState(False, gated, True, f"in the branch for `{region.flags[0]}` not a tensor, which every "
                             "call in the training step passes a tensor on the device")
        elif kind == "one-step":
            return ExecState(False, gated, False, "in a branch taken on one step of the run, not every step")
        elif kind == "last-pass" and region.loop in facts.step_loops:
            return ExecState(False, gated, False, "in a branch that ends the training loop (`break`): taken once, "
                             "not every step")
        elif kind in _COLD_REASONS:
            return ExecState(False, gated, True, _COLD_REASONS[kind], once=kind == "once")
        elif kind == "episode-end" and region.loop in facts.step_loops:
            return ExecState(False, gated, False, "in the branch for an episode's end, once per episode, not every "
                             "environment step")
        elif kind == "iteration" and region.loop in facts.step_loops:
            return ExecState(False, gated, False, "once per iteration, after a rollout of many environment steps "
                             "(amortised over them), not every step")
        elif kind == "loop" and region.loop in facts.rollout_loops and facts.reach is not None \
                and facts.reach.rank == GATED:
            # A rollout its caller runs behind a gate (GPI-PD's model rollouts every `dynamics_rollout_freq` steps,
            # an evaluation episode every N updates): it runs at the gate's rhythm, not as the training loop.
            return ExecState(True, True, False, "in a rollout its caller runs on some steps",
                             chain=facts.reach.chain, **_switches(flags, file_facts))
        elif kind == "loop" and region.loop in facts.step_loops:
            frame = dict(facts.loop_frames).get(region.loop)
            gated = gated or _gated_step_loop(regions[index + 1:], facts, file_facts)
            return ExecState(True, gated, False, "inside the training loop", chain=(frame,) if frame else (),
                             **_switches(flags, file_facts))
    reach = facts.reach
    name = scope.name
    # Named for evaluation, sampling, saving or setup: such code runs once or behind a test the model cannot read
    # (`if not exists(self.GAN): self.init_GAN()`, `if divisible_by(step, save_every): self.save()`).
    if is_cold_method(name, scope.cls) and name not in file_facts.hot_names and not facts.called_every_step:
        return ExecState(False, gated, True, f"in `{name}`, which does not run every step", by_name=True,
                         setup=name == "__init__" or "setup" in name_parts(name))
    if reach is None:
        return NEUTRAL
    if facts.epoch:
        return ExecState(False, gated, False, f"in `{name}` outside its loop over batches (once per epoch)")
    if facts.rollout_loops:
        return ExecState(False, gated, False, f"in `{name}` outside its loop stepping the environment (once per "
                         "rollout of many steps)")
    if reach.rank == COLD:
        return ExecState(False, gated, True, reach.reason or f"in `{name}`, reached only from code that is not training")
    if reach.rank == PROGRAM:
        return ExecState(False, gated, False, reach.reason or f"in `{name}`, which runs once, not every step",
                         likely=reach.likely, chain=reach.chain, wide=reach.wide)
    return ExecState(True, gated or reach.rank == GATED, False, reach.reason or f"in `{name}`, which runs every step",
                     likely=reach.likely, chain=reach.chain, wide=reach.wide,
                     **_switches([*reach.flags, *flags], file_facts))


def _switches(flags: Iterable[str], file_facts: FileFacts) -> dict[str, tuple[str, ...]]:
    """The opt-in switches a state needs on, and those of them that every shipped setting leaves off."""
    needed = tuple(dict.fromkeys(flags))
    return {"flags": needed, "off_flags": tuple(f for f in needed if f in file_facts.off_flags)}


def _gate_named_flag(param: str, scope: Scope, facts: FunctionFacts) -> bool:
    """`if perform_logging:` on a parameter defaulting to False and named for a gate, that no caller the model resolved
    binds to a value other than an interval test: a gate by its name, as `if should_log:` is (warp-drive's trainers
    pass `perform_logging=logging_flag`, true every `metrics_log_freq` iterations, through calls of objects kept in a
    dict, `self.trainers[policy].compute_loss_and_metrics(...)`, which the model cannot resolve)."""
    return param in scope.false_params and param not in facts.open_params and names_a_gate(ast.Name(id=param))


def _tests_open_param(gate: Region, regions: list[Region], facts: FunctionFacts) -> bool:
    """Is this gate `if p:` on a parameter its callers bind to no interval test (the "param" region of the same
    branch names it)?"""
    return any(r.kind == "param" and r.start == gate.start and r.end == gate.end and r.flags[0] in facts.open_params
               for r in regions)
