"""The worker's command line, shared by `python -m nerve_cli.worker` and the warm template's forks."""

from __future__ import annotations

import argparse

from nerve_cli.store import dbwatch
from nerve_cli.wire import containment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nerve_cli.worker")
    sub = parser.add_subparsers(dest="kind", required=True)
    sense = sub.add_parser("sense", help="run the senses of one group")
    sense.add_argument("--group", required=True)
    sense.add_argument("--home", required=True)
    sense.add_argument("--senses", help="comma-separated senses (default: the group's enabled senses)")
    sense.add_argument("--spec", help="the group's settings as JSON (from the kernel); default: read nerve.yaml")
    sense.add_argument("--dry-run", action="store_true", help="open the databases for dry runs (nothing is written)")
    wf = sub.add_parser("workflow", help="run the threads of one workflow")
    wf.add_argument("--name", required=True)
    wf.add_argument("--home", required=True)
    chk = sub.add_parser("check", help="import senses and workflows and report what would fail to load")
    chk.add_argument("--home", required=True)
    chk.add_argument("--senses", default="")
    chk.add_argument("--workflows", default="")
    chk.add_argument("--from-config", action="store_true",
                     help="check the enabled senses and workflows a quick read of nerve.yaml names (said first)")
    tpl = sub.add_parser("template", help="import the sense runtime, then fork workers on the kernel's request")
    tpl.add_argument("--fd", type=int, required=True, help="the kernel's SOCK_SEQPACKET socket")
    tpl.add_argument("--preload", default="", help="engine.preload: modules to import for every worker, by commas")
    args = parser.parse_args(argv)
    # a worker imports only its own runtime: a sense worker never loads the workflow automaton, nor the reverse
    if args.kind == "template":
        from nerve_cli.worker.template import main as serve  # (likewise)

        return serve(args, main)  # each fork runs this same entry point with its own argv
    # before any user code: every process that code starts stays where this worker can end it (cgroup/subreaper)
    containment.enter()
    dbwatch.seal()
    if args.kind == "check":
        from nerve_cli.worker.check import main as run  # (likewise)
    elif args.kind == "sense":
        from nerve_cli.worker.sense_runtime import main as run  # (likewise)
    else:
        from nerve_cli.worker.thread_host import main as run  # (likewise)
    try:
        return run(args)
    finally:
        containment.end_descendants()  # a clean stop, or the kernel gone (its pipe closed): nothing outlives us


