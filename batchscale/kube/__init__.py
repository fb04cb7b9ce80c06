"""The Kubernetes side of a multi-host pack: the TrainJob (or JobSet) one pack task
creates (``trainjob_manifest``: plain dicts, no client) and its launch, following and
clean-up through the official ``kubernetes`` client (``trainjob_launch``)."""
