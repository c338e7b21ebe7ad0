"""C type names as NumPy dtypes, for the signature reader (gpugraph._signature): the fixed-width, library and CUDA
handle type names, the combinations of C's arithmetic keywords, and typedef/using names resolved through a source's
declarations (gpugraph._c_source).
"""

from __future__ import annotations

import numpy as np

from ._c_source import QUALIFIERS, SPECIFIERS, Source, is_word, matching

# Fixed-width and library type names that are not C keywords (LP64: 64-bit long, size_t and pointers).
_NAMED = {
    "int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16,
    "int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64,
    "size_t": np.uint64, "ptrdiff_t": np.int64, "ssize_t": np.int64, "intptr_t": np.int64,
    "uintptr_t": np.uint64, "__half": np.float16, "half": np.float16,
    "cudaGraphConditionalHandle": np.uint64, "CUgraphConditionalHandle": np.uint64,
    "cudaGraphExec_t": np.uint64, "CUgraphExec": np.uint64,  # (a handle: a GraphExec is passed for it)
}
# CUDA's handle types a kernel takes: what CUDA names them, whatever a source's own typedef makes of them (one for
# NVRTC, which has no CUDA header, under #ifdef __CUDACC_RTC__: a pointer to an opaque struct).
EXEC_TYPES = frozenset({"cudaGraphExec_t", "CUgraphExec"})  # (a kernel takes a GraphExec for these alone)
_HANDLES = EXEC_TYPES | {"cudaGraphConditionalHandle", "CUgraphConditionalHandle"}
VOID = "void"


def strip_attributes(tokens: list[str]) -> list[str]:
    """``tokens`` without ``[[...]]``, ``__attribute__((...))``, ``alignas(...)`` and ``__align__(...)``."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "[" and i + 1 < len(tokens) and tokens[i + 1] == "[":
            i = matching(tokens, i, "[", "]") + 1
        elif tokens[i] in ("__attribute__", "alignas", "__align__", "__declspec") and i + 1 < len(tokens) \
                and tokens[i + 1] == "(":
            i = matching(tokens, i + 1) + 1
        else:
            out.append(tokens[i])
            i += 1
    return out


def join_scopes(tokens: list[str]) -> list[str]:
    """``std`` ``::`` ``size_t`` as one token ``std::size_t``."""
    out: list[str] = []
    for token in tokens:
        if out and (token == "::" or out[-1].endswith("::")):
            out[-1] += token
        else:
            out.append(token)
    return out


def _builtin(words: list[str]) -> np.dtype | str | None:
    """The dtype of a combination of arithmetic keywords ("unsigned long int"), "void", or None."""
    count = {w: words.count(w) for w in set(words)}
    signed, unsigned = count.pop("signed", 0), count.pop("unsigned", 0)
    if signed + unsigned > 1:
        return None
    if set(count) in ({"float"}, {"double"}, {"bool"}, {"void"}) and len(words) == 1:
        return VOID if words == ["void"] else np.dtype({"float": np.float32, "double": np.float64,
                                                        "bool": np.bool_}[words[0]])
    if set(count) == {"char"} and count["char"] == 1:
        return np.dtype(np.uint8 if unsigned else np.int8)
    longs, shorts, ints = count.pop("long", 0), count.pop("short", 0), count.pop("int", 0)
    if count or ints > 1 or longs > 2 or (shorts and longs) or shorts > 1:
        return None  # e.g. "long double", "short long"
    bits = 16 if shorts else 64 if longs else 32
    return np.dtype(f"{'u' if unsigned else 'i'}{bits // 8}")


def base_type(words: list[str], source: Source, seen: frozenset[str]) -> tuple[np.dtype | str | None, int]:
    """The type named by ``words`` (qualifiers removed) and the pointer levels a typedef adds."""
    if words and all(w in SPECIFIERS for w in words):
        return _builtin(words), 0
    if len(words) != 1:
        return None, 0
    word = words[0]
    if word in _HANDLES:
        return np.dtype(_NAMED[word]), 0
    if word[0] == "?" or word in source.unknown or word in seen:
        return None, 0
    if word in source.typedefs:
        body = source.typedefs[word]
        if body is None:
            return None, 0
        tokens = [t for t in join_scopes(strip_attributes(body)) if t not in QUALIFIERS]
        if any(not (is_word(t) or t == "*") for t in tokens):
            return None, 0
        dtype, depth = base_type([t for t in tokens if t != "*"], source, seen | {word})
        return dtype, depth + tokens.count("*")
    plain = word[5:] if word.startswith("std::") else word[2:] if word.startswith("::") else word
    named = _NAMED.get(plain)
    if named is None or (plain != word and not plain.endswith("_t")):  # std::int32_t, not std::half
        return None, 0
    return np.dtype(named), 0

