"""GPL404 tensor-formatted-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name, name_parts
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.common import is_false, is_true, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, is_lightning_log, known_false_positives

# (`log_metrics`: a Lightning logger's, which the step may call itself, `self.logger.log_metrics({"loss": loss})`:
# every logger converts each tensor to a number, and nothing gates it the way `self.log` is gated.)
_LOG_METHODS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "log", "exception", "log_metrics"})
_LOG_RECEIVER_PARTS = frozenset({"logger", "logging", "log", "_logger", "LOGGER"})
# The name of a dict of loss or metric tensors (`loss_dict`, `output["logs"]`, `metrics`).
_LOSS_DICT_PARTS = frozenset({"loss", "losses", "logs", "metrics"})


# A stand-in for Accelerate's `Accelerator` in the examples (they run as they are in the harnesses).
_ACCELERATOR = "class Accelerator:\n    def log(self, values, step=None):\n        pass\n\n\naccelerator = Accelerator()"


class TensorFormattedInStep(SyncRule):
    code = "GPL404"
    name = "tensor-formatted-in-step"
    message = "formatting a tensor as text ({how}) reads its values on the host every step: a blocking copy"
    triggers = ("torch",)  # `%` formatting and logger calls are too common to pre-filter on
    docs = RuleDocs(
        what_it_does="Flags `print(t)`, f-strings and `.format()` / `%` of tensors, logger calls with tensor "
        "arguments (a Lightning logger's `self.logger.log_metrics({\"loss\": loss})` too), `SummaryWriter.add_scalar`, "
        "`wandb.log` and `accelerator.log` of tensors or of dicts holding them "
        "(`logs = dict(outputs, loss=loss)`, `logs[\"scale\"] = scale`), and Lightning's `self.log` / `self.log_dict` "
        "of a tensor with `prog_bar=True` (unless `on_step=False`), in code that runs every step, ungated. A dict "
        "comprehension renaming the keys of a dict of losses or metrics (`{f\"train_{k}\": v for k, v in "
        "logs.items()}`) counts as a dict of tensors, and so does a dict named for losses or metrics that the step got "
        "from a call (`loss, loss_dict = self.shared_step(batch)`, then `self.log_dict(loss_dict, prog_bar=True)`), "
        "and so is a value named for a loss that `self.log` is given, unless the step knows it as a number "
        "(`aeloss, log = self.loss(...)` from a loss module a config builds).",
        why_slow="Turning a tensor into text (or a logged scalar) copies its values to the host, and that copy waits "
        "for all queued GPU work: each step ends in a full host-device round trip before the next launch.",
        example="for x, y in loader:\n    loss = F.cross_entropy(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    print(f\"loss {loss}\")",
        use_instead="Log under `if step % log_interval == 0:`; between logs keep a running device sum "
        "(`running += loss.detach()`). In Lightning, leave `prog_bar` off for per-step values (the logger then reads "
        "them every `log_every_n_steps`), or log them with `on_step=False, on_epoch=True`.",
        fix_safety="No fix: choosing a logging interval is the author's call; gating the line changes what is printed.",
        false_positives=known_false_positives("Objects named like tensors that are Python numbers (a `loss` returned by a helper as a "
        "float) can be flagged: convert where they are made, or add `# noqa: GPL404`. A Lightning progress bar with a "
        "`refresh_rate` above 1 reads the values less often than every step. Lightning's `self.log` without "
        "`prog_bar` is not flagged, nor a message in the body of an `if` on a tensor (`if torch.min(y) < -1: "
        "log.info(f\"min {torch.min(y)}\")`: it prints only on the steps the values send there; the `if` is GPL405's)."),
    )
    valid = (
        training_script("if step % 100 == 0:\n    print(f\"step {step} loss {loss}\")"),
        training_script("lr = optimizer.param_groups[0][\"lr\"]\nprint(f\"lr {lr:.3f}\")"),
        training_script("print(f\"step {step} batch {x.shape}\")"),
        training_script("logs = {\"loss\": loss.item()}\nwandb.log({f\"train/{k}\": v for k, v in logs.items()})",
                        header="import wandb"),
        training_script("assert loss.dim() == 0, f\"loss {loss} is not a scalar\"\nprint(step)"),
        # a warning only the steps with bad values print: the `if` pays the sync (GPL405), the message does not
        training_script("if torch.min(out) < -1.0:\n    logger.warning(f\"min value is {torch.min(out)}\")",
                        header="import logging\nlogger = logging.getLogger(__name__)"),
        training_script("logger.info(\"step %d\", step)", header="import logging\n"
                        "logger = logging.getLogger(__name__)"),
        ("import torch\n\n\nclass Net(torch.nn.Module):\n"
         "    def training_step(self, batch, batch_idx):\n        loss = self.model(batch).mean()\n"
         "        self.log(\"train_loss\", loss)\n        self.log(\"epoch_loss\", loss, prog_bar=True, on_step=False)\n"
         "        return loss\n"),
        # a dict of losses the step has already read as numbers
        ("import torch\n\n\nclass Net(torch.nn.Module):\n"
         "    def training_step(self, batch, batch_idx):\n        loss = self.model(batch).mean()\n"
         "        loss_dict = {\"loss\": loss.item()}\n        self.log_dict(loss_dict, prog_bar=True)\n"
         "        return loss\n"),
    )
    invalid = (
        Invalid(training_script("print(loss)")),
        Invalid("import pytorch_lightning as pl\n\n\nclass Model(pl.LightningModule):\n"
                "    def training_step(self, batch, batch_idx):\n        loss = self.net(batch).mean()\n"
                "        self.logger.log_metrics({\"train_step_loss\": loss}, self.global_step)\n"
                "        return loss\n"),
        Invalid(training_script("print(f\"step {step} loss {loss:.4f}\")")),
        Invalid(training_script("logger.info(\"loss %s\", loss)", header="import logging\n"
                                "logger = logging.getLogger(__name__)")),
        Invalid(training_script("msg = \"loss {:.3f}\".format(loss)")),
        # CPM-Bee's step line: a template joined from pieces, formatted with the step's tensors
        Invalid(training_script("grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                                "print((\"| loss: {:.4f} \" + \"| grad_norm: {:.4f}\").format(1.0, grad_norm))")),
        Invalid(training_script("logs = dict(loss=loss, lr=optimizer.param_groups[0][\"lr\"])\naccelerator.log(logs)",
                                header=_ACCELERATOR)),
        Invalid("import torch\n\n\nclass Net(torch.nn.Module):\n"
                "    def training_step(self, batch, batch_idx):\n        loss = self.model(batch).mean()\n"
                "        self.log(\"train_loss\", loss, prog_bar=True)\n        return loss\n"),
        Invalid("import torch\n\n\nclass Net(torch.nn.Module):\n"
                "    def training_step(self, batch, batch_idx):\n        output = self.step(batch)\n"
                "        self.log_dict({f\"train_{k}\": v for k, v in output[\"logs\"].items()}, prog_bar=True)\n"
                "        return output[\"loss\"]\n"),
        # a dict of losses the model's shared step returns (latent diffusion's training_step)
        Invalid("import torch\n\n\nclass Net(torch.nn.Module):\n"
                "    def training_step(self, batch, batch_idx):\n        loss, loss_dict = self.shared_step(batch)\n"
                "        self.log_dict(loss_dict, prog_bar=True, on_step=True)\n        return loss\n"),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._tensor_dicts: dict[int, set[str]] = {}  # per function: names of dicts that hold a tensor

    def leave_Assign(self, original_node: cst.Assign) -> None:
        """`logs = {"loss": loss}`, `logs = dict(outputs, loss=loss)`, `logs["scale"] = scale`: a dict of tensors."""
        holds = self._tensor_dicts.setdefault(id(self.context.enclosing_function()), set())
        for target in original_node.targets:
            name = target.target
            if isinstance(name, cst.Subscript) and isinstance(name.value, cst.Name):
                if self.tensors.is_tensor(original_node.value):
                    holds.add(name.value.value)
            elif isinstance(name, cst.Name):
                (holds.add if self._holds_tensor(original_node.value) else holds.discard)(name.value)

    def _holds_tensor(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Dict):
            return any(isinstance(e, cst.DictElement) and self.tensors.is_tensor(e.value) for e in value.elements)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            return any(arg.keyword is not None and self.tensors.is_tensor(arg.value) for arg in value.args)
        if isinstance(value, cst.DictComp):
            return self._renames_loss_dict(value)
        return False

    def _renames_loss_dict(self, comp: cst.DictComp) -> bool:
        """`{f"train_{k}": v for k, v in output["logs"].items()}`: the values of a dict of losses or metrics under
        new keys (a dict the function does not know to hold host numbers)."""
        loop = comp.for_in
        items = loop.iter
        if loop.inner_for_in is not None or not (isinstance(items, cst.Call) and isinstance(items.func, cst.Attribute)
                                                  and items.func.attr.value == "items"):
            return False
        if not (isinstance(loop.target, cst.Tuple) and len(loop.target.elements) == 2
                and isinstance(comp.value, cst.Name) and isinstance(loop.target.elements[1].value, cst.Name)
                and comp.value.value == loop.target.elements[1].value.value):
            return False
        source = items.func.value
        if isinstance(source, cst.Subscript) and len(source.slice) == 1 and isinstance(source.slice[0].slice, cst.Index) \
                and isinstance(key := source.slice[0].slice.value, cst.SimpleString):
            name = key.raw_value  # `output["logs"]`
        else:
            name = last_name(source) or ""
        if not name_parts(name) & _LOSS_DICT_PARTS:
            return False
        return not self.context.is_host_value(source)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if is_lightning_log(func):
            self._lightning_log(node)
            return
        if isinstance(func, cst.Name) and func.value == "print":
            how = "print"
        elif isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS and _is_logger(func.value):
            how = "a logger call"
        elif isinstance(func, cst.Attribute) and func.attr.value in ("add_scalar", "add_scalars"):
            how = "add_scalar"
        elif isinstance(func, cst.Attribute) and func.attr.value == "format" and _is_string_expression(func.value):
            # (also a template joined from pieces: `("| loss: {:.4f} " + "| grad_norm: {:.4f}").format(...)`)
            how = "str.format"
        elif self.context.resolve(func) == "wandb.log":
            how = "wandb.log"
        elif isinstance(func, cst.Attribute) and func.attr.value == "log" and last_name(func.value) == "accelerator":
            how = "accelerator.log"  # its trackers (wandb, tensorboard) convert each tensor to a Python number
        else:
            return
        if any(self._tensor_arg(arg.value) for arg in node.args):
            self.report(node, self.message.format(how=how))

    def report(self, node: cst.CSTNode, message: str | None = None, **how) -> None:
        if not self._under_tensor_test():
            super().report(node, message, **how)

    def _under_tensor_test(self) -> bool:
        """`if torch.min(y) < -1.0: log.info(f"min value is {torch.min(y)}")`: the message runs only on the steps the
        device value sends into the branch (a warning about bad data); the `if` pays the sync every step (GPL405)."""
        chain = self.context.ancestors
        for index in range(len(chain) - 2, -1, -1):
            node, child = chain[index], chain[index + 1]
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(node, cst.If) and child is node.body and self.tensors.is_tensor(node.test):
                return True
        return False

    def _tensor_arg(self, value: cst.BaseExpression) -> bool:
        if self._holds_tensor(value):
            return True
        if isinstance(value, cst.Name) and value.value in self._tensor_dicts.get(id(self.context.enclosing_function()), ()):
            return True
        return self.tensors.is_tensor(value)

    def _lightning_log(self, node: cst.Call) -> None:
        """`self.log("loss", loss, prog_bar=True)` in a training step: the progress bar reads the value on every
        refresh (every step by default); without `prog_bar` the logger reads it every `log_every_n_steps`."""
        prog_bar, on_step = keyword_arg(node, "prog_bar"), keyword_arg(node, "on_step")
        if prog_bar is None or not is_true(prog_bar.value) or (on_step is not None and is_false(on_step.value)):
            return
        method = node.func.attr.value  # type: ignore[attr-defined]
        values = [a.value for a in node.args if a.keyword is None or a.keyword.value in ("value", "dictionary")]
        logged = values[1:2] if method == "log" else values[:1]
        if any(self._tensor_arg(value) or (self._loss_dict(value) if method == "log_dict" else self._loss_value(value))
               for value in logged):
            self.report(node, self.message.format(how=f"self.{method}(prog_bar=True)"))

    def _loss_dict(self, value: cst.BaseExpression) -> bool:
        """A dict named for losses or metrics that the step got from a call (latent diffusion's `loss, loss_dict =
        self.shared_step(batch)`): the losses a model computes are tensors, unless the step knows them as numbers."""
        return isinstance(value, cst.Name) and bool(name_parts(value.value) & _LOSS_DICT_PARTS) \
            and not self.context.is_host_value(value)

    def _loss_value(self, value: cst.BaseExpression) -> bool:
        """A loss the step got from a call it cannot see into (latent diffusion's `aeloss, log_dict = self.loss(...)`,
        a loss module built from a config): a model's losses are tensors, unless the step knows them as numbers."""
        return isinstance(value, cst.Name) and not self.context.is_host_value(value) \
            and (value.value.lower().endswith("loss") or "loss" in name_parts(value.value))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        # `print(f"{loss}")` is one finding, on the f-string: the print's argument is a host string.
        for part in node.parts:
            if isinstance(part, cst.FormattedStringExpression) and self.tensors.is_tensor(part.expression):
                self.report(node, self.message.format(how="f-string"))
                return

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Modulo) and _is_string_expression(node.left):
            right = node.right
            values = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
            if any(self.tensors.is_tensor(v) for v in values):
                self.report(node, self.message.format(how="% formatting"))


def _is_string_expression(expr: cst.BaseExpression) -> bool:
    """A string literal, or arithmetic on one (`("%11s" * 2 + "%11.4g" * 5)`)."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Multiply)):
        return _is_string_expression(expr.left) or _is_string_expression(expr.right)
    return False


def _is_logger(receiver: cst.BaseExpression) -> bool:
    name = last_name(receiver)
    return name is not None and (name in _LOG_RECEIVER_PARTS or name.lower().endswith("logger"))
