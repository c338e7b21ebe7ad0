"""Plain mode's stand-in for Cython's ``cython`` module, where Cython is not installed: the names gpugraph's core
modules (``_core.MODULES``) use of it, each doing nothing, as Cython's own pure-Python ``cython`` module does.

A core module is one source read two ways. Compiled, Cython reads its ``import cython`` and these names itself
(their C meaning, with the types its ``.pxd`` declares); plain, with Cython installed, the import finds Cython's
own ``cython`` module; plain without it, each core module imports this one instead::

    try:
        import cython  # (the Cython compiler reads this exact import)
    except ModuleNotFoundError:
        from . import _cython as cython
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

compiled = False  # True only inside a compiled module (where Cython answers it at compile time)


def _unchanged(target: T) -> T:
    return target


# Decorators: a C class (its fields in the module's .pxd), a C function, a function callable from C and Python,
# inlining, a class or method no subclass overrides. Plain: the class or function as written.
cclass = cfunc = ccall = inline = final = _unchanged


def locals(**types: object) -> Callable[[T], T]:  # (Cython's name: the C types of a function's local variables)
    return _unchanged


def declare(type: object = None, value: T | None = None, **fields: object) -> T | None:
    """A C variable of ``type``; plain: ``value`` itself."""
    return value


def cast(type: object, value: T, typecheck: bool = False) -> T:
    """``value`` as C type ``type``; plain: ``value`` itself."""
    return value


# C types, as cython.declare and cython.cast name them: plain, the Python objects they hold.
bint = bool
Py_ssize_t = int
double = float
