"""Param: dynamic kernel arguments patched at the next launch (the combined approach of NVIDIA's blog post
"Constructing CUDA Graphs with Dynamic Parameters", made automatic): scalars and pointers, in explicit graphs and
captures, shared by nodes and executable graphs, dtype binding from the kernel signature, bad values, and plain
stream launches.

Every test runs on each available backend through the ``device``/``stream`` fixtures of conftest.py and
checks values against NumPy; only behaviour CUDA also has is asserted.
"""

from __future__ import annotations

import contextlib
import re
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 8
GRID, BLOCK = K.launch_1d(N, 4)
X0 = np.arange(1, N + 1, dtype=np.float32)


# Scalar Params


def test_scalar_param_in_an_explicit_graph(device, stream):
    x = K.f32(device, X0)
    alpha = gg.Param(2.0, dtype="float32")
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
        alpha.value = 3.0
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 6)
        K.launch_and_wait(exe, stream)  # the value stays
        np.testing.assert_array_equal(x.to_numpy(), X0 * 18)
        alpha.value = 0.5
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 9)


def test_scalar_param_in_a_capture(device, stream):
    x = device.zeros(N, np.float32)
    y = K.f32(device, X0)
    a = gg.Param(2.0)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        stream.launch(K.axpy, GRID, BLOCK, a, y, x, N)  # x = a * y + x
    (kernel,) = [n for n in cap.graph.nodes if n.kind is gg.NodeKind.KERNEL]
    assert kernel.params.args[0] is a  # the captured node keeps the Param itself
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), 2 * X0 + 1)
        a.value = -1.5
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), -1.5 * X0 + 1)


def test_integer_scalar_param(device, stream):
    ints = device.zeros(N, np.int32)
    v = gg.Param(5)
    count = gg.Param(N, dtype=np.int32)
    g = gg.Graph(device)
    g.add_kernel(K.fill, GRID, BLOCK, ints, v, count)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(ints.to_numpy(), np.full(N, 5))
        v.value = -7
        count.value = 3
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(ints.to_numpy(), [-7, -7, -7, 5, 5, 5, 5, 5])


def test_value_set_after_a_launch_applies_from_the_next_launch(device, stream):
    """Results in between the two launches: the first keeps the old value."""
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
        alpha.value = 10.0
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2)  # nothing ran since
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 20)


def test_value_set_while_a_launch_waits_does_not_change_that_launch(device, stream):
    gate = threading.Event()
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    snapshots: list = []
    opened: list = []  # [True] once the gate opens; [False] if it timed out, as when a call waited for the launch
    # (Page-locked: a copy to pageable memory returns only once done, which would wait for the gate here.)
    host = K.pinned(device, np.zeros(N, np.float32))
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with g.instantiate() as exe:
        stream.host(lambda: opened.append(gate.wait(10)))
        exe.launch(stream)  # enqueued with 2.0, still waiting behind the gate
        stream.memcpy(host, x)
        stream.host(lambda: snapshots.append(host.copy()))
        try:
            alpha.value = 3.0
            exe.launch(stream)
        finally:
            gate.set()
        stream.synchronize()
    assert opened == [True]
    np.testing.assert_array_equal(snapshots[0], X0 * 2)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 6)


def test_one_param_used_by_several_nodes(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    k = g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    g.add_kernel(K.scale, GRID, BLOCK, y, alpha, N)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N, after=k)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        alpha.value = 3.0
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 4 * 9)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 2 * 3)


def test_one_param_used_by_two_executable_graphs(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    alpha = gg.Param(2.0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.scale, GRID, BLOCK, y, alpha, N)
    with g1.instantiate() as exe1, g2.instantiate() as exe2:
        K.launch_and_wait(exe1, stream)
        alpha.value = 3.0
        K.launch_and_wait(exe2, stream)  # exe2 had not launched before: it uses the new value
        K.launch_and_wait(exe1, stream)
        alpha.value = 5.0
        K.launch_and_wait(exe2, stream)
        K.launch_and_wait(exe2, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 * 3)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3 * 5 * 5)


def test_one_param_in_two_executable_graphs_of_one_graph(device, stream):
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    exe1 = g.instantiate()
    alpha.value = 3.0
    exe2 = g.instantiate()
    with exe1, exe2:
        K.launch_and_wait(exe1, stream)
        K.launch_and_wait(exe2, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 9)


def test_param_given_to_set_params_is_patched_too(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    node = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    beta = gg.Param(3.0)
    with g.instantiate() as exe:
        exe.set_params(node, x, beta, N)
        K.launch_and_wait(exe, stream)
        beta.value = 5.0
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 15)


def test_param_of_a_graph_given_to_update_is_patched(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    alpha, beta = gg.Param(2.0), gg.Param(3.0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.scale, GRID, BLOCK, y, beta, N)
    with g1.instantiate() as exe:
        exe.update(g2)
        beta.value = 4.0
        alpha.value = 100.0  # no longer used by this executable graph
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 4)


def test_value_set_between_building_and_instantiating_is_used(device, stream):
    """The Param's value at launch counts, not its value when the graph was built or captured."""
    x, y = K.f32(device, X0), K.f32(device, X0)
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with stream.capture() as cap:
        stream.launch(K.scale, GRID, BLOCK, y, alpha, N)
    alpha.value = 3.0
    with g.instantiate() as exe, cap.graph.instantiate() as captured:
        K.launch_and_wait(exe, stream)
        K.launch_and_wait(captured, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


def test_value_set_before_an_update_is_used_after_it(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    alpha = gg.Param(2.0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.scale, GRID, BLOCK, y, alpha, N)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        alpha.value = 5.0
        exe.update(g2)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 5)


CHILD_PARAM = ("^a Param is used inside the child graph of Node\\(n0, graph\\); Params are patched only in "
               "kernel nodes of the graph itself \\(add those nodes to it\\)$")


def _child_outer(device, x, factor):
    child = gg.Graph(device)
    child.add_kernel(K.scale, GRID, BLOCK, x, factor, N)
    g = gg.Graph(device)
    node = g.add_child(child)
    return g, node, child


def test_param_inside_a_child_graph_is_refused_at_instantiate(device, stream):
    x = K.f32(device, X0)
    g, _, _ = _child_outer(device, x, gg.Param(2.0))
    with pytest.raises(gg.GraphError, match=CHILD_PARAM):
        g.instantiate()


def test_param_inside_an_executable_graph_launched_into_a_capture_is_refused(device, stream):
    x = K.f32(device, X0)
    inner = gg.Graph(device)
    inner.add_kernel(K.scale, GRID, BLOCK, x, gg.Param(2.0), N)
    with inner.instantiate() as exe:
        with pytest.raises(gg.CaptureError, match="changed by setters, set_enabled or Params cannot be "
                                                  "launched into a capture"):
            with stream.capture():
                exe.launch(stream)  # would embed the graph with the value it was built with
        assert not stream.is_capturing


def test_update_with_a_param_inside_a_child_graph_is_refused_and_changes_nothing(device, stream):
    x = K.f32(device, X0)
    g1, _, _ = _child_outer(device, x, 3.0)
    g2, _, _ = _child_outer(device, x, gg.Param(2.0))
    with g1.instantiate() as exe:
        with pytest.raises(gg.GraphError, match=CHILD_PARAM):
            exe.update(g2)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)


def test_set_child_graph_with_a_param_inside_is_refused(device, stream):
    x = K.f32(device, X0)
    g, node, _ = _child_outer(device, x, 3.0)
    _, _, child = _child_outer(device, x, gg.Param(2.0))
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphError, match=r"a Param is used inside the child graph"):
            exe.set_child_graph(node, child)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)


# Pointer Params


def test_pointer_param_rebinds_to_another_array(device, stream):
    x1, x2 = K.f32(device, X0), K.f32(device, X0 * 10)
    buf = gg.Param(x1)
    assert buf.is_array and buf.dtype == np.float32 and buf.value is x1
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, buf, 2.0, N)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        buf.value = x2
        K.launch_and_wait(exe, stream)
        buf.value = x1
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x1.to_numpy(), X0 * 4)
    np.testing.assert_array_equal(x2.to_numpy(), X0 * 20)


def test_pointer_param_in_a_capture(device, stream):
    src1, src2 = K.f32(device, X0), K.f32(device, X0 * 3)
    out = device.zeros(N, np.float32)
    a, b = gg.Param(src1), gg.Param(src1)
    with stream.capture() as cap:
        stream.launch(K.add, GRID, BLOCK, out, a, b, N)
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out.to_numpy(), X0 * 2)
        b.value = src2
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(out.to_numpy(), X0 * 4)


# dtype binding


def test_float_param_binds_to_the_kernel_parameter_type(device):
    alpha = gg.Param(2.0)
    assert alpha.dtype is None
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, K.f32(device, X0), alpha, N)
    assert alpha.dtype == np.float32
    assert type(alpha.value) is np.float32 and alpha.value == 2.0
    alpha.value = 1.25
    assert type(alpha.value) is np.float32 and alpha.value == np.float32(1.25)


def test_param_of_another_dtype_is_refused(device):
    x = K.f32(device, X0)
    wrong = gg.Param(1, dtype=np.int32)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"^Kernel\('scale'\) argument 1 \(.*\): the Param holds int32, the "
                                        r"parameter takes float32$"):
        g.add_kernel(K.scale, GRID, BLOCK, x, wrong, N)
    with pytest.raises(TypeError, match=r"the Param holds int32, the parameter takes float32$"):
        device.stream().launch(K.scale, GRID, BLOCK, x, wrong, N)
    assert len(g) == 0


def test_bound_param_is_refused_by_a_parameter_of_another_type(device):
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, K.f32(device, X0), alpha, N)  # binds float32
    with pytest.raises(TypeError, match=r"^Kernel\('fill'\) argument 1 \(.*\): the Param holds float32, the "
                                        r"parameter takes int32$"):
        g.add_kernel(K.fill, GRID, BLOCK, device.zeros(N, np.int32), alpha, N)


def test_scalar_param_for_a_pointer_parameter_and_back(device):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    scalar = gg.Param(2.0)
    pointer = gg.Param(x)
    with pytest.raises(TypeError, match=r"^Kernel\('scale'\) argument 0 \(.*\): expects a device Array, got a "
                                        r"scalar Param\(2\.0\)$"):
        g.add_kernel(K.scale, GRID, BLOCK, scalar, 2.0, N)
    with pytest.raises(TypeError, match=r"^Kernel\('scale'\) argument 1 \(.*\): expects a C float scalar, got "
                                        r"Param\(Array of float32\)$"):
        g.add_kernel(K.scale, GRID, BLOCK, x, pointer, N)


def test_pointer_param_of_another_dtype_is_refused(device):
    g = gg.Graph(device)
    ints = gg.Param(device.zeros(N, np.int32))
    with pytest.raises(TypeError, match=r"^Kernel\('scale'\) argument 0 \(.*\): expects float32 data, got an "
                                        r"Array of int32$"):
        g.add_kernel(K.scale, GRID, BLOCK, ints, 2.0, N)


# Bad values


@pytest.mark.parametrize("bad", ["2.0", np.ones(3), None, 1 + 2j, np.complex64(1 + 2j), np.str_("2"),
                                 np.datetime64(1, "s")])
def test_param_of_a_non_scalar_is_refused(bad):
    with pytest.raises(TypeError, match=rf"^Param: expected a real scalar \(bool, int or float, Python or NumPy\) "
                                        rf"or an Array, got {type(bad).__name__}$"):
        gg.Param(bad)


@pytest.mark.parametrize("dtype", [np.complex64, np.str_, np.longdouble, object])
def test_param_dtype_must_be_a_c_number_type(dtype):
    with pytest.raises(TypeError, match=r"^Param: dtype must be a C number type \(bool, integer or floating, at "
                                        r"most 8 bytes\), got"):
        gg.Param(1, dtype=dtype)


def test_bad_values_for_a_scalar_param(device):
    alpha = gg.Param(2.0, dtype="float32")
    name = re.escape(repr(alpha))
    with pytest.raises(TypeError, match=rf"^{name}\.value: expected a real scalar, got str$"):
        alpha.value = "3"
    with pytest.raises(TypeError, match=rf"^{name}\.value: expected a real scalar, got Array$"):
        alpha.value = K.f32(device, X0)
    with pytest.raises(TypeError, match=rf"^{name}\.value: expected a real scalar, got NoneType$"):
        alpha.value = None
    with pytest.raises(TypeError, match=rf"^{name}\.value: expected a real scalar, got complex64$"):
        alpha.value = np.complex64(1 + 2j)
    assert alpha.value == 2.0  # unchanged
    small = gg.Param(1, dtype=np.int8)
    with pytest.raises(ValueError, match=rf"^{re.escape(repr(small))}\.value: 1000 does not fit in int8 "
                                         rf"\(-128\.\.127\)$"):
        small.value = 1000
    assert small.value == 1


def test_bad_values_for_a_pointer_param(device):
    x = K.f32(device, X0)
    buf = gg.Param(x)
    with pytest.raises(TypeError, match=r"^Param\(Array of float32\)\.value: an Array Param takes an Array, "
                                        r"got float$"):
        buf.value = 2.0
    with pytest.raises(TypeError, match=r"^Param\(Array of float32\)\.value: an Array Param takes an Array, "
                                        r"got ndarray$"):
        buf.value = X0.copy()
    with pytest.raises(ValueError, match=rf"^Param\(Array of float32\)\.value: expected an Array of float32 on "
                                         rf"{device}, got one of float64 on {device}$"):
        buf.value = device.zeros(N, np.float64)
    assert buf.value is x


def test_a_pointer_param_takes_arrays_of_its_size_only(device, stream):
    """Its nodes were given an Array of N elements and write N: a smaller Array would be written past its end, a
    larger one would not be the size they were given either."""
    x = K.f32(device, X0)
    buf = gg.Param(x)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, buf, 2.0, N)
    for size in (2, N + 1):
        with pytest.raises(ValueError, match=rf"^Param\(Array of float32\)\.value: a pointer Param takes Arrays of the "
                                             rf"size of the one it was made with, which the kernels given it may read "
                                             rf"and write whole: {N} elements \({4 * N} bytes\), got {size} "
                                             rf"\({4 * size} bytes\); pass an Array of {N} elements \(of any shape\), "
                                             rf"or make a new Param of the new Array and build or capture a new graph "
                                             rf"with it$"):
            buf.value = device.zeros(size, np.float32)
    assert buf.value is x
    square = (X0 * 10).reshape(2, N // 2)
    other = device.asarray(square)  # another shape, the same size: taken
    buf.value = other
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(other.to_numpy(), square * 2)
    np.testing.assert_array_equal(x.to_numpy(), X0)


@pytest.mark.parametrize(("dtype", "fits", "beyond"), [
    (np.int32, (2**31 - 1, -(2**31), 0), (2**31, -(2**31) - 1)),
    (np.uint32, (0, 2**32 - 1), (-1, 2**32)),
    (np.bool_, (0, 1), (2, -1)),
    (np.int64, (2**63 - 1, -(2**63)), (2**63,)),
])
def test_python_ints_set_on_an_integer_param_are_range_checked(dtype, fits, beyond):
    """The fast path for Python ints takes exactly the values the type holds; the rest are refused as
    before, and a refused value leaves the Param as it was."""
    p = gg.Param(0, dtype=dtype)
    for value in fits:
        p.value = value
        assert p.value == value and type(p.value) is np.dtype(dtype).type
    for value in beyond:
        with pytest.raises(ValueError, match=rf"{re.escape(repr(p))}\.value: {value} does not fit in"):
            p.value = value
        assert p.value == fits[-1]
    with pytest.raises(TypeError, match=r"expects an integer, got float 0\.5"):
        p.value = 0.5


def test_param_values_follow_the_rules_of_kernel_arguments(device):
    """The same rules as arguments (Python and NumPy numbers alike), on every path: the value setter's fast
    path for floats, its general path, construction with a dtype and binding at first use."""
    f = gg.Param(2.0, dtype=np.float32)
    name = re.escape(repr(f))
    for big in (1e300, np.float64(1e300), -1e39):
        with pytest.raises(ValueError,
                           match=rf"^{name}\.value: .* does not fit in float32 \(\|x\| <= 3\.40282e\+38\)$"):
            f.value = big
    assert f.value == 2.0 and type(f.value) is np.float32
    for special in (float("inf"), np.float64("-inf")):
        f.value = special
        assert f.value == special and type(f.value) is np.float32
    f.value = np.float64("nan")
    assert np.isnan(f.value)
    n = gg.Param(3, dtype=np.int32)
    with pytest.raises(TypeError, match=r"\.value: expects an integer, got float32 np\.float32\(8\.5\)$"):
        n.value = np.float32(8.5)
    with pytest.raises(ValueError, match=r"\.value: np\.int64\(1099511627776\) does not fit in int32"):
        n.value = np.int64(2**40)
    with pytest.raises(TypeError, match=r"\.value: expected a real scalar, got complex64$"):
        n.value = np.complex64(1 + 2j)
    n.value = np.True_  # a bool is 1
    assert n.value == 1 and type(n.value) is np.int32
    u = gg.Param(1, dtype=np.uint32)
    for negative in (-1, np.int64(-1)):
        with pytest.raises(ValueError, match=r"-1\)? does not fit in uint32 \(0\.\.4294967295\)$"):
            u.value = negative
    assert u.value == 1
    with pytest.raises(ValueError, match=r"^Param: 1e\+300 does not fit in float32"):
        gg.Param(1e300, dtype=np.float32)
    loose = gg.Param(np.float64(1e300))
    message = (r"^Kernel\('scale'\) argument 1 \(float f\) given Param\(np\.float64\(1e\+300\)\): "
               r"np\.float64\(1e\+300\) does not fit in float")
    with pytest.raises(ValueError, match=message):
        gg.Graph(device).add_kernel(K.scale, GRID, BLOCK, K.f32(device, X0), loose, N)
    assert loose.dtype is None  # unbound still


def test_a_param_has_no_truth_value(device):
    for param in (gg.Param(1.0), gg.Param(0, dtype=np.int32), gg.Param(K.f32(device, X0))):
        with pytest.raises(TypeError, match=r"^Param\(.*\) has no truth value: in a captured function `if param:` "
                                            r"would be decided once, at the capture, and frozen into the graph; "
                                            r"compare `param.value` for the current value$"):
            bool(param)
        with pytest.raises(TypeError, match="has no truth value"):
            if param:
                pass
    assert gg.Param(1.0).value  # the value has one


def test_a_branch_on_a_dynamic_argument_is_refused_at_the_capture(device, stream):
    x = K.f32(device, X0)

    @gg.captured(dynamic=("f",))
    def scale_if(x, f):
        if f:  # would freeze the branch taken at the capture
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, f, N)

    with gg.use_stream(stream):
        with pytest.raises(TypeError, match="has no truth value"):
            scale_if(x, 2.0)
        stream.launch(K.scale, GRID, BLOCK, x, 3.0, N)  # the stream still works
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)


def test_refused_value_changes_nothing_at_the_next_launch(device, stream):
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with g.instantiate() as exe:
        with pytest.raises(TypeError):
            alpha.value = "3"
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_non_integer_float_for_an_integer_param_is_refused(device):
    n = gg.Param(3, dtype=np.int32)
    with pytest.raises(TypeError, match=rf"^{re.escape(repr(n))}\.value: expects an integer, got float 2\.5$"):
        n.value = 2.5
    assert n.value == 3
    n.value = 4.0  # integral: accepted
    assert n.value == 4 and type(n.value) is np.int32
    loose = gg.Param(2.5)
    with pytest.raises(TypeError, match=r"^Kernel\('fill'\) argument 1 \(int v\) given Param\(2\.5\): expects an "
                                        r"integer, got float 2\.5$"):
        gg.Graph(device).add_kernel(K.fill, GRID, BLOCK, device.zeros(N, np.int32), loose, N)


def test_refused_binding_leaves_the_param_unbound(device, stream):
    x = K.f32(device, X0)
    loose = gg.Param(2.5)
    with pytest.raises(TypeError, match=r"given Param\(2\.5\): expects an integer, got float 2\.5$"):
        gg.Graph(device).add_kernel(K.fill, GRID, BLOCK, device.zeros(N, np.int32), loose, N)
    assert loose.dtype is None
    stream.launch(K.scale, GRID, BLOCK, x, loose, N)  # a float parameter takes it
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2.5)


def test_a_refused_call_leaves_an_untyped_param_untyped(device, stream):
    """A call refused for any reason, after the Param was taken too, fixes no type: the Param still goes to the
    double parameter it was meant for."""
    f = gg.Param(2.0)
    x = K.f32(device, X0)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"argument 2 \(int n\): expects a C int scalar, got str 'n'$"):
        g.add_kernel(K.scale, GRID, BLOCK, x, f, "n")  # an argument after it
    with pytest.raises(TypeError, match=r"after=.*expected Nodes, got str"):
        g.add_kernel(K.scale, GRID, BLOCK, x, f, N, after=["n0"])  # the node's dependencies
    with pytest.raises(ValueError, match=r"shared_mem: expected a non-negative int, got -1"):
        g.add_kernel(K.scale, GRID, BLOCK, x, f, N, shared_mem=-1)
    body = g.add_while(g.condition(0)).bodies[0]
    with pytest.raises(gg.GraphError, match=r"is the body of a conditional node, and a Param is patched"):
        body.add_kernel(K.scale, GRID, BLOCK, x, f, N)
    in_body = body.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    with pytest.raises(gg.GraphError, match=r"is the body of a conditional node, and a Param is patched"):
        body.set_params(in_body, x, f, N)
    cooperative = gg.Graph(device)
    node = cooperative.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    cooperative.set_attributes(node, cooperative=True)
    with cooperative.instantiate() as exe:
        with pytest.raises(ValueError, match=r"it is cooperative, so its 100000 blocks must all be resident"):
            exe.set_params(node, x, f, N, grid=100_000, block=1024)  # the node's attributes refuse the shape
    with pytest.raises(TypeError, match=r"argument 2 \(int n\): expects a C int scalar, got str 'n'$"):
        stream.launch(K.scale, GRID, BLOCK, x, f, "n")
    with stream.capture():
        with pytest.raises(TypeError, match=r"argument 2 \(int n\): expects a C int scalar, got str 'n'$"):
            stream.launch(K.scale, GRID, BLOCK, x, f, "n")
    tiled = gg.Kernel("""
    __global__ void tiled(float* x, float a, int n){
        __shared__ float tile[8192];  // 32 KiB: with 20,000 bytes more, past a launch's 48 KiB
        tile[threadIdx.x] = a * x[threadIdx.x];
        __syncthreads();
        if (threadIdx.x < n) x[threadIdx.x] = tile[n - 1 - threadIdx.x];
    }""", "tiled")
    for capturing in (False, True):  # refused once every argument was accepted
        with stream.capture() if capturing else contextlib.nullcontext():
            with pytest.raises(ValueError, match=r"__shared__ variables, which with 20000 bytes"):
                stream.launch(tiled, 1, N, x, f, N, shared_mem=20_000)
    assert f.dtype is None and len(g) == 1  # (the while node)
    # Passed for a double parameter at last: a double it is, and the node computes with it.
    axpy64 = gg.Kernel("""
    __global__ void axpy64(double a, const double* x, double* y, int n){
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if(i < n){y[i] = a * x[i] + y[i];}
    }""", "axpy64", cpu=lambda launch, a, x, y, n: y.__setitem__(slice(0, n), a * x[:n] + y[:n]))
    y = device.zeros(N, np.float64)
    h = gg.Graph(device)
    h.add_kernel(axpy64, GRID, BLOCK, f, device.asarray(np.ones(N)), y, N)
    assert f.dtype == np.float64 and type(f.value) is np.float64
    with h.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 2.0))


def test_an_untyped_param_is_refused_for_two_parameters_of_different_types(device):
    both = gg.Kernel("__global__ void both(float* x, float f, double d, int n){}", "both",
                     cpu=lambda launch, x, f, d, n: None)
    f = gg.Param(2.0)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"^Kernel\('both'\) argument 2 \(double d\): Param\(2\.0\) is passed for "
                                        r"argument 1 \(float f\) too, and a Param holds one type; pass two Params, or "
                                        r"give it one with dtype=$"):
        g.add_kernel(both, 1, 1, K.f32(device, X0), f, f, N)
    assert f.dtype is None and len(g) == 0
    g.add_kernel(both, 1, 1, K.f32(device, X0), f, 3.0, N)
    assert f.dtype == np.float32


# Params outside graphs


def test_param_on_a_plain_stream_launch_uses_its_current_value(device, stream):
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    buf = gg.Param(x)
    stream.launch(K.scale, GRID, BLOCK, buf, alpha, N)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    y = K.f32(device, X0)
    alpha.value = 3.0
    buf.value = y
    stream.launch(K.scale, GRID, BLOCK, buf, alpha, N)
    alpha.value = 100.0  # after the launch was enqueued: not that launch's value
    buf.value = x
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


def test_param_on_a_gated_plain_stream_launch_keeps_the_enqueued_value(device, stream):
    gate = threading.Event()
    x = K.f32(device, X0)
    alpha = gg.Param(2.0)
    stream.host(gate.wait, 10)
    stream.launch(K.scale, GRID, BLOCK, x, alpha, N)
    try:
        alpha.value = 5.0
    finally:
        gate.set()
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_repr():
    assert repr(gg.Param(2.5)) == "Param(2.5)"
    assert repr(gg.Param(2, dtype=np.int64)) == f"Param({np.int64(2)!r})"


def test_an_untyped_param_of_another_number_type_is_passed_as_its_parameters_type(device):
    """A Param made without a dtype takes its parameter's type once the call passing it is accepted: the launch, node
    or set that types it packs its value as that type (a NumPy int64 for an int, a bool for an int, a double for a
    float, a float for a double)."""
    stream = device.stream()
    x, y = device.zeros(8, np.int32), device.zeros(8, np.float32)
    stream.launch(K.fill, 1, 8, x, gg.Param(np.int64(3)), 8)
    with stream.capture() as cap:
        stream.launch(K.fill, 1, 4, x, gg.Param(True), 4)
    graph = gg.Graph(device)
    node = graph.add_kernel(K.scale, 1, 8, y, gg.Param(np.float64(2.0)), 8)
    stream.launch(K.shift, 1, 8, y, 1.0, 8)
    stream.synchronize()
    cap.graph.instantiate().launch(stream)
    with graph.instantiate() as exe:
        exe.launch(stream)
        exe.set_params(node, y, gg.Param(np.float32(0.5)), 8)
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.array([1] * 4 + [3] * 4, np.int32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(8, 1.0, np.float32))
