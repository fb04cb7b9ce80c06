"""Damaged files of a study on gs:// (the real google-cloud-storage client against the GCS
emulator): `batchscale report` names each on stderr, leaves what depends on it out, writes
the report with a "Damaged or unreadable files" section and summary.json "damaged", and
exits 3; what run --local prints from the stored report says the same; compare too. Every single-file
damage on a local store: tests/unit/test_integrity.py."""

from __future__ import annotations

import json

from batchscale.cli.analysis import EXIT_DAMAGED, print_stored_report
from batchscale.cli.main import main
from batchscale.store.filesystem import open_root
from tests import paper_database as db
from tests.unit.test_integrity import finished_study


def test_report_on_gcs_names_damaged_files_and_exits_3(gcs_root, capsys):
    spec, store = finished_study(gcs_root)
    w = spec.workload
    workload = f"{spec.name}/{w.dataset}/{w.model}/{w.optimizer}"
    cut, garbled, gone = (f"{workload}/16/1/measurements.csv", f"{workload}/32/2/metadata.json",
                          f"{workload}/64/study.json")
    store.fs.write_bytes(cut, store.fs.read_bytes(cut).rstrip(b"\r\n")[:-3])  # 0.024 -> 0.0
    store.fs.write_bytes(garbled, b"\xff\xfe garbage")
    store.fs.delete(gone)

    assert main(["report", store.url(spec.name), "--resamples", "0"]) == EXIT_DAMAGED
    out, err = capsys.readouterr()
    warnings = err.splitlines()
    assert [w.split(" ", 3)[2] for w in warnings] == [store.url(p) for p in (cut, garbled, gone)]
    assert all(w.startswith("batchscale: warning: gs://") for w in warnings)
    assert "trial 16/1 left out" in warnings[0] and "batch size 64 left out" in warnings[2]
    assert "damaged: 3 file(s) could not be read" in out

    doc = json.loads(store.fs.read_text(f"{spec.name}/report/summary.json"))
    assert [d["file"] for d in doc["damaged"]] == [store.url(p) for p in (cut, garbled, gone)]
    val = {r["batch_size"]: r["steps_to_result"] for r in doc["steps_to_result"]
           if r["split"] == "val"}
    assert val == {8: 500, 16: 330, 32: 200}  # 16: trial 2 alone; 64 left out, not empty
    assert doc["unfinished"] == []  # the damaged trials are listed as damaged, not re-read
    assert "Damaged or unreadable files</h2>" in store.fs.read_text(f"{spec.name}/report/report.html")

    assert print_stored_report(spec, store) == EXIT_DAMAGED  # what run --local ends with
    assert capsys.readouterr().err.splitlines() == warnings


def test_compare_on_gcs_names_damaged_files_and_exits_3(gcs_root, tmp_path, capsys):
    url = db.write_paper_database(gcs_root)
    fs = open_root(url)
    fs.write_text("8/3/measurements.csv", fs.read_text("8/3/measurements.csv").replace("0.15", "x", 1))
    assert main(["compare", url, "--goal", "classification_error<0.2",
                 "--out", str(tmp_path)]) == EXIT_DAMAGED
    path = fs.url("8/3/measurements.csv")
    assert capsys.readouterr().err == (
        f"batchscale: warning: {path} line 3 holds 'x', not a number; trial 8/3 left out\n")
    notes = json.loads((tmp_path / "compare.json").read_text())["notes"]
    assert any(f"damaged file left out: {path}" in note for note in notes)
