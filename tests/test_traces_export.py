"""How traces leave the engine: a process of their own, supervised by the kernel, sampled by the standard variables.

A real engine exports to a real OTLP/HTTP receiver (otlpkit). The kernel makes its spans as plain records and
an exporter process (`python -m nerve_cli.kernel.trace.exporter`, the engine's child) builds the SDK's spans,
encodes them with protobuf and sends them: the kernel never loads protobuf; killed, the exporter is said once
and started again and the spans come again; the engine killed, the exporter ends on its own; a clean stop
loses nothing; OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG choose the traces kept, as the SDK would.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest
from conftest import cli
from enginekit import RunningEngine, completes, wait_for, write_instance
from otlpkit import Receiver

from nerve_cli.kernel.trace import semconv
from nerve_cli.kernel.trace.sampling import sampler_from_env

EXPORTER = "nerve_cli.kernel.trace.exporter"
PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SAMPLED = f"00-{PARENT_TRACE}-00f067aa0ba902b7-01"
UNSAMPLED = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
CONFIG = """
senses:
  tick: {}
  heard: {}
reflexes:
  - {sense: tick, interval: 50ms}
  - {sense: heard, on: [go]}
"""
SENSES = {"tick": "def compute(db, peers):\n    return 1\n",
          "heard": "def compute(db, peers, trigger):\n    return len(trigger.events)\n"}


def exporters(engine: RunningEngine) -> list[psutil.Process]:
    return [p for p in psutil.Process(engine.proc.pid).children() if EXPORTER in " ".join(p.cmdline())]


def maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.timeout(120)
def test_spans_are_encoded_and_sent_by_a_child_process_not_the_kernel(tmp_path: Path) -> None:
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", CONFIG, SENSES)
        with RunningEngine(home, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}) as engine:
            engine.wait_ready()
            wait_for(lambda: len(receiver.named("compute tick")) >= 5, 30, what="the ticks' spans")
            found = exporters(engine)
            assert len(found) == 1, [p.cmdline() for p in psutil.Process(engine.proc.pid).children()]
            # protobuf's extension is what encodes OTLP: loaded where the export runs, never in the kernel
            assert "_upb" in maps(found[0].pid) and "_upb" not in maps(engine.proc.pid)
            assert found[0].pid != engine.proc.pid and os.getsid(found[0].pid) == found[0].pid  # its own session
            code, out = engine.stop()
        assert code == 0, out
        assert not psutil.pid_exists(found[0].pid) or found[0].status() == psutil.STATUS_ZOMBIE


@pytest.mark.timeout(120)
def test_a_clean_stop_exports_every_span_it_made(tmp_path: Path) -> None:
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", CONFIG, SENSES)
        with RunningEngine(home, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}) as engine:
            engine.wait_ready()
            for _ in range(5):
                assert cli("emit", "go", "--home", str(home)).exit_code == 0
            wait_for(lambda: len(completes(home, "heard")) >= 1 and len(completes(home, "tick")) >= 20, 30,
                     what="computes")
            traces = json.loads(cli("status", "--json", "--home", str(home)).output)["traces"]
            assert traces["endpoint"] == receiver.endpoint and traces["sampler"] == "parentbased_always_on"
            assert traces["exporter_pid"] == exporters(engine)[0].pid and traces["exporter_restarts"] == 0
            assert traces["sent"] > 0 and traces["dropped"] == 0
            shown = cli("status", "--home", str(home)).output
            assert f"exporter pid {traces['exporter_pid']}" in shown and "dropped" not in shown
            code, out = engine.stop()  # right away: the last computes' spans are still in the kernel's batch
        assert code == 0, out
        ids = {s.attributes.get("nerve.compute_id") for s in receiver.spans if s.name.startswith("compute ")}
        done = [row for sense in ("tick", "heard") for row in completes(home, sense)]
        missing = [row["payload"]["compute_id"] for row in done if row["payload"]["compute_id"] not in ids]
        assert not missing, (missing, len(ids))
        assert len(receiver.named("emit go")) == 5
        assert "dropped" not in out, out


@pytest.mark.timeout(120)
def test_the_exporter_killed_is_said_once_and_started_again_and_the_spans_come_again(tmp_path: Path) -> None:
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", CONFIG, SENSES)
        with RunningEngine(home, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}) as engine:
            engine.wait_ready()
            wait_for(lambda: len(receiver.named("compute tick")) >= 3, 30, what="the ticks' spans")
            first = exporters(engine)[0]
            first.kill()
            wait_for(lambda: "exporter process" in engine.output(), 30, what="the engine to say it")
            wait_for(lambda: [p for p in exporters(engine) if p.pid != first.pid], 30, what="a new exporter")
            assert cli("emit", "go", "--home", str(home)).exit_code == 0
            wait_for(lambda: receiver.named("emit go") and receiver.named("compute heard"), 30,
                     what="the spans after the restart")
            ticks = len(completes(home, "tick"))
            wait_for(lambda: len(completes(home, "tick")) >= ticks + 5, 30, what="the engine to go on")
            second = [p for p in exporters(engine) if p.pid != first.pid][0]
            wait_for(lambda: json.loads(cli("status", "--json", "--home", str(home)).output)["traces"]["exported"], 30,
                     what="the exports counted")
            traces = json.loads(cli("status", "--json", "--home", str(home)).output)["traces"]
            assert traces["exporter_pid"] == second.pid and traces["exporter_restarts"] == 1
            code, out = engine.stop()
        assert code == 0, out
        said = [line for line in out.splitlines() if "exporter process" in line]
        assert len(said) == 1 and f"pid {first.pid}" in said[0] and "-9" in said[0], said
        assert "the engine runs on" in said[0]


@pytest.mark.timeout(120)
def test_an_exporter_that_cannot_start_is_said_once_with_its_error_and_the_engine_runs_on(tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "opentelemetry" / "exporter" / "otlp" / "proto" / "http"
    broken.mkdir(parents=True)  # found by the kernel's check, broken where the exporter imports it
    (broken / "__init__.py").write_text("raise RuntimeError('this exporter is broken')\n")
    home = write_instance(tmp_path / "home", CONFIG, SENSES)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "PYTHONPATH": str(tmp_path / "broken")}
    with RunningEngine(home, env=env) as engine:
        engine.wait_ready()

        def restarts() -> int:
            return json.loads(cli("status", "--json", "--home", str(home)).output)["traces"]["exporter_restarts"]

        wait_for(lambda: restarts() >= 2, 60, what="the exporter started again and ending again")
        ticks = len(completes(home, "tick"))
        wait_for(lambda: len(completes(home, "tick")) >= ticks + 5, 30, what="the engine to go on")
        code, out = engine.stop()
    assert code == 0, out
    said = [line for line in out.splitlines() if "exporter process" in line]
    assert len(said) == 1 and "RuntimeError: this exporter is broken" in said[0] and "(1)" in said[0], said


@pytest.mark.timeout(120)
def test_the_exporter_ends_when_the_engine_is_killed(tmp_path: Path) -> None:
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", CONFIG, SENSES)
        with RunningEngine(home, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}) as engine:
            engine.wait_ready()
            wait_for(lambda: exporters(engine) and receiver.named("compute tick"), 30, what="the exporter")
            child = exporters(engine)[0]
            engine.proc.send_signal(signal.SIGKILL)
            engine.proc.wait(10)

            def gone() -> bool:
                try:
                    return child.status() == psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    return True

            wait_for(gone, 30, what="the exporter to notice its input closed and exit")


@pytest.mark.timeout(120)
def test_the_standard_sampler_variables_choose_the_traces_exported(tmp_path: Path) -> None:
    """parentbased_traceidratio at 0: a trace this engine starts is not kept, one continued from a sampled
    parent is (and so is everything it wakes), one from a parent that was not sampled is not; error log
    records are not sampled."""
    with Receiver() as receiver:
        home = write_instance(tmp_path / "home", CONFIG, SENSES)
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
               "OTEL_TRACES_SAMPLER_ARG": "0"}
        with RunningEngine(home, env=env) as engine:
            engine.wait_ready()
            assert cli("emit", "go", "--traceparent", UNSAMPLED, "--home", str(home)).exit_code == 0
            assert cli("emit", "go", "--home", str(home)).exit_code == 0
            assert cli("emit", "go", "--traceparent", SAMPLED, "--home", str(home)).exit_code == 0
            wait_for(lambda: len(completes(home, "heard")) >= 3 and len(completes(home, "tick")) >= 5, 30,
                     what="computes")
            code, out = engine.stop()
        assert code == 0, out
    assert "sampler parentbased_traceidratio 0" in out
    assert {s.trace_id for s in receiver.spans} == {PARENT_TRACE}, [s.name for s in receiver.spans]
    names = sorted(s.name for s in receiver.spans)
    assert names.count("emit go") == 1 and "compute heard" in names and "compute tick" not in names


@pytest.mark.parametrize("name", ["always_on", "always_off", "traceidratio", "parentbased_always_on",
                                  "parentbased_always_off", "parentbased_traceidratio", "jaeger_remote", ""])
@pytest.mark.parametrize("arg", ["0.25", "1", "0", "x"])
def test_sampling_decides_as_the_sdk_does(name: str, arg: str) -> None:
    """The kernel decides without the SDK: the same decision as its samplers, for roots and both parents."""
    import random

    from opentelemetry.sdk.trace import sampling
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    env = {"OTEL_TRACES_SAMPLER": name, "OTEL_TRACES_SAMPLER_ARG": arg}
    said: list[str] = []
    ours = sampler_from_env(env, said.append)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        theirs = sampling._get_from_env_or_default()
    assert bool(said) == (name not in sampling._KNOWN_SAMPLERS and name != "" or
                          ("ratio" in name and arg == "x"))
    rng = random.Random(7)
    for _ in range(300):
        trace_id = rng.getrandbits(128)
        for parent in (None, True, False):
            context = None if parent is None else set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id, 1, True, TraceFlags(TraceFlags.SAMPLED if parent else TraceFlags.DEFAULT))))
            expected = theirs.should_sample(context, trace_id, "x").decision.is_sampled()
            assert ours.sampled(trace_id, parent) == expected, (name, arg, parent)


def test_the_attribute_names_are_the_conventions():
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
    from opentelemetry.semconv.attributes import code_attributes, exception_attributes

    for module in (gen_ai_attributes, code_attributes, exception_attributes):
        for key in dir(semconv):
            if key.isupper() and hasattr(module, key):
                assert getattr(semconv, key) == getattr(module, key)
    assert all(any(hasattr(m, k) for m in (gen_ai_attributes, code_attributes, exception_attributes))
               for k in dir(semconv) if k.isupper())
