"""GPL1xx beyond the rules' own examples: real-code shapes, precedence between families, aliases and the traps."""

from __future__ import annotations

import textwrap

from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = all_rules()


def codes(source: str, prefix: str = "GPL") -> list[tuple[str, int]]:
    """(code, line) of every finding whose code starts with `prefix`."""
    findings = lint_text("train.py", textwrap.dedent(source), RULES)
    return [(f.code, f.line) for f in findings if f.code.startswith(prefix)]


def test_clip_loop_with_item_is_one_gpl101_finding_not_an_optimizer_loop():
    # dino's clip_gradients: norm + .item() + in-place scaling per parameter. The read makes it GPL101; the
    # in-place mul_ must not add a GPL501 finding on the same loop.
    source = """
        import torch

        def clip_gradients(model, clip):
            norms = []
            for name, p in model.named_parameters():
                if p.grad is not None:
                    param_norm = p.grad.data.norm(2)
                    norms.append(param_norm.item())
                    clip_coef = clip / (param_norm + 1e-6)
                    if clip_coef < 1:
                        p.grad.data.mul_(clip_coef)
            return norms
    """
    assert codes(source, "GPL1") + codes(source, "GPL5") == [("GPL101", 6)]


def test_lars_style_update_with_norms_is_an_optimizer_loop():
    source = """
        import torch

        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    w_norm = p.norm(2.0)
                    g_norm = grad.norm(2.0)
                    trust = w_norm / (g_norm + 1e-8)
                    grad.mul_(trust)
                    p.add_(grad, alpha=-group["lr"])
    """
    found = codes(source, "GPL1") + codes(source, "GPL5")
    assert found == [("GPL501", 6)]


def test_norm_list_for_global_norm_is_gpl102():
    source = """
        import torch

        def global_grad_norm(groups):
            norms = []
            for group in groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    norms.append(torch.linalg.vector_norm(p.grad))
            return torch.linalg.vector_norm(torch.stack(norms))
    """
    assert codes(source, "GPL1") == [("GPL102", 7)]


def test_alias_and_truth_consumer_make_a_read():
    # improved-diffusion: `th.isfinite(p.grad).all()` per parameter, each bool()-ed by any().
    source = """
        import torch as th

        def optimize_fp16(self):
            if any(not th.isfinite(p.grad).all() for p in self.model_params):
                self.lg_loss_scale -= 1
                return
    """
    assert codes(source, "GPL1") == [("GPL101", 5)]


def test_binary_operation_receiver_and_logger_read():
    source = """
        import numpy as np

        def _log_grad_norm(self):
            sqsum = 0.0
            for p in self.master_params:
                sqsum += (p.grad ** 2).sum().item()
            logger.logkv_mean("grad_norm", np.sqrt(sqsum))
    """
    assert codes(source, "GPL1") == [("GPL101", 6)]


def test_optimizer_state_norms_handed_to_a_logger():
    source = """
        import torch

        def log_states(optimizer, iteration):
            for k, v in optimizer.state_dict()["state"].items():
                for ki, vi in v.items():
                    norm = torch.norm(vi)
                    tb_wandb_log(f"state_norms/{k}_{ki}", norm, iteration)
    """
    # gpt-neox's optimizer-state logging: the inner loop's values derive from the outer state dict's values.
    assert codes(source, "GPL1") == [("GPL101", 5)]
    named = source.replace('optimizer.state_dict()["state"].items()', "optimizer_state_dict.items()")
    assert codes(named, "GPL1") == [("GPL101", 5)]


def test_host_metadata_and_setup_loops_are_not_flagged():
    source = """
        import torch

        def count(model):
            total = sum(p.numel() for p in model.parameters())
            for name, p in model.named_parameters():
                print(name, p.shape, p.numel() * 4)
                if p.requires_grad:
                    p.requires_grad_(False)
            return total
    """
    assert codes(source, "GPL1") == []
    assert codes(source, "GPL5") == []


def test_gated_and_early_exit_gated_loops_are_not_flagged():
    source = """
        import torch

        def train(model, loader, optimizer, writer, log_every):
            for step, batch in enumerate(loader):
                model(batch).backward()
                optimizer.step()
                if step % log_every != 0:
                    continue
                for name, p in model.named_parameters():
                    writer.add_scalar(name, p.grad.norm().item(), step)
    """
    assert codes(source, "GPL1") == []


def test_configuration_switch_is_not_a_gate():
    # gpt-neox: `if neox_args.log_param_norm:` turns per-parameter norm logging on for every step.
    source = """
        import torch

        def training_log(neox_args, model, iteration):
            if neox_args.log_grad_norm or neox_args.log_param_norm:
                for i, (name, param) in enumerate(model.module.named_parameters()):
                    if neox_args.log_param_norm:
                        tb_wandb_log(f"parameter_norms/{name}", torch.norm(param), iteration)
    """
    assert codes(source, "GPL1") == [("GPL101", 6)]
    interval = source.replace("if neox_args.log_grad_norm or neox_args.log_param_norm:", "if iteration % 100 == 0:")
    assert codes(interval, "GPL1") == []


def test_cold_function_is_not_flagged():
    source = """
        import torch

        def validate(model):
            return [p.norm().item() for p in model.parameters()]
    """
    assert codes(source, "GPL1") == []


def test_nested_function_in_a_parameter_loop_does_not_confuse_the_scanner():
    source = """
        import torch

        def ema_update(ema, model):
            for e, p in zip(ema.parameters(), model.parameters()):
                def helper(x):
                    y = x * 2
                    return y
                e.mul_(0.9).add_(helper(p), alpha=0.1)
    """
    assert codes(source, "GPL5") == [("GPL501", 5)]


def test_item_comprehension_over_host_values_is_free():
    source = """
        import torch

        def train(model, loader, optimizer):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                dpr = [x.item() for x in torch.linspace(0, 0.1, 12).cpu()]
                sizes = [s.item() for s in batch.tolist()]
    """
    assert codes(source, "GPL104") == []


def test_item_comprehension_of_a_parameter_norm_is_gpl101_only():
    source = """
        import torch

        def grad_norms(model):
            return [p.grad.norm().item() for p in model.parameters()]
    """
    assert codes(source, "GPL1") == [("GPL101", 5)]


def test_per_metric_loop_over_host_dict_is_free():
    source = """
        import torch

        def train(model, loader, optimizer, meters):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                stats = {"loss": 1.0, "lr": 0.1}
                for k, v in stats.items():
                    meters[k].update(v)
    """
    assert codes(source, "GPL103") == []


def test_metric_logger_update_with_host_values_is_free():
    source = """
        import torch

        def train(model, loader, optimizer, metric_logger):
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                metric_logger.update(loss=loss.item(), lr=0.1)
    """
    assert codes(source, "GPL103") == []


def test_foreach_norm_fix_keeps_other_comprehensions_alone():
    # Only `torch.stack([norm(x) for ...])` gets the fix; a norm with `dim=` has no foreach form.
    source = """
        import torch

        def norms(params):
            return torch.stack([torch.norm(p.grad, dim=0) for p in params])
    """
    findings = [f for f in lint_text("a.py", textwrap.dedent(source), RULES) if f.code == "GPL102"]
    assert len(findings) == 1 and findings[0].fix is None


def test_host_scalars_logged_from_an_event_storage_are_free():
    # detectron2's TensorboardXWriter: the storage holds Python floats; add_scalar of them is no sync.
    source = """
        def write(self):
            storage = get_event_storage()
            for k, (v, it) in storage.latest_with_smoothing_hint(20).items():
                self._writer.add_scalar(k, v, it)
    """
    assert codes("import torch\n" + textwrap.dedent(source), "GPL1") == []


def test_names_and_indices_of_parameter_loops_are_not_tensors():
    # `name` in `for name, p in named_parameters()` is a string; passing it to a logger reads nothing.
    source = """
        import torch

        def report(model, logger):
            for i, (name, p) in enumerate(model.named_parameters()):
                logger.info(name)
                p.data.mul_(0.5)
    """
    assert codes(source, "GPL1") == []
