"""The SSRF guard as pure functions: every spelling of a non-public address is caught."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.webhooks.url_safety import (
    TargetRefused,
    check_target_url,
    is_allowed_address,
    is_public_address,
    literal_address,
    parse_legacy_ipv4,
    parse_target_url,
    refuse_unless_allowed,
)

PRIVATE_V4 = [
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
    "0.0.0.0/8",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "192.0.0.0/24",
    "198.18.0.0/15",
]


def spellings(address: ipaddress.IPv4Address) -> list[str]:
    """The ways inet_aton (and so many HTTP clients) accept to write one IPv4 address."""
    n = int(address)
    a, b, c, d = address.packed
    return [
        str(address),
        str(n),
        hex(n),
        "0" + oct(n)[2:],
        f"{a}.{(b << 16) | (c << 8) | d}",
        f"{a}.{b}.{(c << 8) | d}",
        f"{hex(a)}.{hex(b)}.{hex(c)}.{hex(d)}",
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}",
    ]


@given(
    st.sampled_from(PRIVATE_V4).flatmap(
        lambda net: st.integers(
            min_value=int(ipaddress.ip_network(net).network_address),
            max_value=int(ipaddress.ip_network(net).broadcast_address),
        )
    )
)
def test_every_spelling_of_a_private_ipv4_is_not_public(number: int) -> None:
    address = ipaddress.IPv4Address(number)
    for spelling in spellings(address):
        assert literal_address(spelling) == address, spelling
    assert not is_public_address(address)
    mapped = ipaddress.IPv6Address(f"::ffff:{address}")
    assert not is_public_address(mapped)
    assert not is_public_address(ipaddress.IPv6Address(f"64:ff9b::{address}"))


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_legacy_parsing_agrees_with_the_dotted_form(number: int) -> None:
    address = ipaddress.IPv4Address(number)
    for spelling in spellings(address):
        assert parse_legacy_ipv4(spelling) == address


@pytest.mark.parametrize("text", ["256.1.1.1", "1.2.3.4.5", "08.1.1.1", "example.com", "1.2.3.256"])
def test_not_an_address(text: str) -> None:
    assert parse_legacy_ipv4(text) is None


@pytest.mark.parametrize("text", ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "151.101.1.69"])
def test_public_addresses(text: str) -> None:
    assert is_public_address(ipaddress.ip_address(text))


@pytest.mark.parametrize(
    "text",
    [
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "2002:a00:1::",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    ],
)
def test_non_public_ipv6(text: str) -> None:
    assert not is_public_address(ipaddress.ip_address(text))


def test_parse_keeps_port_and_defaults_it() -> None:
    assert parse_target_url("https://a.example.com/x", allow_http=False).port == 443
    assert parse_target_url("http://a.example.com/x", allow_http=True).port == 80
    assert parse_target_url("https://a.example.com:8443/", allow_http=False).port == 8443


def test_http_only_when_allowed() -> None:
    with pytest.raises(TargetRefused, match="https"):
        parse_target_url("http://a.example.com/", allow_http=False)


@pytest.mark.parametrize(
    "url",
    ["https://evil.com\\@127.0.0.1/", "https://a.example.com/\x00", "https://a.example.com:0/"],
)
def test_ambiguous_urls_are_refused(url: str) -> None:
    with pytest.raises(TargetRefused):
        parse_target_url(url, allow_http=True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1]]/", "IPv6 address in brackets"),
        ("http://[v1.x]/", "IPv6 address in brackets"),
        ("http://256.1.1.1/", "not a valid IPv4 address"),
        ("http://1.1.1.1.1/", "not a valid IPv4 address"),
        ("http://a.123/", "not a valid IPv4 address"),
        ("http://xn--zz/", "not valid punycode"),
        ("http://xn--a.com/", "not valid punycode"),
        ("http://xn--wca.de/", "not valid punycode"),  # a capital Ü
        ("http://xn--ab-yu3n.de/", "not valid punycode"),  # a full-width dot inside
    ],
)
def test_hosts_no_client_can_send_to_are_refused(url: str, why: str) -> None:
    with pytest.raises(TargetRefused, match=why):
        parse_target_url(url, allow_http=True)


@pytest.mark.parametrize(
    "url",
    [
        "https://[2001:db8::1]:8443/x",
        "https://xn--bcher-kva.example/",
        "https://xn--fa-hia.de/hook",  # faß.de: valid punycode that IDNA 2003 would refuse
        "https://xn--zca.example/",
        "https://123abc.com/",
        "https://a1.example.com/",
    ],
)
def test_hosts_that_look_close_to_those_are_accepted(url: str) -> None:
    assert parse_target_url(url, allow_http=True).url == url


async def test_a_name_resolving_to_loopback_is_refused_unless_allowed() -> None:
    with pytest.raises(TargetRefused, match="not a public address"):
        await check_target_url(
            "https://localhost/", allow_http=False, allowed_networks=[], dns_timeout=2
        )
    target = await check_target_url(
        "https://localhost/",
        allow_http=False,
        allowed_networks=[ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")],
        dns_timeout=2,
    )
    assert target.host == "localhost"


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("::1", "127.0.0.0/8"),
        ("::1", "127.0.0.1/32"),
        ("127.0.0.1", "::1/128"),
        ("::ffff:127.0.0.1", "127.0.0.0/8"),
    ],
)
def test_allowing_loopback_in_one_family_allows_it_in_the_other(address: str, allowed: str) -> None:
    # `localhost` resolves to ::1 and 127.0.0.1 on most machines; 127.0.0.0/8 means "loopback".
    assert is_allowed_address(ipaddress.ip_address(address), [ipaddress.ip_network(allowed)])


@pytest.mark.parametrize(
    ("url", "allowed"),
    [("https://[::1]/x", "127.0.0.0/8"), ("https://127.0.0.1/x", "::1/128")],
)
async def test_an_address_written_in_the_url_must_be_allowed_itself(url: str, allowed: str) -> None:
    """The other family's loopback host is allowed for a name that resolves to both; the URL
    that names an address is sent to that address, which must be in the allowed networks."""
    with pytest.raises(TargetRefused, match="is not a public address"):
        await check_target_url(
            url, allow_http=False, allowed_networks=[ipaddress.ip_network(allowed)], dns_timeout=1
        )
    allowed_too = [ipaddress.ip_network(allowed), ipaddress.ip_network("::1/128")]
    allowed_too.append(ipaddress.ip_network("127.0.0.0/8"))
    target = await check_target_url(
        url, allow_http=False, allowed_networks=allowed_too, dns_timeout=1
    )
    assert target.literal_ip is not None


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.2", "127.0.0.1/32"),  # the twin of the loopback host only, not all loopback
        ("127.0.0.2", "::1/128"),
        ("::1", "127.0.0.2/32"),
        ("10.0.0.1", "127.0.0.0/8"),
        ("fe80::1", "127.0.0.0/8"),
        ("::", "127.0.0.0/8"),
        ("0.0.0.0", "127.0.0.0/8"),
        ("169.254.169.254", "127.0.0.0/8"),
    ],
)
def test_allowing_loopback_allows_nothing_else(address: str, allowed: str) -> None:
    assert not is_allowed_address(ipaddress.ip_address(address), [ipaddress.ip_network(allowed)])


async def test_registration_resolves_even_when_the_loops_resolver_threads_are_busy() -> None:
    # The delivery worker's lookups run on the event loop's threads; hosts slow to resolve can
    # hold every one of them. Registration must still resolve `localhost` (and so refuse it, or
    # here allow it), not run out of time and take it for a name that does not resolve yet.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=2))  # what the loop resolves with
    busy = [loop.run_in_executor(None, time.sleep, 1.5) for _ in range(4)]
    try:
        target = await check_target_url(
            "https://localhost/",
            allow_http=False,
            allowed_networks=[ipaddress.ip_network("127.0.0.0/8")],
            dns_timeout=1,
        )
        assert target.host == "localhost"
    finally:
        await asyncio.gather(*busy)


@pytest.mark.parametrize("address", ["10.1.2.3", "169.254.169.254", "fd00:ec2::254", "::1"])
def test_a_refusal_names_the_host_but_not_the_address_it_resolved_to(address: str) -> None:
    with pytest.raises(TargetRefused) as refused:
        refuse_unless_allowed("hooks.example.com", [ipaddress.ip_address(address)], [])
    assert str(refused.value) == (
        "host hooks.example.com is not a public address; webhooks are only sent to public "
        "hosts (see TUCANO_WEBHOOK_ALLOWED_NETWORKS for local development)"
    )
    assert address not in str(refused.value)
