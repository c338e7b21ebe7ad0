"""What CUPTI reports for the work of nodes inside conditional bodies and child graphs, and of a graph a kernel
launches: for each activity record its kind, name, stream, correlation id, graph id and node number (the low 32 bits
of graphNodeId; the high ones in brackets), the numbering gpugraph's CUDA timeline gives the nodes (number: record
kind, kernel, grid) with the records it checks against it, and the rows it made. For reading when the timeline
names nodes wrongly on some driver (``backends/cuda/_timeline.py`` rests on these ids).

Uses gpugraph (``PYTHONPATH=src:tests:tools/probes`` in a checkout) and cupti-python, on CUDA. Run from the
repository root: ``python tools/probes/gpu_probe_timeline_ids.py``.
"""

from __future__ import annotations

import gpu_probe_timeline
import numpy as np

import gpugraph as gg
import kernels as K
from gpugraph.backends.cuda import _timeline
from test_device_launch import SOURCE as LAUNCHING

_taken: list[list[tuple]] = []
_take, _fitting = _timeline._buffers.take, _timeline._fitting


def take() -> tuple:
    """CUPTI's records as the timeline takes them, kept for ``dump``."""
    taken = _take()
    _taken.append(taken[0])
    return taken


def fitting(numbering: tuple, seen: list) -> dict:
    """The timeline's numbering of an executable graph's nodes and the records checked against it, printed."""
    found, first = numbering
    print(f"  numbering (the nodes inside from {first}):")
    for number in sorted(found):
        _, params = found[number]
        kernel = getattr(getattr(params, "kernel", None), "name", "")
        print(f"    {number}: {type(params).__name__} {kernel} grid {getattr(params, 'grid', '')}")
    print(f"  records (kind, name, number): {seen}")
    return _fitting(numbering, seen)


def dump(label: str, timeline: object = None) -> None:
    print(f"== {label}: CUPTI's records")
    for kind, name, _, _, _, stream, correlation, graph_id, node_id in _taken[-1]:
        print(f"  {kind} {name!r} stream {stream} correlation {correlation} graph {graph_id} node "
              f"{node_id & 0xFFFFFFFF} ({node_id >> 32})")
    for row in timeline.rows() if timeline is not None else ():  # type: ignore[attr-defined]
        print(f"  row: {row.kind} {row.name} launch {row.launch} -> {row.node!r}")


def main() -> None:
    _timeline._buffers.take, _timeline._fitting = take, fitting
    dev = gg.Device("cuda")
    stream = dev.stream()
    n = 256
    x = dev.zeros(n)
    graph = gg.Graph(dev)
    body = graph.add_if(graph.condition(1)).bodies[0]
    body.add_memset(x, 1.0, after=body.add_kernel(K.scale, 1, n, x, 2.0, n))
    print("== a kernel and a memset in an if's body")
    with graph.instantiate() as exe, gg.timeline(dev) as timeline:
        exe.launch(stream)
    stream.synchronize()
    dump("a kernel and a memset in an if's body", timeline)

    value, code = dev.zeros(1, np.int32), dev.zeros(1, np.int32)
    child = gg.Graph(dev)
    child.add_kernel(gg.Kernel(LAUNCHING, "add"), 1, 32, value, 1)
    print("== a graph a kernel launches (fire and forget)")
    with child.instantiate(device_launch=True) as launched:
        parent = gg.Graph(dev)
        parent.add_kernel(gg.Kernel(LAUNCHING, "launch_graph"), 1, 32, launched, 2, code)
        with parent.instantiate() as exe:
            with gg.timeline(dev) as timeline:
                exe.launch(stream)
            stream.synchronize()
            cupti = _timeline._cupti()
            print(f"  graph ids: the launching graph {cupti.get_graph_exec_id(int(exe._handle.handle))}, the "
                  f"launched one {cupti.get_graph_exec_id(int(launched._handle.handle))}")
    dump("a graph a kernel launches", timeline)

    print("== child graphs in child graphs, conditional bodies, nodes removed (gpu_probe_timeline's nested case)")
    gpu_probe_timeline.probe_nested(dev)
    dump("child graphs and bodies")


if __name__ == "__main__":
    main()
