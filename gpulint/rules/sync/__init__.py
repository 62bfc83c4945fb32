"""GPL4xx: host-device synchronisation and synchronous communication in the training step.

Every rule here reports with `when="per_step"`: a sync only costs when it runs every step, and a value already on the
host is free. Whether an expression is a tensor is decided by `tensors.Tensors`, on top of the engine's device
provenance (`context.location_of`): host values are never tensors, and a value is a tensor when it comes from torch, a
tensor method, a parameter/gradient, or a name bound to one of those in the same function.

The family also leaves out, on purpose: error paths (`except`, `if ...: raise`), first-step-only code (`if step == 0:`),
training scripts that never name a device, and shapes another family owns (`total += loss.item()` is GPL2xx,
`[t.item() for t in ts]` and per-parameter loops are GPL1xx, `torch.zeros(n).cuda()` is GPL5xx). All rules of the
family share one `helpers.FileState` per file, so each assignment is evaluated once however many rules are enabled.

Layout (as ruff lays out a rule family): `helpers.py` holds the family's base class `SyncRule` and what its rules
share, `tensors.py` what is a tensor, and each rule has its own module named after it.
"""
