"""A Vulkan timeline semaphore exported as a file descriptor: the real external semaphore that the CUDA tests of
external semaphore nodes import (the Vulkan loader's C API through ctypes; nothing else of Vulkan is needed).

``TimelineSemaphore()`` raises ``VulkanUnavailable`` saying why where the machine has no Vulkan loader, no Vulkan
device or no exportable timeline semaphores, so that a test can skip with the reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

# Structure types and flags (vulkan_core.h)
_APPLICATION_INFO, _INSTANCE_CREATE_INFO, _DEVICE_QUEUE_CREATE_INFO, _DEVICE_CREATE_INFO = 0, 1, 2, 3
_SEMAPHORE_CREATE_INFO = 9
_TIMELINE_FEATURES = 1000207000
_SEMAPHORE_TYPE_CREATE_INFO, _SEMAPHORE_WAIT_INFO, _SEMAPHORE_SIGNAL_INFO = 1000207002, 1000207004, 1000207005
_EXPORT_SEMAPHORE_CREATE_INFO, _SEMAPHORE_GET_FD_INFO = 1000077000, 1000079001
_OPAQUE_FD = 0x1  # VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT
_TIMELINE = 1  # VK_SEMAPHORE_TYPE_TIMELINE
_API_1_2 = (1 << 22) | (2 << 12)
_SUCCESS, _TIMEOUT = 0, 2

_p, _u32, _u64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64


class _Struct(ctypes.Structure):
    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)


class _AppInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("pApplicationName", ctypes.c_char_p), ("applicationVersion", _u32),
                ("pEngineName", ctypes.c_char_p), ("engineVersion", _u32), ("apiVersion", _u32)]


class _InstanceInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("flags", _u32), ("pApplicationInfo", ctypes.POINTER(_AppInfo)),
                ("enabledLayerCount", _u32), ("ppEnabledLayerNames", _p), ("enabledExtensionCount", _u32),
                ("ppEnabledExtensionNames", _p)]


class _QueueInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("flags", _u32), ("queueFamilyIndex", _u32), ("queueCount", _u32),
                ("pQueuePriorities", ctypes.POINTER(ctypes.c_float))]


class _TimelineFeatures(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("timelineSemaphore", _u32)]


class _DeviceInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("flags", _u32), ("queueCreateInfoCount", _u32),
                ("pQueueCreateInfos", ctypes.POINTER(_QueueInfo)), ("enabledLayerCount", _u32),
                ("ppEnabledLayerNames", _p), ("enabledExtensionCount", _u32),
                ("ppEnabledExtensionNames", ctypes.POINTER(ctypes.c_char_p)), ("pEnabledFeatures", _p)]


class _SemaphoreInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("flags", _u32)]


class _TypeInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("semaphoreType", _u32), ("initialValue", _u64)]


class _ExportInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("handleTypes", _u32)]


class _GetFdInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("semaphore", _u64), ("handleType", _u32)]


class _SignalInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("semaphore", _u64), ("value", _u64)]


class _WaitInfo(_Struct):
    _fields_ = [("sType", _u32), ("pNext", _p), ("flags", _u32), ("semaphoreCount", _u32),
                ("pSemaphores", ctypes.POINTER(_u64)), ("pValues", ctypes.POINTER(_u64))]


class VulkanUnavailable(RuntimeError):
    """No Vulkan timeline semaphore can be made on this machine (the message says why)."""


def _loader() -> ctypes.CDLL:
    name = ctypes.util.find_library("vulkan") or "libvulkan.so.1"
    try:
        return ctypes.CDLL(name)
    except OSError as exc:
        raise VulkanUnavailable(f"no Vulkan loader ({name}: {exc})") from None


class TimelineSemaphore:
    """A Vulkan timeline semaphore on the first Vulkan device, exportable as an opaque file descriptor; the host
    signals it, reads its value and waits on it through Vulkan."""

    def __init__(self, initial: int = 0, *, timeline: bool = True) -> None:
        vk = self._vk = _loader()
        vk.vkCreateInstance.argtypes = (ctypes.POINTER(_InstanceInfo), _p, ctypes.POINTER(_p))
        app = _AppInfo(sType=_APPLICATION_INFO, pApplicationName=b"gpugraph-tests", apiVersion=_API_1_2)
        instance = _p()
        self._check(vk.vkCreateInstance(ctypes.byref(_InstanceInfo(sType=_INSTANCE_CREATE_INFO,
                                                                   pApplicationInfo=ctypes.pointer(app))),
                                        None, ctypes.byref(instance)), "vkCreateInstance")
        self._instance = instance
        count = _u32()
        vk.vkEnumeratePhysicalDevices.argtypes = (_p, ctypes.POINTER(_u32), _p)
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        if count.value == 0:
            self.close()
            raise VulkanUnavailable("the Vulkan loader finds no device (no ICD for this GPU?)")
        physical = (_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), physical)
        priority = ctypes.c_float(1.0)
        queue = _QueueInfo(sType=_DEVICE_QUEUE_CREATE_INFO, queueFamilyIndex=0, queueCount=1,
                           pQueuePriorities=ctypes.pointer(priority))
        features = _TimelineFeatures(sType=_TIMELINE_FEATURES, timelineSemaphore=1)
        extensions = (ctypes.c_char_p * 2)(b"VK_KHR_external_semaphore", b"VK_KHR_external_semaphore_fd")
        device = _p()
        vk.vkCreateDevice.argtypes = (_p, ctypes.POINTER(_DeviceInfo), _p, ctypes.POINTER(_p))
        self._check(vk.vkCreateDevice(physical[0], ctypes.byref(_DeviceInfo(
            sType=_DEVICE_CREATE_INFO, pNext=ctypes.cast(ctypes.pointer(features), _p), queueCreateInfoCount=1,
            pQueueCreateInfos=ctypes.pointer(queue), enabledExtensionCount=2, ppEnabledExtensionNames=extensions)),
            None, ctypes.byref(device)), "vkCreateDevice")
        self._device = device
        kind = _TypeInfo(sType=_SEMAPHORE_TYPE_CREATE_INFO, semaphoreType=_TIMELINE, initialValue=initial)
        export = _ExportInfo(sType=_EXPORT_SEMAPHORE_CREATE_INFO,
                             pNext=ctypes.cast(ctypes.pointer(kind), _p) if timeline else None,
                             handleTypes=_OPAQUE_FD)
        semaphore = _u64()
        vk.vkCreateSemaphore.argtypes = (_p, ctypes.POINTER(_SemaphoreInfo), _p, ctypes.POINTER(_u64))
        self._check(vk.vkCreateSemaphore(device, ctypes.byref(_SemaphoreInfo(
            sType=_SEMAPHORE_CREATE_INFO, pNext=ctypes.cast(ctypes.pointer(export), _p))), None,
            ctypes.byref(semaphore)), "vkCreateSemaphore")
        self._semaphore = semaphore.value
        vk.vkGetDeviceProcAddr.restype = _p
        vk.vkGetDeviceProcAddr.argtypes = (_p, ctypes.c_char_p)
        address = vk.vkGetDeviceProcAddr(device, b"vkGetSemaphoreFdKHR")
        if not address:
            self.close()
            raise VulkanUnavailable("the Vulkan device has no vkGetSemaphoreFdKHR")
        self._get_fd = ctypes.CFUNCTYPE(ctypes.c_int, _p, ctypes.POINTER(_GetFdInfo), ctypes.POINTER(ctypes.c_int))(
            address)
        vk.vkSignalSemaphore.argtypes = (_p, ctypes.POINTER(_SignalInfo))
        vk.vkGetSemaphoreCounterValue.argtypes = (_p, _u64, ctypes.POINTER(_u64))
        vk.vkWaitSemaphores.argtypes = (_p, ctypes.POINTER(_WaitInfo), _u64)

    def _check(self, result: int, what: str) -> None:
        if result != _SUCCESS:
            self.close()
            raise VulkanUnavailable(f"{what} failed: VkResult {result}")

    def export_fd(self) -> int:
        """A new file descriptor of the semaphore (whoever imports it owns it: CUDA closes it on import)."""
        fd = ctypes.c_int(-1)
        result = self._get_fd(self._device, ctypes.byref(_GetFdInfo(
            sType=_SEMAPHORE_GET_FD_INFO, semaphore=self._semaphore, handleType=_OPAQUE_FD)), ctypes.byref(fd))
        if result != _SUCCESS:
            raise RuntimeError(f"vkGetSemaphoreFdKHR failed: VkResult {result}")
        return fd.value

    @property
    def value(self) -> int:
        """The semaphore's counter now."""
        out = _u64()
        result = self._vk.vkGetSemaphoreCounterValue(self._device, self._semaphore, ctypes.byref(out))
        if result != _SUCCESS:
            raise RuntimeError(f"vkGetSemaphoreCounterValue failed: VkResult {result}")
        return out.value

    def signal(self, value: int) -> None:
        """Set the counter to ``value`` from the host (it must be greater than the counter now)."""
        result = self._vk.vkSignalSemaphore(self._device, ctypes.byref(_SignalInfo(
            sType=_SEMAPHORE_SIGNAL_INFO, semaphore=self._semaphore, value=value)))
        if result != _SUCCESS:
            raise RuntimeError(f"vkSignalSemaphore failed: VkResult {result}")

    def wait(self, value: int, timeout: float) -> bool:
        """Whether the counter reached ``value`` within ``timeout`` seconds."""
        semaphores, values = (_u64 * 1)(self._semaphore), (_u64 * 1)(value)
        result = self._vk.vkWaitSemaphores(self._device, ctypes.byref(_WaitInfo(
            sType=_SEMAPHORE_WAIT_INFO, semaphoreCount=1, pSemaphores=semaphores, pValues=values)),
            int(timeout * 1e9))
        if result not in (_SUCCESS, _TIMEOUT):
            raise RuntimeError(f"vkWaitSemaphores failed: VkResult {result}")
        return result == _SUCCESS

    def close(self) -> None:
        """Destroy the semaphore, the device and the instance (imports of it stay valid in CUDA)."""
        vk = self._vk
        if getattr(self, "_semaphore", None):
            vk.vkDestroySemaphore.argtypes = (_p, _u64, _p)
            vk.vkDestroySemaphore(self._device, self._semaphore, None)
            self._semaphore = 0
        if getattr(self, "_device", None):
            vk.vkDeviceWaitIdle.argtypes = (_p,)
            vk.vkDeviceWaitIdle(self._device)
            vk.vkDestroyDevice.argtypes = (_p, _p)
            vk.vkDestroyDevice(self._device, None)
            self._device = None
        if getattr(self, "_instance", None):
            vk.vkDestroyInstance.argtypes = (_p, _p)
            vk.vkDestroyInstance(self._instance, None)
            self._instance = None


def available() -> str | None:
    """None where a timeline semaphore can be made and exported here, else why not."""
    try:
        TimelineSemaphore().close()
    except VulkanUnavailable as exc:
        return str(exc)
    return None
