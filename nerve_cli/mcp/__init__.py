"""`nerve mcp`: Nerve as a Model Context Protocol server, so an agent can read what Nerve observed and act on it.

`tools` holds what each tool does (plain functions returning the documents
the CLI's --json prints); `server` registers them with the official `mcp` SDK
and serves stdio. Only `server` imports `mcp`, and only the `nerve mcp`
process imports `server`.
"""
