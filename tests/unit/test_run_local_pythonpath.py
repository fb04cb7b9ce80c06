"""run --local hands its kfp.local tasks a PYTHONPATH whose entries are absolute.

The check before the run imports a user's ``module:function`` in the user's folder; the
tasks run in the work folder, where ``PYTHONPATH=.`` would name another place and the
pack would fail (module not importable) after the data was prepared.
"""

import os

from batchscale.cli.local_pipeline import absolute_pythonpath


def test_relative_and_empty_entries_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([".", "src", "", "/opt/code"])}
    got = absolute_pythonpath(env)["PYTHONPATH"].split(os.pathsep)
    assert got == [str(tmp_path), str(tmp_path / "src"), str(tmp_path), "/opt/code"]


def test_unset_or_empty_pythonpath_adds_nothing():
    assert absolute_pythonpath({}) == {}
    assert absolute_pythonpath({"PYTHONPATH": ""}) == {}
