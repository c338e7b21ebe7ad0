"""2-D and 3-D copies and 2-D memsets (hipMemcpy3DAsync, hipMemset2DAsync, hipGraphAddMemcpyNode with 3-D
parameters, hipGraphAddMemsetNode with a height): on streams, under capture and as graph nodes, with pitched
(padded-row) arrays, checked against NumPy's slicing, and their rules, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

D, H, W = 3, 5, 7


def cube(device, values):
    return device.asarray(np.ascontiguousarray(values))


def source():
    return np.arange(D * H * W, dtype=np.float32).reshape(D, H, W)


def test_a_3d_box_copied_on_a_stream_matches_numpy_slicing(device):
    stream = device.stream()
    src = cube(device, source())
    dst = device.zeros((4, 6, 9), np.float32)  # (a bigger, padded layout: rows of 9 elements, 6 rows a slice)
    stream.memcpy(dst, src, shape=(2, 3, 4), dst_origin=(1, 2, 3), src_origin=(1, 1, 2))
    stream.synchronize()
    want = np.zeros((4, 6, 9), np.float32)
    want[1:3, 2:5, 3:7] = source()[1:3, 1:4, 2:6]
    np.testing.assert_array_equal(dst.to_numpy(), want)


def test_2d_copies_between_host_and_pitched_device_rows(device):
    stream = device.stream()
    host = device.pinned((H, W), np.int32)
    host[:] = np.arange(H * W, dtype=np.int32).reshape(H, W)
    pitched = device.zeros((H, 16), np.int32)  # 7 used elements of rows padded to 16
    stream.memcpy(pitched, host, shape=(H, W))
    back = device.pinned((H, W), np.int32)
    back[:] = -1
    stream.memcpy(back, pitched, shape=(H, W))
    stream.synchronize()
    np.testing.assert_array_equal(back, host)
    want = np.zeros((H, 16), np.int32)
    want[:, :W] = host
    np.testing.assert_array_equal(pitched.to_numpy(), want)


def test_a_2d_memset_sets_only_its_box(device):
    stream = device.stream()
    x = device.zeros((6, 10), np.uint16)
    stream.memset(x, 513, shape=(3, 4), origin=(2, 5))
    y = device.zeros((4, 4), np.float32)
    stream.memset(y, 1.5, shape=2)  # (one row: the first two elements)
    stream.synchronize()
    want = np.zeros((6, 10), np.uint16)
    want[2:5, 5:9] = 513
    np.testing.assert_array_equal(x.to_numpy(), want)
    np.testing.assert_array_equal(y.to_numpy().ravel(), [1.5, 1.5] + [0.0] * 14)


def test_box_copies_and_memsets_as_graph_nodes_and_captured(device):
    src = cube(device, source())
    dst = device.zeros((D, H, W), np.float32)
    g = gg.Graph(device)
    set_node = g.add_memset(dst, 0.0)
    copy = g.add_memcpy(dst, src, shape=(D, 2, 3), dst_origin=(0, 0, 0), src_origin=(0, 3, 4), after=set_node)
    rows = device.zeros((H, W), np.float32)
    band = g.add_memset(rows, 9.0, shape=(1, W), origin=(H - 1, 0), after=copy)  # (its last row)
    assert copy.params.box is not None and copy.params.nbytes == D * 2 * 3 * 4
    assert band.params.height == 1 and band.params.offset == (H - 1) * W * 4
    stream = device.stream()
    plane = device.zeros((H, W), np.float32)
    with stream.capture() as capture:
        stream.memcpy(dst, src, shape=(1, 1, W), dst_origin=(D - 1, 2, 0), src_origin=(0, 0, 0))
        stream.memset(plane, 5.0, shape=(2, 2), origin=(0, 5))
    for graph in (g, capture.graph):
        kinds = [n.kind for n in graph.nodes]
        assert gg.NodeKind.MEMCPY in kinds and gg.NodeKind.MEMSET in kinds
    want = np.zeros((D, H, W), np.float32)
    want[:, 0:2, 0:3] = source()[:, 3:5, 4:7]
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(dst.to_numpy(), want)
    np.testing.assert_array_equal(rows.to_numpy(), np.r_[np.zeros((H - 1, W)), np.full((1, W), 9.0)])
    want[D - 1, 2, :] = source()[0, 0, :]
    with capture.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(dst.to_numpy(), want)
    banded = np.zeros((H, W), np.float32)
    banded[0:2, 5:7] = 5.0
    np.testing.assert_array_equal(plane.to_numpy(), banded)


def test_box_rules_are_checked_at_the_call(device):
    stream = device.stream()
    src = cube(device, source())
    dst = device.zeros((D, H, W), np.float32)
    with pytest.raises(ValueError, match=r"memcpy\(dst\): a box of shape \(2, 2, 8\) at \(0, 0, 0\) passes the end of "
                                         r"dst \(of shape \(3, 5, 7\)\) along axis 2"):
        stream.memcpy(dst, src, shape=(2, 2, 8))
    with pytest.raises(ValueError, match=r"memcpy\(src\): a box of shape \(2, 2\) at \(4, 0\) passes the end of src"):
        stream.memcpy(dst, src, shape=(2, 2), src_origin=(4, 0))
    with pytest.raises(ValueError, match=r"memcpy\(dst_origin\): \(1, 1\) has 2 dimensions and shape \(2, 2, 2\) 3"):
        stream.memcpy(dst, src, shape=(2, 2, 2), dst_origin=(1, 1))
    with pytest.raises(TypeError, match=r"memcpy: dst is float32 and src is int32; a box copy moves elements of one "
                                        r"dtype"):
        stream.memcpy(dst, device.zeros((D, H, W), np.int32), shape=2)
    with pytest.raises(ValueError, match=r"memcpy\(shape\): each dimension must be at least 1, got \(0, 2\)"):
        stream.memcpy(dst, src, shape=(0, 2))
    with pytest.raises(TypeError, match=r"memcpy\(shape\): expected an int or a tuple of 1 to 3 ints"):
        stream.memcpy(dst, src, shape=[2, 2])
    with pytest.raises(TypeError, match=r"give nbytes .* or shape .*, not both"):
        stream.memcpy(dst, src, 8, shape=2)
    with pytest.raises(TypeError, match="dst_origin and src_origin place a 2-D or 3-D copy; give its shape too"):
        stream.memcpy(dst, src, dst_origin=(0, 1))
    with pytest.raises(ValueError, match=r"2-D and 3-D copies take arrays of 1 to 3 dimensions, got 4"):
        stream.memcpy(device.zeros((1, D, H, W), np.float32), src, shape=2)
    with pytest.raises(ValueError, match=r"memset\(dst\): memsets are 2-D; dst has 3 dimensions"):
        stream.memset(dst, 0.0, shape=(2, 2))
    plane = device.zeros((H, W), np.float32)
    with pytest.raises(ValueError, match=r"memset\(shape\): memsets are 2-D, got \(1, 2, 2\)"):
        stream.memset(plane, 0.0, shape=(1, 2, 2))
    with pytest.raises(ValueError, match=r"memset\(dst\): a box of shape \(2, 2\) at \(4, 0\) passes the end of dst"):
        stream.memset(plane, 0.0, shape=(2, 2), origin=(4, 0))
    with pytest.raises(TypeError, match="origin places a 2-D memset; give its shape too"):
        stream.memset(plane, 0.0, origin=(1, 1))
    with pytest.raises(ValueError, match="memsets write 1-, 2- or 4-byte patterns"):
        stream.memset(device.zeros((2, 2), np.float64), 2.0, shape=1)
    host = np.arange(D * H * W, dtype=np.float32).reshape(D, H, W)  # (ordinary memory, in a captured box copy)
    with stream.capture() as cap:
        stream.memcpy(dst, host, shape=(2, 2, 3), dst_origin=(1, 3, 4), src_origin=(0, 1, 2))
    cap.graph.instantiate().launch(stream)
    stream.synchronize()
    expected = np.zeros((D, H, W), np.float32)
    expected[1:3, 3:5, 4:7] = host[0:2, 1:3, 2:5]
    np.testing.assert_array_equal(dst.to_numpy(), expected)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"add_memset: give count \(a 1-D memset\) or shape \(a 2-D memset\), not both"):
        g.add_memset(plane, 0.0, 3, shape=1)
    assert len(g) == 0


def test_graph_setters_change_boxes_and_executable_graphs_keep_them(device):
    # Measured on the H200: an executable graph's 2-D or 3-D copy never changes (its setter and update refuse any
    # change); a 2-D memset changes its memory and value but not its shape.
    src = cube(device, source())
    dst = device.zeros((D, H, W), np.float32)
    plane = device.zeros((H, W), np.int32)
    g = gg.Graph(device)
    copy = g.add_memcpy(dst, src, shape=(2, 2), src_origin=(1, 1))
    band = g.add_memset(plane, 1, shape=(2, 2), after=copy)
    exe = g.instantiate()
    with pytest.raises(gg.GraphUpdateError, match=r"at Node\(n0, memcpy\): parameters changed \(an executable graph's "
                                                  r"copy of several rows cannot change \(CUDA's rule, measured\)"):
        exe.set_memcpy(copy, dst, src)
    with pytest.raises(gg.GraphUpdateError, match=r"a 2-D memset keeps its shape, and a 1-D one stays 1-D"):
        exe.set_memset(band, plane, 2)
    exe.set_memset(band, plane, 2, shape=(2, 2), origin=(0, 1))  # its memory and value
    stream = device.stream()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(plane.to_numpy()[0:3, 0:3], [[0, 2, 2], [0, 2, 2], [0, 0, 0]])
    stream.memset(plane, 0)
    g.set_memcpy(copy, dst, src, shape=(1, 3), src_origin=(2, 4))  # (the graph's node takes any box)
    with pytest.raises(gg.GraphUpdateError, match=r"copy of several rows cannot change \(CUDA's rule, measured\)"):
        exe.update(g)
    g.set_memcpy(copy, dst, src, shape=(2, 2), src_origin=(1, 1))  # the copy it was made with
    g.set_memset(band, plane, 3, shape=(2, 2), origin=(1, 1))
    exe.update(g)
    g.set_memset(band, plane, 3, shape=(3, 2))
    with pytest.raises(gg.GraphUpdateError, match=r"a 2-D memset keeps its shape"):
        exe.update(g)
    exe.launch(stream)
    stream.synchronize()
    want = np.zeros((D, H, W), np.float32)
    want[0, 0:2, 0:2] = source()[0, 1:3, 1:3]
    np.testing.assert_array_equal(dst.to_numpy(), want)
    banded = np.zeros((H, W), np.int32)
    banded[1:3, 1:3] = 3
    np.testing.assert_array_equal(plane.to_numpy(), banded)
    exe.close()


def test_a_kernel_reads_what_a_pitched_copy_wrote(device):
    # A 2-D iota computed on the device, then its box copied out with a pitch: the layout a kernel sees is the
    # array's own.
    out = device.zeros((4, 8), np.int32)
    stream = device.stream()
    stream.launch(K.iota2d, (1, 1), (8, 4), out, 8, 4)
    box = device.pinned((2, 3), np.int32)
    stream.memcpy(box, out, shape=(2, 3), src_origin=(1, 4))
    stream.synchronize()
    np.testing.assert_array_equal(box, [[1004, 1005, 1006], [2004, 2005, 2006]])


def test_a_2d_memset_takes_a_new_value_whatever_its_bytes(device):
    # A 2-D memset's pattern is as wide as its dtype allows, so a value whose bytes repeat (0.0) and one whose
    # bytes do not (1.5) set it alike, and an executable graph's node takes either.
    plane = device.zeros((3, 4), np.float32)
    g = gg.Graph(device)
    band = g.add_memset(plane, 0.0, shape=(2, 3))
    assert band.params.element_size == 4
    plane_ones = device.asarray(np.ones((3, 4), np.float32))
    stream = device.stream()
    with g.instantiate() as exe:
        exe.set_memset(band, plane_ones, 1.5, shape=(2, 3), origin=(1, 1))
        exe.launch(stream)
        stream.synchronize()
    want = np.ones((3, 4), np.float32)
    want[1:3, 1:4] = 1.5
    np.testing.assert_array_equal(plane_ones.to_numpy(), want)
    np.testing.assert_array_equal(plane.to_numpy(), np.zeros((3, 4), np.float32))
    # One row from both starts is a 1-D copy, as CUDA reads it back.
    row = gg.Graph(device).add_memcpy(plane, plane_ones, shape=4)
    assert row.params.box is None and row.params.nbytes == 16


def test_graph_nodes_refuse_bad_boxes_at_the_call(device):
    # The box rules of Stream.memcpy and Stream.memset (test_box_rules_are_checked_at_the_call), through the graph.
    src = cube(device, source())
    dst = device.zeros((D, H, W), np.float32)
    plane = device.zeros((H, W), np.float32)
    g = gg.Graph(device)
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): a box of shape \(2, 2, 8\) at \(0, 0, 0\) passes the "
                                         r"end of dst \(of shape \(3, 5, 7\)\) along axis 2$"):
        g.add_memcpy(dst, src, shape=(2, 2, 8))
    with pytest.raises(ValueError, match=r"^add_memcpy\(src\): a box of shape \(2, 2\) at \(4, 0\) passes the end of "
                                         r"src \(of shape \(3, 5, 7\)\) along axis 0$"):
        g.add_memcpy(dst, src, shape=(2, 2), src_origin=(4, 0))
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): a box of shape \(3, 1, 1\) at \(1, 0, 0\) passes the "
                                         r"end of dst \(of shape \(3, 5, 7\)\) along axis 0$"):
        g.add_memcpy(dst, src, shape=(3, 1, 1), dst_origin=(1, 0, 0))
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst_origin\): \(1, 1\) has 2 dimensions and shape \(2, 2, 2\) "
                                         r"3$"):
        g.add_memcpy(dst, src, shape=(2, 2, 2), dst_origin=(1, 1))
    with pytest.raises(ValueError, match=r"^add_memcpy\(src_origin\): \(0, 0, 1\) has 3 dimensions and shape \(2, 2\) "
                                         r"2$"):
        g.add_memcpy(dst, src, shape=(2, 2), src_origin=(0, 0, 1))
    with pytest.raises(TypeError, match=r"^add_memcpy: dst is float32 and src is int32; a box copy moves elements of "
                                        r"one dtype$"):
        g.add_memcpy(dst, device.zeros((D, H, W), np.int32), shape=(2, 2))
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): 2-D and 3-D copies take arrays of 1 to 3 dimensions, "
                                         r"got 4$"):
        g.add_memcpy(device.zeros((1, D, H, W), np.float32), src, shape=(2, 2))
    with pytest.raises(ValueError, match=r"^add_memset\(dst\): a box of shape \(2, 2\) at \(4, 0\) passes the end of "
                                         r"dst \(of shape \(5, 7\)\) along axis 0$"):
        g.add_memset(plane, 0.0, shape=(2, 2), origin=(4, 0))
    with pytest.raises(ValueError, match=r"^add_memset\(dst\): memsets are 2-D; dst has 3 dimensions"):
        g.add_memset(dst, 0.0, shape=(2, 2))
    assert len(g) == 0  # (nothing half-added)


def test_setters_refuse_bad_boxes_and_keep_the_node(device, stream):
    src = cube(device, source())
    dst = device.zeros((D, H, W), np.float32)
    plane = device.zeros((H, W), np.int32)
    g = gg.Graph(device)
    copy = g.add_memcpy(dst, src, shape=(2, 2), src_origin=(1, 1))
    band = g.add_memset(plane, 1, shape=(2, 2), origin=(1, 1), after=copy)
    was = copy.params, band.params
    for call, error, message in (
            (lambda: g.set_memcpy(copy, dst, src, shape=(2, 8)), ValueError,
             r"^set_memcpy\(dst\): a box of shape \(2, 8\) at \(0, 0\) passes the end of dst \(of shape \(3, 5, 7\)\) "
             r"along axis 1$"),
            (lambda: g.set_memcpy(copy, dst, src, shape=(2, 2), src_origin=(4, 6)), ValueError,
             r"^set_memcpy\(src\): a box of shape \(2, 2\) at \(4, 6\) passes the end of src \(of shape \(3, 5, 7\)\) "
             r"along axis 0$"),
            (lambda: g.set_memcpy(copy, dst, src, shape=(2, 2), dst_origin=(0, 0, 0)), ValueError,
             r"^set_memcpy\(dst_origin\): \(0, 0, 0\) has 3 dimensions and shape \(2, 2\) 2$"),
            (lambda: g.set_memcpy(copy, dst, device.zeros((D, H, W), np.int32), shape=(2, 2)), TypeError,
             r"^set_memcpy: dst is float32 and src is int32; a box copy moves elements of one dtype$"),
            (lambda: g.set_memset(band, plane, 2, shape=(2, 2), origin=(4, 6)), ValueError,
             r"^set_memset\(dst\): a box of shape \(2, 2\) at \(4, 6\) passes the end of dst \(of shape \(5, 7\)\) "
             r"along axis 0$")):
        with pytest.raises(error, match=message):
            call()
        assert (copy.params, band.params) == was  # the nodes keep their copy and memset
    assert g.nodes == (copy, band) and g.edges == ((copy, band),)
    with g.instantiate() as exe:  # (made after the refusals: the backend's node kept its copy too)
        for call, error, message in (
                (lambda: exe.set_memcpy(copy, dst, src, shape=(2, 8), src_origin=(1, 1)), ValueError,
                 r"^set_memcpy\(dst\): a box of shape \(2, 8\) at \(0, 0\) passes the end of dst"),
                (lambda: exe.set_memcpy(copy, dst, src, shape=(2, 2), src_origin=(1,)), ValueError,
                 r"^set_memcpy\(src_origin\): \(1,\) has 1 dimensions and shape \(2, 2\) 2$"),
                (lambda: exe.set_memcpy(copy, dst, device.zeros((D, H, W), np.int32), shape=(2, 2),
                                        src_origin=(1, 1)), TypeError,
                 r"^set_memcpy: dst is float32 and src is int32; a box copy moves elements of one dtype$"),
                (lambda: exe.set_memset(band, plane, 2, shape=(2, 8)), ValueError,
                 r"^set_memset\(dst\): a box of shape \(2, 8\) at \(0, 0\) passes the end of dst \(of shape \(5, 7\)\) "
                 r"along axis 1$"),
                (lambda: exe.set_memset(band, plane, 2, shape=(2, 2), origin=(4, 0)), ValueError,
                 r"^set_memset\(dst\): a box of shape \(2, 2\) at \(4, 0\) passes the end of dst \(of shape \(5, 7\)\) "
                 r"along axis 0$"),
                (lambda: exe.set_memset(band, plane, 2, shape=(2, 2), origin=(1,)), ValueError,
                 r"^set_memset\(origin\): \(1,\) has 1 dimensions and shape \(2, 2\) 2$"),
                (lambda: exe.set_memset(band, plane, 1.5, shape=(2, 2)), ValueError,
                 r"^set_memset: value 1\.5 is not representable as int32$"),
                (lambda: exe.set_memset(band, device.zeros((D, H, W), np.int32), 2, shape=(2, 2)), ValueError,
                 r"^set_memset\(dst\): memsets are 2-D; dst has 3 dimensions")):
            with pytest.raises(error, match=message):
                call()
        exe.launch(stream)
        stream.synchronize()
    assert (copy.params, band.params) == was
    want = np.zeros((D, H, W), np.float32)
    want[0, 0:2, 0:2] = source()[0, 1:3, 1:3]
    np.testing.assert_array_equal(dst.to_numpy(), want)  # the copy it was made with
    banded = np.zeros((H, W), np.int32)
    banded[1:3, 1:3] = 1
    np.testing.assert_array_equal(plane.to_numpy(), banded)  # the memset it was made with
