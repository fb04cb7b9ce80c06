"""A broken model function through the real ``batchscale`` command: exit 2, one line on
stderr naming ``workload.model`` and the problem, the store byte-identical and nothing
started (``training.workload_check`` runs in ``build_spec``, before any command writes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cli_bad_input import _snapshot

ROOT = Path(__file__).resolve().parents[2]
SPEC = """name: own
store: {store}
workload: {{dataset: digits, model: "{model}"}}
goals: ["classification_error<0.1"]
"""
MODELS = {
    "syntax": ("def build(params:\n    return None\n", "model.py, line 1: SyntaxError: "),
    "raises": ("def build(params):\n    raise KeyError('units')\n",
               "model.py:build raised KeyError: 'units'"),
}


@pytest.mark.parametrize("command", [["validate"], ["run", "--local"]])
@pytest.mark.parametrize("case", sorted(MODELS))
def test_a_broken_model_exits_2_with_one_line_and_the_store_untouched(case, command, tmp_path):
    text, message = MODELS[case]
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    (store / "own").mkdir(parents=True)
    (store / "own" / "notes.txt").write_text("a study would be here\n")
    (tmp_path / "model.py").write_text(text)
    (tmp_path / "spec.yaml").write_text(SPEC.format(store=store, model="../model.py:build"))
    before = _snapshot(store)
    result = subprocess.run([sys.executable, "-m", "batchscale.cli", *command, "../spec.yaml"],
                            cwd=work, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchscale: error: workload.model: "), result.stderr
    assert message in lines[0]
    assert result.stdout == "" and _snapshot(store) == before and list(work.iterdir()) == []
