"""An engine with nothing to do sleeps: its Codex deliveries look at the config when a reload changes it, not on
a timer of their own (they looked every second, with no agent configured: a wake-up a second of every engine)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.loop.current import Current
from nerve_cli.kernel.loop.deliveries import CodexDeliveries


def test_the_codex_deliveries_look_at_the_config_when_a_reload_changes_it_and_not_on_a_timer(tmp_path: Path) -> None:
    async def run() -> tuple[int, int]:
        current = Current(NerveConfig.model_validate({}), [])
        deliveries = CodexDeliveries(tmp_path, current, lambda level, text: None)
        looks = 0
        reconcile = deliveries.reconcile

        async def counted() -> None:
            nonlocal looks
            looks += 1
            await reconcile()

        deliveries.reconcile = counted  # type: ignore[method-assign]
        deliveries.start()
        await asyncio.sleep(2.5)  # the old look every second: 3 looks by now
        idle = looks
        current.use(NerveConfig.model_validate({}))  # what a hot reload does
        for _ in range(1000):  # at most 10 s of a loaded machine
            await asyncio.sleep(0.01)
            if looks > idle:
                break
        after = looks
        await deliveries.close()
        return idle, after

    idle, after = asyncio.run(run())
    assert idle == 1, f"{idle} looks in 2.5 s with nothing changed"  # the one at start
    assert after == 2  # the reload's
