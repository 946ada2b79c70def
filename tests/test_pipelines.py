"""Declarative pipelines: a reviewed file of steps, checked whole, run as a thread, drawn by mesh."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from conftest import cli, nerve
from enginekit import RunningEngine, thread_statuses, wait_for, write_instance

CONFIG = """
    senses: {}
    workflows:
      release: {}
"""
PIPELINE = """
    title: Release a version
    roles: release_roles
    steps:
      - id: notes
        who: model
        model: echo
        do: Write the release notes
      - id: build
        who: builder
        needs: [notes]
        risk: R1
      - id: tests
        who: builder
        needs: [notes]
      - id: publish
        who: builder
        needs: [build, tests]
        irreversible: true
        risk: R1
"""
ROLES = """
    from nerve_cli.sdk import RoleResult

    async def builder(messages):
        return RoleResult(f"done after {len(messages) - 1} messages", {"ok": True})
"""
# five problems: an unknown key, a duplicate id, a need that is no step, a loop, a risk that is no tier
BROKEN = """
    steps:
      - id: build
        who: person
        colour: red
      - id: build
        who: person
      - id: test
        who: person
        needs: [build, deploy]
      - id: a
        who: person
        needs: [b]
        risk: R9
      - id: b
        who: person
        needs: [a]
"""


def instance(home: Path, pipeline: str) -> Path:
    write_instance(home, CONFIG, {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows/release.pipeline.yaml").write_text(textwrap.dedent(pipeline))
    (home / "workflows/release_roles.py").write_text(textwrap.dedent(ROLES))
    return home


def test_a_pipeline_file_with_five_problems_gets_five_errors_at_once(home: Path) -> None:
    instance(home, BROKEN)
    checked = cli("workflow", "check", "--json")
    assert checked.exit_code == 1, checked.stdout
    doc = json.loads(checked.stdout)
    assert doc["workflows"] == [{"name": "release", "kind": "pipeline", "file": "workflows/release.pipeline.yaml",
                                 "errors": 5, "warnings": 0}]
    found = [(p["file"], p["line"], p["message"]) for p in doc["problems"] if p["severity"] == "error"]
    assert all(f == "workflows/release.pipeline.yaml" for f, _, _ in found)
    messages = " | ".join(m for _, _, m in found)
    for needle in ("unknown step key `colour`", "duplicate step id `build`", "needs `deploy`, which is not a step",
                   "loop: a → b → a", "`risk` is one of R0, R1, R2, R3"):
        assert needle in messages, messages
    assert [line for _, line, _ in found] == [5, 6, 10, 13, 14]
    assert "workflows/release.pipeline.yaml:13: error: steps[3].needs: steps need each other in a loop" in \
        cli("workflow", "check", "release").stdout
    config = nerve("config", "check", "--json", home=home)  # the same problems, in a real process
    assert config.returncode == 1
    assert [(p["file"], p["line"], p["message"]) for p in json.loads(config.stdout)["problems"]
            if p["severity"] == "error"] == found


def test_a_gated_irreversible_step_waits_for_a_person_and_the_pipeline_completes_after_approval(home: Path) -> None:
    instance(home, PIPELINE)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run = nerve("workflow", "run", "release", "--prompt", "v1.2", home=home)
        assert run.returncode == 5, run.stdout + run.stderr  # waits for a person
        assert "Approve step `publish` (irreversible, risk R1)" in run.stdout
        shown = json.loads(cli("thread", "show", "run-1", "--json").stdout)
        states = {s["id"]: (s["state"], s["gate"]) for s in shown["steps"]}
        assert states == {"notes": ("done", None), "build": ("done", None), "tests": ("done", None),
                          "publish": ("waiting", "irreversible")}
        assert [m["role"] for m in shown["messages"]] == ["__start__", "notes", "build", "tests", "gate:publish"]
        assert cli("thread", "approve", "run-1").exit_code == 0
        wait_for(lambda: thread_statuses(home).get("run-1") == "completed", 20, what="the pipeline to complete")
        engine.stop()
    done = json.loads(cli("thread", "show", "run-1", "--json").stdout)
    assert [(s["id"], s["state"]) for s in done["steps"]] == [("notes", "done"), ("build", "done"),
                                                              ("tests", "done"), ("publish", "done")]
    assert done["messages"][1]["meta"]["model"] == "echo"  # a model-backed step
    tree = cli("mesh").stdout
    assert "⛩ publish (builder; gate: irreversible)" in tree and "notes (model)" in tree
    drawn = json.loads(cli("mesh", "--json").stdout)
    kinds = {n["id"]: n["kind"] for n in drawn["nodes"]}
    assert kinds["step:release/publish"] == "gate" and kinds["step:release/build"] == "step"
    needs = {(e["source"], e["target"]) for e in drawn["edges"] if e["kind"] == "needs"}
    assert needs == {("step:release/notes", "step:release/build"), ("step:release/notes", "step:release/tests"),
                     ("step:release/build", "step:release/publish"), ("step:release/tests", "step:release/publish")}


def test_a_step_whose_do_runs_an_irreversible_command_waits_for_a_person_whatever_its_risk_says(home: Path) -> None:
    instance(home, """
        roles: release_roles
        steps:
          - id: build
            who: builder
            do: make dist
          - id: ship
            who: builder
            needs: [build]
            risk: R0
            do: git push origin main --tags
          - id: clean
            who: builder
            needs: [ship]
            do: rm -rf build/
            irreversible: true
    """)
    checked = cli("config", "check", "--json")
    doc = json.loads(checked.stdout)
    assert checked.exit_code == 0, checked.stdout  # a warning, not an error: the step still runs, behind a gate
    warned = [(p["file"], p["line"], p["message"]) for p in doc["problems"] if p["severity"] == "warning"
              and "cannot be taken back" in p["message"]]
    assert warned == [("workflows/release.pipeline.yaml", 11, "step `ship` runs git push, which cannot be taken back: "
                       "it waits for a person whatever its risk says; say so in the file with `irreversible: true`")]
    listed = json.loads(cli("workflow", "check", "--json").stdout)["workflows"]
    assert [(w["name"], w["errors"], w["warnings"]) for w in listed] == [("release", 0, 1)]
    tree = cli("mesh").stdout
    assert "⛩ ship (builder; gate: irreversible: its `do` runs git push)" in tree, tree
    assert "⛩ clean (builder; gate: irreversible)" in tree and "⛩ build" not in tree


def test_commands_written_to_dodge_the_check_still_wait_for_a_person(home: Path) -> None:
    """Three steps whose commands the old patterns passed (`git -C repo push`, `rm -f -r`, `$G push`) ran
    without a person. Each is gated, warned with its line, and nothing runs until someone approves."""
    instance(home, """
        roles: release_roles
        steps:
          - id: push
            who: builder
            do: git -C repo push origin main
          - id: clean
            who: builder
            needs: [push]
            do: rm -f -r build/
          - id: hidden
            who: builder
            needs: [clean]
            do: $G push
    """)
    warned = [(p["line"], p["message"].split(":")[0]) for p in json.loads(cli("workflow", "check", "--json").stdout)
              ["problems"] if p["severity"] == "warning"]
    assert warned == [(6, "step `push` runs git push, which cannot be taken back"),
                      (10, "step `clean` runs rm -r, which cannot be taken back"),
                      (14, "step `hidden` runs a command that cannot be read statically (a variable or substitution "
                           "as the program, eval, or a shell reading a pipe), so what it does cannot be checked")]
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run = nerve("workflow", "run", "release", "--prompt", "v2", home=home)
        assert run.returncode == 5, run.stdout + run.stderr  # waits for a person before the first step
        shown = json.loads(cli("thread", "show", "run-1", "--json").stdout)
        engine.stop()
    assert {s["id"]: (s["state"], s["gate"].split(":")[0]) for s in shown["steps"]} == {
        "push": ("waiting", "irreversible"), "clean": ("pending", "irreversible"), "hidden": ("pending", "irreversible")}
    assert [m["role"] for m in shown["messages"]] == ["__start__", "gate:push"]  # no step ran


def test_an_unknown_who_is_found_with_every_other_problem_and_an_unregistered_file_is_named(home: Path) -> None:
    """A pipeline's unknown `who` was reported only once every other problem was fixed, and a pipeline file
    nerve.yaml does not register was passed over ("0 workflows checked: no problems")."""
    instance(home, """
        roles: release_roles
        steps:
          - id: build
            who: bilder
            colour: red
    """)
    found = [p["message"] for p in json.loads(cli("workflow", "check", "--json").stdout)["problems"]]
    assert any("unknown step key `colour`" in m for m in found), found
    assert any("defines no `async def bilder(messages)`; did you mean `builder`?" in m for m in found), found

    write_instance(home, "senses: {}\n", {})  # nothing registered
    (home / "workflows/nightly.py").write_text("workflow = None\n")
    for args in (["workflow", "check", "--json"], ["config", "check", "--json"]):
        doc = json.loads(cli(*args).stdout)
        warned = sorted(p["message"].split(",")[0] for p in doc["problems"] if p["severity"] == "warning")
        assert warned == ["workflows/nightly.py is not in nerve.yaml", "workflows/release.pipeline.yaml is not in "
                          "nerve.yaml"], (args, doc["problems"])  # release_roles.py is the pipeline's roles module
