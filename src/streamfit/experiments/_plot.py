"""Figure helpers, drawn like the papers' figures: error against t on log axes
(median over replications, inter-quartile band), box plots over
replications, regret against T beside its bound, fitted slopes in the legend.

Uses matplotlib's object-oriented API (``matplotlib.figure.Figure``, no pyplot),
so drawing a report never touches a user's backend or global figure state.
"""
from __future__ import annotations

import numpy as np

from ._stats import last_decade_slope, loglog_slope

__all__ = ["new_figure", "path_band", "finish", "boxes", "value_ticks", "signed_log_y"]


def new_figure(ncols=1, nrows=1, width=5.4, height=3.9):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes.ravel()


def path_band(ax, t, paths, label, *, color=None, style="-", slope="last", marker=None,
              band=True):
    """Median over replications (rows of ``paths``) against t, with the
    inter-quartile band; the legend gives the log-log slope over the last
    decade (``slope="last"``), the whole range (``"all"``), or none."""
    paths = np.atleast_2d(np.asarray(paths, float))
    t = np.asarray(t, float)
    with np.errstate(invalid="ignore"):
        mid = np.nanmedian(paths, axis=0) if np.isfinite(paths).any() else paths[0]
    if slope == "last":
        s = last_decade_slope(t, mid)
        label = f"{label} (last-decade slope {s:+.2f})" if np.isfinite(s) else label
    elif slope == "all":
        s = loglog_slope(t, mid)
        label = f"{label} (slope {s:+.2f})" if np.isfinite(s) else label
    (line,) = ax.plot(t, mid, style, color=color, label=label, marker=marker, markersize=3,
                      lw=1.5)
    if band and paths.shape[0] > 2:
        lo, hi = np.nanpercentile(paths, [25, 75], axis=0)
        ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    return line


def finish(ax, *, xlabel, ylabel, title, logx=True, logy=True, legend=True, fontsize=7.5,
           below=False, ncol=2):
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    if legend and below:
        # many curves: the legend goes under the axes, where it hides nothing
        ax.legend(fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol,
                  frameon=False)
    elif legend:
        ax.legend(fontsize=fontsize, loc="best", framealpha=0.85)


def boxes(ax, groups, *, logy=True, shaded=()):
    """One box per (label, values) in ``groups`` (a dict), medians marked;
    boxes whose label is in ``shaded`` are filled (e.g. methods beyond the
    paper's)."""
    labels = list(groups)
    data = [np.asarray(groups[k], float) for k in labels]
    parts = ax.boxplot(data, showfliers=True, widths=0.6, medianprops={"color": "black"},
                       patch_artist=True)
    for label, box in zip(labels, parts["boxes"]):
        box.set_facecolor("#c6dbef" if label in shaded else "white")
    ax.set_xticks(np.arange(1, len(labels) + 1))
    ax.set_xticklabels(labels)
    if logy:
        ax.set_yscale("log")
    for tick in ax.get_xticklabels():
        tick.set_rotation(20)
        tick.set_fontsize(8)
    ax.grid(True, axis="y", alpha=0.3)


def value_ticks(ax, values, axis="x"):
    """Label a log axis at the scan's own values (no crowded minor labels)."""
    from matplotlib.ticker import NullFormatter

    axis = ax.xaxis if axis == "x" else ax.yaxis
    values = sorted(set(values))
    axis.set_ticks(values)
    axis.set_ticklabels([f"{v:,g}" for v in values])
    axis.set_minor_formatter(NullFormatter())


def signed_log_y(ax, values, linthresh=1.0):
    """A log y axis, or a symmetric-log one (linear within +-linthresh) when
    some values are <= 0 -- a regret can be negative, and clipping it would
    hide that."""
    values = np.asarray(values, float)
    if np.nanmin(values) <= 0:
        ax.set_yscale("symlog", linthresh=linthresh)
        ax.axhline(0, color="k", lw=0.6)
    else:
        ax.set_yscale("log")
