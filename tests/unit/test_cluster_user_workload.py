"""The rules that put a user's model on a cluster, as plain functions: which image builds
the model (``core.images.trainer_reference``), the module a file becomes in the image
(``pipelines.cluster_workload.module_for``), and the card the UI shows
(``core.workload_card``), for the user's files and for the registry's data."""

from __future__ import annotations

import pytest

from batchscale.core.images import (
    LIGHT,
    TRAINER_GPU,
    TRAINER_TPU,
    USER,
    trainer_reference,
    user_image_base,
)
from batchscale.core.spec import DataFiles, Workload
from batchscale.core.workload_card import workload_line, workload_markdown, workload_metadata
from batchscale.pipelines.cluster_workload import module_for

BUILD = {LIGHT: "r/light@sha256:1", TRAINER_GPU: "r/gpu@sha256:2", USER: "r/user@sha256:3"}


def test_the_user_image_builds_the_users_model_on_its_own_base():
    assert trainer_reference(TRAINER_GPU, BUILD, user_code=True) == BUILD[USER]
    assert trainer_reference(TRAINER_GPU, BUILD, user_code=False) == BUILD[TRAINER_GPU]
    assert trainer_reference(LIGHT, None, user_code=True) == f"{USER}:dev"
    assert trainer_reference(LIGHT, None, user_code=False) == f"{LIGHT}:dev"
    assert user_image_base({LIGHT: "a", USER: "b"}) == LIGHT
    assert user_image_base({LIGHT: "a", TRAINER_TPU: "c", USER: "b"}) == TRAINER_TPU
    with pytest.raises(ValueError, match="built on batchscale-trainer-gpu, but this preset trains "
                                         "on batchscale-light.*-p user "):
        trainer_reference(LIGHT, BUILD, user_code=True)  # a GPU build on the cpu preset
    with pytest.raises(ValueError, match="not both"):
        user_image_base({TRAINER_GPU: "a", TRAINER_TPU: "b", USER: "c"})
    with pytest.raises(ValueError, match=f"no {USER}.*BATCHSCALE_USER_CODE=FOLDER skaffold build "
                                         "-p user-tpu"):
        trainer_reference(TRAINER_TPU, {LIGHT: "a", TRAINER_TPU: "b"}, user_code=True)


@pytest.mark.parametrize("path, module", [
    ("models/cnn.py", "models.cnn"), ("./models/cnn.py", "models.cnn"), ("cnn.py", "cnn"),
    ("/home/me/project/cnn.py", "cnn"), ("../other/cnn.py", "cnn"), ("C:/work/cnn.py", "cnn"),
])
def test_a_file_becomes_the_module_its_folder_gives_it(path, module):
    assert module_for(path) == module


def test_the_card_names_the_users_function_and_files():
    files = DataFiles("gs://b/tables/houses.csv", "csv", label="price", validation_fraction=0.2, seed=7)
    workload = Workload(files.name, "my_models.mlp:build", "adamw", task="regression", data=files)
    page = workload_markdown("houses", workload, {"location": "gs://b/s/datasets/x", "reused": True,
                                                  "split_sizes": {"train": 8000, "validation": 2000}})
    assert "| model | `my_models.mlp:build` (your function, from the trainer image) |" in page
    assert ("| data | `gs://b/tables/houses.csv` (csv; label column `price`; without a validation "
            "split, 0.2 of train is carved off with seed 7) |") in page
    assert f"| data set in the store | `{files.name}` |" in page
    assert "| task | regression |" in page
    assert "| prepared splits | `gs://b/s/datasets/x` (re-used) |" in page
    assert "| examples | train 8,000, validation 2,000 |" in page
    assert workload_metadata(workload) == {
        "model": "my_models.mlp:build", "dataset": files.name, "optimizer": "adamw",
        "data_path": "gs://b/tables/houses.csv", "data_format": "csv", "task": "regression"}
    assert workload_line(workload) == ("model my_models.mlp:build on data gs://b/tables/houses.csv, "
                                       "optimizer adamw")


def test_the_card_of_a_registry_workload_names_the_registry():
    page = workload_markdown("q", Workload("mnist_5k", "fc_128_128", "momentum"))
    assert "| model | `fc_128_128` (batchscale's registry) |" in page
    assert "| data | `mnist_5k` (batchscale's registry) |" in page
    assert "data set in the store" not in page and "task" not in page
