"""File reflexes on a real folder: a burst is one compute naming each path once; changes made while the engine
was stopped arrive at its next start; a pattern into the instance's own data/ is refused."""

from __future__ import annotations

import json
import time
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


def test_links_below_a_root_are_not_followed_by_the_watcher_or_the_scan(home: Path, tmp_path: Path) -> None:
    """A link to `/` made the watcher report paths through /proc, a link to another folder reported its
    files, and after a restart a linked folder's file was reported deleted and added again (the scan did not
    follow links, the watcher did). One rule for both: links below the root are not followed, and each linked
    folder is named once."""
    tree, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    (tree / "real").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("not the tree's\n")
    (tree / "out").symlink_to(elsewhere)
    (tree / "again").symlink_to(tree / "real")
    (tree / "root").symlink_to("/")
    (tree / "file-link.txt").symlink_to(elsewhere / "secret.txt")
    (tree / "real" / "mine.txt").write_text("the tree's\n")
    write_instance(home, f"""
        senses:
          store: {{}}
        reflexes:
          - {{sense: store, paths: ["{tree}/**/*.txt"]}}
    """, {})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    for run in range(2):
        with RunningEngine(home) as engine:
            engine.wait_ready()
            wait_for(lambda: len(read_logs(home, "system", "warning")) >= 2 * (run + 1), 15,
                     what="the linked folders named")
            (elsewhere / "secret.txt").write_text(f"changed {run}\n")  # through `out` and `file-link.txt`
            (tree / "real" / f"new{run}.txt").write_text("made in the tree\n")
            wait_for(lambda: len(changes(home)) == 2 * run + 1, 15, what="the tree's own file")
            (tree / f"made{run}").mkdir()  # beside the links: the tree is watched around them
            deeper = tree / f"made{run}" / "deeper.txt"

            def written_and_seen() -> bool:  # until its folder's watch has started: a write a second
                with deeper.open("a") as f:
                    f.write("in a folder made while running\n")
                until = time.monotonic() + 1
                while time.monotonic() < until:
                    if ("deeper.txt", "added") in changes(home)[2 * run:]:
                        return True
                    time.sleep(0.05)
                return False

            wait_for(written_and_seen, 30, what="the file in the folder made while running")
            code, out = engine.stop()
        assert code == 0, out
    seen = [c for c in changes(home) if c != ("deeper.txt", "modified")]  # writes once its watch had started
    assert seen == [("new0.txt", "added"), ("deeper.txt", "added"),  # nothing through a link, no churn
                    ("new1.txt", "added"), ("deeper.txt", "added")]
    paths = [p["path"] for _, _, p in got(home, "store")]
    assert all(Path(p).parent in (tree / "real", tree / "made0", tree / "made1") for p in paths), paths
    warned = {r["payload"]["message"].split(" is a link")[0] for r in read_logs(home, "system", "warning")
              if r["ref"] == "paths"}
    assert warned == {f"file reflexes: {tree / name}" for name in ("out", "again", "root")}
