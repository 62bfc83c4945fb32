"""GPL423 lightning-sync-dist-in-step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.rule import Invalid, RuleDocs
from gpulint.rules.common import is_false, is_true, keyword_arg
from gpulint.rules.examples import lightning_module
from gpulint.rules.sync.helpers import SyncRule, is_lightning_log, known_false_positives

class LightningSyncDistInStep(SyncRule):
    code = "GPL423"
    name = "lightning-sync-dist-in-step"
    message = ("`self.{method}(..., sync_dist=True)` in the training step all-reduces {what} across every rank, "
               "every step")
    triggers = ("sync_dist",)
    docs = RuleDocs(
        what_it_does="Flags Lightning's `self.log(..., sync_dist=True)` and `self.log_dict(..., sync_dist=True)` in "
        "code that runs every training step (`training_step`, `on_train_batch_end`, what they call), unless the value "
        "is logged with `on_step=False`.",
        why_slow="A value logged on the step (the default in `training_step`) with `sync_dist=True` is reduced when it "
        "is logged: Lightning runs one blocking `all_reduce` per logged value, on every step, and turns a Python "
        "number into a device tensor first. Each is a small collective that waits for the slowest rank and pays NCCL's "
        "latency, not bandwidth; `log_dict` of N metrics launches N of them. Lightning's own docs warn that "
        "`sync_dist` can add significant communication overhead.",
        example="def training_step(self, batch, batch_idx):\n    loss = self.loss(batch)\n"
        "    self.log(\"train_loss\", loss, sync_dist=True)\n    return loss",
        use_instead="Log per-step values without `sync_dist` (each rank's value; the logger reads rank 0's every "
        "`log_every_n_steps`), or log them with `on_step=False, on_epoch=True, sync_dist=True`: Lightning then "
        "accumulates on each rank and reduces once, at the end of the epoch.",
        fix_safety="No fix: dropping `sync_dist` logs one rank's value instead of the mean, and `on_epoch` changes "
        "what the logger shows; which the user wants is theirs to choose.",
        false_positives=known_false_positives("Single-device training: `sync_dist` does nothing without a process "
        "group. The finding then costs nothing; it matters once the same module runs under DDP."),
    )
    valid = (
        lightning_module('self.log("train_loss", loss)'),
        lightning_module('self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)'),
        lightning_module('self.log_dict({"loss": loss}, sync_dist=False, prog_bar=False)'),
        lightning_module('if batch_idx % 100 == 0:\n    self.log("train_loss", loss, sync_dist=True)'),
    )
    invalid = (
        Invalid(lightning_module('self.log("train_loss", loss, sync_dist=True)')),
        Invalid(lightning_module('self.log_dict({"loss": loss, "acc": (logits.argmax(1) == y).float().mean()},'
                        ' on_epoch=True, sync_dist=True)')),
        Invalid(lightning_module('self.log("lr", self.lr, on_step=True, sync_dist=True)')),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not is_lightning_log(node.func):
            return
        sync_dist, on_step = keyword_arg(node, "sync_dist"), keyword_arg(node, "on_step")
        if sync_dist is None or not is_true(sync_dist.value) or (on_step is not None and is_false(on_step.value)):
            return
        method = node.func.attr.value  # type: ignore[attr-defined]
        self.report(node, self.message.format(method=method, what="each logged value" if method == "log_dict"
                                              else "the logged value"))
