"""Errors that are a user's mistake: the CLI prints them as one line and exits 2 (never a traceback)."""

# Exit codes of every command: clean, findings (or fixes still to apply), usage/config/internal error.
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A bad flag value, config field, or missing file: printed as `gpulint: error: <message>`."""
