"""Device memory: Arrays from empty/zeros/asarray/empty_like, pinned host memory, to_numpy, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

DTYPES = [np.int8, np.uint8, np.int16, np.float16, np.int32, np.uint32, np.float32, np.int64,
          np.float64, np.complex64, np.bool_]


@pytest.mark.parametrize("shape, expected", [(5, (5,)), ((2, 3), (2, 3)), ([4, 1, 2], (4, 1, 2)),
                                             (np.int64(3), (3,)), ((), ()), (0, (0,))])
def test_empty_shape_normalised(device, shape, expected):
    a = device.empty(shape, np.float32)
    assert type(a) is gg.Array
    assert a.shape == expected
    assert a.dtype == np.dtype(np.float32)
    assert a.nbytes == 4 * int(np.prod(expected))
    assert a.size == int(np.prod(expected))
    assert a.ndim == len(expected)
    assert a.device is device
    assert isinstance(a.ptr, int)


def test_empty_default_dtype_is_float32(device):
    assert device.empty(3).dtype == np.float32


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros(device, dtype):
    a = device.zeros((3, 4), dtype)
    out = a.to_numpy()
    assert out.dtype == np.dtype(dtype)
    assert out.shape == (3, 4)
    np.testing.assert_array_equal(out, np.zeros((3, 4), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_asarray_round_trip(device, dtype):
    rng = np.random.default_rng(0)
    host = (rng.integers(0, 100, (2, 5)) % 2 if dtype is np.bool_ else rng.integers(-50, 50, (2, 5))
            ).astype(dtype)
    a = device.asarray(host)
    assert a.shape == host.shape and a.dtype == host.dtype and a.nbytes == host.nbytes
    np.testing.assert_array_equal(a.to_numpy(), host)


def test_asarray_converts_dtype_and_takes_lists(device):
    a = device.asarray([1, 2, 3], dtype=np.float64)
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a.to_numpy(), [1.0, 2.0, 3.0])


def test_asarray_of_non_contiguous_view(device):
    host = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2]
    a = device.asarray(host)
    assert a.shape == (4, 3)
    np.testing.assert_array_equal(a.to_numpy(), host)


def test_asarray_copies_the_data(device):
    host = np.arange(4, dtype=np.int32)
    a = device.asarray(host)
    host[:] = -1
    np.testing.assert_array_equal(a.to_numpy(), [0, 1, 2, 3])


def test_asarray_is_done_for_work_queued_next_on_any_stream(device):
    """Device.asarray is synchronous: a copy queued at once on a non-blocking stream reads its data (a pageable
    upload's DMA may land after cuMemcpy returns, and such a stream is not ordered after it)."""
    stream = device.stream(non_blocking=True)
    values = np.arange(1 << 24, dtype=np.float32)  # 64 MiB: a DMA long enough to be seen unfinished
    for _ in range(3):
        out = device.pinned(values.shape, values.dtype)
        stream.memcpy(out, device.asarray(values))
        stream.synchronize()
        np.testing.assert_array_equal(out, values)


def test_to_numpy_returns_an_independent_copy(device):
    a = device.asarray(np.arange(3, dtype=np.float32))
    out = a.to_numpy()
    out[:] = 99
    np.testing.assert_array_equal(a.to_numpy(), [0, 1, 2])


def test_empty_like_numpy_and_array(device):
    host = np.zeros((2, 7), np.int16)
    a = device.empty_like(host)
    assert (a.shape, a.dtype) == ((2, 7), np.dtype(np.int16))
    b = device.empty_like(a)
    assert (b.shape, b.dtype) == ((2, 7), np.dtype(np.int16))
    assert b.ptr != a.ptr


def test_empty_like_rejects_non_arrays(device):
    with pytest.raises(TypeError, match=r"empty_like.*int"):
        device.empty_like(3)


def test_zero_size_array(device):
    a = device.zeros(0, np.float64)
    assert a.nbytes == 0
    assert a.to_numpy().shape == (0,)


@pytest.mark.parametrize("data, dtype", [(3.0, np.float64), (np.float32(2.5), np.float32), (np.array(7), None),
                                         (True, np.bool_)])
def test_zero_d_arrays_keep_their_shape(device, data, dtype):
    """Like NumPy: dev.asarray(3.0).shape == (), and to_numpy gives a 0-d array back."""
    a = device.asarray(data)
    assert a.shape == () and a.ndim == 0 and a.size == 1
    assert a.dtype == np.asarray(data).dtype and a.nbytes == a.dtype.itemsize
    out = a.to_numpy()
    assert out.shape == () and out.dtype == a.dtype
    assert out == np.asarray(data) and (dtype is None or out.dtype == dtype)
    for made in (device.empty((), np.float32), device.zeros((), np.int16)):
        assert made.shape == () and made.size == 1
    assert device.zeros((), np.int16).to_numpy() == 0


def test_zero_d_arrays_in_copies_and_kernels(device):
    stream = device.stream()
    x = device.asarray(np.float32(3.0))
    host = device.pinned((), np.float32)
    assert host.shape == ()
    stream.launch(K.scale, 1, 32, x, 2.0, 1)         # a 0-d Array is a pointer to one element
    stream.memcpy(host, x)                           # 0-d to 0-d
    stream.synchronize()
    assert host == 6.0
    y = device.zeros((), np.float32)
    g = gg.Graph(device)
    copy = g.add_memcpy(y, x)
    g.add_kernel(K.shift, 1, 32, y, 1.0, 1, after=copy)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    assert y.to_numpy() == 7.0 and y.to_numpy().shape == ()
    one = device.zeros(1, np.float32)
    stream.memcpy(one, y)                            # same dtype and size: shapes may differ
    stream.synchronize()
    np.testing.assert_array_equal(one.to_numpy(), [7.0])


def test_a_cpu_kernel_sees_a_zero_d_array_as_one_element():
    """The CUDA kernel gets a pointer to one element; its CPU twin gets a 1-element view (docs/guide.md)."""
    device = gg.Device("cpu")
    seen = []
    kernel = gg.Kernel("__global__ void k(float* x){ x[0] += 1.0f; }", "k",
                       cpu=lambda launch, x: (seen.append(x.shape), x.__setitem__(0, x[0] + 1)))
    x = device.asarray(np.float32(2.0))
    stream = device.stream()
    stream.launch(kernel, 1, 1, x)
    stream.synchronize()
    assert seen == [(1,)] and x.to_numpy() == 3.0 and x.to_numpy().shape == ()


def test_distinct_allocations_do_not_alias(device):
    a = device.asarray(np.full(4, 1, np.int32))
    b = device.asarray(np.full(4, 2, np.int32))
    assert a.ptr != b.ptr
    np.testing.assert_array_equal(a.to_numpy(), [1, 1, 1, 1])
    np.testing.assert_array_equal(b.to_numpy(), [2, 2, 2, 2])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_pinned(device, dtype):
    h = device.pinned((3, 2), dtype)
    assert isinstance(h, np.ndarray)
    assert h.shape == (3, 2) and h.dtype == np.dtype(dtype)
    assert h.flags.c_contiguous and h.flags.writeable
    h[:] = 7
    np.testing.assert_array_equal(h, np.full((3, 2), 7, dtype))


def test_repr_names_shape_dtype_device(device):
    text = repr(device.empty((2, 2), np.int32))
    assert "(2, 2)" in text and "int32" in text and str(device) in text


@pytest.mark.parametrize("shape", [-1, (2, -3)])
def test_negative_shape_raises_value_error(device, shape):
    with pytest.raises(ValueError, match="shape: dimensions must be non-negative"):
        device.empty(shape)
    with pytest.raises(ValueError, match="shape"):
        device.pinned(shape)


@pytest.mark.parametrize("shape", ["abc", 2.5, (2, 1.5), None])
def test_non_int_shape_raises_type_error(device, shape):
    with pytest.raises(TypeError, match="shape: expected an int or a tuple of ints"):
        device.empty(shape)
    with pytest.raises(TypeError, match="shape"):
        device.zeros(shape)


@pytest.mark.parametrize("dtype, match", [("not-a-dtype", "dtype: expected a NumPy dtype"),
                                          (object, "fixed-size plain-data"),
                                          ("S0", "fixed-size plain-data")])
def test_bad_dtype_raises_type_error(device, dtype, match):
    with pytest.raises(TypeError, match=match):
        device.empty(4, dtype)
    with pytest.raises(TypeError, match="dtype"):
        device.pinned(4, dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_multidimensional_byte_arrays_round_trip(device, dtype):
    """Multi-dimensional byte arrays round-trip exactly: a copy counts their bytes, whatever their shape."""
    host = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    a = device.asarray(host)
    np.testing.assert_array_equal(a.to_numpy(), host)
    s = device.stream()
    out = device.pinned((2, 3, 4), dtype)
    s.memcpy(out, a)
    s.synchronize()
    np.testing.assert_array_equal(out, host)


def test_numpy_conversion_of_an_array_is_refused_naming_the_ways(device):
    """np.asarray would otherwise give a 0-d object array holding the Array, silently."""
    x = device.zeros(3, np.float32)
    for convert in (np.asarray, np.array):
        with pytest.raises(TypeError, match=r"^np\.asarray/np\.array: Array\(shape=\(3,\), .*\) is device memory, not "
                                            r"a host sequence; use array\.to_numpy\(\) for a host copy .* or "
                                            r"np\.from_dlpack\(array\)"):
            convert(x)
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(3))
