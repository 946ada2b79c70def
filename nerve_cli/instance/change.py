"""One change Nerve makes to the instance, committed as one commit holding only what Nerve changed.

Every command that edits the instance says up front which paths it will touch.
If one of them already holds uncommitted edits (the user changed a timeout in
nerve.yaml by hand and did not commit), those edits are committed first, on
their own, with a message that says whose they are; then Nerve's own edit is
committed as `nerve: <command>`. So `git log -p` never shows a hand edit
inside a Nerve commit, and `git status` is clean after every Nerve command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.instance.git import changed_paths, commit

PREFIX = "nerve: "


@dataclass
class Change:
    home: Path
    what: str  # "sense disable cpu-usage": the command, as the commit message says it
    paths: Sequence[Path | str]  # everything this change may add, edit, move or delete
    sha: str | None = None  # Nerve's commit
    hand_sha: str | None = None  # the separate commit of edits found before the change
    hand_paths: list[str] = field(default_factory=list)

    def protect(self) -> None:
        """Commit uncommitted edits of the paths this change touches, separately and labelled as such."""
        found: list[Path | str] = list(changed_paths(self.home, self.paths))
        if not found:
            return
        self.hand_paths = [str(p) for p in found]
        shown = ", ".join(self.hand_paths[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        self.hand_sha = commit(self.home, found, f"edits to {shown} made outside Nerve, committed before `nerve {self.what}`")

    def commit(self, paths: list[Path | str] | None = None, detail: str = "") -> str | None:
        """Commit `paths` (default: all of this change's paths) as `nerve: <what> <detail>`."""
        message = PREFIX + self.what + (f" {detail}" if detail else "")
        self.sha = commit(self.home, list(paths if paths is not None else self.paths), message)
        return self.sha

    def notes(self) -> list[str]:
        """What the user should hear about the separate commit, if one was made."""
        if not self.hand_sha:
            return []
        return [f"{', '.join(self.hand_paths)} had uncommitted edits: committed them first, on their own, "
                f"as {self.hand_sha[:8]}; Nerve's change is a separate commit"]
