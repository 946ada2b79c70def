
from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption


def run(
    home: HomeOption = None,
    for_: Annotated[Optional[str], typer.Option("--for", help="Stop by itself after this long (e.g. 30s).")] = None,
    no_watch: Annotated[bool, typer.Option("--no-watch", help="Do not reload when files change.")] = False,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="Also show signals (-v) and every compute (-vv).")] = 0,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="Serve Prometheus metrics at "
                                                   "http://HOST:PORT/metrics, e.g. 127.0.0.1:9464 (off by default; "
                                                   "a bare port listens on loopback); overrides engine.metrics in nerve.yaml.")] = None,
    webhooks: Annotated[Optional[str], typer.Option("--webhooks", help="Accept POST /emit/CHANNEL at HOST:PORT "
                                                    "for the channels with `webhook: true` in nerve.yaml, e.g. "
                                                    "127.0.0.1:8787 (a bare port listens on loopback); overrides "
                                                    "engine.webhooks.")] = None,
) -> None:
    """Run the engine in the foreground until Ctrl-C (or --for).

    Refuses to start on an invalid nerve.yaml (every problem is printed) or
    when another engine already runs this instance. Ctrl-C or SIGTERM stops it
    gracefully (running computes finish, logs are flushed); a second Ctrl-C forces.

    Example: nerve run -v --metrics 127.0.0.1:9464 --webhooks 127.0.0.1:8787
    """
    from nerve_cli import eventloop
    from nerve_cli.config.model import parse_duration
    from nerve_cli.errors import NerveError
    from nerve_cli.home import require_instance
    from nerve_cli.kernel.core.report import Reporter
    from nerve_cli.kernel.engine import Engine

    path = require_instance(home)
    seconds = None
    if for_ is not None:
        try:
            seconds = parse_duration(for_)
        except ValueError as exc:
            raise NerveError(f"--for: {exc}") from None
    from nerve_cli.address import parse_address

    address = None
    if metrics is not None:
        try:
            address = parse_address(metrics)
        except ValueError as exc:
            raise NerveError(f"--metrics: {exc}") from None
    hooks = None
    if webhooks is not None:
        try:
            hooks = parse_address(webhooks, example_port=8787)
        except ValueError as exc:
            raise NerveError(f"--webhooks: {exc}") from None
    engine = Engine(path, Reporter(verbose), run_for=seconds, watch=not no_watch, metrics=address, webhooks=hooks)
    code = eventloop.run(engine.run())
    raise typer.Exit(130 if engine.forced else code)
