"""Install a user's folder into the Python environment of a batchscale image, changing
nothing that the image already has: ``images/user/Dockerfile`` runs
``python -m batchscale.pipelines.user_code_install /opt/batchscale-user`` on top of the
preset's image.

The folder's ``requirements.txt`` (when there is one), then its own package (when it has a
``pyproject.toml`` or ``setup.py``), are each pip-installed under a constraint file that
pins every distribution already installed to its version: pip adds what is missing and
fails, naming the conflict, where the user's code asks for another version of something
batchscale brings (its JAX, Keras, TensorFlow, kfp...), so the trainer's numbers cannot
change under a study. Nothing is installed editable. A folder of plain modules needs no
install: the Dockerfile puts the folder on ``PYTHONPATH``.

Standard library only (it runs as a script too, in tests: ``python user_code_install.py
FOLDER`` in a throwaway virtual environment).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

PACKAGING_FILES = ("pyproject.toml", "setup.py")


def installed_pins(python: str = sys.executable) -> str:
    """Every distribution this environment holds, as ``name==version`` lines (a pip
    constraint file)."""
    return subprocess.run([python, "-m", "pip", "list", "--format=freeze"], check=True,
                          capture_output=True, text=True).stdout


def install_commands(folder: str, constraints: str, python: str = sys.executable) -> list[list[str]]:
    """The pip commands that install ``folder``: its requirements, then its package (by
    absolute path: pip reads a bare ``name`` as a requirement, not a folder)."""
    folder = os.path.abspath(folder)
    pip = [python, "-m", "pip", "install", "--constraint", constraints]
    commands = []
    if os.path.isfile(os.path.join(folder, "requirements.txt")):
        commands.append([*pip, "--requirement", os.path.join(folder, "requirements.txt")])
    if any(os.path.isfile(os.path.join(folder, name)) for name in PACKAGING_FILES):
        commands.append([*pip, folder])
    return commands


def install(folder: str, python: str = sys.executable) -> list[list[str]]:
    """Run ``install_commands``; returns what ran. Raises CalledProcessError where pip fails."""
    if not os.path.isdir(folder):
        raise SystemExit(f"user_code_install: {folder} is not a folder")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(installed_pins(python))
    try:
        commands = install_commands(folder, fh.name, python)
        for command in commands:
            print("+", " ".join(command), flush=True)
            subprocess.run(command, check=True)
    finally:
        os.unlink(fh.name)
    if not commands:
        print(f"{folder}: no requirements.txt, pyproject.toml or setup.py; its modules import "
              "from PYTHONPATH as they are")
    return commands


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m batchscale.pipelines.user_code_install FOLDER", file=sys.stderr)
        return 2
    try:
        install(args[0])
    except subprocess.CalledProcessError as err:
        print(f"user_code_install: {' '.join(err.cmd)} failed (exit {err.returncode}); a conflict "
              "above means your code needs another version of a package the image pins",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
