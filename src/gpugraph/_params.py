"""Param: a kernel argument whose value can change after the graph is built, patched at the next launch.

A Param used as a kernel argument while building or capturing a graph records itself in the node. Each
executable graph made from that graph registers the nodes that use it (its ``ParamUses``); setting ``value``
marks the Param pending in those registries, and the executable graph's next ``launch`` patches exactly
those nodes first (the combined approach of NVIDIA's blog post "Constructing CUDA Graphs with Dynamic
Parameters", with no bookkeeping left to the user).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import numpy as np

from ._memory import Array
from ._nodes import NodeKind
from ._scalars import bounds, check_dtype, is_number, to_c

# Set once any Param exists, so stream launches check for Params only in programs that use them.
in_use = False


def _refuse(expression: str) -> Callable[..., NoReturn]:
    """A method of Param that refuses ``expression`` ("{p} + {o}": ``{p}`` the Param, ``{o}`` the other operand)."""
    def refuse(self: Param, other: Any = None, *rest: Any) -> NoReturn:
        shown = expression.format(p=repr(self), o=repr(other)[:60])
        raise TypeError(f"{shown}: {self!r} is a gpugraph Param, a placeholder for a kernel argument that is patched "
                        f"at each launch (a dynamic argument of @captured is one while the function is captured), "
                        f"so Python cannot compute with it: it can only be passed to kernels as an argument. Do "
                        f"the computation on the device, in the kernel that takes it, or make the argument "
                        f"non-dynamic (each new value is then captured anew); outside a capture, `param.value` "
                        f"is the current value")
    return refuse


class Param:
    """A dynamic kernel argument: a scalar of a fixed dtype, or an Array to point at.

    Args:
        value: The first value: a scalar (int, float, NumPy scalar) or an Array.
        dtype: The scalar's type; by default the C type of the kernel parameter the first accepted call
            passes it to (``Kernel.convert_args`` says when a refused call leaves it untyped). An Array Param's
            is its Array's (None, or that dtype).

    Values follow the rules of kernel arguments (gpugraph._scalars): a Python or NumPy bool, integer or
    float that the dtype holds. An Array Param takes Arrays of the dtype, device and size of the first.

    A Param has no truth value: ``if param:`` inside a captured function would be decided once, at the
    capture, so it raises ``TypeError``; compare ``param.value`` for the current value. Nor does it take part
    in arithmetic, ordering or conversions (``param + 1``, ``param < 2``, ``int(param)``: ``TypeError``): its
    value is patched at each launch, so only a kernel can compute with it. ``==`` and hashing are identity's
    (a Param is a key of the registries that patch it).

    Raises:
        TypeError: If ``value`` is neither a real scalar nor an Array, or ``dtype`` is not a C number type (or,
            for an Array, not its dtype).
        ValueError: If ``value`` does not fit in ``dtype``.
    """

    __slots__ = ("_value", "_dtype", "_users", "_is_array", "_fast", "_low", "_high", "__weakref__")

    def __init__(self, value: Any, dtype: Any = None) -> None:
        global in_use
        in_use = True
        # The ParamUses of executable graphs with nodes using it, by id: weak references, iterated directly
        # (a hot path).
        self._users: dict[int, weakref.ref] = {}
        self._is_array = type(value) is Array
        # The values ``value`` takes without more checks: Python numbers of type _fast in [_low, _high].
        self._fast: Any = float  # Any: comparing with a type would narrow `new` to object
        self._low, self._high = np.inf, -np.inf  # none yet
        if self._is_array:
            if dtype is not None and check_dtype(dtype, "Param") != value.dtype:
                raise TypeError(f"Param: an Array Param's type is its Array's, {value.dtype}, got dtype="
                                f"{np.dtype(dtype)}; leave dtype out (or pass an Array of {np.dtype(dtype)})")
            self._dtype = value.dtype
            self._value = value
            return
        if not is_number(value):
            raise TypeError(f"Param: expected a real scalar (bool, int or float, Python or NumPy) or an Array, "
                            f"got {type(value).__name__}")
        self._value, self._dtype = value, None
        if dtype is not None:
            dtype = check_dtype(dtype, "Param")
            self._set(to_c(value, dtype, str(dtype), "Param"), dtype)

    def _set(self, value: Any, dtype: np.dtype) -> None:
        """Fix the scalar type (and the Python numbers the value setter takes at once: ints in range for an
        integer type, floats in range for a floating one)."""
        self._value, self._dtype = value, dtype
        integral, self._low, self._high = bounds(dtype)
        self._fast = int if integral else float

    @property
    def dtype(self) -> np.dtype | None:
        """The value's type: a scalar's C type (None until the first accepted call types it), or the Array's dtype.
        Read-only: the nodes and executable graphs that take the Param were checked against it."""
        return self._dtype

    @property
    def is_array(self) -> bool:
        """Whether the Param points at an Array (a pointer parameter) rather than holding a scalar."""
        return self._is_array

    def _use_in(self, uses: ParamUses) -> None:
        """Register the registry of an executable graph whose nodes take this Param."""
        key, users = id(uses), self._users
        users[key] = weakref.ref(uses, lambda _: users.pop(key, None))

    @property
    def value(self) -> Any:
        """The current value; setting it patches every executable graph using it at its next launch."""
        return self._value

    @value.setter
    def value(self, new: Any) -> None:
        """Not thread-safe against a launch of the same executable graph in another thread."""
        if self._is_array:
            if type(new) is not Array:
                raise TypeError(f"{self!r}.value: an Array Param takes an Array, got {type(new).__name__}")
            old = self._value
            if new.dtype != self._dtype or new.device is not old.device:
                raise ValueError(f"{self!r}.value: expected an Array of {self._dtype} on {old.device}, "
                                 f"got one of {new.dtype} on {new.device}")
            if new.nbytes != old.nbytes:  # (kernels given the Param may read and write that much of it)
                raise ValueError(f"{self!r}.value: a pointer Param takes Arrays of the size of the one it was made "
                                 f"with, which the kernels given it may read and write whole: {old.size} elements "
                                 f"({old.nbytes} bytes), got {new.size} ({new.nbytes} bytes); pass an Array of "
                                 f"{old.size} elements (of any shape), or make a new Param of the new Array and "
                                 f"build or capture a new graph with it")
            self._value = new
        elif type(new) is self._fast and self._low <= new <= self._high:
            self._value = self._dtype.type(new)  # the common case, cheaply: a Python number the type holds
        else:
            if not is_number(new):
                raise TypeError(f"{self!r}.value: expected a real scalar, got {type(new).__name__}")
            if self._dtype is not None:
                new = to_c(new, self._dtype, str(self._dtype), f"{self!r}.value")
            self._value = new
        for ref in list(self._users.values()):
            uses = ref()
            if uses is not None:
                uses.pending.add(self)

    def changed_by(self, new: object) -> bool:
        """Whether setting ``value`` to ``new`` would change it (an Array other than the one held; a number whose
        value differs from it, as NumPy compares them)."""
        old = self._value
        if new is old:
            return False
        if self._is_array or type(new) is Array:
            return True
        if isinstance(new, (int, float)) and self._low <= new <= self._high:  # (the common case: no cast overflows)
            return bool(new != old)
        with np.errstate(over="ignore", invalid="ignore"):  # (a value past the type's range: the setter says so)
            return bool(new != old)

    def check(self, dtype: np.dtype, where: str) -> None:
        """Refuse this scalar Param for a kernel parameter of ``dtype`` (``where``) that it cannot be passed to: a
        typed Param of another type, an untyped one whose value ``dtype`` does not hold. Changes nothing: ``bind``
        fixes an untyped Param's type once the whole call that passes it has been accepted."""
        if self._dtype is None:
            to_c(self._value, dtype, str(dtype), f"{where} given {self!r}")
        elif self._dtype != dtype:
            raise TypeError(f"{where}: the Param holds {self._dtype}, the parameter takes {dtype}")

    def bind(self, dtype: np.dtype) -> None:
        """Give an untyped Param the type ``dtype`` of the kernel parameter an accepted call passed it to (``check``
        refused the calls it does not fit); a typed Param keeps its own."""
        if self._dtype is None:
            dtype = np.dtype(dtype)
            self._set(to_c(self._value, dtype, str(dtype), repr(self)), dtype)

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} has no truth value: in a captured function `if param:` would be decided "
                        f"once, at the capture, and frozen into the graph; compare `param.value` for the "
                        f"current value")

    def __repr__(self) -> str:
        shown = f"Array of {self._dtype}" if self.is_array else repr(self._value)
        return f"Param({shown})"

    # Arithmetic, ordering and conversions: refused (see _refuse). Not == (identity, as Params are dict keys).
    __add__, __radd__ = _refuse("{p} + {o}"), _refuse("{o} + {p}")
    __sub__, __rsub__ = _refuse("{p} - {o}"), _refuse("{o} - {p}")
    __mul__, __rmul__ = _refuse("{p} * {o}"), _refuse("{o} * {p}")
    __matmul__, __rmatmul__ = _refuse("{p} @ {o}"), _refuse("{o} @ {p}")
    __truediv__, __rtruediv__ = _refuse("{p} / {o}"), _refuse("{o} / {p}")
    __floordiv__, __rfloordiv__ = _refuse("{p} // {o}"), _refuse("{o} // {p}")
    __mod__, __rmod__ = _refuse("{p} % {o}"), _refuse("{o} % {p}")
    __divmod__, __rdivmod__ = _refuse("divmod({p}, {o})"), _refuse("divmod({o}, {p})")
    __pow__, __rpow__ = _refuse("{p} ** {o}"), _refuse("{o} ** {p}")
    __lshift__, __rlshift__ = _refuse("{p} << {o}"), _refuse("{o} << {p}")
    __rshift__, __rrshift__ = _refuse("{p} >> {o}"), _refuse("{o} >> {p}")
    __and__, __rand__ = _refuse("{p} & {o}"), _refuse("{o} & {p}")
    __or__, __ror__ = _refuse("{p} | {o}"), _refuse("{o} | {p}")
    __xor__, __rxor__ = _refuse("{p} ^ {o}"), _refuse("{o} ^ {p}")
    __neg__, __pos__, __invert__, __abs__ = _refuse("-{p}"), _refuse("+{p}"), _refuse("~{p}"), _refuse("abs({p})")
    __lt__, __le__ = _refuse("{p} < {o}"), _refuse("{p} <= {o}")
    __gt__, __ge__ = _refuse("{p} > {o}"), _refuse("{p} >= {o}")
    __int__, __float__, __complex__ = _refuse("int({p})"), _refuse("float({p})"), _refuse("complex({p})")
    __index__ = _refuse("{p} as an index")
    __round__, __trunc__ = _refuse("round({p})"), _refuse("math.trunc({p})")
    __floor__, __ceil__ = _refuse("math.floor({p})"), _refuse("math.ceil({p})")


def resolve(arg: Any) -> Any:
    """A kernel argument with any Param replaced by its current value."""
    return arg._value if type(arg) is Param else arg


class ParamUses:
    """Which kernel nodes of one executable graph take which Params (nodes by position in creation order),
    the Params whose value changed since the graph last patched them, and each node's patch, prepared once
    and kept until the node changes."""

    __slots__ = ("pending", "_nodes", "_records", "_patchers", "__weakref__")

    def __init__(self) -> None:
        self.pending: set[Param] = set()  # Params whose value changed since the last patch
        self._nodes: dict[Param, set[int]] = {}  # Param -> positions of the nodes taking it
        self._records: dict[int, Any] = {}  # position -> the kernel record of a node taking Params
        self._patchers: dict[int, Callable[[], None]] = {}  # position -> prepared patch

    def __bool__(self) -> bool:
        """Whether any node takes a Param."""
        return bool(self._nodes)

    def positions(self) -> Iterable[int]:
        """The positions of the nodes taking Params."""
        return self._records.keys()

    def adopt(self, found: dict[int, Any]) -> None:
        """Register the nodes ``found`` (position -> kernel record) as the ones taking Params, replacing any
        registered before; values set since those nodes were made count as changes."""
        self._nodes.clear()
        self._records.clear()
        self._patchers.clear()
        for i, record in found.items():
            self.note(i, record, fresh=True)
        self.pending = set(self._nodes)

    def note(self, index: int, record: Any, fresh: bool = False) -> None:
        """Register the Params the node at ``index`` takes in ``record`` (a setter gave it new parameters,
        unless ``fresh``: whatever it took before is forgotten)."""
        if not fresh:
            self._records.pop(index, None)
            self._patchers.pop(index, None)
            for nodes in self._nodes.values():
                nodes.discard(index)
        if record.kind is NodeKind.KERNEL:
            for arg in record.args:
                if type(arg) is Param:
                    self._nodes.setdefault(arg, set()).add(index)
                    self._records[index] = record
                    arg._use_in(self)

    def patch(self, prepare: Callable[[int, Any], Callable[[], None]]) -> None:
        """Patch the nodes whose Params changed (a hot path); ``prepare(position, record)`` makes a node's patch
        the first time. Whatever stops it, the Params left unpatched stay pending."""
        pending, self.pending = self.pending, set()
        indices: set[int] = set()
        for param in pending:
            indices.update(self._nodes.get(param, ()))
        patchers = self._patchers
        try:
            for i in indices:
                patch = patchers.get(i)
                if patch is None:
                    patch = patchers[i] = prepare(i, self._records[i])
                patch()
        except BaseException:
            self.pending |= pending  # patched again at the next launch
            raise
