"""`nerve agent wait|next|ack|list|install`: coding agents' inboxes (logic in ops.agents and agents/)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.cli.group import HelpGroup

app = typer.Typer(
    cls=HelpGroup, no_args_is_help=True,
    help="Wake coding agents (Claude Code, OpenCode, Codex) with the events they hear, exactly once.\n\n"
         "Example: nerve agent install claude coder && nerve agent list",
)
Agent = Annotated[str, typer.Argument(help="The agent's name (agents: in nerve.yaml).")]
Session = Annotated[Optional[str], typer.Option(
    "--session", help="Who takes the events (default: the hook input's session_id). A call acknowledges what "
    "the previous one handed the same session.")]

@app.command("wait")
def wait_(
    name: Agent,
    timeout: Annotated[Optional[str], typer.Option(
        "--timeout", help="Give up after this long (10s, 5m, 23h) and exit 0 with nothing; default: wait until "
        "events come.")] = None,
    session: Session = None,
    again: Annotated[bool, typer.Option(
        "--again", help="Do not acknowledge the previous delivery first: hand it again if it is pending (what a "
        "harness's SessionStart hook does, implied by its hook input).")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Block until the agent has events; print them for the model on stderr and exit 2 (the wake code).

    Made for Claude Code's and OpenCode's `asyncRewake` hooks (an async hook that
    exits 2 wakes the session with its stderr): exits 0 with nothing on
    --timeout. Calling it again for the same session acknowledges what the
    previous call handed out, so the events of a turn that ended never come
    back; a harness that died mid-turn gets the same delivery again, with the
    same id, at its next start (a SessionStart hook input, or --again, hands it
    again without acknowledging it). With --json also prints the delivery
    document on stdout. Works with the engine stopped. Exits by itself when the
    process that started it (the harness) is gone.

    Example: nerve agent wait coder --timeout 23h
    """
    from nerve_cli.cli.agent_wait import run
    from nerve_cli.config.model import parse_duration

    try:
        seconds = parse_duration(timeout) if timeout is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timeout") from None
    code = run(name, seconds, session, again, home, json_)
    if code:
        raise typer.Exit(code)


@app.command("next")
def next_(
    name: Agent,
    ack: Annotated[bool, typer.Option("--ack", help="Acknowledge what the previous call handed this session "
                                                    "first (as `wait` does).")] = False,
    session: Session = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Take the agent's events now, without waiting: the pending delivery again, else a new one, else nothing.

    The non-blocking form for any script. Exit code 0 either way (`delivery` is
    null in the --json document when nothing waits). The events stay pending
    until `nerve agent ack NAME ID` (or --ack on the next call).

    Example: nerve agent next coder --json | jq '.events[].payload'
    """
    from nerve_cli.agents.text import delivery_text
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import take

    done = take(require_instance(home), name, session=session, ack_previous=ack, via="cli")
    if json_:
        output.print_json(done.document(name))
        return
    if done.taken.delivery is None:
        output.info(f"nothing waits for agent {name}")
        return
    output.info(delivery_text(done.taken.delivery, str(home) if home else None))


@app.command("ack")
def ack_(
    name: Agent,
    ids: Annotated[Optional[list[int]], typer.Argument(metavar="ID", help="Delivery ids (default: every pending delivery).")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Acknowledge deliveries: their events never come back.

    Without ids, every delivery pending for the agent. Exit code 1 when an id is
    not one of the agent's deliveries.

    Example: nerve agent ack coder 12
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import acknowledge

    doc = acknowledge(require_instance(home), name, ids or None, by="cli")
    if json_:
        output.print_json(doc)
    else:
        if doc["acked"]:
            output.info(f"acknowledged {', '.join(map(str, doc['acked']))} for agent {name}")
        elif not doc["unknown"]:
            output.info(f"nothing was pending for agent {name}")
        if doc["already"]:
            output.info(f"already acknowledged: {', '.join(map(str, doc['already']))}")
    if doc["unknown"]:
        if not json_:
            output.error(f"not deliveries of agent {name}: {', '.join(map(str, doc['unknown']))} "
                         f"(nerve agent list shows what is pending)")
        raise typer.Exit(1)


@app.command("list")
def list_(home: HomeOption = None, json_: JsonOption = False) -> None:
    """Show each agent with what it hears and its backlog (read from the files; no engine needed).

    Example: nerve agent list --json
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import listing

    doc = listing(require_instance(home))
    if json_:
        output.print_json(doc)
        return
    if not doc["agents"]:
        output.info("no agents in nerve.yaml: add `agents: {coder: {on: [ci.done]}}`, then "
                    "`nerve agent install claude coder`")
        return
    rows = [(a["name"], ", ".join(a["sources"]), a["deliver"], a["backlog"], a["pending"],
             output.when(a["oldest_ms"]) if a["oldest_ms"] else "-", output.when(a["last_ack_ms"]) if a["last_ack_ms"] else "-",
             "yes" if a["enabled"] else "no") for a in doc["agents"]]
    output.show(output.table("Agents", ["agent", "hears", "deliver", "backlog", "pending", "oldest", "last ack",
                                        "enabled"], rows))




@app.command("install")
def install(
    harness: Annotated[str, typer.Argument(help="claude (Claude Code), opencode or codex.")],
    name: Agent,
    project: Annotated[Optional[Path], typer.Option(
        "--project", help="The project the harness works in (default: the current folder).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Write the harness's own configuration so the agent hears its events, and show what was written.

    claude: hooks in .claude/settings.json (SessionStart and Stop run `nerve
    agent wait NAME` as async, asyncRewake commands) and the nerve MCP server
    in .mcp.json. opencode: the same hooks in .opencode/hooks.json and the
    server in opencode.json. codex: the server in $CODEX_HOME/config.toml (its
    turns are started through `codex app-server`: the notes say how). Every
    entry already in those files is kept; running it again changes nothing.

    Example: nerve agent install claude coder --project ~/src/app --dry-run
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import install as run

    if harness not in ("claude", "opencode", "codex"):
        raise typer.BadParameter(f"{harness!r}: expected claude, opencode or codex", param_hint="HARNESS")
    doc = run(require_instance(home), harness, name, project or Path.cwd(), dry_run)
    if json_:
        output.print_json(doc)
        return
    for item in doc["files"]:
        verb = {"created": "would create" if dry_run else "created", "updated": "would update" if dry_run else "updated",
                "unchanged": "unchanged"}[item["action"]]
        output.info(f"{verb}: {item['path']}", style="bold")
        if item["action"] != "unchanged":
            output.info(item["content"].rstrip("\n"))
    for note in doc["notes"]:
        output.info(note)


@app.command("deliver")
def deliver(
    name: Agent,
    for_: Annotated[Optional[str], typer.Option("--for", help="Stop after this long (e.g. 10m); default: until "
                                                               "Ctrl-C.")] = None,
    home: HomeOption = None,
) -> None:
    """Hand the agent's events to its Codex thread, turn by turn, until Ctrl-C (agents.NAME.deliver.codex).

    Connects to the `codex app-server` the agent names (unix://PATH or a loopback
    ws://), starts a turn on its thread with each delivery and acknowledges it
    when the turn completes; reconnects when the app-server restarts. Works with
    the engine stopped.

    Example: codex app-server --listen unix://$HOME/.codex/app.sock & nerve agent deliver coder
    """
    from nerve_cli.cli import output
    from nerve_cli.config.model import parse_duration
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import deliver_codex

    try:
        seconds = parse_duration(for_) if for_ is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--for") from None
    turns = deliver_codex(require_instance(home), name, seconds, lambda level, text: output.warn(text) if level == "warn"
                          else output.info(text))
    output.info(f"{turns} turn{'s' if turns != 1 else ''} completed for agent {name}")
