"""`nerve mesh`: the reflex graph from nerve.yaml (+ launches seen in logs.db), as a tree, mermaid and dot."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import cli

from nerve_cli.config.load import load_config
from nerve_cli.config.mesh import build, observed_launches
from nerve_cli.store.logs import LogStore

CONFIG = """\
engine: {health_interval: 30s}
senses:
  fetch: {group: io}
  parse: {group: io}
  report: {group: out}
  audit: {peers: [fetch], enabled: false}
  ping: {}
  pong: {}
  idle-one: {}
reflexes:
  - {sense: fetch, interval: 10s}
  - {sense: parse, on: [fetch]}
  - {sense: report, on: [parse], cron: "0 9 * * 1-5"}
  - {sense: audit, interval: 1m}
  - {sense: fetch, on: [task.created]}
  - {sense: ping, on: [pong]}
  - {sense: pong, on: [ping, nerve-health]}
  - {sense: report, interval: 5m, enabled: false}
workflows:
  cleanup: {}
  code-review: {enabled: false}
"""



@pytest.fixture
def instance(home: Path) -> Path:
    home.mkdir(parents=True)
    (home / "nerve.yaml").write_text(CONFIG)
    return home


def log_launches(home: Path, launches: list[tuple[str | None, str]]) -> None:
    """`workflow/queued` rows shaped as the kernel writes them (WorkflowManager._event + launch_directive)."""
    with LogStore(home / "data" / "logs.db") as logs:
        for sense, workflow in launches:
            origin = {"kind": "directive", "sense": sense} if sense else {"kind": "cli", "by": "nerve workflow run"}
            logs.workflow_event(logs.allocate_run_id(), workflow, "queued",
                                {"workflow": workflow, "prompt": "p", "max_rounds": 5, "origin": origin})
        logs.flush()


def edges(mesh, kind: str) -> set[tuple[str, str, str, bool]]:
    return {(e.source, e.target, e.label, e.enabled) for e in mesh.edges if e.kind == kind}


def test_graph_edges_from_config(instance: Path) -> None:
    mesh = build(load_config(instance), None)
    assert edges(mesh, "timer") == {
        ("clock", "sense:nerve-health", "every 30s", True), ("clock", "sense:fetch", "every 10s", True),
        ("clock", "sense:report", "cron 0 9 * * 1-5", True), ("clock", "sense:audit", "every 1m", False),
        ("clock", "sense:report", "every 5m", False)}
    assert ("sense:fetch", "sense:parse", "on", True) in edges(mesh, "on")
    assert ("channel:task.created", "sense:fetch", "on", True) in edges(mesh, "on")
    assert ("sense:nerve-health", "sense:pong", "on", True) in edges(mesh, "on")
    assert edges(mesh, "peer") == {("sense:fetch", "sense:audit", "peer", False)}
    assert mesh.nodes["sense:fetch"].group == "io" and not mesh.nodes["sense:audit"].enabled
    assert not mesh.observed and not edges(mesh, "launch")


def test_launches_seen_in_logs_db(instance: Path) -> None:
    log_launches(instance, [("report", "cleanup"), ("report", "cleanup"), (None, "cleanup"), ("gone", "old-flow")])
    launches = observed_launches(instance / "data" / "logs.db")
    assert launches == {("report", "cleanup"): 2, ("gone", "old-flow"): 1}
    mesh = build(load_config(instance), launches)
    assert ("sense:report", "workflow:cleanup", "launched 2×", True) in edges(mesh, "launch")
    assert mesh.nodes["workflow:old-flow"].note == "not in nerve.yaml"


def test_no_or_unreadable_logs_db_draws_the_config_alone(instance: Path) -> None:
    assert observed_launches(instance / "data" / "logs.db") is None
    (instance / "data").mkdir()
    (instance / "data" / "logs.db").write_bytes(b"this is not a database" * 100)
    assert observed_launches(instance / "data" / "logs.db") is None
    result = cli("mesh", "--home", str(instance))
    assert result.exit_code == 0, result.output


def test_tree_shows_the_chain_cycles_peers_and_disabled_parts(instance: Path) -> None:
    log_launches(instance, [("report", "cleanup")])
    result = cli("mesh", "--home", str(instance))
    assert result.exit_code == 0, result.output
    text = result.output
    chain = re.search(r"⏱ every 10s\n.*fetch \[io\]\n.*→ parse \[io\]\n.*→ report \[out\]\n.*⇒ cleanup \(workflow\) "
                      r"\(launched 1×, observed\)", text)
    assert chain, text
    assert re.search(r"⏱ every 1m\n.*audit \[default\] \(disabled\)  ⇠ reads fetch", text), text
    assert "↺ (cycle)" in text  # ping ↔ pong
    assert "⚡ channel task.created" in text and "(reflexes[7] disabled)" in text
    assert "idle-one [default]" in text.split("on demand only")[1]
    assert "code-review (workflow) (disabled)" in text


MERMAID_NODE = re.compile(r'^    ([A-Za-z0-9_]+)(\(\("[^"]*"\)\)|\["[^"]*"\]|\[\["[^"]*"\]\]|>"[^"]*"\]|\{\{"[^"]*"\}\})$')
MERMAID_EDGE = re.compile(r'^    ([A-Za-z0-9_]+) (-->|-\.->|==>)\|"[^"]*"\| ([A-Za-z0-9_]+)$')


def test_mermaid_is_a_flowchart_with_safe_ids_dashed_peers_and_grey_disabled_parts(instance: Path) -> None:
    (instance / "nerve.yaml").write_text(CONFIG.replace("  idle-one: {}", "  idle-one: {}\n  idle_one: {}")
                                         .replace("[task.created]", "['we\"ird<x>']"))
    log_launches(instance, [("report", "cleanup")])
    result = cli("mesh", "--format", "mermaid", "--home", str(instance))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "flowchart LR"
    nodes, links = {}, []
    for line in lines[1:]:
        if node := MERMAID_NODE.match(line):
            assert node.group(1) not in nodes, f"duplicate id: {line}"
            nodes[node.group(1)] = line
        elif edge := MERMAID_EDGE.match(line):
            assert edge.group(1) in nodes and edge.group(3) in nodes, line
            links.append(line.strip())
        else:
            assert re.match(r"^    (classDef disabled |class [A-Za-z0-9_,]+ disabled$|linkStyle [0-9,]+ )", line), line
    assert len(nodes) == 13 and "sense_idle_one" in nodes and "sense_idle_one_2" in nodes
    assert len(links) == len(build(load_config(instance), {("report", "cleanup"): 1}).edges)
    assert 'sense_fetch -.->|"peer"| sense_audit' in links
    assert 'sense_report ==>|"launched 1×"| workflow_cleanup' in links
    assert 'clock -->|"cron 0 9 * * 1-5"| sense_report' in links
    assert "#quot;" in result.output and "<x>" not in result.output
    disabled_nodes = set(next(l for l in lines if l.startswith("    class ")).split()[1].split(","))
    assert disabled_nodes == {"sense_audit", "workflow_code_review"}
    grey = next(l for l in lines if l.startswith("    linkStyle")).split()[1].split(",")
    assert sorted(links[int(i)] for i in grey) == sorted(l for l in links if "sense_audit" in l or "every 5m" in l)


DOT_NODE = re.compile(r'^    "([^"\\]|\\.)+" \[label="([^"\\]|\\.)*", shape=\w+(, style=dotted, color=grey, fontcolor=grey)?\];$')
DOT_EDGE = re.compile(r'^    "((?:[^"\\]|\\.)+)" -> "((?:[^"\\]|\\.)+)" \[label="(?:[^"\\]|\\.)*"(.*)\];$')


def test_dot_is_a_digraph_with_quoted_ids(instance: Path) -> None:
    result = cli("mesh", "--format", "dot", "--home", str(instance))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "digraph nerve {" and lines[-1] == "}"
    declared = set()
    styles = {}
    for line in lines[1:-1]:
        if line.strip().startswith(("rankdir", "node [", "edge [")):
            continue
        if DOT_NODE.match(line):
            declared.add(line.split('"')[1])
            continue
        edge = DOT_EDGE.match(line)
        assert edge, f"not a dot node or edge line: {line}"
        assert edge.group(1) in declared and edge.group(2) in declared, line
        styles[(edge.group(1), edge.group(2))] = edge.group(3)
    assert {"sense:nerve-health", "channel:task.created", "workflow:code-review"} <= declared
    assert styles[("sense:fetch", "sense:audit")] == ", style=dotted, color=grey, fontcolor=grey"
    assert styles[("sense:fetch", "sense:parse")] == ""
    if shutil.which("dot"):  # Graphviz itself is the best judge of the syntax
        checked = subprocess.run(["dot", "-Tsvg"], input=result.output, capture_output=True, text=True)
        assert checked.returncode == 0 and "<svg" in checked.stdout, checked.stderr


def test_peer_edges_are_dashed_in_dot_when_enabled(instance: Path) -> None:
    (instance / "nerve.yaml").write_text(CONFIG.replace("audit: {peers: [fetch], enabled: false}", "audit: {peers: [fetch]}"))
    result = cli("mesh", "--format", "dot", "--home", str(instance))
    assert '    "sense:fetch" -> "sense:audit" [label="peer", style=dashed];' in result.output.splitlines()


def test_json_and_a_bad_format(instance: Path) -> None:
    data = json.loads(cli("mesh", "--format", "json", "--home", str(instance)).output)
    assert {n["id"] for n in data["nodes"]} >= {"clock", "sense:fetch", "channel:task.created", "workflow:cleanup"}
    assert data["launches_observed"] is False
    bad = cli("mesh", "--format", "png", "--home", str(instance))
    assert bad.exit_code == 2 and "'png' is not one of 'tree', 'mermaid', 'dot', 'json'" in bad.output
