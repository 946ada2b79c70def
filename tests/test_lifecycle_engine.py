"""`nerve sense disable` against a running engine: the hot reload stops the sense, the others keep running."""

from __future__ import annotations

from pathlib import Path

from enginekit import RunningEngine, nerve, read_logs, starts, wait_for, write_instance

from nerve_cli.instance.git import commit, init_repo

CONFIG = """\
senses:
  ticker: {group: g1}   # the one we turn off
  listener: {group: g1}
  steady: {group: g2}
reflexes:
  - {sense: ticker, interval: 200ms}
  - {sense: listener, on: [ticker]}
  - {sense: steady, interval: 200ms}
"""


def returns(value: object) -> str:
    return f"def compute(db, peers):\n    return {value!r}\n"


def test_disable_reaches_a_running_engine_through_hot_reload(home: Path) -> None:
    write_instance(home, CONFIG, {"ticker": returns(1), "listener": returns(2), "steady": returns(3)})
    init_repo(home)
    commit(home, ["nerve.yaml"], "first")
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: len(starts(home, "ticker")) >= 3 and starts(home, "listener"), 15, what="ticker to run")
        done = nerve("sense", "disable", "ticker", home=home)
        assert done.returncode == 0, done.stderr
        assert "reflexes[1] (listener on [ticker])" in done.stdout and "listens to ticker" in done.stdout
        reloaded = wait_for(lambda: read_logs(home, "system", "config_reloaded"), 10, what="config_reloaded")
        assert "sense ticker disabled" in reloaded[0]["payload"]["changes"]
        stopped_at = len(starts(home, "ticker"))
        steady_now = len(starts(home, "steady"))
        # ten more steady runs (~2 s at 200 ms) while ticker would have run ten times too
        wait_for(lambda: len(starts(home, "steady")) >= steady_now + 10, 15, what="steady to keep running")
        assert len(starts(home, "ticker")) == stopped_at
        scheduled = engine.status()["senses"]  # the engine's scheduler holds enabled senses only
        assert "ticker" not in scheduled and "steady" in scheduled
        code, out = engine.stop()
    assert code == 0, out
    assert "ticker" in (home / "nerve.yaml").read_text() and "# the one we turn off" in (home / "nerve.yaml").read_text()
