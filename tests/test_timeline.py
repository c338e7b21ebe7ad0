"""gg.timeline: what ran on a device while a timeline was open, as rows naming gpugraph's Nodes, a table and a Chrome
trace. Orders are asserted (a node starts after its dependencies end), never durations; where overlap is asserted,
the work cannot finish without it (host nodes meeting at a barrier)."""

from __future__ import annotations

import enum
import importlib.util
import itertools
import json
import os
import pathlib
import sys
import threading
import time
import types
import weakref

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _exec_state, _timeline
from gpugraph._graph_node import handle_of, number_of
from gpugraph._timeline import _trace
from test_device_launch import SOURCE as LAUNCHING

N = 256
ROOT = pathlib.Path(__file__).resolve().parents[1]
# The Chrome trace checker is the GPU probe's (tools/probes/gpu_probe_timeline.py), which checks CUDA's traces too.
_spec = importlib.util.spec_from_file_location("gpu_probe_timeline", ROOT / "tools/probes/gpu_probe_timeline.py")
assert _spec is not None and _spec.loader is not None
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)
chrome_trace_problems = probe.chrome_trace_problems


@pytest.fixture
def dev(device: gg.Device) -> gg.Device:
    """``device``, where a timeline can record it: CUDA's needs cupti-python (the test is skipped without it)."""
    if device.backend == "cuda" and importlib.util.find_spec("cupti") is None:
        pytest.skip("gg.timeline on CUDA needs cupti-python (pip install cupti-python)")
    return device


def fork_join(dev: gg.Device, branches: int = 3) -> tuple[gg.Graph, list[gg.Node]]:
    """A memset, ``branches`` kernels after it, each on an Array of its own, and a copy of the first back to the host
    after all of them."""
    arrays = [dev.zeros(N) for _ in range(branches)]
    graph = gg.Graph(dev)
    root = graph.add_memset(arrays[0], 1.0)
    middle = [graph.add_kernel(K.scale, 1, N, x, 2.0, N, after=root) for x in arrays]
    graph.add_memcpy(np.zeros(N, np.float32), arrays[0], after=middle)
    return graph, middle


def rows_of(graph: gg.Graph, rows: list[gg.TimelineRow]) -> dict[gg.Node, gg.TimelineRow]:
    """Each node's one row."""
    found = {}
    for row in rows:
        assert row.node is not None and row.node.graph is graph, row
        assert row.node not in found, f"two rows for {row.node!r}"
        found[row.node] = row
    return found


def test_rows_name_every_node_in_the_order_of_its_edges(dev, stream):
    """A fork/join graph's launch gives one row per node that does work, naming the Node, its kind and name; each
    node starts after each of its dependencies has ended."""
    graph, middle = fork_join(dev)
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    rows = tl.rows()
    found = rows_of(graph, rows)
    assert set(found) == set(graph.nodes)
    for node, row in found.items():
        assert row.kind == node.kind.value
        assert row.launch == 1
        assert row.duration_us >= 0 and row.start_us >= 0
        assert row.end_us == pytest.approx(row.start_us + row.duration_us)
    assert {found[n].name for n in middle} == {"scale"}
    assert {found[n].name for n in graph.nodes if n.kind is not gg.NodeKind.KERNEL} == {f"{N * 4} B"}
    for before, after in graph.edges:
        assert found[after].start_us >= found[before].end_us, (before, after)
    assert rows == sorted(rows, key=lambda r: r.start_us)


def test_each_launch_is_numbered_in_order(dev, stream):
    """Two launches of one graph on one stream: rows of launch 1, then of launch 2, each naming every node."""
    graph, _ = fork_join(dev, branches=2)
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
            exe.launch(stream)
    stream.synchronize()
    first = [r for r in tl.rows() if r.launch == 1]
    second = [r for r in tl.rows() if r.launch == 2]
    assert {r.node for r in first} == {r.node for r in second} == set(graph.nodes)
    assert max(r.end_us for r in first) <= min(r.start_us for r in second)


def test_nodes_inside_child_graphs_and_bodies_are_named(dev, stream):
    """Work of a child graph (inside another) and of the body a conditional node runs is named by the node of the
    child graph or body, as the Graph has it; the body not run has no row."""
    x = dev.zeros(N)
    inner = gg.Graph(dev)
    inner.add_kernel(K.scale, 1, N, x, 2.0, N)
    child = gg.Graph(dev)
    child.add_child(inner, after=child.add_memset(x, 1.0))
    graph = gg.Graph(dev)
    embedding = graph.add_child(child)
    branch = graph.add_if(graph.condition(0), has_else=True, after=embedding)
    branch.bodies[0].add_memset(x, 5.0)
    branch.bodies[1].add_kernel(K.shift, 1, N, x, 1.0, N)
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    named = [(r.kind, r.node) for r in tl.rows()]
    embedded = embedding.params.graph
    deepest = embedded.nodes[1].params.graph
    assert named == [("memset", embedded.nodes[0]), ("kernel", deepest.nodes[0]), ("kernel", branch.bodies[1].nodes[0])]
    assert [r.name for r in tl.rows()] == [f"{N * 4} B", "scale", "shift"]


def test_a_captured_graph_names_its_nodes(dev, stream):
    """A graph made by stream capture is named as any other: its nodes, in the order they were captured."""
    x = dev.zeros(N)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        stream.launch(K.scale, 1, N, x, 3.0, N)
    with cap.graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    assert [(r.kind, r.node) for r in tl.rows()] == [("memset", cap.graph.nodes[0]), ("kernel", cap.graph.nodes[1])]
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


def test_a_node_removed_after_instantiate_names_no_other_node(dev, stream):
    """A body's and a child graph's node removed after instantiate and another added in its place: the executable
    graph runs what it was made from, so no row names a node added; the row of a node removed has none. The CPU
    backend names each node still in its graph; CUDA numbers the nodes inside from the graph as it is, and leaves
    them unnamed where a record does not fit the node numbered so."""
    x = dev.zeros(N)
    graph = gg.Graph(dev)
    branch = graph.add_if(graph.condition(1))
    body = branch.bodies[0]
    kept = body.add_kernel(K.scale, 1, N, x, 2.0, N)
    removed = body.add_memset(x, 1.0, after=kept)
    child = gg.Graph(dev)
    child.add_memset(x, 3.0, after=child.add_kernel(K.shift, 1, N, x, 1.0, N))
    embedded = graph.add_child(child, after=branch).params.graph
    inner_kept, inner_removed = embedded.nodes
    with graph.instantiate() as exe:
        body.remove_node(removed)
        added = body.add_kernel(K.shift, 1, N, x, 1.0, N, after=kept)
        embedded.remove_node(inner_removed)
        inner_added = embedded.add_kernel(K.scale, 1, N, x, 2.0, N, after=inner_kept)
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    rows = tl.rows()
    assert [(r.kind, r.name) for r in rows] == [("kernel", "scale"), ("memset", f"{N * 4} B"), ("kernel", "shift"),
                                                ("memset", f"{N * 4} B")]
    named = [r.node for r in rows]
    assert added not in named and inner_added not in named
    assert named[1] is None and named[3] is None
    if dev.backend == "cpu":
        assert named[0] == kept and named[2] == inner_kept


def test_after_an_update_rows_name_the_nodes_of_the_graph_instantiated(dev, stream):
    """An executable graph updated from a graph of the same shape runs that graph's parameters; its rows name the
    nodes of the graph it was instantiated from (which its setters name too), inside its child graph as well."""
    def build(factor: float) -> gg.Graph:
        x = dev.zeros(N)
        child = gg.Graph(dev)
        child.add_kernel(K.scale, 1, N, x, factor, N)
        graph = gg.Graph(dev)
        graph.add_child(child, after=graph.add_memset(x, 1.0))
        return graph

    made, other = build(2.0), build(3.0)
    with made.instantiate() as exe:
        exe.update(other)
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    inside = made.nodes[1].params.graph
    # (CUDA's rows inside child graphs after an update name no node: the guide says so)
    named_inside = None if dev.backend == "cuda" else inside.nodes[0]
    assert [(r.kind, r.node) for r in tl.rows()] == [("memset", made.nodes[0]), ("kernel", named_inside)]


def test_a_handle_given_again_names_only_the_node_numbered_so(dev):
    """A backend may give a node added after a removal the removed node's handle (CUDA does): a record names the
    Node of its handle only where that Node has the record's number in its graph."""
    graph = gg.Graph(dev)
    kept = graph.add_empty()
    removed = graph.add_empty(after=kept)
    with graph.instantiate():
        graph.remove_node(removed)
        added = graph.add_empty(after=kept)
        nodes = _timeline._Nodes()
        assert nodes.find(None, handle_of(added), number_of(added)) is added
        assert nodes.find(None, handle_of(added), number_of(removed)) is None  # (as if it had the removed one's)
        assert nodes.find(None, handle_of(kept), None) is kept


@pytest.mark.parametrize("mode", [2, 1], ids=["fire-and-forget", "tail"])
def test_a_graph_a_kernel_launches_has_rows_naming_its_nodes(dev, stream, mode):
    """A graph that a kernel of a recorded launch launches (fire and forget, or as a tail launch) is recorded too on
    the CPU backend, its rows naming its nodes, as part of the launch whose kernel launched it. On CUDA it has no
    rows: CUPTI (13.0, measured on an H200) gives no record of its kernel while it records the nodes of the others
    (it traces a device-launched graph only whole, and only with those records off)."""
    x, code = dev.zeros(1, np.int32), dev.zeros(1, np.int32)
    child = gg.Graph(dev)
    add = child.add_kernel(gg.Kernel(LAUNCHING, "add"), 1, 32, x, 1)
    with child.instantiate(device_launch=True) as launched:
        parent = gg.Graph(dev)
        fire = parent.add_kernel(gg.Kernel(LAUNCHING, "launch_graph"), 1, 32, launched, mode, code)
        with parent.instantiate() as exe:
            with gg.timeline(dev) as tl:
                exe.launch(stream)
            stream.synchronize()
    assert (x.to_numpy()[0], code.to_numpy()[0]) == (1, 0)
    rows = {r.node: r for r in tl.rows()}
    if dev.backend == "cuda":  # (CUPTI has no record of a device-launched graph's nodes beside those of the others)
        assert set(rows) == {fire} and rows[fire].name == "launch_graph"
        return
    assert set(rows) == {fire, add} and rows[fire].name == "launch_graph" and rows[add].name == "add"
    assert rows[fire].launch == rows[add].launch == 1


def test_stream_operations_have_rows_of_their_own(dev, stream):
    """A kernel, memset and copy enqueued on a stream: a row each, in stream order, with no node and no launch."""
    x = dev.zeros(N)
    back = np.zeros(N, np.float32)
    with gg.timeline(dev) as tl:
        stream.memset(x, 2.0)
        stream.launch(K.scale, 1, N, x, 2.0, N)
        stream.memcpy(back, x)
    stream.synchronize()
    rows = tl.rows()
    assert [(r.kind, r.name, r.node, r.launch) for r in rows] == [
        ("memset", f"{N * 4} B", None, None), ("kernel", "scale", None, None), ("memcpy", f"{N * 4} B", None, None)]
    assert all(a.end_us <= b.start_us for a, b in itertools.pairwise(rows))
    assert len({r.lane for r in rows}) == 1
    np.testing.assert_array_equal(back, np.full(N, 4.0, np.float32))


def test_host_functions_have_rows_where_the_backend_records_them(dev, stream):
    """A host function on a stream and a host node: rows on the CPU backend; CUDA's records (CUPTI 13.0's) hold no
    host work, so there the timeline has none."""
    graph = gg.Graph(dev)
    node = graph.add_host(len, [1, 2])
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            stream.host(len, [1])
            exe.launch(stream)
    stream.synchronize()
    expected = [("host", "len", None), ("host", "len", node)] if dev.backend == "cpu" else []
    assert [(r.kind, r.name, r.node) for r in tl.rows()] == expected


def test_work_outside_the_block_is_not_recorded(dev, stream):
    """Launches before the block opens and after it closes are not in its rows."""
    graph, _ = fork_join(dev, branches=1)
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        with gg.timeline(dev) as tl:
            pass
        exe.launch(stream)
        stream.synchronize()
    assert tl.rows() == []
    assert tl.table().splitlines() == [tl.table().splitlines()[0]]


def test_a_launch_made_before_the_block_is_not_recorded_though_it_runs_inside(dev, stream):
    """A graph launched before the block, held back by a host node until the block is open, runs its kernel inside
    the block: it has no row (a launch is recorded whole or not at all, and this one was made before); a stream
    operation of the block has its row."""
    gate = threading.Event()
    x = dev.zeros(N)
    graph = gg.Graph(dev)
    graph.add_kernel(K.scale, 1, N, x, 2.0, N, after=graph.add_host(gate.wait))
    with graph.instantiate() as exe:
        exe.launch(stream)
        with gg.timeline(dev) as tl:
            gate.set()
            stream.memset(x, 3.0)
        stream.synchronize()
    assert [(r.kind, r.node) for r in tl.rows()] == [("memset", None)]
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


def test_four_branches_meeting_at_a_barrier_overlap(device, stream):
    """Four host nodes that each wait at one barrier for the other three: they run at once, so their rows overlap,
    each on a lane of its own, and in the trace each lane is a thread of its own. (CUDA runs a graph's host nodes one
    at a time on one thread: such a graph would never finish there.)"""
    if device.backend != "cpu":
        pytest.skip("CUDA runs host nodes one at a time: four meeting at a barrier would wait forever")
    barrier = threading.Barrier(4, timeout=30)
    graph = gg.Graph(device)
    root = graph.add_empty()
    branches = [graph.add_host(barrier.wait, after=root) for _ in range(4)]
    with graph.instantiate() as exe:
        with gg.timeline(device) as tl:
            exe.launch(stream)
    stream.synchronize()
    rows = [r for r in tl.rows() if r.node in branches]
    assert len(rows) == 4
    assert max(r.start_us for r in rows) < min(r.end_us for r in rows)  # all four ran at once
    assert len({r.lane for r in rows}) == 4
    events = [e for e in tl.trace()["traceEvents"] if e["ph"] == "X"]
    assert len({e["tid"] for e in events}) == 4


def test_the_trace_file_is_a_chrome_trace(dev, stream, tmp_path):
    """write_trace writes JSON in Chrome's Trace Event Format: one complete event per row, named, in microseconds, on
    named threads, with the node and launch in its args."""
    graph, _ = fork_join(dev)
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
            stream.memset(dev.zeros(N), 0.0)
    stream.synchronize()
    path = tmp_path / "timeline.json"
    tl.write_trace(path)
    trace = json.loads(path.read_text())
    assert trace == tl.trace()
    assert chrome_trace_problems(trace) == []
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    rows = tl.rows()
    assert [(e["name"], e["cat"], e["ts"], e["dur"]) for e in events] == [
        (r.name, r.kind, r.start_us, r.duration_us) for r in rows]
    assert [e["args"].get("node") for e in events] == [None if r.node is None else repr(r.node) for r in rows]
    assert [e["args"].get("launch") for e in events] == [r.launch for r in rows]
    process = [e for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert process == [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": f"gpugraph {dev}"}}]


def test_overlapping_work_of_one_lane_goes_on_threads_of_its_own():
    """Rows of one lane that overlap are put on threads of their own in the trace, named after the lane
    ("stream 7 (2)"); rows that follow each other share one."""
    row = gg.TimelineRow
    rows = [row(None, "kernel", "a", 0.0, 10.0, "stream 7", 1), row(None, "kernel", "b", 5.0, 10.0, "stream 7", 1),
            row(None, "kernel", "c", 12.0, 1.0, "stream 7", 1), row(None, "memcpy", "d", 6.0, 1.0, "stream 9", None)]
    trace = _trace(rows, "cuda:0")
    assert chrome_trace_problems(trace) == []
    tids = {e["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tids["a"] == tids["c"] != tids["b"] != tids["d"] != tids["a"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert [names[tids[n]] for n in "abcd"] == ["stream 7", "stream 7 (2)", "stream 7", "stream 9"]


def _broken(change) -> dict:
    """A valid trace of two rows on two lanes, changed by ``change(trace)``."""
    row = gg.TimelineRow
    trace = _trace([row(None, "kernel", "a", 0.0, 10.0, "stream 7", 1),
                    row(None, "memcpy", "b", 2.0, 1.0, "stream 9", None)], "cuda:0")
    change(trace)
    return trace


def _complete(trace: dict) -> dict:
    return next(e for e in trace["traceEvents"] if e["ph"] == "X")


def _thread_name(trace: dict) -> dict:
    return next(e for e in trace["traceEvents"] if e["name"] == "thread_name")


@pytest.mark.parametrize("change, problem", [
    (lambda t: None, None),
    (lambda t: t.update(traceEvents={}), "not an object with a traceEvents list"),
    (lambda t: t.update(displayTimeUnit="s"), "displayTimeUnit 's'"),
    (lambda t: _complete(t).update(ph="B"), "ph (X or M)"),
    (lambda t: _complete(t).update(pid="1"), "pid and tid (int)"),
    (lambda t: _complete(t).update(tid=True), "pid and tid (int)"),
    (lambda t: _complete(t).pop("name"), "name (str)"),
    (lambda t: _complete(t).update(args=[]), "args (object)"),
    (lambda t: _complete(t).update(ts="0"), "complete event needs numbers ts, dur >= 0"),
    (lambda t: _complete(t).update(ts=float("nan")), "complete event needs numbers ts, dur >= 0"),
    (lambda t: _complete(t).pop("dur"), "complete event needs numbers ts, dur >= 0"),
    (lambda t: _complete(t).update(dur=-1.0), "complete event needs numbers ts, dur >= 0"),
    (lambda t: _complete(t).update(cat=3), "a string cat"),
    (lambda t: _thread_name(t).update(args={}), "not a metadata event of the format"),
    (lambda t: _thread_name(t).update(name="lane_name"), "not a metadata event of the format"),
    (lambda t: t["traceEvents"].remove(_thread_name(t)), "has complete events but no thread_name"),
    (lambda t: t["traceEvents"].append({**_complete(t), "ts": 5.0}), "has overlapping complete events"),
])
def test_the_trace_checker_finds_what_breaks_the_format(change, problem):
    """The Chrome trace checker (the GPU probe's, which the tests use) finds each field the Trace Event Format needs
    missing or of the wrong type; a timeline's trace has none."""
    problems = chrome_trace_problems(_broken(change))
    if problem is None:
        assert problems == []
    else:
        assert problems and problem in problems[0], problems


def test_the_table_has_a_line_per_row(dev, stream):
    graph, _ = fork_join(dev, branches=1)
    with graph.instantiate() as exe:
        with gg.timeline(dev) as tl:
            exe.launch(stream)
    stream.synchronize()
    lines = tl.table().splitlines()
    assert lines[0].split() == ["start", "(us)", "duration", "(us)", "lane", "launch", "kind", "name", "node"]
    assert len(lines) == 1 + len(tl.rows())
    kind, node = lines[0].index("kind"), lines[0].index("node")
    for line, row in zip(lines[1:], tl.rows()):
        assert line[kind:].split(maxsplit=1)[0] == row.kind
        assert line[node:] == repr(row.node)


# Errors: each names the call, the rule and what to do; a refused timeline leaves nothing recording.


def test_a_timeline_records_once_and_is_read_after_its_block(dev):
    tl = gg.timeline(dev)
    with pytest.raises(gg.GpuGraphError, match=r"Timeline.rows: the timeline of .* is not opened yet"):
        tl.rows()
    with tl:
        with pytest.raises(gg.GpuGraphError, match=r"Timeline.table: .* is still recording; read it after its with"):
            tl.table()
    with pytest.raises(gg.GpuGraphError, match=r"this timeline has recorded already .*make a new one"):
        with tl:
            pass
    assert tl.rows() == []


def test_one_timeline_records_at_a_time(dev):
    """A second timeline of the backend while one records is refused and starts nothing: the first records on."""
    x = dev.zeros(N)
    with gg.timeline(dev) as outer:
        with pytest.raises(gg.GpuGraphError, match=r"the timeline of .* is recording; one timeline records at a "
                                                   r"time on a backend"):
            with gg.timeline(dev):
                pass
        dev.default_stream.memset(x, 1.0)
    dev.synchronize()
    assert [r.kind for r in outer.rows()] == ["memset"]
    with gg.timeline(dev) as again:  # (the refusal left nothing recording)
        pass
    assert again.rows() == []


def test_a_timeline_of_another_device_of_the_backend_waits_its_turn(pair):
    first, second = pair
    if first.backend == "cuda" and importlib.util.find_spec("cupti") is None:
        pytest.skip("gg.timeline on CUDA needs cupti-python (pip install cupti-python)")
    with gg.timeline(first), pytest.raises(gg.GpuGraphError, match=rf"gg.timeline\({second}\): the timeline of {first} "
                                                                    rf"is recording"):
        gg.timeline(second).__enter__()


def test_an_error_in_the_block_ends_the_timeline(dev, stream):
    """The block's exception passes through; the timeline has ended, with what ran, and another may open."""
    x = dev.zeros(N)
    with pytest.raises(ZeroDivisionError), gg.timeline(dev) as tl:
        stream.memset(x, 1.0)
        1 / 0
    stream.synchronize()
    assert [r.kind for r in tl.rows()] == ["memset"]
    with gg.timeline(dev):
        pass


def test_the_work_keeps_its_errors_for_the_next_synchronize(dev, stream):
    """Leaving the block waits for the work without taking its errors: the stream's synchronize raises them."""
    def fails() -> None:
        raise KeyError("from the host function")

    with gg.timeline(dev):
        stream.host(fails)
    with pytest.raises(KeyError, match="from the host function"):
        stream.synchronize()


def test_a_launch_made_while_the_timeline_ends_is_not_recorded(device):
    """Ending a timeline waits for the work launched while it recorded; a launch from another thread meanwhile is not
    recorded at all (the end stops recording first, then waits), so no launch is recorded in part. (The CPU backend's
    recording is read to see that the end has begun: it waits on a host function until the launch is made.)"""
    if device.backend != "cpu":
        pytest.skip("reads the CPU backend's recording")
    from gpugraph.backends.cpu import _timeline as cpu_timeline

    held, other, x = device.stream(), device.stream(), device.zeros(N)
    gate = threading.Event()
    tl = gg.timeline(device)
    tl.__enter__()
    held.host(gate.wait)
    ending = threading.Thread(target=tl.__exit__, args=(None, None, None))
    ending.start()
    try:
        deadline = time.monotonic() + 30
        while device.index in cpu_timeline.RECORDING and time.monotonic() < deadline:
            time.sleep(0.001)
        assert device.index not in cpu_timeline.RECORDING, "the end waits for the work before it stops recording"
        other.memset(x, 1.0)
        other.synchronize()
    finally:
        gate.set()
        ending.join()
    held.synchronize()
    assert [(r.kind, r.name) for r in tl.rows()] == [("host", "Event.wait")]


def test_the_executable_graphs_are_read_whole_while_another_thread_instantiates(dev, monkeypatch):
    """Ending a timeline reads every executable graph alive; an instantiate on another thread meanwhile waits for the
    read to end, rather than change what is read (which raised "dictionary changed size during iteration"). The read
    is made to stop half-way until the instantiate has had half a second to run."""
    graph = gg.Graph(dev)
    graph.add_memset(dev.zeros(N), 1.0)
    made: list[gg.GraphExec] = []
    others: list[threading.Thread] = []

    class HalfWay(weakref.WeakValueDictionary):
        def items(self):  # type: ignore[override]
            items = super().items()
            yield next(items)
            other = threading.Thread(target=lambda: made.append(graph.instantiate()))
            others.append(other)
            other.start()
            other.join(0.5)
            yield from items

    monkeypatch.setattr(_exec_state, "_by_handle", HalfWay())
    with graph.instantiate():
        with gg.timeline(dev) as tl:
            pass
    others[0].join()
    assert tl.rows() == [] and len(made) == 1
    made[0].close()


def test_without_a_timeline_a_stream_operation_goes_straight_to_its_stream(device):
    """While no timeline records, the CPU backend puts a stream operation on its stream as it would without
    timelines: one inline test, no call of the timeline's on the way."""
    if device.backend != "cpu":
        pytest.skip("the CPU backend's calls")
    stream, x = device.stream(), device.zeros(N)
    calls: list[tuple[str, str, str]] = []

    def note(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_back is not None:
            calls.append((frame.f_code.co_name, frame.f_back.f_code.co_name, frame.f_code.co_filename))

    sys.setprofile(note)
    try:
        stream.memset(x, 1.0)
        stream.launch(K.scale, 1, N, x, 2.0, N)
        stream.host(len, [1])
    finally:
        sys.setprofile(None)
    stream.synchronize()
    assert [caller for name, caller, file in calls if name == "submit" and "gpugraph" in file] == [
        "stream_memset", "stream_launch", "stream_host"]
    assert [name for name, _, file in calls if file.endswith(os.path.join("cpu", "_timeline.py"))] == []


def test_timeline_takes_a_device():
    with pytest.raises(TypeError, match=r"gg.timeline\(device\): expected a Device .*got str 'cpu'"):
        gg.timeline("cpu")  # type: ignore[arg-type]
    assert gg.timeline().device is gg.Device()


def test_write_trace_refuses_what_it_cannot_write(dev, tmp_path):
    with gg.timeline(dev) as tl:
        pass
    with pytest.raises(TypeError, match=r"Timeline.write_trace\(path\): expected a str or path, got int 3"):
        tl.write_trace(3)  # type: ignore[arg-type]
    missing = tmp_path / "no such folder" / "t.json"
    with pytest.raises(FileNotFoundError, match=r"Timeline.write_trace: cannot write the trace \(No such file or "
                                                r"directory\): .*no such folder") as caught:
        tl.write_trace(missing)
    assert caught.value.filename == str(missing)
    assert not missing.parent.exists()


def test_write_trace_writes_the_whole_file_or_leaves_it_as_it_was(dev, stream, tmp_path, monkeypatch):
    """The trace is written beside the file and then takes its name: where that fails, the file there is as it was,
    nothing is left beside it, and the error names the file (its filename); else the file holds the whole trace."""
    with gg.timeline(dev) as tl:
        stream.memset(dev.zeros(N), 1.0)
    stream.synchronize()
    path = tmp_path / "timeline.json"
    path.write_text("an older trace")

    def no_space(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(OSError, match=r"Timeline.write_trace: cannot write the trace \(No space left on device\)") \
            as caught:
        tl.write_trace(path)
    assert (caught.value.errno, caught.value.filename) == (28, str(path))
    assert path.read_text() == "an older trace"
    assert [p.name for p in tmp_path.iterdir()] == ["timeline.json"]
    monkeypatch.undo()
    tl.write_trace(str(path))
    assert json.loads(path.read_text()) == tl.trace()
    assert [p.name for p in tmp_path.iterdir()] == ["timeline.json"]


def test_a_host_function_cannot_open_a_timeline(dev, stream):
    def opens() -> None:
        with gg.timeline(dev):
            pass

    stream.host(opens)
    with pytest.raises(gg.GpuGraphError, match=r"gg.timeline was called from a host function"):
        stream.synchronize()


def test_cuda_without_cupti_python_names_the_package(monkeypatch):
    """On CUDA, gg.timeline reads CUPTI through cupti-python: without it, ImportError says what to install."""
    pytest.importorskip("cuda.bindings.driver")
    from gpugraph.backends.cuda import _timeline as cuda_timeline

    monkeypatch.setitem(sys.modules, "cupti", None)  # (an import of it fails)
    with pytest.raises(ImportError, match=r"cupti-python package, which is not installed: pip install cupti-python"):
        cuda_timeline.start(0)


# CUDA's reading of CUPTI's records, with a stand-in for cupti-python (no GPU needed: cuda-bindings only).


@pytest.fixture
def cuda_timeline(monkeypatch):
    """backends/cuda/_timeline.py with buffers of its own and a stand-in cupti-python: ``refuse`` names an activity
    kind it refuses to enable, ``enabled`` the kinds enabled now."""
    pytest.importorskip("cuda.bindings.driver")
    from gpugraph.backends.cuda import _timeline as module

    kinds = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "DRIVER", "RUNTIME")
    fake = types.SimpleNamespace(ActivityKind=enum.IntEnum("ActivityKind", kinds), refuse=None, enabled=set())

    def enable(kind: enum.IntEnum) -> None:
        if kind.name == fake.refuse:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        fake.enabled.add(kind.name)

    fake.activity_enable, fake.activity_disable = enable, lambda kind: fake.enabled.discard(kind.name)
    fake.activity_register_callbacks = lambda requested, completed: None
    fake.get_timestamp = lambda: 1000
    package = types.ModuleType("cupti")
    package.cupti = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setattr(module, "_buffers", module._Buffers())
    monkeypatch.setattr(module, "fake", fake, raising=False)
    return module


def test_cuda_starts_recording_all_or_nothing(cuda_timeline):
    """CUPTI refusing one activity kind (another tool holds it) leaves none enabled, and the error says what to do."""
    fake = cuda_timeline.fake
    fake.refuse = "DRIVER"
    with pytest.raises(gg.GpuGraphError, match=r"gg.timeline\(cuda:0\): CUPTI refused to record DRIVER activity "
                                               r"\(CUPTI_ERROR_MULTIPLE.*Nsight Systems.*run without it"):
        cuda_timeline.start(0)
    assert fake.enabled == set()
    fake.refuse = None
    assert cuda_timeline.start(0).origin == 1000
    assert fake.enabled == {"CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "DRIVER", "RUNTIME"}


def test_cuda_keeps_an_error_of_cuptis_thread_for_the_end(cuda_timeline):
    """An exception reading a buffer CUPTI hands back (on its own thread) is kept for the recording's end to raise."""
    buffers = cuda_timeline._buffers
    kind = cuda_timeline.fake.ActivityKind
    buffers._completed([types.SimpleNamespace(kind=kind.DRIVER, correlation_id=7),
                        types.SimpleNamespace(kind=kind.MEMSET)])  # (a memset record without its fields)
    records, calls, error = buffers.take()
    assert (records, calls) == ([], set()) and isinstance(error, AttributeError)  # (the buffer's records are lost)
    assert buffers.take() == ([], set(), None)


def test_cuda_records_only_the_launches_made_while_recording(cuda_timeline):
    """The work of a launch made before the timeline began is left out whole, though it ran after: a record is kept
    where its launch's correlation id is an API call's made while recording (a body's work, of correlation id 0, by
    the launch of its graph that began last before it); a graph's work no host launch is known for (a graph a kernel
    launched) where it began after the recording did."""
    def record(correlation: int, start: int, graph: int = 0) -> tuple:
        return ("kernel", "k", start, start + 1, 0, 7, correlation, graph, 0)

    before = [record(5, 10, graph=3), record(0, 20, graph=3), record(4, 25), record(0, 5, graph=6)]  # (launched
    # before the recording began at 8; all but the last ran after)
    during = [record(9, 30, graph=3), record(0, 40, graph=3), record(8, 45), record(0, 50, graph=6)]
    kept, launches = cuda_timeline.made_while_recording(before + during, {8, 9, 11}, 8)
    assert kept == during and launches == [9, 9, None, 0]


def test_cuda_names_no_node_of_the_graph_itself_that_a_record_does_not_fit(cuda_timeline):
    """A record whose number is a node of another kind (or another kernel) in the graph instantiated from, the graph
    itself as well as a graph inside it, names no node: a node added to the graph since took the number."""
    scale = types.SimpleNamespace(kind=gg.NodeKind.KERNEL, kernel=types.SimpleNamespace(name="scale"))
    memset = types.SimpleNamespace(kind=gg.NodeKind.MEMSET)
    everyone = {0: ("a", scale, 0), 1: ("b", memset, 1), 2: ("i", scale, 0), 3: ("j", scale, 1)}
    numbering = (everyone, 2)
    fits = [("kernel", "scale", 0), ("memset", "4 B", 1), ("kernel", "scale", 2), ("kernel", "scale", 3)]
    assert cuda_timeline._fitting(numbering, fits) == everyone
    top_misfit = [("kernel", "scale", 0), ("kernel", "scale", 1), ("kernel", "scale", 2)]
    assert cuda_timeline._fitting(numbering, top_misfit) == {k: everyone[k] for k in (0, 2, 3)}
    inside_misfit = [("kernel", "scale", 0), ("kernel", "shift", 3)]
    assert cuda_timeline._fitting(numbering, inside_misfit) == {k: everyone[k] for k in (0, 1)}
    # A memset node of a body, which the driver runs as its own kernel: its record is a kernel "memset32".
    everyone[3] = ("j", memset, 1)
    assert cuda_timeline._fitting(numbering, [("kernel", "memset32", 3)]) == everyone
    assert cuda_timeline._fitting(numbering, [("kernel", "memset32", 2)]) == {k: everyone[k] for k in (0, 1)}


def nested_graph(dev: gg.Device) -> gg.Graph:
    """Kernels tagged by their grid size in child graphs (one inside another), two conditional nodes' bodies and the
    graph itself, with a node removed from the graph and from a child graph before it is added
    (tools/probes/gpu_probe_timeline.py's nested case)."""
    out = dev.zeros(1024, np.int32)

    def tagged(graph: gg.Graph, grid: int, after: object = ()) -> gg.Node:
        return graph.add_kernel(K.fill, grid, 32, out, grid, 1024, after=after)
    deepest = gg.Graph(dev)
    tagged(deepest, 111)
    first = gg.Graph(dev)
    a = tagged(first, 11)
    first.remove_node(tagged(first, 99))
    first.add_child(deepest, after=a)
    tagged(first, 12)
    second = gg.Graph(dev)
    tagged(second, 21)
    graph = gg.Graph(dev)
    branch = graph.add_if(graph.condition(1), has_else=True, after=graph.add_child(first))
    tagged(branch.bodies[0], 41)
    tagged(branch.bodies[1], 51)
    other = graph.add_if(graph.condition(0), has_else=True, after=branch)
    tagged(other.bodies[0], 61)
    tagged(other.bodies[1], 71)
    tagged(graph, 1, after=graph.add_child(second, after=other))
    graph.remove_node(tagged(graph, 98))
    return graph


def test_cuda_numbers_nodes_as_the_driver_does(cuda_timeline):
    """The numbers CUPTI's records gave the kernels of the nested graph on an H200 (CUDA 13.0, driver 580): the
    graph's own by their local ids, those inside from the number its next node would take (6: the removed node kept
    5), graph after graph in the order of the nodes embedding them, a graph's own nodes before those of the graphs
    inside it, a child graph's nodes one after another (the node removed before it was added takes none)."""
    dev = gg.Device("cpu")
    with nested_graph(dev).instantiate() as exe:
        found, first = cuda_timeline.node_numbers(*_exec_state.timeline_nodes(exe))
        # (each number a record gets names the Node of its handle, numbered so in its graph)
        nodes = _timeline._Nodes()
        assert all(number_of(nodes.find(None, handle, None)) == own for handle, _, own in found.values())
    grids = {number: params.grid[0] for number, (_, params, _) in found.items() if params.kind is gg.NodeKind.KERNEL}
    assert first == 6
    # (the kernels that ran: 51 and 61 are the bodies not taken)
    assert {n: grids[n] for n in (4, 6, 8, 9, 10, 13, 14)} == {4: 1, 6: 11, 8: 12, 9: 111, 10: 41, 13: 71, 14: 21}
    assert grids[11] == 51 and grids[12] == 61


def test_cuda_numbers_the_graph_as_instantiated(cuda_timeline):
    """A node removed from a body after instantiate keeps its number (the executable graph runs it), and a node added
    since has none: the numbers are read from the executable graph's snapshot of its graph."""
    dev = gg.Device("cpu")
    x = dev.zeros(N)
    graph = gg.Graph(dev)
    body = graph.add_if(graph.condition(1)).bodies[0]
    kept = body.add_kernel(K.scale, 1, N, x, 2.0, N)
    removed = body.add_memset(x, 1.0, after=kept)
    with graph.instantiate() as exe:
        body.remove_node(removed)
        body.add_kernel(K.shift, 1, N, x, 1.0, N, after=kept)
        found, first = cuda_timeline.node_numbers(*_exec_state.timeline_nodes(exe))
    assert first == 1 and [params.kind for _, params, _ in found.values()] == [
        gg.NodeKind.CONDITIONAL, gg.NodeKind.KERNEL, gg.NodeKind.MEMSET]


def test_cuda_numbers_name_the_nodes_of_the_graph_instantiated_from(cuda_timeline):
    """After an update the numbers are still those of the graph instantiated from (CUDA does not number its nodes
    again): its own nodes by their numbers (a node removed before instantiate kept one) and handles, the nodes inside
    from its next number; as its setters name them."""
    dev = gg.Device("cpu")
    x = dev.zeros(N)
    inner = gg.Graph(dev)
    inner.add_kernel(K.scale, 1, N, x, 2.0, N)
    made, other = gg.Graph(dev), gg.Graph(dev)
    made.remove_node(made.add_empty())
    for graph in (made, other):
        graph.add_child(inner, after=graph.add_kernel(K.shift, 1, N, x, 1.0, N))
    with made.instantiate() as exe:
        exe.update(other)
        found, first = cuda_timeline.node_numbers(*_exec_state.timeline_nodes(exe))
    assert first == 3 and sorted(found) == [1, 2, 3]
    assert [found[n][0] for n in (1, 2)] == [handle_of(node) for node in made.nodes]
    assert found[3][1].kind is gg.NodeKind.KERNEL


def test_a_capture_into_a_child_graph_changes_what_the_graph_embedding_it_runs(cuda_timeline, stream):
    """A capture into the graph a child-graph node embeds, after instantiate, is a change of the graph embedding it:
    the executable graph keeps what it was made from (its snapshot: the numbers of the nodes inside stay), and a
    launch of it into a capture is refused as for any other change."""
    dev = stream.device
    x = dev.zeros(N)
    child = gg.Graph(dev)
    child.add_kernel(K.scale, 1, N, x, 2.0, N)
    graph = gg.Graph(dev)
    embedded = graph.add_child(child).params.graph
    graph.add_kernel(K.shift, 1, N, x, 1.0, N)
    with graph.instantiate() as exe:
        with stream.capture(into=embedded):
            stream.launch(K.shift, 1, N, x, 1.0, N)
        found, first = cuda_timeline.node_numbers(*_exec_state.timeline_nodes(exe))
        assert first == 2 and sorted(found) == [0, 1, 2] and found[2][1].kernel is K.scale
        with pytest.raises(gg.CaptureError, match="changed after it was instantiated"), stream.capture():
            exe.launch(stream)
def test_cuda_leaves_the_works_errors_to_the_streams(cuda_timeline, monkeypatch):
    """The end of a recording waits for the device without raising its work's error (the streams' next synchronize
    does), reads the records all the same and disables every kind; an error kept from CUPTI's thread is raised."""
    from cuda.bindings import driver as cu

    fake, buffers = cuda_timeline.fake, cuda_timeline._buffers
    fake.activity_flush_all = lambda forced: buffers._completed([
        types.SimpleNamespace(kind=fake.ActivityKind.DRIVER, correlation_id=9),
        types.SimpleNamespace(kind=fake.ActivityKind.MEMSET, bytes=64, start=1500, end=1600, device_id=0, stream_id=7,
                              correlation_id=9, graph_id=0, graph_node_id=0)])
    monkeypatch.setattr(cuda_timeline, "drv", types.SimpleNamespace(
        ctx_synchronize=lambda: (cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,)))
    backend = types.SimpleNamespace(contexts=types.SimpleNamespace(use=lambda index: None), loaded_functions=list)
    recording = cuda_timeline.start(0)
    records = cuda_timeline.stop(backend, recording, [])
    assert [(r.kind, r.name, r.start, r.end, r.lane, r.launch) for r in records] == [
        ("memset", "64 B", 500, 600, "stream 7", None)]
    assert fake.enabled == set()
    recording = cuda_timeline.start(0)
    fake.activity_flush_all = lambda forced: buffers._completed([types.SimpleNamespace(kind=fake.ActivityKind.MEMSET)])
    with pytest.raises(gg.GpuGraphError, match=r"gg.timeline\(cuda:0\): reading CUPTI's activity records failed: "
                                               r"AttributeError"):
        cuda_timeline.stop(backend, recording, [])
    assert fake.enabled == set()
