"""What the CUDA driver itself accepts in a whole-graph update (cuGraphExecUpdate), bypassing gpugraph's
own check, so the CPU backend's rules (gpugraph/_update.py) can be confirmed against the driver.

Run on a GPU machine, from the repository root (it imports tests/kernels.py):
``PYTHONPATH=src python tools/probes/gpu_probe_update.py``.
"""

from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, "tests")
import gpugraph as gg
import kernels as K


def probe(name: str, build_old, build_new) -> None:
    dev = gg.Device("cuda")
    old, new = gg.Graph(dev), gg.Graph(dev)
    build_old(old)
    build_new(new)
    exe = old.instantiate()
    try:
        refused = dev._backend.exec_update(exe._handle, new._handle, [n._handle for n in old.nodes])
        outcome = "accepted" if refused is None else f"refused: {refused[0]}"
    except gg.GpuGraphError as exc:
        outcome = f"refused: {exc}"
    exe.close()
    print(f"{name:<48} {outcome}")


def main() -> None:
    dev = gg.Device("cuda")
    x, y = dev.zeros(64, np.float32), dev.zeros(64, np.float32)
    h = dev.pinned(64, np.float32)
    i32 = dev.zeros(64, np.int32)
    probe("kernel args changed", lambda g: g.add_kernel(K.scale, 1, 64, x, 2.0, 64),
          lambda g: g.add_kernel(K.scale, 2, 32, y, 3.0, 64))
    probe("kernel function changed (same signature)", lambda g: g.add_kernel(K.scale, 1, 64, x, 2.0, 64),
          lambda g: g.add_kernel(K.fill, 1, 64, i32, 2, 64))
    probe("memcpy device->device to host->device", lambda g: g.add_memcpy(x, y), lambda g: g.add_memcpy(x, h))
    probe("memcpy other device arrays", lambda g: g.add_memcpy(x, y), lambda g: g.add_memcpy(y, x))
    probe("memset value and count", lambda g: g.add_memset(x, 1.0), lambda g: g.add_memset(x, 2.0, count=32))
    probe("memset element size 4 -> 1", lambda g: g.add_memset(x, 1.0),
          lambda g: g.add_memset(dev.zeros(64, np.uint8), 7))

    def with_alloc(g):
        a = g.add_alloc(64, np.float32)
        g.add_free(a, after=g.add_memset(a.array, 1.0, after=a))
    probe("graph with alloc/free nodes, same shape", with_alloc, with_alloc)
    probe("node count changed", lambda g: g.add_empty(), lambda g: (g.add_empty(), g.add_empty()))
    probe("node kind changed", lambda g: g.add_empty(), lambda g: g.add_memset(x, 1.0))

    def chain(g):
        a = g.add_empty()
        g.add_empty(after=a)
    probe("edge removed", chain, lambda g: (g.add_empty(), g.add_empty()))

    def two_roots_then(g, second):  # a and b are roots; c follows a (second=False) or b (second=True)
        a, b = g.add_kernel(K.scale, 1, 64, x, 2.0, 64), g.add_kernel(K.scale, 1, 64, y, 3.0, 64)
        g.add_memcpy(y, x, after=b if second else a)
    # An isomorphic graph whose nodes pair only out of creation order: the driver accepts it (gpugraph
    # refuses it, since its setters and Params address nodes by creation order).
    probe("edge moved (isomorphic graph)", lambda g: two_roots_then(g, False), lambda g: two_roots_then(g, True))


if __name__ == "__main__":
    main()
