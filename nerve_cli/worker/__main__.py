"""Worker entry point: `python -m nerve_cli.worker sense --group G --home H`,
`python -m nerve_cli.worker workflow --name W --home H`, or
`python -m nerve_cli.worker check --home H --senses a,b --workflows w` (import and report, for config check),
`python -m nerve_cli.worker template --fd N` (the warm template the kernel forks workers from)."""

from __future__ import annotations

import sys

from nerve_cli.worker.entry import main

if __name__ == "__main__":
    sys.exit(main())
