"""Answer links: a signed, single-use, expiring token that lets a person answer one waiting thread from a URL.

A token is `base64url(claims JSON) . base64url(HMAC-SHA256(key, claims))`;
its claims name the thread (`r`), the question (`q`, null: every open one),
who it was made for (`b`: their answer is recorded as theirs), when it expires
(`e`, unix seconds) and a nonce (`n`). The key is 32 random bytes in
`data/link.key` (0600, the instance's own): `rotate_key` replaces it, and
every link made before then stops verifying. A used nonce is kept in
`data/links.db` once the answer it carried was taken (an answer refused
leaves the link usable), so a link answers at most once, across engine
restarts; two answers racing on one link are decided on the engine's loop,
one after the other.

`check` decides, in this order: 401 a token that is malformed or not signed
with the current key; 410 one past its expiry; 409 one used already.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import orjson

from nerve_cli.home import Layout
from nerve_cli.store.sqlitefile import open_writer, private_dir

KEY_FILE = "link.key"
USED_DB = "links.db"
MAX_TOKEN = 2048  # characters: a token carries a run id, a question id, a name and two numbers
SCHEMA = "CREATE TABLE IF NOT EXISTS used (nonce TEXT PRIMARY KEY, run_id TEXT NOT NULL, used_ms INTEGER NOT NULL)"


class LinkRefused(Exception):
    """A token that cannot answer: `status` is the HTTP answer (401, 409, 410), the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Claims:
    run_id: str
    question: str | None
    by: str
    expires: int  # unix seconds
    nonce: str

    def to_json(self) -> dict[str, object]:
        return {"r": self.run_id, "q": self.question, "b": self.by, "e": self.expires, "n": self.nonce}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_path(home: Path) -> Path:
    return Layout(Path(home)).data / KEY_FILE


def load_key(home: Path, create: bool = True) -> bytes | None:
    """The instance's link key (made on first use when `create`), else None."""
    path = key_path(home)
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        if not create:
            return None
    except ValueError:
        raise LinkRefused(401, f"{path} is not a link key (64 hex digits); make a new one with "
                               "`nerve thread link --rotate-key`") from None
    return rotate_key(home)


def rotate_key(home: Path) -> bytes:
    """A new key, written atomically (0600): every link made with the old one stops working."""
    path = key_path(home)
    private_dir(path.parent)
    key = secrets.token_bytes(32)
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex() + "\n")
    os.replace(tmp, path)
    return key


def mint(home: Path, run_id: str, question: str | None, by: str, expires: int) -> str:
    """A token for `run_id` (one question, or every open one), answered as `by`'s, valid until `expires`."""
    key = load_key(home)
    assert key is not None
    claims = orjson.dumps(Claims(run_id, question, by, expires, secrets.token_urlsafe(12)).to_json())
    return f"{_b64(claims)}.{_b64(hmac.new(key, claims, hashlib.sha256).digest())}"


def check(home: Path, token: str, now_s: float) -> Claims:
    """The token's claims; LinkRefused 401 (malformed, tampered, another key), 410 (expired), 409 (used)."""
    claims = verify(home, token)
    if now_s >= claims.expires:
        raise LinkRefused(410, f"this link to {claims.run_id} expired; ask for a new one (`nerve thread link "
                               f"{claims.run_id}`)")
    if used(home, claims.nonce):
        raise LinkRefused(409, f"this link to {claims.run_id} was used already: a link answers once")
    return claims


def verify(home: Path, token: str) -> Claims:
    """The claims of a token signed with the current key; LinkRefused 401 otherwise."""
    bad = LinkRefused(401, "this link is not valid: it was changed, cut short, or made with a key that was "
                           "rotated since")
    if not isinstance(token, str) or len(token) > MAX_TOKEN or token.count(".") != 1:
        raise bad
    body, signature = token.split(".")
    key = load_key(home, create=False)
    try:
        claims, given = _unb64(body), _unb64(signature)
    except ValueError:
        raise bad from None
    if key is None or not hmac.compare_digest(hmac.new(key, claims, hashlib.sha256).digest(), given):
        raise bad
    try:
        data = orjson.loads(claims)
        return Claims(str(data["r"]), data["q"] if isinstance(data["q"], str) else None, str(data["b"]),
                      int(data["e"]), str(data["n"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise bad from None


def _db(home: Path) -> sqlite3.Connection:
    conn = open_writer(Layout(Path(home)).data / USED_DB, fix="delete it: used links then answer again until "
                                                               "they expire")
    conn.execute(SCHEMA)
    return conn


def used(home: Path, nonce: str) -> bool:
    path = Layout(Path(home)).data / USED_DB
    if not path.exists():
        return False
    conn = _db(home)
    try:
        return conn.execute("SELECT 1 FROM used WHERE nonce = ?", (nonce,)).fetchone() is not None
    finally:
        conn.close()


def spend(home: Path, claims: Claims, now_ms: int) -> bool:
    """Mark the link used; False when it was already (another request took it first)."""
    conn = _db(home)
    try:
        cur = conn.execute("INSERT OR IGNORE INTO used (nonce, run_id, used_ms) VALUES (?, ?, ?)",
                           (claims.nonce, claims.run_id, now_ms))
        return cur.rowcount == 1
    finally:
        conn.close()
