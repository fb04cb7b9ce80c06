"""The one rule for a program or file a test needs beyond README's install
(tests/system_tools.py): outside CI the test skips, naming what is missing and how to get
it; with CI set it fails with the same words. Each user of the rule is tried with its tool
made absent: a PATH without the browser, no kustomize, an empty Debian folder."""

from __future__ import annotations

import pytest

from tests import browser, kustomize_build, system_tools
from tests.system_tools import in_ci, missing, program
from tests.unit import test_fashion_mnist


@pytest.mark.parametrize("value, expected", [
    ("", False), ("0", False), ("false", False), ("No", False), ("true", True), ("1", True),
    ("yes", True)])
def test_ci_is_any_value_but_empty_0_false_or_no(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_missing_skips_outside_ci_and_fails_in_ci_with_the_same_words(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        missing("a widget", "apt-get install widget")
    assert str(skipped.value) == ("needs a widget, which is not here: apt-get install widget "
                                  "(CI's .ci/run installs it)")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        missing("a widget", "apt-get install widget")
    assert str(failed.value) == f"CI must have it: {skipped.value}"


def test_program_is_the_first_name_found_on_path(tmp_path, monkeypatch):
    for name in ("second", "third"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert program("first", "second", "third", what="w", how="h") == str(tmp_path / "second")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs w, which is not here: h"):
        program("first", what="w", how="h")


@pytest.fixture
def outside_ci(monkeypatch, tmp_path):
    """No CI variable and a PATH that holds nothing."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return monkeypatch


def test_without_chromium_the_browser_tests_skip_naming_it(outside_ci):
    with pytest.raises(pytest.skip.Exception, match=r"headless Chromium .*apt-get install chromium"):
        browser.chromium()


def test_without_any_kustomize_the_manifest_tests_skip_saying_how_to_get_one(outside_ci, tmp_path):
    outside_ci.setattr(kustomize_build, "implementations", lambda: {})
    with pytest.raises(pytest.skip.Exception) as skipped:
        kustomize_build.kustomize_builds(tmp_path)
    assert "pykustomize==0.1.4" in str(skipped.value) and "kubectl >= 1.21" in str(skipped.value)
    outside_ci.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="^CI must have it: needs a kustomize v4"):
        kustomize_build.kustomize_builds(tmp_path)


def test_without_debians_files_the_fashion_mnist_tests_skip_naming_the_package(outside_ci, tmp_path):
    outside_ci.setattr(test_fashion_mnist, "DEBIAN_FOLDER", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="apt-get install dataset-fashion-mnist"):
        test_fashion_mnist.debian_files()


def test_the_rule_is_written_once():
    """Every user calls system_tools; none reads the CI variable itself."""
    import inspect

    for module in (browser, kustomize_build, test_fashion_mnist):
        source = inspect.getsource(module)
        assert "system_tools import" in source and '"CI"' not in source, module.__name__
    assert system_tools.in_ci.__module__ == "tests.system_tools"
