"""`nerve ui`: the web console."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption


def ui(
    home: HomeOption = None,
    listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to serve on (a bare port: loopback).")] = "127.0.0.1:8789",
    allow_host: Annotated[Optional[list[str]], typer.Option("--allow-host", metavar="HOST", help="Another Host name the console answers to "
                                                            "(a reverse proxy's), beside loopback's and its own address.")] = None,
    new_token: Annotated[bool, typer.Option("--new-token", help="Make a new token first: addresses printed before stop "
                                            "working.")] = False,
) -> None:
    """The web console: senses, threads, the inbox of what waits for a person, the log, the mesh; live.

    It prints its address with a token (kept in data/ui.token); opening it starts
    a session. It reads the files and the control socket as `nerve top` does, so
    it works with the engine stopped (answers are then written for its next
    start). Host, Origin and CSRF are checked; it listens on loopback unless told
    otherwise, and warns for another address without TLS in front.

    Example: nerve ui --listen 127.0.0.1:8789
    """
    from nerve_cli.address import parse_address
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ui.serve import serve

    try:
        address = parse_address(listen, example_port=8789)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--listen") from None
    say = {"info": lambda line: output.info(line, style="green"), "warn": output.warn}
    serve(require_instance(home), address, list(allow_host or []), new_token, lambda level, line: say[level](line))
