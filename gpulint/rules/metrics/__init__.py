"""GPL2xx: training metrics computed element by element, or read to the host every step only to be summed there.

Layout (as ruff lays out a rule family): `helpers.py` holds what the family's rules share (the base classes `MetricRule`
and `LoopFactsRule`, what counts as a host read of a device value), and each rule has its own module named after it.
"""
