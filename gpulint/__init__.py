"""gpulint: find where PyTorch training code leaves GPU time and memory on the table."""

__version__ = "0.1.0"
