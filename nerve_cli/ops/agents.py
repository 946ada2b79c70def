"""What `nerve agent` does, as library code: take, wait for and acknowledge an agent's events; list the agents.

Everything reads and writes the files (`store.inbox`), so it works with the
engine stopped: events an offline `nerve emit` stored are there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from nerve_cli.agents.watch import Waiter, agent_of, wait
from nerve_cli.config.agents import agent_sources
from nerve_cli.config.load import load_config
from nerve_cli.contract import agents as docs
from nerve_cli.home import Layout
from nerve_cli.store.inbox import Inbox, Taken, backlog


@dataclass(frozen=True)
class Take:
    taken: Taken
    timed_out: bool = False

    def document(self, agent: str) -> dict:
        return docs.delivery(agent, self.taken.delivery, self.taken.acked, self.timed_out)


def _waiter(home: Path, name: str) -> Waiter:
    return Waiter.of(Layout(home).data, load_config(home), name)


def take(home: Path, name: str, *, session: str | None = None, ack_previous: bool = False,
         via: str | None = None) -> Take:
    """One take now (`nerve agent next`): the pending delivery again, or a new one, or nothing."""
    waiter = _waiter(home, name)
    inbox = Inbox(Layout(home).data)
    try:
        return Take(waiter.take(inbox, session=session, ack_previous=ack_previous, via=via))
    finally:
        inbox.close()


def wait_for(home: Path, name: str, timeout: float | None, *, session: str | None = None,
             ack_previous: bool = True, via: str | None = None, stop: Callable[[], bool] | None = None) -> Take:
    """Block until the agent has events (handed as one delivery), `timeout` passes or `stop()` is true."""
    waiter = _waiter(home, name)
    inbox = Inbox(Layout(home).data)
    try:
        taken = wait(waiter, inbox, timeout, first={"session": session, "ack_previous": ack_previous, "via": via},
                     then={"session": session, "via": via}, stop=stop)
        return Take(taken, timed_out=taken.delivery is None and (stop is None or not stop()))
    finally:
        inbox.close()


def acknowledge(home: Path, name: str, ids: Iterable[int] | None, by: str | None = None) -> dict:
    """`nerve agent ack`: the named deliveries (None: every pending one) acknowledged."""
    agent_of(load_config(home), name)
    inbox = Inbox(Layout(home).data)
    try:
        wanted = None if ids is None else sorted(set(ids))
        before = inbox.known(name, wanted) if wanted is not None else {}
        done = inbox.ack(name, wanted, by)
    finally:
        inbox.close()
    if wanted is None:
        return docs.ack(name, done)
    return docs.ack(name, done, [i for i, was in before.items() if was], [i for i in wanted if i not in before])


def listing(home: Path) -> dict:
    """Every agent with its backlog, from the files."""
    config = load_config(home)
    data = Layout(home).data
    rows = []
    for name, agent in config.agents.items():
        sources = agent_sources(config, name)
        found = backlog(data, name, sources, agent.match)
        deliver = "codex" if agent.deliver is not None and agent.deliver.codex is not None else "self"
        rows.append(docs.agent_row(name, sources, agent.enabled, deliver, found))
    return docs.agent_list(rows)


def install(home: Path, harness: str, name: str, project: Path, dry_run: bool = False) -> dict:
    """`nerve agent install`: the harness's files (merged), and the agent's first look at its sources (so what
    they receive from now on reaches it, whichever `start:` it has)."""
    from nerve_cli.agents.install import plan, write  # json, tomllib and shlex: only when installing

    waiter = _waiter(home, name)
    files, notes = plan(harness, name, home, project)
    if not dry_run:
        write(files)
        inbox = Inbox(Layout(home).data)
        try:
            inbox.intake(name, waiter.sources, waiter.agent.match, waiter.agent.start)
        finally:
            inbox.close()
    return docs.install(harness, name, str(Path(project).resolve()), dry_run, [f.to_dict() for f in files], notes)


def deliver_codex(home: Path, name: str, seconds: float | None, report: Callable[[str, str], None]) -> int:
    """`nerve agent deliver`: run the agent's Codex delivery until `seconds` pass or Ctrl-C; the turns completed."""
    import asyncio  # ~90 ms: only `nerve agent deliver` runs a loop here

    from nerve_cli.agents.codex import CodexDeliverer  # websockets: only an agent delivered to Codex needs it
    from nerve_cli.agents.watch import UnknownAgent
    from nerve_cli.ops.client import engine_running

    first = _waiter(home, name)
    codex = first.agent.deliver.codex if first.agent.deliver is not None else None
    if codex is not None and engine_running(home):
        raise UnknownAgent(f"the running engine delivers agent {name} to Codex itself (one delivery, one turn); "
                           "stop it first to run `nerve agent deliver` in the foreground")
    if codex is None:
        raise UnknownAgent(f"agent {name} has no `deliver: {{codex: {{endpoint, thread}}}}` in nerve.yaml; "
                           "add it, or take its events with `nerve agent wait|next`")
    deliverer = CodexDeliverer(Layout(home).data, lambda: _waiter(home, name), codex.endpoint, codex.thread, report)

    async def main() -> None:
        stop = asyncio.Event()
        if seconds is not None:
            asyncio.get_running_loop().call_later(seconds, stop.set)
        await deliverer.run(stop)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    return deliverer.turns
