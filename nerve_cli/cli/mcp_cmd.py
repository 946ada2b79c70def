from __future__ import annotations

from nerve_cli.cli.common import HomeOption


def mcp(home: HomeOption = None) -> None:
    """Serve this instance to AI agents over the Model Context Protocol (stdio).

    An MCP client (Claude Code, Cursor, an llm chain...) starts this command and
    talks to it on stdin/stdout: list senses with their last signal, read a
    sense's signals, run read-only SQL on its database, query the logs, emit on
    a channel, compute a sense, start and show threads, approve or reject a
    waiting thread. Reads work from the files; emit/compute/start need `nerve run`.
    Register it (docs/guides/mcp.md) with the command `nerve` and the
    arguments `mcp --home PATH`.

    Example: nerve mcp --home ~/.uncaged-nerve
    """
    from nerve_cli.home import require_instance
    from nerve_cli.mcp.server import serve

    serve(require_instance(home))
