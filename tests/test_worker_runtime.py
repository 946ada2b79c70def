"""The sense worker as a process: loading, concurrency, cancel, shutdown, stdout hygiene."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sensekit import db_rows, worker, write_instance

from nerve_cli.wire.protocol import Cancel, Compute, Error, Shutdown, Signal, Silent

SLEEPY = """
import time

def compute(db, peers):
    time.sleep({secs})
    return "{name}"
"""

ASYNC_SLEEPY = """
import asyncio

async def compute(db, peers):
    await asyncio.sleep({secs})
    return "{name}"
"""


def _answers(w, ids, timeout=20.0):
    got = {}
    while len(got) < len(ids):
        msg = w.read(timeout)
        if getattr(msg, "id", None) in ids:
            got[msg.id] = msg
    return got


def test_syntax_error_names_file_and_line_and_others_still_run(home) -> None:
    write_instance(home, {
        "bad": {"group": "g", "code": "def compute(db, peers):\n    x = 1\n    return (x +\n\n"},
        "good": {"group": "g", "code": "def compute(db, peers):\n    return 'fine'\n"},
    })
    with worker(home, "g") as w:
        assert w.ready.senses == ["good"]
        failed = w.ready.failed["bad"]
        assert failed.type == "SyntaxError" and failed.file == "senses/bad/sense.py" and failed.line == 3
        assert w.compute("good").payload == "fine"
        answer = w.compute("bad")
        assert isinstance(answer, Error) and "failed to load" in answer.error.message
        assert answer.error.file == "senses/bad/sense.py"


def test_load_failures_are_located(home) -> None:
    write_instance(home, {
        "imp": {"code": "import json\nimport no_such_module_xyz\n\ndef compute(db, peers):\n    return 1\n"},
        "nocompute": {"code": "def compiute(db, peers):\n    return 1\n"},
        "badsql": {"code": "def compute(db, peers):\n    return 1\n", "migration": "CREATE TABLE (oops;\n"},
        "ok": {"code": "def compute(db, peers):\n    return 1\n"},
    })
    with worker(home) as w:
        failed = w.ready.failed
        assert w.ready.senses == ["ok"]
    assert failed["imp"].type == "ModuleNotFoundError" and (failed["imp"].file, failed["imp"].line) == ("senses/imp/sense.py", 2)
    assert "no `compute(db, peers)` function" in failed["nocompute"].message
    assert failed["badsql"].type == "MigrationError" and "0001_init.sql" in failed["badsql"].message


def test_unknown_sense_gets_an_error_answer(home) -> None:
    write_instance(home, {"a": {"code": "def compute(db, peers):\n    return 1\n"}})
    with worker(home) as w:
        answer = w.compute("nope")
    assert isinstance(answer, Error) and "not loaded" in answer.error.message


def test_two_senses_of_a_group_compute_concurrently(home) -> None:
    write_instance(home, {
        "a": {"group": "g", "code": SLEEPY.format(secs=0.6, name="a")},
        "b": {"group": "g", "code": SLEEPY.format(secs=0.6, name="b")},
        "c": {"group": "g", "code": ASYNC_SLEEPY.format(secs=0.6, name="c")},
        "d": {"group": "g", "code": ASYNC_SLEEPY.format(secs=0.6, name="d")},
    })
    with worker(home, "g") as w:
        start = time.monotonic()
        w.send(*(Compute(i, name) for i, name in enumerate("abcd", 1)))
        got = _answers(w, {1, 2, 3, 4})
        elapsed = time.monotonic() - start
    assert [got[i].payload for i in (1, 2, 3, 4)] == ["a", "b", "c", "d"]
    assert elapsed < 1.5, f"four 0.6 s computes took {elapsed:.2f}s: they did not overlap"


def test_one_compute_per_sense_at_a_time(home) -> None:
    code = """
    import threading, time
    _lock = threading.Lock()
    _state = {"active": 0, "max": 0}

    def compute(db, peers):
        with _lock:
            _state["active"] += 1
            _state["max"] = max(_state["max"], _state["active"])
        time.sleep(0.2)
        with _lock:
            _state["active"] -= 1
        return _state["max"]
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        start = time.monotonic()
        w.send(Compute(1, "s"), Compute(2, "s"), Compute(3, "s"))
        got = _answers(w, {1, 2, 3})
        elapsed = time.monotonic() - start
    assert all(isinstance(m, Signal) for m in got.values()), got
    assert max(m.payload for m in got.values()) == 1
    assert elapsed >= 0.55


def test_user_output_never_corrupts_the_protocol(home, tmp_path) -> None:
    code = """
    import os, subprocess, sys

    def compute(db, peers):
        print('{"type": "signal", "id": 99, "sense": "fake"}')
        print("no newline at the end", end="")
        sys.__stdout__.write("via __stdout__\\n")
        sys.__stdout__.flush()
        os.write(1, b"raw fd 1\\n")
        subprocess.run(["echo", "from a child"], check=True)
        return "clean"
    """
    write_instance(home, {"s": {"code": code}})
    err = open(tmp_path / "stderr.txt", "wb")
    with worker(home, stderr=err) as w:
        first, second = w.compute("s"), w.compute("s")
        printed = [(o.stream, o.text) for o in w.outputs[first.id]]
    err.close()
    assert isinstance(first, Signal) and first.payload == "clean"
    assert isinstance(second, Signal) and second.id == first.id + 1
    # print() is the compute's output, sent as lines under its id (before its answer), never as a message
    assert printed == [("stdout", '{"type": "signal", "id": 99, "sense": "fake"}'), ("stdout", "no newline at the end")]
    text = (tmp_path / "stderr.txt").read_text()
    for piece in ("via __stdout__", "raw fd 1", "from a child"):  # below print(): the worker's stderr
        assert piece in text


def test_cancel_interrupts_long_sql_and_rolls_back(home) -> None:
    code = """
    import time
    from .schema import Sample
    _calls = []

    def compute(db, peers):
        _calls.append(1)
        db.insert(Sample(ts=time.time_ns(), value=1.0))
        if len(_calls) == 1:  # the first compute runs away in SQL
            db.query("with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c")
        return "done"
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        w.send(Compute(1, "s"))
        time.sleep(0.3)
        start = time.monotonic()
        w.send(Cancel(1))
        answer = w.answer(1, timeout=10)
        assert isinstance(answer, Error) and answer.error.type == "TimeoutError", answer
        assert time.monotonic() - start < 2
        nxt = w.compute("s", timeout=10)  # the sense is free again, its transaction rolled back
    assert isinstance(nxt, Signal) and nxt.payload == "done"
    assert db_rows(home, "s", "select count(*) from sample") == [(1,)]
    assert db_rows(home, "s", "select count(*) from _signals") == [(1,)]


RUNAWAY = """
def compute(db, peers):
    db.query("with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c")
    return "done"
"""


def test_a_cancel_is_heard_while_every_sync_sense_of_the_group_computes(home) -> None:
    write_instance(home, {name: {"group": "g", "code": RUNAWAY} for name in "abc"})
    with worker(home, "g") as w:
        w.send(Compute(1, "a"), Compute(2, "b"), Compute(3, "c"))
        time.sleep(0.3)  # all three are deep in SQL: no compute thread is free
        for i in (2, 1, 3):
            w.send(Cancel(i))
            answer = w.answer(i, timeout=10)
            assert isinstance(answer, Error) and answer.error.type == "TimeoutError", answer


def test_cancel_async_compute_rolls_back_and_sends_nothing_more(home) -> None:
    code = """
    import asyncio, time
    from .schema import Sample

    _calls = []

    async def compute(db, peers):
        _calls.append(1)
        db.insert(Sample(ts=time.time_ns(), value=1.0))
        if len(_calls) == 1:
            await asyncio.sleep(30)
        return "done"
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        w.send(Compute(1, "s"))
        time.sleep(0.2)
        w.send(Cancel(1), Compute(2, "s"))
        first = w.read(10)
        second = w.read(10)
    assert isinstance(first, Error) and first.id == 1 and first.error.type == "TimeoutError"
    assert isinstance(second, Signal) and second.id == 2
    assert db_rows(home, "s", "select count(*) from sample") == [(1,)]


def test_cancelled_python_code_never_commits_and_answers_when_it_stops(home) -> None:
    code = """
    import time
    from .schema import Sample

    def compute(db, peers):
        db.insert(Sample(ts=time.time_ns(), value=1.0))
        time.sleep(0.8)  # plain Python: cannot be interrupted
        db.insert(Sample(ts=time.time_ns(), value=2.0))
        return "finished anyway"
    """
    write_instance(home, {"s": {"code": code}})
    with worker(home) as w:
        w.send(Compute(1, "s"), Compute(2, "s"))
        time.sleep(0.2)
        w.send(Cancel(2), Cancel(1))
        queued = w.read(5)  # compute 2 never started: answered at once
        assert isinstance(queued, Error) and queued.id == 2 and queued.error.type == "TimeoutError"
        start = time.monotonic()
        running = w.read(5)  # compute 1 is answered only once its code has stopped
        assert time.monotonic() - start > 0.3
        assert isinstance(running, Error) and running.id == 1 and running.error.type == "TimeoutError", running
        assert "rolled back" in running.error.message
        with_pause = w.compute("s", timeout=5)
    assert isinstance(with_pause, Signal)
    assert db_rows(home, "s", "select count(*) from sample") == [(2,)]  # only the last compute's two rows
    assert db_rows(home, "s", "select count(*) from _signals") == [(1,)]


def test_cancel_after_answer_is_ignored(home) -> None:
    write_instance(home, {"s": {"code": "def compute(db, peers):\n    return 1\n"}})
    with worker(home) as w:
        assert isinstance(w.compute("s"), Signal)
        w.send(Cancel(1))
        assert isinstance(w.compute("s"), Signal)  # the next message is the next answer, nothing stray


def test_shutdown_finishes_running_compute_then_exits_zero(home) -> None:
    write_instance(home, {"s": {"code": SLEEPY.format(secs=0.3, name="s")}})
    w = worker(home)
    w.send(Compute(1, "s"), Shutdown())
    answer = w.read(10)
    assert isinstance(answer, Signal) and answer.payload == "s"
    assert w.proc.wait(10) == 0


def test_stdin_eof_exits_zero(home) -> None:
    write_instance(home, {"s": {"code": "def compute(db, peers):\n    return None\n"}})
    w = worker(home)
    assert isinstance(w.compute("s"), Silent)
    w.proc.stdin.close()
    assert w.proc.wait(10) == 0


def test_sigint_does_not_kill_a_computing_worker(home) -> None:
    write_instance(home, {"s": {"code": SLEEPY.format(secs=0.5, name="s")}})
    with worker(home) as w:
        w.send(Compute(1, "s"))
        time.sleep(0.1)
        os.kill(w.pid, signal.SIGINT)
        answer = w.answer(1, timeout=10)
        assert isinstance(answer, Signal)
        assert w.proc.poll() is None


def test_sigterm_stops_cleanly(home) -> None:
    write_instance(home, {"s": {"code": SLEEPY.format(secs=0.3, name="s")}})
    w = worker(home)
    w.send(Compute(1, "s"))
    time.sleep(0.1)
    os.kill(w.pid, signal.SIGTERM)
    assert isinstance(w.read(10), Signal)
    assert w.proc.wait(10) == 0


def test_invalid_config_still_answers(home) -> None:
    write_instance(home, {"s": {"code": "def compute(db, peers):\n    return 1\n"}})
    (home / "nerve.yaml").write_text("senses: [not, a, mapping]\n")
    with worker(home, senses=["s"]) as w:
        assert "s" in w.ready.failed
        answer = w.compute("s")
    assert isinstance(answer, Error) and "nerve.yaml" in answer.error.message


def test_worker_entry_point_runs_as_module(home) -> None:
    write_instance(home, {"s": {"code": "def compute(db, peers):\n    return 1\n"}})
    out = subprocess.run(
        [sys.executable, "-m", "nerve_cli.worker", "sense", "--group", "default", "--home", str(home)],
        input=b'{"type":"compute","id":7,"sense":"s"}\n', capture_output=True, timeout=30,
    )
    lines = out.stdout.decode().splitlines()
    assert out.returncode == 0 and lines[0].startswith('{"type":"ready"') and '"id":7' in lines[1]


def test_stdin_from_a_file_works(home, tmp_path) -> None:
    """epoll cannot watch a regular file or /dev/null; the worker must still read it and exit at EOF."""
    write_instance(home, {"s": {"code": "def compute(db, peers):\n    return 1\n"}})
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(b'{"type":"compute","id":3,"sense":"s"}\n')
    with open(requests, "rb") as stdin:
        out = subprocess.run(
            [sys.executable, "-m", "nerve_cli.worker", "sense", "--group", "default", "--home", str(home)],
            stdin=stdin, capture_output=True, timeout=30,
        )
    assert out.returncode == 0 and '"id":3' in out.stdout.decode()


LOADED = """
import sys

{kw}def compute(db, peers):
    return sorted(m for m in ("asyncio", "ssl", "concurrent.futures") if m in sys.modules)
"""


def test_a_worker_of_sync_senses_never_imports_asyncio(home) -> None:
    """asyncio (and ssl, concurrent.futures with it) costs start-up time and memory a sync compute never uses."""
    write_instance(home, {"plain": {"group": "sync", "code": LOADED.format(kw="")},
                          "other": {"group": "sync", "code": SLEEPY.format(secs=0, name="other")},
                          "aplain": {"group": "mixed", "code": LOADED.format(kw="")},
                          "coro": {"group": "mixed", "code": ASYNC_SLEEPY.format(secs=0, name="coro")}})
    with worker(home, "sync") as w:
        assert w.compute("plain").payload == []
        assert w.compute("other").payload == "other"
    with worker(home, "mixed") as w:
        assert "asyncio" in w.compute("aplain").payload
        assert w.compute("coro").payload == "coro"


def _switches(pid: int) -> int:
    """Voluntary context switches of every thread of the process so far (a thread going to sleep: one each)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            continue  # a thread that ended meanwhile
    return total


def test_a_message_wakes_one_idle_thread_and_the_others_sleep_on(home) -> None:
    """Every idle compute thread waits for the kernel's next line (worker.stdio.Inbox); a line wakes only the thread
    that takes it. When the next reader waited for its turn on a lock, each line also woke it (and the two threads
    passed the GIL between them on the way to the compute): 2.8-3.4 sleeps per compute there, 1.1-1.6 here."""
    quick = "def compute(db, peers):\n    return 'quick'\n"  # (no sleep of its own to count)
    write_instance(home, {"a": {"group": "g", "code": SLEEPY.format(secs=0.3, name="a")},
                          "b": {"group": "g", "code": SLEEPY.format(secs=0.3, name="b")},
                          "quick": {"group": "g", "code": quick}})
    with worker(home, "g") as w:
        w.send(Compute(1, "a"), Compute(2, "b"))  # two at once: the group's threads grow to three
        _answers(w, {1, 2})
        time.sleep(0.3)
        before, runs = _switches(w.proc.pid), 40
        for _ in range(runs):
            assert w.compute("quick").payload == "quick"
        per_compute = (_switches(w.proc.pid) - before) / runs
    assert per_compute < 2.0, f"{per_compute:.2f} threads went to sleep per compute"


def test_with_no_fd_left_for_an_epoll_a_thread_still_takes_its_lines(monkeypatch) -> None:
    """worker.stdio.Inbox: a thread that cannot make its epoll (EMFILE in a group of many senses under a low limit)
    waits with a poll object instead; every line still reaches exactly one taker."""
    import select
    import threading

    from nerve_cli.worker.stdio import Inbox

    read, write = os.pipe()
    inbox = Inbox(read, 1 << 20)
    assert inbox.polled

    def no_fds() -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(select, "epoll", no_fds)
    taken: list[bytes] = []

    def taker() -> None:
        while (line := inbox.take()) is not None:
            taken.append(line)

    threads = [threading.Thread(target=taker, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    os.write(write, b"".join(b"line %d\n" % n for n in range(50)))
    for n in range(50, 60):
        os.write(write, b"line %d\n" % n)
    deadline = time.monotonic() + 10
    while len(taken) < 60 and time.monotonic() < deadline:
        time.sleep(0.01)
    inbox.close()
    for thread in threads:
        thread.join(5)
    os.close(write)
    os.close(read)
    assert sorted(taken, key=lambda line: int(line.split()[1])) == [b"line %d\n" % n for n in range(60)]
    assert not any(thread.is_alive() for thread in threads)  # close() ended every waiting thread
