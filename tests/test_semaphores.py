"""External semaphores (hipImportExternalSemaphore, hipSignal/WaitExternalSemaphoresAsync, the external semaphore
signal and wait nodes and their setters): on CUDA a real Vulkan timeline semaphore exported as a file descriptor
(tests/vulkan.py), on the CPU backend its emulation, each signaled and waited on from the host by its own API."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
import vulkan

WAIT = 10.0  # seconds a host wait may take before the test fails


class _Host:
    """The host's side of a timeline semaphore, through the API that made it."""

    def __init__(self, device: gg.Device, timeline: bool = True) -> None:
        if device.backend == "cpu":
            self.emulated = gg.EmulatedSemaphore(timeline=timeline)
            self.semaphore = device.import_semaphore(self.emulated, timeline=timeline)
            self.signal, self.wait = self.emulated.signal, self.emulated.wait
            self.made = None
        else:
            try:
                self.made = vulkan.TimelineSemaphore(timeline=timeline)
            except vulkan.VulkanUnavailable as why:
                pytest.skip(f"needs a Vulkan semaphore to import: {why}")
            self.semaphore = device.import_semaphore(self.made.export_fd(), timeline=timeline)
            self.signal, self.wait = self.made.signal, self.made.wait

    @property
    def value(self) -> int:
        return self.emulated.value if self.made is None else self.made.value


@pytest.fixture
def host(device):
    """A timeline semaphore and its host side. The test runs with the cycle collector held off (a collected object's
    release on CUDA waits for the device, which may be waiting for this host), and whatever waits on the semaphore
    is released after it, however it ends: a stream left waiting would stall every later test."""
    made = _Host(device)
    with K.garbage_held(device):
        yield made
    if made.value < 1 << 40:
        made.signal(1 << 40)
    device.synchronize()
    if made.made is not None:
        made.made.close()


def test_a_stream_waits_for_the_host_and_signals_it_back(device, host):
    stream = device.stream()
    out = device.zeros(4, np.int32)
    stream.wait_semaphores(host.semaphore, 3)
    stream.memset(out, 7)
    stream.signal_semaphores(host.semaphore, 5)
    time.sleep(0.2)
    assert not stream.done and host.value == 0  # (held at the wait)
    host.signal(2)
    time.sleep(0.1)
    assert not stream.done  # (2 is not 3 yet)
    host.signal(3)
    assert host.wait(5, WAIT)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [7, 7, 7, 7])
    assert host.value == 5


def test_semaphore_nodes_run_set_and_update(device, host):
    stream = device.stream()
    out = device.zeros(4, np.int32)
    g = gg.Graph(device)
    wait = g.add_semaphore_wait(host.semaphore, 7)
    fill = g.add_memset(out, 9, after=wait)
    signal = g.add_semaphore_signal([host.semaphore], [9], after=fill)
    assert (wait.kind, signal.kind) == (gg.NodeKind.SEMAPHORE_WAIT, gg.NodeKind.SEMAPHORE_SIGNAL)
    assert signal.params == gg.SemaphoreSignalParams((host.semaphore,), (9,))
    assert "signal 1 semaphore" in g.to_dot() and "wait for 1 semaphore" in g.to_dot()
    exe = g.instantiate()
    g.set_semaphores(wait, host.semaphore, 30)  # (the graph's nodes change: the executable graph keeps 7 and 9)
    g.set_semaphores(signal, host.semaphore, 31)
    exe.launch(stream)
    time.sleep(0.1)
    assert not stream.done
    host.signal(7)
    assert host.wait(9, WAIT)
    stream.synchronize()
    assert host.value == 9  # (signaled 9, not the graph's 31)
    np.testing.assert_array_equal(out.to_numpy(), [9] * 4)
    # The executable graph's nodes take new values (cudaGraphExecExternalSemaphoresSignalNodeSetParams, ...Wait...)
    exe.set_semaphores(wait, host.semaphore, 10)
    exe.set_semaphores(signal, host.semaphore, 12)
    exe.launch(stream)
    host.signal(10)
    assert host.wait(12, WAIT)
    stream.synchronize()
    # The graph's nodes too (...NodeSetParams); the executable graph keeps what it had until updated
    g.set_semaphores(wait, host.semaphore, 13)
    g.set_semaphores(signal, host.semaphore, 15)
    assert wait.params.values == (13,)
    copy = g.clone()
    assert [n.params for n in copy.nodes if n.kind is gg.NodeKind.SEMAPHORE_SIGNAL] == [signal.params]
    exe.update(g)
    exe.launch(stream)
    host.signal(13)
    assert host.wait(15, WAIT)
    stream.synchronize()
    assert host.value == 15


def test_captured_semaphore_work_becomes_nodes(device, host):
    stream = device.stream()
    second = _Host(device)
    try:
        _captured(device, stream, host, second)
    finally:
        if second.made is not None:
            second.made.close()


def _captured(device, stream, host, second):
    out = device.zeros(3, np.float32)
    with stream.capture() as capture:
        stream.wait_semaphores(host.semaphore, 1)
        stream.memset(out, 2.0)
        stream.signal_semaphores([host.semaphore, second.semaphore], [4, 6])
    nodes = capture.graph.nodes
    assert [n.kind for n in nodes] == [gg.NodeKind.SEMAPHORE_WAIT, gg.NodeKind.MEMSET, gg.NodeKind.SEMAPHORE_SIGNAL]
    assert nodes[2].params == gg.SemaphoreSignalParams((host.semaphore, second.semaphore), (4, 6))
    assert host.value == 0  # (captured: nothing ran)
    with capture.graph.instantiate() as exe:
        exe.launch(stream)
        host.signal(1)
        assert host.wait(4, WAIT) and second.wait(6, WAIT)
        stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [2.0] * 3)


def test_binary_semaphores_order_two_streams(device):
    binary = _Host(device, timeline=False)
    try:
        _binary(device, binary)
    finally:
        if binary.made is not None:
            binary.made.close()


def _binary(device, binary):
    assert not binary.semaphore.timeline
    first, second = device.stream(), device.stream()
    gate = threading.Event()
    out = device.zeros(2, np.int32)
    first.host(gate.wait, WAIT)
    first.signal_semaphores(binary.semaphore)
    second.wait_semaphores(binary.semaphore)
    second.memset(out, 4)
    time.sleep(0.2)
    assert not second.done  # (the signal is behind the gate)
    gate.set()
    second.synchronize()
    first.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [4, 4])
    with pytest.raises(ValueError, match=r"signal_semaphores: ExternalSemaphore\(binary, device=\S+\) is binary and "
                                         r"takes no value \(0\), got 3"):
        first.signal_semaphores(binary.semaphore, 3)


def test_semaphore_errors_name_the_call_and_the_rule(device, host):
    stream = device.stream()
    g = gg.Graph(device)
    with pytest.raises(ValueError, match=r"add_semaphore_signal: no semaphores given \(a node of none does nothing"):
        g.add_semaphore_signal([])
    with pytest.raises(TypeError, match=r"add_semaphore_wait: expected ExternalSemaphores \(Device.import_semaphore\), "
                                        r"got int"):
        g.add_semaphore_wait([3])
    with pytest.raises(TypeError, match=r"signal_semaphores: expected an ExternalSemaphore or a list of them, got str"):
        stream.signal_semaphores("semaphore")
    with pytest.raises(ValueError, match=r"wait_semaphores: 2 values for 1 semaphores"):
        stream.wait_semaphores(host.semaphore, [1, 2])
    with pytest.raises(ValueError, match=r"add_semaphore_signal\(values\): a timeline semaphore's value is an int "
                                         r"from 0 to 2\*\*64 - 1, got -1"):
        g.add_semaphore_signal(host.semaphore, -1)
    with pytest.raises(ValueError, match=r"got 1.5"):
        g.add_semaphore_signal(host.semaphore, 1.5)
    with pytest.raises(ValueError, match=r"add_semaphore_wait: ExternalSemaphore\(timeline, .*\) is a timeline "
                                         r"semaphore, signaled to and waited for at a value; give values"):
        g.add_semaphore_wait(host.semaphore)
    assert len(g) == 0  # (nothing half-added)
    signal = g.add_semaphore_signal(host.semaphore, 1)
    fill = g.add_memset(device.zeros(2, np.int32), 0)
    with pytest.raises(gg.GraphError, match=r"set_semaphores\(Node\(n1, memset\)\): the node is a memset node, not a "
                                            r"semaphore_signal or semaphore_wait node"):
        g.set_semaphores(fill, host.semaphore, 2)
    exe = g.instantiate()
    with pytest.raises(gg.GraphError, match=r"set_semaphores\(Node\(n1, memset\)\): the node is a memset node, not a "
                                            r"semaphore_signal or semaphore_wait node"):
        exe.set_semaphores(fill, host.semaphore, 2)
    other = gg.Graph(device)
    stranger = other.add_semaphore_signal(host.semaphore, 1)
    with pytest.raises(gg.GraphError, match=r"set_semaphores: .* is not a node of the graph this executable graph"):
        exe.set_semaphores(stranger, host.semaphore, 2)
    with pytest.raises(gg.GraphError, match=r"^set_semaphores: Node\(n0, semaphore_signal\) belongs to another graph$"):
        g.set_semaphores(stranger, host.semaphore, 2)
    with pytest.raises(gg.GraphUpdateError, match=r"parameters changed \(an executable graph's semaphore node keeps "
                                                  r"its number of semaphores \(CUDA's rule, measured\): it had 1, got "
                                                  r"2\)"):
        exe.set_semaphores(signal, [host.semaphore, host.semaphore], [2, 3])
    g.set_semaphores(signal, [host.semaphore, host.semaphore], [2, 3])  # (the graph's node takes any number)
    with pytest.raises(gg.GraphUpdateError, match=r"keeps its number of semaphores"):
        exe.update(g)
    condition = g.condition()
    body = g.add_if(condition).bodies[0]
    with pytest.raises(gg.GraphError, match=r"cannot hold semaphore signal nodes"):
        body.add_semaphore_signal(host.semaphore, 1)
    exe.close()


def _imported_into(device):
    """``_Host(device)``, or a skip where CUDA imports no semaphore of the first Vulkan device into ``device``."""
    try:
        return _Host(device)
    except ValueError as why:
        pytest.skip(f"the driver imports no Vulkan semaphore into {device} here: {why}")


def _refused_on(semaphore, device):
    """The message of a semaphore imported into another device than ``device``, where the work runs."""
    return rf"ExternalSemaphore\(timeline, device={semaphore.device}\) was imported into {semaphore.device}, not " \
           rf"{device}, where this work runs$"


def _finishes(stream, within=WAIT):
    """Whether ``stream``'s work finishes within ``within`` seconds (it is not left waiting)."""
    deadline = time.monotonic() + within
    while not stream.done:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_nodes_and_streams_refuse_a_semaphore_imported_into_another_device(pair):
    first, second = pair
    theirs = _Host(first)
    try:
        g = gg.Graph(second)
        refused = _refused_on(theirs.semaphore, second)
        with pytest.raises(ValueError, match=rf"^add_semaphore_signal: {refused}"):
            g.add_semaphore_signal(theirs.semaphore, 1)
        with pytest.raises(ValueError, match=rf"^add_semaphore_wait: {refused}"):
            g.add_semaphore_wait([theirs.semaphore], [1])
        assert len(g) == 0  # (nothing half-added)
        stream = second.stream()
        out = second.zeros(2, np.int32)
        with pytest.raises(ValueError, match=rf"^wait_semaphores: {refused}"):
            stream.wait_semaphores(theirs.semaphore, 1)
        with pytest.raises(ValueError, match=rf"^signal_semaphores: {refused}"):
            stream.signal_semaphores(theirs.semaphore, 1)
        stream.memset(out, 3)
        assert _finishes(stream)  # (no wait was enqueued: nothing holds the stream)
        assert theirs.value == 0  # (and no signal)
        np.testing.assert_array_equal(out.to_numpy(), [3, 3])
    finally:
        theirs.signal(1 << 40)  # (whatever might wait on it, released)
        second.synchronize()
        if theirs.made is not None:
            theirs.made.close()


def test_set_semaphores_refuses_a_semaphore_imported_into_another_device(pair):
    first, second = pair
    mine = _Host(first)
    try:
        theirs = _imported_into(second)
        try:
            _set_across_devices(first, mine, theirs)
        finally:
            if theirs.made is not None:
                theirs.made.close()
    finally:
        if mine.made is not None:
            mine.made.close()


def _set_across_devices(device, mine, theirs):
    g = gg.Graph(device)
    signal = g.add_semaphore_signal(mine.semaphore, 1)
    refused = _refused_on(theirs.semaphore, device)
    with pytest.raises(ValueError, match=rf"^set_semaphores: {refused}"):
        g.set_semaphores(signal, theirs.semaphore, 2)
    with pytest.raises(ValueError, match=rf"^set_semaphores: {refused}"):
        g.set_semaphores(signal, [mine.semaphore, theirs.semaphore], [2, 3])  # (one of several)
    assert signal.params == gg.SemaphoreSignalParams((mine.semaphore,), (1,))  # (the node unchanged)
    with g.instantiate() as exe:
        with pytest.raises(ValueError, match=rf"^set_semaphores: {refused}"):
            exe.set_semaphores(signal, theirs.semaphore, 2)
        stream = device.stream()
        exe.launch(stream)
        assert mine.wait(1, WAIT)  # the node still signals its own semaphore, to 1
        stream.synchronize()
    assert (mine.value, theirs.value) == (1, 0)


def test_set_semaphores_refuses_a_removed_node(device, host):
    # The executable graph, made before the removal, keeps the node (and its value, 2), which its setter no longer
    # reaches; the graph's setter refuses it as every call does after remove_node.
    stream = device.stream()
    g = gg.Graph(device)
    first = g.add_semaphore_signal(host.semaphore, 1)
    gone = g.add_semaphore_signal(host.semaphore, 2, after=first)
    exe = g.instantiate()
    g.remove_node(gone)
    with pytest.raises(gg.GraphError, match=r"^set_semaphores: Node\(n1, semaphore_signal\) is no longer in this "
                                            r"graph \(it was removed with remove_node\)$"):
        g.set_semaphores(gone, host.semaphore, 5)
    with pytest.raises(gg.GraphError, match=r"^set_semaphores: Node\(n1, semaphore_signal\) is no longer in its "
                                            r"graph \(it was removed with remove_node\); an executable graph's setters "
                                            r"name nodes of the graph it was made from \(CUDA's\)$"):
        exe.set_semaphores(gone, host.semaphore, 5)
    assert g.nodes == (first,) and first.params == gg.SemaphoreSignalParams((host.semaphore,), (1,))
    exe.launch(stream)
    assert host.wait(2, WAIT)
    stream.synchronize()
    assert host.value == 2  # (the removed node's 2, not the refused 5)
    exe.close()


def test_imports_refuse_what_the_backend_cannot_take(device):
    if device.backend == "cpu":
        with pytest.raises(TypeError, match=r"import_semaphore: the CPU backend imports a gg.EmulatedSemaphore .* got "
                                            r"int"):
            device.import_semaphore(3)
        with pytest.raises(ValueError, match=r"import_semaphore: EmulatedSemaphore\(binary, value=0\) is a binary "
                                             r"semaphore, imported with timeline=True"):
            device.import_semaphore(gg.EmulatedSemaphore(timeline=False))
    else:
        with pytest.raises(TypeError, match=r"import_semaphore: CUDA imports a semaphore's file descriptor"):
            device.import_semaphore(gg.EmulatedSemaphore())
        with pytest.raises(ValueError, match=r"import_semaphore: the driver refuses file descriptor 1000000"):
            device.import_semaphore(1_000_000)
    with pytest.raises(TypeError, match=r"import_semaphore: timeline must be a bool, got int 1$"):
        device.import_semaphore(gg.EmulatedSemaphore(), timeline=1)


def test_the_emulated_semaphore_follows_vulkan_s_host_rules():
    timeline = gg.EmulatedSemaphore(2)
    assert timeline.value == 2 and not timeline.wait(3, 0.01) and timeline.wait(2, 0.01)
    with pytest.raises(ValueError, match=r"new value must be greater than its value now, 2; got 2"):
        timeline.signal(2)
    timeline.signal(5)
    assert timeline.value == 5
    binary = gg.EmulatedSemaphore(timeline=False)
    assert not binary.wait(timeout=0.01)
    binary.signal()
    assert binary.wait(timeout=0.01) and not binary.wait(timeout=0.01)  # (a wait takes the signal)
    with pytest.raises(ValueError, match=r"a binary semaphore takes no value, got 1"):
        binary.signal(1)
    with pytest.raises(ValueError, match=r"a binary semaphore starts signaled \(1\) or not \(0\), got 2"):
        gg.EmulatedSemaphore(2, timeline=False)


def test_a_host_wait_s_timeout_is_checked_at_the_call():
    """Seconds >= 0 (0: whether it is signaled now), None or inf for no limit; anything else is refused before the
    wait looks at the semaphore (a binary one keeps its signal)."""
    timeline, binary = gg.EmulatedSemaphore(2), gg.EmulatedSemaphore(1, timeline=False)
    for bad in (float("nan"), -1, -0.5, np.float32("nan")):
        for semaphore, value in ((timeline, 2), (binary, None)):
            with pytest.raises(ValueError, match=r"^EmulatedSemaphore.wait\(timeout\): expected seconds >= 0 \(0: "
                                                 rf"do not wait\), or inf or None for no limit; got "
                                                 rf"{re.escape(repr(bad))}$"):
                semaphore.wait(value, timeout=bad)
    for bad, shown in (("x", "str 'x'"), (True, "bool True"), ([1], "list [1]")):
        with pytest.raises(TypeError, match=r"^EmulatedSemaphore.wait\(timeout\): expected seconds \(an int or "
                                            rf"float\) or None, got {re.escape(shown)}$"):
            binary.wait(timeout=bad)
    assert binary.value == 1  # (no refused wait took the signal)
    assert timeline.wait(2, timeout=0) and not timeline.wait(3, timeout=np.int8(0))
    assert not timeline.wait(3, timeout=np.float64(0.01))
    threading.Timer(0.05, timeline.signal, (3,)).start()
    assert timeline.wait(3, timeout=float("inf"))  # (no limit: a Python lock refuses inf as a timeout)
    assert timeline.wait(3, timeout=10**400) and binary.wait(timeout=1e300)


def test_a_semaphore_dropped_while_a_stream_waits_on_it(device, host):
    # The stream's work does not hold the import; its release waits for the next synchronize (on CUDA, destroying
    # it at once would wait for the device's queued work, which waits for the host).
    stream = device.stream()
    out = device.zeros(2, np.int32)
    handle = host.emulated if host.made is None else host.made.export_fd()
    stream.wait_semaphores(device.import_semaphore(handle), 2)  # (the import is dropped at once)
    stream.memset(out, 6)
    host.signal(2)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [6, 6])
