"""A coding-agent harness simulator that follows Claude Code's documented hook protocol, for the tests.

Claude Code (and OpenCode's Claude-compatible hooks) read the hooks of
`.claude/settings.json` (`hooks.EVENT[].hooks[]`), run each `command` hook
through the shell with the event's JSON on stdin (`session_id`,
`transcript_path`, `cwd`, `hook_event_name`, and per event `source` for
SessionStart, `stop_hook_active` for Stop). A hook with `async: true` runs in
the background; with `asyncRewake: true`, its exit code 2 wakes the session
with its stderr as the message the model reads: a turn. When the turn ends,
the Stop hooks run.

This simulator does exactly that, with a turn that takes `--turn-ms` and logs
what it was handed (JSON lines: `{"t": "start"|"end", "session", "delivery",
"events": ["ci.done#3", ...], "redelivered"}`). `--hang-at N`: the Nth turn
starts and never ends (the test kills the harness mid-turn). It never calls
Nerve itself: it knows only the settings file and the hook protocol.

    python tests/harnesssim.py PROJECT LOG [--session ID] [--source startup|resume] [--turn-ms 5] [--hang-at N]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

DELIVERY = re.compile(r"\(delivery (\d+)([^)]*)\)")
EVENT = re.compile(r"^- (\S+) #(\d+) at ", re.M)


class Harness:
    def __init__(self, project: Path, log: Path, session: str, turn_ms: int, hang_at: int | None) -> None:
        self.project, self.log, self.session = project, log, session
        self.turn_ms, self.hang_at = turn_ms, hang_at
        self.settings = json.loads((project / ".claude" / "settings.json").read_text())
        self.background: list[tuple[dict, subprocess.Popen]] = []
        self.turns = 0

    def fire(self, event: str, **fields: object) -> None:
        """Run every command hook of `event`: the async ones in the background, the others to their end."""
        payload = {"session_id": self.session, "transcript_path": str(self.project / "transcript.jsonl"),
                   "cwd": str(self.project), "hook_event_name": event, **fields}
        for group in self.settings.get("hooks", {}).get(event, []):
            for hook in group.get("hooks", []):
                if hook.get("type") != "command":
                    continue
                proc = subprocess.Popen(["sh", "-c", hook["command"]], cwd=self.project, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(payload))
                proc.stdin.close()
                if hook.get("async") or hook.get("asyncRewake"):
                    self.background.append((hook, proc))
                else:
                    proc.wait()

    def record(self, what: str, delivery: int | None, events: list[str], redelivered: bool) -> None:
        with self.log.open("a") as handle:
            handle.write(json.dumps({"t": what, "session": self.session, "delivery": delivery, "events": events,
                                     "redelivered": redelivered}) + "\n")

    def turn(self, message: str) -> None:
        self.turns += 1
        found = DELIVERY.search(message)
        delivery = int(found.group(1)) if found else None
        redelivered = bool(found and "handed before" in found.group(2))
        events = [f"{s}#{i}" for s, i in EVENT.findall(message)]
        self.record("start", delivery, events, redelivered)
        if self.hang_at is not None and self.turns >= self.hang_at:
            while True:
                time.sleep(1)
        time.sleep(self.turn_ms / 1000)
        self.record("end", delivery, events, redelivered)
        self.fire("Stop", stop_hook_active=False, last_assistant_message="done")

    def run(self, source: str) -> None:
        self.fire("SessionStart", source=source)
        while True:
            for hook, proc in list(self.background):
                if proc.poll() is None:
                    continue
                self.background.remove((hook, proc))
                stderr = proc.stderr.read() if proc.stderr else ""
                if hook.get("asyncRewake") and proc.returncode == 2:
                    self.turn(stderr)
            time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("project", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--session", default=None)
    parser.add_argument("--source", default="startup")
    parser.add_argument("--turn-ms", type=int, default=5)
    parser.add_argument("--hang-at", type=int, default=None)
    args = parser.parse_args()
    Harness(args.project, args.log, args.session or str(uuid.uuid4()), args.turn_ms, args.hang_at).run(args.source)


if __name__ == "__main__":
    sys.exit(main())
