"""Errors meant for users: one line that names the file/record and the fix."""


class VragError(Exception):
    """An expected failure; the CLI prints `error: <message>` and exits with `exit_code`."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(ValueError):
    """A config problem, already phrased as one line for the user."""


class MissingComponent(VragError):
    """An optional real component (MinerU, PaddleOCR, ColPali weights, ...) is not installed or has no models."""
