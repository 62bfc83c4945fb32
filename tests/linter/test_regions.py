"""Pruning (only the functions the rules need are parsed) and statement-level positions change no finding."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst

from gpulint.linter import engine, positions
from gpulint.linter.engine import lint_text
from gpulint.linter.options import LintOptions
from gpulint.project import single_file_facts
from gpulint.linter.regions import code_of, prune
from gpulint.linter.rule import all_rules

RULES = [r for r in all_rules() if r.default_enabled]


def both(source: str, path: str = "train.py") -> list[tuple]:
    """Findings with and without pruning, which must be the same."""
    found = []
    for prune_on in (False, True):
        findings = lint_text(path, textwrap.dedent(source), RULES, LintOptions(prune=prune_on))
        found.append([(f.code, f.line, f.column, f.end_line, f.end_column, f.fix) for f in findings])
    assert found[0] == found[1]
    return found[1]


def reports_placed_as_libcst_does(source: str) -> list:
    """The rules' reports on `source`, after checking that the statement-level position finder places each one
    where libcst's whole-module positions do."""
    module = cst.parse_module(source)
    context = engine.FileContext("t.py", module)
    engine._Traversal(context, [rule(context) for rule in RULES if rule.triggers]).walk(module)
    truth = positions._whole(module)
    found = positions.positions_of(source, module, context.reports, ast.parse(source))
    for report in context.reports:
        assert found[report.node] == truth[report.node], report.rule.code
    return context.reports


def pruned_text(source: str) -> str | None:
    text = textwrap.dedent(source)
    active = [r for r in RULES if r.triggers and r.has_words_in(text)]
    cut = engine._pruned(text, active, single_file_facts("t.py", text))
    return None if cut is None else "\n".join(cut.kept)


def test_prune_stands_in_for_unneeded_definitions_and_keeps_lines():
    lines = ["import torch", "", "def setup():", "    return 1", "", "def step(x):", "    return x.item()", ""]
    cut = prune("\n".join(lines), needs=lambda code, name, class_name: ".item(" in code, hot=lambda qualname: False)
    assert cut.kept == ["import torch", "", '"""', "", '"""', "def step(x):", "    return x.item()", ""]
    assert cut.left_out == ["", "", "def setup():", "    return 1", "", "", "", ""]
    assert prune("\n".join(lines), needs=lambda code, name, class_name: True, hot=lambda qualname: False) is None


def test_class_members_are_cut_one_by_one_and_attribute_makers_stay():
    lines = textwrap.dedent(
        """\
        class Model:
            def __init__(self):
                self.mask = make()
                self.unused = 3

            def reset(self):
                self.register_buffer("queue", make())

            def helper(self):
                self.other = 2

            def forward(self, x):
                return (x * self.mask + self.queue).item()
        """
    ).split("\n")
    cut = prune("\n".join(lines), needs=lambda code, name, class_name: ".item(" in code, hot=lambda qualname: False)
    assert cut is not None and len(cut.kept) == len(cut.left_out) == len(lines)
    text = "\n".join(cut.kept)
    assert "self.mask = make()" in text and 'register_buffer("queue"' in text  # they say what forward reads
    assert "self.other = 2" not in text
    # The member left out, inside its class, is what is checked for syntax errors.
    assert [line for line in cut.left_out if line.strip()] == ["class Model:", "    def helper(self):", "        self.other = 2"]


def test_functions_the_step_calls_are_kept_even_without_trigger_words():
    source = """\
        import torch

        def run_batch(model, batch):
            return middle(model, batch)

        def middle(model, batch):
            return leaf(model(batch))

        def leaf(out):
            if out.sum() > 0:
                return out
            return out

        def unrelated():
            return 1

        def train(model, loader, optimizer):
            for batch in loader:
                loss = run_batch(model, batch)
                loss.backward()
                optimizer.step()
    """
    text = pruned_text(source)
    assert text is not None and "def middle" in text and "def unrelated" not in text
    both(source)


def test_docstrings_and_comments_do_not_make_a_function_needed():
    assert ".item(" not in code_of('def f():\n    """Call .item() on it."""  # .item()\n    return 1\n')
    source = '''\
        import torch

        def describe(model):
            """Walk the parameters and sum their norms."""  # parameters
            return 1

        def train(model, loader, optimizer):
            for x in loader:
                model(x).backward()
                optimizer.step()
    '''
    text = pruned_text(source)
    assert text is not None and "def describe" not in text


def test_a_cut_fooled_by_a_string_falls_back_to_the_whole_file():
    # A line inside a string continued by a backslash that looks like a definition: the pruned text does not parse,
    # so all of it is.
    source = (
        'import torch\n\nTEMPLATE = "\\\ndef fake():\\\n    pass"\n\n\n'
        "def train(model, loader, optimizer, device):\n    for x, y in loader:\n        x = x.to(device)\n"
        "        print(model(x).sum().item())\n        model(x).sum().backward()\n        optimizer.step()\n"
    )
    assert pruned_text(source) is not None
    assert [c for c, *_ in both(source)].count("GPL401") == 1


def test_a_syntax_error_in_a_function_no_rule_needs_is_still_reported():
    needed = "import torch\n\ndef train(loader, optimizer):\n    for x in loader:\n        x.item(\n"
    assert [f.code for f in lint_text("t.py", needed, RULES)] == ["GPL001"]
    unneeded = "import torch\n\ndef setup(:\n    return 1\n\ndef f(x):\n    return [t.item() for t in x]\n"
    assert pruned_text(unneeded) is not None
    assert [(f.code, f.line) for f in lint_text("t.py", unneeded, RULES)] == [("GPL001", 3)]
    hidden = "import torch\n\ndef setup():\n    return 1 +\n\ndef f(x):\n    return [t.item() for t in x]\n"
    assert pruned_text(hidden) is not None
    for options in (LintOptions(prune=True), LintOptions(prune=False)):
        findings = lint_text("t.py", hidden, RULES, options)
        assert [(f.code, f.line) for f in findings] == [("GPL001", 4)]
    member = "import torch\n\nclass Net:\n    def setup(self):\n        return (1\n\n    def f(self, x):\n" \
        "        return [t.item() for t in x]\n"
    assert pruned_text(member) is not None
    assert [(f.code, f.line) for f in lint_text("t.py", member, RULES)] == [("GPL001", 5)]
    # What Python rejects but is not a grammar error (and libcst parses) stays unreported, pruned or not.
    semantic = "import torch\n\ndef setup():\n    nonlocal x\n\ndef f(x):\n    return [t.item() for t in x]\n"
    assert [f.code for f in lint_text("t.py", semantic, all_rules())] == ["GPL104"]  # GPL104 is off by default


def test_requires_words_keep_a_dict_loop_out_unless_it_reads_values():
    source = """\
        import torch

        def merge(a, b):
            for k, v in a.items():
                b[k] = v
            return b

        def train(model, loader, optimizer):
            for x in loader:
                model(x).backward()
                optimizer.step()
    """
    text = pruned_text(source)
    assert text is not None and "def merge" not in text


def test_statement_positions_match_libcst_on_nested_and_continued_lines():
    source = textwrap.dedent(
        """\
        import torch

        class Trainer:
            def fit(self, loader, optimizer, device):
                for step, (x, y) in enumerate(loader):
                    with torch.autocast("cuda"):
                        if step > 0:
                            total = helper(
                                x.to(device), y.to(device),
                                    z=x.sum().item())
                        elif step < 0:
                            print(x.sum().item()); loss = x.mean()
                        else:
                            pass
                    try:
                        loss = model(x).float().item()
                    except ValueError:
                        value = f"{x.sum().item()}"
                    loss.backward()
                    optimizer.step()
        """
    )
    assert len(reports_placed_as_libcst_does(source)) >= 3


def test_pruning_changes_no_finding_on_the_rule_examples():
    for rule in RULES:
        for example in (*rule.valid, *(i.code for i in rule.invalid)):
            both(example, "example.py")


def test_a_loop_calling_a_step_function_is_kept_as_the_step_loop():
    source = """\
        import torch

        class Trainer:
            def update(self, x):
                loss = self.model(x.to(self.device))
                loss.backward()
                self.opt.step()
                return loss

            def fit(self, things):
                for x in things:
                    loss = self.update(x)
                    print(loss.tolist())
    """
    assert "GPL401" in [code for code, *_ in both(source)]


def test_a_function_passed_as_collate_fn_is_kept():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        MAX_LEN = 512

        def batcher(items):
            out = torch.zeros(len(items), MAX_LEN)
            return out

        def main(ds):
            return DataLoader(ds, collate_fn=batcher)
    """
    assert "GPL303" in [code for code, *_ in both(source)]


def test_functions_hot_by_their_name_or_class_and_next_loops_are_kept():
    source = """\
        import torch

        class SetCriterion(torch.nn.Module):
            def match(self, outputs, targets):
                return outputs.argmax(-1).tolist()

        def loss_labels(outputs, targets):
            return outputs.sum().tolist()

        def main(model, loader_iter, optimizer):
            while True:
                batch = next(loader_iter)
                out = model(batch)
                print(out.tolist())
    """
    text = pruned_text(source)
    assert text is None or all(f"def {name}" in text for name in ("match", "loss_labels", "main"))
    assert len([code for code, *_ in both(source) if code == "GPL401"]) == 3


# (rule, a function the rule reports in, a function holding its trigger words that it cannot report in)
NARROWED = [
    ("GPL101", "def norms(model):\n    return [p.grad.norm().item() for p in model.parameters()]\n",
     "def clip_value(args):\n    return max(args.grad_clip, 1.0)\n"),
    ("GPL103", "def update_meters(meters, **kwargs):\n    for k, v in kwargs.items():\n"
     "        if isinstance(v, torch.Tensor):\n            v = v.item()\n        meters[k].update(v)\n",
     "def merge(config, update):\n    config.update(update)\n    return config.items()\n"),
    ("GPL103", "def training_step(logger, loss_dict):\n    logger.update(loss=1.0, **loss_dict)\n",
     "def copy_into(target, source):\n    for k, v in source.items():\n        target.update({k: v})\n"),
    ("GPL501", "def average(model, params):\n    current = dict(model.named_parameters())\n"
     "    for k in current:\n        current[k].data.mul_(0.5)\n",
     "def load(model, path):\n    state = loader.get_state_dict(path)\n    for k in state:\n        state[k] += 1\n"),
    ("GPL205", "def embed_all(encoder, chunks):\n    out = torch.empty(0, 8)\n    for chunk in chunks:\n"
     "        out = torch.cat((out, encoder(chunk)), dim=0)\n    return out\n",
     "def heads(layers, x):\n    for layer in layers:\n        x = layer(torch.cat([x, x.flip(1)], dim=1))\n    return x\n"),
    ("GPL303", "def encode(ids, max_seq_length):\n    return ids + [tokenizer.pad_token_id] * (max_seq_length - len(ids))\n",
     "def config_padding(config):\n    return config.pad_token_id, config.padding_side\n"),
    ("GPL501", "def ema(model, shadow_model, decay):\n    shadow = shadow_model.state_dict()\n"
     "    for k in shadow:\n        shadow[k].mul_(decay).add_(model.state_dict()[k])\n",
     "def schedule(group, grad_scale):\n    group['lr'] *= grad_scale\n    return group\n"),
    ("GPL504", "def positions(x):\n    return torch.arange(x.size(1)).to(x.device)\n",
     "def move(batch, device):\n    return batch.to(device)\n"),
]


def test_rules_with_common_trigger_words_narrow_the_functions_they_need():
    rules = {rule.code: rule for rule in all_rules()}  # off-by-default rules narrow too
    for code, reported, other in NARROWED:
        rule = rules[code]
        assert rule.may_report_in(code_of(reported), "f", ""), code
        assert not rule.may_report_in(code_of(other), "f", ""), code
        text = "import torch\n\n" + reported
        findings = lint_text("helpers.py", text, [rule], LintOptions(prune=True))
        assert [f.code for f in findings] == [code], (code, findings)


def test_a_string_whose_lines_start_at_column_zero_stays_inside_its_function():
    source = '''\
import torch

def report(failures):
    message = f"""{len(failures)} failed:
{"=" * 80}
def not_a_function():
"""
    return message

def train(model, loader, optimizer, device):
    for x in loader:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
        print(x.sum().item())
'''
    text = pruned_text(source)
    assert text is not None and "failed" not in text and "not_a_function" not in text
    assert len(text.split("\n")) == len(source.split("\n"))
    assert [f.code for f in lint_text("train.py", source, RULES)] == ["GPL401"]


def test_lines_in_strings_agree_with_python_tokenizer():
    import io
    import tokenize

    from gpulint.linter.regions import _lines_in_strings

    source = 'a = """x\ny\n"""\nb = "\\"""" \nc = \'\'\'p\n\'\'\' # """\nd = f"""{a}\n\\"""\n"""\n'
    truth = bytearray(source.count("\n") + 1)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING:
            for line in range(token.start[0], token.end[0]):
                truth[line] = 1  # 0-based index of each line after the opening one
    assert _lines_in_strings(source, len(truth)) == truth


def test_grown_by_cat_finds_the_target_on_its_line_or_the_line_before():
    from gpulint.rules.metrics.tensor_grown_by_cat import _grows_by_cat

    grows = ["x = torch.cat([x, y])", "x = (torch.cat([x, y]))", "self.buf = (\n    torch.cat([self.buf, y])\n)",
             "x[i] = torch.cat((x[i], y))", "x = torch.cat([model(x), x])", "x = \\\n    torch.cat([x, y])",
             "preds = torch.cat(tensors=[preds, y])"]
    assert all(_grows_by_cat(code) for code in grows)
    assert not any(_grows_by_cat(code) for code in ["out = torch.cat([a, b])", "y = torch.stack([x, z])"])


def test_positions_of_reports_on_compound_headers_match_libcst():
    source = textwrap.dedent(
        """\
        import torch

        class Trainer:
            def fit(self, loader, optimizer, device):
                for step, (x, y) in enumerate(loader):
                    loss = torch.sum(self.model(x.to(device, non_blocking=True)))
                    if loss > 100:  # GPL405 on the test of an `if`
                        break
                    elif (loss <
                            -1):
                        continue
                    while torch.isnan(
                            loss):
                        loss = loss * 0
                    for p in [q.grad.norm() for q in self.model.parameters()]:
                        pass
                    loss.backward()
                    optimizer.step()
        """
    )
    assert {r.rule.code for r in reports_placed_as_libcst_does(source)} >= {"GPL405", "GPL102"}


def test_a_model_tensor_loop_is_found_in_code_not_in_strings():
    from gpulint.rules.per_tensor.helpers import PARAM_LOOP, has_loop

    loops = ['for p in group["params"]:\n    pass', 'for p in group[ "params" ]:\n    pass',
             "for p in model.parameters():\n    pass", "x = [p.grad for p in params]"]
    assert all(has_loop(PARAM_LOOP, code) for code in loops)
    strings = ['for old, new in (("gradient_ckpt", "x"),):\n    pass', 'for name in ["mirror", "offload_state_dict"]:\n    pass']
    assert not any(has_loop(PARAM_LOOP, code) for code in strings)


def test_reports_inside_a_match_statement_are_placed():
    # A `match` has no body of its own, only its cases' bodies: the statement finder must not ask it for one.
    source = textwrap.dedent(
        """\
        import torch

        def train(model, loader, opt, mode):
            model.cuda()
            for x in loader:
                match mode:
                    case "log":
                        print(x.sum().item())
                    case _:
                        pass
                model(x).backward()
                opt.step()
        """
    )
    assert len(reports_placed_as_libcst_does(source)) >= 1
    assert [f.code for f in lint_text("t.py", source, RULES)] == ["GPL401"]
