"""Hot reload on a running engine: sense code, nerve.yaml, groups."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path

from enginekit import RunningEngine, completes, errors, last_signal, read_logs, starts, wait_for, write_instance, write_sense

from nerve_cli.ops.client import request


def returns(value: object) -> str:
    return f"def compute(db, peers):\n    return {value!r}\n"


CONFIG = """
    senses:
      edited: {group: g1}
      buddy: {group: g1}
      steady: {group: g2}
    reflexes:
      - {sense: edited, interval: 200ms}
      - {sense: buddy, interval: 200ms}
      - {sense: steady, interval: 200ms}
"""


def test_edited_sense_code_takes_effect_and_other_groups_keep_their_rhythm(home: Path) -> None:
    write_instance(home, CONFIG, {"edited": returns("v1"), "buddy": returns("b"), "steady": returns("s")})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: last_signal(home, "edited") == "v1", 10, what="v1")
        steady_before = len(starts(home, "steady"))
        saved = time.time()
        write_sense(home, "edited", returns("v2"))
        wait_for(lambda: last_signal(home, "edited") == "v2", 10, what="the new code's signal")
        took = time.time() - saved
        reloads = read_logs(home, "system", "sense_reloaded")
        assert len(reloads) == 1 and reloads[0]["payload"]["senses"] == ["edited"]
        wait_for(lambda: len(starts(home, "steady")) >= steady_before + 5, 10)
        engine.stop()
    assert took < 5
    steady = [r["ts"] for r in starts(home, "steady")]
    assert max(b - a for a, b in zip(steady, steady[1:])) < 1000  # g2 never paused


def test_a_broken_edit_names_file_and_line_and_the_rest_of_the_group_keeps_running(home: Path) -> None:
    write_instance(home, CONFIG, {"edited": returns("v1"), "buddy": returns("b"), "steady": returns("s")})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: completes(home, "edited"), 10)
        write_sense(home, "edited", "def compute(db, peers)\n    return 1\n")
        failure = wait_for(lambda: [e for e in errors(home, "edited") if "could not load" in e["payload"]["message"]],
                           10, what="the load error")[0]["payload"]
        assert failure["file"].endswith("senses/edited/sense.py") and failure["line"] == 1
        buddy_now = len(completes(home, "buddy"))
        wait_for(lambda: len(completes(home, "buddy")) >= buddy_now + 3, 10, what="buddy to keep running")
        engine.stop()


def test_invalid_nerve_yaml_keeps_the_old_config_then_a_fix_applies(home: Path) -> None:
    write_instance(home, CONFIG, {"edited": returns(1), "buddy": returns(2), "steady": returns(3)})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        (home / "nerve.yaml").write_text(CONFIG.replace("200ms", "soon").replace("g2}", "g2, colour: red}"))
        rejected = wait_for(lambda: read_logs(home, "system", "config_rejected"), 10, what="rejection")
        problems = rejected[0]["payload"]["problems"]
        assert len(problems) >= 4, problems  # three bad intervals and one unknown key, all reported
        running = len(completes(home, "steady"))
        wait_for(lambda: len(completes(home, "steady")) >= running + 3, 10, what="old config to keep running")
        fixed = CONFIG.replace("- {sense: steady, interval: 200ms}", "- {sense: steady, interval: 1h}")
        (home / "nerve.yaml").write_text(textwrap.dedent(fixed))
        reloaded = wait_for(lambda: read_logs(home, "system", "config_reloaded"), 10, what="reload")
        assert any("reflexes changed" in c for c in reloaded[0]["payload"]["changes"])
        assert engine.status()["senses"]["steady"]["interval"] == 3600
        engine.stop()


def test_a_sense_added_to_nerve_yaml_starts(home: Path) -> None:
    write_instance(home, CONFIG, {"edited": returns(1), "buddy": returns(2), "steady": returns(3)})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        write_sense(home, "newcomer", returns("hello"))
        text = (home / "nerve.yaml").read_text()
        text = text.replace("steady: {group: g2}", "steady: {group: g2}\n  newcomer: {group: g3}")
        (home / "nerve.yaml").write_text(text + "  - {sense: newcomer, interval: 200ms}\n")
        wait_for(lambda: last_signal(home, "newcomer") == "hello", 15, what="the new sense's signal")
        assert any(w["group"] == "g3" and w["state"] == "ready" for w in engine.status()["workers"])
        engine.stop()


def test_a_sense_moves_to_another_group(home: Path) -> None:
    write_instance(home, CONFIG, {"edited": returns(1), "buddy": returns(2), "steady": returns(3)})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        text = (home / "nerve.yaml").read_text().replace("buddy: {group: g1}", "buddy: {group: g2}")
        (home / "nerve.yaml").write_text(text)
        wait_for(lambda: read_logs(home, "system", "config_reloaded"), 10, what="reload")

        def moved() -> bool:
            workers = {w["group"]: w for w in engine.status()["workers"]}
            return workers["g2"]["loaded"] == ["buddy", "steady"] and workers["g1"]["loaded"] == ["edited"]

        wait_for(moved, 15, what="buddy to run in g2")
        count = len(completes(home, "buddy"))
        wait_for(lambda: len(completes(home, "buddy")) >= count + 2, 10, what="buddy to compute in g2")
        assert request(home, "compute", sense="buddy")["outcome"] == "signal"
        engine.stop()


def test_a_cron_reflex_added_while_running_waits_for_its_time(home: Path) -> None:
    write_instance(home, "senses:\n  yearly: {}\n", {"yearly": returns(1)})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        with (home / "nerve.yaml").open("a") as handle:
            handle.write("reflexes:\n  - {sense: yearly, cron: '0 0 1 1 *', timezone: UTC}\n")
        wait_for(lambda: read_logs(home, "system", "config_reloaded"), 10, what="reload")
        state = engine.status()["senses"]["yearly"]
        assert state["runs"] == 0
        assert state["next_due"] > time.time() + 86400  # the next 1 January, not "overdue since 1970"
        assert not starts(home, "yearly")
        engine.stop()


def test_editing_a_sense_while_it_computes_keeps_that_computes_result(home: Path) -> None:
    slow = "import time\n\ndef compute(db, peers):\n    time.sleep(1.0)\n    return {version!r}\n"
    write_instance(home, "senses:\n  s: {}\nreflexes:\n  - {sense: s, on: [go]}\n", {"s": slow.format(version="v1")})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        request(home, "emit", channel="go")
        wait_for(lambda: starts(home, "s"), 10, what="the compute to start")
        write_sense(home, "s", slow.format(version="v2"))
        wait_for(lambda: read_logs(home, "system", "sense_reloaded"), 10, what="the reload")
        wait_for(lambda: completes(home, "s"), 10, what="the running compute to finish")
        assert completes(home, "s")[0]["payload"]["outcome"] == "signal"
        wait_for(lambda: last_signal(home, "s") == "v2", 15, what="the new code (run on save)")
        engine.stop()
    assert signals(home, "s") == ["v1", "v2"]  # the running compute recorded whole by the old code, then the new


def signals(home: Path, sense: str) -> list[object]:
    conn = sqlite3.connect(home / "data" / "senses" / f"{sense}.db")
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM _signals ORDER BY id")]
    finally:
        conn.close()


RUN_ON_SAVE = """
    senses:
      edited: {group: g1}
      quiet: {group: g1, run_on_save: false}
      steady: {group: g2}
    reflexes:
      - {sense: edited, interval: 1h}
      - {sense: quiet, interval: 1h}
      - {sense: steady, interval: 1h}
"""


def test_a_saved_sense_runs_its_new_code_once_at_once_whatever_its_interval(home: Path) -> None:
    """With `interval: 1h` the new code would first run in an hour: a save runs it once (reason `code_changed`)
    as soon as its worker has it; `run_on_save: false` waits for the next trigger; other groups do not run."""
    write_instance(home, RUN_ON_SAVE, {"edited": returns("v1"), "quiet": returns("q1"), "steady": returns("s")})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        for sense, first in (("edited", "v1"), ("quiet", "q1"), ("steady", "s")):  # a new sense runs at once
            wait_for(lambda: last_signal(home, sense) == first, 10, what=f"{sense}'s first signal")
        write_sense(home, "edited", returns("v2"))
        write_sense(home, "quiet", returns("q2"))
        wait_for(lambda: last_signal(home, "edited") == "v2", 10, what="the new code's signal")
        reloads = read_logs(home, "system", "sense_reloaded")
        assert sorted(n for r in reloads for n in r["payload"]["senses"]) == ["edited", "quiet"]
        time.sleep(0.5)  # nothing else runs: not quiet (run_on_save: false), not steady (its file did not change)
        assert [r["payload"]["reason"] for r in starts(home, "edited")] == ["interval", "code_changed"]
        assert len(starts(home, "quiet")) == 1 and len(starts(home, "steady")) == 1
        assert last_signal(home, "quiet") == "q1"
        write_sense(home, "edited", "def compute(db, peers)\n    return 3\n")  # a broken save: nothing runs
        wait_for(lambda: [e for e in errors(home, "edited") if "could not load" in e["payload"]["message"]],
                 10, what="the load error")
        write_sense(home, "edited", returns("v4"))  # fixed: the fix runs, once
        wait_for(lambda: last_signal(home, "edited") == "v4", 10, what="the fixed code's signal")
        time.sleep(0.3)
        assert len(starts(home, "edited")) == 3
        engine.stop()


def test_a_workflows_folder_created_after_start_is_watched(home: Path) -> None:
    config = CONFIG + "    workflows:\n      late: {}\n"
    write_instance(home, config, {"edited": returns("v1"), "buddy": returns("b"), "steady": returns("s")})
    assert not (home / "workflows").exists()
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        (home / "workflows").mkdir()
        (home / "workflows" / "late.py").write_text("workflow = None\n")
        wait_for(lambda: read_logs(home, "system", "workflow_reloaded", "late"), 10, what="the new workflow file")
        engine.stop()


SLOW = "import time\n\ndef compute(db, peers):\n    time.sleep(3)\n    return 1\n"


def test_a_nerve_yaml_save_during_a_reload_that_restarts_the_watch_is_applied(home: Path) -> None:
    """The gap itself, held open: a batch with a new folder restarts the watch once its reload is done, and a
    save of nerve.yaml while that reload waits (here, for a slow compute to end before its worker restarts) was
    in the old watch's queue, dropped with it."""
    config = "senses:\n  slow: {}\nreflexes:\n  - {sense: slow, interval: 100ms}\n"
    write_instance(home, config, {"slow": SLOW})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: starts(home, "slow"), 20, what="slow to be computing")
        write_sense(home, "slow", SLOW + "# edited\n")  # its worker restarts once this compute ends
        write_sense(home, "fresh", returns("new"))  # a new folder: the watch starts again after this reload
        time.sleep(1.0)  # the batch was taken (300 ms of debounce), its reload waits for slow's compute
        (home / "nerve.yaml").write_text(textwrap.dedent("""
            senses:
              slow: {}
              fresh: {}
            reflexes:
              - {sense: slow, interval: 100ms}
              - {sense: fresh, interval: 100ms}
        """))
        wait_for(lambda: last_signal(home, "fresh") == "new", 30, what="the sense nerve.yaml added in the gap")
        code, out = engine.stop()
    assert code == 0, out
