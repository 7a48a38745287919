"""Which webhook targets Tucano may POST to: the SSRF guard, used at registration and at delivery.

A target must be an absolute http(s) URL without credentials whose host is, or resolves only to,
public addresses. "Public" is decided on the address itself, after undoing the spellings that
hide one address inside another: legacy IPv4 forms (`2130706433`, `0x7f.1`, `127.1`), IPv4-mapped
and -compatible IPv6, NAT64, 6to4 and Teredo. Networks in TUCANO_WEBHOOK_ALLOWED_NETWORKS are let
through, for local development.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import idna

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2048

# Blocked outright, whatever this Python's `is_global` table says of them (it differs by version).
_NON_PUBLIC = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
        "::/128",
        "::1/128",
        "100::/64",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Names that never point anywhere a merchant's receiver lives, refused without asking DNS.
_SPECIAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".localdomain")
_SPECIAL_NAMES = {"localhost", "metadata", "instance-data", "metadata.google.internal"}
_LEGACY_IPV4 = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$", re.IGNORECASE)
_HOSTNAME_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$", re.IGNORECASE)


# A label that is a number (decimal, or 0x hexadecimal): a host ending in one is an IPv4 address.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$", re.IGNORECASE)
_BRACKETED_HOST = re.compile(r"^\[([0-9a-f:.]+)\](?::[0-9]*)?$", re.IGNORECASE)


def _valid_bracketed_host(netloc: str) -> bool:
    found = _BRACKETED_HOST.match(netloc)
    if found is None:
        return False
    try:
        ipaddress.IPv6Address(found.group(1))
    except ValueError:
        return False
    return True


def _decodes_as_idna(label: str) -> bool:
    """Whether an xn-- label is a valid IDNA 2008 name (the `idna` library; Python's own codec
    follows IDNA 2003, which maps ß to ss and so refuses faß.de)."""
    try:
        idna.decode(label)
    except (idna.IDNAError, UnicodeError):
        return False
    return True


class TargetRefused(ValueError):
    """The URL may not receive webhooks; the message is safe to show to the merchant."""


@dataclass(frozen=True)
class TargetUrl:
    url: str
    scheme: str
    host: str  # lower-case, no brackets, no trailing dot
    port: int
    literal_ip: IPAddress | None


def parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Read IPv4 as inet_aton does: 1 to 4 parts, each decimal, octal (0...) or hex (0x...)."""
    if not _LEGACY_IPV4.match(host):
        return None
    parts: list[int] = []
    for part in host.split("."):
        lowered = part.lower()
        if lowered.startswith("0x"):
            value = int(lowered[2:] or "0", 16)
        elif len(part) > 1 and part.startswith("0"):
            if not all(c in "01234567" for c in part):
                return None
            value = int(part, 8)
        else:
            value = int(part)
        parts.append(value)
    *head, last = parts
    if any(p > 255 for p in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for p in head:
        number = number * 256 + p
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def literal_address(host: str) -> IPAddress | None:
    """The address a host names by itself, in any spelling a resolver would accept, or None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if "%" in host:  # IPv6 with a zone id: fe80::1%eth0
        try:
            return ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return None
    return parse_legacy_ipv4(host)


def embedded_addresses(address: IPAddress) -> list[IPAddress]:
    """The address itself plus every IPv4 address an IPv6 address carries inside it."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.extend(address.teredo)
        if any(address in net for net in _NAT64) or (
            address in _IPV4_COMPATIBLE and int(address) > 1
        ):
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public_address(address: IPAddress) -> bool:
    """True only for a globally routable unicast address (and everything it embeds)."""
    for candidate in embedded_addresses(address):
        if (
            not candidate.is_global
            or candidate.is_multicast
            or candidate.is_private
            or candidate.is_loopback
            or candidate.is_link_local
            or candidate.is_reserved
            or candidate.is_unspecified
            or any(candidate in network for network in _NON_PUBLIC)
        ):
            return False
    return True


# The loopback host in each family: allowing one allows the other.
_LOCALHOST: dict[IPAddress, IPAddress] = {
    ipaddress.ip_address("127.0.0.1"): ipaddress.ip_address("::1"),
    ipaddress.ip_address("::1"): ipaddress.ip_address("127.0.0.1"),
}


def is_allowed_address(
    address: IPAddress, allowed_networks: Sequence[IPNetwork], *, resolved: bool = True
) -> bool:
    """Whether a webhook may be sent to `address`; `resolved`: a name resolved to it (False:
    the URL names the address itself)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:10.1.2.3 is 10.1.2.3, allowed or not alike
    if any(address in network for network in allowed_networks):
        return True
    # A name that resolves to the loopback host in one family is allowed when the other family's
    # is: `localhost` resolves to ::1 as well as 127.0.0.1 on most machines, and
    # TUCANO_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 (the documented setting for local development)
    # would otherwise refuse it. An address written in the URL must be allowed itself.
    twin = _LOCALHOST.get(address) if resolved else None
    if twin is not None and any(twin in network for network in allowed_networks):
        return True
    return is_public_address(address)


def parse_target_url(url: str, *, allow_http: bool) -> TargetUrl:
    """Check the form of a target URL (no network): raises TargetRefused saying what is wrong."""
    if len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"must have at most {MAX_URL_LENGTH} characters")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise TargetRefused(
            "must be ASCII without spaces (write international domain names as xn--)"
        )
    if "\\" in url:
        raise TargetRefused("must not contain backslashes")
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError:
        raise TargetRefused("is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise TargetRefused("must be an absolute https URL, such as https://example.com/webhooks")
    if scheme == "http" and not allow_http:
        raise TargetRefused("must use https (plain http is accepted only in the sandbox)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise TargetRefused("must not contain credentials (user:password@)")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise TargetRefused("must name a host")
    if port == 0:
        raise TargetRefused("must not use port 0")
    if ("[" in parts.netloc or "]" in parts.netloc) and not _valid_bracketed_host(parts.netloc):
        raise TargetRefused("must write an IPv6 address in brackets as it is, e.g. [2001:db8::1]")
    address = literal_address(host)
    if address is None:
        labels = host.split(".")
        if len(host) > 253 or not all(_HOSTNAME_LABEL.match(label) for label in labels):
            raise TargetRefused("does not have a valid host name")
        if _NUMERIC_LABEL.match(labels[-1]):
            # A host ending in a number is read as an IPv4 address (WHATWG URL), and this one
            # is none: HTTP clients refuse it.
            raise TargetRefused(f"host {host} is not a valid IPv4 address")
        for label in labels:
            if label[:4].lower() == "xn--" and not _decodes_as_idna(label):
                raise TargetRefused(f"host {host} has a label that is not valid punycode")
    return TargetUrl(
        url=url,
        scheme=scheme,
        host=host.lower(),
        port=port or (443 if scheme == "https" else 80),
        literal_ip=address,
    )


def refuse_unusual_spelling(target: TargetUrl) -> None:
    """At registration, an IPv4 address is written in dotted decimal: `127.1`, `2130706433`
    or `0x7f.0.0.1` name an address to a resolver, but HTTP clients refuse some of them (and read
    others as names), so a webhook registered with one might never be delivered. Checked after
    `refuse_unless_allowed`, so that a non-public address says so whatever its spelling."""
    address = target.literal_ip
    if isinstance(address, ipaddress.IPv4Address) and target.host != str(address):
        raise TargetRefused(
            f"host {target.host} is an IPv4 address in an unusual spelling; write it as {address}"
        )


def refuse_unless_allowed(
    host: str,
    addresses: Sequence[IPAddress],
    allowed_networks: Sequence[IPNetwork],
    *,
    resolved: bool = True,
) -> None:
    # The message names the host only: the address a name resolved to would tell a merchant
    # (or whoever probes with webhooks) what lies inside the provider's network.
    for address in addresses:
        if not is_allowed_address(address, allowed_networks, resolved=resolved):
            raise TargetRefused(
                f"host {host} is not a public address; webhooks are only sent to "
                "public hosts (see TUCANO_WEBHOOK_ALLOWED_NETWORKS for local development)"
            )


# Registration's lookups have threads of their own: the delivery worker's lookups share the
# event loop's (four under uvloop), and hosts that are slow to resolve could hold all of them,
# so that a registration's check ran out of time and took a private host for one that does
# not resolve yet.
_REGISTRATION_RESOLVER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tucano-dns")


async def resolve_addresses(host: str, port: int, *, dns_timeout: float) -> list[IPAddress]:
    """Every address the host resolves to (TCP), empty when it does not resolve."""
    loop = asyncio.get_running_loop()
    lookup = functools.partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = await asyncio.wait_for(
            loop.run_in_executor(_REGISTRATION_RESOLVER, lookup), timeout=dns_timeout
        )
    except (TimeoutError, socket.gaierror, UnicodeError, OSError):
        return []
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = literal_address(str(sockaddr[0]))
        if address is not None and address not in addresses:
            addresses.append(address)
    return addresses


def is_special_name(host: str) -> bool:
    return host in _SPECIAL_NAMES or host.endswith(_SPECIAL_SUFFIXES)


async def check_target_url(
    url: str,
    *,
    allow_http: bool,
    allowed_networks: Sequence[IPNetwork],
    dns_timeout: float,
) -> TargetUrl:
    """Registration-time check: form, then every resolved address.

    A name that does not resolve (yet) is accepted, since DNS is checked again before each
    delivery; a special-use name (localhost, *.internal, ...) must resolve into an allowed network.
    """
    target = parse_target_url(url, allow_http=allow_http)
    if target.literal_ip is not None:
        refuse_unless_allowed(target.host, [target.literal_ip], allowed_networks, resolved=False)
        refuse_unusual_spelling(target)
        return target
    addresses = await resolve_addresses(target.host, target.port, dns_timeout=dns_timeout)
    if not addresses and is_special_name(target.host):
        raise TargetRefused(f"host {target.host} is not a public host name")
    refuse_unless_allowed(target.host, addresses, allowed_networks)
    return target
