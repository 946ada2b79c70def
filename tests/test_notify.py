"""Notifications through apprise to local HTTP receivers: once per event, across a kernel kill -9, and
delivered after a receiver that was down for a minute comes back; failures in status and metrics."""

from __future__ import annotations

import json
import signal
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from enginekit import RunningEngine, free_port, metric_samples, thread_statuses, wait_for, write_instance
from loadclock import scaled

from nerve_cli.ops.client import request

GATE = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, ask_person

    async def asker(messages):
        return ask_person(f"Ship {messages[0].content}?")

    workflow = WorkflowDefinition(roles={"asker": asker},
                                  moderator=lambda m: "asker" if m[-1].role == "__start__" else END)
''')
DOWN_S = 60.0  # how long the second receiver is down


class Receiver:
    """A loopback HTTP server keeping every JSON body posted to it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.bodies: list[dict] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def titles(self) -> list[str]:
        return [b["title"] for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(240)
def test_one_notification_per_waiting_thread_across_a_kill_and_after_a_receiver_was_down(tmp_path: Path) -> None:
    up_port, down_port, hooks = free_port(), free_port(), free_port()
    home = write_instance(tmp_path / "home", f"""
        engine: {{webhooks: 127.0.0.1:{hooks}}}
        workflows:
          gate: {{}}
        notify:
          - {{name: ops, to: ["json://127.0.0.1:{up_port}/hook"], on: [waiting]}}
          - {{name: pager, to: ["json://127.0.0.1:{down_port}/hook"], on: [waiting], retry_max: 2s}}
    """, {})
    (home / "workflows").mkdir()
    (home / "workflows" / "gate.py").write_text(GATE)
    up = Receiver(up_port)
    down: Receiver | None = None
    went_down = time.monotonic()
    metrics = free_port()
    try:
        with RunningEngine(home, "--metrics", f"127.0.0.1:{metrics}") as engine:
            engine.wait_ready(groups=0)
            first = request(home, "start_thread", workflow="gate", prompt="v1")["run_id"]
            wait_for(lambda: len(up.bodies) == 1, 30, what="the first notification")
            assert up.titles() == [f"nerve: {first} (gate) waits for a person"]
            assert "Ship v1?" in up.bodies[0]["message"]
            assert f"http://127.0.0.1:{hooks}/answer/" in up.bodies[0]["message"]  # an answer link
            # the receiver that is down: its failures are in status and metrics, and nothing is lost
            pager = lambda: request(home, "status").get("notify", {}).get("pager", {})  # noqa: E731
            wait_for(lambda: pager().get("failed", 0) >= 1, 30, what="a failed try to show in status")
            assert pager()["pending"] == 1 and "Connection" in (pager()["last_error"] or "")
            samples = metric_samples(metrics)
            assert any(n == "nerve_notifications_failed_total" and labels.get("rule") == "pager" and v >= 1
                       for n, labels, v in samples)
            engine.stop(signal.SIGKILL)
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=0)
            second = request(home, "start_thread", workflow="gate", prompt="v2")["run_id"]
            wait_for(lambda: len(up.bodies) == 2, 30, what="the second notification")
            time.sleep(scaled(2.0))  # time enough for a repeat to show
            assert up.titles() == [f"nerve: {first} (gate) waits for a person",
                                   f"nerve: {second} (gate) waits for a person"]
            time.sleep(max(0.0, DOWN_S - (time.monotonic() - went_down)))
            down = Receiver(down_port)  # back after a minute: each notification arrives, once
            wait_for(lambda: len(down.bodies) >= 2, scaled(30), what="the held notifications")
            time.sleep(scaled(3.0))
            assert sorted(down.titles()) == sorted(up.titles())
            wait_for(lambda: request(home, "status")["notify"]["pager"]["pending"] == 0, 10, what="nothing pending")
            assert {r: s["sent"] for r, s in request(home, "status")["notify"].items()} == {"ops": 2, "pager": 2}
            engine.stop()
        assert thread_statuses(home) == {first: "waiting", second: "waiting"}
    finally:
        up.close()
        if down is not None:
            down.close()
