"""Bad input and faults over gpugraph's whole API, one table of probes per area.

A probe is a call that must be refused where it is made: it raises the class the table names, with a message that
names the call or the object, the rule and what was got (the table's regex), and what the call could have changed
(a graph's nodes, edges and parameters, memory, a Param's type, a capture, a semaphore's value, references) is as
it was before it. Probes that could take the interpreter down (kernels that fault) or hang (waits, timeouts,
synchronizing after a fault) run in a child interpreter, watched by a limit on its silence rather than on its
time: the child prints a line at each step it finishes, and only one silent for ``QUIET_LIMIT`` seconds is stopped,
as hung. The command line is run as its users run it, in a child.

Every table runs on each available backend through the suite's ``device`` fixture. A probe of a rule the CPU backend
alone has (its emulated semaphores and collectives, its faults) names it in ``cpu_only`` and is skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import queue
import re
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

F32, I32, U32 = np.float32, np.int32, np.uint32
N = 8

# A refused call says why in its error alone: a warning NumPy raised on the way (an overflow in a cast) fails it.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


# The probes and how one is checked


@dataclass(frozen=True)
class Probe:
    """``call(world)`` must raise ``raises`` with a message matching ``match`` (re.search), and leave ``state(world)``
    as it was (None: the area's state)."""

    call: Callable[[Any], object]
    raises: type[BaseException]
    match: str
    state: Callable[[Any], object] | None
    cpu_only: str


def probe(name: str, call: Callable[[Any], object], raises: type[BaseException], match: str, *,
          state: Callable[[Any], object] | None = None, cpu_only: str = "", xfail: str = "") -> Any:
    """One row of a table: a pytest parameter named ``name``; ``cpu_only``: why only the CPU backend has the rule;
    ``xfail``: a defect left open, the probe failing until it is fixed (strict)."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(Probe(call, raises, match, state, cpu_only), id=name, marks=marks)


def check(case: Probe, world: Any, state: Callable[[Any], object]) -> None:
    """Run one probe in ``world`` (its area's objects, on ``world.device``)."""
    if case.cpu_only and world.device.backend != "cpu":
        pytest.skip(f"a rule of the CPU backend alone: {case.cpu_only}")
    snapshot = case.state or state
    before = snapshot(world)
    with pytest.raises(case.raises, match=case.match):
        case.call(world)
    assert snapshot(world) == before, "the refused call changed what it touched"


def graph_state(graph: gg.Graph) -> tuple:
    """A graph as a refused call must leave it: its nodes, each one's parameters (a kernel node's attributes too),
    and its edges."""
    nodes = graph.nodes
    return (tuple((repr(n), n.params, n.attributes if n.kind is gg.NodeKind.KERNEL else None) for n in nodes),
            frozenset((repr(a), repr(b)) for a, b in graph.edges))


def contents(*arrays: gg.Array) -> tuple[bytes, ...]:
    """The bytes of ``arrays`` (after the device's work): what a refused copy, memset or launch must not change."""
    return tuple(a.to_numpy().tobytes() for a in arrays)


def capturing(*streams: gg.Stream) -> tuple[bool, ...]:
    return tuple(s.is_capturing for s in streams)


def in_capture(body: Callable[[Any, gg.Capture], object], **options: Any) -> Callable[[Any], object]:
    """A probe's call: ``body(world, cap)`` inside a capture on ``world.s``."""
    def call(w: Any) -> object:
        with w.s.capture(**options) as cap:
            body(w, cap)
        return cap.graph
    return call


def in_exec(call: Callable[[Any, gg.GraphExec], object]) -> Callable[[Any], object]:
    """A probe's call: ``call(world, exe)`` on an executable graph of ``world.g``, closed after it."""
    def run(w: Any) -> object:
        with w.g.instantiate() as exe:
            return call(w, exe)
    return run


def in_group(body: Callable[[Any], object]) -> Callable[[Any], object]:
    """A probe's call: ``body(world)`` inside ``gg.collective_group()``."""
    def call(w: Any) -> object:
        with gg.collective_group():
            body(w)
    return call


def world(device: gg.Device, **objects: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(device=device, **objects)


def other_device(device: gg.Device) -> gg.Device:
    """Another device of ``device``'s backend (skipped where it has one)."""
    count = gg.backends.get_backend(device.backend).device_count()
    if count < 2:
        pytest.skip(f"{device.backend} has {count} device here; this probe needs two")
    return gg.Device(f"{device.backend}:{count - 1}")


# A kernel that sets a condition (as kernels in conditional graphs do).
CONDITION_SOURCE = r"""
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
extern "C" __global__ void set_condition(unsigned long long handle, unsigned int value) {
    if (threadIdx.x == 0) cudaGraphSetConditional(handle, value);
}
"""
SET_CONDITION = gg.Kernel(CONDITION_SOURCE, "set_condition", cpu=lambda launch, handle, value: None)


# Conditional nodes


def conditional_world(device: gg.Device) -> types.SimpleNamespace:
    g, other, outer, unused = gg.Graph(device), gg.Graph(device), gg.Graph(device), gg.Graph(device)
    c = g.condition()
    node = g.add_while(c)
    body = node.bodies[0]
    body.add_kernel(SET_CONDITION, 1, 1, c, 0)
    with_host = gg.Graph(device)
    with_host.add_host(lambda: None)
    unused.condition()
    ready = gg.Graph(device)  # (instantiable: its one condition is read)
    loop = ready.condition()
    ready.add_while(loop).bodies[0].add_kernel(SET_CONDITION, 1, 1, loop, 0)
    return world(device, g=g, c=c, node=node, body=body, other=other, oc=other.condition(), outer=outer,
                 unused=unused, with_host=with_host, ready=ready, x=device.zeros(N, F32), s=device.stream(),
                 free=g.condition())


def conditional_state(w: Any) -> tuple:
    return (graph_state(w.g), graph_state(w.body), graph_state(w.other), graph_state(w.outer), graph_state(w.ready),
            w.s.is_capturing)


def _instantiate_twice(w: Any) -> None:
    with w.ready.instantiate():
        w.ready.instantiate()


def _set_enabled_on_conditional(w: Any) -> None:
    with w.ready.instantiate() as exe:
        exe.set_enabled(w.ready.nodes[0], False)


def _launch_conditional_into_capture(w: Any) -> None:
    with w.ready.instantiate() as exe, w.s.capture():
        exe.launch(w.s)


CONDITIONAL = [
    probe("condition-default-negative", lambda w: w.g.condition(default=-1), ValueError,
          r"^condition\(default\): a condition's value is an unsigned 32-bit int; got -1$"),
    probe("condition-default-too-big", lambda w: w.g.condition(default=2**32), ValueError,
          r"^condition\(default\): .* unsigned 32-bit int; got 4294967296$"),
    probe("condition-default-float", lambda w: w.g.condition(default=1.0), TypeError,
          r"^condition\(default\): expected an int, got 1\.0 \(float\)$"),
    probe("condition-default-bool", lambda w: w.g.condition(default=True), TypeError,
          r"^condition\(default\): expected an int, got True \(bool\)$"),
    probe("condition-default-str", lambda w: w.g.condition(default="1"), TypeError,
          r"^condition\(default\): expected an int, got '1' \(str\)$"),
    probe("condition-reset-int", lambda w: w.g.condition(reset=1), TypeError,
          r"^condition\(reset\): expected a bool, got int 1$"),
    probe("condition-reset-none", lambda w: w.g.condition(reset=None), TypeError,
          r"^condition\(reset\): expected a bool, got NoneType None$"),
    probe("if-without-condition", lambda w: w.g.add_if(None), TypeError,
          r"^add_if\(condition\): expected a Condition \(Graph\.condition\), got NoneType$"),
    probe("if-condition-of-another-graph", lambda w: w.g.add_if(w.oc), gg.GraphError,
          r"^add_if: Condition\(default=0, reset=True\) was made by Graph\(.*\); only its nodes and those of its "
          r"bodies may use it"),
    probe("if-has-else-str", lambda w: w.g.add_if(w.free, has_else="yes"), TypeError,
          r"^add_if\(has_else\): expected a bool, got str 'yes'$"),
    probe("switch-no-bodies", lambda w: w.g.add_switch(w.free, 0), ValueError,
          r"^add_switch\(count\): expected a positive int of at most 4096 \(gg\.MAX_SWITCH_BODIES.*got 0$"),
    probe("switch-too-many-bodies", lambda w: w.g.add_switch(w.free, gg.MAX_SWITCH_BODIES + 1), ValueError,
          r"^add_switch\(count\): .*got 4097; for more cases, let one body's kernel choose by the value$"),
    probe("switch-count-float", lambda w: w.g.add_switch(w.free, 2.0), TypeError,
          r"^add_switch\(count\): expected a positive int \(the number of bodies\), got float 2\.0$"),
    probe("switch-count-bool", lambda w: w.g.add_switch(w.free, True), TypeError,
          r"^add_switch\(count\): .*, got bool True$"),
    probe("while-after-str", lambda w: w.g.add_while(w.free, after="n0"), TypeError,
          r"^add_while\(after=\.\.\.\): expected Nodes, got str$"),
    probe("while-condition-read-already", lambda w: w.g.add_while(w.c), gg.GraphError,
          r"^add_while: Condition\(.*\) is read by Node\(n0, conditional\) already; a condition belongs to one "
          r"conditional node"),
    probe("body-host-node", lambda w: w.body.add_host(print), gg.GraphError,
          r"^add_host: Graph\(.*\) is the body of a conditional node, which cannot hold host nodes"),
    probe("body-event-record", lambda w: w.body.add_event_record(w.device.event()), gg.GraphError,
          r"^add_event_record: .* is the body of a conditional node, which cannot hold event record nodes"),
    probe("body-event-wait", lambda w: w.body.add_event_wait(w.device.event()), gg.GraphError,
          r"^add_event_wait: .* cannot hold event wait nodes"),
    probe("body-allocation", lambda w: w.body.add_alloc(4, F32), gg.GraphError,
          r"^add_alloc: .* cannot hold allocation or free nodes"),
    probe("body-kernel-with-param", lambda w: w.body.add_kernel(K.scale, 1, N, w.x, gg.Param(2.0), N),
          gg.GraphError, r"^add_kernel\(Kernel\('scale'\)\): .* is the body of a conditional node, and a Param is "
                         r"patched by an executable graph's setters"),
    probe("body-child-with-host-node", lambda w: w.body.add_child(w.with_host), gg.GraphError,
          r"^add_child: .* cannot hold host nodes, and Graph\(device=.*, nodes=1\) holds one"),
    probe("body-semaphore-signal", lambda w: w.body.add_semaphore_signal(
        w.device.import_semaphore(gg.EmulatedSemaphore()), 1), gg.GraphError,
          r"^add_semaphore_signal: .* cannot hold semaphore signal nodes",
          cpu_only="its semaphores are gg.EmulatedSemaphore (CUDA imports a Vulkan semaphore's fd)"),
    probe("kernel-given-another-graphs-condition", lambda w: w.g.add_kernel(SET_CONDITION, 1, 1, w.oc, 1),
          gg.GraphError, r"^add_kernel\(Kernel\('set_condition'\)\): Condition\(.*\) was made by Graph"),
    probe("stream-launch-given-a-condition", lambda w: w.s.launch(SET_CONDITION, 1, 1, w.c, 1), TypeError,
          r"^Kernel\('set_condition'\) argument 0 \(unsigned long long handle\): a Condition is passed only to "
          r"kernels of its graph"),
    probe("clone", lambda w: w.g.clone(), gg.GraphError,
          r"^clone: Graph\(.*\) holds conditional nodes; a graph with conditional nodes cannot be cloned"),
    probe("child-graph", lambda w: w.outer.add_child(w.g), gg.GraphError,
          r"^add_child: Graph\(.*\) holds conditional nodes; .* cannot be used as a child graph"),
    probe("instantiate-a-body", lambda w: w.body.instantiate(), gg.GraphError,
          r"^instantiate: this graph is a body of a conditional node of Graph\(.*\); it belongs to that node"),
    probe("instantiate-unused-condition", lambda w: w.unused.instantiate(), gg.GraphError,
          r"^instantiate: Condition\(default=0, reset=True\), made by Graph\(.*\), is read by no conditional node"),
    probe("instantiate-twice", _instantiate_twice, gg.GraphError,
          r"^instantiate: a graph with conditional nodes may have only one executable graph at a time"),
    probe("set-enabled", _set_enabled_on_conditional, gg.GraphError,
          r"^set_enabled\(Node\(n0, conditional\)\): the node is a conditional node, not a kernel or memcpy or "
          r"memset node$"),
    probe("launch-into-capture", _launch_conditional_into_capture, gg.CaptureError,
          r"^GraphExec\.launch: a graph with conditional nodes cannot be launched into a capture"),
    probe("bodies-of-another-kind", lambda w: w.g.nodes[0].bodies[0].nodes[0].bodies, gg.GraphError,
          r"^Node\(n0, kernel set_condition\)\.bodies: only conditional nodes have bodies"),
    probe("capture-condition-outside-the-block", lambda w: w.s.capture().condition(), gg.CaptureError,
          r"^Capture\.condition: the capture is not running \(use it inside the with block\)"),
    probe("capture-add-if-before-the-block", lambda w: w.s.capture().add_if(w.free), gg.CaptureError,
          r"^Capture\.add_if: the capture is not running \(use it inside the with block\)"),
]


@pytest.mark.parametrize("case", CONDITIONAL)
def test_conditional_nodes(device, case):
    check(case, conditional_world(device), conditional_state)


# Kernel-node attributes


def attributes_world(device: gg.Device) -> types.SimpleNamespace:
    g, other = gg.Graph(device), gg.Graph(device)
    x = device.zeros(64, F32)
    k = g.add_kernel(K.scale, 4, 16, x, 2.0, 64)
    clustered = g.add_kernel(K.scale, 4, 16, x, 2.0, 64)
    g.set_attributes(clustered, cluster_dims=(2, 1, 1))
    empty = g.add_empty()
    big = g.add_kernel(K.scale, 2**20, 16, x, 2.0, 64)
    return world(device, g=g, x=x, k=k, clustered=clustered, empty=empty, big=big,
                 foreign=other.add_kernel(K.scale, 4, 16, x, 2.0, 64), other=other)


def attributes_state(w: Any) -> tuple:
    return graph_state(w.g), graph_state(w.other)


def _window(**given: Any) -> Callable[[Any], object]:
    """A probe's call: set the kernel node's access policy window made of ``given`` (base: the node's Array)."""
    def call(w: Any) -> object:
        fields = {"base": w.x, **given}
        return w.g.set_attributes(w.k, access_policy_window=gg.AccessPolicyWindow(**fields))
    return call


def _set_params_in_exec(w: Any) -> None:
    with w.g.instantiate() as exe:
        exe.set_params(w.clustered, grid=3)


ATTRIBUTES = [
    probe("priority-str", lambda w: w.g.set_attributes(w.k, priority="high"), TypeError,
          r"^set_attributes\(priority\): expected an int, got str$"),
    probe("priority-float", lambda w: w.g.set_attributes(w.k, priority=1.5), TypeError,
          r"^set_attributes\(priority\): expected an int, got float$"),
    probe("priority-bool", lambda w: w.g.set_attributes(w.k, priority=True), TypeError,
          r"^set_attributes\(priority\): expected an int, got bool$"),
    probe("cooperative-str", lambda w: w.g.set_attributes(w.k, cooperative="yes"), TypeError,
          r"^set_attributes\(cooperative\): expected a bool, got str 'yes'$"),
    probe("cooperative-int", lambda w: w.g.set_attributes(w.k, cooperative=1), TypeError,
          r"^set_attributes\(cooperative\): expected a bool, got int 1$"),
    probe("cooperative-grid-too-big", lambda w: w.g.set_attributes(w.big, cooperative=True), ValueError,
          r"^set_attributes\(Node\(n3, kernel scale\)\): it is cooperative, so its 1048576 blocks must all be "
          r"resident at once; this device holds at most \d+ blocks of 16 threads of this kernel$"),
    probe("window-not-a-window", lambda w: w.g.set_attributes(w.k, access_policy_window=w.x), TypeError,
          r"^set_attributes\(access_policy_window\): expected an AccessPolicyWindow or None, got Array$"),
    probe("window-base-none", _window(base=None), TypeError,
          r"^set_attributes\(access_policy_window\): base must be an Array or a non-zero address, got None$"),
    probe("window-address-without-size", _window(base=4096), ValueError,
          r"^set_attributes\(access_policy_window\): nbytes is needed with an address for base$"),
    probe("window-base-numpy", _window(base=np.zeros(4)), TypeError,
          r"^set_attributes\(access_policy_window\): base must be an Array or a non-zero address, got array"),
    probe("window-nbytes-negative", _window(nbytes=-1), ValueError,
          r"^set_attributes\(access_policy_window\): nbytes must be from 1 to this device's largest window, "
          r"\d+ bytes; got -1$"),
    probe("window-nbytes-zero", _window(nbytes=0), ValueError, r"nbytes must be from 1 .*; got 0$"),
    probe("window-nbytes-float", _window(nbytes=4.0), TypeError,
          r"^set_attributes\(access_policy_window\): nbytes must be an int, got float 4\.0$"),
    probe("window-past-its-array", _window(nbytes=10**6), ValueError,
          r"^set_attributes\(access_policy_window\): the window's 1000000 bytes pass the end of its base "
          r"Array\(.*\) \(256 bytes\)$"),
    probe("window-hit-ratio-above-1", _window(hit_ratio=1.5), ValueError,
          r"^set_attributes\(access_policy_window\): hit_ratio must be a number from 0 to 1, got 1\.5$"),
    probe("window-hit-ratio-negative", _window(hit_ratio=-0.1), ValueError, r"hit_ratio must be .*, got -0\.1$"),
    probe("window-hit-ratio-nan", _window(hit_ratio=float("nan")), ValueError, r"hit_ratio must be .*, got nan$"),
    probe("window-hit-ratio-str", _window(hit_ratio="0.5"), TypeError,
          r"^set_attributes\(access_policy_window\): hit_ratio must be a number from 0 to 1, got str '0\.5'$"),
    probe("window-hit-ratio-bool", _window(hit_ratio=True), TypeError, r"hit_ratio must be .*, got bool True$"),
    probe("window-hit-unknown", _window(hit="sticky"), ValueError,
          r"^set_attributes\(access_policy_window\): hit must be one of \('normal', 'streaming', 'persisting'\), "
          r"got 'sticky'$"),
    probe("window-miss-persisting", _window(miss="persisting"), ValueError,
          r"^set_attributes\(access_policy_window\): miss may be 'normal' or 'streaming', not 'persisting'$"),
    probe("cluster-not-dividing-the-grid", lambda w: w.g.set_attributes(w.k, cluster_dims=(3, 1, 1)), ValueError,
          r"^set_attributes\(Node\(n0, kernel scale\)\): its cluster dims \(3, 1, 1\) must divide its grid "
          r"\(4, 1, 1\)$"),
    probe("cluster-too-big", lambda w: w.g.set_attributes(w.k, cluster_dims=(16, 1, 1)), ValueError,
          r"^set_attributes\(cluster_dims\): a cluster holds at most 8 blocks, got \(16, 1, 1\) \(16\)$"),
    probe("cluster-zero", lambda w: w.g.set_attributes(w.k, cluster_dims=(0, 1, 1)), ValueError,
          r"^set_attributes\(cluster_dims\): each dimension must be at least 1, got \(0, 1, 1\)$"),
    probe("cluster-float", lambda w: w.g.set_attributes(w.k, cluster_dims=(2.0, 1, 1)), TypeError,
          r"^set_attributes\(cluster_dims\): expected an int or a tuple of 1 to 3 ints, got \(2\.0, 1, 1\)$"),
    probe("cluster-four-dims", lambda w: w.g.set_attributes(w.k, cluster_dims=(1, 1, 1, 1)), TypeError,
          r"^set_attributes\(cluster_dims\): expected an int or a tuple of 1 to 3 ints, got \(1, 1, 1, 1\)$"),
    probe("domain-unknown", lambda w: w.g.set_attributes(w.k, mem_sync_domain="far"), ValueError,
          r"^set_attributes\(mem_sync_domain\): expected one of \('default', 'remote'\), got 'far'$"),
    probe("domain-int", lambda w: w.g.set_attributes(w.k, mem_sync_domain=1), TypeError,
          r"^set_attributes\(mem_sync_domain\): expected one of \('default', 'remote'\), got 1$"),
    probe("good-and-bad-together", lambda w: w.g.set_attributes(w.k, priority=-1, cluster_dims=(3, 1, 1)),
          ValueError, r"^set_attributes\(Node\(n0, kernel scale\)\): its cluster dims \(3, 1, 1\) must divide"),
    probe("not-a-kernel-node", lambda w: w.g.set_attributes(w.empty, priority=0), gg.GraphError,
          r"^set_attributes\(Node\(n2, empty\)\): the node is a empty node, not a kernel node$"),
    probe("node-of-another-graph", lambda w: w.g.set_attributes(w.foreign, priority=0), gg.GraphError,
          r"^set_attributes: Node\(n0, kernel scale\) belongs to another graph$"),
    probe("not-a-node", lambda w: w.g.set_attributes("n0", priority=0), TypeError,
          r"^set_attributes\(node\): expected a Node, got str$"),
    probe("unknown-attribute", lambda w: w.g.set_attributes(w.k, prio=0), TypeError,
          r"set_attributes\(\) got an unexpected keyword argument 'prio'"),
    probe("copy-from-a-non-kernel", lambda w: w.g.copy_attributes(w.empty, w.k), gg.GraphError,
          r"^copy_attributes\(src\): Node\(n2, empty\) is a empty node; only kernel nodes have attributes$"),
    probe("copy-to-a-non-kernel", lambda w: w.g.copy_attributes(w.k, w.empty), gg.GraphError,
          r"^copy_attributes\(Node\(n2, empty\)\): the node is a empty node, not a kernel node$"),
    probe("copy-to-another-graph", lambda w: w.g.copy_attributes(w.k, w.foreign), gg.GraphError,
          r"^copy_attributes: Node\(n0, kernel scale\) belongs to another graph$"),
    probe("set-params-breaking-the-cluster", lambda w: w.g.set_params(w.clustered, grid=3), ValueError,
          r"^set_params\(Node\(n1, kernel scale\)\): its cluster dims \(2, 1, 1\) must divide its grid \(3, 1, 1\)$"),
    probe("exec-set-params-breaking-the-cluster", _set_params_in_exec, ValueError,
          r"^set_params\(Node\(n1, kernel scale\)\): its cluster dims \(2, 1, 1\) must divide its grid \(3, 1, 1\)$"),
]


@pytest.mark.parametrize("case", ATTRIBUTES)
def test_kernel_node_attributes(device, case):
    check(case, attributes_world(device), attributes_state)


# 2-D and 3-D copies and memsets


def boxes_world(device: gg.Device) -> types.SimpleNamespace:
    grid = device.zeros((4, 16), F32)
    pin = K.pinned(device, np.ones((2, 3), F32))
    g = gg.Graph(device)
    copy = g.add_memcpy(grid, pin, shape=(2, 3), dst_origin=(1, 5))
    memset = g.add_memset(grid, 9.0, shape=(1, 2), origin=(3, 0), after=copy)
    return world(device, s=device.stream(), grid=grid, tile=np.ones((2, 3), F32), pin=pin, g=g, copy=copy,
                 memset=memset, cube=device.zeros((2, 2, 2), F32), deep=device.zeros((1, 1, 2, 3), F32))


def boxes_state(w: Any) -> tuple:
    return contents(w.grid, w.cube), graph_state(w.g), w.s.is_capturing


def _copy(**box: Any) -> Callable[[Any], object]:
    """A probe's call: a box copy of ``w.tile`` into ``w.grid`` on a stream, with ``box``'s keywords."""
    return lambda w: w.s.memcpy(w.grid, w.tile, **{"shape": (2, 3), **box})


BOXES = [
    probe("shape-of-four-dims", _copy(shape=(1, 1, 2, 3)), TypeError,
          r"^memcpy\(shape\): expected an int or a tuple of 1 to 3 ints, got \(1, 1, 2, 3\)$"),
    probe("shape-negative", _copy(shape=(-2, 3)), ValueError,
          r"^memcpy\(shape\): each dimension must be at least 1, got \(-2, 3\)$"),
    probe("shape-zero", _copy(shape=(0, 3)), ValueError, r"^memcpy\(shape\): each dimension must be at least 1"),
    probe("shape-float", _copy(shape=(2.0, 3)), TypeError,
          r"^memcpy\(shape\): expected an int or a tuple of 1 to 3 ints, got \(2\.0, 3\)$"),
    probe("shape-str", _copy(shape="2x3"), TypeError, r"^memcpy\(shape\): expected an int .*, got '2x3'$"),
    probe("box-past-the-source", _copy(shape=(3, 3)), ValueError,
          r"^memcpy\(src\): a box of shape \(3, 3\) at \(0, 0\) passes the end of src \(of shape \(2, 3\)\) along "
          r"axis 0$"),
    probe("box-past-the-last-row", _copy(dst_origin=(3, 0)), ValueError,
          r"^memcpy\(dst\): a box of shape \(2, 3\) at \(3, 0\) passes the end of dst \(of shape \(4, 16\)\) along "
          r"axis 0$"),
    probe("box-past-the-row", _copy(dst_origin=(0, 14)), ValueError,
          r"^memcpy\(dst\): a box of shape \(2, 3\) at \(0, 14\) passes the end of dst .* along axis 1$"),
    probe("origin-of-other-dims", _copy(dst_origin=(0, 0, 0)), ValueError,
          r"^memcpy\(dst_origin\): \(0, 0, 0\) has 3 dimensions and shape \(2, 3\) 2$"),
    probe("origin-negative", _copy(dst_origin=(-1, 0)), ValueError,
          r"^memcpy\(dst_origin\): each dimension must be at least 0, got \(-1, 0\)$"),
    probe("origin-float", _copy(src_origin=(0.5, 0)), TypeError,
          r"^memcpy\(src_origin\): expected an int or a tuple of 1 to 3 ints, got \(0\.5, 0\)$"),
    probe("origin-without-shape", lambda w: w.s.memcpy(w.grid, w.tile, dst_origin=(1, 0)), TypeError,
          r"^memcpy: dst_origin and src_origin place a 2-D or 3-D copy; give its shape too$"),
    probe("dtypes-differ", lambda w: w.s.memcpy(w.grid, np.ones((2, 3)), shape=(2, 3)), TypeError,
          r"^memcpy: dst is float32 and src is float64; a box copy moves elements of one dtype$"),
    probe("four-dimensional-array", lambda w: w.s.memcpy(w.deep, np.ones((1, 1, 2, 3), F32), shape=(2, 3)),
          ValueError, r"^memcpy\(dst\): 2-D and 3-D copies take arrays of 1 to 3 dimensions, got 4$"),
    probe("nbytes-and-shape", lambda w: w.s.memcpy(w.grid, w.tile, 24, shape=(2, 3)), TypeError,
          r"^memcpy: give nbytes \(a 1-D copy\) or shape \(a 2-D or 3-D copy\), not both$"),
    probe("memset-of-a-3d-array", lambda w: w.s.memset(w.cube, 1.0, shape=(2, 2)), ValueError,
          r"^memset\(dst\): memsets are 2-D; dst has 3 dimensions \(set each slice\)$"),
    probe("memset-3d-shape", lambda w: w.s.memset(w.grid, 1.0, shape=(1, 2, 2)), ValueError,
          r"^memset\(shape\): memsets are 2-D, got \(1, 2, 2\)$"),
    probe("memset-box-past-the-end", lambda w: w.s.memset(w.grid, 1.0, shape=(2, 2), origin=(3, 0)), ValueError,
          r"^memset\(dst\): a box of shape \(2, 2\) at \(3, 0\) passes the end of dst \(of shape \(4, 16\)\)"),
    probe("memset-count-and-shape", lambda w: w.s.memset(w.grid, 1.0, 4, shape=(2, 2)), TypeError,
          r"^memset: give count \(a 1-D memset\) or shape \(a 2-D memset\), not both$"),
    probe("memset-origin-without-shape", lambda w: w.s.memset(w.grid, 1.0, origin=(1, 0)), TypeError,
          r"^memset: origin places a 2-D memset; give its shape too$"),
    probe("node-box-past-the-source", lambda w: w.g.add_memcpy(w.grid, w.pin, shape=(3, 3)), ValueError,
          r"^add_memcpy\(src\): a box of shape \(3, 3\) at \(0, 0\) passes the end of src"),
    probe("node-memset-3d-shape", lambda w: w.g.add_memset(w.grid, 1.0, shape=(1, 2, 2)), ValueError,
          r"^add_memset\(shape\): memsets are 2-D, got \(1, 2, 2\)$"),
    probe("set-memcpy-past-the-end", lambda w: w.g.set_memcpy(w.copy, w.grid, w.pin, shape=(2, 3),
                                                              dst_origin=(3, 0)), ValueError,
          r"^set_memcpy\(dst\): a box of shape \(2, 3\) at \(3, 0\) passes the end of dst"),
    probe("exec-moving-a-copy-of-rows", in_exec(lambda w, exe: exe.set_memcpy(
        w.copy, w.grid, w.pin, shape=(2, 3), dst_origin=(0, 5))), gg.GraphUpdateError,
          r"^update refused at Node\(n0, memcpy\): parameters changed \(an executable graph's copy of several rows "
          r"cannot change \(CUDA's rule, measured\)"),
    probe("exec-reshaping-a-memset", in_exec(lambda w, exe: exe.set_memset(
        w.memset, w.grid, 9.0, shape=(2, 2), origin=(0, 0))), gg.GraphUpdateError,
          r"^update refused at Node\(n1, memset\): parameters changed \(a 2-D memset keeps its shape"),
    probe("captured-box-past-the-source", in_capture(lambda w, cap: w.s.memcpy(w.grid, w.tile, shape=(3, 3))),
          ValueError, r"^memcpy\(src\): a box of shape \(3, 3\) at \(0, 0\) passes the end of src"),
]


@pytest.mark.parametrize("case", BOXES)
def test_box_copies(device, case):
    check(case, boxes_world(device), boxes_state)


# Module variables (Device.symbol)

VARIABLES_SOURCE = r"""
__device__ float table[4];
static __device__ int hidden;
__device__ const int fixed = 3;
namespace a { __device__ int twin; }
namespace b { __device__ int twin; }
__device__ double scalar;
struct Pair { int first, second; };
__device__ Pair pair;
extern "C" __global__ void use_variables(float* x) {
    x[threadIdx.x] = table[threadIdx.x] + hidden + fixed + a::twin + b::twin + (float) scalar + pair.first;
}
"""
VARIABLES = gg.Kernel(VARIABLES_SOURCE, "use_variables")
BROKEN = gg.Kernel("__global__ void broken(int* x) { x[0] = ; }", "broken")


def variables_world(device: gg.Device) -> types.SimpleNamespace:
    return world(device, s=device.stream(), table=device.symbol(VARIABLES, "table"), g=gg.Graph(device))


def variables_state(w: Any) -> tuple:
    return contents(w.table), graph_state(w.g), w.s.is_capturing


def _symbol(name: Any, **options: Any) -> Callable[[Any], object]:
    return lambda w: w.device.symbol(VARIABLES, name, **options)


VARIABLES_PROBES = [
    probe("kernel-by-name", lambda w: w.device.symbol("use_variables", "table"), TypeError,
          r"^symbol: kernel must be a gg\.Kernel, whose module holds the variable, got str$"),
    probe("name-int", _symbol(3), TypeError,
          r"^symbol: name must be a str naming a __device__ or __constant__ variable, got 3$"),
    probe("name-missing", _symbol("nope"), ValueError,
          r"^symbol: the module of Kernel\('use_variables'\) on \w+:\d+ has no __device__, __constant__ or "
          r"__managed__ variable 'nope'"),
    probe("name-empty", _symbol(""), ValueError,
          r"^symbol: '' is not a variable's name \(an identifier, in namespaces or not"),
    probe("name-with-a-space", _symbol("ta ble"), ValueError, r"^symbol: 'ta ble' is not a variable's name"),
    probe("name-of-a-template-instance", _symbol("table<int>"), ValueError,
          r"^symbol: 'table<int>' is not a variable's name .*a template's variables are not supported"),
    probe("name-of-the-kernel", _symbol("use_variables"), ValueError,
          r"^symbol: the module of Kernel\('use_variables'\) .* has no .* variable 'use_variables'"),
    probe("static-variable", _symbol("hidden"), ValueError,
          r"^symbol: 'hidden' is declared static in Kernel\('use_variables'\)'s source, so no copy may reach it on "
          r"every backend .*; declare it without static$"),
    probe("const-variable", _symbol("fixed"), ValueError,
          r"^symbol: 'fixed' is declared const in .*; declare it without const$"),
    probe("name-without-its-namespace", _symbol("twin"), ValueError,
          r"^symbol: the module of Kernel\('use_variables'\) .* has no .* variable 'twin'"),
    probe("name-in-several-namespaces", _symbol("a::twin"), TypeError,
          r"^symbol: gpugraph cannot read the type of 'a::twin' from Kernel\('use_variables'\)'s source .*; give "
          r"it: symbol\(kernel, 'a::twin', dtype=\.\.\.\)$"),
    probe("struct-without-dtype", _symbol("pair"), TypeError,
          r"^symbol: gpugraph cannot read the type of 'pair' .* symbol\(kernel, 'pair', dtype=\.\.\.\)$"),
    probe("dtype-unknown", _symbol("table", dtype="nope"), TypeError, r"^dtype: expected a NumPy dtype, got 'nope'$"),
    probe("dtype-object", _symbol("table", dtype=object), TypeError,
          r"^dtype: expected a fixed-size plain-data dtype, got object$"),
    probe("dtype-not-dividing-the-variable", _symbol("scalar", dtype=np.complex128), ValueError,
          r"^symbol: 'scalar' takes 8 bytes, not a whole number of complex128 elements$"),
    probe("kernel-with-a-python-implementation",
          lambda w: w.device.symbol(gg.Kernel(VARIABLES_SOURCE, "use_variables", cpu=lambda launch, x: None), "table"),
          ValueError, r"^symbol: Kernel\('use_variables'\) has a Python implementation \(cpu=\), .*make the Kernel "
                      r"without cpu= to use them$"),
    probe("kernel-that-does-not-compile", lambda w: w.device.symbol(BROKEN, "x"), gg.KernelCompileError,
          r"^kernel 'broken' failed to compile"),
    probe("copy-larger-than-the-variable", lambda w: w.s.memcpy(w.table, np.ones(5, F32)), ValueError,
          r"^memcpy: dst holds 16 bytes and src 20 bytes; the sizes must match or nbytes must be given$"),
    probe("copy-at-an-offset-past-the-end", lambda w: w.s.memcpy(w.table, np.ones(2, F32), shape=2, dst_origin=3),
          ValueError, r"^memcpy\(dst\): a box of shape \(2,\) at \(3,\) passes the end of dst \(of shape \(4,\)\)"),
    probe("copy-of-another-dtype", lambda w: w.s.memcpy(w.table, np.ones(4)), TypeError,
          r"^memcpy: dst is float32 and src is float64; a copy between different dtypes would reinterpret"),
    probe("memset-with-a-str", lambda w: w.s.memset(w.table, "1"), TypeError,
          r"^memset: value must be a scalar, got str$"),
    probe("memset-on-another-device", lambda w: other_device(w.device).stream().memset(w.table, 1.0), ValueError,
          r"^memset\(dst\): Array\(shape=\(4,\), dtype=float32, .*\) belongs to \w+:0, not \w+:\d+$"),
    probe("launch-as-an-int-pointer", lambda w: w.s.launch(K.fill, 1, 4, w.table, 1, 4), TypeError,
          r"^Kernel\('fill'\) argument 0 \(int\* x\): expects int32 data, got an Array of float32$"),
    probe("node-copy-larger-than-the-variable", lambda w: w.g.add_memcpy(w.table, K.pinned(w.device, np.ones(5, F32))),
          ValueError, r"^add_memcpy: dst holds 16 bytes and src 20 bytes"),
    probe("captured-copy-past-the-end", in_capture(lambda w, cap: w.s.memcpy(w.table, np.ones(2, F32), shape=2,
                                                                             dst_origin=3)),
          ValueError, r"^memcpy\(dst\): a box of shape \(2,\) at \(3,\) passes the end of dst"),
]


@pytest.mark.parametrize("case", VARIABLES_PROBES)
def test_module_variables(device, case):
    check(case, variables_world(device), variables_state)


# External semaphores (and the CPU backend's emulated ones)

EMULATED = "its semaphores are gg.EmulatedSemaphore, imported into it (CUDA imports a Vulkan semaphore's fd)"


def semaphores_world(device: gg.Device) -> types.SimpleNamespace:
    timeline, binary = gg.EmulatedSemaphore(3), gg.EmulatedSemaphore(timeline=False)
    w = world(device, s=device.stream(), timeline=timeline, binary=binary, g=gg.Graph(device), es=None, eb=None)
    if device.backend == "cpu":
        w.es, w.eb = device.import_semaphore(timeline), device.import_semaphore(binary, timeline=False)
        w.signal = w.g.add_semaphore_signal([w.es], [5])
        w.empty = w.g.add_empty()
    return w


def semaphores_state(w: Any) -> tuple:
    w.s.synchronize()
    return w.timeline.value, w.binary.value, graph_state(w.g)


def _imported(name: str, call: Callable[[Any], object], raises: type[BaseException], match: str) -> Any:
    return probe(name, call, raises, match, cpu_only=EMULATED)


SEMAPHORES = [
    probe("emulated-value-negative", lambda w: gg.EmulatedSemaphore(-1), ValueError,
          r"^EmulatedSemaphore: a timeline semaphore's value is an int from 0 to 2\*\*64 - 1, got -1$"),
    probe("emulated-value-float", lambda w: gg.EmulatedSemaphore(1.5), ValueError,
          r"^EmulatedSemaphore: .* got 1\.5$"),
    probe("emulated-value-str", lambda w: gg.EmulatedSemaphore("1"), ValueError, r"^EmulatedSemaphore: .* got '1'$"),
    probe("emulated-value-too-big", lambda w: gg.EmulatedSemaphore(2**64), ValueError,
          r"^EmulatedSemaphore: .* got 18446744073709551616$"),
    probe("emulated-timeline-str", lambda w: gg.EmulatedSemaphore(timeline="yes"), TypeError,
          r"^EmulatedSemaphore: timeline must be a bool, got str 'yes'$"),
    probe("emulated-binary-value", lambda w: gg.EmulatedSemaphore(5, timeline=False), ValueError,
          r"^EmulatedSemaphore: a binary semaphore starts signaled \(1\) or not \(0\), got 5$"),
    probe("signal-lower", lambda w: w.timeline.signal(2), ValueError,
          r"^EmulatedSemaphore\.signal: a timeline semaphore's new value must be greater than its value now, 3; "
          r"got 2$"),
    probe("signal-the-same", lambda w: w.timeline.signal(3), ValueError, r"value now, 3; got 3$"),
    probe("signal-timeline-without-value", lambda w: w.timeline.signal(), ValueError,
          r"^EmulatedSemaphore\.signal: a timeline semaphore's value is an int from 0 to 2\*\*64 - 1, got None$"),
    probe("signal-too-big", lambda w: w.timeline.signal(2**64), ValueError,
          r"^EmulatedSemaphore\.signal: .* got 18446744073709551616$"),
    probe("signal-binary-with-value", lambda w: w.binary.signal(1), ValueError,
          r"^EmulatedSemaphore\.signal: a binary semaphore takes no value, got 1$"),
    probe("wait-binary-with-value", lambda w: w.binary.wait(1, timeout=0), ValueError,
          r"^EmulatedSemaphore\.wait: a binary semaphore takes no value, got 1$"),
    probe("wait-timeout-negative", lambda w: w.timeline.wait(4, timeout=-1), ValueError,
          r"^EmulatedSemaphore\.wait\(timeout\): expected seconds >= 0 \(0: do not wait\), or inf or None for no "
          r"limit; got -1$"),
    # (A value reached already: were NaN taken, the wait would return rather than hang the suite.)
    probe("wait-timeout-nan", lambda w: w.timeline.wait(3, timeout=float("nan")), ValueError,
          r"^EmulatedSemaphore\.wait\(timeout\): .*; got nan$"),
    probe("wait-timeout-str", lambda w: w.timeline.wait(4, timeout="1"), TypeError,
          r"^EmulatedSemaphore\.wait\(timeout\): expected seconds \(an int or float\) or None, got str '1'$"),
    probe("wait-timeout-bool", lambda w: w.timeline.wait(4, timeout=True), TypeError,
          r"^EmulatedSemaphore\.wait\(timeout\): .* got bool True$"),
    probe("wait-timeline-without-value", lambda w: w.timeline.wait(timeout=0), ValueError,
          r"^EmulatedSemaphore\.wait: a timeline semaphore's value is an int .* got None$"),
    _imported("import-not-a-semaphore", lambda w: w.device.import_semaphore(5), TypeError,
              r"^import_semaphore: the CPU backend imports a gg\.EmulatedSemaphore .*, got int$"),
    _imported("import-timeline-as-binary", lambda w: w.device.import_semaphore(gg.EmulatedSemaphore(), timeline=False),
              ValueError, r"^import_semaphore: EmulatedSemaphore\(timeline, value=0\) is a timeline semaphore, "
                          r"imported with timeline=False$"),
    _imported("import-timeline-str", lambda w: w.device.import_semaphore(gg.EmulatedSemaphore(), timeline="yes"),
              TypeError, r"^import_semaphore: timeline must be a bool, got str 'yes'$"),
    _imported("stream-signal-without-values", lambda w: w.s.signal_semaphores(w.es), ValueError,
              r"^signal_semaphores: ExternalSemaphore\(timeline, device=cpu:0\) is a timeline semaphore, signaled "
              r"to and waited for at a value; give values$"),
    _imported("stream-signal-values-count", lambda w: w.s.signal_semaphores([w.es, w.es], [4, 5, 6]), ValueError,
              r"^signal_semaphores: 3 values for 2 semaphores; give one per semaphore or one for all$"),
    _imported("stream-signal-binary-with-value", lambda w: w.s.signal_semaphores(w.eb, 1), ValueError,
              r"^signal_semaphores: ExternalSemaphore\(binary, device=cpu:0\) is binary and takes no value \(0\), "
              r"got 1$"),
    _imported("stream-signal-none", lambda w: w.s.signal_semaphores([], []), ValueError,
              r"^signal_semaphores: no semaphores given"),
    _imported("stream-signal-not-imported", lambda w: w.s.signal_semaphores(w.timeline, 4), TypeError,
              r"^signal_semaphores: expected an ExternalSemaphore or a list of them, got EmulatedSemaphore$"),
    _imported("stream-signal-value-str", lambda w: w.s.signal_semaphores(w.es, "4"), ValueError,
              r"^signal_semaphores\(values\): a timeline semaphore's value is an int .* got '4'$"),
    _imported("stream-signal-on-another-device", lambda w: other_device(w.device).stream().signal_semaphores(w.es, 4),
              ValueError, r"^signal_semaphores: ExternalSemaphore\(timeline, device=cpu:0\) was imported into cpu:0, "
                          r"not cpu:\d+, where this work runs$"),
    _imported("stream-wait-without-values", lambda w: w.s.wait_semaphores(w.es), ValueError,
              r"^wait_semaphores: ExternalSemaphore\(timeline, device=cpu:0\) is a timeline semaphore"),
    _imported("node-signal-without-values", lambda w: w.g.add_semaphore_signal(w.es), ValueError,
              r"^add_semaphore_signal: ExternalSemaphore\(timeline, device=cpu:0\) is a timeline semaphore"),
    _imported("node-wait-values-count", lambda w: w.g.add_semaphore_wait(w.es, [1, 2]), ValueError,
              r"^add_semaphore_wait: 2 values for 1 semaphores"),
    _imported("node-not-a-semaphore", lambda w: w.g.add_semaphore_signal("sem", 1), TypeError,
              r"^add_semaphore_signal: expected an ExternalSemaphore or a list of them, got str$"),
    _imported("set-semaphores-on-an-empty-node", lambda w: w.g.set_semaphores(w.empty, w.es, 1), gg.GraphError,
              r"^set_semaphores\(Node\(n1, empty\)\): the node is a empty node, not a semaphore_signal or "
              r"semaphore_wait node$"),
    _imported("exec-set-semaphores-another-count", in_exec(lambda w, exe: exe.set_semaphores(
        w.signal, [w.es, w.es], [5, 6])), gg.GraphUpdateError,
              r"^update refused at Node\(n0, semaphore_signal\): parameters changed \(an executable graph's "
              r"semaphore node keeps its number of semaphores .*: it had 1, got 2\)$"),
    _imported("exec-set-semaphores-binary-value", in_exec(lambda w, exe: exe.set_semaphores(w.signal, w.eb, 1)),
              ValueError, r"^set_semaphores: ExternalSemaphore\(binary, device=cpu:0\) is binary and takes no value"),
]


@pytest.mark.parametrize("case", SEMAPHORES)
def test_semaphores(device, case):
    check(case, semaphores_world(device), semaphores_state)


# User objects


def user_objects_world(device: gg.Device) -> types.SimpleNamespace:
    destroyed: list[str] = []
    u = device.user_object(lambda: destroyed.append("u"), 2)
    held = device.user_object(lambda: destroyed.append("held"), 2)
    g = gg.Graph(device)
    g.retain_user_object(held, 1)
    gone = device.user_object(lambda: None)
    gone.release()
    return world(device, u=u, held=held, gone=gone, g=g, destroyed=destroyed)


def user_objects_state(w: Any) -> tuple:
    return w.u.references, w.held.references, w.gone.references, tuple(w.destroyed)


USER_OBJECTS = [
    probe("destroy-not-callable", lambda w: w.device.user_object(5), TypeError,
          r"^user_object\(destroy\): expected a callable, got int$"),
    probe("destroy-none", lambda w: w.device.user_object(None), TypeError,
          r"^user_object\(destroy\): expected a callable, got NoneType$"),
    probe("count-zero", lambda w: w.device.user_object(print, 0), ValueError,
          r"^user_object\(count\): expected a positive int, got 0$"),
    probe("count-negative", lambda w: w.device.user_object(print, -1), ValueError,
          r"^user_object\(count\): expected a positive int, got -1$"),
    probe("count-float", lambda w: w.device.user_object(print, 1.5), TypeError,
          r"^user_object\(count\): expected a positive int, got float 1\.5$"),
    probe("count-bool", lambda w: w.device.user_object(print, True), TypeError,
          r"^user_object\(count\): expected a positive int, got bool True$"),
    probe("count-str", lambda w: w.device.user_object(print, "2"), TypeError,
          r"^user_object\(count\): expected a positive int, got str '2'$"),
    probe("count-past-int-max", lambda w: w.device.user_object(print, 2**31), ValueError,
          r"^user_object\(count\): at most 2147483647 references a call \(CUDA's INT_MAX\), got 2147483648$"),
    probe("retain-zero", lambda w: w.u.retain(0), ValueError,
          r"^UserObject\.retain\(count\): expected a positive int, got 0$"),
    probe("retain-negative", lambda w: w.u.retain(-1), ValueError, r"^UserObject\.retain\(count\): .* got -1$"),
    probe("retain-float", lambda w: w.u.retain(1.5), TypeError, r"^UserObject\.retain\(count\): .* got float 1\.5$"),
    probe("retain-past-int-max", lambda w: w.u.retain(2**40), ValueError,
          r"^UserObject\.retain\(count\): at most 2147483647 references a call .*, got 1099511627776$"),
    probe("release-more-than-held", lambda w: w.u.release(3), gg.GraphError,
          r"^UserObject\.release\(3\): the caller holds 2 reference\(s\)$"),
    probe("release-zero", lambda w: w.u.release(0), ValueError, r"^UserObject\.release\(count\): .* got 0$"),
    probe("release-str", lambda w: w.u.release("1"), TypeError, r"^UserObject\.release\(count\): .* got str '1'$"),
    probe("retain-after-the-last-release", lambda w: w.gone.retain(), gg.GraphError,
          r"^UserObject\.retain: the caller holds no reference to UserObject\(\w+, references=0\), so it may be "
          r"gone; keep one while handing references out$"),
    probe("graph-retain-not-a-user-object", lambda w: w.g.retain_user_object(print), TypeError,
          r"^retain_user_object\(obj\): expected a UserObject \(Device\.user_object\), got "
          r"builtin_function_or_method$"),
    probe("graph-retain-zero", lambda w: w.g.retain_user_object(w.u, 0), ValueError,
          r"^retain_user_object\(count\): expected a positive int, got 0$"),
    probe("graph-retain-move-str", lambda w: w.g.retain_user_object(w.u, 1, move="yes"), TypeError,
          r"^retain_user_object\(move\): expected a bool, got str 'yes'$"),
    probe("graph-move-more-than-held", lambda w: w.g.retain_user_object(w.u, 3, move=True), gg.GraphError,
          r"^retain_user_object\(move=True\): the caller holds 2 reference\(s\) of UserObject\(.*\), not 3$"),
    probe("graph-retain-after-the-last-release", lambda w: w.g.retain_user_object(w.gone), gg.GraphError,
          r"^retain_user_object: the caller holds no reference to UserObject"),
    probe("graph-release-not-held", lambda w: w.g.release_user_object(w.u), gg.GraphError,
          r"^release_user_object\(UserObject\(\w+, references=2\), 1\): the graph holds 0 reference\(s\)$"),
    probe("graph-release-more-than-held", lambda w: w.g.release_user_object(w.held, 2), gg.GraphError,
          r"^release_user_object\(UserObject\(.*\), 2\): the graph holds 1 reference\(s\)$"),
    probe("graph-release-zero", lambda w: w.g.release_user_object(w.held, 0), ValueError,
          r"^release_user_object\(count\): expected a positive int, got 0$"),
    probe("graph-release-not-a-user-object", lambda w: w.g.release_user_object("u"), TypeError,
          r"^release_user_object\(obj\): expected a UserObject, got str$"),
]


@pytest.mark.parametrize("case", USER_OBJECTS)
def test_user_objects(device, case):
    check(case, user_objects_world(device), user_objects_state)


# Memory: allocations, Arrays, copies, memsets, memory operations, host memory


def memory_world(device: gg.Device) -> types.SimpleNamespace:
    read_only = np.ones(N, F32)
    read_only.flags.writeable = False
    g = gg.Graph(device)
    return world(device, s=device.stream(), x=device.zeros(N, F32), flags=device.zeros(N, U32), h=np.ones(N, F32),
                 read_only=read_only, g=g, ops=g.add_mem_ops([gg.WriteValue(device.zeros(1, U32), 1)]))


def memory_state(w: Any) -> tuple:
    return contents(w.x, w.flags), graph_state(w.g)


def _set_field(name: str, value: Any) -> Callable[[Any], object]:
    return lambda w: setattr(w.x, name, value)


MEMORY = [
    probe("empty-negative", lambda w: w.device.empty(-1), ValueError,
          r"^shape: dimensions must be non-negative, got -1$"),
    probe("empty-float-shape", lambda w: w.device.empty(2.5), TypeError,
          r"^shape: expected an int or a tuple of ints, got 2\.5$"),
    probe("empty-unknown-dtype", lambda w: w.device.empty(N, "nope"), TypeError,
          r"^dtype: expected a NumPy dtype, got 'nope'$"),
    probe("empty-object-dtype", lambda w: w.device.empty(N, object), TypeError,
          r"^dtype: expected a fixed-size plain-data dtype, got object$"),
    probe("empty-more-than-the-machine", lambda w: w.device.empty(2**62, np.uint8), MemoryError,
          r"^\w+: out of memory: cannot allocate 4611686018427387904 bytes of device memory"),
    probe("asarray-ragged", lambda w: w.device.asarray([[1], [1, 2]]), ValueError,
          r"^asarray\(data\): NumPy makes no array of list \[\[1\], \[1, 2\]\]: setting an array element with a "
          r"sequence"),
    probe("asarray-none", lambda w: w.device.asarray(None), TypeError,
          r"^asarray\(data\): NoneType None is not an array of numbers \(NumPy would hold it as Python objects"),
    probe("asarray-unknown-dtype", lambda w: w.device.asarray([1, 2], dtype="nope"), TypeError,
          r"^dtype: expected a NumPy dtype, got 'nope'$"),
    probe("asarray-of-an-array", lambda w: w.device.asarray(w.x), TypeError,
          r"^asarray\(data\): Array\(.*\) is device memory already, not host data; copy it on the device with "
          r"stream\.memcpy\(dev\.empty_like\(array\), array\)"),
    probe("empty-like-str", lambda w: w.device.empty_like("x"), TypeError,
          r"^empty_like: expected an Array or NumPy array, got str$"),
    probe("pinned-negative", lambda w: w.device.pinned(-1), ValueError,
          r"^shape: dimensions must be non-negative, got -1$"),
    probe("numpy-of-an-array", lambda w: np.asarray(w.x), TypeError,
          r"^np\.asarray/np\.array: Array\(.*\) is device memory, not a host sequence"),
    probe("array-index", lambda w: w.x[0], TypeError,
          r"^Array\(shape=\(8,\), .*\)\[0\]: an Array is device memory, with no indexing, slicing or views; use "
          r"array\.to_numpy\(\)\[\.\.\.\] for a host copy"),
    probe("array-slice", lambda w: w.x[2:4], TypeError,
          r"^Array\(.*\)\[slice\(2, 4, None\)\]: an Array is device memory, with no indexing, slicing or views"),
    probe("array-item-assignment", lambda w: w.x.__setitem__(0, 1.0), TypeError,
          r"^Array\(.*\)\[0\] = \.\.\.: an Array is device memory, with no item assignment; use "
          r"stream\.memset\(array, value\)"),
    probe("array-address-assigned", _set_field("ptr", 0), AttributeError,
          r"^Array\.ptr: an Array's fields are read-only \(they describe the memory it was allocated as\); got an "
          r"assignment of int 0"),
    probe("array-shape-assigned", _set_field("shape", (10**6,)), AttributeError,
          r"^Array\.shape: an Array's fields are read-only .* got an assignment of tuple \(1000000,\)",
          state=lambda w: (w.x.shape, w.x.nbytes, contents(w.x))),
    probe("array-pickled", lambda w: pickle.dumps(w.x), TypeError,
          r"^Array\(.*\) cannot be pickled or copied by the copy module: it is device memory of this process; "
          r"pickle array\.to_numpy\(\) instead"),
    probe("memset-of-numpy", lambda w: w.s.memset(w.h, 1.0), TypeError,
          r"^memset\(dst\): expected a device Array, got ndarray$"),
    probe("memset-value-str", lambda w: w.s.memset(w.x, "1"), TypeError, r"^memset: value must be a scalar, got str$"),
    probe("memset-8-byte-pattern", lambda w: w.s.memset(w.device.zeros(4, np.float64), 2.0), ValueError,
          r"^memset: memsets write 1-, 2- or 4-byte patterns; the float64 value 2\.0 has no such pattern"),
    probe("memset-float-out-of-range", lambda w: w.s.memset(w.x, 1e40), ValueError,
          r"^memset: value 1e\+40 is not representable as float32$"),
    probe("memset-numpy-int-out-of-range", lambda w: w.s.memset(w.flags, np.int64(-1)), ValueError,
          r"^memset: value np\.int64\(-1\) is not representable as uint32$"),
    probe("memset-fraction-in-ints", lambda w: w.s.memset(w.flags, 1.5), ValueError,
          r"^memset: value 1\.5 is not representable as uint32$"),
    probe("memset-count-past-the-end", lambda w: w.s.memset(w.x, 1.0, N + 1), ValueError,
          r"^memset: count must be an int in 0\.\.8 \(elements of dst\), got 9$"),
    probe("memset-count-negative", lambda w: w.s.memset(w.x, 1.0, -1), ValueError,
          r"^memset: count must be an int in 0\.\.8 \(elements of dst\), got -1$"),
    probe("memcpy-sizes-differ", lambda w: w.s.memcpy(w.x, np.ones(4, F32)), ValueError,
          r"^memcpy: dst holds 32 bytes and src 16 bytes; the sizes must match or nbytes must be given$"),
    probe("memcpy-nbytes-past-the-end", lambda w: w.s.memcpy(w.x, w.h, 64), ValueError,
          r"^memcpy: nbytes=64 exceeds dst \(32 bytes\) or src \(32 bytes\)$"),
    probe("memcpy-nbytes-negative", lambda w: w.s.memcpy(w.x, w.h, -1), ValueError,
          r"^memcpy: nbytes must be a non-negative int, got -1$"),
    probe("memcpy-into-read-only", lambda w: w.s.memcpy(w.read_only, w.x), ValueError,
          r"^memcpy\(dst\): the NumPy array is read-only, and this copy writes it; copy into a writable array$"),
    probe("memcpy-strided", lambda w: w.s.memcpy(w.x, np.ones(2 * N, F32)[::2]), ValueError,
          r"^memcpy\(src\): NumPy arrays must be C-contiguous, got strides \(8,\); copy it into one first "
          r"\(np\.ascontiguousarray\(array\)\)$"),
    probe("memcpy-list", lambda w: w.s.memcpy(w.x, [1.0] * N), TypeError,
          r"^memcpy\(src\): expected an Array or a NumPy array, got list$"),
    probe("memcpy-objects", lambda w: w.s.memcpy(np.empty(4, object), w.x, 16), TypeError,
          r"^memcpy\(dst\): the NumPy array has dtype object, which holds Python objects; copies move plain data "
          r"only"),
    probe("node-copy-of-no-bytes", lambda w: w.g.add_memcpy(w.x, w.h, 0), ValueError,
          r"^add_memcpy: a copy node must copy at least one byte, got 0 bytes \(CUDA refuses a 0-byte copy node\)$"),
    probe("node-memset-of-no-elements", lambda w: w.g.add_memset(w.x, 1.0, 0), ValueError,
          r"^add_memset: a memset node must set at least one element, got 0"),
    probe("wait-value-on-floats", lambda w: w.s.wait_value(w.x, 1), TypeError,
          r"^wait_value: WaitValue\(target=Array\(.*\), value=1, condition='geq', index=0\): target must hold 4- or "
          r"8-byte integers \(CUDA's 32- and 64-bit memory operations\), got float32$"),
    probe("wait-value-index-past-the-end", lambda w: w.s.wait_value(w.flags, 1, index=N), ValueError,
          r"^wait_value: WaitValue\(.*\): index must be an int from 0 to 7, got 8$"),
    probe("wait-value-condition-unknown", lambda w: w.s.wait_value(w.flags, 1, "gt"), ValueError,
          r"^wait_value: WaitValue\(.*\): condition must be one of geq, eq, and, nor, got 'gt'$"),
    probe("wait-value-too-big", lambda w: w.s.wait_value(w.flags, 2**32), ValueError,
          r"^wait_value: WaitValue\(.*\): value must be an int that uint32 holds \(0 to 4294967295\), got "
          r"4294967296$"),
    probe("write-value-fraction", lambda w: w.s.write_value(w.flags, 1.5), ValueError,
          r"^write_value: WriteValue\(.*\): value must be an int that uint32 holds .*, got 1\.5$"),
    probe("write-value-on-2-byte-ints", lambda w: w.s.write_value(w.device.zeros(N, np.int16), 1), TypeError,
          r"^write_value: WriteValue\(.*\): target must hold 4- or 8-byte integers .*, got int16$"),
    probe("mem-ops-none", lambda w: w.g.add_mem_ops([]), ValueError,
          r"^add_mem_ops: no operations given \(a node of none does nothing; add an empty node instead\)$"),
    probe("mem-ops-not-operations", lambda w: w.g.add_mem_ops([1]), TypeError,
          r"^add_mem_ops: expected gg\.WaitValue or gg\.WriteValue operations, got int$"),
    probe("exec-mem-ops-another-count", in_exec(lambda w, exe: exe.set_mem_ops(
        w.ops, [gg.WriteValue(w.flags, 1), gg.WriteValue(w.flags, 2)])), gg.GraphUpdateError,
          r"^update refused at Node\(n0, mem_ops\): parameters changed"),
    probe("register-host-list", lambda w: w.device.register_host([1, 2]), TypeError,
          r"^register_host\(array\): expected a NumPy array, got list$"),
    probe("register-host-read-only-str", lambda w: w.device.register_host(np.zeros(4), read_only="yes"), TypeError,
          r"^register_host\(read_only\): expected a bool, got str 'yes'$"),
]


@pytest.mark.parametrize("case", MEMORY)
def test_memory(device, case):
    check(case, memory_world(device), memory_state)


# Graph editing: nodes, edges, clones, child graphs, node setters


def editing_world(device: gg.Device) -> types.SimpleNamespace:
    g, other, child = gg.Graph(device), gg.Graph(device), gg.Graph(device)
    x = device.zeros(N, F32)
    a = g.add_empty()
    b = g.add_empty(after=a)
    k = g.add_kernel(K.scale, 1, N, x, 2.0, N, after=b)
    h = g.add_host(lambda: None, after=k)
    record = g.add_event_record(device.event())
    gone = g.add_empty()
    g.remove_node(gone)
    child.add_empty()
    return world(device, g=g, other=other, x=x, a=a, b=b, k=k, h=h, record=record, gone=gone, child=child,
                 foreign=other.add_empty())


def editing_state(w: Any) -> tuple:
    return graph_state(w.g), graph_state(w.other)


def _nested(depth: int, device: gg.Device) -> gg.Graph:
    """A graph whose child graphs nest ``depth`` levels deep (itself included)."""
    graph = gg.Graph(device)
    graph.add_empty()
    for _ in range(depth - 1):
        outer = gg.Graph(device)
        outer.add_child(graph)
        graph = outer
    return graph


EDITING = [
    probe("graph-of-a-str", lambda w: gg.Graph("cpu"), TypeError,
          r"^Graph\(device\): expected a Device or None, got str$"),
    probe("graph-of-an-int", lambda w: gg.Graph(1), TypeError,
          r"^Graph\(device\): expected a Device or None, got int$"),
    probe("edge-to-itself", lambda w: w.g.add_dependency(w.a, w.a), gg.GraphError,
          r"^add_dependency\(Node\(n0, empty\), Node\(n0, empty\)\): Node\(n0, empty\) already comes before "
          r"Node\(n0, empty\); the edge would make a cycle$"),
    probe("edge-closing-a-cycle", lambda w: w.g.add_dependency(w.k, w.a), gg.GraphError,
          r"^add_dependency\(Node\(n2, kernel scale\), Node\(n0, empty\)\): .* the edge would make a cycle$"),
    probe("edge-twice", lambda w: w.g.add_dependency(w.a, w.b), gg.GraphError,
          r"^add_dependency\(Node\(n0, empty\), Node\(n1, empty\)\): the edge exists already$"),
    probe("edge-to-another-graph", lambda w: w.g.add_dependency(w.a, w.foreign), gg.GraphError,
          r"^add_dependency: Node\(n0, empty\) belongs to another graph$"),
    probe("edge-to-a-str", lambda w: w.g.add_dependency(w.a, "n1"), TypeError,
          r"^add_dependency: expected Nodes, got str for 'to'$"),
    probe("edge-of-an-unknown-kind", lambda w: w.g.add_dependency(w.a, w.k, kind="soft"), ValueError,
          r"^add_dependency\(kind\): expected one of full, programmatic, launch_order, got 'soft'$"),
    probe("programmatic-edge-from-an-empty-node", lambda w: w.g.add_dependency(w.a, w.k, kind="programmatic"),
          gg.GraphError, r"^add_dependency\(Node\(n0, empty\), Node\(n2, kernel scale\), kind='programmatic'\): a "
                         r"programmatic edge joins two kernel nodes; got a empty node to a kernel node$"),
    probe("edge-from-a-removed-node", lambda w: w.g.add_dependency(w.gone, w.a), gg.GraphError,
          r"^add_dependency: Node\(n5, empty\) is no longer in this graph \(it was removed with remove_node\)$"),
    probe("kind-of-no-edge", lambda w: w.g.dependency_kind(w.a, w.k), gg.GraphError,
          r"^dependency_kind\(Node\(n0, empty\), Node\(n2, kernel scale\)\): Node\(n2, kernel scale\) does not wait "
          r"for Node\(n0, empty\) directly$"),
    probe("remove-no-edge", lambda w: w.g.remove_dependency(w.a, w.k), gg.GraphError,
          r"^remove_dependency\(Node\(n0, empty\), Node\(n2, kernel scale\)\): there is no such edge$"),
    probe("remove-a-node-of-another-graph", lambda w: w.g.remove_node(w.foreign), gg.GraphError,
          r"^remove_node: Node\(n0, empty\) belongs to another graph$"),
    probe("remove-a-str", lambda w: w.g.remove_node("n0"), TypeError,
          r"^remove_node\(node\): expected a Node, got str$"),
    probe("remove-twice", lambda w: w.g.remove_node(w.gone), gg.GraphError,
          r"^remove_node: Node\(n5, empty\) is no longer in this graph \(it was removed with remove_node\)$"),
    probe("after-a-removed-node", lambda w: w.g.add_empty(after=w.gone), gg.GraphError,
          r"^add_empty\(after=\.\.\.\): Node\(n5, empty\) is no longer in this graph"),
    probe("after-a-node-twice", lambda w: w.g.add_empty(after=[w.a, w.a]), gg.GraphError,
          r"^add_empty\(after=\.\.\.\): Node\(n0, empty\) is listed twice$"),
    probe("after-a-str", lambda w: w.g.add_empty(after="n0"), TypeError,
          r"^add_empty\(after=\.\.\.\): expected Nodes, got str$"),
    probe("after-an-int", lambda w: w.g.add_host(print, after=1), TypeError,
          r"^add_host\(after=\.\.\.\): expected a Node or an iterable of Nodes, got int 1$"),
    probe("after-an-array", lambda w: w.g.add_empty(after=w.x), TypeError,
          r"^add_empty\(after=\.\.\.\): expected a Node or an iterable of Nodes, got Array Array\(shape=\(8,\)"),
    probe("find-in-a-graph-not-cloned", lambda w: w.g.find(w.foreign), gg.GraphError,
          r"^find: this graph is not a clone$"),
    probe("find-a-removed-node", lambda w: w.g.clone().find(w.gone), gg.GraphError,
          r"^find: Node\(n5, empty\) was removed from the graph this one was cloned from \(remove_node\)$"),
    probe("child-itself", lambda w: w.g.add_child(w.g), gg.GraphError, r"^add_child: a graph cannot contain itself$"),
    probe("child-not-a-graph", lambda w: w.g.add_child(5), TypeError,
          r"^add_child\(graph\): expected a Graph, got int$"),
    probe("child-of-another-device", lambda w: w.g.add_child(gg.Graph(other_device(w.device))), gg.GraphError,
          r"^add_child: the child graph is on \w+:\d+, this graph on \w+:0$"),
    probe("child-nesting-past-64-levels", lambda w: w.g.add_child(_nested(64, w.device)), gg.GraphError,
          r"^add_child: the child graph would make graphs nest 65 levels deep \(this graph is a graph of its own, the "
          r"child holds 64\); gpugraph allows at most 64 levels of child graphs$"),
    probe("set-child-graph-on-an-empty-node", lambda w: w.g.set_child_graph(w.a, w.child), gg.GraphError,
          r"^set_child_graph\(Node\(n0, empty\)\): the node is a empty node, not a graph node$"),
    probe("set-host-not-callable", lambda w: w.g.set_host(w.h, 5), TypeError,
          r"^set_host\(fn\): expected a callable, got int$"),
    probe("host-not-callable", lambda w: w.g.add_host(5), TypeError, r"^add_host\(fn\): expected a callable, got int$"),
    probe("set-event-on-an-empty-node", lambda w: w.g.set_event(w.a, w.device.event()), gg.GraphError,
          r"^set_event\(Node\(n0, empty\)\): the node is a empty node, not a event_record or event_wait node$"),
    probe("set-event-str", lambda w: w.g.set_event(w.record, "e"), TypeError,
          r"^set_event\(event\): expected an Event, got str$"),
    probe("set-event-of-another-device", lambda w: w.g.set_event(w.record, other_device(w.device).event()),
          ValueError, r"^set_event\(event\): Event\(device=\w+:\d+, timing=False\) belongs to \w+:\d+, not \w+:0$"),
    probe("event-wait-none", lambda w: w.g.add_event_wait(None), TypeError,
          r"^add_event_wait\(event\): expected an Event, got NoneType$"),
    probe("set-params-on-an-empty-node", lambda w: w.g.set_params(w.a, w.x, 1.0, N), gg.GraphError,
          r"^set_params\(Node\(n0, empty\)\): the node is a empty node, not a kernel node$"),
    probe("set-params-with-a-str", lambda w: w.g.set_params(w.k, w.x, "2", N), TypeError,
          r"^Kernel\('scale'\) argument 1 \(float f\): expects a C float scalar, got str '2'$"),
    probe("set-params-kernel-not-a-kernel", lambda w: w.g.set_params(w.k, w.x, 2.0, N, kernel="shift"), TypeError,
          r"^set_params\(kernel\): expected a Kernel, got str$"),
    probe("set-params-grid-zero", lambda w: w.g.set_params(w.k, grid=0), ValueError,
          r"^grid: dimension x must be in 1\.\.2147483647, got 0$"),
    probe("dot-flag-unknown", lambda w: w.g.debug_dot_print(os.devnull, flags=("nope",)), ValueError,
          r"^debug_dot_print\(flags\): unknown flag 'nope'; the flags are verbose, "),
    probe("dot-flags-a-str", lambda w: w.g.debug_dot_print(os.devnull, flags="verbose"), TypeError,
          r"^debug_dot_print\(flags\): expected an iterable of flag names, got the str 'verbose'$"),
    probe("dot-path-int", lambda w: w.g.debug_dot_print(5), TypeError,
          r"^debug_dot_print\(path\): expected a str or path, got int$"),
    probe("node-params-assigned", lambda w: setattr(w.a, "params", None), AttributeError,
          r"property 'params' of 'Node' object has no setter"),
]


@pytest.mark.parametrize("case", EDITING)
def test_graph_editing(device, case):
    check(case, editing_world(device), editing_state)


# Instantiating, launching and changing executable graphs

FIRE_SOURCE = r"""
#ifdef __CUDACC_RTC__  // NVRTC without the toolkit's headers: declared as CUDA's header does
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUstream_st* cudaStream_t;
extern "C" __device__ int cudaGraphLaunch(cudaGraphExec_t graph, cudaStream_t stream);
#define cudaStreamGraphFireAndForget ((cudaStream_t)0x0200000000000000ull)
#endif
extern "C" __global__ void fire(cudaGraphExec_t graph) {
    if (threadIdx.x == 0) cudaGraphLaunch(graph, cudaStreamGraphFireAndForget);
}
"""
FIRE = gg.Kernel(FIRE_SOURCE, "fire")


def exec_world(device: gg.Device) -> types.SimpleNamespace:
    x = device.zeros(N, F32)
    g, launched, closed_graph = gg.Graph(device), gg.Graph(device), gg.Graph(device)
    k = g.add_kernel(K.scale, 1, N, x, 2.0, N)
    h = g.add_host(lambda: None, after=k)
    launched.add_kernel(K.scale, 1, N, x, 2.0, N)
    closed_graph.add_kernel(K.scale, 1, N, x, 2.0, N)
    closed = closed_graph.instantiate()
    closed.close()
    return world(device, x=x, g=g, k=k, h=h, s=device.stream(), launched=launched, closed=closed,
                 closed_node=closed_graph.nodes[0], foreign=gg.Graph(device).add_kernel(K.scale, 1, N, x, 2.0, N))


def exec_state(w: Any) -> tuple:
    w.s.synchronize()
    return graph_state(w.g), contents(w.x), w.s.is_capturing


def _disabled_into_capture(w: Any) -> None:
    with w.g.instantiate() as exe:
        exe.set_enabled(w.k, False)
        with w.s.capture():
            exe.launch(w.s)


EXEC = [
    probe("upload-to-a-str", lambda w: w.g.instantiate(upload="s"), TypeError,
          r"^instantiate\(upload\): expected a Stream, got str$"),
    probe("upload-to-another-device", lambda w: w.g.instantiate(upload=other_device(w.device).stream()), ValueError,
          r"^instantiate\(upload\): the stream is on \w+:\d+, the graph on \w+:0$"),
    probe("auto-free-str", lambda w: w.g.instantiate(auto_free_on_launch="yes"), TypeError,
          r"^instantiate\(auto_free_on_launch\): expected a bool, got str 'yes'$"),
    probe("auto-free-int", lambda w: w.g.instantiate(auto_free_on_launch=1), TypeError,
          r"^instantiate\(auto_free_on_launch\): expected a bool, got int 1$"),
    probe("node-priority-str", lambda w: w.g.instantiate(use_node_priority="x"), TypeError,
          r"^instantiate\(use_node_priority\): expected a bool, got str 'x'$"),
    probe("device-launch-none", lambda w: w.g.instantiate(device_launch=None), TypeError,
          r"^instantiate\(device_launch\): expected a bool, got NoneType None$"),
    probe("device-launch-with-a-host-node", lambda w: w.g.instantiate(device_launch=True), gg.GraphInstantiateError,
          r"^instantiate refused at Node\(n1, host\): node operation not supported \(device_launch: a graph launched "
          r"from the device holds only kernel, memcpy, memset and child-graph nodes, got a node of kind host\)$"),
    probe("device-launch-of-an-empty-graph", lambda w: gg.Graph(w.device).instantiate(device_launch=True),
          gg.GraphInstantiateError, r"^instantiate refused: instantiate error \(device_launch: the graph is empty"),
    probe("device-launch-and-auto-free", lambda w: w.launched.instantiate(device_launch=True, auto_free_on_launch=True),
          ValueError, r"^instantiate: auto_free_on_launch and device_launch cannot be combined \(CUDA refuses it\)$"),
    probe("launch-on-a-str", in_exec(lambda w, exe: exe.launch("s")), TypeError,
          r"^launch\(stream\): expected a Stream, got str$"),
    probe("launch-on-none", in_exec(lambda w, exe: exe.launch(None)), TypeError,
          r"^launch\(stream\): expected a Stream, got NoneType$"),
    probe("launch-on-another-device", in_exec(lambda w, exe: exe.launch(other_device(w.device).stream())), ValueError,
          r"^launch\(stream\): the stream is on \w+:\d+, the graph on \w+:0$"),
    probe("upload-to-an-int", in_exec(lambda w, exe: exe.upload(3)), TypeError,
          r"^upload\(stream\): expected a Stream, got int$"),
    probe("set-enabled-str", in_exec(lambda w, exe: exe.set_enabled(w.k, "no")), TypeError,
          r"^set_enabled\(enabled\): expected a bool \(True or False\), got 'no' \(str\)$"),
    probe("set-enabled-int", in_exec(lambda w, exe: exe.set_enabled(w.k, 0)), TypeError,
          r"^set_enabled\(enabled\): expected a bool \(True or False\), got 0 \(int\)$"),
    probe("set-enabled-on-a-host-node", in_exec(lambda w, exe: exe.set_enabled(w.h, False)), gg.GraphError,
          r"^set_enabled\(Node\(n1, host\)\): the node is a host node, not a kernel or memcpy or memset node$"),
    probe("is-enabled-of-another-graph", in_exec(lambda w, exe: exe.is_enabled(w.foreign)), gg.GraphError,
          r"^is_enabled: Node\(n0, kernel scale\) is not a node of the graph this executable graph was made from "
          r"\(or last updated with\)$"),
    probe("is-enabled-of-a-str", in_exec(lambda w, exe: exe.is_enabled("n0")), TypeError,
          r"^is_enabled\(node\): expected a Node, got str 'n0'$"),
    probe("update-with-a-str", in_exec(lambda w, exe: exe.update("g")), TypeError,
          r"^update\(graph\): expected a Graph, got str$"),
    probe("update-of-another-topology", in_exec(lambda w, exe: exe.update(w.launched)), gg.GraphUpdateError,
          r"^update refused: topology changed \(the new graph has 1 node, the executable graph 2\)$"),
    probe("update-from-another-device", in_exec(lambda w, exe: exe.update(gg.Graph(other_device(w.device)))),
          gg.GraphUpdateError, r"^update refused: device changed \(the graph is on \w+:\d+, this executable graph on "
                               r"\w+:0\)$"),
    probe("set-params-of-another-graph", in_exec(lambda w, exe: exe.set_params(w.foreign, w.x, 1.0, N)), gg.GraphError,
          r"^set_params: Node\(n0, kernel scale\) is not a node of the graph this executable graph was made from"),
    probe("set-params-too-few-arguments", in_exec(lambda w, exe: exe.set_params(w.k, w.x, 1.0)), TypeError,
          r"^Kernel\('scale'\) takes 3 arguments \(float\* x, float f, int n\), got 2$"),
    probe("set-host-none", in_exec(lambda w, exe: exe.set_host(w.h, None)), TypeError,
          r"^set_host\(fn\): expected a callable, got NoneType$"),
    probe("set-memcpy-on-a-kernel-node", in_exec(lambda w, exe: exe.set_memcpy(w.k, w.x, w.x)), gg.GraphError,
          r"^set_memcpy\(Node\(n0, kernel scale\)\): the node is a kernel node, not a memcpy node$"),
    probe("flags-assigned", in_exec(lambda w, exe: setattr(exe, "flags", ())), AttributeError,
          r"property 'flags' of 'GraphExec' object has no setter"),
    probe("launch-with-a-node-off-into-a-capture", _disabled_into_capture, gg.CaptureError,
          r"^GraphExec\.launch: an executable graph with a node turned off by set_enabled .* cannot be launched into "
          r"a capture"),
    probe("closed-launch", lambda w: w.closed.launch(w.s), gg.GraphError, r"^launch: this GraphExec is closed$"),
    probe("closed-set-params", lambda w: w.closed.set_params(w.closed_node, w.x, 1.0, N), gg.GraphError,
          r"^set_params: this GraphExec is closed$"),
    probe("closed-update", lambda w: w.closed.update(w.launched), gg.GraphError, r"^update: this GraphExec is closed$"),
    probe("closed-upload", lambda w: w.closed.upload(w.s), gg.GraphError, r"^upload: this GraphExec is closed$"),
    probe("closed-is-enabled", lambda w: w.closed.is_enabled(w.closed_node), gg.GraphError,
          r"^is_enabled: this GraphExec is closed$"),
    probe("stream-launch-of-a-graph-launching-kernel", lambda w: w.s.launch(FIRE, 1, 1, w.launched.instantiate(
        device_launch=True)), gg.GraphError,
          r"^Stream\.launch\(Kernel\('fire'\)\): the kernel takes a graph to launch \(a cudaGraphExec_t\), and a "
          r"kernel that launches graphs runs only as a kernel node of a graph"),
    probe("kernel-given-a-graph-not-for-the-device", in_exec(lambda w, exe: w.launched.add_kernel(FIRE, 1, 1, exe)),
          gg.GraphError, r"^Kernel\('fire'\) argument 0 \(cudaGraphExec_t graph\): GraphExec\(2 nodes, device=\w+:0\) "
                         r"was not instantiated with device_launch=True",
          state=lambda w: (graph_state(w.g), graph_state(w.launched))),
    probe("kernel-given-a-number-for-a-graph", lambda w: w.launched.add_kernel(FIRE, 1, 1, 5), TypeError,
          r"^Kernel\('fire'\) argument 0 \(cudaGraphExec_t graph\): expects a GraphExec instantiated with "
          r"device_launch=True, got int 5", state=lambda w: graph_state(w.launched)),
]


@pytest.mark.parametrize("case", EXEC)
def test_executable_graphs(device, case):
    check(case, exec_world(device), exec_state)


# Graph memory: stream-ordered allocations, allocation and free nodes


def graph_memory_world(device: gg.Device) -> types.SimpleNamespace:
    g, plain, launched = gg.Graph(device), gg.Graph(device), gg.Graph(device)
    alloc = g.add_alloc(4, F32)
    free = g.add_free(alloc, after=alloc)
    empty = g.add_empty()
    unfreed = g.add_alloc(4, F32)
    plain.add_empty()
    launched_alloc = launched.add_alloc(4, F32)
    s = device.stream()
    freed = s.alloc(4, F32)
    s.free(freed)
    return world(device, s=s, x=device.zeros(N, F32), g=g, alloc=alloc, free=free, empty=empty, unfreed=unfreed,
                 plain=plain, launched=launched, launched_alloc=launched_alloc, freed=freed)


def graph_memory_state(w: Any) -> tuple:
    w.s.synchronize()
    return graph_state(w.g), graph_state(w.plain), graph_state(w.launched), w.device.graph_memory().used


def _relaunch_unfreed(w: Any) -> None:
    with w.launched.instantiate() as exe:
        exe.launch(w.s)
        try:
            exe.launch(w.s)
        finally:
            w.s.free(w.launched_alloc.array)


def _free_what_is_not_allocated(w: Any) -> None:
    frees = gg.Graph(w.device)
    frees.add_free(w.launched_alloc.array)
    with frees.instantiate() as exe:
        exe.launch(w.s)


def _graph_memory_kernel_elsewhere(w: Any) -> None:
    graph = gg.Graph(w.device)
    node = graph.add_alloc(N, F32)
    graph.add_kernel(K.scale, 1, N, node.array, 2.0, N, after=node, device=other_device(w.device))


def _launch_memory_graph_into_capture(w: Any) -> None:
    with w.g.instantiate() as exe, w.s.capture():
        exe.launch(w.s)


def _while_instantiated(call: Callable[[Any], object]) -> Callable[[Any], object]:
    def run(w: Any) -> object:
        with w.g.instantiate():
            return call(w)
    return run


GRAPH_MEMORY = [
    probe("alloc-negative", lambda w: w.s.alloc(-1, F32), ValueError,
          r"^shape: dimensions must be non-negative, got -1$"),
    probe("alloc-unknown-dtype", lambda w: w.s.alloc(4, "nope"), TypeError,
          r"^dtype: expected a NumPy dtype, got 'nope'$"),
    probe("alloc-more-than-the-machine", lambda w: w.s.alloc(2**62, np.uint8), MemoryError,
          r"^\w+: out of memory: cannot allocate 4611686018427387904 bytes of stream-ordered memory"),
    probe("free-a-str", lambda w: w.s.free("x"), TypeError, r"^free\(array\): expected an Array, got str$"),
    probe("free-device-memory", lambda w: w.s.free(w.x), ValueError,
          r"^free\(array\): the device allocation at 0x[0-9a-f]+ came from Device\.empty \(or another library\) and "
          r"is freed by its owner; Stream\.free takes memory from Stream\.alloc or allocation nodes$"),
    probe("free-twice", lambda w: w.s.free(w.freed), ValueError,
          r"^free\(array\): the stream allocation at 0x[0-9a-f]+ is not allocated now \(double free, or its graph "
          r"has not been launched\)$"),
    probe("free-on-another-device", lambda w: other_device(w.device).stream().free(w.freed), ValueError,
          r"^free\(array\): Array\(shape=\(4,\), .*\) belongs to \w+:0, not \w+:\d+$"),
    probe("free-a-graph-allocation-never-launched", lambda w: w.s.free(w.unfreed.array), ValueError,
          r"^free\(array\): the graph allocation at 0x[0-9a-f]+ is not allocated now \(double free, or its graph "
          r"has not been launched\)$"),
    probe("node-negative", lambda w: w.plain.add_alloc(-1, F32), ValueError,
          r"^shape: dimensions must be non-negative, got -1$"),
    probe("node-unknown-dtype", lambda w: w.plain.add_alloc(4, "nope"), TypeError,
          r"^dtype: expected a NumPy dtype, got 'nope'$"),
    probe("node-more-than-the-machine", lambda w: w.plain.add_alloc(2**62, np.uint8), MemoryError,
          r"^\w+: out of memory: cannot allocate 4611686018427387904 bytes of graph memory"),
    probe("node-access-str", lambda w: w.plain.add_alloc(4, F32, access=["cpu:1"]), TypeError,
          r"^add_alloc\(access=\): expected Devices, got str$"),
    probe("node-access-its-own-device", lambda w: w.plain.add_alloc(4, F32, access=[w.device]), ValueError,
          r"^add_alloc\(access=\): \w+:0 is the allocation's own device, which always has access$"),
    probe("node-device-str", lambda w: w.plain.add_alloc(4, F32, device="cpu:1"), TypeError,
          r"^add_alloc\(device\): expected a Device or None, got str$"),
    probe("kernel-elsewhere-without-access", _graph_memory_kernel_elsewhere, ValueError,
          r"^Kernel\('scale'\) argument 0 \(float\* x\): the Array is graph memory of \w+:0, which kernels on \w+:\d+ "
          r"cannot use: its allocation node gave no access"),
    probe("node-free-device-memory", lambda w: w.plain.add_free(w.x), gg.GraphError,
          r"^add_free: 0x[0-9a-f]+ is not the address of a graph allocation \(got the device allocation at "
          r"0x[0-9a-f]+\)$"),
    probe("node-free-a-str", lambda w: w.plain.add_free("x"), TypeError,
          r"^add_free: expected an allocation Node or an Array, got str$"),
    probe("node-free-an-empty-node", lambda w: w.g.add_free(w.empty), gg.GraphError,
          r"^add_free\(Node\(n2, empty\)\): the node is a empty node, not an allocation \(got NodeKind\.EMPTY\)$"),
    probe("node-free-not-after-the-allocation", lambda w: w.g.add_free(w.unfreed), gg.GraphError,
          r"^add_free: the free must be ordered after Node\(n3, mem_alloc\); pass after= that node or one that "
          r"follows it$"),
    probe("node-free-twice", lambda w: w.g.add_free(w.alloc, after=w.free), gg.GraphError,
          r"^add_free: the graph allocation at 0x[0-9a-f]+ is already freed by Node\(n1, mem_free\) \(double free\)$"),
    probe("remove-an-edge", lambda w: w.g.remove_dependency(w.alloc, w.free), gg.GraphError,
          r"^remove_dependency: edges of a graph with allocation or free nodes cannot be removed$"),
    probe("remove-a-node", lambda w: w.g.remove_node(w.empty), gg.GraphError,
          r"^remove_node\(Node\(n2, empty\)\): nodes of a graph with allocation or free nodes cannot be removed"),
    probe("clone", lambda w: w.g.clone(), gg.GraphError,
          r"^clone: a graph with allocation or free nodes cannot be cloned$"),
    probe("child-graph", lambda w: w.plain.add_child(w.g), gg.GraphError,
          r"^add_child: a graph with allocation or free nodes cannot be used as a child graph$"),
    probe("instantiate-twice", _while_instantiated(lambda w: w.g.instantiate()), gg.GraphError,
          r"^instantiate: a graph with allocation or free nodes may have only one executable graph at a time; close "
          r"the other one first$"),
    probe("allocate-while-instantiated", _while_instantiated(lambda w: w.g.add_alloc(4, F32)), gg.GraphError,
          r"^add_alloc: a graph with memory nodes may have only one executable graph; close the one instantiated "
          r"from this graph first$"),
    probe("relaunch-before-the-free", _relaunch_unfreed, gg.GraphError,
          r"^launch: the graph allocation at 0x[0-9a-f]+ from the previous launch has not been freed; free it "
          r"\(Stream\.free or a free node\) or instantiate with auto_free_on_launch=True$",
          state=lambda w: graph_state(w.launched)),  # (its first launch, which is right, takes graph memory)
    probe("launch-a-free-of-what-is-not-allocated", _free_what_is_not_allocated, gg.GraphError,
          r"^launch: the graph frees the graph allocation at 0x[0-9a-f]+, which is not allocated now \(double free, "
          r"or freed before it was allocated\)$"),
    probe("launch-into-a-capture", _launch_memory_graph_into_capture, gg.CaptureError,
          r"^GraphExec\.launch: a graph with allocation or free nodes cannot be launched into a capture"),
    probe("free-in-a-capture-on-another-stream", in_capture(lambda w, cap: w.device.stream().free(w.freed)),
          gg.CaptureError, r"^Stream\.free: stream-ordered allocation and freeing on a stream that is not capturing "
                           r"are forbidden while a 'global' capture runs"),
]


@pytest.mark.parametrize("case", GRAPH_MEMORY)
def test_graph_memory(device, case):
    check(case, graph_memory_world(device), graph_memory_state)


# Params


def params_world(device: gg.Device) -> types.SimpleNamespace:
    x, ints = device.zeros(N, F32), device.zeros(N, I32)
    g, with_child, child = gg.Graph(device), gg.Graph(device), gg.Graph(device)
    k = g.add_kernel(K.scale, 1, N, x, 2.0, N)
    child.add_kernel(K.scale, 1, N, x, gg.Param(2.0), N)
    with_child.add_child(child)
    return world(device, s=device.stream(), x=x, ints=ints, g=g, k=k, with_child=with_child,
                 typed=gg.Param(1.0, dtype=F32), pointer=gg.Param(x), untyped=gg.Param(2), fraction=gg.Param(2.5))


def params_state(w: Any) -> tuple:
    w.s.synchronize()
    params = (w.typed, w.pointer, w.untyped, w.fraction)
    return (tuple((p.value, p.dtype) for p in params), contents(w.x, w.ints), graph_state(w.g),
            graph_state(w.with_child))


def _assign(param: str, value: Callable[[Any], Any]) -> Callable[[Any], object]:
    return lambda w: setattr(getattr(w, param), "value", value(w))


PARAMS = [
    probe("of-a-str", lambda w: gg.Param("x"), TypeError,
          r"^Param: expected a real scalar \(bool, int or float, Python or NumPy\) or an Array, got str$"),
    probe("of-none", lambda w: gg.Param(None), TypeError, r"^Param: expected a real scalar .* got NoneType$"),
    probe("of-a-list", lambda w: gg.Param([1.0]), TypeError, r"^Param: expected a real scalar .* got list$"),
    probe("of-a-numpy-array", lambda w: gg.Param(np.ones(3)), TypeError,
          r"^Param: expected a real scalar .* got ndarray$"),
    probe("of-a-complex", lambda w: gg.Param(1j), TypeError, r"^Param: expected a real scalar .* got complex$"),
    probe("dtype-unknown", lambda w: gg.Param(1.0, dtype="nope"), TypeError,
          r"^Param: dtype must be a C number type \(bool, integer or floating, at most 8 bytes\), got str 'nope', "
          r"which is no NumPy dtype$"),
    probe("dtype-object", lambda w: gg.Param(1.0, dtype=object), TypeError,
          r"^Param: dtype must be a C number type .*, got object$"),
    probe("dtype-complex", lambda w: gg.Param(1.0, dtype=np.complex64), TypeError,
          r"^Param: dtype must be a C number type .*, got complex64$"),
    probe("value-past-its-dtype", lambda w: gg.Param(1000, dtype=np.int8), ValueError,
          r"^Param: 1000 does not fit in int8 \(-128\.\.127\)$"),
    probe("fraction-for-an-int", lambda w: gg.Param(1.5, dtype=I32), TypeError,
          r"^Param: expects an integer, got float 1\.5$"),
    probe("array-with-another-dtype", lambda w: gg.Param(w.x, dtype=np.float64), TypeError,
          r"^Param: an Array Param's type is its Array's, float32, got dtype=float64; leave dtype out"),
    probe("value-str", _assign("typed", lambda w: "2"), TypeError,
          r"^Param\(np\.float32\(1\.0\)\)\.value: expected a real scalar, got str$"),
    probe("value-past-float32", _assign("typed", lambda w: 1e40), ValueError,
          r"^Param\(np\.float32\(1\.0\)\)\.value: 1e\+40 does not fit in float32 \(\|x\| <= 3\.40282e\+38\)$"),
    probe("value-an-array-for-a-scalar", _assign("typed", lambda w: w.x), TypeError,
          r"^Param\(np\.float32\(1\.0\)\)\.value: expected a real scalar, got Array$"),
    probe("pointer-value-of-another-size", _assign("pointer", lambda w: w.device.zeros(4, F32)), ValueError,
          r"^Param\(Array of float32\)\.value: a pointer Param takes Arrays of the size of the one it was made with"
          r".*: 8 elements \(32 bytes\), got 4 \(16 bytes\)"),
    probe("pointer-value-of-another-dtype", _assign("pointer", lambda w: w.ints), ValueError,
          r"^Param\(Array of float32\)\.value: expected an Array of float32 on \w+:0, got one of int32 on \w+:0$"),
    probe("pointer-value-of-another-device", _assign("pointer", lambda w: other_device(w.device).zeros(N, F32)),
          ValueError, r"^Param\(Array of float32\)\.value: expected an Array of float32 on \w+:0, got one of float32 "
                      r"on \w+:\d+$"),
    probe("pointer-value-a-scalar", _assign("pointer", lambda w: 1.0), TypeError,
          r"^Param\(Array of float32\)\.value: an Array Param takes an Array, got float$"),
    probe("pointer-value-numpy", _assign("pointer", lambda w: np.zeros(N, F32)), TypeError,
          r"^Param\(Array of float32\)\.value: an Array Param takes an Array, got ndarray$"),
    probe("truth-value", lambda w: bool(w.typed), TypeError,
          r"^Param\(np\.float32\(1\.0\)\) has no truth value: in a captured function `if param:` would be decided "
          r"once"),
    probe("arithmetic", lambda w: w.typed * 2, TypeError,
          r"^Param\(np\.float32\(1\.0\)\) \* 2: Param\(np\.float32\(1\.0\)\) is a gpugraph Param, a placeholder for "
          r"a kernel argument"),
    probe("comparison", lambda w: w.typed > 1, TypeError, r"^Param\(np\.float32\(1\.0\)\) > 1: .* is a gpugraph Param"),
    probe("float-of-it", lambda w: float(w.typed), TypeError, r"^float\(Param\(np\.float32\(1\.0\)\)\): "),
    probe("dtype-assigned", lambda w: setattr(w.typed, "dtype", np.int8), AttributeError,
          r"property 'dtype' of 'Param' object has no setter"),
    probe("untyped-fraction-for-an-int", lambda w: w.s.launch(K.scale, 1, N, w.x, 2.0, w.fraction), TypeError,
          r"^Kernel\('scale'\) argument 2 \(int n\) given Param\(2\.5\): expects an integer, got float 2\.5$"),
    probe("untyped-for-two-types", lambda w: w.s.launch(K.scale, 1, N, w.x, w.untyped, w.untyped), TypeError,
          r"^Kernel\('scale'\) argument 2 \(int n\): Param\(2\) is passed for argument 1 \(float f\) too, and a Param "
          r"holds one type"),
    probe("typed-float-for-an-int", lambda w: w.s.launch(K.fill, 1, N, w.ints, w.typed, N), TypeError,
          r"^Kernel\('fill'\) argument 1 \(int v\): the Param holds float32, the parameter takes int32$"),
    probe("pointer-for-a-scalar", lambda w: w.s.launch(K.scale, 1, N, w.x, w.pointer, N), TypeError,
          r"^Kernel\('scale'\) argument 1 \(float f\): expects a C float scalar, got Param\(Array of float32\)$"),
    probe("scalar-for-a-pointer", lambda w: w.s.launch(K.scale, 1, N, w.typed, 2.0, N), TypeError,
          r"^Kernel\('scale'\) argument 0 \(float\* x\): expects a device Array, got a scalar "
          r"Param\(np\.float32\(1\.0\)\)$"),
    probe("pointer-of-another-dtype", lambda w: w.s.launch(K.fill, 1, N, w.pointer, 1, N), TypeError,
          r"^Kernel\('fill'\) argument 0 \(int\* x\): expects int32 data, got an Array of float32$"),
    probe("set-params-untyped-fraction-for-an-int", lambda w: w.g.set_params(w.k, w.x, 2.0, w.fraction), TypeError,
          r"^Kernel\('scale'\) argument 2 \(int n\) given Param\(2\.5\): expects an integer, got float 2\.5$"),
    probe("in-a-child-graph", lambda w: w.with_child.instantiate(), gg.GraphError,
          r"^a Param is used inside the child graph of Node\(n0, graph\); Params are patched only in kernel nodes "
          r"of the graph itself"),
]


@pytest.mark.parametrize("case", PARAMS)
def test_params(device, case):
    check(case, params_world(device), params_state)


# Launches: grid, block, shared memory, arguments, kernels


def launches_world(device: gg.Device) -> types.SimpleNamespace:
    return world(device, s=device.stream(), x=device.zeros(N, F32), g=gg.Graph(device))


def launches_state(w: Any) -> tuple:
    w.s.synchronize()
    return contents(w.x), graph_state(w.g)


def _launch(grid: Any = 1, block: Any = N, *args: Any, **options: Any) -> Callable[[Any], object]:
    """A probe's call: scale's launch on ``w.s`` with ``grid``, ``block`` and ``args`` (default: right ones)."""
    return lambda w: w.s.launch(K.scale, grid, block, *(args or (w.x, 2.0, N)), **options)


X = object()  # (in _scale_args: the world's Array)


def _scale_args(*args: Any) -> Callable[[Any], object]:
    """A probe's call: scale's launch with ``args``, where ``X`` stands for the world's Array."""
    return lambda w: w.s.launch(K.scale, 1, N, *(w.x if a is X else a for a in args))


TRIVIAL = "__global__ void k(int* x) { x[0] = 1; }"

LAUNCHES = [
    probe("grid-zero", _launch(0), ValueError, r"^grid: dimension x must be in 1\.\.2147483647, got 0$"),
    probe("grid-negative", _launch(-1), ValueError, r"^grid: dimension x must be in 1\.\.2147483647, got -1$"),
    probe("grid-past-2**31-1", _launch(2**31), ValueError,
          r"^grid: dimension x must be in 1\.\.2147483647, got 2147483648$"),
    probe("grid-y-past-65535", _launch((1, 65536)), ValueError,
          r"^grid: dimension y must be in 1\.\.65535, got 65536$"),
    probe("grid-of-four-dims", _launch((1, 1, 1, 1)), ValueError,
          r"^grid: expected 1 to 3 dimensions, got 4 \(\(1, 1, 1, 1\)\)$"),
    probe("grid-empty-tuple", _launch(()), ValueError, r"^grid: expected 1 to 3 dimensions, got 0 \(\(\)\)$"),
    probe("grid-float", _launch(1.5), TypeError, r"^grid: expected an int or a tuple of 1 to 3 ints, got 1\.5$"),
    probe("grid-str", _launch("1"), TypeError, r"^grid: expected an int or a tuple of 1 to 3 ints, got '1'$"),
    probe("grid-bool", _launch(True), TypeError, r"^grid: expected an int or a tuple of 1 to 3 ints, got True$"),
    probe("grid-none", _launch(None), TypeError, r"^grid: expected an int or a tuple of 1 to 3 ints, got None$"),
    probe("grid-numpy-zero", _launch(np.int64(0)), ValueError,
          r"^grid: dimension x must be in 1\.\.2147483647, got 0$"),
    probe("block-past-1024", _launch(1, 1025), ValueError, r"^block: dimension x must be in 1\.\.1024, got 1025$"),
    probe("block-of-2048-threads", _launch(1, (1024, 2)), ValueError,
          r"^block: \(1024, 2, 1\) has 2048 threads; a block holds at most 1024$"),
    probe("block-z-past-64", _launch(1, (1, 1, 65)), ValueError, r"^block: dimension z must be in 1\.\.64, got 65$"),
    probe("block-float", _launch(1, 8.0), TypeError, r"^block: expected an int or a tuple of 1 to 3 ints, got 8\.0$"),
    probe("shared-mem-negative", _launch(shared_mem=-1), ValueError,
          r"^shared_mem: expected a non-negative int, got -1$"),
    probe("shared-mem-past-48-kib", _launch(shared_mem=49153), ValueError,
          r"^shared_mem: 49153 bytes is more than the 49152 bytes \(48 KiB\) of dynamic shared memory a launch may "
          r"have without opting in to more"),
    probe("shared-mem-float", _launch(shared_mem=1.5), ValueError,
          r"^shared_mem: expected a non-negative int, got 1\.5$"),
    probe("too-few-arguments", _scale_args(X, 2.0), TypeError,
          r"^Kernel\('scale'\) takes 3 arguments \(float\* x, float f, int n\), got 2$"),
    probe("too-many-arguments", _scale_args(X, 2.0, N, 9), TypeError,
          r"^Kernel\('scale'\) takes 3 arguments \(float\* x, float f, int n\), got 4$"),
    probe("numpy-for-a-pointer", _scale_args(np.zeros(N, F32), 2.0, N), TypeError,
          r"^Kernel\('scale'\) argument 0 \(float\* x\): expects a device Array, got ndarray of shape \(8,\), dtype "
          r"float32 \(copy it to the device with dev\.asarray first\)$"),
    probe("pointer-of-another-dtype", lambda w: w.s.launch(K.scale, 1, N, w.device.zeros(N, I32), 2.0, N), TypeError,
          r"^Kernel\('scale'\) argument 0 \(float\* x\): expects float32 data, got an Array of int32$"),
    probe("none-for-a-pointer", _scale_args(None, 2.0, N), TypeError,
          r"^Kernel\('scale'\) argument 0 \(float\* x\): expects a device Array, got NoneType None$"),
    probe("str-for-a-float", _scale_args(X, "2", N), TypeError,
          r"^Kernel\('scale'\) argument 1 \(float f\): expects a C float scalar, got str '2'$"),
    probe("complex-for-a-float", _scale_args(X, 2j, N), TypeError,
          r"^Kernel\('scale'\) argument 1 \(float f\): expects a C float scalar, got complex 2j$"),
    probe("0d-array-for-a-float", _scale_args(X, np.array(2.0), N), TypeError,
          r"^Kernel\('scale'\) argument 1 \(float f\): expects a C float scalar, got ndarray array\(2\.\) \(a 0-d "
          r"array: pass arr\[\(\)\] or arr\.item\(\)\)$"),
    probe("float-past-float32", _scale_args(X, 1e39, N), ValueError,
          r"^Kernel\('scale'\) argument 1 \(float f\): 1e\+39 does not fit in float \(\|x\| <= 3\.40282e\+38\)$"),
    probe("int-past-int32", _scale_args(X, 2.0, 2**31), ValueError,
          r"^Kernel\('scale'\) argument 2 \(int n\): 2147483648 does not fit in int \(-2147483648\.\.2147483647\)$"),
    probe("fraction-for-an-int", _scale_args(X, 2.0, 8.5), TypeError,
          r"^Kernel\('scale'\) argument 2 \(int n\): expects an integer, got float 8\.5$"),
    probe("nan-for-an-int", _scale_args(X, 2.0, float("nan")), TypeError,
          r"^Kernel\('scale'\) argument 2 \(int n\): expects an integer, got float nan$"),
    probe("kernel-by-name", lambda w: w.s.launch("scale", 1, N, w.x, 2.0, N), TypeError,
          r"^launch\(kernel\): expected a Kernel, got str$"),
    probe("unknown-keyword", _launch(stream=None), TypeError,
          r"launch\(\) got an unexpected keyword argument 'stream'"),
    probe("node-grid-zero", lambda w: w.g.add_kernel(K.scale, 0, N, w.x, 2.0, N), ValueError,
          r"^grid: dimension x must be in 1\.\.2147483647, got 0$"),
    probe("node-too-few-arguments", lambda w: w.g.add_kernel(K.scale, 1, N, w.x), TypeError,
          r"^Kernel\('scale'\) takes 3 arguments \(float\* x, float f, int n\), got 1$"),
    probe("kernel-source-int", lambda w: gg.Kernel(5, "k"), TypeError,
          r"^Kernel: source must be a str of CUDA/HIP C\+\+, got int$"),
    probe("kernel-name-empty", lambda w: gg.Kernel(TRIVIAL, ""), TypeError,
          r"^Kernel: name must be the kernel's identifier .*, got ''$"),
    probe("kernel-options-a-str", lambda w: gg.Kernel(TRIVIAL, "k", options="-DX"), TypeError,
          r"^Kernel 'k': options must be a sequence of str such as \('-use_fast_math',\), or None, got '-DX'$"),
    probe("kernel-options-of-ints", lambda w: gg.Kernel(TRIVIAL, "k", options=(5,)), TypeError,
          r"^Kernel 'k': options must be a sequence of str .* got \(5,\)$"),
    probe("kernel-cpu-not-callable", lambda w: gg.Kernel(TRIVIAL, "k", cpu=5), TypeError,
          r"^Kernel 'k': cpu must be callable or None, got int$"),
    probe("kernel-not-in-its-source", lambda w: w.s.launch(gg.Kernel(TRIVIAL, "nope"), 1, 1, w.device.zeros(1, I32)),
          gg.KernelCompileError, r"^kernel 'nope' failed to compile:\n"),
    probe("module-of-an-int", lambda w: gg.Module(5), TypeError,
          r"^Module: image must be a path \(str or os\.PathLike\) of a PTX, cubin or fatbin file, or the code as "
          r"bytes \(or PTX text as a str\), got int$"),
    probe("module-file-missing", lambda w: gg.Module("/nonexistent/scale.ptx"), FileNotFoundError,
          r"^Module: cannot read the module file '/nonexistent/scale\.ptx': No such file or directory"),
]


@pytest.mark.parametrize("case", LAUNCHES)
def test_launches(device, case):
    check(case, launches_world(device), launches_state)


# Devices, streams and events


def streams_world(device: gg.Device) -> types.SimpleNamespace:
    s = device.stream()
    started, unrecorded = device.event(timing=True), device.event(timing=True)
    s.record(started)
    s.synchronize()
    return world(device, s=s, x=device.zeros(N, F32), plain=device.event(), started=started, unrecorded=unrecorded)


def streams_state(w: Any) -> tuple:
    w.s.synchronize()
    return w.device.schedule, contents(w.x), w.s.is_capturing


def _host_function_that(call: Callable[[Any], object]) -> Callable[[Any], object]:
    """A probe's call: a host function making ``call(world)`` on the stream, then the stream's synchronize (which
    raises what the host function raised)."""
    def run(w: Any) -> object:
        w.s.host(call, w)
        return w.s.synchronize()
    return run


STREAMS = [
    probe("device-unknown-backend", lambda w: gg.Device("bogus"), ValueError,
          r"^Device: expected 'cuda', 'hip' or 'cpu', optionally with ':index', got 'bogus'$"),
    probe("device-of-an-int", lambda w: gg.Device(3), TypeError,
          r"^Device: spec must be a str such as 'cuda:0' or 'cpu', got 3$"),
    probe("device-index-past-the-machine's", lambda w: gg.Device(f"{w.device.backend}:99"),
          gg.BackendUnavailableError, r"^\w+:99: this machine has \d+ \w+ device\(s\)$"),
    probe("device-index-negative", lambda w: gg.Device(f"{w.device.backend}:-1"), ValueError,
          r"^Device: the index after ':' must be a non-negative int, got '\w+:-1'$"),
    probe("device-index-not-a-number", lambda w: gg.Device(f"{w.device.backend}:x"), ValueError,
          r"^Device: the index after ':' must be a non-negative int, got '\w+:x'$"),
    probe("stream-non-blocking-str", lambda w: w.device.stream(non_blocking="no"), TypeError,
          r"^stream: non_blocking must be a bool, got 'no'$"),
    probe("stream-class-non-blocking-str", lambda w: gg.Stream(w.device, "no"), TypeError,
          r"^stream: non_blocking must be a bool, got 'no'$"),
    probe("stream-priority-str", lambda w: w.device.stream(priority="high"), TypeError,
          r"^Device\.stream\(priority\): expected an int, got str 'high'$"),
    probe("stream-priority-float", lambda w: w.device.stream(priority=1.5), TypeError,
          r"^Device\.stream\(priority\): expected an int, got float 1\.5$"),
    probe("event-timing-str", lambda w: w.device.event(timing="yes"), TypeError,
          r"^event: timing must be a bool, got 'yes'$"),
    probe("event-class-timing-str", lambda w: gg.Event(w.device, "yes"), TypeError,
          r"^event: timing must be a bool, got 'yes'$"),
    probe("wait-for-a-str", lambda w: w.s.wait("e"), TypeError, r"^wait\(event\): expected an Event, got str$"),
    probe("wait-for-none", lambda w: w.s.wait(None), TypeError, r"^wait\(event\): expected an Event, got NoneType$"),
    probe("record-a-str", lambda w: w.s.record("e"), TypeError,
          r"^record\(event\): expected an Event or None, got str$"),
    probe("record-an-event-of-another-device", lambda w: w.s.record(other_device(w.device).event()), ValueError,
          r"^record\(event\): Event\(device=\w+:\d+, timing=False\) belongs to \w+:\d+, not \w+:0$"),
    probe("elapsed-without-timing", lambda w: w.plain.elapsed_ms(w.started), ValueError,
          r"^elapsed_ms: the start event was created with timing=False$"),
    probe("elapsed-to-an-unrecorded-event", lambda w: w.started.elapsed_ms(w.unrecorded), ValueError,
          r"^elapsed_ms: both events must have been recorded$"),
    probe("elapsed-to-an-int", lambda w: w.started.elapsed_ms(5), TypeError,
          r"^elapsed_ms\(end\): expected an Event, got int$"),
    probe("host-function-not-callable", lambda w: w.s.host(5), TypeError,
          r"^host\(fn\): expected a callable, got int$"),
    probe("host-function-none", lambda w: w.s.host(None), TypeError,
          r"^host\(fn\): expected a callable, got NoneType$"),
    probe("host-function-that-synchronizes", _host_function_that(lambda w: w.s.synchronize()), gg.GpuGraphError,
          r"^Stream\.synchronize was called from a host function \(or other work a stream runs\); host functions "
          r"must not make gpugraph calls that reach the device"),
    probe("host-function-that-launches", _host_function_that(lambda w: w.s.launch(K.scale, 1, N, w.x, 2.0, N)),
          gg.GpuGraphError, r"^Stream\.launch was called from a host function"),
    probe("host-function-that-allocates", _host_function_that(lambda w: w.device.zeros(4)), gg.GpuGraphError,
          r"^a device allocation \(Device\.empty, Device\.zeros, Device\.asarray\) was called from a host function"),
    probe("external-stream-int", lambda w: gg.Stream.from_external(5), TypeError,
          r"^Stream\.from_external: expected a gpugraph Stream or an object with __cuda_stream__ \(the CUDA stream "
          r"protocol: CuPy, PyTorch, cuda\.core streams\), got int$"),
    probe("use-stream-of-a-str", lambda w: gg.use_stream("s"), TypeError,
          r"^use_stream\(stream\): expected a Stream, got str$"),
    probe("current-stream-of-a-str", lambda w: gg.current_stream("cpu"), TypeError,
          r"^current_stream\(device\): expected a Device or None, got str \(pass gg\.Device\('cpu'\)\)$"),
    probe("schedule-unknown", lambda w: w.device.set_schedule("fast"), ValueError,
          r"^set_schedule: expected one of 'auto', 'spin', 'yield', 'blocking_sync', got 'fast'$"),
    probe("peer-of-a-str", lambda w: w.device.can_access_peer("cpu:1"), TypeError,
          r"^can_access_peer\(peer\): expected a Device, got str$"),
    probe("peer-itself", lambda w: w.device.enable_peer_access(w.device), ValueError,
          r"^enable_peer_access\(peer\): \w+:0 is this device, which always accesses its own memory$"),
    probe("properties-assigned", lambda w: w.device.properties.__setitem__("name", "x"), AttributeError,
          r"'mappingproxy' object has no attribute '__setitem__'"),
]


@pytest.mark.parametrize("case", STREAMS)
def test_streams_and_events(device, case):
    check(case, streams_world(device), streams_state)


# Stream capture


def capture_world(device: gg.Device) -> types.SimpleNamespace:
    into, other = gg.Graph(device), gg.Graph(device)
    start = into.add_empty()
    loop = gg.Graph(device)
    condition = loop.condition()
    body = loop.add_while(condition).bodies[0]
    s = device.stream()
    recorded = s.record()
    s.synchronize()
    return world(device, s=s, o=device.stream(), blocking=device.stream(non_blocking=False), x=device.zeros(N, F32),
                 into=into, start=start, foreign=other.add_empty(), body=body, recorded=recorded)


def capture_state(w: Any) -> tuple:
    return capturing(w.s, w.o, w.blocking), graph_state(w.into), graph_state(w.body), contents(w.x)


def _into(body: Callable[[Any, gg.Capture], object], where: str = "into") -> Callable[[Any], object]:
    """A probe's call: ``body(world, cap)`` in a capture on ``world.s`` into the world's graph ``where``."""
    def call(w: Any) -> object:
        with w.s.capture(into=getattr(w, where)) as cap:
            body(w, cap)
    return call


def _fork_unjoined(w: Any, cap: gg.Capture) -> None:
    w.o.wait(w.s.record())
    w.o.memset(w.x, 1.0)


def _merge(w: Any, cap: gg.Capture) -> None:
    with w.o.capture():
        w.s.wait(w.o.record())


def _after_the_first_refusal(w: Any, cap: gg.Capture) -> None:
    with contextlib.suppress(gg.CaptureError):  # (the first refusal, ignored)
        w.s.synchronize()
    w.s.memset(w.x, 1.0)


def _work_then_raise(w: Any, cap: gg.Capture) -> None:
    w.s.memset(w.x, 1.0)
    raise KeyError("the body's own error")


def _reenter(w: Any) -> None:
    cap = w.s.capture()
    with cap:
        pass
    with cap:
        pass


CAPTURE = [
    probe("mode-unknown", lambda w: w.s.capture(mode="bad"), ValueError,
          r"^capture\(mode\): expected one of global, thread_local, relaxed, got 'bad'$"),
    probe("mode-int", lambda w: w.s.capture(mode=1), ValueError,
          r"^capture\(mode\): expected one of global, thread_local, relaxed, got 1$"),
    probe("into-not-a-graph", lambda w: w.s.capture(into=5), TypeError,
          r"^capture\(into\): expected a Graph or None, got int$"),
    probe("into-a-graph-of-another-device", lambda w: w.s.capture(into=gg.Graph(other_device(w.device))), ValueError,
          r"^capture\(into\): the graph is on \w+:\d+, the stream on \w+:0$"),
    probe("after-without-into", lambda w: w.s.capture(after=w.start), ValueError,
          r"^capture\(after\): starting dependencies need into=graph$"),
    probe("after-a-node-of-another-graph", lambda w: w.s.capture(into=w.into, after=w.foreign).__enter__(),
          gg.GraphError,
          r"^capture\(after=\.\.\.\): Node\(n0, empty\) belongs to another graph$"),
    probe("after-a-str", lambda w: w.s.capture(into=w.into, after="n0").__enter__(), TypeError,
          r"^capture\(after=\.\.\.\): expected Nodes, got str$"),
    probe("after-an-int", lambda w: w.s.capture(into=w.into, after=1), TypeError,
          r"^capture\(after=\.\.\.\): expected a Node or an iterable of Nodes, got int 1$"),
    probe("nested-on-one-stream", in_capture(lambda w, cap: w.s.capture().__enter__()), gg.CaptureError,
          r"^Stream\.capture: Stream\(#\d+, device=\w+:0, non_blocking=True\) is already capturing; captures cannot "
          r"nest on one stream"),
    probe("the-legacy-default-stream", lambda w: w.device.default_stream.capture().__enter__(), gg.CaptureError,
          r"^capture: the legacy default stream cannot be captured; use Device\.stream\(\)"),
    probe("synchronize", in_capture(lambda w, cap: w.s.synchronize()), gg.CaptureError,
          r"^Stream\.synchronize: a capturing stream runs nothing, so it cannot be waited for or queried \(capture "
          r"on Stream\(#\d+, device=\w+:0, non_blocking=True\), mode 'global'\); the capture is invalidated"),
    probe("device-synchronize", in_capture(lambda w, cap: w.device.synchronize()), gg.CaptureError,
          r"^Device\.synchronize: \w+:0 has a capturing stream, which runs nothing, so the device cannot be waited "
          r"for"),
    probe("synchronous-allocation", in_capture(lambda w, cap: w.device.empty(4)), gg.CaptureError,
          r"^Device\.empty: synchronous allocations and copies are forbidden while a 'global' capture runs.*; use "
          r"stream\.alloc\(shape, dtype\) instead"),
    probe("to-numpy", in_capture(lambda w, cap: w.x.to_numpy()), gg.CaptureError,
          r"^Array\.to_numpy: \w+:0 has a capturing stream, which runs nothing, so the device cannot be waited for"),
    probe("stream-done", in_capture(lambda w, cap: w.s.done), gg.CaptureError,
          r"^Stream\.done: a capturing stream runs nothing, so it cannot be waited for or queried"),
    probe("event-done-of-outside-work", in_capture(lambda w, cap: w.recorded.done), gg.CaptureError,
          r"^Event\.done: waiting for or querying work outside the capture is forbidden while a 'global' capture "
          r"runs"),
    probe("wait-for-an-event-recorded-outside", in_capture(lambda w, cap: w.s.wait(w.recorded)), gg.CaptureError,
          r"^Stream\.wait: a capturing stream cannot wait for an event recorded outside the capture"),
    probe("merge-two-captures", in_capture(_merge), gg.CaptureError,
          r"^Stream\.wait: the event was recorded in another capture; two captures cannot merge"),
    probe("fork-never-joined", in_capture(_fork_unjoined), gg.CaptureError,
          r"was not joined back into Stream\(#\d+, device=\w+:0, non_blocking=True\)"),
    probe("later-call-after-a-refusal", in_capture(_after_the_first_refusal), gg.CaptureError,
          r"^Stream\.memset: the capture was invalidated earlier by Stream\.synchronize: Stream\.synchronize: a "
          r"capturing stream runs nothing"),
    probe("body-raises", _into(_work_then_raise), KeyError, r"the body's own error"),
    probe("refused-call-into-a-graph", _into(lambda w, cap: (w.s.memset(w.x, 1.0), w.s.synchronize())),
          gg.CaptureError, r"^Stream\.synchronize: a capturing stream runs nothing"),
    probe("set-dependencies-of-another-graph", in_capture(lambda w, cap: cap.set_dependencies([w.foreign])),
          gg.GraphError, r"^set_dependencies\(after=\.\.\.\): Node\(n0, empty\) belongs to another graph$"),
    probe("set-dependencies-a-str", in_capture(lambda w, cap: cap.set_dependencies("n0")), TypeError,
          r"^set_dependencies\(after=\.\.\.\): expected Nodes, got str$"),
    probe("set-dependencies-kind-unknown", in_capture(lambda w, cap: cap.set_dependencies([cap.add_empty()],
                                                                                       kinds="soft")), ValueError,
          r"^set_dependencies\(kinds\): expected one of full, programmatic, launch_order, got 'soft'$"),
    probe("set-dependencies-kinds-count", in_capture(lambda w, cap: cap.set_dependencies([cap.add_empty()],
                                                                                      kinds=["full", "full"])),
          ValueError, r"^set_dependencies\(kinds\): expected one kind per node \(1\), got 2$"),
    probe("set-dependencies-programmatic-from-an-empty-node", in_capture(lambda w, cap: cap.set_dependencies(
        [cap.add_empty()], kinds="programmatic")), gg.GraphError,
          r"^set_dependencies\(Node\(n0, empty\), kinds='programmatic'\): a programmatic edge leaves a kernel node; "
          r"got a empty node$"),
    probe("add-kernel-before-the-block", lambda w: w.s.capture().add_kernel(K.scale, 1, N, w.x, 2.0, N),
          gg.CaptureError, r"^Capture\.add_kernel: the capture is not running \(use it inside the with block\)"),
    probe("add-empty-before-the-block", lambda w: w.s.capture().add_empty(), gg.CaptureError,
          r"^Capture\.add_empty: the capture is not running"),
    probe("dependencies-before-the-block", lambda w: w.s.capture().dependencies, gg.CaptureError,
          r"^Capture\.dependencies: the capture is not running"),
    probe("id-before-the-block", lambda w: w.s.capture().id, gg.CaptureError,
          r"^Capture\.id: the capture has not begun"),
    probe("entered-twice", _reenter, gg.CaptureError,
          r"^capture: this Capture was used already; call stream\.capture\(\) again"),
    probe("exchange-mode-unknown", lambda w: gg.exchange_capture_mode("bad"), ValueError,
          r"^exchange_capture_mode\(mode\): expected one of global, thread_local, relaxed, got 'bad'$"),
    probe("thread-mode-unknown", lambda w: gg.thread_capture_mode("bad").__enter__(), ValueError,
          r"^thread_capture_mode\(mode\): expected one of global, thread_local, relaxed, got 'bad'$"),
    probe("host-function-into-a-body", _into(lambda w, cap: w.s.host(print), where="body"), gg.GraphError,
          r"^Stream\.host: Graph\(.*\) is the body of a conditional node, which cannot hold host nodes"),
    probe("allocation-into-a-body", _into(lambda w, cap: w.s.alloc(4, F32), where="body"), gg.GraphError,
          r"^Stream\.alloc: Graph\(.*\) is the body of a conditional node, which cannot hold memory allocation nodes"),
    probe("legacy-stream-while-a-blocking-stream-captures", lambda w: _legacy_while_blocking(w), gg.CaptureError,
          r"^Stream\.memset: the legacy default stream synchronizes with blocking streams, and a blocking stream is "
          r"capturing"),
]


def _legacy_while_blocking(w: Any) -> None:
    with w.blocking.capture():
        w.device.default_stream.memset(w.x, 1.0)


@pytest.mark.parametrize("case", CAPTURE)
def test_capture(device, case):
    check(case, capture_world(device), capture_state)


# @captured


def _scale_into(out: gg.Array, f: Any) -> None:
    gg.current_stream(out.device).launch(K.scale, 1, N, out, f, N)


def captured_world(device: gg.Device) -> types.SimpleNamespace:
    x = device.zeros(N, F32)
    replayed = gg.captured(_scale_into, dynamic=("f",))
    with gg.use_stream(device.stream()):
        replayed(x, 1.0)
    device.synchronize()
    return world(device, x=x, replayed=replayed, fresh=gg.captured(_scale_into, dynamic=("f",)))


def captured_state(w: Any) -> tuple:
    w.device.synchronize()
    return contents(w.x), w.replayed.stats, w.fresh.stats


def _generator(out: gg.Array) -> Any:
    yield out


async def _coroutine(out: gg.Array) -> None:
    pass


def _any_arguments(*args: Any) -> None:
    pass


def _synchronizes(out: gg.Array) -> None:
    gg.current_stream(out.device).synchronize()


def _on_another_stream(out: gg.Array) -> None:
    out.device.stream().launch(K.scale, 1, N, out, 2.0, N)


def _allocates(out: gg.Array) -> None:
    out.device.zeros(N)


def _doubles(out: gg.Array, f: Any) -> None:
    _scale_into(out, f * 2)


def _tests(out: gg.Array, f: Any) -> None:
    if f:
        _scale_into(out, 1.0)


def _call(fn: Callable[..., Any], *args: Any, dynamic: tuple[str, ...] = ()) -> Callable[[Any], object]:
    """A probe's call: ``fn`` captured (with ``dynamic``), called with ``args`` ("x": the world's Array)."""
    return lambda w: gg.captured(fn, dynamic=dynamic)(*(w.x if a == "x" else a for a in args))


_inner = gg.captured(lambda out: _scale_into(out, 1.0))


CAPTURED = [
    probe("dynamic-not-a-parameter", lambda w: gg.captured(_scale_into, dynamic=("g",)), ValueError,
          r"^captured\(dynamic\): _scale_into has no parameter 'g' \(parameters: out, f\)$"),
    probe("dynamic-none", lambda w: gg.captured(_scale_into, dynamic=None), TypeError,
          r"^captured\(dynamic\): expected a tuple of parameter names \(str\), got NoneType None$"),
    probe("dynamic-of-ints", lambda w: gg.captured(_scale_into, dynamic=(1,)), TypeError,
          r"^captured\(dynamic\): expected a tuple of parameter names \(str\), got tuple \(1,\)$"),
    probe("dynamic-star-args", lambda w: gg.captured(_any_arguments, dynamic=("args",)), ValueError,
          r"^captured\(dynamic\): _any_arguments's parameter \*args gathers any number of arguments"),
    probe("max-graphs-zero", lambda w: gg.captured(_scale_into, max_graphs=0), ValueError,
          r"^captured\(max_graphs\): expected an int of at least 1, got int 0$"),
    probe("max-graphs-negative", lambda w: gg.captured(max_graphs=-1), ValueError,
          r"^captured\(max_graphs\): expected an int of at least 1, got int -1$"),
    probe("max-graphs-float", lambda w: gg.captured(_scale_into, max_graphs=1.5), ValueError,
          r"^captured\(max_graphs\): expected an int of at least 1, got float 1\.5$"),
    probe("max-graphs-bool", lambda w: gg.captured(_scale_into, max_graphs=True), ValueError,
          r"^captured\(max_graphs\): expected an int of at least 1, got bool True$"),
    probe("mode-unknown", lambda w: gg.captured(_scale_into, mode="bad"), ValueError,
          r"^captured\(mode\): expected one of global, thread_local, relaxed, got 'bad'$"),
    probe("generator-function", lambda w: gg.captured(_generator), TypeError,
          r"^captured: _generator is a generator function: calling it runs none of its body"),
    probe("async-function", lambda w: gg.captured(_coroutine), TypeError,
          r"^captured: _coroutine is an async function: calling it runs none of its body"),
    probe("not-callable", lambda w: gg.captured(5), TypeError, r"^captured: expected a function, got int$"),
    probe("decorator-of-a-non-callable", lambda w: gg.captured(dynamic=())(5), TypeError,
          r"^captured: expected a function, got int$"),
    probe("call-missing-an-argument", lambda w: w.fresh(w.x), TypeError,
          r"^_scale_into\(\): missing a required argument: 'f'$"),
    probe("call-with-an-unknown-keyword", lambda w: w.fresh(w.x, 1.0, g=2), TypeError,
          r"^_scale_into\(\): got an unexpected keyword argument 'g'$"),
    probe("replay-missing-an-argument", lambda w: w.replayed(w.x), TypeError,
          r"^_scale_into\(\): missing a required argument: 'f'$"),
    probe("synchronizes-inside", _call(_synchronizes, "x"), gg.CaptureError,
          r"^Stream\.synchronize: a capturing stream runs nothing, so it cannot be waited for or queried"),
    probe("allocates-inside", _call(_allocates, "x"), gg.CaptureError,
          r"^Device\.\w+: synchronous allocations and copies are forbidden while a 'global' capture runs"),
    probe("launches-on-another-stream", _call(_on_another_stream, "x"), gg.CaptureError,
          r"^Stream\.launch: Stream\(#\d+, device=\w+:0, non_blocking=True\) is not capturing, so a captured "
          r"function's work on it would run once now and never be part of the graph"),
    probe("calls-a-captured-function", _call(lambda out: _inner(out), "x"), gg.CaptureError,
          r"^Stream\.capture: Stream\(#\d+, .*\) is already capturing; captures cannot nest on one stream"),
    probe("computes-with-a-dynamic-argument", _call(_doubles, "x", 1.0, dynamic=("f",)), TypeError,
          r"^Param\(1\.0\) \* 2: Param\(1\.0\) is a gpugraph Param, a placeholder for a kernel argument"),
    probe("tests-a-dynamic-argument", _call(_tests, "x", 1.0, dynamic=("f",)), TypeError,
          r"^Param\(1\.0\) has no truth value"),
    probe("dynamic-value-of-another-type", lambda w: w.replayed(w.x, "2"), TypeError,
          r"^Param: expected a real scalar \(bool, int or float, Python or NumPy\) or an Array, got str$"),
    probe("dynamic-value-past-float32", lambda w: w.replayed(w.x, 1e40), ValueError,
          r"^Param\(np\.float32\(1\.0\)\)\.value: 1e\+40 does not fit in float32"),
    probe("function-raises", _call(lambda out: 1 / 0, "x"), ZeroDivisionError, r"division by zero"),
    probe("returns-a-generator", _call(lambda out: (v for v in ()), "x"), TypeError,
          r"^captured: <lambda> returned generator '<genexpr>': its work does not run when it is called"),
]


@pytest.mark.parametrize("case", CAPTURED)
def test_captured(device, case):
    check(case, captured_world(device), captured_state)


# Collectives


def collectives_world(device: gg.Device) -> types.SimpleNamespace:
    devices = [device, other_device(device)]
    try:
        comms = gg.communicators(devices, timeout=60 if device.backend == "cpu" else None)
    except gg.BackendUnavailableError as exc:
        pytest.skip(f"no collectives here: {exc}")
    w = world(device, devices=devices, comms=comms, streams=[d.stream() for d in devices],
              xs=[d.zeros(N, F32) for d in devices], ints=[d.zeros(N, I32) for d in devices],
              ones=[d.asarray(np.ones(N, F32)) for d in devices], sums=[d.zeros(N, F32) for d in devices],
              uid=None)
    w.c0 = comms[0]
    return w


def collectives_state(w: Any) -> tuple:
    """The arrays, and a collective over both ranks after the probe: a refused call enqueued no part of its own, so
    the ranks' next collective still meets (its sum is 2 everywhere)."""
    with gg.collective_group():
        for comm, stream, ones, out in zip(w.comms, w.streams, w.ones, w.sums):
            comm.all_reduce(ones, out, stream=stream)
    for stream in w.streams:
        stream.synchronize()
    return contents(*w.xs, *w.ints, *w.sums), tuple(c.aborted for c in w.comms)


def _rank0(call: Callable[[Any, gg.Communicator, gg.Stream], object]) -> Callable[[Any], object]:
    """A probe's call: rank 0's ``call(world, comm, stream)`` inside a group."""
    return in_group(lambda w: call(w, w.c0, w.streams[0]))


def _closed_or_aborted(how: str) -> Callable[[Any], object]:
    def call(w: Any) -> object:
        pair = gg.communicators(w.devices)
        getattr(pair[0], how)()
        with gg.collective_group():
            pair[0].all_reduce(w.xs[0], w.xs[0], stream=w.streams[0])
    return call


def _group_left_by_an_error(w: Any) -> None:
    with gg.collective_group():
        w.c0.all_reduce(w.xs[0], w.xs[0], stream=w.streams[0])
        raise KeyError("an error inside the group")


COLLECTIVES = [
    probe("communicators-of-none", lambda w: gg.communicators([]), TypeError,
          r"^communicators\(devices\): expected one Device or more, got nothing$"),
    probe("communicators-one-device-twice", lambda w: gg.communicators([w.device, w.device]), ValueError,
          r"^communicators\(devices\): each device may be one rank only, got \[Device\('\w+:0'\), "
          r"Device\('\w+:0'\)\]$"),
    probe("communicators-of-strs", lambda w: gg.communicators(["cpu:0"]), TypeError,
          r"^communicators\(devices\): expected one Device or more, got str$"),
    probe("communicators-of-a-device", lambda w: gg.communicators(w.device), TypeError,
          r"^communicators\(devices\): expected a list or tuple of Devices, got Device$"),
    probe("communicators-timeout-zero", lambda w: gg.communicators(w.devices, timeout=0), ValueError,
          r"^communicators\(timeout\): expected seconds > 0, or inf or None for no limit; got 0$"),
    probe("communicators-timeout-nan", lambda w: gg.communicators(w.devices, timeout=float("nan")), ValueError,
          r"^communicators\(timeout\): expected seconds > 0, or inf or None for no limit; got nan$"),
    probe("communicators-timeout-str", lambda w: gg.communicators(w.devices, timeout="1"), TypeError,
          r"^communicators\(timeout\): expected seconds \(an int or float\) or None, got str '1'$"),
    probe("unique-id-of-an-unknown-backend", lambda w: gg.unique_id("bogus"), ValueError,
          r"^unique_id\(backend\): expected one of cuda, hip, cpu, got 'bogus'$"),
    probe("unique-id-of-an-int", lambda w: gg.unique_id(1), TypeError,
          r"^unique_id\(backend\): expected a backend's name \(str\), got int$"),
    probe("unique-id-from-junk", lambda w: gg.UniqueId.from_bytes(b"x"), ValueError,
          r"^UniqueId\.from_bytes: not the bytes of a gpugraph UniqueId \(they start with a backend's name and ':'\), "
          r"got b'x'"),
    probe("unique-id-from-a-str", lambda w: gg.UniqueId.from_bytes("x"), TypeError,
          r"^UniqueId\.from_bytes: expected bytes, got str$"),
    probe("communicator-rank-negative", lambda w: gg.communicator(w.device, rank=-1, size=2, unique_id=None),
          ValueError,
          r"^communicator\(rank\): ranks are 0\.\.1, got -1$"),
    probe("communicator-rank-past-the-size", lambda w: gg.communicator(w.device, rank=2, size=2, unique_id=None),
          ValueError, r"^communicator\(rank\): ranks are 0\.\.1, got 2$"),
    probe("communicator-of-no-ranks", lambda w: gg.communicator(w.device, rank=0, size=0, unique_id=None), ValueError,
          r"^communicator\(size\): expected 1 rank or more, got 0$"),
    probe("communicator-rank-float", lambda w: gg.communicator(w.device, rank=0.0, size=2, unique_id=None), TypeError,
          r"^communicator\(rank\): expected an int, got float$"),
    probe("communicator-unique-id-str", lambda w: gg.communicator(w.device, rank=0, size=2, unique_id="x"), TypeError,
          r"^communicator\(unique_id\): expected a UniqueId \(from unique_id\(\)\), got str$"),
    probe("communicator-of-a-str", lambda w: gg.communicator("cpu:0", rank=0, size=2, unique_id=None), TypeError,
          r"^communicator\(device\): expected a Device, got str$"),
    probe("outside-a-group", lambda w: w.c0.all_reduce(w.xs[0], w.xs[0], stream=w.streams[0]), gg.CollectiveError,
          r"^Communicator\.all_reduce: rank 0 is one of 2 ranks this process drives, so its calls go inside "
          r"gpugraph\.collective_group\(\)"),
    probe("op-unknown", _rank0(lambda w, c, s: c.all_reduce(w.xs[0], w.xs[0], op="mean", stream=s)), ValueError,
          r"^Communicator\.all_reduce\(op\): expected one of sum, prod, max, min, avg, got 'mean'$"),
    probe("avg-of-ints", _rank0(lambda w, c, s: c.all_reduce(w.ints[0], w.ints[0], op="avg", stream=s)), TypeError,
          r"^Communicator\.all_reduce\(op\): 'avg' is for floating-point elements, got int32$"),
    probe("element-types-differ", _rank0(lambda w, c, s: c.all_reduce(w.xs[0], w.ints[0], stream=s)), TypeError,
          r"^Communicator\.all_reduce: send holds float32, recv int32: the same element type is needed$"),
    probe("sizes-differ", _rank0(lambda w, c, s: c.all_reduce(w.xs[0], w.device.zeros(4, F32), stream=s)), ValueError,
          r"^Communicator\.all_reduce: send and recv need the same number of elements, got send of 8 and recv of 4$"),
    probe("stream-of-another-rank", _rank0(lambda w, c, s: c.all_reduce(w.xs[0], w.xs[0], stream=w.streams[1])),
          ValueError, r"^Communicator\.all_reduce\(stream\): Stream\(#\d+, device=\w+:\d+, .*\) is on \w+:\d+, rank 0 "
                      r"on \w+:0$"),
    probe("array-of-another-rank", _rank0(lambda w, c, s: c.all_reduce(w.xs[1], w.xs[1], stream=s)), ValueError,
          r"^Communicator\.all_reduce\(send\): the Array is on \w+:\d+, rank 0 on \w+:0$"),
    probe("stream-a-str", _rank0(lambda w, c, s: c.all_reduce(w.xs[0], w.xs[0], stream="s")), TypeError,
          r"^Communicator\.all_reduce\(stream\): expected a Stream, got str$"),
    probe("numpy-to-send", _rank0(lambda w, c, s: c.all_reduce(np.zeros(N, F32), w.xs[0], stream=s)), TypeError,
          r"^Communicator\.all_reduce\(send\): expected an Array, got ndarray$"),
    probe("elements-nccl-lacks", _rank0(lambda w, c, s: c.all_reduce(
        w.device.zeros(N, np.complex64), w.device.zeros(N, np.complex64), stream=s)), TypeError,
          r"^Communicator\.all_reduce\(send\): NCCL has no complex64 elements \(it has int8, uint8, int32, uint32, "
          r"int64, uint64, float16, float32, float64\)$"),
    probe("root-past-the-ranks", _rank0(lambda w, c, s: c.broadcast(w.xs[0], w.xs[0], root=5, stream=s)), ValueError,
          r"^Communicator\.broadcast\(root\): ranks are 0\.\.1, got 5$"),
    probe("root-float", _rank0(lambda w, c, s: c.broadcast(w.xs[0], w.xs[0], root=0.0, stream=s)), TypeError,
          r"^Communicator\.broadcast\(root\): expected a rank \(int\), got float$"),
    probe("broadcast-root-sends-nothing", _rank0(lambda w, c, s: c.broadcast(None, w.xs[0], root=0, stream=s)),
          ValueError, r"^Communicator\.broadcast: rank 0 is the root, so it needs a send Array, got None$"),
    probe("reduce-root-receives-nothing", _rank0(lambda w, c, s: c.reduce(w.xs[0], None, root=0, stream=s)),
          ValueError, r"^Communicator\.reduce: rank 0 is the root, so it needs a recv Array, got None$"),
    probe("all-gather-recv-too-small", _rank0(lambda w, c, s: c.all_gather(w.xs[0], w.xs[0], stream=s)), ValueError,
          r"^Communicator\.all_gather: recv needs 2 \(the communicator's size\) times the elements of the other, got "
          r"send of 8 and recv of 8$"),
    probe("reduce-scatter-send-too-small", _rank0(lambda w, c, s: c.reduce_scatter(w.xs[0], w.xs[0], stream=s)),
          ValueError, r"^Communicator\.reduce_scatter: send needs 2 \(the communicator's size\) times"),
    probe("send-to-itself", _rank0(lambda w, c, s: c.send(w.xs[0], peer=0, stream=s)), ValueError,
          r"^Communicator\.send\(peer\): rank 0 cannot send to or receive from itself$"),
    probe("send-past-the-ranks", _rank0(lambda w, c, s: c.send(w.xs[0], peer=9, stream=s)), ValueError,
          r"^Communicator\.send\(peer\): ranks are 0\.\.1, got 9$"),
    probe("recv-peer-str", _rank0(lambda w, c, s: c.recv(w.xs[0], peer="1", stream=s)), TypeError,
          r"^Communicator\.recv\(peer\): expected a rank \(int\), got str$"),
    probe("group-left-by-an-error", _group_left_by_an_error, KeyError, r"an error inside the group"),
    probe("use-after-close", _closed_or_aborted("close"), gg.CollectiveError,
          r"^Communicator\.all_reduce: rank 0's communicator is closed$"),
    probe("use-after-abort", _closed_or_aborted("abort"), gg.CollectiveError,
          r"^Communicator\.all_reduce: rank 0's communicator is aborted$"),
]


@pytest.mark.parametrize("case", COLLECTIVES)
def test_collectives(device, case):
    w = collectives_world(device)
    try:
        check(case, w, collectives_state)
    finally:
        for comm in w.comms:
            comm.close()


# Child interpreters: the command line, faults and waits


QUIET_LIMIT = 120  # seconds a child may print nothing before it counts as hung (generous: it is no speed limit)


def run_child(args: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """``python ARGS`` in a child interpreter with ``env`` added: (its status, the lines it printed, its stderr). Each
    line the child prints is progress; one silent for QUIET_LIMIT seconds is killed, and the test fails saying
    after which line it hung."""
    environ = {k: v for k, v in os.environ.items() if k not in ("GPUGRAPH_BACKEND", "GPUGRAPH_CPU_DEVICES")}
    environ.update(env or {}, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environ)
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def drain() -> None:
        assert child.stderr is not None
        errors.append(child.stderr.read())

    threads = [threading.Thread(target=pump, daemon=True), threading.Thread(target=drain, daemon=True)]
    for thread in threads:
        thread.start()
    printed: list[str] = []
    while True:
        try:
            line = lines.get(timeout=QUIET_LIMIT)
        except queue.Empty:
            child.kill()
            child.wait()
            pytest.fail(f"the child printed nothing for {QUIET_LIMIT} s after {printed[-1:] or 'its start'}: hung")
        if line is None:
            break
        printed.append(line)
    status = child.wait()
    threads[1].join()
    return status, printed, "".join(errors)


# The command line: a mistake is one line on stderr and exit status 2, before anything runs

PROG = "python -m gpugraph"


@dataclass(frozen=True)
class Usage:
    args: tuple[str, ...]
    env: dict[str, str]
    match: str  # the one line on stderr


def usage(name: str, args: str, match: str, env: dict[str, str] | None = None, *, skip: str = "") -> Any:
    marks = [pytest.mark.skipif(bool(skip), reason=skip)] if skip else []
    return pytest.param(Usage(tuple(args.split()) if args else (), env or {}, match), id=name, marks=marks)


NO_PROC = "" if os.path.isdir("/proc") else "no /proc here"
DEVICES_RULE = r"\$GPUGRAPH_CPU_DEVICES must be a whole number from 1 to 64, got"

COMMAND_LINE = [
    usage("no-command", "", rf"^{PROG}: error: the following arguments are required: command \(see {PROG} --help\)$"),
    usage("unknown-command", "bogus",
          rf"^{PROG}: error: argument command: invalid choice: 'bogus' \(choose from 'demo', 'info', 'bench'\)"),
    usage("demo-unknown-backend", "demo --backend nope",
          rf"^{PROG} demo: error: --backend nope: Device: expected 'cuda', 'hip' or 'cpu', optionally with ':index', "
          rf"got 'nope'$"),
    usage("demo-backend-in-capitals", "demo --backend CPU", rf"^{PROG} demo: error: --backend CPU: Device: expected"),
    usage("demo-device-past-the-machine's", "demo --backend cpu:99",
          rf"^{PROG} demo: error: --backend cpu:99: this machine has \d+ cpu device\(s\)$"),
    usage("demo-index-not-a-number", "demo --backend cpu:x",
          rf"^{PROG} demo: error: --backend cpu:x: Device: the index after ':' must be a non-negative int, got "
          rf"'cpu:x'$"),
    usage("demo-two-indices", "demo --backend cpu:1:2",
          rf"^{PROG} demo: error: --backend cpu:1:2: Device: the index after ':' must be a non-negative int"),
    usage("demo-backend-without-value", "demo --backend",
          rf"^{PROG} demo: error: argument --backend: expected one argument \(see {PROG} demo --help\)$"),
    usage("demo-unknown-option", "demo --extra", rf"^{PROG}: error: unrecognized arguments: --extra"),
    usage("info-extra-argument", "info extra", rf"^{PROG}: error: unrecognized arguments: extra"),
    usage("bench-json-folder-missing", "bench --json /nonexistent/out.json",
          rf"^{PROG} bench: error: argument --json: the folder '/nonexistent' does not exist \(see {PROG} bench "
          rf"--help\)$"),
    usage("bench-json-a-folder", f"bench --json {os.sep}",
          rf"^{PROG} bench: error: argument --json: '/' is a folder; expected a file name"),
    usage("bench-json-not-writable", "bench --json /proc/out.json",
          rf"^{PROG} bench: error: argument --json: '/proc/out\.json' is not writable", skip=NO_PROC),
    usage("bench-json-after-the-separator", "bench -- --json /nonexistent/out.json",
          rf"^{PROG} bench: error: argument --json: the folder '/nonexistent' does not exist"),
    usage("bench-unknown-workload", "bench --workload nope",
          rf"^{PROG} bench: error: argument --workload: invalid choice: 'nope' \(choose from "),
    usage("bench-unknown-option", "bench --bogus", rf"^{PROG} bench: error: unrecognized arguments: --bogus"),
    usage("bench-repeats-negative", "bench --repeats -1",
          rf"^{PROG} bench: error: argument --repeats: expected a positive int, got '-1'"),
    usage("bench-repeats-not-a-number", "bench --repeats x",
          rf"^{PROG} bench: error: argument --repeats: expected a positive int, got 'x'"),
    usage("bench-warmup-negative", "bench --warmup -1",
          rf"^{PROG} bench: error: argument --warmup: expected a non-negative int, got '-1'"),
    usage("bench-unknown-backend", "bench --backend nope",
          rf"^{PROG} bench: error: --backend nope: Device: expected 'cuda', 'hip' or 'cpu'"),
    usage("env-backend-unknown", "demo",
          rf"^{PROG} demo: error: GPUGRAPH_BACKEND=bogus: Device: expected 'cuda', 'hip' or 'cpu'",
          {"GPUGRAPH_BACKEND": "bogus"}),
    usage("env-backend-past-the-machine's", "demo",
          rf"^{PROG} demo: error: GPUGRAPH_BACKEND=cpu:99: this machine has \d+ cpu device\(s\)$",
          {"GPUGRAPH_BACKEND": "cpu:99"}),
    usage("env-cpu-devices-zero", "demo --backend cpu",
          rf"^{PROG} demo: error: (--backend cpu: |cpu: ){DEVICES_RULE} '0'$",
          {"GPUGRAPH_CPU_DEVICES": "0"}),
    usage("env-cpu-devices-not-a-number", "bench --backend cpu",
          rf"^{PROG} bench: error: (--backend cpu: |cpu: ){DEVICES_RULE} 'abc'$", {"GPUGRAPH_CPU_DEVICES": "abc"}),
    usage("env-cpu-devices-past-64", "demo --backend cpu",
          rf"^{PROG} demo: error: (--backend cpu: |cpu: ){DEVICES_RULE} '65'$", {"GPUGRAPH_CPU_DEVICES": "65"}),
]


@pytest.mark.parametrize("case", COMMAND_LINE)
def test_command_line(device, case):
    """Run with $GPUGRAPH_BACKEND naming the fixture's backend (where the case sets none)."""
    status, printed, stderr = run_child(["-m", "gpugraph", *case.args],
                                        {"GPUGRAPH_BACKEND": device.backend, **case.env})
    assert status == 2, (printed, stderr)
    assert len(stderr.splitlines()) == 1, stderr
    assert re.search(case.match, stderr.rstrip("\n")), stderr
    assert printed == []


# Faults: kernels that stop, in a child interpreter (a fault that took the interpreter down would end the suite)

FAULT_SOURCE = r"""
#ifndef assert  // (NVRTC without the toolkit's headers declares assert itself)
#include <assert.h>
#endif
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
extern "C" __global__ void trap_at(int* x, int thread) { if (threadIdx.x == thread) __trap(); x[threadIdx.x] = 1; }
extern "C" __global__ void check_42(int* x) { assert(x[0] == 42); }
extern "C" __global__ void synced_check_42(int* x) { __syncthreads(); assert(x[0] == 42); }
extern "C" __global__ void quotient(int* x, int d) { x[threadIdx.x] = x[threadIdx.x] / d; }
extern "C" __global__ void write_from(int* x, int start) { x[start + threadIdx.x] = 1; }
extern "C" __global__ void read_to(const int* x, int n, int* out) {
    if (threadIdx.x == 0) { int sum = 0; for (int i = 0; i < n; ++i) sum += x[i]; out[0] = sum; }
}
// (The null address comes from memory, x[0] == 0: NVRTC drops a store it can see is to a null constant.)
extern "C" __global__ void write_null(int* x) { int* p = (int*)(size_t)x[0]; p[threadIdx.x] = 1; }
extern "C" __global__ void write_through(int** p) { *p[0] = 1; }
__device__ int deep(int n) { volatile int pad[256]; pad[0] = n; return n == 0 ? 0 : deep(n - 1) + pad[0]; }
extern "C" __global__ void recurse(int* x, int n) { x[blockIdx.x] = deep(n); }
extern "C" __global__ void synced_recurse(int* x, int n) { __syncthreads(); x[threadIdx.x] = deep(n); }
extern "C" __global__ void set_condition(unsigned long long handle) {
    if (threadIdx.x == 0) cudaGraphSetConditional(handle, 1);
}
extern "C" __global__ void fill(int* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = i; }
extern "C" __global__ void write_misaligned(int* x) { *(int*)((char*)x + 1) = 5; }
"""

FAULT_PRELUDE = f"""
import json, sys
import numpy as np
import gpugraph as gg
device = gg.Device(sys.argv[1])
stream = device.stream()
SOURCE = {FAULT_SOURCE!r}
def kernel(name):
    return gg.Kernel(SOURCE, name)
x = device.zeros(64, np.int32)
wait = stream.synchronize  # (what the report calls first: a probe may name another wait)
print("ready")
"""

FAULT_REPORT = """
print("enqueued")
try:
    wait()
    device.synchronize()
except BaseException as error:
    found = {"raised": type(error).__name__, "code": str(getattr(error, "code", "")), "message": str(error)}
else:
    found = {"raised": None}
print("REPORT " + json.dumps(found))
if device.backend == "cpu":  # (a GPU's context cannot be used after a fault; the CPU backend's device goes on)
    y = device.zeros(64, np.int32)
    stream.launch(kernel("fill"), 1, 64, y, 64)
    stream.synchronize()
    print("AFTER", int(y.to_numpy().sum()))
"""


@dataclass(frozen=True)
class Fault:
    code: str  # enqueues work that stops a kernel (on ``stream`` of ``device``; ``x``: 64 int32 zeros); may set
    # ``wait``, the call that is to raise (``stream.synchronize`` by default)
    raised: str  # the exception's class name
    error_code: str  # its ``code`` (BackendError's: CUDA's), or ""
    match: str  # its message, on the CPU backend (a GPU's words are the driver's)
    cpu_bug: str = ""  # a defect of the CPU backend left open: the probe fails there until it is fixed (strict)


def fault(name: str, code: str, raised: str, error_code: str, match: str, *, cpu_only: str = "",
          cpu_bug: str = "") -> Any:
    marks = [pytest.mark.stops_a_kernel]
    return pytest.param(Fault(textwrap.dedent(code), raised, error_code, match, cpu_bug), cpu_only, id=name,
                        marks=marks)


STOPPED = r"^cpu: Kernel\('{}'\) failed: {}: the kernel stopped: "
NO_TRAP_ON_A_GPU = "a GPU gives an unspecified value for an integer division by zero, and runs on"
PAST_THE_END = "a GPU's access a little past an allocation's end may reach other memory unnoticed"
STACK = "how a GPU stops a thread that overflows its stack is the driver's"

FAULTS = [
    fault("trap", "stream.launch(kernel('trap_at'), 1, 32, x, 3)", "BackendError", "CUDA_ERROR_LAUNCH_FAILED",
          STOPPED.format("trap_at", "CUDA_ERROR_LAUNCH_FAILED") + r"block \(0, 0, 0\), thread \(3, 0, 0\): __trap\(\) "
                                                                   r"called$"),
    fault("assert", "stream.launch(kernel('check_42'), 1, 32, x)", "BackendError", "CUDA_ERROR_ASSERT",
          STOPPED.format("check_42", "CUDA_ERROR_ASSERT") + r"block \(0, 0, 0\), thread \(0, 0, 0\): .*: Assertion "
                                                            r"`x\[0\] == 42` failed\.$"),
    fault("assert-in-a-block-that-synchronizes", "stream.launch(kernel('synced_check_42'), 2, 32, x)", "BackendError",
          "CUDA_ERROR_ASSERT", STOPPED.format("synced_check_42", "CUDA_ERROR_ASSERT") + r"block \(\d, 0, 0\), thread "
                                                                                       r"\(\d+, 0, 0\): .*Assertion"),
    fault("integer-division-by-zero", "stream.launch(kernel('quotient'), 1, 32, x, 0)", "BackendError",
          "CUDA_ERROR_LAUNCH_FAILED", STOPPED.format("quotient", "CUDA_ERROR_LAUNCH_FAILED") +
          r"block \(0, 0, 0\), thread \(0, 0, 0\): integer division by zero or overflow \(a GPU gives an unspecified "
          r"value\)$", cpu_only=NO_TRAP_ON_A_GPU),
    fault("int-min-divided-by-minus-one", """
          stream.memset(x, -2**31)
          stream.launch(kernel('quotient'), 1, 32, x, -1)
          """, "BackendError", "CUDA_ERROR_LAUNCH_FAILED", r"integer division by zero or overflow",
          cpu_only=NO_TRAP_ON_A_GPU),
    fault("write-past-the-end", "stream.launch(kernel('write_from'), 1, 64, x, 64)", "BackendError",
          "CUDA_ERROR_ILLEGAL_ADDRESS", STOPPED.format("write_from", "CUDA_ERROR_ILLEGAL_ADDRESS") +
          r"block \(0, 0, 0\), thread \(\d+, 0, 0\): illegal address: (a write to|an access to) 0x[0-9a-f]+, \d+ bytes "
          r"past the end of argument 0 \(int\* x: 64 int32\)$", cpu_only=PAST_THE_END),
    fault("read-past-the-end", "stream.launch(kernel('read_to'), 1, 1, x, 1000, device.zeros(1, np.int32))",
          "BackendError", "CUDA_ERROR_ILLEGAL_ADDRESS",
          r"illegal address: (a read of|an access to) 0x[0-9a-f]+, \d+ bytes past the end of argument 0 "
          r"\(int\* x: 64 int32\)$", cpu_only=PAST_THE_END),
    fault("write-through-null", "stream.launch(kernel('write_null'), 1, 32, x)", "BackendError",
          "CUDA_ERROR_ILLEGAL_ADDRESS", STOPPED.format("write_null", "CUDA_ERROR_ILLEGAL_ADDRESS") +
          r"block \(0, 0, 0\), thread \(0, 0, 0\): illegal address: (a write to|an access to) 0x0$"),
    fault("write-through-a-freed-address", """
          freed = stream.alloc(64, np.int32)
          address = freed.ptr
          stream.free(freed)
          stream.synchronize()
          stream.launch(kernel('write_through'), 1, 1, device.asarray(np.array([address], np.uint64)))
          """, "GpuGraphError", "", r"^Kernel\('write_through'\) argument 0 \(int\*\* p\): element 0 is 0x[0-9a-f]+, "
                                  r"the address of the stream allocation at 0x[0-9a-f]+, which is not allocated when "
                                  r"the kernel runs$",
          cpu_only="freed stream-ordered memory stays mapped in a GPU's pool"),
    fault("stack-overflow", "stream.launch(kernel('recurse'), 1, 1, x, 100000)", "BackendError",
          "CUDA_ERROR_ILLEGAL_ADDRESS", STOPPED.format("recurse", "CUDA_ERROR_ILLEGAL_ADDRESS") +
          r"block \(0, 0, 0\), thread \(0, 0, 0\): stack overflow: the thread used up its stack \(its local memory\), "
          r"(a write to|an access to) 0x[0-9a-f]+ \(deep recursion, or large local arrays\)$", cpu_only=STACK),
    fault("stack-overflow-in-many-blocks", "stream.launch(kernel('recurse'), 64, 32, x, 100000)", "BackendError",
          "CUDA_ERROR_ILLEGAL_ADDRESS", r"stack overflow: the thread used up its stack", cpu_only=STACK),
    fault("stack-overflow-in-a-block-that-synchronizes", "stream.launch(kernel('synced_recurse'), 1, 32, x, 100000)",
          "BackendError", "CUDA_ERROR_ILLEGAL_ADDRESS", r"stack overflow: the thread used up its stack",
          cpu_only=STACK),
    fault("trap-in-a-kernel-node", """
          graph = gg.Graph(device)
          graph.add_kernel(kernel('trap_at'), 1, 32, x, 0)
          exe = graph.instantiate()
          exe.launch(stream)
          """, "BackendError", "CUDA_ERROR_LAUNCH_FAILED", r"thread \(0, 0, 0\): __trap\(\) called$"),
    fault("trap-in-a-captured-graph-replayed", """
          with stream.capture() as cap:
              stream.launch(kernel('trap_at'), 1, 32, x, 5)
          exe = cap.graph.instantiate()
          exe.launch(stream)
          """, "BackendError", "CUDA_ERROR_LAUNCH_FAILED", r"thread \(5, 0, 0\): __trap\(\) called$"),
    fault("trap-in-a-loop-body", """
          graph = gg.Graph(device)
          condition = graph.condition(default=1)
          body = graph.add_while(condition).bodies[0]
          body.add_kernel(kernel('trap_at'), 1, 32, x, 1)
          exe = graph.instantiate()
          exe.launch(stream)
          """, "BackendError", "CUDA_ERROR_LAUNCH_FAILED", r"thread \(1, 0, 0\): __trap\(\) called$"),
    fault("condition-set-through-a-number", """
          graph = gg.Graph(device)
          graph.add_kernel(kernel('set_condition'), 1, 1, 12345)
          graph.instantiate().launch(stream)
          """, "BackendError", "CUDA_ERROR_ILLEGAL_ADDRESS", r"illegal address",
          cpu_only="what a GPU does with a handle of no condition is the driver's"),
    fault("condition-set-outside-a-graph", "stream.launch(kernel('set_condition'), 1, 1, 12345)", "BackendError",
          "CUDA_ERROR_ILLEGAL_ADDRESS", r"illegal address",
          cpu_only="what a GPU does with a handle of no condition is the driver's"),
    fault("python-kernel-raises", """
          broken = gg.Kernel(SOURCE, 'fill', cpu=lambda launch, x, n: 1 / 0)
          stream.launch(broken, 1, 64, x, 64)
          """, "ZeroDivisionError", "",
          r"^division by zero$", cpu_only="a kernel's Python implementation runs on it alone"),
    fault("host-function-raises", "stream.host(lambda: {}['missing'])", "KeyError", "", r"'missing'"),
    fault("two-streams-stop", """
          other = device.stream()
          stream.launch(kernel('trap_at'), 1, 32, x, 0)
          other.launch(kernel('check_42'), 1, 32, device.zeros(1, np.int32))
          wait = device.synchronize  # (which gathers both streams' errors)
          """, "StreamErrors", "", r"^2 streams raised errors since their last synchronize: BackendError: .*__trap\(\) "
                                   r"called; BackendError: .*Assertion `x\[0\] == 42` failed\. \(2 sub-exceptions\)$",
          cpu_only="on a GPU the first fault ends the context"),
    fault("misaligned-access", "stream.launch(kernel('write_misaligned'), 1, 1, x)", "BackendError",
          "CUDA_ERROR_MISALIGNED_ADDRESS", r"misaligned address",
          cpu_bug="the CPU backend runs a misaligned access (x86 allows it), where a GPU stops the kernel with "
                  "CUDA_ERROR_MISALIGNED_ADDRESS; catching it would take checking every access"),
    fault("to-numpy-after-a-fault", """
          stream.launch(kernel('trap_at'), 1, 32, x, 0)
          wait = x.to_numpy
          """, "BackendError", "CUDA_ERROR_LAUNCH_FAILED", r"__trap\(\) called$"),
]


@pytest.mark.parametrize("case, cpu_only", FAULTS)
def test_faults(device, known_bug, case, cpu_only):
    """The kernel stops, the next synchronize raises the error at once (the child reports it, then, on the CPU
    backend, runs a kernel right on the same device)."""
    if cpu_only and device.backend != "cpu":
        pytest.skip(f"a rule of the CPU backend alone: {cpu_only}")
    if case.cpu_bug:
        known_bug(case.cpu_bug)
    code = FAULT_PRELUDE + case.code + FAULT_REPORT
    status, printed, stderr = run_child(["-c", code, device.backend])
    assert status == 0, "\n".join(printed) + stderr
    report = json.loads(next(line for line in printed if line.startswith("REPORT "))[len("REPORT "):])
    assert report["raised"] == case.raised, report
    assert report["code"] == case.error_code, report
    if device.backend == "cpu":
        assert re.search(case.match, report["message"]), report["message"]
        assert printed[-1] == "AFTER 2016", printed  # (0 + 1 + ... + 63: the device works on)


# Waits that must end: in a child interpreter, stopped only when it falls silent (QUIET_LIMIT)

WAIT_PRELUDE = """
import sys, threading
import numpy as np
import gpugraph as gg
device = gg.Device(sys.argv[1])
stream = device.stream()
print("ready")
"""


@dataclass(frozen=True)
class Wait:
    code: str  # ends by printing the line ``last``
    last: str


def wait(name: str, code: str, last: str, *, cpu_only: str = "", marks: Any = ()) -> Any:
    return pytest.param(Wait(textwrap.dedent(code), last), cpu_only, id=name, marks=marks)


WAITS = [
    wait("semaphore-wait-times-out", """
         semaphore = gg.EmulatedSemaphore(0)
         print(semaphore.wait(1, timeout=0.2), semaphore.wait(1, timeout=0))
         """, "False False"),
    wait("semaphore-signaled-from-another-thread", """
         semaphore = gg.EmulatedSemaphore(0)
         threading.Timer(0.2, semaphore.signal, (5,)).start()
         print(semaphore.wait(5), semaphore.value)
         """, "True 5"),
    wait("stream-waits-for-a-semaphore-signaled-later", """
         semaphore = gg.EmulatedSemaphore(0)
         imported = device.import_semaphore(semaphore)
         x = device.zeros(4, np.float32)
         stream.wait_semaphores(imported, 1)
         stream.memset(x, 2.0)
         print("waiting")
         threading.Timer(0.2, semaphore.signal, (1,)).start()
         stream.synchronize()
         print(x.to_numpy()[0])
         """, "2.0", cpu_only=EMULATED),
    wait("event-never-recorded", """
         event = device.event()
         event.synchronize()
         stream.wait(event)
         stream.synchronize()
         print(event.done)
         """, "True"),
    wait("wait-value-released-by-another-stream", """
         flag = device.zeros(1, np.uint32)
         out = device.zeros(2, np.int32)
         stream.wait_value(flag, 1)
         stream.memset(out, 7)
         print("waiting")
         device.stream().write_value(flag, 1)
         stream.synchronize()
         print(out.to_numpy()[0])
         """, "7"),
    wait("host-function-synchronizes-its-stream", """
         stream.host(stream.synchronize)
         try:
             stream.synchronize()
         except gg.GpuGraphError as error:
             print(type(error).__name__)
         stream.synchronize()
         print("usable")
         """, "usable"),
    wait("host-function-waits-for-another-stream", """
         other = device.stream()
         gate = threading.Event()
         other.host(gate.wait, 60)
         stream.host(other.synchronize)
         try:
             stream.synchronize()
         except gg.GpuGraphError as error:
             print(type(error).__name__)
         gate.set()
         device.synchronize()
         print("usable")
         """, "usable"),
    wait("synchronize-after-a-fault", """
         trapping = gg.Kernel('extern "C" __global__ void stop(int* x) { __trap(); }', "stop")
         stream.launch(trapping, 1, 1, device.zeros(1, np.int32))
         for _ in range(2):
             try:
                 stream.synchronize()
                 print("clean")
             except gg.BackendError as error:
                 print(error.code)
         """, "clean", cpu_only="a GPU's context cannot be used after a fault", marks=pytest.mark.stops_a_kernel),
    wait("synchronize-in-a-capture", """
         try:
             with stream.capture():
                 stream.synchronize()
         except gg.CaptureError as error:
             print(error.api)
         device.synchronize()
         print("usable")
         """, "usable"),
    wait("rank-whose-peer-never-comes", """
         devices = [gg.Device("cpu:0"), gg.Device("cpu:1")]
         comms = gg.communicators(devices, timeout=0.5)
         x = devices[0].zeros(4, np.float32)
         with gg.collective_group():
             comms[0].all_reduce(x, x, stream=stream)  # (rank 1 never makes its call)
         try:
             stream.synchronize()
         except gg.CollectiveError as error:
             print(error.rank, error.collective)
         """, "0 all_reduce", cpu_only="CUDA refuses timeout= (NCCL has no watchdog)"),
    wait("rank-released-by-abort", """
         devices = [gg.Device("cpu:0"), gg.Device("cpu:1")]
         comms = gg.communicators(devices)
         x = devices[0].zeros(4, np.float32)
         with gg.collective_group():
             comms[0].all_reduce(x, x, stream=stream)
         print("waiting")
         threading.Timer(0.2, comms[1].abort).start()
         try:
             stream.synchronize()
         except gg.CollectiveError as error:
             print("aborted", error.rank)
         """, "aborted 0", cpu_only="a part that abort stopped raises nothing on CUDA"),
    wait("exit-with-work-blocked", """
         gate = threading.Event()
         stream.host(gate.wait)
         print("leaving")
         """, "leaving", marks=pytest.mark.blocks_exit),
]


@pytest.mark.parametrize("case, cpu_only", WAITS)
def test_waits_end(device, case, cpu_only):
    if cpu_only and device.backend != "cpu":
        pytest.skip(f"a rule of the CPU backend alone: {cpu_only}")
    env = {"GPUGRAPH_EXIT_TIMEOUT": "1"}
    status, printed, stderr = run_child(["-c", WAIT_PRELUDE + case.code, device.backend], env)
    assert status == 0, "\n".join(printed) + stderr
    assert printed[-1] == case.last, printed
