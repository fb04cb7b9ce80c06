"""The typed record of a comparison of studies (``compare.compare_studies`` fills it; the
comparison's pages read it), below the rooms that read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from batchscale.analysis.reading.locations import without_root
from batchscale.analysis.reading.study_files import Damage
from batchscale.analysis.statistics.regimes import RegimeFit


@dataclass
class ComparedStudy:
    """One compared study: ``label`` names its curve (study and goal), ``study`` its rows
    in the table (its name, made unique), ``normalized`` whether its curve is in the
    normalised comparison; ``fit`` its regime fit when asked for. ``location`` is where it
    was read from (the console says so); ``private_root`` the local folder above it that
    the written pages never name (``reading.locations``), so they show ``shown_location``."""

    label: str
    study: str
    name: str
    location: str
    title: str
    goal: str
    batch_sizes: list[int]
    fit: RegimeFit | None = None
    normalized: bool = False
    private_root: str | None = None

    @property
    def shown_location(self) -> str:
        """The location as compare.html, .md and .json name it: relative to its store root
        (a local study), or its gs:// URL."""
        return without_root(self.location, self.private_root)

    def to_dict(self) -> dict:
        """As compare.json holds it (the fit as ``RegimeFit.to_dict``; the shown location)."""
        return {"label": self.label, "study": self.study, "name": self.name,
                "location": self.shown_location, "title": self.title, "goal": self.goal,
                "batch_sizes": self.batch_sizes,
                "fit": self.fit.to_dict() if self.fit is not None else None,
                "normalized": self.normalized}


@dataclass
class Comparison:
    """What ``compare_studies`` returns. ``goal``: the goal given for every study (None:
    each study's own); ``table``: the long table (TABLE_COLUMNS, plus NORMALIZED when
    normalising); ``wide``: batch_size x label of the plotted values (normalised or raw
    steps; NaN = not reached or not measured); ``figures``: file name -> SVG bytes;
    ``damaged``: the studies' files that could not be read (``Study.damaged``; each is also
    one of ``notes``, naming its study); ``loaded``: the studies as read."""

    goal: str | None
    split: str
    normalize_at: int | None
    num_trials: int | None
    studies: list[ComparedStudy]
    table: pd.DataFrame
    wide: pd.DataFrame
    figures: dict[str, bytes]
    notes: list[str]
    damaged: list[Damage] = field(default_factory=list)
    # the studies as read, in ``studies``' order: what a caller computes more from (an
    # experiment's robustness tables) without reading the store a second time
    loaded: list = field(default_factory=list, repr=False, compare=False)

    def without_roots(self, text: str) -> str:
        """``text`` without any compared study's local store root (longest first), as the
        written pages are: a note naming a damaged file names it within its store."""
        roots = {s.private_root for s in self.studies if s.private_root}
        for root in sorted(roots, key=len, reverse=True):
            text = without_root(text, root)
        return text
