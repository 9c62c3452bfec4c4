"""A local port forwarded to a port on a serving host's loopback, through the SSH connection fxctl already
uses (paramiko direct-tcpip channels): how a client on this machine reaches an instance bound to 127.0.0.1."""

from __future__ import annotations

import socket
import threading


class PortForward:
    """Listen on 127.0.0.1:local_port (0: any free port); each connection becomes a channel to remote_port."""

    def __init__(self, transport, remote_port: int, local_port: int = 0):
        self.transport, self.remote_port = transport, remote_port
        self.listener = socket.create_server(("127.0.0.1", local_port))
        self.local_port = self.listener.getsockname()[1]
        self.thread = threading.Thread(machine=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                channel = self.transport.open_channel("direct-tcpip", ("127.0.0.1", self.remote_port),
                                                      ("127.0.0.1", 0))
            except Exception:  # the host refused (nothing listening): drop this client, keep serving
                client.close()
                continue
            for src, dst in ((client, channel), (channel, client)):
                threading.Thread(machine=_pump, args=(src, dst), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def _pump(src, dst) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except (OSError, EOFError):
        pass
    finally:
        for end in (src, dst):
            try:
                end.close()
            except (OSError, EOFError):  # the SSH transport may be gone already
                pass
