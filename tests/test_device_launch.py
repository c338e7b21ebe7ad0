"""Graphs launched from a kernel (CUDA's device graph launch): a GraphExec instantiated with device_launch=True passed
for a cudaGraphExec_t parameter, launched with cudaGraphLaunch in the three modes (fire and forget, tail, sibling)
and relaunched by itself (cudaGetCurrentGraphExec). Measured on the H200 (2026-11-24): each mode runs the graph
before the stream's next work; a tail launch after the launching graph; a graph not instantiated for it stops
the kernel with an illegal address (gpugraph refuses it at the call), an unknown mode returns
cudaErrorInvalidValue, and a kernel outside a graph fails its launch (CUDA_ERROR_NOT_SUPPORTED; gpugraph refuses
it at the call where the kernel takes a graph)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import gpugraph as gg

# NVRTC has no CUDA runtime header here: the device runtime's declarations, as CUDA's header makes them (the
# driver resolves cudaGraphLaunch when the module loads). The CPU backend's header has its own.
SOURCE = r"""
#ifdef __CUDACC_RTC__
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUstream_st* cudaStream_t;
extern "C" __device__ int cudaGraphLaunch(cudaGraphExec_t graph, cudaStream_t stream);
#define cudaStreamGraphTailLaunch ((cudaStream_t)0x0100000000000000ull)
#define cudaStreamGraphFireAndForget ((cudaStream_t)0x0200000000000000ull)
#define cudaStreamGraphFireAndForgetAsSibling ((cudaStream_t)0x0300000000000000ull)
__device__ inline cudaGraphExec_t cudaGetCurrentGraphExec() {
    unsigned long long graph;
    asm("mov.u64 %0, %%current_graph_exec;" : "=l"(graph));
    return (cudaGraphExec_t)graph;
}
#endif
extern "C" __global__ void add(int* x, int v) {
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(x, v);
}
extern "C" __global__ void copy_first(int* x) {
    if (threadIdx.x == 0 && blockIdx.x == 0) x[1] = x[0];
}
extern "C" __global__ void launch_graph(cudaGraphExec_t graph, unsigned long long mode, int* code) {
    if (threadIdx.x == 0 && blockIdx.x == 0) code[0] = cudaGraphLaunch(graph, (cudaStream_t)(mode << 56));
}
extern "C" __global__ void count_down(int* n, int* runs) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        runs[0] += 1;
        if (--n[0] > 0) cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
    }
}
extern "C" __global__ void launch_itself(int* n, int* codes, unsigned long long mode) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int k = n[0];
        if (k < 4) {
            n[0] = k + 1;
            codes[k] = cudaGraphLaunch(cudaGetCurrentGraphExec(), (cudaStream_t)(mode << 56));
        }
    }
}
extern "C" __global__ void launch_once(cudaGraphExec_t graph, unsigned long long mode, int* runs, int* code) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && runs[0]++ == 0)
        code[0] = cudaGraphLaunch(graph, (cudaStream_t)(mode << 56));
}
extern "C" __global__ void takes_int(int graph) {}
"""
ADD, COPY_FIRST, LAUNCH, COUNT_DOWN, LAUNCH_ITSELF, LAUNCH_ONCE, TAKES_INT = (gg.Kernel(SOURCE, name) for name in (
    "add", "copy_first", "launch_graph", "count_down", "launch_itself", "launch_once", "takes_int"))
MODES = {"tail": 1, "fire_and_forget": 2, "sibling": 3}
# The modes as test parameters: sibling launches are left out of compute-sanitizer's pass (pyproject's marker says why).
MODE_PARAMS = [pytest.param(mode, marks=pytest.mark.sibling_launch) if mode == "sibling" else mode for mode in MODES]


def launchable(device, x, value=1):
    """An executable graph adding ``value`` to x[0], which a kernel may launch."""
    child = gg.Graph(device)
    child.add_kernel(ADD, 1, 32, x, value)
    return child.instantiate(device_launch=True)


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_kernel_launches_a_graph(device, stream, mode):
    x, code = device.zeros(2, np.int32), device.asarray(np.array([-1], np.int32))
    child = launchable(device, x)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, child, MODES[mode], code)
    with parent.instantiate() as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.launch(COPY_FIRST, 1, 32, x)  # (the stream's next work sees what the launched graph did)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [3, 3])
    assert code.to_numpy()[0] == 0


# A kernel whose source never spells the call's name (a macro joins it): nothing finds it by reading the source.
HIDDEN = gg.Kernel(r"""
#define GG_JOIN(a, b) a##b
#ifdef __CUDACC_RTC__
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUstream_st* cudaStream_t;
extern "C" __device__ int GG_JOIN(cudaGraph, Launch)(cudaGraphExec_t graph, cudaStream_t stream);
#endif
extern "C" __global__ void launch_hidden(cudaGraphExec_t graph, int* code) {
    if (threadIdx.x == 0 && blockIdx.x == 0) code[0] = GG_JOIN(cudaGraph, Launch)(graph, (cudaStream_t)(2ull << 56));
}
""", "launch_hidden")


def test_a_kernel_launches_a_graph_through_a_macro(device, stream):
    x, code = device.zeros(1, np.int32), device.asarray(np.array([-1], np.int32))
    child = launchable(device, x)
    parent = gg.Graph(device)
    parent.add_kernel(HIDDEN, 1, 32, child, code)
    with parent.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 1 and code.to_numpy()[0] == 0
    child.close()


def test_a_tail_launch_runs_after_the_launching_graph(device, stream):
    x, code = device.zeros(2, np.int32), device.zeros(1, np.int32)
    child = launchable(device, x)
    parent = gg.Graph(device)
    launcher = parent.add_kernel(LAUNCH, 1, 32, child, MODES["tail"], code)
    parent.add_kernel(COPY_FIRST, 1, 32, x, after=launcher)  # runs before the tail launch
    with parent.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [1, 0])


def test_a_graph_relaunches_itself_from_the_device(device, stream):
    n, runs = device.asarray(np.array([2000], np.int32)), device.zeros(1, np.int32)
    loop = gg.Graph(device)
    loop.add_kernel(COUNT_DOWN, 1, 32, n, runs)
    with loop.instantiate(device_launch=True) as exe:
        exe.launch(stream)
        stream.synchronize()
    assert runs.to_numpy()[0] == 2000 and n.to_numpy()[0] == 0


@pytest.mark.parametrize("mode", MODE_PARAMS)
def test_a_running_graph_relaunches_itself_only_as_a_tail_launch(device, stream, mode):
    """Measured on the H200: fire-and-forget and sibling launches of the graph that runs return cudaErrorInvalidValue
    and run nothing; tail launches run it again, each after the last."""
    n, codes = device.zeros(1, np.int32), device.asarray(np.full(4, -1, np.int32))
    graph = gg.Graph(device)
    graph.add_kernel(LAUNCH_ITSELF, 1, 32, n, codes, MODES[mode])
    with graph.instantiate(device_launch=True) as exe:
        exe.launch(stream)
        stream.synchronize()
    if mode == "tail":
        assert n.to_numpy()[0] == 4 and codes.to_numpy().tolist() == [0, 0, 0, 0]
    else:
        assert n.to_numpy()[0] == 1 and codes.to_numpy().tolist() == [1, -1, -1, -1]


@pytest.mark.parametrize("back", MODE_PARAMS)
@pytest.mark.parametrize("there", MODE_PARAMS)
def test_a_graph_launched_is_running_until_its_launcher_may_be_launched_again(device, stream, there, back):
    """Graph A launches B (``there``), whose kernel launches A (``back``). Measured on the H200: A runs while its
    fire-and-forget and sibling launches run, and B's launch of it then returns cudaErrorInvalidValue, whatever
    the mode; after A's tail launch of B, A has finished and runs again."""
    x = device.zeros(1, np.int32)
    runs_a, runs_b = device.zeros(1, np.int32), device.zeros(1, np.int32)
    code_a, code_b = device.asarray(np.array([-1], np.int32)), device.asarray(np.array([-1], np.int32))
    placeholder = launchable(device, x)
    a = gg.Graph(device)
    node = a.add_kernel(LAUNCH_ONCE, 1, 32, placeholder, MODES[there], runs_a, code_a)
    exe_a = a.instantiate(device_launch=True)
    b = gg.Graph(device)
    b.add_kernel(LAUNCH_ONCE, 1, 32, exe_a, MODES[back], runs_b, code_b)
    exe_b = b.instantiate(device_launch=True)
    exe_a.set_params(node, exe_b, MODES[there], runs_a, code_a)  # (A is made before B, which names it)
    exe_a.launch(stream)
    stream.synchronize()
    finished = there == "tail"
    assert code_a.to_numpy()[0] == 0 and runs_b.to_numpy()[0] == 1
    assert code_b.to_numpy()[0] == (0 if finished else 1)
    assert runs_a.to_numpy()[0] == (2 if finished else 1)
    for exe in (exe_a, exe_b, placeholder):
        exe.close()


def test_a_kernel_launches_the_graph_as_last_changed(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = gg.Graph(device)
    node = child.add_kernel(ADD, 1, 32, x, 1)
    exe = child.instantiate(device_launch=True)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, exe, MODES["fire_and_forget"], code)
    with parent.instantiate() as launcher:
        launcher.launch(stream)
        stream.synchronize()
        exe.set_params(node, x, 10)
        launcher.launch(stream)
        stream.synchronize()
        other = gg.Graph(device)
        other.add_kernel(ADD, 1, 32, x, 100)
        exe.update(other)
        launcher.launch(stream)
        stream.synchronize()
        exe.set_enabled(node, False)
        launcher.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 111


def test_a_kernel_launches_the_child_graph_as_last_set(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    inner = gg.Graph(device)
    inner.add_kernel(ADD, 1, 32, x, 1)
    child = gg.Graph(device)
    node = child.add_child(inner)
    exe = child.instantiate(device_launch=True)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, exe, MODES["tail"], code)
    with parent.instantiate() as launcher:
        replacement = gg.Graph(device)
        replacement.add_kernel(ADD, 1, 32, x, 20)
        exe.set_child_graph(node, replacement)
        launcher.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 20 and code.to_numpy()[0] == 0
    exe.close()


def test_a_failed_upload_for_kernels_keeps_the_change_and_is_tried_again(device, stream, monkeypatch):
    """After a change, a graph kernels launch is uploaded again (CUDA's kernels launch it as last uploaded, and so do
    the CPU backend's): should that fail, the change stays for launches from the host, kernels launch the graph as
    last uploaded, and its next launch, change or kernel argument uploads it first."""
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = gg.Graph(device)
    node = child.add_kernel(ADD, 1, 32, x, 1)
    exe = child.instantiate(device_launch=True)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, exe, MODES["fire_and_forget"], code)
    launcher = parent.instantiate()
    backend = device._backend
    upload, tries = backend.exec_upload_for_kernels, []

    def failing(handle):
        tries.append(handle)
        raise RuntimeError("out of memory (simulated)")
    monkeypatch.setattr(backend, "exec_upload_for_kernels", failing)
    with pytest.raises(gg.GraphError, match=r"set_params: GraphExec\(.*\) changed, but uploading it for the kernels "
                                            r"that launch it failed \(out of memory \(simulated\)\); launches from "
                                            r"the host run the change"):
        exe.set_params(node, x, 10)
    launcher.launch(stream)  # (the kernel launches the graph as last uploaded: adding 1)
    stream.synchronize()
    assert x.to_numpy()[0] == 1
    with pytest.raises(gg.GraphError, match=r"launch: an earlier change of GraphExec\(.*\) is not uploaded yet for "
                                            r"the kernels that launch it, and uploading it failed again \(out of "
                                            r"memory \(simulated\)\); nothing was launched"):
        exe.launch(stream)
    with pytest.raises(gg.GraphError, match=r"the argument was not taken"):
        parent.add_kernel(LAUNCH, 1, 32, exe, MODES["fire_and_forget"], code)
    assert len(tries) == 3 and len(parent) == 1
    stream.synchronize()
    assert x.to_numpy()[0] == 1
    monkeypatch.setattr(backend, "exec_upload_for_kernels", upload)
    exe.launch(stream)  # (uploaded first, then run from the host: adding 10)
    launcher.launch(stream)  # (and the kernel's launch now adds 10 too)
    stream.synchronize()
    assert x.to_numpy()[0] == 21
    launcher.close()
    exe.close()


def test_kernels_launch_the_upload_and_not_a_later_change_that_failed(device, stream, monkeypatch):
    """A change whose upload failed leaves the graph kernels launch as uploaded before it."""
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = gg.Graph(device)
    node = child.add_kernel(ADD, 1, 32, x, 1)
    exe = child.instantiate(device_launch=True)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, exe, MODES["fire_and_forget"], code)
    exe.set_params(node, x, 10)  # (uploaded)

    def failing(handle):
        raise RuntimeError("out of memory (simulated)")
    monkeypatch.setattr(device._backend, "exec_upload_for_kernels", failing)
    with pytest.raises(gg.GraphError, match=r"set_params: .* changed, but uploading it"):
        exe.set_params(node, x, 100)
    with parent.instantiate() as launcher:
        launcher.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 10
    monkeypatch.undo()
    exe.close()


def test_a_change_is_uploaded_after_the_launches_made_before_it(device, stream):
    """CUDA's upload is ordered after the executable graph's earlier launches: a loop of tail launches running
    when its graph is changed runs to its end as it was."""
    n, before, after = device.asarray(np.array([2000], np.int32)), device.zeros(1, np.int32), device.zeros(1, np.int32)
    loop = gg.Graph(device)
    node = loop.add_kernel(COUNT_DOWN, 1, 32, n, before)
    with loop.instantiate(device_launch=True) as exe:
        exe.launch(stream)
        exe.set_params(node, n, after)  # (waits for the loop)
        stream.synchronize()
    assert before.to_numpy()[0] == 2000 and after.to_numpy()[0] == 0


def test_a_graph_a_kernel_launches_takes_no_params(device):
    x = device.zeros(1, np.int32)
    graph = gg.Graph(device)
    graph.add_kernel(ADD, 1, 32, x, gg.Param(3, np.int32))
    with pytest.raises(gg.GraphInstantiateError, match=r"device_launch: a graph a kernel launches takes no Params"):
        graph.instantiate(device_launch=True)
    plain = gg.Graph(device)
    node = plain.add_kernel(ADD, 1, 32, x, 3)
    with plain.instantiate(device_launch=True) as exe:
        with pytest.raises(gg.GraphUpdateError, match="a graph a kernel launches takes no Params"):
            exe.update(graph)
        with pytest.raises(TypeError, match="a graph a kernel launches takes no Params"):
            exe.set_params(node, x, gg.Param(4, np.int32))


def test_a_graph_a_kernel_may_launch_is_released_once_none_may(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = launchable(device, x)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, child, MODES["fire_and_forget"], code)
    exe = parent.instantiate()
    exe.launch(stream)
    exe.close()
    child.close()  # (released once the queued launch has run, and no node holds it)
    del exe, parent
    stream.synchronize()
    gc.collect()
    assert x.to_numpy()[0] == 1
    assert not child._finalizer.alive


def test_a_launch_in_no_named_mode_returns_invalid_value(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = launchable(device, x)
    parent = gg.Graph(device)
    parent.add_kernel(LAUNCH, 1, 32, child, 0, code)
    with parent.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert code.to_numpy()[0] == 1 and x.to_numpy()[0] == 0  # cudaErrorInvalidValue; nothing ran


def test_a_kernel_that_takes_a_graph_is_refused_at_a_launch_outside_a_graph(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = launchable(device, x)
    with pytest.raises(gg.GraphError, match=r"^Stream.launch\(Kernel\('launch_graph'\)\): the kernel takes a graph "
                                            r"to launch \(a cudaGraphExec_t\), and a kernel that launches graphs runs "
                                            r"only as a kernel node of a graph \(CUDA fails its launch outside one\); "
                                            r"add it with Graph.add_kernel, or launch it on a stream that captures"):
        stream.launch(LAUNCH, 1, 32, child, MODES["fire_and_forget"], code)
    stream.synchronize()  # (nothing was enqueued: no error waits for the synchronize)
    with stream.capture() as cap:  # captured, the same launch is a kernel node, which launches the graph
        stream.launch(LAUNCH, 1, 32, child, MODES["fire_and_forget"], code)
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 1 and code.to_numpy()[0] == 0
    child.close()


def test_a_kernel_outside_a_graph_cannot_relaunch_its_graph(device, stream):
    n, runs = device.asarray(np.array([2], np.int32)), device.zeros(1, np.int32)
    # (It takes no graph, so gpugraph cannot tell it launches one: CUDA refuses the launch at the call; the CPU
    # backend's kernel stops when it runs, reported at synchronize.)
    with pytest.raises(gg.BackendError, match=r"CUDA_ERROR_NOT_SUPPORTED.*runs only as a kernel node of a graph"):
        stream.launch(COUNT_DOWN, 1, 32, n, runs)
        assert device.backend == "cpu", "CUDA refuses at the launch"
        stream.synchronize()
    x = device.zeros(1, np.int32)
    stream.launch(ADD, 1, 32, x, 5)  # (not a sticky error: the device goes on)
    stream.synchronize()
    assert x.to_numpy()[0] == 5


def test_graph_exec_arguments_are_checked(device, stream):
    x, code = device.zeros(1, np.int32), device.zeros(1, np.int32)
    child = gg.Graph(device)
    child.add_kernel(ADD, 1, 32, x, 1)
    graph = gg.Graph(device)
    with child.instantiate() as host_only:
        with pytest.raises(gg.GraphError, match=r"was not instantiated with device_launch=True, and a kernel "
                                                r"launches only such a graph"):
            graph.add_kernel(LAUNCH, 1, 32, host_only, 2, code)
        with pytest.raises(gg.GraphError, match="was not instantiated with device_launch=True"):
            with stream.capture():
                stream.launch(LAUNCH, 1, 32, host_only, 2, code)
    exe = child.instantiate(device_launch=True)
    with pytest.raises(TypeError, match="a GraphExec is passed only for a cudaGraphExec_t parameter, not a C int"):
        graph.add_kernel(TAKES_INT, 1, 32, exe)
    with pytest.raises(TypeError, match=r"a GraphExec is passed only for a cudaGraphExec_t parameter, not a C "
                                        r"unsigned long long"):
        graph.add_kernel(LAUNCH, 1, 32, exe, exe, code)
    with pytest.raises(TypeError, match=r"argument 0 \(cudaGraphExec_t graph\): expects a GraphExec instantiated "
                                        r"with device_launch=True, got int"):
        graph.add_kernel(LAUNCH, 1, 32, 1234, 2, code)
    assert len(graph) == 0  # (nothing half-done)
    node = graph.add_kernel(LAUNCH, 1, 32, exe, 2, code)
    exe.close()  # (released once no kernel may launch it: the node holds it)
    assert exe.closed and exe._finalizer.alive
    graph.remove_node(node)
    del node
    gc.collect()
    assert not exe._finalizer.alive
    with pytest.raises(gg.GraphError, match="the GraphExec is closed"):
        graph.add_kernel(LAUNCH, 1, 32, exe, 2, code)


def test_a_kernel_launches_graphs_of_its_own_device(pair):
    device, other = pair
    x, code = other.zeros(1, np.int32), device.zeros(1, np.int32)
    exe = launchable(other, x)
    with pytest.raises(ValueError, match=r"is on .*, the kernel on .*; a kernel launches graphs of its own device"):
        gg.Graph(device).add_kernel(LAUNCH, 1, 32, exe, 2, code)
