"""Container images of the components: their names, and the references a build produced.

Plain constants and functions: nothing here looks at the environment. The components
are declared with the ``:dev`` placeholders below; ``batchscale compile --images
build/images.json`` swaps in the references skaffold built (``skaffold build
--file-output build/images.json``), so a compiled pipeline names digests, not tags.
"""

from __future__ import annotations

import json

LIGHT = "batchscale-light"  # CPU steps (data prep, search, goals, aggregate) and cpu trials
TRAINER_GPU = "batchscale-trainer-gpu"  # JAX with CUDA, TensorFlow CPU for input
TRAINER_TPU = "batchscale-trainer-tpu"  # JAX with libtpu, TensorFlow CPU for input
IMAGE_NAMES = (LIGHT, TRAINER_GPU, TRAINER_TPU)  # skaffold's artifact names, one per images/ folder

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
        raise ValueError(f"--images: {path} not found; write it with `skaffold build "
                         f"--file-output {path}`") from None
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"--images: {path} is not skaffold's --file-output JSON "
                         '({"builds": [{"imageName": ..., "tag": ...}]})') from None
    unknown = sorted(set(images) - set(IMAGE_NAMES))
    if unknown:
        raise ValueError(f"--images: {path} names unknown images {unknown}; "
                         f"allowed: {', '.join(IMAGE_NAMES)}")
    return images


def image_reference(name: str, images: dict[str, str] | None) -> str:
    """The reference for ``name``: the built one when ``images`` is given, else the placeholder."""
    if images is None:
        return placeholder(name)
    if name not in images:
        profile = {TRAINER_GPU: " -p gpu", TRAINER_TPU: " -p tpu"}.get(name, "")
        raise ValueError(f"--images: the build has no {name}; build it with "
                         f"`skaffold build{profile} --file-output build/images.json`")
    return images[name]
