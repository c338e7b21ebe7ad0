"""Memory operations (hipStreamWaitValue32/64, hipStreamWriteValue32/64, hipGraphAddBatchMemOpNode and its setters):
a stream or a node waits for a value that other work writes to device memory, on every backend."""

from __future__ import annotations

import re
import time
from contextlib import contextmanager

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


@contextmanager
def released(stream, flag, value):
    """Write ``value`` to ``flag`` on ``stream`` after the block, however it ends: a stream left waiting would stall
    every later test that synchronizes the device."""
    try:
        yield
    finally:
        stream.write_value(flag, value)


def test_a_stream_waits_for_a_value_another_stream_writes(device):
    waiting, writing = device.stream(), device.stream()
    flag = device.zeros(1, np.uint32)
    out = device.zeros(4, np.int32)
    with K.garbage_held(device), released(writing, flag, 3):
        waiting.wait_value(flag, 2)  # ("geq": until flag >= 2)
        waiting.memset(out, 5)
        time.sleep(0.1)
        assert not waiting.done
        writing.write_value(flag, 1)
        writing.synchronize()
        time.sleep(0.1)
        assert not waiting.done  # (1 is not >= 2)
        writing.launch(K.set_flag, 1, 1, flag, 3)  # (a kernel's write releases it too)
        waiting.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [5] * 4)
    np.testing.assert_array_equal(flag.to_numpy(), [3])


@pytest.mark.parametrize(("condition", "value", "memory", "holds"), [
    ("geq", 5, 5, True), ("geq", 5, 4, False), ("geq", 0xFFFFFFFF, 1, True),  # (cyclic: 1 comes after 2**32 - 1)
    ("eq", 7, 7, True), ("eq", 7, 8, False),
    ("and", 0b0110, 0b0100, True), ("and", 0b0110, 0b1001, False),
    ("nor", 0b0110, 0b1001, True), ("nor", 0xFFFF0000, 0x0000FFFF, False),
])
def test_wait_conditions_mean_what_cuda_says(device, condition, value, memory, holds):
    waiting, writing = device.stream(), device.stream()
    flag = device.asarray(np.array([memory], np.uint32))
    out = device.zeros(1, np.int32)
    release = {"geq": value, "eq": value, "and": value, "nor": 0}[condition]  # (what does meet it)
    with K.garbage_held(device), released(writing, flag, release):
        waiting.wait_value(flag, value, condition)
        waiting.memset(out, 1)
        time.sleep(0.2)
        assert waiting.done is holds
    waiting.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [1])


def test_batch_mem_op_nodes_run_in_order_set_and_update(device):
    stream = device.stream()
    flags = device.zeros(3, np.uint64)
    g = gg.Graph(device)
    ops = g.add_mem_ops([gg.WriteValue(flags, 2**40 + 1, index=1), gg.WaitValue(flags, 2**40, "geq", index=1),
                         gg.WriteValue(flags, 9, index=2)])
    assert ops.kind is gg.NodeKind.MEM_OPS
    assert ops.params.ops[1] == gg.WaitValue(flags, 2**40, "geq", 1)
    assert "mem ops: write, wait, write" in g.to_dot()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(flags.to_numpy(), [0, 2**40 + 1, 9])
    # An executable graph's node takes new targets, values and conditions (cuGraphExecBatchMemOpNodeSetParams)
    other = device.zeros(2, np.uint64)
    exe.set_mem_ops(ops, [gg.WriteValue(other, 4), gg.WaitValue(other, 4, "eq"), gg.WriteValue(other, 6, index=1)])
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(other.to_numpy(), [4, 6])
    # ... and the graph's node too, which the executable graph takes by update
    g.set_mem_ops(ops, [gg.WriteValue(flags, 5), gg.WaitValue(flags, 1, "and"), gg.WriteValue(flags, 8, index=2)])
    exe.update(g)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(flags.to_numpy(), [5, 2**40 + 1, 8])


def test_captured_waits_and_writes_become_batch_nodes(device):
    stream, other = device.stream(), device.stream()
    flag = device.zeros(2, np.int32)
    out = device.zeros(2, np.int32)
    with stream.capture() as capture:
        stream.write_value(flag, -1, index=1)
        stream.wait_value(flag, 1)
        stream.memset(out, 3)
    nodes = capture.graph.nodes
    assert [n.kind for n in nodes] == [gg.NodeKind.MEM_OPS, gg.NodeKind.MEM_OPS, gg.NodeKind.MEMSET]
    assert nodes[0].params == gg.MemOpsParams((gg.WriteValue(flag, -1, 1),))
    with capture.graph.instantiate() as exe, K.garbage_held(device):
        with released(other, flag, 1):
            exe.launch(stream)
            time.sleep(0.1)
            assert not stream.done
        stream.synchronize()
    np.testing.assert_array_equal(flag.to_numpy(), [1, -1])
    np.testing.assert_array_equal(out.to_numpy(), [3, 3])


def test_mem_op_errors_name_the_call_and_the_rule(device):
    stream = device.stream()
    flag = device.zeros(2, np.uint32)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"wait_value: WaitValue\(target=Array\(.*\), value=1, condition='geq', "
                                        r"index=0\): target must hold 4- or 8-byte integers \(CUDA's 32- and 64-bit "
                                        r"memory operations\), got float32"):
        stream.wait_value(device.zeros(1, np.float32), 1)
    with pytest.raises(TypeError, match=r"target must hold 4- or 8-byte integers .*, got int16"):
        stream.write_value(device.zeros(1, np.int16), 1)
    with pytest.raises(TypeError, match=r"write_value: .*target must be a device Array, got ndarray"):
        stream.write_value(np.zeros(1, np.uint32), 1)
    with pytest.raises(ValueError, match=r"wait_value: .*value must be an int that uint32 holds \(0 to 4294967295\), "
                                         r"got -1"):
        stream.wait_value(flag, -1)
    with pytest.raises(ValueError, match=r"index must be an int from 0 to 1, got 2"):
        stream.write_value(flag, 1, index=2)
    with pytest.raises(ValueError, match=r"condition must be one of geq, eq, and, nor, got 'gt'"):
        stream.wait_value(flag, 1, "gt")
    with pytest.raises(ValueError, match=r"add_mem_ops: no operations given"):
        g.add_mem_ops([])
    with pytest.raises(TypeError, match=r"add_mem_ops: expected gg.WaitValue or gg.WriteValue operations, got int"):
        g.add_mem_ops([1])
    assert len(g) == 0
    node = g.add_mem_ops([gg.WriteValue(flag, 1), gg.WaitValue(flag, 1)])
    with pytest.raises(gg.GraphError, match=r"^set_mem_ops\(Node\(n1, empty\)\): the node is a empty node, not a "
                                            r"mem_ops node$"):
        g.set_mem_ops(g.add_empty(), gg.WriteValue(flag, 1))
    exe = g.instantiate()
    with pytest.raises(gg.GraphUpdateError, match=r"parameters changed \(an executable graph's batch memory-op "
                                                  r"node keeps the kind and width of each operation \(CUDA's rule, "
                                                  r"measured\)"):
        exe.set_mem_ops(node, [gg.WaitValue(flag, 1), gg.WriteValue(flag, 1)])
    with pytest.raises(gg.GraphUpdateError, match=r"keeps the kind and width of each operation"):
        exe.set_mem_ops(node, [gg.WriteValue(flag, 1)])
    wide = device.zeros(1, np.uint64)
    with pytest.raises(gg.GraphUpdateError, match=r"keeps the kind and width of each operation"):
        exe.set_mem_ops(node, [gg.WriteValue(wide, 1), gg.WaitValue(flag, 1)])
    with pytest.raises(gg.GraphError, match=r"^set_mem_ops\(Node\(n1, empty\)\): the node is a empty node, not a "
                                            r"mem_ops node$"):
        exe.set_mem_ops(g.nodes[1], gg.WriteValue(flag, 1))
    stranger = gg.Graph(device).add_mem_ops(gg.WriteValue(flag, 1))
    with pytest.raises(gg.GraphError, match=r"set_mem_ops: .* is not a node of the graph this executable graph"):
        exe.set_mem_ops(stranger, gg.WriteValue(flag, 1))
    with pytest.raises(gg.GraphError, match=r"^set_mem_ops: Node\(n0, mem_ops\) belongs to another graph$"):
        g.set_mem_ops(stranger, gg.WriteValue(flag, 1))
    g.set_mem_ops(node, gg.WriteValue(flag, 2))
    with pytest.raises(gg.GraphUpdateError, match=r"keeps the kind and width of each operation"):
        exe.update(g)
    body = g.add_if(g.condition()).bodies[0]
    with pytest.raises(gg.GraphError, match=r"cannot hold batch memory-op nodes"):
        body.add_mem_ops(gg.WriteValue(flag, 1))
    exe.close()


def test_numpy_integers_are_taken_as_plain_ints(device):
    flag = device.zeros(3, np.uint32)
    g = gg.Graph(device)
    node = g.add_mem_ops(gg.WriteValue(flag, np.uint32(3), index=np.int64(2)))
    op = node.params.ops[0]
    assert (type(op.value), type(op.index), op.value, op.index) == (int, int, 3, 2)
    stream = device.stream()
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(flag.to_numpy(), [0, 0, 3])


def test_a_64_bit_wait_compares_cyclically(device):
    waiting, writing = device.stream(), device.stream()
    flag = device.asarray(np.array([2**64 - 2], np.uint64))
    out = device.zeros(1, np.int32)
    with K.garbage_held(device), released(writing, flag, 3):
        waiting.wait_value(flag, 2**40)  # (2**64 - 2 is "before" 2**40 cyclically: no release yet)
        waiting.memset(out, 8)
        time.sleep(0.2)
        assert not waiting.done
        writing.write_value(flag, 2**40 + 5)
        waiting.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [8])


def test_mem_ops_refuse_a_target_on_another_device(pair):
    first, second = pair
    mine, theirs = first.zeros(2, np.uint32), second.zeros(2, np.uint32)
    refused = rf"\(target\): {re.escape(repr(theirs))} belongs to {second}, not {first}$"
    g = gg.Graph(first)
    with pytest.raises(ValueError, match=rf"^add_mem_ops{refused}"):
        g.add_mem_ops(gg.WriteValue(theirs, 1))
    with pytest.raises(ValueError, match=rf"^add_mem_ops{refused}"):
        g.add_mem_ops([gg.WriteValue(mine, 1), gg.WaitValue(theirs, 1)])  # (one of several)
    assert len(g) == 0  # (nothing half-added)
    node = g.add_mem_ops([gg.WriteValue(mine, 3), gg.WaitValue(mine, 3)])
    was = node.params
    with pytest.raises(ValueError, match=rf"^set_mem_ops{refused}"):
        g.set_mem_ops(node, [gg.WriteValue(theirs, 4), gg.WaitValue(mine, 4)])
    assert node.params == was == gg.MemOpsParams((gg.WriteValue(mine, 3), gg.WaitValue(mine, 3)))
    stream = first.stream()
    with g.instantiate() as exe:
        with pytest.raises(ValueError, match=rf"^set_mem_ops{refused}"):
            exe.set_mem_ops(node, [gg.WriteValue(mine, 4), gg.WaitValue(theirs, 4)])
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(mine.to_numpy(), [3, 0])  # (the node's own operations ran)
    np.testing.assert_array_equal(theirs.to_numpy(), [0, 0])


def test_stream_mem_ops_refuse_a_target_on_another_device(pair):
    first, second = pair
    stream, writing = first.stream(), second.stream()
    theirs = second.zeros(1, np.uint32)
    out = first.zeros(2, np.int32)
    refused = rf"\(target\): {re.escape(repr(theirs))} belongs to {second}, not {first}$"
    with K.garbage_held(first), released(writing, theirs, 1):  # (were a wait enqueued, it is released after)
        with pytest.raises(ValueError, match=rf"^wait_value{refused}"):
            stream.wait_value(theirs, 1)
        with pytest.raises(ValueError, match=rf"^write_value{refused}"):
            stream.write_value(theirs, 5)
        with stream.capture() as capture:
            with pytest.raises(ValueError, match=rf"^wait_value{refused}"):
                stream.wait_value(theirs, 1)
        assert capture.graph.nodes == ()  # (no batch node recorded)
        stream.memset(out, 4)
        deadline = time.monotonic() + 10
        while not stream.done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.done  # (no wait was enqueued: nothing holds the stream)
        np.testing.assert_array_equal(theirs.to_numpy(), [0])  # (and nothing written)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [4, 4])
