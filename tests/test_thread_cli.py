"""`nerve thread list|show`: every failure mode's reason is visible; rounds are numbered from 1."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from conftest import cli
from workflow_support import PINGPONG, ended, make_instance, manager, wait_for


def variant(old: str, new: str) -> str:
    assert old in PINGPONG
    return PINGPONG.replace(old, new, 1)


MOD = "def until(messages):"
ROLE = "async def step(messages):"
CASES = {
    # workflow: (code, reason the thread must show)
    "mod-raises": (variant(MOD, MOD + "\n    raise ValueError('no route')"),
                   "moderator raised ValueError: no route at workflows/mod-raises.py:"),
    "unknown-role": (variant(MOD, MOD + "\n    return 'editor'"),
                     "moderator chose unknown role 'editor' (roles: a, b)"),
    "not-a-name": (variant(MOD, MOD + "\n    return 7"), "moderator returned int 7, expected a role name or END"),
    "role-raises": (variant(ROLE, ROLE + "\n    raise RuntimeError('model down')"),
                    "role 'a' raised RuntimeError: model down at workflows/role-raises.py:"),
    "wrong-type": (variant(ROLE, ROLE + "\n    return 'text'"),
                   "role 'a' returned str, expected RoleResult(content, meta)"),
    "bad-content": (variant(ROLE, ROLE + "\n    return RoleResult(None, {})"),
                    "role 'a' returned content of type NoneType, expected str"),
    "bad-meta": (variant(ROLE, ROLE + "\n    return RoleResult('x', {'when': object()})"),
                 "role 'a' returned meta that is not JSON-serialisable"),
    "too-big": (variant(ROLE, ROLE + "\n    return RoleResult('x' * (17 * 2**20), {})"),
                "role 'a' returned 17.0 MiB of content and meta"),
    "no-load": ("import nothing_here_at_all\n",
                "workflow no-load failed to load: ModuleNotFoundError: No module named 'nothing_here_at_all' "
                "at workflows/no-load.py:1"),
    "no-object": ("x = 1\n", "workflow no-object failed to load: WorkflowError: workflows/no-object.py defines no "
                             "`workflow`"),
    "reserved": (variant("roles={'a': step, 'b': step}", "roles={'__end__': step}"),
                 "role name '__end__' is reserved"),
}


def run_cases(home: Path) -> dict[str, str]:
    config = make_instance(home, {name: code for name, (code, _) in CASES.items()} | {"ok": PINGPONG},
                           {"workflows": {name: {} for name in [*CASES, "ok"]}})

    async def main():
        mgr, logs, _ = manager(home, config)
        ids = {name: mgr.launch(name, "id=q rounds=3", None, {})["run_id"] for name in [*CASES, "ok"]}
        await wait_for(lambda: ended(logs, *ids.values()), timeout=30, what="every case to end")
        await mgr.stop(1)
        return ids

    return asyncio.run(main())


def test_every_failure_mode_shows_its_reason(home: Path) -> None:
    ids = run_cases(home)
    for name, (_, reason) in CASES.items():
        shown = cli("thread", "show", ids[name])
        assert shown.exit_code == 0, shown.output
        assert "failed" in shown.output and reason in shown.output.replace("\n", " "), (name, shown.output)
        detail = json.loads(cli("thread", "show", ids[name], "--json").output)
        assert detail["status"] == "failed" and reason in detail["reason"], name
    located = json.loads(cli("thread", "show", ids["role-raises"], "--json").output)
    assert located["error"]["file"] == "workflows/role-raises.py" and "Traceback" in located["error"]["traceback"]


def test_show_numbers_rounds_from_one_and_json_has_the_whole_chain(home: Path) -> None:
    ids = run_cases(home)
    run_id = ids["ok"]
    detail = json.loads(cli("thread", "show", run_id, "--json").output)
    assert detail["status"] == "completed" and detail["reason"] == "end"
    assert detail["rounds"] == 3 and detail["max_rounds"] == 100 and detail["prompt"] == "id=q rounds=3"
    assert [(m["seq"], m["round"], m["role"]) for m in detail["messages"]] == [
        (0, None, "__start__"), (1, 1, "a"), (2, 2, "b"), (3, 3, "a")]
    assert detail["started_ms"] and detail["ended"].endswith("Z") and detail["duration_s"] >= 0
    assert [e["type"] for e in detail["events"]] == ["queued", "started", "completed"]
    text = cli("thread", "show", run_id.removeprefix("run-"), "--format", "table").output  # `7` works as `run-7`
    assert "3 / 100" in text and "q round 1" in text and "q round 3" in text
    rows = [line for line in text.splitlines() if line.startswith("│ ") and "round" in line]
    assert [row.split("│")[1].strip() for row in rows] == ["1", "2", "3"]


def test_list_is_newest_first_and_filters(home: Path) -> None:
    ids = run_cases(home)
    everything = json.loads(cli("thread", "list", "--json").output)["threads"]
    numbers = [int(r["run_id"].split("-")[1]) for r in everything]
    assert numbers == sorted(numbers, reverse=True) and len(numbers) == len(ids)
    failed = json.loads(cli("thread", "list", "--status", "failed", "--json").output)["threads"]
    assert {r["run_id"] for r in failed} == {ids[n] for n in CASES}
    ok = json.loads(cli("thread", "list", "--workflow", "ok", "--json").output)["threads"]
    assert [(r["run_id"], r["status"], r["rounds"], r["max_rounds"]) for r in ok] == [(ids["ok"], "completed", 3, 100)]
    assert len(json.loads(cli("thread", "list", "--limit", "2", "--json").output)["threads"]) == 2
    table = cli("thread", "list", "--workflow", "ok").output
    assert ids["ok"] in table and "3/100" in table


def test_unknown_thread_names_the_nearest_and_most_recent(home: Path) -> None:
    config = make_instance(home, {"ok": PINGPONG}, {"workflows": {"ok": {}}})
    empty = cli("thread", "show", "run-3")
    assert empty.exit_code == 1 and "has no threads yet" in empty.output

    async def main():
        mgr, logs, _ = manager(home, config)
        for _ in range(3):
            mgr.launch("ok", "rounds=1", None, {})
        await wait_for(lambda: ended(logs, "run-1", "run-2", "run-3"))
        await mgr.stop(1)

    asyncio.run(main())
    missing = cli("thread", "show", "run-33")
    assert missing.exit_code == 1
    assert "no thread run-33: did you mean run-3?" in missing.output
    assert "most recent: run-3, run-2, run-1" in missing.output


def test_a_running_thread_shows_its_rounds_so_far(home: Path) -> None:
    config = make_instance(home, {"ok": PINGPONG}, {"workflows": {"ok": {}}})

    async def main():
        mgr, logs, _ = manager(home, config)
        mgr.launch("ok", "gate=3 rounds=5", None, {})
        await wait_for(lambda: (home / "waiting-3").exists())
        shown = cli("thread", "show", "run-1")
        (home / "gate").write_text("go")
        await wait_for(lambda: ended(logs, "run-1"))
        await mgr.stop(1)
        return shown

    shown = asyncio.run(main())
    assert "started" in shown.output and "(so far)" in shown.output and "2 / 100" in shown.output


def test_transcript_reads_as_a_conversation(home: Path) -> None:
    ids = run_cases(home)
    text = cli("thread", "show", ids["ok"], "--transcript").output
    lines = text.splitlines()
    assert lines[0].startswith(f"# {ids['ok']} · ok · completed (end) · 3/100 rounds")
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0].startswith("## prompt · ") and [h.split(" · ")[0] for h in headings[1:]] == [
        "## #1 a", "## #2 b", "## #3 a"]
    # content as written under its heading, meta folded on one line after it; no table borders
    at = lines.index(headings[1])
    assert lines[at + 2] == "q round 1" and lines[at + 4] == '> meta: {"n": 1}'
    assert "│" not in text and "id=q rounds=3" in text and "maxRounds" not in text
    failed = cli("thread", "show", ids["role-raises"], "--transcript").output
    assert "failed (role 'a' raised RuntimeError" in failed and "## error" in failed and "Traceback" in failed


PRICED = '''
from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

async def writer(messages):  # what a model-backed role records, with a cost as a role may add
    n = len(messages)
    return RoleResult(f"draft {n}", {"model": "gpt-x", "usage": {"input": 12 * n, "output": 48},
                                     "duration_ms": [0.0, 0.3, 1250.0][n - 1], "cost": 0.0012, "topic": "notes"})

workflow = WorkflowDefinition(roles={"writer": writer}, moderator=lambda m: END if len(m) > 3 else "writer")
'''


def test_model_calls_show_model_tokens_duration_and_cost_and_short_calls_are_not_0ms(home: Path) -> None:
    from enginekit import nerve

    make_instance(home, {"priced": PRICED}, {"workflows": {"priced": {}}})
    run = nerve("workflow", "run", "priced", "--prompt", "p", home=home)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "#1 writer  gpt-x · 12→48 tokens · <0.1ms · $0.0012  {\"topic\": \"notes\"}" in lines, lines
    assert "#2 writer  gpt-x · 24→48 tokens · 0.3ms · $0.0012  {\"topic\": \"notes\"}" in lines, lines
    assert "#3 writer  gpt-x · 36→48 tokens · 1.2s · $0.0012  {\"topic\": \"notes\"}" in lines, lines
    shown = nerve("thread", "show", "run-1", "--format", "tsv", home=home).stdout
    assert "models\t3 model calls · 72→144 tokens · $0.0036" in shown, shown
    assert "\twriter\tgpt-x · 24→48 tokens · 0.3ms · $0.0012\tdraft 2\t{\"topic\": \"notes\"}\t" in shown, shown
    assert not re.search(r"(?<![\d.<])0ms", shown), shown  # a duration shown as a bare 0ms (120ms is fine)
    transcript = nerve("thread", "show", "run-1", "--transcript", home=home).stdout
    assert "# run-1 · priced · completed (end) · 3/100 rounds · 3 model calls · 72→144 tokens · $0.0036" in transcript
    assert " · gpt-x · 12→48 tokens · <0.1ms · $0.0012" in transcript
