"""The engine's vocabulary: typed reasons end to end (never parsed back from text), one constructor per
log row kind, and the values on disk unchanged."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from nerve_cli.vocab import logrows
from nerve_cli.vocab.logrows import LogKind
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND, INTERVAL, Reason, TriggerKind
from nerve_cli.vocab.sources import SourceKind
from nerve_cli.vocab.states import Decision, JobState, SenseStatus, StepStatus, ThreadStatus, WorkerState
from nerve_cli.wire import protocol

ROOT = Path(__file__).resolve().parents[1] / "nerve_cli"
REASONS = ROOT / "vocab" / "reasons.py"


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(ROOT.rglob("*.py"))
            if "templates" not in p.parts]


def test_no_reason_text_is_parsed_anywhere() -> None:
    """A reason's kind and source are fields from the scheduler to the compute's trigger: no function reads
    them back out of its text, and the text's pieces ("on ", "(debounced)") live only where it is made."""
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "reason" in node.name.lower() and any(
                    word in node.name.lower() for word in ("parse", "split", "from_text", "of_text", "read")):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: def {node.name}")
            if path != REASONS and isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "(debounced)" in node.value):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("startswith", "endswith", "removeprefix", "removesuffix", "partition")
                    and any(isinstance(a, ast.Constant) and a.value in ("on ", " (debounced)") for a in node.args)):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: .{node.func.attr}(...)")
    assert not found, "reason text built or read outside vocab/reasons.py:\n" + "\n".join(found)


def test_a_reason_crosses_the_wire_as_its_two_fields() -> None:
    for reason in (Reason.signal("cpu-percent"), Reason.debounced("task.created"), INTERVAL, DEMAND):
        line = protocol.Compute(7, "listener", reason, {"cpu-percent": "sense"}).encode()
        back = protocol.decode(line)
        assert isinstance(back, protocol.Compute) and back.reason == reason
        assert back.reason.kind is reason.kind and back.reason.source == reason.source
    assert isinstance(protocol.decode(b'{"type": "compute", "id": 1, "sense": "s", "reason": "on a"}\n'),
                      protocol.Malformed)
    assert isinstance(protocol.decode(b'{"type": "compute", "id": 1, "sense": "s", '
                                      b'"reason": {"kind": "signal", "source": null}}\n'), protocol.Malformed)


def test_a_line_decodes_to_the_message_its_class_would_make_and_bad_fields_are_malformed() -> None:
    signal = protocol.Signal(3, "s", {"x": 1}, 10, 1.5, signal_id=9)
    back = protocol.decode(signal.encode())
    assert back == signal and back.__dict__ == signal.__dict__
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.id = 4  # type: ignore[misc]
    line = b'{"type": "signal", "id": 3, "sense": "s", "payload": 1, "ts": 10, "duration_ms": 1}\n'
    short, other = protocol.decode(line), protocol.decode(line)
    assert short == protocol.Signal(3, "s", 1, 10, 1)  # the absent fields: their defaults
    assert isinstance(short, protocol.Signal) and isinstance(other, protocol.Signal)
    assert short.restarted == [] and short.restarted is not other.restarted  # a factory's: one per message
    for bad, why in ((line.replace(b'"ts"', b'"at"'), "unknown field(s) at"), (line.replace(b', "ts": 10', b""),
                                                                              "missing field ts")):
        malformed = protocol.decode(bad)
        assert isinstance(malformed, protocol.Malformed) and malformed.problem == f"bad fields for signal: {why}"


def test_a_reason_has_a_source_exactly_when_a_source_woke_it() -> None:
    with pytest.raises(ValueError):
        Reason(TriggerKind.SIGNAL)
    with pytest.raises(ValueError):
        Reason(TriggerKind.INTERVAL, "a")


def test_the_values_on_disk_and_in_json_are_the_ones_instances_hold() -> None:
    """logs.db, workflow_runs and --json documents of existing instances keep working: the values never move."""
    assert [k.value for k in TriggerKind] == ["interval", "cron", "overdue", "signal", "debounced", "demand",
                                               "read", "backlog", "retry", "files", "replay", "freshness",
                                               "code_changed"]
    assert (Reason.signal("a").text, Reason.debounced("a").text, INTERVAL.text) == ("on a", "on a (debounced)",
                                                                                    "interval")
    assert [o.value for o in Outcome] == ["signal", "silent", "error", "timeout", "lost"]
    assert [s.value for s in ThreadStatus] == ["queued", "started", "waiting", "completed", "failed", "crashed",
                                               "dropped", "cancelled", "paused"]  # cancelled, paused: added, nothing moved
    assert {s.value for s in WorkerState} == {"stopped", "starting", "ready", "backoff", "reloading",
                                              "restarting", "stopping"}
    assert {s.value for s in SenseStatus} == {"idle", "pending", "running", "penalised", "quarantined",
                                              "load-failed", "stopped", "disabled", "paused"}
    assert {(k.source.value, k.type) for k in LogKind} >= {
        ("reflex", "run_start"), ("reflex", "output"), ("reflex", "run_complete"), ("signal", "emit"),
        ("system", "engine_started"), ("system", "error"), ("workflow", "message"), ("workflow", "queued")}
    row = logrows.run_complete("s", 3, Outcome.SIGNAL, Reason.debounced("a"), duration_ms=1.23456, signal_id=9)
    assert (row.source, row.type, row.ref) == ("reflex", "run_complete", "s")
    assert row.payload == {"compute_id": 3, "outcome": "signal", "duration_ms": 1.235, "reason": "on a (debounced)",
                           "signal_id": 9}


def test_every_log_kind_has_one_constructor() -> None:
    """Each kind is built in exactly one function of vocab/logrows.py (thread statuses: in thread_status)."""
    builders: dict[LogKind, list[str]] = {kind: [] for kind in LogKind}
    for name, fn in inspect.getmembers(logrows, inspect.isfunction):
        if fn.__module__ != logrows.__name__ or name.startswith("_"):
            continue
        source = inspect.getsource(fn)
        for kind in LogKind:
            if f"LogKind.{kind.name}" in source or (kind.status is not None and "LogKind.of_status" in source):
                builders[kind].append(name)
    assert {k: v for k, v in builders.items() if len(v) != 1} == {}


def test_nerve_writes_its_log_only_through_the_constructors() -> None:
    """No module outside store/logs.py appends a row by its raw (source, type): rows are LogRows."""
    raw = {s.value for s in logrows.LogSource}
    found = []
    for path, tree in _modules():
        if path == ROOT / "store" / "logs.py":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "workflow_event", "log")
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in raw):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "workflow_event":
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: workflow_event")
    assert not found, "log rows built by hand (use vocab.logrows):\n" + "\n".join(found)


# what a compared name says it holds → the enums whose values it takes
_TYPED = {"outcome": (Outcome,), "status": (ThreadStatus, SenseStatus), "state": (WorkerState, SenseStatus, JobState,
                                                                                  StepStatus),
          "decision": (Decision,), "kind": (SourceKind,)}


# modules whose `kind` is another vocabulary than a source's, each typed where it is made
_OTHER_KINDS = {
    "cli/mesh_cmd.py": "a mesh node's kind (config.mesh.NodeKind)",
    "cli/sense_remove.py": "what a removal moved (config.lifecycle.Kind)",
    "config/lifecycle.py": "sense | reflex | workflow (lifecycle.Kind)",
    "config/code.py": "whose code a problem is in (sense | workflow)",
    "config/code_cache.py": "a file system entry's kind (file | dir | link)",
    "worker/entry.py": "which worker to run (sense | workflow)",
}


# modules that compare another program's protocol values, not ours
_FOREIGN = {"agents/codex.py": "the Codex app-server's turn and thread statuses"}


def state_literals(tree: ast.AST, kinds: bool = True) -> list[tuple[int, str]]:
    """Comparisons of a state, status, outcome, decision or source kind with a string literal that is one of its
    enum's values (`x.state == "running"`, `status in ("queued", "started")`)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                        for op in node.ops):
            continue
        sides = [node.left, *node.comparators]
        literals = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
        for side in sides:
            if isinstance(side, (ast.Tuple, ast.Set, ast.List)):
                literals += [e.value for e in side.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        named = " ".join(ast.unparse(s).lower() for s in sides
                         if not isinstance(s, (ast.Constant, ast.Tuple, ast.Set, ast.List)))
        values = {m.value for word, enums in _TYPED.items() if word in named and (kinds or word != "kind")
                  for enum in enums for m in enum}
        if values & set(literals):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_state_literal_is_compared_where_its_enum_exists() -> None:
    found = [f"{path.relative_to(ROOT.parent)}:{line}: {text}" for path, tree in _modules()
             if path.parent.name != "vocab" and path.relative_to(ROOT).as_posix() not in _FOREIGN
             for line, text in state_literals(tree, kinds=path.relative_to(ROOT).as_posix() not in _OTHER_KINDS)]
    assert not found, "compare with the enum's member, not its text:\n" + "\n".join(found)


def test_a_state_literal_is_caught() -> None:
    """Guards against a vacuous pass: each shape the finder looks for is found, and a member is not."""
    code = ('job.state == "running"\nstatus in ("queued", "x")\nsub.kind != "channel"\nresult["outcome"] == "error"\n'
            'job.state is JobState.RUNNING\nname == "running"\n')
    assert [line for line, _ in state_literals(ast.parse(code))] == [1, 2, 3, 4]
