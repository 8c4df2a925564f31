"""The machine's floor for replicated writes: the kernel work that any broker storing its log in
files must do for each MB, with no Kafka in it.

A client process sends 1 MB chunks over loopback TCP to a "leader" process, which receives each
into a reused buffer, writes it to a new file and, with followers, sendfiles that range of the
file to each of them; each "follower" receives and writes to its own new file. These are the
same system calls a broker makes per MB (receive, append, zero-copy send to followers), in
large chunks and with no per-record or per-request work, so the CPU the replica processes use
per MB is what the kernel and this machine charge for the bytes alone. On a virtual machine the
page cache pages a new file takes are the biggest part, and they vary: pages recently freed are
cheap, pages the hypervisor has taken back (virtio-balloon free page reporting) cost ten times
as much to touch again. The floor is measured with warm pages (``warm_page_cache``), as a
broker whose retention deletes as much as it writes gets them; the benchmark warms the page
cache the same way before each broker run, so the two compare.

``floor(megabytes, followers, directory)`` returns the rate and each replica's CPU.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import socket
import tempfile
import time

CHUNK = 1 << 20


def _recv_exact(sock: socket.socket, view: memoryview) -> int:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            break
        got += n
    return got


def _replica(listener: socket.socket, downstream: list[int], directory: str, megabytes: int, out) -> None:
    """Receive ``megabytes`` from one peer, append them to a new file and send each chunk on to
    the ``downstream`` ports with sendfile; report (user, system) CPU seconds."""
    peers = []
    for port in downstream:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peers.append(s)
    conn, _ = listener.accept()
    t0 = os.times()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    fd, _path = tempfile.mkstemp(dir=directory)
    position = 0
    for _ in range(megabytes):
        n = _recv_exact(conn, view)
        os.write(fd, view[:n])
        for peer in peers:
            sent = 0
            while sent < n:
                sent += os.sendfile(peer.fileno(), fd, position + sent, n - sent)
        position += n
    for peer in peers:  # each downstream replica has everything
        peer.recv(1)
    conn.sendall(b"k")
    t1 = os.times()
    os.close(fd)
    out.put((os.getpid(), t1.user - t0.user, t1.system - t0.system))


def warm_page_cache(megabytes: int, directory: str) -> None:
    """Write ``megabytes`` to a new file in ``directory`` and delete it: the next
    ``megabytes`` of page cache anyone takes come from these freed pages, which the host has
    not taken back yet. A broker in its steady state, whose retention deletes as much as it
    writes, takes its page cache that way; runs measured right after this are comparable."""
    data = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(dir=directory, prefix="warm-up-")
    try:
        for _ in range(megabytes):
            os.write(fd, data)
    finally:
        os.close(fd)
        os.unlink(path)


def floor(megabytes: int, followers: int, directory: str) -> dict:
    """The rate (MB/s) the client saw and each replica's CPU ms per MB (the leader first),
    user and system apart, with the page cache warm (``warm_page_cache`` first). The files
    stay in ``directory`` until the next floor: deleting them at once would hand warm pages
    to whatever runs next."""
    for name in os.listdir(directory):
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    warm_page_cache(megabytes * (1 + followers), directory)
    return _floor_pass(megabytes, followers, directory)


def _floor_pass(megabytes: int, followers: int, directory: str) -> dict:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    work = tempfile.mkdtemp(dir=directory, prefix="floor-")
    listeners = []
    for _ in range(1 + followers):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        listeners.append(s)
    ports = [s.getsockname()[1] for s in listeners]
    procs = [
        ctx.Process(target=_replica, args=(listeners[i], [], work, megabytes, out))
        for i in range(1, 1 + followers)
    ]
    procs.insert(0, ctx.Process(target=_replica, args=(listeners[0], ports[1:], work, megabytes, out)))
    for p in reversed(procs):  # followers listen before the leader connects
        p.start()
    data = os.urandom(CHUNK)
    client = socket.create_connection(("127.0.0.1", ports[0]))
    t = time.perf_counter()
    for _ in range(megabytes):
        client.sendall(data)
    client.recv(1)
    seconds = time.perf_counter() - t
    client.close()
    cpu = {}
    for _ in procs:
        pid, user, system = out.get(timeout=300)
        cpu[pid] = (user, system)
    for p in procs:
        p.join()
    for s in listeners:
        s.close()
    per_mb = [(cpu[p.pid][0] / megabytes * 1000, cpu[p.pid][1] / megabytes * 1000) for p in procs]
    return {"mb_per_s": megabytes * CHUNK / 1e6 / seconds, "replicas_ms_per_mb": per_mb}


if __name__ == "__main__":
    base = tempfile.mkdtemp(prefix="odradek-floor-")
    for f in (0, 2):
        r = floor(512, f, base)
        print(
            f"RF={f + 1}: {r['mb_per_s']:.0f} MB/s, replicas' CPU per MB (user, system): {r['replicas_ms_per_mb']}"
        )
    shutil.rmtree(base)
