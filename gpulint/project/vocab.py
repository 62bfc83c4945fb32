"""The words that say where code runs: names of step work, of cold code, of gates, loaders and host values.

One place for this knowledge: the project model (what runs every step, across modules) reads it on Python's `ast`,
and the rules' device provenance (gpulint/linter/context.py) on libcst. Nothing here imports a parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_SEPARATORS = re.compile(r"[_.]+")


@lru_cache(maxsize=8192)
def name_parts(name: str) -> frozenset[str]:
    """The lower-case parts of an identifier or dotted name: `args.log_interval` -> {"args", "log", "interval"}."""
    return frozenset(p for p in _SEPARATORS.split(name.lower()) if p)


# Functions that run every training step by their name alone (frameworks call them per batch), plus `hot-functions`
# from the configuration. `forward` and `__call__` are here for code whose callers the model cannot see (a library
# with no training loop of its own); where it sees them, a forward counts only when the step reaches it.
DEFAULT_HOT_FUNCTIONS = frozenset(
    {
        "train_step", "training_step", "_train_step", "train_one_epoch", "train_epoch", "_run_batch", "run_batch",
        "compute_loss", "train_batch", "train_on_batch", "forward_backward", "forward_backward_step", "fwd_bwd",
        "train_iter", "train_iteration", "optimizer_step", "update_step", "inner_loop", "forward", "__call__",
    }
)
# Called per call of a module object (`model(x)` runs `forward`): hot only when reached.
MODULE_CALL_METHODS = frozenset({"forward", "__call__"})
# Hooks a framework calls once per batch (Lightning, Hugging Face TrainerCallback, mmengine, Keras-like callbacks).
PER_BATCH_HOOKS = frozenset(
    {
        "on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
        "on_before_optimizer_step", "on_before_zero_grad", "on_step_begin", "on_step_end", "on_substep_end",
        "on_batch_begin", "on_batch_end", "before_train_iter", "after_train_iter", "before_train_step",
        "after_train_step", "on_optimizer_step", "training_step_end", "on_train_step_end",
        # Composer's events, which its Engine runs on every callback each batch.
        "batch_start", "batch_end", "after_dataloader", "before_forward", "after_forward", "before_loss",
        "after_loss", "before_backward", "after_backward", "before_train_batch", "after_train_batch",
        # torchbearer's and Poutyne's callbacks (the training ones: `on_sample_validation` is evaluation).
        "on_sample", "on_forward", "on_criterion", "on_backward", "on_step_training", "on_train_batch_begin",
        "on_backward_end",
        # BasicSR's models (Real-ESRGAN's, whose loop is basicsr's `train_pipeline`): each iteration runs
        # `model.feed_data(batch)`, then `model.optimize_parameters(step)`.
        "feed_data", "optimize_parameters",
    }
)
# Hooks a framework (Lightning) calls once at setup to build the training loader: code the training program runs.
TRAIN_LOADER_HOOKS = frozenset({"train_dataloader", "_train_dataloader"})
# The keywords that hand a trainer its training loader (`trainer.fit(model, train_dataloaders=loader)`, Composer's
# `Trainer(train_dataloader=loader)`).
TRAIN_LOADER_KEYWORDS = frozenset({"train_dataloaders", "train_dataloader"})
# What a library trainer's own optimization step (TRL's `PPOTrainer.step(queries, responses, scores)`, which does the
# backward passes and optimizer steps) calls on itself: a subclass overriding one of these runs it every step.
LIBRARY_STEP_HOOKS = frozenset(
    {"batched_forward_pass", "compute_rewards", "compute_advantages", "train_minibatch", "loss", "gather_stats",
     "record_step_stats", "prepare_model_inputs", "_step_safety_checker"}
)
# Hooks a framework calls once per run, phase or epoch (Lightning, ClassyVision, mmengine): not every step. What only
# they reach is no step work, however its name reads (`synchronize_losses`).
RUN_AND_EPOCH_HOOKS = frozenset(
    {
        "on_fit_start", "on_fit_end", "on_train_start", "on_train_end", "on_epoch_start", "on_epoch_end",
        "on_train_epoch_start", "on_train_epoch_end", "on_validation_start", "on_validation_end",
        "on_validation_epoch_start", "on_validation_epoch_end", "on_phase_start", "on_phase_end", "on_start",
        "on_end", "before_run", "after_run", "before_train", "after_train", "before_train_epoch", "after_train_epoch",
    }
)
# Split on "_": a function is cold when one of its name's parts is one of these (`evaluate_model`, `__init__`).
COLD_NAME_PARTS = frozenset(
    {
        "eval", "evaluate", "evaluation", "evaluator", "evaluators", "valid", "validate", "validation", "val", "test",
        "testing", "predict", "prediction", "inference", "infer", "generate", "generation", "sample", "sampling",
        "save", "checkpoint", "ckpt", "init", "setup", "export", "visualize", "plot", "demo", "benchmark", "profile",
        "decode", "greedy", "beam",
        "detect", "compile", "configure", "config", "register", "repr", "gradcam", "saliency", "visualization",
        "explain", "explanation", "forecast", "forecasts", "backtest", "debug",
    }
)
# A switch named for evaluation or sampling (`if args.sample:`, `if args.eval_only:`, `if opt.test:`) runs what
# the program does instead of training, when a command asks for it.
NOT_TRAINING_SWITCH_PARTS = frozenset(
    {
        "eval", "evaluate", "evaluation", "valid", "validate", "validation", "val", "test", "testing", "predict",
        "prediction", "inference", "infer", "generate", "generation", "sample", "sampling", "demo", "visualize",
        "export",
    }
)
# Words that show a program uses a GPU. `rank` alone is none: a CPU-only script's worker processes have ranks too
# (A3C's `train(model, rank)`); a distributed program imports `torch.distributed` or moves tensors to `rank`.
GPU_EVIDENCE = re.compile(r"cuda|device|gpu|accelerat|fabric|lightning|distributed|(?<![a-z])(xla|mps|xpu|npu)(?![a-z])")
# A switch for keeping data on the CPU (RVRT's `self.cpu_cache`, a `cpu_offload` option): its host copies are the
# point of the mode, a memory saving its user chose, not lost time to report.
OFFLOAD_SWITCH_PARTS = frozenset({"cpu", "offload", "offloading"})
# Identifier parts that make an `if` test a gate (`should_log`, `log_interval`, `args.print_freq`). Rank guards
# (`if master_process:`, `is_main_process()`) are not gates: rank 0 still runs the body every step.
DEFAULT_GATE_PARTS = frozenset(
    {
        "log", "logging", "logger", "print", "report", "display", "verbose", "debug", "interval", "every", "freq",
        "frequency", "period", "eval", "evaluate", "save", "checkpoint", "ckpt",
        "wandb", "tensorboard", "writer", "summary", "summaries", "visualize", "sample", "tick",
        # and as the -ing forms a test names them (SPADE's `iter_counter.needs_displaying()`, `needs_printing()`)
        "printing", "reporting", "displaying", "visualizing", "evaluating", "saving", "checkpointing", "sampling",
    }
)
# A gate whose period is shorter than this many steps runs on a large share of them: `step % 2 == 0` halves a cost,
# it does not amortise it (every 10 or more steps does).
SHORT_INTERVAL = 10
# The legacy CUDA tensor types (`torch.cuda.FloatTensor`): called on a list they copy it from the host; on sizes they
# only allocate.
CUDA_TENSOR_TYPE = re.compile(r"^torch\.cuda\.[A-Za-z0-9]*Tensor$")
# Methods that make a new CPU tensor from a CPU tensor: data cast or reshaped is still on the host.
HOST_RESHAPES = frozenset({"float", "half", "double", "long", "int", "bool", "unsqueeze", "squeeze", "view", "reshape",
                           "flatten", "contiguous", "permute", "transpose", "t"})
STEP_NAME_PARTS = frozenset({"step", "batch", "iter", "iteration", "microbatch"})
# Gradient accumulation: `if (i + 1) % grad_accum_steps == 0:` holds the optimizer step, so it is true on every
# training step the optimizer takes (`acc_step == 0` too): the step itself, not a gate.
ACCUMULATION_PARTS = frozenset({"acc", "accum", "accumulate", "accumulation", "accumulations", "accumulated"})
# A counter of micro-steps comes round on every optimizer step (`micro_step == accum_steps - 1`): no one-time test.
MICRO_STEP_PARTS = ACCUMULATION_PARTS | {"micro"}
EVAL_LOADER_PARTS = frozenset({"eval", "val", "valid", "validation", "test", "testing", "dev"})
# An evaluation loader named in one lower-cased word (pointnet.pytorch's `testdataloader`, the CIFAR tutorials'
# `testloader`, `valLoader`), which `name_parts` does not split.
EVAL_LOADER_WORD = re.compile(r"(?:eval|val|valid|validation|test|testing|dev)(?:data)?(?:loader|dl|set|dataset)s?$")
LOADER_PARTS = frozenset({"loader", "dataloader", "dl", "batches", "iterator", "train_iter", "data_iter", "prefetcher"})
# Wrappers of an iterable that iterate what they wrap: `enumerate(loader)`, `tqdm(loader)`.
ITERABLE_WRAPPERS = frozenset({"enumerate", "tqdm", "zip", "iter", "islice", "track", "progress_bar"})
STEP_METHODS = frozenset({"backward", "manual_backward", "zero_grad"})
OPTIMIZER_RECEIVER = re.compile(r"(optim|opt$|^opt|scaler|solver|^svi$)", re.IGNORECASE)  # (Pyro's `svi.step(x)`)
NO_GRAD = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
# Roots of configuration objects: `if args.log_grad_norm:` switches a feature on for every step, it is no gate.
CONFIG_ROOTS = frozenset({"args", "config", "cfg", "conf", "opt", "opts", "options", "hparams", "flags", "settings"})
# Objects whose `.device` names where training runs, not where a tensor lives: `x.to(self.device)`,
# `y.to(args.device)`, `t.to(model.device)` move to the accelerator (`t.to(label.device)` goes where `label` is).
DEVICE_HOLDER = re.compile(
    r"^(?:self|accelerator|fabric|trainer|args|config|cfg|conf|opts?|options|hparams|flags|settings)$"
    r"|model|module|net$|network", re.IGNORECASE)
# `if resuming and step < start: continue` skips batches already trained on: no gate.
RESUME_PARTS = frozenset({"resume", "resumed", "skip", "skipped"})

# Values on the host: what reading them costs nothing.
HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
# Hugging Face preprocessors (`tokenizer(texts, return_tensors="pt")`, `processor.image_processor(images)`): they
# run on the host and return CPU tensors. Named exactly: a `post_processor` of a detector computes on the device.
PREPROCESSOR_NAMES = frozenset({"tokenizer", "processor", "image_processor", "feature_extractor", "text_tokenizer"})
PREPROCESSOR_METHODS = frozenset({"encode", "encode_plus", "batch_encode_plus", "apply_chat_template", "pad"})
# Methods of numpy arrays that tensors lack: what they return is a host array (`preds.astype(np.float32)`).
NUMPY_ONLY_METHODS = frozenset({"astype"})
METADATA_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "names", "layout",
                            "columns"})  # (a data frame's column names: `df.columns.tolist()`; no tensor has them)
# A reinforcement-learning environment's spaces (gym, gymnasium): numpy-backed descriptions of actions and
# observations (`envs.single_action_space.nvec`, `env.action_space.n`), no tensors.
ENV_SPACES = frozenset({"action_space", "observation_space", "single_action_space", "single_observation_space"})
METADATA_METHODS = frozenset({"size", "dim", "numel", "element_size", "nelement", "stride", "get_device", "data_ptr"})
HOST_BUILTINS = frozenset(
    {"len", "float", "int", "bool", "str", "round", "range", "enumerate", "zip", "list",
     "tuple", "dict", "set", "sorted", "repr", "format", "isinstance", "getattr", "hasattr", "slice"}
)
# Builtins that build a container of what they are given: `tuple(t.to(device) for t in batch)` holds device
# tensors, so what is unpacked or indexed out of it is host only when every argument is. (Not `enumerate` and `zip`,
# which loops take batches from: a batch a loader yields is on the host until it is moved.)
CONTAINER_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted"})
# `sum(losses)`, `max(a, b)`, `abs(t)` of tensors are tensors: host only when every argument is.
VALUE_BUILTINS = frozenset({"abs", "min", "max", "sum"})
# The legacy tensor types of the CPU: constructors of CPU tensors, and what `.type(torch.LongTensor)` moves a tensor to.
LEGACY_CPU_TENSOR_TYPES = frozenset(f"torch.{kind}Tensor" for kind in (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"))
# torch factories make a CPU tensor unless given a `device=` (reading it back is free).
CPU_FACTORIES = frozenset(
    {"torch.tensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.linspace",
     "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.eye", "torch.from_numpy", "torch.as_tensor",
     # the legacy constructors: `torch.Tensor([0]).item()` reads a CPU tensor (DI-engine's placeholder losses)
     "torch.Tensor"}
) | LEGACY_CPU_TENSOR_TYPES
# Library classes whose methods cost the step something the call does not show, by what they cost:
# ema_pytorch's `EMA.update()` and `get_current_decay()` read its step counter with `.item()` (a sync per call);
# timm's `ModelEma` / `ModelEmaV2.update(model)` loop over every tensor in Python (its `ModelEmaV3` uses foreach);
# diffusers' `EMAModel.step(parameters)` too, unless it was built with `foreach=True` (`_library_kind_sets`);
# AllenNLP's metrics read what each call is given on the host (`_ALLENNLP_SYNCING_METRICS`).
LIBRARY_OBJECTS = {
    "ema_pytorch.EMA": "ema_pytorch", "ema_pytorch.ema_pytorch.EMA": "ema_pytorch",
    "timm.utils.ModelEma": "timm_ema", "timm.utils.ModelEmaV2": "timm_ema",
    "timm.utils.model_ema.ModelEma": "timm_ema", "timm.utils.model_ema.ModelEmaV2": "timm_ema",
    "diffusers.training_utils.EMAModel": "diffusers_ema",
}
# AllenNLP's metrics whose `__call__` reads the batch's counts on the host (`.item()`, `float()`, `if (...).any():`,
# `.tolist()`), by module: calling one in a model's `forward` syncs every step (allennlp 2.x).
_ALLENNLP_SYNCING_METRICS = {
    "categorical_accuracy": "CategoricalAccuracy", "boolean_accuracy": "BooleanAccuracy", "average": "Average",
    "perplexity": "Perplexity", "entropy": "Entropy", "fbeta_measure": "FBetaMeasure", "f1_measure": "F1Measure",
    "span_based_f1_measure": "SpanBasedF1Measure", "mean_absolute_error": "MeanAbsoluteError",
    "sequence_accuracy": "SequenceAccuracy", "bleu": "BLEU", "rouge": "ROUGE", "auc": "Auc",
    "covariance": "Covariance", "pearson_correlation": "PearsonCorrelation",
    "spearman_correlation": "SpearmanCorrelation", "fbeta_multi_label_measure": "FBetaMultiLabelMeasure",
}
# torchmetrics' aggregation metrics check every value they are given for NaN (`if nans.any():` in
# `BaseAggregator._cast_and_nan_check_input`) on each update or call, unless built with `nan_strategy="disable"`.
_TORCHMETRICS_AGGREGATORS = ("MeanMetric", "SumMetric", "MaxMetric", "MinMetric", "CatMetric")
LIBRARY_OBJECTS.update({f"torchmetrics{module}.{name}": "torchmetrics_aggregator"
                        for name in _TORCHMETRICS_AGGREGATORS for module in ("", ".aggregation")})
LIBRARY_OBJECTS.update({f"allennlp.training.metrics.{name}": "allennlp_metric"
                        for name in _ALLENNLP_SYNCING_METRICS.values()})
LIBRARY_OBJECTS.update({f"allennlp.training.metrics.{module}.{name}": "allennlp_metric"
                        for module, name in _ALLENNLP_SYNCING_METRICS.items()})
# `torch.normal(mean=0.0, std=s, size=(1,))`: given a size, it draws from Python numbers, on the CPU unless given a
# `device=` (given tensors, it draws where they live).
SIZED_CPU_FACTORIES = frozenset({"torch.normal"})
# Names of a PackedSequence's batch sizes, which PyTorch keeps on the CPU (`batch_sizes[t].item()` reads host memory).
PACKED_BATCH_SIZES = frozenset({"batch_sizes"})


def builds_on_cpu_by_default(function: str, keywords: Iterable[str]) -> bool:
    """Does a call of the torch factory `function` (qualified) with these keywords make a CPU tensor unless its
    `device=` says otherwise (`CPU_FACTORIES`, and `SIZED_CPU_FACTORIES` given a `size=`)?"""
    return function in CPU_FACTORIES or function in SIZED_CPU_FACTORIES and "size" in keywords


# torch functions joining a list of tensors into one where they live (`torch.stack([...])` of CPU tensors: on the CPU).
JOINING_FUNCTIONS = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.concatenate", "torch.hstack",
                               "torch.vstack"})
# Tensor methods whose result lives where their receiver does.
SAME_PLACE_METHODS = frozenset(
    {"detach", "clone", "float", "half", "double", "long", "int", "bool", "mean", "sum", "median", "max", "min",
     "std", "var", "norm", "abs", "squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "prod",
     "any", "all", "items", "values", "keys",  # a dict's views hold what it holds
     "argmax", "argmin", "round", "floor", "ceil", "clamp", "clip", "cumsum", "cumprod", "exp", "log", "sqrt", "t",
     "transpose", "permute", "flip", "masked_fill", "masked_fill_", "expand", "expand_as", "repeat",
     "uniform_", "normal_", "random_", "fill_", "zero_"}  # in place: `torch.empty(1).uniform_(0, n)` stays where it is
)
# Functions whose result is their first argument, where it lives (`Variable(conf_t)`, PyTorch 0.3's autograd wrapper).
SAME_PLACE_FUNCTIONS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# (`F._Reduction.get_enum("mean")`: torch's own table of reduction names, a Python int, which mmdet-style losses test)
HOST_MODULE_PREFIXES = ("time.", "math.", "numpy.", "np.", "os.", "random.", "datetime.", "json.",
                        "torch.nn.functional._Reduction.")


# Keys of an optimizer's param group that hold Python numbers (`optimizer.param_groups[0]["lr"]`).
OPTIMIZER_SETTINGS = frozenset({"lr", "weight_decay", "momentum", "eps", "betas", "initial_lr", "dampening"})

_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# A class whose name says it evaluates: its loops over batches are evaluations (d3rlpy's `TDErrorEvaluator`).
# So is one that traces or exports a model (detectron2's `TracingAdapter`, an `OnnxExporter`), or decodes with a beam
# search (`BeamDecode`, `BeamSearch`), as is a sequence generator (fairseq's and pytext's `SequenceGenerator`).
COLD_CLASS_PARTS = frozenset({"evaluator", "evaluators", "validator", "tester", "inference", "inferencer", "benchmark",
                              "tracing", "tracer", "exporter", "export", "onnx", "beam"})


def is_cold_class_name(qualname: str) -> bool:
    """`DiscountedSumOfAdvantageEvaluator`, `Validator`, `DetPostProcessor`: a class that evaluates or post-processes
    (CamelCase or snake_case parts)."""
    name = qualname.rsplit(".", 1)[-1]
    # `DFINEPostProcessor`: turns outputs into detections for evaluation and inference
    parts = _camel_parts(name)
    # `TorchScriptGreedySearch`: ParlAI's wrapper that traces a trained agent's model for export
    return bool(parts & COLD_CLASS_PARTS) or "postprocess" in name.lower() or {"sequence", "generator"} <= parts \
        or {"torch", "script"} <= parts


def is_replay_buffer_class(name: str) -> bool:
    """`PrioritizedReplayBuffer`, `replay_memory`, `AsyncUniformSequenceReplayFrameBufferExtended`: a class keeping
    transitions for learning (CamelCase or snake_case parts)."""
    return bool((_camel_parts(name) | name_parts(name)) & {"replay", "buffer"})


def camel_initials(name: str) -> str:
    """`ExponentialMovingAverage` -> "ema"."""
    return "".join(part[0] for part in _CAMEL_PART.findall(name)).lower()


def is_other_backend_class(name: str) -> bool:
    """`DeviceMPS`, `XLAStrategy`, `DeviceNeuron`: a class for another accelerator than the GPU, which a CUDA training
    run does not build."""
    return bool(_camel_parts(name.rsplit(".", 1)[-1]) & _OTHER_BACKEND_PARTS)


# Devices other than the GPU, by the names a device test compares with (`device.type == "mps"`).
OTHER_BACKENDS = frozenset({"cpu", "mps", "xla", "xpu", "npu", "hpu", "tpu", "mlu"})
# Other array frameworks, which a library supporting several backends tests for (`isinstance(x, paddle.Tensor)`):
# their branches never run on PyTorch's tensors.
OTHER_FRAMEWORKS = frozenset(
    {"paddle", "oneflow", "jittor", "mindspore", "tensorflow", "tf", "jax", "jnp", "flax", "mxnet"})
# A class named for one of them (not the CPU: `CPUOffload` serves a GPU run), for AWS's Neuron or Graphcore's IPU, or
# for another framework (fastNLP's `PaddleDriver`, `OneflowDriver`, overriding what its `TorchDriver` does).
_OTHER_BACKEND_PARTS = (OTHER_BACKENDS - {"cpu"}) | {"neuron", "ipu"} | (OTHER_FRAMEWORKS - {"tf", "jnp"})


def is_data_transform_class(name: str) -> bool:
    """`NeighborListTransform`, `Transform`: a transform a dataset applies to each sample (schnetpack's, in the loader's
    workers), not a part of the model the step calls. (Not a `Transformer`.)"""
    return "transform" in _camel_parts(name.rsplit(".", 1)[-1])


def _camel_parts(name: str) -> set[str]:
    """`DiagonalGaussianDistribution` -> {"diagonal", "gaussian", "distribution"}."""
    return {part.lower() for part in _CAMEL_PART.findall(name)}


# Classes whose `sample()` draws a training batch or a latent every step: a replay memory's `sample(batch_size)`, a
# VAE posterior's `sample()`, a diffusion's `ScheduleSampler.sample(batch_size, device)` (the step's timesteps). Not a
# model's or a sampler's `sample()`, which generates.
_DRAWN_FROM_PARTS = frozenset(
    {"memory", "buffer", "replay", "storage", "distribution", "posterior", "categorical", "schedule"}
)


# What a model or loss builds for its own computation (`_generate_prior`, `generate_mask`, `generate_anchors`,
# `generate_targets`): a function named `generate_<one of these>` is no generation of samples or text.
_GENERATED_HELPER_PARTS = frozenset(
    {"prior", "priors", "mask", "masks", "grid", "grids", "anchor", "anchors", "position", "positions", "pos",
     "kernel", "window", "matrix", "bias", "target", "targets", "label", "labels", "coords", "offsets", "weights"}
)
# What a reinforcement-learning iteration collects to learn from.
_EXPERIENCE_PARTS = frozenset({"rollout", "rollouts", "experience", "experiences", "trajectory", "trajectories"})
# What a training step draws at random (`sample_timesteps`, `sample_orders`, `sample_noise`): not generation.
_DRAWN_VALUE_PARTS = frozenset(
    {"t", "time", "times", "timestep", "timesteps", "sigma", "sigmas", "noise", "order", "orders", "mask", "masks",
     "idx", "indices", "index", "batch", "minibatch", "negatives", "pairs"}
)


def is_cold_method(name: str, cls: str) -> bool:
    """A method named for eval, sampling or saving (`is_cold_function_name`), unless it draws data every step: what
    a training step draws (`sample_timesteps`), or a replay memory's or a distribution's `sample()`."""
    if not is_cold_function_name(name):
        return False
    parts = name_parts(name)
    if not parts & {"sample", "sampling"}:
        return True
    owner = cls.rsplit(".", 1)[-1]
    drawn_from = _camel_parts(owner) | name_parts(owner)
    return not (drawn_from & _DRAWN_FROM_PARTS or parts & _DRAWN_VALUE_PARTS)


_NUMERIC_CHECK_PARTS = frozenset({"anomaly", "anomalies", "nan", "nans", "inf", "finite", "overflow"})


def is_cold_function_name(name: str) -> bool:
    if name in PER_BATCH_HOOKS:  # torchbearer's `on_sample` draws the training batch: a hook of every step
        return False
    if name.strip("_") == "reset":
        # an environment's `reset` / `_reset` (torchrl's, gym's): once an episode, where a step ends one; a meter's
        # or a metric's at a log interval or an epoch's end
        return True
    parts = name_parts(name)
    if "per" in parts:  # `per_sample_loss`, `clip_per_sample`: work on each sample of the batch, not sampling
        parts = parts - {"sample", "samples"}
    if "generate" in parts and parts & (_GENERATED_HELPER_PARTS | _EXPERIENCE_PARTS):
        # `_generate_prior`, `generate_anchors`: builds a tensor the step uses; `_generate_rollout_batch`: collects
        # the experience a reinforcement-learning iteration trains on (warp-drive's trainers), not generation
        parts = parts - {"generate"}
    # `train_validate`, `train_and_evaluate`: the training half runs every step; `detect_anomaly`, `check_nan`: a
    # numeric check of the step, not detection or evaluation.
    return bool(parts & COLD_NAME_PARTS) and not parts & {"train", "training", "fit"} and not parts & _NUMERIC_CHECK_PARTS


# Named like per-step work, beyond the exact names above, unless the name also says it logs, plots or evaluates
# (`log_losses`, `eval_loss`): a loss (`compute_loss`, `loss_labels`, `_calc_losses`), gradient clipping
# (`clip_gradients`, `clip_grad_norm`), or preparing one batch (`parse_batch`, `prepare_batch`, `preprocess_batch`).
LOSS_NAME_PARTS = frozenset({"loss", "losses"})
_CLIP_GRAD_PARTS = frozenset({"grad", "grads", "gradient", "gradients"})
_BATCH_VERB_PARTS = frozenset({"parse", "prepare", "process", "preprocess", "feed", "move", "transfer", "unpack"})
LOSS_CLASS = re.compile(r"(Loss|Criterion|Matcher)$")  # a matcher assigns targets for the loss


# A name starting with one of these builds something once (`build_loss`, `create_criterion`), even a loss.
_SETUP_VERBS = frozenset({"build", "make", "create", "init", "initialize", "setup", "configure", "instantiate",
                          "register"})


def is_hot_function_name(name: str) -> bool:
    if name.lstrip("_").split("_", 1)[0].lower() in _SETUP_VERBS:
        return False
    words = name.lower().strip("_").split("_")
    if words[0] == "get" and "for" in words[1:]:
        return False  # `_get_policy_for_loss` (BenchMARL): builds what the loss will use, once (other verbs: above)
    parts = name_parts(name)
    per_step = (
        bool(parts & LOSS_NAME_PARTS)
        or ("clip" in parts and bool(parts & _CLIP_GRAD_PARTS))
        or ("batch" in parts and bool(parts & _BATCH_VERB_PARTS))
    )
    return per_step and not parts & DEFAULT_GATE_PARTS and not is_cold_function_name(name)


def in_loss_class(name: str, class_name: str) -> bool:
    """A method of `class BiEncoderNllLoss` / `class SetCriterion` doing the loss's work (its matching and metrics
    too, even under no_grad), not its constructor, logging or evaluation."""
    return bool(class_name and LOSS_CLASS.search(class_name)) and not (
        name.startswith("__") or name_parts(name) & DEFAULT_GATE_PARTS or is_cold_function_name(name)
    )


def may_be_step_work(name: str, class_name: str = "") -> bool:
    """Could a definition of this name (in this class) be hot by its name alone? (A method of a loss class, a
    function named like a loss, gradient clipping or batch preparation.)"""
    return in_loss_class(name, class_name) or is_hot_function_name(name)


def is_test_path(path: str) -> bool:
    """A test module or a file under a tests/test_utils folder: `tests/x.py`, `test_x.py`, `x_test.py`, `conftest.py`,
    nequip's `utils/unittests/`."""
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    return (
        base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
        or any(p in ("tests", "test", "testing", "test_utils", "unittests", "unit_tests") for p in parts[:-1])
    )


# File and folder name parts of code that is not training: its loops that call backward are a demo or a test, not the
# training a user ships (`demo/`, `inference.py`, `sample_images.py`, `export_onnx.py`). A benchmark of training
# steps (`bench.py`) runs training steps: it is training.
NOT_TRAINING_PARTS = frozenset(
    {"demo", "demos", "inference", "infer", "sample", "sampling", "generate",
     "generation", "export", "eval", "evaluate", "evaluation", "predict", "prediction", "test", "tests", "testing",
     "visualize", "visualization", "viz", "plot", "plotting", "render", "rendering", "convert", "deploy", "serve",
     "server", "app", "gradio", "streamlit", "notebook", "notebooks", "docs", "doc", "playground", "verify",
     "preprocess", "preprocessing", "onnx", "torchscript", "extract", "hubconf", "synthesis", "synthesize",
     "translate", "prepare", "merge"}
)


_DEMO_FOLDERS = frozenset({"demo", "demos"})
_ARCHIVED_FOLDERS = frozenset({"legacy", "deprecated", "deprecate", "archive", "archived", "old", "obsolete", "backup",
                               "bak"})
# A folder a file manager duplicated (tab-ddpm's `CTAB-GAN-Plus/model copy/`, `utils - Copy`, `Copy of model`,
# `model (2)`): no package an import can name, a copy kept beside the code that runs.
_DUPLICATE_FOLDER = re.compile(r"(?i)(?: -)? copy(?: \d+)?$|^copy of |\s\(\d+\)$")
# A file kept as a copy beside the one that runs (textual_inversion's `ldm/modules/encoders/modules_bak.py`,
# `train_old.py`, `model copy.py`): the word after its last underscore says so.
_BACKUP_SUFFIXES = frozenset({"bak", "backup", "old", "deprecated", "unused"})


def _backup_copy(stem: str) -> bool:
    head, _, last = stem.lower().rpartition("_")
    return bool(head) and last in _BACKUP_SUFFIXES or bool(_DUPLICATE_FOLDER.search(stem))


# Documentation (skrl's `docs/source/snippets/`: models that subclass the library's mixins, shown in the docs and run
# by no training).
_DOCS_FOLDERS = frozenset({"docs", "doc", "documentation"})
# A copy of a library kept inside the project (ControlNet's `annotator/uniformer/mmcv/`, a `third_party/` folder): the
# library's own training code and hooks, not the training this project ships. A library's folder under a layout
# folder (`src/transformers/`) is the library itself.
_VENDOR_FOLDERS = frozenset({"third_party", "thirdparty", "3rdparty", "vendor", "vendored", "external", "extern"})
LIBRARY_FOLDERS = frozenset(
    {"mmcv", "mmseg", "mmdet", "mmdet3d", "mmengine", "mmpretrain", "mmcls", "timm", "transformers", "diffusers",
     "detectron2", "fairseq", "apex", "deepspeed", "accelerate", "peft", "torchvision", "open_clip", "clip"}
)
_LAYOUT_FOLDERS = frozenset({"src", "lib", "libs", "python", "packages"})


def _vendored(folders: list[str]) -> bool:
    for index, folder in enumerate(folders):
        name = folder.lower()
        if name in _VENDOR_FOLDERS:
            return True
        # `annotator/uniformer/mmcv/runner/hooks.py`: two folders down, with subpackages of its own. Not
        # `examples/transformers/main.py`, an example named for the library it uses, nor `repo/timm/models/vit.py`,
        # the library itself linted from the folder above its checkout.
        if 2 <= index < len(folders) - 1 and name in LIBRARY_FOLDERS \
                and any(f.lower() not in _LAYOUT_FOLDERS for f in folders[:index]):
            return True
    return False


def is_training_path(path: str) -> bool:
    """Could a training loop in this file be the training a user ships? Not in tests, demos, inference, sampling,
    export or evaluation scripts: by the words of the file's name (`sample_images.py`), and by folders named for
    one of them as a whole (`demo/`, `inference/`; not `conditional_generation/`, a task's name). Not in a folder of
    archived code (`legacy/`, `deprecated/`) or a vendored copy of a library (`third_party/`,
    `annotator/uniformer/mmcv/`), whatever its files are named."""
    if is_kept_apart(path):
        return False
    *folders, name = path.replace("\\", "/").removesuffix(".py").split("/")
    if any(folder.lower() in _DEMO_FOLDERS for folder in folders):
        return False  # `demo/gligen/trainer.py`: a copy a demo app imports for its helpers, whatever the file's name
    if named_for_training(path):
        return True
    words = name_parts(name)
    # A private folder (`_export/`) is named by what follows its underscores.
    return not (words & NOT_TRAINING_PARTS
                or any(folder.lower().strip("_") in NOT_TRAINING_PARTS for folder in folders))


def is_profiler_path(path: str) -> bool:
    """A module of a profiler (`profiler/prober.py`, `utils/profiling.py`): what it does in the step is opt-in
    measurement, on the steps a user asks to profile."""
    return _path_named(path, _PROFILER_WORDS)


def is_benchmark_path(path: str) -> bool:
    """A file of a benchmark suite: under a `benchmarks/` (`benchmark/`, `bench/`) folder, or named for one
    (`bench_collectors.py`, `benchmark_step.py`)."""
    return _path_named(path, _BENCHMARK_WORDS)


def _path_named(path: str, words: frozenset[str]) -> bool:
    """Is a folder on the path one of `words`, or a part of the file's name?"""
    *folders, name = path.replace("\\", "/").removesuffix(".py").split("/")
    return bool(name_parts(name) & words) or any(folder.lower() in words for folder in folders)


_PROFILER_WORDS = frozenset({"profiler", "profilers", "profiling"})
_BENCHMARK_WORDS = frozenset({"bench", "benchmark", "benchmarks", "benchmarking"})


def is_kept_apart(path: str) -> bool:
    """A test, a backup copy of a file (`modules_bak.py`), a file in a folder of archived code (`legacy/train_v1.py`:
    kept for reference, not the training a user runs), of documentation (`docs/`) or in a vendored copy of a library
    (`third_party/`): no part of training, whatever imports it."""
    if is_test_path(path):
        return True
    *folders, name = path.replace("\\", "/").split("/")
    if _backup_copy(name.removesuffix(".py")):
        return True
    return any(folder.lower().strip("_") in _ARCHIVED_FOLDERS or folder.lower() in _DOCS_FOLDERS
               or _DUPLICATE_FOLDER.search(folder) for folder in folders) or _vendored(folders)


TRAINING_PARTS = frozenset({"train", "training", "trainer", "finetune", "pretrain", "fit"})


def named_for_training(path: str) -> bool:
    """A file or a folder on its path named for training: `train.py`, `training/loop.py`, `finetune_lora.py`."""
    *folders, name = path.replace("\\", "/").removesuffix(".py").split("/")
    return bool(name_parts(name) & TRAINING_PARTS) or any(name_parts(folder) & TRAINING_PARTS for folder in folders)

# Where reinforcement learning keeps transitions for learning (`self.replay_buffer.add(...)`, `rollouts.insert(...)`).
TRANSITION_STORE_PARTS = frozenset({"buffer", "replay", "memory", "rollout", "rollouts", "storage"})
ENVIRONMENT_PARTS = frozenset({"env", "envs", "environment", "environments"})


def steps_environment(func: str) -> bool:
    """`self.env.step(actions)`, `envs.step(a)`, `train_env.step(a)`: a step of a reinforcement-learning
    environment."""
    receiver, _, method = func.rpartition(".")
    return method == "step" and bool(name_parts(receiver.rsplit(".", 1)[-1].lstrip("_")) & ENVIRONMENT_PARTS)


# The receiver of a call of Accelerate's or Fabric's (`accelerator.prepare(...)`, `fabric.all_reduce(x)`), and their
# calls that hand back loaders yielding batches already on the device.
ACCELERATE_OR_FABRIC = re.compile(r"accelerator|fabric", re.IGNORECASE)
PREPARE_METHODS = frozenset({"prepare", "prepare_data_loader", "setup_dataloaders"})
# torch's loader classes that take `pin_memory` (webdataset's `WebLoader` derives from torch's `DataLoader`).
LOADER_CLASSES = frozenset({"DataLoader", "WebLoader"})
# Project helpers that move a (nested) batch with plain `.to(device)` (OLMo, Accelerate's send_to_device default).
BATCH_MOVE_HELPERS = frozenset({"move_to_device", "to_device", "send_to_device", "batch_to_device", "move_to_cuda"})
