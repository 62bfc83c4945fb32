"""GPL2xx behaviour beyond the rules' own examples: where a finding lands, and the traps real training code sets."""

from __future__ import annotations

import textwrap

from gpulint.linter.engine import lint_text
from gpulint.linter.rule import all_rules

RULES = all_rules()


def lines(source: str, code: str) -> list[int]:
    """Lines of the findings of rule `code` on `source`, linted with every rule on."""
    return [f.line for f in lint_text("train.py", textwrap.dedent(source), RULES) if f.code == code]


STEP = """\
import torch

def train(model, loader, optimizer, criterion, device):
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
"""


def step(body: str) -> str:
    return STEP + textwrap.indent(textwrap.dedent(body), " " * 8)


def test_accumulated_local_is_reported_at_its_read():
    source = step("""\
        step_loss = loss.detach().item()
        total += step_loss
        if step % 100 == 0:
            print(total / 100)
    """)
    assert lines(source, "GPL201") == [11]


def test_accumulating_host_numbers_is_fine():
    source = step("""\
        n = x.size(0)
        total += n
        total += float(len(y))
    """)
    assert lines(source, "GPL201") == []


def test_accumulator_in_a_helper_the_step_calls():
    source = """\
    import torch

    def record(stats, loss):
        stats["loss"] += loss.item()

    def train(model, loader, optimizer, stats):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            record(stats, loss)
    """
    assert lines(source, "GPL201") == [4]


def test_accumulator_after_an_early_continue_gate_is_fine():
    source = step("""\
        if step % 50 != 0:
            continue
        total += loss.item()
    """)
    assert lines(source, "GPL201") == []


def test_meter_fed_a_host_value_is_fine():
    source = step("""\
        batch_size = float(x.size(0))
        meter.update(batch_size)
        names.append(step)
    """)
    assert lines(source, "GPL202") == []


def test_meter_fed_a_device_read_in_a_tqdm_loop():
    source = """\
    import torch
    from tqdm import tqdm

    def train_one_epoch(model, train_loader, optimizer, losses):
        for images, target in tqdm(train_loader):
            loss = model(images.cuda(), target.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), images.size(0))
        print(losses.avg)
    """
    assert lines(source, "GPL202") == [10]


def test_per_class_loop_over_host_counts_is_fine():
    source = step("""\
        preds = out.argmax(1).tolist()
        for c in range(10):
            hits[c] += sum(1 for p in preds if p == c)
    """)
    assert lines(source, "GPL203") == []


def test_zip_over_device_predictions_is_flagged_at_the_for_line():
    source = step("""\
        pred = out.argmax(1)
        for p, t in zip(pred, y):
            correct += int(p == t)
    """)
    assert lines(source, "GPL203") == [12]


def test_row_loop_over_a_python_list_is_fine():
    source = step("""\
        paths = batch_paths
        for i in range(len(paths)):
            names[i] = paths[i].upper()
    """)
    assert lines(source, "GPL204") == []


def test_row_loop_over_tensor_rows_in_eval_is_fine():
    source = """\
    import torch

    @torch.no_grad()
    def evaluate(model, x):
        for i in range(x.size(0)):
            print(model(x[i]))
    """
    assert lines(source, "GPL204") == []


def test_cat_growth_in_a_helper_is_flagged_once():
    source = """\
    import torch

    def collect(chunks):
        out = torch.empty(0)
        for chunk in chunks:
            out = torch.cat([out, chunk.flatten()])
        return out
    """
    assert lines(source, "GPL205") == [6]


def test_cat_of_a_list_after_the_loop_is_fine():
    source = step("""\
        parts.append(out.detach())
    """) + "    preds = torch.cat(parts)\n"
    assert lines(source, "GPL205") == []


def test_tensor_of_python_numbers_is_fine_and_of_losses_is_not():
    source = step("""\
        counts = torch.tensor([step, x.size(0), 3], device="cuda")
        stats = torch.tensor([loss.item(), out.sum().item()], device="cuda")
    """)
    assert lines(source, "GPL206") == [12]


def test_sklearn_metric_gated_and_in_eval_is_fine():
    source = """\
    import torch
    from sklearn.metrics import f1_score

    def train(model, loader, optimizer):
        for step, (x, y) in enumerate(loader):
            out = model(x)
            out.sum().backward()
            optimizer.step()
            if step % 100 == 0:
                print(f1_score(y.cpu().numpy(), out.argmax(1).cpu().numpy()))

    def evaluate(model, loader):
        for x, y in loader:
            print(f1_score(y.cpu().numpy(), model(x).argmax(1).cpu().numpy()))
    """
    assert lines(source, "GPL207") == []


def test_numpy_on_host_data_is_fine():
    source = step("""\
        weights = np.asarray(class_weights)
        scale = np.mean(weights)
    """)
    assert lines("import numpy as np\n" + source, "GPL207") == []


def test_one_finding_for_a_comparison_inside_a_numpy_call():
    source = step("""\
        acc = np.mean(out.argmax(1).cpu().numpy() == y.cpu().numpy())
    """)
    assert lines("import numpy as np\n" + source, "GPL207") == [12]
