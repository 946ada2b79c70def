"""Model-backed roles through `llm` with the offline `echo` model (llm-echo), in real workflow workers."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from enginekit import RunningEngine, nerve, read_logs, thread_statuses, wait_for, write_instance
from llmkit import llm_cli, llm_home  # noqa: F401  (fixture)

from nerve_cli.ops.client import request

WRITER_CRITIC = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, llm_role

    writer = llm_role(system="You write.")
    critic = llm_role(model=MODEL)

    def moderator(messages):
        if len(messages) > 3:
            return END
        return "critic" if messages[-1].role == "writer" else "writer"

    workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic}, moderator=moderator)
''')


def _instance(home: Path, settings: str, code: str, name: str = "review") -> None:
    write_instance(home, f"workflows:\n  {name}: {settings}\n", {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / f"{name}.py").write_text(code)


def _status(home: Path, run_id: str) -> str | None:
    return thread_statuses(home).get(run_id)


def _messages(home: Path, run_id: str) -> list[dict]:
    return [r["payload"] for r in read_logs(home, "workflow", "message", run_id)]


def _ended(home: Path, run_id: str) -> dict:
    rows = [r for r in read_logs(home, "workflow", None, run_id) if r["type"] in ("completed", "failed")]
    return rows[-1]["payload"] if rows else {}


def test_a_three_round_model_backed_thread_records_model_usage_and_continues_the_conversation(
        home: Path, llm_home: Path) -> None:
    _instance(home, "{concurrency: 1, model: echo, system: Be brief.}",
              WRITER_CRITIC.replace("MODEL", "None"))
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="review", prompt="release notes for 2.0")["run_id"]
        wait_for(lambda: _status(home, run_id) in ("completed", "failed"), 30, what="the thread to end")
        engine.stop()
    assert _status(home, run_id) == "completed", _ended(home, run_id)
    chain = _messages(home, run_id)
    assert [m["role"] for m in chain] == ["__start__", "writer", "critic", "writer"]
    for m in chain[1:]:
        assert m["meta"]["model"] == "echo"  # workflows.review.model in nerve.yaml
        assert m["meta"]["usage"]["input"] > 0 and m["meta"]["usage"]["output"] > 0
        assert m["meta"]["duration_ms"] >= 0 and m["meta"]["conversation_id"]
    first, second, third = (json.loads(m["content"]) for m in chain[1:])
    assert "release notes for 2.0" in first["prompt"]
    assert (first["system"], second["system"]) == ("You write.", "Be brief.")  # the role's own, else nerve.yaml's
    assert chain[2]["content"] in third["prompt"]  # round 3's prompt holds round 2's answer
    assert third["previous"] == [{"prompt": first["prompt"]}]  # the writer's own conversation went on
    assert chain[1]["meta"]["conversation_id"] == chain[3]["meta"]["conversation_id"]
    shown = nerve("thread", "show", run_id, home=home)
    assert "echo" in shown.stdout and "tokens" in shown.stdout, shown.stdout


def test_an_unknown_model_fails_the_thread_at_once_with_the_fix(home: Path, llm_home: Path) -> None:
    _instance(home, "{concurrency: 1, role_retries: 3, role_backoff: 5s}",
              WRITER_CRITIC.replace("MODEL", "'echo'").replace('llm_role(system="You write.")',
                                                               'llm_role(model="gpt-nonesuch")'))
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="review", prompt="x")["run_id"]
        wait_for(lambda: _status(home, run_id) == "failed", 20, what="the thread to fail")
        engine.stop()
    reason = _ended(home, run_id)["reason"]
    assert reason.startswith("role 'writer' cannot run: unknown model 'gpt-nonesuch'")
    assert "`llm install PLUGIN`" in reason and "`llm models`" in reason
    # no retry (role_retries: 3 would retry an ordinary failure after 5 s back-offs): said by the log, not a clock,
    # which a loaded machine stretches (took 2.5 s at load 8)
    assert "attempts" not in reason and read_logs(home, "workflow", "role_failed", run_id) == []


def test_a_missing_key_fails_the_thread_at_once_with_the_fix(home: Path, llm_home: Path) -> None:
    _instance(home, "{concurrency: 1, model: echo-needs-key, role_retries: 2, role_backoff: 5s}",
              WRITER_CRITIC.replace("MODEL", "None"))
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="review", prompt="x")["run_id"]
        wait_for(lambda: _status(home, run_id) == "failed", 20, what="the thread to fail")
        engine.stop()
    reason = _ended(home, run_id)["reason"]
    assert "model echo-needs-key needs an API key" in reason and "llm keys set echo-needs-key" in reason
    assert "attempts" not in reason


SLOW = textwrap.dedent('''
    import asyncio, time
    from pathlib import Path
    from nerve_cli.sdk import END, WorkflowDefinition, llm_role

    ATTEMPTS = Path(__file__).resolve().parent.parent / "attempts.txt"

    async def stuck_prompt(messages):  # the call hangs (a rate-limited API that never answers)
        with ATTEMPTS.open("a") as fh:
            fh.write(f"{time.monotonic()}\\n")
        await asyncio.sleep(3600)

    writer = llm_role(model="echo", prompt=stuck_prompt)
    workflow = WorkflowDefinition(roles={"writer": writer},
                                  moderator=lambda m: END if len(m) > 1 else "writer")
''')


def test_a_timed_out_role_is_retried_with_growing_pauses_then_fails(home: Path, llm_home: Path) -> None:
    _instance(home, "{concurrency: 1, role_timeout: 200ms, role_retries: 3, role_backoff: 300ms}", SLOW)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        run_id = request(home, "start_thread", workflow="review", prompt="x")["run_id"]
        wait_for(lambda: _status(home, run_id) == "failed", 30, what="the thread to fail")
        engine.stop()
    assert _ended(home, run_id)["reason"] == "role 'writer' timed out after 0.2s (role_timeout) (4 attempts)"
    starts = [float(t) for t in (home / "attempts.txt").read_text().split()]
    assert len(starts) == 4
    pauses = [b - a - 0.2 for a, b in zip(starts, starts[1:])]  # the gap less the 200 ms timeout
    for n, pause in enumerate(pauses, 1):
        nominal = 0.3 * 2 ** (n - 1)  # 0.3 s, 0.6 s, 1.2 s: half fixed, half jitter, plus scheduling delay
        assert nominal / 2 - 0.02 <= pause <= nominal + 0.5, (n, pauses)
    assert pauses[1] > pauses[0] - 0.1 and pauses[2] > pauses[1] - 0.1, pauses  # they grow (within timer noise)
    assert pauses[2] > pauses[0] + 0.15, pauses


def test_workflow_new_llm_scaffolds_a_working_model_backed_workflow(home: Path, llm_home: Path) -> None:
    assert nerve("init", home=home).returncode == 0
    made = nerve("workflow", "new", "review", "--llm", home=home)
    assert made.returncode == 0, made.stderr
    assert "llm models default" in made.stdout
    text = (home / "workflows" / "review.py").read_text()
    assert "llm_role" in text and "llm models default" in text and "under workflows.review in nerve.yaml" in text
    assert llm_cli("models", "default", "echo").returncode == 0  # the user's llm default model
    run = nerve("workflow", "run", "review", "--prompt", "a haiku about logs", "--max-rounds", "3", home=home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "echo" in run.stdout and "tokens" in run.stdout  # model and tokens shown live
    shown = json.loads(nerve("thread", "show", "run-1", "--json", home=home).stdout)
    assert (shown["status"], shown["reason"], shown["rounds"]) == ("completed", "max_rounds", 3)
    assert [m["role"] for m in shown["messages"]] == ["__start__", "writer", "critic", "writer"]
    assert all(m["meta"]["model"] == "echo" for m in shown["messages"][1:])


def test_workflow_new_llm_with_model_writes_it_to_nerve_yaml(home: Path, llm_home: Path) -> None:
    assert nerve("init", home=home).returncode == 0
    made = nerve("workflow", "new", "review", "--llm", "--model", "echo", home=home)
    assert made.returncode == 0, made.stderr
    from nerve_cli.config.load import load_config

    assert load_config(home).workflows["review"].model == "echo"
    run = nerve("workflow", "run", "review", "--prompt", "x", "--max-rounds", "1", home=home)
    assert run.returncode == 0, run.stdout + run.stderr
