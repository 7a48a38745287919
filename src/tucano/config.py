"""Tucano's configuration: one Settings object, read once from `TUCANO_*` variables and `.env`."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from limits import parse as parse_rate
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from tucano.setting_values import (
    LONGEST_DURATION,
    frame_ancestors,
    frame_origin_host,
    guarded_range_in,
    is_loopback_host,
    parse_duration,
    secret_key_weakness,
    split_list,
)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./tucano.db"
DEFAULT_RETRY_SCHEDULE = "5s,5m,30m,2h,5h,10h,10h"

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class Environment(StrEnum):
    SANDBOX = "sandbox"
    PRODUCTION = "production"


class PixProviderName(StrEnum):
    SANDBOX = "sandbox"  # a static code, paid by a button on the page (sandbox only)
    EVENTS = "events"  # a static code, paid by PIX_QR_INBOUND events from the provider's systems
    API_PIX = "api-pix"  # a dynamic charge at the merchant's PSP (Banco Central's API Pix)


class LogFormat(StrEnum):
    AUTO = "auto"
    JSON = "json"
    CONSOLE = "console"


class ConfigurationError(Exception):
    """The configuration cannot run the service; the message names the variable to set."""


DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"  # `tucano serve`'s own address on a laptop
# A setting in seconds: a finite number, at most LONGEST_DURATION (inf or 1e300 would pass a
# lower bound, then overflow a timedelta or switch a loop off).
Seconds = Annotated[float, Field(allow_inf_nan=False, le=LONGEST_DURATION.total_seconds())]


# An http(s) URL of a host (a name, international ones too, IPv4 or [IPv6]) and port, then maybe
# a path of characters a URL holds unescaped (RFC 3986), %-escaped, or letters of any script.
_PUBLIC_URL = re.compile(r"(?i:https?)://[\w.\-\[\]:%]+(?:/[\w.~!$&'()*+,;=:@%/-]*)?")


_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9._~-]{16,}")


def psp_url_problem(url: str, *, sandbox: bool) -> str | None:
    """Why `url` cannot be a PSP's address, or None: an absolute https URL of a host, with no
    fragment (plain http only for a loopback host in sandbox, for a PSP's simulator)."""
    try:
        parsed = urlsplit(url)
        _ = parsed.port  # a port that is not a number, or over 65535
    except ValueError:
        return "is not a URL"
    if parsed.scheme.lower() not in ("http", "https") or not parsed.hostname or parsed.fragment:
        return "must be an absolute https URL such as https://pix.example.com/api/v2"
    if parsed.scheme.lower() != "https" and not (sandbox and is_loopback_host(parsed.hostname)):
        return (
            "must be an https URL: the client's secret and the payers' data travel on it "
            "(plain http is accepted for a loopback host in sandbox only)"
        )
    return None


_FACTORY = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TUCANO_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_by_name=True,
    )

    database_url: str = DEFAULT_DATABASE_URL
    environment: Environment = Environment.SANDBOX
    public_url: str = DEFAULT_PUBLIC_URL
    secret_key: SecretStr | None = None
    # Keys TUCANO_SECRET_KEY had before: the checkout tokens they signed (in urlPayment links
    # payers already hold) still open their checkout. Access tokens they signed do not.
    # TUCANO_SECRET_KEY_PREVIOUS is the same list under the name the rotation steps use.
    previous_secret_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("TUCANO_PREVIOUS_SECRET_KEYS", "TUCANO_SECRET_KEY_PREVIOUS"),
    )
    webhook_allowed_networks: Annotated[
        list[ipaddress.IPv4Network | ipaddress.IPv6Network], NoDecode
    ] = Field(default_factory=list)
    sandbox_autopay_delay_seconds: Seconds = Field(default=30, ge=0)
    # Sandbox: how long a Pix refund stays PENDING before it succeeds (or fails, at 13 cents).
    sandbox_refund_delay_seconds: Seconds = Field(default=5, ge=0)
    retry_schedule: Annotated[list[timedelta], NoDecode] = Field(
        default_factory=lambda: [parse_duration(d) for d in DEFAULT_RETRY_SCHEDULE.split(",")]
    )

    # Who authorizes the checkout's card payments: empty for the sandbox's test cards in sandbox
    # and no card payment in production; `none`; `sandbox`; or `package.module:factory` of an
    # acquirer's CardProcessor (docs/checkout.md).
    card_processor: str = ""
    # How a link's Pix is offered and confirmed (docs/pix.md); unset: sandbox or events.
    pix_provider: PixProviderName | None = None
    # /docs, /redoc and /openapi.json; unset: on in sandbox, off in production.
    docs_enabled: bool | None = None
    card_processor_timeout_seconds: Seconds = Field(default=30.0, gt=0)

    access_token_ttl_seconds: int = Field(default=3600, ge=60, le=86400)
    max_request_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # A body still arriving after this long is answered 408: a client that trickles a body (or
    # stops halfway) would otherwise hold a connection and a request's memory for ever.
    request_body_timeout_seconds: Seconds = Field(default=10.0, gt=0)
    # Connections and requests one process holds at most (uvicorn's limit_concurrency), and
    # requests in flight one peer address may have of them (api/peer_limits.py).
    max_connections: int = Field(default=1000, ge=1)
    max_requests_per_peer: int = Field(default=100, ge=1)
    log_level: str = "INFO"
    # auto: a person's console lines on a terminal, JSON lines otherwise.
    log_format: LogFormat = LogFormat.AUTO
    # Each webhook is a POST per event of its type: the cap bounds one customer's fan-out.
    max_webhooks_per_customer: int = Field(default=100, ge=1)
    # Resolving a webhook host at registration is bounded so a slow resolver cannot hold a request.
    dns_timeout_seconds: Seconds = Field(default=3.0, gt=0)

    # Rate limits (decisions.md, "Limits and abuse"), as `limits` writes a rate: 100/second,
    # 6000/minute, 10 per second. Counted in the process unless redis_url names a shared Redis.
    rate_limit: str = "100/second"
    token_rate_limit: str = "10/second"  # noqa: S105 (a rate, not a secret)
    # Card testing across links: refused card attempts per source address, and per card number
    # (whatever the link), before the processor is asked again.
    card_refusals_per_address: str = "10/hour"
    card_refusals_per_card: str = "5/hour"
    redis_url: SecretStr | None = None
    # Every key the limits write in Redis starts with it: environments can share one Redis.
    redis_key_prefix: str = Field(default="tucano", min_length=1, pattern=r"^[\w.:-]+$")

    # Delivery engine.
    # Where workers find due deliveries: the database itself, or a NATS JetStream stream that a
    # relay fills from the database (docs/adr/nats-queue.md).
    queue: Literal["database", "nats"] = "database"
    # The NATS servers, comma-separated (used with queue = nats).
    nats_url: str = "nats://127.0.0.1:4222"
    # The stream (one per Tucano database sharing a NATS cluster); its subjects are named after it.
    nats_stream: str = Field(default="TUCANO_DELIVERIES", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    delivery_timeout_seconds: Seconds = Field(default=15.0, gt=0)
    delivery_concurrency: int = Field(default=64, ge=1, le=2048)
    delivery_concurrency_per_target: int = Field(default=16, ge=1)
    # An attempt in flight this long no longer takes one of the concurrency's senders.
    delivery_slow_after_seconds: Seconds = Field(default=1.0, gt=0)
    delivery_lease_seconds: Seconds = Field(default=60.0, ge=5)
    delivery_poll_interval_seconds: Seconds = Field(default=1.0, gt=0)
    retry_after_max_seconds: Seconds = Field(default=3600.0, ge=0)
    webhook_deactivate_after: Annotated[timedelta, NoDecode] = timedelta(days=5)
    result_retention: Annotated[timedelta, NoDecode] = timedelta(days=90)
    # How often the maintenance jobs run (deactivating failing webhooks, pruning history).
    maintenance_interval_seconds: Seconds = Field(default=60.0, gt=0)

    # GET /metrics in production answers only to this bearer token (unset: 404); `tucano
    # worker` serves it on this port (unset: no port).
    metrics_token: SecretStr | None = None
    metrics_port: int | None = Field(default=None, ge=1, le=65535)

    # Who may frame the merchant portal (CSP frame-ancestors): 'none', or space-separated
    # origins of the operator's dashboards (docs/portal.md).
    portal_frame_ancestors: str = "'none'"

    # The merchant's PSP, with TUCANO_PIX_PROVIDER=api-pix (docs/pix.md): the API Pix's base
    # URL (the part before /cob), its OAuth2 token URL, and the client it issued to Tucano.
    pix_api_url: str = ""
    pix_token_url: str = ""
    pix_client_id: str = ""
    pix_client_secret: SecretStr | None = None
    # The client certificate and key (PEM) the PSP issued for mutual TLS, and a CA file to trust
    # instead of the system's; each empty when the PSP needs none.
    pix_cert_file: str = ""
    pix_key_file: str = ""
    pix_ca_file: str = ""
    # The `hmac` the PSP's webhook calls carry in their URL: it proves the call is the PSP's.
    pix_webhook_secret: SecretStr | None = None
    # Each call to the PSP, from connecting to its answer's last byte (retries take their own).
    pix_timeout_seconds: Seconds = Field(default=10.0, gt=0)
    # How often open links with a charge are checked at the PSP, for webhooks that never came.
    pix_reconciliation_seconds: Seconds = Field(default=60.0, gt=0)

    @field_validator("previous_secret_keys", mode="before")
    @classmethod
    def _parse_previous_keys(cls, value: Any) -> Any:
        # A key may hold commas and spaces, as TUCANO_SECRET_KEY may: a JSON array of strings
        # keeps them whole. Anything not written as an array (from "[" to "]") is a
        # comma-separated list, whose first key may well start with "[".
        if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
            try:
                keys = json.loads(value)
            except ValueError:
                keys = None
            if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
                raise ValueError("must be a JSON array of strings, or keys separated by commas")
            return keys
        return split_list(value)

    @field_validator("webhook_allowed_networks", mode="before")
    @classmethod
    def _parse_networks(cls, value: Any) -> Any:
        items = split_list(value)
        if not isinstance(items, list):
            return items
        networks = []
        for item in items:
            if not isinstance(item, str):
                networks.append(item)
                continue
            try:
                networks.append(ipaddress.ip_network(item))
            except ValueError:
                try:
                    loose = ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise ValueError(f"{item!r} is not a network such as 127.0.0.0/8") from None
                raise ValueError(f"{item!r} has host bits set; did you mean {loose}?") from None
        return networks

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: Any) -> Any:
        items = split_list(value)
        if isinstance(items, list):
            parsed = [parse_duration(i) if isinstance(i, str) else i for i in items]
            if not parsed:
                raise ValueError("the retry schedule needs at least one delay")
            if any(delay <= timedelta(0) for delay in parsed):
                # A receiver that fails would be sent the same event again at once, repeatedly.
                raise ValueError("each delay of the retry schedule must be longer than zero")
            return parsed
        return items

    @field_validator("webhook_deactivate_after", "result_retention", mode="before")
    @classmethod
    def _parse_period(cls, value: Any) -> Any:
        period = parse_duration(value) if isinstance(value, str) else value
        if isinstance(period, timedelta) and period <= timedelta(0):
            # Zero would delete every result, or switch a webhook off at its first failure.
            raise ValueError("must be longer than zero")
        return period

    @field_validator(
        "rate_limit", "token_rate_limit", "card_refusals_per_address", "card_refusals_per_card"
    )
    @classmethod
    def _one_rate(cls, value: str) -> str:
        problem = "must be one rate such as 100/second, 6000/minute or 10 per second"
        if ";" in value or "," in value:
            raise ValueError(problem)
        try:
            rate = parse_rate(value)
        except ValueError:
            raise ValueError(problem) from None
        if rate.amount < 1:
            raise ValueError("must allow at least one request, such as 1/second")
        return value.strip()

    @field_validator("redis_url", mode="before")
    @classmethod
    def _redis_scheme(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            if not value:
                return None  # TUCANO_REDIS_URL= (empty) means no Redis, as when unset
            if not value.startswith(("redis://", "rediss://", "unix://")):
                raise ValueError("must be redis://host:port/db, rediss://... or unix:///path")
        return value

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _long_metrics_token(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None  # TUCANO_METRICS_TOKEN= (empty) is unset, as with Redis
        if isinstance(value, str) and len(value) < 16:
            raise ValueError("must be at least 16 characters (a random string)")
        return value

    @field_validator("pix_client_secret", "pix_webhook_secret", mode="before")
    @classmethod
    def _empty_pix_secret_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None  # TUCANO_PIX_CLIENT_SECRET= (empty) is unset, as with the metrics token
        return value

    @field_validator("pix_webhook_secret")
    @classmethod
    def _url_safe_webhook_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # It travels in the query of the URL registered at the PSP: characters that need no
        # escaping arrive as they were sent, whatever the PSP does with the URL.
        if value is not None and not _WEBHOOK_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError(
                "must be at least 16 characters of letters, digits, '-', '_', '.' and '~' "
                "(a random string)"
            )
        return value

    @field_validator(
        "pix_token_url", "pix_client_id", "pix_cert_file", "pix_key_file", "pix_ca_file"
    )
    @classmethod
    def _strip_pix_value(cls, value: str) -> str:
        return value.strip()

    @field_validator("pix_api_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.strip().rstrip("/")  # paths such as /cob/{txid} follow it

    @field_validator("portal_frame_ancestors")
    @classmethod
    def _frame_ancestors(cls, value: str) -> str:
        return frame_ancestors(value)

    @field_validator("environment", "log_format", mode="before")
    @classmethod
    def _environment_in_any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in _LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {', '.join(_LOG_LEVELS)}")
        return level

    @field_validator("public_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        # The base of every urlPayment: a host (and port), then maybe a path, in the characters
        # a URL holds as they are; no query or fragment (the checkout's path and token follow).
        problem = "must be an absolute http(s) URL such as https://pay.example.com, with no "
        problem += "spaces, query or fragment"
        if not _PUBLIC_URL.fullmatch(value):
            raise ValueError(problem)
        try:
            parsed = urlsplit(value)
            _ = parsed.port  # a port that is not a number, or over 65535
        except ValueError:
            raise ValueError(problem) from None
        if not parsed.hostname:
            raise ValueError(problem)
        return value.rstrip("/")

    @field_validator("database_url")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        # Plain `postgresql://` is what most tools hand out; it means asyncpg here.
        if value.startswith(("postgresql://", "postgres://")):
            value = "postgresql+asyncpg://" + value.split("://", 1)[1]
        if value.startswith("sqlite://") and not value.startswith("sqlite+aiosqlite://"):
            value = "sqlite+aiosqlite://" + value.split("://", 1)[1]
        if not value.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
            raise ValueError("must be postgresql+asyncpg://... or sqlite+aiosqlite:///path")
        try:
            url = make_url(value)
            _ = url.port  # a port that is not a number fails here, not at the first connection
        except (ArgumentError, ValueError):
            raise ValueError("is not a valid database URL") from None
        modes = url.query.get("mode", ())
        modes = (modes,) if isinstance(modes, str) else modes
        if url.drivername == "sqlite+aiosqlite" and (
            url.database in (None, "", ":memory:")
            or (url.database.startswith("file::memory:") and "uri" in url.query)
            or any(mode.lower() == "memory" for mode in modes)
        ):
            # Each connection would have a database of its own, and the migrated one be gone.
            raise ValueError(
                "an in-memory SQLite database cannot be used; give a file, such as "
                "sqlite+aiosqlite:///tucano.db"
            )
        # libpq's `sslmode`, as providers hand URLs out, is asyncpg's `ssl` (same values).
        if url.drivername == "postgresql+asyncpg" and "sslmode" in url.query:
            mode = url.query["sslmode"]
            url = url.difference_update_query(["sslmode"]).update_query_dict({"ssl": mode})
            value = url.render_as_string(hide_password=False)
        return value

    @model_validator(mode="after")
    def _production_needs_secret(self) -> Settings:
        if self.environment is Environment.PRODUCTION and self.secret_key is None:
            raise ValueError(
                "TUCANO_SECRET_KEY is required when TUCANO_ENVIRONMENT=production "
                "(set it to a random string of at least 32 characters)"
            )
        if self.secret_key is not None and len(self.secret_key.get_secret_value()) < 32:
            raise ValueError("TUCANO_SECRET_KEY must be at least 32 characters long")
        if any(len(key.get_secret_value()) < 32 for key in self.previous_secret_keys):
            raise ValueError("each of TUCANO_PREVIOUS_SECRET_KEYS must be at least 32 characters")
        return self

    @model_validator(mode="after")
    def _production_refuses_weak_settings(self) -> Settings:
        if self.environment is not Environment.PRODUCTION:
            return self
        weakness = (
            secret_key_weakness(self.secret_key.get_secret_value()) if self.secret_key else None
        )
        if weakness is not None:
            raise ValueError(
                f"TUCANO_SECRET_KEY {weakness}: production needs a random key, such as the "
                'output of python -c "import secrets; print(secrets.token_urlsafe(48))"'
            )
        for network in self.webhook_allowed_networks:
            reason = guarded_range_in(network)
            if reason is not None:
                raise ValueError(
                    f"TUCANO_WEBHOOK_ALLOWED_NETWORKS: {network} contains {reason}; production "
                    "never delivers there (name the private ranges your receivers are in)"
                )
        token_weakness = (
            secret_key_weakness(self.metrics_token.get_secret_value())
            if self.metrics_token
            else None
        )
        if token_weakness is not None:
            raise ValueError(
                f"TUCANO_METRICS_TOKEN {token_weakness}: production needs a random token, as "
                "for the secret key"
            )
        for source in self.portal_frame_ancestors.split():
            origin = frame_origin_host(source)
            if origin is not None and origin[0] != "https" and not is_loopback_host(origin[1]):
                raise ValueError(
                    f"TUCANO_PORTAL_FRAME_ANCESTORS: {source} must be https when "
                    "TUCANO_ENVIRONMENT=production (the portal's session cookie crosses sites "
                    "only over https)"
                )
        parsed = urlsplit(self.public_url)
        if parsed.scheme.lower() != "https" and not is_loopback_host(parsed.hostname or ""):
            raise ValueError(
                "TUCANO_PUBLIC_URL must be an https URL when TUCANO_ENVIRONMENT=production: "
                "payers open urlPayment, with its token, in a browser (plain http is accepted "
                "for a loopback host only, for local trials)"
            )
        return self

    @field_validator("card_processor")
    @classmethod
    def _known_processor(cls, value: str) -> str:
        value = value.strip()
        if value.lower() in ("", "none", "sandbox"):
            return value.lower()
        if not _FACTORY.fullmatch(value):
            raise ValueError(
                "must be empty, none, sandbox, or package.module:factory naming a card processor"
            )
        return value

    @model_validator(mode="after")
    def _nats_queue_needs_postgresql(self) -> Settings:
        if self.queue == "nats" and self.is_sqlite:
            raise ValueError(
                "TUCANO_QUEUE=nats keeps its record in PostgreSQL: set TUCANO_DATABASE_URL to a "
                "postgresql+asyncpg:// URL, or leave TUCANO_QUEUE=database on SQLite"
            )
        return self

    @model_validator(mode="after")
    def _no_simulated_pix_in_production(self) -> Settings:
        if (
            self.environment is Environment.PRODUCTION
            and self.pix_provider is PixProviderName.SANDBOX
        ):
            raise ValueError(
                "TUCANO_PIX_PROVIDER=sandbox pays links by a button on the page: it cannot run "
                "when TUCANO_ENVIRONMENT=production"
            )
        return self

    @model_validator(mode="after")
    def _api_pix_is_complete(self) -> Settings:
        if self.pix_provider is not PixProviderName.API_PIX:
            return self
        required = {
            "TUCANO_PIX_API_URL": self.pix_api_url,
            "TUCANO_PIX_TOKEN_URL": self.pix_token_url,
            "TUCANO_PIX_CLIENT_ID": self.pix_client_id,
            "TUCANO_PIX_CLIENT_SECRET": self.pix_client_secret,
            "TUCANO_PIX_WEBHOOK_SECRET": self.pix_webhook_secret,
        }
        for name, value in required.items():
            if not value:
                raise ValueError(f"{name} is required when TUCANO_PIX_PROVIDER=api-pix")
        for name, url in (
            ("TUCANO_PIX_API_URL", self.pix_api_url),
            ("TUCANO_PIX_TOKEN_URL", self.pix_token_url),
        ):
            problem = psp_url_problem(url, sandbox=self.is_sandbox)
            if problem is not None:
                raise ValueError(f"{name} {problem}")
        if bool(self.pix_cert_file) != bool(self.pix_key_file):
            raise ValueError(
                "TUCANO_PIX_CERT_FILE and TUCANO_PIX_KEY_FILE go together: set both (the client "
                "certificate the PSP issued and its key) or neither"
            )
        for name, path in (
            ("TUCANO_PIX_CERT_FILE", self.pix_cert_file),
            ("TUCANO_PIX_KEY_FILE", self.pix_key_file),
            ("TUCANO_PIX_CA_FILE", self.pix_ca_file),
        ):
            if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                raise ValueError(f"{name}: {path!r} is not a file this process can read")
        return self

    @model_validator(mode="after")
    def _no_test_cards_in_production(self) -> Settings:
        if self.environment is Environment.PRODUCTION and self.card_processor == "sandbox":
            raise ValueError(
                "TUCANO_CARD_PROCESSOR=sandbox approves test cards: it cannot run when "
                "TUCANO_ENVIRONMENT=production"
            )
        return self

    @model_validator(mode="after")
    def _lease_outlasts_an_attempt(self) -> Settings:
        if self.delivery_lease_seconds < 2 * self.delivery_timeout_seconds:
            raise ValueError(
                "TUCANO_DELIVERY_LEASE_SECONDS must be at least twice "
                "TUCANO_DELIVERY_TIMEOUT_SECONDS, so that an attempt ends well within its lease"
            )
        return self

    @property
    def is_sandbox(self) -> bool:
        return self.environment is Environment.SANDBOX

    @property
    def docs_are_enabled(self) -> bool:
        return self.docs_enabled if self.docs_enabled is not None else self.is_sandbox

    @property
    def card_processor_name(self) -> str | None:
        """The processor to load: `sandbox`, a factory's path, or None for no card payment."""
        if self.card_processor == "none":
            return None
        if self.card_processor == "":
            return "sandbox" if self.is_sandbox else None
        return self.card_processor

    @property
    def pix_provider_name(self) -> PixProviderName:
        """TUCANO_PIX_PROVIDER, or by default the sandbox's in sandbox and events in production."""
        if self.pix_provider is not None:
            return self.pix_provider
        return PixProviderName.SANDBOX if self.is_sandbox else PixProviderName.EVENTS

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def metrics_directory() -> str | None:
    """PROMETHEUS_MULTIPROC_DIR, where the processes of a host share their metrics, or None.
    prometheus_client reads it itself when the metrics are made (and would fail there with a
    traceback were it no directory): checked here first, by every command."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None  # empty: unset, as for it
    if directory is not None and not os.path.isdir(directory):
        raise ConfigurationError(
            f"PROMETHEUS_MULTIPROC_DIR: {directory!r} is not a directory (create it, or unset it)"
        )
    return directory


def load_settings(**overrides: Any) -> Settings:
    """Read the settings, turning a validation failure into a message naming the variable."""
    from pydantic import ValidationError

    for name, value in os.environ.items():
        if name.upper().startswith("TUCANO_"):
            try:
                value.encode()
            except UnicodeEncodeError:  # bytes the environment held that are not UTF-8
                raise ConfigurationError(f"{name}: not UTF-8 text") from None
    try:
        return Settings(**overrides)
    except UnicodeDecodeError as exc:  # the .env file, read as UTF-8
        raise ConfigurationError(
            f".env: not UTF-8 text (byte {exc.start} cannot be read); save it as UTF-8"
        ) from None
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"])
            name = f"TUCANO_{field.upper()}" if field else "configuration"
            message = error["msg"].removeprefix("Value error, ")
            lines.append(message if message.startswith("TUCANO_") else f"{name}: {message}")
        raise ConfigurationError("; ".join(lines)) from None
