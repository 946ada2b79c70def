"""`nerve ui`: serve the console with uvicorn until Ctrl-C, and say where (with the token)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from nerve_cli.address import ListenAddress
from nerve_cli.errors import NerveError
from nerve_cli.ui.app import build
from nerve_cli.ui.security import console_token

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def hosts_for(address: ListenAddress, extra: list[str]) -> list[str]:
    """The Host names the console answers to: loopback's, its own address, and `extra`."""
    own = f"[{address.host}]" if ":" in address.host else address.host
    wildcard = address.host in ("0.0.0.0", "::")
    return [*LOOPBACK_NAMES, *([] if wildcard else [own.lower()]), *(h.lower() for h in extra)]


def serve(home: Path, address: ListenAddress, allow_hosts: list[str], rotate: bool,
          say: Callable[[str, str], None], ready: Callable[[str], None] | None = None) -> None:
    """Run until interrupted. `say(level, line)` tells the person; `ready(url)` is called once it listens."""
    import uvicorn  # ≈ 0.2 s with starlette: only `nerve ui` pays for it

    token = console_token(home, rotate)
    app = build(home, token, hosts_for(address, allow_hosts))
    config = uvicorn.Config(app, host=address.host, port=address.port, log_level="warning", access_log=False,
                            lifespan="off", server_header=False, proxy_headers=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    if not address.loopback:
        say("warn", f"nerve ui listens on {address.host}, not loopback: anyone who reaches it and has the token "
                    "can answer threads; put TLS in front of it (a reverse proxy) and --allow-host its name")

    async def main() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task
                raise NerveError(f"nerve ui: cannot listen on {address} (is the port taken?); pick another with "
                                 "--listen 127.0.0.1:PORT")
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else address.port
        shown = f"[{address.host}]" if ":" in address.host else address.host
        shown = "127.0.0.1" if address.host in ("0.0.0.0", "::") else shown
        url = f"http://{shown}:{port}/?token={token}"
        say("info", f"nerve ui on {url}")
        if ready is not None:
            ready(url)
        await task

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
