"""Graph, executable graph and node ids (cudaGraphGetId, cudaGraphExecGetId, cudaGraphNodeGetLocalId,
cudaGraphNodeGetToolsId): unique where CUDA says they are. They need a CUDA 13.1 driver; an older one is named at
the call. The CPU backend gives its own, by the same rules."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

NEEDS = r"needs a driver of CUDA 13\.1 or newer; this driver is CUDA"


def has_ids(device: gg.Device) -> bool:
    if device.backend != "cuda":
        return True
    from gpugraph.backends.cuda._driver import driver_version
    return driver_version() >= 13010


def test_graph_exec_and_node_ids_are_unique(device):
    if not has_ids(device):  # (the H200's driver, 580, is CUDA 13.0: the real driver refuses, named at the call)
        graph = gg.Graph(device)
        with pytest.raises(gg.BackendError, match=rf"cuGraphGetId.*{NEEDS}"):
            graph.id
        return
    first, second = gg.Graph(device), gg.Graph(device)
    a = first.add_empty()
    b = first.add_memset(device.zeros(4, np.int32), 1, after=a)
    c = second.add_empty()
    condition = second.condition(0)
    body = second.add_if(condition).bodies[0]
    d = body.add_empty()
    graphs = [first, second, body]
    assert len({g.id for g in graphs}) == 3 and all(isinstance(g.id, int) for g in graphs)
    assert a.local_id != b.local_id
    assert len({(node.graph.id, node.local_id) for node in (a, b, c, d)}) == 4
    assert len({node.tools_id for node in (a, b, c, d)}) == 4
    with first.instantiate() as one, first.instantiate() as two:
        assert one.id != two.id
    assert one.closed


def test_a_new_node_never_takes_a_removed_nodes_id(device):
    if not has_ids(device):
        pytest.skip("the driver is older than CUDA 13.1")
    graph = gg.Graph(device)
    nodes = [graph.add_empty() for _ in range(3)]
    ids = {node.local_id for node in nodes}
    gone = nodes[1]
    graph.remove_node(gone)
    with pytest.raises(gg.GraphError, match="has no such node any more"):
        gone.local_id
    with pytest.raises(gg.GraphError, match="has no such node any more"):
        gone.tools_id
    assert graph.add_empty().local_id not in ids


def test_a_closed_exec_has_no_id(device):
    exe = gg.Graph(device).instantiate()
    exe.close()
    with pytest.raises(gg.GraphError, match=r"GraphExec\.id: this GraphExec is closed"):
        exe.id


@pytest.mark.gpu
def test_an_older_driver_is_named_at_the_call(gpu_device, monkeypatch):
    from gpugraph.backends.cuda import _driver
    monkeypatch.setattr(_driver, "driver_version", lambda: 13000)
    graph = gg.Graph(gpu_device)
    node = graph.add_kernel(K.fill, 1, 4, gpu_device.zeros(4, np.int32), 1, 4)
    with pytest.raises(gg.BackendError, match=rf"a graph's id \(Graph\.id\) {NEEDS} 13\.0"):
        graph.id
    with pytest.raises(gg.BackendError, match=rf"a node's ids \(Node\.local_id, Node\.tools_id\) {NEEDS}"):
        node.local_id
    with graph.instantiate() as exe, pytest.raises(gg.BackendError, match=rf"GraphExec\.id\) {NEEDS}"):
        exe.id
