"""Human approval gates: a role asks a person, the thread waits (no slot, survives restarts) and resumes on an answer."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
from pathlib import Path

from enginekit import RunningEngine, nerve, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.ops.client import request
from nerve_cli.store.answers import Answer

GATED = textwrap.dedent('''
    from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

    async def writer(messages):
        return RoleResult(f"draft for {messages[0].content}", {"words": 3})

    async def critic(messages):
        return ask_person(f"Publish '{messages[-1].content}'?", {"score": 8})

    async def publisher(messages):
        return RoleResult(f"published with the note: {messages[-1].content}", {})

    def moderator(messages):
        last = messages[-1]
        if last.role == "__start__":
            return "writer"
        if last.role == "writer":
            return END if "nogate" in messages[0].content else "critic"
        if last.role == PERSON:  # the person's answer is the last message the moderator sees
            if not last.meta["approved"]:
                return END
            return "publisher" if "ship" in last.content else "writer"
        return END

    workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic, "publisher": publisher},
                                  moderator=moderator)
''')


def _instance(home: Path, settings: str = "{concurrency: 1, overflow: queue}") -> None:
    write_instance(home, f"workflows:\n  gated: {settings}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "gated.py").write_text(GATED)


def _roles(home: Path, run_id: str) -> list[str]:
    return [r["payload"]["role"] for r in read_logs(home, "workflow", "message", run_id)]


def _shown(home: Path, run_id: str) -> dict:
    result = nerve("thread", "show", run_id, "--json", home=home)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_waiting_thread_survives_a_restart_and_approve_resumes_it_with_the_note(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run = nerve("workflow", "run", "gated", "--prompt", "the notes", home=home)
        assert run.returncode == 5, run.stdout + run.stderr  # 5: waiting for a person
        assert "waits for a person" in run.stdout and "Publish 'draft for the notes'?" in run.stdout
        assert thread_statuses(home) == {"run-1": "waiting"}
        assert request(home, "status")["workflows"]["gated"]["waiting"] == ["run-1"]
        engine.stop()

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        assert thread_statuses(home) == {"run-1": "waiting"}  # recovery left it waiting, not crashed
        inbox = json.loads(nerve("thread", "list", "--status", "waiting", "--json", home=home).stdout)["threads"]
        assert [(t["run_id"], t["reason"], t["rounds"], t["waits"]) for t in inbox] == [
            ("run-1", "Publish 'draft for the notes'?", 2, "person")]
        shown = _shown(home, "run-1")
        assert (shown["status"], shown["question"]) == ("waiting", "Publish 'draft for the notes'?")

        subprocess.run(["git", "init", "-q", str(home)], check=True)
        subprocess.run(["git", "-C", str(home), "config", "user.name", "Ada Lovelace"], check=True)
        answer = nerve("thread", "approve", "run-1", "--note", "ship it, fix the typo", home=home)
        assert answer.returncode == 0, answer.stderr
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20, what="run-1 to complete")
        engine.stop()

    assert _roles(home, "run-1") == ["__start__", "writer", "critic", "__person__", "publisher"]
    shown = _shown(home, "run-1")
    person, published = shown["messages"][3], shown["messages"][4]
    assert (person["content"], person["round"]) == ("ship it, fix the typo", None)  # not a round
    assert person["meta"] == {"decision": "approve", "approved": True, "note": "ship it, fix the typo",
                              "by": "Ada Lovelace", "via": "nerve thread approve",  # who, then how
                              "question": "q1", "settles": True}  # the question it settled
    assert published["content"] == "published with the note: ship it, fix the typo"
    assert published["round"] == 3 and shown["rounds"] == 3
    assert [e["type"] for e in shown["events"]] == [
        "queued", "started", "waiting", "queued", "started", "completed"]
    transcript = nerve("thread", "show", "run-1", "--transcript", home=home).stdout
    assert "## person (approve)" in transcript


def test_a_waiting_thread_holds_no_slot_and_reject_ends_it_as_the_moderator_decides(home: Path) -> None:
    _instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        first = request(home, "start_thread", workflow="gated", prompt="the notes")["run_id"]
        wait_for(lambda: thread_statuses(home).get(first) == "waiting", 20, what="the first thread to wait")
        # concurrency 1: the waiting thread does not block the next one
        second = request(home, "start_thread", workflow="gated", prompt="nogate")
        assert second["status"] == "started"
        wait_for(lambda: thread_statuses(home).get(second["run_id"]) == "completed", 20, what="the second thread")
        assert thread_statuses(home)[first] == "waiting"

        answer = nerve("thread", "reject", first, "--note", "too long", "--json", home=home)
        assert answer.returncode == 0, answer.stderr
        assert json.loads(answer.stdout) == {"version": 1, "run_id": first, "decision": "reject",
                                             "status": "started", "via": "engine", "answered": ["q1"],
                                             "settled": ["q1"], "open": [], "resumes": True}
        wait_for(lambda: thread_statuses(home).get(first) == "completed", 20, what="the rejected thread to end")
        again = nerve("thread", "approve", first, home=home)
        assert again.returncode == 1 and "run-1 is completed, not waiting" in again.stderr
        engine.stop()
    assert _roles(home, first) == ["__start__", "writer", "critic", "__person__"]
    shown = _shown(home, first)
    assert (shown["status"], shown["reason"]) == ("completed", "end")
    assert shown["messages"][-1]["meta"]["decision"] == "reject"


def test_approval_timeout_ends_a_waiting_thread_as_failed(home: Path) -> None:
    _instance(home, "{concurrency: 1, approval_timeout: 300ms}")
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="gated", prompt="the notes")["run_id"]
        wait_for(lambda: thread_statuses(home).get(run_id) == "failed", 20, what="the approval timeout")
        engine.stop()
    shown = _shown(home, run_id)
    assert shown["reason"] == "no answer from a person within approval_timeout 300ms"
    assert [e["type"] for e in shown["events"]][-2:] == ["waiting", "failed"]


def test_standalone_run_waits_offline_approve_queues_and_the_next_engine_resumes(home: Path) -> None:
    _instance(home)
    run = nerve("workflow", "run", "gated", "--prompt", "the notes", home=home)  # no engine: standalone
    assert run.returncode == 5, run.stdout + run.stderr
    assert thread_statuses(home) == {"run-1": "waiting"}

    answer = nerve("thread", "approve", "1", "--note", "ship", home=home)
    assert answer.returncode == 0, answer.stderr
    assert "resumes at the next `nerve run`" in answer.stdout
    assert thread_statuses(home) == {"run-1": "queued"}
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20, what="the approved thread to finish")
        engine.stop()
    assert _roles(home, "run-1") == ["__start__", "writer", "critic", "__person__", "publisher"]


def test_doctor_rebuilds_the_waiting_status(home: Path) -> None:
    _instance(home)
    assert nerve("workflow", "run", "gated", "--prompt", "x", home=home).returncode == 5
    conn = sqlite3.connect(home / "data" / "logs.db")
    with conn:
        conn.execute("UPDATE workflow_runs SET status = 'started' WHERE run_id = 'run-1'")
    conn.close()
    shown = nerve("doctor", home=home)
    assert "run-1" in shown.stdout and "waiting" in shown.stdout, shown.stdout
    assert nerve("doctor", "--fix", home=home).returncode == 0
    assert thread_statuses(home) == {"run-1": "waiting"}
    conn = sqlite3.connect(home / "data" / "logs.db")
    with conn:
        conn.execute("DELETE FROM workflow_runs")
    conn.close()
    assert nerve("doctor", "--fix", home=home).returncode == 0
    assert thread_statuses(home) == {"run-1": "waiting"}


def test_only_a_waiting_thread_can_be_answered(home: Path) -> None:
    _instance(home)
    missing = nerve("thread", "approve", "run-9", home=home)
    assert missing.returncode == 1 and "no thread run-9" in missing.stderr and "no thread is waiting" in missing.stderr
    assert nerve("workflow", "run", "gated", "--prompt", "nogate", home=home).returncode == 0
    done = nerve("thread", "reject", "run-1", home=home)
    assert done.returncode == 1 and "run-1 is completed, not waiting" in done.stderr


# -- the manager alone (no engine process): timers around a wait -------------------------------------

SLOW_GATE = textwrap.dedent('''
    import asyncio
    from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

    async def asker(messages):
        return ask_person("go on?")

    async def slow(messages):
        await asyncio.sleep(float(messages[0].content))
        return RoleResult("done", {})

    def moderator(messages):
        last = messages[-1].role
        return {"__start__": "asker", PERSON: "slow"}.get(last, END)

    workflow = WorkflowDefinition(roles={"asker": asker, "slow": slow}, moderator=moderator)
''')


def test_thread_timeout_counts_running_time_not_the_wait_and_a_waiting_thread_can_be_cancelled(
        home: Path) -> None:
    import asyncio

    from workflow_support import make_instance, manager, status_of
    from workflow_support import wait_for as async_wait_for

    config = make_instance(home, {"w": SLOW_GATE}, {"workflows": {"w": {"concurrency": 1,
                                                                      "thread_timeout": "2s"}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        first = mgr.launch("w", "0.1", None, {})["run_id"]
        await async_wait_for(lambda: status_of(logs, first) == "waiting", 20, "the first thread to wait")
        await asyncio.sleep(2.2)  # longer than thread_timeout, spent waiting for a person
        assert status_of(logs, first) == "waiting"
        assert mgr.answer(Answer(first, "approve", "test", "test"))["status"] == "started"
        await async_wait_for(lambda: status_of(logs, first) in ("completed", "failed"), 20, "the first to end")
        # a short wait, then a role that runs past the first start's deadline but within its own
        third = mgr.launch("w", "1.4", None, {})["run_id"]
        await async_wait_for(lambda: status_of(logs, third) == "waiting", 20, "the third thread to wait")
        await asyncio.sleep(1.0)
        mgr.answer(Answer(third, "approve", "test", "test"))
        await async_wait_for(lambda: status_of(logs, third) in ("completed", "failed"), 20, "the third to end")
        second = mgr.launch("w", "0", None, {})["run_id"]
        await async_wait_for(lambda: status_of(logs, second) == "waiting", 20, "the second thread to wait")
        assert mgr.cancel(second, "no longer needed", "test")["status"] == "cancelled"
        await mgr.stop(1)
        return logs, first, second, third

    logs, first, second, third = asyncio.run(main())
    from workflow_support import end_payload

    assert (status_of(logs, first), end_payload(logs, first)["reason"]) == ("completed", "end")
    assert (status_of(logs, third), end_payload(logs, third)["reason"]) == ("completed", "end")
    assert (status_of(logs, second), end_payload(logs, second)["reason"]) == ("cancelled", "no longer needed")


def test_a_thread_asking_at_its_first_round_says_after_1_round(home: Path) -> None:
    write_instance(home, "workflows:\n  asks: {}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "asks.py").write_text(textwrap.dedent('''
        from nerve_cli.sdk import END, WorkflowDefinition, ask_person

        async def asker(messages):
            return ask_person("Go on?")

        workflow = WorkflowDefinition(roles={"asker": asker},
                                      moderator=lambda m: "asker" if m[-1].role == "__start__" else END)
    '''))
    run = nerve("workflow", "run", "asks", "--prompt", "p", home=home)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "run-1 waits for a person after 1 round: Go on?" in run.stdout


BULKY = textwrap.dedent('''
    from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

    async def writer(messages):  # 6 MiB a round: three rounds make a chain no single line can carry
        return RoleResult("x" * (6 * 2**20) if "bulky" in messages[0].content else "small", {})

    async def critic(messages):
        return ask_person("Publish?", {})

    def moderator(messages):
        if messages[-1].role == PERSON:
            return END
        return "critic" if sum(m.role == "writer" for m in messages) == 3 else "writer"

    workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic}, moderator=moderator)
''')


def test_a_chain_too_long_to_hand_to_a_worker_fails_its_resume_with_the_reason(home: Path) -> None:
    """18 MiB of rounds cannot be sent back to the worker on approval: the thread fails saying so, not waits for ever."""
    write_instance(home, "workflows:\n  bulky: {concurrency: 1, overflow: queue}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "bulky.py").write_text(BULKY)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run = nerve("workflow", "run", "bulky", "--prompt", "bulky", "--json", home=home)
        assert run.returncode == 5, run.stdout[-500:] + run.stderr
        assert nerve("thread", "approve", "run-1", home=home).returncode == 0
        wait_for(lambda: thread_statuses(home).get("run-1") == "failed", 30, what="run-1 to fail on its resume")
        reason = _shown(home, "run-1")["reason"]
        assert reason.startswith("its chain is 18.0 MiB, and a thread is handed to its worker"), reason
        small = nerve("workflow", "run", "bulky", "--prompt", "small", home=home)  # the slot and the worker are free
        assert small.returncode == 5 and "run-2 waits for a person" in small.stdout, small.stdout + small.stderr
        engine.stop()


def test_one_damaged_row_in_a_waiting_thread_is_named_and_passed_over_the_engine_starts(home: Path) -> None:
    """A single message row whose payload is `[1]` in a waiting thread's chain made `nerve run` exit 1 with an
    AttributeError traceback, and `thread show` too: the row is named, the thread cannot be resumed from it,
    and everything else runs."""
    _instance(home)
    assert nerve("workflow", "run", "gated", "--prompt", "the notes", home=home).returncode == 5
    conn = sqlite3.connect(home / "data" / "logs.db")
    with conn:
        row_id = conn.execute("SELECT id FROM logs WHERE type = 'message' AND ref_id = 'run-1' ORDER BY id "
                              "LIMIT 1 OFFSET 1").fetchone()[0]
        conn.execute("UPDATE logs SET payload = '[1]' WHERE id = ?", (row_id,))
    conn.close()
    shown = nerve("thread", "show", "run-1", home=home)
    text = shown.stdout + shown.stderr
    assert "Traceback" not in text and f"row {row_id}" in text, text
    answered = nerve("thread", "approve", "run-1", home=home)
    assert "Traceback" not in answered.stdout + answered.stderr, answered.stderr
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        assert engine.status()["pid"] == engine.proc.pid  # it started
        code, out = engine.stop()
    assert code == 0 and "Traceback" not in out, out
