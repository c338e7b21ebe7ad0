"""The programs of the pages gpugraph follows, runnable and self-validating: ``python -m gpugraph.examples.NAME``.

The pages:

* the ROCm HIP documentation's "HIP graphs",
  https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/hipgraph.html
* the same documentation's "Asynchronous concurrent execution",
  https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/asynchronous.html
* AMDGPU.jl's documentation, "Graphs", https://amdgpu.juliagpu.org/stable/
* NVIDIA's blog post "Constructing CUDA Graphs with Dynamic Parameters",
  https://developer.nvidia.com/blog/constructing-cuda-graphs-with-dynamic-parameters/

``conditional_solver`` is gpugraph's own.

Each module has ``run(device) -> Result``; ``python -m gpugraph demo`` runs them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

EXAMPLES = ("explicit_graph", "capture_graph", "async_streams", "dynamic_parameters", "captured", "conditional_solver")


@dataclass(frozen=True)
class Result:
    """What one example did: whether its result matched the page's expected value, and how long it took."""

    name: str
    validated: bool
    detail: str
    seconds: float = 0.0


def timed(name: str, body: Callable[[], tuple[bool, str]]) -> Result:
    """Run ``body`` (returning (validated, detail)) and time it."""
    start = time.perf_counter()
    validated, detail = body()
    return Result(name, validated, detail, time.perf_counter() - start)
