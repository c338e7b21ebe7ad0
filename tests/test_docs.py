"""Every ```python block of README.md, docs/capture.md, docs/dynamic.md and docs/guide.md runs as written:
a document's blocks, in order, make one program, run in a fresh interpreter on each backend present (a
crash there fails the test instead of the test run), and print the results the document shows."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Per document: the fewest blocks it has, code run after its blocks, and lines its program must print.
PROGRAMS = {
    "README.md": (6, "assert dev is gg.Device(os.environ['GPUGRAPH_BACKEND'])\n",
                  ["Kernel('axpy') argument 1 (float* x): expects a device Array, got ndarray of shape (1024,), "
                   "dtype float32 (copy it to the device with dev.asarray first)"]),
    "docs/capture.md": (10, "assert not stream.is_capturing\n"
                            "assert device is gg.Device(os.environ['GPUGRAPH_BACKEND'])\n",
                   ["capture(mode): expected one of global, thread_local, relaxed, got 'strict'",
                    "Capture.add_empty: the capture is not running (use it inside the with block)"]),
    "docs/dynamic.md": (10, "assert dev is gg.Device(os.environ['GPUGRAPH_BACKEND'])\n",
                   ["['python', 'host node', 'host node']",
                    "[0. 3. 6. 9.] CapturedStats(captures=1, updates=0, instantiations=1, replays=1, patches=1, "
                    "evictions=0)",
                    "[ 1.  1. 20. 30.]"]),
    # The guide launches its explicit graph twice (hx: 1 -> 2 -> 4), the second time without waiting.
    "docs/guide.md": (12, "assert dev is gg.Device(os.environ['GPUGRAPH_BACKEND'])\ns.synchronize()\n"
                     "assert (hx == 4.0).all(), hx[:4]\n",
                 ["host step", "digraph gpugraph {", "[5. 5. 5. 5.]", "[1.5 1.5]", "[6. 6.]",
                  "launched from the device: [2]", "[0. 3. 6. 9. 4. 5. 6. 7.]",
                  "write/write (Node(n0, kernel scale), Node(n1, kernel scale)) (0, 8192)",
                  "read/write (Node(n0, kernel scale), Node(n2, memcpy)) (0, 8192)",
                  "2 hazards, the first: write/write",
                  "[('kernel', 'scale'), ('kernel', 'scale'), ('kernel', 'scale'), ('memcpy', '512 B')]",
                  "True True"]),
}


def blocks(doc: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", (ROOT / doc).read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("doc", list(PROGRAMS))
def test_doc_has_blocks(doc):
    """Every block that opens with ```python is found (none is skipped by a stray fence)."""
    text = (ROOT / doc).read_text()
    assert len(blocks(doc)) == text.count("```python\n") >= PROGRAMS[doc][0]


@pytest.mark.parametrize("doc", list(PROGRAMS))
def test_doc_blocks_run(device, tmp_path, doc):
    _least, after, printed = PROGRAMS[doc]
    program = tmp_path / pathlib.Path(doc).name.replace(".md", "_md.py")
    program.write_text("import os\n" + "\n".join(blocks(doc)) + "\n" + after + "print('ALL BLOCKS RAN')\n")
    env = dict(os.environ, GPUGRAPH_BACKEND=device.backend, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)  # (files the blocks write, such as an SVG, go there)
    assert done.returncode == 0, f"rc={done.returncode}\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    for line in printed:
        assert line in lines, f"{line!r} not printed:\n{done.stdout}"
    assert lines[-1] == "ALL BLOCKS RAN"


def test_the_guide_says_arrays_default_to_float32(device):
    """NumPy's default dtype is float64, gpugraph's float32 (a float* kernel parameter's): the guide says so where
    arrays are made, and it holds."""
    memory = (ROOT / "docs/guide.md").read_text().split("## Memory", 1)[1].split("\n## ", 1)[0]
    assert "The dtype of `empty`, `zeros` and `pinned` is **float32**" in memory
    assert device.zeros(4).dtype == device.empty(4).dtype == device.pinned(4).dtype == np.float32


LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")  # [text](target)
CODE = re.compile(r"^```.*?^```$|`[^`\n]*`", flags=re.S | re.M)  # fenced blocks and inline code: not links
DOCS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
        "tools/dev/README.md", "tools/probes/README.md"]


def relative_links(doc: str) -> list[str]:
    """The targets of the relative links of ``doc``, outside code, without their #anchors."""
    text = CODE.sub("", (ROOT / doc).read_text())
    targets = [target.split("#", 1)[0] for target in LINK.findall(text)]
    return [target for target in targets if target and not re.match(r"^[a-z][a-z+.-]*:", target)]


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    """Every relative link of the README, of each doc and of the tools' READMEs names a file or folder that exists."""
    missing = [target for target in relative_links(doc) if not (ROOT / doc).parent.joinpath(target).exists()]
    assert not missing, f"{doc} links to {missing}, which do not exist"


def test_performance_doc_stays_under_400_lines():
    """docs/performance.md stays short enough to read through: under 400 lines (the raw output lives in results/)."""
    lines = len((ROOT / "docs" / "performance.md").read_text().splitlines())
    assert lines < 400, f"docs/performance.md has {lines} lines: say it in fewer, or move raw output to results/"


def test_links_are_found():
    """The link pattern finds the links the docs are known to have, and none inside code."""
    assert "docs/guide.md" in relative_links("README.md")
    assert "results/" in relative_links("docs/performance.md")
    assert LINK.findall(CODE.sub("", "`a[0](b)` and [x](y.md)")) == ["y.md"]
