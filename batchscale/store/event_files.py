"""Trials' live curves as TensorBoard event files in the store.

TensorBoard reads *event files*: ``Event`` protos, each framed as a TFRecord (length,
masked CRC-32C, data, masked CRC-32C). They are built here with TensorBoard's own protos
and record framing (``tensorboard.compat.proto``, ``tensorboard.summary.writer``,
``tensorboard.plugins.hparams.summary_v2``: none of them imports TensorFlow, so a JAX
trial stays free of it) and written through the store's ``Storage``, so a local folder
and ``gs://`` get the same files, with the store's retries. TensorBoard reads both:
``tensorboard --logdir STORE/STUDY``.

Layout: one TensorBoard *run* per trial,
``<study>/tensorboard/batch_size=<B>/trial=<id>/`` (numbers zero-padded so that runs sort
by batch size, then trial; the HParams dashboard also sorts by the ``batch_size`` hparam).
A run holds one file per process that trained the trial, named
``events.out.tfevents.<epoch seconds to the microsecond>.<host>.<pid>.<n>.batchscale``
(``n`` counts this process's segments) so that later segments sort after earlier ones,
as TensorBoard reads them, and no two share a name: whole seconds alone gave two
segments one name when a trial was stopped and resumed within a second in one process,
and the second overwrote the first. Each such *segment* holds the
trial's whole history as that process knows it (rows restored from a checkpoint, then its
own) and begins with ``SessionLog.START`` at its first step, which tells TensorBoard to
drop what earlier segments recorded from that step on: a trial resumed from a checkpoint
shows one curve, not the evaluations its killed process made after the checkpoint twice.

A segment only ever grows (``EventStream``): a local file is appended to in place and
an object rewritten whole (``Storage.write_grown``), so a TensorBoard following it reads
each new record once.
"""

from __future__ import annotations

import io
import itertools
import os
import socket

TENSORBOARD_DIR = "tensorboard"
FILE_VERSION = "brain.Event:2"  # the event-file version TensorBoard's writers stamp


def run_name(batch_size: int, trial_id: int) -> str:
    """A trial's TensorBoard run, relative to ``<study>/tensorboard``."""
    return f"batch_size={batch_size:05d}/trial={trial_id:03d}"


def run_dir(study: str, batch_size: int, trial_id: int) -> str:
    return f"{study}/{TENSORBOARD_DIR}/{run_name(batch_size, trial_id)}"


_SEGMENTS = itertools.count(1)  # segments this process has started


def segment_name(started: float) -> str:
    """The file name of a segment started at ``started`` (epoch seconds) by this process:
    unique, and in the order segments start (while epoch seconds have ten digits)."""
    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname()) or "host"
    return (f"events.out.tfevents.{started:017.6f}.{host}.{os.getpid()}.{next(_SEGMENTS)}"
            ".batchscale")


class EventStream:
    """An append-only event file in the store: events are framed and buffered by
    ``add``, and ``flush`` stores the file (only the new bytes, where the store can
    append)."""

    def __init__(self, fs, path: str):
        from tensorboard.summary.writer.record_writer import RecordWriter

        self.fs, self.path = fs, path
        self._buffer = io.BytesIO()
        self._records = RecordWriter(self._buffer)
        self._stored = 0  # bytes the store holds already

    def add(self, event) -> None:
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        data = self._buffer.getvalue()
        if len(data) > self._stored:
            self.fs.write_grown(self.path, data, self._stored)
            self._stored = len(data)


def file_version_event(wall_time: float):
    from tensorboard.compat.proto.event_pb2 import Event

    return Event(wall_time=wall_time, step=0, file_version=FILE_VERSION)


def start_event(step: int, wall_time: float):
    """``SessionLog.START`` at ``step``: TensorBoard drops earlier data from ``step`` on."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    return Event(wall_time=wall_time, step=step, session_log=SessionLog(status=SessionLog.START))


def scalars_event(step: int, wall_time: float, values: dict[str, float]):
    """One evaluation: a scalar per tag (float32 in TensorBoard, as every writer stores)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))
                             for tag, value in values.items()])
    return Event(wall_time=wall_time, step=step, summary=summary)


def hparams_event(hparams: dict, trial: str, wall_time: float):
    """The HParams dashboard's session start: the trial's metaparameters and batch size."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.plugins.hparams.summary_v2 import hparams_pb

    return Event(wall_time=wall_time, step=0,
                 summary=hparams_pb(hparams, trial_id=trial, start_time_secs=wall_time))


def session_end_event(status: str, wall_time: float):
    """The HParams dashboard's session end: a COMPLETE trial succeeded; an INFEASIBLE one
    (diverged) failed."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    code = api_pb2.STATUS_SUCCESS if status == "COMPLETE" else api_pb2.STATUS_FAILURE
    data = plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(status=code, end_time_secs=wall_time))
    value = Summary.Value(tag=metadata.SESSION_END_INFO_TAG, tensor=metadata.NULL_TENSOR,
                          metadata=metadata.create_summary_metadata(data))
    return Event(wall_time=wall_time, step=0, summary=Summary(value=[value]))
