"""Figures of the training-dynamics analysis ([`codapo_trl.analysis`]).

- [`plot_confidence_advantage`]: the paper's Figure 1 (and its Appendix B per-checkpoint version): per checkpoint
  (rows) and level (columns), advantage against confidence of every trajectory, correct and incorrect coloured, with
  the marginal densities of advantage above and of confidence on the right of each panel.
- [`plot_gradient_norms`]: Figure 2: the distribution of per-trajectory gradient norms, correct and incorrect, per
  checkpoint and level (unweighted, or advantage-weighted).
- [`plot_accuracy`]: Appendix B.1's accuracy per level over training steps (hierarchical convergence), from the
  sampled checkpoints and, when available, from the training logs.
- [`plot_training_dynamics`]: the live `dynamics/` metrics of `trainer_state.json` per difficulty bin over updates.
- [`plot_training_accuracy`]: accuracy per level over updates from a per-question training log.

Every function returns a `matplotlib.figure.Figure` (close it with `plt.close` when done); [`save_figure`] writes it
as PNG and SVG. Importing this module leaves matplotlib's backend as it is (the command `codapo-analyze` picks the
non-interactive Agg backend for itself). The figures of an analysis read only the records of graded groups
([`AnalysisView.graded_records`], [`AnalysisView.cell`]).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.lines import Line2D

from codapo_trl.analysis.scoring import TrajectoryRecord, bin_label
from codapo_trl.analysis.training_logs import find_training_logs, load_question_log, load_trainer_state
from codapo_trl.dynamics import BIN_LABELS, NUM_BINS
from codapo_trl.evaluation.metrics import level_sort_key


if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CORRECT_COLOR",
    "INCORRECT_COLOR",
    "AnalysisView",
    "plot_accuracy",
    "plot_confidence_advantage",
    "plot_gradient_norms",
    "plot_training_accuracy",
    "plot_training_dynamics",
    "save_figure",
]


class AnalysisView(Protocol):
    """What the figures read from an analysis: [`codapo_trl.analysis.results.AnalysisResult`] provides it (a
    protocol, so that this module does not import the one that saves its figures)."""

    config: dict[str, Any]

    @property
    def steps(self) -> list[int]: ...

    @property
    def groups(self) -> list[int | str]: ...

    @property
    def graded_records(self) -> list[TrajectoryRecord]: ...

    def cell(self, step: int, group: int | str) -> list[TrajectoryRecord]: ...

    def checkpoint_label(self, step: int) -> str: ...

    def group_label(self, group: int | str) -> str: ...

    def accuracy(self) -> dict[int, dict[int | str, dict[str, float]]]: ...


CORRECT_COLOR = "#1b9e77"
INCORRECT_COLOR = "#d95f02"
_CLASSES = ((True, "correct", CORRECT_COLOR), (False, "incorrect", INCORRECT_COLOR))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")  # levels stay apart where their curves coincide
DYNAMICS_PANELS = (
    ("share", "share of trajectories"),
    ("confidence_correct", "confidence, correct trajectories"),
    ("confidence_incorrect", "confidence, incorrect trajectories"),
    ("advantage", "mean advantage (A>0 solid, A<0 dashed)"),
    ("token_weight", "mean |token weight| w"),
    ("clipped_frac", "clipped token fraction"),
)


def save_figure(figure: Figure, output_dir: str | os.PathLike, stem: str, dpi: int = 150) -> list[Path]:
    """Save `figure` as `<output_dir>/<stem>.png` and `.svg`; returns both paths."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    figure.savefig(paths[0], dpi=dpi, bbox_inches="tight")
    figure.savefig(paths[1], bbox_inches="tight")
    return paths


def _class_legend(figure: Figure, extra: Sequence[Line2D] = ()) -> None:
    handles = [Line2D([], [], marker="o", ls="", color=c, label=name) for _, name, c in _CLASSES] + list(extra)
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)


def _level_colors(n: int) -> list:
    cmap = plt.get_cmap("viridis")
    return [cmap(0.85 - 0.75 * i / max(n - 1, 1)) for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------------
# Figure 1: confidence-advantage
# ---------------------------------------------------------------------------------------------------------------------


def plot_confidence_advantage(result: AnalysisView, panel_size: tuple[float, float] = (3.2, 3.0)) -> Figure:
    """Advantage (x) against confidence (y) per checkpoint (rows) and level (columns), correct and incorrect
    trajectories coloured, with marginal densities of advantage (above) and confidence (right) of each panel.

    Each panel has three axes (scatter, top marginal, right marginal); the top marginal carries the panel's title
    `"<checkpoint> · <level>"`.
    """
    steps, groups = result.steps, result.groups
    width, height = panel_size
    figure = plt.figure(figsize=(width * len(groups), height * len(steps) + 0.5), layout="constrained")
    grid = figure.add_gridspec(len(steps), len(groups))
    advantages = np.array([r.advantage for r in result.graded_records], dtype=float)
    lo, hi = (float(advantages.min()), float(advantages.max())) if advantages.size else (-1.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 1.0, hi + 1.0
    pad = 0.06 * (hi - lo)
    xlim = (lo - pad, hi + pad)
    x_bins = np.linspace(*xlim, 31)
    y_bins = np.linspace(0.0, 1.0, 31)
    for row, step in enumerate(steps):
        for col, group in enumerate(groups):
            inner = grid[row, col].subgridspec(2, 2, width_ratios=(4, 1), height_ratios=(1, 4), wspace=0, hspace=0)
            main = figure.add_subplot(inner[1, 0])
            top = figure.add_subplot(inner[0, 0], sharex=main)
            right = figure.add_subplot(inner[1, 1], sharey=main)
            cell = result.cell(step, group)
            for flag, name, color in _CLASSES:
                members = [r for r in cell if r.correct is flag]
                x = np.array([r.advantage for r in members], dtype=float)
                y = np.array([r.confidence for r in members], dtype=float)
                main.scatter(x, y, s=9, alpha=0.55, color=color, edgecolors="none", label=name)
                if x.size:
                    top.hist(x, bins=x_bins, density=True, histtype="step", color=color, lw=1.2)
                    right.hist(
                        y, bins=y_bins, density=True, histtype="step", color=color, lw=1.2, orientation="horizontal"
                    )
            main.set_xlim(*xlim)
            main.set_ylim(0.0, 1.02)
            main.grid(alpha=0.25, lw=0.5)
            main.axvline(0.0, color="0.6", lw=0.6, ls=":")
            accuracy = np.mean([r.correct for r in cell]) if cell else math.nan
            text = f"n={len(cell)}" + ("" if math.isnan(accuracy) else f"\nacc {100 * accuracy:.0f}%")
            main.text(0.03, 0.03, text, transform=main.transAxes, fontsize=7, va="bottom", color="0.25")
            if not cell:
                main.text(0.5, 0.5, "no trajectories", transform=main.transAxes, ha="center", fontsize=8)
            top.set_title(f"{result.checkpoint_label(step)} · {result.group_label(group)}", fontsize=9)
            top.tick_params(labelbottom=False, labelleft=False, left=False)
            right.tick_params(labelleft=False, labelbottom=False, bottom=False)
            for ax in (top, right):
                for side in ("top", "right"):
                    ax.spines[side].set_visible(False)
            if row == len(steps) - 1:
                main.set_xlabel("advantage", fontsize=8)
            if col == 0:
                main.set_ylabel("confidence", fontsize=8)
            main.tick_params(labelsize=7)
    figure.suptitle("Confidence-advantage distribution of correct / incorrect trajectories", fontsize=11)
    _class_legend(figure)
    return figure


# ---------------------------------------------------------------------------------------------------------------------
# Figure 2: gradient norms
# ---------------------------------------------------------------------------------------------------------------------


def plot_gradient_norms(
    result: AnalysisView, weighted: bool = False, panel_size: tuple[float, float] = (3.0, 2.4)
) -> Figure:
    """Histograms of per-trajectory gradient norms, correct and incorrect trajectories, per checkpoint (rows) and
    level (columns), on a log axis shared by all panels; the median of each class is marked.

    Args:
        result ([`AnalysisResult`]): with gradient norms.
        weighted (`bool`, *optional*, defaults to `False`): the advantage-weighted norm `|A| x ||grad||` instead of
            the unweighted one. Zero norms (advantage 0) cannot sit on a log axis: their count is written in the panel.
    """
    metric = "grad_norm_weighted" if weighted else "grad_norm"
    steps, groups = result.steps, result.groups
    width, height = panel_size
    figure, axes = plt.subplots(
        len(steps),
        len(groups),
        figsize=(width * len(groups), height * len(steps) + 0.5),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    values = np.array(
        [getattr(r, metric) for r in result.graded_records if getattr(r, metric) is not None], dtype=float
    )
    positive = values[values > 0]
    if positive.size:
        lo, hi = float(positive.min()), float(positive.max())
        if hi / lo < 1.5:
            lo, hi = lo / 1.5, hi * 1.5
        bins = np.logspace(math.log10(lo), math.log10(hi), 31)
    else:
        bins = np.linspace(0.0, 1.0, 31)
    label = "‖∇θ A·mean log p‖" if weighted else "‖∇θ mean log p‖"
    for row, step in enumerate(steps):
        for col, group in enumerate(groups):
            ax: Axes = axes[row][col]
            cell = result.cell(step, group)
            notes = [f"n={len(cell)}"]
            for flag, name, color in _CLASSES:
                x = np.array(
                    [getattr(r, metric) for r in cell if r.correct is flag and getattr(r, metric) is not None]
                )
                shown = x[x > 0] if positive.size else x
                if shown.size:
                    ax.hist(shown, bins=bins, histtype="stepfilled", alpha=0.35, color=color, label=name)
                    ax.hist(shown, bins=bins, histtype="step", color=color, lw=1.0)
                    ax.axvline(float(np.median(shown)), color=color, lw=1.0, ls="--")
                zeros = int((x == 0).sum())
                if zeros and positive.size:
                    notes.append(f"{zeros} {name} at 0")
            if positive.size:
                _log_axis(ax, bins[0], bins[-1])
            ax.text(0.97, 0.95, "\n".join(notes), transform=ax.transAxes, ha="right", va="top", fontsize=7, c="0.25")
            if not cell:
                ax.text(0.5, 0.5, "no trajectories", transform=ax.transAxes, ha="center", fontsize=8)
            ax.set_title(f"{result.checkpoint_label(step)} · {result.group_label(group)}", fontsize=9)
            ax.grid(alpha=0.25, lw=0.5)
            ax.tick_params(which="both", labelsize=7)
            ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
            if row == len(steps) - 1:
                ax.set_xlabel(label, fontsize=8)
            if col == 0:
                ax.set_ylabel("trajectories", fontsize=8)
    over = result.config.get("grad_params", "all")
    kind = "advantage-weighted (GRPO surrogate at ratio 1)" if weighted else "unweighted"
    figure.suptitle(f"Per-trajectory gradient norms, {kind}; parameters: {over}", fontsize=11)
    _class_legend(figure, [Line2D([], [], color="0.3", ls="--", label="median")])
    return figure


def _log_axis(ax: Axes, lo: float, hi: float) -> None:
    """A log x axis with plain-number labels (minor ones too when the range is under two decades)."""
    ax.set_xscale("log")
    plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain if hi / lo < 100 else ticker.NullFormatter())
    ax.tick_params(axis="x", which="minor", labelsize=6)


# ---------------------------------------------------------------------------------------------------------------------
# Accuracy over steps (hierarchical convergence)
# ---------------------------------------------------------------------------------------------------------------------


def _training_level_accuracy(rows: Sequence[dict[str, Any]], points: int = 25) -> dict[Any, tuple[list, list]]:
    """Accuracy per level over windows of updates, from the B-phase (phase 0) rows of a question log."""
    rows = [r for r in rows if r.get("phase", 0) in (0, None) and r.get("level") is not None]
    if not rows:
        return {}
    steps = sorted({int(r["step"]) for r in rows})
    window = max(1, math.ceil((steps[-1] - steps[0] + 1) / points))
    sums: dict[Any, dict[int, list[float]]] = {}
    for r in rows:
        bucket = (int(r["step"]) - steps[0]) // window
        cell = sums.setdefault(r["level"], {}).setdefault(bucket, [0.0, 0.0])
        cell[0] += float(r["num_correct"])
        cell[1] += float(r["num_generations"])
    curves = {}
    for level in sorted(sums, key=level_sort_key):
        buckets = sorted(sums[level])
        x = [steps[0] + b * window + (window - 1) / 2 for b in buckets]
        y = [sums[level][b][0] / sums[level][b][1] if sums[level][b][1] else math.nan for b in buckets]
        curves[level] = (x, y)
    return curves


def _draw_training_accuracy(ax: Axes, rows: Sequence[dict[str, Any]]) -> bool:
    curves = _training_level_accuracy(rows)
    if not curves:
        return False
    for i, ((level, (x, y)), color) in enumerate(zip(curves.items(), _level_colors(len(curves)))):
        ax.plot(
            x, y, marker=_MARKERS[i % len(_MARKERS)], ms=4, mfc="none", lw=1.3, color=color, label=f"Level {level}"
        )
    ax.set_xlabel("training step (update)")
    ax.set_ylabel("accuracy of training rollouts")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return True


def plot_accuracy(
    result: AnalysisView,
    *,
    question_log: str | os.PathLike | None = None,
    trainer_state: str | os.PathLike | None = None,
) -> Figure:
    """Accuracy per level over training steps (paper Appendix B.1): one axes from the sampled checkpoints; one from
    the question log's per-level training accuracy (B-phase rows), when given; one with the share of training
    questions per difficulty bin over updates (from `trainer_state.json`'s `dynamics/bin*/count`), when given."""
    panels = ["sampled"]
    rows = load_question_log(question_log) if question_log else []
    if rows and _training_level_accuracy(rows):
        panels.append("question_log")
    history = load_trainer_state(trainer_state) if trainer_state else []
    shares = _dynamics_series(history)[1].get("share") if history else None
    if shares:
        panels.append("bins")
    figure, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0), squeeze=False, layout="constrained")
    ax = axes[0][0]
    accuracy = result.accuracy()
    groups = result.groups
    for i, (group, color) in enumerate(zip(groups, _level_colors(len(groups)))):
        y = [accuracy[s][group]["accuracy"] for s in result.steps]
        marker = _MARKERS[i % len(_MARKERS)]
        ax.plot(result.steps, y, marker=marker, ms=6, mfc="none", lw=1.5, color=color, label=result.group_label(group))
    ax.set_xlabel("checkpoint step")
    ax.set_ylabel(f"accuracy ({result.config.get('samples_per_question')} samples / question)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(result.steps)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Sampled checkpoints", fontsize=10)
    if "question_log" in panels:
        ax = axes[0][panels.index("question_log")]
        _draw_training_accuracy(ax, rows)
        ax.set_title("Training rollouts (question log)", fontsize=10)
    if "bins" in panels:
        ax = axes[0][panels.index("bins")]
        steps, series, note = _dynamics_series(history)
        _draw_share(ax, steps, series["share"], gapped=bool(note))
        ax.set_title("Training questions per difficulty bin", fontsize=10)
    figure.suptitle("Accuracy per difficulty level over training (hierarchical convergence)", fontsize=11)
    return figure


def plot_training_accuracy(question_log: str | os.PathLike) -> Figure:
    """Accuracy per level over training updates from a per-question log (B-phase rows, windows of updates)."""
    rows = load_question_log(question_log)
    figure, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
    if not _draw_training_accuracy(ax, rows):
        plt.close(figure)
        raise ValueError(f"{question_log} has no rows with a level: per-level accuracy cannot be drawn.")
    ax.set_title("Accuracy per level of training rollouts", fontsize=10)
    return figure


# ---------------------------------------------------------------------------------------------------------------------
# Live training dynamics (trainer_state.json)
# ---------------------------------------------------------------------------------------------------------------------


def _value(entry: dict[str, Any], key: str) -> float:
    value = entry.get(key)
    return math.nan if value is None else float(value)


def _dynamics_series(history: Sequence[dict[str, Any]]) -> tuple[np.ndarray, dict[str, list[np.ndarray]], str]:
    """`(steps, {panel: [one array per bin]}, note)` from `log_history` entries with `dynamics/` metrics. For a
    CoDaPO run logged every update, only the B updates (phase 0) are kept: S updates see the selected questions."""
    entries = [e for e in history if any(k.startswith("dynamics/") for k in e)]
    note = ""
    phases = {e.get("codapo/phase") for e in entries}
    if entries and phases <= {0.0, 1.0} and 1.0 in phases:
        entries = [e for e in entries if e.get("codapo/phase") == 0.0]
        note = " (CoDaPO B updates)"
    if not entries:
        return np.array([]), {}, note
    steps = np.array([float(e["step"]) for e in entries])
    series: dict[str, list[np.ndarray]] = {}
    counts = np.array([[_value(e, f"dynamics/{b}/count") for b in BIN_LABELS] for e in entries])
    totals = np.nansum(counts, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(totals > 0, counts / totals, np.nan)
    series["share"] = [share[:, i] for i in range(NUM_BINS)]
    for name in ("confidence_correct", "confidence_incorrect", "token_weight", "clipped_frac"):
        series[name] = [np.array([_value(e, f"dynamics/{b}/{name}") for e in entries]) for b in BIN_LABELS]
    series["advantage_positive"] = [
        np.array([_value(e, f"dynamics/{b}/advantage_positive") for e in entries]) for b in BIN_LABELS
    ]
    series["advantage_negative"] = [
        np.array([_value(e, f"dynamics/{b}/advantage_negative") for e in entries]) for b in BIN_LABELS
    ]
    return steps, series, note


def _across_gaps(steps: np.ndarray, values: np.ndarray, gapped: bool) -> tuple[np.ndarray, np.ndarray]:
    """`(steps, values)` for `ax.plot`, with a NaN point between two steps that are not consecutive when `gapped`
    (CoDaPO's B updates: the S updates between them are not drawn, so no line is drawn across them either)."""
    if not gapped or len(steps) < 2:
        return steps, values
    cuts = np.nonzero(np.diff(steps) > 1)[0] + 1
    return np.insert(steps, cuts, np.nan), np.insert(values.astype(float), cuts, np.nan)


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Moving average over `window` points that skips NaN (NaN where the window holds no value)."""
    if window <= 1:
        return values
    kernel = np.ones(window)
    finite = np.isfinite(values)
    sums = np.convolve(np.where(finite, values, 0.0), kernel, mode="same")
    counts = np.convolve(finite.astype(float), kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, np.nan)


def _bin_colors() -> list:
    return _level_colors(NUM_BINS)


def _bin_name(index: int) -> str:
    return f"bin{index + 1} {bin_label(index + 1)}"


def _draw_share(
    ax: Axes, steps: np.ndarray, shares: list[np.ndarray], legend: bool = True, gapped: bool = False
) -> None:
    stacked = np.nan_to_num(np.vstack(shares))
    labels = [_bin_name(i) for i in range(NUM_BINS)]
    if gapped:  # one stacked bar per drawn update: nothing is filled over the updates left out
        bottom = np.zeros(len(steps))
        for row, color, label in zip(stacked, _bin_colors(), labels, strict=True):
            ax.bar(steps, row, width=0.8, bottom=bottom, color=color, label=label, alpha=0.85)
            bottom = bottom + row
    else:
        ax.stackplot(steps, stacked, colors=_bin_colors(), labels=labels, alpha=0.85)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step (update)")
    ax.set_ylabel("share of trajectories")
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    if legend:
        ax.legend(fontsize=7, loc="upper left")


def plot_training_dynamics(
    trainer_state: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    *,
    smoothing: int | None = None,
) -> Figure:
    """The live `dynamics/` metrics of a training run over updates, in six panels with one line per difficulty bin:
    share of trajectories (stacked), mean confidence of correct and of incorrect trajectories, mean positive and
    negative advantage, mean |token weight| and clipped fraction. For a CoDaPO run, only its B updates are drawn.

    Args:
        trainer_state (`str` or `os.PathLike`): a `trainer_state.json` with `dynamics/` metrics, or a run directory
            holding one (its own, else its latest checkpoint's).
        output_dir (`str` or `os.PathLike`, *optional*): save `training_dynamics.png` and `.svg` there.
        smoothing (`int`, *optional*): moving-average window in logged steps (default: about 1/25 of the run).

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        `FileNotFoundError`: no such file. `ValueError`: no `dynamics/` metrics in it.
    """
    path = Path(trainer_state)
    if path.is_dir():
        found = find_training_logs(path)["trainer_state"]
        if found is None:
            raise FileNotFoundError(f"No trainer_state.json in {path} or its checkpoints.")
        trainer_state = found
    history = load_trainer_state(trainer_state)
    steps, series, note = _dynamics_series(history)
    if not series:
        raise ValueError(
            f"{trainer_state} has no dynamics/ metrics: train with CoDaPOTrainer or GRPODynamicsTrainer (log_dynamics "
            "on) to log them."
        )
    window = smoothing if smoothing is not None else max(1, len(steps) // 25)
    figure, axes = plt.subplots(2, 3, figsize=(15.0, 7.5), layout="constrained")
    colors = _bin_colors()
    gapped = bool(note)  # CoDaPO's B updates only: S's steps lie between them
    # isolated points (a bin seen at one update, a B update between two S updates) stay visible
    marker = "." if len(steps) < 40 or gapped else None

    def line(ax: Axes, values: np.ndarray, color, **style) -> None:
        ax.plot(*_across_gaps(steps, _smooth(values, window), gapped), color=color, lw=1.3, marker=marker, **style)

    for ax, (name, title) in zip(axes.flat, DYNAMICS_PANELS):
        if name == "share":
            _draw_share(ax, steps, [_smooth(s, window) for s in series["share"]], legend=False, gapped=gapped)
        elif name == "advantage":
            for i, color in enumerate(colors):
                line(ax, series["advantage_positive"][i], color)
                line(ax, series["advantage_negative"][i], color, ls="--")
            ax.axhline(0.0, color="0.5", lw=0.6)
        else:
            for i, color in enumerate(colors):
                line(ax, series[name][i], color)
            if name.startswith("confidence"):
                ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step (update)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    handles = [Line2D([], [], color=c, lw=2, label=_bin_name(i)) for i, c in enumerate(colors)]
    figure.legend(handles=handles, loc="outside lower center", ncol=NUM_BINS, frameon=False, fontsize=9)
    smoothing_note = f", moving average over {window} logged steps" if window > 1 else ""
    figure.suptitle(f"Training dynamics per difficulty bin{note}{smoothing_note}", fontsize=12)
    if output_dir is not None:
        save_figure(figure, output_dir, "training_dynamics")
    return figure
