"""The SDK's answers to `initialize` and `tools/list`, kept per version so `nerve mcp` can give them before the
SDK is loaded (`mcp.front` reads them, `mcp.server` and `mcp.transport` write them as the SDK answers).

Kept in `$XDG_CACHE_HOME/nerve/mcp/`, keyed by what they are made of: this package's and the contract's files
and the SDK's version, so an upgrade or an edited install is never answered from a stale file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

REPLAY_ID = "nerve-front-initialize"  # the id of the replayed initialize, whose answer the client never sees
KEPT = ("tools/list",)  # the requests answered from what the SDK said before (besides initialize and ping)


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nerve" / "mcp"


def answers_key() -> str:
    """What the answers are made of: this package's code and the contract's schemas (an editable install
    changes them without a new version), the version, and the SDK's own version (its package's files)."""
    import nerve_cli  # the package's own folder (a top-level import of the package from inside it reads oddly)

    root = Path(nerve_cli.__file__).parent
    digest = hashlib.sha256(nerve_cli.__version__.encode())
    for folder, pattern in ((root / "mcp", "*.py"), (root / "contract" / "schemas", "*.json"),
                            (root / "contract", "*.py")):
        for path in sorted(folder.glob(pattern)):
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    sdk = _sdk_marker()
    digest.update(sdk.encode())
    return digest.hexdigest()[:32]


def _sdk_marker() -> str:
    """The installed `mcp` distribution's metadata folder name (it holds the version), found without importing it."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(("mcp-", "mcp_types-")) and name.endswith(".dist-info"):
                return ",".join(sorted(n for n in names if n.startswith(("mcp-", "mcp_types-"))
                                       and n.endswith(".dist-info")))
    return "no-sdk"


class Answers:
    """The SDK's answers kept per key: `initialize`'s result for each protocol version a client asked for, and
    the results of the `KEPT` requests for each version the SDK negotiated (the SDK decides both; nothing
    here second-guesses its negotiation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, dict[str, Any]] = {}

    @classmethod
    def here(cls) -> Answers:
        return cls(cache_dir() / f"{answers_key()}.json")

    def load(self) -> bool:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            return False
        self.data = data
        return bool(data.get("initialize"))

    def get(self, method: str, version: Any) -> Any:
        """The kept result of `method` (initialize: for the version the client asked; others: for the version
        negotiated), else None."""
        return self.data.get(method, {}).get(version) if isinstance(version, str) else None

    def keep(self, method: str, version: Any, result: Any) -> None:
        """Record the SDK's result (written at once: a client may close the session at any time)."""
        if not isinstance(version, str) or self.data.get(method, {}).get(version) == result:
            return
        self.data.setdefault(method, {})[version] = result
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache: the next start asks the SDK again
