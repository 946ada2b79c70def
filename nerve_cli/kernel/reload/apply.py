"""Hot reload: apply a changed nerve.yaml, sense or workflow to the running engine.

- nerve.yaml: validate; an invalid file keeps the current config and logs every
  problem (`config_rejected`); a valid one is applied as a diff — new senses
  join or spawn a worker, removed or disabled ones leave theirs, changed
  reflexes/throttle/timeout only update the scheduler, a group change moves
  the sense to its new worker.
- a sense's files: that group's worker is restarted once its running
  computes have finished; other groups are untouched. Each changed sense
  then runs once (reason `code_changed`, unless its `run_on_save` is off):
  the trigger is held until the new worker is ready, so that compute is the
  new code's, and an author sees its result within the reload time, not at
  the next tick of a `1m` interval.
- a workflow file: the workflow manager drains and restarts that workflow.
Each reload writes one log row that says what changed: every save of nerve.yaml
ends in exactly one of `config_reloaded`, `config_rejected`, `config_unchanged`.
nerve.yaml is read and validated in a thread: a large or hostile file (bounded
by `config.source`, still up to a second of work) never holds the event loop.

Reload drives the running engine through `Target`, the few things it may read
and ask for; the engine implements it and imports this module, not the reverse.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from nerve_cli.config.load import load_config_and_warnings
from nerve_cli.config.model import NerveConfig, format_duration
from nerve_cli.errors import ConfigError
from nerve_cli.kernel.reload.keys import Effect
from nerve_cli.kernel.reload.keys import changes as config_changes
from nerve_cli.kernel.supervision.groups import Groups
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogRow
from nerve_cli.words import plural

if TYPE_CHECKING:
    from nerve_cli.kernel.reload.watch import Changes  # only its type: watch imports watchfiles


class Target(Protocol):
    """The running engine, as hot reload sees it."""

    home: Path
    @property
    def config(self) -> NerveConfig: ...
    processes: Groups  # the process manager: reload asks it to regroup and restart, never edits its table
    workflows: WorkflowManager | None
    warnings: list[str]  # nerve.yaml's current warnings, shown in status apart from errors

    def use_config(self, config: NerveConfig) -> None:
        """Make `config` current and reschedule by it (before any worker moves)."""

    def config_applied(self) -> None:
        """The workers have moved: the engine's other parts follow the current config."""

    def log(self, row: LogRow, ts: int | None = None, mark: tuple[str, int] | None = None) -> None: ...

    def report(self, level: str, message: str) -> None: ...

    def pump(self) -> None: ...

    def code_changed(self, senses: list[str]) -> None:
        """Run each of `senses` once, as soon as its worker (restarting) has loaded their new code."""


_SCHEDULER_KEYS = ("throttle", "timeout", "grace_period")
SAID = "(takes effect at the next start)"


def describe_diff(old: NerveConfig, new: NerveConfig) -> list[str]:
    """Human-readable changes from `old` to `new`, one line each: every field of the validated configuration
    that differs (`reload.keys.changes`), a key that only a start applies marked so."""
    out: list[str] = []
    found = config_changes(old, new)
    old_on, new_on = old.enabled_senses(), new.enabled_senses()
    for name in new_on.keys() - old_on.keys():
        out.append(f"sense {name} added (group {new_on[name].group})")
    for name in old_on.keys() - new_on.keys():
        out.append(f"sense {name} removed" if name not in new.senses else f"sense {name} disabled")
    for name in old_on.keys() & new_on.keys():
        a, b = old_on[name], new_on[name]
        if a.group != b.group:
            out.append(f"sense {name} moved: group {a.group} → {b.group}")
        if a.peers != b.peers:
            out.append(f"senses.{name}.peers: {list(a.peers)} → {list(b.peers)}")
        for key in _SCHEDULER_KEYS:
            va, vb = getattr(a, key), getattr(b, key)
            if va != vb:
                out.append(f"senses.{name}.{key}: {_dur(va)} → {_dur(vb)}")
    said = {f"senses.{n}.{k}" for n in old_on.keys() & new_on.keys() for k in ("group", "peers", *_SCHEDULER_KEYS)}
    said |= {f"senses.{n}" for n in old_on.keys() ^ new_on.keys()} | {f"senses.{n}.enabled" for n in old.senses}
    if old.reflexes != new.reflexes:
        out.append(f"reflexes changed ({len(old.reflexes)} → {len(new.reflexes)})")
        said.add("reflexes")
    if old.live_fleet() != new.live_fleet():
        what = "left" if new.live_fleet() is None else ("joined" if old.live_fleet() is None else "changed")
        out.append(f"fleet {what} (the link to NATS starts again)")
    for change in found:
        if change.path in said:
            continue
        line = change.describe()
        out.append(f"{line} {SAID}" if change.effect is Effect.NEXT_START else line)
    return out


def at_next_start(old: NerveConfig, new: NerveConfig) -> list[str]:
    """The changed keys a running engine does not apply: logged, and said, as taking effect at its next start."""
    return [c.path for c in config_changes(old, new) if c.effect is Effect.NEXT_START]


def _dur(value: float | None) -> str:
    return "unset" if value is None else format_duration(value)


async def watch_and_apply(home: Path, engine: Target, stop: asyncio.Event, running: Callable[[], bool],
                          report: Callable[[str, str], None]) -> None:
    """Watch the instance's files until `stop`, applying each batch of changes while `running()`; the engine runs
    on without hot reload, and says so, if watching fails."""
    # imported here: watchfiles loads only when the engine watches files (not with --no-watch)
    from nerve_cli.kernel.reload.watch import watch

    async def on_change(changes: Changes) -> None:
        if running():
            await apply_changes(engine, changes)

    try:
        await watch(home, on_change, stop)
    except Exception as exc:  # the engine keeps running without hot reload, and says so
        report("error", f"file watching stopped: {type(exc).__name__}: {exc}; restart the engine to reload")


async def apply_changes(engine: Target, changes: "Changes") -> None:
    restarted: set[str] = set()
    if changes.config:
        restarted = await reload_config(engine)
    if changes.senses:
        await reload_senses(engine, changes.senses, restarted)
    for name in sorted(changes.workflows):
        await reload_workflow(engine, name)
    engine.pump()


async def reload_config(engine: Target) -> set[str]:
    """Apply nerve.yaml if valid; return the groups whose workers were (re)started."""
    try:
        new, warnings = await asyncio.to_thread(load_config_and_warnings, engine.home)
    except ConfigError as exc:
        errors = [str(p) for p in exc.problems if getattr(p, "severity", "error") == "error"] or [str(exc)]
        doubts = [str(p) for p in exc.problems if getattr(p, "severity", "error") != "error"]
        engine.log(logrows.config_rejected(errors, doubts))
        engine.report("error", f"nerve.yaml rejected, still running the previous config ({plural(len(errors), 'error')}"
                               + (f", {plural(len(doubts), 'warning')}" if doubts else "") + "):")
        for line in errors:
            engine.report("error", f"  {line}")
        for line in doubts:
            engine.report("warn", f"  {line}")
        return set()
    old = engine.config
    engine.warnings = [str(w) for w in warnings]
    changes = describe_diff(old, new)
    if not changes:
        engine.log(logrows.config_unchanged([str(w) for w in warnings]))
        return set()
    engine.use_config(new)
    restarted = await engine.processes.regroup(old, new)
    engine.config_applied()
    later = at_next_start(old, new)
    engine.log(logrows.config_reloaded(changes, sorted(restarted), [str(w) for w in warnings], later))
    engine.report("info", "nerve.yaml reloaded: " + "; ".join(changes))
    if later:
        engine.report("warn", f"{', '.join(later)} changed: a running engine does not apply "
                              f"{'it' if len(later) == 1 else 'them'}; restart it to")
    for warning in warnings:
        engine.report("warn", str(warning))
    return restarted


async def reload_senses(engine: Target, names: set[str], skip_groups: set[str]) -> None:
    enabled = engine.config.enabled_senses()
    by_group: dict[str, list[str]] = {}
    for name in sorted(names):
        if name in enabled:
            by_group.setdefault(enabled[name].group, []).append(name)
    for group, senses in by_group.items():
        if engine.processes.get(group) is None:
            continue
        if group not in skip_groups:  # (a group nerve.yaml's change restarted already loads the new code)
            engine.log(logrows.sense_reloaded(group, senses))
            engine.report("info", f"{', '.join(senses)} changed: restarting worker group={group}")
            await engine.processes.restart(group)
        # after the restart began: the worker is not ready, so each compute waits for the new code
        engine.code_changed([s for s in senses if enabled[s].run_on_save])


async def reload_workflow(engine: Target, name: str) -> None:
    if engine.workflows is None or name not in engine.config.workflows or not hasattr(engine.workflows, "reload"):
        return
    engine.log(logrows.workflow_reloaded(name))
    engine.report("info", f"workflow {name} changed: draining and restarting its worker")
    await engine.workflows.reload(name)
