"""compare on gs:// (real client, GCS emulator): studies read from a bucket and the
compare files written back into it; the numbers are tests/unit/test_compare.py's."""

from batchscale.analysis.compare import NORMALIZED, compare_studies, write_comparison
from batchscale.store.filesystem import open_root
from tests import paper_database as db
from tests.unit.test_compare import CIFAR, FM, check_outputs, steps


def test_compare_on_gcs(gcs_root):
    db.write_paper_database(gcs_root + "/a")
    db.write_paper_database(gcs_root + "/b", CIFAR)
    result = compare_studies([gcs_root + "/a", gcs_root + "/b/cifar_10"], normalize_at=2)
    assert result.studies[0].location == f"{gcs_root}/a/{FM}"
    assert steps(result, FM, NORMALIZED) == {2: 1.0, 8: 0.4}
    assert steps(result, CIFAR, NORMALIZED) == {2: 1.0, 8: 0.5}
    urls = write_comparison(result, gcs_root + "/out")
    assert urls["compare.html"] == f"{gcs_root}/out/compare.html"
    check_outputs(open_root(gcs_root + "/out"), result)
