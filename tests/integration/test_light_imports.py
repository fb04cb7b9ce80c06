"""Importing the light parts of batchscale pulls in no heavy library.

The CLI, the spec checks and the registries answer in a fraction of a second because
TensorFlow, Keras, JAX, scikit-learn and the GCS client are imported only where they
are used. Only a fresh interpreter can show it (a test process has imported them all
long before), so each check runs one: a subprocess, hence this tier.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_checking_a_model_name_imports_no_heavy_library():
    code = ("import sys; from batchscale.workloads.models import check_model_name, model_tasks; "
            "check_model_name('resnet_50', 'classification'); model_tasks('lstm'); "
            "print(sorted(m for m in ('keras', 'jax', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_workload_registry_import_pulls_in_no_heavy_library():
    heavy = ("tensorflow", "keras", "jax", "mlxtend", "sklearn")
    code = ("import sys, batchscale.workloads, batchscale.core.spec; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_data_set_registry_imports_no_tensorflow():
    code = ("import sys, batchscale.workloads.dataset_registry; "
            "assert not any(m.split('.')[0] in ('tensorflow', 'tensorflow_datasets') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_storage_import_is_side_effect_free():
    """Importing the module must not pull in the GCS client (slow, optional)."""
    code = (
        "import sys, batchscale.store.filesystem\n"
        "assert 'google.cloud.storage' not in sys.modules, 'eager GCS import'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True)


def test_a_trial_imports_keras_without_its_optional_integrations():
    """select_backend imports Keras with scikit-learn, pandas and matplotlib hidden (over
    half a second a pack process); Keras still builds and runs a model, and the three
    import normally afterwards."""
    code = (
        "import sys\n"
        "from batchscale.training.keras_setup import KERAS_OPTIONAL_IMPORTS, select_backend\n"
        "select_backend('jax')\n"
        "import keras, numpy as np\n"
        "print(sorted(m for m in KERAS_OPTIONAL_IMPORTS if m in sys.modules))\n"
        "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
        "print(model.predict_on_batch(np.ones((4, 3), 'float32')).shape)\n"
        "import pandas, sklearn, matplotlib\n"
        "print(pandas.DataFrame({'a': [1]}).shape, sklearn.__name__, matplotlib.__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["[]", "(4, 2)", "(1, 1) sklearn matplotlib"]


def test_validate_of_a_registry_workload_imports_no_keras(tmp_path):
    """`batchscale validate` runs the user-workload deep check only for a user's model or
    files: a registry workload (even with an Adam-family optimizer) stays light."""
    spec = tmp_path / "study.yaml"
    spec.write_text(f"name: light\nstore: {tmp_path / 'store'}\n"
                    "workload: {dataset: mnist_5k, model: fc_128_128, optimizer: adamw}\n")
    code = ("import sys\nfrom batchscale.cli.main import main\n"
            f"code = main(['validate', {str(spec)!r}])\n"
            "print(code, sorted(m for m in ('keras', 'jax', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"
