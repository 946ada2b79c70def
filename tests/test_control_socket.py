"""The control socket: owner-only, robust to bad requests, and the commands that use it."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, nerve, read_logs, wait_for, write_instance
from loadclock import scaled

from nerve_cli.kernel.control.server import MAX_REQUEST
from nerve_cli.ops.client import request

FAST = "def compute(db, peers):\n    return {'n': 42}\n"


def _raw(home: Path, data: bytes, path: str | None = None) -> bytes:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path or str(home / "data" / "nerve.sock"))
    try:
        sock.sendall(data)
    except BrokenPipeError:
        pass  # the engine answered and hung up before reading it all: the answer is still there
    out = bytearray()
    while not out.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        out += chunk
    sock.close()
    return bytes(out)


@pytest.fixture
def engine(home: Path):
    write_instance(home, """
        senses:
          a: {}
          b: {}
        reflexes:
          - {sense: b, on: [task.created]}
    """, {"a": FAST, "b": FAST})
    with RunningEngine(home) as running:
        running.wait_ready()
        yield running
        running.stop()


def test_socket_is_owner_only(engine: RunningEngine, home: Path) -> None:
    mode = stat.S_IMODE(os.stat(home / "data" / "nerve.sock").st_mode)
    assert mode == 0o600


def test_malformed_and_oversized_requests_get_errors_and_the_engine_carries_on(engine: RunningEngine, home: Path) -> None:
    assert b"not JSON" in _raw(home, b"{nope\n")
    assert b"expected" in _raw(home, b"[1, 2]\n")
    assert b"unknown op" in _raw(home, b'{"op": "reboot"}\n')
    assert b"larger than" in _raw(home, b'{"op": "status", "x": "' + b"y" * (MAX_REQUEST + 1) + b'"}\n')
    big = b"1" + b"0" * 30  # an integer past 64 bits: the line is read by json, which took NaN and 1e400 as numbers
    for number in (b"NaN", b"-Infinity", b"1e400"):
        line = b'{"op": "emit", "channel": "ping", "payload": [' + big + b", " + number + b"]}\n"
        assert b"not JSON" in _raw(home, line) or b"largest JSON number" in _raw(home, line), number
    assert request(home, "status")["pid"] == engine.proc.pid


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_peer_uid_is_checked(engine: RunningEngine, home: Path) -> None:
    path = home / "data" / "nerve.sock"
    os.chmod(path, 0o666)  # let the other user reach the socket, so the uid check itself is what refuses
    os.chmod(home / "data", 0o755)
    data_dir = os.open(home / "data", os.O_RDONLY | os.O_DIRECTORY)  # reach it past root-only tmp parents
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody and ask
        os.close(read_end)
        try:
            os.setgid(65534)
            os.setuid(65534)
            answer = _raw(home, b'{"op": "status"}\n', f"/proc/self/fd/{data_dir}/nerve.sock")
        except Exception as exc:  # pragma: no cover - reported to the parent
            answer = repr(exc).encode()
        os.write(write_end, answer)
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    answer = os.read(read_end, 65536)
    assert b"permission denied" in answer
    assert json.loads(answer)["ok"] is False


def test_compute_on_demand_through_the_engine(engine: RunningEngine, home: Path) -> None:
    answer = request(home, "compute", sense="a")
    assert answer["outcome"] == "signal" and answer["payload"] == {"n": 42}
    result = nerve("sense", "compute", "a", "--json", home=home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["payload"] == {"n": 42}


def test_emit_triggers_listeners_and_is_logged(engine: RunningEngine, home: Path) -> None:
    result = nerve("emit", "task.created", "--payload", '{"id": 7}', home=home)
    assert result.returncode == 0, result.stderr
    assert "b" in result.stdout
    wait_for(lambda: completes(home, "b"), 10, what="b to run")
    emitted = read_logs(home, "signal", "emit", "task.created")
    assert emitted[0]["payload"] == {"payload": {"id": 7}, "event_id": 1}
    refused = nerve("emit", "a", home=home)
    assert refused.returncode == 1 and "is a sense" in refused.stderr
    bad = nerve("emit", "x", "--payload", "{", home=home)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


def test_status_table_and_json(engine: RunningEngine, home: Path) -> None:
    result = nerve("status", "--json", home=home)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"a", "b", "nerve-health"} <= {s["name"] for s in data["senses"]}
    assert data["workers"][0]["state"] == "ready" and data["workers"][0]["pid"]
    table = nerve("status", home=home)
    assert table.returncode == 0 and "Workers" in table.stdout and "nerve-health" in table.stdout


def test_status_without_engine_shows_the_files_and_how_to_start_one(home: Path) -> None:
    """As `nerve top` does: the instance as its files tell it, exit 3 (not running, as `systemctl status`)."""
    config = "senses:\n  a: {}\n  b: {enabled: false}\nreflexes:\n  - {sense: a, interval: 1h}\n"
    write_instance(home, config, {"a": "def compute(db, peers):\n    return 1\n", "b": "def compute(db, peers):\n    return 2\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: completes(home, "a"), 15, what="a to run once")
        engine.stop()
    result = nerve("status", home=home)
    assert result.returncode == 3, result.stderr
    assert "engine stopped" in result.stdout and "nerve run" in result.stdout
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:] if line.strip()}
    # piped, a time prints as ISO 8601 UTC (relative times are for terminals)
    assert rows["a"][2] == "stopped" and rows["b"][2] == "disabled" and re.search(r"\d{4}-\d\d-\d\dT", rows["a"][4])
    doc = json.loads(nerve("status", "--json", home=home).stdout)
    assert doc["engine"]["running"] is False and doc["engine"]["pid"] is None and doc["engine"]["stopped_ms"]
    assert [(s["name"], s["state"]) for s in doc["senses"]] == [("a", "stopped"), ("b", "disabled")]
    assert doc["senses"][0]["last_run_ms"] is not None


def test_compute_on_demand_refuses_at_once_what_cannot_run(home: Path) -> None:
    write_instance(home, """
        senses:
          broken: {}
        reflexes: []
    """, {"broken": "def compute(db, peers)\n    return 1\n"})
    alone = nerve("sense", "compute", "broken", "--json", home=home)  # in a one-off worker
    with RunningEngine(home) as engine:
        engine.wait_ready()
        result = nerve("sense", "compute", "broken", home=home)
        assert result.returncode == 1
        assert "broken: SyntaxError: expected ':' at senses/broken/sense.py:1" in result.stderr, result.stderr
        engine_doc = nerve("sense", "compute", "broken", "--json", home=home)
        engine.stop()
    # the same answer either way: an error outcome with the load failure's type, file:line and traceback
    assert alone.returncode == engine_doc.returncode == 1
    one, two = json.loads(alone.stdout), json.loads(engine_doc.stdout)
    assert (one["via"], two["via"]) == ("worker", "engine")
    assert one["outcome"] == two["outcome"] == "error" and one["error"] == two["error"], (one, two)


def test_a_person_waits_for_a_compute_as_long_as_its_timeout_and_grace_allow_and_the_engine_answers_first(
        home: Path) -> None:
    import time

    from nerve_cli.config.load import load_config
    from nerve_cli.kernel.control.requests import QUEUE_SLACK, compute_wait
    from nerve_cli.ops.client import COMPUTE_SOCKET_TIMEOUT

    write_instance(home, """
        senses:
          held: {throttle: 1h, timeout: 200ms, grace_period: 300ms}
          slow: {timeout: 40s}
          endless: {timeout: 10m}
        reflexes: []
    """, {"held": FAST, "slow": FAST, "endless": FAST})
    config = load_config(home)
    # a compute may wait for one already running, each ended at the latest by the grace period's kill
    assert compute_wait(config, "held") == 2 * (0.2 + 0.3) + QUEUE_SLACK
    assert compute_wait(config, "slow") == 2 * (40 + 120) + QUEUE_SLACK  # beyond a client's old 30 s
    assert compute_wait(config, "endless") < COMPUTE_SOCKET_TIMEOUT  # the client never gives up first
    with RunningEngine(home) as engine:
        engine.wait_ready()
        assert nerve("sense", "compute", "held", home=home).returncode == 0
        started = time.monotonic()
        held = nerve("sense", "compute", "held", "--json", home=home)  # its throttle holds it for an hour
        took = time.monotonic() - started
        engine.stop()
    assert held.returncode == 1
    message = json.loads(held.stdout)["error"]["message"]
    assert message.startswith("held did not finish within 6s (it is still scheduled; its throttle of 1h holds it "
                              "until "), message
    assert 5.5 < took < scaled(20), took  # the engine's answer, at the sense's own limit (slower under load)
