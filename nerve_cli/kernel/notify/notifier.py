"""The notifier: the engine's internal listener on nerve-threads and nerve-health, sending through apprise.

It works in a thread of its own, never on the kernel's loop: the loop only
wakes it (`committed`, a `Router` subscriber, or `wake`) when one of its two
sources signalled or a reload applied (the rules may have changed); it also
looks when a failed notification is due again, and a second after a pass that
failed (a damaged file). Nothing else wakes it: an
engine with nothing to send never looks. Each pass takes the signals
after its cursors into the outbox (`outbox.Outbox.take`: once per signal,
durable), then sends what is due: one notification per notice and target, a
failed one tried again after 1 s, 2 s, 4 s ... up to the rule's `retry_max`,
until its target takes it. A waiting thread's notice carries an answer link
when the engine has an HTTP listener. A new notify.db starts at the sources'
ends (nothing from before the rules existed is sent). `status()` is what
status and metrics show: per rule sent, pending, failing, failed tries and the
last error. apprise is imported by the thread, when it first sends.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nerve_cli.clock import now_ms
from nerve_cli.config.model import NerveConfig, NotifyRule
from nerve_cli.home import Layout
from nerve_cli.kernel.notify.notices import Notice, health_notices, targets, thread_notice, wants
from nerve_cli.kernel.notify.outbox import Outbox, Pending, last_signal_id, signals_after, target_key
from nerve_cli.names import HEALTH_SENSE, THREADS_SENSE
from nerve_cli.store import links

log = logging.getLogger(__name__)

DB = "notify.db"
FIRST_RETRY = 1.0
PASS_RETRY = 1.0  # seconds before a pass that failed (a damaged file, a disk full) is tried again
LINK_LIFE = 86400.0  # an answer link in a notification answers for a day (or the workflow's approval_timeout)
QUARANTINED = "quarantined"  # state key: the senses quarantined at the last health signal read


class Notifier:
    """A part of the engine: `start()` its thread, `committed()`/`wake()` from the loop, `close()` at stop."""

    def __init__(self, home: Path, config: Callable[[], NerveConfig], link_base: Callable[[], str | None],
                 report: Callable[[str, str], None], environ: dict[str, str] | None = None) -> None:
        self.layout = Layout(Path(home))
        self.config = config  # the config in force, read at each pass: a reload applies to the next one
        self.link_base = link_base  # the engine's HTTP listener (`http://HOST:PORT`), or None
        self.report = report  # not thread-safe in general: only called through `_tell`, which the loop reads
        self.environ = environ if environ is not None else os.environ
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failed: dict[str, int] = {}  # rule → tries that failed since the engine started
        self._errors: dict[str, str] = {}  # rule → the last failure's text
        self._snapshot: dict[str, dict[str, Any]] = {}  # rule → counts from the file, at the last pass
        self.passes = 0  # passes over the outbox
        self.looks = 0  # times the thread woke to look (a pass, or nothing to pass over)

    # -- the loop's side -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nerve-notify", daemon=True)
        self._thread.start()

    def committed(self, item: Any) -> None:
        """A `Router` subscriber: wake for a signal of either source (cheap, on the loop)."""
        if getattr(item, "source", None) in (THREADS_SENSE, HEALTH_SENSE, None):
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        """Stop after the send in flight (a daemon thread: a target that hangs does not hold the engine)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def status(self) -> dict[str, dict[str, Any]]:
        """rule → {"sent", "pending", "failing", "failed", "last_error"} (for status and metrics)."""
        with self._lock:
            rules = set(self._snapshot) | set(self._failed)
            try:
                names = set(self.config().notify_rules())
            except Exception:  # a config being swapped: last pass's names are enough
                names = set()
            return {r: {"sent": 0, "pending": 0, "failing": 0, **self._snapshot.get(r, {}),
                        "failed": self._failed.get(r, 0), "last_error": self._errors.get(r) or
                        self._snapshot.get(r, {}).get("last_error")} for r in sorted(rules | names)}

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        outbox: Outbox | None = None
        try:
            while not self._stop.is_set():
                self.looks += 1
                wait: float | None = None  # until woken: a signal of either source, a reload, the stop
                try:
                    rules = self.config().notify_rules()
                    if outbox is None and (rules or (self.layout.data / DB).exists()):
                        outbox = self._open()
                    if outbox is not None:
                        wait = self._pass(outbox, rules)
                except Exception as exc:  # a damaged file, a disk full (opening it too): told, tried again shortly
                    log.exception("notify pass failed")
                    self._tell("error", f"notify: {type(exc).__name__}: {exc}")
                    wait = PASS_RETRY
                self._wake.wait(wait)
                self._wake.clear()  # before the next pass, which sees whatever a wake was for
        finally:
            if outbox is not None:
                outbox.close()

    def _open(self) -> Outbox:
        outbox = Outbox(self.layout.data / DB)
        try:
            for source in (THREADS_SENSE, HEALTH_SENSE):
                if outbox.cursor(source) is None:  # a new file starts at the sources' ends
                    outbox.take(source, last_signal_id(self.layout.sense_db(source)), [], now_ms())
        except BaseException:
            outbox.close()
            raise
        return outbox

    def _pass(self, outbox: Outbox, rules: dict[str, NotifyRule]) -> float | None:
        """One look at the sources and the outbox; the seconds until a failed notification is due again (None:
        none is)."""
        self.passes += 1
        held = [name for name in self.config().notify_rules(enabled=False) if name not in rules]  # disabled ones
        self._collect(outbox, rules)
        self._send(outbox, rules, held)
        with self._lock:
            self._snapshot = outbox.counts()
        due = outbox.next_due(held)
        return None if due is None else max(0.01, (due - now_ms()) / 1000)

    def _collect(self, outbox: Outbox, rules: dict[str, NotifyRule]) -> None:
        for source in (THREADS_SENSE, HEALTH_SENSE):
            last = outbox.cursor(source) or 0
            batch = signals_after(self.layout.sense_db(source), last)
            if not batch:
                continue
            notices: list[Notice] = []
            state: dict[str, object] = {}
            if source == THREADS_SENSE:
                notices = [n for _, p in batch if isinstance(p, dict) and (n := thread_notice(p)) is not None]
            else:
                before = outbox.state(QUARANTINED)
                quarantined = set(before) if isinstance(before, list) else set()
                for _, payload in batch:
                    if isinstance(payload, dict):
                        found, quarantined = health_notices(payload, quarantined)
                        notices += found
                state[QUARANTINED] = sorted(quarantined)
            rows = []
            for notice in notices:
                for name, rule in rules.items():
                    if wants(rule, notice):
                        body = self._body(notice, name, rule)
                        rows += [(name, target_key(url), notice.kind, f"nerve: {notice.title}", body, notice.run_id)
                                 for url in targets(rule, self.environ)]
            outbox.take(source, batch[-1][0], rows, now_ms(), state)

    def _body(self, notice: Notice, name: str, rule: NotifyRule) -> str:
        """The notice's text, with an answer link for a thread waiting for a person (when there is a listener)."""
        if notice.kind != "waiting" or not notice.person or notice.run_id is None:
            return notice.body
        base = self.link_base()
        if base is None:
            return f"{notice.body}\n\nAnswer with `nerve thread approve|reject {notice.run_id}`"
        cfg = self.config().workflows.get(notice.workflow or "")
        life = cfg.approval_timeout if cfg is not None and cfg.approval_timeout else LINK_LIFE
        until, who = int(time.time() + life), rule.answer_as or name
        if len(notice.questions) > 1:  # one link per question: each is answered on its own
            shown = [f"{q}: {base}/answer/{links.mint(self.layout.home, notice.run_id, q, who, until)}"
                     for q in notice.questions]
            return f"{notice.body}\n\nAnswer each:\n" + "\n".join(shown)
        token = links.mint(self.layout.home, notice.run_id, None, who, until)
        return f"{notice.body}\n\nAnswer: {base}/answer/{token}"

    def _send(self, outbox: Outbox, rules: dict[str, NotifyRule], held: list[str]) -> None:
        for item in outbox.due(now_ms(), held):
            if self._stop.is_set():
                return
            rule = rules.get(item.rule)
            url = next((u for u in targets(rule, self.environ) if target_key(u) == item.target), None) if rule else None
            if rule is None or url is None:  # the rule or its target left nerve.yaml: nobody to send it to
                outbox.drop(item)
                continue
            error = self._deliver(url, item)
            if error is None:
                outbox.sent(item, now_ms())
                continue
            pause = min(rule.retry_max, FIRST_RETRY * 2 ** item.attempts) * (0.75 + random.random() / 4)
            outbox.failed(item, now_ms() + int(pause * 1000), error)
            with self._lock:
                self._failed[item.rule] = self._failed.get(item.rule, 0) + 1
                self._errors[item.rule] = error
            if item.attempts == 0:  # told once per notification, not at every retry
                self._tell("warn", f"notify {item.rule}: could not send {item.title!r} ({error}); trying again "
                                   f"with back-off up to {rule.retry_max:g}s")

    def _deliver(self, url: str, item: Pending) -> str | None:
        """None once the target took it, else why not (a plugin that raises is a failed try, like any other)."""
        try:
            import apprise  # ≈ 0.6 s: paid by the notifier's thread when it first sends, never by the kernel's loop

            sender = apprise.Apprise()
            if not sender.add(url):
                return "apprise does not know this URL (see apprise's list of services)"
            with apprise.LogCapture(level=logging.WARNING) as captured:
                ok = sender.notify(title=item.title, body=item.body)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        if ok:
            return None
        lines = [line.split(" - ", 2)[-1] for line in captured.getvalue().splitlines() if line.strip()]
        return "; ".join(lines)[-500:] or "the target refused it"

    def _tell(self, level: str, line: str) -> None:
        try:
            self.report(level, line)
        except Exception:  # the report is for people; the notifier goes on
            log.warning("%s", line)
