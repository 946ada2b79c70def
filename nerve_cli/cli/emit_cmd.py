from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.common import HomeOption, JsonOption


def emit(
    channel: Annotated[str, typer.Argument(help="External channel name, as used in a reflex's on: list.",
                                         autocompletion=complete.channels)],
    payload_arg: Annotated[Optional[str], typer.Argument(
        metavar="PAYLOAD", help="The event's payload as JSON, or - to read it from stdin.")] = None,
    payload: Annotated[Optional[str], typer.Option("--payload", help="The payload as JSON (same as PAYLOAD).")] = None,
    key: Annotated[Optional[str], typer.Option(
        "--key", help="Idempotency key: an event with a key already stored is not stored again.")] = None,
    traceparent: Annotated[Optional[str], typer.Option(
        "--traceparent", help="W3C trace context (00-TRACE-PARENT-FLAGS) this event continues: the parent of its "
        "span and of the computes it wakes, when the engine exports traces.")] = None,
    schema_version: Annotated[Optional[str], typer.Option(
        "--schema-version", help="The payload's schema version (e.g. 1 or v1.0), stored with the event.")] = None,
    hashed: Annotated[bool, typer.Option(
        "--hash", help="Store the payload's content hash (sha256 of its canonical JSON) with the event.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Send an event to an external channel; it is committed to disk before this returns.

    With the engine running, prints the senses it woke. With no engine, the
    event is stored in data/events.db and delivered when the engine starts.
    Payloads are JSON, at most 16 MiB - 64 KiB.

    Example: gh api repos/me/app/pulls/7 | nerve emit pr.opened - --schema-version 2 --hash
    """
    from nerve_cli.cli import output
    from nerve_cli.errors import NerveError
    from nerve_cli.home import require_instance
    from nerve_cli.names import traceparent_problem
    from nerve_cli.ops.emit import emit_event, read_payload

    if payload is not None and payload_arg is not None:
        raise typer.BadParameter("give the payload once: as the PAYLOAD argument or with --payload, not both")
    if traceparent is not None and (problem := traceparent_problem(traceparent)) is not None:
        raise typer.BadParameter(problem, param_hint="--traceparent")
    path = require_instance(home)
    from nerve_cli.store.events import check_schema_version

    try:
        check_schema_version(schema_version)
    except NerveError as exc:
        raise typer.BadParameter(str(exc), param_hint="--schema-version") from None
    try:
        value = read_payload(payload if payload is not None else payload_arg)
    except NerveError as exc:  # what was typed (or piped) is not a payload we can send: a usage error
        raise typer.BadParameter(str(exc), param_hint="--payload" if payload is not None else "PAYLOAD") from None
    sent = emit_event(path, channel, value, key, schema_version, hashed, traceparent)
    if json_:
        output.print_json(sent.to_json())
        return
    what = f"event #{sent.event_id} on {channel}" + (f" ({sent.hash})" if sent.hash else "")
    if sent.duplicate:
        output.info(f"{what} was already stored with key {key!r}; nothing new was sent")
    elif sent.via == "disk":
        reached = [*sent.listeners, *(f"thread {r}" for r in sent.resumes)]
        to = f"to {', '.join(reached)}" if reached else "(no enabled reflex listens to it yet)"
        output.info(f"no engine is running: {what} is stored in data/events.db and will be delivered {to} "
                    "when the engine starts")
        if traceparent is not None:
            output.warn("its --traceparent is not kept: only a running engine continues a trace")
    elif sent.triggered or sent.resumes:
        woke = [*sent.triggered, *(f"thread {r} (its wait)" for r in sent.resumes)]
        output.info(f"{what} committed; woke {', '.join(woke)}")
    else:
        output.warn(f"{what} committed, but no enabled reflex listens to it and no thread waits for it "
                    "(add it to a reflex's on: list)")
