"""The nerve.yaml model: the one source of truth for what a valid config is.

Durations are written as `500ms`, `5s`, `10m`, `1h30m`, `1d`, `1w` (nerve_cli.durations: the one grammar,
shared with --since/--until) and held as float seconds.
Names follow `[a-z0-9][a-z0-9._-]*`, at most 64 characters.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import datetime, timezone
from types import ModuleType
from typing import Annotated, Callable, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from nerve_cli.address import ListenAddress, parse_address
from nerve_cli.durations import format_duration, parse_duration  # noqa: F401  (re-exported: one duration grammar)
from nerve_cli.names import BUILTIN_SENSES as BUILTIN_SENSES  # re-exported: the built-in senses' names
from nerve_cli.names import HEALTH_SENSE as HEALTH_SENSE
from nerve_cli.names import (  # re-exported: one naming rule
    NAME_MAX,
    NAME_RE,
    binding_param,
    channel_problem,
    default_host,
    host_problem,
    is_pattern,
    pattern_problem,
    subject_name_problem,
)
from nerve_cli.names import THREADS_SENSE as THREADS_SENSE
from nerve_cli.vocab.sources import SourceKind

# Nerve's own models are built without looking for third-party pydantic plugins: a plugin (logfire, ...) observes
# an application's validation, not nerve.yaml's, and looking for one reads the metadata of every installed package,
# 28-30 ms of a 250 ms `nerve config check`. pydantic's own switch, set only while this module's classes are built
# (every validator of the config is made here), so user code and child processes are not affected.
# pydantic's plugin loader also imports importlib.metadata when it is first imported, off or not (13 ms: email,
# zipfile, csv): while these classes are built, a loader that finds no plugin stands in for it (unless the real
# one is loaded already), and it is taken away after, so a later model's validators import the real one.
_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
_plugins_before = os.environ.get(_PLUGINS_VARIABLE)
os.environ[_PLUGINS_VARIABLE] = "__all__"
_LOADER = "pydantic.plugin._loader"
_no_plugins = None
if _LOADER not in sys.modules:
    _no_plugins = sys.modules[_LOADER] = ModuleType(_LOADER, "no plugins while Nerve's config models are built")
    _no_plugins.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() -> ()


def check_name(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a name (string), got {value!r}")
    if len(value) > NAME_MAX:
        raise ValueError(f"name {value!r} is {len(value)} characters; at most {NAME_MAX} allowed")
    if not NAME_RE.match(value):
        raise ValueError(
            f"name {value!r} is not allowed: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return value


SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)\Z")
_SIZE_BYTES = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def parse_size(value: object) -> int:
    """`'300MB'` → 300_000_000; `'512MiB'` → 536_870_912."""
    match = SIZE_RE.match(value.strip()) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"expected a size like 300MB, 1GB or 512MiB, got {value!r}")
    return int(float(match.group(1)) * _SIZE_BYTES[match.group(2)])


def parse_percent(value: object) -> float:
    """`'80%'` → 80.0 (percent of one core; above 100% means several cores)."""
    text = value.strip() if isinstance(value, str) else ""
    try:
        number = float(text[:-1]) if text.endswith("%") else None
    except ValueError:
        number = None
    if number is None or number <= 0:
        raise ValueError(f"expected a CPU share like 80% (of one core), got {value!r}")
    return number


def check_model_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ValueError(f"expected an llm model id or alias like gpt-4o-mini (see `llm models`), got {value!r}")
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
Address = Annotated[ListenAddress, BeforeValidator(parse_address)]  # HOST:PORT or a port (loopback)
ModelId = Annotated[str, BeforeValidator(check_model_id)]
Size = Annotated[int, BeforeValidator(parse_size)]
Percent = Annotated[float, BeforeValidator(parse_percent)]
Name = Annotated[str, BeforeValidator(check_name)]
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def _check_module(value: object) -> str:
    if not isinstance(value, str) or len(value) > 200 or not MODULE_RE.match(value):
        raise ValueError(f"expected a module's dotted name, like psutil or httpx._client, got {value!r}")
    return value


ModuleName = Annotated[str, BeforeValidator(_check_module)]


def _check_channel(value: str) -> str:
    problem = channel_problem(value)
    if problem is None and is_pattern(value):
        problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _one_channel(value: str) -> str:
    if is_pattern(value):
        raise ValueError(f"{value!r} is a pattern: a channel's settings are for one channel; name it in full "
                         "(patterns like pr.* belong in a reflex's on:)")
    return value


def _agent_source(value: str) -> str:
    if is_pattern(value):
        raise ValueError(f"{value!r} is a pattern: an agent hears named sources; list the channels in full "
                         "(patterns like pr.* are for a reflex's on:)")
    return value


Channel = Annotated[str, AfterValidator(_check_channel)]  # an `on:` source: a name, or a pattern (`pr.*`, `ci.>`)
OneChannel = Annotated[str, AfterValidator(_check_channel), AfterValidator(_one_channel)]
AgentSource = Annotated[str, AfterValidator(_check_channel), AfterValidator(_agent_source)]

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
HEADER_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # an HTTP field name: the characters a header name may hold


def _check_env_name(value: object) -> str:
    if not isinstance(value, str) or not ENV_NAME_RE.match(value):
        raise ValueError(f"expected the name of an environment variable like GITHUB_WEBHOOK_SECRET, got {value!r}")
    return value


def _check_header(value: object) -> str:
    if not isinstance(value, str) or not HEADER_RE.match(value):
        raise ValueError(f"expected an HTTP header name like X-Hub-Signature-256, got {value!r}")
    return value


EnvName = Annotated[str, BeforeValidator(_check_env_name)]
HeaderName = Annotated[str, BeforeValidator(_check_header)]


class _Model(BaseModel):
    # each field's docstring documents it: the nerve.yaml reference (docs/reference/config.md) is made from it, read
    # from the source by scripts/gen_reference.py (pydantic's use_attribute_docstrings parsed this file at every
    # import: ~100 ms of each `nerve config check`)
    model_config = ConfigDict(extra="forbid", frozen=True)


def _otlp_endpoint(value: object) -> object:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or "://" == value[-3:]:
        raise ValueError(f"expected an OTLP/HTTP endpoint like http://collector.example.com:4318, got {value!r}")
    return value


class OtelConfig(_Model):
    """Export traces over OpenTelemetry (needs `pip install 'nerve-cli[otel]'`); the OTEL_* variables apply too."""

    endpoint: Annotated[str, BeforeValidator(_otlp_endpoint)] | None = None  # as OTEL_EXPORTER_OTLP_ENDPOINT
    """Export traces over OpenTelemetry (OTLP/HTTP) to this collector, e.g. `http://collector:4318`;
    `OTEL_EXPORTER_OTLP_ENDPOINT` does the same (this key wins). Needs `pip install 'nerve-cli[otel]'`; see
    [Traces](../guides/traces.md). Applies at the next start."""
    capture_content: StrictBool = False  # export prompts and answers of model calls, and payloads
    """Export threads' prompts and models' answers too (as `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    Applies at the next start."""
    enabled: StrictBool = True
    """`false` turns traces off whatever the environment says. Applies at the next start."""


class EngineConfig(_Model):
    max_rounds: StrictInt = Field(default=100, ge=1)
    """Hard cap on the rounds of any workflow thread."""
    archive_after: Duration = 30 * 86400.0
    """Rows older than this are moved to `data/archive/` (daily, and by `nerve archive`)."""
    shutdown_timeout: Duration = 5.0
    """On Ctrl-C or SIGTERM, how long running computes may finish."""
    health_interval: Duration = 60.0
    """How often the built-in `nerve-health` sense runs."""
    failure_backoff_after: StrictInt = Field(default=3, ge=1)
    """Failures in a row (error, timeout, worker died) before a sense is backed off."""
    failure_backoff_first: Duration = 5.0
    """The first back-off of a failing sense, doubling up to `failure_backoff_max`; one success ends it."""
    failure_backoff_max: Duration = 600.0
    """The longest back-off of a failing sense."""
    quarantine_after: StrictInt = Field(default=3, ge=1)
    """A sense blamed for its worker's death this many times within `quarantine_window` is not computed for
    `quarantine_for` (survives restarts; `nerve sense reset` lifts it)."""
    quarantine_window: Duration = 3600.0
    """The window in which a sense's blamed worker deaths are counted."""
    quarantine_for: Duration = 3600.0
    """How long a quarantined sense is not computed."""
    respawn_backoff_first: Duration = 0.5
    """A dead worker (a sense group's or a workflow's) is respawned after this, doubling up to `respawn_backoff_max`
    while it keeps dying within 10s of its start."""
    respawn_backoff_max: Duration = 30.0
    """The longest pause before a dead worker is respawned."""
    metrics: Address | None = None  # serve Prometheus metrics here (`nerve run --metrics` overrides it)
    """Serve Prometheus metrics at `http://HOST:PORT/metrics` (`127.0.0.1:9464`, `[::1]:9464`, or a port: loopback);
    `nerve run --metrics` overrides it. Applies at the next start; see [Metrics and alerts](../guides/metrics.md)."""
    webhooks: Address | None = None  # serve POST /emit/CHANNEL here (`nerve run --webhooks` wins)
    """Serve `POST /emit/CHANNEL` at `HOST:PORT` (a bare port: loopback); `nerve run --webhooks` wins. Answer links
    (`/answer/TOKEN`) are served there too. A change applies at the next start; see
    [Webhooks](../guides/webhooks.md)."""
    ui: Address | None = None  # the engine runs `nerve ui --listen` here beside it (a service's console)
    """The engine runs the web console (`nerve ui --listen HOST:PORT`) beside it, as its own process: restarted when it
    dies, stopped with the engine; its address and token are in the engine's output. For a service-run engine; a
    change applies at the next start."""
    webhook_connections: StrictInt = Field(default=256, ge=1, le=10_000)  # open at once; the next gets 503
    """Webhook connections open at once; the next gets 503. A change applies at the next start."""
    webhook_timeout: Duration = 10.0  # a request must arrive whole within this
    """How long one webhook request may take to arrive whole (else 408). A change applies at the next start."""
    priority_ageing: Duration = 10.0
    """A queued compute or thread gains one priority level per this long waited, so low work always progresses:
    nothing that joins a queue more than 3 × this after a `low` item starts before it."""
    otel: OtelConfig | None = None  # traces over OpenTelemetry (also switched on by OTEL_EXPORTER_OTLP_ENDPOINT)
    """Traces over OpenTelemetry (also switched on by `OTEL_EXPORTER_OTLP_ENDPOINT`)."""
    # 8: a two-stage pipeline (webhook → sense → thread → nerve-threads → sense → thread → nerve-threads → sense)
    # is 7 hops deep; a loop through a thread takes 2 hops a turn, so a runaway one stops after 4 turns
    max_causal_depth: StrictInt = Field(default=8, ge=1, le=1000)
    """The most hops from the outside world a chain of senses, threads and emits may go: a directive or an emit
    deeper than this is refused and logged (see [Loops and fan-out](../guides/loops.md)); a reflex's `max_depth`
    sets its own."""
    preload: tuple[ModuleName, ...] = ()
    """Modules the warm template imports once for every sense worker (`[psutil, httpx]`: your senses' common
    imports): each worker then shares their pages instead of importing its own copy. One that fails to import is
    said on the engine's output and left to the senses. A change applies at the next start."""


def _check_key_path(value: object) -> object:
    head, _, rest = value.partition(".") if isinstance(value, str) else ("", "", "")
    if head not in ("prompt", "meta") or (rest and not BINDING_KEY_RE.match(rest)) or (head == "meta" and not rest):
        raise ValueError(f"expected a path into the prompt or the thread's meta like prompt, prompt.pr or meta.sense, "
                         f"got {value!r}")
    return value


PRIORITIES = ("low", "normal", "high", "urgent")  # lowest first: a level's index is its rank
Priority = Literal["low", "normal", "high", "urgent"]


class GroupConfig(_Model):
    """Resource limits of one sense group's worker; unset limits cost nothing."""

    concurrency: StrictInt | None = Field(default=None, ge=1, le=10_000)
    """Computes of the group running at once; the others wait in the group's queue, higher `priority` first (FIFO
    within a level, with ageing: see [Flow control](../guides/flow-control.md#priorities)). None: no limit, no
    queue."""

    memory_limit: Size | None = None
    """Resident memory of the group's worker, e.g. `300MB`, `512MiB`: a worker over it is stopped, and the log names the
    sense that used most of it."""
    cpu_limit: Percent | None = None
    """Share of one core the group's worker may use, averaged over `cpu_window`, e.g. `80%`."""
    cpu_window: Duration = 10.0
    """The window `cpu_limit` is averaged over."""


def _check_signal_version(value: object) -> str:
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if not text or len(text) > 64 or any(ord(c) < 32 or c.isspace() for c in text):
        raise ValueError(f"expected a version of 1 to 64 characters without spaces, such as 2 or v1.0, got {value!r}")
    return text


SignalVersion = Annotated[str, BeforeValidator(_check_signal_version)]


class SenseConfig(_Model):
    group: Name = "default"
    """Senses of one group share a worker process."""
    priority: Priority = "normal"
    """Its computes' place in its group's queue (`low`, `normal`, `high`, `urgent`; a reflex's own `priority` wins
    for what it triggers); a person's or an agent's compute (`sense compute`, MCP, the console) is `urgent`."""
    throttle: Duration = 0.0
    """Minimum gap between two compute starts; a trigger inside it is deferred to its end, never dropped."""
    timeout: Duration = 30.0
    """A compute running longer is abandoned and rolled back."""
    grace_period: Duration | None = None
    """After the timeout, the group worker is killed and respawned; none: 3 × `timeout`."""
    peers: tuple[Name, ...] = ()
    """Senses whose databases this one may read (read-only)."""
    enabled: StrictBool = True
    """`false` turns it off (with its cascade); nothing is deleted."""
    expect_signal_every: Duration | None = None  # longer without a signal: stale (status, top, metrics, nerve-health)
    """Signalling less often than this makes it stale (status, top, metrics, a `nerve-health` signal); see
    [Freshness](../guides/projections.md#freshness)."""
    # the schema version its signals carry as events (`event.schema_version` for its listeners), and whether
    # each carries its payload's content hash (`event.hash`), as `nerve emit --schema-version/--hash` does
    signal_version: SignalVersion | None = None
    """The schema version its signals carry as events (`event.schema_version` for its listeners: text such as `2` or
    `v1.0`, no spaces); change it with the payload's shape. Signals stored before keep theirs."""
    signal_hash: StrictBool = False
    """`true`: each signal carries its payload's content hash (`event.hash`, `sha256:` of the canonical JSON), as `nerve
    emit --hash` does."""
    run_on_save: StrictBool = True
    """A save of its `sense.py`, `schema.py` or migrations runs it once (reason `code_changed`) as soon as its worker
    has the new code, whatever its reflexes; `false`: the new code first runs at its next trigger."""

    @field_validator("expect_signal_every")
    @classmethod
    def _positive_period(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("expected a period longer than 0, like 10m")
        return value

    @property
    def grace(self) -> float:
        """Seconds after the soft timeout before the group worker is killed."""
        return self.grace_period if self.grace_period is not None else 3 * self.timeout


def _check_path_pattern(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value or len(value) > 1024:
        raise ValueError(f"expected a path or glob like notes/**/*.md or ~/inbox/*.pdf, got {value!r}")
    return value


PathText = Annotated[str, BeforeValidator(_check_path_pattern)]
BINDING_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
BindingLiteral = StrictStr | StrictInt | StrictFloat | StrictBool


class ReflexConfig(_Model):
    sense: Name
    """The sense to compute."""
    interval: Duration | None = None
    """Run it this long after its last completed compute."""
    on: tuple[Channel, ...] = ()
    """Run it when these signal: senses, external channels (`nerve emit`; a channel name is at most 200 characters, no
    control characters), the built-in `nerve-health` and `nerve-threads`, another host's `HOST/SENSE`, or a pattern
    over channel names: `pr.*` (`*`: one dot-separated token), `ci.>` (`>`: one or more trailing tokens); see
    [Pattern subscriptions](../guides/reflexes.md#pattern-subscriptions)."""
    paths: tuple[PathText, ...] = ()  # file reflex: run when files matching these globs change
    """Run it when files matching these globs change (`~/notes/**/*.md`; relative: inside the instance); see [File
    reflexes](../guides/file-reflexes.md)."""
    cron: str | None = None
    """Five-field cron times, in `timezone`."""
    timezone: str | None = None
    """The IANA timezone of `cron`; none: the machine's."""
    debounce: Duration | None = None
    """A burst of `on:` signals (or of `paths:` changes) becomes one compute after this quiet period."""
    max_wait: Duration | None = None
    """With `debounce`: never later than this after the burst began."""
    jitter: Duration | None = None
    """Move each interval run randomly by up to ± this (shorter than the interval)."""
    # the `on:` sources wait until the sense is read (`sense show`, `sense compute`, MCP, a peer's read)
    lazy: StrictBool = False
    """`true`: its `on:` sources' events wait until the sense is read, which brings it up to date; see [Lazy
    projections](../guides/projections.md#lazy-projections)."""
    # payload key (a.b for nesting) → the value an event must have there: a literal, a list (any of them),
    # or `$name`, a parameter every read of the sense binds
    bindings: dict[str, BindingLiteral | list[BindingLiteral]] = {}
    """Payload key (`a.b` for nesting) → the value its sources' events must hold there (a list: any of them; `$name`: a
    parameter each read binds; needs `lazy: true`)."""
    max_depth: Annotated[StrictInt, Field(ge=1, le=1000)] | None = None
    """The causal depth bound of the directives and emits of this reflex's sense (instead of
    `engine.max_causal_depth`): declares a loop through it and bounds it; see [Loops and
    fan-out](../guides/loops.md)."""
    priority: Priority | None = None
    """The priority of the computes this reflex triggers (`low`, `normal`, `high`, `urgent`); none: its sense's."""
    enabled: StrictBool = True
    """`false` turns the reflex off (no cascade)."""

    @field_validator("bindings")
    @classmethod
    def _bindings(cls, value: dict) -> dict:
        for key, wanted in value.items():
            if not BINDING_KEY_RE.match(key):
                raise ValueError(f"binding key {key!r} is not a payload key: use letters, digits, _ and -, "
                                 "with . between nested keys (pr.repo)")
            if isinstance(wanted, str) and wanted.startswith("$") and binding_param(wanted) is None:
                raise ValueError(f"binding {key}: {wanted!r} is not a parameter: write $ and a name like $repo")
            if isinstance(wanted, list) and (not wanted or any(binding_param(v) for v in wanted)):
                raise ValueError(f"binding {key}: a list is the literal values an event may have there (at least "
                                 "one, no $parameters)")
        return value

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters its bindings name, in order."""
        return tuple(p for v in self.bindings.values() if (p := binding_param(v)) is not None)

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            from cronsim import CronSim, CronSimError  # ~5 ms, paid only by a config with a cron reflex

            try:
                CronSim(value, datetime.now(timezone.utc))
            except CronSimError as exc:
                raise ValueError(f"not a cron expression ({exc}): expected five fields like '0 9 * * 1-5'") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # 2.6 ms, only for a cron with a timezone

            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown timezone {value!r}: expected an IANA name like 'Europe/Berlin' or 'UTC'") from None
        return value

    @model_validator(mode="after")
    def _combinations(self) -> "ReflexConfig":
        if self.timezone is not None and self.cron is None:
            raise ValueError("`timezone` only applies to `cron`; add a cron expression or remove it")
        if self.max_wait is not None and self.debounce is None:
            raise ValueError("`max_wait` bounds a `debounce`; add `debounce: 2s` or remove max_wait")
        if self.max_wait is not None and self.debounce is not None and self.max_wait < self.debounce:
            raise ValueError("`max_wait` must be at least `debounce`")
        if self.debounce is not None and not self.on and not self.paths:
            raise ValueError("`debounce` applies to `on:` and `paths:` triggers; this reflex has neither")
        if self.jitter is not None and (self.interval is None or self.jitter >= self.interval):
            raise ValueError("`jitter` spreads an `interval` and must be shorter than it")
        if (self.lazy or self.bindings) and not self.on:
            raise ValueError("`lazy` and `bindings` apply to `on:` sources; this reflex has none")
        if self.lazy and self.debounce is not None:
            raise ValueError("a `lazy` reflex's events wait for a read, so there is no burst to `debounce`; "
                             "remove one of them")
        if self.params and not self.lazy:
            raise ValueError(f"a reflex binding parameters ({', '.join('$' + p for p in self.params)}) is read "
                             "once per value, on demand: add `lazy: true`")
        return self


def _body_key(value: object) -> object:
    path = value[len("body."):] if isinstance(value, str) and value.startswith("body.") else ""
    if not BINDING_KEY_RE.match(path):
        raise ValueError(f"expected a key in the posted JSON body like body.tool_use_id or body.delivery.id, got {value!r}")
    return value


class ChannelConfig(_Model):
    """An external channel's own settings: whether HTTP may post to it, and how a post proves itself."""

    webhook: StrictBool = False  # accept POST /emit/NAME when the engine serves webhooks
    """Accept `POST /emit/C` when the engine serves webhooks."""
    secret_env: EnvName | None = None  # the environment variable holding the HMAC-SHA256 secret
    """The environment variable holding the HMAC-SHA256 secret posts to the channel are signed with."""
    signature_header: HeaderName = "X-Hub-Signature-256"  # its value: sha256=<hex digest of the body>
    """The header carrying `sha256=<hex digest of the body>`."""
    delivery_header: HeaderName | None = None  # the delivery id (the emit key); unset: the usual names
    """The header whose value is the delivery id (the event's key); none: `X-GitHub-Delivery`, `X-Gitea-Delivery`,
    `X-Gitlab-Event-UUID`, `Webhook-Id`, `Idempotency-Key`."""
    # the emit key taken from the JSON body instead (`body.tool_use_id`: a dotted path in it); wins over the header
    key: Annotated[str, BeforeValidator(_body_key)] | None = None
    """`body.PATH`: the event's key is the value at that dotted path of the posted JSON (a resend is stored once),
    instead of a delivery header."""
    # headers kept with the event: the stored payload is then {"headers": {NAME: value}, "body": <the body>}
    keep_headers: tuple[HeaderName, ...] = ()
    """Headers stored with a webhook's event: its payload becomes `{"headers": {NAME: value}, "body": <the body>}`."""

    @model_validator(mode="after")
    def _combinations(self) -> "ChannelConfig":
        if not self.webhook and self.secret_env is not None:
            raise ValueError("`secret_env` checks webhook posts; add `webhook: true` or remove it")
        if not self.webhook and (self.key is not None or self.keep_headers):
            raise ValueError("`key` and `keep_headers` apply to webhook posts; add `webhook: true` or remove them")
        return self


PersonName = Annotated[str, Field(min_length=1, max_length=200)]


class ApproverRule(_Model):
    """`approvers: {names: [ada, bob, cy], count: 2}`: two of these three settle a question."""

    # pydantic copies a mutable default for each model; `default_factory=list` costs every import of this module
    # 1.3 ms, for pydantic asks inspect for list's signature, which tokenizes its text signature
    names: list[PersonName] = []
    """The people who may answer."""
    count: StrictInt = Field(default=1, ge=1, le=20)
    """Distinct approvals that settle a question."""


class WorkflowConfig(_Model):
    concurrency: StrictInt = Field(default=1, ge=1)
    """Threads running at once."""
    overflow: Literal["drop", "queue"] = "queue"
    """`drop` or `queue` a request when every slot is busy."""
    max_queue: StrictInt = Field(default=100, ge=1)
    """A full queue drops its oldest request of the lowest priority level."""
    # `prompt` (the whole prompt), `prompt.a.b` (a field of a JSON-object prompt) or `meta.a` (of its origin)
    concurrency_key: Annotated[str, BeforeValidator(_check_key_path)] | None = None
    """One thread per key: `prompt` (the whole prompt), `prompt.pr` (a field of a prompt that is a JSON object; `a.b`
    reaches nested ones) or `meta.sense` (of the thread's origin: `kind`, `sense`, `by`...). Threads whose key is equal
    run one at a time, beside other keys (a thread with no such field has no key); see [Flow
    control](../guides/flow-control.md#one-thread-per-key)."""
    key_overflow: Literal["drop", "queue", "replace"] = "queue"
    """A thread whose key a live thread (running, waiting or paused) holds: `queue` it until that one ends, `drop` it,
    or `replace`: the holder is cancelled (reason `superseded by run-N`) and the new one runs."""
    priority: Priority = "normal"
    """The queue place of the threads its directives start (`low`, `normal`, `high`, `urgent`); a thread a person or an
    agent starts (`workflow run`, MCP, the console) is `urgent`. Higher first, FIFO within a level, with ageing."""
    idempotent: StrictBool = False
    """After a crash, resume threads instead of marking them `crashed`."""
    drain_timeout: Duration = 30.0
    """On reload, how long running threads may finish."""
    role_timeout: Duration | None = None
    """A role call taking longer is cancelled (and retried `role_retries` times)."""
    role_retries: StrictInt = Field(default=0, ge=0, le=5)
    """Retries of a failing role call."""
    role_backoff: Duration = 1.0  # first pause before a retry; doubles each time, with jitter
    """The pause before the first retry; each next pause doubles (capped at 60s), with jitter: pause n lies between half
    and all of its nominal value, so pauses grow and retries of many threads spread out."""
    thread_timeout: Duration | None = None
    """A thread older than this ends as failed."""
    approval_timeout: Duration | None = None  # a thread waiting for a person this long ends `failed`
    """A thread waiting for a person this long ends `failed` with that reason."""
    cancel_grace: Duration = 5.0  # a cancelled thread's role still running after this: its worker is stopped
    """A cancelled thread whose role has not stopped after this (a blocking call) is ended by the engine, which stops
    its worker (the workflow's other running threads then follow the crash rule)."""
    model: ModelId | None = None  # llm model id or alias for model-backed roles (overridden by the role)
    """The [llm](https://llm.datasette.io) model id or alias of the workflow's model-backed roles (`llm_role`); a role's
    own `model=` wins; none: `llm models default`."""
    system: str | None = None  # system prompt for model-backed roles (overridden by the role)
    """The system prompt of its model-backed roles; a role's own `system=` wins."""
    enabled: StrictBool = True
    """`false` refuses new threads."""
    # who settles a person's question: a count of distinct people, the names who may answer, or both
    approvers: Annotated[StrictInt, Field(ge=1, le=20)] | list[PersonName] | ApproverRule | None = None
    """Who settles a person's question: a count of distinct people (`2`), the names who may answer (`[ada, bob]`), or
    both (`{names: [ada, bob, cy], count: 2}`); none: one approval by anyone. A rejection settles a question at once.
    Read at each answer (hot reload applies it to the next one)."""
    self_approval: StrictBool = True  # false: the person who started a thread may not approve its questions
    """`false`: the person who started a thread (its origin's `by`) may not approve its questions (a rejection is still
    theirs to give)."""

    def approval_count(self) -> int:
        """Distinct approvals that settle a question (1 unless `approvers` asks for more)."""
        rule = self.approvers
        return rule if isinstance(rule, int) else rule.count if isinstance(rule, ApproverRule) else 1

    def approver_names(self) -> list[str]:
        """The only people who may answer (empty: anyone)."""
        rule = self.approvers
        return list(rule) if isinstance(rule, list) else list(rule.names) if isinstance(rule, ApproverRule) else []


def _check_match(value: dict) -> dict:
    """A payload match as literal bindings are written: key (a.b for nesting) → a value, or a list of them."""
    for key, wanted in value.items():
        if not BINDING_KEY_RE.match(key):
            raise ValueError(f"match key {key!r} is not a payload key: use letters, digits, _ and -, "
                             "with . between nested keys (pr.repo)")
        if isinstance(wanted, str) and wanted.startswith("$"):
            raise ValueError(f"match {key}: {wanted!r} is a parameter; an agent's match takes literal values")
        if isinstance(wanted, list) and not wanted:
            raise ValueError(f"match {key}: a list is the values an event may have there (at least one)")
    return value


Match = Annotated[dict[str, BindingLiteral | list[BindingLiteral]], AfterValidator(_check_match)]


def _codex_endpoint(value: object) -> object:
    text = value if isinstance(value, str) else ""
    if text.startswith("unix://") and len(text) > len("unix://"):
        return value
    parts = urlsplit(text) if text.startswith("ws://") else None
    if parts is not None and parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
        return value
    raise ValueError(f"expected the codex app-server's address: unix://PATH (`codex app-server --listen unix://PATH`) "
                     f"or a loopback ws://127.0.0.1:PORT, got {value!r}")


def _codex_thread(value: object) -> object:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValueError(f"expected a Codex thread id (thread/start answers it; `codex resume` lists them), got {value!r}")
    return value


class CodexDelivery(_Model):
    """Hand an agent's events to a Codex thread through the user's `codex app-server`."""

    endpoint: Annotated[str, BeforeValidator(_codex_endpoint)]
    """The Codex app-server: `unix://PATH` or `ws://127.0.0.1:PORT`."""
    thread: Annotated[str, BeforeValidator(_codex_thread)]  # the thread id turns start on
    """The Codex thread whose turns Nerve starts with the agent's events."""


class AgentDelivery(_Model):
    codex: CodexDelivery | None = None
    """The Codex app-server and thread whose turns Nerve starts with the agent's events: the running engine does it
    (applied at once on reload), `nerve agent deliver` without one."""


class AgentConfig(_Model):
    """A coding agent and what it hears: a listener without code, with a durable inbox (store.inbox)."""

    on: tuple[AgentSource, ...]  # any source a reflex can name, but a pattern
    """The sources the agent hears, named as in a reflex's `on:` (see [Waking coding agents](../guides/agents.md)); read
    by every take, so a change applies at the agent's next take."""
    match: Match = {}  # only events whose payload has these values reach it
    """Payload key (`a.b` for nesting) → the value (or list of values) an event must have to reach the agent."""
    batch: StrictInt = Field(default=20, ge=1, le=1000)  # events in one delivery (one turn) at most
    """Events in one delivery (one turn) at most, 1 to 1000."""
    deliver: AgentDelivery | None = None  # none: it takes its events itself (hook, MCP, `nerve agent next`)
    """How deliveries reach it; none: it takes them itself (a hook, MCP, `nerve agent next`)."""
    # where a source it never heard starts: `new`, after what the source holds at its first look; `all`, everything
    # the source still holds
    start: Literal["new", "all"] = "new"
    """Where a source the agent never heard starts: `new` after its newest event at the agent's first look (`nerve agent
    install`, the first take, or a running engine: at its start and when a reload adds the agent), `all` at its first."""
    enabled: StrictBool = True
    """A disabled agent keeps its inbox; nothing is handed to it."""

    @field_validator("on")
    @classmethod
    def _some_source(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("an agent hears at least one source: list senses or channels, e.g. on: [ci.done]")
        return value


NATS_SCHEMES = ("nats", "tls", "ws", "wss")


def url_problem(value: object) -> str | None:
    """Why `value` is not a NATS server URL (`nats://HOST:PORT`), or None."""
    if not isinstance(value, str) or not value.strip():
        return "a server URL is a non-empty string like nats://nats.example.com:4222"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        return f"{value!r} is not a URL ({exc}); expected nats://HOST:PORT"
    if parts.scheme not in NATS_SCHEMES:
        given = parts.scheme + "://" if parts.scheme else "none"
        return (f"{value!r}: the scheme must be one of {', '.join(s + '://' for s in NATS_SCHEMES)}, got {given}; "
                "e.g. nats://nats.example.com:4222")
    if not parts.hostname:
        return f"{value!r} names no host; expected {parts.scheme}://HOST:PORT"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"{value!r}: a NATS server URL has no path or query; expected {parts.scheme}://HOST:PORT"
    if port == 0:
        return f"{value!r}: port 0 is not a server's port"
    return None


def _refuse(problem_of: Callable[[object], str | None]) -> Callable[[object], object]:
    """A `..._problem` function (None or why not) as a pydantic validator."""
    def check(value: object) -> object:
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(problem)
        return value
    return check


def _remote_sense(value: object) -> object:
    if not isinstance(value, str) or value.count("/") != 1:
        raise ValueError(f"expected HOST/SENSE (another host's sense, like build-box/disk-usage), got {value!r}")
    host, sense = value.split("/")
    problem = host_problem(host) or subject_name_problem(sense, "sense")
    if problem is not None:
        raise ValueError(problem)
    return value


def _stream_problem(value: object) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,32}", value):
        return None
    return f"a stream name is 1-32 letters, digits, '_' or '-' (it is also its subjects' first part), got {value!r}"


HostName = Annotated[str, BeforeValidator(_refuse(host_problem))]
ServerUrl = Annotated[str, BeforeValidator(_refuse(url_problem))]
FleetChannel = Annotated[str, BeforeValidator(_refuse(lambda v: subject_name_problem(v, "channel")))]
RemoteSense = Annotated[str, BeforeValidator(_remote_sense)]
StreamName = Annotated[str, BeforeValidator(_refuse(_stream_problem))]
ServerUrls = Annotated[tuple[ServerUrl, ...], BeforeValidator(lambda v: [v] if isinstance(v, str) else v)]


class FleetPublish(_Model):
    senses: tuple[Name, ...] = ()  # this host's senses whose signals go out, as HOST/SENSE
    """Local senses whose signals go out as `HOST/SENSE`."""
    channels: tuple[FleetChannel, ...] = ()  # channels whose local emits go out to the fleet
    """Channels whose local emits go out to the fleet."""


class FleetSubscribe(_Model):
    senses: tuple[RemoteSense, ...] = ()  # HOST/SENSE: another host's published sense
    """Other hosts' senses (`HOST/SENSE`) received here as sources."""
    channels: tuple[FleetChannel, ...] = ()  # fleet channels: the other hosts' emits come in
    """Fleet channels received here: the other hosts' emits come in."""


class FleetConfig(_Model):
    """This host in a fleet joined through NATS JetStream (see `config.fleet` for names and subjects)."""

    servers: ServerUrls = Field(min_length=1)
    """NATS server URLs (`nats://`, `tls://`, `ws://`, `wss://`; one may be written without a list); credentials come
    from the environment (see [A fleet of machines](../guides/fleet.md))."""
    host: HostName | None = None  # None: this machine's hostname
    """This host's name in the fleet: lowercase letters, digits, `_`, `-`; none: this machine's hostname (first label,
    lowercased)."""
    stream: StreamName = "nerve"
    """The JetStream stream (created if missing) and its subjects' first part."""
    publish: FleetPublish = FleetPublish()
    """What this host sends to the fleet."""
    subscribe: FleetSubscribe = FleetSubscribe()
    """What this host receives from the fleet."""
    retention: Duration = 7 * 86400.0  # how long the stream keeps a message for a host that is away
    """How long the stream keeps a message for a host that is away."""
    max_bytes: Size = 1024 ** 3  # the stream's cap in bytes: past it the oldest messages go (as past retention)
    """The stream's cap in bytes: past it the oldest messages go first (a host away that long misses them, as past
    `retention`). The stream's bounds are the fleet's: a host that connects with other values updates them and logs
    it, so give every host the same."""
    max_messages: StrictInt = Field(default=1_000_000, ge=1)  # and in messages
    """The stream's cap in messages, as `max_bytes`."""
    replicas: StrictInt = Field(default=1, ge=1, le=5)
    """The stream's replicas in a NATS cluster (when this host creates it)."""
    ack_wait: Duration = 30.0  # a message handed to this host and not acknowledged within this is handed again
    """A message handed to this host and not acknowledged within this is handed over again."""
    enabled: StrictBool = True
    """`false` leaves the fleet without removing the section."""

    @property
    def host_name(self) -> str:
        return self.host if self.host is not None else default_host()


NOTIFY_EVENTS = ("waiting", "failed", "crashed", "completed", "cancelled", "dropped", "stale", "quarantined")


class NotifyRule(_Model):
    """`notify:` one rule: what to tell, and where (apprise URLs: ntfy://, slack://, mailto://, json://, ...)."""

    name: Name | None = None  # in status and metrics (default notify-N, N its place in the list)
    """The rule's name in status and metrics; none: `notify-N`, N its place in the list."""
    to: list[Annotated[str, Field(min_length=1, max_length=2000)]] = []
    """Apprise URLs (`ntfy://`, `slack://`, `mailto://`, `json://`, ...); `to` or `to_env` is required."""
    to_env: EnvName | None = None  # a variable holding more URLs (space or comma apart): secrets stay out of the file
    """An environment variable holding more URLs (space or comma apart): secrets stay out of the file."""
    on: list[Literal[NOTIFY_EVENTS]] = ["waiting", "failed", "crashed"]  # type: ignore[valid-type]
    """What to tell of: `waiting`, `failed`, `crashed`, `completed`, `cancelled`, `dropped` (threads), `stale`,
    `quarantined` (senses)."""
    workflows: list[Name] = []  # only threads of these workflows (empty: every workflow)
    """Only threads of these workflows (empty: every workflow)."""
    senses: list[Name] = []  # only these senses going stale or quarantined (empty: every sense)
    """Only these senses going stale or quarantined (empty: every sense)."""
    answer_as: Annotated[str, Field(min_length=1, max_length=200)] | None = None  # whose answer a notified link records
    """Whose answer a notification's answer link records; none: the rule's name."""
    retry_max: Duration = 300.0  # the longest pause between two tries of a notification that failed
    """The longest pause between two tries of a notification that failed."""
    enabled: StrictBool = True
    """`false`: the rule sends nothing (its held notifications wait)."""

    @model_validator(mode="after")
    def _has_targets(self) -> NotifyRule:
        if not self.to and self.to_env is None:
            raise ValueError("a notify rule needs `to:` (apprise URLs, e.g. ntfy://ntfy.sh/TOPIC) or `to_env:` "
                             "(a variable holding them)")
        return self


class NerveConfig(_Model):
    engine: EngineConfig = EngineConfig()
    """The engine's own settings; every key has a default."""
    groups: dict[Name, GroupConfig] = {}
    """Resource limits per sense group (a group's senses share a worker)."""
    senses: dict[Name, SenseConfig] = {}
    """The senses, by name: their folder is `senses/NAME/`."""
    reflexes: tuple[ReflexConfig, ...] = ()
    """When senses run: each needs `interval`, `on`, `cron` or `paths`."""
    workflows: dict[Name, WorkflowConfig] = {}
    """The workflows, by name: `workflows/NAME.py` or `workflows/NAME.pipeline.yaml`."""
    fleet: FleetConfig | None = None
    """This host in a fleet of engines joined through NATS JetStream; see [A fleet of machines](../guides/fleet.md)."""
    channels: dict[OneChannel, ChannelConfig] = {}
    """External channels' settings, by name: webhooks, signatures, keys."""
    agents: dict[Name, AgentConfig] = {}
    """Coding agents woken with what they hear, by name; see [Waking coding agents](../guides/agents.md)."""
    notify: tuple[NotifyRule, ...] = ()
    """Notification rules: who is told of threads waiting, failing, and senses going stale; see [People where they
    are](../guides/people.md)."""
    loops: tuple[tuple[Annotated[str, Field(min_length=1, max_length=200)], ...], ...] = ()
    """Loops you mean to have, each the names it goes through (senses, channels, `nerve-threads`, a workflow):
    `nerve config check` stops warning about a cycle that passes through all of an entry's names; the engine
    still bounds it by `engine.max_causal_depth`. See [Loops and fan-out](../guides/loops.md)."""

    def causal_bound(self, sense: str | None) -> int:
        """The deepest a directive or an emit of `sense`'s computes may be: the largest `max_depth` of its
        reflexes, else `engine.max_causal_depth`."""
        declared = [r.max_depth for r in self.reflexes if r.sense == sense and r.max_depth is not None]
        return max(declared) if declared else self.engine.max_causal_depth

    def notify_rules(self, enabled: bool = True) -> dict[str, NotifyRule]:
        """The `notify:` rules by name (an unnamed one is notify-N, N its place from 1): the enabled ones, or
        (`enabled=False`) all of them."""
        return {r.name or f"notify-{i}": r for i, r in enumerate(self.notify, 1) if r.enabled or not enabled}

    def enabled_senses(self) -> dict[str, SenseConfig]:
        return {n: s for n, s in self.senses.items() if s.enabled}

    def sense_groups(self) -> dict[str, list[str]]:
        """Enabled senses by group name, in config order."""
        out: dict[str, list[str]] = {}
        for name, sense in self.enabled_senses().items():
            out.setdefault(sense.group, []).append(name)
        return out

    def active_reflexes(self) -> list[ReflexConfig]:
        """Reflexes that are enabled and point at an enabled sense."""
        live = self.enabled_senses()
        return [r for r in self.reflexes if r.enabled and r.sense in live]

    def kernel_senses(self) -> dict[str, float | None]:
        """The built-in senses the kernel computes, each with its interval (None: it runs when asked)."""
        return {HEALTH_SENSE: self.engine.health_interval, THREADS_SENSE: None}

    def live_fleet(self) -> FleetConfig | None:
        """The fleet section when it is there and enabled."""
        return self.fleet if self.fleet is not None and self.fleet.enabled else None

    def source_kind(self, name: str) -> SourceKind:
        """Whose store holds the events of source `name`: a sense's (configured, or built in: nerve-health,
        nerve-threads) or an external channel's. The one rule: the kernel, the CLI and the worker all ask here."""
        if name in self.senses or name in BUILTIN_SENSES:
            return SourceKind.SENSE
        return SourceKind.PATTERN if is_pattern(name) else SourceKind.CHANNEL

    def external_channels(self) -> set[str]:
        """External channel names: `on:` entries that are not senses, and the `channels:` section's."""
        listened = {n for r in self.reflexes for n in r.on if self.source_kind(n) is SourceKind.CHANNEL}
        heard = {n for a in self.agents.values() for n in a.on if self.source_kind(n) is SourceKind.CHANNEL}
        return listened | heard | set(self.channels)

    def webhook_channels(self) -> dict[str, ChannelConfig]:
        """Channels that accept HTTP posts."""
        return {name: c for name, c in self.channels.items() if c.webhook}


if _plugins_before is None:
    del os.environ[_PLUGINS_VARIABLE]
else:
    os.environ[_PLUGINS_VARIABLE] = _plugins_before
if _no_plugins is not None and sys.modules.get(_LOADER) is _no_plugins:
    del sys.modules[_LOADER]
