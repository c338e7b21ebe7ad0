"""``@gg.captured``: capture on the first call, replay on the same key with dynamic arguments patched,
recapture-then-update on a new key of the same topology, a new instantiation otherwise, an LRU of
``max_graphs`` graphs, graph memory stable across replays, CaptureError pointing at the user's line, the
current stream (``current_stream``/``use_stream``) and its per-thread scope.

Every test runs on each available backend through the ``device``/``stream`` fixtures of conftest.py and
checks values against NumPy; only behaviour CUDA also has is asserted.
"""

from __future__ import annotations

import functools
import gc
import inspect
import re
import threading
import weakref

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 8
GRID, BLOCK = K.launch_1d(N, 4)
X0 = np.arange(1, N + 1, dtype=np.float32)


def stats(fn):
    s = fn.stats
    return dict(captures=s.captures, updates=s.updates, instantiations=s.instantiations, replays=s.replays,
                patches=s.patches, evictions=s.evictions)


def make_axpy():
    """A captured ``y = alpha * x + y`` with ``alpha`` dynamic."""
    @gg.captured(dynamic=("alpha",))
    def axpy(x, y, alpha):
        gg.current_stream(x.device).launch(K.axpy, GRID, BLOCK, alpha, x, y, N)
    return axpy


def make_scale_steps(max_graphs=16):
    """A captured ``x *= factor`` repeated ``steps`` times: ``steps`` sets the topology."""
    @gg.captured(max_graphs=max_graphs)
    def scale_steps(x, factor, steps):
        s = gg.current_stream(x.device)
        for _ in range(steps):
            s.launch(K.scale, GRID, BLOCK, x, factor, N)
    return scale_steps


def sync(device):
    gg.current_stream(device).synchronize()


# Capture, replay, patch, update, instantiate


def test_first_call_captures_instantiates_and_runs(device):
    axpy = make_axpy()
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    assert axpy(x, y, 2.0) is None
    sync(device)
    np.testing.assert_array_equal(y.to_numpy(), 2 * X0)
    assert stats(axpy) == dict(captures=1, updates=0, instantiations=1, replays=0, patches=0, evictions=0)


def test_same_key_replays(device):
    axpy = make_axpy()
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    for _ in range(3):
        axpy(x, y, 2.0)
    sync(device)
    np.testing.assert_array_equal(y.to_numpy(), 3 * 2 * X0)
    s = stats(axpy)
    assert (s["captures"], s["instantiations"], s["replays"], s["updates"]) == (1, 1, 2, 0)


def test_dynamic_scalar_is_patched_without_recapture(device):
    axpy = make_axpy()
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    axpy(x, y, 2.0)
    axpy(x, y, -0.5)
    sync(device)
    np.testing.assert_array_equal(y.to_numpy(), 2 * X0 - 0.5 * X0)
    assert stats(axpy) == dict(captures=1, updates=0, instantiations=1, replays=1, patches=1, evictions=0)
    axpy(x, y, 4.0)
    sync(device)
    np.testing.assert_array_equal(y.to_numpy(), 5.5 * X0)
    assert stats(axpy)["captures"] == 1 and stats(axpy)["patches"] == 2


def test_unchanged_dynamic_scalar_is_not_patched(device):
    axpy = make_axpy()
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    axpy(x, y, 2.0)
    axpy(x, y, 2.0)
    axpy(x, y, 3.0)
    axpy(x, y, 3.0)
    sync(device)
    np.testing.assert_array_equal(y.to_numpy(), 10 * X0)
    assert stats(axpy) == dict(captures=1, updates=0, instantiations=1, replays=3, patches=1, evictions=0)


def test_dynamic_array_is_patched_without_recapture(device):
    @gg.captured(dynamic=("out",))
    def double_into(x, out):
        gg.current_stream(x.device).launch(K.add, GRID, BLOCK, out, x, x, N)

    x = K.f32(device, X0)
    out1, out2 = device.zeros(N, np.float32), device.asarray(np.full(N, -1.0, np.float32))
    double_into(x, out1)
    double_into(x, out2)  # same shape and dtype, another address: patched, not recaptured
    sync(device)
    np.testing.assert_array_equal(out1.to_numpy(), 2 * X0)
    np.testing.assert_array_equal(out2.to_numpy(), 2 * X0)
    s = stats(double_into)
    assert (s["captures"], s["instantiations"], s["replays"], s["patches"]) == (1, 1, 1, 1)


def test_new_array_address_recaptures_and_updates_in_place(device):
    axpy = make_axpy()
    x1, y1 = K.f32(device, X0), device.zeros(N, np.float32)
    x2, y2 = K.f32(device, X0 * 10), device.zeros(N, np.float32)
    axpy(x1, y1, 2.0)
    axpy(x2, y2, 3.0)  # x and y are not dynamic: a new key of the same topology
    sync(device)
    np.testing.assert_array_equal(y1.to_numpy(), 2 * X0)
    np.testing.assert_array_equal(y2.to_numpy(), 30 * X0)
    assert stats(axpy) == dict(captures=2, updates=1, instantiations=1, replays=0, patches=0, evictions=0)
    axpy(x2, y2, 1.0)  # the updated graph is cached under the new key
    sync(device)
    np.testing.assert_array_equal(y2.to_numpy(), 40 * X0)
    np.testing.assert_array_equal(y1.to_numpy(), 2 * X0)
    s = stats(axpy)
    assert (s["captures"], s["instantiations"], s["replays"]) == (2, 1, 1)
    axpy(x1, y1, 1.0)  # back to the first arrays: right values, still one instantiation
    sync(device)
    np.testing.assert_array_equal(y1.to_numpy(), 3 * X0)
    np.testing.assert_array_equal(y2.to_numpy(), 40 * X0)
    assert stats(axpy)["instantiations"] == 1


def test_new_static_scalar_recaptures_and_updates_in_place(device):
    scale_steps = make_scale_steps()
    x = K.f32(device, X0)
    scale_steps(x, 2.0, 1)
    scale_steps(x, 3.0, 1)  # factor is not dynamic: a new key, the same topology
    scale_steps(x, 3.0, 1)  # replay
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 * 3 * 3)
    assert stats(scale_steps) == dict(captures=2, updates=1, instantiations=1, replays=1, patches=0, evictions=0)


def test_new_topology_instantiates_a_new_graph(device):
    scale_steps = make_scale_steps()
    x = K.f32(device, X0)
    scale_steps(x, 2.0, 1)
    scale_steps(x, 2.0, 2)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 8)
    assert stats(scale_steps) == dict(captures=2, updates=0, instantiations=2, replays=0, patches=0, evictions=0)
    scale_steps(x, 2.0, 1)  # both graphs are cached
    scale_steps(x, 2.0, 2)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 64)
    s = stats(scale_steps)
    assert (s["captures"], s["instantiations"], s["replays"]) == (2, 2, 2)


def test_max_graphs_evicts_the_least_recently_used(device):
    scale_steps = make_scale_steps(max_graphs=2)
    x = K.f32(device, np.ones(N))
    scale_steps(x, 2.0, 1)  # cache: [1]
    scale_steps(x, 2.0, 2)  # cache: [1, 2]
    scale_steps(x, 2.0, 1)  # replay; cache: [2, 1]
    assert stats(scale_steps)["evictions"] == 0
    scale_steps(x, 2.0, 3)  # evicts 2, the least recently used; cache: [1, 3]
    assert stats(scale_steps) == dict(captures=3, updates=0, instantiations=3, replays=1, patches=0, evictions=1)
    scale_steps(x, 2.0, 1)  # still cached: a replay; cache: [3, 1]
    assert stats(scale_steps)["captures"] == 3 and stats(scale_steps)["replays"] == 2
    scale_steps(x, 2.0, 2)  # was evicted: captured again, evicting 3; cache: [1, 2]
    assert stats(scale_steps) == dict(captures=4, updates=0, instantiations=4, replays=2, patches=0, evictions=2)
    scale_steps(x, 2.0, 3)  # was evicted too
    assert stats(scale_steps)["captures"] == 5 and stats(scale_steps)["evictions"] == 3
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 2.0 ** (1 + 2 + 1 + 3 + 1 + 2 + 3)))


def test_result_of_the_captured_call_is_returned_by_replays(device):
    @gg.captured(dynamic=("alpha",))
    def tagged(x, alpha):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, alpha, N)
        return ("done", x)

    x = K.f32(device, X0)
    first = tagged(x, 2.0)
    assert first == ("done", x)
    assert tagged(x, 3.0) is first
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 6)


def test_keyword_and_default_arguments_make_the_same_key(device):
    @gg.captured(dynamic=("alpha",))
    def scaled(x, alpha=2.0, steps=1):
        for _ in range(steps):
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, alpha, N)

    x = K.f32(device, X0)
    scaled(x)
    scaled(x, alpha=2.0)
    scaled(x, 2.0, steps=1)
    scaled(x=x, steps=1, alpha=0.5)
    scaled(x, 2.0, 1)  # every parameter positionally (bound without inspect): the same key
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 8)
    s = stats(scaled)
    assert (s["captures"], s["instantiations"], s["replays"]) == (1, 1, 4)


def test_positional_only_and_keyword_only_parameters(device):
    @gg.captured(dynamic=("alpha",))
    def scaled(x, /, alpha, *, steps=1):
        for _ in range(steps):
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, alpha, N)

    x = K.f32(device, X0)
    scaled(x, 2.0)
    scaled(x, alpha=3.0)
    scaled(x, 0.5, steps=2)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 1.5)
    s = stats(scaled)
    assert (s["captures"], s["instantiations"], s["replays"]) == (2, 2, 1)


def test_a_list_argument_is_keyed_by_its_items(device):
    @gg.captured
    def scale_by(x, factors):
        for f in factors:
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, f, N)

    x = K.f32(device, X0)
    factors = [2.0]
    scale_by(x, factors)
    factors[0] = 3.0
    scale_by(x, factors)  # the same list holding another value: another key, captured again
    scale_by(x, [3.0])  # another list holding the same value: the same key, replayed
    scale_by(x, (3.0,))  # a tuple is not a list: another key
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 * 3 * 3 * 3)
    s = stats(scale_by)
    assert (s["captures"], s["replays"]) == (3, 1)


def test_float_arguments_are_keyed_by_their_bits(device):
    @gg.captured
    def scale_by(x, factor):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, factor, N)

    plus, minus = K.f32(device, np.abs(X0) + 1), K.f32(device, np.abs(X0) + 1)
    scale_by(plus, 0.0)
    scale_by(minus, -0.0)  # equal to 0.0 but not the same value: a graph of its own
    sync(device)
    assert not np.signbit(plus.to_numpy()).any() and np.signbit(minus.to_numpy()).all()
    x = K.f32(device, X0)
    scale_by(x, float("nan"))
    scale_by(x, float("nan"))  # a NaN equals nothing, yet it is the same value: replayed
    sync(device)
    assert np.isnan(x.to_numpy()).all()
    s = stats(scale_by)
    assert (s["captures"], s["replays"]) == (3, 1)


def test_a_function_returning_a_generator_or_coroutine_is_refused_at_its_capture(device):
    async def work(x):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 2.0, N)

    x = K.f32(device, X0)
    for fn, kind in ((lambda x: work(x), "coroutine"), (lambda x: (x for _ in range(1)), "generator")):
        with pytest.raises(TypeError, match=rf"^captured: .*<lambda> returned {kind} .*the capture recorded none "
                                            r"of it\. Decorate a function that enqueues the work itself$"):
            gg.captured(fn)(x)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0)


def test_arrays_inside_a_dict_or_tuple_are_keyed_by_address(device):
    @gg.captured
    def scale_group(x, group):
        for y in group["arrays"]:
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, y, group["f"], N)

    x, a, b = K.f32(device, X0), K.f32(device, X0), K.f32(device, X0)
    group = {"arrays": (a,), "f": 2.0}
    scale_group(x, group)
    group["arrays"] = (b,)
    scale_group(x, group)  # b's address: another key, so b is scaled, not a again
    sync(device)
    np.testing.assert_array_equal(a.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(b.to_numpy(), X0 * 2)
    assert stats(scale_group)["captures"] == 2


def test_a_list_inside_itself_is_keyed_by_its_items(device):
    @gg.captured
    def scale_by_first(x, factors):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, factors[0], N)

    x = K.f32(device, X0)
    factors: list = [2.0]
    factors.append(factors)
    scale_by_first(x, factors)
    factors[0] = 3.0
    scale_by_first(x, factors)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 6)


class Factor:
    """An unhashable object of the user's own (it defines ``__eq__`` and no ``__hash__``)."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Factor) and other.value == self.value


def test_an_unhashable_object_is_keyed_by_identity_and_kept_alive_while_cached(device):
    @gg.captured
    def scale_by(x, factor):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, factor.value, N)

    x = K.f32(device, np.ones(N))
    first = Factor(2.0)
    ref = weakref.ref(first)
    scale_by(x, first)
    del first
    gc.collect()
    assert ref() is not None  # the cached key holds it: its id cannot be another object's meanwhile
    expected = 2.0
    for value in (3.0, 4.0, 5.0, 6.0):  # fresh objects, each another key (captured again, updated in place)
        scale_by(x, Factor(value))
        expected *= value
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, expected))
    assert stats(scale_by)["captures"] == 5
    scale_by.clear()
    gc.collect()
    assert ref() is None


# Memory allocated inside the function


def test_allocations_are_stable_across_replays_and_freed_by_clear(device):
    nbytes = N * 4

    @gg.captured(dynamic=("factor",))
    def scaled_copy(x, factor):
        s = gg.current_stream(x.device)
        out = s.alloc(N, np.float32)
        s.memcpy(out, x)
        s.launch(K.scale, GRID, BLOCK, out, factor, N)
        return out

    x = K.f32(device, X0)
    sync(device)
    device.trim_graph_memory()
    base = device.graph_memory()
    out = scaled_copy(x, 2.0)
    sync(device)
    ptr = out.ptr
    np.testing.assert_array_equal(out.to_numpy(), X0 * 2)
    assert device.graph_memory().used >= base.used + nbytes
    gg.current_stream(device).memcpy(x, K.f32(device, X0 * 10))
    again = scaled_copy(x, 3.0)
    sync(device)
    assert again is out and again.ptr == ptr
    np.testing.assert_array_equal(again.to_numpy(), X0 * 30)
    scaled_copy(x, 0.5)
    sync(device)
    np.testing.assert_array_equal(out.to_numpy(), X0 * 5)
    assert stats(scaled_copy)["instantiations"] == 1
    scaled_copy.clear()
    sync(device)
    device.trim_graph_memory()
    assert device.graph_memory().used == base.used
    scaled_copy(x, 1.0)  # the cache is empty: a new capture
    sync(device)
    assert stats(scaled_copy)["captures"] == 2
    scaled_copy.clear()
    sync(device)


def test_eviction_frees_the_graph_memory(device):
    @gg.captured(max_graphs=1)
    def copies(x, steps):
        s = gg.current_stream(x.device)
        out = s.alloc(N, np.float32)
        for _ in range(steps):
            s.memcpy(out, x)
        return out

    x = K.f32(device, X0)
    sync(device)
    device.trim_graph_memory()
    base = device.graph_memory()
    a = copies(x, 1)
    b = copies(x, 2)  # evicts the first graph and frees its memory
    sync(device)
    assert stats(copies)["evictions"] == 1
    np.testing.assert_array_equal(b.to_numpy(), X0)
    assert a is not b
    copies.clear()
    sync(device)
    device.trim_graph_memory()
    assert device.graph_memory().used == base.used


# Errors


def test_uncapturable_function_raises_capture_error_at_the_users_line(device):
    @gg.captured
    def bad(x):
        s = gg.current_stream(x.device)
        s.launch(K.scale, GRID, BLOCK, x, 2.0, N)
        tmp = x.device.empty(N, np.float32)  # synchronous allocation: forbidden in a global capture
        s.memcpy(tmp, x)

    x = K.f32(device, X0)
    lines, first = inspect.getsourcelines(bad.__wrapped__)
    offending = first + next(i for i, line in enumerate(lines) if "x.device.empty" in line)
    with pytest.raises(gg.CaptureError, match=r"^Device\.empty: synchronous allocations and copies are "
                                              r"forbidden while a 'global' capture runs") as info:
        bad(x)
    error = info.value
    assert error.api == "Device.empty"
    assert error.mode == "global"
    assert f'test_captured.py", line {offending}, in bad' in error.where
    assert "tmp = x.device.empty(N, np.float32)" in error.where
    assert stats(bad)["captures"] == 0 and stats(bad)["instantiations"] == 0
    with pytest.raises(gg.CaptureError):  # nothing was cached: it fails the same way again
        bad(x)
    sync(device)  # the caller's stream is usable
    np.testing.assert_array_equal(x.to_numpy(), X0)  # nothing ran


def test_captured_function_calling_another_raises_capture_error(device):
    @gg.captured
    def inner(x):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 2.0, N)

    @gg.captured
    def outer(x):
        inner(x)

    x = K.f32(device, X0)
    with pytest.raises(gg.CaptureError, match=r"^Stream\.capture: .* is already capturing; captures cannot nest on one "
                                              r"stream") as info:
        outer(x)
    assert "inner(x)" in info.value.where
    assert stats(outer)["captures"] == 0 and stats(inner)["captures"] == 0
    inner(x)  # both stay usable
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_relaxed_mode_allows_what_global_forbids(device):
    @gg.captured(mode="relaxed")
    def ok(x):
        tmp = x.device.empty(N, np.float32)
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 2.0, N)
        return tmp

    x = K.f32(device, X0)
    ok(x)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_dynamic_name_not_in_the_signature(device):
    def f(x, alpha):
        pass

    with pytest.raises(ValueError, match=r"^captured\(dynamic\): .*f has no parameter 'beta', 'gamma' "
                                         r"\(parameters: x, alpha\)$"):
        gg.captured(f, dynamic=("alpha", "beta", "gamma"))
    with pytest.raises(ValueError, match=r"has no parameter 'beta'"):
        gg.captured(dynamic="beta")(f)


def test_dynamic_names_a_star_parameter():
    def f(x, *alphas, **options):
        pass

    for name, star in (("alphas", "*"), ("options", "**")):
        with pytest.raises(ValueError, match=rf"^captured\(dynamic\): .*f's parameter {re.escape(star + name)} "
                                             r"gathers any number of arguments, .* Give the value a named parameter"):
            gg.captured(f, dynamic=("x", name))
        with pytest.raises(ValueError, match=re.escape(f"parameter {star}{name} gathers")):
            gg.captured(dynamic=name)(f)


def gen(x):
    yield x


async def coro(x):
    return x


async def agen(x):
    yield x


@pytest.mark.parametrize(("fn", "what"), [(gen, "a generator function"), (coro, "an async function"),
                                          (agen, "an async generator function")])
def test_generator_and_async_functions_are_refused(fn, what):
    message = f"captured: {fn.__qualname__} is {what}: calling it runs none of its body"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}.* Decorate a plain function that enqueues the work$"):
        gg.captured(fn)
    with pytest.raises(TypeError, match=re.escape(message)):
        gg.captured(dynamic=("x",))(fn)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "4", np.int64(0)])
def test_max_graphs_must_be_a_positive_int(bad):
    message = f"captured(max_graphs): expected an int of at least 1, got {type(bad).__name__} {bad!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        gg.captured(lambda x: None, max_graphs=bad)


def test_max_graphs_may_be_a_numpy_int(device):
    @gg.captured(max_graphs=np.int64(1))
    def scale_times(x, times):
        for _ in range(times):
            gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 2.0, N)

    x = K.f32(device, X0)
    scale_times(x, 1)
    scale_times(x, 2)  # a graph of another shape: the first one goes
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 8)
    assert stats(scale_times)["evictions"] == 1


def test_repr_names_the_function_even_a_partial(device):
    def scale_by(x, factor):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, factor, N)

    plain = gg.captured(scale_by)
    assert re.fullmatch(r"captured\(.*scale_by, 0 graphs cached\)", repr(plain))
    double = gg.captured(functools.partial(scale_by, factor=2.0))
    x = K.f32(device, X0)
    double(x)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    assert re.fullmatch(r"captured\(functools\.partial\(.*scale_by.*\), 1 graphs cached\)", repr(double))


def test_captured_needs_a_callable():
    with pytest.raises(TypeError, match=r"^captured: expected a function, got int$"):
        gg.captured(3)


# The current stream


@pytest.mark.overlap
def test_function_work_goes_to_the_current_stream(device):
    seen = []

    @gg.captured
    def double(x):
        s = gg.current_stream(x.device)
        seen.append(s.is_capturing)
        s.launch(K.scale, GRID, BLOCK, x, 2.0, N)

    gate = threading.Event()
    x = K.f32(device, X0)
    reader = device.stream()
    host = device.pinned(N, np.float32)  # page-locked: on CUDA a pageable copy waits for the blocked host function
    current = gg.current_stream(device)
    for call in range(2):  # the first call (capture then launch) and a replay
        with K.garbage_held(device):
            current.host(gate.wait, 10)
            double(x)
            try:
                reader.memcpy(host, x)
                reader.synchronize()
            finally:
                gate.set()
        np.testing.assert_array_equal(host, X0 * 2 ** call)  # still waiting behind the gate
        current.synchronize()
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2 ** (call + 1))
        gate.clear()
    assert seen == [True]  # the Python body ran once, on a capturing stream


def test_use_stream_changes_where_replays_go(device):
    axpy = make_axpy()
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    s1, s2, reader = device.stream(), device.stream(), device.stream()
    with gg.use_stream(s1) as chosen:
        assert chosen is s1 and gg.current_stream(device) is s1
        axpy(x, y, 1.0)
    s1.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), X0)
    gate = threading.Event()
    host = device.pinned(N, np.float32)  # page-locked: on CUDA a pageable copy waits for the blocked host function
    with K.garbage_held(device):
        s2.host(gate.wait, 10)
        with gg.use_stream(s2):
            axpy(x, y, 2.0)
        try:
            reader.memcpy(host, y)
            reader.synchronize()
        finally:
            gate.set()
    np.testing.assert_array_equal(host, X0)  # the replay waits on s2, behind the gate
    s2.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 3 * X0)
    assert stats(axpy)["replays"] == 1


def test_use_stream_nests_and_restores(device):
    outer, inner = device.stream(), device.stream()
    default = gg.current_stream(device)
    assert gg.current_stream(device) is default  # the thread's own stream, the same each time
    with gg.use_stream(outer):
        with gg.use_stream(inner):
            assert gg.current_stream(device) is inner
        assert gg.current_stream(device) is outer
    assert gg.current_stream(device) is default
    with pytest.raises(RuntimeError):
        with gg.use_stream(outer):
            raise RuntimeError("body")
    assert gg.current_stream(device) is default
    with pytest.raises(TypeError, match=r"^use_stream\(stream\): expected a Stream, got str$"):
        with gg.use_stream("stream"):
            pass


def test_current_stream_is_per_thread(device):
    mine = gg.current_stream(device)
    chosen = device.stream()
    found = {}

    def other():
        found["first"] = gg.current_stream(device)
        found["second"] = gg.current_stream(device)

    with gg.use_stream(chosen):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert gg.current_stream(device) is chosen
    assert found["first"] is found["second"]
    assert found["first"] is not mine and found["first"] is not chosen
    assert found["first"].device is device
    assert gg.current_stream(device) is mine


def test_captured_function_called_from_two_threads_uses_each_threads_stream(device):
    axpy = make_axpy()
    x = K.f32(device, X0)
    ys = [device.zeros(N, np.float32) for _ in range(2)]
    streams = [device.stream(), device.stream()]
    axpy(x, ys[0], 1.0)  # captured in this thread
    sync(device)
    errors = []

    def work(i):
        try:
            with gg.use_stream(streams[i]):
                axpy(x, ys[0], 1.0)
            streams[i].synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for i in range(2):  # one after the other: the replays are ordered on different streams
        t = threading.Thread(target=work, args=(i,))
        t.start()
        t.join()
    assert not errors
    np.testing.assert_array_equal(ys[0].to_numpy(), 3 * X0)
    assert stats(axpy)["replays"] == 2


# Work on a stream other than the capture's


def _other_stream_work(kind, other, x, event):
    return {"launch": lambda: other.launch(K.scale, GRID, BLOCK, x, 2.0, N),
            "memset": lambda: other.memset(x, 5.0),
            "memcpy": lambda: other.memcpy(x, x),
            "host": lambda: other.host(lambda: None),
            "record": lambda: other.record(),
            "wait": lambda: other.wait(event)}[kind]


@pytest.mark.parametrize("kind", ["launch", "memset", "memcpy", "host", "record", "wait"])
def test_work_on_a_closed_over_stream_is_refused(device, kind):
    """Work on a stream the function closed over would run once at the capture and never replay."""
    other = device.stream()
    event = other.record()  # recorded outside any capture
    other.synchronize()

    @gg.captured
    def step(x):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 3.0, N)
        _other_stream_work(kind, other, x, event)()

    x = K.f32(device, X0)
    api = f"Stream.{kind}"
    message = re.escape(f"{api}: {other!r} is not capturing, so a captured function's work on it would run "
                        f"once now and never be part of the graph; enqueue on gg.current_stream()")
    with pytest.raises(gg.CaptureError, match=message) as info:
        step(x)
    assert info.value.api == api
    assert step.stats.captures == 0 and len(step._cache) == 0
    sync(device)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0)  # nothing ran
    # Outside a captured function the same stream works as always.
    other.launch(K.scale, GRID, BLOCK, x, 2.0, N)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_a_stream_passed_as_an_argument_is_refused_too(device):
    @gg.captured
    def step(x, s):
        s.launch(K.scale, GRID, BLOCK, x, 3.0, N)

    other = device.stream()
    x = K.f32(device, X0)
    with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.launch: {other!r} is not capturing")):
        step(x, other)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0)


def test_an_executable_graph_launched_on_another_stream_is_refused(device):
    other = device.stream()
    g = gg.Graph(device)
    x = K.f32(device, X0)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    exe = g.instantiate()

    @gg.captured
    def step(x):
        exe.launch(other)

    with pytest.raises(gg.CaptureError, match=re.escape(f"GraphExec.launch: {other!r} is not capturing")):
        step(x)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0)
    exe.close()


def test_forking_a_stream_into_the_capture_is_allowed(device):
    """A stream that waits on an event of the capture joins it: its work is captured and replays."""
    other = device.stream()

    @gg.captured
    def step(x, y):
        s = gg.current_stream(x.device)
        other.wait(s.record())
        other.launch(K.scale, GRID, BLOCK, y, 2.0, N)
        s.launch(K.scale, GRID, BLOCK, x, 3.0, N)
        s.wait(other.record())

    x, y = K.f32(device, X0), K.f32(device, X0)
    for _ in range(2):
        step(x, y)
    sync(device)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 9)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 4)
    assert step.stats.captures == 1 and step.stats.replays == 1


def test_other_threads_are_not_affected(device):
    """Only the capturing thread's work is refused: another thread may use any stream meanwhile."""
    other = device.stream()
    y = K.f32(device, X0)
    done = []

    @gg.captured
    def step(x):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, 3.0, N)
        worker = threading.Thread(target=lambda: (other.launch(K.scale, GRID, BLOCK, y, 2.0, N), done.append(1)))
        worker.start()
        worker.join()

    x = K.f32(device, X0)
    step(x)
    sync(device)
    other.synchronize()
    assert done == [1]
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 2)
