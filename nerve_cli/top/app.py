"""`nerve top` on Textual: senses, workers, threads and what happens, refreshed twice a second.

Data comes from `Source` in a thread (socket and SQLite reads never block the
UI); drilling into a sense shows its chart and recent signals, into a thread
its transcript. Keys: enter open · c compute · q quit.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, RichLog, Static

from nerve_cli.automaton.answers import answer_problems
from nerve_cli.automaton.model import NO_ANSWER
from nerve_cli.clock import now_ms
from nerve_cli.contract.threads import speaker, thread_show, waiting_for
from nerve_cli.contract.times import ago, display, span
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.ops.client import compute
from nerve_cli.ops.senses.chart import sense_series
from nerve_cli.ops.senses.chart_view import draw, summary
from nerve_cli.ops.workflows.gates import answer_thread
from nerve_cli.ops.workflows.threads import thread_detail
from nerve_cli.store.history import sense_history
from nerve_cli.top.source import Snapshot, Source
from nerve_cli.vocab import states
from nerve_cli.vocab.states import LIVE, Decision, ThreadStatus, WaitKind
from nerve_cli.words import plural

REFRESH_S = 0.5  # what the eye needs; a new signal shows within a second
STATE_STYLE = {"running": "bold green", "pending": "cyan", "idle": "", "penalised": "yellow",
               "quarantined": "bold red", "load-failed": "bold red", "stale": "bold yellow", "disabled": "dim", "stopped": "dim",
               "ready": "green", "backoff": "red",
               "started": "cyan", "waiting": "bold yellow", "queued": "blue", "completed": "green",
               "failed": "red", "crashed": "red"}


def short(value: Any, width: int = 24) -> str:
    if value is None:
        return "-"
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"


def styled(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


class Dashboard(Screen):
    BINDINGS = [
        Binding("enter", "open", "Open", priority=True),  # above the table's own enter, so the footer shows it
        Binding("c", "compute", "Compute sense"),
        Binding("a", "answer('approve')", "Approve"),
        Binding("x", "answer('reject')", "Reject"),
        Binding("tab", "app.focus_next", "Next table", show=False),  # the App's action: a Screen has none
        Binding("shift+tab", "app.focus_previous", "Previous table", show=False),
        Binding("q", "app.quit", "Quit"),
    ]
    composed = False  # its widgets exist (on_mount ran): a snapshot can be shown
    # each waiting thread shown: (what it waits for, its reason), from the last snapshot
    waits: Mapping[str, tuple[str | None, str | None]] = MappingProxyType({})

    def compose(self) -> ComposeResult:
        yield Static(id="headline")
        yield DataTable(id="senses", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="lower"):
            yield DataTable(id="workers", cursor_type="row")
            yield DataTable(id="threads", cursor_type="row")
        yield RichLog(id="events", max_lines=200, markup=False, wrap=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#senses", DataTable).add_columns("sense", "state", "last value", "last run", "next",
                                                         "errors", "backlog")
        self.query_one("#workers", DataTable).add_columns("group", "pid", "state", "MiB", "cpu%", "rst")
        self.query_one("#threads", DataTable).add_columns("thread", "workflow", "status", "rounds")
        self.query_one("#senses", DataTable).focus()
        self.composed = True
        last = self.app.last  # type: ignore[attr-defined]
        if last is not None:  # read before this screen had its widgets: shown now, not a period later
            self.show(last)

    def show(self, snap: Snapshot) -> None:
        if not self.composed:  # a read that came back before the widgets exist (a loaded machine): on_mount
            return  # shows it
        now = now_ms()
        utc = self.app.utc  # type: ignore[attr-defined]
        headline = self.query_one("#headline", Static)
        if snap.live:
            line = Text(f" engine pid {snap.engine['pid']} · up {span(snap.engine['uptime_s'] or 0)} · "
                        f"{plural(len(snap.senses), 'sense')} · {plural(len(snap.workers), 'worker')}", style="bold")
            if snap.fleet is not None:  # this host in its fleet: the link, and what waits to be sent
                up = snap.fleet["connected"]
                line.append(f" · fleet {snap.fleet['host']} {'up' if up else 'DOWN'}, outbox {snap.fleet['outbox']}",
                            style="bold" if up else "bold red")
            if snap.causal and snap.causal.get("refused"):  # a chain of causes ran past its bound: a loop
                line.append(f" · {snap.causal['refused']} refused past causal depth {snap.causal.get('max_depth')}",
                            style="bold red")
            headline.update(line)
        else:
            headline.update(Text(" engine stopped: read-only, from the files (start it with `nerve run`)",
                                 style="bold yellow"))
        _fill(self.query_one("#senses", DataTable), [
            (s["name"], (s["name"], styled(s["state"]) if not s["blocked"] else Text(s["state"], style="bold red"),
                         short(s["last_value"]), ago(s["last_run_ms"], now), _due(s["next_due_ms"], now),
                         str(s["errors"]) if s["errors"] else "", _waiting(s.get("backlog"), s.get("backlog_ms"), now)))
            for s in snap.senses] + [
            # each agent below the senses: its backlog and the age of its oldest event, when it last acknowledged
            (f"{AGENT_ROW}{a['name']}", (f"agent {a['name']}", Text("agent", style="magenta"),
                                         f"{a['deliveries']} pending" if a["deliveries"] else "-",
                                         ago(a["last_ack_ms"], now) if a["last_ack_ms"] else "never", "-", "",
                                         _waiting(a["backlog"], a["oldest_ms"], now)))
            for a in snap.agents])
        _fill(self.query_one("#workers", DataTable), [
            (w["group"], (w["group"], str(w["pid"] or "-"), styled(w["state"]),
                          f"{w['rss'] / 2**20:.0f}" if w["rss"] else "-",
                          f"{w['cpu']:.0f}" if w["cpu"] is not None else "-", str(w["restarts"])))
            for w in snap.workers])
        self.waits = {t["run_id"]: (t.get("waits"), t.get("reason")) for t in snap.threads
                      if t["status"] == ThreadStatus.WAITING}
        _fill(self.query_one("#threads", DataTable), [
            (t["run_id"], (t["run_id"], t["workflow"], _status(t),
                           f"{t['rounds']}/{t['max_rounds']}" if t.get("max_rounds") else str(t["rounds"])))
            for t in snap.threads])
        log = self.query_one("#events", RichLog)
        for e in snap.events:
            clock = display(e["ts"], utc=utc, date=False)
            if e["kind"] == "error":
                log.write(Text(f"{clock} error  {about(e['sense'], e['value'])}", style="red"))
            else:
                log.write(Text(f"{clock} signal {e['sense']}: {short(e['value'], 60)}"))

    def action_open(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable) and focused.row_count:
            self._open(focused.id, focused.coordinate_to_cell_key(focused.cursor_coordinate).row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(event.data_table.id, event.row_key.value)

    def _open(self, table: str | None, key: str | None) -> None:
        if key is None:
            return
        if table == "senses" and key.startswith(AGENT_ROW):
            agent = key[len(AGENT_ROW):]
            self.app.notify(f"agent {agent}: `nerve agent next {agent}` shows what waits for it, "
                            f"`nerve agent list` every agent")
        elif table == "senses":
            self.app.push_screen(SenseScreen(self.app.home, key))  # type: ignore[attr-defined]
        elif table == "threads":
            self.app.push_screen(ThreadScreen(self.app.home, key))  # type: ignore[attr-defined]

    async def action_answer(self, decision: str) -> None:
        """Approve or reject the thread selected in the threads table, and only that one (after showing its
        question and asking to confirm): with none selected, nothing is answered."""
        table = self.query_one("#threads", DataTable)
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        selected = rows[table.cursor_row] if self.focused is table and rows else None
        if selected is None:
            self.app.notify("select a waiting thread first: tab to the threads table, move to it, then a or x",
                            severity="warning")
            return
        kind, why = self.waits.get(selected, (None, None))
        if kind != WaitKind.PERSON:
            self.app.notify(f"{selected} {why or 'waits for an event'}, not for a person" if kind is not None
                            else f"{selected} is not waiting for a person", severity="warning")
            return
        await self.app.answer(selected, decision)  # type: ignore[attr-defined]

    async def action_compute(self) -> None:
        table = self.query_one("#senses", DataTable)
        if table.row_count == 0:
            return
        sense = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if sense is None or sense.startswith(AGENT_ROW):
            self.app.notify("an agent is not computed: select a sense", severity="warning")
            return
        await self.app.compute(sense)  # type: ignore[attr-defined]


AGENT_ROW = "\0agent:"  # the key of an agent's row in the senses table (no sense name holds a NUL)


def _status(thread: dict) -> Text:
    """A thread's status; a waiting one says for what: `waiting ✋` a person, `waiting ⏸` an event."""
    text = styled(thread["status"])
    if thread["status"] == ThreadStatus.WAITING:
        text.append(" ✋" if thread.get("waits") == WaitKind.PERSON else " ⏸")
    return text


def _waiting(count: int | None, oldest_ms: int | None, now: int) -> Text:
    """`50 · 2m`: events waiting for a listener and the age of the oldest (yellow: something waits)."""
    if not count:
        return Text("-" if count is None else "0", style="dim")
    return Text(f"{count:,} · {span(max(0, now - (oldest_ms or now)) / 1000)}", style="yellow")


def about(ref: str | None, message: Any) -> str:
    """An error line's subject and message, the subject once: many messages name it first already
    ("sense x: workflow directive refused", "workflow w failed to load")."""
    text = str(message)
    if not ref:
        return text
    for head in ("", "sense ", "workflow ", "workflow worker "):
        if text.startswith(f"{head}{ref}:") or text.startswith(f"{head}{ref} "):
            return text
    return f"{ref}: {text}"


def _due(ms: int | None, now: int) -> str:
    return "-" if ms is None else "now" if ms <= now else ago(ms, now)


def _fill(table: DataTable, rows: list[tuple[str, tuple]]) -> None:
    """Show `rows` in their order, keeping the cursor on its row: cells update in place while the order holds;
    a new row that belongs elsewhere than the end (a new thread: newest first) rebuilds the table in order."""
    wanted = dict(rows)
    order = [key for key, _ in rows]
    kept = [k.value for k in table.rows if k.value in wanted]
    if kept != order[: len(kept)]:  # rows out of order, or a new one goes before rows already shown
        selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if selected is not None and selected in wanted:
            table.move_cursor(row=order.index(selected))
        return
    for gone in [k.value for k in list(table.rows)]:
        if gone is not None and gone not in wanted:
            table.remove_row(gone)
    existing = {k.value for k in table.rows}
    for key, cells in rows:
        if key in existing:
            for column, cell in zip(table.columns, cells):
                table.update_cell(key, column, cell, update_width=True)  # "in 909ms" after "in 7s": not cut
        else:
            table.add_row(*cells, key=key)


class SenseScreen(Screen):
    """One sense: its values over time (the chart of `nerve sense show --chart`) and its recent signals."""

    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back"), Binding("c", "compute", "Compute")]

    def __init__(self, home: Path, sense: str) -> None:
        super().__init__()
        self.home, self.sense = home, sense

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="chart")
            yield DataTable(id="recent", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#recent", DataTable).add_columns("time", "value")
        self.load()

    def load(self) -> None:
        chart = self.query_one("#chart", Static)
        try:
            series = sense_series(self.home, self.sense)
        except NerveError as exc:
            chart.update(Text(f"{self.sense}: {exc}", style="yellow"))
            series = None
        if series is not None and series.points:
            width = max(40, self.app.size.width - 2)
            height = max(8, min(20, self.app.size.height - 10))
            utc = self.app.utc  # type: ignore[attr-defined]
            text = draw(series, width, height, color=True, utc=utc) + "\n" + "\n".join(summary(series, utc=utc))
            chart.update(Text.from_ansi(text))
        elif series is not None:
            chart.update(Text(f"{self.sense}: no numeric signals yet", style="dim"))
        table = self.query_one("#recent", DataTable)
        table.clear()
        for row in reversed(sense_history(self.home, self.sense, limit=50)):
            table.add_row(display(row["ts"], utc=self.app.utc), short(row["payload"], 100))  # type: ignore[attr-defined]

    async def action_compute(self) -> None:
        await self.app.compute(self.sense)  # type: ignore[attr-defined]
        self.load()


class ThreadScreen(Screen):
    """One thread as a conversation: each round's role, time and content; a waiting one can be answered here."""

    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back"), Binding("a", "answer('approve')", "Approve"),
                Binding("x", "answer('reject')", "Reject")]

    def __init__(self, home: Path, run_id: str) -> None:
        super().__init__()
        self.home, self.run_id = home, run_id
        self.status = ""

    def live(self) -> bool:
        """Still moving: worth reading again on the next tick."""
        return self.status in LIVE

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="transcript")
        yield Footer()

    async def action_answer(self, decision: str) -> None:
        await self.app.answer(self.run_id, decision)  # type: ignore[attr-defined]
        self.load()

    def on_mount(self) -> None:
        self.load()

    def load(self) -> None:
        d = thread_show(thread_detail(Layout(self.home).logs_db, self.run_id))
        self.status = d["status"]
        text = Text(f"{d['run_id']} · {d['workflow']} · ", style="bold") + styled(d["status"])
        text += Text(f" · {d['rounds']}/{d['max_rounds']} rounds\n")
        for m in d["messages"]:
            who = "prompt" if m["role"] == "__start__" else speaker(m) if m["round"] is None \
                else f"#{m['round']} {m['role']}"
            text += Text(f"\n{who} · {display(m['time_ms'], date=False, utc=self.app.utc)}\n",  # type: ignore[attr-defined]
                         style="bold cyan")
            text += Text(str(m["content"]).rstrip() + "\n")
            if m.get("meta") and m["round"] is not None:
                text += Text(f"meta: {short(m['meta'], 200)}\n", style="dim")
        wait = d.get("waiting_for") or {}
        if d["status"] == ThreadStatus.WAITING and wait.get("kind") == WaitKind.EVENT:
            text += Text(f"\nwaiting for {wait.get('description')}\n", style="bold yellow")
        elif d["status"] == ThreadStatus.WAITING:
            text += Text(f"\nwaiting for a person: {d.get('question') or ''}\n", style="bold yellow")
            text += Text("a approves · x rejects, after showing the questions (the moderator sees the answer as the "
                         "next message)\n", style="dim")
        self.query_one("#transcript", Static).update(text)


class ConfirmScreen(ModalScreen[bool]):
    """What an answer would settle, shown before it is sent: each open question, the tool call or step it is
    about and whether it is irreversible. y sends it; n or Escape leaves without answering."""

    BINDINGS = [Binding("y", "yes", "Yes, send it"), Binding("n,escape", "no", "No")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    #confirm-box { width: 76; height: auto; max-height: 22; border: round $warning; background: $surface; }
    """

    def __init__(self, run_id: str, decision: str, detail: dict[str, Any]) -> None:
        super().__init__()
        self.run_id, self.decision, self.detail = run_id, decision, detail

    def compose(self) -> ComposeResult:
        wait = waiting_for(self.detail) or {}
        questions = wait.get("questions") or [{"id": "", "question": self.detail.get("question") or ""}]
        verb = "Approve" if self.decision == states.Decision.APPROVE else "Reject"
        with VerticalScroll(id="confirm-box"):
            yield Static(Text(f"{verb} {self.run_id} ({self.detail.get('workflow')})?", style="bold"))
            for q in questions:
                text = Text(f"\n{q.get('id') or 'question'}: ", style="bold cyan") + Text(str(q.get("question")))
                call = q.get("call")
                if call:
                    text += Text(f"\ntool call: {call.get('name')}({json.dumps(call.get('arguments') or {})})",
                                 style="yellow")
                if q.get("step"):
                    text += Text(f"\nstep: {q['step']}", style="yellow")
                text += Text("\nirreversible" if q.get("irreversible") else "", style="bold red")
                yield Static(text)
            yield Static(Text("\ny: send it · n: leave it waiting", style="dim"))

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class AnswerScreen(ModalScreen[Any]):
    """Asks for a structured answer (JSON matching the question's schema); Enter sends it, Escape leaves."""

    BINDINGS = [Binding("escape", "leave", "Back")]
    DEFAULT_CSS = """
    AnswerScreen { align: center middle; }
    #answer-box { width: 76; height: auto; max-height: 20; border: round $accent; background: $surface; }
    """

    def __init__(self, run_id: str, question: str, schema: dict[str, Any]) -> None:
        super().__init__()
        self.run_id, self.question, self.schema = run_id, question, schema

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="answer-box"):
            yield Static(Text(f"{self.run_id}: {self.question}", style="bold"))
            yield Static(Text(f"answer as JSON matching: {json.dumps(self.schema)}", style="dim"))
            yield Input(placeholder='{"key": "value"}', id="answer")
            yield Static(id="answer-problem")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            data = json.loads(event.value)
        except ValueError as exc:
            self.query_one("#answer-problem", Static).update(Text(f"not JSON: {exc}", style="red"))
            return
        problems = answer_problems(self.schema, data)
        if problems:
            self.query_one("#answer-problem", Static).update(Text("; ".join(problems), style="red"))
            return
        self.dismiss(data)

    def action_leave(self) -> None:
        self.dismiss(None)


class NerveTop(App):
    TITLE = "nerve top"
    CSS = """
    #headline { height: 1; background: $boost; }
    #senses { height: 1fr; min-height: 5; }
    #lower { height: 7; }
    #workers, #threads { width: 1fr; }
    #events { height: 6; border-top: solid $primary; }
    /* at 80x24 a scrollbar is a stray column of glyphs beside the data: the panes scroll with the cursor
       (tables) or follow the newest line (events) without one */
    #senses, #workers, #threads, #events { scrollbar-size: 0 0; }
    SenseScreen VerticalScroll, ThreadScreen VerticalScroll { scrollbar-size-vertical: 0; }
    """

    def __init__(self, home: Path, refresh_s: float = REFRESH_S, utc: bool = False) -> None:
        super().__init__()
        self.home = Path(home)
        self.utc = utc  # the display rule: local time with its zone, or UTC (--utc)
        self.source = Source(self.home)
        self.refresh_s = refresh_s
        self.last: Snapshot | None = None
        self._busy = False
        self._again = False  # a tick came while one was reading: read again as soon as it is done

    def on_mount(self) -> None:
        self.push_screen(Dashboard())
        self.set_interval(self.refresh_s, self.tick)
        self.call_later(self.tick)

    async def tick(self) -> None:
        if self._busy:  # a slow read (a VACUUM holding the database) never piles up calls,
            self._again = True  # but what it missed is read right after it, not a whole period later
            return
        self._busy = True
        try:
            while True:
                self._again = False
                try:
                    snap = await asyncio.to_thread(self.source.snapshot)
                except Exception as exc:  # shown, never fatal: the next tick tries again
                    self.notify(f"could not read the instance: {exc}", severity="error")
                    return
                self._show(snap)
                if not self._again:
                    return
        finally:
            self._busy = False

    def _show(self, snap: Snapshot) -> None:
        self.last = snap
        try:
            for screen in self.screen_stack:
                if isinstance(screen, Dashboard):
                    screen.show(snap)
                elif isinstance(screen, ThreadScreen) and screen.live():
                    screen.load()  # a running thread's new rounds appear as they are written
        except NoMatches:  # a read that came back as the app quits, its widgets already removed
            return

    async def answer(self, run_id: str, decision: str) -> None:
        """A person's answer to a waiting thread, once they have seen its questions (the tool calls, the steps,
        irreversible or not) and confirmed: through the running engine it resumes at once; with the engine
        stopped it is written to the log, as `nerve thread approve` does, and resumes at the next start.

        A question that declares a JSON Schema asks for the answer after the confirmation (approving needs one)."""
        try:
            detail = await asyncio.to_thread(thread_detail, Layout(self.home).logs_db, run_id)
        except NerveError as exc:
            self.notify(str(exc), severity="error")
            return
        if detail["status"] != states.ThreadStatus.WAITING:
            self.notify(f"{run_id} is {detail['status']}, not waiting", severity="warning")
            return

        async def confirmed(yes: bool | None) -> None:
            if yes:
                await self._answer_confirmed(run_id, decision, detail)

        self.push_screen(ConfirmScreen(run_id, decision, detail), confirmed)

    async def _answer_confirmed(self, run_id: str, decision: str, detail: dict[str, Any]) -> None:
        schema = (waiting_for(detail) or {}).get("schema")
        if schema is not None and decision == Decision.APPROVE:
            async def answered(data: Any) -> None:  # None: the screen was left without an answer
                await self._send(run_id, decision, data)

            self.push_screen(AnswerScreen(run_id, detail.get("question") or "", schema), answered)
            return
        await self._send(run_id, decision, NO_ANSWER)

    async def _send(self, run_id: str, decision: str, data: Any) -> None:
        if data is None:  # the answer screen was left without answering
            return
        try:
            result = await asyncio.to_thread(answer_thread, self.home, run_id, decision, None, "nerve top", data)
        except NerveError as exc:
            self.notify(str(exc), severity="error")
            return
        later = " (resumes at the next `nerve run`)" if result.get("via") == "offline" else ""
        self.notify(f"{run_id} {'approved' if decision == Decision.APPROVE else 'rejected'}: {result['status']}{later}")
        await self.tick()

    async def compute(self, sense: str) -> None:
        """Ask the running engine for a compute of `sense` (read-only when it is stopped)."""
        if self.last is not None and not self.last.live:
            self.notify("the engine is stopped: nothing can be computed from here", severity="warning")
            return
        self.notify(f"computing {sense}…")
        try:
            answer = await asyncio.to_thread(compute, self.home, sense)  # as long as the engine waits
        except NerveError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{sense}: {answer.get('outcome')}")
        await self.tick()
