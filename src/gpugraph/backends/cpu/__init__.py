"""The CPU reference backend: HIP/CUDA semantics executed on the host, always available.

Streams are FIFO task queues, each run by its own worker thread; graphs are plain Python DAGs whose
executable form runs independent branches on a thread pool. It applies the same rules as CUDA so that
code tested here behaves the same on a GPU.
"""

from __future__ import annotations

import operator
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
    count = int(text) if text.isascii() and text.isdigit() else 0  # ("²".isdigit(), yet int refuses it)
    if not 1 <= count <= MAX_DEVICES:
        raise BackendUnavailableError(f"cpu: $GPUGRAPH_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, "
                                      f"got {text!r}")
    return count


def configured_schedule_seed() -> int | None:
    """The seed of schedule fuzzing: $GPUGRAPH_SCHEDULE_SEED (a whole number), else None (off)."""
    text = os.environ.get("GPUGRAPH_SCHEDULE_SEED", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise BackendUnavailableError(f"cpu: $GPUGRAPH_SCHEDULE_SEED must be a whole number from 0 (the seed of "
                                      f"schedule fuzzing), got {text!r}; unset it to run graphs unfuzzed")
    return int(text)


class CpuBackend(CpuGraphs, CpuCollectives):
    """Implements ``gpugraph.backends._protocol.Backend`` on the host, in layers, each built on the one below:
    the state, devices, memory and kernels (``_backend_runtime``), streams, events and capture
    (``_backend_capture``), graphs and executable graphs (``_backend_graphs``); and communicators
    (``_backend_collectives``)."""

    name = "cpu"
    speaks_cuda = False  # host memory and Python streams: no CUDA protocols
    hot = None  # (no compiled hot calls: the core calls the methods below)
    dlpack_device_type = 1  # kDLCPU: its memory is host memory

    def __init__(self) -> None:
        super().__init__(configured_devices())
        self._schedule_seed = configured_schedule_seed()

    @property
    def schedule_seed(self) -> int | None:
        """The seed of schedule fuzzing (None: off), from $GPUGRAPH_SCHEDULE_SEED until set.

        While it is set, every graph instantiated on this backend runs its ready nodes in an order and with an
        overlap drawn from ``random.Random(seed)``, which each of its launches advances: one seed gives one
        sequence of schedules. Graphs instantiated before a change keep the seed they were instantiated with.
        """
        return self._schedule_seed

    @schedule_seed.setter
    def schedule_seed(self, seed: int | None) -> None:
        if seed is not None:
            try:
                if isinstance(seed, bool):
                    raise TypeError
                seed = operator.index(seed)
            except TypeError:
                raise TypeError(f"CpuBackend.schedule_seed: expects a whole number from 0, or None to turn schedule "
                                f"fuzzing off, got {type(seed).__name__} {seed!r}") from None
            if seed < 0:
                raise ValueError(f"CpuBackend.schedule_seed: expects a whole number from 0, or None to turn schedule "
                                 f"fuzzing off, got {seed}")
        self._schedule_seed = seed


def create_backend() -> CpuBackend:
    """The CPU backend; it needs nothing beyond NumPy, so it is always available."""
    return CpuBackend()
