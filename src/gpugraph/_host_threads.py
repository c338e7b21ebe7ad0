"""Threads running a stream's work on the host (host functions, and on the CPU backend kernels and graph
branches): gpugraph calls that wait or enqueue are refused there.

CUDA forbids CUDA calls in a host function (cudaLaunchHostFunc): a wait for its own stream, or for a
stream that waits for it, never returns, and the driver may or may not refuse an enqueue. Every backend
marks a thread in ``HOST_THREADS`` while it runs such work and calls ``refuse_in_host_function`` at each
call that waits or enqueues, so the rule holds whatever the graph's shape and on every backend.
"""

from __future__ import annotations

from threading import get_ident

from ._errors import GpuGraphError

# Idents of the threads running a stream's work now. Empty on a host with no such work running, so hot
# paths test it first (one global read); set.add and set.discard are atomic, so no lock is needed.
HOST_THREADS: set[int] = set()


def refuse_in_host_function(api: str) -> None:
    """Raise GpuGraphError naming ``api`` if this thread is running a stream's work."""
    if get_ident() in HOST_THREADS:
        raise GpuGraphError(f"{api} was called from a host function (or other work a stream runs); host functions "
                            f"must not make gpugraph calls that reach the device: waits, queries, enqueues, "
                            f"allocations, making or changing graphs, streams and events (CUDA forbids CUDA calls "
                            f"in them: a wait there can deadlock)")
