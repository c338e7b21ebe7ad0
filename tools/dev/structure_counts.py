"""Count structural figures over src/gpugraph: backend protocol methods, reads of another object's private
attributes, import circles (and function-level imports), functions over 40 lines, and isinstance calls.
tests/test_packaging.py holds the import circles at 0 through it. Run: python tools/dev/structure_counts.py [--list]"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src" / "gpugraph"
LONG = 40


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
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


def main() -> None:
    listing = "--list" in sys.argv
    files = sorted(p for p in ROOT.rglob("*.py") if "bench" not in p.parts and "examples" not in p.parts)
    modules = {module_name(p): p for p in files}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    late_imports: list[str] = []
    private_reads: Counter[str] = Counter()
    long_functions: list[tuple[int, str]] = []
    isinstances: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        nested = {id(n) for f in functions for n in ast.walk(f) if n is not f}
        # Imports under ``if TYPE_CHECKING:`` name types for annotations only: no import at run time, no circle.
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and id(node) not in typing_only:
                targets = [t for t in resolve(module, node, is_package) if t in modules]
                in_function = id(node) in nested
                for target in targets:
                    if target != module:
                        edges[module].add(target)
                if in_function and targets:
                    late_imports.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    private_reads[node.attr] += 1
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                isinstances.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
        for function in functions:
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > LONG:
                long_functions.append((length, f"{path.relative_to(ROOT.parent)}:{function.lineno} {function.name}"))
    protocol = ast.parse((ROOT / "backends" / "_protocol.py").read_text())
    backend = next(n for n in protocol.body if isinstance(n, ast.ClassDef) and n.name == "Backend")
    methods = [n.name for n in backend.body if isinstance(n, ast.FunctionDef)]
    circles = strongly_connected(edges)
    print(f"backend protocol methods:            {len(methods)}")
    print(f"private attribute reads (not self):  {sum(private_reads.values())}   top: "
          + ", ".join(f"{name} {count}" for name, count in private_reads.most_common(6)))
    print(f"import circles:                      {len(circles)} ({', '.join(str(len(c)) for c in circles)} modules)")
    print(f"function-level gpugraph imports:     {len(late_imports)}")
    print(f"functions over {LONG} lines:            {len(long_functions)}")
    print(f"isinstance calls:                    {len(isinstances)}")
    if listing:
        for circle in circles:
            print("circle:", ", ".join(sorted(circle)))
        for length, where in sorted(long_functions, reverse=True):
            print(f"long: {length:4d} {where}")
        print("late imports:", " ".join(late_imports))


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
