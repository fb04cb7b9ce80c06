"""Upload a study's pipeline to Kubeflow Pipelines and start runs of it, idempotently.
An experiment (``core.experiment``) goes the same way as its own pipeline,
``batchscale-experiment-<preset>``: one run for all its studies.

One KFP pipeline per placement preset, ``batchscale-study-<preset>``: the preset fixes the
trainer's image, accelerator, node selectors and tolerations together, which no single
run parameter can carry. Each compiled variant is a pipeline version named
``<study>-<first 12 hex of the YAML's sha256>``, so uploading the same thing twice
creates nothing, and a changed spec (or image, or store) adds one version beside the old.

KFP's upload of a new pipeline also creates its first version, named after the pipeline
(not after us). We use that version as is, and recognise it on later uploads by its
content: its pipeline_spec equals our compiled YAML. Nothing is ever deleted.

Plain functions over a ``kfp.Client``; connecting is ``batchscale.pipelines.kfp_connect``'s job.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import time

from batchscale.core.experiment import ExperimentSpec
from batchscale.core.spec import SpecError, StudySpec
from batchscale.core.workload_card import workload_line
from batchscale.pipelines.gke_settings import KSA_NAME

DESCRIPTION = ("batchscale: steps to a goal validation error against batch size (Shallue et al. "
               "2019); one pipeline per trainer placement preset, versions named <study>-<hash>.")


def compile_yaml(spec: StudySpec | ExperimentSpec, preset: str, images: dict | None, store_root: str,
                 path: str, queue: str = "") -> str:
    """Compile the study's (or the experiment's) pipeline for ``preset`` to ``path``;
    returns the YAML text."""
    from batchscale.pipelines.experiment import compile_experiment_pipeline
    from batchscale.pipelines.study import compile_pipeline

    compile = compile_experiment_pipeline if isinstance(spec, ExperimentSpec) else compile_pipeline
    compile(spec, path, store_root=store_root, preset=preset, images=images, queue=queue)
    with open(path) as fh:
        return fh.read()


def _published_as(spec: StudySpec | ExperimentSpec, preset: str) -> tuple[str, str, str]:
    """(pipeline name, run parameter, version description) of a study or an experiment:
    an experiment is its own pipeline (``pipelines.experiment``), one run for all its studies."""
    from batchscale.pipelines.experiment import PARAMETER, experiment_pipeline_name
    from batchscale.pipelines.study import pipeline_name

    if isinstance(spec, ExperimentSpec):
        return (experiment_pipeline_name(preset), PARAMETER,
                f"experiment {spec.name}, preset {preset}: {spec.axis.label} over "
                f"{', '.join(s.label for s in spec.studies)}")
    return (pipeline_name(preset), "study_spec",
            f"study {spec.name}, preset {preset}: {workload_line(spec.workload)}")


def version_name(spec: StudySpec | ExperimentSpec, yaml_text: str) -> str:
    return f"{spec.name}-{hashlib.sha256(yaml_text.encode()).hexdigest()[:12]}"


def _as_struct(value):
    """JSON as a protobuf Struct holds it (numbers are floats), for comparing specs."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {k: _as_struct(v) for k, v in value.items()}
    return [_as_struct(v) for v in value]


def spec_forms(yaml_text: str) -> list:
    """The forms KFP may return a version's pipeline_spec in, for this YAML: the pipeline
    document alone, or ``{pipeline_spec, platform_spec}`` when a platform document follows."""
    from batchscale.pipelines.compiled_yaml import load_documents

    docs = [d for d in load_documents(yaml_text) if d is not None]
    forms = [_as_struct(docs[0])]
    if len(docs) > 1:
        forms.append(_as_struct({"pipeline_spec": docs[0], "platform_spec": docs[1]}))
    return forms


def _quietly(call, *args, **kwargs):
    """kfp.Client prints 'Pipeline details: ...' lines; the CLI prints its own."""
    with contextlib.redirect_stdout(io.StringIO()):
        return call(*args, **kwargs)


def list_versions(client, pipeline_id: str) -> list:
    """Every version of the pipeline, following next_page_token."""
    versions, token = [], ""
    while True:
        answer = client.list_pipeline_versions(pipeline_id, page_token=token, page_size=100)
        versions.extend(answer.pipeline_versions or [])
        token = answer.next_page_token
        if not token:
            return versions


def find_version(client, pipeline_id: str, pipeline: str, wanted: str, yaml_text: str):
    """Our version of the pipeline: named ``wanted``, or KFP's first version (named after the
    pipeline) holding the same compiled spec; None when neither exists."""
    versions = list_versions(client, pipeline_id)
    for version in versions:
        if wanted in (version.display_name, version.name):
            return version
    forms = spec_forms(yaml_text)
    for version in versions:
        if pipeline in (version.display_name, version.name):
            spec = version.pipeline_spec
            if spec is None:  # a list may leave specs out; the version itself has it
                spec = client.get_pipeline_version(pipeline_id, version.pipeline_version_id).pipeline_spec
            if _as_struct(spec) in forms:
                return version
    return None


def upload(client, spec: StudySpec | ExperimentSpec, preset: str, images: dict | None = None,
           store_root: str = "", queue: str = "") -> dict:
    """Make sure KFP holds this compiled pipeline; returns its ids and whether anything was created.

    ``store_root`` becomes the default of the pipeline's store_root parameter.
    """
    name, _, description = _published_as(spec, preset)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.yaml")
        text = compile_yaml(spec, preset, images, store_root, path, queue)
        wanted = version_name(spec, text)
        pipeline_id = client.get_pipeline_id(name)
        created = pipeline_created = False
        version = None
        if pipeline_id is None:
            pipeline_id = _quietly(client.upload_pipeline, path, pipeline_name=name,
                                   description=DESCRIPTION).pipeline_id
            created = pipeline_created = True
        version = find_version(client, pipeline_id, name, wanted, text)
        if version is None:
            version = _quietly(client.upload_pipeline_version, path, pipeline_version_name=wanted,
                               pipeline_id=pipeline_id,
                               description=description)
            created = True
    return {"pipeline_id": pipeline_id, "version_id": version.pipeline_version_id,
            "pipeline_name": name, "version_name": version.display_name or version.name,
            "created": created, "pipeline_created": pipeline_created}


def require_gs_store(spec: StudySpec | ExperimentSpec) -> None:
    """A cluster run writes to a bucket: refuse a local store before anything is sent."""
    if not spec.store.startswith("gs://"):
        raise SpecError(f"store: a cluster run needs a gs://bucket/prefix store, not {spec.store!r}; "
                        "pass --store gs://BUCKET/PREFIX or set store in the spec")


def get_or_create_experiment(client, name: str) -> tuple[str, bool]:
    """The id of the experiment named ``name`` (created when absent), and whether it was created."""
    try:
        return client.get_experiment(experiment_name=name).experiment_id, False
    except ValueError as err:
        if not str(err).startswith("No experiment is found"):
            raise
    return _quietly(client.create_experiment, name).experiment_id, True


def run_url(ui_base: str, run_id: str) -> str:
    return f"{ui_base.rstrip('/')}/#/runs/details/{run_id}"


def submit(client, spec: StudySpec | ExperimentSpec, preset: str, images: dict | None = None,
           experiment: str | None = None,
           pipeline_root: str | None = None, service_account: str = KSA_NAME,
           run_name: str | None = None, ui_base: str = "", queue: str = "") -> dict:
    """Upload (idempotently) and start a run of the study in its experiment; returns the ids and URL."""
    require_gs_store(spec)
    published = upload(client, spec, preset, images=images, store_root=spec.store, queue=queue)
    experiment = experiment or spec.name
    experiment_id, experiment_created = get_or_create_experiment(client, experiment)
    run_name = run_name or f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    pipeline_root = pipeline_root or f"{spec.store.rstrip('/')}/pipeline-root"
    run = _quietly(
        client.run_pipeline, experiment_id, job_name=run_name,
        pipeline_id=published["pipeline_id"], version_id=published["version_id"],
        params={_published_as(spec, preset)[1]: spec.to_dict(), "store_root": spec.store},
        pipeline_root=pipeline_root, service_account=service_account or None)
    return {**published, "run_id": run.run_id, "run_name": run_name, "experiment_id": experiment_id,
            "experiment": experiment, "experiment_created": experiment_created,
            "pipeline_root": pipeline_root, "url": run_url(ui_base, run.run_id)}
