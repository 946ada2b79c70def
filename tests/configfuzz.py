"""Seeded mutants of the template nerve.yaml: bytes, structure, depth, aliases, size.

`mutants(seed, count)` is deterministic for a seed, so a failing case can be
replayed alone: `mutant(seed, index)` rebuilds exactly that one.
"""

from __future__ import annotations

import random
from pathlib import Path

import yaml

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance" / "nerve.yaml"
KINDS = ("bytes", "structure", "depth", "aliases", "lines", "size")


def template() -> bytes:
    return TEMPLATE.read_bytes()


def mutant(seed: int, index: int) -> tuple[str, bytes]:
    """The `index`-th mutant of a run seeded with `seed`: (kind, file content)."""
    rng = random.Random(f"{seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    return kind, _MAKERS[kind](rng, template())


def mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    return [mutant(seed, i) for i in range(count)]


# bytes: flips, inserts and deletes, some outside UTF-8 ------------------------------
_ODD_BYTES = [b"\xff", b"\xfe", b"\x00", b"\xc3", b"\xe2\x80", b"\t", b"\r", b"\xef\xbb\xbf", b"\x1b", b"\x85",
              b"\xe2\x80\xa8", b":", b"-", b"[", b"{", b"&", b"*", b"!", b"%", b"'", b'"', b"#", b"|", b">", b"?"]


def _bytes(rng: random.Random, text: bytes) -> bytes:
    data = bytearray(text)
    for _ in range(rng.randint(1, 12)):
        at = rng.randrange(len(data) + 1)
        action = rng.random()
        if action < 0.4:
            data[at:at] = rng.choice(_ODD_BYTES)
        elif action < 0.7 and at < len(data):
            data[at] = rng.randrange(256)
        else:
            del data[at:at + rng.randint(1, 40)]
    return bytes(data)


# structure: the parsed template with values of the wrong kind, keys renamed or dropped ----
def _random_value(rng: random.Random, depth: int = 0) -> object:
    choice = rng.randrange(12)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**70), 10**400 // 10**399])
    if choice == 3:
        return rng.choice([0.5, -3.25, 1e308, float("inf"), float("nan")])
    if choice == 4:
        return rng.choice(["", "5s", "-5s", "0s", "99999999d", "1e9s", "nerve-health", "x" * rng.randint(60, 5000),
                           "Cpu Usage", "../../etc", "a|b|c", "0 9 * * 1-5", "Mars/Olympus", "500ms", "yes", "off"])
    if choice == 5 and depth < 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if choice == 6 and depth < 4:
        return {_random_key(rng): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if choice == 7:
        return rng.choice(["cpu-percent", "memory-usage", "disk-usage", "system", "default"])
    if choice == 8:
        return rng.randint(-10, 10**6)
    return rng.choice(["10s", "1m", "3", "80%", "300MB", "queue", "drop", "true", "[a, b]", "task.created"])


def _random_key(rng: random.Random) -> object:
    return rng.choice(["group", "throttle", "timeout", "grace_period", "peers", "enabled", "interval", "on",
                       "sense", "cron", "timezone", "debounce", "max_wait", "jitter", "concurrency", "overflow",
                       "max_queue", "idempotent", "bogus", "workflow", "memory_limit", "cpu_limit", "cpu_window",
                       "max_rounds", "health_interval", "senses", "engine", 0, 1.5, True, None, "x" * 300,
                       "nerve-health", "New Sense", "a" * 65])


def _mutate(rng: random.Random, node: object, depth: int = 0) -> object:
    if isinstance(node, dict) and node and rng.random() < 0.8:
        key = rng.choice(list(node))
        action = rng.random()
        if action < 0.45:
            node[key] = _mutate(rng, node[key], depth + 1)
        elif action < 0.6:
            node[key] = _random_value(rng)
        elif action < 0.7:
            del node[key]
        elif action < 0.85:
            node[_random_key(rng)] = node.pop(key)
        else:
            node[_random_key(rng)] = _random_value(rng)
        return node
    if isinstance(node, list) and node and rng.random() < 0.8:
        at = rng.randrange(len(node))
        action = rng.random()
        if action < 0.5:
            node[at] = _mutate(rng, node[at], depth + 1)
        elif action < 0.7:
            node.insert(at, _random_value(rng))
        elif action < 0.8:
            del node[at]
        else:
            node.append(node[at] if rng.random() < 0.5 else _random_value(rng))
        return node
    return _random_value(rng)


def _structure(rng: random.Random, text: bytes) -> bytes:
    data = yaml.safe_load(text)
    data["groups"] = data.get("groups") or {}
    data["workflows"] = data.get("workflows") or {"cleanup": {"concurrency": 1}}
    for _ in range(rng.randint(1, 6)):
        data = _mutate(rng, data)
    senses = data.get("senses") if isinstance(data, dict) else None
    if isinstance(senses, dict) and senses and rng.random() < 0.3:
        # a value of the wrong kind where names are expected: a list as a group name, a mapping as a peer
        name = rng.choice(list(senses))
        if isinstance(senses[name], dict):
            senses[name][rng.choice(["group", "peers", "timeout"])] = rng.choice([["x", "y"], {"a": 1}, [[1]]])
    if isinstance(data, dict) and rng.random() < 0.1:
        # many senses that all listen to each other: a loop check that enumerated loops never ended
        names = [f"s{i}" for i in range(rng.randint(8, 30))]
        data["senses"] = {n: {} for n in names}
        data["reflexes"] = [{"sense": n, "on": [m for m in names if m != n]} for n in names]
    out = yaml.dump(data, default_flow_style=rng.choice([None, True, False]), allow_unicode=rng.random() < 0.5,
                    width=rng.choice([80, 10**6]))
    if rng.random() < 0.1:  # a complex key (`? [a, b]`), which only hand-written YAML has
        out = out + "groups:\n  ? [a, b]\n  : {memory_limit: 1MB}\n"
    return out.encode("utf-8", "surrogatepass")


# depth: a value nested hundreds or thousands of levels, flow or block ---------------
def _depth(rng: random.Random, text: bytes) -> bytes:
    levels = rng.choice([40, 64, 65, 100, 300, 1000, 3000, 5000])
    style = rng.randrange(4)
    if style == 0:
        nested = "[" * levels + "1" + "]" * levels
    elif style == 1:
        nested = "{a: " * levels + "1" + "}" * levels
    elif style == 2:
        nested = "- " * levels + "x"
    else:
        lines = "".join(" " * (i + 2) + "k:\n" for i in range(min(levels, 800)))
        return text + b"\nengine:\n" + lines.encode()
    where = rng.choice([b"senses:\n  deep:\n    peers: ", b"reflexes:\n  - sense: ", b"extra: ", b"engine:\n  max_rounds: "])
    return text.replace(b"\nsenses:\n", b"\nignored_senses:\n", 1) + b"\n" + where + nested.encode() + b"\n"


# aliases: billion laughs, self references, merges, undefined anchors -----------------
def _aliases(rng: random.Random, text: bytes) -> bytes:
    shape = rng.randrange(5)
    if shape == 0:
        levels, fan = rng.randint(3, 12), rng.randint(2, 12)
        lines = [f"a0: &a0 [{', '.join(['lol'] * fan)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
        where = rng.choice(["senses", "reflexes", "engine", "x"])
        return ("\n".join(lines) + f"\n{where}: *a{levels - 1}\n").encode()
    if shape == 1:
        return text + b"\nloop: &loop [*loop, *loop]\n"
    if shape == 2:
        return text.replace(b"  cpu-percent:\n", b"  cpu-percent: &base\n", 1).replace(
            b"  memory-usage:\n", b"  memory-usage:\n    <<: *base\n", 1)
    if shape == 3:
        return text + b"\nx: *nowhere\n"
    body = "".join(f"  s{i}: &s{i} {{group: g, peers: [{', '.join(f'*s{j}' for j in range(i))}]}}\n" for i in range(rng.randint(5, 30)))
    return b"senses:\n" + body.encode()


# lines: the template's lines shuffled, duplicated, re-indented, tabbed -----------------
def _lines(rng: random.Random, text: bytes) -> bytes:
    lines = text.split(b"\n")
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(lines))
        action = rng.randrange(5)
        if action == 0:
            lines.insert(rng.randrange(len(lines)), lines[at])
        elif action == 1:
            lines[at] = b" " * rng.randint(0, 9) + lines[at].lstrip()
        elif action == 2:
            lines[at] = lines[at].replace(b"  ", b"\t", 1)
        elif action == 3:
            del lines[at]
        else:
            other = rng.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
    return b"\n".join(lines)


# size: far more than any real config -------------------------------------------------
def _size(rng: random.Random, text: bytes) -> bytes:
    shape = rng.randrange(4)
    if shape == 0:
        return text + b"# " + b"x" * rng.choice([10**5, 2 * 10**6]) + b"\n"
    if shape == 1:
        count = rng.choice([500, 20000])
        senses = "".join(f"  s{i}: {{group: g{i % 5}}}\n" for i in range(count))
        return ("senses:\n" + senses).encode()
    if shape == 2:
        return b"senses:\n  cpu-percent:\n    group: '" + b"y" * rng.choice([10**4, 10**6]) + b"'\n"
    return text * rng.choice([2, 50, 400])


_MAKERS = {"bytes": _bytes, "structure": _structure, "depth": _depth, "aliases": _aliases,
           "lines": _lines, "size": _size}
