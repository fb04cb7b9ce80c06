"""``batchscale images``: build and push the images a preset needs, and write the ``--images`` file.

  batchscale images --registry REGION-docker.pkg.dev/PROJECT/REPO [--preset P]
                    [--user-code FOLDER] [--cloud-build] [--output build/images.json]

One command for what docs/gke.md otherwise spells as a skaffold line per preset: it runs

  skaffold build [-p PROFILES] --default-repo=REGISTRY --file-output OUTPUT

in the checkout of the repository this batchscale runs from (skaffold.yaml and images/
are the build's context; ``--source`` names another checkout). The profiles follow from
the preset's image and whether the study's model is the user's (``core.images``:
``BASE_PROFILES``, ``USER_PROFILES``; ``--user-code`` sets ``BATCHSCALE_USER_CODE``) and
``--cloud-build`` (Google Cloud Build instead of the local Docker engine). skaffold
pushes every image (skaffold.yaml: ``push: true``) and writes skaffold's ``--file-output``
JSON, which ``compile``/``upload``/``submit``/``plan --submit`` read with ``--images``;
the file is read back (``read_images_file``) and must name every image the preset's
pipeline uses. Without skaffold on PATH, or outside a checkout, one line says so and
gives the command to run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from batchscale.core.errors import CommandFailed, InputError
from batchscale.core.images import (
    BASE_PROFILES,
    LIGHT,
    USER,
    USER_CODE_ENV,
    USER_PROFILES,
    read_images_file,
)

DEFAULT_OUTPUT = os.path.join("build", "images.json")
CLOUD_BUILD = "cloud-build"  # skaffold.yaml's profile: build on Google Cloud Build
INSTALL = "https://skaffold.dev/docs/install/"
# host[:port]/path...: Artifact Registry (REGION-docker.pkg.dev/PROJECT/REPO), gcr.io/PROJECT, ...
_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+$")


def add_commands(sub) -> None:
    """Register ``images`` on the CLI's subparsers."""
    from batchscale.core.presets import DEFAULT
    from batchscale.pipelines.placement import PRESETS

    cmd = sub.add_parser("images", help="build and push the images a preset needs (skaffold) "
                         "and write the --images file")
    cmd.add_argument("--registry", required=True, metavar="REGISTRY",
                     help="where to push, e.g. us-docker.pkg.dev/PROJECT/batchscale "
                          "(skaffold's --default-repo)")
    cmd.add_argument("--preset", default=DEFAULT, choices=list(PRESETS),
                     help="the preset the studies train on: its trainer image is built beside "
                          "the light one (default: cpu)")
    cmd.add_argument("--user-code", metavar="FOLDER",
                     help="your model's folder (workload.model: module:function): also build "
                          "batchscale-user, that folder on the preset's image")
    cmd.add_argument("--cloud-build", action="store_true",
                     help="build on Google Cloud Build instead of the local Docker engine")
    cmd.add_argument("--output", default=DEFAULT_OUTPUT, metavar="FILE",
                     help=f"the --images file to write (default: {DEFAULT_OUTPUT})")
    cmd.add_argument("--source", metavar="FOLDER",
                     help="the batchscale checkout to build (default: the one this batchscale "
                          "runs from)")
    cmd.set_defaults(func=cmd_images)


def check_registry(registry: str) -> str:
    """The registry without a trailing slash; one line when it is not HOST/PATH."""
    value = registry.strip().rstrip("/")
    if "://" in value:
        raise InputError(f"--registry: {registry!r}: no scheme; give HOST/PATH, e.g. "
                         "us-docker.pkg.dev/PROJECT/batchscale")
    if not _REGISTRY.match(value):
        raise InputError(f"--registry: {registry!r} is not a registry path; allowed: HOST/PATH "
                         "in lower case, e.g. us-docker.pkg.dev/PROJECT/batchscale or gcr.io/PROJECT")
    return value


def profiles_for(preset_image: str, user_code: bool, cloud_build: bool) -> list[str]:
    """skaffold.yaml's profiles that build ``preset_image`` (and the light image), with the
    user's code on it when ``user_code``, on Cloud Build when ``cloud_build``."""
    if user_code and cloud_build:
        raise InputError("--user-code and --cloud-build: the user image builds with the local "
                         "Docker engine only (images/user/build.sh); drop --cloud-build")
    profile = USER_PROFILES[preset_image] if user_code else BASE_PROFILES[preset_image]
    return [p for p in (profile, CLOUD_BUILD if cloud_build else "") if p]


def skaffold_command(registry: str, output: str, profiles: list[str]) -> list[str]:
    """The exact command ``batchscale images`` runs."""
    chosen = ["-p", ",".join(profiles)] if profiles else []
    return ["skaffold", "build", *chosen, f"--default-repo={registry}", "--file-output", output]


def default_source() -> Path:
    """The checkout this batchscale is installed from (an editable install's repository):
    the folder above the package (batchscale/cli/images.py)."""
    return Path(__file__).resolve().parents[2]


def needed_images(preset_image: str, user_code: bool) -> set[str]:
    """Every image a pipeline on this preset names: the light steps' and the trainer's."""
    return {LIGHT, USER if user_code else preset_image}


def cmd_images(args: argparse.Namespace) -> int:
    from batchscale.pipelines.placement import get_preset

    registry = check_registry(args.registry)
    preset_image = get_preset(args.preset).image
    profiles = profiles_for(preset_image, bool(args.user_code), args.cloud_build)
    user_code = os.path.abspath(args.user_code) if args.user_code else None
    if user_code and not os.path.isdir(user_code):
        raise InputError(f"--user-code: {args.user_code} is not a folder")
    output = os.path.abspath(args.output)
    command = skaffold_command(registry, output, profiles)
    source = Path(args.source).resolve() if args.source else default_source()
    shown = (f"{USER_CODE_ENV}={shlex.quote(user_code)} " if user_code else "") + shlex.join(command)
    if not (source / "skaffold.yaml").is_file():
        raise InputError(f"{'--source: ' if args.source else ''}no skaffold.yaml in {source}: "
                         "`batchscale images` builds a checkout of the batchscale repository; "
                         f"pass --source CHECKOUT, or run there: {shown}")
    if shutil.which("skaffold") is None:
        raise CommandFailed(f"skaffold is not on PATH; install it ({INSTALL}), then run "
                            f"`batchscale images` again, or in {source}: {shown}")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    print(f"running in {source}: {shown}", file=sys.stderr, flush=True)
    env = {**os.environ, **({USER_CODE_ENV: user_code} if user_code else {})}
    done = subprocess.run(command, cwd=source, env=env, check=False)
    if done.returncode != 0:
        raise CommandFailed(f"skaffold build exited with status {done.returncode} (its output is "
                            f"above); {output} was not written by this build")
    images = read_images_file(output)
    missing = sorted(needed_images(preset_image, bool(user_code)) - set(images))
    if missing:
        raise CommandFailed(f"skaffold wrote {output} without {', '.join(missing)}; check the "
                            "profiles of skaffold.yaml")
    for name in sorted(images):
        print(f"{name}: {images[name]}")
    print(f"wrote {output}; pass it as --images {args.output} (compile, upload, submit, plan "
          f"--submit) with --preset {args.preset}")
    return 0
