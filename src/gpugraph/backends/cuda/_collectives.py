"""The CUDA backend's communicators: NCCL through NVIDIA's Python bindings (nccl4py's ``nccl.bindings``).

A collective's part is enqueued on the rank's stream by NCCL (its kernels); on a capturing stream NCCL's
work is captured as the graph's nodes, which the front end reads back as it reads any library's.
"""

from __future__ import annotations

from typing import Any

from ..._errors import BackendError, BackendUnavailableError
from ._objects import CudaStream

_nccl: Any = None  # nccl.bindings.nccl, imported by the first communicator
_DTYPES: dict[str, Any] = {}  # NumPy dtype name -> ncclDataType_t, filled with _nccl
_OPS: dict[str, Any] = {}  # reduction -> ncclRedOp_t
_UNIQUE_ID_BYTES = 128  # sizeof(ncclUniqueId)
_HOW_TO_GET = ("cuda: collectives need NCCL and NVIDIA's Python bindings for it (nccl4py): pip install "
               "\".[nccl]\" in a gpugraph checkout (or nccl4py and nvidia-nccl-cu13)")


def _bindings() -> Any:
    global _nccl
    if _nccl is None:
        try:
            import nccl.bindings.nccl as bindings  # (optional: only communicators need it)
        except ImportError as exc:
            raise BackendUnavailableError(f"{_HOW_TO_GET}; importing nccl.bindings failed: {exc}") from None
        types, ops = bindings.DataType, bindings.RedOp
        _DTYPES.update({"int8": types.Int8, "uint8": types.Uint8, "int32": types.Int32, "uint32": types.Uint32,
                        "int64": types.Int64, "uint64": types.Uint64, "float16": types.Float16,
                        "float32": types.Float32, "float64": types.Float64})
        _OPS.update({"sum": ops.Sum, "prod": ops.Prod, "max": ops.Max, "min": ops.Min, "avg": ops.Avg})
        _nccl = bindings
    return _nccl


class CudaComm:
    """One rank's ncclComm_t (the bindings' Comm), its device, and whether it was aborted or destroyed."""

    __slots__ = ("handle", "index", "state")

    def __init__(self, handle: Any, index: int) -> None:
        self.handle, self.index, self.state = handle, index, "open"


def _call(api: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except _nccl.NCCLError as exc:
        raise BackendError("cuda", api, exc, "NCCL") from None


def _refuse_timeout(where: str, timeout: float | None) -> None:
    if timeout is not None:
        raise NotImplementedError(f"cuda: {where}(timeout=...) is not built yet: gpugraph has no watchdog that "
                                  f"aborts a waiting NCCL communicator on CUDA; pass timeout=None (the default)")


class CudaCollectives:
    """The communicator calls of the backend protocol (mixed into CudaBackend; ``contexts`` is the runtime's)."""

    contexts: Any

    def comm_init_all(self, indices: list[int], timeout: float | None) -> list[CudaComm]:
        nccl = _bindings()
        _refuse_timeout("communicators", timeout)
        for index in indices:
            self.contexts.use(index)  # (NCCL uses each device's primary context, which gpugraph's are)
        handles = _call("ncclCommInitAll", nccl.comm_init_all, len(indices), list(indices))
        return [CudaComm(h, index) for h, index in zip(handles, indices)]

    def comm_unique_id(self) -> bytes:
        return bytes(_call("ncclGetUniqueId", _bindings().get_unique_id))

    def comm_init_rank(self, index: int, rank: int, size: int, unique_id: bytes, timeout: float | None) -> CudaComm:
        nccl = _bindings()
        _refuse_timeout("communicator", timeout)
        if len(unique_id) != _UNIQUE_ID_BYTES:
            raise ValueError(f"communicator(unique_id): not a cuda unique id ({len(unique_id)} bytes, NCCL's have "
                             f"{_UNIQUE_ID_BYTES})")
        self.contexts.use(index)
        handle = _call("ncclCommInitRank", nccl.comm_init_rank_scalable, size, rank, 1, bytearray(unique_id), 0)
        return CudaComm(handle, index)

    def comm_enqueue(self, comm: CudaComm, kind: str, send: Any, recv: Any, count: int, dtype: Any,
                     op: str | None, root: int, stream: CudaStream, capture: Any) -> None:
        nccl = _nccl
        self.contexts.use(comm.index)
        t = _DTYPES[dtype.name]
        h, s, red = comm.handle, stream.raw, _OPS.get(op or "")  # (red: the reductions')
        if kind == "all_reduce":
            _call("ncclAllReduce", nccl.all_reduce, send.ptr, recv.ptr, count, t, red, h, s)
        elif kind == "broadcast":
            _call("ncclBroadcast", nccl.broadcast, send.ptr, recv.ptr, count, t, root, h, s)
        elif kind == "reduce":
            _call("ncclReduce", nccl.reduce, send.ptr, recv.ptr, count, t, red, root, h, s)
        elif kind == "all_gather":
            _call("ncclAllGather", nccl.all_gather, send.ptr, recv.ptr, count, t, h, s)
        elif kind == "reduce_scatter":
            _call("ncclReduceScatter", nccl.reduce_scatter, send.ptr, recv.ptr, count, t, red, h, s)
        elif kind == "send":
            _call("ncclSend", nccl.send, send.ptr, count, t, root, h, s)
        elif kind == "recv":
            _call("ncclRecv", nccl.recv, recv.ptr, count, t, root, h, s)
        else:
            raise ValueError(f"cuda: no collective {kind!r}")

    def comm_abort(self, comm: CudaComm) -> None:
        if comm.state == "open":
            comm.state = "aborted"
            _call("ncclCommAbort", _nccl.comm_abort, comm.handle)

    def comm_aborted(self, comm: CudaComm) -> bool:
        return comm.state == "aborted"

    def comm_destroy(self, comm: CudaComm) -> None:
        if comm.state == "open":
            comm.state = "closed"
            _call("ncclCommDestroy", _nccl.comm_destroy, comm.handle)

    def comm_group_start(self) -> None:
        _call("ncclGroupStart", _bindings().group_start)

    def comm_group_end(self) -> None:
        _call("ncclGroupEnd", _nccl.group_end)
