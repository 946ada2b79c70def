"""Crash recovery with real processes: kill -9 of a worker, of the kernel, load and start failures."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from workflow_support import PINGPONG, end_payload, ended, events, make_instance, manager, seqs, status_of, wait_for

from nerve_cli.ops.workflows.rebuild import current_runs, rebuild_runs
from nerve_cli.store.logs import query_logs

TESTS = Path(__file__).resolve().parent


def worker_pid(mgr, name: str) -> int | None:
    return mgr.status()[name]["worker"]["pid"]


async def kill_worker_mid_thread(home: Path, mgr, name: str, marker: str) -> int:
    await wait_for(lambda: (home / marker).exists(), what=marker)
    pid = int((home / marker).read_text())
    assert pid == worker_pid(mgr, name)
    os.kill(pid, signal.SIGKILL)
    await wait_for(lambda: worker_pid(mgr, name) != pid, what="the exit to be noticed")
    return pid


def test_kill_9_of_the_worker_resumes_an_idempotent_thread(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"idempotent": True}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("x", "gate=3 rounds=5", None, {})
        await kill_worker_mid_thread(home, mgr, "x", "waiting-3")
        (home / "gate").write_text("go")
        await wait_for(lambda: ended(logs, "run-1"), what="run-1 to end")
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert status_of(logs, "run-1") == "completed"
    assert seqs(logs, "run-1") == [0, 1, 2, 3, 4, 5]  # each exactly once: nothing lost, nothing repeated
    started = query_logs(logs.path, source="workflow", type="started", ref="run-1")
    assert len(started) == 2
    assert started[1]["payload"] == {"workflow": "x", "resumed": True, "rounds": 2,
                                     "reason": "worker exited with signal SIGKILL"}
    exits = query_logs(logs.path, source="system", type="worker_exited")
    assert exits[0]["payload"]["exit"] == "signal SIGKILL" and exits[0]["payload"]["threads"] == ["run-1"]
    assert query_logs(logs.path, source="system", type="worker_respawn")


def test_kill_9_of_the_worker_crashes_a_non_idempotent_thread(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG}, {"workflows": {"x": {"concurrency": 1}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("x", "gate=3 rounds=5", None, {})
        mgr.launch("x", "rounds=2", None, {})  # queued behind it; runs on the next worker
        await kill_worker_mid_thread(home, mgr, "x", "waiting-3")
        await wait_for(lambda: ended(logs, "run-1", "run-2"))
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert status_of(logs, "run-1") == "crashed"
    assert end_payload(logs, "run-1") == {"workflow": "x", "reason": "worker exited with signal SIGKILL", "rounds": 2}
    assert seqs(logs, "run-1") == [0, 1, 2]
    assert status_of(logs, "run-2") == "completed"


def test_a_worker_that_keeps_dying_is_not_resumed_forever(home: Path) -> None:
    code = PINGPONG.replace("def until(messages):", "def until(messages):\n"
                            "    if len(messages) == 2: os.kill(os.getpid(), 9)")
    config = make_instance(home, {"x": code}, {"workflows": {"x": {"idempotent": True}}})

    async def main():
        mgr, logs, _ = manager(home, config, max_crashes=2)
        mgr.launch("x", "rounds=5", None, {})
        await wait_for(lambda: ended(logs, "run-1"), what="run-1 to end")
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert status_of(logs, "run-1") == "crashed"
    assert end_payload(logs, "run-1")["reason"] == (
        "worker exited with signal SIGKILL (3 times in a row without progress; not resumed again)")
    assert seqs(logs, "run-1") == [0, 1]


def test_a_workflow_that_does_not_load_fails_its_threads_with_the_error(home: Path) -> None:
    bad = "from nerve_cli.sdk import END\n\ndef broken(:\n    pass\n"
    config = make_instance(home, {"bad": bad}, {"workflows": {"bad": {"concurrency": 1}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("bad", "one", None, {})
        mgr.launch("bad", "two", None, {})
        await wait_for(lambda: ended(logs, "run-1", "run-2"))
        mgr.launch("bad", "three", None, {})  # file unchanged: fails at once, no new worker
        await wait_for(lambda: ended(logs, "run-3"))
        (home / "workflows" / "bad.py").write_text(PINGPONG)  # fixed: the next thread works
        mgr.launch("bad", "rounds=1", None, {})
        await wait_for(lambda: ended(logs, "run-4"))
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    for run_id in ("run-1", "run-2", "run-3"):
        assert status_of(logs, run_id) == "failed"
        reason = end_payload(logs, run_id)["reason"]
        assert reason.startswith("workflow bad failed to load: SyntaxError: ")
        assert reason.endswith("at workflows/bad.py:3")
        assert end_payload(logs, run_id)["error"]["line"] == 3
    assert status_of(logs, "run-4") == "completed"
    load_errors = [e for e in query_logs(logs.path, source="system", type="error")
                   if "failed to load" in e["payload"]["message"]]
    assert len(load_errors) == 1 and load_errors[0]["payload"]["file"] == "workflows/bad.py"


def test_a_worker_that_dies_at_start_is_retried_then_its_threads_fail(home: Path) -> None:
    config = make_instance(home, {"x": "import os\nos._exit(7)\n"}, {"workflows": {"x": {}}})

    async def main():
        mgr, logs, _ = manager(home, config, start_tries=2)
        mgr.launch("x", "p", None, {})
        await wait_for(lambda: ended(logs, "run-1"))
        await mgr.stop(1)
        return logs

    logs = asyncio.run(main())
    assert status_of(logs, "run-1") == "failed"
    reason = end_payload(logs, "run-1")["reason"]
    assert reason.startswith("workflow x: its worker failed to start 2 times: ")
    assert "exit code 7" in reason
    assert len(query_logs(logs.path, source="system", type="error")) == 2


def test_engine_stop_keeps_idempotent_threads_for_the_next_start(home: Path) -> None:
    config = make_instance(home, {"idem": PINGPONG, "once": PINGPONG.replace("gate", "hold")},
                           {"workflows": {"idem": {"idempotent": True}, "once": {}}})

    async def first_engine():
        mgr, logs, _ = manager(home, config)
        mgr.launch("idem", "gate=2 rounds=3", None, {})
        mgr.launch("once", "hold=2 rounds=3", None, {})
        await wait_for(lambda: (home / "waiting-2").exists() and len(seqs(logs, "run-2")) == 2)
        await mgr.stop(0.2)
        logs.close()

    async def second_engine():
        mgr, logs, _ = manager(home, config)
        await mgr.start()
        await wait_for(lambda: ended(logs, "run-1"))
        await mgr.stop(1)
        return logs

    asyncio.run(first_engine())
    (home / "gate").write_text("go")
    logs = asyncio.run(second_engine())
    assert status_of(logs, "run-1") == "completed" and seqs(logs, "run-1") == [0, 1, 2, 3]
    assert status_of(logs, "run-2") == "crashed" and end_payload(logs, "run-2")["reason"] == "engine stopped"


KERNEL = textwrap.dedent('''
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from workflow_support import manager
    from nerve_cli.config.load import load_config

    home = Path(sys.argv[1])

    async def main():
        mgr, logs, _ = manager(home, load_config(home))
        await mgr.start()
        mgr.launch("idem", "gate=2 rounds=3 id=A", None, {{}})
        mgr.launch("idem", "rounds=2 id=B", None, {{}})
        mgr.launch("once", "gate=3 rounds=4 id=C", None, {{}})
        await asyncio.sleep(3600)

    asyncio.run(main())
''')


def test_kernel_killed_mid_thread_then_a_new_engine_recovers(home: Path) -> None:
    config = make_instance(home, {"idem": PINGPONG, "once": PINGPONG},
                           {"workflows": {"idem": {"idempotent": True, "concurrency": 1}, "once": {}}})
    script = home / "kernel.py"
    script.write_text(KERNEL.format(tests=str(TESTS)))
    kernel = subprocess.Popen([sys.executable, str(script), str(home)])
    try:
        asyncio.run(wait_for(lambda: (home / "waiting-2").exists() and (home / "waiting-3").exists()
                             or kernel.poll() is not None, timeout=20, what="both roles to block"))
        assert kernel.poll() is None, "the kernel script died on its own"
    finally:
        kernel.kill()
        kernel.wait()
    worker_pids = {int((home / m).read_text()) for m in ("waiting-2", "waiting-3")}
    asyncio.run(wait_for(lambda: not any(_alive(p) for p in worker_pids), what="orphaned workers to exit"))
    (home / "gate").write_text("go")

    async def new_engine():
        mgr, logs, _ = manager(home, config)
        await mgr.start()
        await wait_for(lambda: ended(logs, "run-1", "run-2", "run-3"), what="recovery")
        await mgr.stop(1)
        return logs

    logs = asyncio.run(new_engine())
    assert status_of(logs, "run-1") == "completed" and seqs(logs, "run-1") == [0, 1, 2, 3]
    assert events(logs, "run-1").count("started") == 2
    assert status_of(logs, "run-3") == "crashed"
    assert end_payload(logs, "run-3")["reason"] == "engine restarted while the thread ran"
    assert seqs(logs, "run-3") == [0, 1, 2]
    assert status_of(logs, "run-2") == "completed" and seqs(logs, "run-2") == [0, 1, 2]  # the queue survived
    started = [r["ref_id"] for r in query_logs(logs.path, source="workflow", type="started")]
    assert started.index("run-2") > len(started) - 2  # only after run-1 was resumed
    assert rebuild_runs(logs.path) == current_runs(logs.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


BUGGY = PINGPONG.replace("async def step(messages):", '''async def step(messages):
    import gc
    from nerve_cli.worker.thread_host import Output
    if len(messages) == 1:
        out = next(o for o in gc.get_objects() if isinstance(o, Output))
        os.write(out.fd, b"garbage\\n")
        os.write(out.fd, b'{"type": "thread_message", "run_id": "run-1", "seq": 9, "message": {}}\\n')
        os.write(out.fd, b'{"type": "compute", "id": 1, "sense": "x"}\\n')
        os.write(out.fd, b'{"type": "thread_end", "run_id": "run-77", "status": "completed", "reason": "?"}\\n')
        print("a print from a role goes to stderr")''')


def test_malformed_and_unexpected_worker_lines_are_logged_not_fatal(home: Path) -> None:
    config = make_instance(home, {"x": BUGGY}, {"workflows": {"x": {}}})

    async def main():
        mgr, logs, reports = manager(home, config)
        mgr.launch("x", "rounds=3", None, {})
        await wait_for(lambda: ended(logs, "run-1"))
        await mgr.stop(1)
        return logs, reports

    logs, reports = asyncio.run(main())
    assert status_of(logs, "run-1") == "completed" and seqs(logs, "run-1") == [0, 1, 2, 3]
    messages = [e["payload"]["message"] for e in query_logs(logs.path, source="system", type="error")]
    assert len(messages) == 4
    assert "malformed line (not JSON" in messages[0]
    assert "run-1: message seq 9 out of order (expected 1)" in messages[1]
    assert "unexpected message 'compute'" in messages[2]
    assert "thread_end for run-77, which it does not run" in messages[3]
    assert any("a print from a role goes to stderr" in line for _, line in reports)


def test_reload_drains_then_restarts_the_worker_with_the_new_code(home: Path) -> None:
    config = make_instance(home, {"x": PINGPONG, "y": PINGPONG},
                           {"workflows": {"x": {"drain_timeout": "300ms"}, "y": {"drain_timeout": "5s"}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        stuck = mgr.launch("x", "gate=2 rounds=3", None, {})["run_id"]  # never finishes by itself
        quick = mgr.launch("y", "rounds=3 sleep=0.1", None, {})["run_id"]
        await wait_for(lambda: (home / "waiting-2").exists() and len(seqs(logs, quick)) >= 2)  # both loaded
        old_pid = worker_pid(mgr, "x")
        (home / "workflows" / "x.py").write_text(PINGPONG.replace("round {n}", "v2 round {n}"))
        (home / "workflows" / "y.py").write_text(PINGPONG.replace("round {n}", "v2 round {n}"))
        await asyncio.gather(mgr.reload("x"), mgr.reload("y"))
        assert ended(logs, stuck, quick)  # x was cut at drain_timeout, y drained in time
        new = mgr.launch("x", "rounds=1", None, {})["run_id"]
        await wait_for(lambda: ended(logs, new))
        new_pid = worker_pid(mgr, "x")
        await mgr.stop(1)
        return logs, stuck, quick, new, old_pid, new_pid

    logs, stuck, quick, new, old_pid, new_pid = asyncio.run(main())
    assert status_of(logs, stuck) == "crashed"
    assert end_payload(logs, stuck)["reason"] == (
        "workflow file changed; thread not finished within drain_timeout 300ms")
    assert status_of(logs, quick) == "completed"
    assert [r["payload"]["content"] for r in query_logs(logs.path, type="message", ref=quick)][1:] == [
        " round 1", " round 2", " round 3"]  # the drained thread kept the old code
    assert query_logs(logs.path, type="message", ref=new)[1]["payload"]["content"] == " v2 round 1"
    assert new_pid != old_pid
