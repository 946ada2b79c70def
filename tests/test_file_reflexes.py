"""File reflexes on a real folder: a burst is one compute naming each path once; changes made while the engine
was stopped arrive at its next start; a pattern into the instance's own data/ is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, completes, nerve, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, got, store_sense

from nerve_cli.schema.migrate import generate_migration

pytestmark = pytest.mark.timeout(90)


def file_instance(home: Path, outside: Path) -> None:
    write_instance(home, f"""
        senses:
          store: {{}}
        reflexes:
          - {{sense: store, paths: ["notes/*.log", "{outside}/**/*.txt"], debounce: 300ms}}
    """, {})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")


def changes(home: Path) -> list[tuple[str, str]]:
    return [(Path(p["path"]).name, p["change"]) for _, _, p in got(home, "store")]


def file_computes(home: Path) -> list[dict]:
    return [c["payload"] for c in completes(home, "store") if c["payload"]["reason"].startswith("files ")]


def test_a_burst_is_one_compute_and_changes_while_stopped_arrive_at_start(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "docs"
    (outside / "deep" / "er").mkdir(parents=True)
    (home / "notes").mkdir(parents=True)
    log = home / "notes" / "app.log"
    log.write_text("start\n")
    (outside / "deep" / "er" / "old.txt").write_text("there before the first start\n")
    file_instance(home, outside)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: read_logs(home, "system", "engine_started"), what="the engine to start")
        with log.open("a") as f:
            for i in range(100):
                f.write(f"line {i}\n")
                f.flush()
        wait_for(lambda: file_computes(home), 15, what="the burst's compute")
        (outside / "deep" / "er" / "new.txt").write_text("made while running\n")
        wait_for(lambda: len(file_computes(home)) == 2, 15, what="the nested file's compute")
        code, out = engine.stop()
    assert code == 0, out
    first, second = file_computes(home)
    assert first["events"] == 1 and first["reason"] == "files notes/*.log"
    assert changes(home) == [("app.log", "modified"), ("new.txt", "added")]  # the old file was the baseline
    rows = got(home, "store")
    assert rows[0][2]["path"] == str(log) and rows[0][2]["size"] == log.stat().st_size

    with log.open("a") as f:  # while no engine runs
        f.write("one more\n")
    (home / "notes" / "fresh.log").write_text("new\n")
    (outside / "deep" / "er" / "old.txt").unlink()
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(changes(home)) == 5, 15, what="the changes made while stopped")
        code, out = engine.stop()
    assert code == 0, out
    assert sorted(changes(home)[2:]) == [("app.log", "modified"), ("fresh.log", "added"), ("old.txt", "deleted")]
    logged = [r["payload"] for r in read_logs(home, "reflex", "files_changed")]
    assert sum(r["changes"] for r in logged) == 5


def test_config_check_refuses_data_and_warns_about_a_missing_folder(home: Path, tmp_path: Path) -> None:
    write_instance(home, f"""
        senses:
          store: {{}}
        reflexes:
          - {{sense: store, paths: ["data/senses/*.db"]}}
          - {{sense: store, paths: ["**/*.csv"]}}
          - {{sense: store, paths: ["{home}/data/logs.db"]}}
          - {{sense: store, paths: ["{tmp_path}/nowhere/*.md"], debounce: 1s}}
    """, {"store": "def compute(db, peers, trigger):\n    return len(trigger.events)\n"})
    result = cli("config", "check", "--json", "--fast", "--home", str(home))
    assert result.exit_code == 1, result.stdout
    problems = {(p["path"], p["severity"]): p["message"] for p in json.loads(result.stdout)["problems"]}
    for index in (0, 1, 2):
        assert "data/ folder" in problems[(f"reflexes[{index}].paths[0]", "error")]
    refused = nerve("run", "--for", "1s", home=home)
    assert refused.returncode == 1 and "feedback loop" in refused.stderr + refused.stdout
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text().split("  - {sense: store, paths: [\"data")[0]
                                     + f'  - {{sense: store, paths: ["{tmp_path}/nowhere/*.md"]}}\n')
    result = cli("config", "check", "--json", "--fast", "--home", str(home))
    assert result.exit_code == 0, result.stdout
    warned = [p["message"] for p in json.loads(result.stdout)["problems"]]
    assert any("nowhere does not exist" in m for m in warned), warned
    mesh = json.loads(cli("mesh", "--json", "--home", str(home)).stdout)
    assert {n["kind"] for n in mesh["nodes"] if n["name"] == f"{tmp_path}/nowhere/*.md"} == {"files"}
    assert any(e["source"] == f"files:{tmp_path}/nowhere/*.md" and e["target"] == "sense:store" for e in mesh["edges"])
