"""The process manager: every sense group's supervisor, started, stopped, restarted and regrouped here.

Hot reload and the control requests ask it (`regroup`, `restart`, `for_sense`); none of them edits the
supervisors' table. The watchdog reads the same table (`supervisors`), never changes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.supervision.launch import PLAIN, Launch
from nerve_cli.kernel.supervision.supervisor import GroupHooks, GroupSupervisor
from nerve_cli.wire.spec import GroupSpec


class Groups:
    def __init__(self, home: Path, config: Callable[[], NerveConfig], launch: Launch = PLAIN) -> None:
        self.home = home
        self.config = config  # a callable: a hot reload swaps the config under running groups
        self.hooks: GroupHooks  # who hears the supervisors (set by the part that answers them, before any start)
        self.launch = launch
        self.supervisors: dict[str, GroupSupervisor] = {}

    # reading --------------------------------------------------------------------
    def get(self, group: str) -> GroupSupervisor | None:
        return self.supervisors.get(group)

    def for_sense(self, sense: str) -> GroupSupervisor | None:
        """The supervisor of the group `sense` belongs to (None: a built-in sense, or a group not running)."""
        settings = self.config().senses.get(sense)
        return None if settings is None else self.supervisors.get(settings.group)

    def __iter__(self) -> Iterator[GroupSupervisor]:
        return iter(list(self.supervisors.values()))

    def loaded(self) -> set[str]:
        """The senses some worker has loaded."""
        return set().union(*(s.loaded for s in self.supervisors.values()))

    def worker_pids(self) -> list[int]:
        return [s.worker.pid for s in self.supervisors.values() if s.worker and s.worker.pid]

    def states(self) -> dict[str, str]:
        return {g: s.state for g, s in self.supervisors.items()}

    def describe(self) -> list[dict]:
        return [s.describe() for s in self.supervisors.values()]

    def runnable(self, senses: list[str]) -> tuple[list[str], list[str]]:
        """(ready, held): which of `senses` a ready worker can take now; a built-in sense is in neither."""
        ready: list[str] = []
        held: list[str] = []
        for sense in senses:
            if sense not in self.config().senses:
                continue  # the kernel's own computes in the kernel: no worker to wait for
            supervisor = self.for_sense(sense)
            (ready if supervisor is not None and sense in supervisor.runnable() else held).append(sense)
        return ready, held

    # changing -------------------------------------------------------------------
    def start_all(self) -> None:
        for group, senses in self.config().sense_groups().items():
            self.start(group, senses)

    def start(self, group: str, senses: list[str]) -> None:
        supervisor = GroupSupervisor(group, senses, self.home, self.config(), self.hooks, launch=self.launch)
        self.supervisors[group] = supervisor
        supervisor.start()

    async def restart(self, group: str) -> bool:
        """Restart the group's worker (its senses' files changed); False when no such group runs."""
        supervisor = self.supervisors.get(group)
        if supervisor is None:
            return False
        await supervisor.restart()
        return True

    async def regroup(self, old: NerveConfig, new: NerveConfig) -> set[str]:
        """Follow `new`'s groups: stop the ones gone, start the new ones, restart the ones whose senses or
        worker settings changed. Returns the groups started or restarted."""
        restarted: set[str] = set()
        wanted = new.sense_groups()
        for group in list(self.supervisors):
            if group not in wanted:
                await self.supervisors.pop(group).stop(new.engine.shutdown_timeout)
        for group, senses in wanted.items():
            supervisor = self.supervisors.get(group)
            if supervisor is None:
                self.start(group, senses)
                restarted.add(group)
            elif senses != supervisor.senses or _spec_changed(old, new, group, senses):
                await supervisor.restart(senses, new)
                restarted.add(group)
            else:
                supervisor.config = new
        return restarted

    def kill_all(self) -> None:
        for supervisor in self.supervisors.values():
            supervisor.kill()

    async def stop_all(self, timeout: float) -> None:
        await asyncio.gather(*(s.stop(timeout) for s in self.supervisors.values()))


def _spec_changed(old: NerveConfig, new: NerveConfig, group: str, senses: list[str]) -> bool:
    """Whether the group's worker would be handed other settings (peers, lazy peers, what signals carry)."""
    if any(n not in old.senses for n in senses):
        return True
    return GroupSpec.from_config(old, group, senses) != GroupSpec.from_config(new, group, senses)
