"""Reading a kernel's parameter list from its CUDA/HIP C++ source, so Python scalars pack as the C types.

The reader sees what the compiler sees of the source: comments and string/character literals are
removed, object-like macros (from ``#define`` and the ``-D`` options) are expanded, and typedef/using
names defined once at file scope are resolved. Whatever it cannot settle from the source alone (a macro
or typedef defined under ``#if``, twice differently or inside a scope, a template parameter, a type from
a header it does not read) is an unknown type, never a guessed one; a macro that may change the number of
parameters (a function-like macro in the list, one expanding to commas) makes the whole signature
unknown. GPU backends also compare the result with the compiled kernel's parameters when it loads
(``check_compiled``).

The source as the reader sees it comes from gpugraph._c_source, the dtypes of C type names from gpugraph._c_types;
this module finds kernels and reads their parameters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._c_source import (
    CLOSE,
    ELSE,
    LEXEME,
    OPEN,
    QUALIFIERS,
    SPECIFIERS,
    TOKEN,
    UNSAFE,
    Source,
    c_text,
    is_word,
    matching,
    neutral,
    read_source,
)
from ._c_types import EXEC_TYPES, VOID, base_type, join_scopes, strip_attributes

# An Array passed for a pointer to pointers holds device addresses.
ADDRESS_DTYPE = np.dtype(np.uint64)


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as declared in C++.

    Attributes:
        name: The parameter's name ("" when unnamed).
        ctype: The declared type without qualifiers, e.g. ``"double*"`` or ``"size_t"``.
        pointer: Whether the parameter is a pointer (takes an Array).
        dtype: The scalar type, or the dtype of the Array a pointer takes (uint64, device addresses, for a
            pointer to pointers); None when gpugraph cannot tell (templates, structs, void*, unresolved names).
        depth: The number of pointer levels (0 for a scalar).
        const: Whether a pointer's Array is read-only to the kernel: what it points at is declared ``const``
            (``const float* x``, ``float const* x``, ``float* const* p``); False where a typedef hides it.
    """

    name: str
    ctype: str
    pointer: bool
    dtype: np.dtype | None
    depth: int = 0
    const: bool = field(default=False, compare=False)  # (no part of the type a launch packs)

    def __str__(self) -> str:
        return f"{self.ctype} {self.name}".strip()

    @property
    def graph_exec(self) -> bool:
        """Whether the parameter takes a graph the kernel launches (a ``cudaGraphExec_t``: a GraphExec is passed)."""
        return not self.pointer and not EXEC_TYPES.isdisjoint(self.ctype.split())

    @property
    def size(self) -> int | None:
        """The bytes the parameter takes in the kernel's parameter block, or None when unknown."""
        if self.pointer:
            return 8
        return self.dtype.itemsize if self.dtype is not None else None


# Parameters


def _split_top_level(tokens: list[str]) -> list[list[str]]:
    """The parameters of a list: split at commas outside brackets and template argument lists."""
    parts: list[list[str]] = [[]]
    depth = angles = 0
    for i, token in enumerate(tokens):
        if token in ("(", "[", "{"):
            depth += 1
        elif token in (")", "]", "}"):
            depth -= 1
        elif token == "<" and i and is_word(tokens[i - 1]) and tokens[i + 1:i + 2] != ["<"]:
            angles += 1  # Vec<float, 3>, not a << shift
        elif token == ">" and angles:
            angles -= 1
        elif token == "," and depth == 0 and angles == 0:
            parts.append([])
            continue
        parts[-1].append(token)
    return [p for p in parts if p]


def _parse_param(tokens: list[str], source: Source) -> KernelParam:
    tokens = strip_attributes(tokens)
    if "=" in tokens:  # a default argument
        tokens = tokens[:tokens.index("=")]
    array = "[" in tokens
    if array:
        tokens = tokens[:tokens.index("[")]
    if "(" in tokens:  # a function pointer or a parenthesised declarator: a pointer of unknown kind at best
        shown = [t.lstrip("?") for t in tokens if t not in QUALIFIERS]
        inner = [t for t in tokens[tokens.index("(") + 1:] if is_word(t) and t not in QUALIFIERS]
        return KernelParam(inner[0] if inner else "", c_text(shown), "*" in tokens, None, tokens.count("*"))
    const = _points_to_const(tokens, array)
    tokens = join_scopes([t for t in tokens if t not in QUALIFIERS])
    stars = tokens.count("*") + array
    words = [t for t in tokens if t != "*"]
    name = ""
    if tokens and tokens[-1] != "*" and len(words) > 1 and not all(w in SPECIFIERS for w in words):
        name = words.pop().lstrip("?")
    if any(not (is_word(w) or w[0] == "?") for w in words):
        dtype, extra = None, 0  # a template argument list, a stray token: not a type the reader knows
    else:
        dtype, extra = base_type(words, source, frozenset())
    depth = stars + extra
    ctype = c_text([w.lstrip("?") for w in words]) + "*" * stars
    if depth >= 2:
        dtype = ADDRESS_DTYPE
    elif dtype == VOID:
        dtype = None
    return KernelParam(name, ctype, depth > 0, dtype, depth, const and depth > 0)  # type: ignore[arg-type]


def _points_to_const(tokens: list[str], array: bool) -> bool:
    """Whether the memory a parameter points at is declared ``const``: a ``const`` among the qualifiers of what its
    outermost pointer (or array, ``array``) points at, those between its last two ``*`` (``float* const* p``), or
    before its one ``*`` (``const float* x``, ``float const* x``), or after its last ``*`` for an array (``float* const
    x[]``: the elements)."""
    stars = [i for i, token in enumerate(tokens) if token == "*"]
    if array:
        pointee = tokens[stars[-1] + 1:] if stars else tokens
    elif not stars:
        return False  # (a pointer through a typedef: what it points at is the typedef's)
    else:
        pointee = tokens[stars[-2] + 1:stars[-1]] if len(stars) > 1 else tokens[:stars[-1]]
    return "const" in pointee


def _kernel_lists(tokens: list[str], name: str) -> list[tuple[int, list[str]]]:
    """The position of each ``__global__`` declaring ``name``, with its parameter-list tokens. A qualified name
    (``ns::name``) is looked for by its last part, in any namespace."""
    name = unqualified(name)
    lists = []
    for i, token in enumerate(tokens):
        if token != "__global__":
            continue
        j = i + 1
        while j < len(tokens) and tokens[j] not in (";", "{", "}"):
            if tokens[j] == name and j + 1 < len(tokens) and tokens[j + 1] == "(":
                end = matching(tokens, j + 1)
                lists.append((i, tokens[j + 2:end]))
                break
            j = matching(tokens, j) + 1 if tokens[j] == "(" else j + 1
    return lists


def _template_parameters(tokens: list[str], at: int) -> list[str] | None:
    """The names of the template parameters of the declaration whose ``__global__`` is at ``at``: [] for a
    function that is not a template, None when a parameter has no name."""
    j = at - 1
    while j >= 0 and tokens[j] not in (";", "{", "}"):
        if tokens[j] == "template" and tokens[j + 1:j + 2] == ["<"]:
            end = matching(tokens, j + 1, "<", ">")
            names = []
            for part in _split_top_level(tokens[j + 2:end]):
                part = part[:part.index("=")] if "=" in part else part
                if len(part) < 2 or not is_word(part[-1]):
                    return None
                names.append(part[-1])
            return names
        j -= 1
    return []


def unqualified(name: str) -> str:
    """``name`` without the namespaces that qualify it (``ns::axpb`` -> ``axpb``)."""
    return name.rpartition("::")[2].strip()


def split_name(name: str) -> tuple[str, list[list[str]] | None]:
    """A kernel's name, or a name expression such as ``axpb<double, 4>`` (as NVRTC takes one): the function's
    name and the tokens of each template argument (None for a plain name)."""
    if "<" not in name:
        return name, None
    base, _, rest = name.partition("<")
    tokens = TOKEN.findall(rest.rpartition(">")[0])
    return base.strip(), _split_top_level(tokens)


def is_template(source: str, name: str, options: Sequence[str] = ()) -> bool:
    """Whether the ``__global__`` function ``name`` of ``source`` is declared as a template."""
    tokens = read_source(source, tuple(options)).tokens
    return any(_template_parameters(tokens, at) != [] for at, _ in _kernel_lists(tokens, name))


def parse_signature(source: str, name: str, options: Sequence[str] = ()) -> tuple[KernelParam, ...] | None:
    """Return the parameters of ``__global__`` function ``name`` in ``source``, or None if gpugraph cannot
    tell them: not found, declared twice differently, or a macro that may change the parameter count. ``name``
    may be a name expression (``axpb<double>``): the template's parameters are then read with its arguments."""
    read = read_source(source, tuple(options))
    name, arguments = split_name(name)
    found: list[tuple[KernelParam, ...]] = []
    for at, inner in _kernel_lists(read.tokens, name):
        if arguments is not None:  # a template's instance: its type parameters replaced by the arguments
            parameters = _template_parameters(read.tokens, at)
            if not parameters or len(arguments) > len(parameters):
                return None
            given = dict(zip(parameters, arguments))
            inner = [t for token in inner for t in given.get(token, [token])]
        if any(t.startswith(UNSAFE) or t == "..." or t in (OPEN, ELSE, CLOSE) for t in inner):
            return None
        if inner in ([], ["void"]):
            found.append(())
        else:
            found.append(tuple(_parse_param(p, read) for p in _split_top_level(inner)))
    if not found:
        return None
    types = {tuple((p.pointer, p.depth, p.dtype) for p in params) for params in found}
    if len(types) > 1:
        return None  # overloads, or declarations under #if that disagree: which one compiles is unknown
    return next((params for params in found if all(p.name for p in params)), found[0])


def check_compiled(signature: tuple[KernelParam, ...] | None, sizes: Sequence[int] | None,
                   given: bool = False) -> str | None:
    """Why the parameters read from the source (``given``: from the signature the user gave) do not match the
    compiled kernel's ``sizes`` (the bytes of each parameter, as the driver reports them), or None if they match or
    either is unknown."""
    if signature is None or sizes is None:
        return None
    origin = "the signature given" if given else "the source"
    if len(signature) != len(sizes):
        read = ", ".join(map(str, signature)) or "none"
        count = f"{len(signature)} parameter{'s' * (len(signature) != 1)}"
        cause = ("give the kernel's parameters as it declares them (signature=)" if given else
                 "a header or macro gpugraph does not read changes the parameter list")
        return (f"gpugraph refuses to load it: {origin} reads as {count} ({read}), but the compiled kernel "
                f"takes {len(sizes)} (of {', '.join(map(str, sizes)) or 'no'} bytes); {cause}")
    for index, (param, size) in enumerate(zip(signature, sizes)):
        if param.size is not None and param.size != size:
            what = "a pointer" if param.pointer else str(param.dtype)
            cause = ("give its C type as the kernel declares it (signature=)" if given else
                     "a header or macro gpugraph does not read changes its type")
            return (f"gpugraph refuses to load it: parameter {index} ({param}) reads from {origin} as {what} "
                    f"({param.size} bytes), but the compiled kernel takes {size} bytes; {cause}")
    return None


def kernel_names(source: str, options: Sequence[str] = (), templates: bool = False) -> list[str]:
    """The names of the ``__global__`` functions declared in ``source`` that are not templates (comments and
    literals ignored), qualified by the namespaces they are declared in: the kernels a module holds without a
    name expression. With ``templates``, the templates too, each as its name and ``<...>``."""
    tokens = read_source(source, tuple(options)).tokens
    names = set()
    spaces: list[tuple[str, int]] = []  # the namespaces open at this token: (its name, "" if none; brace depth)
    depth = 0
    for i, token in enumerate(tokens):
        if token == "{":
            depth += 1
            j = i - 1  # a namespace's brace: `namespace [a[::b]] {`
            while j >= 0 and (is_word(tokens[j]) or tokens[j] == "::") and tokens[j] != "namespace":
                j -= 1
            if j >= 0 and tokens[j] == "namespace":
                spaces.append(("".join(tokens[j + 1:i]), depth))
        elif token == "}":
            if spaces and spaces[-1][1] == depth:
                spaces.pop()
            depth -= 1
        if token != "__global__":
            continue
        template = _template_parameters(tokens, i) != []
        if template and not templates:
            continue
        j, name = i + 1, None
        while j < len(tokens) and tokens[j] not in (";", "{", "}"):
            if tokens[j] == "(":  # the name is the word before the last group: __launch_bounds__(..) comes first
                name = tokens[j - 1] if is_word(tokens[j - 1]) and tokens[j - 1] not in QUALIFIERS else None
                j = matching(tokens, j) + 1
            else:
                j += 1
        if name is not None:
            names.add("::".join([space for space, _ in spaces if space] + [name]) + ("<...>" if template else ""))
    return sorted(names)


# Headers that declare no ``__global__`` function: a source that includes no others declares each of its kernels
# in its own text (the toolkits' runtime, half-precision and cooperative-groups headers, HIP's, and the C ones).
_KERNEL_FREE_HEADERS = frozenset({
    "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "cuda_fp16.h", "cuda_bf16.h",
    "cooperative_groups.h", "hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/hip_fp16.h", "hip/hip_bf16.h",
    "assert.h", "cassert", "float.h", "cfloat", "limits.h", "climits", "math.h", "cmath", "stddef.h", "cstddef",
    "stdint.h", "cstdint", "stdio.h", "cstdio"})
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\w*(.*)$", re.M)
_HEADER = re.compile(r"\s*(?:<([^<>\n]+)>|\"([^\"\n]+)\")")
_WORD = re.compile(r"[A-Za-z_]\w*")


@functools.lru_cache(maxsize=64)
def _spelled(source: str) -> tuple[frozenset[str], bool, bool]:
    """The identifiers ``source`` spells outside comments and literals; whether it may make a name it does not
    spell (``##`` pastes one, ``\\u`` spells one as universal characters, a header it includes may declare one);
    and whether it includes a header at all (an include path given may put another header under its name)."""
    text = source.replace("\\\r\n", "").replace("\\\n", "")  # spliced lines first, as in the compiler
    # (Directives found in comments or literals too: each one found only makes the answer less certain.)
    headers = [_HEADER.match(rest) for rest in _INCLUDE.findall(text)]
    code = LEXEME.sub(neutral, text)
    hidden = ("##" in code or "\\u" in code or "\\U" in code
              or any(h is None or (h[1] or h[2]).strip() not in _KERNEL_FREE_HEADERS for h in headers))
    return frozenset(_WORD.findall(code)), hidden, bool(headers)


def absent_kernel(source: str, name: str, options: Sequence[str] = ()) -> list[str] | None:
    """The kernels ``source`` declares (as ``kernel_names`` lists them, templates too), when it certainly declares
    no ``__global__`` function ``name`` (a name expression's template, in any namespace); None when it may.

    Certain means that the source never spells the name (comments and literals aside), and that nothing can make
    it otherwise: no ``##`` pasting, no universal character names, no header included but those that declare no
    kernel (and no include path that could put another header under their names), no option naming it or
    including a header. A mangled name (``_Z...``) is never refused here: CUDA's module knows a kernel by it.
    """
    base = unqualified(split_name(name)[0])
    if base.startswith("_Z"):
        return None
    words, hidden, includes = _spelled(source)
    if hidden or base in words:
        return None
    for option in options:
        flag = option.strip().lstrip("-")
        if base in _WORD.findall(option):
            return None
        if flag.startswith(("I", "include-path")):
            if includes:
                return None
        elif flag.startswith(("include", "pre-include")):  # (a header included before the source)
            return None
    return kernel_names(source, options, templates=True)


# The name a parameter list is read under, as the declaration of a kernel (signature=)
_PLACEHOLDER = "gpugraph_signature_"


def parse_declared(signature: str, what: str) -> tuple[tuple[KernelParam, ...], str | None]:
    """The parameters of a kernel's C signature as a user gives it for a kernel that comes without source, and the
    kernel's name where the signature is its whole declaration.

    ``signature`` is a parameter list (``"float* y, const float* x, float a, int n"``, ``""`` or ``"void"`` for none)
    or the kernel's declaration (``"__global__ void axpy(float* y, ...)"``; ``extern "C"``, ``template <...>`` and a
    body may be there, and ``__global__`` may be left out). It is read as a source holding that declaration.

    Raises:
        TypeError: If ``signature`` is not a str.
        ValueError: If it is no parameter list or declaration the reader can read; ``what`` names the call.
    """
    if not isinstance(signature, str):
        raise TypeError(f"{what}: signature must be a str holding the kernel's C parameters, such as "
                        f"'float* y, const float* x, float a, int n', or its declaration, got {signature!r}")
    text = signature.strip().removesuffix(";")
    tokens = read_source(text, ()).tokens
    opening = tokens.index("(") if "(" in tokens else -1
    name: str | None = None
    if opening >= 0 and "," not in tokens[:opening]:  # a declaration (a list's commas come before any group)
        if "__global__" not in tokens:
            start = matching(tokens, 1, "<", ">") + 1 if tokens[:2] == ["template", "<"] else 0
            tokens = [*tokens[:start], "__global__", *tokens[start:]]
        source = c_text(tokens)
        names = kernel_names(source, templates=True)
        name = names[0].removesuffix("<...>") if len(names) == 1 else None
        read = None if name is None else parse_signature(source, unqualified(name))
    elif re.search(r"^\s*,|,\s*,|,\s*$", text):
        raise ValueError(f"{what}: signature {signature!r} has an empty parameter (two commas in a row, or one at an "
                         f"end)")
    else:
        read = parse_signature(f"__global__ void {_PLACEHOLDER}({text});", _PLACEHOLDER)
    if read is None:
        raise ValueError(f"{what}: gpugraph cannot read the kernel's parameters from signature {signature!r}: give "
                         f"them as a C parameter list, such as 'float* y, const float* x, float a, int n', or as the "
                         f"kernel's declaration, such as '__global__ void axpy(float* y, const float* x, float a, "
                         f"int n)' (no '...' parameter)")
    return read, name


def is_device_function(source: str, name: str, options: Sequence[str] = ()) -> bool:
    """Whether ``source`` declares ``name`` as a ``__device__`` function and never as a ``__global__`` one: a
    function a GPU cannot launch (NVRTC's module has no kernel of that name), so no backend launches it."""
    tokens = read_source(source, tuple(options)).tokens
    if _kernel_lists(tokens, name):
        return False
    name = unqualified(name)
    for i, token in enumerate(tokens):
        if token == name and i + 1 < len(tokens) and tokens[i + 1] == "(":
            j = i - 1
            while j >= 0 and tokens[j] not in (";", "{", "}"):
                if tokens[j] == "__device__":
                    return True
                j -= 1
    return False


def type_of(words: list[str], source: str, options: Sequence[str] = ()) -> np.dtype | None:
    """The dtype of the number type that ``words`` name in ``source`` (``["unsigned", "int"]``, a typedef's name),
    or None where it is no number type the reader knows."""
    dtype, depth = base_type(join_scopes(words), read_source(source, tuple(options)), frozenset())
    return dtype if isinstance(dtype, np.dtype) and depth == 0 else None
