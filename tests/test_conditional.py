"""Conditional nodes (IF, IF/ELSE, WHILE, SWITCH) in explicit graphs, on every backend: the bodies run as the
condition's value says, which kernels of the graph set on the device (cudaGraphSetConditional)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg
from kernels import run

# One kernel source for every backend: the CPU backend's header declares cudaGraphSetConditional as the CUDA
# runtime does; for NVRTC, which has no CUDA header, the source declares it itself as CUDA users do.
SOURCE = r"""
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

// Adds 1 to x[0] and counts n[0] down; the condition says whether it is still above 0.
extern "C" __global__ void count_down(float* x, unsigned int* n, unsigned long long handle) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        x[0] += 1.0f;
        n[0] -= 1;
        cudaGraphSetConditional(handle, n[0] > 0);
    }
}

extern "C" __global__ void set_condition(unsigned long long handle, const unsigned int* value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, value[0]);
}

extern "C" __global__ void add(float* x, float value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += value;
}
"""
COUNT_DOWN = gg.Kernel(SOURCE, "count_down")
SET = gg.Kernel(SOURCE, "set_condition")
ADD = gg.Kernel(SOURCE, "add")


def value_of(device: gg.Device, value: int) -> gg.Array:
    return device.asarray(np.array([value], np.uint32))


@pytest.mark.parametrize("value, expected", [(1, 10.0), (7, 10.0), (0, 0.0)])
def test_if_runs_its_body_when_the_value_is_not_zero(device, value, expected):
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    condition = graph.condition()
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, value))
    node = graph.add_if(condition, after=setter)
    node.bodies[0].add_kernel(ADD, 1, 1, x, 10.0)
    run(graph)
    assert x.to_numpy()[0] == expected
    assert node.kind is gg.NodeKind.CONDITIONAL and len(node.bodies) == 1
    assert node.params.type == "if" and node.params.condition is condition


@pytest.mark.parametrize("value, expected", [(1, 10.0), (0, 20.0)])
def test_if_else_runs_the_second_body_when_the_value_is_zero(device, value, expected):
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    condition = graph.condition()
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, value))
    then, otherwise = graph.add_if(condition, has_else=True, after=setter).bodies
    then.add_kernel(ADD, 1, 1, x, 10.0)
    otherwise.add_kernel(ADD, 1, 1, x, 20.0)
    run(graph)
    assert x.to_numpy()[0] == expected


def test_while_runs_until_its_body_sets_the_value_to_zero(device):
    """A body that sets its own condition: five runs of the body, in one launch."""
    x, n, graph = device.zeros(1, np.float32), value_of(device, 5), gg.Graph(device)
    condition = graph.condition(default=1)
    graph.add_while(condition).bodies[0].add_kernel(COUNT_DOWN, 1, 1, x, n, condition)
    run(graph)
    assert x.to_numpy()[0] == 5.0 and n.to_numpy()[0] == 0


def test_while_checks_the_value_before_the_first_run(device):
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    condition = graph.condition(default=0)
    graph.add_while(condition).bodies[0].add_kernel(COUNT_DOWN, 1, 1, x, value_of(device, 5), condition)
    run(graph)
    assert x.to_numpy()[0] == 0.0


@pytest.mark.parametrize("value", [0, 1, 2, 3, 100])
def test_switch_runs_the_body_of_the_value_and_none_past_the_last(device, value):
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    condition = graph.condition()
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, value))
    node = graph.add_switch(condition, 3, after=setter)
    for i, body in enumerate(node.bodies):
        body.add_kernel(ADD, 1, 1, x, 10.0 ** i)
    run(graph)
    assert x.to_numpy()[0] == (10.0 ** value if value < 3 else 0.0)


def test_nested_while_holding_an_if(device):
    """A WHILE whose body counts down and runs an IF on a second condition; both made by the outer graph."""
    x, y, n, graph = device.zeros(1, np.float32), device.zeros(1, np.float32), value_of(device, 4), gg.Graph(device)
    loop, check = graph.condition(default=1), graph.condition()
    body = graph.add_while(loop).bodies[0]
    step = body.add_kernel(COUNT_DOWN, 1, 1, x, n, loop)
    inner = body.add_kernel(SET, 1, 1, check, n, after=step)  # the IF runs while n is not 0 after the step
    body.add_if(check, after=inner).bodies[0].add_kernel(ADD, 1, 1, y, 1.0)
    run(graph)
    assert x.to_numpy()[0] == 4.0 and y.to_numpy()[0] == 3.0


def test_reset_starts_each_launch_with_the_default(device):
    """reset=True: each launch starts the loop again though the last body left the value at 0. (Without reset,
    CUDA leaves the value undefined at a launch's start: no test may count on what the CPU backend keeps.)"""
    x, n, graph = device.zeros(1, np.float32), value_of(device, 2), gg.Graph(device)
    condition = graph.condition(default=1, reset=True)
    graph.add_while(condition).bodies[0].add_kernel(COUNT_DOWN, 1, 1, x, n, condition)
    stream, two = device.stream(), value_of(device, 2)
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.memcpy(n, two)
        exe.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 4.0


def test_a_kernel_may_set_a_condition_without_reset_before_the_node_reads_it(device):
    """The contract of reset=False: the value is undefined at a launch's start (CUDA's), so a kernel sets it
    before the node reads it; what reset=True does is tested above (the default at each launch)."""
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    condition = graph.condition(default=0, reset=False)
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, 1))
    graph.add_if(condition, after=setter).bodies[0].add_kernel(ADD, 1, 1, x, 1.0)
    run(graph, launches=3)
    assert x.to_numpy()[0] == 3.0


def test_update_takes_the_bodies_of_a_graph_of_the_same_shape(device):
    x = device.zeros(1, np.float32)

    def build(amount):
        graph = gg.Graph(device)
        # (default 0: only the new graph's setter, which sets the new graph's condition, makes the body run. The
        # executable graph's node reads that condition after the update, on CUDA too: H200, 2026-11-24.)
        condition = graph.condition(default=0)
        setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, 1))
        graph.add_if(condition, after=setter).bodies[0].add_kernel(ADD, 1, 1, x, amount)
        return graph

    stream = device.stream()
    with build(1.0).instantiate() as exe:
        exe.update(build(5.0))
        exe.launch(stream)
        stream.synchronize()
        assert x.to_numpy()[0] == 5.0
        for kind in ("while", "if-else"):  # a WHILE where an IF was; an IF with an else body (one body more)
            other = gg.Graph(device)
            condition = other.condition(default=1)
            setter = other.add_kernel(SET, 1, 1, condition, value_of(device, 1))
            if kind == "while":
                other.add_while(condition, after=setter)
            else:
                other.add_if(condition, has_else=True, after=setter)
            with pytest.raises(gg.GraphUpdateError, match=r"parameters changed.*the conditional node was if with 1 "
                                                          r"bodies, got " + ("while with 1" if kind == "while" else
                                                                             "if with 2")):
                exe.update(other)


def test_an_update_whose_body_has_another_node_count_names_the_body_and_its_counts(device):
    x = device.zeros(1, np.float32)

    def build(body_nodes):
        graph = gg.Graph(device)
        condition = graph.condition(default=1)
        setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, 0))
        body = graph.add_if(condition, after=setter).bodies[0]
        for _ in range(body_nodes):
            body.add_kernel(ADD, 1, 1, x, 1.0)
        return graph

    with build(1).instantiate() as exe:
        new = build(3)
        node = new.nodes[1]
        message = rf"^update refused at {re.escape(repr(node))}: topology changed \(its body 0 has 3 nodes, the " \
                  rf"executable graph's 1\)$"
        with pytest.raises(gg.GraphUpdateError, match=message) as info:
            exe.update(new)
        assert info.value.node is node and node.kind is gg.NodeKind.CONDITIONAL


# Refusals: the same on every backend, at the call that breaks CUDA's rule.


def test_bodies_refuse_host_event_and_memory_nodes(device):
    graph = gg.Graph(device)
    body = graph.add_while(graph.condition()).bodies[0]
    event = device.event()
    for call in (lambda: body.add_host(print), lambda: body.add_event_record(event),
                 lambda: body.add_event_wait(event), lambda: body.add_alloc(4, np.float32)):
        with pytest.raises(gg.GraphError, match="body of a conditional node"):
            call()
    child = gg.Graph(device)
    child.add_host(print)
    with pytest.raises(gg.GraphError, match="cannot hold host nodes"):
        body.add_child(child)
    with pytest.raises(gg.GraphError, match="cannot be instantiated alone"):
        body.instantiate()


def test_a_condition_belongs_to_one_node_of_its_graph(device):
    graph, other = gg.Graph(device), gg.Graph(device)
    condition = graph.condition()
    with pytest.raises(gg.GraphError, match="was made by"):
        other.add_if(condition)
    with pytest.raises(gg.GraphError, match="was made by"):
        other.add_kernel(SET, 1, 1, condition, value_of(device, 1))
    graph.add_if(condition)
    with pytest.raises(gg.GraphError, match="belongs to one conditional node"):
        graph.add_while(condition)
    with pytest.raises(TypeError, match="stream launch outside a capture cannot take one"):
        device.stream().launch(SET, 1, 1, condition, value_of(device, 1))
    with pytest.raises(TypeError, match="cudaGraphConditionalHandle"):
        graph.add_kernel(ADD, 1, 1, device.zeros(1, np.float32), condition)
    with pytest.raises(TypeError, match="expected a Condition"):
        graph.add_if(1)


def test_condition_arguments_are_checked(device):
    graph = gg.Graph(device)
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        graph.condition(default=-1)
    with pytest.raises(TypeError, match="expected an int"):
        graph.condition(default=1.5)
    with pytest.raises(TypeError, match=r"^condition\(reset\): expected a bool, got int 1$"):
        graph.condition(reset=1)
    with pytest.raises(TypeError, match=r"^add_if\(has_else\): expected a bool, got int 1$"):
        graph.add_if(graph.condition(), has_else=1)
    numpy_flags = graph.condition(np.int64(3), reset=np.False_)  # NumPy scalars as Python ones
    assert (numpy_flags.default, numpy_flags.reset) == (3, False) and type(numpy_flags.reset) is bool
    assert len(graph.add_if(numpy_flags, has_else=np.True_).bodies) == 2
    with pytest.raises(ValueError, match="positive int"):
        graph.add_switch(graph.condition(), 0)
    with pytest.raises(gg.GraphError, match="only conditional nodes have bodies"):
        _ = graph.add_empty().bodies


def test_a_switch_node_has_at_most_max_switch_bodies(device):
    graph = gg.Graph(device)
    condition = graph.condition()
    limit = gg.MAX_SWITCH_BODIES
    with pytest.raises(ValueError, match=rf"^add_switch\(count\): expected a positive int of at most {limit} "
                                         r"\(gg.MAX_SWITCH_BODIES, the bodies a SWITCH node may have\), got 100000; "
                                         r"for more cases, let one body's kernel choose by the value$"):
        graph.add_switch(condition, 100_000)
    with pytest.raises(ValueError, match=rf"at most {limit} .*, got {limit + 1};"):
        graph.add_switch(condition, limit + 1)
    with pytest.raises(TypeError, match=r"^add_switch\(count\): expected a positive int \(the number of bodies\), "
                                        r"got float 3\.0$"):
        graph.add_switch(condition, 3.0)
    with pytest.raises(TypeError, match=r"got bool True$"):
        graph.add_switch(condition, True)
    assert len(graph) == 0  # (nothing half-done: the condition is free for the next node)
    node = graph.add_switch(condition, np.int32(limit))
    assert len(node.bodies) == limit
    stream, x = device.stream(), device.zeros(1, np.int32)
    with stream.capture() as capture:
        with pytest.raises(ValueError, match=rf"at most {limit} "):
            capture.add_switch(capture.condition(), limit + 1)
        stream.memset(x, 1)  # (the capture goes on)
    assert len(capture.graph) == 1


def test_graphs_with_conditional_nodes_are_not_cloned_nested_or_instantiated_twice(device):
    graph = gg.Graph(device)
    unused = graph.condition()
    graph.add_while(graph.condition())
    with pytest.raises(gg.GraphError, match="read by no conditional node"):
        graph.instantiate()
    graph.add_if(unused)
    with pytest.raises(gg.GraphError, match="cannot be cloned"):
        graph.clone()
    with pytest.raises(gg.GraphError, match="cannot be used as a child graph"):
        gg.Graph(device).add_child(graph)
    with graph.instantiate():
        with pytest.raises(gg.GraphError, match="only one executable graph"):
            graph.instantiate()
    graph.instantiate().close()  # once the first is closed


def test_a_graph_with_conditional_nodes_is_not_launched_into_a_capture(device):
    graph = gg.Graph(device)
    graph.add_while(graph.condition())
    stream = device.stream()
    with graph.instantiate() as exe:
        with pytest.raises(gg.CaptureError, match="conditional nodes"), stream.capture():
            exe.launch(stream)


def test_conditional_nodes_cannot_be_turned_off(device):
    graph = gg.Graph(device)
    node = graph.add_while(graph.condition())
    with graph.instantiate() as exe, pytest.raises(gg.GraphError, match=r"set_enabled\(.*\): the node is a "
                                                                          r"conditional node"):
        exe.set_enabled(node, False)


@pytest.mark.skipif("cuda" not in gg.available_backends(), reason="the CUDA driver's version")
def test_a_driver_older_than_conditional_nodes_need_is_named_at_the_call(monkeypatch):
    from gpugraph.backends.cuda import _driver
    graph = gg.Graph(gg.Device("cuda"))
    monkeypatch.setattr(_driver, "driver_version", lambda: 12020)
    with pytest.raises(gg.BackendError, match=r"Graph\.condition\) needs a driver of CUDA 12\.3 or newer; this driver "
                                              r"is CUDA 12\.2 \(cuDriverGetVersion: 12020\)"):
        graph.condition()
    monkeypatch.setattr(_driver, "driver_version", lambda: 12050)
    condition = graph.condition()
    with pytest.raises(gg.BackendError, match=r"an IF node with an else body .* needs a driver of CUDA 12\.8"):
        graph.add_if(condition, has_else=True)
    with pytest.raises(gg.BackendError, match=r"a SWITCH node .* needs a driver of CUDA 12\.8"):
        graph.add_switch(condition, 3)
    assert len(graph.nodes) == 0  # (nothing half-made)
    graph.add_while(condition)
    assert len(graph.nodes) == 1


def test_a_while_node_added_at_a_captures_frontier_between_captured_kernels(device):
    """The combined approach: captured work, a WHILE node at the frontier (its body filled explicitly), and
    captured work after it, which depends on it."""
    x, n = device.zeros(1, np.float32), value_of(device, 4)
    stream = device.stream()
    with stream.capture() as cap:
        stream.launch(ADD, 1, 1, x, 100.0)
        condition = cap.condition(default=1)
        loop = cap.add_while(condition)
        loop.bodies[0].add_kernel(COUNT_DOWN, 1, 1, x, n, condition)
        stream.launch(ADD, 1, 1, x, 0.5)
    graph = cap.graph
    nodes = graph.nodes
    assert [node.kind for node in nodes].count(gg.NodeKind.CONDITIONAL) == 1
    last = next(node for node in nodes if node.kind is gg.NodeKind.KERNEL and node.params.args[1] == 0.5)
    assert loop in last.dependencies
    run(graph)
    assert x.to_numpy()[0] == 104.5


def test_an_if_node_in_a_capture_reached_through_the_current_stream(device):
    x, one = device.zeros(1, np.float32), value_of(device, 1)
    stream = device.stream()

    def work(value: gg.Array) -> None:
        current = gg.current_stream(device)
        condition = current.active_capture.condition()
        current.launch(SET, 1, 1, condition, value)
        then, otherwise = current.active_capture.add_if(condition, has_else=True).bodies
        then.add_kernel(ADD, 1, 1, x, 1.0)
        otherwise.add_kernel(ADD, 1, 1, x, 2.0)

    with gg.use_stream(stream), stream.capture() as cap:
        work(one)
    assert stream.active_capture is None
    run(cap.graph, launches=3)
    assert x.to_numpy()[0] == 3.0


def test_a_captured_function_with_a_while_node_runs_it_at_every_call(device):
    """@captured captures the WHILE node with the function's work; a new key captures again and updates the
    cached executable graph, whose WHILE node then reads the new graph's condition."""
    stream = device.stream()

    @gg.captured
    def count(x, n):
        capture = gg.current_stream(x.device).active_capture
        condition = capture.condition(default=1)
        capture.add_while(condition).bodies[0].add_kernel(COUNT_DOWN, 1, 1, x, n, condition)

    with gg.use_stream(stream):
        for steps in (3, 5):
            x, n = device.zeros(1, np.float32), value_of(device, steps)
            count(x, n)
            stream.synchronize()
            assert x.to_numpy()[0] == steps
    assert count.stats.captures == 2 and count.stats.updates == 1 and count.stats.instantiations == 1


def test_update_from_a_graph_with_conditions_and_its_own_executable_graph_is_refused(device):
    def build():
        graph = gg.Graph(device)
        condition = graph.condition(default=1)
        graph.add_if(condition).bodies[0].add_kernel(ADD, 1, 1, device.zeros(1, np.float32), 1.0)
        return graph

    first, second = build(), build()
    with first.instantiate() as exe, second.instantiate():
        with pytest.raises(gg.GraphUpdateError, match=r"has conditional nodes and an executable graph of its own"):
            exe.update(second)
    with first.instantiate() as exe:  # (once the other is closed: taken)
        exe.update(second)


def test_a_body_filled_by_stream_capture(device):
    """A WHILE body captured from a stream (capture into the body graph, cudaStreamBeginCaptureToGraph)."""
    x, n = device.zeros(1, np.float32), value_of(device, 3)
    graph = gg.Graph(device)
    condition = graph.condition(default=1)
    body = graph.add_while(condition).bodies[0]
    stream = device.stream()
    with stream.capture(into=body):
        stream.launch(COUNT_DOWN, 1, 1, x, n, condition)
        stream.launch(ADD, 1, 1, x, 10.0)
    assert len(body.nodes) == 2
    run(graph)
    assert x.to_numpy()[0] == 33.0


@pytest.mark.parametrize("work", ["host", "alloc"])
def test_a_captured_body_refuses_host_and_memory_work_at_the_call(device, work):
    graph = gg.Graph(device)
    body = graph.add_while(graph.condition()).bodies[0]
    stream = device.stream()
    with pytest.raises(gg.GraphError, match=rf"Stream\.{work}: .* is the body of a conditional node, which cannot "
                                            rf"hold .* nodes"):
        with stream.capture(into=body):
            if work == "host":
                stream.host(print, "never")
            else:
                stream.alloc(4, np.float32)
    assert len(body.nodes) == 0 and not stream.is_capturing


# Conditional nodes at the edges of the rules: setters, updates, captures and bodies, on every backend.


def test_set_params_takes_a_condition_of_the_graph(device):
    x, n, graph = device.zeros(1, np.float32), value_of(device, 1), gg.Graph(device)
    condition = graph.condition(default=1)
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, 0))
    graph.add_if(condition, after=setter).bodies[0].add_kernel(ADD, 1, 1, x, 1.0)
    other = gg.Graph(device).condition()
    stream = device.stream()
    with graph.instantiate() as exe:
        exe.set_params(setter, condition, n)  # (the same condition, another value: the body runs)
        exe.launch(stream)
        stream.synchronize()
        assert x.to_numpy()[0] == 1.0
        with pytest.raises(gg.GraphError, match=r"set_params\(Kernel\('set_condition'\)\): Condition.* was made by"):
            exe.set_params(setter, other, n)


def test_setters_name_the_rule_for_a_node_inside_a_body(device):
    x, graph = device.zeros(1, np.float32), gg.Graph(device)
    inner = graph.add_while(graph.condition()).bodies[0].add_kernel(ADD, 1, 1, x, 1.0)
    with graph.instantiate() as exe, pytest.raises(gg.GraphError, match=r"is in a body of a conditional node"):
        exe.set_params(inner, x, 2.0)


def _if_graph(device, x, amount=1.0):
    graph = gg.Graph(device)
    condition = graph.condition(default=0)
    setter = graph.add_kernel(SET, 1, 1, condition, value_of(device, 1))
    graph.add_if(condition, after=setter).bodies[0].add_kernel(ADD, 1, 1, x, amount)
    return graph


def test_after_an_update_a_conditional_executable_graph_is_still_refused_in_a_capture(device):
    x = device.zeros(1, np.float32)
    stream = device.stream()
    with _if_graph(device, x).instantiate() as exe:
        exe.update(_if_graph(device, x, 5.0))
        with pytest.raises(gg.CaptureError, match="a graph with conditional nodes cannot be launched into a capture"):
            with stream.capture():
                exe.launch(stream)


def test_the_graph_an_update_took_counts_the_executable_graph_as_its_own(device):
    x = device.zeros(1, np.float32)
    first, second = _if_graph(device, x), _if_graph(device, x, 5.0)
    with first.instantiate() as exe:
        exe.update(second)
        with pytest.raises(gg.GraphError, match="may have only one executable graph at a time"):
            second.instantiate()
    second.instantiate().close()  # (once it is closed: taken)


def test_an_executable_graph_launched_into_a_captured_body_follows_the_body_rules(device):
    holder = gg.Graph(device)
    holder.add_host(print, "never")
    graph = gg.Graph(device)
    body = graph.add_while(graph.condition()).bodies[0]
    stream = device.stream()
    with holder.instantiate() as exe:
        with pytest.raises(gg.CaptureError, match=r"fills the body of a conditional node, which cannot hold host"):
            with stream.capture(into=body):
                exe.launch(stream)
    assert len(body.nodes) == 0


def test_a_discarded_capture_takes_its_conditional_node_and_bodies_with_it(device):
    x = device.zeros(1, np.float32)
    graph = _if_graph(device, x)
    stream = device.stream()
    with pytest.raises(RuntimeError, match="discard"):
        with stream.capture(into=graph) as cap:
            condition = cap.condition()
            cap.add_while(condition).bodies[0].add_kernel(ADD, 1, 1, x, 1.0)
            raise RuntimeError("discard")
    assert [node.kind for node in graph.nodes].count(gg.NodeKind.CONDITIONAL) == 1
    with pytest.raises(gg.GraphError, match=r"is read by no conditional node"):
        graph.instantiate()  # (the condition the capture made stays, unused: CUDA keeps a handle too)
    with _if_graph(device, x).instantiate() as exe:
        exe.update(graph)  # (the same shape as the graph it has left: taken; before, a KeyError)


def test_a_condition_made_by_a_body_takes_its_default_once_per_launch(device):
    """A body's own condition, reset: its default is applied at the launch, not at each run of the body (an IF
    in a WHILE body that turns itself off runs once in three runs of the body; the same on an H200)."""
    x, y, n, m = device.zeros(1, np.float32), device.zeros(1, np.float32), value_of(device, 3), value_of(device, 1)
    graph = gg.Graph(device)
    outer = graph.condition(default=1)
    body = graph.add_while(outer).bodies[0]
    step = body.add_kernel(COUNT_DOWN, 1, 1, x, n, outer)
    inner = body.condition(default=1)
    body.add_if(inner, after=step).bodies[0].add_kernel(COUNT_DOWN, 1, 1, y, m, inner)
    run(graph)
    assert (x.to_numpy()[0], y.to_numpy()[0]) == (3.0, 1.0)


def test_bodies_refuse_params_frees_and_a_capture_free_at_the_call(device):
    graph = gg.Graph(device)
    body = graph.add_while(graph.condition()).bodies[0]
    x = device.zeros(1, np.float32)
    with pytest.raises(gg.GraphError, match=r"is the body of a conditional node, and a Param is patched"):
        body.add_kernel(ADD, 1, 1, x, gg.Param(1.0))
    outside = gg.Graph(device)
    alloc = outside.add_alloc(4, np.float32)
    with pytest.raises(gg.GraphError, match="body of a conditional node"):
        body.add_free(alloc.array)
    stream = device.stream()
    array = stream.alloc(4, np.float32)
    with pytest.raises(gg.GraphError, match=r"Stream\.free: .* cannot hold memory free nodes"):
        with stream.capture(into=body):
            stream.free(array)
    stream.free(array)
    stream.synchronize()
    assert len(body.nodes) == 0
