"""`nerve service`: keep `nerve run` alive with the machine's own supervisor (systemd, launchd).

The engine watches itself (`nerve-health`), but if the engine process dies,
nothing inside it can help: the last line of defence is the OS supervisor. On
Linux that is a systemd *user* unit, on macOS a launchd agent; both run
`python -m nerve_cli run --home HOME` with this interpreter (the environment the
workers use) and restart it when it fails. A clean stop (exit 0) stays stopped.

The unit's name carries the instance folder's name and a short hash of its
path, so two instances on one machine get two units.
"""

from __future__ import annotations

import hashlib
import os
import plistlib
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.atomicfile import write_atomic
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout

RESTART_SEC = 5
USER_SESSION = ("is a systemd user session running? `loginctl enable-linger` keeps one for a user who is not "
                "logged in")
STOP_MARGIN = 10  # seconds beyond engine.shutdown_timeout before the supervisor kills the engine


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Environment:
    """What the engine's environment gets beyond the supervisor's own: keys, LLM_USER_PATH...

    `values` are written to a private file (mode 0600) the unit reads, never into the unit itself; `files` are
    the user's own env files, read by the supervisor at each start (systemd) or copied in at install (launchd).
    """

    values: tuple[tuple[str, str], ...] = ()
    files: tuple[Path, ...] = ()

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.values]


def environment(specs: list[str], files: list[Path], environ: dict[str, str] | None = None) -> Environment:
    """`--env NAME=VALUE` or `--env NAME` (its value here, now) and `--env-file PATH` → Environment."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not ENV_NAME.match(name):
            raise NerveError(f"--env {spec!r}: expected NAME=VALUE or NAME (letters, digits and _, not starting "
                             "with a digit)")
        if not sep:
            if name not in environ:
                raise NerveError(f"--env {name}: it is not set here, so there is no value to take; "
                                 f"give one with --env {name}=VALUE")
            value = environ[name]
        if "\n" in value or "\r" in value or "\0" in value:
            raise NerveError(f"--env {name}: a value on one line only (no newline or NUL)")
        values[name] = value
    resolved = []
    for file in files:
        path = Path(file).expanduser().resolve()
        if not path.is_file():
            raise NerveError(f"--env-file {file}: no such file (lines of NAME=VALUE)")
        read_env_file(path)  # refuses a line that is not NAME=VALUE now, not at the service's start
        resolved.append(path)
    return Environment(tuple(values.items()), tuple(resolved))


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=VALUE lines (systemd's EnvironmentFile= format: # comments, blank lines, optional quotes)."""
    out: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", ";")):
            continue
        name, sep, value = text.partition("=")
        name = name.strip().removeprefix("export ").strip()
        if not sep or not ENV_NAME.match(name):
            raise NerveError(f"{path}:{number}: expected NAME=VALUE, got {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\") if value[0] == '"' else value[1:-1]
        out[name] = value
    return out


def env_file_text(env: Environment) -> str:
    """The private env file: `NAME="value"` lines, quoted as systemd's EnvironmentFile= reads them."""
    lines = ["# written by `nerve service install --env`: the engine's environment (keep it private)"]
    for name, value in env.values:
        lines.append(f'{name}="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Unit:
    platform: str  # linux | macos
    name: str  # nerve-uncaged-nerve-1a2b3c.service, or dev.nerve.uncaged-nerve-1a2b3c
    path: Path  # where the file goes
    text: str  # its content
    argv: tuple[str, ...]  # what it runs
    env: Environment = Environment()
    env_path: Path | None = None  # the private file holding env.values (systemd), when there are any


@dataclass
class ServiceState:
    unit: Unit
    installed: bool
    enabled: str = "unknown"  # systemctl is-enabled / launchctl: enabled | disabled | unknown
    active: str = "unknown"  # active | inactive | failed | unknown
    engine: bool = False  # an engine answers on this instance's control socket
    commands: list[list[str]] = field(default_factory=list)  # what install/uninstall ran
    problem: str | None = None  # why the supervisor could not say whether the unit is enabled or active


def this_platform() -> str:
    return "macos" if sys.platform == "darwin" else "linux"


def unit_for(home: Path, platform: str | None = None, *, stop_timeout: float = 5.0,
             env: Environment = Environment(), metrics: str | None = None) -> Unit:
    """The unit (systemd) or agent (launchd) that runs the engine for `home` (`metrics`: its --metrics)."""
    home = Path(home).resolve()
    platform = platform or this_platform()
    slug = _slug(home)
    argv = (sys.executable, "-m", "nerve_cli", "run", "--home", str(home), *(("--metrics", metrics) if metrics else ()))
    if platform == "macos":
        label = f"dev.nerve.{slug}"
        path = Path.home() / "Library" / "LaunchAgents" / f"{label}.plist"
        return Unit(platform, label, path, _plist(label, home, argv, env), argv, env)
    if platform != "linux":
        raise NerveError(f"unknown platform {platform!r}: use linux (systemd) or macos (launchd)")
    name = f"nerve-{slug}.service"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    env_path = config / "nerve" / f"{name}.env" if env.values else None
    return Unit(platform, name, config / "systemd" / "user" / name,
                _systemd(home, argv, stop_timeout, env, env_path), argv, env, env_path)


def _slug(home: Path) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", home.name.lower()).strip("-") or "instance"
    return f"{base[:40]}-{hashlib.sha256(str(home).encode()).hexdigest()[:6]}"


def _systemd(home: Path, argv: tuple[str, ...], stop_timeout: float, env: Environment, env_path: Path | None) -> str:
    files = [*([env_path] if env_path else []), *env.files]
    return "\n".join([
        "[Unit]",
        f"Description=Nerve engine for {_escape_text(str(home))}",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={' '.join(_quote(a) for a in argv)}",
        f"WorkingDirectory={_escape_text(str(home))}",  # a path, taken whole: never quoted
        "Environment=PYTHONUNBUFFERED=1",
        *([f"# {', '.join(env.names)}: in {_escape_text(str(env_path))} (mode 0600), not here"] if env_path else []),
        *(f"EnvironmentFile={_escape_text(str(f))}" for f in files),
        "# a crash restarts the engine; a clean stop (exit 0) stays stopped",
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}",
        "# SIGTERM lets running computes finish (engine.shutdown_timeout) before workers stop",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={int(stop_timeout) + STOP_MARGIN}",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def _quote(arg: str) -> str:
    """One ExecStart/WorkingDirectory word: specifiers (%) and variables ($) escaped, quoted when needed."""
    text = arg.replace("%", "%%").replace("$", "$$")
    if re.search(r'[\s"\'\\;]', text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _escape_text(text: str) -> str:
    return text.replace("%", "%%")


def _plist(label: str, home: Path, argv: tuple[str, ...], env: Environment) -> str:
    log = str(Layout(home).data / "engine.log")
    variables = {"PYTHONUNBUFFERED": "1"}
    for file in env.files:  # launchd has no EnvironmentFile: their values are copied in at install
        variables.update(read_env_file(file))
    variables.update(env.values)
    body = {
        "Label": label,
        "ProgramArguments": list(argv),
        "WorkingDirectory": str(home),
        "EnvironmentVariables": variables,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # restart after a failure, not after a clean stop
        "ThrottleInterval": RESTART_SEC,
        "StandardOutPath": log,
        "StandardErrorPath": log,
    }
    return plistlib.dumps(body, sort_keys=False).decode()


def install(home: Path, unit: Unit) -> ServiceState:
    """Write the unit and enable + start it."""
    Layout(Path(home)).data.mkdir(parents=True, exist_ok=True)
    unit.path.parent.mkdir(parents=True, exist_ok=True)
    if unit.env_path is not None:
        _write_private(unit.env_path, env_file_text(unit.env))
    if unit.platform == "macos" and (unit.env.values or unit.env.files):
        _write_private(unit.path, unit.text)  # it holds the values
    else:
        unit.path.write_text(unit.text, encoding="utf-8")
    commands = _install_commands(unit)
    for argv in commands:
        _run(argv, missing="the unit file is written, start it with your supervisor (or run `nerve run` yourself)",
             failed=f"the unit file is written ({USER_SESSION})")
    state = status(home, unit)
    state.commands = commands
    return state


def uninstall(home: Path, unit: Unit) -> ServiceState:
    """Stop and disable the unit, remove its file."""
    if not unit.path.exists():
        raise NerveError(f"no service is installed for {home} ({unit.path} does not exist)")
    before, after = _uninstall_commands(unit)
    for argv in before:
        # systemctl stops and disables a stopped or disabled unit without complaint, so its failure means the
        # unit may still run: keep the file. launchctl fails on an agent that is not loaded, which is fine.
        _run(argv, check=unit.platform == "linux",
             missing=f"the unit file is kept: stop and disable it with your supervisor, then remove {unit.path}",
             failed=f"the unit file is kept ({USER_SESSION}; where none runs, nothing runs the unit: "
                    f"remove {unit.path} yourself)")
    unit.path.unlink()
    env_path = _env_path(unit)
    if env_path.exists():
        env_path.unlink()
    for argv in after:
        _run(argv, missing=f"{unit.path} is removed", failed=f"{unit.path} is removed ({USER_SESSION})")
    state = status(home, unit)
    state.commands = before + after
    return state


def _env_path(unit: Unit) -> Path:
    """Where install put the unit's private env file (systemd), whatever this invocation's --env."""
    return unit.env_path or unit.path.parent.parent.parent / "nerve" / f"{unit.name}.env"


def _write_private(path: Path, text: str) -> None:
    """Written 0600 from its first byte (a folder of its own 0700): it holds keys."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, text, 0o600)


def status(home: Path, unit: Unit) -> ServiceState:
    """Whether the unit is installed, enabled and active (whether an engine answers is the caller's to ask)."""
    state = ServiceState(unit, unit.path.exists())
    if unit.platform == "linux" and state.installed:
        state.enabled, enabled_problem = _ask(["systemctl", "--user", "is-enabled", unit.name])
        state.active, active_problem = _ask(["systemctl", "--user", "is-active", unit.name])
        problem = enabled_problem or active_problem
        state.problem = f"{problem} ({USER_SESSION})" if problem else None
    elif unit.platform == "macos" and state.installed:
        loaded = _ask(["launchctl", "print", f"gui/{os.getuid()}/{unit.name}"])[0] != "unknown"
        state.enabled = state.active = "active" if loaded else "inactive"
    return state


def _install_commands(unit: Unit) -> list[list[str]]:
    if unit.platform == "macos":
        return [["launchctl", "bootstrap", f"gui/{os.getuid()}", str(unit.path)]]
    return [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", unit.name]]


def _uninstall_commands(unit: Unit) -> tuple[list[list[str]], list[list[str]]]:
    """(before the file is removed, after)."""
    if unit.platform == "macos":
        return [["launchctl", "bootout", f"gui/{os.getuid()}/{unit.name}"]], []
    return [["systemctl", "--user", "disable", "--now", unit.name]], [["systemctl", "--user", "daemon-reload"]]


def _run(argv: list[str], *, missing: str, failed: str, check: bool = True) -> None:
    """Run one supervisor command; `missing` and `failed` say where that leaves the unit file when it cannot."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise NerveError(f"`{argv[0]}` is not available here; {missing}") from None
    if check and done.returncode != 0:
        raise NerveError(f"`{' '.join(argv)}` failed: {_why(done)}; {failed}")


def _ask(argv: list[str]) -> tuple[str, str | None]:
    """(the answer, or "unknown"; why there is none, when the command failed without answering)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return "unknown", f"`{argv[0]}` is not available here"
    except subprocess.TimeoutExpired:
        return "unknown", f"`{' '.join(argv)}` did not answer within 10s"
    if argv[0] == "launchctl":  # a failure means the agent is not loaded
        return ("loaded" if done.returncode == 0 else "unknown"), None
    out = done.stdout.strip().splitlines()
    if out:  # is-enabled/is-active answer on stdout even when their exit code is not 0 (disabled, inactive)
        return out[0], None
    return "unknown", f"`{' '.join(argv)}` failed: {_why(done)}"


def _why(done: subprocess.CompletedProcess) -> str:
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"
