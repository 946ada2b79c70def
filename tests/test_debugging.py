"""A failing compute shows the same detail whichever path ran it: type, file:line, traceback and its prints."""

from __future__ import annotations

import json
from pathlib import Path

from enginekit import RunningEngine, nerve, read_logs, wait_for, write_instance

CONFIG = """
    senses:
      flaky: {}
      steady: {}
    reflexes:
      - {sense: steady, interval: 200ms}
"""
FLAKY = """
    def compute(db, peers):
        print("about to fail")
        return 1 / 0
"""
STEADY = """
    import sys

    def compute(db, peers):
        print("tick")
        print("to stderr", file=sys.stderr)
        return 1
"""


def check(data: dict, via: str) -> None:
    assert data["outcome"] == "error" and data["via"] == via
    error = data["error"]
    assert error["type"] == "ZeroDivisionError" and error["message"] == "division by zero"
    assert (error["file"], error["line"]) == ("senses/flaky/sense.py", 4)
    assert "return 1 / 0" in error["traceback"] and "Traceback" in error["traceback"]
    assert data["output"] == [{"stream": "stdout", "text": "about to fail"}]


def test_a_failing_compute_through_the_engine_shows_file_line_traceback_and_prints(home: Path) -> None:
    write_instance(home, CONFIG, {"flaky": FLAKY, "steady": STEADY})
    check(json.loads(nerve("sense", "compute", "flaky", "--json", home=home).stdout), "worker")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        check(json.loads(nerve("sense", "compute", "flaky", "--json", home=home).stdout), "engine")
        shown = nerve("sense", "compute", "flaky", home=home)
        assert shown.returncode == 1
        assert "flaky | about to fail" in shown.stderr and "senses/flaky/sense.py:4" in shown.stderr
        assert "return 1 / 0" in shown.stderr
        wait_for(lambda: read_logs(home, "reflex", "output", "steady"), 10, what="steady's prints in the log")
        code, out = engine.stop()
    assert code == 0
    assert "print  steady #" in out and ": tick" in out and "(stderr): to stderr" in out  # under the sense's name
    logged = read_logs(home, "reflex", "output", "steady")[0]["payload"]
    assert logged["lines"] == [{"stream": "stdout", "text": "tick"}, {"stream": "stderr", "text": "to stderr"}]
    assert isinstance(logged["compute_id"], int)
    flaky = read_logs(home, "reflex", "output", "flaky")
    assert [p["payload"]["lines"] for p in flaky][-1] == [{"stream": "stdout", "text": "about to fail"}]


def test_prints_are_bounded_per_compute(home: Path) -> None:
    from sensekit import worker
    from sensekit import write_instance as write_sense_instance

    from nerve_cli.worker.capture import MAX_LINE_CHARS, MAX_LINES

    code = f"""
    def compute(db, peers):
        print("x" * {MAX_LINE_CHARS + 50})
        for i in range({MAX_LINES + 300}):
            print(i)
        return "done"
    """
    write_sense_instance(home, {"loud": {"code": code}})
    with worker(home) as w:
        answer = w.compute("loud")
        lines = [o.text for o in w.outputs[answer.id]]
    assert answer.payload == "done"
    assert len(lines) == MAX_LINES + 1
    assert lines[0].endswith("… [50 more characters]") and len(lines[0]) < MAX_LINE_CHARS + 40
    assert lines[-1] == f"[nerve: 301 more line(s) of output not kept; the limit is {MAX_LINES}]"


def test_logs_show_a_senses_signals_and_prints(home: Path) -> None:
    import subprocess
    import sys

    write_instance(home, CONFIG, {"flaky": FLAKY, "steady": STEADY.replace("return 1", "return {'n': 1, 'note': 'x' * 300}")})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(read_logs(home, "reflex", "output", "steady")) >= 3, 10, what="three computes")
        follow = subprocess.Popen([sys.executable, "-m", "nerve_cli", "logs", "--signals", "-f", "--json",
                                   "--ref", "steady", "-n", "1", "--home", str(home)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            seen = [json.loads(follow.stdout.readline()) for _ in range(3)]  # the newest, then two new ones
        finally:
            follow.kill()
            follow.wait(10)
        engine.stop()
    assert all(r["source"] == "signal" and r["ref_id"] == "steady" for r in seen)
    assert seen[0]["signal_id"] < seen[1]["signal_id"] < seen[2]["signal_id"]

    signals = [json.loads(line) for line in nerve("logs", "--ref", "steady", "--signals", "--json", "-n", "2",
                                                   home=home).stdout.splitlines()]
    assert len(signals) == 2 and signals[-1]["payload"] == {"n": 1, "note": "x" * 300}  # whole, never cut
    prints = nerve("logs", "--ref", "steady", "--prints", "-n", "2", home=home).stdout
    assert "print" in prints and "tick" in prints and "(stderr) to stderr" in prints
    both = [json.loads(line) for line in nerve("logs", "--ref", "steady", "--signals", "--prints", "--json",
                                                "-n", "10", home=home).stdout.splitlines()]
    assert {r["type"] for r in both} == {"signal", "output"}
    assert [r["time_ms"] for r in both] == sorted(r["time_ms"] for r in both)
