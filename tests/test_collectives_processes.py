"""Communicator groups over several processes (ncclGetUniqueId, ncclCommInitRank): one process makes the id,
each rank's process joins with it, and their collectives run eagerly and from graphs, checked against NumPy;
the id carried as bytes and by pickle; ranks of one process joined from threads; the argument checks; a rank
whose peers never join, a rank's process that dies and an abort in one process, each stopping the others with
an error that names the rank. On CUDA a group needs one GPU per rank (NCCL takes no two ranks on one device),
so with one GPU the group has one rank."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import gpugraph as gg
from gpugraph.backends import available_backends

N = 10
WAIT = 120  # seconds a test waits for a rank's process before it fails


@pytest.fixture(params=available_backends())
def backend(request: pytest.FixtureRequest) -> str:
    if request.param != "cpu" and importlib.util.find_spec("nccl") is None:
        pytest.skip(f"{request.param}: collectives need nccl4py (pip install '.[nccl]' in a gpugraph checkout)")
    return request.param


def device_count(backend: str) -> int:
    return gg.backends.get_backend(backend).device_count()


def several_ranks(backend: str) -> int:
    if device_count(backend) < 2:
        pytest.skip(f"{backend} has 1 device here; a group of several ranks needs one per rank")
    return 2


def spawn(target: Callable[..., None], size: int, *args: Any) -> list[Any]:
    """Run ``target(rank, size, results, *args)`` in ``size`` new processes; return what each put in
    ``results``, in rank order, once all have ended."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=target, args=(rank, size, results, *args)) for rank in range(size)]
    for p in processes:
        p.start()
    try:
        got = dict(results.get(timeout=WAIT) for _ in processes)
        for p in processes:
            p.join(WAIT)
    finally:
        for p in processes:
            if p.is_alive():
                p.kill()
    return [got[rank] for rank in range(size)]


def data_parallel_rank(rank: int, size: int, results: Any, backend: str, uid_bytes: bytes) -> None:
    """A rank's process: join, all-reduce eagerly, then from a captured graph launched twice."""
    try:
        device = gg.Device(f"{backend}:{rank}")
        with gg.communicator(device, rank=rank, size=size, unique_id=gg.UniqueId.from_bytes(uid_bytes)) as comm:
            stream = device.stream()
            x = device.asarray(np.arange(N, dtype=np.float32) * (rank + 1))
            comm.all_reduce(x, x, stream=stream)
            stream.synchronize()
            eager = x.to_numpy()
            mine, gathered = device.asarray(np.full(1, rank, np.float64)), device.zeros(size, np.float64)
            with stream.capture() as capture:
                stream.launch(SCALE, 1, 32, x, 2.0, N)
                comm.all_reduce(x, x, op="max", stream=stream)
                comm.all_gather(mine, gathered, stream=stream)
            with capture.graph.instantiate() as exe:
                exe.launch(stream)
                exe.launch(stream)
                stream.synchronize()
            results.put((rank, (eager, x.to_numpy(), gathered.to_numpy())))
    except BaseException as exc:  # noqa: BLE001 - reported to the test, which names it
        results.put((rank, f"{type(exc).__name__}: {exc}"))


SCALE = gg.Kernel(r"""
__global__ void scale(float* x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}""", "scale")


def test_ranks_in_separate_processes_reduce_eagerly_and_from_graphs(backend):
    size = min(3, device_count(backend))
    uid = gg.unique_id(backend)
    got = spawn(data_parallel_rank, size, backend, bytes(uid))
    total = np.arange(N, dtype=np.float32) * sum(range(1, size + 1))
    for rank, result in enumerate(got):
        assert not isinstance(result, str), f"rank {rank}: {result}"
        eager, after, gathered = result
        np.testing.assert_array_equal(eager, total)
        np.testing.assert_array_equal(after, total * 4)  # two launches: x2, then the max of equal values
        np.testing.assert_array_equal(gathered, np.arange(size, dtype=np.float64))


def test_ranks_of_one_process_may_join_from_threads(backend):
    size = several_ranks(backend) if backend != "cpu" else 3
    uid = gg.unique_id(backend)
    out: dict[int, Any] = {}

    def rank_thread(rank: int) -> None:
        device = gg.Device(f"{backend}:{rank}")
        try:
            with gg.communicator(device, rank=rank, size=size, unique_id=uid) as comm:
                stream = device.stream()
                x = device.asarray(np.full(N, rank + 1, np.int32))
                comm.broadcast(x if rank == 1 else None, x, root=1, stream=stream)
                total = device.asarray(np.full(N, -1, np.int32))
                comm.reduce(x, total if rank == 0 else None, root=0, stream=stream)
                stream.synchronize()
                out[rank] = x.to_numpy(), total.to_numpy()
        except BaseException as exc:  # noqa: BLE001 - the test names it
            out[rank] = exc

    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    for rank in range(size):
        assert not isinstance(out[rank], BaseException), out[rank]
        broadcast, total = out[rank]
        np.testing.assert_array_equal(broadcast, np.full(N, 2, np.int32))  # rank 1's, on every rank
        np.testing.assert_array_equal(total, np.full(N, 2 * size if rank == 0 else -1, np.int32))  # the root's


def test_a_unique_id_travels_as_bytes_and_by_pickle(backend):
    uid = gg.unique_id(backend)
    assert uid.backend == backend
    assert gg.UniqueId.from_bytes(bytes(uid)) == uid
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert gg.unique_id(backend) != uid  # each id names a new group
    with pytest.raises(ValueError, match=r"^UniqueId.from_bytes: not the bytes of a gpugraph UniqueId"):
        gg.UniqueId.from_bytes(b"nonsense")
    with pytest.raises(TypeError, match=r"^UniqueId.from_bytes: expected bytes, got str$"):
        gg.UniqueId.from_bytes("cpu:xyz")
    with pytest.raises(TypeError, match=r"^unique_id\(backend\): expected a backend's name \(str\), got Device$"):
        gg.unique_id(gg.Device(f"{backend}:0"))
    with pytest.raises(ValueError, match=r"^unique_id\(backend\): expected one of .*got 'tpu'$"):
        gg.unique_id("tpu")


def test_communicator_checks_its_arguments(backend):
    device, uid = gg.Device(f"{backend}:0"), gg.unique_id(backend)
    with pytest.raises(TypeError, match=r"^communicator\(device\): expected a Device, got str$"):
        gg.communicator("cpu:0", rank=0, size=1, unique_id=uid)
    with pytest.raises(TypeError, match=r"^communicator\(rank\): expected an int, got float$"):
        gg.communicator(device, rank=0.0, size=1, unique_id=uid)
    with pytest.raises(TypeError, match=r"^communicator\(size\): expected an int, got bool$"):
        gg.communicator(device, rank=0, size=True, unique_id=uid)
    with pytest.raises(ValueError, match=r"^communicator\(size\): expected 1 rank or more, got 0$"):
        gg.communicator(device, rank=0, size=0, unique_id=uid)
    with pytest.raises(ValueError, match=r"^communicator\(rank\): ranks are 0\.\.1, got 2$"):
        gg.communicator(device, rank=2, size=2, unique_id=uid)
    with pytest.raises(TypeError, match=r"^communicator\(unique_id\): expected a UniqueId \(from unique_id\(\)\), "
                                        r"got bytes$"):
        gg.communicator(device, rank=0, size=1, unique_id=bytes(uid))
    other = "cuda" if backend == "cpu" else "cpu"
    with pytest.raises(ValueError, match=rf"^communicator\(unique_id\): the id is of the {other} backend, "):
        gg.communicator(device, rank=0, size=1, unique_id=gg.UniqueId(other, b"x"))
    with pytest.raises(ValueError, match=r"^communicator\(timeout\): expected seconds > 0, or inf or None for no "
                                         r"limit; got 0$"):
        gg.communicator(device, rank=0, size=1, unique_id=uid, timeout=0)
    with pytest.raises(TypeError, match=r"^communicator\(timeout\): expected seconds \(an int or float\) or None, "
                                        r"got str '5'$"):
        gg.communicator(device, rank=0, size=1, unique_id=uid, timeout="5")
    with gg.collective_group(), pytest.raises(gg.CollectiveError, match=r"^communicator: cannot be made inside "):
        gg.communicator(device, rank=0, size=1, unique_id=uid)
    with pytest.raises(TypeError, match=r"^communicator\(unique_id\): its data must be bytes, got str$"):
        gg.communicator(device, rank=0, size=1, unique_id=gg.UniqueId(backend, "x" * 18))
    with pytest.raises(ValueError, match=rf"^communicator\(unique_id\): not a {backend} unique id \(3 bytes"):
        gg.communicator(device, rank=0, size=1, unique_id=gg.UniqueId(backend, b"abc"))


# Faults (the CPU backend: a CUDA timeout needs the watchdog that is not built yet; see communicators)


def test_a_rank_whose_peers_never_join_times_out_naming_them():
    uid = gg.unique_id("cpu")
    with pytest.raises(gg.CollectiveError, match=r"^cpu: rank 1's communicator waited 0\.3 s for ranks 0, 2 to "
                                                 r"join; the communicator is aborted$") as info:
        gg.communicator(gg.Device("cpu:1"), rank=1, size=3, unique_id=uid, timeout=0.3)
    assert info.value.rank == 1


def rank_that_dies(rank: int, size: int, results: Any, uid_bytes: bytes) -> None:
    """Rank 1 joins and its process ends at once, its communicator never closed."""
    device = gg.Device(f"cpu:{rank}")
    gg.communicator(device, rank=rank, size=size, unique_id=gg.UniqueId.from_bytes(uid_bytes))
    results.put((rank, "joined"))
    results.close()
    results.join_thread()  # (the queue's thread has sent it: os._exit ends the process at once)
    os._exit(0)


@contextlib.contextmanager
def rank_1_of_2(target: Callable[..., None], uid: gg.UniqueId) -> Iterator[tuple[Any, Any]]:
    """Rank 1 of a group of 2 in a process of its own, running ``target(1, 2, results, bytes(uid))``: yields
    the process and its results queue; killed at the end if still alive."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=target, args=(1, 2, results, bytes(uid)))
    child.start()
    try:
        yield child, results
    finally:
        if child.is_alive():
            child.kill()


def test_a_rank_whose_process_dies_stops_the_others_with_an_error():
    uid = gg.unique_id("cpu")
    with rank_1_of_2(rank_that_dies, uid) as (child, results):
        device = gg.Device("cpu:0")
        comm = gg.communicator(device, rank=0, size=2, unique_id=uid)
        assert results.get(timeout=WAIT) == (1, "joined")
        child.join(WAIT)
        stream = device.stream()
        x = device.asarray(np.ones(N, np.float32))
        comm.all_reduce(x, x, stream=stream)
        with pytest.raises(gg.CollectiveError, match=r"^cpu: rank 0's all_reduce: the communicator was aborted "
                                                     r"\(rank 1's process went away \(its connection to the hub "
                                                     r"closed\)\)$") as info:
            stream.synchronize()
        assert (info.value.rank, info.value.collective) == (0, "all_reduce")
        assert comm.aborted
        with pytest.raises(gg.CollectiveError, match=r"^Communicator.all_reduce: rank 0's communicator is aborted$"):
            comm.all_reduce(x, x, stream=stream)
        comm.close()


def rank_that_waits(rank: int, size: int, results: Any, uid_bytes: bytes) -> None:
    """Rank 1: an all-reduce that rank 0 never joins, until rank 0 aborts the group."""
    try:
        device = gg.Device(f"cpu:{rank}")
        comm = gg.communicator(device, rank=rank, size=size, unique_id=gg.UniqueId.from_bytes(uid_bytes))
        stream = device.stream()
        x = device.asarray(np.ones(N, np.float32))
        comm.all_reduce(x, x, stream=stream)
        results.put((rank, "waiting"))
        try:
            stream.synchronize()
            results.put((rank, "finished"))
        except gg.CollectiveError as exc:
            results.put((rank, str(exc)))
        comm.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the test, which names it
        results.put((rank, f"{type(exc).__name__}: {exc}"))


def test_an_abort_in_one_process_stops_a_collective_waiting_in_another():
    uid = gg.unique_id("cpu")
    with rank_1_of_2(rank_that_waits, uid) as (child, results):
        comm = gg.communicator(gg.Device("cpu:0"), rank=0, size=2, unique_id=uid)
        assert results.get(timeout=WAIT) == (1, "waiting")
        comm.abort()
        assert comm.aborted
        rank, message = results.get(timeout=WAIT)
        assert rank == 1
        assert "rank 1's all_reduce: the communicator was aborted (rank 0 called abort)" in message, message
        child.join(WAIT)
        comm.close()


def test_a_stranger_at_the_hub_leaves_the_group_working():
    """A connection with the wrong key (or none that completes its handshake) is turned away; ranks still join."""
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    uid = gg.unique_id("cpu")
    port = int.from_bytes(uid.data[:2], "big")
    with pytest.raises(AuthenticationError):
        Client(("127.0.0.1", port), authkey=b"not the key")
    with gg.communicator(gg.Device("cpu:0"), rank=0, size=1, unique_id=uid) as comm:
        stream = comm.device.stream()
        x = comm.device.asarray(np.arange(N, dtype=np.float32))
        comm.all_reduce(x, x, stream=stream)
        stream.synchronize()
        np.testing.assert_array_equal(x.to_numpy(), np.arange(N, dtype=np.float32))


def test_a_rank_that_cannot_reach_the_hub_says_so():
    """The unique id's process must live while the group does (the CPU backend's hub; NCCL's bootstrap root
    is NCCL's)."""
    uid = gg.UniqueId.from_bytes(bytes(gg.unique_id("cpu")))
    dead = gg.UniqueId("cpu", bytes(2) + uid.data[2:])  # port 0: no hub there
    with pytest.raises(gg.CollectiveError, match=r"^cpu: rank 0's communicator: cannot reach the hub of the unique "
                                                 r"id at 127\.0\.0\.1:0 "):
        gg.communicator(gg.Device("cpu:0"), rank=0, size=1, unique_id=dead)

