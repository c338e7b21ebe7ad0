"""Graphs launched from kernels: what a kernel takes for a ``cudaGraphExec_t`` parameter.

gpugraph._exec's GraphExec is a KernelLaunchable: kernels (gpugraph._kernel_args, below executable graphs) tell one
here and ask it for their argument, so they import nothing above them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._scalars import describe


class KernelLaunchable:
    """An executable graph a kernel can launch: the base of gpugraph.GraphExec, its only subclass."""

    __slots__ = ()

    def _kernel_argument(self, device: object, where: str) -> ExecArgument:
        """The argument a kernel of ``device`` (a Device, compared by identity: the type sits above kernels) takes
        for this graph (``where`` names the argument in errors)."""
        raise NotImplementedError


class ExecArgument(np.uint64):
    """A GraphExec as a kernel's ``cudaGraphExec_t`` argument: the number the backend's kernels take for it, holding
    the GraphExec (``exec``), which cannot be closed or collected while a node or a pending launch holds this."""

    exec: KernelLaunchable


def exec_argument(value: Any, device: object, where: str) -> ExecArgument:
    """The argument a kernel of ``device`` takes, for a ``cudaGraphExec_t`` parameter, for ``value``: a GraphExec
    instantiated with device_launch (the kernel launches it with cudaGraphLaunch), or such an argument again."""
    exe = value.exec if type(value) is ExecArgument else value
    if not isinstance(exe, KernelLaunchable):
        raise TypeError(f"{where}: expects a GraphExec instantiated with device_launch=True, got {describe(value)} "
                        f"(a kernel that launches another number faults)")
    return exe._kernel_argument(device, where)
