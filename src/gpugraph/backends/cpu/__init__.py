"""The CPU reference backend: HIP/CUDA semantics executed on the host, always available.

Streams are FIFO task queues, each run by its own worker thread; graphs are plain Python DAGs whose
executable form runs independent branches on a thread pool. It applies the same rules as CUDA so that
code tested here behaves the same on a GPU.
"""

from __future__ import annotations

import os

from ..._errors import BackendUnavailableError
from ._backend_collectives import CpuCollectives
from ._backend_graphs import CpuGraphs

# How many devices the CPU backend offers (cpu:0 .. cpu:N-1), so that programs and tests for several devices run
# without GPUs; $GPUGRAPH_CPU_DEVICES sets another number.
DEVICES = 4
MAX_DEVICES = 64


def configured_devices() -> int:
    """The number of CPU devices: $GPUGRAPH_CPU_DEVICES (1 to MAX_DEVICES), else DEVICES."""
    text = os.environ.get("GPUGRAPH_CPU_DEVICES", "").strip()
    if not text:
        return DEVICES
    count = int(text) if text.isdigit() else 0
    if not 1 <= count <= MAX_DEVICES:
        raise BackendUnavailableError(f"cpu: $GPUGRAPH_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, "
                                      f"got {text!r}")
    return count


class CpuBackend(CpuGraphs, CpuCollectives):
    """Implements ``gpugraph.backends._protocol.Backend`` on the host, in layers, each built on the one below:
    the state, devices, memory and kernels (``_backend_runtime``), streams, events and capture
    (``_backend_capture``), graphs and executable graphs (``_backend_graphs``); and communicators
    (``_backend_collectives``)."""

    name = "cpu"
    speaks_cuda = False  # host memory and Python streams: no CUDA protocols
    dlpack_device_type = 1  # kDLCPU: its memory is host memory

    def __init__(self) -> None:
        super().__init__(configured_devices())


def create_backend() -> CpuBackend:
    """The CPU backend; it needs nothing beyond NumPy, so it is always available."""
    return CpuBackend()
