"""Socket buffer sizes as Kafka's ``*.buffer.bytes`` settings give them.

-1 (``OS_DEFAULT``) leaves the kernel's choice; on Linux that is autotuning, which grows a
TCP connection's buffers with its bandwidth-delay product up to ``net.ipv4.tcp_wmem`` /
``tcp_rmem``. Any other value is set with SO_SNDBUF / SO_RCVBUF, which Linux doubles (for its
bookkeeping) and which turns autotuning off for that direction of that socket. A receive
buffer must be set before the connection is made (on the listening socket, or before
``connect``) to count in the TCP window scale both ends agree on.
"""

from __future__ import annotations

import socket

OS_DEFAULT = -1


def set_buffer_sizes(sock, send_bytes: int = OS_DEFAULT, receive_bytes: int = OS_DEFAULT) -> None:
    """SO_SNDBUF and SO_RCVBUF of ``sock`` (a socket, or asyncio's wrapper of one), each left
    alone when ``OS_DEFAULT``."""
    if send_bytes != OS_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_bytes)
    if receive_bytes != OS_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_bytes)
