"""sense delete / gc / sense rename / workflow delete on a real instance, with a running engine where it matters."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from enginekit import RunningEngine, completes, last_signal, nerve, wait_for, write_instance

from nerve_cli.config.model import parse_duration

CONFIG = """
    senses:
      a: {}
      b: {}
      c: {peers: [a]}
    reflexes:
      - {sense: a, interval: 200ms}
      - {sense: b, on: [a]}
      - {sense: c, interval: 200ms}
"""
SCHEMA = """
    from nerve_cli.sdk import table

    @table(pk="ts")
    class Tick:
        ts: int
"""
TICK_SQL = 'CREATE TABLE "tick" ("ts" INTEGER PRIMARY KEY);\n'
A = """
    import time
    from .schema import Tick

    def compute(db, peers):
        db.insert(Tick(ts=time.time_ns()))
        return len(db.rows(Tick))
"""
B = "def compute(db, peers):\n    return 'heard'\n"
C = """
    PEER = "a"

    def compute(db, peers):
        return peers[PEER].query("SELECT count(*) AS n FROM tick")[0]["n"]
"""


def git(home: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(home), *args], capture_output=True, text=True, check=True).stdout


def first_commit(home: Path) -> None:
    """The user's own first commit, made with an identity of its own: the suite runs with none configured."""
    git(home, "init", "-q")
    git(home, "add", "-A")
    git(home, "-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-qm", "first")


def instance(home: Path) -> Path:
    write_instance(home, CONFIG, {"a": A, "b": B, "c": C}, {"a": SCHEMA})
    (home / "senses/a/migrations/0001_init.sql").write_text(TICK_SQL)
    (home / ".gitignore").write_text("data/\n__pycache__/\n")
    first_commit(home)
    return home


def test_delete_then_gc_round_trip_with_a_running_engine(home: Path) -> None:
    instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "b") and completes(home, "c"), 10, what="b and c to run")
        result = nerve("sense", "delete", "a", home=home)
        assert result.returncode == 0, result.stderr
        assert "reflexes[1] (b on [a])" in result.stdout and "sense c" in result.stdout  # the cascade, shown
        wait_for(lambda: "a" not in engine.status()["senses"], 10, what="the engine to drop a")
        assert "c" not in engine.status()["senses"]  # c read a as a peer: off with it
        gc = nerve("gc", "--older-than", "0s", home=home)
        assert gc.returncode == 1 and "works offline" in gc.stderr
        engine.stop()
    attic = list((home / "attic" / "senses").iterdir())
    assert [p.name.split(".")[0] for p in attic] == ["a"] and (attic[0] / "sense.py").is_file()
    assert not (home / "senses" / "a").exists() and (home / "data/senses/a.db").is_file()  # data kept
    assert git(home, "log", "-1", "--format=%s").strip() == "nerve: sense delete a (+4 by cascade)"
    assert git(home, "status", "--porcelain") == ""
    check = nerve("config", "check", home=home)
    assert check.returncode == 0, check.stdout  # deleted and disabled: nothing is missing

    dry = json.loads(nerve("gc", "--older-than", "0s", "--dry-run", "--json", home=home).stdout)
    assert {(i["kind"], i["what"]) for i in dry["items"]} == {("attic", f"attic/senses/{attic[0].name}"),
                                                               ("data", "data/senses/a.db"),
                                                               ("data", "data/senses/c.db")}  # disabled with a
    assert attic[0].exists()
    young = nerve("gc", "--older-than", "1d", home=home).stdout  # all of it is seconds old: kept, and said when
    assert young.startswith("nothing to collect older than 1d")
    assert "kept 3 newer than 1d (1 attic entry, 2 data): collectable from " in young
    take = re.search(r"`--older-than (\d+[smhd])` takes them now", young)
    kept = json.loads(nerve("gc", "--older-than", "1d", "--dry-run", "--json", home=home).stdout)
    youngest = min(y["age_s"] for y in kept["young"])
    assert kept["items"] == [] and 0 <= kept["young_older_than_s"] <= youngest  # a whole --older-than that takes all
    assert take and parse_duration(take[1]) <= youngest
    assert {(y["kind"], y["what"]) for y in kept["young"]} == {(i["kind"], i["what"]) for i in dry["items"]}
    for y in kept["young"]:
        assert 0 <= y["age_s"] < 600 and abs(y["collectable_ms"] / 1000 - (time.time() + 86400 - y["age_s"])) < 600
    assert dry["young"] == [] and dry["young_older_than_s"] is None
    gc = nerve("gc", "--older-than", "0s", home=home)
    assert gc.returncode == 0, gc.stderr
    assert "senses.a stays in nerve.yaml: senses.c.peers, reflexes[1].on still name it" in gc.stdout
    assert not attic[0].exists() and not (home / "data/senses/a.db").exists()
    assert git(home, "log", "-1", "--format=%s").strip() == "nerve: gc (older than 0s)"
    assert git(home, "status", "--porcelain") == ""


def test_rename_with_a_running_engine_keeps_data_and_references(home: Path) -> None:
    instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: (last_signal(home, "c") or 0) >= 2, 10, what="c to read a")
        result = nerve("sense", "rename", "a", "z", home=home)
        assert result.returncode == 0, result.stderr
        assert "senses/c/sense.py:2 names `a` as a string" in result.stderr
        before = last_signal(home, "z")
        assert before and before >= 2  # the database moved with its rows
        wait_for(lambda: (last_signal(home, "z") or 0) > before, 15, what="z to run under its new name")
        heard = len(completes(home, "b"))
        wait_for(lambda: len(completes(home, "b")) > heard, 10, what="b to hear z")
        assert "a" not in engine.status()["senses"]
        engine.stop()
    text = (home / "nerve.yaml").read_text()
    assert "z: {}" in text and "peers: [z]" in text and "on: [z]" in text and "sense: z" in text
    assert "enabled" not in text  # the pause of the old sense left no trace
    assert (home / "senses/z/sense.py").is_file() and not (home / "senses/a").exists()
    assert not (home / "data/senses/a.db").exists()
    assert git(home, "log", "-1", "--format=%s").strip() == "nerve: sense rename a z"
    assert git(home, "status", "--porcelain") == ""


def test_rename_refuses_a_taken_name_and_changes_nothing(home: Path) -> None:
    instance(home)
    before = (home / "nerve.yaml").read_text()
    result = nerve("sense", "rename", "a", "b", home=home)
    assert result.returncode == 1 and "there already is a sense `b`" in result.stderr
    assert (home / "nerve.yaml").read_text() == before and (home / "senses/a").is_dir()


def test_workflow_delete_moves_the_file_to_the_attic_and_disables_it(home: Path) -> None:
    write_instance(home, "senses: {}\n", {})
    (home / ".gitignore").write_text("data/\n")
    first_commit(home)
    assert nerve("workflow", "new", "triage", home=home).returncode == 0
    result = nerve("workflow", "delete", "triage", home=home)
    assert result.returncode == 0, result.stderr
    assert not (home / "workflows/triage.py").exists()
    assert [p.name.startswith("triage.") for p in (home / "attic/workflows").iterdir()] == [True]
    listed = json.loads(nerve("workflow", "list", "--json", home=home).stdout)["workflows"]
    assert [w["config"]["enabled"] for w in listed if w["name"] == "triage"] == [False]
    assert git(home, "log", "-1", "--format=%s").strip() == "nerve: workflow delete triage"
    again = nerve("workflow", "delete", "triage", home=home)
    assert again.returncode == 1 and "already deleted" in again.stderr


def test_gc_removes_the_entries_of_a_deleted_workflow_and_sense_once_nothing_is_left(home: Path) -> None:
    instance(home)
    assert nerve("workflow", "new", "triage", home=home).returncode == 0
    assert nerve("workflow", "delete", "triage", home=home).returncode == 0
    assert nerve("sense", "delete", "b", home=home).returncode == 0  # nothing names b
    text = (home / "nerve.yaml").read_text()
    assert "triage" in text and "b:" in text  # deleting keeps the entries, disabled
    gc = json.loads(nerve("gc", "--older-than", "0s", "--json", home=home).stdout)
    entries = {(i["what"], i["why"]) for i in gc["items"] if i["kind"] == "entry"}
    assert entries == {("workflows.triage", "deleted and nothing of it is left in the attic"),
                       ("senses.b", "deleted and nothing of it is left in the attic, with the 1 reflex scheduling it")}
    text = (home / "nerve.yaml").read_text()
    assert "triage" not in text and "b:" not in text and "sense: b" not in text
    assert [p for kind in ("senses", "workflows") for p in (home / "attic" / kind).glob("*")] == []
    assert nerve("config", "check", home=home).returncode == 0
    assert git(home, "log", "-1", "--format=%s").strip() == "nerve: gc (older than 0s)"
    changed = git(home, "show", "--name-only", "--format=", "HEAD").split()
    assert "nerve.yaml" in changed and {p.split("/")[1] for p in changed if p != "nerve.yaml"} == {"senses", "workflows"}
    assert all(p.startswith("attic/") for p in changed if p != "nerve.yaml")
    assert git(home, "status", "--porcelain") == ""


def test_a_disabled_then_enabled_sense_runs_again(home: Path) -> None:
    instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "a"), 10, what="a to run")
        assert nerve("sense", "disable", "a", home=home).returncode == 0
        wait_for(lambda: "a" not in engine.status()["senses"], 10, what="the engine to drop a")
        ran = len(completes(home, "a"))
        result = nerve("sense", "enable", "a", home=home)
        assert result.returncode == 0 and "reflexes[0] (a every 200ms)" in result.stdout, result.stdout
        wait_for(lambda: len(completes(home, "a")) > ran, 10, what="a to run again on its own interval")
        engine.stop()


def test_a_deleted_sense_comes_back_as_the_delete_message_says(home: Path) -> None:
    import re
    import shutil

    instance(home)
    result = nerve("sense", "delete", "b", home=home)
    assert result.returncode == 0, result.stderr
    steps = re.search(r"to restore it, move (\S+) back to (\S+), then `nerve (.+)`$", result.stdout.strip())
    assert steps, result.stdout
    shutil.move(home / steps[1], home / steps[2])
    enabled = nerve(*steps[3].split(), home=home)
    assert enabled.returncode == 0, enabled.stderr
    assert "reflexes[1] (b on [a])" in enabled.stdout  # its reflex comes back with it
    assert nerve("sense", "compute", "b", home=home).stdout.splitlines()[-1] == '"heard"'
    assert "enabled: false" not in (home / "nerve.yaml").read_text()


def test_enabling_a_deleted_sense_or_workflow_says_to_bring_its_code_back_first(home: Path) -> None:
    instance(home)
    assert nerve("workflow", "new", "triage", home=home).returncode == 0
    assert nerve("sense", "delete", "b", home=home).returncode == 0
    assert nerve("workflow", "delete", "triage", home=home).returncode == 0
    before, head = (home / "nerve.yaml").read_text(), git(home, "rev-parse", "HEAD")
    sense = nerve("sense", "enable", "b", home=home)
    assert sense.returncode == 1 and "sense `b` is deleted: its code is in attic/senses/b." in sense.stderr
    assert "move it back to senses/b first, then `nerve sense enable b`" in sense.stderr
    workflow = nerve("workflow", "enable", "triage", home=home)
    assert workflow.returncode == 1 and "workflow `triage` is deleted: its code is in attic/workflows/" in workflow.stderr
    assert "move it back to workflows/triage.py first" in workflow.stderr
    assert (home / "nerve.yaml").read_text() == before and git(home, "rev-parse", "HEAD") == head
    assert nerve("config", "check", home=home).returncode == 0  # still valid: nothing turned on without its code


def test_rename_carries_its_listeners_cursors_so_they_get_nothing_twice(home: Path) -> None:
    """A listener of the renamed sense goes on from the event it had reached: it is not handed the sense's
    whole history again under the new name (every old signal, side effects repeated)."""
    from enginekit import write_sense
    from eventkit import STORE_SCHEMA, got, store_sense

    from nerve_cli.schema.migrate import generate_migration

    write_instance(home, """
        senses:
          open-prs: {}
          store: {}
        reflexes:
          - {sense: open-prs, interval: 100ms}
          - {sense: store, on: [open-prs]}
    """, {"open-prs": "def compute(db, peers):\n    return 1\n"})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    (home / ".gitignore").write_text("data/\n__pycache__/\n")
    first_commit(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) >= 3, 20, what="store to consume open-prs")
        result = nerve("sense", "rename", "open-prs", "pr-count", "--json", home=home)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["cursors"] == [{"listener": "store", "from": "open-prs", "to": "pr-count"}]
        seen = len(got(home, "store"))
        wait_for(lambda: len(got(home, "store")) >= seen + 3, 20, what="store to hear pr-count")
        engine.stop()
    ids = [event_id for _, event_id, _ in got(home, "store")]
    assert ids == sorted(set(ids)), ids  # every signal once, in order: none of the old ones again
