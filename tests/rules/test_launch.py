"""GPL5xx beyond the rules' own examples: real-code shapes, aliases, fixes and the traps."""

from __future__ import annotations

import textwrap

from gpulint.linter.engine import lint_text
from gpulint.linter.fixes import fix_text, parses
from gpulint.linter.rule import all_rules, rules_by_code

RULES = all_rules()


def findings(source: str, prefix: str = "GPL5", path: str = "train.py") -> list:
    return [f for f in lint_text(path, textwrap.dedent(source), RULES) if f.code.startswith(prefix)]


def codes(source: str, prefix: str = "GPL5", path: str = "train.py") -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in findings(source, prefix, path)]


def fixed(source: str, code: str) -> str:
    rule = rules_by_code()[code]
    text, _ = fix_text(textwrap.dedent(source), lambda t: lint_text("train.py", t, [rule]), unsafe=True)
    return text


TRAIN = """
    import torch
    from torch import optim

    def train(model, loader, opt, device):
        for batch in loader:
            {line}
            model(batch).backward()
            opt.step()
"""


def in_loop(line: str) -> str:
    return TRAIN.replace("{line}", line)


# ---------------------------------------------------------------- GPL501
def test_ema_update_method_with_plain_buffer_copies_is_flagged_but_set_is_not():
    source = """
        import torch

        class ModelEma:
            def apply_update_(self, model, decay):
                for ema_b, model_b in zip(self.module.buffers(), model.buffers()):
                    ema_b.copy_(model_b.to(device=self.device))

            def set(self, model):
                for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                    ema_v.copy_(model_v.to(device=self.device))
    """
    assert codes(source) == [("GPL501", 6)]


def test_loop_that_sorts_tensors_into_lists_for_foreach_is_not_flagged():
    source = """
        import torch

        class ModelEma:
            def apply_update_(self, model, decay):
                ema_values, model_values = [], []
                for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                    if ema_v.is_floating_point():
                        ema_values.append(ema_v)
                        model_values.append(model_v)
                    else:
                        ema_v.copy_(model_v)
                torch._foreach_lerp_(ema_values, model_values, weight=1.0 - decay)
    """
    assert codes(source) == []


def test_state_stored_per_parameter_counts_as_arithmetic():
    # peft AdaLoRA update_ipt: per-parameter sensitivity EMA stored in dicts, every step.
    source = """
        import torch

        def update_ipt(self, model):
            for n, p in model.named_parameters():
                self.ipt[n] = (p * p.grad).abs().detach()
                self.exp_avg[n] = self.beta1 * self.exp_avg[n] + (1 - self.beta1) * self.ipt[n]
    """
    assert codes(source) == [("GPL501", 5)]


def test_manual_grad_zeroing_is_flagged_weight_zeroing_is_not():
    grads = """
        import torch

        def zero_grad(model_params):
            for param in model_params:
                if param.grad is not None:
                    param.grad.detach_()
                    param.grad.zero_()
    """
    weights = grads.replace("param.grad.zero_()", "param.data.zero_()").replace("def zero_grad", "def zero_module")
    assert codes(grads) == [("GPL501", 5)]
    assert codes(weights) == []


def test_param_group_hyperparameter_loop_is_not_flagged():
    assert codes(in_loop('for g in opt.param_groups: g["lr"] = g["lr"] * 0.5')) == []


# ---------------------------------------------------------------- GPL502 / GPL503
def test_foreach_false_fix_keeps_the_call_valid_in_any_position():
    for call in (
        "torch.optim.SGD(params, foreach=False)",
        "torch.optim.SGD(params, foreach=False, lr=0.1)",
        "torch.optim.SGD(params, lr=0.1, foreach=False,)",
        "torch.optim.SGD(foreach=False, params=params)",
    ):
        out = fixed(f"import torch\nopt = {call}\n", "GPL502")
        assert parses(out) and "foreach" not in out, out


def test_zero_grad_alias_and_positional():
    assert codes(in_loop("opt.zero_grad(False)")) == [("GPL503", 7)]
    assert codes(in_loop("opt.zero_grad(set_to_none=True)")) == []


# ---------------------------------------------------------------- GPL504
def test_dtype_casts_and_cpu_moves_are_not_device_moves():
    for line in (
        "x = torch.zeros(4).to(torch.float16)",
        "x = torch.zeros(4).to(dtype)",
        "x = torch.zeros(4).to(x_dtype)",
        "x = torch.zeros(4).to('cpu')",
        "x = torch.zeros(4).to(torch.device('cpu'))",
        "x = torch.zeros(0).to(device)",
        "x = torch.zeros(4, pin_memory=True).to(device, non_blocking=True)",
        "x = torch.tensor([1.0, 2.0]).to(device)",  # GPL4 territory: a host list is copied either way
    ):
        assert codes(in_loop(line), "GPL504") == [], line


def test_device_move_through_import_alias_gets_a_fix():
    source = in_loop("mask = t.ones(4, 4).to(device)").replace("import torch\n", "import torch as t\n")
    assert codes(source, "GPL504") == [("GPL504", 7)]
    assert "t.ones(4, 4, device=device)" in fixed(source, "GPL504")


def test_move_to_another_tensor_is_flagged_without_a_fix():
    found = findings(in_loop("z = torch.zeros(3).to(local_ts)"), "GPL504")
    assert len(found) == 1 and found[0].fix is None


def test_random_factory_fix_is_unsafe_and_deterministic_is_safe():
    random_fix = findings(in_loop("z = torch.randn(3).cuda()"), "GPL504")[0].fix
    zeros_fix = findings(in_loop("z = torch.zeros(3).cuda()"), "GPL504")[0].fix
    assert random_fix.applicability == "unsafe" and zeros_fix.applicability == "safe"


def test_setup_before_the_loop_is_not_flagged_but_a_per_step_helper_is():
    setup = """
        import torch

        def train(model, loader, opt, rank):
            total = torch.zeros(2).to(rank)
            for batch in loader:
                model(batch).backward()
                opt.step()
    """
    helper = """
        import torch

        def make_targets(batch_size, rank):
            return torch.LongTensor(batch_size).random_(8).to(rank)
    """
    init = """
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mask = torch.ones(4, 4).cuda()
    """
    assert codes(setup, "GPL504") == []
    assert codes(helper, "GPL504") == [("GPL504", 5)]
    assert codes(init, "GPL504") == []


# ---------------------------------------------------------------- GPL505
def test_optimizer_through_from_import_and_compile_through_alias():
    assert codes(in_loop("opt2 = optim.AdamW(model.parameters())"), "GPL505") == [("GPL505", 7)]
    source = in_loop("m = t.compile(model)").replace("import torch\n", "import torch as t\n")
    assert codes(source, "GPL505") == [("GPL505", 7)]


def test_schedulers_and_setup_construction_are_not_flagged():
    assert codes(in_loop("s = torch.optim.lr_scheduler.StepLR(opt, 10)"), "GPL505") == []
    source = """
        import torch
        from torch.utils.data import DataLoader

        def main(model, ds):
            loader = DataLoader(ds, batch_size=8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for batch in loader:
                    model(batch).backward()
                    opt.step()
    """
    assert codes(source, "GPL505") == []


# ---------------------------------------------------------------- GPL506 / GPL507
def test_anomaly_detection_in_test_files_is_allowed():
    source = "import torch\ntorch.autograd.set_detect_anomaly(True)\n"
    assert codes(source, "GPL506", path="tests/test_model.py") == []
    assert codes(source, "GPL506", path="src/train.py") == [("GPL506", 2)]


def test_anomaly_detection_through_from_import():
    source = "from torch.autograd import set_detect_anomaly\nset_detect_anomaly(mode=True)\n"
    assert codes(source, "GPL506") == [("GPL506", 2)]


def test_profiler_behind_a_flag_or_with_schedule_is_not_flagged():
    flagged = """
        import torch

        def train(loader, args):
            if args.profile:
                prof = torch.profiler.profile()
                prof.start()
    """
    bare = """
        import torch

        def train(loader, args):
            prof = torch.profiler.profile()
            prof.start()
    """
    assert codes(flagged, "GPL507") == []
    assert codes(bare, "GPL507") == [("GPL507", 5)]


# ---------------------------------------------------------------- shapes from real training code
def test_ema_over_dicts_of_named_parameters():
    # stylegan2's accumulate(): keys of dict(model.named_parameters()), indexed in the body.
    source = """
        import torch

        def accumulate(model1, model2, decay=0.999):
            par1 = dict(model1.named_parameters())
            par2 = dict(model2.named_parameters())
            for k in par1.keys():
                par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)
    """
    assert codes(source) == [("GPL501", 7)]


def test_ema_through_a_helper_that_returns_the_new_weight():
    # byol: `ma.data = updater.update_average(old, new)` with old/new unpacked from a tuple.
    source = """
        import torch

        def update_moving_average(ema_updater, ma_model, current_model):
            for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
                old_weight, up_weight = ma_params.data, current_params.data
                ma_params.data = ema_updater.update_average(old_weight, up_weight)
    """
    assert codes(source) == [("GPL501", 5)]


def test_out_argument_on_each_gradient_is_an_update():
    source = in_loop("for p in model.parameters():\n                torch.nan_to_num(p.grad, nan=0, out=p.grad)")
    assert codes(source, "GPL501") == [("GPL501", 7)]


def test_cast_of_each_parameter_is_not_an_update():
    source = """
        import torch

        def to_half(model):
            for p in model.parameters():
                p.data = p.data.half()
    """
    assert codes(source) == []


def test_epoch_level_loop_at_module_level_is_not_per_step():
    # awd-lstm: swapping in averaged weights once per epoch, at module level, outside the batch loop.
    source = """
        import torch

        for epoch in range(10):
            train()
            tmp = {}
            for prm in model.parameters():
                tmp[prm] = prm.data.clone()
                prm.data = optimizer.state[prm]["ax"].clone()
    """
    assert codes(source) == []


def test_is_named_test_helper_is_not_a_norm():
    # barlowtwins' LARS: `exclude_bias_and_norm(p)` is a test, not a reduction; the loop is an optimizer update.
    source = """
        import torch

        class LARS(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self):
                for g in self.param_groups:
                    for p in g["params"]:
                        dp = p.grad
                        if not self.exclude_bias_and_norm(p):
                            q = torch.norm(p) / torch.norm(dp)
                            dp = dp.mul(q)
                        p.add_(dp, alpha=-g["lr"])
    """
    assert codes(source, "GPL1") + codes(source, "GPL5") == [("GPL501", 8)]


def test_reshape_chain_fix_moves_the_device_into_the_factory():
    source = in_loop("idx = torch.arange(8).view(-1, 1).to(device)")
    assert "idx = torch.arange(8, device=device).view(-1, 1)" in fixed(source, "GPL504")


def test_numpy_noise_into_cpu_tensor_type_is_not_a_move():
    source = "import numpy as np\nimport torch\nfor x in loader:\n    z = torch.FloatTensor(np.random.normal(0, 1, (4, 8)))\n"
    assert codes(source, "GPL504") == []
    cuda = source.replace("torch.FloatTensor", "torch.cuda.FloatTensor")
    assert codes(cuda, "GPL504") == [("GPL504", 4)]


def test_plural_cold_function_name_is_cold():
    source = """
        import torch

        def print_samples(num=10):
            return torch.zeros(num, 1, dtype=torch.long).to(args.device)
    """
    assert codes(source, "GPL504") == []


def test_one_off_and_error_path_loops_are_not_flagged():
    sources = (
        # fairseq: freezing by name at model build time (a flag attribute, the key is a string)
        """
        def build_decoder(decoder, args):
            for k, p in decoder.named_parameters():
                p.requires_grad = need_finetuning(args.finetune_decoder_params, k)
        """,
        # a state dict converted at load time
        """
        def checkpoint_filter_fn(state_dict, model):
            out = {}
            for k, v in state_dict.items():
                out[k] = v.reshape(v.shape[0], -1) * 1.0
            return out
        """,
        # an overflow report in an except handler
        """
        def step(self):
            try:
                self.optimizer.step()
            except OverflowError:
                for p in self.params:
                    p.grad.mul_(0.0)
        """,
        # `inspect.signature(...).parameters` is not a module's parameters
        """
        import inspect

        def update_args(cls, args):
            for p in inspect.signature(cls).parameters.values():
                p.default.add_(1)
        """,
    )
    for source in sources:
        assert codes("import torch\n" + textwrap.dedent(source)) == [], source


def test_rules_do_not_apply_to_test_files():
    source = in_loop("opt.zero_grad(set_to_none=False)")
    assert codes(source, "GPL503", path="tests/test_train.py") == []
    assert codes(source, "GPL503", path="train.py") == [("GPL503", 7)]
