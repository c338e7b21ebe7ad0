"""Instantiate options (hipGraphInstantiateWithParams / cudaGraphInstantiateWithParams): the flags an executable graph
is made with, read back (hipGraphExecGetFlags), the rules of a graph launched from the device, and the node an
instantiation refusal names, on every backend."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _graph

N = 64


def test_the_flags_an_executable_graph_was_made_with_read_back(device):
    g = gg.Graph(device)
    g.add_kernel(K.fill, 1, N, device.zeros(N, np.int32), 1, N)
    assert gg.INSTANTIATE_FLAGS == ("auto_free_on_launch", "device_launch", "use_node_priority")
    with g.instantiate() as plain:
        assert plain.flags == frozenset()
    with g.instantiate(auto_free_on_launch=True, use_node_priority=True) as both:
        assert both.flags == {"auto_free_on_launch", "use_node_priority"}
    with g.instantiate(device_launch=True) as launchable:
        assert launchable.flags == {"device_launch"}


def test_instantiate_options_are_checked(device):
    g = gg.Graph(device)
    g.add_empty()
    with pytest.raises(TypeError, match=r"instantiate\(use_node_priority\): expected a bool, got int"):
        g.instantiate(use_node_priority=1)
    with pytest.raises(TypeError, match=r"instantiate\(device_launch\): expected a bool, got str"):
        g.instantiate(device_launch="yes")
    with pytest.raises(ValueError, match="auto_free_on_launch and device_launch cannot be combined"):
        g.instantiate(auto_free_on_launch=True, device_launch=True)
    with pytest.raises(ValueError, match="auto_free_on_launch and device_launch cannot be combined"):
        g.instantiate(auto_free_on_launch=np.True_, device_launch=np.True_)
    with g.instantiate(use_node_priority=np.True_, device_launch=np.False_) as exe:  # NumPy bools are bools
        assert exe.flags == {"use_node_priority"}


def test_use_node_priority_runs_a_graph_captured_on_a_high_priority_stream(device):
    """A captured kernel takes its stream's priority; with use_node_priority it keeps it at every launch."""
    urgent = device.stream(priority=-1)
    x = K.f32(device, np.arange(N))
    with urgent.capture() as cap:
        urgent.launch(K.scale, 1, N, x, 2.0, N)
    with cap.graph.instantiate(use_node_priority=True) as exe:
        exe.launch(urgent)
        exe.launch(device.stream())
        device.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(N, dtype=np.float32) * 4)


def test_a_graph_for_device_launch_runs_its_kernels_copies_and_memsets(device, stream):
    x, y = device.zeros(N, np.float32), device.zeros(N, np.float32)
    inner = gg.Graph(device)
    inner.add_kernel(K.scale, 1, N, y, 3.0, N)
    g = gg.Graph(device)
    fill = g.add_memset(x, 2.0)
    scale = g.add_kernel(K.scale, 1, N, x, 5.0, N, after=fill)
    copy = g.add_memcpy(y, x, after=scale)
    g.add_child(inner, after=copy)
    with g.instantiate(device_launch=True, upload=stream) as exe:
        exe.launch(stream)  # (launched from the host here: a device-launchable graph runs from either)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 30.0, np.float32))


@pytest.mark.parametrize("kind", ["host", "empty", "event_record", "event_wait", "mem_alloc"])
def test_device_launch_refuses_other_nodes_naming_the_node(device, kind):
    g = gg.Graph(device)
    first = g.add_kernel(K.fill, 1, N, device.zeros(N, np.int32), 1, N)
    if kind == "host":
        node = g.add_host(print, after=first)
    elif kind == "empty":
        node = g.add_empty(after=first)
    elif kind == "event_record":
        node = g.add_event_record(device.event(), after=first)
    elif kind == "event_wait":
        node = g.add_event_wait(device.event(), after=first)
    else:
        node = g.add_alloc(N, np.float32, after=first)
    with pytest.raises(gg.GraphInstantiateError,
                       match=rf"instantiate refused at {re.escape(repr(node))}: node operation not supported "
                             rf"\(device_launch: .* got a node of kind {kind}\)") as refused:
        g.instantiate(device_launch=True)
    assert refused.value.node is node and refused.value.reason == "node operation not supported"
    with g.instantiate() as exe:  # nothing is left half-made: without the flag it instantiates
        assert exe.flags == frozenset()


def test_device_launch_names_the_child_graph_node_holding_a_refused_node(device):
    inner = gg.Graph(device)
    inner.add_host(print)
    g = gg.Graph(device)
    g.add_kernel(K.fill, 1, N, device.zeros(N, np.int32), 1, N)
    child = g.add_child(inner)
    g.add_child(gg.Graph(device))  # (an empty child graph is allowed: only the graph launched may not be empty)
    with pytest.raises(gg.GraphInstantiateError, match=r"\(device_launch: in its child graph: a graph launched from "
                                                       r"the device .* got a node of kind host\)") as refused:
        g.instantiate(device_launch=True)
    assert refused.value.node is child and refused.value.reason == "node operation not supported"


def test_device_launch_refuses_work_on_another_device(pair):
    """A graph launched from the device runs on one: a kernel, memset or copy touching another device is refused."""
    here, there = pair
    far = there.zeros(N, np.int32)
    for add in (lambda g: g.add_kernel(K.fill, 1, N, far, 1, N, device=there),
                lambda g: g.add_memset(far, 1),
                lambda g: g.add_memcpy(here.zeros(N, np.int32), far)):
        g = gg.Graph(here)
        node = add(g)
        with pytest.raises(gg.GraphInstantiateError, match=rf"multiple devices not supported \(device_launch: .*, "
                                                           rf"the graph on {here}; a graph launched") as refused:
            g.instantiate(device_launch=True)
        assert refused.value.node is node


def test_device_launch_refuses_an_empty_graph(device):
    with pytest.raises(gg.GraphInstantiateError, match=r"instantiate refused: instantiate error \(device_launch: "
                                                       r"the graph is empty \(CUDA refuses it\)\)") as refused:
        gg.Graph(device).instantiate(device_launch=True)
    assert refused.value.node is None and isinstance(refused.value, gg.GraphError)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["host", "event_record", "child host"])
def test_the_drivers_own_refusal_names_the_node(gpu_device, monkeypatch, kind):
    """The driver's refusal (cudaGraphInstantiateParams' errNode_out) agrees with gpugraph's rules: with them
    switched off it names the same node, a child graph's by the child-graph node holding it."""
    monkeypatch.setattr(_graph, "check_device_launch", lambda graph: None)
    g = gg.Graph(gpu_device)
    first = g.add_kernel(K.fill, 1, N, gpu_device.zeros(N, np.int32), 1, N)
    if kind == "host":
        node = g.add_host(print, after=first)
    elif kind == "event_record":
        node = g.add_event_record(gpu_device.event(), after=first)
    else:
        inner = gg.Graph(gpu_device)
        inner.add_host(print)
        node = g.add_child(inner, after=first)
    expected = rf"instantiate refused at {re.escape(repr(node))}: node operation not supported \(cuGraphInstantiateWith"
    with pytest.raises(gg.GraphInstantiateError, match=expected) as refused:
        g.instantiate(device_launch=True)
    assert refused.value.node is node
