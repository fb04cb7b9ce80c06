"""The report: built from trials trained into a gs:// store (GCS emulator, real client),
read back by `batchscale report gs://…`, and rendered by a real headless Chromium with
no network: every figure must decode from the file itself."""

import json
import os
import shutil
import subprocess

import pytest

from components.store import StudyStore
from pipelines.cli import main


def test_report_from_gcs(gcs_study, capsys):
    assert main(["report", f"{gcs_study}/tiny"]) == 0
    out = capsys.readouterr().out
    assert "goal classification_error<0.2 (val)" in out
    assert f"report: {gcs_study}/tiny/report/report.html" in out
    store = StudyStore(gcs_study)
    summary = json.loads(store.fs.read_text("tiny/report/summary.json"))
    assert [row["batch_size"] for row in summary["validation"]] == [16, 128]
    assert {"report.html", "summary.md", "steps_to_result.csv", "goal_steps.csv",
            "steps_to_result.png"} <= set(store.fs.list_files("tiny/report"))


def _chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found and not os.environ.get("CI"):
        pytest.skip("headless Chromium not installed (CI installs Debian's chromium)")
    assert found, "CI must install chromium (see .ci/run)"
    return found


def test_html_report_renders_its_figures_offline(gcs_study, tmp_path):
    chromium = _chromium()
    html = StudyStore(gcs_study).fs.read_text("tiny/report/report.html")
    probe = ("<script>window.addEventListener('load', () => { document.body.setAttribute("
             "'data-figures', JSON.stringify([...document.images].map(i => [i.complete, "
             "i.naturalWidth, i.naturalHeight]))); });</script></body>")
    page = tmp_path / "report.html"
    page.write_text(html.replace("</body>", probe))
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    start = out.stdout.index('data-figures="') + len('data-figures="')
    figures = json.loads(out.stdout[start:out.stdout.index('"', start)].replace("&quot;", '"'))
    assert len(figures) == 2  # steps-to-result plot and best-trial curves
    for complete, width, height in figures:
        assert complete and width > 300 and height > 200
