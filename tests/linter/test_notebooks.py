"""marimo notebooks stored as Python files are read as the script they run (gpulint/linter/notebooks.py)."""

from __future__ import annotations

import json
import textwrap

from gpulint.linter.engine import lint_text
from gpulint.linter.fixes import apply_edits
from gpulint.linter.notebooks import script_view
from gpulint.linter.rule import all_rules

# The shape of a marimo tutorial: imports in one cell, the agent class in another, the run in a third. Every
# statement is inside an `@app.cell` function that nothing in the file calls.
NOTEBOOK = textwrap.dedent(
    '''\
    import marimo

    app = marimo.App(width="full")


    @app.cell
    def _():
        import torch
        return (torch,)


    @app.cell(hide_code=True)
    def _(
        torch,
    ):
        class Agent:
            def __init__(self, net, optimizer):
                self.net, self.optimizer = net.cuda(), optimizer

            def update(self, batch):
                loss = self.net(batch).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()

            def train(self, frames, sample):
                losses = []
                for frame in range(frames):
                    losses.append(self.update(sample()))
                return losses
        return (Agent,)


    @app.cell
    def _(Agent, net, optimizer, sample):
        agent = Agent(net, optimizer)
        agent.train(1000, sample)
        return


    if __name__ == "__main__":
        app.run()
    '''
)


def _findings(text: str, path: str = "dqn.py"):
    return lint_text(path, text, [rule for rule in all_rules() if rule.default_enabled])


def test_a_notebooks_training_loop_is_read_as_script_code():
    findings = [f for f in _findings(NOTEBOOK) if f.code == "GPL401"]
    line = NOTEBOOK.split("\n").index("            return loss.item()") + 1
    assert [(f.line, f.column) for f in findings] == [(line, 20)]  # the notebook's own column, not the view's
    assert findings[0].chain  # reached from the cell that runs `agent.train(...)`


def test_the_same_code_in_uncalled_functions_of_a_plain_file_is_not_a_step():
    plain = NOTEBOOK.replace("@app.cell(hide_code=True)", "").replace("@app.cell", "")
    assert not [f for f in _findings(plain) if f.code == "GPL401"]


def test_the_script_view_keeps_every_line_in_its_place():
    view = script_view(NOTEBOOK)
    assert view is not None
    before, after = NOTEBOOK.split("\n"), view.text.split("\n")
    assert len(before) == len(after)
    assert after[before.index("def _():")] == "" and after[before.index("    return (torch,)")] == "_ =    (torch,)"
    assert after[before.index("    agent.train(1000, sample)")] == "agent.train(1000, sample)"
    assert "    torch," not in after  # a header spread over lines is blanked whole
    assert after[before.index('    app.run()')] == '    app.run()'  # code outside the cells is left alone


def test_files_that_are_not_marimo_notebooks_have_no_view():
    assert script_view("import torch\n\n@app.cell\ndef _():\n    return\n") is None  # no marimo
    assert script_view("import marimo\napp = marimo.App()\n") is None  # no cell
    assert script_view("import marimo\n@app.cell\ndef _(:\n") is None  # does not parse


def test_a_one_line_fix_lands_on_the_notebooks_columns():
    cell = textwrap.dedent(
        """\
        import marimo
        app = marimo.App()


        @app.cell
        def _(model, loader, optimizer):
            model.cuda()
            for batch in loader:
                loss = model(batch)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=False)
            return
        """
    )
    fixed = [f for f in _findings(cell, "nb.py") if f.fix is not None]
    assert fixed, "the zero_grad(set_to_none=False) finding carries a fix"
    new_line = apply_edits(cell, list(fixed[0].fix.edits)).split("\n")[fixed[0].line - 1]
    assert new_line == "        optimizer.zero_grad(set_to_none=True)"


def test_a_notebook_in_a_project_run_is_modelled_as_its_script(tmp_path, run):
    """Through the project model (the runner reads every file's script view) and the command line."""
    (tmp_path / "dqn.py").write_text(NOTEBOOK)
    code, out, _ = run(tmp_path, "check", ".", "--format", "json", "--no-cache", "--exit-zero")
    found = [f for f in json.loads(out) if f["code"] == "GPL401"]
    line = NOTEBOOK.split("\n").index("            return loss.item()") + 1
    assert code == 0 and [(f["path"], f["line"], f["column"]) for f in found] == [("dqn.py", line, 20)]
    assert found[0]["chain"] and found[0]["chain"][0]["path"] == "dqn.py"
