"""A delivery as the text a model reads: what a hook prints on stderr for the harness to wake its session with.

Short and factual (a harness puts it in front of the model as is): which agent,
which delivery (the id to acknowledge or to recognise a repeat by), each event
on its own line with its source, id, time and payload, cut to fit
`store.inbox.TEXT_LIMIT` characters (Claude Code's cap for a hook's text; the
`--json` document on stdout has every payload whole).
"""

from __future__ import annotations

import orjson

from nerve_cli.contract.times import iso
from nerve_cli.store.inbox import TEXT_LIMIT, Delivery

PAYLOAD_LIMIT = 1_500  # characters of one event's payload in the text


def delivery_text(found: Delivery, home: str | None = None) -> str:
    again = f", handed before ({found.handed - 1}x): you may have seen it" if found.redelivered else ""
    head = (f"Nerve: {len(found.events)} new event{'s' if len(found.events) != 1 else ''} for agent {found.agent} "
            f"(delivery {found.id}{again}).")
    lines = [head]
    budget = TEXT_LIMIT - len(head) - 400
    for shown, event in enumerate(found.events):
        body = orjson.dumps(event.payload).decode()
        if len(body) > PAYLOAD_LIMIT:
            body = body[:PAYLOAD_LIMIT] + f"… ({len(body):,} characters)"
        line = f"- {event.source} #{event.id} at {iso(event.ts)}: {body}"
        if len(line) > budget:
            lines.append(f"- … and {len(found.events) - shown} more (nerve agent next {found.agent} --json shows "
                         "them whole)")
            break
        budget -= len(line) + 1
        lines.append(line)
    where = f" --home {home}" if home else ""
    lines.append(f"Deal with these, then end your turn: the next `nerve agent wait {found.agent}` acknowledges "
                 f"delivery {found.id} (or `nerve{where} agent ack {found.agent} {found.id}`)."
                 + (" More events wait behind it." if found.more else ""))
    return "\n".join(lines)
