"""What the commands do, as library code: `cli/`, `top/` and `mcp/` call it and only render.

- `client`: the engine's control socket, from the CLI side (one request, one answer);
- `senses/`: scaffold, inspect and chart data, one-off compute in a worker, delete, rename;
- `workflows/`: scaffold, standalone run, list/show threads, approve offline, rebuild;
- `emit` (`nerve emit`) and `gc` (`nerve gc`), which act on the whole instance.
An operation asks a running engine through `client`, or works on the files itself when none runs.
"""
