"""The nerve.yaml model: the one source of truth for what a valid config is.

Durations are written as `500ms`, `5s`, `10m`, `1h30m`, `1d`, `1w` (nerve_cli.durations: the one grammar,
shared with --since/--until) and held as float seconds.
Names follow `[a-z0-9][a-z0-9._-]*`, at most 64 characters.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Annotated, Callable, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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
    subject_name_problem,
)
from nerve_cli.names import THREADS_SENSE as THREADS_SENSE
from nerve_cli.vocab.sources import SourceKind


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


def _check_channel(value: str) -> str:
    problem = channel_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Channel = Annotated[str, AfterValidator(_check_channel)]

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
    model_config = ConfigDict(extra="forbid", frozen=True)


def _otlp_endpoint(value: object) -> object:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or "://" == value[-3:]:
        raise ValueError(f"expected an OTLP/HTTP endpoint like http://collector.example.com:4318, got {value!r}")
    return value


class OtelConfig(_Model):
    """Export traces over OpenTelemetry (needs `pip install 'nerve-cli[otel]'`); the OTEL_* variables apply too."""

    endpoint: Annotated[str, BeforeValidator(_otlp_endpoint)] | None = None  # as OTEL_EXPORTER_OTLP_ENDPOINT
    capture_content: StrictBool = False  # export prompts and answers of model calls, and payloads
    enabled: StrictBool = True


class EngineConfig(_Model):
    max_rounds: StrictInt = Field(default=100, ge=1)
    archive_after: Duration = 30 * 86400.0
    shutdown_timeout: Duration = 5.0
    health_interval: Duration = 60.0
    failure_backoff_after: StrictInt = Field(default=3, ge=1)
    failure_backoff_first: Duration = 5.0
    failure_backoff_max: Duration = 600.0
    quarantine_after: StrictInt = Field(default=3, ge=1)
    quarantine_window: Duration = 3600.0
    quarantine_for: Duration = 3600.0
    respawn_backoff_first: Duration = 0.5
    respawn_backoff_max: Duration = 30.0
    metrics: Address | None = None  # serve Prometheus metrics here (`nerve run --metrics` overrides it)
    webhooks: Address | None = None  # serve POST /emit/CHANNEL here (`nerve run --webhooks` wins)
    ui: Address | None = None  # the engine runs `nerve ui --listen` here beside it (a service's console)
    webhook_connections: StrictInt = Field(default=256, ge=1, le=10_000)  # open at once; the next gets 503
    webhook_timeout: Duration = 10.0  # a request must arrive whole within this
    otel: OtelConfig | None = None  # traces over OpenTelemetry (also switched on by OTEL_EXPORTER_OTLP_ENDPOINT)


class GroupConfig(_Model):
    """Resource limits of one sense group's worker; unset limits cost nothing."""

    memory_limit: Size | None = None
    cpu_limit: Percent | None = None
    cpu_window: Duration = 10.0


def _check_signal_version(value: object) -> str:
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if not text or len(text) > 64 or any(ord(c) < 32 or c.isspace() for c in text):
        raise ValueError(f"expected a version of 1 to 64 characters without spaces, such as 2 or v1.0, got {value!r}")
    return text


SignalVersion = Annotated[str, BeforeValidator(_check_signal_version)]


class SenseConfig(_Model):
    group: Name = "default"
    throttle: Duration = 0.0
    timeout: Duration = 30.0
    grace_period: Duration | None = None
    peers: tuple[Name, ...] = ()
    enabled: StrictBool = True
    expect_signal_every: Duration | None = None  # longer without a signal: stale (status, top, metrics, nerve-health)
    # the schema version its signals carry as events (`event.schema_version` for its listeners), and whether
    # each carries its payload's content hash (`event.hash`), as `nerve emit --schema-version/--hash` does
    signal_version: SignalVersion | None = None
    signal_hash: StrictBool = False

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
    interval: Duration | None = None
    on: tuple[Channel, ...] = ()
    paths: tuple[PathText, ...] = ()  # file reflex: run when files matching these globs change
    cron: str | None = None
    timezone: str | None = None
    debounce: Duration | None = None
    max_wait: Duration | None = None
    jitter: Duration | None = None
    # the `on:` sources wait until the sense is read (`sense show`, `sense compute`, MCP, a peer's read)
    lazy: StrictBool = False
    # payload key (a.b for nesting) → the value an event must have there: a literal, a list (any of them),
    # or `$name`, a parameter every read of the sense binds
    bindings: dict[str, BindingLiteral | list[BindingLiteral]] = {}
    enabled: StrictBool = True

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
    secret_env: EnvName | None = None  # the environment variable holding the HMAC-SHA256 secret
    signature_header: HeaderName = "X-Hub-Signature-256"  # its value: sha256=<hex digest of the body>
    delivery_header: HeaderName | None = None  # the delivery id (the emit key); unset: the usual names
    # the emit key taken from the JSON body instead (`body.tool_use_id`: a dotted path in it); wins over the header
    key: Annotated[str, BeforeValidator(_body_key)] | None = None
    # headers kept with the event: the stored payload is then {"headers": {NAME: value}, "body": <the body>}
    keep_headers: tuple[HeaderName, ...] = ()

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

    names: list[PersonName] = Field(default_factory=list)
    count: StrictInt = Field(default=1, ge=1, le=20)


class WorkflowConfig(_Model):
    concurrency: StrictInt = Field(default=1, ge=1)
    overflow: Literal["drop", "queue"] = "queue"
    max_queue: StrictInt = Field(default=100, ge=1)
    idempotent: StrictBool = False
    drain_timeout: Duration = 30.0
    role_timeout: Duration | None = None
    role_retries: StrictInt = Field(default=0, ge=0, le=5)
    role_backoff: Duration = 1.0  # first pause before a retry; doubles each time, with jitter
    thread_timeout: Duration | None = None
    approval_timeout: Duration | None = None  # a thread waiting for a person this long ends `failed`
    cancel_grace: Duration = 5.0  # a cancelled thread's role still running after this: its worker is stopped
    model: ModelId | None = None  # llm model id or alias for model-backed roles (overridden by the role)
    system: str | None = None  # system prompt for model-backed roles (overridden by the role)
    enabled: StrictBool = True
    # who settles a person's question: a count of distinct people, the names who may answer, or both
    approvers: Annotated[StrictInt, Field(ge=1, le=20)] | list[PersonName] | ApproverRule | None = None
    self_approval: StrictBool = True  # false: the person who started a thread may not approve its questions

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
    thread: Annotated[str, BeforeValidator(_codex_thread)]  # the thread id turns start on


class AgentDelivery(_Model):
    codex: CodexDelivery | None = None


class AgentConfig(_Model):
    """A coding agent and what it hears: a listener without code, with a durable inbox (store.inbox)."""

    on: tuple[Channel, ...]  # any source a reflex can name
    match: Match = {}  # only events whose payload has these values reach it
    batch: StrictInt = Field(default=20, ge=1, le=1000)  # events in one delivery (one turn) at most
    deliver: AgentDelivery | None = None  # none: it takes its events itself (hook, MCP, `nerve agent next`)
    # where a source it never heard starts: `new`, after what the source holds at its first look; `all`, everything
    # the source still holds
    start: Literal["new", "all"] = "new"
    enabled: StrictBool = True

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
    channels: tuple[FleetChannel, ...] = ()  # channels whose local emits go out to the fleet


class FleetSubscribe(_Model):
    senses: tuple[RemoteSense, ...] = ()  # HOST/SENSE: another host's published sense
    channels: tuple[FleetChannel, ...] = ()  # fleet channels: the other hosts' emits come in


class FleetConfig(_Model):
    """This host in a fleet joined through NATS JetStream (see `config.fleet` for names and subjects)."""

    servers: ServerUrls = Field(min_length=1)
    host: HostName | None = None  # None: this machine's hostname
    stream: StreamName = "nerve"
    publish: FleetPublish = FleetPublish()
    subscribe: FleetSubscribe = FleetSubscribe()
    retention: Duration = 7 * 86400.0  # how long the stream keeps a message for a host that is away
    max_bytes: Size = 1024 ** 3  # the stream's cap in bytes: past it the oldest messages go (as past retention)
    max_messages: StrictInt = Field(default=1_000_000, ge=1)  # and in messages
    replicas: StrictInt = Field(default=1, ge=1, le=5)
    ack_wait: Duration = 30.0  # a message handed to this host and not acknowledged within this is handed again
    enabled: StrictBool = True

    @property
    def host_name(self) -> str:
        return self.host if self.host is not None else default_host()


NOTIFY_EVENTS = ("waiting", "failed", "crashed", "completed", "cancelled", "dropped", "stale", "quarantined")


class NotifyRule(_Model):
    """`notify:` one rule: what to tell, and where (apprise URLs: ntfy://, slack://, mailto://, json://, ...)."""

    name: Name | None = None  # in status and metrics (default notify-N, N its place in the list)
    to: list[Annotated[str, Field(min_length=1, max_length=2000)]] = []
    to_env: EnvName | None = None  # a variable holding more URLs (space or comma apart): secrets stay out of the file
    on: list[Literal[NOTIFY_EVENTS]] = ["waiting", "failed", "crashed"]  # type: ignore[valid-type]
    workflows: list[Name] = []  # only threads of these workflows (empty: every workflow)
    senses: list[Name] = []  # only these senses going stale or quarantined (empty: every sense)
    answer_as: Annotated[str, Field(min_length=1, max_length=200)] | None = None  # whose answer a notified link records
    retry_max: Duration = 300.0  # the longest pause between two tries of a notification that failed
    enabled: StrictBool = True

    @model_validator(mode="after")
    def _has_targets(self) -> NotifyRule:
        if not self.to and self.to_env is None:
            raise ValueError("a notify rule needs `to:` (apprise URLs, e.g. ntfy://ntfy.sh/TOPIC) or `to_env:` "
                             "(a variable holding them)")
        return self


class NerveConfig(_Model):
    engine: EngineConfig = EngineConfig()
    groups: dict[Name, GroupConfig] = {}
    senses: dict[Name, SenseConfig] = {}
    reflexes: tuple[ReflexConfig, ...] = ()
    workflows: dict[Name, WorkflowConfig] = {}
    fleet: FleetConfig | None = None
    channels: dict[Channel, ChannelConfig] = {}
    agents: dict[Name, AgentConfig] = {}
    notify: tuple[NotifyRule, ...] = ()

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
        return SourceKind.SENSE if name in self.senses or name in BUILTIN_SENSES else SourceKind.CHANNEL

    def external_channels(self) -> set[str]:
        """External channel names: `on:` entries that are not senses, and the `channels:` section's."""
        listened = {n for r in self.reflexes for n in r.on if self.source_kind(n) is SourceKind.CHANNEL}
        heard = {n for a in self.agents.values() for n in a.on if self.source_kind(n) is SourceKind.CHANNEL}
        return listened | heard | set(self.channels)

    def webhook_channels(self) -> dict[str, ChannelConfig]:
        """Channels that accept HTTP posts."""
        return {name: c for name, c in self.channels.items() if c.webhook}
