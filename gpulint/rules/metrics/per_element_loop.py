"""GPL204 per-element-loop."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import callee_method, last_name, target_names
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import LoopFactsRule, LoopFrame, index_name, range_bound, size_of


class PerElementLoop(LoopFactsRule):
    code = "GPL204"
    name = "per-element-loop"
    message = "`for i in range({bound})` runs tensor ops one row at a time: N small kernel launches per step where one batched op does the work"
    triggers = ("for ",)

    @classmethod
    def has_words_in(cls, text: str) -> bool:
        # A file that uses numpy and never names torch loops over arrays: no kernel is launched per row.
        return super().has_words_in(text) and ("torch" in text or "numpy" not in text)

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return "for " in code  # (the file test above is no test of a function: it need not name torch itself)
    docs = RuleDocs(
        what_it_does="Flags `for i in range(x.size(0))` (also `x.shape[0]`, `len(x)` of a device tensor, and a count "
        "scaled from one by a number, `num_joints = output.size(1) // 3`) in the training step when the body indexes "
        "with the loop variable (`x[i]`, or `x[i * 3 + 1]` for rows laid out in groups), and loops that write a tensor one row at a time "
        "(`for i, n in enumerate(lengths): labels[i, n:] = -100`).",
        why_slow="Every iteration launches its own small kernels on one row: for a batch of 256 that is 256x the launch "
        "count of the batched op, each launch ~5-10 us of CPU time, with the GPU mostly idle between them.",
        example="for i in range(logits.size(0)):\n    losses[i] = criterion(logits[i], y[i])",
        use_instead="The batched form: `criterion(logits, y)` with `reduction='none'`, broadcasting, `torch.gather`, "
        "`torch.where`, or `torch.vmap` for a per-sample function; for row writes, one mask: "
        "`labels[torch.arange(T) > lengths[:, None]] = -100`.",
        false_positives="Loops whose body only does host work with the index (building a Python list of file names). "
        "`len(x)` loops are flagged only when `x` is known to be on the device; chain products (`acc = x[i] @ acc`) are "
        "sequential by nature and not flagged, nor loops passing a call the state it returns "
        "(`out, h = cell(x[:, t], h)`, an unroll); nor loops in a file that uses numpy and never names torch "
        "(NMS in numpy over ONNX outputs: no kernel is launched).",
    )
    valid = (
        training_script("losses = criterion(out, y)"),
        # numpy only: NMS over an ONNX detector's outputs launches no kernel
        "import numpy as np\n\n\ndef train_step(detector, images, thr=0.5):\n    scores = detector.run(images)\n"
        "    keep = []\n    for c in range(scores.shape[1]):\n        keep.append(np.where(scores[:, c] > thr)[0])\n"
        "    return keep\n",
        training_script("names = batch_names\nfor i in range(len(names)):\n    print(names[i])"),
        training_script("grid = x.cpu().numpy()\nfor i, n in enumerate(lengths):\n    grid[i, n:] = 0"),
        training_script("chain = x[0]\nfor i in range(1, x.shape[0]):\n    chain = x[i] @ chain"),
        training_script("h = state\nfor i in range(1, actions.shape[0]):\n    out, h = model.unroll(h, actions[i])"),
        training_script("preds = preds.astype(np.float32)\nfor n in range(preds.shape[0]):\n"
                        "    dists[n] = np.linalg.norm(preds[n] - target[n])", header="import numpy as np"),
        "import torch\n\nclass TextCollate:\n    def __call__(self, batch):\n"
        "        padded = torch.zeros(len(batch), 50, dtype=torch.long)\n        for i, text in enumerate(batch):\n"
        "            padded[i, :text.size(0)] = text\n        return padded\n",
        "import torch\n\ndef evaluate(model, x):\n    for i in range(x.size(0)):\n        print(model(x[i]))\n",
    )
    invalid = (
        Invalid(training_script("for i in range(out.size(0)):\n    total = total + criterion(out[i], y[i])")),
        Invalid(training_script("for i in range(x.shape[0]):\n    x[i] = x[i] / x[i].norm()")),
        Invalid(training_script("labels = y.clone()\nfor i, n in enumerate(lengths):\n    labels[i, n:] = -100")),
        Invalid(training_script("bs = x.size(0)\nfor b in range(bs):\n"
                                "    picks.append(torch.multinomial(out[b].softmax(-1), 1))")),
        Invalid(training_script("n, t, d = out.shape\nfor i in range(n):\n    kept = out[i][y[i] > 0]")),
    )

    row_message = "`{tensor}[i, ...] = ...` in a Python loop writes one row per iteration, a kernel launch each; build the mask or values once and write them in one op"

    def __init__(self, context) -> None:
        super().__init__(context)
        # Locals holding a row count: `bs = x.size(0)` / `bs, t, d = x.shape` -> x; `n = len(x)` -> x, from len().
        self._size_locals: dict[tuple[int, str], tuple[cst.BaseExpression, bool]] = {}

    def wants(self, node: cst.For) -> bool:
        return True

    def judge(self, frame: LoopFrame) -> None:
        bound = range_bound(frame.node.iter)
        if bound is not None and frame.indexed_by_var and not frame.sequential and self._over_tensor_rows(bound):
            self.report_loop(frame, self.message.format(bound=self.context.module.code_for_node(bound)))

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._frames[-1]:  # in a loop: what this pass binds, and whether it carries state from the pass before
            bound = {name for target in node.targets for name in target_names(target.target)}
            for frame in self._frames[-1]:
                if _state_recurrence(node, bound, frame):
                    frame.sequential = True
                frame.bound |= bound
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Tuple):
            first = node.targets[0].target.elements[0].value if node.targets[0].target.elements else None
            shape = node.value
            if isinstance(first, cst.Name) and (
                (isinstance(shape, cst.Attribute) and shape.attr.value == "shape")
                or (isinstance(shape, cst.Call) and callee_method(shape) == "size" and not shape.args)
            ):  # `batch_size, max_len, dim = x.shape`
                base = shape.value if isinstance(shape, cst.Attribute) else shape.func.value  # type: ignore[attr-defined]
                self._size_locals[(id(self.context.enclosing_function()), first.value)] = (base, False)
            return
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            key = (id(self.context.enclosing_function()), node.targets[0].target.value)
            tensor = size_of(node.value)
            derived = self._scaled_size(node.value)
            if tensor is not None:
                self._size_locals[key] = (tensor, _is_len_call(node.value))
            elif derived is not None:
                self._size_locals[key] = derived  # `num_joints = num_channels // 3`: a count of rows all the same
            else:
                self._size_locals.pop(key, None)
            if _matmul_recurrence(node.targets[0].target.value, node.value):
                for frame in self._frames[-1]:
                    frame.sequential = True
            return
        # `t[i, a:b] = v` with i a loop variable: reported on the write itself, the line that runs N times.
        for target in node.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript) or len(sub.slice) < 2:
                continue
            index = index_name(sub.slice[0])
            if index is None or _in_collate(self.context):
                continue
            for frame in self._frames[-1]:
                if index in frame.loop_vars and not frame.reported and not self.context.is_host_value(sub.value):
                    frame.reported = True
                    self.report(node, self.row_message.format(tensor=self.context.module.code_for_node(sub.value)))
                    return

    def _scaled_size(self, value: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
        """The size local `n` of `n // 3`, `n * 2`, `n - 1` (a row count scaled by a number): what `n` counts."""
        if not (isinstance(value, cst.BinaryOperation) and isinstance(value.left, cst.Name)
                and isinstance(value.right, cst.Integer)
                and isinstance(value.operator, (cst.FloorDivide, cst.Multiply, cst.Subtract, cst.Add))):
            return None
        return self._size_locals.get((id(self.context.enclosing_function()), value.left.value))

    def _over_tensor_rows(self, bound: cst.BaseExpression) -> bool:
        if isinstance(bound, cst.Name):  # `bs = image.size(0)` earlier in the function
            tensor, from_len = self._size_locals.get((id(self.context.enclosing_function()), bound.value), (None, False))
        else:
            tensor, from_len = size_of(bound), _is_len_call(bound)
        if tensor is None or self.context.is_host_value(tensor):
            return False
        # `len(x)` is a tensor's row count only when x is known to be on the device (lists have a len too).
        return self.context.location_of(tensor) == "device" if from_len else True


def _is_len_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len"


def _in_collate(context) -> bool:
    """Inside a collate function or a `*Collate*` class: it runs in DataLoader workers on CPU tensors."""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.FunctionDef) and "collate" in node.name.value.lower():
            return True
        if isinstance(node, cst.ClassDef):
            return "collat" in node.name.value.lower()
    return False


def _state_recurrence(node: cst.Assign, bound: set[str], frame: LoopFrame) -> bool:
    """`value, reward, hidden = model.recurrent_inference(hidden, actions[:, i])`, `h = cell(x[i], h)`, where the state
    comes from before the loop: a call given the state it returns, each pass needing the one before (MuZero's unroll,
    an RNN cell), sequential by nature. Not `scores = clamp(scores, 0, 1)` on what this pass bound."""
    if not isinstance(node.value, cst.Call):
        return False
    carried = bound - frame.bound - frame.loop_vars
    return any(isinstance(arg.value, cst.Name) and arg.value.value in carried for arg in node.value.args)


def _matmul_recurrence(name: str, value: cst.BaseExpression) -> bool:
    """`acc = x[i] @ acc` / `acc = torch.matmul(acc, x[i])`: each step needs the previous one (a chain product), so the
    loop is sequential by nature and no batched op replaces it."""
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.MatrixMultiply) and any(
            isinstance(side, cst.Name) and side.value == name for side in (value.left, value.right)
        ):
            return True
        return _matmul_recurrence(name, value.left) or _matmul_recurrence(name, value.right)
    if isinstance(value, cst.Call) and last_name(value.func) in ("matmul", "mm", "bmm"):
        return any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args)
    return False
