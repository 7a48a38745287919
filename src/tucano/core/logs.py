"""Structured logs: one JSON object per line on stdout, with secrets scrubbed before rendering.

Every line logged while a request is handled carries its transaction id (structlog contextvars).
Scrubbing is a last line of defence: code does not log secrets, and this processor masks any value
under a secret-sounding key and any run of digits shaped like a card number.
"""

from __future__ import annotations

import logging
import re
import string
import sys
from collections.abc import MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog

from tucano.core.clock import format_utc

_SECRET_KEYS = re.compile(
    r"secret|token|password|passwd|authorization|api[_-]?key|card[_-]?number|pan|cvv|cvc",
    re.IGNORECASE,
)
# 13 to 19 digits, grouped by up to three separators of the kinds a card number is typed, pasted
# or percent-encoded with; longer runs (a PIX end-to-end id) are left alone. docs/adr/logs.md
# lists the separators and what else they mask.
_SEPARATORS = (
    "._/+|*-\u00ad\u00b7\u034f\u200b\u200c\u200d\u200e\u200f\u2010\u2011\u2012\u2013"
    "\u2014\u2015\u2022\u2060\u2066\u2067\u2068\u2069\u2212\ufe63\ufeff\uff0d\uff0e"
)
CARD_NUMBER = re.compile(
    r"(?<!\d)(?:\d(?:[^\S\r\n]|[" + re.escape(_SEPARATORS) + r"]|%[0-9A-Fa-f]{2}){0,3}){12,18}"
    r"\d(?!\d)"
)
REDACTED = "[REDACTED]"


# Tucano's own secrets and tokens (client and signing secrets, JWTs) wherever they appear. Each
# pattern is possessive, so every scan is linear in the text (docs/adr/logs.md).
SECRET_VALUE = re.compile(r"tsk_[A-Za-z0-9_-]++|whsec_(?:[A-Za-z0-9+/=]|%[0-9A-Fa-f]{2})++")
JWT_CANDIDATE = re.compile(r"eyJ[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]*+)*+")
# Longer text in a log line is cut (a 64 KB path says no more than its first 2 KB).
LONGEST_LOGGED_TEXT = 2048
# Text is masked before it is cut, over the kept length plus the most a card number can span
# (19 digits, each followed by up to three 3-character separators); a run left at the cut goes.
_CARD_SPAN = 19 + 18 * 3 * 3
# What a run of a card number and its separators is made of, read backwards from a cut without
# a regex (one with overlapping alternatives can backtrack exponentially here).
_CARD_RUN = frozenset("0123456789%ABCDEFabcdef" + _SEPARATORS)
# What a token (a tsk_ secret, a JWT, a signing secret, a card and its separators) is made of:
# a traceback's kept end starts after the first character that cannot be part of one.
_TOKEN_RUN = frozenset(string.ascii_letters + string.digits + "_%=" + _SEPARATORS)
# A traceback is longer (the framework's frames come first) and its end says what went wrong:
# it keeps its last LONGEST_LOGGED_TRACEBACK characters.
LONGEST_LOGGED_TRACEBACK = 16384
# UUIDs (transaction ids, link ids in paths) and Tucano's own event and payment ids (evt_ and
# 32, pay_ and 24 hexadecimal digits) have digit runs a card number's shape would match: they are
# left alone, but only standing on their own (a card number written on either side of one would
# otherwise pass as part of it).
UUID_TEXT = re.compile(
    r"(?<![0-9a-fA-F-])"
    r"(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?<![A-Za-z0-9_])evt_[0-9a-f]{32}|(?<![A-Za-z0-9_])pay_[0-9a-f]{24})"
    r"(?![0-9a-fA-F-])"
)


# Set by the edge when the client left before its answer could be written: uvicorn then says
# "ASGI callable returned without completing response." at error level, for a pipelined
# request, in the same task. The edge's client_gone line says it already.
client_gone: ContextVar[bool] = ContextVar("client_gone", default=False)
_INCOMPLETE_RESPONSE = "ASGI callable returned without completing response"


class _DropIncompleteAfterClientGone(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name == "uvicorn.error"
            and client_gone.get()
            and str(record.msg).startswith(_INCOMPLETE_RESPONSE)
        )


def mask_jwt(found: re.Match[str]) -> str:
    return REDACTED if found.group().count(".") >= 2 else found.group()


def _scrub_text(text: str, *, traceback: bool = False) -> str:
    """`text` with Tucano's secrets and every card-number shape masked (except inside UUIDs),
    cut to LONGEST_LOGGED_TEXT characters (a traceback to its last LONGEST_LOGGED_TRACEBACK)."""
    longest = LONGEST_LOGGED_TRACEBACK if traceback else LONGEST_LOGGED_TEXT
    if len(text) <= longest:
        return _masked(text)
    window = longest + _CARD_SPAN
    if traceback:
        # Its window starts at a line, so that no token or card in it is cut short (masked,
        # the rest shows nothing of one); a single line of that length starts after a run of
        # token characters instead.
        start = len(text) - window
        if start <= 0:  # all of it masked: what the cut leaves shows nothing of a token
            return "(cut)..." + _masked(text)[-longest:]
        line = text.find("\n", start, start + window - longest) + 1
        if line:
            return "(cut)..." + _masked(text[line:])[-longest:]
        kept = _masked(text[start:])[-longest:]
        return "(cut)..." + kept[_run_length(kept, _TOKEN_RUN, limit=1024) :]
    kept = _masked(text[:window])[:longest]
    dangling = _run_length(kept[::-1], _CARD_RUN, limit=_CARD_SPAN + 16)
    if any(c.isdigit() for c in kept[len(kept) - dangling :]):
        kept = kept[: len(kept) - dangling]
    return kept + "...(cut)"


def _run_length(text: str, made_of: frozenset[str], *, limit: int) -> int:
    """How many of `text`'s first characters (at most `limit`) are in `made_of`, any
    non-newline whitespace counting as in it."""
    length = 0
    for c in text[:limit]:
        if c not in made_of and (not c.isspace() or c in "\r\n") and not c.isdigit():
            break
        length += 1
    return length


def _masked(text: str) -> str:
    # Tokens first: a signing secret's characters include `/`, so masked first it could take a
    # token's header that follows a slash with it, and leave the rest with too few dots.
    if "eyJ" in text:
        text = JWT_CANDIDATE.sub(mask_jwt, text)
    if "_" in text:
        text = SECRET_VALUE.sub(REDACTED, text)
    if not CARD_NUMBER.search(text):
        return text
    kept, start = [], 0
    for uuid in UUID_TEXT.finditer(text):
        kept += [CARD_NUMBER.sub(REDACTED, text[start : uuid.start()]), uuid.group()]
        start = uuid.end()
    kept.append(CARD_NUMBER.sub(REDACTED, text[start:]))
    return "".join(kept)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _scrub_text(value)
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEYS.search(str(k)) else _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def scrub_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in list(event_dict):
        if key == "exception" and isinstance(event_dict[key], str):  # format_exc_info's
            event_dict[key] = _scrub_text(event_dict[key], traceback=True)
        elif (
            key == "event" and isinstance(event_dict[key], str) and "Traceback (" in event_dict[key]
        ):
            # A library's traceback logged as its message (uvicorn's at startup): its end, where
            # the error is, is what to keep.
            event_dict[key] = _scrub_text(event_dict[key], traceback=True)
        elif key in ("event", "timestamp", "level", "logger"):
            event_dict[key] = _scrub(event_dict[key])
        elif _SECRET_KEYS.search(key) and key != "transactionId":
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _scrub(event_dict[key])
    return event_dict


def add_timestamp(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    event_dict["timestamp"] = format_utc(datetime.now(UTC))
    return event_dict


def _renderer(log_format: str) -> Any:
    console = log_format == "console" or (log_format == "auto" and sys.stdout.isatty())
    if console:
        return structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
    return structlog.processors.JSONRenderer()


def exception_summary(exc: BaseException) -> str:
    """`Type: first line of the message`, for one log line or one line of a command's output
    (SQLAlchemy's further lines are the statement)."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def configure_logging(
    level: str = "INFO", *, log_format: str = "json", stream: TextIO | None = None
) -> None:
    """Route structlog and the standard library (uvicorn, alembic) into one stream, stdout
    unless `stream` says (a command whose stdout is its answer logs to stderr): JSON lines, or
    (`console`, or `auto` on a terminal) lines a person reads, masked alike."""
    stream = stream if stream is not None else sys.stdout
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        add_timestamp,
        structlog.processors.format_exc_info,
        scrub_secrets,
    ]
    structlog.configure(
        # filter_by_level first: a line below the level is dropped before any work is done.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _renderer(log_format),
            ],
        )
    )
    handler.addFilter(_DropIncompleteAfterClientGone())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Alembic narrates every plugin it loads; keep its warnings only. The database libraries
    # log each statement with its values at DEBUG (and SQLAlchemy at INFO): secrets and card
    # data would reach the log whatever TUCANO_LOG_LEVEL says, so they keep warnings only too.
    for name in ("alembic", "aiosqlite", "asyncpg", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Our edge middleware writes the one line per request; uvicorn's access log would be a second.
    logging.getLogger("uvicorn.access").disabled = True
