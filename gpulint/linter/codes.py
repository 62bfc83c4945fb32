"""Every rule's code, name and default, without importing the rules: the main process of `gpulint check` chooses
the codes to run and names them in its summaries from this table, and leaves importing libcst and the rules to the
workers that lint (they do it while the project model is built: `Workers.warm_up`). tests/linter/test_layering.py
keeps it equal to the rules themselves (`gpulint.linter.rule.all_rules`)."""

from __future__ import annotations

# (code, name, on by default), sorted by code.
RULE_CODES: tuple[tuple[str, str, bool], ...] = (
    ('GPL001', 'parse-error', True),
    ('GPL002', 'io-error', True),
    ('GPL003', 'unused-noqa', True),
    ('GPL101', 'per-tensor-norm-read', True),
    ('GPL102', 'per-tensor-norm-loop', True),
    ('GPL103', 'per-metric-logging-loop', True),
    ('GPL104', 'item-per-element-comprehension', False),
    ('GPL201', 'item-accumulator', True),
    ('GPL202', 'item-into-meter', True),
    ('GPL203', 'per-class-metric-loop', True),
    ('GPL204', 'per-element-loop', True),
    ('GPL205', 'tensor-grown-by-cat', False),
    ('GPL206', 'tensor-from-step-scalars', True),
    ('GPL207', 'host-metric-every-step', False),
    ('GPL301', 'pad-to-max-length', True),
    ('GPL302', 'padded-rnn-without-packing', True),
    ('GPL303', 'pad-to-constant-in-collate', True),
    ('GPL304', 'loss-masked-afterwards', False),
    ('GPL401', 'scalar-sync-in-step', True),
    ('GPL402', 'python-scalar-of-tensor', True),
    ('GPL403', 'cpu-copy-in-step', True),
    ('GPL404', 'tensor-formatted-in-step', True),
    ('GPL405', 'tensor-condition-in-step', True),
    ('GPL406', 'data-dependent-shape-in-step', True),
    ('GPL407', 'distribution-validation-in-step', True),
    ('GPL410', 'synchronize-in-step', True),
    ('GPL411', 'blocking-host-to-device-copy', True),
    ('GPL412', 'tensor-from-host-data-in-step', True),
    ('GPL413', 'host-list-index-in-step', True),
    ('GPL420', 'blocking-collective-in-step', True),
    ('GPL421', 'barrier-or-object-collective-in-step', True),
    ('GPL422', 'ddp-accumulation-without-no-sync', True),
    ('GPL423', 'lightning-sync-dist-in-step', True),
    ('GPL501', 'per-parameter-update-loop', True),
    ('GPL502', 'foreach-disabled', True),
    ('GPL503', 'zero-grad-set-to-none-false', True),
    ('GPL504', 'tensor-created-then-moved', True),
    ('GPL505', 'construction-in-step', False),
    ('GPL506', 'anomaly-detection-on', True),
    ('GPL507', 'always-on-profiler', True),
    ('GPL508', 'reversed-time-step-loop', True),
    ('GPL509', 'per-tensor-library-optimizer', True),
)
