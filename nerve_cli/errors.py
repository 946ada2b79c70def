"""The few error types Nerve raises. Each message says what is wrong and how to fix it.

Every failure a script or agent can meet has one `ErrorType`: the `error.type` of the
`--json` error document (and of `nerve mcp`'s), listed in `contract/schemas/error.json`
and the docs (docs/reference/json.md). Each NerveError class names its own; a test holds the three lists equal.
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar


class ErrorType(str, Enum):
    """`error.type` in the error document. Values are only ever added within a contract version."""

    ERROR = "error"
    """A problem the message explains, when no narrower type applies."""
    USAGE = "usage"
    """A bad option, argument or MCP tool argument (exit code 2)."""
    INSTANCE_NOT_FOUND = "instance_not_found"
    """No instance at `--home`, `$NERVE_HOME` or `~/.uncaged-nerve`."""
    INSTANCE_EXISTS = "instance_exists"
    """`nerve init` on a folder that is not empty."""
    CONFIG_ERROR = "config_error"
    """nerve.yaml is invalid; every problem is in `problems`."""
    SENSE_ERROR = "sense_error"
    """A sense cannot be found, loaded or computed."""
    MIGRATION_ERROR = "migration_error"
    """A migration cannot be generated or applied."""
    SCHEMA_DRIFT = "schema_drift"
    """schema.py and the migrations disagree (run `nerve sense migrate NAME`)."""
    WORKFLOW_ERROR = "workflow_error"
    """A workflow definition, directive or thread request is invalid."""
    WORKFLOW_LOAD_ERROR = "workflow_load_error"
    """A workflow file does not load."""
    ENGINE_NOT_RUNNING = "engine_not_running"
    """The command needs `nerve run`."""
    ENGINE_LOCKED = "engine_locked"
    """Another engine holds the instance."""
    WORKER_GONE = "worker_gone"
    """A one-off worker exited before it answered."""
    DAMAGED_DATABASE = "damaged_database"
    """A database file SQLite cannot read as one."""
    STORAGE_ERROR = "storage_error"
    """A write the disk refused (read-only, permissions, full)."""
    DATABASE_ERROR = "database_error"
    """SQLite failed otherwise (locked too long, I/O)."""
    EVENT_ERROR = "event_error"
    """An event that cannot be stored as given."""
    QUERY_REFUSED = "query_refused"
    """A query that would write, or is not one statement: nothing ran."""
    BLOB_NOT_FOUND = "blob_not_found"
    """No blob with that hash."""
    WEBHOOK_REFUSED = "webhook_refused"
    """A webhook post refused: no such channel, a bad signature, a body that is not JSON or too large (its HTTP status
    says which)."""
    INTERNAL = "internal"
    """A failure in Nerve itself (the message names the exception; the traceback goes to stderr): please report it."""


class NerveError(Exception):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""

    exit_code = 1
    type: ClassVar[ErrorType] = ErrorType.ERROR


class UsageError(NerveError):
    """A bad option, argument or tool argument: the `usage` error, exit code 2."""

    type = ErrorType.USAGE
    exit_code = 2


class InstanceNotFound(NerveError):
    """No instance at the resolved home."""

    type = ErrorType.INSTANCE_NOT_FOUND


class ConfigError(NerveError):
    """nerve.yaml is invalid. `problems` holds every problem found, not just the first."""

    type = ErrorType.CONFIG_ERROR

    def __init__(self, message: str, problems: list | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class SenseError(NerveError):
    """A sense cannot be loaded, migrated or computed."""

    type = ErrorType.SENSE_ERROR


class UnknownSense(SenseError):
    """No sense of that name in nerve.yaml (nor a built-in one): a reader of `nerve://sense/NAME` gets "not found"."""

    type = ErrorType.SENSE_ERROR


class MigrationError(SenseError):
    """A migration cannot be generated or applied."""

    type = ErrorType.MIGRATION_ERROR


class WorkflowError(NerveError):
    """A workflow definition or directive is invalid."""

    type = ErrorType.WORKFLOW_ERROR


class UnknownThread(WorkflowError):
    """No thread of that id (in logs.db or its archive)."""

    type = ErrorType.WORKFLOW_ERROR


class EngineNotRunning(NerveError):
    """The command needs a running engine and none answers on the control socket."""

    type = ErrorType.ENGINE_NOT_RUNNING
