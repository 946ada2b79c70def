"""WorkflowManager with real workflow worker processes on a tmp instance."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from workflow_support import PINGPONG, end_payload, ended, events, make_instance, manager, seqs, status_of, wait_for

from nerve_cli.errors import WorkflowError
from nerve_cli.store.logs import query_logs, workflow_runs

# every role checks that all earlier messages are already in logs.db (ack after the flush)
ON_DISK = PINGPONG.replace(
    "    return RoleResult(",
    "    import sqlite3\n"
    "    db = sqlite3.connect((HERE / 'data' / 'logs.db').as_uri() + '?mode=ro', uri=True)\n"
    "    on_disk = db.execute(\"SELECT COUNT(*) FROM logs WHERE type = 'message'\").fetchone()[0]\n"
    "    db.close()\n"
    "    assert on_disk == n, f'{on_disk} messages on disk, {n} in the chain'\n"
    "    return RoleResult(", 1)
assert ON_DISK != PINGPONG


def test_a_thread_end_to_end(home: Path) -> None:
    config = make_instance(home, {"x": ON_DISK}, {"workflows": {"x": {}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        await mgr.start()
        answer = mgr.launch("x", "id=t rounds=4", None, {"kind": "test"})
        assert answer == {"run_id": "run-1", "status": "started"}
        await wait_for(lambda: ended(logs, "run-1"), what="run-1 to end")
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert events(logs, "run-1") == ["queued", "started"] + ["message"] * 5 + ["completed"]
    assert seqs(logs, "run-1") == [0, 1, 2, 3, 4]
    rows = query_logs(logs.path, source="workflow", type="message", ref="run-1")
    assert rows[0]["payload"]["role"] == "__start__" and "round" not in rows[0]["payload"]
    assert [r["payload"]["round"] for r in rows[1:]] == [1, 2, 3, 4]
    assert [r["payload"]["content"] for r in rows[1:]] == [f"t round {n}" for n in (1, 2, 3, 4)]
    assert end_payload(logs, "run-1")["reason"] == "end" and end_payload(logs, "run-1")["rounds"] == 4
    assert workflow_runs(logs.path)[0]["status"] == "completed"
    queued = query_logs(logs.path, type="queued")[0]["payload"]
    assert queued == {"workflow": "x", "prompt": "id=t rounds=4", "max_rounds": 100, "origin": {"kind": "test"},
                      "priority": "urgent"}


def test_max_rounds_from_launch_and_the_engine_cap(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"engine": {"max_rounds": 5}, "workflows": {"x": {"concurrency": 3}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        a = mgr.launch("x", "forever", 3, {})["run_id"]
        b = mgr.launch("x", "forever", 50, {})["run_id"]
        c = mgr.launch("x", "forever", None, {})["run_id"]
        await wait_for(lambda: ended(logs, a, b, c), what="threads to end")
        await mgr.stop(1)
        return logs, a, b, c

    logs, a, b, c = asyncio.run(main())
    for run_id, rounds in ((a, 3), (b, 5), (c, 5)):
        assert end_payload(logs, run_id)["reason"] == "max_rounds"
        assert seqs(logs, run_id) == list(range(rounds + 1))
    queued = {r["ref_id"]: r["payload"] for r in query_logs(logs.path, type="queued")}
    assert queued[b]["max_rounds"] == 5 and queued[b]["requested_max_rounds"] == 50
    start = query_logs(logs.path, type="message", ref=a)[0]["payload"]
    assert start["meta"] == {"maxRounds": 3}


def test_overflow_drop_drops_the_new_request(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1, "overflow": "drop"}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        first = mgr.launch("x", "rounds=2 sleep=0.2", None, {})
        second = mgr.launch("x", "rounds=2", None, {})
        await wait_for(lambda: ended(logs, "run-1"))
        third = mgr.launch("x", "rounds=1", None, {})  # room again
        await wait_for(lambda: ended(logs, "run-3"))
        await mgr.stop(1)
        return logs, [first["status"], second["status"], third["status"]]

    logs, answers = asyncio.run(main())
    assert answers == ["started", "dropped", "started"]
    assert events(logs, "run-2") == ["queued", "dropped"]
    assert end_payload(logs, "run-2")["reason"] == "at capacity: 1 of 1 threads running (overflow: drop)"
    assert [status_of(logs, r) for r in ("run-1", "run-2", "run-3")] == ["completed", "dropped", "completed"]


def test_overflow_queue_with_max_queue_drops_the_oldest(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG},
                           {"workflows": {"x": {"concurrency": 1, "overflow": "queue", "max_queue": 2}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        answers = [mgr.launch("x", f"id={i} rounds=1 sleep=0.1", None, {})["status"] for i in range(5)]
        await wait_for(lambda: ended(logs, *(f"run-{i}" for i in range(1, 6))), what="all to end")
        await mgr.stop(1)
        return logs, answers

    logs, answers = asyncio.run(main())
    assert answers == ["started", "queued", "queued", "queued", "queued"]
    assert [status_of(logs, f"run-{i}") for i in range(1, 6)] == [
        "completed", "dropped", "dropped", "completed", "completed"]
    assert end_payload(logs, "run-2")["reason"] == (
        "queue full (max_queue 2): the oldest request of the lowest priority (urgent) was dropped to make room for run-4")
    assert end_payload(logs, "run-3")["reason"].endswith("to make room for run-5")
    started = [r["ref_id"] for r in query_logs(logs.path, source="workflow", type="started")]
    assert started == ["run-1", "run-4", "run-5"]  # FIFO


CONCURRENT = '''
import asyncio, time
from pathlib import Path
from nerve_cli.sdk import END, RoleResult, WorkflowDefinition
LOG = Path(__file__).resolve().parent.parent / "intervals.txt"

async def work(messages):
    start = time.time()
    await asyncio.sleep(0.15)
    with LOG.open("a") as fh:
        fh.write(f"{start} {time.time()}\\n")
    return RoleResult("done", {})

workflow = WorkflowDefinition(roles={"work": work}, moderator=lambda m: END if len(m) > 1 else "work")
'''


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    best = current = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def test_concurrency_is_never_exceeded(home: Path) -> None:
    config = make_instance(home, {"c": CONCURRENT},
                           {"workflows": {"c": {"concurrency": 2, "overflow": "queue"}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        for i in range(6):
            mgr.launch("c", f"t{i}", None, {})
        await wait_for(lambda: ended(logs, *(f"run-{i}" for i in range(1, 7))), what="all to end")
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert all(status_of(logs, f"run-{i}") == "completed" for i in range(1, 7))
    intervals = [tuple(map(float, line.split())) for line in (home / "intervals.txt").read_text().splitlines()]
    assert len(intervals) == 6
    assert max_overlap(intervals) == 2  # used, never exceeded


def test_launch_refuses_unknown_disabled_and_bad_requests(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {}, "off": {"enabled": False}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        with pytest.raises(WorkflowError, match=r"unknown workflow 'nope' \(nerve.yaml workflows: off, x\)"):
            mgr.launch("nope", "p", None, {})
        with pytest.raises(WorkflowError, match="workflow off is disabled"):
            mgr.launch("off", "p", None, {})
        with pytest.raises(WorkflowError, match="max_rounds must be a whole number"):
            mgr.launch("x", "p", 0, {})
        with pytest.raises(WorkflowError, match="prompt is empty"):
            mgr.launch("x", "  ", None, {})
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert workflow_runs(logs.path) == []  # nothing refused was queued


def test_launch_directive(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG},
                           {"engine": {"max_rounds": 4}, "workflows": {"x": {}, "off": {"enabled": False}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        ok = mgr.launch_directive("disk", "x|9|rounds=100 a|b in the prompt")
        refused = [mgr.launch_directive("disk", d) for d in
                   ("x|nine|p", "nope|2|p", "off|2|p", "x|2|", "no pipes", None)]
        await wait_for(lambda: ended(logs, ok["run_id"]))
        await mgr.stop(1)
        return logs, ok, refused

    logs, ok, refused = asyncio.run(main())
    assert ok == {"run_id": "run-1", "status": "started"}
    assert [(r["run_id"], r["status"]) for r in refused] == [(None, "refused")] * 6
    assert all(r["reason"] for r in refused)  # the same why as the error log's message
    queued = query_logs(logs.path, type="queued")[0]["payload"]
    assert queued["prompt"] == "rounds=100 a|b in the prompt" and queued["max_rounds"] == 4
    assert queued["origin"] == {"kind": "directive", "sense": "disk"}
    assert end_payload(logs, "run-1")["reason"] == "max_rounds"
    errors = query_logs(logs.path, source="system", type="error")
    assert len(errors) == 6 and all(e["ref_id"] == "disk" and e["payload"]["sense"] == "disk" for e in errors)
    messages = [e["payload"]["message"] for e in errors]
    assert "maxRounds must be a whole number" in messages[0]
    assert "unknown workflow 'nope'" in messages[1]
    assert "workflow off is disabled" in messages[2]
    assert "the prompt is empty" in messages[3]
    assert "three '|'-separated parts" in messages[4]
    assert "must be a string" in messages[5]
    assert all(m.startswith("sense disk: workflow directive refused: ") for m in messages)
    assert [r["run_id"] for r in workflow_runs(logs.path)] == ["run-1"]


def test_idle_worker_stops_and_comes_back(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {}}})

    async def main():
        mgr, logs, _ = manager(home, config, idle_timeout=0.2)
        mgr.launch("x", "rounds=1", None, {})
        await wait_for(lambda: ended(logs, "run-1"))
        await wait_for(lambda: mgr.status()["x"]["worker"]["state"] == "stopped", what="idle stop")
        mgr.launch("x", "rounds=1", None, {})
        await wait_for(lambda: ended(logs, "run-2"))
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    started = query_logs(logs.path, source="system", type="worker_started")
    exited = query_logs(logs.path, source="system", type="worker_exited")
    assert len(started) == 2 and started[0]["payload"]["pid"] != started[1]["payload"]["pid"]
    assert exited[0]["payload"]["expected"] is True


def test_status_reports_workers_and_queues(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1}}})
    (home / "gate").unlink(missing_ok=True)

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("x", "gate=1 rounds=1", None, {})
        mgr.launch("x", "rounds=1", None, {})
        await wait_for(lambda: (home / "waiting-1").exists(), what="role to block")
        status = mgr.status()["x"]
        (home / "gate").write_text("go")
        await wait_for(lambda: ended(logs, "run-1", "run-2"))
        final = mgr.status()["x"]
        await mgr.stop(1)
        return status, final

    status, final = asyncio.run(main())
    assert status["running"] == ["run-1"] and status["queued"] == ["run-2"]
    assert status["worker"]["state"] == "ready" and isinstance(status["worker"]["pid"], int)
    assert status["counts"] == {"started": 1, "queued": 1}
    assert final["counts"] == {"completed": 2}


def test_cancel_a_running_and_a_queued_thread(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("x", "gate=2", None, {})
        mgr.launch("x", "rounds=1", None, {})
        await wait_for(lambda: (home / "waiting-2").exists(), what="role to block")
        assert mgr.cancel("run-2", "not needed", "test") == {"run_id": "run-2", "status": "cancelled", "was": "queued"}
        assert mgr.cancel("run-1", "user asked", "test")["status"] == "cancelling"
        with pytest.raises(WorkflowError, match="no thread run-99"):
            mgr.cancel("run-99", "nothing", "test")
        await wait_for(lambda: ended(logs, "run-1", "run-2"))
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert (status_of(logs, "run-1"), end_payload(logs, "run-1")["reason"]) == ("cancelled", "user asked")
    assert (status_of(logs, "run-2"), end_payload(logs, "run-2")["reason"]) == ("cancelled", "not needed")
    assert seqs(logs, "run-1") == [0, 1]


def test_role_timeout_retries_and_thread_timeout_from_nerve_yaml(home: Path) -> None:
    # two workflows: a thread_timeout beside the role_timeout would cut the retried role short on a loaded machine
    config = make_instance(home, {"x": PINGPONG, "y": PINGPONG}, {"workflows": {
        "x": {"role_timeout": "100ms", "role_retries": 1, "role_backoff": "10ms"},
        "y": {"thread_timeout": "400ms"}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        slow_role = mgr.launch("x", "sleep=1 rounds=1", None, {})["run_id"]
        long_thread = mgr.launch("y", "sleep=0.05", None, {})["run_id"]
        await wait_for(lambda: ended(logs, slow_role, long_thread))
        await mgr.stop(1)
        return logs, slow_role, long_thread

    logs, slow_role, long_thread = asyncio.run(main())
    assert end_payload(logs, slow_role)["reason"] == "role 'a' timed out after 0.1s (role_timeout) (2 attempts)"
    assert (status_of(logs, long_thread), end_payload(logs, long_thread)["reason"]) == (
        "failed", "cancelled: thread_timeout 400ms exceeded")
    assert len(seqs(logs, long_thread)) <= 9  # rounds of >= 50 ms, cut at the 400 ms deadline (not endless)


def test_a_directive_with_a_misspelt_workflow_gets_did_you_mean(home: Path) -> None:
    config = make_instance(home, {"triage": PINGPONG}, {"workflows": {"triage": {}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        refused = mgr.launch_directive("disk", "triag|2|p")
        unknown = mgr.launch_directive("disk", "zzz|2|p")
        await mgr.stop(1)
        return logs, refused, unknown

    logs, refused, unknown = asyncio.run(main())
    assert refused["status"] == unknown["status"] == "refused"
    assert "did you mean `triage`?" in refused["reason"] and "did you mean" not in unknown["reason"]
    messages = [e["payload"]["message"] for e in query_logs(logs.path, source="system", type="error")]
    assert "unknown workflow 'triag'" in messages[0] and "did you mean `triage`?" in messages[0]
    assert "create it" not in messages[0]
    assert "create it with `nerve workflow new zzz`" in messages[1]
