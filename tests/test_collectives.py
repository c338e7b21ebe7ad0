"""Communicators and collectives: all-reduce, broadcast, reduce, all-gather, reduce-scatter, send and receive
against NumPy, on streams and captured into one graph over every device; the argument checks; a rank whose
peers never come, stopped by the timeout or by abort. The CPU backend emulates NCCL over its devices (4 by
default), so these run in CI; on CUDA they need nccl4py, and a group of several ranks needs several GPUs."""

from __future__ import annotations

import importlib.util
import re
import threading

import numpy as np
import pytest

import gpugraph as gg
from gpugraph.backends import available_backends

N = 12

SCALE = gg.Kernel(r"""
__global__ void scale(float* x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}""", "scale")

AXPY = gg.Kernel(r"""
__global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}""", "axpy")


@pytest.fixture(params=available_backends())
def devices(request: pytest.FixtureRequest) -> list[gg.Device]:
    """Every device of one backend: the ranks of a communicator group."""
    if request.param != "cpu" and importlib.util.find_spec("nccl") is None:
        pytest.skip(f"{request.param}: collectives need nccl4py (pip install '.[nccl]' in a gpugraph checkout)")
    count = gg.backends.get_backend(request.param).device_count()
    return [gg.Device(f"{request.param}:{i}") for i in range(count)]


@pytest.fixture
def several(devices: list[gg.Device]) -> list[gg.Device]:
    if len(devices) < 2:
        pytest.skip(f"{devices[0].backend} has 1 device here; these tests need two")
    return devices


def values(rank: int, n: int = N, dtype=np.float32) -> np.ndarray:
    return ((np.arange(n) % 7) + rank + 1).astype(dtype)


def run(devices, call, inputs, outputs=None):
    """Each rank's ``call(comm, stream, x, y)`` in one group, then every stream synchronized."""
    comms = gg.communicators(devices)
    streams = [d.stream() for d in devices]
    xs = [d.asarray(v) for d, v in zip(devices, inputs)]
    ys = xs if outputs is None else [d.asarray(v) for d, v in zip(devices, outputs)]
    with gg.collective_group():
        for c, s, x, y in zip(comms, streams, xs, ys):
            call(c, s, x, y)
    for s in streams:
        s.synchronize()
    for c in comms:
        c.close()
    return [y.to_numpy() for y in ys]


@pytest.mark.parametrize("op, reduce", [("sum", np.add.reduce), ("prod", np.multiply.reduce),
                                        ("max", np.maximum.reduce), ("min", np.minimum.reduce)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.uint8, np.float16, np.int8, np.int64,
                                   np.uint64, np.uint32])
def test_all_reduce_in_place(devices, op, reduce, dtype):
    inputs = [values(r, dtype=dtype) for r in range(len(devices))]
    got = run(devices, lambda c, s, x, y: c.all_reduce(x, x, op=op, stream=s), inputs)
    for g in got:
        np.testing.assert_array_equal(g, reduce(inputs).astype(dtype))


def test_all_reduce_avg_into_another_array(devices):
    inputs = [values(r) for r in range(len(devices))]
    got = run(devices, lambda c, s, x, y: c.all_reduce(x, y, op="avg", stream=s), inputs,
              [np.zeros(N, np.float32)] * len(devices))
    for g in got:
        np.testing.assert_allclose(g, np.mean(inputs, axis=0), rtol=1e-6)


def test_broadcast_and_reduce_at_the_last_rank(devices):
    root = len(devices) - 1
    inputs = [values(r) for r in range(len(devices))]
    got = run(devices, lambda c, s, x, y: c.broadcast(x if c.rank == root else None, y, root=root, stream=s),
              inputs, [np.zeros(N, np.float32)] * len(devices))
    for g in got:
        np.testing.assert_array_equal(g, inputs[root])
    got = run(devices, lambda c, s, x, y: c.reduce(x, y if c.rank == root else None, root=root, stream=s),
              inputs, [np.full(N, -1, np.float32)] * len(devices))
    np.testing.assert_array_equal(got[root], np.sum(inputs, axis=0))
    for g in got[:root]:
        np.testing.assert_array_equal(g, -1)  # written on the root only


def test_all_gather_and_reduce_scatter(devices):
    size = len(devices)
    inputs = [values(r) for r in range(size)]
    got = run(devices, lambda c, s, x, y: c.all_gather(x, y, stream=s), inputs,
              [np.zeros(N * size, np.float32)] * size)
    for g in got:
        np.testing.assert_array_equal(g, np.concatenate(inputs))
    big = [values(r, N * size) for r in range(size)]
    got = run(devices, lambda c, s, x, y: c.reduce_scatter(x, y, stream=s), big, [np.zeros(N, np.float32)] * size)
    total = np.sum(big, axis=0)
    for r, g in enumerate(got):
        np.testing.assert_array_equal(g, total[r * N:(r + 1) * N])


def test_send_and_recv_around_a_ring(several):
    size = len(several)
    inputs = [values(r) for r in range(size)]

    def ring(c, s, x, y):
        c.send(x, peer=(c.rank + 1) % size, stream=s)
        c.recv(y, peer=(c.rank - 1) % size, stream=s)

    got = run(several, ring, inputs, [np.zeros(N, np.float32)] * size)
    for r, g in enumerate(got):
        np.testing.assert_array_equal(g, inputs[(r - 1) % size])


def capture_over(streams, body) -> gg.Graph:
    """A graph over every rank's stream: the first forks onto the others, ``body()`` enqueues, all join back."""
    lead = streams[0]
    with lead.capture() as cap:
        fork = lead.record()
        for s in streams[1:]:
            s.wait(fork)
        body()
        for s in streams[1:]:
            lead.wait(s.record())
    return cap.graph


def all_reduce_each(comms, streams, xs, op="sum"):
    """Every rank's in-place all-reduce, in one group."""
    with gg.collective_group():
        for c, s, x in zip(comms, streams, xs):
            c.all_reduce(x, x, op=op, stream=s)


def data_parallel_step(comms, streams, grads, weights, shards, lr):
    """Each rank: its gradient from its shard, all-reduced to the mean, then weights -= lr * mean."""
    for s, g, x in zip(streams, grads, shards):
        s.memcpy(g, x)
        s.launch(SCALE, 1, N, g, 1.0, N)
    with gg.collective_group():
        for c, s, g in zip(comms, streams, grads):
            c.all_reduce(g, g, op="avg", stream=s)
    for s, g, w in zip(streams, grads, weights):
        s.launch(AXPY, 1, N, w, g, -lr, N)


def test_a_data_parallel_step_captured_over_every_device_into_one_graph(devices):
    size, lr, steps = len(devices), 0.5, 3
    comms = gg.communicators(devices)
    streams = [d.stream() for d in devices]
    shards = [d.asarray(values(r)) for r, d in enumerate(devices)]
    weights = [d.zeros(N, np.float32) for d in devices]
    grads = [d.empty(N, np.float32) for d in devices]
    lead = streams[0]
    graph = capture_over(streams, lambda: data_parallel_step(comms, streams, grads, weights, shards, lr))
    with graph.instantiate() as exe:
        for _ in range(steps):
            exe.launch(lead)
        lead.synchronize()
    expected = -steps * lr * np.mean([values(r) for r in range(size)], axis=0)
    for w in weights:
        np.testing.assert_allclose(w.to_numpy(), expected, rtol=1e-6)
    for c in comms:
        c.close()


# Argument checks


@pytest.fixture
def one(devices):
    comms = gg.communicators(devices[:1])
    yield comms[0], devices[0].stream()
    comms[0].close()


def test_arguments_are_checked_at_the_call(one, pair_of_cpu_devices):
    comm, stream = one
    device = comm.device
    x, y = device.zeros(N, np.float32), device.zeros(N, np.int32)
    other = pair_of_cpu_devices[1] if device.backend == "cpu" else gg.Device("cpu:1")
    with pytest.raises(TypeError, match=r"^Communicator.all_reduce\(send\): expected an Array, got ndarray$"):
        comm.all_reduce(np.zeros(N), x, stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.all_reduce\(recv\): the Array is on cpu:1, rank 0 on "):
        comm.all_reduce(x, other.zeros(N, np.float32), stream=stream)
    with pytest.raises(TypeError, match=r"^Communicator.all_reduce: send holds float32, recv int32: the same "):
        comm.all_reduce(x, y, stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.all_reduce: send and recv need the same number of "
                                         r"elements, got send of 12 and recv of 3$"):
        comm.all_reduce(x, device.zeros(3, np.float32), stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.all_reduce\(op\): expected one of sum, prod, max, min, "
                                         r"avg, got 'mean'$"):
        comm.all_reduce(x, x, op="mean", stream=stream)
    with pytest.raises(TypeError, match=r"^Communicator.all_reduce\(op\): 'avg' is for floating-point elements, "
                                        r"got int32$"):
        comm.all_reduce(y, y, op="avg", stream=stream)
    with pytest.raises(TypeError, match=r"^Communicator.all_reduce\(send\): NCCL has no complex64 elements"):
        z = device.zeros(N, np.complex64)
        comm.all_reduce(z, z, stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.broadcast\(root\): ranks are 0..0, got 1$"):
        comm.broadcast(x, x, root=1, stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.send\(peer\): rank 0 cannot send to or receive from "
                                         r"itself$"):
        comm.send(x, peer=0, stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.all_gather: send and recv need the same number of "
                                         r"elements, got send of 12 and recv of 24$"):  # (one rank)
        comm.all_gather(x, device.zeros(2 * N, np.float32), stream=stream)
    with pytest.raises(ValueError, match=r"^Communicator.all_reduce\(stream\): Stream\(.*\) is on cpu:1, rank 0 "):
        comm.all_reduce(x, x, stream=other.stream())
    with pytest.raises(TypeError, match=r"^Communicator.all_reduce\(stream\): expected a Stream, got NoneType$"):
        comm.all_reduce(x, x, stream=None)
    comm.close()  # nothing was enqueued: nothing to wait for
    with pytest.raises(gg.CollectiveError, match=r"^Communicator.all_reduce: rank 0's communicator is closed$"):
        comm.all_reduce(x, x, stream=stream)


@pytest.fixture
def pair_of_cpu_devices():
    return gg.Device("cpu:0"), gg.Device("cpu:1")


def test_communicators_are_checked(devices):
    with pytest.raises(TypeError, match=r"^communicators\(devices\): expected one Device or more, got nothing$"):
        gg.communicators([])
    with pytest.raises(TypeError, match=r"^communicators\(devices\): expected one Device or more, got Device, "
                                        r"str$"):
        gg.communicators([devices[0], "cpu:1"])
    with pytest.raises(ValueError, match=r"^communicators\(devices\): each device may be one rank only"):
        gg.communicators([devices[0], devices[0]])
    for bad in (0, -1, float("nan"), np.float32("nan")):
        with pytest.raises(ValueError, match=r"^communicators\(timeout\): expected seconds > 0, or inf or None for "
                                             rf"no limit; got {re.escape(repr(bad))}$"):
            gg.communicators(devices, timeout=bad)
    for bad, shown in (("5", "str '5'"), (True, "bool True"), (np.bool_(True), "bool np.True_")):
        with pytest.raises(TypeError, match=r"^communicators\(timeout\): expected seconds \(an int or float\) or "
                                            rf"None, got {shown}$"):
            gg.communicators(devices, timeout=bad)
    with gg.collective_group(), pytest.raises(gg.CollectiveError, match=r"^communicators: cannot be made inside "):
        gg.communicators(devices)


def test_an_infinite_timeout_is_no_limit(devices):
    comm = gg.communicators(devices[:1], timeout=float("inf"))[0]  # (a Python lock refuses inf as a timeout)
    assert comm.timeout is None
    comm.close()
    if devices[0].backend == "cpu":  # (CUDA refuses a timeout: it has no watchdog)
        comm = gg.communicators(devices[:1], timeout=np.float32(2.5))[0]
        assert comm.timeout == 2.5 and type(comm.timeout) is float
        stream, x = devices[0].stream(), devices[0].asarray(values(0))
        comm.all_reduce(x, x, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(x.to_numpy(), values(0))
        comm.close()


def test_each_rank_s_own_arguments_are_checked_at_the_call_as_root_or_not(several):
    comms = gg.communicators(several)
    x = several[1].zeros(N, np.float32)
    stream = several[1].stream()
    with gg.collective_group():
        with pytest.raises(ValueError, match=r"^Communicator.broadcast: rank 1 is the root, so it needs a send Array, "
                                             r"got None$"):
            comms[1].broadcast(None, x, root=1, stream=stream)
        with pytest.raises(ValueError, match=r"^Communicator.reduce: rank 1 is the root, so it needs a recv Array, "
                                             r"got None$"):
            comms[1].reduce(x, None, root=1, stream=stream)
        with pytest.raises(ValueError, match=r"^Communicator.broadcast: send and recv need the same number of "
                                             r"elements, got send of 3 and recv of 12$"):  # (a send given off the root)
            comms[1].broadcast(several[1].zeros(3, np.float32), x, root=0, stream=stream)
        with pytest.raises(TypeError, match=r"^Communicator.reduce: send holds float32, recv int32: the same "):
            comms[1].reduce(x, several[1].zeros(N, np.int32), root=0, stream=stream)
        with pytest.raises(TypeError, match=r"^Communicator.recv\(array\): expected an Array, got list$"):
            comms[1].recv([0.0] * N, peer=0, stream=stream)
    for c in comms:
        c.close()


def test_ranks_whose_sizes_or_element_types_differ_are_told_when_their_parts_meet(several):
    """Each call sees its own rank's arguments only, so a disagreement between ranks is found where the parts meet,
    when they run: at each rank's next synchronize (NCCL finds none of it)."""
    if several[0].backend != "cpu":
        pytest.skip("NCCL does not check that the ranks' calls match (it hangs or computes garbage)")
    comms = gg.communicators(several, timeout=5)
    streams = [d.stream() for d in several]
    xs = [d.asarray(values(r, N + (r == 1), np.float64 if r == 2 else np.float32)) for r, d in enumerate(several)]
    with gg.collective_group():
        for c, s, x in zip(comms, streams, xs):
            c.all_reduce(x, x, stream=s)
    shown = r"rank 0: all_reduce\(count=12, dtype=float32, op=sum, root=-1\); rank 1: all_reduce\(count=13, "
    if len(several) > 2:
        shown += r"dtype=float32, op=sum, root=-1\); rank 2: all_reduce\(count=12, dtype=float64"
    for rank, s in enumerate(streams):
        with pytest.raises(gg.CollectiveError, match=rf"^cpu: rank {rank}'s all_reduce: the ranks' calls for "
                                                     rf"collective #0 of the communicator differ \({shown}"):
            s.synchronize()
    np.testing.assert_array_equal(xs[0].to_numpy(), values(0))  # (nothing computed)
    for c in comms:
        c.close()


def test_several_ranks_driven_by_one_thread_need_a_group(several):
    comms = gg.communicators(several)
    x = several[0].zeros(N, np.float32)
    with pytest.raises(gg.CollectiveError, match=rf"^Communicator.all_reduce: rank 0 is one of {len(several)} "
                                                 r"ranks this process drives, so its calls go inside "
                                                 r"gpugraph.collective_group\(\)") as caught:
        comms[0].all_reduce(x, x, stream=several[0].stream())
    assert (caught.value.rank, caught.value.collective) == (0, "all_reduce")
    with pytest.raises(ValueError, match=rf"^Communicator.reduce_scatter: send needs {len(several)} \(the "
                                         rf"communicator's size\) times the elements of the other, got send of 12 "
                                         rf"and recv of 12$"):
        comms[0].reduce_scatter(x, x, stream=several[0].stream())
    for c in comms:
        c.close()


# Peers that never come


def test_a_rank_whose_peers_never_come_times_out_naming_it(several):
    if several[0].backend != "cpu":
        pytest.skip("the CUDA watchdog that aborts a waiting NCCL communicator is not built yet")
    comms = gg.communicators(several, timeout=0.5)
    stream = several[0].stream()
    x = several[0].asarray(values(0))
    with gg.collective_group():
        comms[0].all_reduce(x, x, stream=stream)  # the other ranks never call theirs
    with pytest.raises(gg.CollectiveError, match=r"rank 0's all_reduce \(collective #0 of the communicator\) "
                                                 r"waited 0.5 s for ranks 1, .* to join; the communicator is "
                                                 r"aborted") as caught:
        stream.synchronize()
    assert (caught.value.rank, caught.value.collective) == (0, "all_reduce")
    assert all(c.aborted for c in comms)
    with gg.collective_group(), pytest.raises(gg.CollectiveError, match=r"rank 0's communicator is aborted"):
        comms[0].all_reduce(x, x, stream=stream)


def test_abort_releases_a_rank_waiting_for_its_peers(several):
    if several[0].backend != "cpu":
        pytest.skip("on CUDA a part stopped by abort raises nothing yet: that comes with the watchdog")
    comms = gg.communicators(several)
    stream = several[0].stream()
    x = several[0].asarray(values(0))
    with gg.collective_group():
        comms[0].broadcast(x, x, root=0, stream=stream)
    threading.Timer(0.2, comms[0].abort).start()
    with pytest.raises(gg.CollectiveError, match=r"rank 0's broadcast: the communicator was aborted"):
        stream.synchronize()
    for c in comms:
        c.close()


def test_ranks_that_call_different_collectives_are_told(several):
    if several[0].backend != "cpu":
        pytest.skip("NCCL does not check that the ranks' calls match (it hangs or computes garbage)")
    comms = gg.communicators(several, timeout=5)
    streams = [d.stream() for d in several]
    xs = [d.asarray(values(r)) for r, d in enumerate(several)]
    with gg.collective_group():
        for c, s, x in zip(comms, streams, xs):
            c.all_reduce(x, x, op="max" if c.rank == 1 else "sum", stream=s)
    for s in streams:
        with pytest.raises(gg.CollectiveError, match=r"the ranks' calls for collective #0 of the communicator "
                                                     r"differ \(rank 0: all_reduce\(count=12, dtype=float32, "
                                                     r"op=sum, root=-1\); rank 1: all_reduce\(.*op=max"):
            s.synchronize()


def test_a_graph_with_more_ranks_than_pool_threads_completes(monkeypatch):
    """The CPU executor's graph runs ask the pool for at most POOL_THREADS helpers; a part waiting for the other
    ranks lends its place, so more ranks than threads still meet (before: the rest never ran; here, a timeout)."""
    from gpugraph.backends.cpu import _parallel

    monkeypatch.setattr(_parallel, "POOL_THREADS", 1)  # a run asks for one helper at most ...
    monkeypatch.setattr(gg.backends.get_backend("cpu")._thread_pool(), "_workers", 1)  # ... of a pool of one
    devices = [gg.Device(f"cpu:{i}") for i in range(gg.backends.get_backend("cpu").device_count())]
    comms = gg.communicators(devices, timeout=10)
    streams = [d.stream() for d in devices]
    xs = [d.asarray(values(r)) for r, d in enumerate(devices)]
    lead = streams[0]
    with capture_over(streams, lambda: all_reduce_each(comms, streams, xs)).instantiate() as exe:
        exe.launch(lead)
        lead.synchronize()
    for x in xs:
        np.testing.assert_array_equal(x.to_numpy(), np.sum([values(r) for r in range(len(devices))], axis=0))
    for c in comms:
        c.close()


def test_a_group_left_by_an_exception_enqueues_nothing(several):
    comms = gg.communicators(several, timeout=5)
    streams = [d.stream() for d in several]
    xs = [d.asarray(values(r)) for r, d in enumerate(several)]
    with pytest.raises(ValueError, match=r"^Communicator.all_reduce\(op\): expected one of .* got 'mean'$"):
        with gg.collective_group():
            comms[0].all_reduce(xs[0], xs[0], stream=streams[0])  # checked, kept
            comms[1].all_reduce(xs[1], xs[1], op="mean", stream=streams[1])  # refused: the block is left
    for s in streams:
        s.synchronize()  # rank 0's part was not enqueued, so it waits for no one
    np.testing.assert_array_equal(xs[0].to_numpy(), values(0))
    with gg.collective_group():  # the communicators still work
        for c, s, x in zip(comms, streams, xs):
            c.all_reduce(x, x, stream=s)
    for s in streams:
        s.synchronize()
    np.testing.assert_array_equal(xs[0].to_numpy(), np.sum([values(r) for r in range(len(several))], axis=0))
    for c in comms:
        c.close()


def test_a_groups_collectives_run_after_the_work_enqueued_inside_it(devices):
    """NCCL enqueues a group's collectives when it ends: a copy enqueued after the call, inside the block,
    runs before the all-reduce, on every backend."""
    comms = gg.communicators(devices)
    streams = [d.stream() for d in devices]
    xs = [d.asarray(values(r)) for r, d in enumerate(devices)]
    before = [d.zeros(N, np.float32) for d in devices]
    with gg.collective_group():
        for c, s, x, b in zip(comms, streams, xs, before):
            c.all_reduce(x, x, stream=s)
            s.memcpy(b, x)
    for s in streams:
        s.synchronize()
    for r, (x, b) in enumerate(zip(xs, before)):
        np.testing.assert_array_equal(b.to_numpy(), values(r))
        np.testing.assert_array_equal(x.to_numpy(), np.sum([values(q) for q in range(len(devices))], axis=0))
    for c in comms:
        c.close()


def test_close_waits_for_queued_parts_and_spares_the_graphs_that_use_them(devices):
    comms = gg.communicators(devices)
    streams = [d.stream() for d in devices]
    xs = [d.asarray(values(r)) for r, d in enumerate(devices)]
    lead = streams[0]
    graph = capture_over(streams, lambda: all_reduce_each(comms, streams, xs, op="max"))
    all_reduce_each(comms, streams, xs, op="sum")
    for c in comms:
        c.close()  # waits for the sums just enqueued; the graph keeps the communicators until it goes
    total = np.sum([values(r) for r in range(len(devices))], axis=0)
    for x in xs:
        np.testing.assert_array_equal(x.to_numpy(), total)
    with pytest.raises(gg.CollectiveError, match=r"^Communicator.all_reduce: rank 0's communicator is closed$"):
        comms[0].all_reduce(xs[0], xs[0], stream=lead)
    with graph.instantiate() as exe:  # a graph captured before close still launches
        exe.launch(lead)
        lead.synchronize()
    for x in xs:
        np.testing.assert_array_equal(x.to_numpy(), total)  # the max of equal arrays


def test_a_recv_of_another_size_than_the_send_is_told(several):
    if several[0].backend != "cpu":
        pytest.skip("NCCL does not check that a send and its receive agree")
    comms = gg.communicators(several, timeout=5)
    s0, s1 = several[0].stream(), several[1].stream()
    x, y = several[0].asarray(values(0)), several[1].zeros(N + 1, np.float32)
    with gg.collective_group():
        comms[0].send(x, peer=1, stream=s0)
        comms[1].recv(y, peer=0, stream=s1)
    s0.synchronize()
    with pytest.raises(gg.CollectiveError, match=r"^cpu: rank 1's recv of 13 float32 from rank 0 got a send of 12 "
                                                 r"float32$"):
        s1.synchronize()
    for c in comms:
        c.close()
