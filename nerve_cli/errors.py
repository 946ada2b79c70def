"""The few error types Nerve raises. Each message says what is wrong and how to fix it."""

from __future__ import annotations


class NerveError(Exception):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""

    exit_code = 1


class InstanceNotFound(NerveError):
    """No instance at the resolved home."""


class ConfigError(NerveError):
    """nerve.yaml is invalid. `problems` holds every problem found, not just the first."""

    def __init__(self, message: str, problems: list | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class SenseError(NerveError):
    """A sense cannot be loaded, migrated or computed."""


class MigrationError(SenseError):
    """A migration cannot be generated or applied."""


class WorkflowError(NerveError):
    """A workflow definition or directive is invalid."""


class EngineNotRunning(NerveError):
    """The command needs a running engine and none answers on the control socket."""
