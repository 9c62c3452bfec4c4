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
        self.thread = threading.Thread(target=self._accept, daemon=True)
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
            done = threading.Barrier(2, action=lambda c=client, ch=channel: _close(c, ch))
            for src, dst in ((client, channel), (channel, client)):
                threading.Thread(target=_pump, args=(src, dst, done), daemon=True).start()

    def close(self) -> None:
        """Stop listening now: shutdown wakes the accepting thread (close alone leaves the socket listening
        while accept() holds it)."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=5)


def _pump(src, dst, done: threading.Barrier) -> None:
    """Copy src -> dst until src's EOF, then half-close dst (a client that shuts its write side still gets the
    answer); both ends close when both directions are done."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        if hasattr(dst, "shutdown_write"):
            dst.shutdown_write()           # paramiko channel
        else:
            dst.shutdown(socket.SHUT_WR)
    except (OSError, EOFError):
        _close(src, dst)                   # a broken end: the other direction ends too
    try:
        done.wait(timeout=3600)
    except threading.BrokenBarrierError:
        pass


def _close(*ends) -> None:
    for end in ends:
        try:
            end.close()
        except (OSError, EOFError):  # the SSH transport may be gone already
            pass
