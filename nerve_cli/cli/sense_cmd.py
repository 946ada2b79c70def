"""`nerve sense`: scaffold, migrate, compute, list, show (and chart), disable/enable, pause/resume, reset, replay."""

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from nerve_cli.cli import sense_lifecycle, sense_migrate, sense_pause, sense_remove, sense_replay, sense_reset
from nerve_cli.cli.common import WHEN_HELP, FormatOption, HomeOption, JsonOption, SenseName, UtcOption
from nerve_cli.cli.group import HelpGroup
from nerve_cli.clock import now_ms
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.words import plural

if TYPE_CHECKING:
    from nerve_cli.ops.senses.read import Read

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Create, run and inspect senses.\n\nExample: nerve sense new open-prs && nerve sense compute open-prs",
)
app.command("migrate")(sense_migrate.migrate)
app.command("reset")(sense_reset.reset)
app.command("replay")(sense_replay.replay)
app.command("pause")(sense_pause.pause)
app.command("resume")(sense_pause.resume)

Name = Annotated[str, typer.Argument(help="Name of the new sense.")]
BindOption = Annotated[Optional[list[str]], typer.Option(
    "--bind", metavar="NAME=VALUE", help="A parameter's value, for a sense whose bindings take parameters "
    "($NAME); repeat for each. A value that reads as JSON (7, true) is taken as such.")]


@app.command("new")
def new(
    name: Name,
    group: Annotated[str, typer.Option("--group", help="Worker group to run it in.")] = "default",
    recipe: Annotated[Optional[str], typer.Option(
        "--from", help="Start from a recipe: projection, reaction, wait-all, merge, switch, heartbeat or agent-hooks.")] = None,
    on: Annotated[Optional[str], typer.Option(
        "--on", help="Comma-separated senses or channels it listens to (instead of running every 1m).")] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Register it with `enabled: false`: try it with "
                                           "`sense compute --dry-run`, then `sense enable`.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Scaffold a new sense, generate its first migration, register and commit it.

    Example: nerve sense new open-tasks --from projection --on task.created,task.closed
    """
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.scaffold import new_sense

    where = require_instance(home)
    sources = tuple(s.strip() for s in (on or "").split(",") if s.strip())
    made = new_sense(where, name, group, recipe=recipe, on=sources, enabled=not disabled)
    if json_:
        from nerve_cli.cli.output import print_json
        from nerve_cli.contract.senses import sense_new

        print_json(sense_new(where, made))
        return
    _render_new(where, made)


@app.command("list")
def list_(home: HomeOption = None, json_: JsonOption = False, format_: FormatOption = None,
          _utc: UtcOption = False) -> None:
    """List senses with their group, triggers, last signal and signal count (archived signals included).

    Example: nerve sense list
    """
    from nerve_cli.cli.output import use_format
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.inspect import list_senses

    json_ = use_format(format_, json_) == "json"
    senses = list_senses(require_instance(home))
    if json_:
        from nerve_cli.cli.output import print_json
        from nerve_cli.contract.senses import sense_list

        print_json(sense_list(senses))
        return
    _render_list(senses)


@app.command("show")
def show(
    name: SenseName,
    last: Annotated[int, typer.Option("--last", "-n", min=0, help="How many recent signals to show (archived ones too).")] = 10,
    chart: Annotated[bool, typer.Option("--chart", help="Plot the signal (or --column) against time, "
                                        "archived days included.")] = False,
    column: Annotated[Optional[str], typer.Option("--column", help="With --chart: a key of object signals, "
                                                  "or TABLE.COLUMN of one of the sense's tables.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help=f"With --chart: from this time: {WHEN_HELP}.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help=f"With --chart: up to this time: {WHEN_HELP}.")] = None,
    rows: Annotated[int, typer.Option("--rows", min=0, help="How many of the newest rows of each of its tables to show.")] = 5,
    bind: BindOption = None,
    home: HomeOption = None,
    json_: JsonOption = False,
    format_: FormatOption = None,
    _utc: UtcOption = False,
) -> None:
    """Show a sense: config, whether its code loads, its tables and newest rows, recent signals; or, with --chart, its values over time.

    Its code is imported in a child process to say whether it would load
    (schema.py out of step with its migrations shows here with the fix).
    Nerve's own tables (_signals, _migrations) are left out of the table view.
    A lazy sense (a `lazy: true` reflex) is first brought up to date: it
    computes while its sources hold events it has not consumed (through the
    engine, or in a one-off worker), then shows its value; one that binds
    parameters is read for the values given with --bind.

    Example: nerve sense show cpu-usage -n 20 --rows 3   (or: --chart --since 2d; open-prs --bind repo=me/app)
    """
    from nerve_cli.cli.output import use_format
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.inspect import show_sense

    json_ = use_format(format_, json_) == "json"
    path = require_instance(home)
    reading = _read(path, name, bind)
    if chart or column or since or until:
        _chart(path, name, column, since, until, json_)
        return
    detail = show_sense(path, name, last, rows)
    if json_:
        from nerve_cli.cli.output import print_json
        from nerve_cli.contract.senses import sense_show

        print_json(sense_show(detail, reading))
    else:
        _render_show(detail)
        _render_read(reading)
    if reading.error is not None:  # what shows may be behind its sources
        raise typer.Exit(1)


def _read(home: Path, name: str, bind: list[str] | None) -> "Read":
    """Bring a lazy sense up to date (for --bind's values); a bad --bind is a usage error."""
    from nerve_cli.config.projection import BindError, parse_bind
    from nerve_cli.ops.senses.read import read_sense

    try:
        return read_sense(home, name, parse_bind(bind))
    except BindError as exc:
        raise typer.BadParameter(str(exc), param_hint="--bind") from None


def _render_read(r: "Read") -> None:
    import json

    from nerve_cli.cli.output import error, info, show, table, when

    if not (r.lazy or r.params):
        return
    usage = " ".join(f"--bind {p}=VALUE" for p in r.params)
    if r.params and not r.bind:
        info(f"  read with {usage}: one projection per set of values", style="bold")
        if r.known:
            show(table("Read so far", ["values", "value", "as of"],
                       [(_bind_text(k["params"]), _short_json(k["value"]), when(k["value_ts"]) if k["value_ts"] else "")
                        for k in r.known]))
        return
    via = {"engine": " (through the engine)", "worker": " (in a one-off worker)"}.get(r.via or "", "")
    if r.error is not None:
        where = f" at {r.error.file}:{r.error.line}" if r.error.file else ""
        error(f"could not bring {r.sense} up to date: {r.error.type}: {r.error.message}{where}")
    elif r.computes:
        info(f"  brought up to date: {plural(r.computes, 'compute')}, {plural(r.events, 'event')}{via}", style="bold")
    else:
        info("  up to date: no event waits for it (lazy: computed when read)")
    if r.more:
        info(f"  still behind after {plural(r.computes, 'compute')}: read it again", style="yellow")
    label = f"  {_bind_text(r.bind)}: " if r.bind else "  value: "
    if r.value_ts is None:
        info(label + "none yet (no compute has returned one)")
    else:
        info(label + json.dumps(r.value, ensure_ascii=False, default=str) + f"  (as of {when(r.value_ts)})")


def _bind_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


@app.command("compute")
def compute(
    name: SenseName,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Run it in a fresh worker on its real database and roll "
                                          "everything back: show the signal, rows and cursor moves it would make, "
                                          "keep none of them (nothing is logged).")] = False,
    event: Annotated[Optional[list[str]], typer.Option("--event", metavar="SOURCE=JSON", help="With --dry-run: an event to give it instead "
                                                       "of the waiting ones, SOURCE=JSON (repeatable).")] = None,
    bind: BindOption = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Run one compute now (through the running engine, or in a fresh worker).

    A sense whose bindings take parameters computes for the values given with
    --bind (its events and value are those of that set of values).
    Exit code 0 for a signal or silence, 1 for an error.

    \b
    Example: nerve sense compute cpu-usage --json
    Example: nerve sense compute open-prs --bind repo=me/app
    Example: nerve sense compute open-tasks --dry-run --event 'task.created={"id": 7}'
    """
    from nerve_cli.config.projection import BindError, parse_bind
    from nerve_cli.home import require_instance

    try:
        values = parse_bind(bind)
        if dry_run or event:
            _dry_run(require_instance(home), name, event, json_, values or None)
            return
        from nerve_cli.ops.senses.standalone import compute_sense

        result = compute_sense(require_instance(home), name, bind=values or None)
    except BindError as exc:
        raise typer.BadParameter(str(exc), param_hint="--bind") from None
    if json_:
        from nerve_cli.cli.output import print_json
        from nerve_cli.contract.engine import compute as compute_document

        print_json(compute_document(result))
    else:
        _render_compute(result)
    if result.outcome == Outcome.ERROR:
        raise typer.Exit(1)


def _chart(home, name: str, column: str | None, since: str | None, until: str | None, json_: bool) -> None:
    from nerve_cli.cli import output
    from nerve_cli.cli.common import window
    from nerve_cli.ops.senses import chart_view
    from nerve_cli.ops.senses.chart import sense_series
    from nerve_cli.ops.senses.inspect import require_sense

    require_sense(home, name)
    since_ms, until_ms = window(since, until)
    series = sense_series(home, name, column, since_ms, until_ms)
    if json_:
        from nerve_cli.contract.senses import sense_chart

        output.print_json(sense_chart(series))
        return
    if not series.points:
        scope = " in that window" if since or until else " yet"
        output.info(f"{name}: no signals{scope} to plot (try `nerve sense compute {name}`)")
        return
    size = shutil.get_terminal_size((100, 24))
    tty = sys.stdout.isatty()
    text = chart_view.draw(series, min(size.columns, 160), max(12, min(size.lines - 4, 30)), color=tty,
                           utc=output.utc())
    output.console().print(output.from_ansi(text) if tty else text, markup=False, highlight=False, soft_wrap=True)
    for line in chart_view.summary(series, utc=output.utc()):
        output.info(line, style="yellow" if line.startswith("gap:") else "")


# --- rendering -------------------------------------------------------------------


def _render_new(home, result) -> None:
    from nerve_cli.cli.output import info, notes

    recipe = f" from the {result.recipe} recipe" if result.recipe else ""
    info(f"Created sense `{result.name}` (group {result.group}){recipe}:", style="bold")
    for path in result.files:
        info(f"  {path.relative_to(home)}")
    when = f"on {', '.join(result.on)}" if result.on else "every 1m"
    off = " (enabled: false; `nerve sense enable` turns it on)" if not result.enabled else ""
    info(f"  nerve.yaml: senses.{result.name}{off}, and a reflex running it {when}")
    notes(result.notes)
    if result.commit:
        recipe = f" --from {result.recipe}" if result.recipe else ""
        info(f"Committed {result.commit[:8]} \"nerve: sense new {result.name}{recipe}\".")
    info("Next:")
    info(f"  edit     senses/{result.name}/sense.py")
    info(f"  tables   senses/{result.name}/schema.py, then: nerve sense migrate {result.name}")
    info(f"  try it   nerve sense compute {result.name}")
    info("  run it   nerve run")


def _render_list(senses) -> None:
    from nerve_cli.cli.output import ago, info, show, table

    if not senses:
        info("No senses yet. Create one with: nerve sense new NAME")
        return
    now = now_ms()
    rows = [(s.name, s.group, "yes" if s.enabled else "no", ", ".join(s.triggers) or "on demand",
             ago(s.last_signal_ts, now), s.signal_count) for s in senses]
    show(table(None, ["sense", "group", "enabled", "triggers", "last signal", "signals"], rows))


def _render_show(detail) -> None:
    from nerve_cli.cli.output import ago, info, show, table, when
    from nerve_cli.names import BUILTIN_SENSES
    from nerve_cli.ops.senses.inspect import sparkline

    s, now = detail.summary, now_ms()
    info(f"{s.name}", style="bold")
    info(f"  group {s.group} · {'enabled' if s.enabled else 'disabled'} · triggers: {', '.join(s.triggers) or 'on demand'}")
    info(f"  {_settings_line(detail.config)}")
    if detail.readers:
        info(f"  read as a peer by: {', '.join(detail.readers)}")
    if detail.blocked:
        until = when(detail.blocked["until"] * 1000)
        info(f"  {detail.blocked['state']} until {until}: {detail.blocked['why']} "
             f"(lift it with `nerve sense reset {s.name}`)", style="bold red")
    if detail.problem:
        p = detail.problem
        where = f"{p['file']}:{p['line']}" if p.get("line") else p["file"]
        info(f"  would not load: {where}: {p['message']}", style="bold red")
    info(f"  {plural(s.signal_count, 'signal')} (archived ones included), last {ago(s.last_signal_ts, now)}")
    own = [t for t in detail.tables if not t["engine"]]
    if not detail.tables:
        info("  no database yet: it has not run " + ("(the engine writes it: `nerve run`)" if s.name in BUILTIN_SENSES
                                                     else "(try `nerve sense compute " + s.name + "`)"))
    elif not own:
        info("  no tables of its own (schema.py declares none)")
    for t in own:
        _render_rows(t, detail.recent_rows.get(t["name"], []))
    if not detail.signals:
        return
    show(table(f"Last {plural(len(detail.signals), 'signal')}", ["time", "payload"],
               [(when(x["ts"]), _short_json(x["payload"])) for x in reversed(detail.signals)]))
    spark = sparkline([x["payload"] for x in detail.signals])
    if spark:
        values = [x["payload"] for x in detail.signals]
        info(f"  {spark}  min {min(values):g} · max {max(values):g} · last {values[-1]:g}")


def _render_rows(t: dict, rows: list[dict]) -> None:
    from nerve_cli.cli.output import show, table, when

    archived = f" (+{t['archived_rows']} archived)" if t.get("archived_rows") else ""
    newest = f", newest {len(rows)}" if rows and len(rows) < (t["rows"] or 0) else ""
    title = f"{t['name']}: {plural(t['rows'] or 0, 'row')}{archived}{newest}"
    if not rows:
        show(table(title, ["(empty)"], []))
        return
    columns, time_column = list(rows[0]), t.get("time_column")

    def cell(column: str, value) -> str:  # the time= column follows the display rule, like every time shown
        return when(value) if column == time_column and isinstance(value, int) else _cell(value)

    show(table(title, columns, [[cell(c, r[c]) for c in columns] for r in rows]))


def _cell(value, width: int = 60) -> str:
    text = "NULL" if value is None else f"<{len(value)} bytes>" if isinstance(value, bytes) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _dry_run(home, name: str, event: list[str] | None, json_: bool, bind: dict | None = None) -> None:
    from nerve_cli.ops.senses.dryrun import dry_run, parse_event

    result = dry_run(home, name, [parse_event(text) for text in event] if event else None, bind=bind)
    if json_:
        from nerve_cli.cli.output import print_json

        print_json(result.to_json())
    else:
        _render_dry_run(result)
        if event and not result.events and result.outcome != Outcome.ERROR:
            from nerve_cli.cli.output import info

            info(f"note: {name}'s compute takes no third parameter (trigger), so the --event samples were not "
                 "given to it", style="yellow")
    if result.outcome == Outcome.ERROR:
        raise typer.Exit(1)


def _render_dry_run(result) -> None:
    import json

    from nerve_cli.cli.output import err_console, error, info, show, table
    from nerve_cli.ops.senses.dryrun import KEPT

    for line in result.output:
        where = "" if line["stream"] == "stdout" else " (stderr)"
        err_console().print(f"{result.sense}{where} | {line['text']}", markup=False, highlight=False, soft_wrap=True)
    took = f" in {result.duration_ms:.1f} ms" if result.duration_ms is not None else ""
    given = f" with {result.events} event(s)" if result.events else ""
    if result.outcome == Outcome.ERROR:
        e = result.error
        where = f" at {e.file}:{e.line}" if e and e.file else ""
        error(f"{result.sense} (dry run{given}): {e.type}: {e.message}{where}" if e else f"{result.sense}: failed")
        if e and e.traceback:
            err_console().print(e.traceback, markup=False, highlight=False, soft_wrap=True)
        info("nothing was written", style="dim")
        return
    what = {"signal": "would signal", "kept": "would keep its rows without a signal (KEEP)",
            "silent": "would stay silent (returned None: its rows are dropped)"}[result.to_json()["outcome"]]
    info(f"{result.sense} (dry run{given}){took}: {what}", style="bold")
    if result.outcome == Outcome.SIGNAL:
        info(json.dumps(result.payload, indent=2, ensure_ascii=False, default=str))
        if result.workflow:
            info(f"workflow directive: {result.workflow}")
    for name, entry in sorted((result.tables or {}).items()):
        counts = ", ".join(f"{entry[k]} {k}" for k in ("inserted", "updated", "deleted") if entry[k])
        rows = [(r["op"], json.dumps(r["row"], ensure_ascii=False, default=str)) for r in entry["rows"]]
        show(table(f"{name}: {counts}", ["op", "row"], rows))
    for source, (before, after) in (result.cursors or {}).items():
        info(f"cursor on {source} would move from {before} to {after}")
    for sha, size in sorted((result.blobs or {}).items()):
        info(f"blob {sha[:16]}… ({size:,} bytes) would be stored")
    for emitted in result.to_json()["emits"]:
        key = f" (key {emitted['key']})" if emitted["key"] else ""
        info(f"would emit to {emitted['channel']}{key}: {json.dumps(emitted['payload'], ensure_ascii=False, default=str)}")
    where = "an in-memory copy of its database" if result.copy else "its database file, in a rolled-back transaction"
    info(f"computed on {where}: no row, cursor, blob or log entry was kept; {KEPT}", style="dim")


def _render_compute(result) -> None:
    import json

    from nerve_cli.cli.output import err_console, error, info, warn

    for line in result.output:  # what the compute printed, in order, before what it returned
        where = "" if line["stream"] == "stdout" else " (stderr)"
        err_console().print(f"{result.sense}{where} | {line['text']}", markup=False, highlight=False, soft_wrap=True)
    took = f" in {result.duration_ms:.1f} ms" if result.duration_ms is not None else ""
    if result.outcome == Outcome.SIGNAL:
        info(f"{result.sense}: signal{took}", style="bold green")
        info(json.dumps(result.payload, indent=2, ensure_ascii=False, default=str))
        if result.workflow:
            info(f"workflow directive: {result.workflow}")
            thread = result.thread or {}
            if thread.get("run_id"):
                info(f"  → {thread['run_id']} {thread['status']}")
            elif thread.get("reason"):
                (warn if thread.get("status") == "not_started" else error)(f"  → {thread['status']}: {thread['reason']}")
    elif result.outcome == Outcome.SILENT:
        info(f"{result.sense}: silent{took} (compute returned None; nothing was stored)")
    else:
        e = result.error
        where = f" at {e.file}:{e.line}" if e and e.file else ""
        error(f"{result.sense}: {e.type}: {e.message}{where}" if e else f"{result.sense}: failed")
        if e and e.traceback:
            err_console().print(e.traceback, markup=False, highlight=False, soft_wrap=True)
    for batch in result.consumed:  # what it received, and what its disabled reflexes leave waiting
        ids = f"#{batch['first']}" if batch["first"] == batch["last"] else f"#{batch['first']}–#{batch['last']}"
        info(f"  consumed {batch['count']} event(s) of {batch['source']} ({ids})")
    for waiting in result.skipped:
        warn(f"  {waiting['events']} event(s) of {waiting['source']} wait: no enabled reflex of {result.sense} "
             f"lists it (enable its reflex to deliver them)")


def _settings_line(config: dict) -> str:
    from nerve_cli.config.model import format_duration

    timeout = config.get("timeout") or 0.0
    grace = config.get("grace_period")
    parts = [f"throttle {format_duration(config.get('throttle') or 0.0)}", f"timeout {format_duration(timeout)}",
             f"grace {format_duration(grace if grace is not None else 3 * timeout)}"]
    parts.append(f"peers: {', '.join(config.get('peers') or []) or 'none'}")
    return " · ".join(parts)


def _short_json(payload, width: int = 100) -> str:
    import json

    text = json.dumps(payload, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


# disable/enable (soft delete with the cascade) live in sense_lifecycle
app.command("disable")(sense_lifecycle.disable)
app.command("enable")(sense_lifecycle.enable)
app.command("delete")(sense_remove.delete)
app.command("rename")(sense_remove.rename)
