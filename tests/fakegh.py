"""A fake `gh` (GitHub's CLI) for the docs' examples: it knows the subcommands they run and accepts only the flags
the real gh has for each (from gh's own manual), so an example that passes a flag gh does not have fails here as it
would for a user (`gh pr create` has no `--json`: it prints the new pull request's URL). Every call is appended to
$FAKE_GH_LOG as one JSON line.

    python tests/fakegh.py pr create --fill --head fix-login     # prints https://github.com/me/app/pull/42
"""

from __future__ import annotations

import json
import os
import sys

# each subcommand's flags as gh's manual lists them: (long, short or None, takes a value)
_GLOBAL = [("--repo", "-R", True), ("--help", "-h", False)]
FLAGS: dict[tuple[str, ...], list[tuple[str, str | None, bool]]] = {
    ("pr", "create"): [("--assignee", "-a", True), ("--base", "-B", True), ("--body", "-b", True),
                       ("--body-file", "-F", True), ("--draft", "-d", False), ("--dry-run", None, False),
                       ("--editor", "-e", False), ("--fill", "-f", False), ("--fill-first", None, False),
                       ("--fill-verbose", None, False), ("--head", "-H", True), ("--label", "-l", True),
                       ("--milestone", "-m", True), ("--no-maintainer-edit", None, False), ("--project", "-p", True),
                       ("--recover", None, True), ("--reviewer", "-r", True), ("--template", "-T", True),
                       ("--title", "-t", True), ("--web", "-w", False)],
    ("pr", "merge"): [("--admin", None, False), ("--author-email", "-A", True), ("--auto", None, False),
                      ("--body", "-b", True), ("--body-file", "-F", True), ("--delete-branch", "-d", False),
                      ("--disable-auto", None, False), ("--match-head-commit", None, True), ("--merge", "-m", False),
                      ("--rebase", "-r", False), ("--squash", "-s", False), ("--subject", "-t", True)],
    ("pr", "list"): [("--app", None, True), ("--assignee", "-a", True), ("--author", "-A", True),
                     ("--base", "-B", True), ("--draft", "-d", False), ("--head", "-H", True), ("--jq", "-q", True),
                     ("--json", None, True), ("--label", "-l", True), ("--limit", "-L", True), ("--search", "-S", True),
                     ("--state", "-s", True), ("--template", "-t", True), ("--web", "-w", False)],
    ("api",): [("--method", "-X", True), ("--field", "-F", True), ("--raw-field", "-f", True), ("--header", "-H", True),
               ("--include", "-i", False), ("--input", None, True), ("--jq", "-q", True), ("--paginate", None, False),
               ("--silent", None, False), ("--template", "-t", True), ("--verbose", None, False),
               ("--hostname", None, True), ("--cache", None, True), ("--preview", "-p", True), ("--slurp", None, False)],
}
PR_NUMBER = 42


def parse(words: list[str]) -> tuple[tuple[str, ...], dict[str, str | bool], list[str]]:
    command = next((c for c in sorted(FLAGS, key=len, reverse=True) if tuple(words[:len(c)]) == c), None)
    if command is None:
        raise SystemExit(f"unknown command {' '.join(words[:2])!r} for gh (the fake knows {sorted(FLAGS)})")
    known = FLAGS[command] + _GLOBAL
    flags: dict[str, str | bool] = {}
    args: list[str] = []
    rest = words[len(command):]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("-") and word != "-":
            name, _, inline = word.partition("=")
            spec = next((f for f in known if name in (f[0], f[1])), None)
            if spec is None:
                print(f"unknown flag: {name}\n\nUsage:  gh {' '.join(command)} [flags]", file=sys.stderr)
                raise SystemExit(1)
            if spec[2]:
                if not inline:
                    i += 1
                    if i >= len(rest):
                        print(f"flag needs an argument: {name}", file=sys.stderr)
                        raise SystemExit(1)
                    inline = rest[i]
                flags[spec[0]] = inline
            else:
                flags[spec[0]] = True
        else:
            args.append(word)
        i += 1
    return command, flags, args


def main(argv: list[str]) -> int:
    command, flags, args = parse(argv)
    log = os.environ.get("FAKE_GH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"command": " ".join(command), "flags": flags, "args": args}) + "\n")
    repo = str(flags.get("--repo") or "me/app")
    if command == ("pr", "create"):
        print(f"https://github.com/{repo}/pull/{PR_NUMBER}")
    elif command == ("pr", "merge"):
        print(f"✓ Merged pull request #{args[0] if args else PR_NUMBER}", file=sys.stderr)
    elif command == ("pr", "list"):
        if "--json" not in flags:
            print(f"#{PR_NUMBER}\tFix the login page\tfix-login\tOPEN")
        else:
            fields = str(flags["--json"]).split(",")
            rows = [{"number": n, "title": f"PR {n}", "state": "OPEN"} for n in (7, PR_NUMBER)]
            print(json.dumps([{k: r.get(k) for k in fields} for r in rows]))
    elif command == ("api",):
        number = int(args[0].rstrip("/").rsplit("/", 1)[1]) if args and args[0].rsplit("/", 1)[-1].isdigit() else 1
        print(json.dumps({"number": number, "title": "Fix the login page", "state": "open"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
