"""Graph.to_svg and the DOT it draws: node kinds, dependency kinds, child graphs and conditional bodies as
clusters, hazards in red; the errors where Graphviz's package or its dot program is missing; a render through a
stand-in dot (everywhere) and through Graphviz's own (where it is installed)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph._dot import EDGE_STYLES, KIND_STYLES, to_dot

# A stand-in for Graphviz's dot: it reads the DOT from stdin, checks the digraph's frame and braces, keeps the text
# it was given (in $STAND_IN_DOT_KEEP) and writes an SVG document with one titled group per node declared.
STAND_IN_DOT = textwrap.dedent("""\
    import os, re, sys
    dot = sys.stdin.read()
    if not dot.startswith("digraph") or dot.count("{") != dot.count("}") or not dot.rstrip().endswith("}"):
        sys.exit("stand-in dot: not a digraph: " + dot[:40])
    if "-Tsvg" not in sys.argv:
        sys.exit("stand-in dot: expected -Tsvg, got " + " ".join(sys.argv[1:]))
    with open(os.environ["STAND_IN_DOT_KEEP"], "w") as kept:
        kept.write(dot)
    names = re.findall(r"^\\s*(\\w+) \\[label=", dot, flags=re.M)
    sys.stdout.write('<?xml version="1.0"?>\\n<svg xmlns="http://www.w3.org/2000/svg">\\n')
    for name in names:
        sys.stdout.write(f'<g id="{name}" class="node"><title>{name}</title></g>\\n')
    sys.stdout.write("</svg>\\n")
""")


@pytest.fixture
def stand_in_dot(tmp_path, monkeypatch):
    """Put the stand-in dot first on PATH; the file where it keeps the DOT it was given."""
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed (pip install graphviz)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dot = bin_dir / "dot"
    dot.write_text(f"#!{sys.executable}\n" + STAND_IN_DOT)
    dot.chmod(0o755)
    kept = tmp_path / "given.dot"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STAND_IN_DOT_KEEP", str(kept))
    return kept


def nested(device):
    """A graph with a child graph of two nodes, an if with two bodies, and a programmatic edge between kernels; its
    kernels write x unordered with the child graph's kernel (two hazards) and one another (one more)."""
    x = device.zeros(4, np.float32)
    child = gg.Graph(device)
    inner = child.add_kernel(K.scale, 1, 4, x, 2.0, 4)
    child.add_empty(after=inner)
    g = gg.Graph(device)
    first = g.add_kernel(K.scale, 1, 4, x, 3.0, 4)
    second = g.add_kernel(K.scale, 1, 4, x, 4.0, 4)
    g.add_dependency(first, second, kind="programmatic")
    holder = g.add_child(child)
    cond = g.add_if(g.condition(), has_else=True)
    cond.bodies[0].add_empty()
    cond.bodies[1].add_memset(device.zeros(2, np.float32), 0.0)
    return g, first, second, holder, cond


def test_dot_shows_clusters_kinds_and_edge_kinds(device):
    g, first, second, holder, cond = nested(device)
    dot = g.to_dot()
    n = {node: re.match(r"Node\((n\d+),", repr(node)).group(1) for node in (first, second, holder, cond)}
    # A child graph: a cluster holding the embedding node and the child's nodes, and the child's edge.
    child_cluster = re.search(rf"subgraph cluster_{n[holder]} {{\n(.*?)\n  }}\n", dot, flags=re.S).group(1)
    assert f'{n[holder]} [label="{n[holder]}: child graph (2 nodes)", shape=box3d' in child_cluster
    assert f'{n[holder]}_0 [label="{n[holder]}_0: scale\\ngrid=(1, 1, 1) block=(4, 1, 1)", shape=box,' \
        in child_cluster
    assert f'{n[holder]}_1 [label="{n[holder]}_1: empty", shape=ellipse' in child_cluster
    assert f"{n[holder]}_0 -> {n[holder]}_1;" in child_cluster
    # A conditional node: a cluster holding the node and a cluster per body.
    cond_cluster = re.search(rf"subgraph cluster_{n[cond]} {{\n(.*?)\n  }}\n", dot, flags=re.S).group(1)
    assert "shape=diamond" in cond_cluster
    for i, kind in ((0, "ellipse"), (1, "parallelogram")):
        body = re.search(rf"subgraph cluster_{n[cond]}_b{i} {{\n(.*?)\n    }}", cond_cluster, flags=re.S).group(1)
        assert f'label="body {i}"' in body and f"{n[cond]}_b{i}_0 [label=" in body and f"shape={kind}" in body
    # Each kind's shape and fill; the programmatic edge styled, no hazard marked.
    shape, fill = KIND_STYLES[gg.NodeKind.KERNEL.value]
    assert f'{n[first]} [label="{n[first]}: scale\\ngrid=(1, 1, 1) block=(4, 1, 1)", shape={shape}, ' \
           f'fillcolor="{fill}"];' in dot
    assert f"  {n[first]} -> {n[second]}{EDGE_STYLES['programmatic']};" in dot
    assert "red" not in dot
    assert set(KIND_STYLES) == {kind.value for kind in gg.NodeKind}  # (every kind, each its own look)
    assert len(set(KIND_STYLES.values())) == len(KIND_STYLES)


def test_hazards_are_outlined_and_joined_in_red(device, stand_in_dot):
    g, first, second, holder, _ = nested(device)
    hazards = g.hazards()
    # Each top-level kernel with the child graph's kernel (the programmatic edge orders first and second).
    assert sorted((h.nodes[0] is first, h.nodes[0] is second, h.inside) for h in hazards) == [
        (False, True, ((), (holder,))), (True, False, ((), (holder,)))]
    nf, ns, nh = (re.match(r"Node\((n\d+),", repr(node)).group(1) for node in (first, second, holder))
    svg = g.to_svg(hazards=hazards)
    given = stand_in_dot.read_text()
    assert given == to_dot(g, hazards)
    for name in (nf, ns, f"{nh}_0"):
        assert re.search(rf"^\s*{name} \[label=.*, color=red, penwidth=3\];$", given, flags=re.M), name
        assert f"<title>{name}</title>" in svg
    for a, b in ((nf, f"{nh}_0"), (ns, f"{nh}_0")):
        assert f'  {a} -> {b} [color=red, fontcolor=red, style=dashed, constraint=false, label="write/write"];' \
            in given
    assert given.count("red, penwidth=3") == 3
    assert g.to_svg(hazards=True) == svg and stand_in_dot.read_text() == given  # (True: the graph's own hazards)
    g.to_svg()
    assert "red" not in stand_in_dot.read_text()


def test_to_svg_renders_and_writes_the_file(device, stand_in_dot, tmp_path):
    g = gg.Graph(device)
    a = g.add_empty()
    g.add_memset(device.zeros(2, np.float32), 1.0, after=a)
    out = tmp_path / "graph.svg"
    svg = g.to_svg(out)
    assert svg.startswith("<?xml") and "<svg" in svg and svg.rstrip().endswith("</svg>")
    assert re.findall(r"<title>(\w+)</title>", svg) == ["n0", "n1"]
    assert out.read_text() == svg
    assert stand_in_dot.read_text() == g.to_dot()  # (without hazards the SVG draws to_dot's picture)


def test_to_svg_refuses_bad_arguments(device, tmp_path):
    g, *_ = nested(device)
    with pytest.raises(TypeError, match=r"to_svg\(path\): expected a str, a path or None, got int"):
        g.to_svg(3)
    with pytest.raises(TypeError, match=r"to_svg\(hazards\): expected None, True, or a list of Hazards .*got str"):
        g.to_svg(hazards="all")
    with pytest.raises(TypeError, match=r"to_svg\(hazards\): expected gpugraph Hazards .*got int 1"):
        g.to_svg(hazards=[1])
    other, *_ = nested(device)
    with pytest.raises(ValueError, match=r"hazards: Node\(n0, kernel scale\) of the hazard write/write .* is not a "
                                         r"node of .*; pass the hazards this graph's hazards\(\) gives"):
        gg.Graph(device).to_svg(tmp_path / "no.svg", hazards=other.hazards())
    assert not (tmp_path / "no.svg").exists()  # (refused: nothing written)


def test_missing_graphviz_package_is_named_with_how_to_install(device, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # (import graphviz raises ImportError)
    g = gg.Graph(device)
    g.add_empty()
    with pytest.raises(ImportError, match=r"to_svg: the graphviz Python package is not installed; .*pip install "
                                          r"graphviz .*pip install \"\.\[svg\]\".*system package graphviz "
                                          r"\(apt install graphviz"):
        g.to_svg(tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


def test_missing_dot_program_is_named_with_how_to_install(device, monkeypatch, tmp_path):
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed (pip install graphviz)")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # (no dot on it)
    g = gg.Graph(device)
    g.add_empty()
    with pytest.raises(RuntimeError, match=r"to_svg: Graphviz's dot program is not on PATH .*system package "
                                           r"graphviz \(apt install graphviz"):
        g.to_svg(tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot program is not installed (apt install graphviz)")
def test_graphviz_renders_for_real(device):
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed (pip install graphviz)")
    g, *_ = nested(device)
    svg = g.to_svg(hazards=True)
    assert "<svg" in svg and "</svg>" in svg
    for name in re.findall(r"^\s*(\w+) \[label=", g.to_dot(), flags=re.M):
        assert f"<title>{name}</title>" in svg, name
    assert 'stroke="red"' in svg  # (the hazards' outlines and edges)
