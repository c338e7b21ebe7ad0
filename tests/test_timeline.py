"""gg.timeline: what ran on a device while a timeline was open, as rows naming gpugraph's Nodes, a table and a Chrome
trace. Orders are asserted (a node starts after its dependencies end), never durations; where overlap is asserted,
the work cannot finish without it (host nodes meeting at a barrier)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph._timeline import _trace

N = 256


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


def test_four_branches_meeting_at_a_barrier_overlap(device, stream):
    """Four host nodes that each wait at one barrier for the other three: they run at once, so their rows overlap,
    each on a lane of its own, and in the trace each is on a row of its own. (CUDA runs a graph's host nodes one at a
    time on one thread: such a graph would never finish there.)"""
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


def chrome_trace_problems(trace: object) -> list[str]:
    """What makes ``trace`` other than a Chrome Trace Event Format document (the JSON Object Format Perfetto loads):
    the keys and types each event needs, a name for every thread with events, no overlapping events on one thread."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems, named, spans = [], set(), {}
    for event in trace["traceEvents"]:
        if not (isinstance(event, dict) and isinstance(event.get("name"), str) and event.get("ph") in ("X", "M")
                and type(event.get("pid")) is int and type(event.get("tid")) is int
                and isinstance(event.get("args", {}), dict)):
            problems.append(f"malformed: {event}")
        elif event["ph"] == "X":
            ts, dur = event.get("ts"), event.get("dur")
            if not (type(ts) in (int, float) and type(dur) in (int, float) and ts >= 0 and dur >= 0
                    and isinstance(event.get("cat"), str)):
                problems.append(f"a complete event needs ts, dur >= 0 and cat: {event}")
            else:
                spans.setdefault((event["pid"], event["tid"]), []).append((ts, ts + dur))
        elif event["name"] == "thread_name" and isinstance(event["args"].get("name"), str):
            named.add((event["pid"], event["tid"]))
        elif event["name"] not in ("process_name", "thread_sort_index"):
            problems.append(f"unknown metadata: {event}")
    for key, intervals in spans.items():
        intervals.sort()
        if key not in named:
            problems.append(f"thread {key} has no thread_name")
        if any(b[0] < a[1] for a, b in itertools.pairwise(intervals)):
            problems.append(f"thread {key} has overlapping events")
    return problems


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


def test_overlapping_work_of_one_lane_goes_on_rows_of_its_own():
    """Rows of one lane that overlap (CUDA's stream of a graph's launch may run two nodes at once) are put on threads
    of their own in the trace, named after the lane; rows that follow each other share one."""
    row = gg.TimelineRow
    rows = [row(None, "kernel", "a", 0.0, 10.0, "stream 7", 1), row(None, "kernel", "b", 5.0, 10.0, "stream 7", 1),
            row(None, "kernel", "c", 12.0, 1.0, "stream 7", 1), row(None, "memcpy", "d", 6.0, 1.0, "stream 9", None)]
    trace = _trace(rows, "cuda:0")
    assert chrome_trace_problems(trace) == []
    tids = {e["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert tids["a"] == tids["c"] != tids["b"] != tids["d"] != tids["a"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert [names[tids[n]] for n in "abcd"] == ["stream 7", "stream 7 (2)", "stream 7", "stream 9"]


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
    with pytest.raises(FileNotFoundError, match=r"Timeline.write_trace: cannot write the trace to .*no such folder"):
        tl.write_trace(missing)
    assert not missing.parent.exists()


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
