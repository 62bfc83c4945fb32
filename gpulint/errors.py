"""Errors that are a user's mistake: the CLI prints them as one line and exits 2 (never a traceback)."""


class UsageError(Exception):
    """A bad flag value, config field, or missing file: printed as `gpulint: error: <message>`."""
