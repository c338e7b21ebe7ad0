"""Concurrency: independent graph branches (and streams) run at the same time, dependent nodes never do.

Kernels prove it on every backend with a bounded handshake (each raises a flag and waits for the
other's). Host functions prove it only on the CPU backend: CUDA runs host functions on one driver thread
and "may serialize" those without a mandated order (cuLaunchHostFunc), so on a GPU two host functions
must never wait for each other.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

HOST_CONCURRENCY = "CUDA may serialize host functions that have no mandated order (cuLaunchHostFunc)"


def handshake_pair(device):
    flags = [device.zeros(1, np.int32) for _ in range(2)]
    seen = [device.zeros(1, np.int32) for _ in range(2)]
    args = [(flags[0], flags[1], seen[0], K.HANDSHAKE_CYCLES), (flags[1], flags[0], seen[1], K.HANDSHAKE_CYCLES)]
    return args, seen


def test_independent_kernel_branches_run_concurrently(device, stream):
    args, seen = handshake_pair(device)
    g = gg.Graph(device)
    root = g.add_empty()
    a = g.add_kernel(K.handshake, 1, 1, *args[0], after=root)
    b = g.add_kernel(K.handshake, 1, 1, *args[1], after=root)
    g.add_empty(after=(a, b))
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert [s.to_numpy()[0] for s in seen] == [1, 1]


def test_kernels_on_two_streams_run_concurrently(device):
    args, seen = handshake_pair(device)
    s1, s2 = device.stream(), device.stream()
    s1.launch(K.handshake, 1, 1, *args[0])
    s2.launch(K.handshake, 1, 1, *args[1])
    s1.synchronize()
    s2.synchronize()
    assert [s.to_numpy()[0] for s in seen] == [1, 1]


def test_independent_host_branches_run_concurrently(device, stream):
    if device.backend != "cpu":
        pytest.skip(HOST_CONCURRENCY)
    barrier = threading.Barrier(2, timeout=10)
    passed = []

    def meet(tag):
        barrier.wait()  # only returns once both branches are inside a host node at once
        passed.append(tag)

    g = gg.Graph(device)
    root = g.add_empty()
    a = g.add_host(meet, "a", after=root)
    b = g.add_host(meet, "b", after=root)
    g.add_empty(after=(a, b))
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert sorted(passed) == ["a", "b"]


def test_two_root_host_branches_run_concurrently(device, stream):
    if device.backend != "cpu":
        pytest.skip(HOST_CONCURRENCY)
    barrier = threading.Barrier(2, timeout=10)
    g = gg.Graph(device)
    g.add_host(barrier.wait)
    g.add_host(barrier.wait)
    with g.instantiate() as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()


def test_host_branches_inside_a_child_graph_run_concurrently(device, stream):
    if device.backend != "cpu":
        pytest.skip(HOST_CONCURRENCY)
    barrier = threading.Barrier(2, timeout=10)
    child = gg.Graph(device)
    child.add_host(barrier.wait)
    child.add_host(barrier.wait)
    g = gg.Graph(device)
    g.add_child(child)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()


def test_chain_never_runs_concurrently(device, stream):
    log = []
    active = []

    def step(i):
        active.append(i)
        log.append(("start", i, len(active)))
        # give any wrongly scheduled successor every chance to start now
        threading.Event().wait(0.002)
        log.append(("end", i))
        active.remove(i)

    g = gg.Graph(device)
    prev = None
    for i in range(6):
        prev = g.add_host(step, i, after=prev if prev is not None else ())
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert log == [entry for i in range(6) for entry in (("start", i, 1), ("end", i))]


def test_diamond_join_waits_for_both_branches(device, stream):
    log = []
    g = gg.Graph(device)
    top = g.add_host(log.append, "top")
    left = g.add_host(log.append, "left", after=top)
    right = g.add_host(log.append, "right", after=top)
    g.add_host(log.append, "bottom", after=(left, right))
    with g.instantiate() as exe:
        for _ in range(5):
            exe.launch(stream)
        stream.synchronize()
    for k in range(5):
        run = log[4 * k:4 * k + 4]
        assert run[0] == "top" and run[3] == "bottom" and sorted(run[1:3]) == ["left", "right"]


def test_parallel_kernel_branches_give_the_reference(device, stream):
    n = 32
    xs = [device.zeros(n, np.int32) for _ in range(6)]
    g = gg.Graph(device)
    root = g.add_empty()
    for value, x in enumerate(xs):
        g.add_kernel(K.fill, *K.launch_1d(n, 8), x, value * 10, n, after=root)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    for value, x in enumerate(xs):
        np.testing.assert_array_equal(x.to_numpy(), np.full(n, value * 10))


def test_host_functions_on_two_streams_run_concurrently(device):
    if device.backend != "cpu":
        pytest.skip(HOST_CONCURRENCY)
    barrier = threading.Barrier(2, timeout=10)
    s1, s2 = device.stream(), device.stream()
    s1.host(barrier.wait)
    s2.host(barrier.wait)
    s1.synchronize()
    s2.synchronize()
