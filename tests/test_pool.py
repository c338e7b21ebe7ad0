"""The device's graph memory pool: used/reserved figures, reuse across launches, trimming."""

from __future__ import annotations

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


def test_graph_memory_figures(device):
    usage = device.graph_memory()
    assert isinstance(usage, gg.GraphMemoryUsage)
    assert usage.used >= 0 and usage.reserved >= usage.used
    assert usage.used_high >= usage.used and usage.reserved_high >= usage.reserved


def test_used_and_reserved_grow_on_launch_and_used_returns_after_free(device, stream):
    device.trim_graph_memory()
    base = device.graph_memory()
    g, alloc = alloc_graph(device, free=False)
    assert device.graph_memory().used == base.used  # building or instantiating allocates nothing yet
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        during = device.graph_memory()
        assert during.used >= base.used + NBYTES
        assert during.reserved >= base.reserved + NBYTES
        assert during.used_high >= during.used
        stream.free(alloc.array)
        stream.synchronize()
    after = device.graph_memory()
    assert after.used == base.used
    assert after.reserved == during.reserved  # freed memory stays in the pool


def test_in_graph_free_returns_used_and_relaunch_reuses_reserved(device, stream):
    device.trim_graph_memory()
    base = device.graph_memory()
    g, _ = alloc_graph(device, free=True)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        first = device.graph_memory()
        assert first.used == base.used
        assert first.reserved >= base.reserved + NBYTES
        assert first.used_high >= base.used + NBYTES
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
        again = device.graph_memory()
        assert again.used == base.used
        assert again.reserved == first.reserved


def test_trim_lowers_reserved(device, stream):
    g, _ = alloc_graph(device, free=True)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    before = device.graph_memory()
    assert before.reserved >= NBYTES
    device.trim_graph_memory()
    after = device.graph_memory()
    assert after.reserved <= before.reserved - NBYTES
    assert after.used == before.used


def test_trim_keeps_memory_in_use(device, stream):
    device.trim_graph_memory()
    base = device.graph_memory()
    g, alloc = alloc_graph(device, free=False)
    host = np.zeros(NBYTES // 4, np.float32)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        device.trim_graph_memory()
        assert device.graph_memory().reserved >= base.reserved + NBYTES
        stream.memcpy(host, alloc.array)  # still usable after the trim
        stream.free(alloc.array)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.ones(NBYTES // 4))
