"""Kernel node attributes (hipGraphKernelNodeGetAttribute/SetAttribute/CopyAttributes, cudaGraphKernelNode*Attribute*):
priority, cooperative launch, the L2 access policy window, cluster dimensions, the memory synchronization domain,
their rules, and how clones, captures, executable graphs, setters and updates carry them, on every backend."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 256


def fill_graph(device, grid=8, value=7):
    """A graph of one fill kernel over ``N`` ints (``grid`` blocks of 32 threads), its node and its array."""
    x = device.zeros(N, np.int32)
    g = gg.Graph(device)
    return g, g.add_kernel(K.fill, grid, 32, x, value, N), x


def run(device, exe):
    stream = device.stream()
    exe.launch(stream)
    stream.synchronize()


def test_a_new_kernel_node_has_the_default_attributes(device):
    _, node, _ = fill_graph(device)
    assert node.attributes == gg.KernelAttributes()
    assert node.attributes == gg.KernelAttributes(priority=0, cooperative=False, access_policy_window=None,
                                                  cluster_dims=(1, 1, 1))
    least, greatest = device.priority_range
    assert least >= 0 >= greatest and greatest < least  # CUDA: (0, -5) on the H200; the CPU device the same


def test_attributes_set_read_back_and_the_kernel_still_computes(device):
    g, node, x = fill_graph(device)
    greatest = device.priority_range[1]
    g.set_attributes(node, priority=greatest, cooperative=True, cluster_dims=2,
                     access_policy_window=gg.AccessPolicyWindow(x, hit_ratio=0.5))
    got = node.attributes
    assert got.priority == greatest and got.cooperative is True and got.cluster_dims == (2, 1, 1)
    assert got.access_policy_window == gg.AccessPolicyWindow(x.ptr, x.nbytes, 0.5, "persisting", "streaming")
    # Only what is given changes; None clears the window.
    g.set_attributes(node, access_policy_window=None, cluster_dims=(4, 1))
    assert node.attributes == gg.KernelAttributes(greatest, True, None, (4, 1, 1))
    g.set_attributes(node, access_policy_window=gg.AccessPolicyWindow(x.ptr, 64, 0.6, "normal", "normal"))
    # (the driver keeps the ratio as a float: every backend reads back 0.6 rounded so)
    assert node.attributes.access_policy_window == gg.AccessPolicyWindow(x.ptr, 64, float(np.float32(0.6)), "normal",
                                                                         "normal")
    with g.instantiate(use_node_priority=True) as exe:
        run(device, exe)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7, np.int32))


def test_attribute_values_are_checked_and_nothing_changes_on_a_refusal(device):
    g, node, x = fill_graph(device)
    least, greatest = device.priority_range
    g.set_attributes(node, priority=least + 1)  # (clamped to the range, as CUDA does)
    assert node.attributes.priority == least
    g.set_attributes(node, priority=greatest)
    with pytest.raises(TypeError, match=r"set_attributes\(priority\): expected an int, got bool"):
        g.set_attributes(node, priority=True)
    with pytest.raises(TypeError, match=r"set_attributes\(cooperative\): expected a bool, got int"):
        g.set_attributes(node, cooperative=1)
    with pytest.raises(ValueError, match=r"a cluster holds at most 8 blocks, got \(4, 4, 1\)"):
        g.set_attributes(node, cluster_dims=(4, 4))
    with pytest.raises(ValueError, match=r"each dimension must be at least 1, got \(0, 1, 1\)"):
        g.set_attributes(node, cluster_dims=0)
    with pytest.raises(TypeError, match=r"set_attributes\(cluster_dims\): expected an int or a tuple of 1 to 3 ints"):
        g.set_attributes(node, cluster_dims=[2])
    with pytest.raises(TypeError, match="expected an AccessPolicyWindow or None, got tuple"):
        g.set_attributes(node, access_policy_window=(x.ptr, 64))
    window = gg.AccessPolicyWindow
    with pytest.raises(ValueError, match=r"hit_ratio must be a number from 0 to 1, got 1\.5"):
        g.set_attributes(node, access_policy_window=window(x, hit_ratio=1.5))
    with pytest.raises(ValueError, match="miss may be 'normal' or 'streaming', not 'persisting'"):
        g.set_attributes(node, access_policy_window=window(x, miss="persisting"))
    with pytest.raises(ValueError, match=r"hit must be one of \('normal', 'streaming', 'persisting'\), got 'l2'"):
        g.set_attributes(node, access_policy_window=window(x, hit="l2"))
    with pytest.raises(ValueError, match=r"nbytes must be from 1 to this device's largest window, \d+ bytes; got 0"):
        g.set_attributes(node, access_policy_window=window(x.ptr, 0))
    with pytest.raises(ValueError, match=r"largest window, \d+ bytes; got 1073741824"):
        g.set_attributes(node, access_policy_window=window(x.ptr, 1 << 30))
    with pytest.raises(ValueError, match=r"the window's 2048 bytes pass the end of its base"):
        g.set_attributes(node, access_policy_window=window(x, 2048))
    with pytest.raises(ValueError, match="nbytes is needed with an address for base"):
        g.set_attributes(node, access_policy_window=window(x.ptr))
    with pytest.raises(TypeError, match="base must be an Array or a non-zero address, got None"):
        g.set_attributes(node, access_policy_window=window(None, 64))
    # The launch shape: cluster dims divide the grid; a cooperative grid fits on the device at once. A refusal
    # of one of several attributes changes none.
    with pytest.raises(ValueError, match=r"set_attributes\(Node\(n0, kernel fill\)\): its cluster dims \(3, 1, 1\) "
                                         r"must divide its grid \(8, 1, 1\)"):
        g.set_attributes(node, priority=least, cluster_dims=3)
    assert node.attributes == gg.KernelAttributes(priority=greatest)
    big, huge, _ = fill_graph(device, grid=100_000)
    big.set_params(huge, block=1024)
    with pytest.raises(ValueError, match=r"it is cooperative, so its 100000 blocks must all be resident at once; this "
                                         r"device holds at most \d+ blocks of 1024 threads of this kernel"):
        big.set_attributes(huge, cooperative=True)
    assert huge.attributes.cooperative is False


def test_attributes_take_numpy_scalars_as_python_ones(device):
    g, node, x = fill_graph(device)
    g.set_attributes(node, cooperative=np.True_, cluster_dims=(np.int32(2), 1),
                     access_policy_window=gg.AccessPolicyWindow(np.uint64(x.ptr), np.int64(64), np.float32(0.5)))
    got = node.attributes
    assert got == gg.KernelAttributes(0, True, gg.AccessPolicyWindow(x.ptr, 64, 0.5), (2, 1, 1))
    assert type(got.cooperative) is bool and type(got.access_policy_window.nbytes) is int
    g.set_attributes(node, cooperative=np.False_, cluster_dims=np.int64(4))
    assert node.attributes.cooperative is False and node.attributes.cluster_dims == (4, 1, 1)
    # What is not a bool, an int or a number is named as what it is.
    with pytest.raises(TypeError, match=r"^set_attributes\(cooperative\): expected a bool, got int 1$"):
        g.set_attributes(node, cooperative=1)
    with pytest.raises(TypeError, match=r"^set_attributes\(access_policy_window\): hit_ratio must be a number from 0 "
                                        r"to 1, got str '0\.5'$"):
        g.set_attributes(node, access_policy_window=gg.AccessPolicyWindow(x, hit_ratio="0.5"))
    with pytest.raises(ValueError, match=r"hit_ratio must be a number from 0 to 1, got nan$"):
        g.set_attributes(node, access_policy_window=gg.AccessPolicyWindow(x, hit_ratio=np.float32("nan")))
    with pytest.raises(TypeError, match=r"^set_attributes\(access_policy_window\): nbytes must be an int, got "
                                        r"float 64\.0$"):
        g.set_attributes(node, access_policy_window=gg.AccessPolicyWindow(x, 64.0))
    with pytest.raises(TypeError, match=r"expected an int or a tuple of 1 to 3 ints, got \(2, np\.True_\)"):
        g.set_attributes(node, cluster_dims=(2, np.True_))
    assert node.attributes.cooperative is False and node.attributes.cluster_dims == (4, 1, 1)  # (refusals: no change)


def test_only_kernel_nodes_of_the_graph_have_attributes(device):
    g, node, x = fill_graph(device)
    memset = g.add_memset(x, 0)
    with pytest.raises(gg.GraphError, match=r"Node.attributes: Node\(n1, memset\) is a memset node; only kernel nodes "
                                            r"have attributes"):
        memset.attributes
    with pytest.raises(gg.GraphError, match=r"set_attributes\(Node\(n1, memset\)\): the node is a memset node, not a "
                                            r"kernel node"):
        g.set_attributes(memset, priority=0)
    _, theirs, _ = fill_graph(device)
    with pytest.raises(gg.GraphError, match=r"set_attributes: Node\(n\d+, kernel fill\) belongs to another graph"):
        g.set_attributes(theirs, priority=0)
    with pytest.raises(TypeError, match=r"set_attributes\(node\): expected a Node, got int"):
        g.set_attributes(3, priority=0)
    g.remove_node(node)
    with pytest.raises(gg.GraphError, match="removed with remove_node"):
        node.attributes


def test_a_launch_shape_the_attributes_do_not_allow_is_refused_by_graph_and_exec_setters(device):
    g, node, x = fill_graph(device)
    early = g.instantiate()  # made before the cluster dims: it keeps what it was made with
    g.set_attributes(node, cluster_dims=4)
    with pytest.raises(ValueError, match=r"set_params\(Node\(n0, kernel fill\)\): its cluster dims \(4, 1, 1\) must "
                                         r"divide its grid \(6, 1, 1\)"):
        g.set_params(node, grid=6)
    assert node.params.grid == (8, 1, 1)
    g.set_params(node, grid=12)
    late = g.instantiate()
    with pytest.raises(ValueError, match=r"set_params\(Node\(n0, kernel fill\)\): its cluster dims .*must divide its "
                                         r"grid"):
        late.set_params(node, grid=6)
    late.set_params(node, grid=4, block=64)  # (4 divides 4; 256 threads cover the array)
    early.set_params(node, grid=6, block=64)  # (no clusters in the executable graph made before)
    x2 = device.zeros(N, np.int32)
    late.set_params(node, x2, 5, N)
    run(device, late)
    run(device, early)
    np.testing.assert_array_equal(x2.to_numpy(), np.full(N, 5, np.int32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7, np.int32))
    late.close()
    early.close()


def test_clones_carry_attributes_and_copy_attributes_copies_them(device):
    g, node, x = fill_graph(device)
    greatest = device.priority_range[1]
    g.set_attributes(node, priority=greatest, cluster_dims=2, access_policy_window=gg.AccessPolicyWindow(x))
    copy = g.clone()
    assert copy.find(node).attributes == node.attributes
    g.set_attributes(node, priority=0)  # (the clone is a graph of its own)
    assert copy.find(node).attributes.priority == greatest
    other, target, _ = fill_graph(device, grid=6)
    other.copy_attributes(copy.find(node), target)
    assert target.attributes == copy.find(node).attributes
    odd, target_odd, _ = fill_graph(device, grid=5)
    with pytest.raises(ValueError, match=r"copy_attributes\(Node\(n0, kernel fill\)\): its cluster dims \(2, 1, 1\) "
                                         r"must divide its grid \(5, 1, 1\)"):
        odd.copy_attributes(node, target_odd)
    assert target_odd.attributes == gg.KernelAttributes()
    memset = odd.add_memset(device.zeros(N, np.int32), 0)
    with pytest.raises(gg.GraphError, match=r"copy_attributes.*a memset node"):
        odd.copy_attributes(node, memset)
    with pytest.raises(gg.GraphError, match=r"copy_attributes\(src\): Node\(n1, memset\) is a memset node"):
        odd.copy_attributes(memset, target_odd)
    with pytest.raises(TypeError, match=r"copy_attributes\(src\): expected a Node, got str"):
        odd.copy_attributes("n0", target_odd)


def test_update_takes_attributes_but_not_a_cooperative_change_nor_a_fixed_priority(device):
    g, node, x = fill_graph(device)
    greatest = device.priority_range[1]
    exe = g.instantiate()
    fixed = g.instantiate(use_node_priority=True)
    new, new_node, y = fill_graph(device, value=3)
    new.set_attributes(new_node, cluster_dims=4, priority=greatest)
    exe.update(new)  # the cluster dims and priority come with the update
    with pytest.raises(ValueError, match=r"cluster dims.*must divide its grid"):
        exe.set_params(node, grid=6)
    with pytest.raises(gg.GraphUpdateError) as refused:
        fixed.update(new)
    # (CUDA without the compiled extension: cuda-bindings gives no result with the driver's refusal)
    assert refused.value.reason in ("attributes changed",) + (("refused by the CUDA driver",)
                                                               if device.backend == "cuda" else ())
    new.set_attributes(new_node, priority=0)
    fixed.update(new)  # the same priorities
    new.set_attributes(new_node, cooperative=True)
    with pytest.raises(gg.GraphUpdateError) as refused:
        exe.update(new)
    assert refused.value.reason in ("attributes changed",) + (("refused by the CUDA driver",)
                                                               if device.backend == "cuda" else ())
    run(device, exe)  # the executable graph runs the update that was taken: the new graph's array and value
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 3, np.int32))
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.int32))
    exe.close()
    fixed.close()


KEEPS_COOPERATIVE = ("an executable graph's kernel node keeps whether it is cooperative (CUDA's rule); instantiate the "
                     "new graph instead")
KEEPS_PRIORITY = ("an executable graph instantiated with use_node_priority keeps its kernel nodes' priorities (CUDA's "
                  "rule); instantiate the new graph instead")


def test_a_refused_update_names_the_attribute_and_both_values(device):
    """Both values: the executable graph's (those it was made or last updated with, even where its graph changed them
    since) and the new graph's."""
    g, node, _ = fill_graph(device)
    greatest = device.priority_range[1]
    with g.instantiate() as exe, g.instantiate(use_node_priority=True) as fixed:
        cooperative, cooperative_node, _ = fill_graph(device, value=3)
        cooperative.set_attributes(cooperative_node, cooperative=True)
        message = r"^update refused at Node\(n0, kernel fill\): attributes changed \({}: {}\)$"
        with pytest.raises(gg.GraphUpdateError, match=message.format("cooperative was False, got True",
                                                                     re.escape(KEEPS_COOPERATIVE))) as info:
            exe.update(cooperative)
        assert info.value.reason == "attributes changed" and info.value.node is cooperative_node
        prioritized, prioritized_node, y = fill_graph(device, value=5)
        prioritized.set_attributes(prioritized_node, priority=greatest)
        exe.update(prioritized)  # (its priorities are not fixed: taken)
        with pytest.raises(gg.GraphUpdateError, match=message.format(f"priority was 0, got {greatest}",
                                                                     re.escape(KEEPS_PRIORITY))):
            fixed.update(prioritized)
        # The graph it follows changes after the update, by set_attributes; the graph it was made from, by
        # copy_attributes: each executable graph keeps the attributes it took.
        prioritized.set_attributes(prioritized_node, cooperative=True)
        g.copy_attributes(prioritized_node, node)
        for executable, graph in ((exe, prioritized), (fixed, g)):
            with pytest.raises(gg.GraphUpdateError, match=message.format("cooperative was False, got True",
                                                                         re.escape(KEEPS_COOPERATIVE))):
                executable.update(graph)
        run(device, exe)
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 5, np.int32))


def test_a_kernel_captured_on_a_priority_stream_has_the_streams_priority(device):
    greatest = device.priority_range[1]
    x = device.zeros(N, np.int32)
    stream = device.stream(priority=greatest)
    with stream.capture() as capture:
        stream.launch(K.fill, 8, 32, x, 1, N)
    (node,) = capture.graph.nodes
    assert node.attributes == gg.KernelAttributes(priority=greatest)
    plain = device.stream()
    with plain.capture() as capture:
        plain.launch(K.fill, 8, 32, x, 1, N)
    assert capture.graph.nodes[0].attributes == gg.KernelAttributes()


_GRID_SYNC = """
#include <cooperative_groups.h>
extern "C" __global__ void rotate_blocks(int* x, int* out, int n) {
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __nanosleep(20000 * blockIdx.x);  // later blocks write later: without the grid's sync, a block reads too soon
    x[i] = i * 10;
    grid.sync();  // every block's write is seen: only a cooperative launch may wait for the whole grid
    out[i] = x[(i + blockDim.x) % n];
}
"""


def test_a_cooperative_node_runs_a_kernel_that_waits_for_its_whole_grid(device):
    """A cooperative kernel node (cudaLaunchAttributeCooperative) runs a kernel that synchronizes its grid
    (cooperative_groups' grid.sync). The CPU backend refuses cooperative groups in kernel source."""
    kernel = gg.Kernel(_GRID_SYNC, "rotate_blocks")
    x, out = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g = gg.Graph(device)
    if device.backend == "cpu":
        with pytest.raises(gg.KernelCompileError, match="cooperative groups"):
            g.add_kernel(kernel, N // 32, 32, x, out, N)
        return
    node = g.add_kernel(kernel, N // 32, 32, x, out, N)
    g.set_attributes(node, cooperative=True)
    with g.instantiate() as exe:
        run(device, exe)
    np.testing.assert_array_equal(out.to_numpy(), np.roll(np.arange(N) * 10, -32))


def test_a_kernel_that_needs_ccccls_headers_names_them_when_they_are_missing(device, monkeypatch):
    if device.backend != "cuda":
        pytest.skip("NVRTC's include folders are CUDA's")
    from gpugraph.backends.cuda import _compile
    cudart_only = _compile.toolkit_includes()[:1]
    monkeypatch.setattr(_compile, "toolkit_includes", lambda: cudart_only)
    kernel = gg.Kernel(_GRID_SYNC + f"// {np.random.default_rng().integers(1 << 62)}\n", "rotate_blocks")
    with pytest.raises(gg.KernelCompileError, match=r"(?s)nv/target.*CCCL's headers .* were not found: install "
                                                    r"them with `pip install \"cuda-toolkit\[cccl\]==13\.\*\"`"):
        gg.Graph(device).add_kernel(kernel, 1, 32, device.zeros(32, np.int32), device.zeros(32, np.int32), 32)


def test_the_mem_sync_domain_is_kept_carried_and_checked(device):
    g, node, x = fill_graph(device)
    assert node.attributes.mem_sync_domain == "default" and gg.MEM_SYNC_DOMAINS == ("default", "remote")
    early = g.instantiate()
    g.set_attributes(node, mem_sync_domain="remote")
    assert node.attributes == gg.KernelAttributes(mem_sync_domain="remote")
    # A refused value changes nothing, the others given with it neither (the driver refuses 2: INVALID_VALUE).
    with pytest.raises(TypeError, match=r"set_attributes\(mem_sync_domain\): expected one of \('default', 'remote'\), "
                                        r"got 2"):
        g.set_attributes(node, priority=device.priority_range[1], mem_sync_domain=2)
    with pytest.raises(ValueError, match=r"set_attributes\(mem_sync_domain\): expected one of .*got 'local'"):
        g.set_attributes(node, mem_sync_domain="local")
    assert node.attributes == gg.KernelAttributes(mem_sync_domain="remote")
    # Clones and copy_attributes carry it, and an update of an executable graph made before it accepts the change
    # (measured on the H200: cuGraphExecUpdate succeeds; what an executable graph holds cannot be read back).
    copy = g.clone()
    assert copy.find(node).attributes == node.attributes
    other, target, y = fill_graph(device, value=4)
    other.copy_attributes(node, target)
    assert target.attributes.mem_sync_domain == "remote"
    g.set_attributes(node, mem_sync_domain="default")
    assert copy.find(node).attributes.mem_sync_domain == "remote"
    early.update(other)
    run(device, early)
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 4, np.int32))
    early.close()
    with g.instantiate() as exe:
        run(device, exe)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7, np.int32))


def test_copy_attributes_refuses_nodes_it_cannot_copy_between(device):
    g, node, _ = fill_graph(device)
    g.set_attributes(node, cluster_dims=2)
    other, target, _ = fill_graph(device)
    _, theirs, _ = fill_graph(device)
    with pytest.raises(gg.GraphError, match=r"^copy_attributes: Node\(n0, kernel fill\) belongs to another graph$"):
        other.copy_attributes(node, theirs)  # (theirs, the destination, is not other's)
    assert theirs.attributes == gg.KernelAttributes()
    # An executable graph made before a copy keeps its attributes: no clusters, so a grid of 6 still launches.
    early = other.instantiate()
    other.copy_attributes(node, target)
    with pytest.raises(ValueError, match=r"its cluster dims \(2, 1, 1\) must divide its grid \(7, 1, 1\)"):
        other.set_params(target, grid=7)
    early.set_params(target, grid=7)
    run(device, early)
    early.close()
    # A node removed from either graph, and a graph a capture records into, are refused; nothing changes.
    removed, gone, _ = fill_graph(device)
    removed.remove_node(gone)
    gone_message = r"Node\(n0, kernel fill\) is no longer in this graph \(it was removed with remove_node\)$"
    with pytest.raises(gg.GraphError, match=rf"^copy_attributes\(src\): {gone_message}"):
        other.copy_attributes(gone, target)
    assert target.attributes.cluster_dims == (2, 1, 1) and target.attributes.priority == 0
    with pytest.raises(gg.GraphError, match=rf"^copy_attributes: {gone_message}"):
        removed.copy_attributes(node, gone)
    with pytest.raises(gg.GraphError, match=rf"^set_attributes: {gone_message}"):
        removed.set_attributes(gone, priority=0)
    assert len(removed) == 0
    stream = device.stream()
    fresh, fresh_node, _ = fill_graph(device)
    with stream.capture(into=fresh, after=[fresh_node]):
        with pytest.raises(gg.GraphError, match="a capture records into this graph"):
            fresh.copy_attributes(node, fresh_node)
        with pytest.raises(gg.GraphError, match="a capture records into this graph"):
            fresh.set_attributes(fresh_node, priority=0)
    assert fresh_node.attributes == gg.KernelAttributes()


def test_copy_attributes_refuses_nodes_of_different_devices(pair):
    first, last = pair
    g, node, _ = fill_graph(first)
    other, target, _ = fill_graph(last)
    g.set_attributes(node, mem_sync_domain="remote")
    with pytest.raises(ValueError, match=r"copy_attributes\(Node\(n0, kernel fill\), Node\(n0, kernel fill\)\): the "
                                         r"nodes run on different devices"):
        other.copy_attributes(node, target)
    assert target.attributes == gg.KernelAttributes()
