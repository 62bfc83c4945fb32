"""Which expressions of training code hold tensors whose data may live on the device (shared by the GPL4xx rules).

`Tensors` answers per function from the assignments seen so far, on top of the engine's device provenance
(`context.location_of`): host values are never tensors, and a value is a tensor when it comes from torch, a tensor
method, a parameter/gradient, or a name bound to one of those in the same function.
"""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.context import SAME_PLACE_FUNCTIONS, VALUE_BUILTINS
from gpulint.linter.names import dotted_name, last_name, name_parts, params_of
from gpulint.linter.syntax import SyntaxVisitor
from gpulint.rules.common import keyword_arg

# Tensor methods that return a tensor. The first group exists only on tensors; the second also on numpy arrays and
# other containers, so it makes a tensor only when its receiver is one.
_TENSOR_ONLY_METHODS = frozenset(
    {
        "detach", "norm", "cuda", "softmax", "log_softmax", "argmax", "argmin", "eq", "ne", "gt", "lt", "ge", "le",
        "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_not", "masked_fill", "float", "half",
        "bfloat16", "long", "sigmoid", "relu", "amax", "amin", "unsqueeze", "contiguous", "type_as", "view",
        "nansum", "nanmean", "topk", "square", "rsqrt", "clamp", "clamp_min", "clamp_max", "squeeze", "expand",
        "nonzero", "argwhere", "masked_select", "index_select", "gather", "new_zeros", "new_ones", "new_full",
        "new_empty", "new_tensor", "expand_as", "view_as", "reshape_as", "cumprod", "logsumexp", "repeat_interleave",
        "narrow", "scatter", "scatter_add", "index_add", "bmm", "triu", "tril", "flip",
    }
)
_TENSOR_METHODS = _TENSOR_ONLY_METHODS | frozenset(
    {
        "sum", "mean", "max", "min", "std", "var", "abs", "sqrt", "exp", "log", "pow", "neg", "clip", "double",
        "int", "bool", "clone", "reshape", "flatten", "any", "all", "prod", "cumsum", "to", "mul", "add", "sub", "div",
        "matmul", "t", "transpose", "permute", "sort", "argsort", "median", "round", "data", "repeat",
    }
)
# torch.* functions that return something other than a tensor (or a tensor that is not the data: `torch.device`).
_TORCH_NON_TENSOR = frozenset(
    {
        "device", "dtype", "Size", "Generator", "no_grad", "enable_grad", "inference_mode", "autocast", "manual_seed",
        "save", "load", "compile", "numel", "typename", "set_grad_enabled", "finfo", "iinfo", "get_default_dtype",
        "use_deterministic_algorithms", "set_float32_matmul_precision", "get_rng_state", "seed", "initial_seed",
        "equal",  # a Python bool (read from the device: GPL405 reports the call)
    }
)
# Names of nn.Modules (moved to the device too, but their attributes are Python values).
MODULE_NAME = re.compile(r"model|module|net$|network|criterion|encoder|decoder", re.IGNORECASE)
_TORCH_TENSOR_FUNCTIONS = frozenset({"nn.utils.clip_grad_norm_", "nn.utils.get_total_norm"})
# Names that hold tensors in training code: `loss`, `total_loss`, `ce_loss`, `logits`; not flags or helpers named
# after them (`return_loss`, `loss_fn`, `loss_name`, `grad_accum_steps`).
_TENSOR_LAST_PARTS = frozenset({"loss", "losses", "logits"})
_FLAG_FIRST_PARTS = frozenset({"return", "use", "compute", "with", "has", "is", "should", "enable", "need", "calc"})
_TENSOR_NAMES = frozenset({"grad", "grads", "grad_norm", "total_norm", "param_norm"})
# `loss_jepa`, `loss_reg`: a loss by its first part, unless its last part names something else about losses.
_LOSS_NOT_TENSOR_PARTS = frozenset(
    {"fn", "fns", "func", "function", "type", "name", "names", "weight", "weights", "scale", "coef", "coeff", "ratio",
     "mode", "cfg", "config", "kwargs", "args", "keys", "meter", "meters", "log", "logs", "str", "history", "module",
     "cls", "class", "items", "list", "dict", "scaler", "factor", "lambda", "lam", "alpha", "beta", "w", "idx", "every",
     "freq", "interval", "step", "steps", "count", "num", "sum", "avg", "mean", "total", "accum", "tracker", "window",
     "shape", "shapes", "size", "sizes", "dim", "dims", "len", "length", "dtype", "device", "rank", "id", "ids", "index",
     "key", "prefix", "suffix", "path", "file", "dir", "level", "val", "value", "values", "fmt", "format"}
)
_TENSOR_ATTRS = frozenset({"grad", "loss", "logits"})
# Methods that only a tensor has: not a NumPy array, a module or a Python container (`target.new_ones(...)`,
# `mask.masked_fill(...)`). A parameter its function calls one on is a tensor, whatever its name.
_RECEIVER_IS_TENSOR = frozenset(
    {"new_ones", "new_zeros", "new_full", "new_empty", "new_tensor", "masked_fill", "masked_fill_", "detach",
     "type_as", "expand_as", "view_as", "unsqueeze", "index_select", "masked_select", "softmax", "log_softmax",
     "sigmoid", "contiguous", "clamp", "clamp_"}
)
# Methods whose result is a mask when their receiver is one (`fg_mask.clone()`, `keep.view(-1)`).
_MASK_KEEPING_METHODS = frozenset(
    {"clone", "detach", "contiguous", "view", "reshape", "flatten", "squeeze", "unsqueeze", "expand", "expand_as",
     "to", "cuda", "repeat", "t", "transpose", "permute"}
)
# Reductions that give a tensor whatever the receiver's dtype: `x.sum(dim=1)` (numpy says `axis=`, Python's
# builtins take no `dim`).
_DIM_KEYWORDS = ("dim", "keepdim")
_UNKNOWN_SOURCES = frozenset({cst.Subscript, cst.Attribute, cst.Call})
# Annotations naming torch's tensor types (`torch.Tensor`, `Tensor`, `torch.LongTensor`), and sequences of them.
# `Tensor`, `torch.LongTensor`, and a distributed `DTensor`
_TENSOR_ANNOTATION = re.compile(r"(?<![\w.])(?:torch\.)?(?:[A-Z][a-z]+|D)?Tensor\b")
# `List[Tensor]`, and `Optional[List[Tensor]]` (ORZ's `custom_rewards`): a sequence, whose truth test is `len() > 0`.
_SEQUENCE_ANNOTATION = re.compile(
    r"^(?:(?:typing\.)?Optional\[)?(?:typing\.)?(?:List|Sequence|Iterable|Tuple|list|tuple)\[")

# Parts of a name for positions, not for a boolean mask (`mask_pos`, `mask_idx`, `mask_positions`).
_POSITION_PARTS = frozenset({"pos", "position", "positions", "idx", "idxs", "index", "indices", "ind", "inds", "loc",
                             "locs", "id", "ids"})


def _named_mask(name: str) -> bool:
    """A name that says mask and not where one is (`mask_pos`, `mask_idx`, `self.mask_index`: the mask token's place
    or id, a number or one per row)."""
    parts = name_parts(name)
    return "mask" in parts and not parts & _POSITION_PARTS


class Tensors:
    """Which names hold tensors, per function, from the assignments seen so far; and `is_tensor(expr)`.

    One per rule instance: it only reads assignments (O(1) each), so keeping several is cheaper than sharing state.
    """

    def __init__(self, context) -> None:
        self.context = context
        self._bound: dict[tuple[int, str], bool | None] = {}  # None: bound to an unknown value, judged by name
        self._masks: set[tuple[int, str]] = set()
        # Names bound to a value compared with a number (`rel_ind = x == self.dim - 1`, `x` of unknown kind): a mask
        # once it indexes a tensor (`confirmed_mask`)
        self._maybe_masks: set[tuple[int, str]] = set()
        self._tensor_attributes: set[str] = set()  # `self.queue_ptr` registered as a buffer or assigned a tensor
        self._buffers: set[str] = set()  # the names the file's modules register buffers under (`"alpha_bars"`)
        self._tensor_sequences: set[tuple[int, str]] = set()  # parameters annotated `List[torch.Tensor]`
        self._lists: set[tuple[int, str]] = set()  # names bound to a list display (`order = [0] * n`)
        # by class (its node's id): the attributes of `self` its methods set only to lists (`_list_attributes_of`)
        self._list_attributes: dict[int, frozenset[str]] = {}
        # names bound to a NumPy array of indices (`idxes = np.random.randint(0, n, size=b)`)
        self._index_arrays: set[tuple[int, str]] = set()
        self._batch_samplers: set[tuple[int, str]] = set()  # names bound to a `BatchSampler(...)`
        # names bound to integer positions (`argsort`, `topk`'s indices): they gather a fixed number of elements
        self._indices: set[tuple[int, str]] = set()
        # by function (its node's id): the parameters it calls a tensor-only method on (`_params_used_as_tensors`)
        self._tensor_params: dict[int, frozenset[str]] = {}

    def _key(self, name: str) -> tuple[int, str]:
        return (id(self.context.enclosing_function()), name)

    # -- updates, called from the rule's leave_Assign / visit_For
    def assigned(self, node: cst.Assign | cst.AnnAssign) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and (
                len(target.elements) == len(value.elements)
            ):
                for name, element in zip(target.elements, value.elements):
                    self._bind(name.value, element.value)
            elif isinstance(target, (cst.Tuple, cst.List)) and self.is_mask(value):
                for element in target.elements:  # `j, k = mask_pair.T`: each row is a mask
                    if isinstance(element.value, cst.Name):
                        key = self._key(element.value.value)
                        self._bound[key] = True
                        self._masks.add(key)
            elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call) and self.is_tensor(value):
                for element in target.elements:  # `values, indices = torch.min(cost, dim=0)`: each part is a tensor
                    if isinstance(element.value, cst.Name):
                        key = self._key(element.value.value)
                        self._bound[key] = True
                        self._masks.discard(key)
                if len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name) \
                        and last_name(value.func) in _VALUES_AND_INDICES:
                    # `_, clean_mask = torch.topk(loss, k)`: integer positions, whatever the name says
                    self._indices.add(self._key(target.elements[1].value.value))
            elif isinstance(target, (cst.Tuple, cst.List)):
                # `preds, partial_loss = model(x)`: bound here (judged by name); a name bound before keeps what it
                # held (`targets, n = self.validate(targets)` hands the tensor back)
                for element in target.elements:
                    if isinstance(element.value, cst.Name):
                        self._bound.setdefault(self._key(element.value.value), None)
            else:
                self._bind(target, value)

    def aug_assigned(self, node: cst.AugAssign) -> None:
        """`loss_reg = 0.` then `loss_reg += torch.mean(...)`: adding a tensor to a Python number makes a tensor (of a
        name, or of an attribute of `self`)."""
        if not self.is_tensor(node.value) or self.context.location_of(node.value) == "host":
            return
        if isinstance(node.target, cst.Name):
            self._bound[self._key(node.target.value)] = True
        elif isinstance(node.target, cst.Attribute) and isinstance(node.target.value, cst.Name) \
                and node.target.value.value == "self":  # `self.tokens += (y >= 0).sum()`: a tensor counter from now on
            self._tensor_attributes.add(node.target.attr.value)

    def buffer_registered(self, call: cst.Call) -> None:
        """`self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))`."""
        if last_name(call.func) in ("register_buffer", "register_parameter") and call.args:
            name = call.args[0].value
            if isinstance(name, cst.SimpleString):
                self._tensor_attributes.add(name.raw_value)
                self._buffers.add(name.raw_value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            if self.is_tensor(value) and not isinstance(value, cst.Name) and not self._object_moved(value):
                self._tensor_attributes.add(target.attr.value)
            return
        if not isinstance(target, cst.Name):
            return
        key = self._key(target.value)
        if _is_list_display(value) or isinstance(value, cst.Call) \
                and dotted_name(value.func) in self.context.facts.list_returning:
            self._lists.add(key)  # (or what a project function returns as a list: `t = sched.uniform_sample_t(b)`)
        else:
            self._lists.discard(key)
        if type(value) in (cst.ListComp, cst.GeneratorExp) and self.is_tensor(value.elt):
            # `ids = [x[m] for x, m in zip(ids, masks)]`: a loop over it yields tensors (a rebinding to anything else
            # may sit in a branch, `if ws is None: ws = [None] * n`, so it leaves what the name held)
            self._tensor_sequences.add(key)
        if isinstance(value, cst.Call) and self.context.resolve(value.func) in _NUMPY_INDEX_ARRAYS:
            self._index_arrays.add(key)
        else:
            self._index_arrays.discard(key)
        if _is_batch_sampler(value):
            self._batch_samplers.add(key)
        else:
            self._batch_samplers.discard(key)
        # What comes from something unknown (`labels.dones[:, :-1]`, `criterion(out, y)`) is judged by its name
        # later, as an unbound name is: `loss = criterion(out, y)` is a tensor, `n = count(batch)` is not known to be.
        self._bound[key] = self.is_tensor(value) or (None if self._of_unknown_place(value) else False)
        if _gives_indices(value):
            self._indices.add(key)
        else:
            self._indices.discard(key)
        if self.is_mask(value):
            self._masks.add(key)
        else:
            self._masks.discard(key)
        if key not in self._masks and _compared_with_a_number(value):
            self._maybe_masks.add(key)
        else:
            self._maybe_masks.discard(key)

    def _object_moved(self, value: cst.BaseExpression) -> bool:
        """`loss_cls(**opt).to(device)`, `PerceptualLoss(...).cuda()`: an object built from a class (a name in
        CamelCase, or one ending in `cls`), then moved: a module, not a tensor (`torch.FloatTensor(x).cuda()` is one)."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("to", "cuda") and isinstance(value.func.value, cst.Call)):
            return False
        built = value.func.value.func
        name = last_name(built) or ""
        if (self.context.resolve(built) or "").startswith("torch."):
            return False
        return name[:1].isupper() and not name.isupper() or name.lower().endswith("cls")

    def _of_unknown_place(self, value: cst.BaseExpression) -> bool:
        """Does nothing here say what `value` is: an unknown call, attribute or subscript, a name bound to one (or
        never bound), or arithmetic of those and numbers (`-critic(s, a).mean()`, `ploss + w * me_max` of a loss
        function's outputs)?"""
        kind = type(value)
        if kind in _UNKNOWN_SOURCES:
            return self.context.location_of(value) == "unknown"
        if kind is cst.Name:
            return self._bound.get(self._key(value.value)) is None and self.context.location_of(value) == "unknown"
        if kind is cst.UnaryOperation:
            return self._of_unknown_place(value.expression)
        if kind is cst.BinaryOperation:
            sides = (value.left, value.right)
            numbers = [type(side) in (cst.Integer, cst.Float) for side in sides]
            return not all(numbers) and all(n or self._of_unknown_place(side) for n, side in zip(numbers, sides))
        return False

    def annotated(self, param: cst.Param) -> None:
        """`ids: torch.Tensor` binds a tensor. A parameter annotated as a sequence (`grads: list[DTensor]`,
        `Optional[List[Tensor]]`) is no tensor (its truth test is its length), and of tensors its elements are. A
        tensor parameter that defaults to None (`input_pos: Optional[Tensor] = None`) is an optional input, often
        given only on another path (generation's cache positions): left to its name."""
        if param.annotation is None:
            return
        text = self.context.module.code_for_node(param.annotation.annotation)
        key = self._key(param.name.value)
        if _SEQUENCE_ANNOTATION.match(text):
            # `grads: list[DTensor]`: a list, whose truth test is its length, whatever its name says
            self._bound[key] = False
            if _TENSOR_ANNOTATION.search(text):
                self._tensor_sequences.add(key)
            return
        if isinstance(param.default, cst.Name) and param.default.value == "None":
            return
        if _TENSOR_ANNOTATION.search(text):
            self._bound[key] = True

    def _elements_are_tensors(self, iterable: cst.BaseExpression) -> bool:
        """`for t in samples` with `samples: List[Tensor]`, or a tensor (iterating one yields its rows)."""
        if isinstance(iterable, cst.Name) and self._key(iterable.value) in self._tensor_sequences:
            return True
        return self.is_tensor(iterable)

    def loop_target(self, node: cst.For) -> None:
        # `for sample in samples` (a tensor, or a list of tensors); `zip(prompts, samples)` and `enumerate(ids)`
        # element by element.
        if isinstance(node.target, cst.Name) and (_is_batch_sampler(node.iter) or isinstance(node.iter, cst.Name)
                                                  and self._key(node.iter.value) in self._batch_samplers):
            # `for indices in BatchSampler(SubsetRandomSampler(range(n)), size, drop_last=True)`: each batch of
            # indices is a Python list (PPO's minibatches)
            key = self._key(node.target.value)
            self._lists.add(key)
            self._bound[key] = False
            return
        self._bind_elements(node.target, node.iter)
        # `for p in model.parameters()` / `for name, p in model.named_parameters()`: p is a tensor.
        if not isinstance(node.iter, cst.Call):
            return
        method = last_name(node.iter.func)
        target = node.target
        if method in ("parameters", "buffers") and isinstance(target, cst.Name):
            self._bound[self._key(target.value)] = True
        elif method in ("named_parameters", "named_buffers") and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            second = target.elements[1].value
            if isinstance(second, cst.Name):
                self._bound[self._key(second.value)] = True

    def _bind_elements(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """Bind the names of a loop's target that take tensors element by element, through nested `zip` and
        `enumerate` (slice_segments' `for i, (start, end) in enumerate(zip(starts, ends))`: `start` and `end` are
        0-d tensors of `starts` and `ends`)."""
        parts = _zipped(iterable)
        if isinstance(target, cst.Name) and self._elements_are_tensors(iterable):
            self._bound[self._key(target.value)] = True
        elif isinstance(target, (cst.Tuple, cst.List)) and parts is not None and len(target.elements) == len(parts):
            for element, part in zip(target.elements, parts):
                if part is not None:
                    self._bind_elements(element.value, part)

    # -- queries
    def named_only(self, expr: cst.BaseExpression) -> bool:
        """Would `expr` be a tensor by its name alone: a parameter or global its function never binds (`aux_loss`
        passed in), or a string key (`hparams["add_f0_loss"]`), not known to live on the device? Such names are as
        often Python flags."""
        if self.context.location_of(expr) == "device":
            return False
        if isinstance(expr, cst.Name):
            return self._key(expr.value) not in self._bound and not self._used_as_tensor(expr.value)
        return isinstance(expr, cst.Subscript) and _string_index(expr) is not None

    def _used_as_tensor(self, name: str) -> bool:
        """Is `name` a parameter of the enclosing function that the function calls a tensor-only method on
        (`L2Loss.update_weight(self, pred, target, ...)` calls `target.new_ones(...)`)? Read once per function, when a
        question about one of its parameters first needs it."""
        function = self.context.enclosing_function()
        if function is None:
            return False
        found = self._tensor_params.get(id(function))
        if found is None:
            found = self._tensor_params[id(function)] = _params_used_as_tensors(function)
        return name in found

    def is_index_array(self, expr: cst.BaseExpression) -> bool:
        """A name its function bound to a NumPy array of positions (`np.random.randint(0, n, size=b)`)."""
        return isinstance(expr, cst.Name) and self._key(expr.value) in self._index_arrays

    def _list_attributes_of(self, node: cst.ClassDef) -> frozenset[str]:
        """The attributes the class's methods set only to lists of host values (an ensemble layer's `self.select =
        list(range(ensemble_size))`, a pose head's `self.parents = [0, 0, 1]`); read when an index asks, not for every
        class of every file."""
        found = self._list_attributes.get(id(node))
        if found is None:
            kinds: dict[str, bool] = {}
            for assign in _self_assignments(node):
                for target in assign.targets:
                    attribute = target.target
                    if isinstance(attribute, cst.Attribute) and isinstance(attribute.value, cst.Name) \
                            and attribute.value.value == "self":
                        listed = _is_list_display(assign.value) or _is_list_call(assign.value)
                        kinds[attribute.attr.value] = kinds.get(attribute.attr.value, True) and listed
            found = self._list_attributes[id(node)] = frozenset(name for name, listed in kinds.items() if listed)
        return found

    def is_list(self, expr: cst.BaseExpression) -> bool:
        """A name its function bound to a list display (`[0] * n`, `[]`, `[None for _ in ids]`), or an attribute of
        `self` its class sets only to lists (`_list_attributes_of`): a Python list."""
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = next((n for n in reversed(self.context.ancestors) if isinstance(n, cst.ClassDef)), None)
            return cls is not None and expr.attr.value in self._list_attributes_of(cls)
        return isinstance(expr, cst.Name) and self._key(expr.value) in self._lists

    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        """True when `expr` is (very likely) a tensor whose data may live on the device."""
        location = self.context.location_of(expr)
        if location == "host":
            return False
        if location == "device":
            return True
        if isinstance(expr, cst.Name):
            key = self._key(expr.value)
            bound = self._bound.get(key)
            if bound is not None:
                return bound
            return _tensor_name(expr.value) or key not in self._bound and self._used_as_tensor(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _TENSOR_ATTRS:
                return True
            if expr.attr.value in ("values", "indices") and isinstance(expr.value, cst.Call):
                return self.is_tensor(expr.value)  # `x.min(dim=-1).values`
            if isinstance(expr.value, cst.Name) and expr.value.value == "self" and expr.attr.value in self._tensor_attributes:
                return True
            if expr.attr.value in self._buffers:
                return True  # `self.var_sched.alpha_bars`, a buffer another module of the file registers
            if self.context.location_of(expr.value) == "device" and not MODULE_NAME.search(last_name(expr.value) or ""):
                return True  # `batch.y`, `data.train_mask` of a batch moved to the device (not `net.label_dim`)
            return expr.attr.value == "data" and self.is_tensor(expr.value)
        if isinstance(expr, cst.Subscript):
            key = _string_index(expr)
            if key is not None and _tensor_name(key):
                return True
            if isinstance(expr.value, cst.Name) and self._key(expr.value.value) in self._tensor_sequences:
                return True  # `grads[0]` of `grads: List[Tensor]`
            if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index \
                    and self.is_mask(expr.slice[0].slice.value):
                return True  # `ids[attention_mask]`: what a boolean tensor indexes is a tensor
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.Call):
            return self._call_is_tensor(expr)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_tensor(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
            if any(_enum_member(side) for side in (expr.left, *(c.comparator for c in expr.comparisons))):
                return False  # `loss_mask == LossMask.output_only`: a setting compared with an Enum's member
            return self.is_tensor(expr.left) or any(self.is_tensor(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.BooleanOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        return False

    def _call_is_tensor(self, call: cst.Call) -> bool:
        func = call.func
        resolved = self.context.resolve(func) or ""
        if resolved in SAME_PLACE_FUNCTIONS:  # `Variable(conf_t)`: what it wraps
            return bool(call.args) and call.args[0].keyword is None and self.is_tensor(call.args[0].value)
        if resolved.startswith("torch."):
            rest = resolved[len("torch."):]
            if rest.startswith(("nn.functional.", "linalg.", "special.", "fft.")) or rest in _TORCH_TENSOR_FUNCTIONS:
                return True
            return not ("." in rest or rest in _TORCH_NON_TENSOR or rest.startswith(("is_", "get_", "set_")))
        if isinstance(func, cst.Name) and func.value in VALUE_BUILTINS and (resolved or func.value) == func.value:
            # `sum(pos_mask)` of a tensor adds its elements one by one on the device: a tensor, as `max(loss, 0.1)`
            return any(arg.keyword is None and self.is_tensor(arg.value) for arg in call.args)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _TENSOR_ONLY_METHODS:
                return True
            if method == "apply" and isinstance(func.value, cst.Name) and func.value.value[:1].isupper() \
                    and any(self.is_tensor(a.value) for a in call.args):
                return True  # `AllReduce.apply(loss)`: an autograd Function of tensors gives tensors
            if method in _TENSOR_METHODS:
                if any(keyword_arg(call, word) is not None for word in _DIM_KEYWORDS):
                    return self.context.location_of(func.value) != "host"  # `x.sum(dim=1)`: only tensors say `dim=`
                return self.is_tensor(func.value) or self.is_mask(func.value)  # `mask.sum()`: masks are tensors
        return False

    def _compares_tensors(self, sides: tuple[cst.Comparison, ...]) -> bool:
        """Are the comparisons combined by element-wise logic comparisons of tensors: none of a host value, none an
        identity or membership test?"""
        return not any(
            self.context.is_host_value(side.left)
            or any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in side.comparisons)
            for side in sides
        )

    def confirmed_mask(self, index: cst.BaseExpression, indexed: cst.BaseExpression) -> bool:
        """Is `index`, a name bound to a comparison with a number (`rel_ind = x == self.dim - 1`), a mask as it indexes
        a tensor (`esigm1.expand_as(x)[rel_ind]`)? Then it is a mask wherever it indexes after (`x0[rel_ind]`): a
        Python number compared with one would be a bool, which no code indexes a tensor with."""
        if not isinstance(index, cst.Name):
            return False
        key = self._key(index.value)
        if key not in self._maybe_masks or not self.is_tensor(indexed):
            return False
        self._maybe_masks.discard(key)
        self._masks.add(key)
        return True

    def is_mask(self, expr: cst.BaseExpression) -> bool:
        """A boolean tensor: a comparison of tensors, `.bool()`, `~t`, `isnan(t)`, or a name bound to one."""
        if isinstance(expr, cst.Name):
            key = self._key(expr.value)
            if key in self._masks:
                return True
            if key in self._indices:
                return False
            # A name bound to a tensor (a mask generator's output) or to something unknown is a mask when named one,
            # unless the name says positions (`mask_pos`, `mask_idx`: where a prompt's mask token is, one per row).
            if self._bound.get(key, None) is False or self.context.location_of(expr) == "host":
                return False
            return _named_mask(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ("T", "mT"):  # `j, k = ((gxy % 1 < g) & (gxy > 1)).T`
                return self.is_mask(expr.value)
            return _named_mask(expr.attr.value) and self.context.location_of(expr) != "host"
        if isinstance(expr, cst.Comparison):
            # `rollout_data.mask > 1e-8` (sb3-contrib's recurrent buffers keep the mask as floats): a mask compared
            # with a number is a boolean mask whatever its source
            return self.is_tensor(expr) or len(expr.comparisons) == 1 and self.is_mask(expr.left) \
                and isinstance(expr.comparisons[0].comparator, (cst.Integer, cst.Float))
        if isinstance(expr, cst.IfExp):  # `pos < margin if inverted else pos > margin`
            return self.is_mask(expr.body) and self.is_mask(expr.orelse)
        if isinstance(expr, cst.Subscript) and all(
                isinstance(e.slice, cst.Slice) or isinstance(e.slice.value, cst.Integer) for e in expr.slice):
            return self.is_mask(expr.value)  # `mask[0]`, `mask[:, 1:]`: part of a mask
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self.is_mask(expr.expression) or self.is_tensor(expr.expression)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.Multiply)):
            if isinstance(expr.left, cst.Comparison) and isinstance(expr.right, cst.Comparison):
                # `(y >= 0) & (y < n)`, `(u > 0) * (l == u)`: element-wise logic on comparisons (Python code says
                # `and` for numbers)
                return self._compares_tensors((expr.left, expr.right))
            if isinstance(expr.operator, cst.Multiply):
                return False  # `mask * weight` is a number
            return self.is_mask(expr.left) or self.is_mask(expr.right)
        if isinstance(expr, cst.Call) and expr.args and keyword_arg(expr, "dtype") is None:
            # `torch.stack((torch.ones_like(j), j, k))`: stacking or copying masks makes a mask
            resolved = self.context.resolve(expr.func)
            first = expr.args[0].value
            if resolved in ("torch.stack", "torch.cat") and isinstance(first, (cst.List, cst.Tuple)):
                return any(self.is_mask(e.value) for e in first.elements if isinstance(e, cst.Element))
            if resolved in ("torch.stack", "torch.cat") and isinstance(first, cst.Name):
                return bool(name_parts(first.value) & {"mask", "masks"})  # `torch.cat(fg_masks, 0)`: a list of masks
            if resolved in ("torch.ones_like", "torch.zeros_like"):
                return self.is_mask(first)
            if resolved in ("torch.any", "torch.all") and len(expr.args) > 1:  # `torch.any(p == idx, dim=1)`
                return self.is_tensor(first) or self.is_mask(first)
            if resolved in _TORCH_MASK_FUNCTIONS:
                return True
            if resolved in _TORCH_BITWISE and len(expr.args) >= 2:  # RRHF's `torch.bitwise_and(d > 0, e < 0)`
                second = expr.args[1].value
                if isinstance(first, cst.Comparison) and isinstance(second, cst.Comparison):
                    return self._compares_tensors((first, second))
                return self.is_mask(first) and self.is_mask(second)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            receiver = expr.func.value
            if method == "bool":  # a tensor method: numpy arrays and Python values have no `.bool()`
                return self.context.location_of(receiver) != "host"
            if method in _MASK_KEEPING_METHODS:
                return self.is_mask(receiver)
            if method in ("any", "all") and expr.args:  # `is_in.any(dim=0)`
                return self.is_tensor(receiver) or self.is_mask(receiver)
            if method in _MASK_METHODS:
                return True
        return False


# Torch functions that return a boolean tensor of their inputs' shape.
# Tensor methods that return a boolean tensor of their receiver's shape (`x.isnan()`, `x.ge(p)`), and the torch
# functions that do so of their inputs (`torch.isfinite(x)`, a few more than the methods gpulint reads).
_MASK_METHODS = frozenset(
    {"isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le", "logical_not", "logical_and", "logical_or"}
)
# Element-wise logic, a boolean tensor of boolean inputs.
_TORCH_BITWISE = frozenset({"torch.bitwise_and", "torch.bitwise_or", "torch.bitwise_xor"})
_TORCH_MASK_FUNCTIONS = frozenset(
    f"torch.{name}" for name in _MASK_METHODS | {"isneginf", "isposinf", "logical_xor", "isin"}
)


# NumPy calls that make an array of positions on the host (a replay buffer's sampled rows).
_NUMPY_INDEX_ARRAYS = frozenset(f"numpy.{name}" for name in (
    "random.randint", "random.choice", "random.permutation", "arange", "argsort", "flatnonzero"))
# Calls whose result is a pair (values, integer indices), and those whose result is integer positions.
_VALUES_AND_INDICES = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median", "cummax", "cummin"})
_INDEX_FUNCTIONS = frozenset({"argsort", "argmax", "argmin", "randperm", "multinomial", "searchsorted", "bucketize"})


def _gives_indices(value: cst.BaseExpression) -> bool:
    """`loss.argsort()[:k]`, `torch.randperm(n)`, `x.topk(k).indices`, `torch.cat([torch.arange(0, c) + start for
    ...])`: integer positions, not a boolean mask."""
    while isinstance(value, cst.Subscript):  # `order[:k]`: part of the positions
        value = value.value
    if isinstance(value, cst.Attribute) and value.attr.value == "indices" and isinstance(value.value, cst.Call):
        return last_name(value.value.func) in _VALUES_AND_INDICES
    if not isinstance(value, cst.Call):
        return False
    if last_name(value.func) in ("cat", "stack") and value.args:
        parts = value.args[0].value
        if isinstance(parts, (cst.ListComp, cst.GeneratorExp)):
            return _counts_positions(parts.elt)
        return isinstance(parts, (cst.List, cst.Tuple)) and bool(parts.elements) \
            and all(_counts_positions(e.value) for e in parts.elements if isinstance(e, cst.Element))
    return last_name(value.func) in _INDEX_FUNCTIONS


def _counts_positions(expr: cst.BaseExpression) -> bool:
    """`torch.arange(0, c)`, `torch.arange(n) + offset`: a run of integer positions."""
    while isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        if _counts_positions(expr.right):
            return True
        expr = expr.left
    return isinstance(expr, cst.Call) and last_name(expr.func) in ("arange", "randperm")


def _zipped(iterable: cst.BaseExpression) -> list[cst.BaseExpression | None] | None:
    """What `zip(a, b)` (a, b) or `enumerate(a)` (the index, None, then a) yields element by element; None for any
    other iterable."""
    if not isinstance(iterable, cst.Call) or not iterable.args:
        return None
    wrapper = last_name(iterable.func)
    if wrapper == "zip":
        return [arg.value for arg in iterable.args]
    return [None, iterable.args[0].value] if wrapper == "enumerate" else None


def _is_batch_sampler(value: cst.BaseExpression) -> bool:
    """`BatchSampler(...)` (torch's, or `torch.utils.data.BatchSampler`): it yields lists of indices."""
    return isinstance(value, cst.Call) and last_name(value.func) == "BatchSampler"


def _is_list_call(value: cst.BaseExpression) -> bool:
    """`list(range(n))`: a Python list of host numbers."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list" \
        and len(value.args) == 1 and isinstance(value.args[0].value, cst.Call) \
        and last_name(value.args[0].value.func) == "range"


def _self_assignments(node: cst.ClassDef) -> list[cst.Assign]:
    """The assignments in the class's own methods (not in nested classes)."""
    found: list[cst.Assign] = []

    class Collect(SyntaxVisitor):  # read-only: libcst's own `visit` rebuilds every node it passes
        def visit_ClassDef(self, inner: cst.ClassDef) -> bool:
            return inner is node

        def visit_Assign(self, assign: cst.Assign) -> None:
            found.append(assign)

    Collect().walk(node)
    return found


def _params_used_as_tensors(function: cst.FunctionDef) -> frozenset[str]:
    """The parameters `function` calls a method of `_RECEIVER_IS_TENSOR` on, in its own body (not in a nested function
    or class, whose names are another scope)."""
    params = {p.name.value for p in params_of(function)}
    found: set[str] = set()

    class Collect(SyntaxVisitor):
        def visit_FunctionDef(self, inner: cst.FunctionDef) -> bool:
            return inner is function

        def visit_ClassDef(self, inner: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, inner: cst.Lambda) -> bool:
            return False

        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in params \
                    and func.attr.value in _RECEIVER_IS_TENSOR:
                found.add(func.value.value)

    Collect().walk(function)
    return frozenset(found)


def _is_list_display(value: cst.BaseExpression) -> bool:
    while type(value) is cst.BinaryOperation:  # `[0] * n`
        value = value.left
    return type(value) in (cst.List, cst.ListComp)


def _tensor_name(name: str) -> bool:
    parts = [p for p in re.split(r"[_.]+", name.lower()) if p]
    if not parts:
        return False
    if name in _TENSOR_NAMES or (parts[-1] in _TENSOR_LAST_PARTS and parts[0] not in _FLAG_FIRST_PARTS):
        return True
    return len(parts) > 1 and parts[0] == "loss" and parts[-1] not in _LOSS_NOT_TENSOR_PARTS


def _string_index(node: cst.Subscript) -> str | None:
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            return value.raw_value
    return None


def _compared_with_a_number(value: cst.BaseExpression) -> bool:
    """`x == 0`, `ids != -100`, `x == self.dim - 1`, `labels != self.ignore_index`: one name compared with a number,
    a negative number, arithmetic with a number, or an attribute of `self` (a setting)."""
    if not (isinstance(value, cst.Comparison) and len(value.comparisons) == 1 and isinstance(value.left, cst.Name)):
        return False
    comparison = value.comparisons[0]
    if not isinstance(comparison.operator, (cst.Equal, cst.NotEqual, cst.LessThan, cst.GreaterThan,
                                            cst.LessThanEqual, cst.GreaterThanEqual)):
        return False
    return _numberish(comparison.comparator)


def _numberish(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _numberish(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _numberish(expr.left) or _numberish(expr.right)
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _enum_member(expr: cst.BaseExpression) -> bool:
    """`LossMask.output_only`, `Mode.TRAIN.value`: a member of a class (a CamelCase name), which is an Enum's or a
    constant's, never a tensor."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Attribute) and expr.attr.value == "value":
        expr = expr.value
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value[:1].isupper() \
        and any(c.islower() for c in expr.value.value)  # (`LossMask`, not a constant such as `CFG`)
