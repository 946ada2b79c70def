"""The notifier as an edge of the engine: made, started and registered for teardown in one call, and its
figures as metrics (`nerve_notifications_*`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.notify.notifier import Notifier


def make_notifier(stack: AsyncExitStack, home: Path, config: Callable[[], NerveConfig],
                  link_base: Callable[[], str | None], report: Callable[[str, str], None]) -> Notifier:
    """A notifier (its thread starts with `start()`) whose close runs when `stack` unwinds; its lines reach
    `report` on the loop. Subscribe it to the router: it wakes on nerve-threads' and nerve-health's signals."""
    loop = asyncio.get_running_loop()

    def told(level: str, line: str) -> None:  # the notifier's thread: hand the line to the loop
        loop.call_soon_threadsafe(report, level, line)

    notifier = Notifier(home, config, link_base, told)
    stack.callback(notifier.close)
    return notifier


def notify_metrics(status: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """Per `notify:` rule: notifications sent, tries that failed (since the engine started), what waits."""
    sent = CounterMetricFamily("nerve_notifications_sent", "Notifications a target took, by notify rule.",
                               labels=["rule"])
    failed = CounterMetricFamily("nerve_notifications_failed", "Tries to send a notification that failed (each is "
                                 "tried again with back-off), by notify rule, since the engine started.",
                                 labels=["rule"])
    pending = GaugeMetricFamily("nerve_notifications_pending", "Notifications not yet taken by their target, by "
                                "notify rule.", labels=["rule"])
    for rule, figures in sorted(status.items()):
        sent.add_metric([rule], int(figures.get("sent") or 0))
        failed.add_metric([rule], int(figures.get("failed") or 0))
        pending.add_metric([rule], int(figures.get("pending") or 0))
    yield from (sent, failed, pending)
