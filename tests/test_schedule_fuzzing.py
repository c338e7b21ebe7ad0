"""Schedule fuzzing on the CPU backend (``CpuBackend.schedule_seed``, ``$GPUGRAPH_SCHEDULE_SEED``): ready nodes run in
an order and with an overlap drawn from the seed, so that an edge a graph lacks shows as a result that changes from
seed to seed; the edges it has are kept, in child graphs and conditional bodies too, and one seed gives one
sequence of schedules.

CPU backend only: CUDA schedules a graph's nodes itself.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from kernels import run

SEEDS = range(20)


@pytest.fixture
def cpu():
    """The CPU backend, its schedule seed put back after the test (the suite may run with $GPUGRAPH_SCHEDULE_SEED)."""
    backend = gg.backends.get_backend("cpu")
    previous = backend.schedule_seed
    yield backend
    backend.schedule_seed = previous


def two_host_nodes(fn_a, fn_b, edge: bool) -> gg.Graph:
    """A root, then host nodes A and B after it (B after A too with ``edge``): separate branches either way, so the
    run has a schedule to draw."""
    graph = gg.Graph(gg.Device("cpu"))
    root = graph.add_empty()
    a = graph.add_host(*fn_a, after=root)
    graph.add_host(*fn_b, after=[root, a] if edge else root)
    return graph


def orders(cpu, edge: bool) -> list[str]:
    """The order A and B ran in, per seed."""
    seen = []
    for seed in SEEDS:
        cpu.schedule_seed = seed
        ran: list[str] = []
        run(two_host_nodes((ran.append, "a"), (ran.append, "b"), edge))
        seen.append("".join(ran))
    return seen


def test_a_missing_edge_between_host_nodes_shows_both_orders_within_20_seeds(cpu):
    assert set(orders(cpu, edge=False)) == {"ab", "ba"}
    assert orders(cpu, edge=True) == ["ab"] * len(SEEDS)


def results(cpu, edge: bool) -> set[tuple[float, ...]]:
    """What B read of what A writes, over the seeds."""
    got = set()
    for seed in SEEDS:
        cpu.schedule_seed = seed
        written, read = np.zeros(4), np.zeros(4)
        run(two_host_nodes((np.copyto, written, np.arange(1.0, 5.0)), (np.copyto, read, written), edge))
        got.add(tuple(read))
    return got


def test_a_missing_edge_between_a_writer_and_its_reader_changes_the_result_between_seeds(cpu):
    assert results(cpu, edge=True) == {(1.0, 2.0, 3.0, 4.0)}
    assert results(cpu, edge=False) == {(1.0, 2.0, 3.0, 4.0), (0.0, 0.0, 0.0, 0.0)}


def test_without_a_seed_the_graph_runs_unfuzzed(cpu):
    cpu.schedule_seed = None
    graph = two_host_nodes((int,), (int,), edge=False)
    with graph.instantiate() as exe:
        assert exe._handle.schedule is None


class Visits:
    """Kernel nodes that note, when they run, whether every node they must follow has run (the fill kernel's
    signature; on the CPU a Python function that only notes)."""

    def __init__(self) -> None:
        self.kernel = gg.Kernel(K.SOURCE, "fill", cpu=self._visit)
        self.slot = gg.Device("cpu").zeros(1, np.int32)
        self.ids = itertools.count()
        self.follows: dict[int, frozenset[int]] = {}  # node id -> ids of the nodes it must run after
        self.lock = threading.Lock()
        self.done: set[int] = set()
        self.early: list[int] = []  # nodes that ran before one they follow

    def _visit(self, launch, slot, me, n) -> None:
        with self.lock:
            if not self.follows[me] <= self.done:
                self.early.append(me)
            self.done.add(me)

    def add(self, graph: gg.Graph, after=(), follows=()) -> tuple[gg.Node, int]:
        me = next(self.ids)
        self.follows[me] = frozenset(follows)
        return graph.add_kernel(self.kernel, 1, 1, self.slot, me, 1, after=after), me

    def diamond(self, graph: gg.Graph, follows: frozenset[int]) -> list[int]:
        """A node, two after it, one after both; the first follows ``follows``. The ids."""
        top, t = self.add(graph, follows=follows)
        (left, l_), (right, r) = self.add(graph, top, {t}), self.add(graph, top, {t})
        _, b = self.add(graph, [left, right], {l_, r})
        return [t, l_, r, b]


def test_every_node_runs_after_its_dependencies_in_child_graphs_bodies_and_graph_memory(cpu):
    dev, visits, layout = gg.Device("cpu"), Visits(), np.random.default_rng(7)
    graph, nodes, ids = gg.Graph(dev), [], []
    for i in range(24):  # a DAG drawn once: each node after up to three earlier ones
        picked = layout.choice(i, size=min(i, int(layout.integers(0, 4))), replace=False) if i else []
        node, me = visits.add(graph, [nodes[j] for j in picked], {ids[j] for j in picked})
        nodes.append(node)
        ids.append(me)
    child = gg.Graph(dev)
    inside = visits.diamond(child, frozenset({ids[3], ids[5]}))
    child_node = graph.add_child(child, after=[nodes[3], nodes[5]])
    conditional = graph.add_if(graph.condition(default=1), after=[nodes[2], child_node])
    body = visits.diamond(conditional.bodies[0], frozenset({ids[2], *inside}))
    visits.add(graph, [conditional, nodes[-1]], {*body, ids[-1]})
    allocation = graph.add_alloc(8, np.int32, after=nodes[1])
    filled = graph.add_kernel(K.fill, 1, 8, allocation.array, 7, 8, after=allocation)
    out = np.zeros(8, np.int32)
    copied = graph.add_memcpy(out, allocation.array, after=[filled, nodes[4]])
    graph.add_free(allocation, after=copied)
    stream = dev.stream()
    for seed in range(10):
        cpu.schedule_seed = seed
        with graph.instantiate() as exe:
            for _ in range(3):
                visits.done.clear()
                out[:] = 0
                exe.launch(stream)
                stream.synchronize()
                assert visits.early == [], f"seed {seed}: nodes {visits.early} ran before a node they follow"
                assert visits.done == set(visits.follows)
                assert (out == 7).all()


def test_one_seed_gives_the_same_schedules_launch_after_launch(cpu):
    """Two executable graphs of one graph and seed run the same orders, each launch drawing its own; the seed in force
    at instantiate is the one a graph keeps."""
    ran: list[str] = []
    graph = two_host_nodes((ran.append, "a"), (ran.append, "b"), edge=False)
    stream = gg.Device("cpu").stream()

    def orders_run(exe: gg.GraphExec) -> list[str]:
        seen = []
        for _ in range(12):
            ran.clear()
            exe.launch(stream)
            stream.synchronize()
            seen.append("".join(ran))
        return seen

    cpu.schedule_seed = 5
    with graph.instantiate() as first, graph.instantiate() as second:
        cpu.schedule_seed = 6
        with graph.instantiate() as other:
            drawn = orders_run(first)
            assert set(drawn) == {"ab", "ba"}  # each launch drew
            assert orders_run(second) == drawn
            assert orders_run(other) != drawn


def test_a_graph_whose_branches_wait_for_each_other_completes_fuzzed(cpu):
    """Collective parts block until every rank's has come (they lend their thread): the fuzzed schedule lets the
    other branches start meanwhile, so the graph completes with the result it has unfuzzed."""
    devices = [gg.Device("cpu:0"), gg.Device("cpu:1")]
    comms = gg.communicators(devices, timeout=20)
    streams = [d.stream() for d in devices]
    xs = [d.asarray(np.full(4, rank + 1, np.float32)) for rank, d in enumerate(devices)]
    with streams[0].capture() as cap:
        fork = streams[0].record()
        streams[1].wait(fork)
        with gg.collective_group():
            for c, s, x in zip(comms, streams, xs):
                c.all_reduce(x, x, stream=s)
        streams[0].wait(streams[1].record())
    for seed in range(6):  # each launch sums the ranks' values: 1 and 2, then 3 and 3, then 6 and 6, ...
        cpu.schedule_seed = seed
        run(cap.graph)
        for x in xs:
            np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0 * 2 ** seed, np.float32))
    for c in comms:
        c.close()


def test_host_nodes_that_wait_for_each_other_complete_under_every_seed(cpu):
    """Two host nodes without an edge meet at a barrier: when a seed starts one alone, the other is started once
    the first has run a while without finishing, so both pass the barrier."""
    passed: list[tuple[int, int]] = []

    def meet(seed: int, barrier: threading.Barrier) -> None:
        passed.append((seed, barrier.wait()))  # (the place in which it came: 0 or 1)

    for seed in range(10):
        cpu.schedule_seed = seed
        barrier = threading.Barrier(2, timeout=10)
        run(two_host_nodes((meet, seed, barrier), (meet, seed, barrier), edge=False))
    assert sorted(passed) == [(seed, place) for seed in range(10) for place in (0, 1)]


def test_a_step_that_waits_for_a_branch_of_another_child_graph_lets_it_run(cpu):
    """A step that lends its thread (as a collective's part does) waiting for a node of another child graph: the
    parent's schedule goes on too, so the node it waits for runs."""
    from gpugraph.backends.cpu._parallel import lending

    dev, flag, seen = gg.Device("cpu"), threading.Event(), []

    def wait_for_flag() -> None:
        with lending():
            seen.append(flag.wait(timeout=20))

    waiting, setting = gg.Graph(dev), gg.Graph(dev)
    start = waiting.add_empty()
    waiting.add_host(wait_for_flag, after=start)
    waiting.add_host(int, after=start)  # (two branches: the child graph's run is fuzzed too)
    setting.add_host(flag.set)
    graph = gg.Graph(dev)
    graph.add_child(waiting)
    graph.add_child(setting)
    for seed in range(8):
        cpu.schedule_seed = seed
        flag.clear()
        run(graph)
    assert seen == [True] * 8


@pytest.mark.parametrize("seed, error, message", [
    (1.5, TypeError, "got float 1.5"),
    (True, TypeError, "got bool True"),
    ("3", TypeError, "got str '3'"),
    (-1, ValueError, "got -1"),
])
def test_a_bad_seed_is_refused_and_changes_nothing(cpu, seed, error, message):
    cpu.schedule_seed = 4
    with pytest.raises(error, match="CpuBackend.schedule_seed: expects a whole number from 0, or None to turn "
                                    "schedule fuzzing off, " + message):
        cpu.schedule_seed = seed
    assert cpu.schedule_seed == 4
    cpu.schedule_seed = np.int64(9)
    assert cpu.schedule_seed == 9 and type(cpu.schedule_seed) is int


@pytest.mark.parametrize("value, printed", [("12", "12"), (" 0 ", "0"), ("", "None")])
def test_the_environment_variable_sets_the_seed(value, printed):
    assert backend_in_a_new_process(value) == printed


@pytest.mark.parametrize("value", ["x1", "-3", "1.5", "²"])
def test_a_bad_environment_variable_makes_the_cpu_backend_unavailable_saying_why(value):
    assert backend_in_a_new_process(value) == (
        f"cpu: $GPUGRAPH_SCHEDULE_SEED must be a whole number from 0 (the seed of schedule fuzzing), got "
        f"{value!r}; unset it to run graphs unfuzzed")


def backend_in_a_new_process(value: str) -> str:
    """What a new interpreter with $GPUGRAPH_SCHEDULE_SEED=``value`` prints: the CPU backend's seed, or why the
    backend is unavailable."""
    program = ("import gpugraph as gg\n"
               "try:\n"
               "    print(gg.backends.get_backend('cpu').schedule_seed)\n"
               "except gg.BackendUnavailableError as exc:\n"
               "    print(exc)\n")
    env = dict(os.environ, GPUGRAPH_SCHEDULE_SEED=value, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
