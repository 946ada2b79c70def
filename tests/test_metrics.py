"""`nerve run --metrics`: Prometheus text at /metrics during a real run, parsed with prometheus_client's parser."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, nerve, wait_for, write_instance
from prometheus_client.parser import text_string_to_metric_families

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, dict]:
    """family name → {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}


def value(metrics: dict, family: str, sample: str | None = None, **labels: str) -> float:
    return metrics[family][(sample or family, tuple(sorted(labels.items())))]


def test_metrics_are_scraped_during_a_run_and_counters_increase(tmp_path: Path) -> None:
    home = write_instance(tmp_path / "inst", CONFIG, SENSES)
    port = free_port()
    with RunningEngine(home, "--metrics", f"127.0.0.1:{port}") as engine:
        engine.wait_ready(groups=2)
        wait_for(lambda: len(completes(home, "echo")) >= 3 and completes(home, "boom"), 20, what="computes")
        first = scrape(port)
        ticks = value(first, "nerve_computes", "nerve_computes_total", sense="tick", outcome="signal")
        assert ticks >= 3
        assert value(first, "nerve_computes", "nerve_computes_total", sense="boom", outcome="error") >= 1
        assert value(first, "nerve_errors", "nerve_errors_total", sense="boom") >= 1
        count = value(first, "nerve_compute_duration_seconds", "nerve_compute_duration_seconds_count", sense="tick")
        inf = value(first, "nerve_compute_duration_seconds", "nerve_compute_duration_seconds_bucket",
                    sense="tick", le="+Inf")
        assert count == inf >= ticks  # every compute of tick is in its histogram
        assert value(first, "nerve_hop_seconds", "nerve_hop_seconds_count") >= 3  # echo listens to tick
        assert value(first, "nerve_interval_lateness_seconds", "nerve_interval_lateness_seconds_count") >= 3
        for group in ("a", "b"):
            assert value(first, "nerve_worker_up", group=group) == 1
            assert value(first, "nerve_worker_resident_memory_bytes", group=group) > 5 * 2**20
            assert value(first, "nerve_worker_cpu_seconds", "nerve_worker_cpu_seconds_total", group=group) > 0
            assert value(first, "nerve_worker_restarts", "nerve_worker_restarts_total", group=group) == 0
        assert "nerve_computes_pending" in first and "nerve_log_rows_buffered" in first
        assert value(first, "nerve_kernel_process_resident_memory_bytes") > 0
        # counters keep counting with the computes
        wait_for(lambda: value(scrape(port), "nerve_computes", "nerve_computes_total", sense="tick",
                               outcome="signal") >= ticks + 3, 20, what="tick's counter to grow")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert missing.value.code == 404
        code, output = engine.stop()
    assert code == 0, output
    assert f"metrics on http://127.0.0.1:{port}/metrics" in output


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
    from nerve_cli.ops.client import request

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


def test_engine_metrics_in_nerve_yaml_is_served_and_the_option_overrides_it(tmp_path: Path) -> None:
    port, other = free_port(), free_port()
    home = write_instance(tmp_path / "inst", f"engine:\n  metrics: 127.0.0.1:{port}\n" + CONFIG, SENSES)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        assert "nerve_uptime_seconds" in scrape(port)
        code, output = engine.stop()
    assert code == 0 and f"metrics on http://127.0.0.1:{port}/metrics" in output
    with RunningEngine(home, "--metrics", str(other)) as engine:  # a bare port: loopback
        engine.wait_ready(groups=2)
        assert "nerve_uptime_seconds" in scrape(other)
        code, output = engine.stop()
    assert code == 0 and f"metrics on http://127.0.0.1:{other}/metrics" in output
