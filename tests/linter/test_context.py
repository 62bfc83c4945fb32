"""The hot-path context: which code runs every step, which is gated, which is cold, and where values live."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from gpulint.linter.context import FileContext
from gpulint.linter.engine import _state_of, _Traversal, _Where
from gpulint.linter.positions import positions_of
from gpulint.linter.rule import Invalid, Rule, RuleDocs
from gpulint.project import single_file_facts


class Probe(Rule):
    """Reports every call to `probe(...)`, so a test can ask the context about that spot."""

    code = "GPL999"
    name = "probe"
    message = "probe"
    triggers = ("probe",)
    docs = RuleDocs("-", "-", "-", "-")
    valid = ()
    invalid = (Invalid("probe()"),)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "probe":
            label = node.args[0].value.evaluated_value if node.args else ""
            self.report(node, label, when="always")


def states(source: str, gate_names=(), hot_functions=()) -> dict[str, str]:
    """How often each `probe("label")` of a file read alone runs, as the engine decides it for a report there."""
    text = textwrap.dedent(source)
    facts = single_file_facts("t.py", text, hot_functions, gate_names)
    module = cst.parse_module(text)
    context = FileContext("t.py", module, gate_names, facts)
    _Traversal(context, [Probe(context)]).walk(module)
    tree = ast.parse(text)
    positions = positions_of(text, module, context.reports, tree)
    where = _Where(tree, text, gate_names)
    result = {}
    for report in context.reports:
        state = _state_of(report, positions, where, facts)
        result[report.message] = (
            "cold" if state.cold else "gated" if state.gated and state.hot else "per_step" if state.hot else "neutral"
        )
    return result


def test_loop_over_loader_is_the_step_and_epoch_code_is_not():
    assert states(
        """
        def main(model, loader, optimizer):
            probe("setup")
            for epoch in range(10):
                for batch in loader:
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
                    probe("step")
                probe("epoch end")
        """
    ) == {"setup": "neutral", "step": "per_step", "epoch end": "neutral"}


def test_gates_modulo_names_else_and_early_continue():
    assert states(
        """
        def main(model, loader, optimizer, args):
            for step, batch in enumerate(loader):
                model(batch).backward()
                optimizer.step()
                if step % args.log_interval == 0:
                    probe("modulo")
                else:
                    probe("else branch")
                if should_log:
                    probe("named gate")
                if batch is None:
                    probe("not a gate")
                if step % 100 != 0:
                    continue
                probe("after early continue")
        """
    ) == {
        "modulo": "gated",
        "else branch": "per_step",
        "named gate": "gated",
        "not a gate": "per_step",
        "after early continue": "gated",
    }


def test_configured_gate_names():
    source = """
        def main(model, loader, optimizer):
            for batch in loader:
                model(batch).backward()
                optimizer.step()
                if chatty:
                    probe("custom gate")
        """
    assert states(source) == {"custom gate": "per_step"}
    assert states(source, gate_names=["chatty"]) == {"custom gate": "gated"}


def test_functions_called_from_the_step_at_any_depth():
    assert states(
        """
        def level3():
            probe("three deep")

        def level2():
            probe("two deep")
            level3()

        def level1():
            probe("one deep")
            level2()

        def log_metrics():
            probe("called under a gate")

        class Trainer:
            def update(self):
                probe("method")

            def fit(self, loader):
                for batch in loader:
                    self.optimizer.zero_grad()
                    self.model(batch).backward()
                    level1()
                    self.update()
                    if self.step % 10 == 0:
                        log_metrics()
        """
    ) == {
        "three deep": "per_step",
        "two deep": "per_step",
        "one deep": "per_step",
        "called under a gate": "gated",
        "method": "per_step",
    }


def test_cold_code_eval_no_grad_init_sampling():
    assert states(
        """
        import torch

        class Model:
            def __init__(self):
                probe("init")

        def evaluate(model, loader):
            for batch in loader:
                probe("eval loop")

        def generate(model, idx):
            for _ in range(100):
                probe("sampling loop")

        def train(model, loader, val_loader, optimizer):
            for batch in loader:
                model(batch).backward()
                optimizer.step()
            with torch.no_grad():
                for batch in val_loader:
                    probe("validation under no_grad")
        """
    ) == {
        "init": "cold",
        "eval loop": "cold",
        "sampling loop": "cold",
        "validation under no_grad": "neutral",
    }


def test_named_step_functions_and_configured_hot_functions():
    source = """
        def training_step(self, batch, batch_idx):
            probe("lightning step")

        def my_update(batch):
            probe("custom")
        """
    assert states(source) == {"lightning step": "per_step", "custom": "neutral"}
    assert states(source, hot_functions=["my_update"])["custom"] == "per_step"


def test_nanogpt_style_loop():
    assert states(
        """
        while True:
            if iter_num % eval_interval == 0 and master_process:
                probe("eval")
            for micro_step in range(gradient_accumulation_steps):
                logits, loss = model(X, Y)
                probe("micro step")
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            probe("after step")
            if iter_num % log_interval == 0 and master_process:
                probe("log")
            iter_num += 1
        """
    ) == {"eval": "gated", "micro step": "per_step", "after step": "per_step", "log": "gated"}


def test_device_provenance():
    module = cst.parse_module(
        textwrap.dedent(
            """
            def step(loss, logits, sizes):
                host = loss.detach().cpu()
                values = logits.tolist()
                scalar = loss.item()
                n = logits.size(0)
                device_value = loss.to("cuda")
                total = scalar * 2 + n
                probe(host, values, scalar, n, device_value, total, loss)
            """
        )
    )
    context = FileContext("t.py", module)
    seen = {}

    class Where(Probe):
        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                seen.update({arg.value.value: self.context.location_of(arg.value) for arg in node.args})

    _Traversal(context, [Where(context)]).walk(module)
    assert seen == {
        "host": "host", "values": "host", "scalar": "host", "n": "host", "device_value": "device", "total": "host",
        "loss": "unknown",
    }


def test_import_aliases_resolve():
    module = cst.parse_module("import torch as t\nfrom torch import distributed as dist\nx = 1\n")
    context = FileContext("t.py", module)
    _Traversal(context, []).walk(module)
    assert context.resolve(cst.parse_expression("t.cuda.synchronize")) == "torch.cuda.synchronize"
    assert context.resolve(cst.parse_expression("dist.all_reduce")) == "torch.distributed.all_reduce"
    assert context.resolve(cst.parse_expression("model.parameters")) == "model.parameters"


def locations(source: str) -> dict[str, str]:
    """Where each name passed to `probe(...)` lives, as the context says at that call."""
    module = cst.parse_module(textwrap.dedent(source))
    context = FileContext("t.py", module)
    seen: dict[str, str] = {}

    class Where(Probe):
        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                seen.update({arg.value.value: self.context.location_of(arg.value) for arg in node.args})

    _Traversal(context, [Where(context)]).walk(module)
    return seen


def test_a_name_two_branches_bind_apart_is_of_unknown_place_after_the_if():
    """DI-engine's PDQN: `cont_loss` is the device loss when the continuous head trains, `torch.Tensor([0])` (a CPU
    tensor, as every legacy constructor builds) otherwise: after the `if`, `cont_loss.item()` may sync."""
    assert locations(
        """
        import torch
        def step(loss, flag):
            if flag:
                cont = loss.to("cuda")
                both = 1.0
            else:
                cont = torch.Tensor([0])
                both = 2.0
            if flag:
                only_body = loss.item()
            placeholder = torch.LongTensor([1, 2])
            probe(cont, both, only_body, placeholder)
        """
    ) == {"cont": "unknown", "both": "host", "only_body": "host", "placeholder": "host"}


def test_the_elements_of_a_list_of_moved_tensors_are_on_the_device():
    """StyleTTS: `batch = [b.to(device) for b in batch]`, then `texts, lengths = batch`: each element is on the device
    (a loop over it too), until the name is bound to something else."""
    assert locations(
        """
        import torch
        def step(batch, device, other):
            batch = [b.to(device) for b in batch]
            texts, lengths = batch
            for row in batch:
                probe(row)
            pair = [t.cuda() for t in other]
            a, b = pair
            pair = list(other)
            c, d = pair
            first, second = [t for t in other]
            probe(texts, lengths, a, b, c, d, first, second)
        """
    ) == {"row": "device", "texts": "device", "lengths": "device", "a": "device", "b": "device", "c": "unknown",
          "d": "unknown", "first": "unknown", "second": "unknown"}


def test_what_a_hugging_face_preprocessor_returns_is_on_the_host():
    """ms-swift's templates encode each sample in the data pipeline: `self.processor.image_processor(images,
    return_tensors="pt")` and `tokenizer(...)` hand back CPU tensors, whose `.tolist()` reads nothing from the GPU.
    Moved to the device they are there; a detector's `post_processor` computes on the device and is not one."""
    assert locations(
        """
        def encode(self, images, texts, outputs, tokenizer, device):
            image_inputs = self.processor.image_processor(images, return_tensors="pt")
            ids = tokenizer(texts, return_tensors="pt")
            encoded = self.tokenizer.encode(texts[0])
            moved = tokenizer(texts, return_tensors="pt").to(device)
            boxes = self.post_processor(outputs)
            probe(image_inputs, ids, encoded, moved, boxes)
        """
    ) == {"image_inputs": "host", "ids": "host", "encoded": "host", "moved": "device", "boxes": "unknown"}
