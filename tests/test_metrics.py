"""`nerve run --metrics`: Prometheus text at /metrics during a real run, parsed with prometheus_client's parser."""

from __future__ import annotations

import gzip
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from enginekit import RunningEngine, completes, nerve, read_logs, thread_statuses, wait_for, write_instance
from llmkit import llm_home  # noqa: F401  (fixture)
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from promkit import documented_families, promtool

from nerve_cli import __version__
from nerve_cli.kernel.control.metrics_http import MAX_CONNECTIONS
from nerve_cli.ops.client import request

CONFIG = """
senses:
  tick: {group: a}
  echo: {group: b}
  boom: {group: a}
reflexes:
  - {sense: tick, interval: 100ms}
  - {sense: echo, on: [tick]}
  - {sense: boom, interval: 300ms}
"""
SENSES = {
    "tick": "import time\ndef compute(db, peers):\n    return time.time()\n",
    "echo": "def compute(db, peers):\n    return 1\n",
    "boom": "def compute(db, peers):\n    raise ValueError('no')\n",
}


EXTRA_SENSES = "  heard: {group: c}\n"
EXTRA_REFLEXES = "  - {sense: heard, on: [pr.opened]}\n"
ONE_MODEL_ROUND = """
from nerve_cli.sdk import END, WorkflowDefinition, llm_role

workflow = WorkflowDefinition(roles={"writer": llm_role()},
                              moderator=lambda m: "writer" if m[-1].role == "__start__" else END)
"""
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        return answer.read().decode()


def families(text: str) -> dict[str, dict]:
    """family name → {(sample name, sorted labels): value}."""
    return {f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}


def scrape(port: int) -> dict[str, dict]:
    return families(scrape_text(port))


def value(metrics: dict, family: str, sample: str | None = None, **labels: str) -> float:
    return metrics[family][(sample or family, tuple(sorted(labels.items())))]


def test_metrics_are_scraped_during_a_run_and_counters_increase(tmp_path: Path, llm_home: Path) -> None:
    home = write_instance(tmp_path / "inst", CONFIG.replace("reflexes:", EXTRA_SENSES + "reflexes:") + EXTRA_REFLEXES
                          + "workflows:\n  notes: {model: echo}\n", {**SENSES, "heard": "def compute(db, peers):\n    return 1\n"})
    (home / "workflows").mkdir()
    (home / "workflows" / "notes.py").write_text(ONE_MODEL_ROUND)
    port = free_port()
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready(groups=3)
        assert nerve("emit", "pr.opened", '{"n": 1}', home=home).returncode == 0
        run_id = request(home, "start_thread", workflow="notes", prompt="hello")["run_id"]
        wait_for(lambda: len(completes(home, "echo")) >= 3 and completes(home, "boom") and completes(home, "heard")
                 and thread_statuses(home).get(run_id) == "completed", 30, what="computes, the emit and the thread")
        text = scrape_text(port)
        first = families(text)
        ticks = value(first, "nerve_computes", "nerve_computes_total", sense="tick", outcome="signal")
        assert ticks >= 3
        assert value(first, "nerve_computes", "nerve_computes_total", sense="boom", outcome="error") >= 1
        assert value(first, "nerve_errors", "nerve_errors_total", sense="boom") >= 1
        count = value(first, "nerve_compute_duration_seconds", "nerve_compute_duration_seconds_count", sense="tick")
        inf = value(first, "nerve_compute_duration_seconds", "nerve_compute_duration_seconds_bucket",
                    sense="tick", le="+Inf")
        assert count == inf >= ticks  # every compute of tick is in its histogram
        lowest = value(first, "nerve_compute_duration_seconds", "nerve_compute_duration_seconds_bucket",
                       sense="tick", le="1e-05")
        assert lowest < count  # the buckets start below the computes: they are told apart, not all in the first
        assert value(first, "nerve_hop_seconds", "nerve_hop_seconds_count") >= 3  # echo listens to tick
        assert value(first, "nerve_interval_lateness_seconds", "nerve_interval_lateness_seconds_count") >= 3
        for group in ("a", "b"):
            assert value(first, "nerve_worker_up", group=group) == 1
            assert value(first, "nerve_worker_resident_memory_bytes", group=group) > 5 * 2**20
            assert value(first, "nerve_worker_cpu_seconds", "nerve_worker_cpu_seconds_total", group=group) > 0
            assert value(first, "nerve_worker_restarts", "nerve_worker_restarts_total", group=group) == 0
        assert "nerve_computes_pending" in first and "nerve_log_rows_buffered" in first
        assert value(first, "nerve_kernel_process_resident_memory_bytes") > 0
        # what an operator asks next: freshness, the build, events, models, threads
        build = next(labels for (name, labels) in first["nerve_build_info"])
        assert dict(build)["version"] == __version__ and dict(build)["loop"] in ("uvloop", "asyncio")
        now = time.time()
        assert now - 30 < value(first, "nerve_sense_last_success_timestamp_seconds", sense="tick") <= now
        assert now - 30 < value(first, "nerve_sense_last_signal_timestamp_seconds", sense="heard") <= now
        assert ("nerve_sense_last_success_timestamp_seconds", (("sense", "boom"),)) not in first[
            "nerve_sense_last_success_timestamp_seconds"]  # it never succeeded
        assert value(first, "nerve_sense_interval_seconds", sense="tick") == 0.1
        assert value(first, "nerve_sense_interval_seconds", sense="heard") == 0  # on: only
        assert value(first, "nerve_events", "nerve_events_total", channel="pr.opened") == 1
        assert value(first, "nerve_model_calls", "nerve_model_calls_total", model="echo") == 1
        assert value(first, "nerve_model_tokens", "nerve_model_tokens_total", model="echo", type="input") > 0
        assert value(first, "nerve_thread_duration_seconds", "nerve_thread_duration_seconds_count", workflow="notes") == 1
        assert value(first, "nerve_thread_oldest_waiting_seconds", workflow="notes") == 0
        # every family the metrics reference documents, but the fleet's and the webhooks': those come with a `fleet:` section
        # and with webhooks on (their own tests)
        missing = {f for f in documented_families() if not f.startswith(("nerve_fleet_", "nerve_webhook_"))} - set(first)
        assert not missing, f"documented in docs/reference/metrics.md, not scraped: {missing}"
        lint = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        # counters keep counting with the computes
        wait_for(lambda: value(scrape(port), "nerve_computes", "nerve_computes_total", sense="tick",
                               outcome="signal") >= ticks + 3, 20, what="tick's counter to grow")
        with pytest.raises(urllib.error.HTTPError) as missing_page:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert missing_page.value.code == 404
        # negotiation by prometheus-client's exposition: OpenMetrics when asked, gzip when accepted, HEAD
        om = urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Accept": OPENMETRICS}), timeout=10)
        assert om.headers["Content-Type"].startswith("application/openmetrics-text")
        body = om.read().decode()
        assert body.endswith("# EOF\n") and "nerve_build_info" in body
        assert {f.name for f in openmetrics_families(body)} >= {"nerve_computes", "nerve_model_tokens"}
        zipped = urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"}), timeout=10)
        assert zipped.headers["Content-Encoding"] == "gzip" and b"nerve_build_info" in gzip.decompress(zipped.read())
        head = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method="HEAD"),
                                      timeout=10)
        assert head.status == 200 and int(head.headers["Content-Length"]) > 1000 and head.read() == b""
        assert head.headers["Content-Type"].startswith("text/plain")
        code, output = engine.stop()
    assert code == 0, output
    assert f"metrics on http://127.0.0.1:{port}/metrics" in output
    # the last success and signal of each sense are kept across a restart
    heard = value(first, "nerve_sense_last_signal_timestamp_seconds", sense="heard")
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready(groups=3)
        again = scrape(port)
        assert value(again, "nerve_sense_last_signal_timestamp_seconds", sense="heard") == pytest.approx(heard, abs=0.002)
        assert not again["nerve_events"]  # counters start again from nothing
        engine.stop()


def test_metrics_are_off_by_default_and_a_bad_address_is_refused(tmp_path: Path) -> None:
    home = write_instance(tmp_path / "inst", CONFIG, SENSES)
    bad = nerve("run", "--for", "1s", "--metrics", "localhost:http", home=home)
    assert bad.returncode == 1 and "expected HOST:PORT" in bad.stderr
    quiet = nerve("run", "--for", "1s", home=home)
    assert quiet.returncode == 0 and "metrics on" not in quiet.stdout + quiet.stderr


HOLDS = """
import asyncio
from pathlib import Path
from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

async def holder(messages):
    while not Path("let-go").exists():  # the engine runs in the instance folder
        await asyncio.sleep(0.02)
    return RoleResult("done", {})

workflow = WorkflowDefinition(roles={"holder": holder},
                              moderator=lambda m: "holder" if m[-1].role == "__start__" else END)
"""


def test_threads_by_status_and_the_queue_depth_are_scraped(tmp_path: Path) -> None:

    home = write_instance(tmp_path / "inst", "senses: {}\nworkflows:\n  holds: {concurrency: 1}\n", {})
    (home / "workflows").mkdir()
    (home / "workflows" / "holds.py").write_text(HOLDS)
    port = free_port()

    def threads() -> dict[str, float]:
        metrics = scrape(port)
        counts = {dict(labels)["status"]: v for (_, labels), v in metrics["nerve_threads"].items()}
        return {**counts, "queue": value(metrics, "nerve_workflow_queue_depth", workflow="holds")}

    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready(groups=0)
        for prompt in ("one", "two"):
            request(home, "start_thread", workflow="holds", prompt=prompt)
        wait_for(lambda: threads() == {"started": 1, "queued": 1, "queue": 1}, 30,
                 what="one thread holding the slot, one queued")
        (home / "let-go").write_text("")
        wait_for(lambda: threads() == {"completed": 2, "queue": 0}, 30, what="both threads to complete")
        code, output = engine.stop()
    assert code == 0, output


def test_the_metrics_port_is_capped_warned_about_off_loopback_and_set_in_nerve_yaml(tmp_path: Path) -> None:
    port, other = free_port(), free_port()
    home = write_instance(tmp_path / "inst", f"engine:\n  metrics: 0.0.0.0:{port}\n" + CONFIG, SENSES)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        assert "nerve_uptime_seconds" in scrape(port)
        kernel = psutil.Process(engine.proc.pid)
        before = kernel.num_fds()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(IDLE_CLIENTS)]
        try:
            # past the cap a connection is answered 503 and closed at once: it holds no fd of the kernel's
            wait_for(lambda: sum(_refused(c) for c in idle) >= IDLE_CLIENTS - MAX_CONNECTIONS, 20,
                     what="connections past the cap to be refused")
            assert kernel.num_fds() <= before + MAX_CONNECTIONS + 4, (before, kernel.num_fds())
            assert engine.status()["workers"]  # the control socket still answers
        finally:
            for conn in idle:
                conn.close()
        wait_for(lambda: _answers(port), 20, what="scrapes to be answered again")
        busy = [r for r in read_logs(home, "system", "metrics_busy")]
        assert len(busy) == 1 and busy[0]["payload"]["limit"] == MAX_CONNECTIONS  # said once, not per refusal
        code, output = engine.stop()
    assert code == 0 and f"metrics on http://0.0.0.0:{port}/metrics" in output
    assert f"metrics on 0.0.0.0:{port} can be read from other machines" in output
    assert any("other machines" in r["payload"]["message"] for r in read_logs(home, "system", "warning"))
    with RunningEngine(home, "--metrics", str(other)) as engine:  # the option wins; a bare port is loopback
        engine.wait_ready(groups=2)
        assert "nerve_uptime_seconds" in scrape(other)
        code, output = engine.stop()
    assert code == 0 and f"metrics on http://127.0.0.1:{other}/metrics" in output
    assert "other machines" not in output


IDLE_CLIENTS = 200


def _answers(port: int) -> bool:
    try:
        return "nerve_uptime_seconds" in scrape(port)
    except urllib.error.HTTPError as exc:
        assert exc.code == 503, exc
        return False


def _refused(conn: socket.socket) -> bool:
    """True once the server answered this connection 503 (it sent nothing itself): refused at once, not
    closed later for sending no request."""
    conn.setblocking(False)
    try:
        return conn.recv(64, socket.MSG_PEEK).startswith(b"HTTP/1.1 503")
    except BlockingIOError:
        return False
