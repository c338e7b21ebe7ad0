"""CudaBackend: gpugraph's backend protocol on the CUDA driver API.

Each call maps to one driver call with a HIP twin (cuGraphAddKernelNode/hipGraphAddKernelNode,
cuModuleLaunchKernel/hipModuleLaunchKernel, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._protocol import TimelineRecord
from . import _leaves, _timeline
from ._collectives import CudaCollectives
from ._graphs import CudaGraphs


class CudaBackend(CudaGraphs, CudaCollectives):
    """Implements ``gpugraph.backends._protocol.Backend`` on NVIDIA GPUs, in three layers, each built on the one
    below: the runtime (``_runtime``), streams, events and capture (``_capture``), graphs (``_graphs``); and
    communicators (``_collectives``), on NCCL."""

    name = "cuda"
    speaks_cuda = True
    dlpack_device_type = 2  # kDLCUDA
    hot = _leaves.CudaHot()  # (the compiled core's calls: gpugraph.backends._hot)

    # Timelines: CUPTI's activity records (_timeline)

    def timeline_start(self, index: int) -> _timeline.CudaRecording:
        return _timeline.start(index)

    def timeline_stop(self, recording: _timeline.CudaRecording, executables: Sequence[tuple[Any, Any]]
                      ) -> list[TimelineRecord]:
        return _timeline.stop(self, recording, executables)
