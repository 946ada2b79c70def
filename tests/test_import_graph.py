"""The import graph of nerve_cli runs one way: no module cycle, no two packages importing each other, layers downward.

Every import counts: top-level, inside functions and under TYPE_CHECKING, so an
import moved into a function to dodge a cycle still fails here. Run this file
with python to print the package graph and the rooms' graph (what docs/development.md draws).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "nerve_cli"
SKIP = {"templates"}  # user-code templates the CLI copies out; not part of the package's code

# The layers, top to bottom: a package imports only packages in rows below its own
# (so two packages in one row, like kernel and worker, never import each other).
# docs/development.md draws the same rows; a new package takes a row here.
LAYERS = [
    ["__main__"],             # python -m nerve_cli
    ["cli"],                  # the nerve command
    ["top", "mcp", "ui"],     # nerve top | nerve mcp (the MCP server and its tools) | nerve ui (the web console)
    ["ops"],                  # what the commands do: sense/workflow/thread operations, emit, gc, the socket client
    ["kernel", "worker", "sdk"],  # the engine process | the child processes | what user code imports
    ["roles", "agents"],      # ready-made roles and tools (llm_role, nerve_tools: they read the store) | agents'
                              # delivery adapters over the inbox (hook wait, Codex app-server), harness setup
    ["store"],                # logs.db, sense databases, archive, a thread's rows
    ["schema", "automaton"],  # tables and migrations | the pure workflow automaton
    ["contract", "wire"],     # the --json documents | kernel <-> worker messages, ErrorInfo, group spec
    ["config"],               # nerve.yaml: model, load, edit, lifecycle, mesh
    ["instance"],             # scaffold, git
    ["home", "names", "usercode", "eventloop", "words", "durations", "address", "clock", "atomicfile"],
    ["errors", "vocab", ""],  # "" is nerve_cli/__init__.py | vocab: typed reasons, outcomes, states, log rows
]
ROW = {f"nerve_cli.{name}".rstrip("."): depth for depth, row in enumerate(LAYERS) for name in row}

# Inside a package, its rooms (sub-packages, or modules at its top) in layers the same way: a room imports
# only rooms in rows below its own. "" is the package's __init__.py.
ROOMS = {
    "kernel": [
        ["engine"],                 # the Engine: builds the parts into one exit stack, runs, unwinds them
        ["loop"],                   # the running loop's parts: outcomes → router → pump, log writer, built-ins,
                                    # the desk the edges see, the optional edges
        ["control", "reload", "ingress"],  # socket server, requests, metrics, health | watch and hot reload
                                           # | webhooks and file reflexes
        ["workflows", "fleet", "trace", "notify"],  # the workflow manager | this host in its fleet (NATS) | traces
                                                    # (OTel) | notifications (apprise)
        ["supervision"],            # sense worker groups, processes, penalties, guards, watchdog
        ["core", ""],               # scheduler (pure rules), emits, delivery, ledger, stats, lock, report
    ],
    "ops": [
        ["senses", "workflows", "emit", "gc", "fleet", "stopped", "agents"],  # one room per command family
        ["client", ""],             # the engine's control socket, from the CLI side
    ],
}
ROOM_ROW = {f"nerve_cli.{package}.{name}".rstrip("."): depth
            for package, rows in ROOMS.items() for depth, row in enumerate(rows) for name in row}


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if SKIP & set(parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _nearest(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The nerve_cli modules `name` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [_nearest(alias.name, known) for alias in node.names if alias.name.startswith("nerve_cli")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if not base.startswith("nerve_cli"):
                continue
            # `from pkg import mod` imports the module; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else _nearest(base, known)
                       for a in node.names]
        else:
            continue
        out.update(t for t in targets if t and t != name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def unit(module: str) -> str:
    """The package a module belongs to (`nerve_cli.kernel`), or the module itself when it sits at the top."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and (ROOT / parts[1]).is_dir() else module


def room(module: str) -> str | None:
    """The room of a package in ROOMS a module belongs to (`nerve_cli.kernel.core`), else None."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in ROOMS:
        return None
    return ".".join(parts[:3])


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        out[unit(source)]  # every unit appears, even one that imports nothing
        for target in targets:
            if unit(target) != unit(source):
                out[unit(source)].add(unit(target))
    return dict(out)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str], edges: dict[str, set[str]]) -> str:
    inside = set(component)
    arrows = [f"{a} -> {b}" for a in component for b in sorted(edges.get(a, ())) if b in inside]
    return "\n  ".join(arrows)


def test_the_graph_sees_every_kind_of_import() -> None:
    """Guards against a vacuous pass: top-level, in-function and TYPE_CHECKING imports are all edges."""
    edges = graph()
    assert "nerve_cli.kernel.supervision.groups" in edges["nerve_cli.kernel.engine"]  # top level
    assert "nerve_cli.kernel.reload.watch" in edges["nerve_cli.kernel.reload.apply"]  # inside a function
    assert "nerve_cli.config.model" in edges["nerve_cli.wire.spec"]  # under TYPE_CHECKING
    assert "nerve_cli.cli.output" in edges["nerve_cli.cli.archive_view"]  # `from package import module`
    assert len(edges) > 100


def test_no_module_imports_itself_round_a_circle() -> None:
    edges = graph()
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(f"- {' <-> '.join(c)}:\n  {_describe(c, edges)}"
                                                     for c in found)


def test_no_two_packages_import_each_other() -> None:
    edges = graph()
    packages = package_graph(edges)
    pairs = sorted({tuple(sorted((a, b))) for a, bs in packages.items() for b in bs if a in packages.get(b, ())})
    detail = [f"{a} <-> {b}: " + ", ".join(f"{s} -> {t}" for s, ts in sorted(edges.items()) for t in sorted(ts)
                                           if {unit(s), unit(t)} == {a, b})
              for a, b in pairs]
    assert not pairs, "packages importing each other:\n" + "\n".join(detail)
    assert not cycles(packages), f"package cycles: {cycles(packages)}"


def back_arrows(edges: dict[str, set[str]]) -> list[str]:
    """Imports that do not point down the layers: between packages (LAYERS) and between rooms (ROOMS)."""
    between_packages = [f"{s} -> {t}" for s, ts in sorted(edges.items()) for t in sorted(ts)
                        if unit(s) != unit(t) and ROW[unit(t)] <= ROW[unit(s)]]
    between_rooms = [f"{s} -> {t}" for s, ts in sorted(edges.items()) for t in sorted(ts)
                     if room(s) and room(t) and unit(s) == unit(t) and room(s) != room(t)
                     and ROOM_ROW[room(t)] <= ROOM_ROW[room(s)]]  # type: ignore[index]
    return between_packages + between_rooms


def test_packages_import_only_the_layers_below_them() -> None:
    edges = graph()
    packages = package_graph(edges)
    unplaced = sorted(set(packages) - set(ROW))
    assert not unplaced, f"packages with no row in LAYERS (tests/test_import_graph.py): {unplaced}"
    rooms = {room(m) for m in edges if room(m)}
    unplaced = sorted(rooms - set(ROOM_ROW))
    assert not unplaced, f"rooms with no row in ROOMS (tests/test_import_graph.py): {unplaced}"
    broken = back_arrows(edges)
    assert not broken, "imports that do not point down the layers:\n" + "\n".join(broken)


def test_a_back_arrow_is_caught() -> None:
    """Guards against a vacuous pass: one import up a layer, or up a room of the kernel, fails the check."""
    edges = graph()
    edges["nerve_cli.store.logs"].add("nerve_cli.kernel.engine")
    edges["nerve_cli.kernel.core.scheduler"].add("nerve_cli.kernel.supervision.guards")
    edges["nerve_cli.kernel.control.requests"].add("nerve_cli.kernel.reload.apply")  # same row
    edges["nerve_cli.ops.client"].add("nerve_cli.ops.emit")
    assert sorted(back_arrows(edges)) == ["nerve_cli.kernel.control.requests -> nerve_cli.kernel.reload.apply",
                                  "nerve_cli.kernel.core.scheduler -> nerve_cli.kernel.supervision.guards",
                                  "nerve_cli.ops.client -> nerve_cli.ops.emit",
                                  "nerve_cli.store.logs -> nerve_cli.kernel.engine"]


# The running loop's calls run one way, outcomes → routing → pump: a module of kernel/loop imports only the
# rows below its own (the pump hands a start it cannot place back as a value, never calls up).
LOOP = [
    ["desk", "stores"],          # the running engine as its edges see it | the files opened first, the first rows
    ["outcomes", "edges", "deliveries"],  # the supervisors' hooks, the end of each compute, the loop's entry point
                                 # | the optional edges (traces, fleet, webhooks, file reflexes, metrics)
                                 # | the agents delivered to Codex
    ["builtins", "router", "fanout"],  # the built-in senses, answering like a group | the signal bus | what
                                       # computes emit (sdk.emit), stored like any emit
    ["pump", "freshness"],       # the one timer and the hand-over of starts | freshness on time
    ["records", "logwriter", "current"],  # one record per compute | batched log commits | the config in force
]


def loop_back_arrows(edges: dict[str, set[str]]) -> list[str]:
    row = {f"nerve_cli.kernel.loop.{name}": depth for depth, names in enumerate(LOOP) for name in names}
    return [f"{a} -> {b}" for a in row for b in sorted(edges.get(a, ())) if b in row and row[b] <= row[a]]


def test_the_loop_calls_one_way() -> None:
    edges = graph()
    loop = {m for m in edges if m.startswith("nerve_cli.kernel.loop.")}
    rowed = {f"nerve_cli.kernel.loop.{name}" for names in LOOP for name in names}
    assert loop == rowed, f"a module of kernel/loop takes a row in LOOP: {sorted(loop ^ rowed)}"
    assert not loop_back_arrows(edges)
    edges["nerve_cli.kernel.loop.pump"].add("nerve_cli.kernel.loop.outcomes")  # and a call back up is caught
    assert loop_back_arrows(edges) == ["nerve_cli.kernel.loop.pump -> nerve_cli.kernel.loop.outcomes"]


def _commented(lines: list[str], at: int) -> bool:
    """A comment on line `at` (0-based), or on the lines of imports, comments and blanks just above it."""
    if "#" in lines[at]:
        return True
    for line in reversed(lines[:at]):
        text = line.strip()
        if text and not text.startswith(("import ", "from ", "#")):
            return False
        if "#" in text:
            return True
    return False


def unexplained_function_imports() -> list[str]:
    """Imports inside functions that do not say why they are there (the house rule: only to spare start-up
    time, and saying so). Said on the import's line or above its block of imports, in the function's docstring,
    or once in the module's docstring naming the module imported late; cli/ states its rule once, in its
    package docstring (a command imports the code it calls in its body, so `nerve --help` loads none)."""
    found = []
    for name, path in sorted(modules().items()):
        if name == "nerve_cli.cli" or name.startswith("nerve_cli.cli."):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        module_doc = (ast.get_docstring(tree) or "").lower()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = (ast.get_docstring(fn) or "").lower()
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                imported = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                said = (_commented(lines, node.lineno - 1)
                        or "import" in doc
                        or ("import" in module_doc and all(i.split(".")[-1].lower() in module_doc for i in imported)))
                if not said:
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_imports_inside_functions_say_why() -> None:
    found = unexplained_function_imports()
    assert not found, ("imports inside functions with no word on why (import at the top, or say what it "
                       "spares):\n" + "\n".join(found))


def test_code_states_its_rules_rather_than_citing_documents() -> None:
    """A comment says the rule itself: the documents a "RFC-001 §4.2" or "PR #81" points at are not in the
    repository, so a reader cannot follow them (and an error message citing one tells a user nothing)."""
    found = [f"{path.relative_to(ROOT.parent)}:{n}: {line.strip()}"
             for path in sorted(ROOT.rglob("*.py")) if "templates" not in path.parts
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bRFC\b|\bPR #\d|§", line)]
    assert not found, "citations of documents outside the repository:\n" + "\n".join(found)


def test_instance_paths_are_built_only_by_layout() -> None:
    """Where a file of the instance lives is said once, in home.Layout: no module spells data/, logs.db
    or the archive's senses/ folder itself."""
    spelled = re.compile(r'/ "data"|"logs\.db"|archive / "senses" /')
    found = [f"{path.relative_to(ROOT.parent)}:{n}: {line.strip()}"
             for path in sorted(ROOT.rglob("*.py")) if "templates" not in path.parts and path.name != "home.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if spelled.search(line) and not line.lstrip().startswith("#")]
    assert not found, "instance paths built outside home.Layout:\n" + "\n".join(found)


if __name__ == "__main__":
    packages = package_graph(graph())
    for source, targets in sorted(packages.items(), key=lambda kv: (ROW.get(kv[0], -1), kv[0])):
        print(f"{source} -> {', '.join(sorted(t.removeprefix('nerve_cli.') for t in targets)) or '-'}")
    rooms: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph().items():
        for target in targets:
            if room(source) and room(target) and room(source) != room(target) and unit(source) == unit(target):
                rooms[room(source)].add(room(target))  # type: ignore[index]
    for source, targets in sorted(rooms.items(), key=lambda kv: ROOM_ROW[kv[0]]):
        print(f"{source} -> {', '.join(sorted(t.removeprefix('nerve_cli.') for t in targets))}")
    sys.exit(0)


def test_the_engine_stays_an_owner_of_parts_not_their_hub() -> None:
    """`Engine` builds the loop's parts and unwinds them; behaviour lives in the parts (kernel/loop/, ...): at most
    20 methods, 15 attributes, 250 lines in kernel/engine.py (it was 66 / 60 / 844 when every feature was wired
    through it). A new feature is a part of its own, started into the engine's exit stack."""
    path = ROOT / "kernel" / "engine.py"
    source = path.read_text(encoding="utf-8")
    engine = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    methods = [n for n in engine.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    attributes = {n.attr for n in ast.walk(engine) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                  and isinstance(n.value, ast.Name) and n.value.id == "self"}
    lines = len(source.splitlines())
    assert len(methods) <= 20 and len(attributes) <= 15 and lines <= 250, (len(methods), sorted(attributes), lines)
