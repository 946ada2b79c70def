"""The `nerve` executable: the hook command's and `nerve mcp`'s fast paths, else the Typer app (cli/app.py)."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    try:
        _command()
    finally:
        # What a command built lives until the process ends, and the interpreter's teardown would first run
        # cyclic collections over all of it (every imported module's objects: pydantic's, rich's), 15-20 ms of
        # a 130 ms `nerve config check`. Frozen, it is still deallocated as the modules are cleared; only what
        # sits in a reference cycle is left to the OS (Python never promised those finalizers at exit), and
        # nothing a command leaves needs one: its files are closed by `with` or written atomically.
        gc.freeze()


def _command() -> None:
    if sys.argv[1:3] == ["agent", "wait"]:  # the hook command, run after every turn of a coding agent
        from nerve_cli.cli.agent_wait import fast

        code = fast(sys.argv[1:])
        if code is not None:
            # the harness waits for this exit to wake its session: skip the interpreter's teardown (its files
            # are closed and its output written; tearing down the modules cost ~100 ms at load)
            import os

            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    if sys.argv[1:2] == ["mcp"]:  # started by an MCP client, which waits for initialize and tools/list
        from nerve_cli.mcp.front import serve

        if serve(sys.argv[2:]) is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            import os

            os._exit(0)  # (a loader thread may be importing the SDK: no interpreter teardown under it)
    from nerve_cli.cli.app import main as app_main

    app_main()
