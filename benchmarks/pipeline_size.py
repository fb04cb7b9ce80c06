"""How big a paper-size study's pipeline is on a cluster: loop iterations, pods, compiled
size, with one pack per loop iteration (the design before issue 30) and with lanes.

``python benchmarks/pipeline_size.py [--lanes N]``

A paper-size study: 14 batch sizes (2 ... 16,384) x 100 trials, 3 rounds. For each case
it compiles the study with ``batchscale compile`` (the cluster's default parallelism, or
``--lanes``) and counts with ``pipelines.pipeline_size`` (KFP 2.17's Argo compiler: a
driver pod per task, see there):

- per pack: each loop iterates once per pack, round 1's packs (``make_packs`` at the
  preset's pack size) in every round, the bound the issue quoted (later rounds add up to
  as many again);
- lanes: each loop at most its ``parallelism`` iterations (one-pod lanes: ``--lanes``;
  a multi-host preset's second loop: 2), whatever the study's size.

Both counts use the same compiled DAG (one iteration of either design is one pack task
with its retry wrapper). TrainJob pods of multi-host packs are not the pipeline's and are
not counted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from batchscale.cli.main import main as cli  # noqa: E402
from batchscale.cli.options import CLUSTER_PARALLELISM  # noqa: E402
from batchscale.pipelines.pipeline_size import size  # noqa: E402
from batchscale.pipelines.placement import multi_host_preset, pack_size_for  # noqa: E402
from batchscale.rounds.stage_lanes import multi_host_rule, split_multi_host  # noqa: E402
from batchscale.search.packs import make_packs  # noqa: E402
from batchscale.validation import parse_spec  # noqa: E402

BATCH_SIZES = ",".join(str(2**k) for k in range(1, 15))
CASES = [("mnist/simple_cnn_base", "cpu"), ("mnist/simple_cnn_base", "nvidia-l4"),
         ("mnist/simple_cnn_base", "tpu-v5e-2x2"), ("imagenet/resnet_50", "tpu-v5e-2x4"),
         ("imagenet/resnet_50", "tpu-v5e-4x4")]  # the last: multi-host, two loops a round


def measure(workload: str, preset: str, lanes: int, folder: str) -> dict:
    path = os.path.join(folder, f"{workload.replace('/', '-')}-{preset}.yaml")
    flags = ["compile", "--workload", workload, "--batch-sizes", BATCH_SIZES, "--trials", "100",
             "--pipeline-store", "gs://bucket/studies", "--preset", preset, "--output", path,
             "--parallelism", str(lanes)]
    assert cli(flags) == 0
    import yaml

    with open(path) as fh:
        doc = next(d for d in yaml.safe_load_all(fh) if d and "root" in d)
    spec = parse_spec(doc["root"]["inputDefinitions"]["parameters"]["study_spec"]["defaultValue"])
    multi = multi_host_preset(preset)
    if multi is None:
        packs = len(make_packs(spec, pack_size_for(spec, preset)))
        return {"packs": packs, "per_pack": size(path, packs), "lanes": size(path)}
    one_pod, spanning = split_multi_host(make_packs(spec, pack_size_for(spec, multi.single_host)),
                                         multi_host_rule(preset), pack_size_for(spec, preset))

    def per_pack(task: dict) -> int:  # each loop over its own kind's packs
        one = task["iteratorPolicy"]["parallelismLimit"] == lanes
        return len(one_pod) if one else len(spanning)

    return {"packs": len(one_pod) + len(spanning), "per_pack": size(path, per_pack),
            "lanes": size(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=CLUSTER_PARALLELISM)
    args = parser.parse_args()
    rows = [("workload", "preset", "round-1 packs", "per pack: iterations / pods",
             f"lanes ({args.lanes}; multi-host 2): iterations / pods", "compiled KiB")]
    with tempfile.TemporaryDirectory() as folder:
        for workload, preset in CASES:
            m = measure(workload, preset, args.lanes, folder)
            rows.append((workload, preset, str(m["packs"]),
                         f"{m['per_pack'].iterations} / {m['per_pack'].pods}",
                         f"{m['lanes'].iterations} / {m['lanes'].pods}",
                         f"{m['lanes'].size_bytes / 1024:.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows))


if __name__ == "__main__":
    main()
