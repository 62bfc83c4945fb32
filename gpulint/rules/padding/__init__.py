"""GPL3xx: computation spent on padding tokens.

Padding rules look at data preparation (tokenizer calls, collate functions) and at the loss, not only at the step loop:
they report with `when="training"` (anywhere except eval code) and bring their own evidence (a collate function, a
constant length, an RNN in the same file). Test files (`FileContext.in_tests`) are skipped: padding there costs no
training time.

Layout (as ruff lays out a rule family): `helpers.py` holds what the family's rules share (how long a padded length is:
`LengthTracker`), and each rule has its own module named after it.
"""
