"""skaffold's dependency list for batchscale-user (``custom.dependencies.command``): every
file of YOUR folder ($BATCHSCALE_USER_CODE), and this folder's Dockerfile and build.sh, as a
JSON list of absolute paths. skaffold hashes them to decide whether its cached image is
still good, so an edit to your code rebuilds the image instead of re-using a stale one.
Hidden folders (.git, .venv, ...) and __pycache__ are left out. Run from the repository
root, as skaffold does: ``python3 images/user/code_files.py``.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIPPED = {"__pycache__", "node_modules"}


def code_files(folder: str) -> list[str]:
    files = [os.path.join(HERE, "Dockerfile"), os.path.join(HERE, "build.sh")]
    for root, dirs, names in os.walk(os.path.abspath(folder)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED)
        files += [os.path.join(root, name) for name in sorted(names) if not name.endswith(".pyc")]
    return files


def main() -> int:
    folder = os.environ.get("BATCHSCALE_USER_CODE", "")
    if not os.path.isdir(folder):
        print(f"BATCHSCALE_USER_CODE={folder} is not a folder; run "
              "BATCHSCALE_USER_CODE=/path/to/your/code skaffold build -p user ...", file=sys.stderr)
        return 2
    print(json.dumps(code_files(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
