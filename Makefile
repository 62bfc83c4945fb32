# The two commands of the README's quick start: `make demo` and `make test`. Both set themselves up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OCTOKIT_DIR := .cache/octokit
OCTOKIT_SPEC := $(OCTOKIT_DIR)/node_modules/@octokit/openapi/generated/api.github.com.json
OCTOKIT_VERSION := 23.0.2
MERMAID_DIR := .cache/mermaid
MERMAID_JS := $(MERMAID_DIR)/node_modules/mermaid/dist/mermaid.min.js
MERMAID_VERSION := 11.17.2
PYTEST := $(BIN)/python -m pytest

.PHONY: bot-lock demo mermaid test test-slow bench bench-lint bench-corpus bench-planner bench-apply bench-ci sync-debug setup clean

setup: $(STAMP)

# torch first, pinned: an open range would pull a multi-GB CUDA build; 2.13.0 (CPU) satisfies the `plan` extra.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[plan,dev]"
	touch $(STAMP)

# GitHub's official OpenAPI description: the oracle the bot's tests validate every request against.
$(OCTOKIT_SPEC):
	npm install --silent --no-audit --no-fund --prefix $(OCTOKIT_DIR) @octokit/openapi@$(OCTOKIT_VERSION)

# Mermaid's bundle: the slow test draws the PR comment's chart with it in headless Chromium, as GitHub does.
$(MERMAID_JS):
	npm install --silent --no-audit --no-fund --prefix $(MERMAID_DIR) mermaid@$(MERMAID_VERSION)

mermaid: $(MERMAID_JS)

# The PR comment of a pull request that adds two layers to the example GPT: examples/ is the base, out/head/ the head.
demo: $(STAMP)
	mkdir -p out
	$(BIN)/gpulint check examples/ --exit-zero
	$(BIN)/gpulint check examples/ --format json --output-file out/findings.json --exit-zero --no-cache
	$(BIN)/gpulint plan examples/gpulint.yaml --budget 200MB --format text --out out
	$(BIN)/gpulint check examples/ --plan out/plan.json --format concise --exit-zero --no-cache
	rm -rf out/head && mkdir -p out/head && cp -r examples out/head/ && git init -q out/head  # a checkout of its own: the patch names examples/train.py
	sed -i.orig 's/n_layer: int = 4/n_layer: int = 6/' out/head/examples/model.py && rm out/head/examples/model.py.orig
	grep -q 'n_layer: int = 6' out/head/examples/model.py
	cd out/head && { $(abspath $(BIN))/gpulint plan examples/gpulint.yaml --budget 200MB --format json --out . --patch >/dev/null || [ $$? -eq 1 ]; }  # 1: the head does not fit the budget, which the comment shows
	$(BIN)/gpulint report --lint out/findings.json --plan out/head/plan.json --base-plan out/plan.json \
		--plan-patch out/head/plan.diff --format md --output out/pr-comment.md
	$(BIN)/gpulint report --lint out/findings.json --plan out/head/plan.json --base-plan out/plan.json \
		--plan-patch out/head/plan.diff --format html --output out/report.html
	$(BIN)/gpulint report --plan out/head/plan.json --base-plan out/plan.json --format delta --output out/delta.json
	@echo "demo: wrote out/findings.json out/plan.json (base) out/head/plan.json out/head/plan.diff (head: two more layers)"
	@echo "      out/pr-comment.md out/report.html out/delta.json"

test: $(STAMP) $(OCTOKIT_SPEC)
	$(PYTEST) -q -n 2

test-slow: $(STAMP) $(OCTOKIT_SPEC) $(MERMAID_JS)
	$(PYTEST) -q -m slow || [ $$? -eq 5 ]

# At each release, after the version bump: pin the comment workflow's gpulint wheel and what the bot imports, with hashes.
bot-lock: $(STAMP)
	$(BIN)/python .github/lock_bot_requirements.py

# Benchmarks print their figures (and ratios against the peers); they are not tests.
bench: bench-lint bench-planner bench-apply

# Fixit and TorchFix live apart: TorchFix pins an older libcst than gpulint uses.
$(VENV)-bench/.installed:
	test -x $(VENV)-bench/bin/python || $(PYTHON) -m venv $(VENV)-bench
	$(VENV)-bench/bin/python -m pip install -q fixit torchfix ruff
	touch $@

bench-lint: $(STAMP) $(VENV)-bench/.installed
	$(BIN)/python bench/lint_speed.py --peers-venv $(VENV)-bench
	$(BIN)/python bench/prune_check.py

# Needs the labelled repositories' git mirrors (bench/corpus/README.md lists how to fetch them).
bench-corpus: $(STAMP)
	$(BIN)/python bench/corpus_eval.py --mirrors $(or $(MIRRORS),../.mirror)

bench-planner: $(STAMP)
	$(BIN)/python bench/planner_frontier.py
	$(BIN)/python bench/planner_optimality.py
	$(BIN)/python bench/planner_speed.py

bench-apply: $(STAMP)
	$(BIN)/python bench/apply_eager.py

# What the memory delta costs a pull request on a CPU runner (docs/ci.md): base and head planned, comment rendered.
bench-ci: $(STAMP)
	$(BIN)/python bench/ci_cost.py --gpt2

# On a CUDA machine: every GPL4xx example under torch.cuda.set_sync_debug_mode("error").
sync-debug: $(STAMP)
	$(BIN)/python bench/sync_debug_check.py

clean:
	rm -rf $(VENV) .cache out .gpulint_cache
