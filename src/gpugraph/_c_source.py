"""A CUDA/HIP C++ source as the signature reader (gpugraph._signature) sees it: the compiler's tokens, without
comments or literals, object-like macros (``#define``, ``-D``/``-U``) expanded, the regions of conditions it does not
evaluate marked, and the typedef/using names it declares at file scope.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# The C keywords that combine into a builtin arithmetic type ("long unsigned int", "signed char", ...).
SPECIFIERS = {"signed", "unsigned", "short", "long", "int", "char", "float", "double", "bool", "void"}
QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "class", "union", "enum",
              "typename", "__grid_constant__", "register", "&", "&&"}

_UNKNOWN = "?"  # a marker token prefix: an identifier the reader cannot resolve ("?NAME")
UNSAFE = "??"  # ... one that may change the parameter count ("??NAME")
OPEN, ELSE, CLOSE = "\x01", "\x02", "\x03"  # #if.., #else/#elif, #endif left in the token stream


# Lexing: the source as the compiler's tokens, without comments or literals

_NUMBER = r"\.?\d(?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*"  # a pp-number, digit separators included
LEXEME = re.compile(rf"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{{0,16}})\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*")
  | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')
  | (?P<number>{_NUMBER})
  | (?P<word>[A-Za-z_]\w*)
""", re.S | re.X)
TOKEN = re.compile(rf"[A-Za-z_]\w*|{_NUMBER}|\.\.\.|::|&&|\"\"|\S")
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w*)(.*)")
_DEFINE = re.compile(r"\s*([A-Za-z_]\w*)(\()?(.*)", re.S)


def neutral(match: re.Match) -> str:
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
class Source:
    """A source's tokens (macros expanded) and what its typedefs and template parameters say."""

    tokens: list[str]
    typedefs: dict[str, list[str] | None]  # name -> its type's tokens, or None: not one clear definition
    unknown: set[str]  # names that must not be resolved (template parameters, scoped or complex typedefs)


@dataclass
class _Macros:
    """The macros defined so far (as ``_macro_definitions`` returns them), the function-like ones, and those with a
    comma in some definition."""

    defined: dict[str, list[str] | None] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    commas: set[str] = field(default_factory=set)

    def define(self, definition: str, conditional: bool) -> None:
        match = _DEFINE.match(definition)
        if match is None:
            return
        name, paren, body = match.groups()
        if paren:
            self.functions.add(name)
            return
        tokens = TOKEN.findall(body)
        if "," in tokens:
            self.commas.add(name)
        if conditional or self.defined.get(name, tokens) != tokens:
            self.defined[name] = None
        else:
            self.defined[name] = tokens

    def undefine(self, name: str) -> None:
        if name:
            self.defined[name] = None

    def unsafe(self) -> set[str]:
        """Settle the function-like macros (also object-like somewhere: unknown either way) and return the names
        that may change the number of parameters: those, and the unsettled ones with a comma."""
        for name in self.functions:
            if name in self.defined:
                self.defined[name] = None
        return self.functions | {name for name in self.commas if self.defined.get(name, ()) is None}


def _option_macros(options: Sequence[str], macros: _Macros) -> None:
    """Define and undefine the macros of the ``-D``/``-U`` compiler options."""
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
            macros.define(f"{name} {body if equals else '1'}", False)
        else:
            macros.undefine(value)


# The state an `#if` of a literal condition gives its first branch; any other condition is "open".
_LITERAL_STATES = {"0": "dead", "false": "dead", "1": "live", "true": "live"}


class _Conditionals:
    """The #if regions open at a line. Each open #if: its state ("dead": a branch of `#if 0` the compiler skips,
    which the reader drops too; "live": the branch of `#if 1`, after which the others are dead; "open": a condition
    the reader does not evaluate, marked in the tokens) and whether it was marked open."""

    def __init__(self) -> None:
        self.regions: list[list] = []
        self.depth = 0  # the regions marked open: a macro defined inside one is conditional

    def dead(self) -> bool:
        return any(state == "dead" for state, _ in self.regions)

    def marker(self, directive: str, rest: str, dead: bool) -> str | None:
        """The marker a conditional directive leaves in the text ("" for none), or None for a directive that opens,
        continues or closes no region (an #else or #endif with no #if open among them)."""
        if directive in ("if", "ifdef", "ifndef"):
            literal = rest.split("//")[0].strip() if directive == "if" else None
            state = _LITERAL_STATES.get(literal or "", "open")
            marked = state == "open" and not dead
            self.regions.append([state, marked])
            self.depth += marked
            return OPEN if marked else ""
        if directive in ("elif", "else", "elifdef", "elifndef") and self.regions:
            return self._branch(directive)
        if directive == "endif" and self.regions:
            _, marked = self.regions.pop()
            self.depth = max(self.depth - marked, 0)
            return CLOSE if marked else ""
        return None

    def _branch(self, directive: str) -> str:
        region = self.regions[-1]
        if region[0] == "live":
            region[0] = "dead"
        elif region[0] == "dead" and not region[1]:  # (after `#if 0`: this branch is the compiler's choice)
            region[0] = "live" if directive == "else" else "open"
        outer_dead = any(state == "dead" for state, _ in self.regions[:-1])
        if region[0] == "open" and not outer_dead:
            marker = ELSE if region[1] else OPEN
            self.depth += not region[1]
            region[1] = True
            return marker
        return ""


def _macro_definitions(text: str, options: Sequence[str]) -> tuple[dict[str, list[str] | None], set[str], str]:
    """Macros defined by ``options`` and the directives of ``text``, and ``text`` with its directives
    replaced by conditional markers.

    A macro maps to its body's tokens, or to None when no single definition holds everywhere: defined
    under #if, twice differently, or #undef'd. Function-like macros, and unsettled ones with a comma in
    some definition, are returned as a set of names: either may change the number of parameters.
    """
    macros = _Macros()
    _option_macros(options, macros)
    conditionals = _Conditionals()
    lines: list[str] = []
    for line in text.split("\n"):
        match = _DIRECTIVE.match(line)
        dead = conditionals.dead()
        if match is None:
            lines.append("" if dead else line)
            continue
        directive, rest = match.groups()
        marker = conditionals.marker(directive, rest, dead)
        if marker is None:
            if directive == "define" and not dead:
                macros.define(rest, conditionals.depth > 0)
            elif directive == "undef" and not dead:
                macros.undefine(rest.strip())
            marker = ""
        lines.append(marker)
    unsafe = macros.unsafe()
    return macros.defined, unsafe, "\n".join(lines)


def matching(tokens: list[str], start: int, open_: str = "(", close: str = ")") -> int:
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
            out.append(UNSAFE + token)  # a function-like macro call: anything, commas included
            i = matching(tokens, i + 1) + 1
            continue
        if token in macros and token not in active:
            body = macros[token]
            if body is None:
                out.append((UNSAFE if token in unsafe else _UNKNOWN) + token)
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
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if token == "{":
            scopes.append(tokens[i - 2:i] != ["extern", '""'])
        elif token == "}":
            if scopes:
                scopes.pop()
        elif token == OPEN:
            conditionals += 1
        elif token == CLOSE:
            conditionals = max(conditionals - 1, 0)
        elif token == "template" and i + 1 < n and tokens[i + 1] == "<":
            end = matching(tokens, i + 1, "<", ">")
            unknown.update(tokens[j + 1] for j in range(i + 1, end) if tokens[j] in ("typename", "class"))
            i = end
        elif token in ("typedef", "using"):
            end = _statement_end(tokens, i + 1)
            body = tokens[i + 1:end]
            clear = not any(scopes) and conditionals == 0 and not any(t[0] in "?\x01\x02\x03" for t in body)
            _alias(token, body, clear, typedefs, unknown)
            i = end
        i += 1
    return typedefs, unknown


def _statement_end(tokens: list[str], start: int) -> int:
    """The index of the ``;`` that ends the statement going on at ``start`` (outside brackets), or the end."""
    end, depth = start, 0
    while end < len(tokens) and not (tokens[end] == ";" and depth == 0):
        if tokens[end] in ("(", "{", "["):
            depth += 1
        elif tokens[end] in (")", "}", "]"):
            depth -= 1
        end += 1
    return end


def _alias(keyword: str, body: list[str], clear: bool, typedefs: dict[str, list[str] | None],
           unknown: set[str]) -> None:
    """Declare the names the ``typedef`` or ``using`` statement ``body`` defines (``clear``: at file scope, outside
    any #if and macro the reader cannot settle) in ``typedefs``, or add them to ``unknown``."""
    if keyword == "using":
        if len(body) >= 3 and body[1] == "=" and is_word(body[0]):
            target = body[2:]
            _declare(typedefs, body[0], target, clear and not any(t in "{}(),<>[]" for t in target))
        elif body and body[0] != "namespace":  # a using-declaration: std:: names are the builtin ones
            words = [t for t in body if is_word(t)]
            if words and not (body[0] in ("std", "::") and len(words) <= 2):
                unknown.add(words[-1])
    elif len(body) >= 2 and is_word(body[-1]) and not any(t in "{}(),<>[]" for t in body):
        _declare(typedefs, body[-1], body[:-1], clear)
    else:  # a struct, array, function or several names: what each name is, the reader cannot say
        unknown.update(t for t in body if is_word(t) and t not in SPECIFIERS | QUALIFIERS)


def _declare(typedefs: dict[str, list[str] | None], name: str, body: list[str], clear: bool) -> None:
    """``name`` means ``body``, or None where it is not one clear definition."""
    if not clear or typedefs.get(name, body) != body:
        typedefs[name] = None
    else:
        typedefs[name] = body


def is_word(token: str) -> bool:
    """Whether ``token`` is an identifier (``std::size_t`` and ``::size_t`` included)."""
    head = token.lstrip(":")[:1]
    return head.isalpha() or head == "_"


def c_text(tokens: list[str]) -> str:
    """Tokens as C text: a space only between two words."""
    out = ""
    for token in tokens:
        out += (" " if out and is_word(out[-1]) and is_word(token) else "") + token
    return out


@functools.lru_cache(maxsize=64)
def read_source(source: str, options: tuple[str, ...]) -> Source:
    """``source`` as the compiler given ``options`` sees it, as far as the reader can tell (cached: each use of a
    kernel reads its source again)."""
    text = source.replace("\\\r\n", "").replace("\\\n", "")  # spliced lines first, as in the compiler
    text = LEXEME.sub(neutral, text)
    macros, unsafe, code = _macro_definitions(text, options)
    try:
        tokens = _expand(TOKEN.findall(code), macros, unsafe)
    except _TooLong:  # every macro unknown (no expansion: cannot raise again), and any of them in a
        # parameter list makes its signature unknown
        tokens = _expand(TOKEN.findall(code), dict.fromkeys(macros), unsafe | set(macros))
    typedefs, unknown = _declarations(tokens)
    return Source(tokens, typedefs, unknown)

