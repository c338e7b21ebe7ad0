"""CpuCollectives: the CPU backend's communicators (emulated: ``_collectives``, ``_hub``), whose parts are host
tasks on the ranks' streams (or host nodes, captured); on CpuCapturing.
"""

from __future__ import annotations

from typing import Any

from ..._nodes import HostParams
from ._backend_capture import CpuCapturing
from ._capture import CpuCapture
from ._collectives import CpuComm, init_all, part_task
from ._hub import RemoteClique, unique_id
from ._streams import CpuStream


class CpuCollectives(CpuCapturing):
    """Communicators: a layer of CpuBackend beside its graphs."""

    # Communicators (emulated: _collectives)

    def comm_init_all(self, indices: list[int], timeout: float | None) -> list[CpuComm]:
        return init_all(indices, timeout)

    def comm_unique_id(self) -> bytes:
        return unique_id()

    def comm_init_rank(self, index: int, rank: int, size: int, unique_id: bytes, timeout: float | None) -> CpuComm:
        return CpuComm(RemoteClique(unique_id, rank, size, timeout), rank, index)

    def comm_enqueue(self, comm: CpuComm, kind: str, send: Any, recv: Any, count: int, dtype: Any, op: str | None,
                     root: int, stream: CpuStream, capture: CpuCapture | None) -> None:
        fn, args = part_task(comm, kind, send, recv, count, dtype, op, root)
        # Captured, the part is a host node that says what it touches (Graph.hazards reads no more): ``send`` read,
        # ``recv`` written; a send's one array only read, a receive's only written. (On CUDA the parts are NCCL's
        # kernels, nodes of another library, which Graph.hazards does not see.)
        reads, writes = ((send,), ()) if kind == "send" else ((), (recv,)) if kind == "recv" else ((send,), (recv,))
        if capture is not None and capture.record(stream, HostParams(fn, args, reads=reads, writes=writes)):
            return
        self.stream_host(stream, fn, args, None)

    def comm_abort(self, comm: CpuComm) -> None:
        comm.clique.abort(f"rank {comm.rank} called abort")

    def comm_aborted(self, comm: CpuComm) -> bool:
        return comm.clique.aborted is not None

    def comm_destroy(self, comm: CpuComm) -> None:
        if isinstance(comm.clique, RemoteClique):
            comm.clique.close()  # (an in-process clique goes with its last rank's parts: nothing to free)

    def comm_group_start(self) -> None:
        pass  # each part is a task on its rank's stream worker: none waits in the call that enqueues it

    def comm_group_end(self) -> None:
        pass
