"""Reading a kernel's parameter list from its CUDA/HIP C++ source, so Python scalars pack as the C types.

The reader sees what the compiler sees of the source: comments and string/character literals are
removed, object-like macros (from ``#define`` and the ``-D`` options) are expanded, and typedef/using
names defined once at file scope are resolved. Whatever it cannot settle from the source alone (a macro
or typedef defined under ``#if``, twice differently or inside a scope, a template parameter, a type from
a header it does not read) is an unknown type, never a guessed one; a macro that may change the number of
parameters (a function-like macro in the list, one expanding to commas) makes the whole signature
unknown. GPU backends also compare the result with the compiled kernel's parameters when it loads
(``check_compiled``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
# The C keywords that combine into a builtin arithmetic type ("long unsigned int", "signed char", ...).
_SPECIFIERS = {"signed", "unsigned", "short", "long", "int", "char", "float", "double", "bool", "void"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "class", "union", "enum",
               "typename", "__grid_constant__", "register", "&", "&&"}
# An Array passed for a pointer to pointers holds device addresses.
ADDRESS_DTYPE = np.dtype(np.uint64)

_VOID = "void"
_UNKNOWN = "?"  # a marker token prefix: an identifier the reader cannot resolve ("?NAME")
_UNSAFE = "??"  # ... one that may change the parameter count ("??NAME")
_OPEN, _ELSE, _CLOSE = "\x01", "\x02", "\x03"  # #if.., #else/#elif, #endif left in the token stream


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
    """

    name: str
    ctype: str
    pointer: bool
    dtype: np.dtype | None
    depth: int = 0

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


# Lexing: the source as the compiler's tokens, without comments or literals

_NUMBER = r"\.?\d(?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*"  # a pp-number, digit separators included
_LEXEME = re.compile(rf"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{{0,16}})\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*")
  | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')
  | (?P<number>{_NUMBER})
  | (?P<word>[A-Za-z_]\w*)
""", re.S | re.X)
_TOKEN = re.compile(rf"[A-Za-z_]\w*|{_NUMBER}|\.\.\.|::|&&|\"\"|\S")
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w*)(.*)")
_DEFINE = re.compile(r"\s*([A-Za-z_]\w*)(\()?(.*)", re.S)


def _neutral(match: re.Match) -> str:
    """A comment as a space and a literal as an empty one, so neither can look like code."""
    kind = match.lastgroup
    if kind == "comment":
        return " "
    if kind in ("raw", "string"):
        return '""'
    if kind == "char":
        return "0"
    return match.group()


@dataclass
class _Source:
    """A source's tokens (macros expanded) and what its typedefs and template parameters say."""

    tokens: list[str]
    typedefs: dict[str, list[str] | None]  # name -> its type's tokens, or None: not one clear definition
    unknown: set[str]  # names that must not be resolved (template parameters, scoped or complex typedefs)


def _macro_definitions(text: str, options: Sequence[str]) -> tuple[dict[str, list[str] | None], set[str], str]:
    """Macros defined by ``options`` and the directives of ``text``, and ``text`` with its directives
    replaced by conditional markers.

    A macro maps to its body's tokens, or to None when no single definition holds everywhere: defined
    under #if, twice differently, or #undef'd. Function-like macros, and unsettled ones with a comma in
    some definition, are returned as a set of names: either may change the number of parameters.
    """
    macros: dict[str, list[str] | None] = {}
    functions: set[str] = set()
    commas: set[str] = set()

    def define(definition: str, conditional: bool) -> None:
        match = _DEFINE.match(definition)
        if match is None:
            return
        name, paren, body = match.groups()
        if paren:
            functions.add(name)
            return
        tokens = _TOKEN.findall(body)
        if "," in tokens:
            commas.add(name)
        if conditional or macros.get(name, tokens) != tokens:
            macros[name] = None
        else:
            macros[name] = tokens

    def undefine(name: str) -> None:
        if name:
            macros[name] = None

    options = [o.strip() for o in options]
    i = 0
    while i < len(options):
        match = re.fullmatch(r"(-D|--define-macro=?|-U|--undefine-macro=?)(.*)", options[i], re.S)
        i += 1
        if match is None:
            continue
        flag, value = match.groups()
        if not value and i < len(options):  # "-D", "NAME=1": the value is the next option
            value, i = options[i], i + 1
        if flag.startswith(("-D", "--define")):
            name, equals, body = value.partition("=")
            define(f"{name} {body if equals else '1'}", False)
        else:
            undefine(value)

    # Each open #if: its state ("dead": a branch of `#if 0` the compiler skips, which the reader drops too; "live":
    # the branch of `#if 1`, after which the others are dead; "open": a condition the reader does not evaluate,
    # marked in the tokens) and whether it was marked open.
    lines: list[str] = []
    regions: list[list] = []
    depth = 0
    for line in text.split("\n"):
        match = _DIRECTIVE.match(line)
        dead = any(state == "dead" for state, _ in regions)
        if match is None:
            lines.append("" if dead else line)
            continue
        directive, rest = match.groups()
        literal = rest.split("//")[0].strip() if directive in ("if", "elif") else None
        if directive in ("if", "ifdef", "ifndef"):
            state = {"0": "dead", "false": "dead", "1": "live", "true": "live"}.get(literal or "", "open")
            marked = state == "open" and not dead
            regions.append([state, marked])
            depth += marked
            lines.append(_OPEN if marked else "")
        elif directive in ("elif", "else", "elifdef", "elifndef") and regions:
            region = regions[-1]
            if region[0] == "live":
                region[0] = "dead"
            elif region[0] == "dead" and not region[1]:  # (after `#if 0`: this branch is the compiler's choice)
                region[0] = "live" if directive == "else" else "open"
            outer_dead = any(state == "dead" for state, _ in regions[:-1])
            if region[0] == "open" and not outer_dead:
                lines.append(_ELSE if region[1] else _OPEN)
                depth += not region[1]
                region[1] = True
            else:
                lines.append("")
        elif directive == "endif" and regions:
            _, marked = regions.pop()
            depth = max(depth - marked, 0)
            lines.append(_CLOSE if marked else "")
        else:
            if directive == "define" and not dead:
                define(rest, depth > 0)
            elif directive == "undef" and not dead:
                undefine(rest.strip())
            lines.append("")
    for name in functions:
        if name in macros:  # also object-like somewhere: unknown either way
            macros[name] = None
    unsafe = functions | {name for name in commas if macros.get(name, ()) is None}
    return macros, unsafe, "\n".join(lines)


def _matching(tokens: list[str], start: int, open_: str = "(", close: str = ")") -> int:
    """The index of the token closing the group opened at ``start`` (or the last index)."""
    depth = 0
    for i in range(start, len(tokens)):
        if tokens[i] == open_:
            depth += 1
        elif tokens[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return len(tokens) - 1


# The most tokens macro expansions may add: macros that double at each level grow exponentially, and a
# reader that gives up (every macro then unknown) is better than one that hangs.
_EXPANSION_LIMIT = 250_000
_NESTING_LIMIT = 200  # macros inside macros, as deep as any real source goes


class _TooLong(Exception):
    """The expansion passed _EXPANSION_LIMIT tokens."""


def _expand(tokens: list[str], macros: dict[str, list[str] | None], unsafe: set[str],
            active: frozenset[str] = frozenset(), made: list[int] | None = None) -> list[str]:
    """``tokens`` with object-like macros expanded; unresolvable macros become marker tokens.

    Raises:
        _TooLong: If macro bodies add more than _EXPANSION_LIMIT tokens in all (counted in ``made``), or
            nest deeper than _NESTING_LIMIT (Python's own recursion limit would end it with RecursionError).
    """
    made = [0] if made is None else made
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in unsafe and token not in active and i + 1 < len(tokens) and tokens[i + 1] == "(":
            out.append(_UNSAFE + token)  # a function-like macro call: anything, commas included
            i = _matching(tokens, i + 1) + 1
            continue
        if token in macros and token not in active:
            body = macros[token]
            if body is None:
                out.append((_UNSAFE if token in unsafe else _UNKNOWN) + token)
            else:
                made[0] += len(body)
                if made[0] > _EXPANSION_LIMIT or len(active) >= _NESTING_LIMIT:
                    raise _TooLong
                out.extend(_expand(body, macros, unsafe, active | {token}, made))
        else:
            out.append(token)
        i += 1
    return out


def _declarations(tokens: list[str]) -> tuple[dict[str, list[str] | None], set[str]]:
    """Typedef and alias names defined in ``tokens``, and names that must stay unresolved."""
    typedefs: dict[str, list[str] | None] = {}
    unknown: set[str] = set()
    scopes: list[bool] = []  # per open brace: whether it opens a scope (extern "C" { ... } does not)
    conditionals = 0

    def declare(name: str, body: list[str], clear: bool) -> None:
        if not clear or typedefs.get(name, body) != body:
            typedefs[name] = None
        else:
            typedefs[name] = body

    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if token == "{":
            scopes.append(tokens[i - 2:i] != ["extern", '""'])
        elif token == "}":
            if scopes:
                scopes.pop()
        elif token == _OPEN:
            conditionals += 1
        elif token == _CLOSE:
            conditionals = max(conditionals - 1, 0)
        elif token == "template" and i + 1 < n and tokens[i + 1] == "<":
            end = _matching(tokens, i + 1, "<", ">")
            unknown.update(tokens[j + 1] for j in range(i + 1, end) if tokens[j] in ("typename", "class"))
            i = end
        elif token in ("typedef", "using"):
            end, depth = i + 1, 0
            while end < n and not (tokens[end] == ";" and depth == 0):
                if tokens[end] in ("(", "{", "["):
                    depth += 1
                elif tokens[end] in (")", "}", "]"):
                    depth -= 1
                end += 1
            body = tokens[i + 1:end]
            clear = not any(scopes) and conditionals == 0 and not any(t[0] in "?\x01\x02\x03" for t in body)
            if token == "using":
                if len(body) >= 3 and body[1] == "=" and _is_word(body[0]):
                    target = body[2:]
                    declare(body[0], target, clear and not any(t in "{}(),<>[]" for t in target))
                elif body and body[0] != "namespace":  # a using-declaration: std:: names are the builtin ones
                    words = [t for t in body if _is_word(t)]
                    if words and not (body[0] in ("std", "::") and len(words) <= 2):
                        unknown.add(words[-1])
            elif len(body) >= 2 and _is_word(body[-1]) and not any(t in "{}(),<>[]" for t in body):
                declare(body[-1], body[:-1], clear)
            else:  # a struct, array, function or several names: what each name is, the reader cannot say
                unknown.update(t for t in body if _is_word(t) and t not in _SPECIFIERS | _QUALIFIERS)
            i = end
        i += 1
    return typedefs, unknown


def _is_word(token: str) -> bool:
    """Whether ``token`` is an identifier (``std::size_t`` and ``::size_t`` included)."""
    head = token.lstrip(":")[:1]
    return head.isalpha() or head == "_"


def _text(tokens: list[str]) -> str:
    """Tokens as C text: a space only between two words."""
    out = ""
    for token in tokens:
        out += (" " if out and _is_word(out[-1]) and _is_word(token) else "") + token
    return out


@functools.lru_cache(maxsize=64)
def _read_source(source: str, options: tuple[str, ...]) -> _Source:
    text = source.replace("\\\r\n", "").replace("\\\n", "")  # spliced lines first, as in the compiler
    text = _LEXEME.sub(_neutral, text)
    macros, unsafe, code = _macro_definitions(text, options)
    try:
        tokens = _expand(_TOKEN.findall(code), macros, unsafe)
    except _TooLong:  # every macro unknown (no expansion: cannot raise again), and any of them in a
        # parameter list makes its signature unknown
        tokens = _expand(_TOKEN.findall(code), dict.fromkeys(macros), unsafe | set(macros))
    typedefs, unknown = _declarations(tokens)
    return _Source(tokens, typedefs, unknown)


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
        elif token == "<" and i and _is_word(tokens[i - 1]) and tokens[i + 1:i + 2] != ["<"]:
            angles += 1  # Vec<float, 3>, not a << shift
        elif token == ">" and angles:
            angles -= 1
        elif token == "," and depth == 0 and angles == 0:
            parts.append([])
            continue
        parts[-1].append(token)
    return [p for p in parts if p]


def _strip_attributes(tokens: list[str]) -> list[str]:
    """``tokens`` without ``[[...]]``, ``__attribute__((...))``, ``alignas(...)`` and ``__align__(...)``."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "[" and i + 1 < len(tokens) and tokens[i + 1] == "[":
            i = _matching(tokens, i, "[", "]") + 1
        elif tokens[i] in ("__attribute__", "alignas", "__align__", "__declspec") and i + 1 < len(tokens) \
                and tokens[i + 1] == "(":
            i = _matching(tokens, i + 1) + 1
        else:
            out.append(tokens[i])
            i += 1
    return out


def _join_scopes(tokens: list[str]) -> list[str]:
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
        return _VOID if words == ["void"] else np.dtype({"float": np.float32, "double": np.float64,
                                                         "bool": np.bool_}[words[0]])
    if set(count) == {"char"} and count["char"] == 1:
        return np.dtype(np.uint8 if unsigned else np.int8)
    longs, shorts, ints = count.pop("long", 0), count.pop("short", 0), count.pop("int", 0)
    if count or ints > 1 or longs > 2 or (shorts and longs) or shorts > 1:
        return None  # e.g. "long double", "short long"
    bits = 16 if shorts else 64 if longs else 32
    return np.dtype(f"{'u' if unsigned else 'i'}{bits // 8}")


def _base_type(words: list[str], source: _Source, seen: frozenset[str]) -> tuple[np.dtype | str | None, int]:
    """The type named by ``words`` (qualifiers removed) and the pointer levels a typedef adds."""
    if words and all(w in _SPECIFIERS for w in words):
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
        tokens = [t for t in _join_scopes(_strip_attributes(body)) if t not in _QUALIFIERS]
        if any(not (_is_word(t) or t == "*") for t in tokens):
            return None, 0
        dtype, depth = _base_type([t for t in tokens if t != "*"], source, seen | {word})
        return dtype, depth + tokens.count("*")
    plain = word[5:] if word.startswith("std::") else word[2:] if word.startswith("::") else word
    named = _NAMED.get(plain)
    if named is None or (plain != word and not plain.endswith("_t")):  # std::int32_t, not std::half
        return None, 0
    return np.dtype(named), 0


def _parse_param(tokens: list[str], source: _Source) -> KernelParam:
    tokens = _strip_attributes(tokens)
    if "=" in tokens:  # a default argument
        tokens = tokens[:tokens.index("=")]
    array = "[" in tokens
    if array:
        tokens = tokens[:tokens.index("[")]
    if "(" in tokens:  # a function pointer or a parenthesised declarator: a pointer of unknown kind at best
        shown = [t.lstrip("?") for t in tokens if t not in _QUALIFIERS]
        inner = [t for t in tokens[tokens.index("(") + 1:] if _is_word(t) and t not in _QUALIFIERS]
        return KernelParam(inner[0] if inner else "", _text(shown), "*" in tokens, None, tokens.count("*"))
    tokens = _join_scopes([t for t in tokens if t not in _QUALIFIERS])
    stars = tokens.count("*") + array
    words = [t for t in tokens if t != "*"]
    name = ""
    if tokens and tokens[-1] != "*" and len(words) > 1 and not all(w in _SPECIFIERS for w in words):
        name = words.pop().lstrip("?")
    if any(not (_is_word(w) or w[0] == "?") for w in words):
        dtype, extra = None, 0  # a template argument list, a stray token: not a type the reader knows
    else:
        dtype, extra = _base_type(words, source, frozenset())
    depth = stars + extra
    ctype = _text([w.lstrip("?") for w in words]) + "*" * stars
    if depth >= 2:
        dtype = ADDRESS_DTYPE
    elif dtype == _VOID:
        dtype = None
    return KernelParam(name, ctype, depth > 0, dtype, depth)  # type: ignore[arg-type]


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
                end = _matching(tokens, j + 1)
                lists.append((i, tokens[j + 2:end]))
                break
            j = _matching(tokens, j) + 1 if tokens[j] == "(" else j + 1
    return lists


def _template_parameters(tokens: list[str], at: int) -> list[str] | None:
    """The names of the template parameters of the declaration whose ``__global__`` is at ``at``: [] for a
    function that is not a template, None when a parameter has no name."""
    j = at - 1
    while j >= 0 and tokens[j] not in (";", "{", "}"):
        if tokens[j] == "template" and tokens[j + 1:j + 2] == ["<"]:
            end = _matching(tokens, j + 1, "<", ">")
            names = []
            for part in _split_top_level(tokens[j + 2:end]):
                part = part[:part.index("=")] if "=" in part else part
                if len(part) < 2 or not _is_word(part[-1]):
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
    tokens = _TOKEN.findall(rest.rpartition(">")[0])
    return base.strip(), _split_top_level(tokens)


def is_template(source: str, name: str, options: Sequence[str] = ()) -> bool:
    """Whether the ``__global__`` function ``name`` of ``source`` is declared as a template."""
    tokens = _read_source(source, tuple(options)).tokens
    return any(_template_parameters(tokens, at) != [] for at, _ in _kernel_lists(tokens, name))


def parse_signature(source: str, name: str, options: Sequence[str] = ()) -> tuple[KernelParam, ...] | None:
    """Return the parameters of ``__global__`` function ``name`` in ``source``, or None if gpugraph cannot
    tell them: not found, declared twice differently, or a macro that may change the parameter count. ``name``
    may be a name expression (``axpb<double>``): the template's parameters are then read with its arguments."""
    read = _read_source(source, tuple(options))
    name, arguments = split_name(name)
    found: list[tuple[KernelParam, ...]] = []
    for at, inner in _kernel_lists(read.tokens, name):
        if arguments is not None:  # a template's instance: its type parameters replaced by the arguments
            parameters = _template_parameters(read.tokens, at)
            if not parameters or len(arguments) > len(parameters):
                return None
            given = dict(zip(parameters, arguments))
            inner = [t for token in inner for t in given.get(token, [token])]
        if any(t.startswith(_UNSAFE) or t == "..." or t in (_OPEN, _ELSE, _CLOSE) for t in inner):
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
    tokens = _read_source(source, tuple(options)).tokens
    names = set()
    spaces: list[tuple[str, int]] = []  # the namespaces open at this token: (its name, "" if none; brace depth)
    depth = 0
    for i, token in enumerate(tokens):
        if token == "{":
            depth += 1
            j = i - 1  # a namespace's brace: `namespace [a[::b]] {`
            while j >= 0 and (_is_word(tokens[j]) or tokens[j] == "::") and tokens[j] != "namespace":
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
                name = tokens[j - 1] if _is_word(tokens[j - 1]) and tokens[j - 1] not in _QUALIFIERS else None
                j = _matching(tokens, j) + 1
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
    code = _LEXEME.sub(_neutral, text)
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
    tokens = _read_source(text, ()).tokens
    opening = tokens.index("(") if "(" in tokens else -1
    name: str | None = None
    if opening >= 0 and "," not in tokens[:opening]:  # a declaration (a list's commas come before any group)
        if "__global__" not in tokens:
            start = _matching(tokens, 1, "<", ">") + 1 if tokens[:2] == ["template", "<"] else 0
            tokens = [*tokens[:start], "__global__", *tokens[start:]]
        source = _text(tokens)
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
    tokens = _read_source(source, tuple(options)).tokens
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
    dtype, depth = _base_type(_join_scopes(words), _read_source(source, tuple(options)), frozenset())
    return dtype if isinstance(dtype, np.dtype) and depth == 0 else None
