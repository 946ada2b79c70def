"""Threads that wait for an event: wait_for_event parks a thread (no slot) until a matching event is committed."""

from __future__ import annotations

import asyncio
import json
import signal
import textwrap
from pathlib import Path

import pytest
from conftest import nerve
from enginekit import RunningEngine, last_signal, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.automaton.model import END, EVENT, START, RoleResult, WorkflowDefinition, WorkflowMessage
from nerve_cli.automaton.thread import ThreadContext, run_thread
from nerve_cli.automaton.waits import EventWait, matches, pending_wait, wait_for_event
from nerve_cli.contract.threads import thread_show
from nerve_cli.errors import WorkflowError
from nerve_cli.ops.client import request
from nerve_cli.ops.workflows.gates import answer_thread
from nerve_cli.ops.workflows.threads import thread_detail

CI = textwrap.dedent('''
    from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, wait_for_event

    async def opener(messages):
        words = messages[0].content.split()
        return wait_for_event("ci.done", match={"pr": int(words[0])},
                              timeout="400ms" if "timeout" in words else None, meta={"opened": words[0]})

    async def reader(messages):
        last = messages[-1]
        said = "nothing" if last.meta["timed_out"] else last.meta["payload"]["state"]
        return RoleResult(f"ci said {said}", {"event_id": last.meta.get("event_id")})

    def moderator(messages):
        last = messages[-1]
        if last.role == "__start__":
            return "opener"
        if last.role == EVENT:
            return "reader"
        return END

    workflow = WorkflowDefinition(roles={"opener": opener, "reader": reader}, moderator=moderator)
''')


def _instance(home: Path) -> None:
    write_instance(home, "workflows:\n  ci: {concurrency: 1}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "ci.py").write_text(CI)


def _start(home: Path, prompt: str) -> str:
    return request(home, "start_thread", workflow="ci", prompt=prompt)["run_id"]


def _emit(home: Path, payload: dict) -> None:
    """`nerve emit ci.done PAYLOAD`, through the running engine or, with none, stored for the next start."""
    done = nerve("emit", "ci.done", json.dumps(payload), home=home)
    assert done.returncode == 0, done.stderr


def _shown(home: Path, run_id: str) -> dict:
    return thread_show(thread_detail(home / "data" / "logs.db", run_id))


def _messages(home: Path, run_id: str) -> list[dict]:
    return [r["payload"] for r in read_logs(home, "workflow", "message", run_id)]


def test_a_thread_waits_for_its_event_across_a_kill_and_resumes_on_the_first_match(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        seven, nine, eight = _start(home, "7"), _start(home, "9"), _start(home, "8")
        timeout = _start(home, "5 timeout")
        statuses = lambda: thread_statuses(home)  # noqa: E731
        wait_for(lambda: all(statuses().get(r) == "waiting" for r in (seven, nine, eight)), 20,
                 what="three threads waiting")
        # concurrency 1, yet all four got to run: a waiting thread holds no slot
        wait_for(lambda: statuses().get(timeout) == "completed", 20, what="the timeout to resume its thread")
        assert _messages(home, timeout)[-2]["content"] == "timed out: no ci.done where pr = 5 event within 400ms"
        assert _messages(home, timeout)[-1]["content"] == "ci said nothing"

        inbox = json.loads(nerve("thread", "list", "--status", "waiting", "--json", home=home).stdout)["threads"]
        assert {t["run_id"]: t["reason"] for t in inbox} == {
            seven: "waits for ci.done where pr = 7", nine: "waits for ci.done where pr = 9",
            eight: "waits for ci.done where pr = 8"}
        assert {t["waits"] for t in inbox} == {"event"}
        assert request(home, "status")["workflows"]["ci"]["waiting"] == sorted([seven, nine, eight])

        # emit says which waiting thread an event resumes, and warns of no listener only when none hears it
        lonely = nerve("emit", "ci.done", json.dumps({"pr": 42}), home=home)
        assert "no thread waits for it" in lonely.stderr + lonely.stdout
        sent = json.loads(nerve("emit", "ci.done", json.dumps({"pr": 8, "state": "red"}), "--json", home=home).stdout)
        assert sent["resumes"] == [eight] and sent["triggered"] == []
        wait_for(lambda: statuses().get(eight) == "completed", 20, what="the pr 8 event to resume its thread")
        assert statuses()[seven] == statuses()[nine] == "waiting"  # the pr 8 event was read: not theirs
        with pytest.raises(WorkflowError, match=r"waits for an event \(ci.done where pr = 7\), not for a person"):
            answer_thread(home, seven, "approve", None, via="test")
        engine.stop(signal.SIGKILL)

    offline = nerve("emit", "ci.done", json.dumps({"pr": 7, "state": "green"}), home=home)  # no engine: stored
    assert f"will be delivered to thread {seven} when the engine starts" in offline.stdout, offline.stdout
    _emit(home, {"pr": 7, "state": "too late"})  # one event resumes a thread at most once: the first wins
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: thread_statuses(home).get(seven) == "completed", 20, what="the pr 7 thread to resume")
        assert thread_statuses(home)[nine] == "waiting"
        engine.stop()

    roles = [m["role"] for m in _messages(home, seven)]
    assert roles == [START, "opener", EVENT, "reader"]
    event = _messages(home, seven)[2]
    assert event["meta"]["payload"] == {"pr": 7, "state": "green"} and event["meta"]["timed_out"] is False
    assert event["meta"]["source"] == "ci.done" and event["meta"]["kind"] == "channel"
    assert _messages(home, seven)[3]["content"] == "ci said green"
    shown = _shown(home, seven)
    assert [m["round"] for m in shown["messages"]] == [None, 1, None, 2]  # the event is not a round
    assert shown["rounds"] == 2 and shown["waiting_for"] is None
    waiting = _shown(home, nine)["waiting_for"]
    assert (waiting["kind"], waiting["source"], waiting["match"], waiting["until_ms"]) == ("event", "ci.done",
                                                                                          {"pr": 9}, None)
    assert [e["type"] for e in shown["events"]] == ["queued", "started", "waiting", "queued", "started", "completed"]


WAITS = textwrap.dedent('''
    from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, wait_for_event

    async def waiter(messages):
        source, _, value = messages[0].content.partition(" ")
        if source == "build":  # a sense's signals
            return wait_for_event("build", match={"pr": int(value)})
        return wait_for_event("nerve-threads", match={"run_id": value, "transition": "completed"})

    async def reader(messages):
        event = messages[-1].meta
        return RoleResult(f"{event['kind']} {event['source']}", {"payload": event["payload"]})

    def moderator(messages):
        last = messages[-1]
        return "waiter" if last.role == "__start__" else "reader" if last.role == EVENT else END

    workflow = WorkflowDefinition(roles={"waiter": waiter, "reader": reader}, moderator=moderator)
''')
BUILD = "def compute(db, peers, trigger):\n    return trigger.events[-1].payload\n"


def test_a_thread_waits_for_a_senses_signal_and_another_for_that_threads_outcome(home: Path) -> None:
    """The source of a wait may be a sense: its signals resume it, matched like any event; the built-in
    nerve-threads is one, so a thread can wait for another thread's end."""
    write_instance(home, """
        senses:
          build: {}
        reflexes:
          - {sense: build, on: [build.request]}
        workflows:
          waits: {concurrency: 1}
    """, {"build": BUILD})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "waits.py").write_text(WAITS)
    start = lambda prompt: request(home, "start_thread", workflow="waits", prompt=prompt)["run_id"]  # noqa: E731
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        build = start("build 7")
        after = start(f"thread {build}")
        wait_for(lambda: thread_statuses(home).get(build) == thread_statuses(home).get(after) == "waiting", 20,
                 what="both threads waiting")
        wait = _shown(home, build)["waiting_for"]
        assert (wait["kind"], wait["source"], wait["match"]) == ("event", "build", {"pr": 7})
        for pr in (8, 7):  # the build sense signals each request's payload; only pr 7's resumes the thread
            request(home, "emit", channel="build.request", payload={"pr": pr, "ok": pr == 7})
            wait_for(lambda: last_signal(home, "build") == {"pr": pr, "ok": pr == 7}, 20,
                     what=f"the build sense to signal pr {pr}")
        wait_for(lambda: thread_statuses(home).get(after) == "completed", 30, what="both threads to resume and end")
        engine.stop()

    built, waited = _messages(home, build), _messages(home, after)
    assert (built[-1]["content"], built[-1]["meta"]["payload"]) == ("sense build", {"pr": 7, "ok": True})
    assert built[2]["meta"]["event_id"] == 2  # the build sense's second signal: its first (pr 8) was read, not taken
    assert waited[-1]["content"] == "sense nerve-threads"
    outcome = waited[-1]["meta"]["payload"]
    assert (outcome["run_id"], outcome["transition"], outcome["workflow"]) == (build, "completed", "waits")


# -- the pure parts --------------------------------------------------------------------------------------


def test_match_is_json_equality_on_payload_fields_with_dotted_paths() -> None:
    payload = {"pr": 7, "ok": True, "head": {"sha": "abc", "n": 2}}
    assert matches(payload, {}) and matches(payload, {"pr": 7.0, "head.sha": "abc"})
    assert not matches(payload, {"pr": 8}) and not matches(payload, {"ok": 1}) and not matches(payload, {"n": 2})
    assert not matches("text", {"pr": 7}) and not matches(payload, {"head.sha.x": 1})
    with pytest.raises(ValueError, match="match keys are payload field names"):
        wait_for_event("ci.done", {"a..b": 1})
    with pytest.raises(ValueError, match="timeout must be above 0"):
        wait_for_event("ci.done", timeout=0)
    with pytest.raises(ValueError, match="expected a duration"):
        wait_for_event("ci.done", timeout="soon")
    with pytest.raises(ValueError, match="the source must be a channel or a sense name"):
        wait_for_event("ci\ndone")


def test_a_wait_reads_a_rebuilt_event_store_from_the_time_it_began(tmp_path: Path) -> None:
    """events.db deleted and made again while a thread waits: its ids start at 1 again, so how far the wait had
    read (in the old database's identity) no longer counts; what the new one holds since the wait began does."""
    from nerve_cli.kernel.workflows.waits import read_waits
    from nerve_cli.store.events import EventStore, connect_readonly, source_identity

    path = tmp_path / "events.db"

    def emit(*payloads: dict) -> None:
        store = EventStore(path)
        store.append([("ci.done", json.dumps(p), None) for p in payloads])
        store.conn.close()

    def identity() -> str | None:
        conn = connect_readonly(path)
        try:
            return source_identity(conn)
        finally:
            conn.close()

    emit({"pr": 1}, {"pr": 2}, {"pr": 3})
    old = identity()
    read, _ = read_waits(tmp_path, "channel", "ci.done", [("run-1", None, None, 0, {"pr": 9})])
    assert read["run-1"] == (3, old, None)  # read up to id 3, nothing matched
    path.unlink()
    emit({"pr": 9})  # id 1 of a new database
    assert identity() not in (None, old)
    read, _ = read_waits(tmp_path, "channel", "ci.done", [("run-1", 3, old, 0, {"pr": 9})])
    assert read["run-1"][2] is not None and read["run-1"][2].payload == {"pr": 9}


def _chain(limit: int) -> list[WorkflowMessage]:
    return [WorkflowMessage(START, "go", {"maxRounds": limit}, 1)]


async def _persist(seq: int, message: WorkflowMessage) -> None:
    return None


def test_a_wait_counts_events_from_the_start_of_the_round_that_asked() -> None:
    times = iter([100, 150, 160])

    async def opener(messages):
        return wait_for_event("ci.done", {"pr": 7})

    definition = WorkflowDefinition(roles={"opener": opener}, moderator=lambda m: "opener" if len(m) == 1 else END)
    outcome = asyncio.run(run_thread(definition, _chain(3), _persist, ThreadContext(clock=lambda: next(times))))
    assert (outcome.status, outcome.reason) == ("waiting", "ci.done where pr = 7")
    wait = pending_wait(outcome.messages)
    assert wait == EventWait("ci.done", {"pr": 7}, None, since_ms=100)  # when the round began, not when it ended


def _gated(asks_at: int, limit: int, after_answer: str):
    """A workflow whose role `ask` waits for an event at round `asks_at`; after the event the moderator picks
    `after_answer` (a role, or END)."""

    async def work(messages):
        return RoleResult("worked", {})

    async def ask(messages):
        return wait_for_event("ci.done")

    def moderator(messages):
        last = messages[-1]
        if last.role == EVENT:
            return after_answer
        rounds = sum(1 for m in messages if m.role not in (START, EVENT))
        if last.role in ("work", START) and rounds + 1 < asks_at:
            return "work"
        return "ask" if last.role != "ask" else END

    return WorkflowDefinition(roles={"work": work, "ask": ask}, moderator=moderator), _chain(limit)


def _answered(chain) -> list[WorkflowMessage]:
    return [*chain, WorkflowMessage(EVENT, "ci.done #1", {"payload": {}, "timed_out": False}, 9)]


def test_a_wait_at_the_last_round_gets_the_round_it_needs_and_that_round_cannot_wait_again() -> None:
    definition, chain = _gated(asks_at=2, limit=2, after_answer="work")
    first = asyncio.run(run_thread(definition, chain, _persist, ThreadContext()))
    assert first.status == "waiting"
    done = asyncio.run(run_thread(definition, _answered(first.messages), _persist, ThreadContext()))
    # the role the moderator chose after the answer ran, as round 3 of 2: the answer was not ignored
    assert (done.status, done.reason) == ("completed", "max_rounds")
    assert [m.role for m in done.messages] == [START, "work", "ask", EVENT, "work"]

    definition, chain = _gated(asks_at=2, limit=2, after_answer="ask")
    first = asyncio.run(run_thread(definition, chain, _persist, ThreadContext()))
    refused = asyncio.run(run_thread(definition, _answered(first.messages), _persist, ThreadContext()))
    assert refused.status == "failed"
    assert refused.reason.startswith("role 'ask' waited for an event in round 3, the extra round that acts on the "
                                     "answer to a wait asked at the last round (maxRounds 2)")

    definition, chain = _gated(asks_at=2, limit=3, after_answer="work")  # not at the last round: no extra round
    first = asyncio.run(run_thread(definition, chain, _persist, ThreadContext()))
    done = asyncio.run(run_thread(definition, _answered(first.messages), _persist, ThreadContext()))
    assert [m.role for m in done.messages] == [START, "work", "ask", EVENT, "work"] and done.reason == "max_rounds"
