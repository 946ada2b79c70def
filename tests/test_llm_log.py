"""llm's logs.db as Nerve's roles write it: llm's own rows, a conversation's earlier messages stored once, and a
writer that gathers its records without keeping a flush waiting."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from llmkit import llm_home  # noqa: F401  (fixture)
from loadclock import scaled

TABLES = ("messages", "parts", "turns", "turn_search")  # what a call writes (threads carry the time they were made)


def _rows(db: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(db) as conn:
        return {table: conn.execute(f"select * from [{table}] order by rowid").fetchall() for table in TABLES}


def _conversation(rounds: int, *, is_async: bool = False) -> list[Any]:
    import llm

    if is_async:
        async def talk() -> list[Any]:
            conv = llm.get_async_model("echo").conversation()
            out = []
            for i in range(rounds):
                response = conv.prompt(f"round {i}", system="Answer briefly.")
                await response.text()
                out.append(response)
            return out
        return asyncio.run(talk())
    conv = llm.get_model("echo").conversation()
    out = []
    for i in range(rounds):
        response = conv.prompt(f"round {i}", system="Answer briefly.")
        response.text()
        out.append(response)
    return out


@pytest.mark.parametrize("is_async", [False, True])
def test_the_rows_are_the_ones_llm_itself_writes(llm_home: Path, tmp_path: Path, is_async: bool) -> None:
    import llm
    import sqlite_utils
    from llm.migrations import migrate

    from nerve_cli.roles.llm_log import LlmLog

    calls = _conversation(12, is_async=is_async)
    chain = llm.get_model("echo").chain("a chain of one call")
    chain.text()
    log = LlmLog()
    for call in [*calls, chain]:
        log.submit(call)
    assert log.flush()
    theirs = sqlite_utils.Database(tmp_path / "theirs.db")
    migrate(theirs)
    for call in [*calls, chain]:
        call.log_to_db(theirs)
    ours = _rows(llm_home / "logs.db")
    assert len(ours["turns"]) == 13 and len(ours["messages"]) == 1 + 2 * 12 + 2  # the system prompt once
    assert ours == _rows(tmp_path / "theirs.db")


def test_a_conversation_s_earlier_messages_are_not_looked_up_again(llm_home: Path) -> None:
    """llm's own log_to_db hashes and looks up every earlier message of the conversation at each call: the k-th
    call costs O(k) statements. Through the writer's store a call costs the same few statements at any length."""
    from nerve_cli.roles.llm_log import LlmLog

    calls = _conversation(80)
    log = LlmLog()
    for call in calls[:-1]:
        log.submit(call)
    assert log.flush()
    statements: list[str] = []
    write = log._write

    def traced(path: Path, responses: list[Any]) -> None:  # on the writer's thread, which owns the connection
        log._stores[path].db.conn.set_trace_callback(statements.append)
        write(path, responses)

    log._write = traced  # type: ignore[method-assign]
    log.submit(calls[-1])
    assert log.flush()
    looked_up = [s for s in statements if s.startswith('select count(*) from "messages"')]
    assert len(looked_up) <= 3, f"{len(looked_up)} lookups of messages for the 80th call"
    assert len(_rows(llm_home / "logs.db")["turns"]) == 80


def test_what_another_connection_deletes_is_stored_again(llm_home: Path) -> None:
    from llm.logs import LogStore

    from nerve_cli.roles.llm_log import LlmLog

    calls = _conversation(4)
    log = LlmLog()
    for call in calls[:3]:
        log.submit(call)
    assert log.flush()
    with sqlite3.connect(llm_home / "logs.db") as conn:  # as a prune by the user would
        conn.execute("delete from parts")
        conn.execute("delete from messages")
    log.submit(calls[3])
    assert log.flush()
    import sqlite_utils

    store = LogStore(sqlite_utils.Database(llm_home / "logs.db"))
    (tip,) = store.db.execute("select tip_message_hash from turns order by rowid desc limit 1").fetchone()
    assert len(store.load_chain(tip)) == 1 + 2 * 4  # the whole chain behind the last call, not only its new messages


def test_the_writer_gathers_and_a_flush_does_not_wait_for_the_gathering(llm_home: Path) -> None:
    from nerve_cli.roles.llm_log import LlmLog

    calls = _conversation(3)
    log = LlmLog(gather=60.0)
    batches: list[int] = []
    write = log._write
    log._write = lambda path, responses: (batches.append(len(responses)), write(path, responses))  # type: ignore
    log.submit(calls[0])
    time.sleep(0.05)  # the writer has the first record: it is gathering, not writing
    for call in calls[1:]:
        log.submit(call)
    started = time.monotonic()
    assert log.flush(timeout=scaled(10.0))
    assert time.monotonic() - started < scaled(5.0)  # not the 60 s of gathering
    assert batches == [3]  # one transaction
    log.submit(calls[0])
    assert log.flush(timeout=scaled(10.0))  # the next flush is served too (its own, not the last one's)
    assert batches == [3, 1]
