"""The device's graph memory pool: used/reserved figures grow on launch, relaunches reuse the pool,
frees plus a trim return ``used`` to where it was, and trimming lowers ``reserved``.

What ``used`` means after an in-graph free differs: the CPU backend counts live allocations (so ``used``
drops at the free), CUDA counts memory still mapped for graphs (so it drops only at a trim, as seen on an
H200). These tests assert what holds on both.
"""

from __future__ import annotations

import gc

import numpy as np

import gpugraph as gg

NBYTES = 4 * 3001  # a size no other test allocates, so no other test's freed block is reused


def alloc_graph(device, free: bool):
    g = gg.Graph(device)
    alloc = g.add_alloc(NBYTES // 4, np.float32)
    m = g.add_memset(alloc.array, 1.0, after=alloc)
    if free:
        g.add_free(alloc, after=m)
    return g, alloc


def settled(device) -> gg.GraphMemoryUsage:
    """The device's graph memory figures once nothing earlier holds any it does not use: an executable graph an
    earlier test left to the garbage collector keeps its graph memory mapped until collected, and collected in the
    middle of a test it would lower ``reserved`` under the figures measured (seen on an H100: by the 32 MiB it held)."""
    gc.collect()
    device.synchronize()
    device.trim_graph_memory()
    return device.graph_memory()


def test_graph_memory_figures(device):
    usage = device.graph_memory()
    assert isinstance(usage, gg.GraphMemoryUsage)
    assert usage.used >= 0 and usage.reserved >= usage.used
    assert usage.used_high >= usage.used and usage.reserved_high >= usage.reserved


def test_used_and_reserved_grow_on_launch(device, stream):
    base = settled(device)
    g, alloc = alloc_graph(device, free=False)
    assert device.graph_memory().used == base.used  # building allocates nothing yet
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        during = device.graph_memory()
        assert during.used >= base.used + NBYTES
        assert during.reserved >= base.reserved + NBYTES
        assert during.used_high >= during.used and during.reserved_high >= during.reserved
        stream.free(alloc.array)
        stream.synchronize()
    after = device.graph_memory()
    assert after.used <= during.used
    assert after.reserved == during.reserved  # freed memory stays in the pool until trimmed
    device.trim_graph_memory()
    assert device.graph_memory().used == base.used


def test_relaunch_reuses_the_pool(device, stream):
    base = settled(device)
    g, _ = alloc_graph(device, free=True)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        first = device.graph_memory()
        assert first.reserved >= base.reserved + NBYTES
        assert first.used_high >= base.used + NBYTES
        assert first.used <= first.reserved
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
        again = device.graph_memory()
        assert again.reserved == first.reserved
        assert again.used == first.used
    device.trim_graph_memory()
    assert device.graph_memory().used == base.used


def test_trim_lowers_reserved(device, stream):
    settled(device)
    g, _ = alloc_graph(device, free=True)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    before = device.graph_memory()
    assert before.reserved >= NBYTES
    device.trim_graph_memory()
    after = device.graph_memory()
    assert after.reserved <= before.reserved - NBYTES
    assert after.used <= before.used


def test_trim_keeps_memory_in_use(device, stream):
    base = settled(device)
    g, alloc = alloc_graph(device, free=False)
    host = np.zeros(NBYTES // 4, np.float32)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        device.trim_graph_memory()
        usage = device.graph_memory()
        assert usage.reserved >= base.reserved + NBYTES
        assert usage.used >= base.used + NBYTES
        stream.memcpy(host, alloc.array)  # still usable after the trim
        stream.free(alloc.array)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.ones(NBYTES // 4))
