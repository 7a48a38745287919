"""The sender against real sockets: the SSRF guard at connect time, and what is sent."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.support.claims import claimed
from tests.support.receivers import Behaviour, Received, Receiver, always
from tucano.core.clock import clock
from tucano.deliveries.queue.backend import Outcome
from tucano.deliveries.worker.sender import RESPONSE_BODY_LIMIT, Sender

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


def sender(allowed: list[ipaddress.IPv4Network]) -> Sender:
    return Sender(allowed_networks=allowed, allow_http=True, timeout=2, max_connections=4)


async def test_a_name_resolving_to_a_private_address_is_refused_at_connect_time(
    receiver: Receiver,
) -> None:
    # `localhost` is a name: it goes through the resolver, which checks what it resolves to.
    url = receiver.url("/x").replace("127.0.0.1", "localhost")
    refusing = sender([])
    try:
        result = await refusing.send(claimed(url), headers={}, now=clock.now())
    finally:
        await refusing.close()
    assert result.http_status is None
    assert result.error_message is not None
    assert result.error_message.startswith("refused: targetUrl host localhost")
    assert receiver.received == []

    allowing = sender(LOOPBACK)
    try:
        result = await allowing.send(claimed(url), headers={}, now=clock.now())
    finally:
        await allowing.close()
    assert result.http_status == 200
    assert len(receiver.received) == 1


async def test_a_literal_private_address_is_refused_before_any_connection(
    receiver: Receiver,
) -> None:
    refusing = sender([])
    try:
        for url in (
            receiver.url("/x"),
            "http://10.1.2.3/",
            "http://[::1]:9/",
            "http://2130706433/",
        ):
            result = await refusing.send(claimed(url), headers={}, now=clock.now())
            assert result.error_message is not None
            assert result.error_message.startswith("refused:"), (url, result)
    finally:
        await refusing.close()
    assert receiver.received == []


async def test_an_ipv6_loopback_url_is_refused_when_only_ipv4_loopback_is_allowed() -> None:
    """Allowing 127.0.0.0/8 lets `localhost` resolve to ::1 too, not a URL naming [::1]."""
    client = sender(LOOPBACK)
    try:
        result = await client.send(claimed("http://[::1]:9/"), headers={}, now=clock.now())
    finally:
        await client.close()
    assert result.error_message is not None
    assert result.error_message.startswith("refused: targetUrl host ::1 is not a public address")


async def test_cookies_from_one_receiver_are_never_sent_back(receiver: Receiver) -> None:
    from tests.support.receivers import always

    receiver.behaviours["/cookie"] = always(200, "ok", **{"Set-Cookie": "session=abc; Path=/"})
    client = sender(LOOPBACK)
    try:
        await client.send(claimed(receiver.url("/cookie")), headers={}, now=clock.now())
        await client.send(claimed(receiver.url("/cookie")), headers={}, now=clock.now())
    finally:
        await client.close()
    assert "cookie" not in receiver.received[1].headers


async def test_a_nul_in_the_answer_is_dropped_and_other_text_kept(receiver: Receiver) -> None:
    from tests.support.receivers import always

    # PostgreSQL text holds no NUL; the history must still store and show the answer.
    receiver.behaviours["/odd"] = always(500, "bad\x00 answer: não")
    client = sender(LOOPBACK)
    try:
        result = await client.send(claimed(receiver.url("/odd")), headers={}, now=clock.now())
    finally:
        await client.close()
    assert result.http_status == 500
    assert result.response_body == "bad answer: não"
    assert result.error_message == "receiver answered HTTP 500"


async def test_a_target_stored_with_an_ipv4_spelling_the_client_refuses_says_so(
    receiver: Receiver,
) -> None:
    # Registered before such spellings were refused: the history says what to change.
    url = receiver.url("/x").replace("127.0.0.1", "127.1")
    client = sender(LOOPBACK)
    try:
        result = await client.send(claimed(url), headers={}, now=clock.now())
    finally:
        await client.close()
    assert result.error_message is not None
    assert result.error_message.startswith("targetUrl cannot be sent to: 127.1")
    assert receiver.received == []


async def send_to_raw_server(answer: bytes, *, stall: float = 0) -> Outcome:
    """A POST to a server that reads the request, writes `answer` as it is, waits `stall`
    seconds and closes the connection."""

    async def answer_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(stall)
        writer.close()

    server = await asyncio.start_server(answer_and_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = sender(LOOPBACK)
    try:
        return await client.send(claimed(f"http://127.0.0.1:{port}/"), headers={}, now=clock.now())
    finally:
        await client.close()
        server.close()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "the receiver closed the connection without a complete answer"),
        (b"SMTP ready\r\n\r\n", "the answer was not valid HTTP"),
    ],
)
async def test_a_broken_answer_is_described_in_words(answer: bytes, message: str) -> None:
    result = await send_to_raw_server(answer)
    assert result.error_message is not None
    assert result.error_message.startswith(message), result.error_message


@pytest.mark.parametrize(
    ("status", "stall", "error"),
    [
        (200, 0, None),  # closed after part of the body
        (200, 5, None),  # stalled past the sender's 2 s
        (500, 5, "receiver answered HTTP 500"),
    ],
)
async def test_an_answer_whose_body_stops_short_is_judged_by_its_status(
    status: int, stall: float, error: str | None
) -> None:
    # The status line and headers are the receiver's answer; what came of the body is kept.
    head = f"HTTP/1.1 {status} X\r\nContent-Length: 5000\r\n\r\n".encode()
    result = await send_to_raw_server(head + b"x" * 100, stall=stall)
    assert (result.http_status, result.error_message) == (status, error)
    assert result.succeeded is (status == 200)
    assert result.response_body == "x" * 100


def chunked(*parts: bytes) -> Behaviour:
    """An answer written in separate chunks, a moment apart."""

    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            yield part
            await asyncio.sleep(0.02)

    async def behave(_request: Received, _nth: int) -> web.StreamResponse:
        return web.Response(status=500, body=body())

    return behave


async def test_the_answer_kept_is_its_first_kib_in_utf8_however_it_arrives(
    receiver: Receiver,
) -> None:
    receiver.behaviours["/chunks"] = chunked(b"a" * 300, b"b" * 300, b"c" * 3000)
    receiver.behaviours["/multibyte"] = always(500, "ã" * 2000)  # two bytes each
    receiver.behaviours["/binary"] = lambda _request, _nth: binary()
    client = sender(LOOPBACK)
    try:
        kept = {
            path: (await client.send(claimed(receiver.url(path)), headers={}, now=clock.now()))
            for path in ("/chunks", "/multibyte", "/binary")
        }
    finally:
        await client.close()
    assert kept["/chunks"].response_body == "a" * 300 + "b" * 300 + "c" * 424
    assert kept["/multibyte"].response_body == "ã" * 512
    binary_text = kept["/binary"].response_body
    assert binary_text is not None
    # Each byte that is not UTF-8 reads as U+FFFD, three bytes stored: 341 of them fit in 1 KiB.
    assert binary_text == "\ufffd" * 341
    for result in kept.values():
        assert result.response_body is not None
        assert len(result.response_body.encode()) <= RESPONSE_BODY_LIMIT


async def binary() -> web.StreamResponse:
    return web.Response(status=500, body=bytes(range(128, 256)) * 16)


async def test_an_answer_after_the_timeout_is_a_failure_to_the_millisecond(
    receiver: Receiver,
) -> None:
    # aiohttp rounds a timeout of 5 s or more up to the event loop's next whole second unless
    # told not to: 15 s then meant anything up to 16 s. Starting just after a whole second makes
    # that rounding give almost a second more, so an answer 0.6 s late would count as a success.
    from tests.support.receivers import hanging

    receiver.behaviours["/late"] = hanging(5.6)
    client = Sender(allowed_networks=LOOPBACK, allow_http=True, timeout=5, max_connections=4)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.sleep(1.05 - loop.time() % 1)
        result = await client.send(claimed(receiver.url("/late")), headers={}, now=clock.now())
    finally:
        await client.close()
    assert result.http_status is None
    assert result.error_message == "timed out after 5 s without a complete answer"
    assert 5000 <= result.duration_ms < 5600
