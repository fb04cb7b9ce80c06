"""Container images of the components: their names, and the references a build produced.

Plain constants and functions: nothing here looks at the environment. The components
are declared with the ``:dev`` placeholders below; ``batchscale compile --images
build/images.json`` swaps in the references skaffold built (``skaffold build
--file-output build/images.json``), so a compiled pipeline names digests, not tags.

A user's own model runs in ``batchscale-user`` (``images/user/``): their folder installed on
top of the image the preset trains on, built by skaffold's ``user`` profiles. Where the
study's model is the user's, it fills the trainer's role (``trainer_reference``): every
task that builds the model runs in it.
"""

from __future__ import annotations

import json

from batchscale.core.errors import InputError

LIGHT = "batchscale-light"  # CPU steps (data prep, search, goals, aggregate) and cpu trials
TRAINER_GPU = "batchscale-trainer-gpu"  # JAX with CUDA, TensorFlow CPU for input
TRAINER_TPU = "batchscale-trainer-tpu"  # JAX with libtpu, TensorFlow CPU for input
USER = "batchscale-user"  # the user's code on top of one of the three (images/user/)
BASES = (LIGHT, TRAINER_GPU, TRAINER_TPU)  # what the user image may be built on
IMAGE_NAMES = (*BASES, USER)  # skaffold's artifact names, one per images/ folder
# The skaffold profile that builds each base, and the one that builds the user image on it.
BASE_PROFILES = {LIGHT: "", TRAINER_GPU: "gpu", TRAINER_TPU: "tpu"}
USER_PROFILES = {LIGHT: "user", TRAINER_GPU: "user-gpu", TRAINER_TPU: "user-tpu"}
USER_CODE_ENV = "BATCHSCALE_USER_CODE"  # the folder the user profiles build into the image

LIGHT_IMAGE = f"{LIGHT}:dev"  # every component's declared image; placement sets the preset's


def placeholder(name: str) -> str:
    """The reference used when no build is given: ``<name>:dev``."""
    return f"{name}:dev"


def read_images_file(path: str) -> dict[str, str]:
    """Image name -> built reference, from skaffold's ``--file-output`` JSON.

    The file looks like ``{"builds": [{"imageName": "batchscale-light", "tag":
    "REPO/batchscale-light:TAG@sha256:..."}]}``. Unknown image names are refused, so a
    typo in skaffold.yaml cannot silently leave a placeholder in the pipeline.
    """
    try:
        with open(path) as fh:
            builds = json.load(fh)["builds"]
        images = {b["imageName"]: b["tag"] for b in builds}
    except FileNotFoundError:
        raise InputError(f"--images: {path} not found; write it with `skaffold build "
                         f"--file-output {path}`") from None
    except (ValueError, KeyError, TypeError):
        raise InputError(f"--images: {path} is not skaffold's --file-output JSON "
                         '({"builds": [{"imageName": ..., "tag": ...}]})') from None
    unknown = sorted(set(images) - set(IMAGE_NAMES))
    if unknown:
        raise InputError(f"--images: {path} names unknown images {unknown}; "
                         f"allowed: {', '.join(IMAGE_NAMES)}")
    return images


def image_reference(name: str, images: dict[str, str] | None) -> str:
    """The reference for ``name``: the built one when ``images`` is given, else the placeholder."""
    if images is None:
        return placeholder(name)
    if name not in images:
        profile = f" -p {BASE_PROFILES[name]}" if BASE_PROFILES.get(name) else ""
        raise InputError(f"--images: the build has no {name}; build it with "
                         f"`skaffold build{profile} --file-output build/images.json`")
    return images[name]


def user_build_command(base: str) -> str:
    """The command that builds the user image on ``base`` (for messages and docs)."""
    return (f"{USER_CODE_ENV}=FOLDER skaffold build -p {USER_PROFILES[base]} "
            "--default-repo=REPO --file-output build/images.json")


def user_image_base(images: dict[str, str]) -> str:
    """The image a build's ``batchscale-user`` was built on. Each user profile builds the
    user image on the one trainer image it builds beside it (``user-gpu``: trainer-gpu,
    ``user-tpu``: trainer-tpu), or on the light image (``user``) when it builds none; a
    build holding both trainers and a user image was not made by one profile."""
    trainers = [name for name in (TRAINER_GPU, TRAINER_TPU) if name in images]
    if len(trainers) > 1:
        raise InputError(f"--images: a build with {USER} holds the one image it was built on, "
                         f"not both {' and '.join(trainers)}; build it with one user profile "
                         f"(`{user_build_command(TRAINER_GPU)}`)")
    return trainers[0] if trainers else LIGHT


def trainer_reference(preset_image: str, images: dict[str, str] | None, user_code: bool) -> str:
    """The image of the tasks that build the model (pack training, step-time probes, the
    plan's probes) on a preset whose image is ``preset_image``. ``user_code``: the study's
    model is the user's function, which only the user image holds: ``preset_image`` with
    the user's folder installed on top, so the build must have made it on that image.
    Otherwise the preset's own image (a build's user image is not needed for a registry
    model). Without a build (``images`` None): the placeholder of the one that would be used."""
    if not user_code:
        return image_reference(preset_image, images)
    if images is None:
        return placeholder(USER)
    if USER not in images:
        raise InputError(f"--images: the build has no {USER}, the image with your model's code; "
                         f"build it with `{user_build_command(preset_image)}`")
    base = user_image_base(images)
    if base != preset_image:
        raise InputError(f"--images: {USER} was built on {base}, but this preset trains on "
                         f"{preset_image}; build it with `{user_build_command(preset_image)}`")
    return images[USER]
