"""GPL5xx: launch overhead — many small kernels (or per-step setup) where a batched, fused or one-time form exists.

Layout (as ruff lays out a rule family): `helpers.py` holds what the family's rules share (the base class `WhereItRuns`,
one-time branches), and each rule has its own module named after it.
"""
