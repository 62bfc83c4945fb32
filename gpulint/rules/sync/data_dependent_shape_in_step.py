"""GPL406 data-dependent-shape-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.linter.syntax import descendants
from gpulint.rules.common import keyword_arg
from gpulint.rules.examples import training_script
from gpulint.project.vocab import HOST_MODULE_PREFIXES
from gpulint.rules.sync.helpers import SyncRule, known_false_positives


# PyG functions that read sizes from a batch vector unless they are passed: name -> (position of the batch vector,
# ((size keyword, its position), ...)).
_PYG_SIZE_ARGUMENTS = {
    "to_dense_batch": (1, (("batch_size", 4), ("max_num_nodes", 3))),
    "to_dense_adj": (1, (("batch_size", 4), ("max_num_nodes", 3))),
    "global_add_pool": (1, (("size", 2),)),
    "global_mean_pool": (1, (("size", 2),)),
    "global_max_pool": (1, (("size", 2),)),
}


class DataDependentShapeInStep(SyncRule):
    code = "GPL406"
    name = "data-dependent-shape-in-step"
    message = "`{what}` has an output size that depends on tensor values: the host waits for the GPU to learn it"
    triggers = ("nonzero", "masked_select", "unique", "repeat_interleave", "where(", "argwhere", "bincount", "torch")
    docs = RuleDocs(
        what_it_does="Flags operations whose output shape depends on tensor data: `nonzero`, `argwhere`, single-argument "
        "`torch.where`, `masked_select`, `unique`, `bincount` (its length is the largest value plus one, also with "
        "`minlength`), `repeat_interleave` with tensor repeats and no `output_size`, and "
        "boolean-mask indexing in any position (`x[mask]`, `x[:, mask]`; masks are comparisons (also of a mask "
        "with a number: `rollout.mask > 1e-8`), `.bool()`, "
        "`torch.isfinite(x)`, `torch.any(x == y, dim=1)`, `a < m if flag else a > m`, names bound to them, "
        "a name bound to a value of unknown kind compared with a number once it indexes a tensor (`rel = x == "
        "n - 1`, then `entropy[rel]`, and every later `score[rel]`), "
        "parameters named like masks, followed through `clone`, `view`, `torch.stack` / `torch.cat`, `.T` and "
        "tuple unpacking), and stores through a mask that go through `nonzero` (`x[m] = y[m]`, `x[rows, m] = 1`, "
        "`x[:, m] *= 0`); and PyG's `to_dense_batch` / `to_dense_adj` without `batch_size` and `max_num_nodes`, and "
        "`global_add_pool` / `global_mean_pool` / `global_max_pool` over a batch vector without `size` (PyG reads "
        "the sizes off the batch vector: `int(batch.max()) + 1`), in code that runs every step, ungated.",
        why_slow="To allocate the result PyTorch must know how many elements it has, so it copies a count from the "
        "device and waits for it: a hidden device-to-host sync that also breaks CUDA graphs and `torch.compile` "
        "(graph break).",
        example="for x, y in loader:\n    logits = model(x)\n    keep = y != -1\n"
        "    loss = F.cross_entropy(logits[keep], y[keep])",
        use_instead="Keep shapes static: weight by the mask (`(loss * mask).sum() / mask.sum()`), use `ignore_index`, "
        "`torch.where(mask, a, b)`, `masked_fill`, pass `output_size=` to `repeat_interleave`, and count into a "
        "tensor of known length (`torch.zeros(n, device=d).index_add_(0, idx, ones)` or `scatter_add_`) instead of "
        "`bincount`.",
        fix_safety="No fix: static-shape rewrites (masking, `ignore_index`, `output_size=`) need knowledge of the data.",
        false_positives=known_false_positives("Masks gpulint takes for booleans that are integer index tensors (`x[mask_idx]` with long "
        "indices does not sync): add `# noqa: GPL406`. Stores of a host scalar through one mask (`x[mask] = 0`, "
        "`x[:, mask] = 0.0`) are not flagged: PyTorch runs them as `masked_fill_`."),
    )
    valid = (
        training_script("logits = model(x)\n"
                        "safe = torch.where(y > 0, logits.sum(1), torch.zeros_like(y, dtype=logits.dtype))"),
        training_script("rep = x.repeat_interleave(2, dim=0)"),
        training_script("sample_ids = np.array([3, 1, 3])\nids, counts = np.unique(sample_ids, return_counts=True)",
                        header="import numpy as np"),
        training_script("mask = y > 0\nx[mask] = 0.0"),
        training_script("if step % 100 == 0:\n    n_pos = (y > 0).nonzero().shape[0]"),
        training_script("index = torch.zeros_like(y > 0, dtype=torch.long)\nfirst_rows = x[index]"),
        training_script("scores = model(x)\nscores[:, y < 0] = 0.0"),
        # Positions named like a mask (a replay buffer keeping the k cleanest samples): a gather of k rows.
        training_script("_, clean_mask = torch.topk(model(x).sum(dim=1), 1, largest=False)\nkept = x[clean_mask]"),
        training_script("keep_mask = model(x).argsort()[:8]\nkept = y[keep_mask]"),
        # The position of each row's mask token (a prompt-based classifier): a gather of one element per row.
        training_script("mask_pos = y.squeeze()\nlogits = model(x)[torch.arange(x.size(0)), mask_pos]"),
        # BD3-LM's substitution parameterisation: the mask token's id, kept on the model, picks one vocabulary column
        ("import types\n\nimport torch\n\n\nclass Diffusion(torch.nn.Module):\n    def __init__(self, tokenizer):\n"
         "        super().__init__()\n        self.proj = torch.nn.Linear(8, 8)\n"
         "        self.mask_index = tokenizer.mask_token_id\n\n"
         "    def forward(self, x):\n        logits = self.proj(x).unsqueeze(1)\n"
         "        logits[:, :, self.mask_index] += -1e6\n        return logits\n\n\n"
         "def train(loader, device, tokenizer=types.SimpleNamespace(mask_token_id=3)):\n"
         "    model = Diffusion(tokenizer).to(device)\n    optimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
         "    for x, y in loader:\n        model(x.to(device, non_blocking=True)).sum().backward()\n"
         "        optimizer.step()\n"),
        # A Python slice named for what it selects: a fixed shape.
        training_script("mask_slice = slice(0, 1)\nmasks = model(x)[:, mask_slice]"),
        # GraphGPS-style dense attention over a graph batch, its sizes known from the loader
        training_script("dense, real = to_dense_batch(x, y, batch_size=64, max_num_nodes=128)",
                        header="from torch_geometric.utils import to_dense_batch"),
        # PyTorch-BigGraph's annotations: a type subscripted with a type named `Mask` indexes no tensor
        training_script("scores, ignored = split(model(x), y > 0)",
                        header="from typing import Tuple\n\nMask = torch.Tensor\n\n\n"
                               "def split(scores: torch.Tensor, keep: Mask) -> Tuple[torch.Tensor, Mask]:\n"
                               "    return scores * keep, ~keep"),
    )
    invalid = (
        Invalid(training_script("idx = (y > 0).nonzero()")),
        Invalid(training_script("keep = y != 0\nkept = x[keep]")),
        # RRHF's ranking loss: element-wise logic on comparisons, one row of it
        Invalid(training_script("diff = out - out.t()\naval = torch.bitwise_and(diff > 0, out < 0)[0]\n"
                                "loss = -diff[aval].sum()")),
        Invalid(training_script("classes = torch.unique(y)")),
        Invalid(training_script("dense, real = to_dense_batch(x, y)\npooled = global_mean_pool(x, y)",
                                header="from torch_geometric.nn import global_mean_pool\n"
                                       "from torch_geometric.utils import to_dense_batch"), count=2),
        Invalid(training_script("rep = torch.repeat_interleave(x, y, dim=0)")),
        # DiffDock's per-graph sizes: `torch.bincount(data["ligand"].batch)`, with or without `minlength`
        Invalid(training_script("per_class = torch.bincount(y, minlength=10)")),
        Invalid(training_script("x[(x > 0) * (x < 1)] -= 1")),
        Invalid(training_script("sel = x.masked_select(x > 0)")),
        Invalid(training_script("low, high = torch.stack((y > 0, y < 3))\nkept = x[low]")),
        Invalid(training_script("scores = model(x)\nvisible = scores.sum(dim=0) > 0\nkept = scores[:, visible]")),
        Invalid(training_script("logits = model(x)\nkeep = y >= 0\nkeep[keep.clone()] = logits.argmax(1) >= 0")),
        Invalid(training_script("logits = model(x)\nlogits[:, y > 0] *= 0")),
        Invalid(training_script("keep = y >= 0\nsmoothed = y.roll(1)\nlabels = y.clone()\n"
                                "labels[keep] = smoothed[keep]"), count=2),
        # sb3-contrib's recurrent PPO: the buffer's padding mask, kept as floats, compared into a boolean mask
        Invalid(training_script("rollout = types.SimpleNamespace(mask=y.float())\nmask = rollout.mask > 1e-8\n"
                                "entropy_loss = -torch.mean(out[mask])", header="import types")),
        # SEDD's score entropy: tokens of unknown kind compared with the absorbing state's id index the loss tensors
        Invalid("import torch\n\n\ndef score_entropy(score, x):\n    rel_ind = x == score.shape[-1] - 1\n"
                "    entropy = torch.zeros(*x.shape, device=x.device)\n"
                "    entropy[rel_ind] += score[rel_ind].exp().sum(dim=-1)\n    return entropy\n\n\n"
                "def train(model, loader, optimizer, device):\n    for x, y in loader:\n"
                "        x = x.to(device, non_blocking=True)\n        parts = [y.to(device, non_blocking=True)]\n"
                "        score_entropy(model(x), parts[0]).mean().backward()\n        optimizer.step()\n", count=2),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = last_name(func)
        resolved = self.context.resolve(func) or ""
        is_torch = resolved.startswith("torch.")
        # `np.unique(indices)` runs on the host: no device value to wait for.
        is_method = isinstance(func, cst.Attribute) and not is_torch and not resolved.startswith(HOST_MODULE_PREFIXES)
        positional = [a for a in node.args if a.keyword is None]
        what = None
        if method in ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount") \
                and (is_torch or is_method):
            what = method
        elif method == "where" and is_torch and len(node.args) == 1:
            what = "torch.where(condition)"
        elif method == "repeat_interleave" and (is_torch or is_method) and keyword_arg(node, "output_size") is None:
            repeats = keyword_arg(node, "repeats")
            if repeats is None:
                index = 1 if is_torch else 0
                if len(positional) > index:
                    repeats = positional[index]
                elif is_torch and positional:
                    repeats = positional[0]  # `torch.repeat_interleave(repeats)`
            if repeats is not None and self.tensors.is_tensor(repeats.value):
                what = "repeat_interleave"
        elif resolved.startswith("torch_geometric.") and method in _PYG_SIZE_ARGUMENTS:
            missing = self._pyg_sizes_missing(node, method, positional)
            if missing is not None:
                self.report(node, f"`{method}(...)` without `{missing}` reads it off the batch vector on the host "
                                  f"(`int(batch.max())`): the host waits for the GPU; pass `{missing}=`")
            return
        if what is None:
            return
        if is_method and self.context.is_host_value(func.value):  # numpy arrays and CPU tensors
            return
        if is_torch and positional and all(type(a.value) is not cst.Name and self.context.is_host_value(a.value)
                                           for a in positional):
            return  # `torch.where(labels[i] == eoc)` over a CPU tensor (not a name: a list bound to `[]` fills later)
        self.report(node, self.message.format(what=what))

    @staticmethod
    def _pyg_sizes_missing(node: cst.Call, method: str, positional: list[cst.Arg]) -> str | None:
        """`to_dense_batch(x, batch)`: PyG learns the sizes it is not given from the batch vector on the host
        (`int(batch.max()) + 1`, `int(num_nodes.max())`); with every size passed it reads nothing."""
        batch_position, sizes = _PYG_SIZE_ARGUMENTS[method]
        # No batch vector: one graph, nothing to count (but `to_dense_adj` then counts the nodes off `edge_index`).
        if len(positional) <= batch_position and keyword_arg(node, "batch") is None and method != "to_dense_adj":
            return None
        missing = [name for name, position in sizes
                   if keyword_arg(node, name) is None and len(positional) <= position]
        return missing[0] if missing else None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        indices = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        masks = [index for index in indices if self.tensors.is_mask(index)
                 or self.tensors.confirmed_mask(index, node.value)]
        if not masks or self.context.is_host_value(node.value):
            return
        if self._masked_fill(node, indices, masks):
            return
        self.report(node, self.message.format(what="x[mask]" if len(node.slice) == 1 else "x[..., mask]"))

    def _masked_fill(self, node: cst.Subscript, indices: list[cst.BaseExpression], masks: list) -> bool:
        """`x[mask] = 0`, `x[:, mask] = 0.0`: PyTorch turns the store of a host scalar through one mask, the only
        tensor index, into `masked_fill_`, with no sync. A tensor value (`x[m] = y[m]`), a second tensor index
        (`x[rows, m] = 1`) or `x[m] *= 0` (which reads `x[m]` first) goes through `nonzero`."""
        parent = self.context.parent()
        if not (isinstance(parent, cst.AssignTarget) and parent.target is node):
            return False
        statement = self.context.parent(2)
        if not isinstance(statement, cst.Assign) or self.tensors.is_tensor(statement.value) \
                or self._reads_through_mask(statement.value):
            return False
        others = [index for index in indices if index is not masks[0]]
        return len(masks) == 1 and not any(self.tensors.is_tensor(index) for index in others)

    def _reads_through_mask(self, value: cst.BaseExpression) -> bool:
        """`x[outside] = y[outside]`: a value read through a mask is a tensor, whatever `y` is named."""
        return any(isinstance(node, cst.Subscript) and any(
            isinstance(e.slice, cst.Index) and self.tensors.is_mask(e.slice.value) for e in node.slice)
            for node in descendants(value))

