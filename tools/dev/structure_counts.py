"""Count structural figures over src/gpugraph (bench/ and examples/ left out), reading the source with ``ast``
(nothing of gpugraph is imported). tests/test_packaging.py runs it with ``--json``: it holds the plain import
circles at 0 and each hidden edge below at the number the test holds.

Run: ``python tools/dev/structure_counts.py [--root REPO] [--list] [--json]``. ``--root`` names the repository whose
``src/gpugraph`` is read (default: this checkout); ``--list`` names each counted thing; ``--json`` prints the
counts as one JSON object instead of the table.

What each figure counts (a "module" is a ``.py`` file of the package):

- ``protocol_methods``: the methods of ``backends/_protocol.Backend``. ``isinstance_calls``: calls of
  ``isinstance``.
- Import circles: Tarjan's strongly connected components of more than one module over the gpugraph imports
  (``from ... import`` and ``import gpugraph...``, at module level or inside functions). ``import_circles``
  leaves out imports under ``if TYPE_CHECKING:``; ``typing_circles`` counts them too; ``hook_circles`` also
  adds an edge from each hooked module to the module that sets its hook (the hooked module's code reaches the
  setter's object). Each comes with ``*_modules``: how many modules its circles hold.
  ``late_imports``: gpugraph imports inside functions (not under ``TYPE_CHECKING``).
- ``hooks``: hooks set from above: an assignment (``=``, annotated or augmented, each target of a tuple) to an
  attribute of a name that an import in the assigning module binds to another gpugraph module, a
  ``setattr`` on such a name, and every call of a function or method named ``set_types`` (it hands front-end
  objects to the compiled extension, which is not a module here, so it adds no edge to ``hook_circles``).
- ``private_reads``: attribute expressions ``x._name`` (one leading underscore, not a dunder; loads, stores
  and deletes alike) where ``x`` is not the bare name ``self`` or ``cls``. ``cross_module_private_reads``:
  those whose ``_name`` the reading module does not define, where defining is: assigning ``self._name`` or
  ``cls._name`` (plain, annotated, augmented or as a ``for``/``with`` target), naming it in a ``__slots__``
  string, or binding it in a class body (assignment, ``def``, ``class``). A name that some class of the
  reading module defines counts as its own even when ``x`` is of another module's class, so this is a lower
  bound of reads across modules.
- ``any_parameters``: parameters (positional, keyword-only, ``*args``, ``**kwargs``) annotated exactly
  ``Any`` (or ``typing.Any``). ``any_typed_parameters`` / ``any_typed_parameters_backends``: those of them
  named as a gpugraph object is by convention (``TYPE_NAMES``), in the front end (outside ``backends/``)
  and in ``backends/``.
- Twins, the compiled lanes beside the Python paths: ``lane_references``: each name or attribute spelled
  ``_compiled`` or ``_fast``, and each such name an import binds (``Param._fast``, a number type, shares
  the spelling and counts too); ``in_step_notes``: source lines saying "in step" (a note to keep a Python
  path and its compiled lane alike); ``pyx_lines``: the lines of the package's ``.pyx`` files.
- Sizes: ``modules_over_600`` (lines of a module), ``functions_over_60`` and ``functions_over_40`` (lines
  of a function or method, decorators left out, nested functions counted on their own too).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

LONG, VERY_LONG, LONG_MODULE = 40, 60, 600
LANE_NAMES = frozenset({"_compiled", "_fast"})
TYPE_NAMES = frozenset({"device", "graph", "stream", "capture", "exe", "exec_", "node", "kernel", "event", "array",
                        "param", "owner", "into", "condition", "child"})
IN_STEP = re.compile(r"\bin step\b", re.IGNORECASE)


@dataclass
class Module:
    """One module's source and what an import in it binds to a gpugraph module."""

    name: str
    path: Path
    where: str  # its path from src/, for listings
    tree: ast.Module
    lines: list[str]
    bound: dict[str, str] = field(default_factory=dict)  # local name -> gpugraph module


@dataclass
class Counts:
    """Every figure, and what it counts (for --list)."""

    runtime_edges: dict[str, set[str]]
    typing_edges: dict[str, set[str]]
    hook_edges: dict[str, set[str]]
    late_imports: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    private_reads: Counter[str] = field(default_factory=Counter)
    cross_reads: Counter[tuple[str, str]] = field(default_factory=Counter)  # (name, reading module)
    any_parameters: list[str] = field(default_factory=list)
    any_typed: list[str] = field(default_factory=list)
    any_typed_backends: list[str] = field(default_factory=list)
    lane_references: list[str] = field(default_factory=list)
    in_step_notes: list[str] = field(default_factory=list)
    pyx_lines: dict[str, int] = field(default_factory=dict)
    long_modules: list[tuple[int, str]] = field(default_factory=list)
    long_functions: list[tuple[int, str]] = field(default_factory=list)
    isinstance_calls: int = 0
    protocol_methods: int = 0


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    """The gpugraph modules an ``from ... import ...`` names (the module, or its submodules by name)."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("gpugraph"):
        return []
    submodules = [f"{target}.{alias.name}" for alias in node.names]
    return submodules if node.module is None else [target, *submodules]


def package_files(src: Path, suffix: str) -> list[Path]:
    """The package's files of one suffix, bench/ and examples/ left out."""
    package = src / "gpugraph"
    return sorted(p for p in package.rglob(f"*{suffix}")
                  if not {"bench", "examples"} & set(p.relative_to(package).parts))


def load(src: Path) -> dict[str, Module]:
    modules = {}
    for path in package_files(src, ".py"):
        text = path.read_text()
        name = module_name(path, src)
        modules[name] = Module(name, path, path.relative_to(src).as_posix(), ast.parse(text, str(path)),
                               text.splitlines())
    return modules


def read_imports(module: Module, modules: dict[str, Module], counts: Counts) -> None:
    """The module's import edges (run time, typing only), late imports, and the names bound to modules."""
    is_package = module.path.name == "__init__.py"
    functions = [n for n in ast.walk(module.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    nested = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    # Imports under ``if TYPE_CHECKING:`` name types for annotations only: no import at run time.
    typing_only = {id(n) for block in ast.walk(module.tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for n in ast.walk(block)}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            named = resolve(module.name, node, is_package)
            targets = [t for t in named if t in modules]
            submodules = named[1:] if node.module is not None else named  # (one per alias)
            module.bound.update({alias.asname or alias.name: full for alias, full in zip(node.names, submodules)
                                 if full in modules})
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name in modules]
            module.bound.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
        else:
            continue
        edges = counts.typing_edges if id(node) in typing_only else counts.runtime_edges
        edges[module.name].update(t for t in targets if t != module.name)
        if targets and id(node) in nested and id(node) not in typing_only:
            counts.late_imports.append(f"{module.where}:{node.lineno}")


def defined_privates(tree: ast.Module) -> set[str]:
    """The private names the module defines: ``self._a``/``cls._a`` targets, ``__slots__`` entries, class bodies."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            # (A core module's C class declares its plain-mode slots inside ``if not cython.compiled:``.)
            body = [*node.body, *(s for i in node.body if isinstance(i, ast.If) for s in i.body)]
            for statement in body:
                if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(statement.name)
                if not isinstance(statement, ast.Assign | ast.AnnAssign):
                    continue
                for target in assigned(statement):
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                        if target.id == "__slots__" and statement.value is not None:
                            names.update(c.value for c in ast.walk(statement.value)
                                         if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


def assigned(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[ast.expr]:
    """The targets an assignment statement binds, tuples and lists unpacked."""
    targets: list[ast.expr] = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
    flat: list[ast.expr] = []
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple | ast.List):
            targets.extend(target.elts)
        else:
            flat.append(target)
    return flat


def called(node: ast.Call) -> str | None:
    """The name of the function or method a call calls, where it is spelled out."""
    function = node.func
    return function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) \
        else None


def read_hooks(module: Module, counts: Counts) -> None:
    """Hooks this module sets on modules below it, and ``set_types`` calls."""
    for node in ast.walk(module.tree):
        hooked: list[tuple[str, str]] = []
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            hooked = [(t.value.id, t.attr) for t in assigned(node)
                      if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)]
        elif not isinstance(node, ast.Call):
            continue
        elif called(node) == "set_types":
            counts.hooks.append(f"{module.where}:{node.lineno} set_types(...)")
        elif called(node) == "setattr" and isinstance(node.func, ast.Name) \
                and len(node.args) > 1 and isinstance(node.args[0], ast.Name):
            key = node.args[1]
            hooked = [(node.args[0].id, str(key.value) if isinstance(key, ast.Constant) else "(setattr)")]
        for name, attr in hooked:
            target = module.bound.get(name)
            if target is not None and target != module.name:
                counts.hooks.append(f"{module.where}:{node.lineno} {target}.{attr}")
                counts.hook_edges[target].add(module.name)


def is_any(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any" and isinstance(annotation.value, ast.Name) and annotation.value.id == "typing"
    return isinstance(annotation, ast.Name) and annotation.id == "Any"


def read_module(module: Module, counts: Counts) -> None:
    """Everything but imports and hooks: private reads, Any parameters, lanes, sizes, isinstance calls."""
    own = defined_privates(module.tree)
    in_backends = module.name.startswith("gpugraph.backends")
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            counts.private_reads[node.attr] += 1
            if node.attr not in own:
                counts.cross_reads[node.attr, module.name] += 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            read_function(module, node, in_backends, counts)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            counts.isinstance_calls += 1
        if isinstance(node, ast.Name | ast.Attribute | ast.ImportFrom):
            counts.lane_references += [f"{module.where}:{node.lineno} {n}" for n in spellings(node) if n in LANE_NAMES]
    counts.in_step_notes += [f"{module.where}:{i}" for i, line in enumerate(module.lines, 1) if IN_STEP.search(line)]
    if len(module.lines) > LONG_MODULE:
        counts.long_modules.append((len(module.lines), module.where))


def spellings(node: ast.Name | ast.Attribute | ast.ImportFrom) -> list[str]:
    """The names a name, an attribute or an import spells (an import: the names it binds)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return [alias.asname or alias.name for alias in node.names]


def read_function(module: Module, function: ast.FunctionDef | ast.AsyncFunctionDef, in_backends: bool,
                  counts: Counts) -> None:
    arguments = function.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                  *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]
    for parameter in parameters:
        if is_any(parameter.annotation):
            where = f"{module.where}:{parameter.lineno} {function.name}({parameter.arg})"
            counts.any_parameters.append(where)
            if parameter.arg in TYPE_NAMES:
                (counts.any_typed_backends if in_backends else counts.any_typed).append(where)
    length = (function.end_lineno or function.lineno) - function.lineno + 1
    if length > LONG:
        counts.long_functions.append((length, f"{module.where}:{function.lineno} {function.name}"))


def measure(root: Path) -> Counts:
    src = root / "src"
    modules = load(src)
    counts = Counts({m: set() for m in modules}, {m: set() for m in modules}, {m: set() for m in modules})
    for module in modules.values():
        read_imports(module, modules, counts)
    for module in modules.values():
        read_hooks(module, counts)
        read_module(module, counts)
    counts.pyx_lines = {p.relative_to(src).as_posix(): len(p.read_text().splitlines())
                        for p in package_files(src, ".pyx")}
    protocol = ast.parse((src / "gpugraph" / "backends" / "_protocol.py").read_text())
    backend = next(n for n in protocol.body if isinstance(n, ast.ClassDef) and n.name == "Backend")
    counts.protocol_methods = sum(isinstance(n, ast.FunctionDef) for n in backend.body)
    return counts


def circles(*graphs: dict[str, set[str]]) -> list[set[str]]:
    """The import circles of the union of ``graphs``."""
    union = {m: set().union(*(g.get(m, set()) for g in graphs)) for m in graphs[0]}
    return strongly_connected(union)


def figures(counts: Counts) -> tuple[dict[str, int], dict[str, list[set[str]]]]:
    """The counts by name (what --json prints), and the circles of each kind."""
    found = {"import_circles": circles(counts.runtime_edges),
             "typing_circles": circles(counts.runtime_edges, counts.typing_edges),
             "hook_circles": circles(counts.runtime_edges, counts.typing_edges, counts.hook_edges)}
    result = {"protocol_methods": counts.protocol_methods}
    for kind, components in found.items():
        result[kind] = len(components)
        result[f"{kind}_modules"] = sum(map(len, components))
    result |= {
        "late_imports": len(counts.late_imports),
        "hooks": len(counts.hooks),
        "private_reads": sum(counts.private_reads.values()),
        "cross_module_private_reads": sum(counts.cross_reads.values()),
        "any_parameters": len(counts.any_parameters),
        "any_typed_parameters": len(counts.any_typed),
        "any_typed_parameters_backends": len(counts.any_typed_backends),
        "lane_references": len(counts.lane_references),
        "in_step_notes": len(counts.in_step_notes),
        "pyx_lines": sum(counts.pyx_lines.values()),
        "modules_over_600": len(counts.long_modules),
        "functions_over_60": sum(length > VERY_LONG for length, _ in counts.long_functions),
        "functions_over_40": len(counts.long_functions),
        "isinstance_calls": counts.isinstance_calls,
    }
    return result, found


def top(counter: Counter[str], n: int = 6) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common(n))


def by_place(items: list[str]) -> list[str]:
    """``path:line ...`` items in the order of their place in the source."""
    def place(item: str) -> tuple[str, int]:
        path, _, rest = item.partition(":")
        return path, int(rest.split(" ", 1)[0])
    return sorted(items, key=place)


def print_list(counts: Counts, found: dict[str, list[set[str]]]) -> None:
    for kind, components in found.items():
        for component in components:
            print(f"{kind[:-1]}:", ", ".join(sorted(component)))
    print("late imports:", " ".join(by_place(counts.late_imports)))
    for line in by_place(counts.hooks):
        print("hook:", line)
    by_name: dict[str, list[str]] = {}
    for (name, reader), count in sorted(counts.cross_reads.items(), key=lambda item: -item[1]):
        by_name.setdefault(name, []).append(f"{reader.removeprefix('gpugraph.')} {count}")
    names = Counter({name: sum(c for (n, _), c in counts.cross_reads.items() if n == name) for name in by_name})
    for name, count in names.most_common():
        print(f"cross-module private read: {name} {count}: {', '.join(by_name[name])}")
    for label, items in (("Any parameter", counts.any_typed), ("Any parameter (backends)", counts.any_typed_backends),
                         ("lane reference", counts.lane_references), ("in step", counts.in_step_notes)):
        for item in by_place(items):
            print(f"{label}: {item}")
    for path, lines in counts.pyx_lines.items():
        print(f"pyx: {lines:4d} {path}")
    for length, where in sorted(counts.long_modules, reverse=True):
        print(f"long module: {length:4d} {where}")
    for length, where in sorted(counts.long_functions, reverse=True):
        print(f"long: {length:4d} {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the repository whose src/gpugraph is read (default: this checkout)")
    parser.add_argument("--list", action="store_true", help="name each counted thing")
    parser.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    options = parser.parse_args()
    counts = measure(options.root)
    result, found = figures(counts)
    if options.json:
        print(json.dumps(result, indent=1))
    else:
        for name, value in result.items():
            print(f"{name + ':':32s}{value}")
        print("private reads, top:", top(counts.private_reads))
        readers: Counter[str] = Counter()
        for (_, reader), count in counts.cross_reads.items():
            readers[reader.removeprefix("gpugraph.")] += count
        print("cross-module private reads by reader, top:", top(readers))
    if options.list:
        print_list(counts, found)


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


if __name__ == "__main__":
    main()
