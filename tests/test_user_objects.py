"""User objects (hipUserObjectCreate / cudaUserObjectCreate and the graph calls that hold them): a destructor that runs
once the caller's and every graph's references are released, graphs' references kept by their clones and executable
graphs until those go."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


class Destroyed:
    """A destructor that notes when it ran (the driver runs it on a thread of its own, a little later)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self) -> None:
        self.event.set()

    def ran(self, within: float = 5.0) -> bool:
        gc.collect()
        return self.event.wait(within)

    def not_yet(self) -> bool:
        gc.collect()
        return not self.event.wait(0.2)


def test_the_destructor_runs_when_the_callers_last_reference_goes(device):
    destroyed = Destroyed()
    obj = device.user_object(destroyed, count=2)
    assert obj.references == 2
    obj.release()
    assert destroyed.not_yet()
    obj.retain(3)
    obj.release(4)
    assert destroyed.ran() and obj.references == 0


def test_a_collected_object_releases_the_callers_references(device):
    destroyed = Destroyed()
    obj = device.user_object(destroyed, count=3)
    del obj
    assert destroyed.ran()


def test_a_graph_and_its_executable_graphs_and_clones_keep_the_object(device, stream):
    destroyed = Destroyed()
    obj = device.user_object(destroyed)
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    g.add_kernel(K.fill, 1, 4, x, 2, 4)
    g.retain_user_object(obj, move=True)
    assert obj.references == 0
    copy = g.clone()
    exe = g.instantiate()
    del g
    assert destroyed.not_yet()
    del copy
    assert destroyed.not_yet()
    K.launch_and_wait(exe, stream)
    assert x.to_numpy().tolist() == [2] * 4
    exe.close()
    del exe
    assert destroyed.ran()


def test_a_graph_releases_its_references(device):
    destroyed = Destroyed()
    obj = device.user_object(destroyed)
    g = gg.Graph(device)
    g.retain_user_object(obj, count=2)  # new references: the caller keeps its own
    g.release_user_object(obj)
    obj.release()
    assert destroyed.not_yet()
    g.release_user_object(obj)
    assert destroyed.ran()
    with pytest.raises(gg.GraphError, match=r"release_user_object\(UserObject\(.*\), 1\): the graph holds 0"):
        g.release_user_object(obj)


def test_an_update_swaps_an_executable_graphs_references(device, stream):
    first, second = Destroyed(), Destroyed()
    a, b = device.user_object(first), device.user_object(second)
    x = device.zeros(4, np.int32)
    g, h = gg.Graph(device), gg.Graph(device)
    g.add_kernel(K.fill, 1, 4, x, 1, 4)
    h.add_kernel(K.fill, 1, 4, x, 2, 4)
    g.retain_user_object(a, move=True)
    h.retain_user_object(b, move=True)
    exe = g.instantiate()
    exe.update(h)
    g.release_user_object(a)  # (the executable graph keeps g itself alive: its references go explicitly)
    h.release_user_object(b)
    assert first.ran()  # the executable graph let go of the references of the graph it was made from
    assert second.not_yet()
    K.launch_and_wait(exe, stream)
    assert x.to_numpy().tolist() == [2] * 4
    exe.close()
    del exe
    assert second.ran()


def test_user_object_errors(device):
    destroyed = Destroyed()
    obj = device.user_object(destroyed)
    with pytest.raises(TypeError, match=r"user_object\(destroy\): expected a callable, got int"):
        device.user_object(3)
    with pytest.raises(TypeError, match=r"user_object\(count\): expected a positive int, got str"):
        device.user_object(lambda: None, "2")
    with pytest.raises(ValueError, match=r"user_object\(count\): expected a positive int, got 0"):
        device.user_object(print, count=0)
    device.user_object(lambda: None, count=np.int64(2)).release(2)  # a NumPy int counts: 2 references to release
    with pytest.raises(gg.GraphError, match=r"UserObject.release\(2\): the caller holds 1 reference"):
        obj.release(2)
    g = gg.Graph(device)
    with pytest.raises(gg.GraphError, match=r"retain_user_object\(move=True\): the caller holds 1 reference.* not 2"):
        g.retain_user_object(obj, count=2, move=True)
    with pytest.raises(TypeError, match=r"retain_user_object\(obj\): expected a UserObject .*got str"):
        g.retain_user_object("obj")
    with pytest.raises(TypeError, match=r"retain_user_object\(move\): expected a bool"):
        g.retain_user_object(obj, move=1)
    with pytest.raises(TypeError, match=r"\(count\): expected a positive int, got bool True$"):
        g.retain_user_object(obj, count=True)
    for call, error, got in ((obj.retain, ValueError, 0), (obj.retain, TypeError, True), (obj.release, ValueError, 0)):
        with pytest.raises(error, match=rf"^UserObject\.{call.__name__}\(count\): expected a positive int, got "
                                        rf"{'bool True' if got is True else got}$"):
            call(got)
    with pytest.raises(TypeError, match=r"^retain_user_object\(count\): expected a positive int, got float 1\.0$"):
        g.retain_user_object(obj, count=1.0)
    with pytest.raises(ValueError, match=r"^release_user_object\(count\): expected a positive int, got -1$"):
        g.release_user_object(obj, -1)
    with pytest.raises(gg.GraphError, match=r"release_user_object\(UserObject\(.*references=1\), 1\): the graph "
                                            r"holds 0 reference"):
        g.release_user_object(obj, 1)
    with pytest.raises(TypeError, match=r"release_user_object\(obj\): expected a UserObject, got str"):
        g.release_user_object("obj")
    g.retain_user_object(obj, move=True)
    with pytest.raises(gg.GraphError, match="the caller holds no reference"):
        obj.retain()
    with pytest.raises(gg.GraphError, match="the caller holds no reference"):
        gg.Graph(device).retain_user_object(obj)
    assert destroyed.not_yet()
    del g
    assert destroyed.ran()


def test_a_destructor_that_raises_is_reported_not_lost(device, capfd):
    def destroy():
        raise RuntimeError("cleanup failed")

    obj = device.user_object(destroy)
    obj.release()
    deadline = time.monotonic() + 5
    err = ""
    while "cleanup failed" not in err and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert "Exception ignored in the destroy of a UserObject" in err and "RuntimeError: cleanup failed" in err


def test_a_graph_refuses_a_user_object_of_another_backend():
    backends = gg.available_backends()
    gpus = [name for name in backends if name != "cpu"]
    if "cpu" not in backends or not gpus:
        pytest.skip(f"needs the CPU backend and a GPU backend side by side; available here: {', '.join(backends)}")
    for mine, theirs in (("cpu", gpus[0]), (gpus[0], "cpu")):
        destroyed = Destroyed()
        obj = gg.Device(theirs).user_object(destroyed)
        g = gg.Graph(gg.Device(mine))
        for move in (False, True):
            with pytest.raises(gg.GraphError, match=rf"^retain_user_object: UserObject\({theirs}, references=1\) is "
                                                    rf"of another backend than Graph\(device={mine}:0, nodes=0\)$"):
                g.retain_user_object(obj, move=move)
        assert obj.references == 1  # (the move handed the caller's reference to no one)
        with pytest.raises(gg.GraphError, match=r"the graph holds 0 reference"):
            g.release_user_object(obj)  # (the graph took none)
        assert destroyed.not_yet()
        obj.release()
        assert destroyed.ran()
