"""Collectives: communicators over devices, and the all-reduce, broadcast, reduce, all-gather, reduce-scatter,
send and receive they enqueue on streams or record into captures (NCCL's model, ncclComm_t).

A communicator is one rank of a group of devices that run collectives together. ``communicators(devices)``
makes the group for devices this process drives (ncclCommInitAll): one Communicator per device. A group over
several processes (one device each, say, as torchrun or mpirun start them) is made from a ``unique_id()`` that
one process makes and passes to the others by any channel (``bytes(uid)``/``UniqueId.from_bytes``, or pickle):
each process then calls ``communicator(device, rank=, size=, unique_id=)`` (ncclGetUniqueId,
ncclCommInitRank). Each call on a
Communicator is that rank's part of a collective: every rank must make the same calls in the same order, each
on a stream of its own device, and the collective completes when all ranks' parts have run. Since one thread
that drives several ranks would otherwise wait in the first rank's call for the others, the calls of a group
of several ranks are made inside ``collective_group()`` (ncclGroupStart/End), on every backend.

Each call checks its own rank's arguments and refuses bad ones at the call. Whether the ranks' calls agree
(the same collective, element count, element type, op and root) is known only once every rank's part has come,
when the parts run on their streams: another rank's call may be made later, in another thread or process. The
CPU backend reports a disagreement then, at each rank's next synchronize; NCCL does not check it.

``timeout``: a rank whose part waits longer than this for the other ranks aborts the communicator (NCCL's
ncclCommAbort); the error, raised at the next synchronize of that rank's stream, names the rank and the
collective (on the CPU backend; CUDA refuses ``timeout``, as gpugraph has no watchdog there). A communicator
aborted or closed refuses new calls.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _capture_rules, backends
from ._capture import Capture
from ._device import Device
from ._errors import CollectiveError
from ._event import Event
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._memory import Array
from ._stream import Stream, capture_handle, guard
from ._timeouts import timeout_seconds

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

# The element types and reductions NCCL has (bfloat16 aside: NumPy has none).
DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                                      "float64"))
REDUCTIONS = ("sum", "prod", "max", "min", "avg")

_groups = threading.local()  # .depth: the collective_group blocks this thread is in; .calls: the calls buffered


class _Call(NamedTuple):
    """A rank's checked call, kept until its group ends; ``capture``: its stream's Capture when it was made."""

    comm: Communicator
    where: str
    stream: Stream
    capture: Any
    kind: str
    send: Array
    recv: Array
    n: int  # the element count NCCL is given
    op: str | None
    root: int


def _group_depth() -> int:
    return getattr(_groups, "depth", 0)


@contextlib.contextmanager
def collective_group() -> Iterator[None]:
    """Make the collectives called inside one group (ncclGroupStart/ncclGroupEnd), so that one thread may drive
    every rank of a communicator group. Each call is checked when made; the group's calls are enqueued (or
    captured) when the outermost block ends, after any other work enqueued inside it, as NCCL enqueues them.
    A block left by an exception enqueues none of them. Blocks nest."""
    depth = _group_depth()
    if depth == 0:
        _groups.calls, _groups.broken = [], None
    _groups.depth = depth + 1
    try:
        yield
    except BaseException as exc:
        _groups.broken = _groups.broken or exc
        raise
    finally:
        _groups.depth = depth
    if depth == 0:
        calls, broken, _groups.calls, _groups.broken = _groups.calls, _groups.broken, [], None
        if broken is not None:  # an inner block's exception, which an outer one caught
            raise CollectiveError(f"collective_group: an inner block was left by {type(broken).__name__}: "
                                  f"{broken}; none of the group's {len(calls)} calls was enqueued",
                                  rank=-1, collective="collective_group")
        _submit(calls)


def _submit(calls: list[_Call]) -> None:
    """Enqueue (or capture) ``calls``, each backend's in one of its groups, once every call's stream is still
    in the capture it was in when the call was made (else none is enqueued)."""
    for c in calls:
        if c.stream.active_capture is not c.capture:
            now = "captures" if c.stream.active_capture is not None else "no longer captures"
            raise CollectiveError(f"{c.where}: {c.stream} {now} as it did when rank {c.comm.rank} called it; the "
                                  f"group ended after that, so none of its {len(calls)} calls was enqueued",
                                  rank=c.comm.rank, collective=c.kind)
    for backend in {id(c.comm._backend): c.comm._backend for c in calls}.values():
        mine = [c for c in calls if c.comm._backend is backend]
        backend.comm_group_start()
        try:
            for c in mine:
                backend.comm_enqueue(c.comm._handle, c.kind, c.send, c.recv, c.n, c.send.dtype, c.op, c.root,
                                     c.stream._handle, capture_handle(c.stream))
        finally:
            backend.comm_group_end()
        for c in mine:
            c.comm._enqueued(c.stream, c.capture)


class Communicator:
    """One rank of a communicator group (ncclComm_t): made by ``communicators``; closed by ``close`` or a
    ``with`` block, or aborted by ``abort`` or a timeout."""

    __slots__ = ("device", "rank", "size", "timeout", "_backend", "_handle", "_state", "_group", "_last", "_graphs",
                 "__weakref__")

    def __init__(self, device: Device, rank: int, size: int, timeout: float | None, handle: Any,
                 group: list[Communicator]) -> None:
        self.device, self.rank, self.size, self.timeout = device, rank, size, timeout
        self._backend = backends.get_backend(device.backend)
        self._handle, self._state, self._group = handle, "open", group
        self._last: dict[Stream, Event] = {}  # per stream, an event after this rank's last part enqueued there
        self._graphs: weakref.WeakSet[Any] = weakref.WeakSet()  # the graphs its parts were captured into

    def __repr__(self) -> str:
        return f"Communicator(rank {self.rank} of {self.size}, device={self.device}, {self._state})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def aborted(self) -> bool:
        """Whether this rank's communicator was aborted (by ``abort`` or a timeout)."""
        if self._state == "open" and self._backend.comm_aborted(self._handle):
            self._state = "aborted"
        return self._state == "aborted"

    def close(self) -> None:
        """Refuse new calls, wait for the parts this rank enqueued on streams, and free the communicator
        (ncclCommDestroy), or, while graphs its parts were captured into live, once the last of them goes:
        their launches keep working until then. Idempotent."""
        if HOST_THREADS:
            refuse_in_host_function("Communicator.close")
        if self._state == "closed":
            return
        for event in self._last.values():
            event.synchronize()
        self._last.clear()
        aborted, self._state = self._state == "aborted", "closed"
        graphs = list(self._graphs)
        if aborted or not graphs:
            self._backend.comm_destroy(self._handle)
            return
        left = [len(graphs)]
        backend, handle = self._backend, self._handle

        def gone() -> None:  # (a finalizer: called once per graph, from the collector)
            left[0] -= 1
            if not left[0]:
                backend.comm_destroy(handle)

        for graph in graphs:
            weakref.finalize(graph, gone).atexit = False  # (at exit the process frees it)

    def abort(self) -> None:
        """Stop the collectives of every rank of this group now, queued ones included (ncclCommAbort on each):
        the way out of a collective whose peers never come. A part stopped this way raises CollectiveError at
        its stream's next synchronize; the communicators refuse new calls."""
        for comm in self._group:
            if comm._state == "open":
                comm._state = "aborted"
                comm._backend.comm_abort(comm._handle)

    def _enqueued(self, stream: Stream, capture: Capture | None) -> None:
        """Note a part just enqueued on ``stream`` (for ``close`` to wait for) or captured (its graph)."""
        if capture is None:
            self._last[stream] = stream.record()
        else:
            self._graphs.add(capture.graph)

    # The collectives

    def all_reduce(self, send: Array, recv: Array, *, op: str = "sum", stream: Stream) -> None:
        """``recv`` on every rank = the reduction (``op``) of every rank's ``send``, element-wise
        (ncclAllReduce). ``send`` may be ``recv``."""
        where = "Communicator.all_reduce"
        count = self._same_sizes(where, send, recv, 1)
        self._enqueue(where, stream, "all_reduce", send, recv, count, _reduction(where, op, send.dtype), -1)

    def broadcast(self, send: Array | None, recv: Array, *, root: int, stream: Stream) -> None:
        """``recv`` on every rank = rank ``root``'s ``send`` (ncclBroadcast); ``send`` is read on the root only
        (None elsewhere) and may be ``recv``."""
        where = "Communicator.broadcast"
        root = self._rank_arg(where, "root", root)
        self._check_array(where, "recv", recv)
        if self.rank == root:
            if send is None:
                raise ValueError(f"{where}: rank {root} is the root, so it needs a send Array, got None")
            count = self._same_sizes(where, send, recv, 1)
        elif send is not None:
            self._check_array(where, "send", send)
            count = self._same_sizes(where, send, recv, 1)
        else:
            count = recv.size
        self._enqueue(where, stream, "broadcast", send if send is not None else recv, recv, count, None, root)

    def reduce(self, send: Array, recv: Array | None, *, op: str = "sum", root: int, stream: Stream) -> None:
        """``recv`` on rank ``root`` = the reduction of every rank's ``send`` (ncclReduce); ``recv`` is written
        on the root only (None elsewhere)."""
        where = "Communicator.reduce"
        root = self._rank_arg(where, "root", root)
        self._check_array(where, "send", send)
        if recv is None and self.rank == root:
            raise ValueError(f"{where}: rank {root} is the root, so it needs a recv Array, got None")
        count = self._same_sizes(where, send, recv, 1) if recv is not None else send.size
        self._enqueue(where, stream, "reduce", send, recv if recv is not None else send, count,
                      _reduction(where, op, send.dtype), root)

    def all_gather(self, send: Array, recv: Array, *, stream: Stream) -> None:
        """``recv`` on every rank = every rank's ``send``, concatenated in rank order (ncclAllGather):
        ``recv`` has ``size`` times ``send``'s elements."""
        where = "Communicator.all_gather"
        count = self._same_sizes(where, send, recv, self.size, big="recv")
        self._enqueue(where, stream, "all_gather", send, recv, count, None, -1)

    def reduce_scatter(self, send: Array, recv: Array, *, op: str = "sum", stream: Stream) -> None:
        """``recv`` on rank r = part r of the reduction of every rank's ``send`` (ncclReduceScatter): ``send``
        has ``size`` times ``recv``'s elements."""
        where = "Communicator.reduce_scatter"
        count = self._same_sizes(where, send, recv, self.size, big="send")
        self._enqueue(where, stream, "reduce_scatter", send, recv, count, _reduction(where, op, send.dtype), -1)

    def send(self, array: Array, *, peer: int, stream: Stream) -> None:
        """Send ``array`` to rank ``peer``, which receives it with ``recv`` (ncclSend)."""
        where = "Communicator.send"
        peer = self._rank_arg(where, "peer", peer, other=True)
        self._check_array(where, "array", array)
        self._enqueue(where, stream, "send", array, array, array.size, None, peer)

    def recv(self, array: Array, *, peer: int, stream: Stream) -> None:
        """Receive into ``array`` what rank ``peer`` sends with ``send`` (ncclRecv)."""
        where = "Communicator.recv"
        peer = self._rank_arg(where, "peer", peer, other=True)
        self._check_array(where, "array", array)
        self._enqueue(where, stream, "recv", array, array, array.size, None, peer)

    # Checks, then the backend

    def _check_array(self, where: str, name: str, array: object) -> None:
        if type(array) is not Array:
            raise TypeError(f"{where}({name}): expected an Array, got {type(array).__name__}")
        if array.device is not self.device:
            raise ValueError(f"{where}({name}): the Array is on {array.device}, rank {self.rank} on {self.device}")
        if array.dtype not in DTYPES:
            raise TypeError(f"{where}({name}): NCCL has no {array.dtype} elements (it has "
                            f"{', '.join(str(d) for d in DTYPES)})")

    def _same_sizes(self, where: str, send: Any, recv: Any, times: int, big: str = "") -> int:
        """Check ``send`` and ``recv`` (the same dtype; the one named ``big`` has ``times`` the elements of the
        other) and return the element count of the smaller."""
        self._check_array(where, "send", send)
        self._check_array(where, "recv", recv)
        if send.dtype != recv.dtype:
            raise TypeError(f"{where}: send holds {send.dtype}, recv {recv.dtype}: the same element type is needed")
        small, large = (recv, send) if big == "send" else (send, recv)
        if large.size != small.size * times:
            rule = ("send and recv need the same number of elements" if times == 1 else
                    f"{big} needs {times} (the communicator's size) times the elements of the other")
            raise ValueError(f"{where}: {rule}, got send of {send.size} and recv of {recv.size}")
        return small.size

    def _rank_arg(self, where: str, name: str, value: Any, other: bool = False) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}({name}): expected a rank (int), got {type(value).__name__}")
        if not 0 <= value < self.size:
            raise ValueError(f"{where}({name}): ranks are 0..{self.size - 1}, got {value}")
        if other and value == self.rank:
            raise ValueError(f"{where}({name}): rank {self.rank} cannot send to or receive from itself")
        return int(value)

    def _enqueue(self, where: str, stream: object, kind: str, send: Array, recv: Array, count: int, op: str | None,
                 root: int) -> None:
        if not isinstance(stream, Stream):
            raise TypeError(f"{where}(stream): expected a Stream, got {type(stream).__name__}")
        if stream.device is not self.device:
            raise ValueError(f"{where}(stream): {stream} is on {stream.device}, rank {self.rank} on {self.device}")
        if self._state != "open" or self.aborted:
            raise CollectiveError(f"{where}: rank {self.rank}'s communicator is {self._state}", rank=self.rank,
                                  collective=kind)
        if len(self._group) > 1 and not _group_depth():
            raise CollectiveError(f"{where}: rank {self.rank} is one of {len(self._group)} ranks this process "
                                  f"drives, so its calls go inside gpugraph.collective_group() (NCCL: one thread "
                                  f"driving several ranks would wait in the first rank's call for the others)",
                                  rank=self.rank, collective=kind)
        if HOST_THREADS:
            refuse_in_host_function(where)
        if stream.active_capture is not None or stream.legacy or _capture_rules.function_captures:
            guard(stream, where)
        call = _Call(self, where, stream, stream.active_capture, kind, send, recv, count, op, root)
        if _group_depth():
            _groups.calls.append(call)
        else:
            _submit([call])


def _reduction(where: str, op: Any, dtype: np.dtype) -> str:
    if op not in REDUCTIONS:
        raise ValueError(f"{where}(op): expected one of {', '.join(REDUCTIONS)}, got {op!r}")
    if op == "avg" and dtype.kind != "f":
        raise TypeError(f"{where}(op): 'avg' is for floating-point elements, got {dtype}")
    return op


class UniqueId(NamedTuple):
    """The id of a communicator group over several processes (ncclUniqueId), made by ``unique_id``: its
    backend and that backend's bytes. Picklable; ``bytes(uid)`` and ``UniqueId.from_bytes`` carry it over any
    byte channel (a file, a socket, an MPI broadcast)."""

    backend: str
    data: bytes

    def __bytes__(self) -> bytes:
        return self.backend.encode() + b":" + self.data

    def __repr__(self) -> str:
        return f"UniqueId({self.backend}, {self.data[:8].hex()}...)"

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> UniqueId:
        """The UniqueId that ``bytes(uid)`` gave."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"UniqueId.from_bytes: expected bytes, got {type(data).__name__}")
        backend, colon, rest = bytes(data).partition(b":")
        if not colon or backend.decode(errors="replace") not in backends.BACKEND_ORDER:
            raise ValueError(f"UniqueId.from_bytes: not the bytes of a gpugraph UniqueId (they start with a "
                             f"backend's name and ':'), got {bytes(data[:16])!r}...")
        return cls(backend.decode(), rest)


def unique_id(backend: str) -> UniqueId:
    """A new id for a communicator group over several processes (ncclGetUniqueId), on ``backend`` ("cuda" or
    "cpu"). The process that makes it keeps its group's rendezvous (NCCL's bootstrap root; the CPU backend's
    hub, reachable on this host only): it must live until every rank has joined, and on the CPU backend until
    the group is closed."""
    if not isinstance(backend, str):
        raise TypeError(f"unique_id(backend): expected a backend's name (str), got {type(backend).__name__}")
    if backend not in backends.BACKEND_ORDER:
        raise ValueError(f"unique_id(backend): expected one of {', '.join(backends.BACKEND_ORDER)}, got {backend!r}")
    _capture_rules.forbid_unsafe("unique_id")
    return UniqueId(backend, backends.get_backend(backend).comm_unique_id())


def communicator(device: Device, *, rank: int, size: int, unique_id: UniqueId,
                 timeout: float | None = None) -> Communicator:
    """Rank ``rank`` of the ``size`` ranks of the group ``unique_id`` names, on ``device`` (ncclCommInitRank):
    every rank calls it, each in its own process (or thread), and it returns once all have. ``timeout``: as
    for ``communicators`` (and it bounds the wait for the other ranks to join)."""
    where = "communicator"
    if not isinstance(device, Device):
        raise TypeError(f"{where}(device): expected a Device, got {type(device).__name__}")
    for name, value in (("rank", rank), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}({name}): expected an int, got {type(value).__name__}")
    if size < 1:
        raise ValueError(f"{where}(size): expected 1 rank or more, got {size}")
    if not 0 <= rank < size:
        raise ValueError(f"{where}(rank): ranks are 0..{size - 1}, got {rank}")
    if not isinstance(unique_id, UniqueId):
        raise TypeError(f"{where}(unique_id): expected a UniqueId (from unique_id()), got "
                        f"{type(unique_id).__name__}")
    if not isinstance(unique_id.data, bytes):
        raise TypeError(f"{where}(unique_id): its data must be bytes, got {type(unique_id.data).__name__}")
    if unique_id.backend != device.backend:
        raise ValueError(f"{where}(unique_id): the id is of the {unique_id.backend} backend, {device} of "
                         f"{device.backend}")
    timeout = timeout_seconds(timeout, where, zero=False)
    _refuse_in_group(where)
    _capture_rules.forbid_unsafe(where)
    backend = backends.get_backend(device.backend)
    handle = backend.comm_init_rank(device.index, int(rank), int(size), unique_id.data, timeout)
    group: list[Communicator] = []
    group.append(Communicator(device, int(rank), int(size), timeout, handle, group))
    return group[0]


def _refuse_in_group(where: str) -> None:
    if _group_depth():
        raise CollectiveError(f"{where}: cannot be made inside collective_group() (NCCL would make it when the "
                              f"group ends)", rank=-1, collective=where)


def communicators(devices: Sequence[Device], *, timeout: float | None = None) -> list[Communicator]:
    """One Communicator per device, ranks in the order given, for collectives among devices this process
    drives (ncclCommInitAll). ``timeout`` (seconds above 0; None or inf: no limit): how long a rank's part of a
    collective may wait for the others before the communicator is aborted."""
    if isinstance(devices, Device) or not isinstance(devices, (list, tuple)):
        raise TypeError(f"communicators(devices): expected a list or tuple of Devices, got {type(devices).__name__}")
    devices = list(devices)
    if not devices or not all(isinstance(d, Device) for d in devices):
        got = ", ".join(type(d).__name__ for d in devices) or "nothing"
        raise TypeError(f"communicators(devices): expected one Device or more, got {got}")
    backend = devices[0].backend
    for d in devices:
        if d.backend != backend:
            raise ValueError(f"communicators(devices): {d} is of another backend than {devices[0]}")
    if len({d.index for d in devices}) != len(devices):
        raise ValueError(f"communicators(devices): each device may be one rank only, got {devices}")
    timeout = timeout_seconds(timeout, "communicators", zero=False)
    _refuse_in_group("communicators")
    _capture_rules.forbid_unsafe("communicators")
    handles = devices[0]._backend.comm_init_all([d.index for d in devices], timeout)
    group: list[Communicator] = []
    group.extend(Communicator(d, rank, len(devices), timeout, h, group) for rank, (d, h) in
                 enumerate(zip(devices, handles)))
    return group
