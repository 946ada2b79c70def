"""Loop guards: every chain of senses and threads carries its causal depth, and stops at its bound on its own."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, read_logs, sense_rows, starts, thread_statuses, wait_for, write_instance
from loadclock import scaled

from nerve_cli.ops.client import request

LOOPER = textwrap.dedent('''
    from nerve_cli.sdk import SenseResult

    def compute(db, peers, trigger):
        return SenseResult({"heard": len(trigger.events)}, workflow="loop|2|again")
''')
# a declared loop that turns once per thread: only a thread's completion starts the next one
ONCE_PER_TURN = textwrap.dedent('''
    from nerve_cli.sdk import KEEP, SenseResult

    def compute(db, peers, trigger):
        done = [e.payload["depth"] for e in trigger.events if e.payload["transition"] == "completed"]
        if not done:
            return KEEP
        return SenseResult({"depth": max(done)}, workflow="loop|2|again")
''')
TICKER = textwrap.dedent('''
    import time

    def compute(db, peers):
        return time.time()
''')
QUICK = textwrap.dedent('''
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def say(messages):
        return RoleResult("done", {})

    workflow = WorkflowDefinition(roles={"say": say}, moderator=lambda m: "say" if len(m) == 1 else END)
''')


def _instance(home: Path, looper: str, reflex: str = "{sense: looper, on: [nerve-threads]}") -> None:
    write_instance(home, f"""
        senses:
          looper: {{group: loop}}
          ticker: {{group: ticks}}
        reflexes:
          - {reflex}
          - {{sense: ticker, interval: 200ms}}
        workflows:
          loop: {{concurrency: 8}}
    """, {"looper": looper, "ticker": TICKER})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "loop.py").write_text(QUICK)


def _refusals(home: Path) -> list[dict]:
    return read_logs(home, "system", "causal_refused")


def _settled(home: Path, seconds: float = 1.5) -> dict[str, str]:
    """Wait until no thread is live and no new one started for `seconds`: the loop ended by itself."""
    seen: list[tuple[float, int]] = []

    def quiet() -> bool:
        statuses = thread_statuses(home)
        now = time.monotonic()
        if not seen or seen[-1][1] != len(statuses) or any(s in ("queued", "started") for s in statuses.values()):
            seen.append((now, len(statuses)))
            return False
        return now - seen[-1][0] >= scaled(seconds)

    wait_for(quiet, 60, what="the loop to stop starting threads")
    return thread_statuses(home)


def test_the_looper_stops_on_its_own_with_one_refusal_naming_its_path(home: Path) -> None:
    _instance(home, LOOPER)
    checked = json.loads(cli("config", "check", "--json").output)
    warned = [p["message"] for p in checked["problems"] if "loop through what computes cause" in p["message"]]
    assert len(warned) == 1 and "looper → (thread) → nerve-threads → looper" in warned[0], checked["problems"]
    assert "max_depth" in warned[0]

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        began = time.monotonic()
        request(home, "start_thread", workflow="loop", prompt="go")
        wait_for(lambda: _refusals(home), 30, what="the chain to be refused at its bound")
        stopped_in = time.monotonic() - began
        statuses = _settled(home)
        status = engine.status()
        shown = cli("status")
        ticks = starts(home, "ticker")
        engine.stop()

    # run-1 (a person's) is depth 0; each turn of the loop is two hops (a thread, its transitions), so threads
    # start at depths 2, 4, 6, 8; each thread's transitions wake the looper at most 3 times (queued, started,
    # completed): at most 3 + 9 + 27 + 81 threads after run-1
    assert len(statuses) <= 1 + 3 + 9 + 27 + 81, len(statuses)
    assert all(s == "completed" for s in statuses.values()), statuses
    assert stopped_in < scaled(20)
    (refused,) = _refusals(home)  # once for the chain, however many of its branches were refused
    payload = refused["payload"]
    assert (payload["what"], payload["target"], payload["sense"]) == ("directive", "workflow loop", "looper")
    assert payload["depth"] == 10 and payload["bound"] == 8
    assert payload["path"][0] == "run-1 (loop)" and payload["path"][1:4] == ["nerve-threads", "looper",
                                                                             "workflow loop"]
    assert status["causal"]["refused"] >= 1 and status["causal"]["chains"] == 1
    # the other senses kept their rhythm: no gap between two ticks much longer than the interval
    times = [t["ts"] for t in ticks]
    assert len(times) >= 5
    assert max(b - a for a, b in zip(times, times[1:])) < scaled(1.5) * 1000
    assert shown.exit_code == 0 and "causal depth:" in shown.output and "refused past their bound" in shown.output
    print(f"looper: {len(statuses)} threads, refused after {stopped_in:.2f}s")


def test_a_declared_loop_runs_to_its_declared_bound(home: Path) -> None:
    _instance(home, ONCE_PER_TURN, "{sense: looper, on: [nerve-threads], max_depth: 12}")
    checked = json.loads(cli("config", "check", "--json").output)
    assert not [p for p in checked["problems"] if "loop through" in p["message"]], checked["problems"]

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        request(home, "start_thread", workflow="loop", prompt="go")
        wait_for(lambda: _refusals(home), 30, what="the declared bound to be reached")
        statuses = _settled(home)
        engine.stop()

    # threads at depths 0 (run-1), 2, 4, ..., 12: seven; the eighth (depth 14) is refused
    assert sorted(statuses, key=lambda r: int(r.split("-")[1])) == [f"run-{n}" for n in range(1, 8)]
    (refused,) = _refusals(home)
    assert (refused["payload"]["depth"], refused["payload"]["bound"]) == (14, 12)


def test_a_loops_entry_declares_the_cycle_for_config_check(home: Path) -> None:
    _instance(home, LOOPER)
    text = (home / "nerve.yaml").read_text() + "loops:\n  - [looper, nerve-threads]\n"
    (home / "nerve.yaml").write_text(text)
    checked = json.loads(cli("config", "check", "--json").output)
    assert not [p for p in checked["problems"] if "loop through" in p["message"]], checked["problems"]


def test_a_forged_log_row_is_no_transition(home: Path) -> None:
    """nerve-threads signals what the engine recorded with the status change, never rows read back from logs.db."""
    watch = textwrap.dedent('''
        from nerve_cli.sdk import KEEP

        def compute(db, peers, trigger):
            for event in trigger.events:
                db.execute("INSERT INTO seen (run_id, transition) VALUES (?, ?)",
                           [event.payload["run_id"], event.payload["transition"]])
            return KEEP
    ''')
    seen_table = textwrap.dedent('''
        from nerve_cli.sdk import table

        @table(pk="n")
        class Seen:
            n: int
            run_id: str
            transition: str
    ''')
    write_instance(home, """
        senses:
          watch: {group: watchers}
        reflexes:
          - {sense: watch, on: [nerve-threads]}
        workflows:
          loop: {}
    """, {"watch": watch}, {"watch": seen_table})
    from nerve_cli.schema.diff import generate_migration

    assert generate_migration(home / "senses" / "watch") is not None
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "loop.py").write_text(QUICK)

    def seen() -> list[tuple[str, str]]:
        return sense_rows(home, "watch", "SELECT run_id, transition FROM seen ORDER BY n")

    with RunningEngine(home) as engine:
        engine.wait_ready()
        conn = sqlite3.connect(home / "data" / "logs.db")
        with conn:
            conn.execute("INSERT INTO logs (source, type, ref_id, payload, ts) VALUES ('workflow', 'completed', "
                         "'run-99', '{\"workflow\": \"loop\", \"rounds\": 1}', ?)", (int(time.time() * 1000),))
        conn.close()
        run = request(home, "start_thread", workflow="loop", prompt="real")["run_id"]
        wait_for(lambda: (run, "completed") in seen(), 30, what="the real thread's transitions")
        shown = json.loads(cli("sense", "show", "nerve-threads", "--json", "-n", "20").output)
        engine.stop()

    assert [r for r, _ in seen()] == [run] * len(seen()) and len(seen()) >= 3
    assert all(s["payload"]["run_id"] == run for s in shown["signals"])
    assert {s["payload"]["depth"] for s in shown["signals"]} == {1}  # a person's thread: its transitions at 1


ECHO = textwrap.dedent('''
    def compute(db, peers, trigger):
        return {"heard": [e.source for e in trigger.events]}
''')


def _echo_host(root: Path, name: str, other: str, url: str, max_depth: int | None = None) -> Path:
    sources = "[go, " + f"{other}/echo]" if name == "a" else f"[{other}/echo]"
    bound = f", max_depth: {max_depth}" if max_depth else ""
    return write_instance(root / name, f"""
        senses:
          echo: {{}}
        reflexes:
          - {{sense: echo, on: {sources}{bound}}}
        fleet:
          servers: [{url}]
          host: {name}
          publish: {{senses: [echo]}}
          subscribe: {{senses: [{other}/echo]}}
    """, {"echo": ECHO})


def _signals(home: Path, sense: str) -> list[dict]:
    path = home / "data" / "senses" / f"{sense}.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM _signals ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _echo_between_hosts(tmp_path: Path, max_depth: int | None = None) -> tuple[Path, Path, list[dict]]:
    """Two hosts whose echo senses hear each other through a real nats-server, started by one `go` on a and run
    until the echo is refused and stops: (a, b, `config check --json`'s problems for a)."""
    from fleetkit import NatsServer

    with NatsServer(tmp_path / "nats") as server:
        a = _echo_host(tmp_path, "a", "b", server.url, max_depth)
        b = _echo_host(tmp_path, "b", "a", server.url, max_depth)
        problems = json.loads(cli("config", "check", "--json", "--home", str(a)).output)["problems"]
        with RunningEngine(a) as engine_a, RunningEngine(b) as engine_b:
            engine_a.wait_ready()
            engine_b.wait_ready()
            wait_for(lambda: engine_a.status()["fleet"]["connected"] and engine_b.status()["fleet"]["connected"],
                     30, what="both hosts in the fleet")
            request(a, "emit", channel="go", payload={"n": 1})
            wait_for(lambda: _refusals(a) or _refusals(b), 60, what="the echo to be refused at its bound")
            counts: list[tuple[int, int]] = []

            def quiet() -> bool:
                counts.append((len(_signals(a, "echo")), len(_signals(b, "echo"))))
                return len(counts) > int(scaled(2) / 0.1) and len(set(counts[-int(scaled(2) / 0.1):])) == 1

            wait_for(quiet, 60, interval=0.1, what="the echo to stop")
            engine_a.stop()
            engine_b.stop()
    return a, b, problems


def test_a_fleet_echo_between_two_hosts_stops(tmp_path: Path) -> None:
    a, b, problems = _echo_between_hosts(tmp_path)
    warned = [p["message"] for p in problems if "loop through what computes cause" in p["message"]]
    assert len(warned) == 1 and "(fleet)" in warned[0] and "another host" in warned[0], problems
    # go is depth 0; a's echo signals at 1, 3, 5, 7, 9 and b's at 2, 4, 6, 8; b refuses what comes at 9
    assert (len(_signals(a, "echo")), len(_signals(b, "echo"))) == (5, 4)
    (refused,) = _refusals(b)
    assert (refused["payload"]["what"], refused["payload"]["target"], refused["payload"]["depth"]) == \
        ("emit", "a/echo", 9)
    assert refused["payload"]["path"][-1] == "fleet from a" and "echo" in refused["payload"]["path"]
    assert not _refusals(a)


def test_a_fleet_loop_declared_with_max_depth_runs_to_that_depth(tmp_path: Path) -> None:
    """`max_depth:` on the reflex that hears the other host (what config check's warning advises) bounds what
    comes in from that host too: the echo runs to 12, not to engine.max_causal_depth's 8."""
    a, b, problems = _echo_between_hosts(tmp_path, max_depth=12)
    assert not [p for p in problems if "loop through what computes cause" in p["message"]]
    # a's echo signals at 1, 3, ..., 13 and b's at 2, 4, ..., 12; b refuses what comes at 13
    assert (len(_signals(a, "echo")), len(_signals(b, "echo"))) == (7, 6)
    (refused,) = _refusals(b)
    assert (refused["payload"]["target"], refused["payload"]["depth"], refused["payload"]["bound"]) == ("a/echo", 13, 12)
    assert not _refusals(a)
