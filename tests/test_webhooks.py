"""Webhooks on the real engine, with a real HTTP client (httpx): POST /emit/CHANNEL, signed, stored once."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from enginekit import RunningEngine, completes, free_port, metric_samples, nerve, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, events_db, got, store_sense

from nerve_cli.schema.migrate import generate_migration
from nerve_cli.wire.protocol import MAX_PAYLOAD

pytestmark = pytest.mark.timeout(90)
SECRET = "s3cret-for-tests"


def hooked_instance(home: Path, engine: str = "") -> Path:
    write_instance(home, f"""
        engine:
          webhooks: 127.0.0.1:0
          {engine}
        senses:
          store: {{}}
        reflexes:
          - {{sense: store, on: [gh.push, open]}}
        channels:
          gh.push: {{webhook: true, secret_env: NERVE_TEST_HOOK_SECRET}}
          open: {{webhook: true}}
          closed: {{}}
    """, {})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    return home


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def start(home: Path, *args: str) -> tuple[RunningEngine, str]:
    engine = RunningEngine(home, *args, env={"NERVE_TEST_HOOK_SECRET": SECRET})
    engine.wait_ready()
    url = engine.status()["webhooks_url"]
    assert url and url.endswith("/emit/"), url
    return engine, url


def test_webhook_posts_get_the_documented_answers_and_only_accepted_ones_are_stored(home: Path) -> None:
    hooked_instance(home)
    port = free_port()
    engine, url = start(home, "--metrics", f"127.0.0.1:{port}")
    with engine, httpx.Client(timeout=30) as client:
        body = json.dumps({"ref": "refs/heads/main", "n": 1}).encode()
        headers = {"X-Hub-Signature-256": signed(body), "X-GitHub-Delivery": "delivery-1",
                   "Content-Type": "application/json"}
        first = client.post(url + "gh.push", content=body, headers=headers)
        assert first.status_code == 202, first.text
        doc = first.json()
        assert doc["channel"] == "gh.push" and doc["duplicate"] is False and doc["triggered"] == ["store"]
        wait_for(lambda: got(home, "store"), what="the listener to compute with the payload")
        again = client.post(url + "gh.push", content=body, headers=headers)  # GitHub's redelivery
        assert again.status_code == 200 and again.json()["duplicate"] is True
        assert again.json()["event_id"] == doc["event_id"]

        refused = {
            "bad signature": client.post(url + "gh.push", content=body,
                                         headers={**headers, "X-Hub-Signature-256": signed(body, "wrong"),
                                                  "X-GitHub-Delivery": "d-2"}),
            "no signature": client.post(url + "gh.push", content=body, headers={"X-GitHub-Delivery": "d-3"}),
            "signed other body": client.post(url + "gh.push", content=b'{"n": 2}', headers=headers),
            "unknown channel": client.post(url + "nope", content=body),
            "closed channel": client.post(url + "closed", content=body),
            "not /emit": client.post(url.replace("/emit/", "/other/") + "open", content=body),
            "oversize": client.post(url + "open", content=b"[" + b"1," * (MAX_PAYLOAD // 2) + b"1]"),
            "oversize chunked": client.post(url + "open", content=iter([b"[", b"2," * (MAX_PAYLOAD // 2), b"2]"])),
            "not JSON": client.post(url + "open", content=b"{not json"),
            "empty": client.post(url + "open", content=b""),
            "GET": client.get(url + "open"),
        }
        codes = {what: r.status_code for what, r in refused.items()}
        assert codes == {"bad signature": 401, "no signature": 401, "signed other body": 401,
                         "unknown channel": 404, "closed channel": 404, "not /emit": 404, "oversize": 413,
                         "oversize chunked": 413, "not JSON": 400, "empty": 400, "GET": 405}
        for what, r in refused.items():
            assert r.json()["error"]["message"], what
        assert "X-Hub-Signature-256" in refused["bad signature"].json()["error"]["message"]
        assert refused["GET"].headers["allow"] == "POST"

        # 200 concurrent posts, no delivery ids: every one stored once
        async def burst() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
            async with httpx.AsyncClient(timeout=60, limits=limits) as hc:
                return await asyncio.gather(*(hc.post(url + "open", json={"i": i}) for i in range(200)))

        answers = asyncio.run(burst())
        assert [r.status_code for r in answers] == [202] * 200
        ids = [r.json()["event_id"] for r in answers]
        assert len(set(ids)) == 200
        wait_for(lambda: len(got(home, "store")) == 201, 30, what="the listener to store all 201 events")
        scraped = metric_samples(port)
        answered = {(labels["channel"], labels["code"]): v for name, labels, v in scraped
                    if name == "nerve_webhook_requests_total"}
        assert answered[("gh.push", "202")] == 1 and answered[("gh.push", "200")] == 1
        assert answered[("gh.push", "401")] == 3 and answered[("open", "202")] == 200
        assert answered[("", "404")] == 3  # unknown, closed, not /emit: one label, whatever the path
        code, out = engine.stop()
    assert code == 0, out
    stored = events_db(home, "SELECT channel, payload, key, via FROM events ORDER BY id")
    assert stored[0] == ("gh.push", json.dumps({"ref": "refs/heads/main", "n": 1}, separators=(",", ":")),
                         "webhook:gh.push:delivery-1", "webhook")
    assert sorted(json.loads(p)["i"] for c, p, _, _ in stored[1:]) == list(range(200))
    assert len(stored) == 201 and {o for *_, o in stored} == {"webhook"}
    payloads = [p for _, _, p in got(home, "store")]
    assert payloads.count({"ref": "refs/heads/main", "n": 1}) == 1  # the redelivery computed nothing
    assert sum(c["payload"].get("events", 0) for c in completes(home, "store")) == 201
    emits = read_logs(home, "signal", "emit")
    assert len(emits) == 201 and all(e["payload"]["via"] == "webhook" for e in emits)


def test_bounded_connections_request_timeout_and_a_kill_during_a_burst(home: Path) -> None:
    hooked_instance(home, "webhook_connections: 3\n          webhook_timeout: 400ms")
    engine, url = start(home)
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    with engine:
        idle = [socket.create_connection((host, int(port))) for _ in range(3)]
        time.sleep(0.05)  # the three are accepted (connection_made) before the fourth arrives
        fourth = socket.create_connection((host, int(port)))
        fourth.settimeout(10)
        assert fourth.recv(4096).startswith(b"HTTP/1.1 503")
        busy = wait_for(lambda: read_logs(home, "system", "webhooks_busy"), what="the siege's log row")
        assert [b["payload"] for b in busy] == [{"what": "connections", "held": 3, "limit": 3}]
        idle[0].sendall(b"POST /emit/open HTTP/1.1\r\nHost: x\r\n")  # headers that never end
        for sock in idle:
            sock.settimeout(10)
            assert sock.recv(4096).startswith(b"HTTP/1.1 408"), "a request that never arrives whole is cut off"
            sock.close()
        fourth.close()

        answered: list[int] = []
        stop = threading.Event()

        def post() -> None:  # keep-alive posts until the engine dies; remember each 202's event id
            with httpx.Client(timeout=5) as client:
                for i in range(100_000):
                    if stop.is_set():
                        return
                    try:
                        r = client.post(url + "open", json={"i": i})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 202:
                        answered.append(r.json()["event_id"])

        posters = [threading.Thread(target=post) for _ in range(2)]
        for t in posters:
            t.start()
        wait_for(lambda: len(answered) >= 300, 30, what="a burst of answered posts")
        engine.proc.send_signal(signal.SIGKILL)
        engine.proc.wait(10)
        stop.set()
        for t in posters:
            t.join(10)
    stored = {row[0] for row in events_db(home, "SELECT id FROM events")}
    assert answered and set(answered) <= stored, f"{len(set(answered) - stored)} answered events were not stored"


def test_config_names_what_is_wrong_with_webhook_settings(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nerve_cli.config.check import check_instance
    from nerve_cli.config.load import validate_text

    _, problems = validate_text("""
engine: {webhooks: "example.org:99999"}
senses: {store: {}}
reflexes: [{sense: store, on: [hook]}]
channels:
  store: {webhook: true}
  hook: {webhook: true, secret_env: "not a name", signature_header: "X Sig"}
  quiet: {secret_env: SECRET}
""")
    found = {(p.path, p.severity): p.message for p in problems}
    assert "HOST:PORT" in found[("engine.webhooks", "error")]
    assert "is a sense" in found[("channels.store", "error")]
    assert "environment variable" in found[("channels.hook.secret_env", "error")]
    assert "HTTP header name" in found[("channels.hook.signature_header", "error")]
    assert "add `webhook: true`" in found[("channels.quiet", "error")]

    write_instance(home, """
        senses: {store: {}}
        reflexes: [{sense: store, on: [hook]}]
        channels:
          hook: {webhook: true, secret_env: NERVE_TEST_UNSET_SECRET}
          nobody: {webhook: true}
    """, {"store": "def compute(db, peers):\n    return 1\n"})
    monkeypatch.delenv("NERVE_TEST_UNSET_SECRET", raising=False)
    report = check_instance(home, code=False)
    assert report.valid
    warned = {p.path: p.message for p in report.problems}
    assert "NERVE_TEST_UNSET_SECRET is not set" in warned["channels.hook.secret_env"]
    assert "no reflex listens to channel `nobody`" in warned["channels.nobody"]
    assert {c.name for c in report.channels} == {"hook", "nobody"}
    refused = nerve("run", "--webhooks", "nowhere", home=home)
    assert refused.returncode == 1 and "--webhooks: expected HOST:PORT" in refused.stderr + refused.stdout


def _post_raw(host: str, port: int, head: bytes, body_chunks: int, chunk: bytes) -> bytes:
    """Send a request's head, then up to `body_chunks` chunks of its body (never all it declared), and
    return what the server answers (it answers a refused post before the body ends)."""
    with socket.create_connection((host, port)) as sock:
        sock.settimeout(30)
        sock.sendall(head)
        try:
            for _ in range(body_chunks):
                sock.sendall(chunk)
        except OSError:  # refused mid-body: the server answered and closed
            pass
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                got = sock.recv(65536)
                if not got:
                    return answer
                answer += got
            head, _, body = answer.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length and (got := sock.recv(65536)):
                body += got
            return head + b"\r\n\r\n" + body
        except OSError:
            return answer


def test_unauthenticated_bodies_are_bounded_in_memory_and_odd_signatures_are_refused_not_crashed(home: Path) -> None:
    """A signed channel holds a body until its signature is checked: the bytes held at once are bounded over
    every connection (32 parallel 64 MB posts took an engine to 2 GB), a post without the header is refused
    before its body is read, a signature header with non-ASCII bytes is a 401 (it was a 500 with a traceback),
    and a listener beyond loopback with unsigned channels is logged, not only printed."""
    import psutil

    from nerve_cli.kernel.ingress.webhooks import MAX_BODY, MAX_IN_FLIGHT

    hooked_instance(home)
    home.joinpath("nerve.yaml").write_text(home.joinpath("nerve.yaml").read_text().replace(
        "webhooks: 127.0.0.1:0", "webhooks: 0.0.0.0:0"))
    engine, url = start(home)
    host, port = "127.0.0.1", int(url.split("//")[1].split("/")[0].rsplit(":", 1)[1])
    with engine:
        warned = wait_for(lambda: [r for r in read_logs(home, "system", "warning")
                                   if r["ref"] == "webhooks"], what="the exposed-listener warning row")
        assert "open" in warned[0]["payload"]["message"] and "no secret_env" in warned[0]["payload"]["message"]

        odd = _post_raw(host, port, b"POST /emit/gh.push HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                                    b"X-Hub-Signature-256: sha256=\xc3\xa9\xff\r\n\r\n{}", 0, b"")
        assert odd.startswith(b"HTTP/1.1 401"), odd[:200]
        declared = MAX_BODY - 1
        unsigned = _post_raw(host, port, b"POST /emit/gh.push HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                             % declared, 0, b"")
        assert unsigned.startswith(b"HTTP/1.1 401") and b"no X-Hub-Signature-256" in unsigned

        proc = psutil.Process(engine.proc.pid)
        before = proc.memory_info().rss
        chunk = b"[" + b"1," * (512 * 1024)  # 1 MiB of a JSON array that never ends
        per_post = (MAX_IN_FLIGHT // 2 + len(chunk) - 1) // len(chunk)  # two posts fill the budget
        head = (b"POST /emit/gh.push HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                b"X-Hub-Signature-256: sha256=%s\r\n\r\n" % (declared, b"0" * 64))
        answers: list[bytes] = []
        peak = [before]

        def post() -> None:
            answers.append(_post_raw(host, port, head, per_post, chunk))

        def watch() -> None:
            while len(answers) < 4:
                peak[0] = max(peak[0], proc.memory_info().rss)
                time.sleep(0.02)

        threads = [threading.Thread(target=post) for _ in range(4)] + [threading.Thread(target=watch)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        busy = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        assert busy and all(b"retry-after: 1" in a.lower() for a in busy), [a[:120] for a in answers]
        grown = (peak[0] - before) / 2**20
        assert grown < MAX_IN_FLIGHT / 2**20 + 64, f"the engine grew {grown:.0f} MiB receiving 4 bodies"
        rows = wait_for(lambda: [r for r in read_logs(home, "system", "webhooks_busy")
                                 if r["payload"]["what"] == "bytes"], what="the bytes siege's log row")
        assert len(rows) == 1 and rows[0]["payload"]["limit"] == MAX_IN_FLIGHT
        signed_body = json.dumps({"after": "siege"}).encode()
        ok = httpx.post(url.replace("0.0.0.0", "127.0.0.1") + "gh.push", content=signed_body,
                        headers={"X-Hub-Signature-256": signed(signed_body)}, timeout=30)
        assert ok.status_code == 202, ok.text  # what was held was given back
        code, out = engine.stop()
    assert code == 0, out
    assert "Traceback" not in out
    assert [json.loads(p) for (p,) in events_db(home, "SELECT payload FROM events")] == [{"after": "siege"}]


def test_a_signed_channel_whose_secret_is_unset_is_reported_at_start_not_at_the_first_post(home: Path) -> None:
    hooked_instance(home)
    engine = RunningEngine(home, env={"NERVE_TEST_HOOK_SECRET": ""})
    with engine:
        engine.wait_ready()
        rows = wait_for(lambda: [r for r in read_logs(home, "system", "warning") if r["ref"] == "webhooks"],
                        what="the unset secret's warning row, before any post")
        assert "$NERVE_TEST_HOOK_SECRET is not set" in rows[0]["payload"]["message"]
        assert "gh.push" in rows[0]["payload"]["message"]
        code, out = engine.stop()
    assert code == 0 and "NERVE_TEST_HOOK_SECRET is not set" in out, out


def test_a_request_head_past_its_bound_is_refused_and_a_slow_one_on_a_kept_alive_connection_times_out(
        home: Path) -> None:
    """The HTTP parser (httptools) bounds no request head itself: a head past MAX_HEAD, in one write or in many, is
    answered 431 and the connection closed, nothing stored; posts that fit, kept alive or pipelined (a large
    body in the same read as the next head's start included), are stored;
    the next request's head that never ends on a kept-alive connection is cut off at webhook_timeout (408)."""
    from nerve_cli.kernel.ingress.webhooks import MAX_HEAD

    hooked_instance(home, "webhook_timeout: 400ms")
    engine, url = start(home)
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    big = b"X-Filler: " + b"a" * (4 * MAX_HEAD) + b"\r\n"
    with engine:
        whole = _post_raw(host, int(port), b"POST /emit/open HTTP/1.1\r\nHost: x\r\n" + big
                          + b"Content-Length: 2\r\n\r\n{}", 0, b"")
        assert whole.startswith(b"HTTP/1.1 431"), whole[:200]
        assert b"nothing was stored" in whole
        dribbled = _post_raw(host, int(port), b"POST /emit/open HTTP/1.1\r\nHost: x\r\n",
                             4 * MAX_HEAD // 1024, b"X-Filler-Part: " + b"b" * 1000 + b"\r\n")
        assert dribbled.startswith(b"HTTP/1.1 431"), dribbled[:200]
        fits = b"X-Filler: " + b"c" * (MAX_HEAD // 2) + b"\r\n"
        with socket.create_connection((host, int(port))) as sock:  # two pipelined posts, then a third kept alive
            sock.settimeout(10)
            post = b"POST /emit/open HTTP/1.1\r\nHost: x\r\n" + fits + b"Content-Length: %d\r\n\r\n%s"
            sock.sendall(post % (7, b'{"n":1}') + post % (7, b'{"n":2}'))
            answers = b""
            while answers.count(b"HTTP/1.1 202") < 2:
                answers += sock.recv(65536)
            sock.sendall(post % (7, b'{"n":3}'))
            while answers.count(b"HTTP/1.1 202") < 3:
                answers += sock.recv(65536)
            # a large body, then half of the next (pipelined) request's head in the same write: the body is not
            # taken for that head
            large = b'{"n":4,"pad":"' + b"d" * (2 * MAX_HEAD) + b'"}'
            fourth = post % (len(large), large)
            fifth = post % (7, b'{"n":5}')
            sock.sendall(fourth + fifth[:20])
            time.sleep(0.2)
            sock.sendall(fifth[20:])
            while answers.count(b"HTTP/1.1 202") < 5:
                got = sock.recv(65536)
                assert got and b"431" not in got, got[:200]
                answers += got
            sock.sendall(b"POST /emit/open HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
            late = b""
            while b"HTTP/1.1 408" not in late:
                got = sock.recv(65536)
                assert got, f"closed without a 408: {late[:200]!r}"
                late += got
        wait_for(lambda: len(events_db(home, "SELECT id FROM events")) == 5, 10, what="the five posts that fit")
        code, out = engine.stop()
    assert code == 0, out
    assert "Traceback" not in out
    assert sorted(json.loads(p)["n"] for (p,) in events_db(home, "SELECT payload FROM events")) == [1, 2, 3, 4, 5]
