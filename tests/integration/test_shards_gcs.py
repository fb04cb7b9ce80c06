"""Sharded data sets on gs://: written and streamed back like local ones (GCS emulator).

The shard format and the reader are tested on a local store in tests/unit/test_shards.py.
"""

from batchscale.workloads.shards import ShardReader, ordered_examples
from tests.unit.test_shards import _labels, _write


def test_shards_on_gcs_read_back_like_local_ones(tmp_path, gcs_root):
    local_fs, local = _write(tmp_path, n=17, per_shard=3)
    gcs_fs, remote = _write(gcs_root, n=17, per_shard=3)
    assert remote == local
    assert gcs_fs.url(f"datasets/toy/{remote['shards'][0]}").startswith("gs://")
    on_gcs = ShardReader(gcs_fs, "datasets/toy", remote["shards"], parallel_reads=4, prefetch=2)
    on_disk = ShardReader(local_fs, "datasets/toy", local["shards"])
    assert _labels(on_gcs.shards(seed=5)) == _labels(on_disk.shards(seed=5))
    got = [bytes(e["image"]) for e in ordered_examples(on_gcs.shards())]
    assert got == [bytes([i]) * (i + 1) for i in range(17)]
