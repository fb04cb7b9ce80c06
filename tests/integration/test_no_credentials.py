"""No credential, key or real project id in the repository or in a compiled pipeline.

Scans every file git tracks (and new files it would track) for private keys, service
account key JSON, Google API keys, OAuth secrets and tokens, and for project ids in the
places a project id goes (service-account emails, Workload Identity pools, resource
names, registry paths, Config Connector annotations, --project flags): those must be
placeholders. A real id committed by mistake fails here.
"""

import re
import subprocess
from pathlib import Path

import pytest

from batchscale.pipelines.placement import PRESETS
from batchscale.pipelines.study import compile_pipeline
from batchscale.validation import default_spec_dict, parse_spec
from tests.system_tools import program

ROOT = Path(__file__).resolve().parents[2]

SECRETS = {
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "service account key JSON": re.compile(r'"(private_key|private_key_id)"\s*:'),
    "Google API key": re.compile(r"AIza[0-9A-Za-z_\-]{35}"),
    "OAuth client secret": re.compile(r"GOCSPX-[0-9A-Za-z_\-]{10,}"),
    "OAuth access token": re.compile(r"ya29\.[0-9A-Za-z_\-]{20,}"),
    "GitHub token": re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"),
    "AWS access key": re.compile(r"AKIA[0-9A-Z]{16}"),
}
PROJECT_ID_PLACES = [
    re.compile(r"@([a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com"),
    re.compile(r"([a-z][a-z0-9-]{4,28}[a-z0-9])\.svc\.id\.goog"),
    re.compile(r"projects/([a-z][a-z0-9-]{4,28}[a-z0-9])/"),
    re.compile(r"-docker\.pkg\.dev/([a-z][a-z0-9-]{4,28}[a-z0-9])/"),
    re.compile(r"gcr\.io/([a-z][a-z0-9-]{4,28}[a-z0-9])/"),
    re.compile(r"project-id:\s*['\"]?([a-z][a-z0-9-]{4,28}[a-z0-9])"),
    re.compile(r"--project[= ]([a-z][a-z0-9-]{4,28}[a-z0-9])\b"),
    re.compile(r"\bproject_id\s*=\s*['\"]?([a-z][a-z0-9-]{4,28}[a-z0-9])"),  # env files, code
]
# Placeholders: the shipped example, and values tests substitute to prove settings flow.
PLACEHOLDER = re.compile(r"^(example-[a-z0-9-]+|other-proj-[0-9]+|my-project)$")


def problems(text: str) -> list[str]:
    found = [name for name, pattern in SECRETS.items() if pattern.search(text)]
    for pattern in PROJECT_ID_PLACES:
        found += [f"project id {m.group(1)!r}" for m in pattern.finditer(text)
                  if not PLACEHOLDER.match(m.group(1))]
    return found


def _repository_files():
    git = program("git", what="git (the files checked are those `git ls-files` lists)",
                  how="apt-get install git")
    listed = subprocess.run([git, "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def test_the_scanner_catches_what_it_looks_for():
    assert problems('{"type": "service_account", "private_key": "x"}') == ["service account key JSON"]
    assert problems("key AIza" + "A" * 35) == ["Google API key"]
    assert problems("iam.gke.io/gcp-service-account: sa@acme-prod-42.iam.gserviceaccount.com") == [
        "project id 'acme-prod-42'"]
    assert problems("serviceAccount:example-project.svc.id.goog[kubeflow/batchscale-runner]") == []
    assert problems("--project=acme-prod-42 and us-docker.pkg.dev/example-project/batchscale/x") == [
        "project id 'acme-prod-42'"]


def test_no_credentials_or_project_ids_in_the_repository():
    files = _repository_files()
    assert len(files) > 50  # the scan really ran over the tree
    found = {}
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if path.name == Path(__file__).name:
            continue  # this file spells out the patterns it looks for
        if hits := problems(text):
            found[str(path.relative_to(ROOT))] = hits
    assert not found, found


@pytest.mark.parametrize("preset", list(PRESETS))
def test_no_credentials_in_the_compiled_pipeline(tmp_path, preset):
    spec = parse_spec({**default_spec_dict(), "store": "gs://example-project-batchscale-store/studies"})
    path = compile_pipeline(spec, str(tmp_path / "p.yaml"), store_root=spec.store, preset=preset)
    text = Path(path).read_text()
    assert problems(text) == []
    assert "secretAsEnv" not in text and "secretAsVolume" not in text  # no mounted secrets either
