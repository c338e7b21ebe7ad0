"""tools/dev/bench_tables.py renders docs/performance.md's tables from a bench run's JSON, in place between their
markers, and writes nothing when a table has no place or the file is not a bench JSON."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from gpugraph import bench

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "tools" / "dev" / "bench_tables.py")
assert spec is not None and spec.loader is not None
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)


@pytest.fixture
def run(device, tmp_path):
    """A bench run of the chain workload on ``device``, kept as docs/results keeps runs."""
    path = tmp_path / "results" / "2026-01-02-test" / "bench.json"
    path.parent.mkdir(parents=True)
    assert bench.main(["--backend", str(device), "--workload", "chain", "--nodes", "16", "--repeats", "2",
                       "--warmup", "0", "--json", str(path)]) == 0
    return path


def document(tmp_path, names):
    doc = tmp_path / "performance.md"
    doc.write_text("# Figures\n\n" + "".join(f"<!-- bench: {name} -->\nold\n<!-- /bench -->\n\ntext\n\n"
                                             for name in names))
    return doc


def test_tables_are_written_between_their_markers(device, run, tmp_path, capsys):
    backend = device.backend
    doc = document(tmp_path, [f"{backend}/runs", f"{backend}/targets", f"{backend}/chain", "cuda/elsewhere"])
    assert tables.main([str(run), "--write", str(doc)]) == 0
    text = doc.read_text()
    recorded = json.loads(run.read_text())
    assert text.count("text\n") == 4 and "<!-- bench: cuda/elsewhere -->\nold\n<!-- /bench -->" in text
    assert "\nold\n" not in text.replace("<!-- bench: cuda/elsewhere -->\nold\n", "")  # the others replaced
    assert f"- [2026-01-02-test](results/2026-01-02-test/bench.json), {recorded['machine']['date']}: " in text
    assert recorded["machine"]["command"] in text
    ratio = next(r for r in recorded["rows"] if r["figure"] == "(a) / (b)")
    met = "met" if ratio["met"] else "**not met**"
    assert (f"| chain | (a) / (b) | {tables.number(ratio['median'])}× | ≥ 2 | {met} "
            f"| [2026-01-02-test](results/2026-01-02-test/bench.json) |") in text
    chain = text.split(f"<!-- bench: {backend}/chain -->\n", 1)[1].split("<!-- /bench -->", 1)[0]
    assert chain.startswith("From the run [2026-01-02-test](results/2026-01-02-test/bench.json):")
    assert "| (a) stream: 16 launches + synchronize, per op | **" in chain and "(a) / (b)" not in chain
    assert "replaced" in capsys.readouterr().out


def test_nothing_is_written_where_a_table_has_no_place(device, run, tmp_path):
    doc = document(tmp_path, [f"{device.backend}/runs", f"{device.backend}/targets"])
    before = doc.read_text()
    with pytest.raises(SystemExit, match=rf"has no place for {device.backend}/chain: add the lines .* nothing was "
                                         r"written"):
        tables.main([str(run), "--write", str(doc)])
    assert doc.read_text() == before


def test_a_file_that_is_not_a_bench_run_is_refused(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"rows": []}')
    with pytest.raises(SystemExit, match=r"other\.json is not the JSON of `python -m gpugraph bench --json`"):
        tables.main([str(other)])


def test_set_fills_only_what_a_run_lacks(device, run, tmp_path, capsys):
    recorded = json.loads(run.read_text())
    recorded["machine"].pop("compiler", None)
    recorded["machine"]["driver"] = None
    run.write_text(json.dumps(recorded))
    assert tables.main([str(run), "--set", "compiler=cc 1.0", "--set", "driver=999, CUDA 99.0",
                        "--set", "python=2.7"]) == 0
    out = capsys.readouterr().out
    assert "cc 1.0" in out and "(driver 999, CUDA 99.0)" in out
    assert f"Python {recorded['machine']['python']}" in out and "Python 2.7" not in out
