"""Every fenced example in README.md and docs/ is run (tests/docexamples.py says how) or says in its fence that it
is illustrative; the worked PR example runs against a fake `gh` that accepts only the flags the real one has."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from docexamples import LANGS, ROOT, Session, blocks, pages
from loadclock import scaled

RUN = [page for page in pages() if any(b.executed for b in blocks(page))]


def test_every_block_says_its_language_and_whether_it_runs() -> None:
    found = [b for page in pages() for b in blocks(page)]
    assert len(found) > 50
    unlabelled = [b.where for b in found if b.lang not in LANGS]
    assert not unlabelled, f"blocks without a language the runner knows ({sorted(LANGS)}; `text` for a picture): {unlabelled}"
    executed = [b for b in found if b.executed]
    assert len(executed) > 30, "most examples run"


@pytest.mark.timeout(300)  # a page is a whole session: an instance, an engine, a command at a time
@pytest.mark.parametrize("page", RUN, ids=[str(p.relative_to(ROOT)) for p in RUN])
def test_the_examples_of_a_page_run(page: Path, tmp_path: Path) -> None:
    session = Session(tmp_path)
    try:
        for block in blocks(page):
            if block.executed:
                session.run(block)
        check = AFTER.get(str(page.relative_to(ROOT)))
        if check:
            check(session)
    finally:
        session.close()


def _the_pr_was_opened_and_merged_once(session: Session) -> None:
    # `thread approve` returns once the answer is stored; the merge runs after it, in the thread's next round
    page = blocks(ROOT / "docs/guides/waiting-for-ci.md")[0]
    deadline = time.monotonic() + scaled(30)
    while (shown := json.loads(session.shell("nerve thread show run-1 --json", page)))["status"] != "completed":
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    calls = session.gh_calls()
    assert [c["command"] for c in calls] == ["pr create", "pr merge"], calls
    assert calls[1]["args"] == ["42"] and calls[1]["flags"] == {"--merge": True}
    said = [m for m in shown["messages"] if m["role"] == "reviewer"][-1]
    assert [c["name"] for c in said["meta"]["tool_calls"]] == ["merge_pr"], said


AFTER = {"docs/guides/waiting-for-ci.md": _the_pr_was_opened_and_merged_once}
