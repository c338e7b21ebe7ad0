"""Graph memory addresses are reused, as CUDA reuses them.

An allocation node ordered after a free node of the same graph may get the freed allocation's address
(CUDA does: tools/probes/gpu_probe_rules.py, 2a); concurrent allocations and other graphs' allocations never share
one (2b, 2c). gpugraph tells allocations apart by their records, never by address, so the patterns of
cuda-samples' graphMemoryNodes and graphMemoryFootprint (alloc -> kernel -> free -> alloc -> kernel -> free
in one graph) raise no false double free, and real double frees are still refused.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 1 << 14  # 64 KiB of int32, the size of the driver probe's allocations
GRID, BLOCK = K.launch_1d(N, 256)


def reuse_graph(device, out1, out2, free_second=True):
    """alloc a -> fill 1 -> copy to out1 -> free a -> alloc b -> fill 2 -> copy to out2 (-> free b)."""
    g = gg.Graph(device)
    a = g.add_alloc(N, np.int32)
    fill_a = g.add_kernel(K.fill, GRID, BLOCK, a.array, 1, N, after=a)
    free_a = g.add_free(a, after=g.add_memcpy(out1, a.array, after=fill_a))
    b = g.add_alloc(N, np.int32, after=free_a)
    fill_b = g.add_kernel(K.fill, GRID, BLOCK, b.array, 2, N, after=b)
    copy_b = g.add_memcpy(out2, b.array, after=fill_b)
    free_b = g.add_free(b, after=copy_b) if free_second else None
    return g, a, b, free_a, free_b


def test_alloc_after_free_reuses_the_address_explicit(device, stream):
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g, a, b, _, free_b = reuse_graph(device, out1, out2)
    assert b.array.ptr == a.array.ptr  # CUDA's answer (probe 2a), on every backend
    assert b.array is not a.array
    assert free_b.kind is gg.NodeKind.MEM_FREE  # no false "already freed" from the shared address
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream, times=3)  # freed inside: it may run again
    np.testing.assert_array_equal(out1.to_numpy(), np.ones(N))
    np.testing.assert_array_equal(out2.to_numpy(), np.full(N, 2))


def test_add_alloc_device_names_whose_memory_it_is(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc(N, np.int32, device=device)  # (the graph's own, named: as the default)
    assert alloc.array.device is device and alloc.params.device == device.index
    with pytest.raises(TypeError, match=r"add_alloc\(device\): expected a Device or None, got str"):
        g.add_alloc(N, np.int32, device=str(device))
    assert len(g) == 1
    out = device.zeros(N, np.int32)
    g.add_free(alloc, after=g.add_memcpy(out, alloc.array, after=g.add_kernel(K.fill, GRID, BLOCK, alloc.array,
                                                                             3, N, after=alloc)))
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(out.to_numpy(), np.full(N, 3))


def test_concurrent_allocations_and_other_graphs_never_share(device):
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g, a, _, free_a, _ = reuse_graph(device, out1, out2)
    root = g.add_alloc(N, np.int32)                  # concurrent with both (probe 2b)
    beside = g.add_alloc(N, np.int32, after=free_a)  # after the free, but concurrent with b
    other = gg.Graph(device).add_alloc(N, np.int32)  # another graph, the first still alive (probe 2c)
    ptrs = [a.array.ptr, root.array.ptr, beside.array.ptr, other.array.ptr]
    assert len(set(ptrs)) == 4


def test_alloc_after_free_reuses_the_address_captured(device, stream):
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    with stream.capture() as cap:
        a = stream.alloc(N, np.int32)
        stream.launch(K.fill, GRID, BLOCK, a, 1, N)
        stream.memcpy(out1, a)
        stream.free(a)
        b = stream.alloc(N, np.int32)
        assert b.ptr == a.ptr
        stream.launch(K.fill, GRID, BLOCK, b, 2, N)
        stream.memcpy(out2, b)
        stream.free(b)  # not a double free: b is another allocation at a's address
    kinds = [n.kind for n in cap.graph.nodes]
    assert kinds.count(gg.NodeKind.MEM_ALLOC) == 2 and kinds.count(gg.NodeKind.MEM_FREE) == 2
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream, times=2)
    np.testing.assert_array_equal(out1.to_numpy(), np.ones(N))
    np.testing.assert_array_equal(out2.to_numpy(), np.full(N, 2))


def test_explicit_free_after_a_captured_one_at_the_same_address(device, stream):
    """A capture into a graph and explicit nodes share the graph's allocations, told apart by record."""
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g = gg.Graph(device)
    with stream.capture(into=g) as cap:
        a = stream.alloc(N, np.int32)
        stream.launch(K.fill, GRID, BLOCK, a, 1, N)
        stream.memcpy(out1, a)
        stream.free(a)
    last = cap.graph.leaves
    b = g.add_alloc(N, np.int32, after=last)
    assert b.array.ptr == a.ptr
    g.add_free(b, after=g.add_memcpy(out2, b.array, after=g.add_kernel(K.fill, GRID, BLOCK, b.array, 2, N,
                                                                        after=b)))
    with pytest.raises(gg.GraphError, match=r"add_free: the graph allocation at 0x[0-9a-f]+ is already freed "
                                            r"by Node\(n\d+, mem_free\) \(double free\)"):
        g.add_free(a, after=g.leaves)  # a, by its Array: freed by the captured free node
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(out1.to_numpy(), np.ones(N))
    np.testing.assert_array_equal(out2.to_numpy(), np.full(N, 2))


def test_real_double_frees_are_still_refused(device, stream):
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g, a, b, free_a, free_b = reuse_graph(device, out1, out2)
    before = len(g)
    with pytest.raises(gg.GraphError, match=rf"add_free: the graph allocation at {a.array.ptr:#x} is already "
                                            rf"freed by {re.escape(repr(free_b))} \(double free\)"):
        g.add_free(b, after=free_b)
    with pytest.raises(gg.GraphError, match=rf"is already freed by {re.escape(repr(free_a))} \(double free\)"):
        g.add_free(a.array, after=free_b)
    assert len(g) == before
    rule = r"Stream.free: the graph allocation at 0x[0-9a-f]+ is already freed in this capture \(double free\)"
    # The first error is raised again when the invalidated capture ends.
    with pytest.raises(gg.CaptureError, match=rule), stream.capture() as cap:
        x = stream.alloc(N, np.int32)
        stream.free(x)
        y = stream.alloc(N, np.int32)
        stream.free(y)  # y is at x's address: not a double free
        with pytest.raises(gg.CaptureError, match=rule):
            stream.free(x)
    assert cap.graph is None  # the invalidated capture was discarded


def test_stream_free_after_launch_of_an_allocation_at_a_reused_address(device, stream):
    """The graph frees a and leaves b (at a's address) allocated: Stream.free(b) is right, once."""
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g, a, b, _, _ = reuse_graph(device, out1, out2, free_second=False)
    assert b.array.ptr == a.array.ptr
    with g.instantiate() as exe:
        exe.launch(stream)
        host = K.pinned(device, np.zeros(N, np.int32))
        stream.memcpy(host, b.array)  # b outlives the launch
        with pytest.raises(gg.GraphError, match="from the previous launch has not been freed"):
            exe.launch(stream)
        stream.free(b.array)
        with pytest.raises(ValueError, match=r"free\(array\): the graph allocation at 0x[0-9a-f]+ is not "
                                             r"allocated now \(double free"):
            stream.free(b.array)
        with pytest.raises(ValueError, match="is not allocated now"):
            stream.free(a.array)  # freed by the graph itself
        exe.launch(stream)  # freed, so it may run again
        stream.free(b.array)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 2))
    np.testing.assert_array_equal(out1.to_numpy(), np.ones(N))


def test_footprint_of_a_chain_of_allocations_is_one_allocation(device, stream):
    """graphMemoryFootprint: allocations made one after another's free share memory."""
    nbytes = 32 << 20  # whole multiples of the driver's pool granularity
    count = nbytes // 4
    device.trim_graph_memory()
    base = device.graph_memory()
    g = gg.Graph(device)
    after = ()
    outs = []
    for i in range(3):
        alloc = g.add_alloc(count, np.float32, after=after)
        out = device.zeros(4, np.float32)
        outs.append(out)
        fill = g.add_memset(alloc.array, float(i + 1), after=alloc)
        copy = g.add_memcpy(out, alloc.array, nbytes=16, after=fill)
        after = g.add_free(alloc, after=copy)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        grown = device.graph_memory().reserved - base.reserved
        assert nbytes <= grown < 2 * nbytes
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(out.to_numpy(), np.full(4, i + 1.0))
    device.trim_graph_memory()


def test_use_after_free_is_caught_even_at_a_reused_address(device, stream, backend):
    """The CPU backend maps memory per allocation record: the old Array after its free is caught even
    while a new allocation lives at its address."""
    if backend != "cpu":
        pytest.skip("undefined behaviour on a GPU: the old Array reads the new allocation's memory")
    g = gg.Graph(device)
    a = g.add_alloc(N, np.int32)
    free_a = g.add_free(a, after=g.add_memset(a.array, 1, after=a))
    b = g.add_alloc(N, np.int32, after=free_a)
    assert b.array.ptr == a.array.ptr
    late = g.add_memset(a.array, 5, after=b)  # a, after its free
    g.add_free(b, after=late)
    with g.instantiate() as exe:
        exe.launch(stream)
        with pytest.raises(gg.GpuGraphError, match="was used outside its allocation's lifetime"):
            stream.synchronize()


@pytest.mark.gpu
def test_captured_allocations_keep_their_records_among_other_libraries_nodes(gpu_device):
    """CuPy nodes between gpugraph's captured allocations and frees: each allocation and free node still gets
    its own allocation record (queued with its parameter record, paired by what the node describes), also
    at a reused address."""
    if gpu_device.backend != "cuda":
        pytest.skip(f"CuPy works on the cuda backend, got {gpu_device.backend}")
    cp = pytest.importorskip("cupy")
    stream = gpu_device.stream()
    out1, out2 = gpu_device.zeros(N, np.int32), gpu_device.zeros(N, np.int32)
    theirs = cp.cuda.Stream.from_external(stream)
    c = cp.zeros(N, dtype=cp.int32)
    with theirs:
        cp.add(c, 1, out=c)  # warm up: CuPy compiles its kernel outside the capture
    stream.synchronize()
    with stream.capture() as cap:
        a = stream.alloc(N, np.int32)
        with theirs:
            cp.add(c, 1, out=c)  # another library's node between gpugraph's
        stream.launch(K.fill, GRID, BLOCK, a, 1, N)
        stream.memcpy(out1, a)
        stream.free(a)
        with theirs:
            cp.add(c, 1, out=c)
        b = stream.alloc(N, np.int32)
        stream.launch(K.fill, GRID, BLOCK, b, 2, N)
        stream.memcpy(out2, b)
        stream.free(b)  # b may be at a's address: told apart by record
    graph, backend = cap.graph, gpu_device._backend

    def records(kind):
        return [backend.node_allocation(graph._handle, n._handle) for n in graph.nodes if n.kind is kind]
    assert records(gg.NodeKind.MEM_ALLOC) == [a._alloc, b._alloc]
    assert records(gg.NodeKind.MEM_FREE) == [a._alloc, b._alloc]
    assert a._alloc is not b._alloc
    with graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(out1.to_numpy(), np.ones(N))
    np.testing.assert_array_equal(out2.to_numpy(), np.full(N, 2))
    assert int(c.sum()) == 3 * N  # the warm-up and the two captured CuPy nodes


@pytest.mark.gpu
def test_a_release_deferred_by_a_host_function_is_never_lost(gpu_device):
    """Releases of garbage-collected memory wait while a host function runs (it must not call CUDA): the
    host-function thread queues them without the backend's lock, so its append may come after a flush on
    another thread took the queue. One queue for the backend's life, drained one by one, loses none."""
    if gpu_device.backend != "cuda":
        pytest.skip(f"deferred releases are the cuda backend's, got {gpu_device.backend}")
    backend = gpu_device._backend
    ran = []
    backend.host.local.running = True  # as in a host function: the release is deferred
    try:
        backend._release(ran.append, "first")
    finally:
        backend.host.local.running = False
    queue = backend._deferred  # what the host-function thread appends to ...
    backend._flush_releases()  # ... while another thread drains it ...
    queue.append((ran.append, ("second",)))  # ... the append coming after the drain
    assert ran == ["first"]
    backend._flush_releases()
    assert ran == ["first", "second"]


def test_the_high_watermarks_start_again_from_the_figures_now(device, stream):
    """hipDeviceSetGraphMemAttribute: resetting the high watermarks, once the pool is trimmed, makes them the
    current figures (0); a launch that allocates raises them again."""
    nbytes = 32 << 20
    g = gg.Graph(device)
    alloc = g.add_alloc(nbytes // 4, np.float32)
    g.add_free(alloc, after=g.add_memset(alloc.array, 1.0, after=alloc))
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    device.trim_graph_memory()
    assert device.graph_memory().reserved_high >= nbytes
    device.reset_graph_memory_high()
    usage = device.graph_memory()
    assert (usage.used_high, usage.reserved_high) == (usage.used, usage.reserved)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    assert device.graph_memory().reserved_high >= nbytes
    device.trim_graph_memory()


def test_a_copy_or_memset_of_memory_the_graph_frees_must_lie_within_its_lifetime(device):
    """CUDA refuses, at the add, a memset or copy of graph memory its graph frees unless the node comes after the
    allocation node and before the free node, so that none can be added once the free node is there
    (CUDA_ERROR_INVALID_VALUE on an H100); every backend says why before the driver sees it, and adds nothing. A node
    changed to copy or set it must lie between the two. Without a free in the graph, an unordered one is taken (as
    CUDA takes it), as is a kernel node, whose pointers the driver cannot see (the hazard check reports those)."""
    g = gg.Graph(device)
    alloc = g.add_alloc(64, np.float32)
    use = g.add_memset(alloc.array, 1.0, after=alloc)
    free = g.add_free(alloc, after=use)
    x = device.zeros(64, np.float32)
    refused = rf"add_(memset|memcpy): {re.escape(repr(alloc.array))} is graph memory that {re.escape(repr(free))} " \
              r"frees, and a copy or memset of it must be ordered before that free \(CUDA refuses it otherwise\), " \
              r"which a node added after the free node is not; add the copy or memset before the free node \(after " \
              rf"{re.escape(repr(alloc))}\), then the free after it$"
    with pytest.raises(gg.GraphError, match=refused):
        g.add_memset(alloc.array, 0.0, after=free)
    with pytest.raises(gg.GraphError, match=refused):
        g.add_memcpy(x, alloc.array, after=free)
    with pytest.raises(gg.GraphError, match=refused):
        g.add_memcpy(alloc.array, x)  # unordered
    with pytest.raises(gg.GraphError, match=refused):
        g.add_memcpy(x, alloc.array, after=use)  # after the allocation, but not before the free
    assert len(g) == 3
    g.add_kernel(K.scale, 1, 64, alloc.array, 2.0, 64, after=free)  # (the driver cannot see a kernel's pointers)
    late = g.add_memset(x, 0.0, after=free)  # (other memory: taken)
    outside = rf"is graph memory that this graph allocates with {re.escape(repr(alloc))} and frees with " \
              rf"{re.escape(repr(free))}, and a copy or memset of it must be ordered after the allocation and before " \
              r"the free \(CUDA refuses it otherwise\), which this node is not; change a node that lies between them$"
    with pytest.raises(gg.GraphError, match=rf"^set_memset\({re.escape(repr(late))}\): .* {outside}"):
        g.set_memset(late, alloc.array, 2.0)
    late_copy = g.add_memcpy(device.zeros(64, np.float32), x, after=free)
    with pytest.raises(gg.GraphError, match=rf"^set_memcpy\({re.escape(repr(late_copy))}\): .* {outside}"):
        g.set_memcpy(late_copy, device.zeros(64, np.float32), alloc.array)
    g.set_memset(use, alloc.array, 3.0)  # between the allocation and the free: taken
    before = gg.Graph(device)  # a copy added before the free node, then the free after it: taken
    held = before.add_alloc(64, np.float32)
    copy = before.add_memcpy(x, held.array, after=before.add_memset(held.array, 4.0, after=held))
    before.add_free(held, after=copy)
    with before.instantiate() as exe:
        K.launch_and_wait(exe, device.stream())
    np.testing.assert_array_equal(x.to_numpy(), 4.0)
    unfreed = gg.Graph(device)
    kept = unfreed.add_alloc(64, np.float32)
    unfreed.add_memset(kept.array, 0.0)  # no free in the graph: taken unordered
    assert len(unfreed) == 2
