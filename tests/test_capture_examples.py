"""The capture examples (gpugraph.examples.capture_graph and async_streams) validate on every backend
(docs/capture.md's code blocks run in test_docs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gpugraph.examples import Result, async_streams, capture_graph
from gpugraph.examples.explicit_graph import ARRAY_SIZE, EXPECTED


def test_capture_graph_example_validates(device):
    result = capture_graph.run(device)
    assert isinstance(result, Result)
    assert result.name == "capture_graph"
    assert result.validated is True, result.detail
    assert result.detail.startswith("10 nodes captured, nothing ran during capture: True")
    assert result.detail.endswith(f"0 of {ARRAY_SIZE} differ")


def test_capture_graph_example_graph_shape(device):
    stream = device.stream()
    h_array = device.pinned(ARRAY_SIZE, np.float64)
    h_array[:] = 0.0
    graph = capture_graph.capture(stream, h_array)
    assert not np.any(h_array)  # recorded only
    kinds = sorted(node.kind.value for node in graph.nodes)
    assert kinds == sorted(["mem_alloc", "mem_alloc", "host", "memcpy", "kernel", "kernel", "kernel",
                            "memcpy", "mem_free", "mem_free"])
    assert len(graph.roots) == 1 and len(graph.leaves) == 1
    assert len(graph.edges) == len(graph.nodes) - 1  # captured from one stream: a chain
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(h_array, np.full(ARRAY_SIZE, EXPECTED))
        h_array[:] = 0.0
        exe.launch(stream)  # the graph frees what it allocates, so it can be launched again
        stream.synchronize()
    np.testing.assert_array_equal(h_array, np.full(ARRAY_SIZE, EXPECTED))


def test_async_streams_example_validates(device):
    result = async_streams.run(device)
    assert result.name == "async_streams"
    assert result.validated is True, result.detail
    assert result.detail == "sequential, streams, events, graph all give A=50, B=1427"
    assert async_streams.EXPECTED_A == 50.0 and async_streams.EXPECTED_B == 1427.0


@pytest.mark.parametrize("variant", list(async_streams.VARIANTS))
def test_async_streams_variant(device, variant):
    ok, detail = async_streams.VARIANTS[variant](device)
    assert ok is True, detail
    assert "A=50, B=1427 expected; 0 of" in detail
    if variant == "graph":  # 4 copies and 2 kernels, captured across two streams (fork and join)
        assert detail.startswith("6 nodes; ")
