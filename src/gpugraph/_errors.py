"""The exception hierarchy: every error gpugraph raises on purpose derives from GpuGraphError."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if sys.version_info < (3, 11):  # (the backport, a dependency there: pyproject.toml)
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup  # type: ignore[import-not-found,unused-ignore]
if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class GpuGraphError(Exception):
    """Root of gpugraph's own errors."""


class BackendError(GpuGraphError):
    """A backend call failed.

    Attributes:
        backend: Backend name, e.g. ``"cuda"``.
        api: The failing call, e.g. ``"cuGraphInstantiate"``.
        code: The error's name, the same on every backend, e.g. ``"CUDA_ERROR_LAUNCH_FAILED"`` (another library's
            error where the failure is its own, e.g. NCCL's).
        number: The driver's number for it, where a driver answered (e.g. 719), else None.
    """

    def __init__(self, backend: str, api: str, code: object, detail: str = "", number: int | None = None) -> None:
        self.backend = backend
        self.api = api
        self.code = code
        self.number = number
        message = f"{backend}: {api} failed: {code}" + ("" if number is None else f" ({number})")
        super().__init__(f"{message}: {detail}" if detail else message)


class BackendUnavailableError(GpuGraphError):
    """The requested backend cannot be used here; the message says what is missing and how to get it."""


class CaptureError(GpuGraphError):
    """A stream capture was invalidated or ended badly.

    Attributes:
        api: The first offending call, e.g. ``"Stream.synchronize"``.
        stream: The stream the capture ran on.
        mode: The capture mode.
        where: The Python traceback (a string) of the line that made the first offending call.
    """

    def __init__(self, message: str, *, api: str = "", stream: object = None,
                 mode: str = "", where: str = "") -> None:
        self.api = api
        self.stream = stream
        self.mode = mode
        self.where = where
        super().__init__(f"{message}\nThe offending call was made here:\n{where}" if where else message)


class GraphError(GpuGraphError):
    """A graph was built or used against the rules (cycle, foreign node, bad free, closed graph...)."""


class GraphUpdateError(GraphError):
    """A whole-graph update was refused; the executable graph is unchanged.

    Attributes:
        reason: The rule that was broken, e.g. ``"topology changed"``.
        node: The offending node of the new graph, or None when the rule concerns the whole graph.
    """

    def __init__(self, reason: str, node: object = None, detail: str = "") -> None:
        self.reason = reason
        self.node = node
        where = f" at {node!r}" if node is not None else ""
        super().__init__(f"update refused{where}: {reason}" + (f" ({detail})" if detail else ""))


class GraphInstantiateError(GraphError):
    """Instantiating a graph was refused; no executable graph was made.

    Attributes:
        reason: The rule that was broken, in the words of cudaGraphInstantiateResult, e.g.
            ``"node operation not supported"``.
        node: The offending Node (cudaGraphInstantiateParams' errNode_out), or None when the rule concerns the
            whole graph.
    """

    def __init__(self, reason: str, node: object = None, detail: str = "") -> None:
        self.reason = reason
        self.node = node
        self.detail = detail
        where = f" at {node!r}" if node is not None else ""
        super().__init__(f"instantiate refused{where}: {reason}" + (f" ({detail})" if detail else ""))


class HazardError(GraphError):
    """A graph checked for missing edges (``instantiate(check_hazards=True)``, ``$GPUGRAPH_CHECK_HAZARDS=1``) has
    hazards (``Graph.hazards``): nodes touching the same memory, one writing, with no edge ordering them, or graph
    memory outside its allocation's lifetime. No executable graph was made.

    Attributes:
        hazards: Every ``Hazard`` found (``Graph.hazards()``); the message names the first.
    """

    def __init__(self, message: str, hazards: Sequence[object]) -> None:
        self.hazards = list(hazards)
        super().__init__(message)


class KernelCompileError(GpuGraphError):
    """Kernel source failed to compile; ``log`` holds the compiler's output."""

    def __init__(self, kernel_name: str, log: str) -> None:
        self.log = log
        super().__init__(f"kernel {kernel_name!r} failed to compile:\n{log}")

    @classmethod
    def no_kernel(cls, kernel_name: str, log: str = "") -> KernelCompileError:
        """The error for a name that names no kernel of the source, on every backend."""
        return cls(kernel_name, f"the compiled module has no kernel {kernel_name!r}: no `__global__ void "
                                f"{kernel_name}(...)` in the source (a template kernel is named with its arguments, "
                                f"as in 'axpb<float>')" + (f"\n{log}" if log else ""))


class CollectiveError(GpuGraphError):
    """A collective could not be made or did not complete (a timeout, an abort, ranks that disagree).

    Attributes:
        rank: The rank whose call or part failed (-1 for none).
        collective: The collective, e.g. ``"all_reduce"``.
    """

    def __init__(self, message: str, *, rank: int, collective: str) -> None:
        super().__init__(message)
        self.rank, self.collective = rank, collective


class StreamErrors(ExceptionGroup, GpuGraphError):
    """A device synchronize found errors on several streams (host functions or CPU kernels that raised): an
    ExceptionGroup of them, so ``except* ZeroDivisionError`` catches the streams' ZeroDivisionErrors.

    Attributes:
        errors: The first error of each stream since its last synchronize, in the order the streams were
            created; each is reported here only (the streams no longer keep them). The same as
            ``exceptions``, as a list.
    """

    errors: list[Exception]

    # ExceptionGroup takes (message, exceptions) in both __new__ and __init__; this group makes its message.
    def __new__(cls, errors: Sequence[Exception]) -> Self:
        return super().__new__(cls, _message(errors), errors)

    def __init__(self, errors: Sequence[Exception]) -> None:
        super().__init__(_message(errors), errors)
        self.errors = list(errors)

    def derive(self, excs: Sequence[Exception]) -> StreamErrors:  # type: ignore[override,unused-ignore]
        """The group ``except*`` and ``split`` make of some of the errors: a StreamErrors too."""
        return StreamErrors(excs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StreamErrors, (self.errors,))


def _message(errors: Sequence[BaseException]) -> str:
    listed = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
    if len(errors) == 1:  # (a part of a group that except* or split made)
        return f"1 stream raised an error since its last synchronize: {listed}"
    return f"{len(errors)} streams raised errors since their last synchronize: {listed}"


def raise_stream_errors(errors: list[BaseException]) -> None:
    """What a device synchronize raises for the errors it took from its streams: the error itself when there
    is one, ``StreamErrors`` holding all of them when there are several, or a ``BaseExceptionGroup`` of them
    when one is no Exception (a host function's KeyboardInterrupt or SystemExit: Python lets no
    ExceptionGroup hold one)."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        exceptions = [e for e in errors if isinstance(e, Exception)]
        if len(exceptions) < len(errors):
            raise BaseExceptionGroup(_message(errors), errors)
        raise StreamErrors(exceptions)
