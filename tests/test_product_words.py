"""The product speaks of gpugraph, not of how it was made: the package, the docs, the README, the tests, the tools
and the CI job name no issue, work item, step of the work or work session; and every path under tools/ that they
name exists."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ["src/gpugraph", "docs", "tests", "tools", "README.md", ".ci/run", "pyproject.toml", "setup.py", "MANIFEST.in"]
SUFFIXES = {".py", ".pyx", ".pxd", ".md", ".sh", ".cu", ".cuh", ".h", ".toml", ".in", ""}
RAW_RESULTS = ROOT / "docs" / "results"  # measured output, kept as it came

# Words of the work's history. A stage of the work is a word of the work followed by a number ("issue 12",
# "session14", "step-3", "issue #5", "round 3"); the same words without a number are the product's own (an RK4
# step, a training step, the phase of a wave, a bench's rounds, a sleep per period), and no figure or rule of
# gpugraph is named by one of them and a number. "Today", "nowadays" and "for now" date a statement: say what is
# true instead (date.today(), a call, is code).
HISTORY = re.compile(r"""
      \b(?:issues?|items?|steps?|sessions?|rounds?|phases?|periods?|sprints?|milestones?)[\s#-]*\d+
    | \b(?:work|development)\ (?:periods?|sessions?|rounds?)\b
    | \bthis\ (?:session|round|issue)\b
    | \bthe\ issue's\ case\b | \bbefore\ the\ fix\b | \bon\ the\ old\ code\b
    | (?<![.\w])today\b(?!\() | \bnowadays\b | \bfor\ now\b
    """, re.I | re.X)
MISSING_DOC = re.compile(r"\bPERFORMANCE\.md\b")  # a design document the repository never had
TOOL_PATH = re.compile(r"(?<![\w/.-])tools/[\w./*-]*[\w*]")


def product_files() -> list[pathlib.Path]:
    """The files the product ships or shows: sources, docs and tests (this file, which names the words, aside)."""
    found = []
    for tree in TREES:
        path = ROOT / tree
        for file in [path] if path.is_file() else sorted(path.rglob("*")):
            if (file.is_file() and file.suffix in SUFFIXES and RAW_RESULTS not in file.parents
                    and "__pycache__" not in file.parts and file != pathlib.Path(__file__).resolve()):
                found.append(file)
    return found


def test_no_words_of_the_work_history():
    found = []
    for file in product_files():
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in [*HISTORY.finditer(line), *MISSING_DOC.finditer(line)]:
                found.append(f"{file.relative_to(ROOT)}:{number}: {match[0]!r}")
    assert not found, "history words (say what gpugraph does, not when or in which work item):\n" + "\n".join(found)


def test_the_words_are_caught():
    """The patterns catch the history words and leave the product's own uses of the same words alone."""
    caught = ["(issue 12)", "issue-13's figures", "Item 7: an interrupted end", "Step 3b", "session 14's review",
              "sessions 22-23", "in this session", "a work period", "issue14", "session14", "step6", "session-14",
              "step-3", "issue #5", "round 3", "phase 2", "period 4", "sprint 5", "milestone 2",
              "The issue's case: a fork", "hung before the fix", "raised on the old code",
              "what gpugraph does today", "Today, a capture", "nowadays", "left out for now"]
    kept = ["10 RK4 steps", "one step of the integrator", "a training step", "the first item of the tuple",
            "issues a launch", "the session's communicator", "2 ms per period", "the phase of the wave",
            "three rounds, each followed by the C++ program", "rounds up to 8", "a step of 0.001",
            "the issue's description", "the fixed point", "old code paths", "datetime.date.today()",
            "for nowhere"]
    assert [text for text in caught if not HISTORY.search(text)] == []
    assert [text for text in kept if HISTORY.search(text)] == []


def test_the_tools_named_exist():
    missing = []
    for file in product_files():
        text = file.read_text(encoding="utf-8", errors="replace")
        for match in TOOL_PATH.finditer(text):
            named = match[0].rstrip(".")
            if not (list(ROOT.glob(named)) if "*" in named else (ROOT / named).exists()):
                missing.append(f"{file.relative_to(ROOT)}: {named}")
    assert not missing, "paths under tools/ that do not exist:\n" + "\n".join(missing)
