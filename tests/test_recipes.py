"""`nerve sense new NAME --from RECIPE`: each recipe, scaffolded by the CLI, run by the engine on real events."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Iterator

import pytest
from enginekit import RunningEngine, completes, nerve, wait_for
from eventkit import Emitter

RECIPES = [
    ("tasks", "projection", "task.created"),
    ("on-change", "reaction", "tasks"),
    ("both-done", "wait-all", "a.done,b.done"),
    ("combined", "merge", "x,y"),
    ("failures", "switch", "jobs"),
    ("alive", "heartbeat", "beat"),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, RunningEngine, Emitter]]:
    home = tmp_path_factory.mktemp("recipes") / "home"
    assert nerve("init", home=home).returncode == 0
    for name, recipe, sources in RECIPES:
        made = nerve("sense", "new", name, "--from", recipe, "--on", sources, "--group", "recipes", home=home)
        assert made.returncode == 0, made.stderr
        assert f"from the {recipe} recipe" in made.stdout and f"running it on {sources.replace(',', ', ')}" in made.stdout
    quiet = home / "senses" / "alive" / "sense.py"  # the heartbeat, made quick enough to watch
    quiet.write_text(quiet.read_text().replace("QUIET_S = 600.0", "QUIET_S = 0.5"))
    config = home / "nerve.yaml"
    assert "    interval: 1m\n" in config.read_text().split("sense: alive")[1]
    config.write_text(config.read_text().replace("sense: alive\n    on: [beat]\n    interval: 1m",
                                                 "sense: alive\n    on: [beat]\n    interval: 100ms"))
    with RunningEngine(home) as running:
        running.wait_ready(groups=2)
        emitter = Emitter(home)
        yield home, running, emitter
        emitter.close()
        code, out = running.stop()
        assert code == 0, out


def signals(home: Path, sense: str) -> list:
    conn = sqlite3.connect((home / "data" / "senses" / f"{sense}.db").resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM _signals ORDER BY id")]
    finally:
        conn.close()


def step(home: Path, emitter: Emitter, channel: str, payload, *, runs: dict[str, int]) -> None:
    """Emit one event and wait until each sense in `runs` has completed that many computes in all."""
    assert emitter.emit(channel, payload)["ok"]
    for sense, n in runs.items():
        wait_for(lambda: len(completes(home, sense)) >= n, 15, what=f"{sense} to run {n} time(s)")


def test_projection_folds_silently_and_reaction_fires_on_change(engine) -> None:
    home, _, emitter = engine
    step(home, emitter, "task.created", {"id": 1}, runs={"tasks": 1, "on-change": 1})
    step(home, emitter, "task.created", {"id": 2}, runs={"tasks": 2, "on-change": 2})
    step(home, emitter, "task.created", {"id": 1, "title": "renamed"}, runs={"tasks": 3})  # same key: value unchanged
    assert signals(home, "tasks") == [{"items": 1}, {"items": 2}]
    third = completes(home, "tasks")[2]["payload"]
    assert third["outcome"] == "silent" and third["kept"] is True and third["events"] == 1  # state advanced silently
    conn = sqlite3.connect((home / "data" / "senses" / "tasks.db").resolve().as_uri() + "?mode=ro", uri=True)
    assert json.loads(conn.execute("SELECT payload FROM item WHERE key = '1'").fetchone()[0])["title"] == "renamed"
    conn.close()
    assert signals(home, "on-change") == [{"source": "tasks", "old": None, "new": {"items": 1}},
                                          {"source": "tasks", "old": {"items": 1}, "new": {"items": 2}}]


def test_wait_all_fires_once_every_source_has_arrived(engine) -> None:
    home, _, emitter = engine
    step(home, emitter, "a.done", 1, runs={"both-done": 1})
    step(home, emitter, "a.done", 2, runs={"both-done": 2})
    assert signals(home, "both-done") == []
    step(home, emitter, "b.done", 3, runs={"both-done": 3})
    step(home, emitter, "b.done", 4, runs={"both-done": 4})  # a new round: b has arrived, a has not
    assert signals(home, "both-done") == [{"a.done": 2, "b.done": 3}]


def test_merge_combines_the_latest_of_each_source(engine) -> None:
    home, _, emitter = engine
    step(home, emitter, "x", {"cpu": 10}, runs={"combined": 1})
    step(home, emitter, "y", {"disk": 80}, runs={"combined": 2})
    step(home, emitter, "x", {"cpu": 12}, runs={"combined": 3})
    assert signals(home, "combined") == [{"x": {"cpu": 10}, "y": None}, {"x": {"cpu": 10}, "y": {"disk": 80}},
                                         {"x": {"cpu": 12}, "y": {"disk": 80}}]


def test_switch_passes_matches_and_consumes_the_rest_silently(engine) -> None:
    home, _, emitter = engine
    step(home, emitter, "jobs", {"id": 1, "status": "ok"}, runs={"failures": 1})
    first = completes(home, "failures")[0]["payload"]
    assert first["outcome"] == "silent" and first["events"] == 1 and "kept" not in first
    step(home, emitter, "jobs", {"id": 2, "status": "failed"}, runs={"failures": 2})
    matched = signals(home, "failures")
    assert len(matched) == 1 and [m["payload"] for m in matched[0]["matched"]] == [{"id": 2, "status": "failed"}]


@pytest.mark.parametrize("args, message", [
    (["--from", "projection"], "give its sources with --on"),
    (["--from", "merge", "--on", "x"], "give two or more with --on"),
    (["--from", "fold"], "unknown recipe 'fold'"),
    (["--from", "switch", "--on", "me"], "cannot listen to its own signals"),
])
def test_a_recipe_without_what_it_needs_is_refused_and_writes_nothing(home: Path, args: list[str], message: str) -> None:
    assert nerve("init", home=home).returncode == 0
    made = nerve("sense", "new", "me", *args, home=home)
    assert made.returncode == 1 and message in made.stderr, made.stderr
    assert not (home / "senses" / "me").exists() and "me:" not in (home / "nerve.yaml").read_text()


def test_heartbeat_fires_when_a_source_goes_quiet_and_when_it_is_back(engine) -> None:
    home, _, emitter = engine
    # nothing was ever sent to `beat`: it goes quiet QUIET_S after the heartbeat's first compute, once
    quiet = wait_for(lambda: signals(home, "alive"), 15, what="the heartbeat to notice the silence")[0]
    assert quiet["back"] == [] and [q["source"] for q in quiet["quiet"]] == ["beat"]
    assert emitter.emit("beat", {"n": 1})["ok"]
    back = wait_for(lambda: [s for s in signals(home, "alive") if s["back"]], 15, what="the source heard again")[0]
    assert back["quiet"] == [] and back["back"][0]["source"] == "beat" and back["back"][0]["quiet_s"] >= 0.5
    again = wait_for(lambda: signals(home, "alive")[signals(home, "alive").index(back) + 1:], 15,
                     what="the heartbeat to notice the next silence")
    assert again[0]["quiet"][0]["source"] == "beat" and len(signals(home, "alive")) == 3  # each change once
