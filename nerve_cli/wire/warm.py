"""The kernel <-> warm template messages: one datagram each on a SOCK_SEQPACKET socket pair.

template → kernel, once at start:   {"hello": pid}           (the runtime is imported: forks can start)
kernel → template, per worker:      {"start": {"argv", "env"}} with three fds (SCM_RIGHTS): the
                                    worker's stdin (read end), stdout and stderr (write ends), in that order
template → kernel, per request:     {"pid": pid} (forked) or {"error": "why"} (not forked; start it plainly)

The template answers requests one at a time, in order. The kernel closing its
end is the template's signal to exit.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

WORKER_FDS = 3  # stdin, stdout, stderr
MAX_DATAGRAM = 1024 * 1024  # a request carries the environment: far below this


@dataclass(frozen=True)
class StartRequest:
    argv: tuple[str, ...]  # what follows `python -m nerve_cli.worker`
    env: dict[str, str]

    def encode(self) -> bytes:
        return orjson.dumps({"start": {"argv": list(self.argv), "env": self.env}})

    @classmethod
    def decode(cls, data: bytes) -> StartRequest:
        """The request in `data`; ValueError when it is not one."""
        try:
            body = orjson.loads(data)["start"]
            argv, env = body["argv"], body["env"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"not a start request: {exc}") from None
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                and isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise ValueError("a start request needs argv: [str] and env: {str: str}")
        return cls(tuple(argv), env)


def hello(pid: int) -> bytes:
    return orjson.dumps({"hello": pid})


def started(pid: int) -> bytes:
    return orjson.dumps({"pid": pid})


def refused(why: str) -> bytes:
    return orjson.dumps({"error": why})


def read_reply(data: bytes, key: str) -> int:
    """The pid in a `hello` or `pid` reply; ValueError with the template's reason otherwise."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ValueError(f"unreadable reply {data[:80]!r}") from None
    if isinstance(body, dict) and isinstance(body.get(key), int):
        return int(body[key])
    if isinstance(body, dict) and "error" in body:
        raise ValueError(str(body["error"]))
    raise ValueError(f"unexpected reply {data[:80]!r}")
