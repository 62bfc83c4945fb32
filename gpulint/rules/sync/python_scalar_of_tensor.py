"""GPL402 python-scalar-of-tensor."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.names import dotted_name, last_name, params_of
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.common import is_number, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import range_bound, size_of
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


# A slice whose bound is not a number (`x[start:ends[i]]`, `x[:n]`): a tensor bound is read on the host.
_NAMED_SLICE_BOUND = re.compile(r"\[[^\[\]\n]*:[ \t]*[A-Za-z_(]|[\w\])][ \t]*:[ \t]*[\],]")
# A name bound to a list display (`order = [0] * n`), which a tensor may index.
_LIST_BOUND = re.compile(r"\w[ \t]*=[ \t]*\[")
# Arguments that PyTorch converts to a Python int: `torch.topk(x, k)` / `x.topk(k)` (position in the function form).
_INT_ARGUMENTS = {"topk": ("k", 1), "kthvalue": ("k", 1)}
_CALL_WORDS = ("float(", "int(", "bool(", "math.", "topk(", "kthvalue(", "argmax(", "argmin(")
# `range(n)` of a value that may be a tensor (not `range(10)`, `range(len(x))`, `range(x.size(0))`, `range(x.shape[0])`).
_RANGE_OF_VALUE = re.compile(r"\brange\((?![ \t]*(?:\d|len\(|[\w.]*\.(?:size\(|shape\b)))")
# Factories whose sizes, bounds and fill values PyTorch converts to Python numbers: `x.new_zeros([B, idx.max() + 1])`,
# `torch.linspace(d.min(), d.max(), n)`.
_SIZE_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "arange", "linspace", "new_zeros",
                             "new_ones", "new_empty", "new_full"})
# The keywords that take a factory's sizes or bounds (`torch.arange(start=0, end=n)`, `torch.full(size=..., ...)`).
_SIZE_KEYWORDS = frozenset({"start", "end", "step", "steps", "size"})
_FACTORY_WORDS = ("zeros(", "ones(", "empty(", "full(", "rand(", "randn(", "arange(", "linspace(")
# Tensor methods whose sizes PyTorch converts to Python ints: `z.view(bs, -1, spatial_shapes[i][0], spatial_shapes[i][1])`.
_SHAPE_METHODS = frozenset({"view", "reshape", "expand", "repeat"})
_SHAPE_WORDS = tuple(f".{method}(" for method in sorted(_SHAPE_METHODS))


def _is_whole_argmax(expr: cst.BaseExpression) -> bool:
    """`torch.argmax(x)`, `x.argmax()` (or `argmin`) with no `dim`: the index over all elements, a 0-dim tensor."""
    if not isinstance(expr, cst.Call) or last_name(expr.func) not in ("argmax", "argmin"):
        return False
    given = [a for a in expr.args if a.keyword is None or a.keyword.value in ("dim", "axis")]
    return len(given) == (1 if isinstance(expr.func, cst.Attribute) and _is_torch(expr.func.value) else 0)


def _is_torch(receiver: cst.BaseExpression) -> bool:
    return isinstance(receiver, cst.Name) and receiver.value == "torch"


_SLICE_ROWS = ("\n\ndef slice_rows(x, starts, width=2):\n    ret = torch.zeros_like(x[:, :width])\n"
               "    for i in range(x.size(0)):\n        start = starts[i]\n        ret[i] = x[i, start:start + width]\n"
               "    return ret")


class PythonScalarOfTensor(SyncRule):
    code = "GPL402"
    reads_to_host = True
    name = "python-scalar-of-tensor"
    message = "`{func}(tensor)` converts a device tensor to a Python value every step: a blocking device-to-host copy"
    message_slice = (
        "a tensor used as a slice bound is converted to a Python int every step: a blocking device-to-host copy"
    )
    message_argument = "`{func}({name}=tensor)` converts the tensor to a Python int every step: a blocking device-to-host copy"
    message_size = (
        "`{func}` reads a tensor used as a size or bound on the host every step: a blocking device-to-host copy"
    )
    message_scalar_index = (
        "a 0-dim tensor (`argmax()` over all elements) used as an index is read with `.item()` by PyTorch's indexing "
        "every step: a blocking device-to-host copy"
    )
    message_list_index = (
        "a tensor used as an index of a Python list is converted to a Python int every step: a blocking device-to-host "
        "copy"
    )
    # A slice; a function is parsed only when a bound is not a number (below).
    triggers = _CALL_WORDS + _FACTORY_WORDS + _SHAPE_WORDS + (":",)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return any(w in code for w in _CALL_WORDS + _FACTORY_WORDS + _SHAPE_WORDS) or _NAMED_SLICE_BOUND.search(code) is not None \
            or _LIST_BOUND.search(code) is not None or _RANGE_OF_VALUE.search(code) is not None

    docs = RuleDocs(
        what_it_does="Flags `float(t)`, `int(t)`, `bool(t)`, `range(t)` and `math.*(t)` (`math.isfinite(loss)`) on a "
        "tensor, "
        "a tensor used as a slice bound (`x[start:ends[i]]`, `x[:n]` with `n = mask.sum()`), and a tensor passed "
        "where PyTorch needs a Python int (`torch.topk(x, k=ks[i])`) or number (a size, bound or fill value of a "
        "factory: `x.new_zeros([B, idx.max() + 1])`, `torch.arange(lengths.max())`, `torch.linspace(d.min(), d.max(), "
        "n)`; or a size of `view`, `reshape`, `expand`, `repeat`: `z.view(b, -1, shapes[i][0], shapes[i][1])` with "
        "`shapes` on the device), a tensor used as the index of a Python list (`order[ids[i]] = i` with `order = [0] * n`), and a 0-dim "
        "index over all elements used to index a tensor (`x[torch.argmax(scores)]`, which PyTorch selects with "
        "`.item()`), and a per-row offset used as a slice bound in a loop over a tensor's rows (`for i in "
        "range(x.size(0)): start = starts[i]; ret[i] = x[i, :, start:start + n]`, `starts` a parameter not known to "
        "hold host values: VITS's `slice_segments`), in code "
        "that runs every step and is not gated. "
        "Per-sample loops that do this once per sample are the usual case (a loss or reward function cutting each "
        "sequence at its own length).",
        why_slow="Converting a tensor to a Python number calls `.item()` under the hood: a device-to-host copy that "
        "waits for the GPU to finish everything queued before it, so the CPU stops running ahead of the GPU.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    if not math.isfinite(loss):\n        raise RuntimeError(\"diverged\")",
        use_instead="Keep the check on the device (`torch.isfinite(loss)` accumulated, read every N steps), or read "
        "the value only under a logging gate. For per-sample bounds read them all at once before the loop "
        "(`ends = ends.tolist()`), or replace the slicing by a mask (`x * (arange < ends[:, None])`).",
        fix_safety="No fix: keeping the value on the device changes its type (tensor instead of float) for every later "
        "use.",
        false_positives=known_false_positives("Values gpulint cannot see are host values (a function's return value that is a Python float "
        "but named like `loss`): move the conversion or add `# noqa: GPL402`. `total += float(loss)` is reported by "
        "GPL2xx instead. Slice bounds are flagged only when gpulint takes them for tensors (an index or a count computed "
        "by torch); a bound read by `.item()` or `.tolist()` first is a host value. A conversion in the branch an "
        "`isinstance(x, torch.Tensor)` test sends non-tensors to (`... else float(x)`) is not flagged."),
    )
    valid = (
        training_script("level = out.view(out.shape[0], -1, 1, 1)\nflat = out.reshape(-1, cfg.n_embd)\n"
                        "heads = torch.reshape(out, (out.shape[0], 1, -1))",
                        header="class cfg:\n    n_embd = 4"),
        training_script("lr = float(optimizer.param_groups[0][\"lr\"])"),
        training_script("rows = out.argmax(dim=1)\npicked = out[torch.arange(out.shape[0], device=out.device), rows]"),
        training_script("n = int(x.shape[0])"),
        # a CPU tensor's running sum stays on the CPU: its elements as slice bounds cost no copy
        training_script("bounds = torch.cumsum(torch.tensor([2, 3, 3]), dim=0)\nhead = x[bounds[0]:bounds[1]]"),
        training_script("if step % 10 == 0:\n    print(float(loss))"),
        training_script("lr = optimizer.param_groups[0][\"lr\"]\nok = math.isfinite(lr)", header="import math"),
        training_script("half = out.shape[1] // 2\nhead, tail = out[:, :half], out[:, half:]"),
        training_script("for i in range(out.shape[0]):\n    out[i] = out[i] * 2"),
        training_script("best, where = torch.topk(out, k=min(5, out.shape[1]))"),
        training_script("order = [0] * out.shape[0]\nfor i, row in enumerate(torch.argsort(out.sum(1)).tolist()):\n"
                        "    order[row] = i"),
        training_script("noise = torch.randn([out.shape[0], out.ndim], device=out.device)"),
        training_script("positions = torch.arange(start=0, end=out.shape[1], dtype=torch.long, device=out.device)"),
        training_script("grad_norm = optimizer.param_groups[0].get(\"grad_norm\", 0.0)\n"
                        "norm = grad_norm.item() if isinstance(grad_norm, torch.Tensor) else float(grad_norm)"),
        # each row's offset read once, on the host, before the per-row cuts
        training_script("starts = torch.randint(0, 2, (out.shape[0],), device=out.device).tolist()\n"
                        "rows = slice_rows(out, starts)", header=_SLICE_ROWS),
    )
    invalid = (
        Invalid(training_script("loss_f = float(loss)")),
        # a list of tensors a branch may replace with Nones still yields tensors where an element is not None
        Invalid(training_script(
            "kept = weighted(torch.stack([loss]), [torch.ones_like(loss)])",
            header="\n\ndef weighted(losses, weights: list[torch.Tensor] | None = None):\n    if weights is None:\n"
                   "        weights = [None] * len(losses)\n    kept = 0.0\n"
                   "    for loss, weight in zip(losses, weights):\n"
                   "        if weight is not None and bool((weight != 0).any()):\n"
                   "            kept = kept + loss * weight\n    return kept")),
        Invalid(training_script("best = torch.argmax(out.sum(1))\npicked = out[best].mean()")),
        Invalid(training_script("ok = math.isfinite(loss)", header="import math")),
        Invalid(training_script("correct = int((model(x).argmax(1) == y).sum())")),
        Invalid(training_script("ends = (out > 0).sum(dim=1)\nfor i in range(out.shape[0]):\n    head = out[i, :ends[i]]")),
        # Mask2Former's pixel decoder: each level's output viewed with sizes read from a device tensor of shapes
        Invalid(training_script("shapes = torch.as_tensor([(1, 1), (1, 1)], device=out.device)\n"
                                "level = out.view(-1, shapes[0][0], shapes[0][1])")),
        # Deformable DETR's reference points: each level's (H, W) row of a device tensor, unpacked, sizes a linspace
        Invalid(training_script("shapes = torch.as_tensor([(8, 8), (4, 4)], device=out.device)\n"
                                "for lvl, (h, w) in enumerate(shapes):\n"
                                "    ys = torch.linspace(0.5, h - 0.5, h, device=out.device)"), count=1),
        Invalid(training_script("order = [0] * out.shape[0]\nfor i, row in enumerate(torch.argsort(out.sum(1))):\n"
                                "    order[row] = i")),
        Invalid(training_script("ks = torch.clamp(out.sum(1).int(), min=1)\n"
                                "best, where = torch.topk(out[0], k=ks[0])")),
        Invalid(training_script("words = (out > 0).long().cumsum(1)\n"
                                "per_word = out.new_zeros([out.shape[0], words.max() + 1])\n"
                                "per_word = per_word.scatter_add(1, words, out)")),
        Invalid(training_script("last = torch.max(out.argmax(1))\npositions = torch.arange(start=0, end=last, device=out.device)")),
        Invalid(training_script("steps = torch.max(out.argmax(1))\nfor i in range(steps + 1):\n    out = out * 0.5")),
        # VITS's `slice_segments`: each row cut at its own offset (of unknown place), read one row at a time
        Invalid(training_script(
            "rows = slice_rows(out, cached.get(\"starts\", torch.zeros(out.shape[0], dtype=torch.long)))",
            header=_SLICE_ROWS + "\n\n\ncached = {}")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._scalar_indices: dict[int, set[str]] = {}  # per function: names bound to a whole-tensor argmax
        # per function: names bound to one row's element of a parameter (`idx_str = ids_str[i]`), with that element
        self._row_elements: dict[int, dict[str, cst.Subscript]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            function = id(self.context.enclosing_function())
            names = self._scalar_indices.setdefault(function, set())
            name = node.targets[0].target.value
            (names.add if _is_whole_argmax(node.value) else names.discard)(name)
            rows = self._row_elements.setdefault(function, {})
            if isinstance(node.value, cst.Subscript):
                rows[name] = node.value
            else:
                rows.pop(name, None)

    def _is_scalar_index(self, expr: cst.BaseExpression) -> bool:
        """`torch.argmax(scores)`, `x.argmin()`, or a name the function binds to one: a 0-dim integer tensor."""
        if isinstance(expr, cst.Name):
            return expr.value in self._scalar_indices.get(id(self.context.enclosing_function()), ())
        return _is_whole_argmax(expr)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`order[ids[i]] = i` with `order = [0] * n`: a Python list takes only Python ints, read one at a time.
        `x[torch.argmax(r)]`: indexing with a 0-dim integer tensor selects with its `.item()` (ATen's indexing)."""
        indices = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        scalar = next((i for i in indices if self._is_scalar_index(i)), None)
        if scalar is not None and not self.context.is_host_value(node.value) and not self.in_per_tensor_loop():
            self.report(scalar, self.message_scalar_index)
            return
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if self.tensors.is_list(node.value) and self._is_device_int(index) and not self.in_per_tensor_loop():
            self.report(index, self.message_list_index)

    def visit_Slice(self, node: cst.Slice) -> None:
        """One finding per slice, on its first bound read on the host (`x[start:start + n]` reads `start` twice, one
        sync each, and one fix mends both)."""
        for bound in (node.lower, node.upper, node.step):
            if bound is not None and (self._is_device_int(bound) or self._row_offset(bound)) \
                    and not self.in_per_tensor_loop():
                self.report(bound, self.message_slice)
                return

    def _row_offset(self, bound: cst.BaseExpression) -> bool:
        """`x[i, :, idx_str:idx_end]` in `for i in range(x.size(0))`, with `idx_str = ids_str[i]` and `idx_end =
        idx_str + n`: each row cut at its own offset, read from a parameter holding one offset per row (VITS's
        `slice_segments`, copied into most speech projects, is handed the random offsets its caller drew on the
        device). Not where the offsets are known to be host values."""
        loop = self.context.innermost_loop()
        if not isinstance(loop, cst.For) or not isinstance(loop.target, cst.Name):
            return False
        count = range_bound(loop.iter)  # `range(x.size(0))`, `range(x.shape[0])`, `range(len(x))`: x's rows
        counted = size_of(count) if count is not None and len(loop.iter.args) == 1 else None
        rows = dotted_name(counted) if counted is not None else None
        index = loop.target.value
        sliced = next((n for n in reversed(self.context.ancestors) if isinstance(n, cst.Subscript)), None)
        if rows is None or sliced is None or dotted_name(_row_source(sliced.value)) != rows:
            return False
        function = self.context.enclosing_function()
        if function is None:
            return False
        params = {param.name.value for param in params_of(function)}
        elements = self._row_elements.get(id(function), {})
        return any(_row_element(element, index) in params and not self.context.is_host_value(element.value)
                   for name in _names_in(bound) if (element := elements.get(name)) is not None)

    def _is_device_int(self, expr: cst.BaseExpression) -> bool:
        """A tensor where Python needs an int (`__index__`): a tensor, or an element of one."""
        return not self.context.is_host_value(expr) and self.tensors.is_tensor(expr)

    def _int_argument(self, node: cst.Call) -> None:
        name, position = _INT_ARGUMENTS[last_name(node.func) or ""]
        resolved = self.context.resolve(node.func) or ""
        if not resolved.startswith("torch.") and not isinstance(node.func, cst.Attribute):
            return
        arg = keyword_arg(node, name)
        if arg is None:
            positional = [a for a in node.args if a.keyword is None]
            index = position if resolved.startswith("torch.") else position - 1
            arg = positional[index] if len(positional) > index else None
        if arg is not None and self._is_device_int(arg.value) and not self.in_per_tensor_loop():
            label = resolved if resolved.startswith("torch.") else f".{last_name(node.func)}"
            self.report(node, self.message_argument.format(func=label, name=name))

    def _size_arguments(self, node: cst.Call) -> None:
        """`x.new_zeros([B, word_id.max() + 1])`, `torch.arange(lengths.max())`: a tensor where the factory needs a
        number (a torch function, or a method of an object not known to live on the host)."""
        func = node.func
        resolved = self.context.resolve(func) or ""
        method = last_name(func) or ""
        if resolved.startswith("torch."):
            label = resolved
        elif method.startswith("new_") and isinstance(func, cst.Attribute) \
                and not self.context.is_host_value(func.value):
            label = f".{method}"
        else:
            return
        numbers = []
        for arg in node.args:
            # `torch.arange(start=0, end=max_length)`: the bounds by keyword (the dtype, device and layout are none)
            if arg.star or arg.keyword is not None and arg.keyword.value not in _SIZE_KEYWORDS:
                continue
            value = arg.value
            numbers += [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
        self._report_tensor_sizes(node, numbers, label)

    def _shape_arguments(self, node: cst.Call) -> None:
        """`z.view(bs, -1, spatial_shapes[i][0], spatial_shapes[i][1])` with `spatial_shapes` on the device (Mask2Former's
        pixel decoder): each size is read on the host."""
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        sizes = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        if (self.context.resolve(func) or "").startswith("torch."):
            sizes = sizes[1:]  # `torch.reshape(q, (b, t, h, d))`: the function form takes the tensor first
        if len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)):
            sizes = [e.value for e in sizes[0].elements]
        if all(is_number(n) or isinstance(n, cst.Attribute) for n in sizes) or self.context.is_host_value(func.value):
            return  # (most calls, `x.view(-1, 4)`, `x.view(b, cfg.n_head, -1)`, name no value to read: checked first)
        self._report_tensor_sizes(node, sizes, f".{func.attr.value}")

    def _report_tensor_sizes(self, node: cst.Call, sizes: list[cst.BaseExpression], label: str) -> None:
        """Report `node` where one of its sizes is a device tensor. An attribute (`G.z_dim`, `cfg.n_embd`) is a setting
        of a module or config, not a tensor."""
        if any(not isinstance(n, cst.Attribute) and self._is_device_int(n) for n in sizes) \
                and not self.in_per_tensor_loop():
            self.report(node, self.message_size.format(func=label))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SHAPE_METHODS:
            self._shape_arguments(node)
            return
        if last_name(func) in _INT_ARGUMENTS:
            self._int_argument(node)
            return
        if last_name(func) in _SIZE_FACTORIES:
            self._size_arguments(node)
            return
        if not node.args or node.args[0].keyword is not None:
            return
        if isinstance(func, cst.Name) and func.value == "range" and not self.context.bound_here("range"):
            self._range(node)
            return
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool"):
            if len(node.args) != 1:
                return
            label = func.value
        else:
            resolved = self.context.resolve(func) or ""
            if not resolved.startswith("math."):
                return
            label = resolved
        value = node.args[0].value
        if not self.tensors.is_tensor(value) or self.in_accumulator() or self.in_per_tensor_loop():
            return
        if self.ruled_out_as_tensor(value):
            return
        self.report(node, self.message.format(func=label))

    def _range(self, node: cst.Call) -> None:
        """`for i in range(max_iters + 1)` with `max_iters = torch.max(t)`: `range` takes each bound through
        `__index__`, a `.item()` (Cold Diffusion's `q_sample`, blurring up to the batch's largest step)."""
        if any(arg.keyword is None and not arg.star and self._is_device_int(arg.value) for arg in node.args) \
                and not self.in_per_tensor_loop():
            self.report(node, self.message.format(func="range"))


def _row_source(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x` of `x[i, :, a:b]`, or of `x` itself."""
    return expr.value if isinstance(expr, cst.Subscript) else expr


def _row_element(element: cst.Subscript, index: str) -> str | None:
    """`ids_str` of `ids_str[i]` (`i` the loop's index): the name an element is taken from, one row at a time."""
    if len(element.slice) != 1 or not isinstance(element.slice[0].slice, cst.Index):
        return None
    position = element.slice[0].slice.value
    if not (isinstance(position, cst.Name) and position.value == index and isinstance(element.value, cst.Name)):
        return None
    return element.value.value


def _names_in(expr: cst.BaseExpression) -> list[str]:
    """The plain names of an expression made of names, numbers and arithmetic (`idx_str + 1`)."""
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.BinaryOperation):
        return _names_in(expr.left) + _names_in(expr.right)
    return []
