"""The `nerve` command line: one module per command group; each command parses, calls library code, renders.

Commands import the library code they call inside their own function, so
`nerve --help` loads none of it (bench/cli_startup.py measures that); that is
the only reason for an import inside a function here.
"""
