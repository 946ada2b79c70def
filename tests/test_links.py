"""Answer links: a signed, single-use, expiring URL on the engine's HTTP listener answers a waiting thread."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from contractkit import Checked
from enginekit import RunningEngine, free_port, read_logs, thread_statuses, wait_for, write_instance

from nerve_cli.ops.client import request

GATE = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, ask_person

    async def asker(messages):
        return ask_person(f"Ship {messages[0].content}?", schema={
            "type": "object", "required": ["env"], "properties": {"env": {"enum": ["staging", "prod"]}}})

    workflow = WorkflowDefinition(roles={"asker": asker},
                                  moderator=lambda m: "asker" if m[-1].role == "__start__" else END)
''')


def _link(check: Checked, home: Path, *args: str) -> dict:
    """`nerve thread link ... --json`, its document checked against its schema."""
    done = subprocess.run([sys.executable, "-m", "nerve_cli", "thread", "link", *args, "--json", "--home", str(home)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return check.doc("thread-link", json.loads(done.stdout), "thread link " + " ".join(args))


def _http(url: str, form: dict | None = None, accept: str = "text/html") -> tuple[int, str]:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(url, data=data, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_link_shows_the_question_answers_once_and_refuses_tampered_expired_and_used_ones(tmp_path: Path) -> None:
    port = free_port()
    home = write_instance(tmp_path / "home", f"engine: {{webhooks: 127.0.0.1:{port}}}\nworkflows:\n  gate: {{}}\n", {})
    (home / "workflows").mkdir()
    (home / "workflows" / "gate.py").write_text(GATE)
    check = Checked()
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        runs = [request(home, "start_thread", workflow="gate", prompt=f"v{i}")["run_id"] for i in (1, 2, 3)]
        wait_for(lambda: all(thread_statuses(home).get(r) == "waiting" for r in runs), 30, what="three questions")
        made = _link(check, home, runs[0], "--for", "Bob")
        assert made["url"].startswith(f"http://127.0.0.1:{port}/answer/") and made["questions"] == ["q1"]
        later = _link(check, home, runs[1])["url"]
        short = _link(check, home, runs[2], "--expires", "1s")["url"]
        status, page = _http(made["url"])
        assert status == 200 and "Ship v1?" in page and "&quot;enum&quot;" in page and "value=approve" in page
        body, signature = made["url"].rsplit("/", 1)[1].split(".")
        tampered = made["url"].rsplit("/", 1)[0] + "/" + body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + \
            "." + signature
        assert _http(tampered)[0] == 401
        assert _http(tampered, {"decision": "approve"})[0] == 401
        # an answer the schema refuses is not taken, and the link still answers
        status, page = _http(made["url"], {"decision": "approve", "answer": '{"env": "moon"}'})
        assert status == 422 and "does not match" in page
        status, page = _http(made["url"], {"decision": "approve", "note": "go", "answer": '{"env": "staging"}'})
        assert status == 200 and "approved" in page and "resumes now" in page
        wait_for(lambda: thread_statuses(home).get(runs[0]) == "completed", 30, what="the answered thread to resume")
        assert _http(made["url"], {"decision": "reject"})[0] == 409  # the same link again
        assert _http(made["url"])[0] == 409
        time.sleep(1.2)
        assert json.loads(_http(short, accept="application/json")[1])["status"] == 410
        # a listener on for links alone says what it serves, not that it is wasted
        assert f"the HTTP listener on http://127.0.0.1:{port} serves answer links" in engine.output()
        engine.stop()
    with RunningEngine(home) as engine:  # a link made before a restart still answers after it
        engine.wait_ready(groups=0)
        status, doc = _http(later, {"decision": "reject", "note": "not now"}, accept="application/json")
        assert status == 200 and json.loads(doc)["resumes"] is True
        wait_for(lambda: thread_statuses(home).get(runs[1]) == "completed", 30, what="the rejected thread to end")
        fresh = _link(check, home, runs[2])["url"]
        rotated = subprocess.run([sys.executable, "-m", "nerve_cli", "thread", "link", "--rotate-key", "--home",
                                  str(home)], capture_output=True, text=True, timeout=60)
        assert rotated.returncode == 0, rotated.stderr
        assert _http(fresh)[0] == 401  # made with the key rotated away
        engine.stop()
    votes = [(r["payload"]["meta"]["by"], r["payload"]["meta"]["via"], r["payload"]["meta"].get("answer"))
             for r in read_logs(home, "workflow", "message") if r["payload"]["role"] == "__person__"]
    assert votes[0] == ("Bob", "link", {"env": "staging"}) and votes[1][1:] == ("link", None)
