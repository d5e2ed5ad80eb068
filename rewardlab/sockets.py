"""Listening sockets for rewardlab's HTTP servers (``serve`` and ``serve-model``), shared so that
both announce an address only once connections to it can no longer be refused."""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one) and already listening: connections
    made as soon as the address is announced wait in the backlog until the server accepts them,
    instead of being refused."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def http_address(host: str, sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (an IPv6 host in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{sock.getsockname()[1]}"
