"""Differential tests: random DAGs of kernels, copies, memsets and host nodes give the same results on
every backend as a NumPy reference run in insertion order (hypothesis draws the graphs).

Any two nodes touching the same array are ordered by an edge, so every valid schedule computes the same
values; extra random edges (always from an earlier to a later node) vary the shape of the DAG.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpugraph as gg
import kernels as K

N = 64
ARRAYS = 3
FACTORS = (0.5, 2.0, -1.0, 3.0)

# One operation: (kind, target array, source arrays, value).
op = st.one_of(
    st.tuples(st.just("scale"), st.integers(0, ARRAYS - 1), st.just(()), st.sampled_from(FACTORS)),
    st.tuples(st.just("add"), st.integers(0, ARRAYS - 1),
              st.tuples(st.integers(0, ARRAYS - 1), st.integers(0, ARRAYS - 1)), st.just(0.0)),
    st.tuples(st.just("copy"), st.integers(0, ARRAYS - 1), st.tuples(st.integers(0, ARRAYS - 1)), st.just(0.0)),
    st.tuples(st.just("memset"), st.integers(0, ARRAYS - 1), st.just(()), st.sampled_from((0.0, 1.5, -2.0))),
    st.tuples(st.just("host"), st.just(-1), st.just(()), st.just(0.0)),
)
dags = st.lists(op, min_size=1, max_size=12).flatmap(
    lambda ops: st.tuples(st.just(ops), st.sets(st.tuples(st.integers(0, len(ops) - 1),
                                                          st.integers(0, len(ops) - 1)), max_size=10)))


def reference(ops: list, initial: list[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    arrays, ran = [a.copy() for a in initial], []
    for i, (kind, target, sources, value) in enumerate(ops):
        if kind == "scale":
            arrays[target] *= np.float32(value)
        elif kind == "add":
            arrays[target] = arrays[sources[0]] + arrays[sources[1]]
        elif kind == "copy":
            arrays[target] = arrays[sources[0]].copy()
        elif kind == "memset":
            arrays[target][:] = value
        else:
            ran.append(i)
    return arrays, ran


def run_on(device: gg.Device, ops: list, extra_edges: set, initial: list[np.ndarray]):
    arrays = [device.asarray(a) for a in initial]
    ran: list[int] = []
    graph = gg.Graph(device)
    nodes, last_toucher = [], {}
    for i, (kind, target, sources, value) in enumerate(ops):
        touched = {target, *sources} - {-1}
        after = {last_toucher[a] for a in touched if a in last_toucher}
        after |= {nodes[a] for a, b in extra_edges if b == i and a < i}
        if kind == "scale":
            node = graph.add_kernel(K.scale, 2, 32, arrays[target], value, N, after=tuple(after))
        elif kind == "add":
            node = graph.add_kernel(K.add, 2, 32, arrays[target], arrays[sources[0]], arrays[sources[1]], N,
                                    after=tuple(after))
        elif kind == "copy":
            node = graph.add_memcpy(arrays[target], arrays[sources[0]], after=tuple(after))
        elif kind == "memset":
            node = graph.add_memset(arrays[target], value, after=tuple(after))
        else:
            node = graph.add_host(ran.append, i, after=tuple(after))
        nodes.append(node)
        for a in touched:
            last_toucher[a] = node
    stream = device.stream()
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    return [a.to_numpy() for a in arrays], sorted(ran)


def initial_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(-4, 5, N).astype(np.float32) for _ in range(ARRAYS)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dag=dags)
def test_random_dag_matches_numpy(device, dag):
    ops, edges = dag
    expected, expected_ran = reference(ops, initial_arrays())
    got, ran = run_on(device, ops, edges, initial_arrays())
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    assert ran == expected_ran


@pytest.mark.gpu
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dag=dags)
def test_random_dag_same_on_cpu_and_gpu(gpu_device, dag):
    ops, edges = dag
    on_cpu = run_on(gg.Device("cpu"), ops, edges, initial_arrays())
    on_gpu = run_on(gpu_device, ops, edges, initial_arrays())
    for c, g in zip(on_cpu[0], on_gpu[0]):
        np.testing.assert_array_equal(g, c)
    assert on_cpu[1] == on_gpu[1]
