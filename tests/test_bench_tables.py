"""tools/dev/bench_tables.py renders docs/performance.md's tables from bench runs' JSON, in place between their
markers: everything it shows comes from the JSON; the runs and targets blocks hold every run the tables cite, the
runs of tables kept included; a target gives its figure in each run and the runs it was met in; nothing is written
when a table has no place, a cited run is missing or a file is not a bench JSON."""

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


def variant(run, tmp_path, folder, ratio, workloads=("chain",), date=None):
    """A copy of ``run`` kept in results/``folder``/, its figures given for each of ``workloads``, its (a) / (b)
    at ``ratio`` (met from 2 on) and its date ``date``."""
    recorded = json.loads(run.read_text())
    recorded["rows"] = [{**row, "workload": workload} for workload in workloads for row in recorded["rows"]]
    for row in recorded["rows"]:
        if row["figure"] == "(a) / (b)":
            row["median"], row["met"] = ratio, ratio >= 2
    if date is not None:
        recorded["machine"]["date"] = date
    path = tmp_path / "results" / folder / "bench.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(recorded))
    return path


def block(text, name):
    return text.split(f"<!-- bench: {name} -->\n", 1)[1].split("\n<!-- /bench -->", 1)[0]


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
    assert recorded["machine"]["command"].replace(str(run), "bench.json") in text  # (the path as the file is kept)
    ratio = next(r for r in recorded["rows"] if r["figure"] == "(a) / (b)")
    met = "met" if ratio["met"] else "**not met**"
    assert (f"| chain | (a) / (b) | ≥ 2 | {tables.number(ratio['median'])}× in "
            f"[2026-01-02-test](results/2026-01-02-test/bench.json) | {met} |") in text
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


def test_a_run_entry_shows_what_its_json_records(device, run, tmp_path, capsys):
    """The driver and the packages' versions come from the run's machine record (added there where the bench did
    not record them); the command shows its --json path as the file is kept."""
    recorded = json.loads(run.read_text())
    recorded["machine"]["driver"] = "999.1, CUDA 99.0"
    recorded["machine"]["versions"] = {"cuda-bindings": "99.2", "torch": "99.3"}
    recorded["machine"]["command"] = "python -m gpugraph bench --repeats 2 --json /elsewhere/out/run-7.json"
    run.write_text(json.dumps(recorded))
    assert tables.main([str(run)]) == 0
    entry = block(capsys.readouterr().out, f"{device.backend}/runs")
    assert "(driver 999.1, CUDA 99.0)" in entry and "PyTorch 99.3" in entry
    assert ("cuda-bindings 99.2" in entry) == (device.backend == "cuda")  # the CUDA backend's package only
    assert entry.endswith("`python -m gpugraph bench --repeats 2 --json bench.json`")


def test_a_target_met_in_one_run_and_missed_in_another_says_which(device, run, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # printed links are relative to ./docs
    missed = variant(run, tmp_path, "2026-01-03-missed", 1.5, workloads=("chain", "branches"))
    met = variant(run, tmp_path, "2026-01-04-met", 2.5)
    assert tables.main([str(missed), str(met)]) == 0  # chain's table from the later run, branches' from the other
    targets = block(capsys.readouterr().out, f"{device.backend}/targets").splitlines()
    link = "[2026-01-0{0}-{1}](../results/2026-01-0{0}-{1}/bench.json)".format
    assert targets[2:] == [
        f"| chain | (a) / (b) | ≥ 2 | 2.50× in {link(4, 'met')}; 1.50× in {link(3, 'missed')} "
        f"| met in 2026-01-04-met; **not met** in 2026-01-03-missed |",
        f"| branches | (a) / (b) | ≥ 2 | 1.50× in {link(3, 'missed')} | **not met** |"]


def test_rendering_one_run_keeps_the_runs_the_kept_tables_cite(device, run, tmp_path):
    backend = device.backend
    doc = document(tmp_path, [f"{backend}/runs", f"{backend}/targets", f"{backend}/chain", f"{backend}/branches"])
    older = variant(run, tmp_path, "2026-01-03-branches", 1.5, workloads=("branches",))
    assert tables.main([str(run), str(older), "--write", str(doc)]) == 0
    newer = variant(run, tmp_path, "2026-01-09-chain", 2.5, date="2026-01-09")
    assert tables.main([str(newer), "--write", str(doc)]) == 0  # the chain table only: branches' stays
    text = doc.read_text()
    assert block(text, f"{backend}/chain").startswith("From the run [2026-01-09-chain]")
    assert block(text, f"{backend}/branches").startswith("From the run [2026-01-03-branches]")
    runs = block(text, f"{backend}/runs")
    assert [line.split("]")[0] for line in runs.splitlines() if line.startswith("- [")] == [
        "- [2026-01-09-chain", "- [2026-01-03-branches"]  # the run no table cites is gone
    targets = block(text, f"{backend}/targets")
    assert "| branches | (a) / (b) | ≥ 2 | 1.50× in [2026-01-03-branches]" in targets
    assert "2026-01-02-test" not in targets


def test_nothing_is_written_where_a_cited_run_is_missing(device, run, tmp_path):
    backend = device.backend
    doc = document(tmp_path, [f"{backend}/runs", f"{backend}/targets", f"{backend}/chain", f"{backend}/branches"])
    gone = variant(run, tmp_path, "2026-01-03-gone", 1.5, workloads=("branches",))
    assert tables.main([str(run), str(gone), "--write", str(doc)]) == 0
    gone.unlink()
    before = doc.read_text()
    with pytest.raises(SystemExit, match=r"2026-01-03-gone/bench\.json does not exist; .* nothing was written"):
        tables.main([str(run), "--write", str(doc)])
    assert doc.read_text() == before
