"""`fxctl serve forward`'s port forward through a real OpenSSH server on 127.0.0.1: bytes arrive both ways,
a refused remote port drops only that client, and close() stops listening.

fabric's `Connection.forward_local` was weighed and not used: it cannot listen on port 0 and report the port
it got, and a bind error surfaces only when the forward is torn down (its manager thread raises on join)."""

from __future__ import annotations

import socket
import threading

import pytest

from fxctl.remote.session import open_session
from fxctl.serve.forward import PortForward
from tests.conftest import host_for
from tests.support.sshd import free_port

pytestmark = pytest.mark.sshd


def echo_server() -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def roundtrip(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
        return got


def test_forward_carries_bytes_both_ways_and_survives_a_refused_port(ssh_world):
    server, port = echo_server()
    try:
        with open_session(host_for(ssh_world)) as session:
            session.connection.open()
            transport = session.connection.client.get_transport()
            fwd = PortForward(transport, port)
            payload = b"kv-cache " * 20000                       # larger than one 64 KiB pump buffer
            assert roundtrip(fwd.local_port, payload) == payload.upper()
            refused = PortForward(transport, free_port())       # nothing listens there on the host
            with socket.create_connection(("127.0.0.1", refused.local_port), timeout=10) as conn:
                conn.settimeout(10)
                assert conn.recv(1) == b""                      # dropped, not hung
            refused.close()
            assert roundtrip(fwd.local_port, b"again") == b"AGAIN"   # the good forward still serves
            fwd.close()
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", fwd.local_port), timeout=2).close()
    finally:
        server.close()
