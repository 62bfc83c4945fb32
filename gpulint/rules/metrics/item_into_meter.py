"""GPL202 item-into-meter."""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.project.vocab import TRANSITION_STORE_PARTS
from gpulint.rules.examples import training_script
from gpulint.rules.metrics.helpers import (
    MetricRule,
    ScalarLocals,
    in_parameter_loop,
    looks_like_tensor,
    scalar_reads_in,
)

_ACCUMULATING_METHODS = frozenset({"update", "append", "extend", "add", "add_"})
# A reporter that keeps what each step reports in summaries (`ppe.reporting.report`, `reporter.report`).
_REPORTER_PARTS = frozenset({"reporting", "reporter"})
# Methods a meter collects a value with, besides the accumulating ones (`meter.write(value)`).
_METER_WRITES = frozenset({"write", "record"})
# Callees that collect statistics (`self._stats(...)`, `Statistics(loss, n_words, n_correct)`, `update_metrics(...)`).
_STATS_PARTS = frozenset({"stat", "stats", "statistics", "meter", "meters", "metric", "metrics"})
# Dicts whose entries are logged later (`loss['D/real'] = ...`, `metrics["loss"] = ...`).
_METRIC_DICT_WORDS = frozenset({"loss", "losses", "metrics", "stats", "logs", "log"})


_WORD_BOUNDARY = re.compile(r"[_.]+|(?<=[a-z])(?=[A-Z])")


@lru_cache(maxsize=8192)
def _words(name: str) -> frozenset[str]:
    """`log_metrics` -> {log, metrics}; `AverageMeter` -> {average, meter}."""
    return frozenset(w.lower() for w in _WORD_BOUNDARY.split(name) if w)


def _accumulating_callee(call: cst.Call) -> str | None:
    """The method or function name when the call collects values across steps (a meter, a list, a stats object);
    logging calls are not (a logged scalar is a GPL4xx sync)."""
    name = last_name(call.func)
    if name is None:
        return None
    if isinstance(call.func, cst.Attribute) and name in _ACCUMULATING_METHODS:
        # a replay buffer keeps each transition on the host for learning (`self.replay_buffer.add(obs, actions, ...)`
        # after the action went to the environment): no meter
        return None if _words(last_name(call.func.value) or "") & TRANSITION_STORE_PARTS else name
    if isinstance(call.func, cst.Attribute) and name in _METER_WRITES and _words(_holder(call.func.value)) & _STATS_PARTS:
        return name  # imaginaire's `self.meters[name].write(loss.item())`: a meter keeps it until its flush
    if isinstance(call.func, cst.Attribute) and name == "report" and _words(_holder(call.func.value)) & _REPORTER_PARTS:
        return name  # pytorch-pfn-extras' (and Chainer's) `reporting.report({...})`: summaries kept until the log
    words = _words(name)
    return name if words & _STATS_PARTS and "log" not in words else None


def _holder(receiver: cst.BaseExpression) -> str:
    """`self.meters[name]` -> "meters", `meter` -> "meter": what the receiver is named, through one subscript."""
    if isinstance(receiver, cst.Subscript):
        receiver = receiver.value
    return last_name(receiver) or ""


class ItemIntoMeter(MetricRule):
    code = "GPL202"
    name = "item-into-meter"
    message = "`.{method}({read})` reads a device scalar to the host every step to feed a meter or list; keep it on the device until you log"
    tensor_message = "`{call}` hands a device tensor to a meter, which reads it with `.item()` every step; keep a device running sum and read it when you log"
    dict_message = "`{target} = {read}` reads a device scalar every step into a metrics dict that is only logged every N steps; store the detached tensor and read it when you log"
    triggers = (".item(", ".tolist(", "float(", ".numpy(", "update(")
    docs = RuleDocs(
        what_it_does="Flags meters and lists fed with host scalars read every step: `losses.update(loss.item(), n)`, "
        "`metric_logger.update(loss=loss.item())`, `history.append(loss.item())`, `meters[name].write(loss.item())`, `ppe.reporting.report({...: loss.item()})`, `preds.extend(out.argmax(1).tolist())`, "
        "statistics objects (`Statistics(loss.item(), n_correct)`, `self._stats(...)`), `v = loss.item()` later fed to "
        "one of those (reported at the read), device tensors handed to a `metric_logger.update(...)` (a "
        "MetricLogger calls `.item()` on each tensor itself), and reads stored into a metrics dict every step "
        "(`loss['D/real'] = d_real.item()`).",
        why_slow="The `.item()` / `.tolist()` is a device-to-host copy that waits for the whole step to finish, every step, "
        "while the meter's value is printed only every N steps: the CPU loses its lead over the GPU and the next step's "
        "kernels start late.",
        example="for images, target in loader:\n    loss = criterion(model(images), target)\n    loss.backward()\n"
        "    optimizer.step()\n    losses.update(loss.item(), images.size(0))",
        use_instead="Accumulate detached device tensors (`running += loss.detach() * n`) or collect them in a list and "
        "`torch.stack(...)` once; call `.item()` under the logging gate.",
        fix_safety="No fix: meters often format or serialise the value and would break on a tensor.",
        false_positives="Values already on the host (after `.cpu()` / `.tolist()` within the function); a "
        "reinforcement-learning replay buffer's `add` is no meter (it keeps each transition on the host). Meters whose "
        "`update` is itself a logger call every step are a GPL4xx sync as well.",
    )
    valid = (
        training_script("losses.update(loss.detach(), x.size(0))"),
        training_script("if step % 10 == 0:\n    losses.update(loss.item(), x.size(0))"),
        training_script("history.append(step)"),
        training_script("running_loss.update(loss.detach())\nmetric_logger.update(lr=optimizer.param_groups[0]['lr'])"),
        training_script("loss_meter.update(loss.detach())\nmetric_logger.update(loss_scale_value=scaler.get_scale())"),
        training_script("wandb_log_metrics({'loss': loss.item()})"),
        training_script("replay_buffer.add(x, out.argmax().item(), y)"),
        training_script("cache = {}\ncache['loss'] = loss.detach()\nlosses = {}\nlosses['n'] = x.size(0)"),
        "import torch\n\n@torch.no_grad()\ndef validate(model, loader, criterion, losses):\n    for x, y in loader:\n"
        "        losses.update(criterion(model(x), y).item(), x.size(0))\n",
    )
    invalid = (
        Invalid(training_script("losses.update(loss.item(), x.size(0))")),
        Invalid(training_script("metric_logger.update(loss=loss.item())")),
        Invalid(training_script("history.append(loss.item())")),
        # imaginaire's trainers: a meter per loss, written every step and flushed at the logging interval
        Invalid(training_script("meters[\"loss\"].write(loss.item())", header="meters = {}")),
        # pytorch-pfn-extras' examples: the loss reported every step, summarised by LogReport at its interval
        Invalid(training_script("ppe.reporting.report({\"train/loss\": loss.item()})",
                                header="import pytorch_pfn_extras as ppe")),
        Invalid(training_script("preds.extend(out.argmax(1).tolist())")),
        Invalid(training_script("losses.update(loss.item() * accum_steps, x.size(0))")),
        Invalid(training_script("loss_value = loss.item()\nmetric_logger.update(loss=loss_value)")),
        Invalid(training_script("if mixup is None:\n    class_acc = (out.argmax(-1) == y).float().mean()\nelse:\n"
                                "    class_acc = None\nmetric_logger.update(class_acc=class_acc)")),
        Invalid(training_script("stats = self._stats(x.size(0), loss.sum().item())")),
        Invalid(training_script("n_correct = (out.argmax(-1) == y).sum().item()\n"
                                "report = Statistics(n_correct, x.size(0))")),
        Invalid(training_script("l, a = loss.item(), out.max().item()\nmeter.update_stats(l, a)"), count=2),
        Invalid(training_script("logs = {}\nlogs['train/loss'] = loss.item()\nif step % 10 == 0:\n    print(logs)")),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scalar_locals = ScalarLocals(self)
        self._tensor_locals: set[tuple[int, str]] = set()  # locals assigned a tensor expression (`acc = (p == y).mean()`)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.enter(node)
        self._metrics_dict_store(node)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            key = (id(self.context.enclosing_function()), node.targets[0].target.value)
            if looks_like_tensor(self.context, node.value):
                self._tensor_locals.add(key)
            elif not (isinstance(node.value, cst.Name) and node.value.value == "None"):  # `else: acc = None` branches
                self._tensor_locals.discard(key)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.scalar_locals.leave(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.scalar_locals.note(node)
        method = _accumulating_callee(node)
        if method is None:
            return
        if method == "update" and self._tensor_into_meter(node):
            return
        for arg in node.args:
            reads = scalar_reads_in(self.context, arg.value)
            read = reads[0] if reads else self._tolist(arg.value)
            if read is not None:
                if not in_parameter_loop(self.context.ancestors):
                    text = self.context.module.code_for_node(read)
                    self.report(node, self.message.format(method=method, read=text))
                return
        for arg in node.args:  # every argument: `Statistics(loss, n_words, n_correct)` may carry several reads
            self.scalar_locals.report_reads_in(arg.value, self.message.replace("{method}", method))

    def _metrics_dict_store(self, node: cst.Assign) -> None:
        """`loss['D/loss_real'] = d_loss_real.item()`, `metrics["loss"] = loss.item() * k`: a per-step read stored in a
        dict of metrics (named loss/losses/metrics/stats/logs) for a later log call."""
        for target in node.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript) or not _words(last_name(sub.value) or "") & _METRIC_DICT_WORDS:
                continue
            reads = scalar_reads_in(self.context, node.value)
            if reads:
                code = self.context.module.code_for_node
                self.report(node, self.dict_message.format(target=code(sub), read=code(reads[0])))
                return

    def _tensor_into_meter(self, call: cst.Call) -> bool:
        """`metric_logger.update(acc=class_acc)` with a tensor: a MetricLogger calls `.item()` on every tensor it gets.
        (An AverageMeter `losses.update(loss)` keeps a tensor as it is and syncs only when printed: not flagged.)"""
        receiver = last_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if receiver is None or "logger" not in receiver.lower():
            return False
        for arg in call.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)) and self._tensor_like(arg.value):
                self.report(call, self.tensor_message.format(call=self.context.module.code_for_node(call)))
                return True
        return False

    def _tensor_like(self, expr: cst.BaseExpression) -> bool:
        # Tracked first: `acc = (p == y).mean()` in one branch and `acc = None` in the other is still a tensor here.
        if isinstance(expr, cst.Name) and (id(self.context.enclosing_function()), expr.value) in self._tensor_locals:
            return True
        location = self.context.location_of(expr)
        if location != "unknown":
            return location == "device"
        words = _words(last_name(expr) or "")
        return bool(words & {"loss", "acc", "accuracy", "norm"}) and not words & {"scale", "value", "val", "lr", "count"}

    def _tolist(self, expr: cst.BaseExpression) -> cst.Call | None:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "tolist"
            and not self.context.is_host_value(expr.func.value)
        ):
            return expr
        return None
