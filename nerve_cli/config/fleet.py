"""The fleet's names and subjects, and the checks of the `fleet:` section that need the whole file.

What crosses machines, and how it is named:

- A **sense** a host publishes goes out under that host: sense `disk-usage` of
  host `build-box` is the source `build-box/disk-usage` on every other host
  (subject `<stream>.sense.build-box.disk-usage`). Another host lists it under
  `fleet.subscribe.senses` and names it in `on:` like any source.
- A **channel** is fleet-wide: the emits of channel `deploys` on every host that
  publishes it reach the channel `deploys` on every host that subscribes to it
  (each host's on its own subject, `<stream>.channel.<host>.deploys`); a host
  never receives its own emits back, and what it received is never sent on.

Events received from the fleet land in the local event store (`data/events.db`)
under those names, so `on:`, event waits and webhooks see them as any event.
Pure: no NATS here (the model is in `config.model`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from nerve_cli.config.model import HEALTH_SENSE, FleetConfig, url_problem
from nerve_cli.config.problems import Loc, Severity
from nerve_cli.names import default_host, subject_name_problem

KEY_PREFIX = "fleet:"  # an event received from the fleet is stored with the key fleet:<message id>
CREDENTIAL_VARIABLES = ("NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY",
                        "NATS_CA", "NATS_CERT", "NATS_KEY")

Finding = tuple[Loc, Severity, str]


def sense_subject(stream: str, host: str, sense: str) -> str:
    return f"{stream}.sense.{host}.{sense}"


def channel_subject(stream: str, host: str, channel: str) -> str:
    """Each host publishes a channel on its own subject, so every subject has one writer (and one order)."""
    return f"{stream}.channel.{host}.{channel}"


def stream_subjects(stream: str) -> list[str]:
    return [f"{stream}.>"]


def is_remote_source(name: str) -> bool:
    """`build-box/disk-usage` names another host's sense."""
    return name.count("/") == 1 and all(name.split("/"))


def subscriptions(fleet: FleetConfig) -> dict[str, str]:
    """Local source name → subject, for everything this host subscribes to."""
    out = {name: sense_subject(fleet.stream, *name.split("/")) for name in fleet.subscribe.senses}
    out.update({name: channel_subject(fleet.stream, "*", name) for name in fleet.subscribe.channels})
    return out


def emit_refusal(fleet: FleetConfig | None, channel: str) -> str | None:
    """Why `nerve emit CHANNEL` is refused here: CHANNEL is another host's sense, whose events come from it."""
    if fleet is None or not fleet.enabled or channel not in fleet.subscribe.senses:
        return None
    host, sense = channel.split("/")
    return (f"{channel!r} is sense {sense} of fleet host {host}: its events come from that host "
            f"(`nerve sense compute {sense}` there)")


# -- cross-checks on the plain data (config check) ---------------------------------

def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[tuple[int, str]]:
    if isinstance(value, str):
        value = [value]
    return [(i, v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else []


def subscribed(data: dict) -> set[str]:
    """The local source names the plain data's `fleet.subscribe` brings in (senses HOST/SENSE and channels)."""
    fleet = _mapping(data.get("fleet"))
    if fleet.get("enabled", True) is False:
        return set()
    subscribe = _mapping(fleet.get("subscribe"))
    return {s for key in ("senses", "channels") for _, s in _strings(subscribe.get(key))}


def check_fleet(data: dict, hint: Callable[[str, Any], str]) -> Iterator[Finding]:
    """Problems the model cannot see: senses that do not exist, loops back into this host, passwords in git."""
    fleet = data.get("fleet")
    if not isinstance(fleet, dict):
        return
    senses = _mapping(data.get("senses"))
    host = fleet.get("host") if isinstance(fleet.get("host"), str) else default_host()
    publish, subscribe = _mapping(fleet.get("publish")), _mapping(fleet.get("subscribe"))
    for i, sense in _strings(publish.get("senses")):
        loc = ("fleet", "publish", "senses", i)
        if sense == HEALTH_SENSE:
            continue  # the built-in health sense can be published like any other
        if sense not in senses:
            yield loc, "error", f"`{sense}` is not a sense in `senses:`{hint(sense, senses)}"
        elif _mapping(senses[sense]).get("enabled", True) is False:
            yield loc, "warning", f"sense `{sense}` is disabled: nothing of it is published"
        elif (problem := subject_name_problem(sense, "sense")) is not None:
            yield loc, "error", problem
    for i, channel in _strings(publish.get("channels")):
        if channel in senses or channel == HEALTH_SENSE:
            yield ("fleet", "publish", "channels", i), "error", (
                f"`{channel}` is a sense, not a channel: list it under `fleet.publish.senses`")
    for i, source in _strings(subscribe.get("senses")):
        if is_remote_source(source) and source.split("/")[0] == host:
            yield ("fleet", "subscribe", "senses", i), "error", (
                f"`{source}` is a sense of this very host (`{host}`): its signals would loop back into itself; "
                f"listen to `{source.split('/')[1]}` directly (or set `fleet.host` if this host is misnamed)")
    for i, channel in _strings(subscribe.get("channels")):
        if channel in senses or channel == HEALTH_SENSE:
            yield ("fleet", "subscribe", "channels", i), "error", (
                f"`{channel}` is a local sense: the fleet channel's events and the sense's signals would share one "
                "name; rename the channel or the sense")
    for i, server in _strings(fleet.get("servers")):
        if url_problem(server) is None and urlsplit(server).password:
            yield ("fleet", "servers", i), "warning", (
                "this URL carries a password, and nerve.yaml is committed to git: set NATS_USER and NATS_PASSWORD "
                "(or NATS_CREDS) in the engine's environment instead")


def check_remote_sources(data: dict) -> Iterator[Finding]:
    """An `on:` entry written HOST/SENSE that no `fleet.subscribe` brings in never receives anything."""
    fleet = _mapping(data.get("fleet"))
    brought_in = subscribed(data)
    reflexes = data.get("reflexes")
    for i, reflex in enumerate(reflexes if isinstance(reflexes, list) else []):
        for j, source in _strings(_mapping(reflex).get("on")):
            if is_remote_source(source) and source not in brought_in:
                how = "add it to `fleet.subscribe.senses`" if fleet else "add a `fleet:` section that subscribes to it"
                yield ("reflexes", i, "on", j), "warning", (
                    f"`{source}` reads as another host's sense (HOST/SENSE), but this host does not subscribe to it: "
                    f"{how} (until then only `nerve emit {source}` feeds it)")
