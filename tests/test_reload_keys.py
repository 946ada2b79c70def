"""Every key of nerve.yaml, changed in a running engine, is applied or said to take effect at the next start.

A save that changed only `channels:` was logged `config_unchanged` (a secret added to an open channel had no
effect, a new webhook channel answered 404), `senses.S.expect_signal_every` likewise, and
`engine.health_interval` was logged but nerve-health kept its period. The reload now compares the whole
validated configuration; this walks every field of the config model: two saves between them change every
one, each is named in the `config_reloaded` row, the ones a running engine cannot apply are listed apart
(`at_next_start`) and documented so, and the ones the issue named are observed applied.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import textwrap
from pathlib import Path

import httpx
import pytest
import yaml
from enginekit import RunningEngine, read_logs, wait_for, write_instance

from nerve_cli.config.load import validate_text
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.source import parse, to_plain
from nerve_cli.kernel.reload.keys import KEYS, NEXT_START, Effect, changes, leaf_patterns, pattern_of

pytestmark = pytest.mark.timeout(120)
CONFIG_DOC = Path(__file__).resolve().parents[1] / "docs" / "reference" / "config.md"
SENSE = "def compute(db, peers):\n    return 1\n"

BASE = """
engine:
  max_rounds: 100
  archive_after: 30d
  shutdown_timeout: 5s
  health_interval: 1m
  failure_backoff_after: 3
  failure_backoff_first: 5s
  failure_backoff_max: 10m
  quarantine_after: 3
  quarantine_window: 1h
  quarantine_for: 1h
  respawn_backoff_first: 500ms
  respawn_backoff_max: 30s
  max_causal_depth: 8
  webhooks: 127.0.0.1:0
  webhook_connections: 256
  webhook_timeout: 10s
  otel: {endpoint: "http://127.0.0.1:9", capture_content: false, enabled: false}
groups:
  g: {memory_limit: 900MB, cpu_limit: 95%, cpu_window: 10s}
senses:
  s: {group: g, throttle: 0s, timeout: 30s, grace_period: 1m, peers: [p], expect_signal_every: 1h}
  p: {group: g}
reflexes:
  - {sense: s, interval: 1h, on: [c], debounce: 1s, max_wait: 2s, jitter: 1s, max_depth: 5}
  - {sense: p, cron: "0 3 * * *", timezone: UTC}
  - {sense: p, paths: ["docs/*.md"]}
  - {sense: p, on: [c], lazy: true, bindings: {kind: ci}}
workflows:
  w: {concurrency: 1, overflow: queue, max_queue: 10, idempotent: false, drain_timeout: 30s, role_timeout: 1m,
      role_retries: 0, role_backoff: 1s, thread_timeout: 1h, approval_timeout: 1d, cancel_grace: 5s,
      model: echo, system: "be brief", approvers: {names: [ann], count: 1}, self_approval: true}
channels:
  c: {webhook: true}
  d: {webhook: true}
agents:
  a: {on: [c], match: {kind: ci}, batch: 20, start: new,
      deliver: {codex: {endpoint: "unix:///tmp/nerve-test-codex.sock", thread: t1}}}
  z: {on: [c], deliver: {codex: {endpoint: "unix:///tmp/nerve-test-codex.sock", thread: t9}}}
fleet:
  servers: ["nats://127.0.0.1:1"]
  host: alpha
  stream: nerve
  publish: {senses: [s], channels: [c]}
  subscribe: {senses: [beta/x], channels: [e]}
  retention: 7d
  max_bytes: 1GB
  max_messages: 1000
  replicas: 1
  ack_wait: 30s
  enabled: false
loops: [[s, c]]
notify:
  - {name: n1, to: ["json://127.0.0.1:9/a"], on: [waiting], workflows: [w], senses: [s], answer_as: ann,
     retry_max: 5m}
"""

# every leaf above, each to another valid value
EVERY_LEAF = {
    "engine": {"max_rounds": 50, "archive_after": "20d", "shutdown_timeout": "4s", "health_interval": "7s",
               "failure_backoff_after": 4, "failure_backoff_first": "6s", "failure_backoff_max": "11m",
               "quarantine_after": 4, "quarantine_window": "2h", "quarantine_for": "2h",
               "respawn_backoff_first": "600ms", "respawn_backoff_max": "31s", "metrics": "127.0.0.1:9",
               "max_causal_depth": 9, "priority_ageing": "3s",
               "webhooks": "127.0.0.1:1", "ui": "127.0.0.1:1", "webhook_connections": 100, "webhook_timeout": "9s",
               "preload": ["json"],
               "otel": {"endpoint": "http://127.0.0.1:8", "capture_content": True, "enabled": True}},
    "groups": {"g": {"memory_limit": "800MB", "cpu_limit": "90%", "cpu_window": "5s", "concurrency": 2}},
    "senses": {"s": {"group": "h", "throttle": "1s", "timeout": "20s", "grace_period": "2m", "peers": [],
                     "expect_signal_every": "2h", "signal_version": "2", "signal_hash": True,
                     "run_on_save": False, "priority": "high"},
               "p": {"group": "g", "enabled": False}},
    "reflexes": [
        {"sense": "s", "interval": "2h", "on": [], "paths": ["notes/*.md"], "debounce": "2s", "max_wait": "3s",
         "jitter": "2s", "enabled": False, "max_depth": 6, "priority": "low"},
        {"sense": "s", "cron": "0 4 * * *", "timezone": "Europe/Berlin"},
        {"sense": "s", "paths": ["docs/*.txt"]},
        {"sense": "s", "on": ["d"], "lazy": False},
    ],
    "workflows": {"w": {"concurrency": 2, "overflow": "drop", "max_queue": 5, "idempotent": True,
                        "drain_timeout": "20s", "role_timeout": "2m", "role_retries": 1, "role_backoff": "2s",
                        "thread_timeout": "2h", "approval_timeout": "2d", "cancel_grace": "6s", "model": "echo-2",
                        "system": "be briefer", "approvers": {"names": ["bob"], "count": 2},
                        "self_approval": False, "enabled": False, "priority": "high",
                        "concurrency_key": "prompt.pr", "key_overflow": "replace"}},
    "channels": {"c": {"webhook": False},
                 "d": {"webhook": True, "secret_env": "NERVE_TEST_RELOAD_SECRET", "signature_header": "X-Sig",
                       "delivery_header": "X-Id", "key": "body.id", "keep_headers": ["X-Kind"]}},
    "agents": {"a": {"on": ["d"], "match": {"kind": "cd"}, "batch": 10, "start": "all", "enabled": False,
                     "deliver": {"codex": {"endpoint": "ws://127.0.0.1:9", "thread": "t2"}}}},
    "fleet": {"servers": ["nats://127.0.0.1:2"], "host": "beta", "stream": "other",
              "publish": {"senses": [], "channels": []}, "subscribe": {"senses": [], "channels": []},
              "retention": "6d", "max_bytes": "2GB", "max_messages": 2000, "replicas": 2, "ack_wait": "20s",
              "enabled": True},  # joins: its link tries a server nobody runs, and says so
    "notify": [{"name": "n2", "to": ["json://127.0.0.1:9/b"], "to_env": "NERVE_TEST_NOTIFY_URLS",
                "on": ["failed"], "workflows": [], "senses": [], "answer_as": "bob", "retry_max": "4m",
                "enabled": False}],
    "loops": [["s"]],
}


def merged(base: dict, change: dict) -> dict:
    out = dict(base)
    for key, value in change.items():
        out[key] = merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def config_of(data: dict) -> NerveConfig:
    found, problems = validate_text(yaml.safe_dump(data, sort_keys=False))
    assert found is not None, [str(p) for p in problems if p.is_error]
    return found


def entries_and_wholes(data: dict) -> dict:
    """The second save: every entry of a named section comes or goes, the reflexes are fewer, and each field
    that may be a model or nothing changes whole."""
    out = merged(data, {})
    out["senses"] = {**{"s": data["senses"]["s"]}, "q": {"group": "g"}}  # p goes, q comes
    out["groups"] = {"k": {"cpu_window": "3s"}}
    out["reflexes"] = data["reflexes"][:1]
    out["workflows"] = {"w": {**data["workflows"]["w"], "approvers": 2}, "v": {}}  # approvers: a rule, then a count
    out["channels"] = {"d": data["channels"]["d"], "f": {}}
    out["agents"] = {"a": {**data["agents"]["a"], "deliver": {}},  # deliver without codex
                     "z": {k: v for k, v in data["agents"]["z"].items() if k != "deliver"},  # no deliver at all
                     "b": {"on": ["d"]}}
    out["engine"] = {k: v for k, v in data["engine"].items() if k != "otel"}
    del out["fleet"]
    out["notify"] = []  # one rule fewer
    return out


def test_every_field_of_the_config_model_is_classified() -> None:
    found = set(leaf_patterns(NerveConfig))
    assert found - set(KEYS) == set(), f"keys no one says when they take effect: {sorted(found - set(KEYS))}"
    assert set(KEYS) - found == set(), f"classified keys the model no longer has: {sorted(set(KEYS) - found)}"


def test_the_keys_taking_effect_at_the_next_start_are_documented_so() -> None:
    table = CONFIG_DOC.read_text(encoding="utf-8")
    for key in sorted(NEXT_START):
        rows = [line for line in table.splitlines() if line.startswith("| `") and
                (f"`{key}`" in line or f"`{key}." in line or re.search(rf"/ `{key.rsplit('.', 1)[-1]}`", line))]
        assert rows and any("next start" in row for row in rows), f"{key}: its row must say it applies at the next start"


def said(path: str, named: str) -> bool:
    """Whether the reload row names a change: by its path, or in words for a running sense's coming, going
    and group ("sense s moved")."""
    parts = path.split(".")
    if parts[0] == "senses" and (len(parts) == 2 or parts[2] in ("enabled", "group")):
        words = f"sense {parts[1]}" + (" moved" if parts[-1] == "group" else "")
        return words in named or f"{path}:" in named
    return f"{path}:" in named or f"{path} changed" in named  # "reflexes changed (4 → 1)"


def test_two_saves_change_every_key_and_each_is_named_applied_or_said_for_the_next_start(home: Path) -> None:
    doc, problems = parse(textwrap.dedent(BASE))  # YAML 1.2, as nerve.yaml is read (`on` is a key, not true)
    assert not problems, problems
    base = to_plain(doc)
    first = merged(base, EVERY_LEAF)
    second = entries_and_wholes(first)
    one, two = changes(config_of(base), config_of(first)), changes(config_of(first), config_of(second))
    covered = {pattern_of(c.path) for c in one + two}
    assert covered == set(leaf_patterns(NerveConfig)), sorted(set(leaf_patterns(NerveConfig)) - covered)

    write_instance(home, yaml.safe_dump(base, sort_keys=False), {"s": SENSE, "p": SENSE})
    engine = RunningEngine(home, env={"NERVE_TEST_RELOAD_SECRET": "s3cret"})
    with engine:
        engine.wait_ready()
        url = engine.status()["webhooks_url"]
        assert httpx.post(url + "c", json={"n": 1}).status_code == 202
        assert httpx.post(url + "d", json={"n": 1}).status_code == 202  # open: no secret yet
        for step, (config, expected) in enumerate(((first, one), (second, two)), start=1):
            (home / "nerve.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            rows = wait_for(lambda: read_logs(home, "system", "config_reloaded")[step - 1:], 30,
                            what=f"save {step} to be applied")
            row = rows[0]["payload"]
            named = " | ".join(row["changes"])
            for change in expected:
                assert said(change.path, named), \
                    f"save {step}: {change.path} changed and the reload does not say so: {named}"
            later = sorted(c.path for c in expected if c.effect is Effect.NEXT_START)
            assert sorted(row["at_next_start"]) == later, row["at_next_start"]
            if step == 1:  # what the issue found ignored, observed applied
                assert httpx.post(url + "c", json={"n": 2}).status_code == 404  # webhook: false
                unsigned = httpx.post(url + "d", json={"id": 7})
                assert unsigned.status_code == 401  # secret_env added to an open channel
                body = b'{"id": 7}'
                signed = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
                assert httpx.post(url + "d", content=body, headers={"X-Sig": signed}).status_code == 202
                status = wait_for(lambda: (st := engine.status()) and st["senses"]["s"]["expect_signal_every"] == 7200
                                  and st, 20, what="expect_signal_every applied")
                assert status["senses"]["nerve-health"]["interval"] == 7  # engine.health_interval applied
            else:
                assert httpx.post(url + "f", json={"n": 3}).status_code == 404  # a new channel, not open to webhooks
        code, out = engine.stop()
    assert code == 0, out
    assert "restart it to" in out  # the next-start keys said on the console
