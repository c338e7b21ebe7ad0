"""One sample of an A/B comparison of two trees on CUDA: explicit build (µs per node, chains of N tiny kernels)
and the seed workload's recapture + update and no-graph strategies (µs per iteration), each as (minimum, median)
over repeats, printed as one line of JSON after ``label``.

Usage (on a CUDA machine; alternate the trees, each process pinned to one core):
    PYTHONPATH=src taskset -c 3 python3 tools/ab_build_recapture.py new
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import gpugraph as gg
from gpugraph.bench._gpu import TINY, _chain
from gpugraph.examples import dynamic_parameters as seed


def sample(fn: Callable[[], object], repeats: int, per: int) -> tuple[float, float]:
    """(minimum, median) µs of ``fn`` over ``repeats`` calls, divided by ``per``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) / per * 1e6)
    return round(min(times), 3), round(statistics.median(times), 3)


def main() -> None:
    device = gg.Device("cuda")
    kernel = gg.Kernel(TINY, "tiny")
    x = device.zeros(32, np.float32)
    _chain(device, kernel, x, 10, 1)
    out = {}
    for nodes, repeats in ((10, 300), (100, 60), (1000, 12), (10000, 4)):
        out[f"build{nodes}"] = sample(lambda nodes=nodes: _chain(device, kernel, x, nodes, 1), repeats, nodes)
    stream, buffers = device.stream(), seed.Buffers(device)
    seed.recapture_update(stream, buffers, 50)
    out["recap"] = sample(lambda: seed.recapture_update(stream, buffers, 400), 5, 400)
    out["nograph"] = sample(lambda: seed.no_graph(stream, buffers, 400), 5, 400)
    print(sys.argv[1] if len(sys.argv) > 1 else "", json.dumps(out))


if __name__ == "__main__":
    main()
