"""The web console at scale: time to first byte of its pages with 1,000 senses and 10,000 threads, beside
`nerve status --json` on the same instance; and how soon a signal reaches an open page (SSE).

A running engine holds 1,000 trivial senses in 10 groups (1 h intervals) and a `ping` sense listening to a
channel; logs.db holds 10,000 finished threads (and a few waiting ones) written before it starts. `nerve ui`
runs as its own process. Each page is asked N times over one kept-alive connection (median, p90 of the time
to the first byte of the answer); `nerve status --json` runs as a subprocess (its wall time: the floor a
person already waits for the same picture). SSE: an emit on the channel, timed from the request to the
`update` event on an open /events stream.

Goal: every page's median TTFB ≤ `nerve status --json`'s median wall time; SSE update ≤ 500 ms median.

    .venv/bin/python bench/console.py [-n 9]
"""

from __future__ import annotations

import argparse
import http.client
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import CLI_CWD, Client, Engine, Report, count_logs, engine_env, instance, machine, median, pct, wait_until

SENSES = 1000
GROUPS = 10
THREADS = 10_000
TRIVIAL = "def compute(db, peers):\n    return 1\n"
PING = "def compute(db, peers):\n    return 2\n"


def config() -> str:
    lines = ["senses:"] + [f"  s{i}: {{group: g{i % GROUPS}}}" for i in range(SENSES)] + ["  ping: {group: p}"]
    lines += ["reflexes:"] + [f"  - {{sense: s{i}, interval: 1h}}" for i in range(SENSES)]
    lines += ["  - {sense: ping, on: [pinged]}", "workflows:", "  w: {}"]
    return "\n".join(lines) + "\n"


def threads(home: Path) -> None:
    """10,000 finished threads (and 5 waiting for a person), as the engine writes them."""
    from nerve_cli.store.logs import LogStore
    from nerve_cli.vocab import logrows
    from nerve_cli.vocab.states import ThreadStatus

    with LogStore(home / "data" / "logs.db") as logs:
        for i in range(THREADS + 5):
            run_id = logs.allocate_run_id()
            logs.write(logrows.thread_status(run_id, "w", ThreadStatus.QUEUED, prompt=f"p{i}", max_rounds=3, origin={}))
            logs.write(logrows.thread_status(run_id, "w", ThreadStatus.STARTED, max_rounds=3))
            start = {"role": "__start__", "content": f"p{i}", "meta": {"maxRounds": 3}, "timestamp": 1}
            logs.write(logrows.thread_message(run_id, "w", start, 0))
            if i < THREADS:
                logs.write(logrows.thread_status(run_id, "w", ThreadStatus.COMPLETED, reason="end", rounds=0))
            else:
                ask = {"role": "a", "content": "ok?", "meta": {"ask_person": True}, "timestamp": 2}
                logs.write(logrows.thread_message(run_id, "w", ask, 1, round=1))
                logs.write(logrows.thread_status(run_id, "w", ThreadStatus.WAITING, question="ok?", rounds=1))
            if i % 1000 == 0:
                logs.flush()
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "w.py").write_text(
        "from nerve_cli.sdk import END, WorkflowDefinition, ask_person\n"
        "async def a(m):\n    return ask_person('ok?')\n"
        "workflow = WorkflowDefinition(roles={'a': a}, moderator=lambda m: 'a' if len(m) == 1 else END)\n")


def ttfb(conn: http.client.HTTPConnection, path: str, cookie: str) -> float:
    started = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": cookie})
    response = conn.getresponse()
    first = time.perf_counter()
    response.read()
    if response.status != 200:
        raise SystemExit(f"bench: GET {path} answered {response.status}")
    return (first - started) * 1000


def login(port: int, token: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", f"/?token={token}")
    response = conn.getresponse()
    response.read()
    cookie = response.getheader("set-cookie") or ""
    conn.close()
    return cookie.split(";", 1)[0]


def sse_latency(home: Path, port: int, cookie: str, runs: int) -> list[float]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n".encode())
    buffer = b""

    def until(marker: bytes) -> None:
        nonlocal buffer
        while marker not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("bench: the event stream closed")
            buffer += chunk

    until(b"retry:")
    time.sleep(0.5)  # the stream has read its first stamp
    client = Client(home)
    out = []
    for i in range(runs):
        buffer = b""
        started = time.perf_counter()
        client.emit("pinged", {"i": i})
        until(b"event: update")
        out.append((time.perf_counter() - started) * 1000)
        time.sleep(0.3)
    client.close()
    sock.close()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=9, help="requests of each page, runs of status")
    runs = parser.parse_args().n
    with instance(config(), {**{f"s{i}": TRIVIAL for i in range(SENSES)}, "ping": PING}) as home:
        threads(home)
        with Engine(home) as engine:
            engine.wait_ready(groups=GROUPS + 1, timeout=300)
            wait_until(lambda: count_logs(home, "run_complete") >= SENSES, 300, interval=0.5)
            port = free_port()
            ui = subprocess.Popen([sys.executable, "-m", "nerve_cli", "ui", "--home", str(home), "--listen",
                                   f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env={**engine_env(), "NO_COLOR": "1"}, cwd=CLI_CWD)
            try:
                found = re.search(r"token=(\S+)", ui.stdout.readline())  # type: ignore[union-attr]
                if not found:
                    raise SystemExit("bench: nerve ui did not say where it listens")
                cookie = login(port, found.group(1))
                pages = {"overview /": "/", "threads /threads": "/threads", "inbox /inbox": "/inbox",
                         "a thread /threads/run-10001": "/threads/run-10001", "a sense /senses/s7": "/senses/s7"}
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                times: dict[str, list[float]] = {name: [] for name in pages}
                status: list[float] = []
                for path in pages.values():  # warm up
                    ttfb(conn, path, cookie)
                for _ in range(runs):
                    for name, path in pages.items():
                        times[name].append(ttfb(conn, path, cookie))
                    started = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "nerve_cli", "status", "--json", "--home", str(home)],
                                   capture_output=True, env=engine_env(), check=True, cwd=CLI_CWD)
                    status.append((time.perf_counter() - started) * 1000)
                conn.close()
                sse = sse_latency(home, port, cookie, runs)
            finally:
                ui.terminate()
                ui.wait(10)
    floor = median(status)
    report = Report(f"nerve ui: {SENSES:,} senses, {THREADS:,} threads ({machine()})")
    for name, values in times.items():
        report.row(f"TTFB {name}, median / p90", f"{median(values):,.0f} / {pct(values, 90):,.0f} ms",
                   f"nerve status --json {floor:,.0f} ms", "≤ floor", median(values) <= floor)
    report.row("SSE update after an emit, median / p90", f"{median(sse):,.0f} / {pct(sse, 90):,.0f} ms",
               "", "≤ 500 ms", median(sse) <= 500)
    report.note(f"nerve status --json: median {floor:,.0f} ms, p90 {pct(status, 90):,.0f} ms over {runs} runs "
                "(a subprocess: its start-up included, as a person running it waits for it)")
    report.print()


if __name__ == "__main__":
    main()
