"""gpulint: find where PyTorch training code leaves GPU time and memory on the table."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `gpulint.apply(model, plan)` needs torch; importing gpulint for linting must not.
    if name == "apply":
        from gpulint.planner.eager_apply import apply

        return apply
    raise AttributeError(f"module 'gpulint' has no attribute {name!r}")
