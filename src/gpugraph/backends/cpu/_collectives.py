"""The CPU backend's communicators: NCCL's collectives emulated between the ranks' stream workers.

Each rank's part of a collective is a task on its stream (a host node when captured). Parts meet in their
Clique: the n-th part each rank runs belongs to the n-th collective, whichever stream or graph launch ran
it, as NCCL's operations on one communicator are matched by their order. The last part to arrive checks that
every rank called the same collective, computes every rank's result from inputs read before any is written
(so a buffer may be both send and recv), and releases the others. A send leaves a copy in the pair's
mailbox and goes on; a receive waits for it. A part that waits longer than its rank's timeout
aborts the clique: every waiting part and every later call fails, naming the rank and the collective.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Container
from typing import Any, Protocol

import numpy as np

from ..._errors import CollectiveError
from ._memory import typed_view
from ._parallel import lending

_REDUCE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "avg": np.add}


class _Part:
    """One rank's part of one collective, as it waits in the clique."""

    __slots__ = ("rank", "kind", "count", "dtype", "op", "root", "send", "recv", "done", "error")

    def __init__(self, rank: int, kind: str, count: int, dtype: np.dtype, op: str | None, root: int,
                 send: np.ndarray, recv: np.ndarray) -> None:
        self.rank, self.kind, self.count, self.dtype, self.op, self.root = rank, kind, count, dtype, op, root
        self.send, self.recv = send, recv
        self.done = False
        self.error: CollectiveError | None = None

    def signature(self) -> tuple:
        return (self.kind, self.count, str(self.dtype), self.op, self.root)


class Clique:
    """Where the parts of the ranks of one ``communicators`` call meet."""

    def __init__(self, size: int, timeout: float | None) -> None:
        self.size = size
        self.timeouts = [timeout] * size  # per rank (ranks of several processes each set their own)
        self.cond = threading.Condition()
        self.arrived = [0] * size  # how many collective parts each rank has run
        self.pending: dict[int, dict[int, _Part]] = {}  # collective number -> rank -> its part
        self.mail: dict[tuple[int, int], deque[np.ndarray]] = {}  # (sender, receiver) -> copies in order
        self.aborted: str | None = None  # why, once aborted

    def abort(self, why: str) -> None:
        with self.cond:
            if self.aborted is None:
                self.aborted = why
            self.cond.notify_all()

    def _refuse(self, rank: int, kind: str) -> None:
        if self.aborted is not None:
            raise CollectiveError(f"cpu: rank {rank}'s {kind}: the communicator was aborted ({self.aborted})",
                                  rank=rank, collective=kind)

    def wait(self, rank: int, kind: str, number: int, ready: Any, waiting_for: Any) -> None:
        """Wait (holding cond) until ``ready()``, the clique's abort or the timeout, which aborts it."""
        timeout = self.timeouts[rank]
        deadline = None if timeout is None else time.monotonic() + timeout
        with lending():  # (in a graph launch's branch: the other ranks' branches may need this thread's place)
            while not ready():
                self._refuse(rank, kind)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    what = f"{kind} (collective #{number} of the communicator)" if number >= 0 else kind
                    why = f"rank {rank}'s {what} waited {timeout:g} s for {waiting_for()}"
                    self.aborted = why
                    self.cond.notify_all()
                    raise CollectiveError(f"cpu: {why}; the communicator is aborted", rank=rank, collective=kind)
                self.cond.wait(left)

    def collective(self, part: _Part) -> None:
        """Run one rank's part: meet the others, then the last to come computes every result."""
        with self.cond:
            self._refuse(part.rank, part.kind)
            number = self.arrived[part.rank]
            self.arrived[part.rank] += 1
            parts = self.pending.setdefault(number, {})
            parts[part.rank] = part
            if len(parts) == self.size:
                del self.pending[number]
                error = _disagreement(parts, number)
                if error is None:
                    try:
                        _compute(parts)
                    except Exception as exc:  # noqa: BLE001 - given to every rank's part
                        error = f"collective #{number} failed: {type(exc).__name__}: {exc}"
                for p in parts.values():
                    p.done = True
                    p.error = None if error is None else CollectiveError(f"cpu: rank {p.rank}'s {p.kind}: {error}",
                                                                         rank=p.rank, collective=p.kind)
                self.cond.notify_all()
            else:
                self.wait(part.rank, part.kind, number, lambda: part.done, lambda: _absent(self.size, parts))
        if part.error is not None:
            raise part.error

    def send(self, sender: int, receiver: int, data: np.ndarray) -> None:
        with self.cond:
            self._refuse(sender, "send")
            self.mail.setdefault((sender, receiver), deque()).append(data.copy())
            self.cond.notify_all()

    def recv(self, receiver: int, sender: int, out: np.ndarray) -> None:
        with self.cond:
            box = self.mail.setdefault((sender, receiver), deque())
            self.wait(receiver, "recv", -1, lambda: bool(box), lambda: f"rank {sender}'s send")
            data = box.popleft()
        if data.size != out.size or data.dtype != out.dtype:
            raise CollectiveError(f"cpu: rank {receiver}'s recv of {out.size} {out.dtype} from rank {sender} got a "
                                  f"send of {data.size} {data.dtype}", rank=receiver, collective="recv")
        out[...] = data


def _absent(size: int, present: Container[int]) -> str:
    missing = [str(r) for r in range(size) if r not in present]
    return ("rank " if len(missing) == 1 else "ranks ") + ", ".join(missing) + " to join"


def _disagreement(parts: dict[int, _Part], number: int) -> str | None:
    """Why the ranks' parts are not one collective (NCCL's behaviour then is undefined), else None."""
    signatures = {rank: p.signature() for rank, p in parts.items()}
    if len(set(signatures.values())) == 1:
        return None
    shown = "; ".join(f"rank {r}: {s[0]}(count={s[1]}, dtype={s[2]}, op={s[3]}, root={s[4]})"
                      for r, s in sorted(signatures.items()))
    return f"the ranks' calls for collective #{number} of the communicator differ ({shown})"


def _compute(parts: dict[int, _Part]) -> None:
    ranks = [parts[r] for r in range(len(parts))]
    first = ranks[0]
    kind, n, size = first.kind, first.count, len(ranks)
    inputs = [p.send.copy() for p in ranks]  # all read before any is written
    if kind in ("all_reduce", "reduce", "reduce_scatter"):
        if first.op == "avg":  # as NCCL does for floating point: each input times 1/size, then the sum
            inputs = [x * first.dtype.type(1.0 / size) for x in inputs]
        total = inputs[0]
        for x in inputs[1:]:
            total = _REDUCE[str(first.op)](total, x)
        total = total.astype(first.dtype, copy=False)
        if kind == "all_reduce":
            for p in ranks:
                p.recv[...] = total
        elif kind == "reduce":
            ranks[first.root].recv[...] = total
        else:
            for r, p in enumerate(ranks):
                p.recv[...] = total[r * n:(r + 1) * n]
    elif kind == "broadcast":
        for p in ranks:
            p.recv[...] = inputs[first.root]
    elif kind == "all_gather":
        gathered = np.concatenate(inputs)
        for p in ranks:
            p.recv[...] = gathered


class Meeting(Protocol):
    """Where a rank's parts meet the other ranks': a Clique, or for a group of several processes a RemoteClique
    (gpugraph.backends.cpu._hub), which calls the hub's Clique."""

    aborted: str | None  # why, once aborted

    def collective(self, part: _Part) -> None: ...

    def send(self, sender: int, receiver: int, data: np.ndarray) -> None: ...

    def recv(self, receiver: int, sender: int, out: np.ndarray) -> None: ...

    def abort(self, why: str) -> None: ...


class CpuComm:
    """One rank: its clique (a RemoteClique for a group of several processes), rank and device (the front end
    keeps whether it is open)."""

    __slots__ = ("clique", "rank", "index")

    def __init__(self, clique: Meeting, rank: int, index: int) -> None:
        self.clique, self.rank, self.index = clique, rank, index


def init_all(indices: list[int], timeout: float | None) -> list[CpuComm]:
    clique = Clique(len(indices), timeout)
    return [CpuComm(clique, rank, index) for rank, index in enumerate(indices)]


def part_task(comm: CpuComm, kind: str, send: Any, recv: Any, count: int, dtype: np.dtype, op: str | None,
              root: int) -> tuple[Any, tuple]:
    """The function and arguments of a stream task (or host node) that runs ``comm``'s part."""
    return _run_part, (comm, kind, send, recv, count, dtype, op, root)


def _run_part(comm: CpuComm, kind: str, send: Any, recv: Any, count: int, dtype: np.dtype, op: str | None,
              root: int) -> None:
    # Views made when the part runs: a graph allocation's memory is mapped only then.
    send_view, recv_view = typed_view(send).reshape(-1), typed_view(recv).reshape(-1)
    clique = comm.clique
    if kind == "send":
        clique.send(comm.rank, root, send_view)
    elif kind == "recv":
        clique.recv(comm.rank, root, recv_view)
    else:
        clique.collective(_Part(comm.rank, kind, count, dtype, op, root, send_view, recv_view))
