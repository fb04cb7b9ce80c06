"""What a cluster's pods need of a study whose model or data is the user's own.

On a cluster every task runs in a container image. The user's model function
(``workload.model: "my_pkg.models:build"``, ``core.names.is_model_function``) must be in
the image of every task that builds the model: pack training with its step-time probes,
and the plan's probes. That image is ``batchscale-user`` (``images/user/``: the user's
folder installed on top of the preset's image), chosen by ``core.images.trainer_reference``.
The light steps (data preparation, planning rounds, the report) never build the model
and stay on the light image.

A reference to a file on this machine reaches no pod: a model named by its file
(``path/to/file.py:build``) or data at a local path. Compiling for a cluster refuses
either in one line naming what to write instead: the module the image holds (its folder
is on the pod's ``PYTHONPATH``), or the data copied to the bucket. ``batchscale run
--local`` builds the same pipeline on this machine and is not checked: there the files
are where the spec says.
"""

from __future__ import annotations

import posixpath

from batchscale.core.errors import fail_field
from batchscale.core.images import trainer_reference
from batchscale.core.names import is_model_function
from batchscale.core.spec import StudySpec

GUIDE = "docs/gke.md, 'Your own model on the cluster'"


def uses_user_model(spec: StudySpec) -> bool:
    return is_model_function(spec.workload.model)


def model_image(spec: StudySpec, preset_image: str, images: dict[str, str] | None) -> str:
    """The image of the tasks that build ``spec``'s model on a preset whose own image is
    ``preset_image``: the user image for the user's model, else the preset's."""
    return trainer_reference(preset_image, images, user_code=uses_user_model(spec))


def module_for(path: str) -> str:
    """The module name a file has once its folder is on ``sys.path``: ``models/cnn.py`` ->
    ``models.cnn``; an absolute or upward path gives its file's stem alone (the file at the
    top of the folder built into the image)."""
    path = posixpath.normpath(path.replace("\\", "/"))
    if path.startswith(("/", "..")) or ":" in path.split("/")[0]:
        path = posixpath.basename(path)
    return path.removesuffix(".py").replace("/", ".")


def check_reachable(spec: StudySpec) -> None:
    """Refuse (SpecError, one line) what a pod cannot reach: a model named by a file on
    this machine, or data at a local path."""
    model = spec.workload.model
    if is_model_function(model):
        where, _, function = model.rpartition(":")
        if where.endswith(".py"):
            fail_field("workload.model", f"{model!r} names a file on this machine, which no cluster "
                       f"pod can read; build the folder holding it into the trainer image and name "
                       f"the function by its module, e.g. {module_for(where) + ':' + function!r} "
                       f"({GUIDE})")
    data = spec.workload.data
    if data is not None and not data.path.startswith("gs://"):
        copy = "gcloud storage cp " + ("-r " if data.format == "images" else "")
        fail_field("workload.dataset.path", f"{data.path!r} is on this machine, which no cluster pod "
                   f"can read; copy it to your bucket (`{copy}{data.path} gs://BUCKET/data/`) and "
                   "give that gs:// path")


def check_for_cluster(spec: StudySpec, preset_image: str, images: dict[str, str] | None) -> None:
    """Everything a cluster compile refuses about the user's workload, before anything is
    compiled or sent: unreachable references, and a build without the right user image."""
    check_reachable(spec)
    model_image(spec, preset_image, images)
