"""Step-exact checkpoints of unfinished trials: one object per trial, written atomically.

A checkpoint is what a trial needs to resume exactly where it stopped (the trainer decides
what: parameters, optimizer state, step, RNG and data-order position, measurement rows so
far). Here it is opaque: named numpy arrays plus a JSON-able ``state`` dict.

Where: ``<study>/checkpoints/<batch_size>/<trial_id>.npz``, beside the study's workload
folder and never inside a trial's folder, which the paper's released loader reads. A
finished trial's checkpoint is deleted (``delete_checkpoint``).

Format: ONE ``.npz`` (``numpy.savez``, uncompressed: it is written every few minutes and on
SIGTERM, when a pod has ~15 s) holding the arrays as ``a0, a1, ...``, a JSON header
(``__header__``, uint8: format, array names, dtypes, shapes, and ``state``) and the sha256 of
header + array bytes (``__sha256__``, uint8 hex). Arrays and state travel in one object, so
they can never come from two different writes.

Atomic: the whole object is serialised in memory first (an exception while serialising
touches nothing), then handed to ``Storage.write_bytes`` in one call. On a local folder that
writes a fsynced temp file next to the target and ``os.replace``-s it in (a process killed
mid-write leaves only a hidden ``.batchscale-tmp-*`` file; the old checkpoint stays). On GCS
it is one object upload, which GCS makes visible only once complete (a simple or multipart
upload is one request; a resumable one, which the client uses above 8 MiB, creates the
object only when its last chunk is committed): readers see the old object or the new one,
never a part.

Damage (a truncated or altered object, a bad zip, a checksum mismatch, an unknown format) is
detected on read, never taken as truth: ``read_checkpoint`` returns None, as if there were
none, and reports one line through ``log`` naming the object and the reason. The damaged
object is left in place (for inspection); the trial then starts from step 0 and its next
checkpoint replaces it.

Identity: ``write_checkpoint`` adds ``state["identity"]`` (``checkpoint_identity``: the
study's name and a digest of what a study may not change, the batch size, trial id, the
trial's parameters, and the budget it was written under). A checkpoint is restored only
into the trial it names (``identity_mismatch``): one copied from another trial or study,
or written under a budget larger than the trial's (or holding a step past it), is
reported and ignored like a damaged one, never restored into the wrong trial. Checkpoints
written before the identity existed carry none: they are accepted (every one of them was
written by its own trial at its own path; refusing them would retrain every interrupted
trial of an older store from step 0), but a step past the budget is refused for them too.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from batchscale.core.spec import StudySpec, TrialSpec
from batchscale.store.compatibility import FREE, GROWS
from batchscale.store.layout import StudyStore
from batchscale.store.npz_files import read_npz

FORMAT = "batchscale-checkpoint/1"
CHECKPOINTS_DIR = "checkpoints"  # <study>/checkpoints/: never a data set's folder
_HEADER, _DIGEST = "__header__", "__sha256__"
IDENTITY = "identity"  # the state's key for ``checkpoint_identity``


@dataclass(frozen=True)
class Checkpoint:
    """A trial's saved arrays (name -> array, dtypes and shapes as written) and state."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    state: dict = field(default_factory=dict)

    @property
    def step(self) -> int | None:
        """``state["step"]`` when the writer recorded it."""
        step = self.state.get("step")
        return int(step) if step is not None else None


def checkpoint_path(spec: StudySpec, trial: TrialSpec) -> str:
    """The checkpoint's path relative to the store root."""
    return f"{spec.name}/{CHECKPOINTS_DIR}/{trial.batch_size}/{trial.trial_id}.npz"


def write_checkpoint(store: StudyStore, spec: StudySpec, trial: TrialSpec,
                     arrays: dict[str, np.ndarray], state: dict) -> None:
    """Replace the trial's checkpoint with ``arrays`` and ``state`` (see the module docstring:
    one object, all or nothing). ``state`` must be JSON-serialisable (floats round-trip
    exactly, NaN and infinities included); arrays must not be of object dtype. The
    trial's ``checkpoint_identity`` is added to ``state``."""
    state = {**state, IDENTITY: checkpoint_identity(spec, trial)}
    store.fs.write_bytes(checkpoint_path(spec, trial), encode_checkpoint(arrays, state))


def read_checkpoint(store: StudyStore, spec: StudySpec, trial: TrialSpec,
                    log: Callable[[str], object] = print) -> Checkpoint | None:
    """The trial's checkpoint, or None when it has none, it is damaged or it is another
    trial's (``identity_mismatch``): then one ``log`` line names the object and why."""
    path = checkpoint_path(spec, trial)
    try:
        data = store.fs.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        checkpoint = decode_checkpoint(data)
    except DamagedCheckpoint as e:
        log(f"checkpoint {store.url(path)} is damaged ({e}); ignoring it, the trial starts "
            "from step 0")
        return None
    mismatch = identity_mismatch(checkpoint.state, spec, trial)
    if mismatch is not None:
        log(f"checkpoint {store.url(path)} is not this trial's ({mismatch}); ignoring it, the "
            "trial starts from step 0")
        return None
    return checkpoint


def checkpoint_identity(spec: StudySpec, trial: TrialSpec) -> dict:
    """Whose checkpoint this is: the study (its name, and the SHA-256 of every spec field a
    study may not change: ``compatibility``), the trial (batch size, id, parameters) and
    ``max_steps``, the budget it was written under (a larger one continues it)."""
    fixed = {k: v for k, v in spec.to_dict().items() if k not in GROWS and k not in FREE
             and k not in ("protocol", "name")}
    digest = hashlib.sha256(json.dumps(fixed, sort_keys=True).encode("utf-8")).hexdigest()
    return {"study": spec.name, "study_sha256": digest, "batch_size": trial.batch_size,
            "trial_id": trial.trial_id, "parameters": trial.parameters,
            "max_steps": spec.max_steps[trial.batch_size]}


def identity_mismatch(state: dict, spec: StudySpec, trial: TrialSpec) -> str | None:
    """What makes a checkpoint's ``state`` not one to resume ``trial`` from, in words (None:
    it is the trial's): another study, batch size, trial or parameters; a budget larger than
    the trial's; a step that is not a whole number within the trial's budget. A state
    without an identity (written before it existed) is checked for its step only; a
    ``trial`` without parameters (known by its id only) is not compared by them."""
    budget = spec.max_steps[trial.batch_size]
    step = state.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return f"step {_show(step)} is not a step count"
    have = state.get(IDENTITY)
    if have is not None:
        if not isinstance(have, dict):
            return f"its identity is {_show(have)}, not an object"
        want = checkpoint_identity(spec, trial)
        for key in ("study", "study_sha256", "batch_size", "trial_id", "parameters"):
            if key == "parameters" and not trial.parameters:
                continue  # a caller that knows the trial by id only (the report's list)
            if not _same(have.get(key), want[key]):
                return f"{key} {_show(have.get(key))} there, {_show(want[key])} here"
        written = have.get("max_steps")
        if not isinstance(written, int) or isinstance(written, bool) or written > budget:
            return (f"written under a budget of {_show(written)} steps, more than this "
                    f"trial's {budget}")
    if step > budget:
        return f"step {step} is past the trial's budget of {budget}"
    return None


def _same(a, b) -> bool:
    """Equal as JSON (the state's parameters went through JSON; floats round-trip exactly)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _show(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def delete_checkpoint(store: StudyStore, spec: StudySpec, trial: TrialSpec) -> None:
    """Remove the trial's checkpoint (a finished trial keeps none); no error if it has none."""
    store.fs.delete(checkpoint_path(spec, trial))


class DamagedCheckpoint(ValueError):
    """A checkpoint's bytes are not a complete, unaltered checkpoint."""


def encode_checkpoint(arrays: dict[str, np.ndarray], state: dict) -> bytes:
    """The checkpoint object's bytes (``.npz``, uncompressed)."""
    values = []
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"checkpoint arrays: key {name!r} must be a str")
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError(f"checkpoint arrays: {name!r} has dtype object; use a numeric dtype")
        values.append(array)
    try:
        header = json.dumps({"format": FORMAT, "names": list(arrays),
                             "dtypes": [a.dtype.name for a in values],
                             "shapes": [list(a.shape) for a in values], "state": state},
                            sort_keys=True).encode("utf-8")
    except TypeError as e:
        raise TypeError(f"checkpoint state: must be JSON-serialisable ({e})") from None
    members = {f"a{i}": a for i, a in enumerate(values)}
    members[_HEADER] = np.frombuffer(header, dtype=np.uint8)
    members[_DIGEST] = np.frombuffer(_digest(header, values).encode("ascii"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    return buffer.getvalue()


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Parse and verify a checkpoint object; DamagedCheckpoint says why it is not one."""
    try:
        npz = read_npz(data)
        header_bytes = npz[_HEADER].tobytes()
        digest = npz[_DIGEST].tobytes().decode("ascii")
        header = json.loads(header_bytes)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise DamagedCheckpoint(f"not a {FORMAT} object")
        names, dtypes, shapes, state = (header[k] for k in ("names", "dtypes", "shapes", "state"))
        if not len(names) == len(dtypes) == len(shapes):
            raise DamagedCheckpoint("header lists differ in length")
        values = [_restore_dtype(npz[f"a{i}"], name) for i, name in enumerate(dtypes)]
    except DamagedCheckpoint:
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as e:
        raise DamagedCheckpoint(f"unreadable: {type(e).__name__}: {e}") from None
    if [list(a.shape) for a in values] != shapes:
        raise DamagedCheckpoint("array shapes differ from the header")
    if _digest(header_bytes, values) != digest:
        raise DamagedCheckpoint("sha256 mismatch")
    return Checkpoint(arrays=dict(zip(names, values)), state=state)


def _digest(header: bytes, arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256(header)
    for array in arrays:
        h.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def _restore_dtype(array: np.ndarray, name: str) -> np.ndarray:
    """.npy stores extension dtypes (bfloat16 from ml_dtypes) as raw void bytes: view them back."""
    if array.dtype.name == name:
        return array
    try:
        dtype = np.dtype(name)
    except TypeError:
        try:
            import ml_dtypes  # noqa: F401  (registers bfloat16 & co with numpy)
            dtype = np.dtype(name)
        except (ImportError, TypeError):
            raise DamagedCheckpoint(f"unknown dtype {name!r}") from None
    if dtype.itemsize != array.dtype.itemsize:
        raise DamagedCheckpoint(f"dtype {array.dtype.name} differs from the header's {name}")
    return array.view(dtype)
