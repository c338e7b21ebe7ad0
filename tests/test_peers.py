"""Devices of one backend used together: peer access (asked, enabled, refused), copies between devices on
streams, in captures and as graph nodes, memsets on another device's memory, and events of one device waited
for by another's streams and graphs. The CPU backend offers several devices, so these run in CI; on a GPU
backend they need two devices (a machine with two GPUs)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph.backends import available_backends

SCALE = gg.Kernel(r"""
__global__ void scale(float* x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}""", "scale")

N = 64


@pytest.fixture
def no_peer_access(pair, monkeypatch):
    """The pair as if the hardware allowed no access between them, none enabled yet; enabling is recorded."""
    backend = pair[0]._backend
    enabled = []
    monkeypatch.setattr(backend, "device_can_access_peer", lambda index, peer: False)
    monkeypatch.setattr(backend, "peer_access", lambda index, peer: False)
    monkeypatch.setattr(backend, "enable_peer_access", lambda index, peer: enabled.append((index, peer)))
    return pair, enabled


def counting(n: int = N) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# Peer access


def test_peer_access_is_asked_then_enabled_once(pair):
    first, second = pair
    assert isinstance(first.can_access_peer(second), bool)
    if not first.can_access_peer(second):
        pytest.skip(f"{first} cannot access {second} on this machine")
    first.enable_peer_access(second)
    first.enable_peer_access(second)  # again: nothing to do
    assert first._backend.peer_access(first.index, second.index)


def test_peer_access_arguments_are_checked(pair):
    first = pair[0]
    with pytest.raises(TypeError, match=r"can_access_peer\(peer\): expected a Device, got str"):
        first.can_access_peer("cuda:1")
    with pytest.raises(ValueError, match=rf"enable_peer_access\(peer\): {first} is this device"):
        first.enable_peer_access(first)
    others = [b for b in available_backends() if b != first.backend]
    if others:
        other = gg.Device(others[0])
        with pytest.raises(ValueError, match=rf"{other} is a device of another backend than {first}"):
            first.can_access_peer(other)


def test_a_launch_given_a_peer_array_enables_access_and_uses_it(pair):
    first, second = pair
    if not second.can_access_peer(first):
        pytest.skip(f"{second} cannot access {first} on this machine")
    x = first.asarray(counting())
    stream = second.stream()
    stream.launch(SCALE, 1, N, x, 2.0, N)  # a kernel on the second device, the memory on the first
    stream.synchronize()
    assert second._backend.peer_access(second.index, first.index)
    np.testing.assert_array_equal(x.to_numpy(), counting() * 2)
    graph = gg.Graph(second)
    graph.add_kernel(SCALE, 1, N, x, 3.0, N)
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), counting() * 6)


def test_no_peer_access_is_refused_at_the_call(no_peer_access):
    (first, second), enabled = no_peer_access
    x = first.asarray(counting())
    stream = second.stream()
    rule = rf"{second} cannot access memory of {first}: the hardware allows no peer access between them"
    with pytest.raises(ValueError, match=rf"argument 0 \(float\* x\) \(an Array of {first} used on {second}\): {rule}"):
        stream.launch(SCALE, 1, N, x, 2.0, N)
    graph = gg.Graph(second)
    with pytest.raises(ValueError, match=rule):
        graph.add_kernel(SCALE, 1, N, x, 2.0, N)
    assert len(graph) == 0
    with pytest.raises(ValueError, match=rf"enable_peer_access: {rule}.*copy the data with Stream.memcpy"):
        second.enable_peer_access(first)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), counting())  # nothing ran
    assert enabled == []


def test_enabling_peer_access_inside_a_global_capture_is_refused(no_peer_access, monkeypatch):
    (first, second), enabled = no_peer_access
    monkeypatch.setattr(first._backend, "device_can_access_peer", lambda index, peer: True)
    x = first.asarray(counting())
    stream = second.stream()
    with pytest.raises(gg.CaptureError, match=r"enabling peer access from .* the capture is invalidated"):
        with stream.capture():
            stream.launch(SCALE, 1, N, x, 2.0, N)
    assert enabled == []
    with stream.capture(mode="relaxed") as cap:  # a relaxed capture allows it
        stream.launch(SCALE, 1, N, x, 2.0, N)
    assert enabled == [(second.index, first.index)] and len(cap.graph) == 1


# Copies, memsets and events across devices


def test_copies_between_devices_on_streams(pair):
    first, second = pair
    a = first.asarray(counting())
    b = second.zeros(N, np.float32)
    c = first.zeros(N, np.float32)
    s1, s2 = first.stream(), second.stream()
    s1.memcpy(b, a)  # on the source's device
    s1.synchronize()
    s2.memcpy(c, b)  # on the destination's device
    s2.synchronize()
    np.testing.assert_array_equal(b.to_numpy(), counting())
    np.testing.assert_array_equal(c.to_numpy(), counting())


def test_a_captured_copy_between_devices(pair):
    first, second = pair
    a = first.asarray(counting())
    b = second.zeros(N, np.float32)
    stream = first.stream()
    with stream.capture() as cap:
        stream.launch(SCALE, 1, N, a, 2.0, N)
        stream.memcpy(b, a)
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.KERNEL, gg.NodeKind.MEMCPY]
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(b.to_numpy(), counting() * 2)


def test_graph_copy_and_memset_nodes_between_devices(pair):
    first, second = pair
    a = first.asarray(counting())
    b = second.zeros(N, np.float32)
    c = first.zeros(N, np.float32)
    graph = gg.Graph(first)
    fill = graph.add_memset(b, 5.0)  # runs on the second device, whose memory it sets
    there = graph.add_memcpy(b, a, nbytes=N // 2 * 4, after=fill)  # the first half
    graph.add_memcpy(c, b, after=there)
    stream = first.stream()
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    want = np.concatenate([counting()[:N // 2], np.full(N // 2, 5.0, np.float32)])
    np.testing.assert_array_equal(b.to_numpy(), want)
    np.testing.assert_array_equal(c.to_numpy(), want)


def held_fill(stream: gg.Stream, y: gg.Array, value: float, event: gg.Event | None = None) -> tuple:
    """Enqueue on ``stream`` a fill of ``y`` held until the returned gate is set, then a record of ``event`` (a new
    one if None): (the gate, the event)."""
    release = threading.Event()
    stream.host(release.wait, 30)
    stream.memset(y, value)
    return release, stream.record(event)


def test_a_stream_waits_for_an_event_of_another_device(pair):
    first, second = pair
    y = second.zeros(N, np.float32)
    x = first.zeros(N, np.float32)
    consumer = first.stream()
    release, done = held_fill(second.stream(), y, 7.0)
    consumer.wait(done)
    consumer.memcpy(x, y)
    try:
        assert not consumer.done  # held by the other device's event
    finally:
        release.set()
    consumer.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7.0, np.float32))


def test_a_graph_waits_for_an_event_of_another_device(pair):
    first, second = pair
    y = second.zeros(N, np.float32)
    x = first.zeros(N, np.float32)
    event = second.event()
    graph = gg.Graph(first)
    graph.add_memcpy(x, y, after=graph.add_event_wait(event))
    with graph.instantiate() as exe:
        release, _ = held_fill(second.stream(), y, 3.0, event)
        stream = first.stream()
        exe.launch(stream)
        try:
            assert not stream.done
        finally:
            release.set()
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


def test_an_event_of_another_device_cannot_be_recorded(pair):
    first, second = pair
    with pytest.raises(ValueError, match=rf"record\(event\): .* belongs to {second}, not {first}"):
        first.stream().record(second.event())


# Graphs across devices


def test_a_kernel_node_on_another_device(pair):
    first, second = pair
    here = second.asarray(counting())
    graph = gg.Graph(first)
    node = graph.add_kernel(SCALE, 1, N, here, 2.0, N, device=second)
    assert node.params.device == second.index
    stream = first.stream()
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(here.to_numpy(), counting() * 2)
        other = second.asarray(counting())
        exe.set_params(node, other, 3.0, N)  # the node stays on its device
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(other.to_numpy(), counting() * 3)
    np.testing.assert_array_equal(here.to_numpy(), counting() * 2)


def test_add_kernel_device_is_checked(pair):
    first, second = pair
    x = first.zeros(4, np.float32)
    graph = gg.Graph(first)
    with pytest.raises(TypeError, match=r"add_kernel\(device\): expected a Device or None, got str"):
        graph.add_kernel(SCALE, 1, 4, x, 2.0, 4, device=str(second))
    others = [b for b in available_backends() if b != first.backend]
    if others:
        with pytest.raises(ValueError, match=r"add_kernel\(device\): .* another backend"):
            graph.add_kernel(SCALE, 1, 4, x, 2.0, 4, device=gg.Device(others[0]))
    assert len(graph) == 0


def test_an_allocation_node_on_another_device_than_the_graphs(pair):
    """cudaGraphAddMemAllocNode's poolProps.location: a graph of the first device allocates memory of the second,
    which a kernel node on the second fills; the first device's kernel node and copy reach it through access=."""
    first, second = pair
    if not first.can_access_peer(second):
        pytest.skip(f"{first} cannot access {second} on this machine")
    graph = gg.Graph(first)
    alloc = graph.add_alloc(N, np.float32, access=first, device=second)
    x = alloc.array
    assert x.device is second and x.ptr == alloc.params.ptr
    assert alloc.params == gg.AllocParams(N * 4, x.ptr, second.index, (first.index,))
    assert f"on device {second.index}, reachable from devices {first.index}" in alloc.params.label()
    ones = graph.add_memset(x, 1.0, after=alloc)
    tripled = graph.add_kernel(SCALE, 1, N, x, 3.0, N, after=ones, device=second)
    doubled = graph.add_kernel(SCALE, 1, N, x, 2.0, N, after=tripled)  # on the graph's device, through access=
    host = K.pinned(first, np.zeros(N, np.float32))
    graph.add_free(alloc, after=graph.add_memcpy(host, x, after=doubled))
    for device in pair:
        device.synchronize()
        device.reset_graph_memory_high()
    used_here = first.graph_memory().used
    with graph.instantiate() as exe:
        stream = first.stream()
        for _ in range(2):  # (freed in the graph: each launch allocates it again)
            host[:] = 0
            exe.launch(stream)
            stream.synchronize()
            np.testing.assert_array_equal(host, np.full(N, 6, np.float32))
    assert second.graph_memory().used_high >= N * 4  # the second device's pool gave it
    assert first.graph_memory().used_high == used_here


def test_an_allocation_on_another_device_takes_no_freed_address_of_the_graphs_device(pair):
    """A free orders its range for reuse by the graph's later allocations of the same device only."""
    first, second = pair
    graph = gg.Graph(first)
    here = graph.add_alloc(N, np.float32)
    freed = graph.add_free(here, after=here)
    there = graph.add_alloc(N, np.float32, after=freed, device=second)  # (first: the freed range is free)
    again = graph.add_alloc(N, np.float32, after=freed)
    assert there.array.device is second and there.params.device == second.index
    assert there.params.ptr != here.params.ptr
    assert again.params.ptr == here.params.ptr  # (the rule that the other device is kept out of)


def test_add_alloc_device_is_checked(pair):
    first, second = pair
    graph = gg.Graph(first)
    with pytest.raises(TypeError, match=r"add_alloc\(device\): expected a Device or None, got int"):
        graph.add_alloc(N, np.float32, device=second.index)
    with pytest.raises(ValueError, match=rf"add_alloc\(access=\): {second} is the allocation's own device"):
        graph.add_alloc(N, np.float32, access=second, device=second)
    others = [b for b in available_backends() if b != first.backend]
    if others:
        with pytest.raises(ValueError, match=r"add_alloc\(device\): .* another backend"):
            graph.add_alloc(N, np.float32, device=gg.Device(others[0]))
    assert len(graph) == 0


def test_an_update_cannot_move_a_kernel_to_another_device(pair):
    first, second = pair
    x = first.zeros(4, np.float32)
    y = second.zeros(4, np.float32)
    old, new = gg.Graph(first), gg.Graph(first)
    old.add_kernel(SCALE, 1, 4, x, 2.0, 4)
    new.add_kernel(SCALE, 1, 4, y, 2.0, 4, device=second)
    with old.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=r"device changed.*ran on device 0, got one on device"):
            exe.update(new)


def test_a_capture_forks_onto_a_stream_of_another_device_and_joins_back(pair):
    first, second = pair
    a = first.asarray(counting())
    b = second.asarray(counting())
    stream, other = first.stream(), second.stream()
    with stream.capture() as cap:
        stream.launch(SCALE, 1, N, a, 2.0, N)
        other.wait(stream.record())  # the second device's stream joins the capture
        assert other.is_capturing
        other.launch(SCALE, 1, N, b, 3.0, N)
        other.memcpy(a, b)  # into the first device's memory, after both kernels
        stream.wait(other.record())  # and back
    kernels = [n for n in cap.graph.nodes if n.kind is gg.NodeKind.KERNEL]
    assert sorted(n.params.device for n in kernels) == sorted([first.index, second.index])
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(b.to_numpy(), counting() * 3)
    np.testing.assert_array_equal(a.to_numpy(), counting() * 3)


def test_a_captured_allocation_on_another_devices_stream_is_that_devices_memory(pair):
    first, second = pair
    stream, other = first.stream(), second.stream()
    host = K.pinned(first, np.zeros(N, np.float32))
    with stream.capture() as cap:
        other.wait(stream.record())
        tmp = other.alloc(N, np.float32)  # the second device's graph memory, in the first device's graph
        other.memset(tmp, 4.0)
        other.memcpy(host, tmp)
        other.free(tmp)
        stream.wait(other.record())
    (alloc,) = [node for node in cap.graph.nodes if node.kind is gg.NodeKind.MEM_ALLOC]
    assert tmp.device is second and alloc.params.device == second.index and alloc.params.ptr == tmp.ptr
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 4, np.float32))


def test_a_device_taking_part_in_a_capture_cannot_be_synchronized(pair):
    first, second = pair
    stream, other = first.stream(), second.stream()
    x = second.zeros(4, np.float32)
    with pytest.raises(gg.CaptureError, match=rf"{second} has a capturing stream"):
        with stream.capture():
            other.wait(stream.record())
            other.memset(x, 1.0)
            stream.wait(other.record())
            second.synchronize()


def test_graph_memory_without_access_is_refused_to_kernels_of_another_device(pair):
    first, second = pair
    memory = gg.Graph(second)
    alloc = memory.add_alloc(N, np.float32)
    assert alloc.params.access == ()
    graph = gg.Graph(first)
    rule = rf"graph memory of {second}, which kernels on {first} cannot use: its allocation node gave no access"
    with pytest.raises(ValueError, match=rule):
        graph.add_kernel(SCALE, 1, N, alloc.array, 2.0, N)
    with pytest.raises(ValueError, match=rule):
        first.stream().launch(SCALE, 1, N, alloc.array, 2.0, N)
    with pytest.raises(ValueError, match=rule):  # a kernel node of the allocating graph, run on the other device
        memory.add_kernel(SCALE, 1, N, alloc.array, 2.0, N, after=alloc, device=first)
    assert len(graph) == 0 and len(memory) == 1


def test_an_allocation_node_shared_with_another_device(pair):
    """hipGraphAddMemAllocNode's accessDescs: the other device's kernels use the allocation, in the graph and
    on its streams, with no peer access enabled for it."""
    first, second = pair
    if not second.can_access_peer(first):
        pytest.skip(f"{second} cannot access {first} on this machine")
    graph = gg.Graph(first)
    alloc = graph.add_alloc(N, np.float32, access=[second, second])  # (named twice: once is what counts)
    x = alloc.array
    assert alloc.params == gg.AllocParams(N * 4, x.ptr, first.index, (second.index,))
    assert f"reachable from devices {second.index}" in alloc.params.label()
    ones = graph.add_memset(x, 1.0, after=alloc)
    tripled = graph.add_kernel(SCALE, 1, N, x, 3.0, N, after=ones, device=second)
    host = K.pinned(first, np.zeros(N, np.float32))
    graph.add_memcpy(host, x, after=tripled)
    stream, other = first.stream(), second.stream()
    with graph.instantiate() as exe:
        exe.launch(stream)  # no free node: the allocation outlives the launch, until the stream frees it
        other.wait(stream.record())
        other.launch(SCALE, 1, N, x, 2.0, N)
        stream.wait(other.record())
        doubled = np.zeros(N, np.float32)
        stream.memcpy(doubled, x)
        stream.free(x)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 3, np.float32))
    np.testing.assert_array_equal(doubled, np.full(N, 6, np.float32))


def test_a_captured_allocation_takes_the_access_of_its_devices_pool(pair):
    """A captured allocation is reachable from the devices its pool lets in when it is captured
    (hipMemPoolSetAccess; gpugraph's enable_peer_access sets it)."""
    first, second = pair
    if not second.can_access_peer(first):
        pytest.skip(f"{second} cannot access {first} on this machine")
    second.enable_peer_access(first)  # (and the first device's pool lets the second in)
    stream, other = first.stream(), second.stream()
    host = K.pinned(first, np.zeros(N, np.float32))
    with stream.capture() as cap:
        tmp = stream.alloc(N, np.float32)
        stream.memset(tmp, 2.0)
        other.wait(stream.record())
        other.launch(SCALE, 1, N, tmp, 5.0, N)
        stream.wait(other.record())
        stream.memcpy(host, tmp)
        stream.free(tmp)
    (alloc,) = [node for node in cap.graph.nodes if node.kind is gg.NodeKind.MEM_ALLOC]
    assert alloc.params.access == (second.index,)
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 10, np.float32))


def test_allocation_access_is_checked(pair, no_peer_access):
    first, second = pair
    graph = gg.Graph(first)
    with pytest.raises(ValueError, match=rf"add_alloc\(access=\): {first} is the allocation's own device"):
        graph.add_alloc(N, np.float32, access=first)
    with pytest.raises(TypeError, match=r"add_alloc\(access=\): expected Devices, got str"):
        graph.add_alloc(N, np.float32, access=[second, "cuda:1"])
    with pytest.raises(TypeError, match=r"add_alloc\(access=\): expected a Device or an iterable of Devices, got int"):
        graph.add_alloc(N, np.float32, access=1)
    with pytest.raises(ValueError, match=rf"add_alloc\(access=\): {second} cannot access memory of {first}: the "
                                         rf"hardware allows no peer access"):
        graph.add_alloc(N, np.float32, access=second)  # (the fixture makes the hardware refuse)
    others = [b for b in available_backends() if b != first.backend]
    if others:
        with pytest.raises(ValueError, match=r"is a device of another backend"):
            graph.add_alloc(N, np.float32, access=gg.Device(others[0]))
    assert len(graph) == 0
