"""`nerve status` tells the truth: load-failed with its error and since when; last error with its time, cleared
after a success; nerve.yaml warnings counted apart from errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from enginekit import RunningEngine, completes, errors, nerve, read_logs, wait_for, write_instance

CONFIG = """
    senses:
      broken: {}
      flip: {}
      ok: {}
    reflexes:
      - {sense: broken, interval: 200ms}
      - {sense: flip, interval: 200ms}
      - {sense: ok, interval: 1h, on: [flip, flipp]}
"""
FLIP = """
    from pathlib import Path

    def compute(db, peers):
        if Path("fail-now").exists():
            raise RuntimeError("told to fail")
        return 1
"""


def status(home: Path) -> dict:
    """The status document, with senses keyed by name for the checks below."""
    result = nerve("status", "--json", home=home)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    return {**doc, "senses": {s["name"]: s for s in doc["senses"]}}


def test_load_failed_last_error_and_warnings(home: Path) -> None:
    write_instance(home, CONFIG, {"broken": "def compute(db, peers)\n    return 1\n", "flip": FLIP,
                                  "ok": "def compute(db, peers):\n    return 1\n"})
    (home / "fail-now").write_text("")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: errors(home, "flip"), 10, what="flip to fail")
        data = status(home)
        broken = data["senses"]["broken"]
        assert broken["state"] == "load-failed" and broken["next_due"] is None
        assert broken["load_error"]["type"] == "SyntaxError"
        assert (broken["load_error"]["file"], broken["load_error"]["line"]) == ("senses/broken/sense.py", 1)
        assert data["engine"]["started_ms"] <= broken["load_failed_since_ms"] <= data["engine"]["started_ms"] + 30_000
        flip = data["senses"]["flip"]
        assert flip["last_error"] == "told to fail" and flip["last_error_time_ms"] >= data["engine"]["started_ms"]
        # a misspelt channel is a warning: shown and counted, but never as an error
        assert len(data["warnings"]) == 1 and "flipp" in data["warnings"][0]["message"]
        assert data["senses"]["ok"]["errors"] == 0
        table = nerve("status", home=home).stdout
        assert "load-failed since" in table and "SyntaxError" in table and "senses/broken/sense.py:1" in table
        assert "told to fail (" in table and "Z)" in table  # piped: when, in RFC 3339 UTC
        assert "warning: nerve.yaml" in table

        (home / "fail-now").unlink()
        ran = len(completes(home, "flip"))
        wait_for(lambda: len(completes(home, "flip")) > ran + 1, 10, what="flip to succeed")
        flip = status(home)["senses"]["flip"]
        assert flip["last_error"] is None and flip["last_error_time_ms"] is None
        assert flip["errors"] >= 1  # the count and the log keep the history
        health = wait_for(lambda: [r for r in read_logs(home, "system", "warning")], 5, what="the warning row")
        assert "flipp" in health[0]["payload"]["message"]
        engine.stop()
    assert any(e["payload"]["message"] == "told to fail" for e in errors(home, "flip"))
    assert not [e for e in errors(home) if "flipp" in json.dumps(e["payload"])]


def test_a_rejected_reload_reports_warnings_as_warnings(home: Path) -> None:
    write_instance(home, "senses:\n  alpha: {}\nreflexes:\n  - {sense: alpha, interval: 1h}\n",
                   {"alpha": "def compute(db, peers):\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        (home / "nerve.yaml").write_text(textwrap.dedent("""
            senses:
              alpha: {throttle: soon}
            reflexes:
              - {sense: alpha, interval: 1h, on: [alpah]}
        """))
        rejected = wait_for(lambda: read_logs(home, "system", "config_rejected"), 10, what="the rejection")[0]
        code, out = engine.stop()
    assert len(rejected["payload"]["problems"]) == 1 and "throttle" in rejected["payload"]["problems"][0]
    assert len(rejected["payload"]["warnings"]) == 1 and "alpah" in rejected["payload"]["warnings"][0]
    assert "(1 error, 1 warning):" in out
    assert [line for line in out.splitlines() if "alpah" in line][0].split()[1] == "warn"
