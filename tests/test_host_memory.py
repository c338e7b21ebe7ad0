"""Ordinary (pageable) NumPy memory in graph and captured copies, and host memory page-locked on request.

Graph copies, captured copies and the copy setters take ordinary NumPy arrays: they page-lock the arrays' pages while a
graph or executable graph refers to them, so that each copy reads and writes its array at its turn in the graph (CUDA
would otherwise stage pageable memory at a time of its own). The registrations are counted by pages and shared; when
nothing refers to the memory any more, nothing stays registered. ``Device.register_host`` page-locks an array on
request (hipHostRegister).
"""

from __future__ import annotations

import ctypes
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


def own_pages(n: int) -> np.ndarray:
    """An ordinary array of ``n`` float32 zeros on pages of its own (a memory map): no other array shares them."""
    return np.frombuffer(mmap.mmap(-1, -(-4 * n // PAGE) * PAGE), np.float32)[:n]


def block_of(array: np.ndarray) -> tuple[int, int]:
    """The first byte and the byte past the last of the memory a copy of ``array`` page-locks: the whole memory map
    under an ``own_pages`` array, else the whole array owning the data."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = root.__array_interface__["data"][0]
    return start, start + (len(root.base) if isinstance(root.base, mmap.mmap) else root.nbytes)


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


def round_trip(device: gg.Device, checker: Checker, source: np.ndarray, result: np.ndarray,
               x: gg.Array) -> tuple[gg.Graph, gg.Node, gg.Node, gg.Node]:
    """The graph of the "HIP graphs" programs' pattern: fill ``source`` on the host, copy it to ``x``, add 1 there,
    copy it back into ``result`` and check it on the host; with its copy nodes and its checking node."""
    g = gg.Graph(device)
    fill = g.add_host(checker.fill)
    up = g.add_memcpy(x, source, after=fill)
    inc = g.add_kernel(K.shift, *K.launch_1d(x.size), x, 1.0, x.size, after=up)
    down = g.add_memcpy(result, x, after=inc)
    check = g.add_host(checker.check, result, after=down)
    return g, up, down, check


# Every copy reads and writes its ordinary array at its turn


def test_a_graph_copies_ordinary_arrays_at_their_turn(device, stream):
    """A host node fills an ordinary array, a copy node takes it to the device, a kernel adds 1, a copy node brings it
    back into another ordinary array and a host node reads it: right at every launch, with a new value each time."""
    source, result = np.zeros(N, np.float32), np.zeros(N, np.float32)
    checker = Checker(source)
    g, *_ = round_trip(device, checker, source, result, device.zeros(N, np.float32))
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


def test_registering_leaves_a_global_capture_running(device, stream):
    """Registering pages is no call a "global" capture forbids (it touches no stream): a copy recorded in the capture
    and one added to another graph by another thread meanwhile both register, and the capture goes on."""
    import threading

    source, other = own_pages(N), own_pages(N)
    source[:] = 5
    x, y = device.zeros(N, np.float32), device.zeros(N, np.float32)
    elsewhere = gg.Graph(device)
    with stream.capture(mode="global") as cap:
        stream.memcpy(x, source)
        worker = threading.Thread(target=elsewhere.add_memcpy, args=(y, other))
        worker.start()
        worker.join()
        stream.launch(K.shift, *K.launch_1d(N), x, 1.0, N)
    assert len(elsewhere) == 1 and len(registered(device)) == 2
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 6.0))


def test_set_memcpy_takes_new_ordinary_arrays(device, stream):
    """exe.set_memcpy and Graph.set_memcpy with arrays made after the executable graph: the copies use them at their
    turn; the executable graph holds them page-locked, and lets go of those it no longer copies."""
    x = device.zeros(N, np.float32)
    first_source, first_result = own_pages(N), own_pages(N)
    checker = Checker(first_source)
    g, up, down, check = round_trip(device, checker, first_source, first_result, x)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        source, result = own_pages(N), own_pages(N)
        checker.source = source
        exe.set_memcpy(up, x, source)
        exe.set_memcpy(down, result, x)
        exe.set_host(check, checker.check, result)
        K.launch_and_wait(exe, stream, LAUNCHES)
        assert (checker.checked, checker.wrong) == (LAUNCHES + 1, 0)
        np.testing.assert_array_equal(result, np.full(N, LAUNCHES + 2))
        assert first_result[0] == 2  # (the first launch's: the replaced array was not written again)
        starts = {start for start, _, _ in registered(device)}
        assert {block_of(a)[0] for a in (first_source, first_result, source, result)} <= starts
        exe.set_memcpy(up, x, first_source)  # back to the graph's own arrays: source and result are let go
        exe.set_memcpy(down, first_result, x)
        starts = {start for start, _, _ in registered(device)}
        assert block_of(source)[0] not in starts and block_of(result)[0] not in starts
    g.set_memcpy(up, x, np.full(N, 41, np.float32))  # the graph's own node: the next instantiate uses it
    g.set_memcpy(down, result, x)
    g.set_host(check, lambda: None)
    g.set_host(g.nodes[0], lambda: None)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, np.full(N, 42))


@pytest.mark.parametrize("seed", [explicit_graph.build, capture_graph.capture], ids=["explicit", "capture"])
def test_the_seed_programs_with_ordinary_host_arrays_give_7(device, stream, seed):
    """The programs of ROCm's "HIP graphs" page hold their host data in a std::vector: written with an ordinary
    NumPy array, they give 7 everywhere (on an H200, without page-locking, the explicit graph's copy read the array
    before the host node filled it and gave 3)."""
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


@pytest.mark.parametrize("first_dropped", ["first", "second"])
def test_views_of_one_buffer_share_the_registration_of_the_whole_buffer(device, first_dropped):
    assert registered(device) == []
    base = own_pages(4 * PAGE // 4)  # a memory map of four pages
    first, second = base[: 2 * PAGE // 4], base[PAGE // 4:]  # views sharing their second page
    graphs = {"first": gg.Graph(device), "second": gg.Graph(device)}
    graphs["first"].add_memcpy(device.zeros(first.size, np.float32), first)
    lo, hi = block_of(first)
    assert hi - lo == 4 * PAGE and registered(device) == [(lo, 4 * PAGE, 1)]  # the whole map
    inside = gg.Graph(device)
    inside.add_memcpy(device.zeros(4, np.float32), first[:4])
    assert registered(device) == [(lo, 4 * PAGE, 2)]
    del inside
    graphs["second"].add_memcpy(device.zeros(second.size, np.float32), second)
    assert registered(device) == [(lo, 4 * PAGE, 2)]
    del graphs[first_dropped]
    assert registered(device) == [(lo, 4 * PAGE, 1)]
    graphs.clear()
    assert registered(device) == []


@pytest.mark.parametrize("instantiated", ["before", "after"])
def test_two_graphs_copy_views_sharing_a_page_at_every_launch(device, instantiated):
    """Views sharing a page, copied by two graphs, each view filled by a host node before its copy: both graphs, the
    first one instantiated before or after the second copy was made, copy their views at every launch."""
    base = own_pages(4 * PAGE // 4)
    first, second = base[: 2 * PAGE // 4], base[PAGE // 4:]  # views sharing their second page
    x, y = device.zeros(first.size, np.float32), device.zeros(second.size, np.float32)
    value = [0.0]

    def fill() -> None:
        value[0] += 1
        base[:] = value[0]

    one, two = gg.Graph(device), gg.Graph(device)
    one.add_memcpy(x, first, after=one.add_host(fill))
    early = one.instantiate() if instantiated == "before" else None
    two.add_memcpy(y, second, after=two.add_host(fill))
    assert len(registered(device)) == 1
    execs = (early or one.instantiate(), two.instantiate())
    stream = device.stream()
    for _ in range(3):
        for exe, target in zip(execs, (x, y)):
            exe.launch(stream)
            stream.synchronize()
            np.testing.assert_array_equal(target.to_numpy(), value[0])


def test_arrays_of_their_own_sharing_a_page_are_registered_each_and_copied_right(device, stream):
    """Arrays over memory of their own that share a page (small NumPy arrays often do) are registered each
    (registrations may share a page, not a byte), and copies of each, filled by a host node before the copy, are right
    at every launch."""
    page = mmap.mmap(-1, PAGE)
    start = np.frombuffer(page, np.uint8).__array_interface__["data"][0]
    arrays = [np.frombuffer((ctypes.c_float * 64).from_address(start + k * 512), np.float32) for k in range(8)]
    g = gg.Graph(device)
    targets = [device.zeros(64, np.float32) for _ in arrays]
    value = [0.0]

    def fill() -> None:
        value[0] += 1
        for a in arrays:
            a[:] = value[0]

    filled = g.add_host(fill)
    for target, a in zip(targets, arrays):
        g.add_memcpy(target, a, after=filled)
    assert registered(device) == [(start + k * 512, 256, 1) for k in range(8)]
    with g.instantiate() as exe:
        for _ in range(3):
            K.launch_and_wait(exe, stream)
            for target in targets:
                np.testing.assert_array_equal(target.to_numpy(), value[0])
    del g, exe, filled
    assert registered(device) == []
    page.close()


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
    with parent.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, source)
    del parent, exe
    assert registered(device)  # the clone alone holds them now
    result[:] = 0
    with clone.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(result, source)
    del clone, exe
    assert registered(device) == []


@pytest.mark.parametrize("user_first", [True, False], ids=["user first", "graph first"])
def test_an_array_the_user_registered_shares_the_registration(device, stream, user_first):
    source = np.full(N, 5, np.float32)
    x = device.zeros(N, np.float32)
    lo, hi = block_of(source)
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


def test_registering_part_of_a_buffer_page_locks_the_whole_buffer(device, stream):
    host = own_pages(4 * PAGE // 4)
    host[:] = np.arange(host.size)
    lo, _ = block_of(host)
    with device.register_host(host[: PAGE // 4]), device.register_host(host) as whole:
        assert registered(device) == [(lo, 4 * PAGE, 2)]
        stream.launch(K.shift, *K.launch_1d(host.size), whole.device_array, 1.0, host.size)
        stream.synchronize()
        np.testing.assert_array_equal(host, np.arange(host.size) + 1)
    assert registered(device) == []


def test_register_host_counts_registrations_of_the_same_memory(device):
    host = np.zeros(3 * PAGE, np.uint8)
    lo, hi = block_of(host)
    first = device.register_host(host)
    second = device.register_host(host[PAGE:])  # inside the first: counted, not registered again
    assert registered(device) == [(lo, hi - lo, 2)]
    first.release()
    assert registered(device) == [(lo, hi - lo, 1)]
    second.release()
    assert registered(device) == []


def test_register_host_takes_strided_arrays_whole(device):
    host = np.zeros((64, 64), np.float32)
    with device.register_host(host[::2, ::-3]) as registration:  # its bytes span rows 0 to 62 whole
        lo, hi = block_of(host[:63])
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
    with pytest.raises(TypeError, match=r"^register_host\(read_only\): expected a bool, got int 1$"):
        device.register_host(np.zeros(4), read_only=1)
    with device.register_host(np.zeros(4), read_only=np.True_) as numpy_flag:  # a NumPy bool is a bool
        assert numpy_flag.read_only is True
    registration = device.register_host(np.zeros(4))
    registration.release()
    with pytest.raises(ValueError, match=r"released already \(each registration is released once\)$"):
        registration.release()
    with pytest.raises(ValueError, match=r"^device_array: HostRegistration\(32 bytes at 0x[0-9a-f]+, \w+:0, released\) "
                                         r"is released; register the array again to use it on the device$"):
        registration.device_array
    assert registered(device) == []


def test_memory_the_driver_will_not_page_lock_is_refused_with_what_to_do(device, monkeypatch):
    """Where the driver refuses to page-lock an array (here a stand-in driver refuses all), each call that needs it
    says so, naming the way out, and leaves nothing registered."""
    from gpugraph.backends._host_registry import HostRegistrationError

    def refuse(start: int, nbytes: int, read_only: bool) -> None:
        raise HostRegistrationError("cuMemHostRegister: CUDA_ERROR_INVALID_VALUE (a stand-in driver)")

    monkeypatch.setattr(device._backend.host_registry, "_register", refuse)
    host, x = own_pages(N), device.zeros(N, np.float32)
    with pytest.raises(ValueError, match=r"^add_memcpy\(src\): graph and captured copies page-lock a NumPy array's "
                                         r"memory .* the driver refused to page-lock this one \(cuMemHostRegister: "
                                         r"CUDA_ERROR_INVALID_VALUE \(a stand-in driver\)\); copy the data into an "
                                         r"array of dev.pinned\(shape, dtype\) and use that, or page-lock it yourself "
                                         r"with dev.register_host\(array, read_only=True\) if it is read-only memory$"):
        gg.Graph(device).add_memcpy(x, host)
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): .* and use that$"):
        gg.Graph(device).add_memcpy(host, x)
    with pytest.raises(ValueError, match=r"^register_host\(array\): the driver refused to page-lock the array's "
                                         r"memory \(.*\); if the memory is read-only \(a read-only memory map\), pass "
                                         r"read_only=True; else copy the data into an array of dev.pinned"):
        device.register_host(host)
    with pytest.raises(ValueError, match=r"^register_host\(array\): the driver refused .*\); else copy the data"):
        device.register_host(host, read_only=True)
    assert registered(device) == []


def test_a_device_array_holds_the_memory_page_locked_while_it_lives(device, stream):
    host = own_pages(N)
    lo, hi = block_of(host)
    view = device.register_host(host).device_array  # the registration itself is dropped at once
    assert registered(device) == [(lo, hi - lo, 1)]
    stream.launch(K.shift, *K.launch_1d(N), view, 2.0, N)
    stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 2.0))
    del view
    assert registered(device) == []


def test_register_host_takes_read_only_arrays_as_read_only(device):
    base = own_pages(N)
    host = base.view()
    host.flags.writeable = False
    with device.register_host(host) as registration:
        assert registration.read_only
        with pytest.raises(ValueError, match=r"^register_host\(array\): its memory is page-locked read-only .*, and "
                                             r"this use writes it"):
            device.register_host(base)  # (for writing too, over the read-only registration)
    with pytest.raises(ValueError, match=r"^register_host\(array\): the array is read-only \(its flags\.writeable is "
                                         r"False\), so the devices may only read it: register it with read_only=True"):
        device.register_host(host, read_only=False)
    assert registered(device) == []


def test_a_copy_may_not_write_memory_registered_read_only(device, stream):
    host = np.full(N, 7, np.float32)
    x = K.f32(device, np.arange(N))
    with device.register_host(host, read_only=True) as registration:
        assert registration.read_only
        g = gg.Graph(device)
        with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): its memory is page-locked read-only "
                                             r"\(register_host\(read_only=True\); .*\), and this use writes it; "
                                             r"release that registration, or use other memory$"):
            g.add_memcpy(host, x)
        g.add_memcpy(x, host)  # reading it is what read-only registration is for
        with g.instantiate() as exe:
            K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), host)
        del g, exe
    assert registered(device) == []


# The registry's own rules, with a driver that refuses on request


class Driver:
    """A fake driver's registrations: it refuses the n-th registration for writing, or any for writing."""

    def __init__(self, refuse_at: int = -1, writable: bool = True) -> None:
        self.live: dict[int, tuple[int, bool]] = {}
        self.calls, self.refuse_at, self.writable = 0, refuse_at, writable

    def register(self, start: int, nbytes: int, read_only: bool) -> int:
        from gpugraph.backends._host_registry import HostRegistrationError

        self.calls += 1
        if self.calls == self.refuse_at or (not read_only and not self.writable):
            raise HostRegistrationError("refused (a fake driver)")
        # (A byte is never registered twice.)
        assert all(start + nbytes <= at or at + n <= start for at, (n, _) in self.live.items())
        self.live[start] = (nbytes, read_only)
        return start

    def registry(self):
        from gpugraph.backends._host_registry import HostRegistry

        return HostRegistry(self.register, self.live.pop, lambda ptr, nbytes: False, lambda release: release())


def test_uses_share_the_registration_of_their_block_and_blocks_may_share_a_page():
    driver = Driver()
    registry = driver.registry()
    base = own_pages(4 * PAGE // 4)
    address = base.__array_interface__["data"][0]
    block = (address, 2 * PAGE + 100)
    pins = [registry.pin(address + 8, 16, base, block=block), registry.pin(address, 2 * PAGE, base, block=block)]
    assert registry.registrations() == [(address, 2 * PAGE + 100, 2)] and driver.live == {address: (2 * PAGE + 100,
                                                                                                   False)}
    pins.append(registry.pin(address + 2 * PAGE + 100, 50, base))  # a block of its own, on the same page
    assert registry.registrations() == [(address, 2 * PAGE + 100, 2), (address + 2 * PAGE + 100, 50, 1)]
    pins[0].release()
    pins[2].release()
    assert registry.registrations() == [(address, 2 * PAGE + 100, 1)]
    pins[1].release()
    assert driver.live == {} and registry.registrations() == []


def test_a_block_lying_partly_in_another_registration_is_refused():
    driver = Driver()
    registry = driver.registry()
    base = own_pages(4 * PAGE // 4)
    address = base.__array_interface__["data"][0]
    held = registry.pin(address + PAGE, PAGE, base)
    with pytest.raises(ValueError, match=rf"^add_memcpy\(src\): its memory \({4 * PAGE} bytes at {address:#x}\) "
                                         rf"lies partly in memory page-locked for another array \({PAGE} bytes at "
                                         rf"{address + PAGE:#x}\), and a copy's host memory must lie in one "
                                         rf"registration \(CUDA refuses a copy over two\); copy through an array of "
                                         rf"its own, or make both arrays views of one buffer$"):
        registry.pin(address, 4 * PAGE, base, what="add_memcpy(src)")
    assert registry.registrations() == [(address + PAGE, PAGE, 1)] and driver.calls == 1
    held.release()
    assert driver.live == {} and registry.registrations() == []


def test_a_refused_registration_leaves_nothing_behind():
    driver = Driver(refuse_at=2)
    registry = driver.registry()
    base = own_pages(4 * PAGE // 4)
    address = base.__array_interface__["data"][0]
    held = registry.pin(address, PAGE, base)
    from gpugraph.backends._host_registry import HostRegistrationError

    with pytest.raises(HostRegistrationError, match="refused"):
        registry.pin(address + 2 * PAGE, PAGE, base, writes=True)
    assert registry.registrations() == [(address, PAGE, 1)] and driver.live == {address: (PAGE, False)}
    held.release()
    assert driver.live == {} and registry.registrations() == []


def test_a_use_may_read_memory_registered_read_only_but_not_write_it():
    driver = Driver()
    base = own_pages(4 * PAGE // 4)
    address = base.__array_interface__["data"][0]
    registry = driver.registry()
    read = registry.pin(address, PAGE, base, read_only=True)
    source = registry.pin(address, PAGE, base, what="a copy's source")
    assert registry.registrations() == [(address, PAGE, 2)] and driver.live == {address: (PAGE, True)}
    with pytest.raises(ValueError, match=r"^a copy's destination: its memory is page-locked read-only "):
        registry.pin(address, PAGE, base, writes=True, what="a copy's destination")
    assert registry.registrations() == [(address, PAGE, 2)]
    for pin in (read, source):
        pin.release()
    assert driver.live == {} and registry.registrations() == []


def test_a_source_the_driver_will_not_register_for_writing_is_registered_read_only():
    driver = Driver(writable=False)
    registry = driver.registry()
    base = own_pages(N)
    address = base.__array_interface__["data"][0]
    source = registry.pin(address, base.nbytes, base)  # a copy's source: read-only will do
    assert driver.live == {address: (base.nbytes, True)}
    with pytest.raises(ValueError, match=r"^host memory: its memory is page-locked read-only"):
        registry.pin(address, base.nbytes, base, writes=True)
    from gpugraph.backends._host_registry import HostRegistrationError

    with pytest.raises(HostRegistrationError):
        driver.registry().pin(address, base.nbytes, base, writes=True)  # (a destination must be writable)
    del source
    assert registry.registrations() == [] and driver.live == {}


@pytest.mark.gpu
def test_the_driver_sees_the_pages_page_locked_exactly_while_used(gpu_device):
    """Asked of the driver itself: the pages are page-locked host memory while a graph copies them, and unknown to it
    (pageable) once nothing does."""
    from cuda.bindings import driver

    def page_locked(array: np.ndarray) -> bool:
        err, _ = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              array.__array_interface__["data"][0])
        return err == driver.CUresult.CUDA_SUCCESS

    host = own_pages(N)
    assert not page_locked(host)
    g = gg.Graph(gpu_device)
    g.add_memcpy(gpu_device.zeros(N, np.float32), host)
    assert page_locked(host)
    del g
    assert registered(gpu_device) == [] and not page_locked(host)


def test_the_buffer_an_array_lies_in_is_found_through_views_and_buffers():
    from gpugraph._memory import host_buffer

    owner = np.zeros(100, np.float64)
    start = owner.__array_interface__["data"][0]
    assert host_buffer(owner[10:20]) == (start, 800, owner)
    assert host_buffer(owner[::-3].reshape(-1)[2:]) == (start, 800, owner)
    mapped = mmap.mmap(-1, 2 * PAGE)
    view = np.frombuffer(memoryview(mapped)[PAGE:], np.uint8)[5:9]  # through a memoryview of part of the map
    assert host_buffer(view) == (np.frombuffer(mapped, np.uint8).__array_interface__["data"][0], 2 * PAGE, mapped)
    data = bytes(64)
    assert host_buffer(np.frombuffer(data, np.uint8)[8:]) == (np.frombuffer(data, np.uint8).__array_interface__[
        "data"][0], 64, data)

    class Interface:  # an array interface alone: the outermost array's memory
        def __init__(self, array: np.ndarray) -> None:
            self.__array_interface__ = array.__array_interface__
            self.array = array

    exported = np.asarray(Interface(owner[50:]))
    assert host_buffer(exported[1:]) == (start + 400, 400, exported)
