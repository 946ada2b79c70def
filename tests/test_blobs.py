"""Content-addressed blob store: layout, round trip, de-duplication, atomicity."""

from __future__ import annotations

import hashlib
import os

import pytest

from nerve_cli.store.blobs import BlobNotFound, BlobStore


def test_put_get_round_trip_and_layout(tmp_path) -> None:
    store = BlobStore(tmp_path / "blobs")
    data = b"\x00binary\xffpayload" * 1000
    sha = store.put(data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert store.path(sha) == tmp_path / "blobs" / sha[:2] / sha[2:]
    assert store.get(sha) == data and store.exists(sha)


def test_put_is_deduplicated(tmp_path) -> None:
    store = BlobStore(tmp_path)
    sha = store.put(b"same")
    os.utime(store.path(sha), (1, 1))  # stored long ago
    before = os.stat(store.path(sha))
    assert store.put(bytearray(b"same")) == sha
    after = os.stat(store.path(sha))
    assert before.st_ino == after.st_ino  # not rewritten
    assert after.st_mtime > 1  # but its time renewed: gc counts a blob's age from its last put
    assert [p.name for p in store.path(sha).parent.iterdir()] == [sha[2:]]  # no temp files left


def test_different_content_different_blobs(tmp_path) -> None:
    store = BlobStore(tmp_path)
    assert store.put(b"a") != store.put(b"b")
    assert store.get(store.put(b"")) == b""


def test_missing_and_invalid_hashes(tmp_path) -> None:
    store = BlobStore(tmp_path)
    with pytest.raises(BlobNotFound, match="no blob"):
        store.get("0" * 64)
    assert not store.exists("0" * 64)
    with pytest.raises(ValueError, match="not a blob hash"):
        store.path("../../etc/passwd")
    with pytest.raises(TypeError, match="bytes"):
        store.put("text")  # type: ignore[arg-type]


def test_stored_blob_is_read_only(tmp_path) -> None:
    store = BlobStore(tmp_path)
    sha = store.put(b"immutable")
    assert not os.access(store.path(sha), os.W_OK) or os.geteuid() == 0
    assert store.path(sha).stat().st_mode & 0o222 == 0
