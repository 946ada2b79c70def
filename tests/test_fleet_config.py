"""The `fleet:` section in nerve.yaml: `nerve config check` lists every problem, with key path and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import cli
from enginekit import write_sense

from nerve_cli.config.fleet import channel_subject, sense_subject, subscriptions
from nerve_cli.config.load import validate

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"

BAD_FLEET = """\
senses:
  disk-usage: {}
  cpu: {}
reflexes:
  - {sense: cpu, on: [build-box/disk-usage, laptop/load]}
fleet:
  servers: [http://nats.example.com:4222, "nats://u:secret@nats.example.com:4222", nats://nats.example.com:99999]
  host: build-box
  publish:
    senses: [disk-usge, cpu]
    channels: [cpu, deploy finished, deploys]
  subscribe:
    senses: [build-box/disk-usage, web/load, noslash]
    channels: [cpu]
  replicas: 9
  ack_wait: 5
  retension: 1d
"""


@pytest.fixture
def instance(home: Path) -> Path:
    shutil.copytree(TEMPLATE, home)
    return home


def test_a_bad_fleet_section_lists_every_problem_with_its_line(instance: Path) -> None:
    (instance / "nerve.yaml").write_text(BAD_FLEET)
    result = cli("config", "check", "--fast", "--json")
    assert result.exit_code == 1, result.output
    problems = {p["path"]: p for p in json.loads(result.stdout)["problems"]}
    expected = {
        "fleet.servers[0]": ("error", "scheme must be one of nats://"),  # malformed URL
        "fleet.servers[1]": ("warning", "committed to git: set NATS_USER and NATS_PASSWORD"),
        "fleet.servers[2]": ("error", "Port out of range"),
        "fleet.publish.senses[0]": ("error", "not a sense in `senses:`; did you mean `disk-usage`?"),  # unknown sense
        "fleet.publish.channels[0]": ("error", "is a sense, not a channel"),
        "fleet.publish.channels[1]": ("error", "cannot be a NATS subject"),
        "fleet.subscribe.senses[0]": ("error", "would loop back into itself"),  # this host's own sense
        "fleet.subscribe.senses[2]": ("error", "expected HOST/SENSE"),
        "fleet.subscribe.channels[0]": ("error", "is a local sense"),
        "fleet.replicas": ("error", "≤ 5"),
        "fleet.ack_wait": ("error", "expected a duration"),
        "fleet.retension": ("error", "unknown key `retension`; did you mean `retention`?"),
        "reflexes[0].on[1]": ("warning", "does not subscribe to it: add it to `fleet.subscribe.senses`"),
    }
    for path, (severity, text) in expected.items():
        assert path in problems, f"{path} not reported: {sorted(problems)}"
        assert problems[path]["severity"] == severity and text in problems[path]["message"], problems[path]
        assert problems[path]["line"] is not None
    assert "fleet.subscribe.senses[1]" not in problems  # another host's sense: fine
    plain = cli("config", "check", "--fast")
    assert plain.exit_code == 1 and "nerve.yaml:13: error: fleet.subscribe.senses[0]" in plain.stdout


def test_a_good_fleet_section_is_valid_and_names_its_subjects(home: Path) -> None:
    for sense in ("disk-usage", "alarm"):
        write_sense(home, sense, "def compute(db, peers):\n    return 1\n")
    instance = home
    (instance / "nerve.yaml").write_text("""\
senses:
  disk-usage: {}
  alarm: {}
reflexes:
  - {sense: disk-usage, interval: 1m}
  - {sense: alarm, on: [build-box/disk-usage, deploys]}
fleet:
  servers: nats://nats.example.com:4222
  host: laptop
  publish: {senses: [disk-usage, nerve-health], channels: [deploys]}
  subscribe: {senses: [build-box/disk-usage], channels: [deploys]}
""")
    result = cli("config", "check", "--fast", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["valid"] and not document["problems"]
    channels = {c["name"]: c for c in document["channels"]}
    assert channels["build-box/disk-usage"]["fed_by"] == "fleet" and channels["deploys"]["fed_by"] == "fleet"
    config = validate((instance / "nerve.yaml").read_text()).config
    assert config is not None and config.fleet is not None
    assert config.fleet.servers == ("nats://nats.example.com:4222",)  # one server may be written alone
    assert subscriptions(config.fleet) == {"build-box/disk-usage": "nerve.sense.build-box.disk-usage",
                                           "deploys": "nerve.channel.*.deploys"}
    assert sense_subject("nerve", "laptop", "disk-usage") == "nerve.sense.laptop.disk-usage"
    assert channel_subject("nerve", "laptop", "deploy.finished") == "nerve.channel.laptop.deploy.finished"
