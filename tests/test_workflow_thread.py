"""The thread automaton, pure: routing, END, maxRounds, rounds from 1, resume, every failure mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nerve_cli.automaton.model import END, START, RoleResult, WorkflowDefinition, WorkflowMessage, rounds_used, start_message
from nerve_cli.automaton.thread import ThreadContext, run_thread

HERE = Path(__file__).resolve()
CTX = ThreadContext(source=HERE, root=HERE.parent, clock=lambda: 1000)


def line_of(marker: str) -> int:
    for number, text in enumerate(HERE.read_text().splitlines(), 1):
        if marker in text and "line_of(" not in text:
            return number
    raise AssertionError(marker)


async def author(messages):
    return RoleResult(f"draft {len(messages)}", {"n": len(messages)})


async def reviewer(messages):
    return RoleResult("ok" if len(messages) >= 4 else "more", {"approved": len(messages) >= 4})


def alternate(messages):
    last = messages[-1]
    if last.role == "reviewer" and last.meta["approved"]:
        return END
    return "reviewer" if last.role == "author" else "author"


def never_ends(messages):
    return "author"


def definition(moderator=alternate, **roles):
    return WorkflowDefinition(roles=roles or {"author": author, "reviewer": reviewer}, moderator=moderator)


def run(defn, chain, persisted=None):
    persisted = [] if persisted is None else persisted

    async def persist(seq, message):
        persisted.append((seq, message))

    return asyncio.run(run_thread(defn, chain, persist, CTX)), persisted


def fresh(max_rounds=10, prompt="write it"):
    return [start_message(prompt, max_rounds, 1)]


def test_runs_until_end_and_persists_every_message_in_order() -> None:
    outcome, persisted = run(definition(), fresh())
    assert (outcome.status, outcome.reason) == ("completed", "end")
    assert [m.role for m in outcome.messages] == [START, "author", "reviewer", "author", "reviewer"]
    assert [seq for seq, _ in persisted] == [1, 2, 3, 4]  # seq == round; the start message is seq 0
    assert [m for _, m in persisted] == list(outcome.messages[1:])
    assert outcome.messages[1] == WorkflowMessage("author", "draft 1", {"n": 1}, 1000)
    assert rounds_used(outcome.messages) == 4


def test_max_rounds_counts_from_one_and_never_counts_the_start_message() -> None:
    outcome, persisted = run(definition(never_ends), fresh(max_rounds=3))
    assert (outcome.status, outcome.reason) == ("completed", "max_rounds")
    assert len(outcome.messages) == 4 and rounds_used(outcome.messages) == 3
    outcome, _ = run(definition(never_ends), fresh(max_rounds=1))
    assert [m.role for m in outcome.messages] == [START, "author"]


def test_end_on_the_last_allowed_round_is_reported_as_end() -> None:
    outcome, _ = run(definition(), fresh(max_rounds=4))
    assert (outcome.status, outcome.reason, rounds_used(outcome.messages)) == ("completed", "end", 4)
    outcome, _ = run(definition(), fresh(max_rounds=3))
    assert (outcome.reason, rounds_used(outcome.messages)) == ("max_rounds", 3)


def test_resume_from_a_persisted_chain_continues_where_it_stopped() -> None:
    whole, _ = run(definition(), fresh())
    partial = list(whole.messages[:3])  # start, author, reviewer
    resumed, persisted = run(definition(), partial)
    assert [seq for seq, _ in persisted] == [3, 4]
    assert resumed.messages == whole.messages


def test_resume_respects_max_rounds_already_used() -> None:
    chain = fresh(max_rounds=2) + [WorkflowMessage("author", "a", {}, 2), WorkflowMessage("author", "b", {}, 3)]
    outcome, persisted = run(definition(never_ends), chain)
    assert (outcome.reason, persisted) == ("max_rounds", [])


def test_the_next_step_waits_for_persist() -> None:
    calls: list[str] = []

    async def role(messages):
        calls.append(f"role {len(messages)}")
        return RoleResult("x", {})

    async def main():
        gate = asyncio.Event()

        async def persist(seq, message):
            calls.append(f"persist {seq}")
            await gate.wait()
            calls.append(f"acked {seq}")

        task = asyncio.create_task(run_thread(definition(never_ends, author=role), fresh(max_rounds=2), persist, CTX))
        await asyncio.sleep(0.05)
        assert calls == ["role 1", "persist 1"]  # blocked: no second role call before the ack
        gate.set()
        return await task

    outcome = asyncio.run(main())
    assert calls == ["role 1", "persist 1", "acked 1", "role 2", "persist 2", "acked 2"]
    assert outcome.reason == "max_rounds"


def test_meta_is_normalised_to_what_a_resumed_thread_reads_back() -> None:
    async def role(messages):
        return RoleResult("x", {"pair": (1, 2)})

    outcome, _ = run(definition(never_ends, author=role), fresh(max_rounds=1))
    assert outcome.messages[1].meta == {"pair": [1, 2]}


def test_a_sync_role_is_accepted() -> None:
    outcome, _ = run(definition(never_ends, author=lambda m: RoleResult("sync", {})), fresh(max_rounds=1))
    assert outcome.messages[1].content == "sync"


# -- failures: each ends the thread `failed` with a reason naming what went wrong ----------

def bad_moderator(messages):
    raise ValueError("no route")  # MARK-moderator-raises


async def bad_role(messages):
    return {"content": "x"}["missing"]  # MARK-role-raises


@pytest.mark.parametrize(
    "defn, expected",
    [
        (definition(bad_moderator),
         f"moderator raised ValueError: no route at test_workflow_thread.py:{line_of('MARK-moderator-raises')}"),
        (definition(lambda m: "editor"), "moderator chose unknown role 'editor' (roles: author, reviewer)"),
        (definition(lambda m: 3), "moderator returned int 3, expected a role name or END"),
        (definition(lambda m: None), "moderator returned NoneType None, expected a role name or END"),
        (definition(never_ends, author=bad_role),
         f"role 'author' raised KeyError: 'missing' at test_workflow_thread.py:{line_of('MARK-role-raises')}"),
        (definition(never_ends, author=lambda m: {"content": "x"}),
         "role 'author' returned dict, expected RoleResult(content, meta)"),
        (definition(never_ends, author=lambda m: RoleResult(42, {})),
         "role 'author' returned content of type int, expected str"),
        (definition(never_ends, author=lambda m: RoleResult("x", ["a"])),
         "role 'author' returned meta of type list, expected a mapping (e.g. a dict)"),
    ],
    ids=["moderator-raises", "unknown-role", "non-string", "none", "role-raises", "not-roleresult",
         "content-not-str", "meta-not-mapping"],
)
def test_failures_end_the_thread_failed_with_the_reason(defn, expected) -> None:
    outcome, persisted = run(defn, fresh())
    assert outcome.status == "failed"
    assert outcome.reason == expected
    assert persisted == [] and len(outcome.messages) == 1


def test_async_moderator_is_refused() -> None:
    async def moderator(messages):
        return END

    outcome, _ = run(definition(moderator), fresh())
    assert outcome.status == "failed" and "must be a plain (non-async) function" in outcome.reason


def test_meta_that_is_not_json_fails() -> None:
    outcome, _ = run(definition(never_ends, author=lambda m: RoleResult("x", {"s": {1, 2}})), fresh())
    assert outcome.status == "failed"
    assert outcome.reason.startswith("role 'author' returned meta that is not JSON-serialisable")


def test_role_calling_sys_exit_fails_the_thread_not_the_process() -> None:
    def role(messages):
        raise SystemExit(3)

    outcome, _ = run(definition(never_ends, author=role), fresh())
    assert outcome.status == "failed" and outcome.reason.startswith("role 'author' raised SystemExit: 3")


def test_failure_keeps_the_traceback_and_location() -> None:
    outcome, _ = run(definition(bad_moderator), fresh())
    assert outcome.error is not None
    assert outcome.error.file == "test_workflow_thread.py"
    assert outcome.error.line == line_of("MARK-moderator-raises")
    assert "Traceback" in outcome.error.traceback


def test_failure_after_some_rounds_keeps_them() -> None:
    async def flaky(messages):
        if len(messages) > 2:
            raise RuntimeError("tired")
        return RoleResult("x", {})

    outcome, persisted = run(definition(never_ends, author=flaky), fresh())
    assert outcome.status == "failed" and [s for s, _ in persisted] == [1, 2]


def test_a_chain_without_start_message_fails() -> None:
    outcome, _ = run(definition(), [WorkflowMessage("author", "x", {}, 1)])
    assert outcome.status == "failed" and "start message" in outcome.reason


def test_bad_max_rounds_in_start_message_is_refused() -> None:
    with pytest.raises(ValueError, match="maxRounds"):
        run(definition(), [WorkflowMessage(START, "p", {"maxRounds": 0}, 1)])


def test_cancellation_propagates() -> None:
    async def slow(messages):
        await asyncio.sleep(10)

    async def main():
        task = asyncio.create_task(run_thread(definition(never_ends, author=slow), fresh(), _noop, CTX))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


async def _noop(seq, message):
    return None


def test_message_round_trip_and_validation() -> None:
    message = WorkflowMessage("author", "hi", {"a": 1}, 5)
    assert WorkflowMessage.from_dict(message.to_dict()) == message
    with pytest.raises(ValueError, match="meta must be an object"):
        WorkflowMessage.from_dict({"role": "a", "content": "x", "meta": [1], "timestamp": 1})
    with pytest.raises(ValueError, match="content must be a string"):
        WorkflowMessage.from_dict({"role": "a", "content": None, "meta": {}, "timestamp": 1})
    with pytest.raises(ValueError, match="timestamp"):
        WorkflowMessage.from_dict({"role": "a", "content": "x", "meta": {}, "timestamp": "1"})
    with pytest.raises(ValueError, match="role"):
        WorkflowMessage.from_dict({"role": "", "content": "x", "meta": {}, "timestamp": 1})


# -- role_timeout / role_retries ------------------------------------------------------------

def run_with(defn, chain, **settings):
    settings.setdefault("role_backoff", 0.001)
    ctx = ThreadContext(source=HERE, root=HERE.parent, clock=lambda: 1000, **settings)
    return asyncio.run(run_thread(defn, chain, _noop, ctx))


def test_role_timeout_fails_a_slow_async_role() -> None:
    async def slow(messages):
        await asyncio.sleep(5)

    outcome = run_with(definition(never_ends, author=slow), fresh(), role_timeout=0.05)
    assert (outcome.status, outcome.reason) == ("failed", "role 'author' timed out after 0.05s (role_timeout)")


def test_a_role_raising_its_own_timeout_error_is_not_a_role_timeout() -> None:
    async def role(messages):
        raise TimeoutError("upstream took too long")

    outcome = run_with(definition(never_ends, author=role), fresh(), role_timeout=5)
    assert outcome.reason.startswith("role 'author' raised TimeoutError: upstream took too long at ")


def test_role_retries_retry_raising_and_timing_out_roles() -> None:
    calls: list[int] = []

    async def flaky(messages):
        calls.append(len(messages))
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        if len(calls) == 2:
            await asyncio.sleep(5)  # second try times out
        return RoleResult("third time lucky", {})

    outcome = run_with(definition(never_ends, author=flaky), fresh(max_rounds=1), role_timeout=0.05, role_retries=2)
    assert (outcome.status, outcome.messages[1].content) == ("completed", "third time lucky")
    assert calls == [1, 1, 1]


def test_role_retries_give_up_with_the_last_reason() -> None:
    async def broken(messages):
        raise RuntimeError("still down")

    outcome = run_with(definition(never_ends, author=broken), fresh(), role_retries=2)
    assert outcome.status == "failed"
    assert outcome.reason.startswith("role 'author' raised RuntimeError: still down at ")
    assert outcome.reason.endswith(" (3 attempts)")


def test_a_wrong_return_type_is_not_retried() -> None:
    calls: list[int] = []

    def wrong(messages):
        calls.append(1)
        return "text"

    outcome = run_with(definition(never_ends, author=wrong), fresh(), role_retries=3)
    assert outcome.status == "failed" and calls == [1]


# -- back-off between retries ------------------------------------------------------------------

def test_retry_delays_grow_exponentially_with_jitter_and_a_cap() -> None:
    import random

    from nerve_cli.automaton.thread import BACKOFF_CAP, retry_delay

    rng = random.Random(7)
    for _ in range(200):
        delays = [retry_delay(0.5, n, rng) for n in range(1, 6)]
        for n, delay in enumerate(delays, 1):
            nominal = 0.5 * 2 ** (n - 1)
            assert nominal / 2 <= delay <= nominal  # equal jitter: half fixed, half random
        assert delays == sorted(delays)  # each pause at least as long as the one before
    spread = {round(retry_delay(1.0, 3, rng), 6) for _ in range(50)}
    assert len(spread) > 40  # jittered: threads retrying together spread out
    assert retry_delay(1.0, 30, rng) <= BACKOFF_CAP


def test_a_role_setup_error_fails_at_once_without_retries() -> None:
    from nerve_cli.automaton.model import RoleSetupError

    calls: list[int] = []

    async def no_key(messages):
        calls.append(1)
        raise RoleSetupError("model x needs an API key: `llm keys set x`")

    outcome = run_with(definition(never_ends, author=no_key), fresh(), role_retries=3, role_backoff=5.0)
    assert calls == [1]
    assert outcome.status == "failed"
    assert outcome.reason == "role 'author' cannot run: model x needs an API key: `llm keys set x`"


# -- asking a person ------------------------------------------------------------------------------

def test_a_role_asking_a_person_persists_the_question_and_waits() -> None:
    from nerve_cli.automaton.model import ask_person

    async def critic(messages):
        return ask_person("Publish this draft?", {"score": 7})

    persisted: list = []

    async def persist(seq, message):
        persisted.append((seq, message))

    defn = WorkflowDefinition(roles={"critic": critic}, moderator=lambda m: "critic")
    outcome = asyncio.run(run_thread(defn, fresh(), persist, ThreadContext(clock=lambda: 5)))
    assert (outcome.status, outcome.reason) == ("waiting", "Publish this draft?")
    assert [(seq, m.role, m.content, dict(m.meta)) for seq, m in persisted] == [
        (1, "critic", "Publish this draft?", {"score": 7, "ask_person": True, "questions": [
            {"id": "q1", "question": "Publish this draft?", "schema": None}]})]
    # run again from the persisted chain without an answer: still waiting, no role called
    again = asyncio.run(run_thread(defn, outcome.messages, persist, ThreadContext()))
    assert (again.status, again.reason, len(persisted)) == ("waiting", "Publish this draft?", 1)


def test_the_answer_is_the_next_message_the_moderator_sees_and_is_not_a_round() -> None:
    from nerve_cli.automaton.model import PERSON, ask_person, person_answer, rounds_used

    seen: list = []

    async def critic(messages):
        return ask_person("ok?")

    def moderator(messages):
        seen.append(messages[-1])
        return END if messages[-1].role == PERSON else "critic"

    defn = WorkflowDefinition(roles={"critic": critic}, moderator=moderator)
    first = asyncio.run(run_thread(defn, fresh(max_rounds=1), _noop, ThreadContext()))
    chain = [*first.messages, person_answer("reject", "too long", "test", 9)]
    outcome = asyncio.run(run_thread(defn, chain, _noop, ThreadContext()))
    assert (outcome.status, outcome.reason) == ("completed", "end")
    last = seen[-1]
    assert (last.role, last.content, last.meta["decision"], last.meta["approved"]) == (PERSON, "too long", "reject",
                                                                                      False)
    assert rounds_used(chain) == 1  # max_rounds=1 was enough: the answer is not a round
