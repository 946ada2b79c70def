"""Where the engine listens for HTTP (`--metrics`, `engine.metrics`): one grammar, `HOST:PORT` or a bare port.

`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:9464` or `9464` (loopback only). A
host is a name or an IP address; port 0 lets the system pick a free one. Only
the standard library: the CLI's start-up may import this.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = ("localhost", "ip6-localhost")


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect: a loopback IP or `localhost`."""
        if self.host.lower() in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a host name: it may resolve to anything
            return False

    def url(self, path: str) -> str:
        return f"http://{self}{path}"


def parse_address(value: object, *, example_port: int = 9464) -> ListenAddress:
    """`127.0.0.1:9464`, `[::1]:9464` or a bare `9464` (loopback) → ListenAddress; ValueError saying what is expected."""
    expected = f"expected HOST:PORT such as 127.0.0.1:{example_port} (or just a port, on loopback)"
    if isinstance(value, ListenAddress):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{expected}, got {value!r}")
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if host.startswith("[") != host.endswith("]") or (":" in host.strip("[]") and not host.startswith("[")):
        raise ValueError(f"{expected} (an IPv6 host goes in brackets: [::1]:{example_port}), got {text!r}")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{expected}, got {text!r}")
    return ListenAddress(host.strip("[]") or LOOPBACK, int(port))
