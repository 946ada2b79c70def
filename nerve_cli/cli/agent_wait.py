"""`nerve agent wait`, the hook command: one implementation for the Typer command and for a fast path.

A harness runs it after every turn, so its start-up counts: `main()` sends an
`nerve agent wait ...` command line that this parser understands whole straight
here, without building the Typer app (about half of the start-up); anything
else (`--help`, a typo, an option it does not know) goes through Typer as usual.
"""

import sys
from pathlib import Path
from typing import Any

WAKE = 2  # the exit code that wakes a Claude Code / OpenCode session from an asyncRewake hook
HOOK_INPUT_LIMIT = 1024 * 1024


def hook_input() -> dict[str, Any]:
    """The JSON a harness hands a hook command on stdin ({} when stdin is a terminal, empty, or not JSON)."""
    import json
    import select

    if sys.stdin is None or sys.stdin.closed or sys.stdin.isatty():
        return {}
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        text = sys.stdin.read(HOOK_INPUT_LIMIT) if ready else ""
        data = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run(name: str, seconds: float | None, session: str | None, again: bool, home: Path | None, as_json: bool) -> int:
    """Wait; print the delivery for the model on stderr (and the document on stdout with `as_json`); the exit code."""
    from nerve_cli.agents.text import delivery_text
    from nerve_cli.agents.watch import harness_gone
    from nerve_cli.home import require_instance
    from nerve_cli.ops.agents import wait_for

    path = require_instance(home)
    hook = hook_input()
    who = session or (str(hook["session_id"]) if hook.get("session_id") else None)
    fresh = again or hook.get("hook_event_name") == "SessionStart"
    done = wait_for(path, name, seconds, session=who, ack_previous=not fresh, via="hook", stop=harness_gone())
    if as_json:
        import json

        sys.stdout.write(json.dumps(done.document(name), indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    found = done.taken.delivery
    if found is None:
        return 0
    sys.stderr.write(delivery_text(found, str(home) if home else None) + "\n")
    sys.stderr.flush()
    return WAKE


def fast(argv: list[str]) -> int | None:
    """The exit code of `agent wait ARGS` run here, or None to let Typer parse them (help, anything unknown)."""
    if argv[:2] != ["agent", "wait"]:
        return None
    name: str | None = None
    options: dict[str, str | None] = {"--timeout": None, "--session": None, "--home": None}
    flags = {"--again": False, "--json": False}
    rest = argv[2:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in options and i + 1 < len(rest):
            options[arg] = rest[i + 1]
            i += 2
        elif arg in flags:
            flags[arg] = True
            i += 1
        elif not arg.startswith("-") and name is None:
            name = arg
            i += 1
        else:
            return None
    if name is None:
        return None
    from nerve_cli.durations import parse_duration
    from nerve_cli.errors import NerveError

    try:
        seconds = parse_duration(options["--timeout"]) if options["--timeout"] is not None else None
    except ValueError:
        return None  # Typer says what is wrong with it
    home = Path(options["--home"]) if options["--home"] else None
    try:
        return run(name, seconds, options["--session"], flags["--again"], home, flags["--json"])
    except NerveError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return int(getattr(exc, "exit_code", 1))
