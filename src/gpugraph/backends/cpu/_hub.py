"""Communicators of several processes on the CPU backend (NCCL's ncclGetUniqueId and ncclCommInitRank).

The process that makes a unique id starts a hub for it: a listener on this host's loopback interface, whose
port and key the id carries (NCCL's bootstrap root does the same). Each rank's process connects to it. The
hub holds the group's Clique, and each rank's parts run there: a part sends its input over a connection and
a hub thread runs it in the Clique as an in-process rank's part would, then sends the rank its result. So
the ranks of several processes follow the rules of the ranks of one (the order that matches the parts,
the checks, the timeouts), and an abort or a rank whose process goes away aborts the whole group.
"""

from __future__ import annotations

import contextlib
import secrets
import struct
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import numpy as np

from ..._errors import CollectiveError
from ._collectives import Clique, _absent, _Part
from ._parallel import lending

_HOST = "127.0.0.1"
_ID = struct.Struct("!H16s")  # the hub's port and key
_hubs: list[_Hub] = []  # the hubs this process made (each lives while the process does: none is shut down yet)


def unique_id() -> bytes:
    """A new group's id: starts its hub in this process."""
    hub = _Hub()
    _hubs.append(hub)
    return _ID.pack(hub.port, hub.key)


class _Hub:
    """The listener of one unique id, and its group's Clique once the first rank joins."""

    def __init__(self) -> None:
        self.key = secrets.token_bytes(16)
        self.listener = Listener((_HOST, 0), authkey=self.key)
        self.port = self.listener.address[1]
        self.clique: Clique | None = None
        self.joined: set[int] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, name="gpugraph-cpu-hub", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except (OSError, EOFError, AuthenticationError):  # (a client that failed the key's handshake)
                continue
            threading.Thread(target=self._serve, args=(conn,), name="gpugraph-cpu-hub-rank", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        """One connection: a rank's join, then its requests until it closes; or a part's extra connection."""
        try:
            first = conn.recv()
            if first[0] == "join":
                self._join(conn, *first[1:])
            elif first[0] == "attach" and self.clique is not None:
                self._requests(conn, first[1], self.clique, main=False)
            elif first[0] == "abort" and self.clique is not None:
                self.clique.abort(first[1])
        except (EOFError, OSError):
            pass  # (the rank's process went away: _join's own connection says so to the group)
        finally:
            conn.close()

    def _join(self, conn: Connection, rank: int, size: int, timeout: float | None) -> None:
        with self.lock:
            if self.clique is None:
                self.clique = Clique(size, timeout)
            clique = self.clique
        with clique.cond:
            error = None
            if size != clique.size:
                error = f"cpu: rank {rank} was made with size {size}, the group has {clique.size}"
            elif rank in self.joined:
                error = f"cpu: rank {rank} joined twice"
            if error is not None:
                conn.send(("error", error, None))
                return
            clique.timeouts[rank] = timeout
            self.joined.add(rank)
            clique.cond.notify_all()
            try:
                clique.wait(rank, "communicator", -1, lambda: len(self.joined) == size,
                             lambda: _absent(size, self.joined))
            except CollectiveError as exc:
                conn.send(("error", str(exc), clique.aborted))
                return
        conn.send(("ok", None))
        self._requests(conn, rank, clique, main=True)

    def _requests(self, conn: Connection, rank: int, clique: Clique, main: bool) -> None:
        """A rank's requests on ``conn`` until it closes it. The ``main`` one (its join's) ends when the rank
        is destroyed ("close") or its process goes away, which aborts the group."""
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                if main:
                    clique.abort(f"rank {rank}'s process went away (its connection to the hub closed)")
                return
            if message[0] == "close":
                return
            try:
                conn.send(("ok", _run(clique, rank, message)))
            except CollectiveError as exc:
                conn.send(("error", str(exc), clique.aborted))
            except Exception as exc:  # noqa: BLE001 - given to the rank, which raises it (the thread goes on)
                conn.send(("error", f"cpu: rank {rank}'s {message[0]} failed in the hub: {type(exc).__name__}: "
                                    f"{exc}", clique.aborted))


def _run(clique: Clique, rank: int, message: tuple) -> Any:
    """A rank's request, run in the clique as an in-process rank's part; returns what the rank receives."""
    what = message[0]
    if what == "collective":
        kind, count, dtype, op, root, send, recv_size = message[1:]
        recv = np.empty(recv_size, dtype)
        clique.collective(_Part(rank, kind, count, np.dtype(dtype), op, root, send, recv))
        return None if kind == "reduce" and rank != root else recv  # (a reduce writes the root's only)
    if what == "send":
        clique.send(rank, message[1], message[2])
        return None
    if what == "recv":
        out = np.empty(message[2], message[3])
        clique.recv(rank, message[1], out)
        return out
    raise CollectiveError(f"cpu: the hub got an unknown request {what!r}", rank=rank, collective=str(what))


class RemoteClique:
    """A rank's side of a hub's group: what CpuComm's parts call, as they call an in-process Clique."""

    def __init__(self, unique_id: bytes, rank: int, size: int, timeout: float | None) -> None:
        if len(unique_id) != _ID.size:
            raise ValueError(f"communicator(unique_id): not a cpu unique id ({len(unique_id)} bytes)")
        self.port, self.key = _ID.unpack(unique_id)
        self.rank, self.size = rank, size
        self.aborted: str | None = None
        self.idle: list[Connection] = []  # connections free for the next part (one per part running at once)
        self.lock = threading.Lock()
        self.main = self._connect("communicator")
        try:
            self.main.send(("join", rank, size, timeout))
            self._answer(self.main, "communicator")
        except BaseException:
            self.main.close()
            raise

    def _connect(self, kind: str) -> Connection:
        try:
            return Client((_HOST, self.port), authkey=self.key)
        except (OSError, EOFError, AuthenticationError) as exc:  # (refused, or another process took the port)
            raise CollectiveError(f"cpu: rank {self.rank}'s {kind}: cannot reach the hub of the unique id at "
                                  f"{_HOST}:{self.port} (the process that made the id must live while the group "
                                  f"does, on this host): {exc}", rank=self.rank, collective=kind) from None

    def _answer(self, conn: Connection, kind: str) -> Any:
        try:
            with lending():  # (in a graph launch's branch: the other ranks' parts may need this thread's place)
                reply = conn.recv()
        except (EOFError, OSError):
            gone = "the hub went away (the process that made the unique id ended)"
            reply = ("error", f"cpu: rank {self.rank}'s {kind}: {gone}", gone)
        if reply[0] == "error":
            self.aborted = self.aborted or reply[2]
            raise CollectiveError(reply[1], rank=self.rank, collective=kind)
        return reply[1]

    def _request(self, kind: str, message: tuple) -> Any:
        if self.aborted is not None:
            raise CollectiveError(f"cpu: rank {self.rank}'s {kind}: the communicator was aborted ({self.aborted})",
                                  rank=self.rank, collective=kind)
        with self.lock:
            conn = self.idle.pop() if self.idle else None
        if conn is None:
            conn = self._connect(kind)
            conn.send(("attach", self.rank))
        try:
            conn.send(message)
            result = self._answer(conn, kind)
        except BaseException:
            conn.close()  # (a part left mid-request: its connection's state is unknown)
            raise
        with self.lock:
            self.idle.append(conn)
        return result

    # What _run_part calls

    def collective(self, part: _Part) -> None:
        result = self._request(part.kind, ("collective", part.kind, part.count, part.dtype.str, part.op, part.root,
                                           np.ascontiguousarray(part.send), part.recv.size))
        if result is not None:
            part.recv[...] = result

    def send(self, sender: int, receiver: int, data: np.ndarray) -> None:
        self._request("send", ("send", receiver, np.ascontiguousarray(data)))

    def recv(self, receiver: int, sender: int, out: np.ndarray) -> None:
        data = self._request("recv", ("recv", sender, out.size, out.dtype.str))
        out[...] = data

    # What the backend's comm_abort and comm_destroy call

    def abort(self, why: str) -> None:
        if self.aborted is None:
            self.aborted = why
            try:
                conn = self._connect("abort")
                conn.send(("abort", why))
                conn.close()
            except (CollectiveError, OSError):
                pass  # (the hub is gone: no other rank is left to tell)

    def close(self) -> None:
        with self.lock:
            conns, self.idle = [self.main, *self.idle], []
        for conn in conns:
            with contextlib.suppress(OSError):  # (the hub is gone already)
                conn.send(("close",))
            conn.close()

