"""Direct channels between the tasks of one barrier stage: how resident brokers exchange a round's messages.

The fast engine (issue 11) keeps broker state inside long-lived Spark tasks for a run of rounds. The
tasks still have to swap each round's messages (fetches, responses, ISR traffic) with one another.
Spark's own collective, `BarrierTaskContext.allGather`, measured ~1 s per call on this 2-core machine
(shared engine notes, "Barrier execution"), which would cap the engine near one round per second. So
the tasks meet once through `allGather` to learn each other's address, then talk over a full mesh
of TCP connections (TCP_NODELAY) for the rest of the job: the rendezvous-then-own-transport pattern
XGBoost and Horovod use on Spark. Payloads are Arrow IPC streams of pandas frames.

Each exchange also carries a small header (JSON) from every task, so that all tasks take the same
decision after it (e.g. "a task needs the controller: every task returns to the driver after this
round"); deterministic order: frames received are concatenated by source rank.

Nothing here knows Kafka: `Mesh` moves bytes, `exchange_frames` routes a frame by a destination
column (`dest % tasks`, the placement `repartitionById` gives brokers).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from ..protocol import frames as F

_LEN = struct.Struct("!Q")


def _send_blob(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LEN.pack(len(data)))
    if data:
        sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection mid-message")
        got += k
    return bytes(buf)


def _recv_blob(sock: socket.socket) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    return _recv_exact(sock, n) if n else b""


def _nodelay(sock: socket.socket, timeout: float) -> socket.socket:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)
    return sock


class Mesh:
    """A full mesh of TCP connections between the `size` tasks of one barrier stage.

    Rank r connects to every lower rank and accepts every higher one, announcing its rank first, so
    the mesh is the same whatever order the tasks start in. `exchange` sends one (header, body) to
    every peer and receives one from every peer; a thread per peer sends, so two tasks sending
    each other large bodies never wait on each other's full socket buffers.
    """

    def __init__(self, rank: int, peers: dict[int, socket.socket]) -> None:
        self.rank = rank
        self.peers = peers
        self.size = len(peers) + 1

    @classmethod
    def connect(cls, rank: int, addresses: Sequence[tuple[str, int]], server: socket.socket,
                timeout: float = 300.0) -> Mesh:
        """Build the mesh once every task's listening address is known (`addresses[rank]` is ours)."""
        peers: dict[int, socket.socket] = {}
        for j in range(rank):
            s = _nodelay(socket.create_connection(tuple(addresses[j]), timeout=timeout), timeout)
            s.sendall(_LEN.pack(rank))
            peers[j] = s
        server.settimeout(timeout)
        for _ in range(len(addresses) - rank - 1):
            conn, _ = server.accept()
            conn = _nodelay(conn, timeout)
            (j,) = _LEN.unpack(_recv_exact(conn, _LEN.size))
            peers[int(j)] = conn
        server.close()
        return cls(rank, peers)

    @classmethod
    def rendezvous(cls, ctx: Any, timeout: float = 300.0) -> Mesh:
        """Meet the other tasks of the barrier stage `ctx` (a BarrierTaskContext): one allGather of
        each task's listening address, on the host its executor runs on."""
        rank = ctx.partitionId()
        host = ctx.getTaskInfos()[rank].address.rsplit(":", 1)[0] or "127.0.0.1"
        server = socket.create_server((host, 0))
        server.listen(len(ctx.getTaskInfos()))
        addresses = [tuple(json.loads(a)) for a in ctx.allGather(json.dumps([host, server.getsockname()[1]]))]
        return cls.connect(rank, addresses, server, timeout)

    def exchange(self, header: dict, bodies: dict[int, bytes]) -> tuple[list[dict], dict[int, bytes]]:
        """Send `header` and `bodies[peer]` (b"" when absent) to every peer; return every task's header
        (ours included, by rank) and the body each peer sent us."""
        head = json.dumps(header, sort_keys=True).encode()
        errors: list[BaseException] = []

        def send(j: int, s: socket.socket) -> None:
            try:
                _send_blob(s, head)
                _send_blob(s, bodies.get(j, b""))
            except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=send, args=(j, s), daemon=True) for j, s in self.peers.items()]
        for t in threads:
            t.start()
        headers: list[dict] = [{}] * self.size
        headers[self.rank] = header
        got: dict[int, bytes] = {}
        for j in sorted(self.peers):
            s = self.peers[j]
            headers[j] = json.loads(_recv_blob(s))
            got[j] = _recv_blob(s)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return headers, got

    def close(self) -> None:
        for s in self.peers.values():
            try:
                s.close()
            except OSError:
                pass
        self.peers = {}


def to_ipc(frame: pd.DataFrame) -> bytes:
    """A pandas frame as an Arrow IPC stream (b"" for an empty frame: nothing to send)."""
    if frame.empty:
        return b""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pd.DataFrame | None:
    if not data:
        return None
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()


def exchange_frames(mesh: Mesh, frame: pd.DataFrame, dest: str, header: dict | None = None
                    ) -> tuple[list[dict], pd.DataFrame]:
    """Deliver each row of `frame` to the task that hosts `frame[dest]` (task `dest % size`) and
    return (every task's header, the rows destined for this task), the rows ordered by source rank
    and, within a source, as that source sent them (so every run sees the same order)."""
    owner = frame[dest].to_numpy() % mesh.size
    bodies = {j: to_ipc(frame[owner == j]) for j in mesh.peers}
    headers, got = mesh.exchange(header or {}, bodies)
    parts = []
    for j in range(mesh.size):
        part = frame[owner == j] if j == mesh.rank else from_ipc(got.get(j, b""))
        if part is not None and len(part):
            parts.append(part)
    # column by column (F.concat): pd.concat checks each value of an all-null string column for a null
    mine = F.concat(parts, {c: str(t) for c, t in frame.dtypes.items()}) if parts else frame.iloc[0:0].reset_index(drop=True)
    return headers, mine
