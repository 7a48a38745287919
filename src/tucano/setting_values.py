"""How settings' values are written and checked: durations, lists, loopback hosts, and what makes
a production secret key too weak. Pure functions, read by config.py."""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
# Longer than any delay or period the service has a use for, and far inside timedelta's range.
LONGEST_DURATION = timedelta(days=3650)


def parse_duration(text: str) -> timedelta:
    """Parse `5s`, `5m`, `2h`, `1d`, `250ms` or bare seconds into a timedelta."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration such as 5s, 5m, 2h or 1d")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if seconds > LONGEST_DURATION.total_seconds():
        raise ValueError(f"{text.strip()!r} is longer than {LONGEST_DURATION.days} days")
    return timedelta(seconds=seconds)


# A production TUCANO_SECRET_KEY: at least this many bytes, and no visible pattern (below).
SECRET_KEY_MIN_BYTES = 32
SECRET_KEY_MIN_DISTINCT = 8


def _longest_steady_run(text: str) -> int:
    """The longest stretch in which each character is the one before plus a fixed step: `aaaa`
    (step 0), `0123`, `zyxw`."""
    longest = run = min(len(text), 1)
    for position in range(1, len(text)):
        step = ord(text[position]) - ord(text[position - 1])
        steady = position > 1 and step == ord(text[position - 1]) - ord(text[position - 2])
        run = run + 1 if steady else 2
        longest = max(longest, run)
    return longest


def secret_key_weakness(key: str) -> str | None:
    """Why `key` is too weak to sign production's tokens, or None. Not an entropy measure (a
    key's randomness cannot be seen in it), only what a person can see: too short, few distinct
    characters, a piece repeated, or a run such as `aaaa` or `1234` for half of it or more."""
    if len(key.encode()) < SECRET_KEY_MIN_BYTES:
        return f"is shorter than {SECRET_KEY_MIN_BYTES} bytes"
    if len(set(key)) < SECRET_KEY_MIN_DISTINCT:
        return f"has fewer than {SECRET_KEY_MIN_DISTINCT} distinct characters"
    for period in range(1, len(key) // 2 + 1):
        if all(key[i] == key[i - period] for i in range(period, len(key))):
            return f"repeats its first {period} characters"
    if 2 * _longest_steady_run(key) >= len(key):
        return "is half or more one run of characters (such as aaaa or 1234)"
    return None


# What a webhook's target must never reach in production, whatever the operator allows.
_GUARDED_RANGES = (
    (ipaddress.ip_network("127.0.0.0/8"), "loopback addresses"),
    (ipaddress.ip_network("::1/128"), "the loopback address"),
    (ipaddress.ip_network("169.254.0.0/16"), "link-local addresses (cloud metadata)"),
    (ipaddress.ip_network("fe80::/10"), "link-local addresses"),
    (ipaddress.ip_network("0.0.0.0/32"), "the unspecified address"),
    (ipaddress.ip_network("::/128"), "the unspecified address"),
)


def guarded_range_in(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
    """What `network` reaches that production never delivers to (loopback, link-local,
    unspecified), or None."""
    for guarded, what in _GUARDED_RANGES:
        if guarded.version == network.version and network.overlaps(guarded):
            return what
    return None


def is_loopback_host(host: str) -> bool:
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


# An origin a page may be framed by: a scheme, a host (a name, maybe with a leading `*.`, an
# IPv4 address or [IPv6]) and maybe a port; no path.
_FRAME_ORIGIN = re.compile(
    r"(?i)(https?)://(\*\.)?([a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
    r"|\[[0-9a-f:.]+\])(?::(\d{1,5}))?/?"
)


def frame_ancestors(value: str) -> str:
    """The CSP `frame-ancestors` sources of a space-separated list: `'none'` (alone; also for an
    empty list), `'self'`, or origins such as `https://dash.example.com`. ValueError saying
    what is wrong otherwise."""
    sources = value.split()
    if not sources or sources == ["'none'"]:
        return "'none'"
    kept: list[str] = []
    for source in sources:
        if source.lower() == "'none'":
            raise ValueError("'none' must stand alone")
        if source.lower() == "'self'":
            origin = "'self'"
        else:
            match = _FRAME_ORIGIN.fullmatch(source)
            if match is None or (match.group(4) and not 0 < int(match.group(4)) <= 65535):
                raise ValueError(
                    f"{source[:100]!r} is not an origin such as https://dash.example.com "
                    "(a scheme, a host and maybe a port; no path), 'self' or 'none'"
                )
            origin = source.rstrip("/").lower()
        if origin not in kept:
            kept.append(origin)
    return " ".join(kept)


def frame_origin_host(source: str) -> tuple[str, str] | None:
    """(scheme, host) of a frame-ancestors origin that frame_ancestors kept; None for 'self'."""
    match = _FRAME_ORIGIN.fullmatch(source)
    if match is None:
        return None
    return match.group(1).lower(), match.group(3).strip("[]")
