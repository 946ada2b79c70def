"""The hop with traces on vs off: what exporting every compute, signal and emit as spans costs the engine.

The ping-pong of `engine_hop.py` (two senses in two groups waking each other; each compute records the time
since the other's signal) runs with traces off, then on (exported over OTLP/HTTP to a receiver in this
process that decodes every request), then off and on again, so a drift of the machine's load shows. With
traces on, every hop makes a compute span (its signal an event on it) in the kernel, as a plain tuple batched
down a pipe every 100 ms; the exporter process (the engine's child) builds the SDK's spans, encodes and sends
them, on its own interpreter lock: its CPU is shown apart (it competes with the hop only for the cores).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _kit import Engine, Report, cpu_ns, family, instance, machine, median, pct, signals, us, wait_until
from engine_hop import CONFIG, PING, WARMUP, count
from otlpkit import Receiver

HOPS = 1500
DEADLINE = 30.0


EXPORTER = "nerve_cli.kernel.trace.exporter"


def exporter_pid(kernel: int) -> int | None:
    import psutil

    for child in psutil.Process(kernel).children():
        try:
            if EXPORTER in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def run(env: dict[str, str] | None) -> tuple[list[float], float, float]:
    """(hop latencies µs, kernel CPU µs per hop, exporter process CPU µs per hop)."""
    with instance(CONFIG, {"a": PING.format(other="b"), "b": PING.format(other="a")}) as home:
        with Engine(home, env=env) as engine:
            engine.wait_ready(groups=2)
            kernel = family(engine.pid)[0]
            exporter = exporter_pid(kernel) if env else None
            cpu0, out0 = cpu_ns(kernel), cpu_ns(exporter) if exporter else 0
            engine.request("emit", channel="go")
            wait_until(lambda: count(home, "a") > HOPS + WARMUP, DEADLINE, interval=0.1)
            cpu1, out1 = cpu_ns(kernel), cpu_ns(exporter) if exporter else 0
        values = [s["payload"]["hop"] / 1000 for sense in ("a", "b") for s in signals(home, sense)
                  if s["payload"]["hop"] is not None][WARMUP:]
        done = max(1, count(home, "a") + count(home, "b"))
        return values, (cpu1 - cpu0) / 1000 / done, (out1 - out0) / 1000 / done


def main() -> None:
    results: dict[str, list[tuple[list[float], float, float]]] = {"off": [], "on": []}
    with Receiver() as receiver:
        on = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        for label, env in (("off", None), ("on", on), ("off", None), ("on", on)):
            results[label].append(run(env))
        time.sleep(1.0)  # the last batch (sent every 500 ms)
        exported = len(receiver.spans)
    report = Report(f"traces: the signal hop with OpenTelemetry export off and on ({machine()})")
    off = [v for values, _, _ in results["off"] for v in values]
    traced = [v for values, _, _ in results["on"] for v in values]
    cpu_off = median([c for _, c, _ in results["off"]])
    cpu_on = median([c for _, c, _ in results["on"]])
    exporting = median([c for _, _, c in results["on"]])
    report.row("hop, traces off, median / p99", f"{us(median(off))} / {us(pct(off, 99))}")
    report.row("hop, traces exported, median / p99", f"{us(median(traced))} / {us(pct(traced, 99))}",
               f"off: {us(median(off))}", "median ≤ 1.25× off", median(traced) <= 1.25 * median(off))
    report.row("kernel CPU per hop, off / on", f"{us(cpu_off)} / {us(cpu_on)}", f"off: {us(cpu_off)}",
               f"{cpu_on / cpu_off:.2f}×")
    report.row("exporter process CPU per hop", us(exporting))
    report.row("spans exported (two traced runs)", f"{exported:,}")
    report.print()


if __name__ == "__main__":
    main()
