"""GPL4xx: host-device synchronisation and synchronous communication in the training step."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.names import last_name
from gpulint.linter.rule import Invalid, Rule, RuleDocs

_TRAIN_LOOP = """import torch

def train(model, loader, optimizer):
    for batch in loader:
        loss = model(batch)
        loss.backward()
        optimizer.step()
{body}
"""


def _in_loop(body: str) -> str:
    return _TRAIN_LOOP.format(body="\n".join("        " + line for line in body.splitlines()))


class ScalarSyncInStep(Rule):
    code = "GPL401"
    name = "scalar-sync-in-step"
    message = "`.{method}()` copies a device tensor to the host every step and blocks until the GPU catches up"
    triggers = (".item(", ".tolist(")
    docs = RuleDocs(
        what_it_does="Flags `.item()` and `.tolist()` on a tensor in code that runs every training step and is not "
        "gated to a logging interval.",
        why_slow="Reading a device value on the host is a device-to-host copy that waits for every kernel queued before "
        "it: the CPU stops launching work, the GPU drains its queue and idles until the next launch. One sync per step "
        "removes the CPU's lead over the GPU, which is what keeps small-kernel models busy.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    print(loss.item())",
        use_instead="Keep the value on the device (`running += loss.detach()`) and read it only every N steps under "
        "`if step % log_interval == 0:`.",
        false_positives="`.item()` on a value that is already on the host (after `.cpu()`, `.tolist()`, a numpy array) "
        "costs nothing; gpulint follows assignments within a function but not across functions.",
    )
    valid = (
        _in_loop("if step % 100 == 0:\n    print(loss.item())"),
        _in_loop("values = loss.detach().cpu()\nx = values.item()"),
        "def evaluate(model, loader):\n    for batch in loader:\n        print(model(batch).item())\n",
    )
    invalid = (Invalid(_in_loop("print(loss.item())")), Invalid(_in_loop("vals = loss.tolist()")))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or node.args or func.attr.value not in ("item", "tolist"):
            return
        if self.context.is_host_value(func.value):
            return
        self.report(node, self.message.format(method=func.attr.value))


class SynchronizeInStep(Rule):
    code = "GPL410"
    name = "synchronize-in-step"
    message = "`{name}()` blocks the host until all queued GPU work finishes, every step"
    triggers = ("synchronize", "empty_cache")
    docs = RuleDocs(
        what_it_does="Flags `torch.cuda.synchronize()`, `torch.cuda.empty_cache()` and stream/event `synchronize()` "
        "calls in code that runs every training step.",
        why_slow="A device-wide synchronize drains the GPU queue and stops the CPU from running ahead: every kernel launch "
        "after it is exposed as idle GPU time. `empty_cache()` also synchronizes and returns cached blocks that the next "
        "step must allocate again with `cudaMalloc`, which is itself synchronous.",
        example="for batch in loader:\n    loss = model(batch)\n    loss.backward()\n    optimizer.step()\n"
        "    torch.cuda.synchronize()",
        use_instead="Time with `torch.cuda.Event(enable_timing=True)` read every N steps, or with the profiler; "
        "let the caching allocator keep its blocks.",
        fix_safety="No fix: removing a synchronize can change what a timing measures.",
        false_positives="Benchmark loops that time each step on purpose: gate them or add `# noqa: GPL410`.",
    )
    valid = (_in_loop("if step % 50 == 0:\n    torch.cuda.synchronize()"),)
    invalid = (Invalid(_in_loop("torch.cuda.synchronize()")), Invalid(_in_loop("torch.cuda.empty_cache()")))

    def visit_Call(self, node: cst.Call) -> None:
        name = self.context.resolve(node.func)
        if name in ("torch.cuda.synchronize", "torch.cuda.empty_cache", "torch.cuda.current_stream.synchronize"):
            self.report(node, self.message.format(name=name))
        elif last_name(node.func) == "synchronize" and name and ("stream" in name.lower() or "event" in name.lower()):
            self.report(node, self.message.format(name=name))



