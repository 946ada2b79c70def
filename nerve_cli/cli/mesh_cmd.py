"""`nerve mesh`: the reflex mesh as a terminal tree, a mermaid flowchart or a Graphviz digraph."""


from typing import TYPE_CHECKING, Annotated

import typer

from nerve_cli.cli.choices import MeshFormat
from nerve_cli.cli.common import HomeOption

if TYPE_CHECKING:
    from rich.tree import Tree

    from nerve_cli.config.mesh import Edge, Mesh, Node

def mesh(
    home: HomeOption = None,
    format_: Annotated[MeshFormat, typer.Option("--format", help="How to draw it.", case_sensitive=False)] = MeshFormat.tree,
    json_: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
) -> None:
    """Draw the reflex mesh: senses, channels, workflows and what triggers what.

    Timers and channels trigger senses; a sense's signals trigger the senses
    listening to it; peers are read; workflow launches are the ones seen in
    data/logs.db (a sense launches a workflow from its code); a pipeline
    workflow's steps follow what they need, a step that waits for a person
    marked as a gate. Disabled parts are marked. Pipe mermaid into a Markdown
    file, dot into `dot -Tsvg`.

    Example: nerve mesh --format mermaid
    """
    from nerve_cli.cli import output
    from nerve_cli.config.load import load_config
    from nerve_cli.config.mesh import build, declared, observed_launches, to_dot, to_mermaid
    from nerve_cli.config.pipeline import pipelines_of
    from nerve_cli.home import Layout, require_instance

    root = require_instance(home)
    config = load_config(root)
    graph = build(config, observed_launches(Layout(root).logs_db), pipelines_of(root, list(config.workflows)),
                  declared(root, config))
    if json_ or format_ is MeshFormat.json:
        from nerve_cli.contract.instance import mesh as mesh_document

        output.print_json(mesh_document(graph))
    elif format_ in (MeshFormat.mermaid, MeshFormat.dot):
        text = to_mermaid(graph) if format_ is MeshFormat.mermaid else to_dot(graph)
        typer.echo(text, nl=False)
    else:
        output.show(render_tree(graph))
        output.info("→ triggers on signal   ⇠ reads as a peer   ⇒ launched (seen in data/logs.db)   "
                    "⛩ a step that waits for a person first   ⏸ a workflow waits for it   ✋ asks a person", style="dim")


def render_tree(graph: "Mesh") -> "Tree":
    """Roots are timers, channels and what nothing triggers; children are what each one triggers, recursively."""
    from rich.text import Text
    from rich.tree import Tree

    from nerve_cli.config.mesh import CLOCK, Edge

    top = Tree(Text(_summary(graph)))
    shown: set[str] = set()
    timers: dict[str, list[Edge]] = {}
    for edge in graph.out(CLOCK):
        timers.setdefault(edge.label, []).append(edge)
    for when, edges in timers.items():
        branch = top.add(Text(f"⏱ {when}", style="bold"))
        for edge in edges:
            _grow(graph, branch, edge, (), shown)
    threads = graph.nodes.get("sense:nerve-threads")
    if threads is not None:  # the engine computes it on every thread transition
        branch = top.add(Text("⚙ every workflow thread transition", style="bold"))
        _grow(graph, branch, Edge("", threads.id, "timer", "", True), (), shown)
    for node in graph.nodes.values():
        if node.kind in ("channel", "files"):
            title = (f"⚡ channel {node.name}  (nerve emit {node.name})" if node.kind == "channel"
                     else f"📁 files {node.name}  (when they change)")
            branch = top.add(Text(title, style="bold"))
            for edge in graph.out(node.id, "on", "wait"):
                _grow(graph, branch, edge, (), shown)
    _untriggered(graph, top, shown)
    return top


def _grow(graph: "Mesh", parent: "Tree", edge: "Edge", path: tuple[str, ...], shown: set[str]) -> None:
    """Add the target of `edge` under `parent`, then what it triggers (each node expanded once)."""
    from rich.text import Text

    from nerve_cli.config.mesh import label

    node = graph.nodes[edge.target]
    arrow = {"timer": "", "on": "→ ", "launch": "⇒ ", "wait": "⏸ "}.get(edge.kind, "")
    text = Text(arrow + label(node))
    if edge.kind == "on" and edge.label != "on":
        text.append(f" ({edge.label[3:].strip('()')})")
    if edge.kind == "launch":
        text.append(f" ({edge.label}, observed)")
    if edge.kind == "wait":
        text.append(f" ({edge.label})")
    text.append(_gates(graph, node))
    if not edge.enabled and node.enabled and edge.reflex is not None:
        text.append(f" (reflexes[{edge.reflex}] disabled)")
    reads = [graph.nodes[e.source].name for e in graph.into(node.id, "peer")]
    if reads:
        text.append(f"  ⇠ reads {', '.join(reads)}", style="italic")
    if not (edge.enabled and node.enabled):
        text.stylize("dim")
    if node.id in path:
        parent.add(text + Text(" ↺ (cycle)"))
        return
    if node.id in shown and graph.out(node.id, "on", "launch", "wait"):
        parent.add(text + Text(" (see above)", style="dim"))
        return
    shown.add(node.id)
    branch = parent.add(text)
    for child in graph.out(node.id, "on", "launch", "wait"):
        _grow(graph, branch, child, (*path, node.id), shown)
    _pipeline(graph, branch, node.id)


def _pipeline(graph: "Mesh", parent: "Tree", node_id: str) -> None:
    """A pipeline workflow's steps: each under what it needs (a step several need meet is shown once)."""
    from rich.text import Text

    from nerve_cli.config.mesh import label

    placed: set[str] = set()

    def add(branch: "Tree", step: str) -> None:
        node = graph.nodes[step]
        needs = [graph.nodes[e.source].name for e in graph.into(step, "needs")]
        text = Text(label(node), style="" if node.enabled else "dim")
        if len(needs) > 1:
            text.append(f"  needs {', '.join(needs)}", style="italic")
        if step in placed:
            branch.add(text + Text(" (see above)", style="dim"))
            return
        placed.add(step)
        child = branch.add(text)
        for edge in graph.out(step, "needs"):
            add(child, edge.target)

    for edge in graph.out(node_id, "step"):
        add(parent, edge.target)


def _gates(graph: "Mesh", node: "Node") -> str:
    """`  ✋ asks a person; deploy call needs approval` for a workflow whose roles ask a person."""
    gates = [e.label for e in graph.out(node.id, "gate")]
    return f"  ✋ {'; '.join(gates)}" if gates else ""


def _untriggered(graph: "Mesh", top: "Tree", shown: set[str]) -> None:
    """Senses no timer or channel leads to (on demand only, or only inside a loop) and unlaunched workflows."""
    from rich.text import Text

    from nerve_cli.config.mesh import Edge, label

    rest = [n for n in graph.nodes.values() if n.kind in ("sense", "builtin") and n.id not in shown]
    if rest:
        branch = top.add(Text("on demand only (no timer or channel leads here)", style="bold"))
        for node in rest:
            if node.id not in shown:
                _grow(graph, branch, Edge("", node.id, "timer", "", True), (), shown)
    idle = [n for n in graph.nodes.values() if n.kind == "workflow" and n.id not in shown]
    if idle:
        note = "no launch seen in data/logs.db" if graph.observed else "no data/logs.db yet"
        branch = top.add(Text(f"workflows ({note}; a sense launches one from its code)", style="bold"))
        for node in idle:
            _pipeline(graph, branch.add(Text(label(node) + _gates(graph, node), style="" if node.enabled else "dim")),
                      node.id)


def _summary(graph: "Mesh") -> str:
    def many(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    count = {k: sum(1 for n in graph.nodes.values() if n.kind == k) for k in ("sense", "channel", "workflow")}
    off = sum(1 for n in graph.nodes.values() if not n.enabled)
    parts = [many(count[k], k) for k in ("sense", "channel", "workflow")]
    return "reflex mesh: " + ", ".join(parts) + (f" ({off} disabled)" if off else "")
