"""What every figure of the analysis shares: a matplotlib figure on the Agg backend (no
display, imported only when a figure is drawn) saved as SVG, numeric columns that tolerate
missing or odd values, log axes with plain-number ticks, legends and notes under the axes.

Why SVG: the figures are read in report.html, at 100% zoom, and opened from the report
folder on their own. Vector graphics stay sharp at any zoom, and with text kept as text
(``svg.fonttype: none``) they are smaller than 110-dpi PNGs were (the digits study: 296 kB
for nine figures against 525 kB), where PNGs at twice the resolution would be 1.2 MB.

Legibility: an SVG figure shows at its own size, 1 pt = 4/3 CSS px, unless it is wider
than the report's column (``PAGE_WIDTH_PX``), which scales it down. So every figure is at
most ``MAX_WIDTH_IN`` wide and no text is smaller than ``SMALLEST_PT`` (11.3 px on
screen); every size comes from ``FONT`` (the tests read every text element of every
figure back). Tick labels are plain numbers, never mathtext powers, whose 70%-size
exponents would fall under the floor.
"""

from __future__ import annotations

import functools
import io
import math
import re
import textwrap

import numpy as np
import pandas as pd

PAGE_WIDTH_PX = 1118  # report.html's column: 1150 px max-width less 2 x 1em padding
MAX_WIDTH_IN = 11.5  # 1104 px: the widest figure still shown at its own size
WIDTH_IN, HEIGHT_IN = 5.5, 4.1  # one panel; two fit side by side in the column (2 x 528 px)
SMALLEST_PT = 8.5
FONT = {"note": SMALLEST_PT, "tick": 9.0, "legend": 9.0, "label": 10.0, "title": 11.0,
        "suptitle": 12.0}
STYLE = {
    "font.size": FONT["label"], "axes.titlesize": FONT["title"], "axes.labelsize": FONT["label"],
    "xtick.labelsize": FONT["tick"], "ytick.labelsize": FONT["tick"],
    "legend.fontsize": FONT["legend"], "legend.title_fontsize": FONT["legend"],
    "figure.titlesize": FONT["suptitle"], "figure.labelsize": FONT["label"],
    "axes.formatter.use_mathtext": False,
    # matplotlib lays text out in DejaVu Sans (it ships with it); the SVG names it and close
    # fallbacks for a browser without it (matplotlib's default list is 11 names a text)
    "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "svg.fonttype": "none",  # text as <text>: small files, selectable, searchable
    "svg.hashsalt": "batchscale",  # ids from content, not random: the same study, the same bytes
}


def drawing(function):
    """Run a figure function under ``STYLE`` (sizes are read when artists are made and
    when the figure is saved, so the whole function runs inside it); rcParams outside,
    a notebook's for one, are left as they were."""
    @functools.wraps(function)
    def styled(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return function(*args, **kwargs)
    return styled


def figure(width: float = WIDTH_IN, height: float = HEIGHT_IN):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if width > MAX_WIDTH_IN:
        raise ValueError(f"a figure {width} in wide would be scaled below its font sizes")
    return plt, plt.subplots(figsize=(width, height))


def panels(nrows: int, ncols: int, width: float, height: float):
    """A figure of ``nrows`` x ``ncols`` axes, flattened."""
    plt, (fig, ax) = figure(width, height)
    fig.delaxes(ax)
    return plt, fig, np.asarray(fig.subplots(nrows, ncols, squeeze=False)).ravel()


_DOCTYPE = re.compile(rb"<!DOCTYPE[^>]*>\s*")


def svg(plt, fig, rect=None) -> bytes:
    """The figure as SVG bytes, laid out tight (``rect``: the part of the figure the axes
    may use), then closed. No date, no creator, no DOCTYPE: the bytes depend on the data
    alone, and the file names no URL but the SVG namespace."""
    buffer = io.BytesIO()
    if rect is None:
        fig.tight_layout()
    else:
        fig.tight_layout(rect=rect)
    fig.savefig(buffer, format="svg",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    return _DOCTYPE.sub(b"", buffer.getvalue(), count=1)


def numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if frame is None or column not in frame:
        return np.full(0 if frame is None else len(frame), math.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def no_data(ax, text: str, y: float = 0.5) -> None:
    ax.text(0.5, y, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=FONT["label"], color="0.4")


def legend(ax, **kwargs) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, **kwargs)


def plain(value: float) -> str:
    """A tick label without exponent form: 0.001, 0.05, 20, 4096, 1048576; 1e-5 and 2.5e9
    only outside 1e-4 .. 1e9, where the zeros would be hard to count."""
    if float(value).is_integer() and abs(value) < 1e9:
        return str(int(value))
    if not 1e-4 <= abs(value) < 1e9:
        return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m[1].replace("+", "") + m[2],
                      f"{value:.2g}")
    return np.format_float_positional(value, precision=3, unique=True, fractional=False,
                                      trim="-")


def log_axis(ax, which: str = "x", base: float = 10) -> None:
    """A log axis with plain-number tick labels: the powers of ``base`` (base 2: 8, 16,
    32, ...; thinned by matplotlib when there are many); where fewer than three of them
    fall inside the axis, also 2 and 5 times them (base 2: 1.5 times), then every
    multiple 1 to 9, so a narrow axis still reads. Other minor ticks are unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=base)
    low, high = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    choices = [(1.0,), (1.0, 1.5)] if base == 2 else [(1.0,), (1.0, 2.0, 5.0),
                                                      tuple(float(k) for k in range(1, 10))]
    for subs in choices:
        locator = LogLocator(base=base, subs=subs)
        ticks = locator.tick_values(low, high)
        if ((ticks >= low * (1 - 1e-9)) & (ticks <= high * (1 + 1e-9))).sum() >= 3:
            break
    axis.set_major_locator(locator)
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain(v)))
    axis.set_minor_formatter(NullFormatter())


def log2_axes(ax, xlabel: str, ylabel: str, title: str, logy: bool = True) -> None:
    log_axis(ax, "x", 2)
    if logy:
        log_axis(ax, "y", 2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def footnote(fig, notes: list[str]) -> tuple[float, float, float, float] | None:
    """Notes written under the axes, wrapped to the figure's width; returns the
    tight_layout rect that leaves room for them."""
    if not notes:
        return None
    width_pt, height_pt = (72 * v for v in fig.get_size_inches())
    chars = max(40, int(width_pt / (0.55 * FONT["note"])))  # DejaVu Sans: ~0.55 em a character
    lines = [line for note in notes for line in textwrap.wrap(note, chars)][:6]
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=FONT["note"], color="0.3", va="bottom",
             ha="left")
    share = (len(lines) * 1.25 * FONT["note"] + 6) / height_pt
    return (0, min(0.45, share), 1, 1)
