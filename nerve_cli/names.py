"""The naming rules for senses, groups, workflows, channels and projection parameters, with no dependencies
(workers import it)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*\Z")
NAME_MAX = 64


# The senses the engine computes itself: listed by status and mesh, shown by `sense show`, listened to like
# any sense, never defined in nerve.yaml (config.model re-exports them).
HEALTH_SENSE = "nerve-health"
THREADS_SENSE = "nerve-threads"  # every workflow thread's transitions, as signals
BUILTIN_SENSES = (HEALTH_SENSE, THREADS_SENSE)

CHANNEL_MAX = 200  # an external channel's name (an `on:` entry, `nerve emit NAME`)


def channel_problem(value: object) -> str | None:
    """Why `value` cannot be a channel name, or None. Channels are free text, within bounds:
    every emit is logged with its name, so a 900 KB name was 900 KB in the log."""
    if not isinstance(value, str) or not value:
        return "a channel name is a non-empty string"
    if len(value) > CHANNEL_MAX:
        return f"a channel name is at most {CHANNEL_MAX} characters, got {len(value):,}"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "a channel name cannot contain control characters (newline, tab, NUL...)"
    return None


# -- subject patterns: `on: ["pr.*", "ci.>"]`, NATS-style over dot-separated channel names ----------------

WILDCARDS = ("*", ">")


def is_pattern(value: str) -> bool:
    """Whether an `on:` entry is a subject pattern rather than one source's name: a token is `*` or `>`, or
    holds a `*` (`pr*`: a glob meant as a pattern, refused with its fix). A `>` inside a token (`a->b`) is text."""
    return "*" in value or any(token == ">" for token in value.split("."))


def pattern_problem(value: str) -> str | None:
    """Why `value` (holding `*` or `>`) is not a subject pattern, or None. As in NATS subjects: `*` is one
    whole dot-separated token, `>` the last token, standing for one or more."""
    tokens = value.split(".")
    fix = ("use `*` for one whole dot-separated token and `>` as the last token for one or more "
           "(like pr.* or ci.>)")
    for i, token in enumerate(tokens):
        if token in WILDCARDS:
            if token == ">" and i != len(tokens) - 1:
                return f"pattern {value!r}: `>` stands for the trailing tokens, so it comes last; {fix}"
            continue
        if not token:
            return f"pattern {value!r} has an empty token (two dots, or a dot at an end); {fix}"
        if "*" in token:
            return f"pattern {value!r}: {token!r} mixes a wildcard with other characters; {fix}"
    return None


def pattern_matches(pattern: str, channel: str) -> bool:
    """Whether `channel` is one of the names `pattern` stands for (`*`: one token, `>`: one or more last)."""
    want, have = pattern.split("."), channel.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(have) == len(want)


def hears(on: "tuple[str, ...] | list[str]", channel: str) -> bool:
    """Whether a listener with these `on:` sources hears `channel`: by its name, or by a pattern matching it."""
    return channel in on or any(is_pattern(p) and pattern_matches(p, channel) for p in on)


def pattern_prefix(pattern: str) -> str:
    """The literal start every channel `pattern` matches shares (`pr.*` → `pr.`; `*.done` → ``)."""
    tokens = pattern.split(".")
    literal = []
    for token in tokens:
        if token in WILDCARDS:
            break
        literal.append(token + ".")
    return "".join(literal)


# -- the fleet: host names, and names that travel inside a NATS subject -----------

HOST_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*\Z")
HOST_MAX = 64
SUBJECT_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+\Z")  # one subject token: no '.', '*', '>', spaces
SUBJECT_NAME_MAX = 200


def host_problem(value: object) -> str | None:
    """Why `value` cannot be a fleet host name, or None."""
    if not isinstance(value, str) or not value:
        return "a host name is a non-empty string"
    if len(value) > HOST_MAX:
        return f"a host name is at most {HOST_MAX} characters, got {len(value)}"
    if not HOST_RE.match(value):
        return (f"host name {value!r} is not allowed: use lowercase letters, digits, '_' and '-' "
                "(no '.' or '/': it is the first part of a source name like build-box/disk-usage)")
    return None


def subject_name_problem(value: object, what: str) -> str | None:
    """Why a sense or channel name cannot travel in a NATS subject, or None."""
    if not isinstance(value, str) or not value:
        return f"a {what} name is a non-empty string"
    if len(value) > SUBJECT_NAME_MAX:
        return f"a fleet {what} name is at most {SUBJECT_NAME_MAX} characters, got {len(value)}"
    if not all(SUBJECT_TOKEN_RE.match(part) for part in value.split(".")):
        return (f"{what} {value!r} cannot be a NATS subject: use letters, digits, '_' and '-' in parts "
                "separated by single dots (like deploy.finished)")
    return None


def default_host() -> str:
    """This machine's hostname as a fleet host name: its first label, lowercased, other characters as '-'."""
    import socket  # 2.3 ms: only a fleet with no `host:` asks

    label = socket.gethostname().split(".")[0].lower()
    name = re.sub(r"[^a-z0-9_-]", "-", label).strip("-_")[:HOST_MAX] or "localhost"
    return name if HOST_RE.match(name) else "h" + name


# -- W3C trace context (https://www.w3.org/TR/trace-context/): the parent an event's trace continues ---------

TRACEPARENT_RE = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\Z")


def traceparent_problem(value: object) -> str | None:
    """Why `value` is not a W3C traceparent header (`00-<trace id>-<parent id>-<flags>`), or None."""
    match = TRACEPARENT_RE.match(value) if isinstance(value, str) else None
    if match is None or match.group(0).startswith("ff") or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        shown = repr(value)[:80]
        return (f"a traceparent is a W3C trace context header like "
                f"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, got {shown}")
    return None


PARAM_RE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)\Z")  # a binding value naming a parameter: `$repo`


def binding_param(value: object) -> str | None:
    """`$repo` → "repo": the parameter a binding value names, or None for a literal."""
    match = PARAM_RE.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def binding_key(bind: Mapping[str, Any] | None) -> str | None:
    """The one spelling of a set of parameter values (JSON, keys sorted), or None for none."""
    if not bind:
        return None
    return json.dumps(dict(bind), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
