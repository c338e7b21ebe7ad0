"""What page-locking ordinary NumPy memory costs a graph copy: the time of ``Graph.add_memcpy`` (which registers the
array's memory) beside the same copy of ``dev.pinned`` memory (no registration); registering and releasing the memory
alone (``Device.register_host`` and ``release``, what a copy node's pin does); and a launch of each graph, which must
cost the same.

Usage: python tools/dev/host_registration_cost.py [--backend cuda] [--repeats 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

import gpugraph as gg

SIZES_MIB = (1 / 256, 1, 16, 256)


def median_ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def add_seconds(device: gg.Device, host: np.ndarray, target: gg.Array) -> float:
    """Seconds to add a copy node of ``host`` to a new graph."""
    graph = gg.Graph(device)
    start = time.perf_counter()
    graph.add_memcpy(target, host)
    return time.perf_counter() - start


def register_seconds(device: gg.Device, host: np.ndarray) -> tuple[float, float]:
    """Seconds to page-lock ``host``, and to release it."""
    start = time.perf_counter()
    registration = device.register_host(host)
    registered = time.perf_counter()
    registration.release()
    return registered - start, time.perf_counter() - registered


def launch_seconds(device: gg.Device, host: np.ndarray, target: gg.Array, launches: int) -> float:
    """The median seconds of a launch and wait of a graph copying ``host`` to ``target``."""
    graph = gg.Graph(device)
    graph.add_memcpy(target, host)
    stream = device.stream()
    samples = []
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        for _ in range(launches):
            start = time.perf_counter()
            exe.launch(stream)
            stream.synchronize()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--repeats", type=int, default=20)
    options = parser.parse_args()
    device = gg.Device(options.backend)
    print(f"{device} {device.name}; medians of {options.repeats}")
    print("| size | add_memcpy, ordinary | add_memcpy, pinned | register | release | register per MiB | "
          "launch and wait, ordinary | launch and wait, pinned |")
    print("|---|---|---|---|---|---|---|---|")
    for mib in SIZES_MIB:
        nbytes = int(mib * 2**20)
        target = device.empty(nbytes, np.uint8)
        pinned = device.pinned(nbytes, np.uint8)
        pinned[:] = 1
        # A new ordinary array for each sample: a graph is freed by the cycle collector, so an array used again could
        # find its pages still registered.
        adds = [(add_seconds(device, np.ones(nbytes, np.uint8), target), add_seconds(device, pinned, target))
                for _ in range(options.repeats)]
        gc.collect()
        device.synchronize()
        registers = [register_seconds(device, np.ones(nbytes, np.uint8)) for _ in range(options.repeats)]
        ordinary = np.ones(nbytes, np.uint8)
        launches = [(launch_seconds(device, ordinary, target, 5), launch_seconds(device, pinned, target, 5))
                    for _ in range(options.repeats)]
        register_ms = median_ms([r for r, _ in registers])
        print(f"| {nbytes / 2**20:g} MiB | {median_ms([a for a, _ in adds]):.3f} ms | "
              f"{median_ms([p for _, p in adds]):.3f} ms | {register_ms:.3f} ms | "
              f"{median_ms([r for _, r in registers]):.3f} ms | {register_ms / max(mib, 1 / 256):.3f} ms | "
              f"{median_ms([o for o, _ in launches]):.3f} ms | {median_ms([p for _, p in launches]):.3f} ms |")
        gc.collect()
        device.synchronize()


if __name__ == "__main__":
    main()
