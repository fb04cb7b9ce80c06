"""--queue (the Kueue LocalQueue of a multi-host preset's TrainJobs) is bad input where it
cannot work, refused in one line before anything runs: a name that is no Kubernetes
label value (the job carries it as ``kueue.x-k8s.io/queue-name``, and the API server
would refuse every TrainJob of the run, hours in), and a queue for a preset that launches
no TrainJob; ``submit`` and ``plan --submit`` refuse both before they connect or probe."""

import pytest

from batchscale.cli.main import main


@pytest.mark.parametrize("queue", ["Team A's queue!", "UPPER", "-dash", "q" * 64])
def test_compile_refuses_a_queue_name_no_job_could_carry(queue, tmp_path, capsys):
    out = tmp_path / "p.yaml"
    assert main(["compile", "--preset", "tpu-v5e-4x4", f"--queue={queue}", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "queue" in err[0], err
    assert not out.exists()


def test_compile_takes_a_kueue_queue_name(tmp_path):
    out = tmp_path / "p.yaml"
    assert main(["compile", "--preset", "tpu-v5e-4x4", "--queue", "team-a.tpu", "-o", str(out)]) == 0
    assert "team-a.tpu" in out.read_text()


@pytest.mark.parametrize("command", [["submit"], ["upload"], ["plan", "--submit"]])
@pytest.mark.parametrize("preset,queue", [("cpu", "team-a"), ("tpu-v5e-4x4", "Team A")])
def test_cluster_commands_refuse_a_bad_queue_before_connecting_or_probing(command, preset, queue,
                                                                          capsys):
    code = main([*command, "--store", "gs://bucket/prefix", "--preset", preset,
                 "--queue", queue, "--host", "http://127.0.0.1:9"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "queue" in err[0], err
