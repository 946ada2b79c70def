"""One supervision policy for every worker Nerve starts: sense groups, workflow workers, the CLI's one-off worker.

A `Policy` is plain data and pure arithmetic (no clock, no process): how long a worker may take to say
it is ready, the back-off between respawns of a worker that keeps dying, when a worker has lived long
enough to reset that back-off, how a compute's timeout and grace period end (cancel, then kill), and how
long a stopped worker gets between TERM and KILL. The supervisors (`supervisor.GroupSupervisor`,
`workflows.spawn.Spawner`, `ops.senses.standalone`) ask it; the process handle (`process.WorkerProcess`)
knows none of it. Users tune it in nerve.yaml: `engine.respawn_backoff_first` / `respawn_backoff_max`
(every worker: sense groups and workflows), and each sense's `timeout` / `grace_period`.

Starting a process is one step of its own (`process.start_worker`, with its `launch.Launch`: a fresh
interpreter or a fork of the warm template), apart from any policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nerve_cli.config.model import EngineConfig, SenseConfig

STABLE_AFTER = 10.0  # seconds a worker must live for its next death to count as a first one again
READY_TIMEOUT = 30.0  # a worker imports user code before it is ready: a sense's imports, a workflow file
TERM_WAIT = 1.0  # a worker asked to stop (TERM) is killed (KILL) after this
TIMEOUT_DEFAULT, GRACE_DEFAULT = 60.0, 5.0  # a compute's limits when its sense is unknown (removed meanwhile)


@dataclass(frozen=True)
class Limits:
    """How one compute may run: past `timeout` it is cancelled and rolled back (its result discarded);
    still running `grace` later, its worker is killed (and respawned)."""

    timeout: float = TIMEOUT_DEFAULT
    grace: float = GRACE_DEFAULT

    @property
    def hard(self) -> float:
        """Seconds after its start when a compute is over, whatever it does."""
        return self.timeout + self.grace


@dataclass(frozen=True)
class Policy:
    backoff_first: float = 0.5
    backoff_max: float = 30.0
    stable_after: float = STABLE_AFTER
    ready_timeout: float = READY_TIMEOUT
    term_wait: float = TERM_WAIT

    @classmethod
    def of(cls, engine: EngineConfig, **overrides: float) -> Policy:
        """The policy nerve.yaml's `engine:` section sets (`overrides` for a caller's own waits)."""
        return cls(backoff_first=engine.respawn_backoff_first, backoff_max=engine.respawn_backoff_max, **overrides)

    def backoff(self, failures: int) -> float:
        """Seconds before the next start of a worker that died `failures` times in a row (0: start now)."""
        if failures <= 0:
            return 0.0
        return min(self.backoff_max, self.backoff_first * 2 ** (failures - 1))

    def failures_after(self, failures: int, lived: float) -> int:
        """The failure streak after a death: 0 for a worker that lived `stable_after` (its death is news),
        else one more. A dead worker waits `backoff(max(1, streak))` before its next start."""
        return 0 if lived >= self.stable_after else failures + 1

    @staticmethod
    def limits(sense: SenseConfig | None) -> Limits:
        """A compute's timeout and grace period, from its sense's settings."""
        return Limits(sense.timeout, sense.grace) if sense is not None else Limits()
