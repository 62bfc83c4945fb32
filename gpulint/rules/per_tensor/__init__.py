"""GPL1xx: per-tensor logging and reduction loops.

A Python loop over a model's parameters (or their gradients, or `state_dict()` values) that computes a norm or another
reduction per tensor launches one or more small kernels per tensor; reading each result on the host adds one
device-to-host round trip per tensor. The same holds for loops that log a dict of metric tensors one `.item()` at a time.
`torch._foreach_norm` computes every norm in a few launches and `torch.stack(...).tolist()` reads them in one transfer.

The loop analysis here (`scan_tensor_loop`) is shared with the GPL5xx launch-overhead rules, which take the loops that
do optimizer/EMA arithmetic per parameter instead of reading a reduction.

Layout (as ruff lays out a rule family): `helpers.py` holds what the family's rules share (the loop analysis
`scan_tensor_loop`, the base class `PerTensorRule`), and each rule has its own module named after it.
"""
