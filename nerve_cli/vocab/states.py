"""The states the engine reports: a worker group's, a sense's, a thread's."""

from __future__ import annotations

from enum import StrEnum


class WorkerState(StrEnum):
    """A worker's state: a sense group's (`nerve status` workers, `nerve top`) or a workflow's."""

    STOPPED = "stopped"        # no worker, and none coming (engine stopping, group removed)
    STARTING = "starting"      # spawned, not yet ready
    READY = "ready"            # takes computes
    BACKOFF = "backoff"        # died; respawns at `next_retry`
    RELOADING = "reloading"    # its files changed: lets running computes finish, then respawns
    RESTARTING = "restarting"  # its input pipe closed: being killed, then respawned
    STOPPING = "stopping"      # a workflow's worker asked to stop (drained, removed, or reloaded)


class WorkerStart(StrEnum):
    """How a worker process came to be (`worker_started`'s `start`)."""

    WARM = "warm"  # forked from the engine's warm template
    PLAIN = "plain"  # a fresh interpreter


class SenseStatus(StrEnum):
    """A sense's state in `nerve status` and `nerve top`."""

    IDLE = "idle"                # nothing to do until its next trigger
    PENDING = "pending"          # wants a compute (waiting for its worker, its throttle or a running compute)
    RUNNING = "running"          # a compute is in flight
    PENALISED = "penalised"      # backed off after failures: waits out `blocked_until`
    QUARANTINED = "quarantined"  # not computed at all until `blocked_until` (it kept killing its worker)
    PAUSED = "paused"            # `nerve sense pause`: not computed, its events wait (a running compute finishes)
    LOAD_FAILED = "load-failed"  # its code did not load in its worker
    STOPPED = "stopped"          # no engine runs (read from the files)
    DISABLED = "disabled"        # `enabled: false` in nerve.yaml


class ThreadStatus(StrEnum):
    """A workflow thread's status (`workflow_runs.status`, the type of the log row that set it)."""

    QUEUED = "queued"        # admitted, waiting for a slot
    STARTED = "started"      # its worker runs it (also: resumed)
    WAITING = "waiting"      # a role asked a person, or waits for an event; it resumes on the answer
    COMPLETED = "completed"  # its moderator ended it
    FAILED = "failed"        # user code failed, or a limit ran out (thread_timeout, approval_timeout)
    CRASHED = "crashed"      # its worker died and it could not be resumed
    DROPPED = "dropped"      # never started: over capacity, queue full, workflow removed
    CANCELLED = "cancelled"  # someone ended it (`nerve thread cancel`): queued, running or waiting
    PAUSED = "paused"        # `nerve thread pause`: no round starts and no slot is held until `nerve thread resume`

    @property
    def live(self) -> bool:
        """Queued, started, waiting or paused: it may still move (its rows are never archived)."""
        return self in LIVE


LIVE = frozenset({ThreadStatus.QUEUED, ThreadStatus.STARTED, ThreadStatus.WAITING, ThreadStatus.PAUSED})


class WaitKind(StrEnum):
    """What a `waiting` thread waits for (its status row's `waiting_for.kind`)."""

    PERSON = "person"  # a person's answer (ask_person, a tool call needing approval)
    EVENT = "event"    # an event of a channel or a sense (wait_for_event), or its timeout
    TIME = "time"      # time alone (`sleep("2h")`): it resumes when it has slept that long


class Decision(StrEnum):
    """A person's answer to a thread waiting for them (`nerve thread approve|reject`, top, MCP, a link)."""

    APPROVE = "approve"
    REJECT = "reject"


class JobState(StrEnum):
    """A compute inside its worker: the settle-or-cancel race (worker.compute.Job)."""

    QUEUED = "queued"  # received, not started (waits behind another compute of its sense)
    RUNNING = "running"
    CANCELLED = "cancelled"  # timed out or abandoned: its outcome is dropped, its transaction rolled back
    SETTLED = "settled"  # its own outcome won and is being sent


class StepStatus(StrEnum):
    """A pipeline step's state, read from its thread's chain (automaton.pipeline)."""

    DONE = "done"
    WAITING = "waiting"  # for a person (its gate, or a person's step)
    REFUSED = "refused"  # a person rejected it: the thread ends
    READY = "ready"  # its needs are done: it is next
    PENDING = "pending"  # some need is not done yet
