"""Ordinary (pageable) NumPy memory in graph and captured copies, and host memory page-locked on request.

Graph copies, captured copies and the copy setters take ordinary NumPy arrays: they page-lock the arrays' pages while a
graph or executable graph refers to them, so that each copy reads and writes its array at its turn in the graph (CUDA
would otherwise stage pageable memory at a time of its own). The registrations are counted by pages and shared; when
nothing refers to the memory any more, nothing stays registered. ``Device.register_host`` page-locks an array on
request (hipHostRegister).
"""

from __future__ import annotations

import gc
import mmap

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph.examples import capture_graph, explicit_graph

N = 1000
LAUNCHES = 1000
PAGE = mmap.PAGESIZE


def registered(device: gg.Device) -> list[tuple[int, int, int]]:
    """What the backend holds page-locked for gpugraph once everything dropped is collected and released (a release
    the collector asks for waits for the next synchronize on CUDA)."""
    gc.collect()
    gc.collect()
    device.synchronize()
    return device._backend.host_registry.registrations()


def pages_of(array: np.ndarray) -> tuple[int, int]:
    start = array.__array_interface__["data"][0]
    return start // PAGE * PAGE, -(-(start + array.nbytes) // PAGE) * PAGE


class Checker:
    """A host function that fills ``source`` with the launch's number k, and one that checks ``result`` holds
    k + 1 (what the kernel made of it on the device), counting the launches that saw anything else."""

    def __init__(self, source: np.ndarray) -> None:
        self.source, self.k, self.wrong, self.checked = source, 0, 0, 0

    def fill(self) -> None:
        self.k += 1
        self.source[:] = self.k

    def check(self, result: np.ndarray) -> None:
        self.checked += 1
        if not np.array_equal(result, np.full(result.shape, self.k + 1, result.dtype)):
            self.wrong += 1


# Every copy reads and writes its ordinary array at its turn


def test_a_graph_copies_ordinary_arrays_at_their_turn(device, stream):
    """A host node fills an ordinary array, a copy node takes it to the device, a kernel adds 1, a copy node brings it
    back into another ordinary array and a host node reads it: right at every launch, with a new value each time."""
    source, result = np.zeros(N, np.float32), np.zeros(N, np.float32)
    x = device.zeros(N, np.float32)
    checker = Checker(source)
    g = gg.Graph(device)
    fill = g.add_host(checker.fill)
    up = g.add_memcpy(x, source, after=fill)
    inc = g.add_kernel(K.shift, *K.launch_1d(N), x, 1.0, N, after=up)
    down = g.add_memcpy(result, x, after=inc)
    g.add_host(checker.check, result, after=down)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream, LAUNCHES)
    assert (checker.checked, checker.wrong) == (LAUNCHES, 0)
    np.testing.assert_array_equal(result, np.full(N, LAUNCHES + 1))


def test_captured_copies_of_ordinary_arrays_run_at_their_turn(device, stream):
    source, result = np.zeros(N, np.float32), np.zeros(N, np.float32)
    x = device.zeros(N, np.float32)
    checker = Checker(source)
    with stream.capture() as cap:
        stream.host(checker.fill)
        stream.memcpy(x, source)
        stream.launch(K.shift, *K.launch_1d(N), x, 1.0, N)
        stream.memcpy(result, x)
        stream.host(checker.check, result)
    assert not checker.k  # (captured: nothing ran)
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream, LAUNCHES)
    assert (checker.checked, checker.wrong) == (LAUNCHES, 0)


def test_set_memcpy_takes_new_ordinary_arrays(device, stream):
    """exe.set_memcpy and Graph.set_memcpy with arrays made after the executable graph: the copies use them at their
    turn, and the arrays they replaced are released."""
    x = device.zeros(N, np.float32)
    first_source, first_result = np.zeros(N, np.float32), np.zeros(N, np.float32)
    checker = Checker(first_source)
    g = gg.Graph(device)
    fill = g.add_host(checker.fill)
    up = g.add_memcpy(x, first_source, after=fill)
    inc = g.add_kernel(K.shift, *K.launch_1d(N), x, 1.0, N, after=up)
    down = g.add_memcpy(first_result, x, after=inc)
    check = g.add_host(checker.check, first_result, after=down)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        source, result = np.zeros(N, np.float32), np.zeros(N, np.float32)
        checker.source = source
        exe.set_memcpy(up, x, source)
        exe.set_memcpy(down, result, x)
        exe.set_host(check, checker.check, result)
        K.launch_and_wait(exe, stream, LAUNCHES)
        assert (checker.checked, checker.wrong) == (LAUNCHES + 1, 0)
        np.testing.assert_array_equal(result, np.full(N, LAUNCHES + 2))
        assert first_result[0] == 2  # (the first launch's: the replaced array was not written again)
    g.set_memcpy(up, x, np.full(N, 41, np.float32))  # the graph's own node: the next instantiate uses it
    g.set_host(fill, lambda: None)
    g.set_memcpy(down, result, x)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, np.full(N, 42))


@pytest.mark.parametrize("seed", [explicit_graph.build, capture_graph.capture], ids=["explicit", "capture"])
def test_the_seed_programs_with_ordinary_host_arrays_give_7(device, stream, seed):
    """The seed's programs hold their host data in a std::vector: written with an ordinary NumPy array, they give 7
    everywhere (on an H200, without page-locking, the explicit graph's copy read the array before the host node filled
    it and gave 3)."""
    h_array = np.zeros(explicit_graph.ARRAY_SIZE, np.float64)
    graph = seed(device, h_array) if seed is explicit_graph.build else seed(stream, h_array)
    with graph.instantiate() as exe:
        for _ in range(3):
            h_array[:] = 0.0
            K.launch_and_wait(exe, stream)
            assert np.all(h_array == explicit_graph.EXPECTED)
    del graph, exe
    assert registered(device) == []


def test_box_copies_take_ordinary_arrays(device, stream):
    host = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    x = device.zeros((6, 8), np.float32)
    back = np.zeros((6, 8), np.float32)
    g = gg.Graph(device)
    up = g.add_memcpy(x, host, shape=(2, 3), dst_origin=(1, 2), src_origin=(3, 4))
    g.add_memcpy(back, x, after=up)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    want = np.zeros((6, 8), np.float32)
    want[1:3, 2:5] = host[3:5, 4:7]
    np.testing.assert_array_equal(back, want)


def test_a_captured_function_copies_ordinary_arrays(device):
    x = K.f32(device, np.arange(N))

    @gg.captured
    def copy_out(src, dst):  # src first: the captured function's device is its first Array's
        gg.current_stream(src.device).memcpy(dst, src)

    for value in (1.0, 2.0):
        out = np.zeros(N, np.float32)
        x = K.f32(device, np.full(N, value))
        copy_out(x, out)
        device.synchronize()
        np.testing.assert_array_equal(out, np.full(N, value))


# Registrations: counted by pages, shared, and gone when nothing refers to the memory


def test_registrations_are_counted_by_pages_and_shared(device):
    gc.collect()
    before = registered(device)
    assert before == [], before
    base = np.zeros(4 * PAGE // 4, np.float32)  # pages 0..4 of its own (it may start inside a page)
    first, second = base[: 2 * PAGE // 4], base[PAGE // 4:]  # views that overlap on one page and more
    g1, g2 = gg.Graph(device), gg.Graph(device)
    g1.add_memcpy(device.zeros(first.size, np.float32), first)
    lo, hi = pages_of(first)
    assert registered(device) == [(lo, hi - lo, 1)]
    g2.add_memcpy(device.zeros(second.size, np.float32), second)
    # The second view's pages past the first registration are registered on their own; the shared ones are counted.
    _, second_hi = pages_of(second)
    assert registered(device) == [(lo, hi - lo, 2), (hi, second_hi - hi, 1)]
    del g1
    assert registered(device) == [(lo, hi - lo, 1), (hi, second_hi - hi, 1)]
    del g2
    assert registered(device) == []


def test_small_arrays_sharing_a_page_share_its_registration(device):
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    shared = pages_of(a) == pages_of(b)
    g = gg.Graph(device)
    x = device.zeros(4, np.float32)
    g.add_memcpy(x, a)
    g.add_memcpy(b, x)
    rows = registered(device)
    assert sum(n for _, n, _ in rows) == (PAGE if shared else sum(hi - lo for lo, hi in (pages_of(a), pages_of(b))))
    if shared:
        assert rows == [(pages_of(a)[0], PAGE, 2)]
    del g
    assert registered(device) == []


@pytest.mark.parametrize("order", ["graph first", "exec first"])
def test_an_executable_graph_keeps_its_copies_page_locked(device, stream, order):
    source, result = np.zeros(N, np.float32), np.zeros(N, np.float32)
    x = device.zeros(N, np.float32)
    checker = Checker(source)
    g = gg.Graph(device)
    fill = g.add_host(checker.fill)
    up = g.add_memcpy(x, source, after=fill)
    inc = g.add_kernel(K.shift, *K.launch_1d(N), x, 1.0, N, after=up)
    down = g.add_memcpy(result, x, after=inc)
    g.add_host(checker.check, result, after=down)
    exe = g.instantiate()
    if order == "graph first":
        del g, fill, up, inc, down
        assert registered(device)  # the executable graph still copies them
        K.launch_and_wait(exe, stream, 10)
        exe.close()
        del exe
    else:
        exe.close()
        del exe
        assert registered(device)  # the graph still holds its nodes
        del g, fill, up, inc, down
    assert (checker.checked, checker.wrong) == ((10, 0) if order == "graph first" else (0, 0))
    assert registered(device) == []


def test_a_clone_and_a_child_graph_keep_the_copies_page_locked(device, stream):
    source, result = np.full(N, 3, np.float32), np.zeros(N, np.float32)
    x = device.zeros(N, np.float32)
    g = gg.Graph(device)
    up = g.add_memcpy(x, source)
    g.add_memcpy(result, x, after=up)
    clone = g.clone()
    parent = gg.Graph(device)
    parent.add_child(g)
    del g, up
    assert registered(device)
    with clone.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, source)
    del clone, exe
    assert registered(device)
    result[:] = 0
    with parent.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, source)
    del parent, exe
    assert registered(device) == []


@pytest.mark.parametrize("user_first", [True, False], ids=["user first", "graph first"])
def test_an_array_the_user_registered_shares_the_registration(device, stream, user_first):
    source = np.full(N, 5, np.float32)
    x = device.zeros(N, np.float32)
    lo, hi = pages_of(source)
    g = gg.Graph(device)
    if user_first:
        registration = device.register_host(source)
        g.add_memcpy(x, source)
    else:
        g.add_memcpy(x, source)
        registration = device.register_host(source)
    assert registered(device) == [(lo, hi - lo, 2)]
    registration.release()  # the graph still uses it: it stays page-locked
    assert registered(device) == [(lo, hi - lo, 1)]
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), source)
    del g, exe
    assert registered(device) == []


def test_pinned_memory_needs_no_registration(device, stream):
    """Memory page-locked already (Device.pinned, views of it) is used as it is."""
    host = K.pinned(device, np.arange(N, dtype=np.float32))
    g = gg.Graph(device)
    g.add_memcpy(device.zeros(10, np.float32), host[10:20])
    with device.register_host(host) as registration:
        assert registered(device) == []
        stream.launch(K.shift, *K.launch_1d(N), registration.device_array, 1.0, N)
        stream.synchronize()
    np.testing.assert_array_equal(host, np.arange(N) + 1)
    assert len(g) == 1 and registered(device) == []


def test_a_refused_copy_leaves_nothing_registered(device):
    source = np.zeros(N, np.float32)
    g = gg.Graph(device)
    with pytest.raises(ValueError, match=r"^add_memcpy: nbytes=8000 exceeds"):
        g.add_memcpy(device.zeros(N, np.float32), source, nbytes=8000)
    with pytest.raises(gg.GraphError):
        g.add_memcpy(device.zeros(N, np.float32), source, after=gg.Graph(device).add_empty())
    assert len(g) == 0
    assert registered(device) == []


# Device.register_host


def test_register_host_lets_kernels_use_the_array_in_place(device, stream):
    host = np.arange(N, dtype=np.float32)
    with device.register_host(host) as registration:
        assert not registration.released and registration.array is host
        stream.launch(K.shift, *K.launch_1d(N), registration.device_array, 1.0, N)
        stream.synchronize()
        np.testing.assert_array_equal(host, np.arange(N) + 1)
    assert registration.released
    assert registered(device) == []


def test_register_host_counts_registrations_of_the_same_memory(device):
    host = np.zeros(3 * PAGE, np.uint8)
    lo, hi = pages_of(host)
    first = device.register_host(host)
    second = device.register_host(host[PAGE:])  # inside the first: counted, not registered again
    assert registered(device) == [(lo, hi - lo, 2)]
    first.release()
    assert registered(device) == [(lo, hi - lo, 1)]
    second.release()
    assert registered(device) == []


def test_register_host_takes_strided_arrays_whole(device):
    host = np.zeros((64, 64), np.float32)
    with device.register_host(host[::2, ::-3]) as registration:  # its bytes span the whole array
        lo, hi = pages_of(host)
        assert registered(device) == [(lo, hi - lo, 1)]
        with pytest.raises(ValueError, match=r"^device_array: the array is not C-contiguous \(strides \(512, -12\)\); "
                                             r"an Array is, so register a contiguous array"):
            registration.device_array


def test_register_host_refusals(device):
    with pytest.raises(TypeError, match=r"^register_host\(array\): expected a NumPy array, got list$"):
        device.register_host([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^register_host\(array\): the array has dtype object, which holds Python "
                                        r"objects"):
        device.register_host(np.array([1, None]))
    with pytest.raises(ValueError, match=r"^register_host\(array\): the array is empty \(shape \(0,\)\): there is no "
                                         r"memory to page-lock$"):
        device.register_host(np.zeros(0))
    with pytest.raises(TypeError, match=r"^register_host\(read_only\): expected a bool, got 1$"):
        device.register_host(np.zeros(4), read_only=1)
    registration = device.register_host(np.zeros(4))
    registration.release()
    with pytest.raises(ValueError, match=r"released already \(each registration is released once\)$"):
        registration.release()
    with pytest.raises(ValueError, match=r"^device_array: HostRegistration\(32 bytes at 0x[0-9a-f]+, \w+:0, released\) "
                                         r"is released; register the array again to use it on the device$"):
        registration.device_array
    assert registered(device) == []


def test_a_copy_may_not_write_memory_registered_read_only(device, stream):
    host = np.full(N, 7, np.float32)
    x = K.f32(device, np.arange(N))
    with device.register_host(host, read_only=True) as registration:
        assert registration.read_only
        g = gg.Graph(device)
        with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): its memory is page-locked read-only "
                                             r"\(register_host\(read_only=True\)\) and this copy writes it; release "
                                             r"that registration, or copy into other memory$"):
            g.add_memcpy(host, x)
        g.add_memcpy(x, host)  # reading it is what read-only registration is for
        with g.instantiate() as exe:
            K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), host)
        del g, exe
    assert registered(device) == []
