"""GPL4xx beyond the rules' own examples: the shapes of real training code that separate a per-step sync from a
free host read (provenance, gates, eval code, precedence with other families, collectives, accelerate)."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = all_rules()


def gpl4(source: str) -> list[tuple[str, int]]:
    """(code, line) of every GPL4xx finding, with all rules enabled as in a real run."""
    text = textwrap.dedent(source)
    return [(f.code, f.line) for f in lint_text("train.py", text, RULES) if f.code.startswith("GPL4")]


STEP = """
import torch
import torch.nn.functional as F

def train(model, loader, optimizer, device):
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def in_step(body: str, header: str = "") -> str:
    """A training script with `body` at the end of its step loop; the body's first line is line 12 (+ header lines)."""
    lines = "\n".join("        " + line if line else "" for line in textwrap.dedent(body).strip("\n").splitlines())
    return header + STEP + lines + "\n"


# ------------------------------------------------------------------ GPL401 and provenance
def test_item_every_step_is_flagged_once():
    assert gpl4(in_step("loss_value = loss.item()")) == [("GPL401", 12)]


@pytest.mark.parametrize(
    "body",
    [
        "if step % 10 == 0:\n    print(loss.item())",  # gated
        "if step % 10 != 0:\n    continue\nprint(loss.item())",  # early exit on non-logging steps
        "host = loss.detach().cpu()\nprint(host.item())",  # already on the host: only the .cpu() is the sync
        "counts = torch.zeros(3)\nfirst = counts[0].item()",  # a CPU tensor (no device=)
        "total += loss.item()",  # GPL2xx accumulator
        "vals = [t.item() for t in [loss, loss]]",  # GPL1xx comprehension
    ],
)
def test_item_not_flagged_by_gpl401(body):
    assert ("GPL401", 12) not in gpl4(in_step(body))


def test_inverted_modulo_is_not_a_gate():
    # `if step % 50:` is true on 49 of 50 steps.
    assert gpl4(in_step("if step % 50:\n    print(loss.item())")) == [("GPL401", 13)]


def test_rank_guard_is_not_a_step_gate():
    source = in_step("if rank == 0:\n    print(loss.item())")
    assert gpl4(source) == [("GPL401", 13)]


def test_interval_flag_variable_gates():
    body = "is_log_step = step % 100 == 0 or step == 0\nif is_log_step:\n    print(loss.item())"
    assert gpl4(in_step(body)) == []


def test_eval_function_and_no_grad_decorator_are_cold():
    source = """
    import torch

    @torch.no_grad()
    def estimate(model, loader):
        for x, y in loader:
            print(model(x).sum().item())

    def validate(model, loader):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            print(loss.item())
    """
    assert gpl4(source) == []


def test_forward_of_a_loss_module_runs_every_step():
    source = """
    import torch

    class SetCriterion(torch.nn.Module):
        def forward(self, outputs, targets):
            num = torch.clamp(outputs.sum(), min=1).item()
            return outputs.mean() / num
    """
    assert gpl4(source) == [("GPL401", 6)]


def test_grad_scaler_scale_read():
    assert gpl4(in_step("scale = scaler.get_scale()")) == [("GPL401", 12)]


def test_cpu_only_training_script_is_not_flagged():
    # No device word anywhere (and `input`, which contains the letters of "npu", is not one).
    source = """
    import torch

    def main(model, batches, optimizer):
        for input, y in batches:
            loss = ((model(input) - y) ** 2).mean()
            loss.backward()
            optimizer.step()
            print(loss.item())
    """
    assert gpl4(source) == []


# ------------------------------------------------------------------ GPL402-GPL406
def test_float_of_host_value_is_free_and_of_tensor_is_not():
    assert gpl4(in_step("lr = float(optimizer.param_groups[0]['lr'])\nok = float(loss)")) == [("GPL402", 13)]


def test_cpu_copy_feeding_sklearn_belongs_to_gpl2():
    body = "acc = accuracy_score(y_host, model(x).argmax(1).cpu().numpy())"
    assert gpl4(in_step(body, header="from sklearn.metrics import accuracy_score\n")) == []


def test_fstring_of_tensor_is_one_finding():
    assert gpl4(in_step('print(f"loss {loss:.3f} step {step}")')) == [("GPL404", 12)]


def test_percent_format_with_computed_format_string():
    body = 'line = ("%10s" * 2 + "%10.4g") % ("a", "b", loss)'
    assert gpl4(in_step(body)) == [("GPL404", 12)]


def test_shape_and_none_tests_are_not_tensor_conditions():
    body = "if x.shape[0] > 1 and y is not None:\n    pass\nif len(x) > 2:\n    pass"
    assert gpl4(in_step(body)) == []


def test_tensor_condition_in_per_parameter_loop():
    body = "for p in model.parameters():\n    if p.grad.norm() > 1.0:\n        p.grad.mul_(0.5)"
    assert ("GPL405", 13) in gpl4(in_step(body))


def test_boolean_mask_read_but_not_masked_write():
    body = "keep = y != 0\nkept = x[keep]\nx[keep] = 0.0"
    assert gpl4(in_step(body)) == [("GPL406", 13)]


def test_repeat_interleave_with_int_or_output_size_is_static():
    body = "a = x.repeat_interleave(3)\nb = torch.repeat_interleave(x, y, dim=0, output_size=64)"
    assert gpl4(in_step(body)) == []


# ------------------------------------------------------------------ GPL410-GPL412
def test_synchronize_under_opt_in_flag_is_not_flagged():
    body = "if args.synchronize_step:\n    torch.cuda.synchronize()\ntorch.cuda.synchronize()"
    assert gpl4(in_step(body)) == [("GPL410", 14)]


def test_blocking_copy_skips_dtype_moves_modules_and_cpu_branch():
    source = """
    import torch

    def train(model, loader, optimizer, device, device_type):
        for x, y in loader:
            h = x.to(torch.bfloat16)
            model.to(device)
            if device_type == "cuda":
                x = x.pin_memory().to(device, non_blocking=True)
            else:
                x = x.to(device)
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """
    assert gpl4(source) == []


def test_blocking_copy_to_a_device_helper_call():
    source = """
    import torch

    def train(model, loader, optimizer):
        for batch in loader:
            batch = batch.to(dist_util.dev())
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
    """
    assert gpl4(source) == [("GPL411", 6)]


def test_accelerate_prepared_loader_is_already_on_device():
    source = """
    import torch

    def train(accelerator, model, loader, optimizer, device):
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            batch = batch.to(device)
            loss = model(batch).sum()
            accelerator.backward(loss)
            optimizer.step()
    """
    assert gpl4(source) == []


def test_non_blocking_without_pinned_loader():
    source = """
    import torch
    from torch.utils.data import DataLoader

    def train(model, dataset, optimizer, device):
        loader = DataLoader(dataset, batch_size=8, pin_memory=False)
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """
    assert gpl4(source) == [("GPL411", 8)]


def test_tensor_from_host_comprehension():
    body = "lengths = torch.as_tensor([len(t) for t in [x, y]], device=device)"
    assert gpl4(in_step(body)) == [("GPL412", 12)]


# ------------------------------------------------------------------ GPL420-GPL422
def test_collective_read_later_in_the_step_through_assignments():
    source = """
    import torch
    import torch.distributed as dist

    def train(model, loader, optimizer, ddp):
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            if ddp:
                dist.all_reduce(loss)
            optimizer.step()
            scaled = loss / 4
            print(f"loss {scaled.item():.3f}")
    """
    assert ("GPL420", 10) in gpl4(source)


def test_collective_with_device_only_consumer_is_fine():
    source = """
    import torch
    import torch.distributed as dist

    def train(model, loader, optimizer, center):
        for x in loader:
            out = model(x)
            loss = out.sum()
            loss.backward()
            optimizer.step()
            batch_center = out.detach().sum(0)
            dist.all_reduce(batch_center)
            center = center * 0.9 + batch_center * 0.1
    """
    assert gpl4(source) == []


def test_wrapper_collective_whose_result_is_read():
    source = """
    import torch

    def train_one_epoch(model, loader, optimizer, device):
        for x in loader:
            loss_dict = model(x)
            losses = sum(loss_dict.values())
            losses.backward()
            optimizer.step()
            reduced = utils.reduce_dict(loss_dict)
            total = sum(reduced.values())
            value = total.item()
    """
    codes = gpl4(source)
    assert ("GPL420", 10) in codes and ("GPL401", 12) in codes


def test_barrier_after_the_loop_is_not_per_step():
    source = """
    import torch
    import torch.distributed as dist

    def train(model, loader, optimizer):
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            dist.barrier()
        dist.barrier()
    """
    assert gpl4(source) == [("GPL421", 10)]


def test_ddp_accumulation_with_require_backward_grad_sync_is_fine():
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(model, loader, optimizer, accum):
        model = DDP(model)
        for i, x in enumerate(loader):
            model.require_backward_grad_sync = (i + 1) % accum == 0
            loss = model(x).sum()
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
    """
    assert gpl4(source) == []


# ------------------------------------------------------------------ bench/sync_debug_check.py (the CUDA harness)
def _harness():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "sync_debug_check.py"
    spec = importlib.util.spec_from_file_location("sync_debug_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_sync_debug_check_says_so_without_cuda(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the real check runs instead")
    assert _harness().main([]) == 2
    assert "no CUDA device" in capsys.readouterr().out


@pytest.mark.slow
def test_sync_debug_check_runs_every_example_on_cpu(capsys, monkeypatch, tmp_path):
    """The harness can supply and run every GPL4xx example (CUDA-only calls are skipped on CPU)."""
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)  # examples save checkpoints (`torch.save(..., "model.pt")`) into the working folder
    assert _harness().main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "error:" not in out
    assert out.count("clean") > 60


def test_function_that_steps_without_a_loop_is_one_step():
    source = """
    import torch

    def train(model, data, optimizer, device):
        optimizer.zero_grad()
        out = model(data.x)
        loss = torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        return float(loss)
    """
    assert gpl4(source) == [("GPL406", 7), ("GPL406", 7), ("GPL402", 10)]


def test_helper_that_moves_a_batch_blocking():
    source = """
    import torch

    def train_step(model, batch, optimizer, device):
        batch = move_to_device(batch, device)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
    """
    assert gpl4(source) == [("GPL411", 5)]


def test_wrapped_host_list_moved_to_the_device():
    body = "ids = torch.LongTensor([1, 2, 3]).cuda()\nzeros = torch.zeros(3).cuda()"
    assert gpl4(in_step(body)) == [("GPL412", 12)]  # the data-free factory is GPL5xx's


def test_odd_calls_do_not_crash_the_rules():
    """Calls with missing or keyword-only arguments and unusual statements reach every GPL4xx visitor."""
    body = """
print()
float()
x.to()
torch.tensor()
torch.as_tensor(device="cuda")
dist.all_reduce()
dist.all_reduce(tensor=loss)
x.repeat_interleave()
torch.repeat_interleave()
z = x[..., 1:2]
a, *b = x.to(device), y
"%s" % ()
logger.info()
all_reduce_mean()
if (m := loss > 1):
    pass
del x[keep]
torch.LongTensor().cuda()
move_to_device(batch)
self.register_buffer(name)
(u, v), w = (x, y), loss
x[keep] += 1
"""
    source = "import torch\nimport torch.distributed as dist\n" + STEP + "\n".join(
        "        " + line for line in body.strip("\n").splitlines()
    ) + "\n"
    codes = {code for code, _ in gpl4(source)}
    assert codes <= {"GPL401", "GPL402", "GPL404", "GPL405", "GPL406", "GPL411", "GPL412", "GPL420"}


# ------------------------------------------------------------------ shapes from real training scripts (recall)
def test_type_to_a_cuda_tensor_alias_is_a_blocking_copy():
    """The classic GAN scripts: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, `imgs.type(Tensor)`."""
    source = """
    import torch

    cuda = torch.cuda.is_available()
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor

    for i, (imgs, _) in enumerate(dataloader):
        real_imgs = imgs.type(Tensor)
        half = imgs.type(torch.HalfTensor)
        other = imgs.type(torch.float16)
        loss = model(real_imgs).mean()
        loss.backward()
        optimizer.step()
    """
    assert gpl4(source) == [("GPL411", 8)]


def test_pinned_then_copied_without_non_blocking():
    body = "c = torch.from_numpy(labels).pin_memory().to(device)\nd = torch.from_numpy(labels).pin_memory().to(device, non_blocking=True)"
    assert gpl4(in_step(body)) == [("GPL411", 12)]


def test_any_over_tensors_as_a_condition():
    body = """
if any(torch.isnan(l) for l in (loss, loss * 2)):
    break
if not all(t.isfinite().all() for t in [loss]):
    break
if any(n > 3 for n in [1, 2]):
    break
"""
    assert gpl4(in_step(body)) == [("GPL405", 12), ("GPL405", 14)]


def test_accelerator_gather_read_on_the_host():
    source = """
    import torch

    def train(accelerator, model, loader, optimizer, args):
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        train_loss = 0.0
        for batch in loader:
            loss = model(batch).mean()
            avg_loss = accelerator.gather(loss.repeat(args.train_batch_size)).mean()
            train_loss += avg_loss.item()
            accelerator.backward(loss)
            optimizer.step()
            gathered = accelerator.gather(loss.detach())
            ema = gathered * 0.1
    """
    assert gpl4(source) == [("GPL420", 9)]


def test_collective_result_tested_in_an_if_or_read_in_a_for_loop():
    source = """
    import torch
    import torch.distributed as dist

    def train(model, loader, optimizer, limit):
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            grad_norm = allreduce(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            if grad_norm > limit:
                continue
            optimizer.step()
            losses = torch.stack([loss, loss])
            dist.reduce(losses, dst=0)
            named = {k: v for k, v in zip("ab", losses)}
            for name, value in named.items():
                print(name, value.mean().item())
    """
    codes = gpl4(source)
    assert ("GPL420", 9) in codes and ("GPL420", 14) in codes


def test_collective_result_whose_shape_only_is_read_is_fine():
    source = """
    import torch

    def train(model, loader, optimizer, queue_size):
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            feats = concat_all_gather(model.features.detach())
            batch_size = feats.shape[0]
            assert queue_size % batch_size == 0
    """
    assert gpl4(source) == []


def test_while_loop_fetching_batches_with_next_is_a_step_loop():
    source = """
    import torch

    def training_loop(phases, training_set_iterator, device):
        while True:
            real_img, real_c = next(training_set_iterator)
            real_img = real_img.to(device)
            for phase in phases:
                phase.loss(real_img).backward()
                phase.opt.step()
    """
    assert gpl4(source) == [("GPL411", 7)]


def test_micro_batch_loop_with_next_keeps_the_rest_of_a_one_step_function_hot():
    source = """
    import torch

    def train(self):
        for _ in range(self.accumulate_every):
            batch = next(self.loader).cuda(non_blocking=True)
            loss = self.model(batch).mean()
            loss.backward()
        self.opt.step()
        if torch.isnan(loss):
            raise_later = True
    """
    assert gpl4(source) == [("GPL405", 10)]


def test_functions_named_like_step_work_are_hot():
    """Helpers the step calls from another module: loss computations, gradient clipping, per-batch preparation."""
    source = """
    import torch

    class BiEncoderNllLoss(object):
        def calc(self, scores, positive_idx):
            return torch.nn.functional.nll_loss(scores, torch.tensor(positive_idx).to(scores.device))

    class SetCriterion(torch.nn.Module):
        @torch.no_grad()  # no gradients, but still part of every step's loss
        def cardinality(self, outputs, targets, device):
            return torch.as_tensor([len(t) for t in targets], device=device)

    def loss_labels(outputs, targets, device):
        return torch.as_tensor([len(t) for t in targets], device=device)

    def clip_gradients(model, clip):
        for p in model.parameters():
            clip_coef = clip / (p.grad.data.norm(2) + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)

    def parse_batch(batch):
        lengths = batch[1].cuda()
        return torch.max(lengths).item()

    def train(model, loader, optimizer):  # the step calls none of them here: their names alone make them hot
        for x in loader:
            model(x.cuda(non_blocking=True)).mean().backward()
            optimizer.step()
    """
    assert gpl4(source) == [("GPL412", 6), ("GPL412", 11), ("GPL412", 14), ("GPL405", 19), ("GPL411", 23), ("GPL401", 24)]


def test_names_that_log_or_evaluate_a_loss_are_not_hot():
    source = """
    import torch

    def log_losses(losses, device):
        print(losses["total"].item())

    @torch.no_grad()
    def estimate_loss(model, device):
        return model(torch.tensor([1, 2], device=device)).item()

    class MyLoss(torch.nn.Module):
        def __init__(self, weights, device):
            self.weights = torch.tensor(weights, device=device)

    def process_batch(model, x):
        return model(x)

    def train(model, loader, val_loader, optimizer, device):
        for x in loader:
            loss = process_batch(model, x.to(device, non_blocking=True)).mean()
            loss.backward()
            optimizer.step()
        for x in val_loader:  # calls a function named like step work, but is not a step loop for that
            val = process_batch(model, x.to(device, non_blocking=True)).mean()
            print(val.item())
    """
    assert gpl4(source) == []


def test_collective_helper_of_a_dict_of_python_numbers():
    """`strategy.all_reduce(logs)` / `comm.gather(metrics)` of `.item()` values: a tensor built, reduced and read back
    per key; a dict of tensors reduced and kept on the device is fine, and `x.gather(dim, idx)` is a tensor op."""
    source = """
    import torch

    def train(model, loader, optimizer, strategy, comm):
        for x in loader:
            loss = model(x.cuda(non_blocking=True)).mean()
            loss.backward()
            optimizer.step()
            logs = {"loss": loss.item(), "lr": 0.1}
            logs = strategy.all_reduce(logs)
            metrics = comm.gather({k: v.detach().cpu().item() for k, v in {"loss": loss}.items()})
            kept = strategy.all_reduce({"loss": loss.detach()})
            picked = x.gather(1, x.argmax(1, keepdim=True))
    """
    codes = [c for c in gpl4(source) if c[0] == "GPL420"]
    assert codes == [("GPL420", 10), ("GPL420", 11)]


def test_masks_followed_through_stack_transpose_and_unpacking():
    """yolov5's build_targets: `j, k = (...).T` then `j = torch.stack((torch.ones_like(j), j, k))` then `t[j]`."""
    body = """
gxy = x[:, :2]
j, k = ((gxy % 1 < 0.5) & (gxy > 1)).T
j = torch.stack((torch.ones_like(j), j, k))
t = x.repeat((3, 1, 1))[j]
"""
    assert gpl4(in_step(body)) == [("GPL406", 15)]


def test_tick_maintenance_after_an_early_continue_is_gated():
    """StyleGAN/EDM: `if cur_nimg < tick_start_nimg + kimg_per_tick * 1000: continue`, then once-per-tick status."""
    source = """
    import torch

    def training_loop(loader, opt, device, kimg_per_tick, batch_size):
        cur_nimg = tick_start_nimg = 0
        for images in loader:
            opt.step()
            cur_nimg += batch_size
            if cur_nimg < tick_start_nimg + kimg_per_tick * 1000:
                continue
            print(float(images.to(device).mean().cpu()))
            tick_start_nimg = cur_nimg
    """
    assert [c for c, _ in gpl4(source) if c in ("GPL402", "GPL403")] == []


def test_detect_functions_are_inference():
    source = """
    import torch

    def detect(model, dataloader, device):
        for imgs in dataloader:
            out = model(imgs.to(device))
            print(out.argmax(1).cpu())
    """
    assert gpl4(source) == []


def test_a_configuration_switch_is_not_a_step_gate():
    """`if args.print_loss:` runs its body every step when the flag is on; `if step % args.log_interval == 0:` does not."""
    body = """
if args.print_loss:
    print(f"loss = {loss}")
if step % args.log_interval == 0:
    print(f"loss = {loss}")
"""
    assert gpl4(in_step(body)) == [("GPL404", 13)]
