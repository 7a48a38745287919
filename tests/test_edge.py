"""The outermost layer, seen from a client's socket: what a connection that goes away leaves in
the log."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.processes import start_serve


def test_a_client_that_leaves_before_its_pipelined_answers_is_no_error(tmp_path: Path) -> None:
    server = start_serve(tmp_path)
    try:
        address = urlsplit(server.base_url)
        for _ in range(5):
            # Three requests in one write, then gone: the server still runs the queued ones
            # and finds the connection closed when it answers them.
            with socket.create_connection((address.hostname, address.port)) as client:
                client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
                client.shutdown(socket.SHUT_WR)
                client.settimeout(0.05)
                try:
                    while client.recv(65536):
                        pass
                except TimeoutError:
                    pass
        time.sleep(1)
        logs = server.logs()
    finally:
        server.stop()
    # (Whether the server finds the connection closed depends on timing; here it does for most
    # of the five, and without the fix each one logged an unhandled_error with its traceback.)
    assert "unhandled_error" not in logs and "Traceback" not in logs
