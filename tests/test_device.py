"""Device selection: specs, the GPUGRAPH_BACKEND variable, one object per device, unavailable backends."""

from __future__ import annotations

import gc
import pickle
import weakref

import pytest

import gpugraph as gg
from gpugraph.backends.cpu import configured_devices


def test_available_backends_always_lists_cpu_last_resort():
    names = gg.available_backends()
    assert "cpu" in names
    assert names[-1] == "cpu"
    assert len(set(names)) == len(names)


def test_device_attributes(device):
    assert device.backend in gg.available_backends()
    assert device.index == 0
    assert isinstance(device.name, str) and device.name
    assert str(device) == f"{device.backend}:0"


def test_same_spec_gives_the_same_object(device):
    assert gg.Device(device.backend) is device
    assert gg.Device(f"{device.backend}:0") is device


def test_cpu_device_is_a_singleton():
    assert gg.Device("cpu") is gg.Device("cpu")
    assert gg.Device("cpu") is gg.Device("cpu:0")


def test_device_pickles_to_the_same_object(device):
    assert pickle.loads(pickle.dumps(device)) is device


def test_default_device_follows_env_var(monkeypatch):
    monkeypatch.setenv("GPUGRAPH_BACKEND", "cpu")
    assert gg.Device() is gg.Device("cpu")


def test_default_device_without_env_var_is_best_available(monkeypatch):
    monkeypatch.delenv("GPUGRAPH_BACKEND", raising=False)
    assert gg.Device().backend == gg.available_backends()[0]


def test_env_var_naming_unavailable_backend_raises(monkeypatch):
    monkeypatch.setenv("GPUGRAPH_BACKEND", "hip")
    with pytest.raises(gg.BackendUnavailableError, match="hip"):
        gg.Device()


def test_env_var_malformed_raises_value_error(monkeypatch):
    monkeypatch.setenv("GPUGRAPH_BACKEND", "tpu")
    with pytest.raises(ValueError, match="tpu"):
        gg.Device()


def test_synchronize_with_no_work(device):
    device.synchronize()


@pytest.mark.parametrize("spec", ["tpu", "cpu:x", "cpu:-1", "", "cuda:1:2", "CPU"])
def test_bad_spec_raises_value_error(spec):
    with pytest.raises(ValueError, match="Device"):
        gg.Device(spec)


@pytest.mark.parametrize("spec", [0, 1.5, ["cpu"], b"cpu"])
def test_non_str_spec_raises_type_error(spec):
    with pytest.raises(TypeError, match="spec must be a str"):
        gg.Device(spec)


def test_hip_is_unavailable_and_says_what_is_missing():
    with pytest.raises(gg.BackendUnavailableError, match="hip-python"):
        gg.Device("hip")
    with pytest.raises(gg.BackendUnavailableError, match="hip"):
        gg.Device("hip:0")


def test_a_refused_backend_keeps_no_caller_alive():
    """Each refusal is a new error: one shared error object would keep the frames (and their locals) of every
    call it was raised through alive, such as the producer of gg.from_dlpack (seen on the H200)."""
    class Local:
        pass

    def ask() -> weakref.ref:
        local = Local()
        with pytest.raises(gg.BackendUnavailableError):
            gg.Device("hip")
        return weakref.ref(local)

    refs = [ask() for _ in range(3)]
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_cpu_device_index_out_of_range():
    count = configured_devices()
    with pytest.raises(gg.BackendUnavailableError, match=rf"cpu:{count}.*{count} cpu device"):
        gg.Device(f"cpu:{count}")


def test_cuda_unavailable_names_what_is_missing():
    if "cuda" in gg.available_backends():
        pytest.skip("the cuda backend is available here")
    with pytest.raises(gg.BackendUnavailableError, match="cuda") as info:
        gg.Device("cuda")
    # The message says what to install or what is missing, not just "unavailable" (with cuda-bindings present
    # and no driver, as in CI: the driver).
    assert any(what in str(info.value) for what in ("cuda-bindings", "NVIDIA driver", "not implemented"))


def test_backend_unavailable_error_is_a_gpugraph_error():
    assert issubclass(gg.BackendUnavailableError, gg.GpuGraphError)


def test_backend_fixture_names_the_device(backend, device):
    assert backend == device.backend
