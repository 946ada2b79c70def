"""The reflex mesh as a graph: what triggers what, who reads whom, what launches which workflow.

Nodes: the clock, senses (with their group), the built-in senses, external
channels (`on:` names that are not senses), file patterns (`paths:`),
workflows, a pipeline workflow's steps (`step`, or `gate` for a step that
waits for a person first) and a person (who answers a workflow's questions).
Edges: timer (clock → sense, "every 10s" / "cron 0 9 * * 1-5"), on (source →
sense), peer (peer ⇢ reader), launch (sense ⇒ workflow), step (a pipeline →
its first steps), needs (a step → the steps that need it), wait (source ⏸
workflow: a role waits for its events) and gate (workflow → person: a role
asks a person, or a tool call needs approval). Launches are not in nerve.yaml
(a sense returns a directive from its code), so they come from what the
engine logged: `workflow/queued` rows whose origin names a sense. Waits and
gates are read from the workflow files' text (`declared`, never imported):
the literal `wait_for_event("source", ...)`, `ask_person(...)` and
`tool(..., approval=...)` calls.

`build` is pure (config + observed launches → Mesh); `to_mermaid` and `to_dot`
render it as text. The terminal tree lives in `nerve_cli/cli/mesh_cmd.py`.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from nerve_cli.config.model import BUILTIN_SENSES, HEALTH_SENSE, NerveConfig, format_duration
from nerve_cli.config.pipeline import Pipeline
from nerve_cli.config.waits import wait_call
from nerve_cli.home import Layout
from nerve_cli.vocab.sources import SourceKind

NodeKind = Literal["clock", "sense", "builtin", "channel", "files", "workflow", "step", "gate", "person", "agent"]
EdgeKind = Literal["timer", "on", "peer", "launch", "step", "needs", "wait", "gate"]
CLOCK = "clock"
PERSON = "person"
Launches = dict[tuple[str, str], int]  # (sense, workflow) → launches seen


@dataclass(frozen=True)
class Node:
    id: str  # "sense:cpu-usage", "channel:task.created", "files:notes/*.md", "workflow:cleanup", "clock"
    kind: NodeKind
    name: str
    group: str | None = None
    enabled: bool = True
    note: str = ""  # e.g. "not in nerve.yaml" for a launch seen in the logs of a removed sense


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: EdgeKind
    label: str
    enabled: bool = True
    reflex: int | None = None  # index in `reflexes:` for timer and on edges


@dataclass
class Mesh:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    observed: bool = False  # whether launches could be read from data/logs.db

    def out(self, node_id: str, *kinds: EdgeKind) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id and (not kinds or e.kind in kinds)]

    def into(self, node_id: str, *kinds: EdgeKind) -> list[Edge]:
        return [e for e in self.edges if e.target == node_id and (not kinds or e.kind in kinds)]

    def to_dict(self) -> dict:
        return {"nodes": [asdict(n) for n in self.nodes.values()], "edges": [asdict(e) for e in self.edges],
                "launches_observed": self.observed}


def sense_id(name: str) -> str:
    return f"sense:{name}"


@dataclass(frozen=True)
class Declared:
    """What a workflow file's text says its roles wait for."""

    waits: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (source, match keys) of literal wait_for_event calls
    asks: bool = False  # a literal ask_person call
    approvals: tuple[str, ...] = ()  # tools whose calls need a person's approval


def declared(home: Path, config: NerveConfig) -> dict[str, Declared]:
    """Each workflow's waits and gates, read from workflows/NAME.py's text (never imported)."""
    out = {}
    for name in config.workflows:
        path = Layout(Path(home)).workflow_file(name)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        waits, asks, approvals = [], False, []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            wait = wait_call(node)
            if wait is not None:
                waits.append(wait)
            elif called == "ask_person":
                asks = True
            elif called == "tool" and any(k.arg == "approval" for k in node.keywords):
                named = next((k.value.value for k in node.keywords if k.arg == "name"
                              and isinstance(k.value, ast.Constant)), None)
                first = node.args[0] if node.args else None
                approvals.append(str(named or getattr(first, "id", None) or getattr(first, "attr", "a tool")))
        if waits or asks or approvals:
            out[name] = Declared(tuple(dict.fromkeys(waits)), asks, tuple(dict.fromkeys(approvals)))
    return out


def build(config: NerveConfig, launches: Launches | None = None, pipelines: dict[str, Pipeline] | None = None,
          waits: dict[str, Declared] | None = None) -> Mesh:
    """The mesh of `config`, plus launch edges seen in the logs (None: logs not read), the steps of the
    workflows defined by a pipeline (`pipelines`, by workflow name) and the waits and gates the Python workflow
    files declare."""
    mesh = Mesh(observed=launches is not None)
    add = mesh.nodes.setdefault
    add(CLOCK, Node(CLOCK, "clock", "clock"))
    for name, sense in config.senses.items():
        add(sense_id(name), Node(sense_id(name), "sense", name, sense.group, sense.enabled))
    add(sense_id(HEALTH_SENSE), Node(sense_id(HEALTH_SENSE), "builtin", HEALTH_SENSE, note="built-in"))
    for name, workflow in config.workflows.items():
        add(f"workflow:{name}", Node(f"workflow:{name}", "workflow", name, enabled=workflow.enabled))
    on = config.enabled_senses()
    mesh.edges.append(Edge(CLOCK, sense_id(HEALTH_SENSE), "timer", f"every {format_duration(config.engine.health_interval)}"))
    for i, reflex in enumerate(config.reflexes):
        live = reflex.enabled and reflex.sense in on
        target = sense_id(reflex.sense)
        if reflex.interval is not None:
            mesh.edges.append(Edge(CLOCK, target, "timer", f"every {format_duration(reflex.interval)}", live, i))
        if reflex.cron is not None:
            zone = f" ({reflex.timezone})" if reflex.timezone else ""
            mesh.edges.append(Edge(CLOCK, target, "timer", f"cron {reflex.cron}{zone}", live, i))
        for source in reflex.on:
            source_id = _source(mesh, config, source)
            source_on = source not in config.senses or source in on
            label = f"on (debounce {format_duration(reflex.debounce)})" if reflex.debounce else "on"
            if reflex.lazy:  # its events wait for a read of the sense
                label = "on read" + (f" ({', '.join(f'{k}={v}' for k, v in reflex.bindings.items())})"
                                     if reflex.bindings else "")
            mesh.edges.append(Edge(source_id, target, "on", label, live and source_on, i))
        for pattern in reflex.paths:
            node_id = f"files:{pattern}"
            mesh.nodes.setdefault(node_id, Node(node_id, "files", pattern))
            label = f"on (debounce {format_duration(reflex.debounce)})" if reflex.debounce else "on"
            mesh.edges.append(Edge(node_id, target, "on", label, live, i))
    for reader, sense in config.senses.items():
        for peer in sense.peers:
            mesh.edges.append(Edge(sense_id(peer), sense_id(reader), "peer", "peer", reader in on and peer in on))
    _launches(mesh, config, launches or {})
    for name, pipeline in (pipelines or {}).items():
        _steps(mesh, name, pipeline, config.workflows[name].enabled if name in config.workflows else False)
    _waits(mesh, config, waits or {})
    _agents(mesh, config)
    return mesh


def _agents(mesh: Mesh, config: NerveConfig) -> None:
    """Each agent, heard from its sources (`on` edges, labelled with its match)."""
    for name, agent in config.agents.items():
        node_id = f"agent:{name}"
        mesh.nodes[node_id] = Node(node_id, "agent", name, enabled=agent.enabled)
        text = "on" + (f" (match {', '.join(f'{k}={v}' for k, v in agent.match.items())})" if agent.match else "")
        for source in agent.on:
            mesh.edges.append(Edge(_source(mesh, config, source), node_id, "on", text, agent.enabled))


def _waits(mesh: Mesh, config: NerveConfig, waits: dict[str, Declared]) -> None:
    for name, found in sorted(waits.items()):
        target = f"workflow:{name}"
        enabled = mesh.nodes[target].enabled if target in mesh.nodes else False
        for source, keys in found.waits:
            text = f"waited for (match {', '.join(keys)})" if keys else "waited for"
            mesh.edges.append(Edge(_source(mesh, config, source), target, "wait", text, enabled))
        gates = (["asks a person"] if found.asks else []) + [f"{t} call needs approval" for t in found.approvals]
        if gates:
            mesh.nodes.setdefault(PERSON, Node(PERSON, "person", "a person"))
            mesh.edges.append(Edge(target, PERSON, "gate", "; ".join(gates), enabled))


def step_id(workflow: str, step: str) -> str:
    return f"step:{workflow}/{step}"


def _steps(mesh: Mesh, workflow: str, pipeline: Pipeline, enabled: bool) -> None:
    """A pipeline's steps under its workflow: what each needs, and which wait for a person first."""
    for step in pipeline.steps:
        gated = pipeline.gated(step)
        note = f"{step.who}; gate: {pipeline.why_gated(step)}" if gated else step.who
        node = step_id(workflow, step.id)
        mesh.nodes[node] = Node(node, "gate" if gated else "step", step.id, enabled=enabled, note=note)
        if not step.needs:
            mesh.edges.append(Edge(f"workflow:{workflow}", node, "step", "starts", enabled))
        for need in step.needs:
            mesh.edges.append(Edge(step_id(workflow, need), node, "needs", "then", enabled))


def _source(mesh: Mesh, config: NerveConfig, name: str) -> str:
    if name in BUILTIN_SENSES:  # nerve-threads is drawn when something listens to it
        mesh.nodes.setdefault(sense_id(name), Node(sense_id(name), "builtin", name, note="built-in"))
        return sense_id(name)
    if name in config.senses:
        return sense_id(name)
    node_id = f"channel:{name}"
    mesh.nodes.setdefault(node_id, Node(node_id, "channel", name))
    return node_id


def _launches(mesh: Mesh, config: NerveConfig, launches: Launches) -> None:
    for (sense, workflow), count in sorted(launches.items()):
        source, target = sense_id(sense), f"workflow:{workflow}"
        if source not in mesh.nodes:
            mesh.nodes[source] = Node(source, "sense", sense, enabled=False, note="not in nerve.yaml")
        if target not in mesh.nodes:
            mesh.nodes[target] = Node(target, "workflow", workflow, enabled=False, note="not in nerve.yaml")
        live = mesh.nodes[source].enabled and mesh.nodes[target].enabled
        mesh.edges.append(Edge(source, target, "launch", f"launched {count}×", live))


def observed_launches(logs_db: Path) -> Launches | None:
    """(sense, workflow) → how many threads a sense's directives queued, from data/logs.db.

    None when there is no logs.db yet or it cannot be read (the mesh is then drawn
    from nerve.yaml alone). Only the kernel writes logs.db; this reads it read-only.
    """
    if not Path(logs_db).is_file():
        return None
    try:
        conn = sqlite3.connect(Path(logs_db).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT json_extract(payload, '$.origin.sense'), json_extract(payload, '$.workflow'), COUNT(*) "
                "FROM logs WHERE source = 'workflow' AND type = 'queued' AND json_valid(payload) "
                "AND json_extract(payload, '$.origin.sense') IS NOT NULL GROUP BY 1, 2").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return {(str(s), str(w)): n for s, w, n in rows if s and w}


def label(node: Node, *, disabled_text: bool = True) -> str:
    """`cpu-usage [system]`, `task.created (channel)`, `cleanup (workflow)`, plus `(disabled)`."""
    text = {"clock": "clock", "sense": f"{node.name} [{node.group}]" if node.group else node.name,
            "builtin": f"{node.name} (built-in)", "channel": f"{node.name} (channel)",
            "files": f"{node.name} (files)",
            "workflow": f"{node.name} (workflow)", "step": f"{node.name} ({node.note})",
            "gate": f"⛩ {node.name} ({node.note})", "person": "a person", "agent": f"{node.name} (agent)"}[node.kind]
    if node.kind in ("step", "gate"):
        return text + ("" if node.enabled or not disabled_text else " (disabled)")
    if node.note and node.kind != "builtin":
        text += f" ({node.note})"
    elif disabled_text and not node.enabled:
        text += " (disabled)"
    return text


# -- text renderers ----------------------------------------------------------------------------

_MERMAID_SHAPE = {"clock": '(("{}"))', "sense": '["{}"]', "builtin": '[["{}"]]', "channel": '>"{}"]',
                  "files": '[/"{}"/]',
                  "workflow": '{{{{"{}"}}}}', "step": '(["{}"])', "gate": '{{"{}"}}', "person": '(["{}"])',
                  "agent": '(["{}"])'}
_MERMAID_ARROW = {"timer": "-->", "on": "-->", "peer": "-.->", "launch": "==>", "step": "-->", "needs": "-->",
                  "wait": "-.->", "gate": "-.->"}


def _mermaid_ids(mesh: Mesh) -> dict[str, str]:
    """Node ids mermaid accepts (letters, digits, `_`), unique and readable: `sense:cpu-usage` → `sense_cpu_usage`."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for node_id in mesh.nodes:
        base = re.sub(r"[^A-Za-z0-9_]", "_", node_id)
        safe, n = base, 2
        while safe in used:
            safe, n = f"{base}_{n}", n + 1
        used.add(safe)
        out[node_id] = safe
    return out


def _mermaid_text(text: str) -> str:
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def to_mermaid(mesh: Mesh) -> str:
    """A `flowchart LR` block; disabled nodes and edges are grey and dotted."""
    ids = _mermaid_ids(mesh)
    lines = ["flowchart LR"]
    for node in mesh.nodes.values():
        lines.append(f"    {ids[node.id]}" + _MERMAID_SHAPE[node.kind].format(_mermaid_text(label(node))))
    off_links = []
    for n, edge in enumerate(mesh.edges):
        arrow = _MERMAID_ARROW[edge.kind]
        lines.append(f'    {ids[edge.source]} {arrow}|"{_mermaid_text(edge.label)}"| {ids[edge.target]}')
        if not edge.enabled:
            off_links.append(str(n))
    lines.append("    classDef disabled fill:#f2f2f2,stroke:#999999,color:#999999,stroke-dasharray:2 2")
    off_nodes = [ids[n.id] for n in mesh.nodes.values() if not n.enabled]
    if off_nodes:
        lines.append(f"    class {','.join(off_nodes)} disabled")
    if off_links:
        lines.append(f"    linkStyle {','.join(off_links)} stroke:#999999,stroke-dasharray:2 2,color:#999999")
    return "\n".join(lines) + "\n"


_DOT_SHAPE = {"clock": "circle", "sense": "box", "builtin": "box3d", "channel": "cds", "files": "folder",
              "workflow": "hexagon", "step": "ellipse", "gate": "diamond", "person": "ellipse", "agent": "egg"}


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(mesh: Mesh) -> str:
    """A Graphviz `digraph`; peer reads dashed, launches bold, disabled parts dotted and grey."""
    lines = ["digraph nerve {", "    rankdir=LR;", '    node [fontname="Helvetica"];', '    edge [fontname="Helvetica"];']
    for node in mesh.nodes.values():
        attrs = [f"label={_dot_text(label(node))}", f"shape={_DOT_SHAPE[node.kind]}"]
        if not node.enabled:
            attrs += ["style=dotted", "color=grey", "fontcolor=grey"]
        lines.append(f"    {_dot_text(node.id)} [{', '.join(attrs)}];")
    for edge in mesh.edges:
        attrs = [f"label={_dot_text(edge.label)}"]
        style = {"peer": "dashed", "launch": "bold", "wait": "dashed", "gate": "dashed"}.get(edge.kind)
        if not edge.enabled:
            attrs += ["style=dotted", "color=grey", "fontcolor=grey"]
        elif style:
            attrs.append(f"style={style}")
        lines.append(f"    {_dot_text(edge.source)} -> {_dot_text(edge.target)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def sources_of(config: NerveConfig, *, eager_only: bool = False) -> dict[str, dict[str, str]]:
    """listener → {source: "sense" | "channel" | "file"}, from the active reflexes, in `on:` order, then each
    `paths:` pattern (a file source: the listener's own); `eager_only`: without the sources it reads lazily."""
    out: dict[str, dict[str, str]] = {}
    for reflex in config.active_reflexes():
        if eager_only and reflex.lazy:
            continue
        for source in reflex.on:
            out.setdefault(reflex.sense, {})[source] = config.source_kind(source)
        for pattern in reflex.paths:
            out.setdefault(reflex.sense, {})[pattern] = SourceKind.FILE
    return out


def filters_of(config: NerveConfig) -> dict[str, dict[str, dict]]:
    """listener → its sources' literal bindings (a sense with parameters is read, never run by its sources)."""
    out: dict[str, dict[str, dict]] = {}
    for reflex in config.active_reflexes():
        if reflex.bindings and not reflex.params:
            for source in reflex.on:
                out.setdefault(reflex.sense, {})[source] = dict(reflex.bindings)
    return out
