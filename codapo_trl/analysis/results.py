"""The result of an analysis: every trajectory, the tables laid out like the paper's Appendix B, and its files.

[`AnalysisResult`] holds the checkpoints, questions and [`TrajectoryRecord`]s; it computes the per-cell statistics
(min / max / mean / std / median / excess kurtosis of confidence, gradient norms and advantages, and accuracy), writes
them (`trajectories.jsonl`, `summary.json`, `tables.md`, CSV tables, the figures of [`codapo_trl.analysis.plots`])
and reads a saved analysis back. Only the records of graded groups enter the tables and figures (see
[`codapo_trl.analysis.scoring`]).
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np

from codapo_trl.analysis import plots as _plots
from codapo_trl.analysis.checkpoints import Checkpoint
from codapo_trl.analysis.questions import Question
from codapo_trl.analysis.scoring import TrajectoryRecord, bin_label
from codapo_trl.dynamics import NUM_BINS, describe
from codapo_trl.versions import package_versions


if TYPE_CHECKING:
    from matplotlib.figure import Figure


logger = logging.getLogger(__name__)

__all__ = [
    "ACCURACY_FILE",
    "GROUP_BY",
    "STATISTICS",
    "SUMMARY_FILE",
    "TABLES_FILE",
    "TABLE_METRICS",
    "TRAJECTORIES_FILE",
    "AnalysisResult",
    "statistics_table",
]

STATISTICS = ("min", "max", "mean", "std", "median", "kurtosis")
"""The rows of the paper's Appendix B tables, as returned by [`codapo_trl.dynamics.describe`]."""
STATISTIC_LABELS = {
    "min": "Minimum",
    "max": "Maximum",
    "mean": "Mean",
    "std": "Std",
    "median": "Median",
    "kurtosis": "Kurtosis",
}
TABLE_METRICS = {
    "confidence": "Confidence",
    "grad_norm": "Gradient",
    "grad_norm_weighted": "Gradient (advantage-weighted)",
    "advantage": "Advantage",
}
"""Per-trajectory values summarised in tables: name in the records -> table title."""
GROUP_BY = ("level", "difficulty")

TRAJECTORIES_FILE, SUMMARY_FILE, TABLES_FILE, ACCURACY_FILE = (
    "trajectories.jsonl",
    "summary.json",
    "tables.md",
    "accuracy.csv",
)


def statistics_table(values: Mapping[Any, Mapping[Any, Sequence[float]]]) -> dict[Any, dict[Any, dict[str, float]]]:
    """[`codapo_trl.dynamics.describe`] of every cell: `{step: {group: {"min": ..., ..., "kurtosis": ...}}}`."""
    return {step: {group: describe(cell) for group, cell in groups.items()} for step, groups in values.items()}


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.4g}"


# ---------------------------------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class AnalysisResult:
    """What [`analyze_checkpoints`] returns: every trajectory, and the tables and figures built from them.

    Args:
        checkpoints (`list[Checkpoint]`): in step order.
        questions (`list[Question]`): the fixed questions.
        records (`list[TrajectoryRecord]`): every trajectory of every checkpoint.
        group_by (`str`): `"level"` (the dataset's levels, the paper's Appendix B tables) or `"difficulty"` (the
            group error rate's five bins of Section 3.2, recomputed at every checkpoint).
        config (`dict`): the settings.
        timing (`dict`): seconds per checkpoint and phase.
        training_logs (`dict`): paths of the `trainer_state.json` and question log used for the training-log figures.
    """

    checkpoints: list[Checkpoint]
    questions: list[Question]
    records: list[TrajectoryRecord]
    group_by: str = "level"
    config: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    training_logs: dict[str, str | None] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    @property
    def groups(self) -> list[int | str]:
        """Column keys: the levels in selection order, or the bins 1-5."""
        if self.group_by == "difficulty":
            return list(range(1, NUM_BINS + 1))
        return list(dict.fromkeys(q.level for q in self.questions))

    def group_of(self, record: TrajectoryRecord) -> int | str:
        return record.difficulty_bin if self.group_by == "difficulty" else record.level

    def group_label(self, group: int | str) -> str:
        if self.group_by == "difficulty":
            return bin_label(int(group))
        return f"Level {group}" if isinstance(group, int) else str(group)

    def checkpoint_label(self, step: int) -> str:
        return next(c.label for c in self.checkpoints if c.step == step)

    @property
    def graded_records(self) -> list[TrajectoryRecord]:
        """The records of graded groups: what the tables, accuracy and figures are computed from."""
        return [r for r in self.records if r.graded]

    def cell(self, step: int, group: int | str) -> list[TrajectoryRecord]:
        """The graded trajectories of one checkpoint and level (or bin)."""
        return [r for r in self.graded_records if r.step == step and self.group_of(r) == group]

    def ungraded_questions(self) -> dict[int, int]:
        """Per checkpoint step, the questions whose group is ungraded (left out of the tables and figures)."""
        return {s: len({r.question_index for r in self.records if r.step == s and not r.graded}) for s in self.steps}

    def values(self, metric: str, step: int, group: int | str) -> np.ndarray:
        """One per-trajectory value (`confidence`, `grad_norm`, ...) of a cell; `None` becomes NaN."""
        cell = [getattr(r, metric) for r in self.cell(step, group)]
        return np.array([np.nan if v is None else v for v in cell], dtype=np.float64)

    def table(self, metric: str) -> dict[int, dict[int | str, dict[str, float]]]:
        """`{step: {group: describe(values)}}` of one metric (see [`TABLE_METRICS`])."""
        if metric not in TABLE_METRICS:
            raise ValueError(f"Unknown metric {metric!r}; choose from {list(TABLE_METRICS)}.")
        return statistics_table({s: {g: self.values(metric, s, g) for g in self.groups} for s in self.steps})

    def accuracy(self) -> dict[int, dict[int | str, dict[str, float]]]:
        """Per checkpoint and group: trajectories, questions, accuracy, mean confidence of correct and incorrect
        trajectories, and the fractions of questions solved by every sample (`d = 0`) and by none (`d = 1`)."""
        out: dict[int, dict[int | str, dict[str, float]]] = {}
        for step in self.steps:
            out[step] = {}
            for group in self.groups:
                cell = self.cell(step, group)
                questions = {r.question_index: r.difficulty for r in cell}
                correct = [r.confidence for r in cell if r.correct]
                incorrect = [r.confidence for r in cell if not r.correct]
                out[step][group] = {
                    "num_trajectories": len(cell),
                    "num_questions": len(questions),
                    "accuracy": float(np.mean([r.correct for r in cell])) if cell else math.nan,
                    "confidence_correct": float(np.mean(correct)) if correct else math.nan,
                    "confidence_incorrect": float(np.mean(incorrect)) if incorrect else math.nan,
                    "solved_frac": float(np.mean([d == 0 for d in questions.values()])) if questions else math.nan,
                    "unsolved_frac": float(np.mean([d == 1 for d in questions.values()])) if questions else math.nan,
                }
        return out

    def format_table(self, metric: str) -> str:
        """A markdown table laid out like the paper's: rows = statistic, columns = step x level."""
        table = self.table(metric)
        columns = [(s, g) for s in self.steps for g in self.groups]
        header = [TABLE_METRICS[metric]] + [f"Step {s} · {self.group_label(g)}" for s, g in columns]
        lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * len(columns) + "|"]
        for stat in STATISTICS:
            cells = [_fmt(table[s][g][stat]) for s, g in columns]
            lines.append(f"| {STATISTIC_LABELS[stat]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def format_accuracy(self) -> str:
        """Accuracy per checkpoint (rows) and group (columns), in %, with trajectories per cell."""
        accuracy = self.accuracy()
        header = ["Checkpoint"] + [self.group_label(g) for g in self.groups]
        lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * len(self.groups) + "|"]
        for step in self.steps:
            cells = []
            for g in self.groups:
                cell = accuracy[step][g]
                value = cell["accuracy"]
                cells.append("–" if math.isnan(value) else f"{100 * value:.1f} (n={cell['num_trajectories']})")
            lines.append(f"| {self.checkpoint_label(step)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The content of `tables.md`."""
        config = self.config
        grouping = "dataset level" if self.group_by == "level" else "difficulty bin (group error rate)"
        parts = [
            "# Training-dynamics analysis",
            "",
            f"Dataset {config.get('dataset')} ({config.get('split')}), {len(self.questions)} questions, "
            f"{config.get('samples_per_question')} samples per question at temperature {config.get('temperature')}, "
            f"at most {config.get('max_new_tokens')} new tokens, seed {config.get('seed')}. Columns: checkpoint x "
            f"{grouping}. Gradient norms over: {config.get('grad_params_description')}.",
        ]
        ungraded = {s: n for s, n in self.ungraded_questions().items() if n}
        if ungraded:
            parts += [
                "",
                "Left out (ungraded: the grader could not use the gold answer): "
                + ", ".join(f"{n} question(s) at step {s}" for s, n in ungraded.items())
                + ".",
            ]
        parts += [
            "",
            "## Accuracy (%)",
            "",
            self.format_accuracy(),
        ]
        notes = {
            "confidence": "Geometric-mean probability of the sampled tokens, exp(mean log-prob) at the sampling "
            "temperature (the paper's Table 'Confidence statistics').",
            "grad_norm": "‖grad (1/|o|) sum_t log p(o_t)‖, the unweighted per-trajectory norm (closest to the "
            "paper's Table 'Gradient statistics', whose minima stay positive where advantages vanish).",
            "grad_norm_weighted": "‖grad A (1/|o|) sum_t log p(o_t)‖ = |A| x the unweighted norm: the GRPO "
            "surrogate's per-trajectory gradient at ratio 1 (0 for groups whose samples all agree).",
            "advantage": "(r - mean) / (std + 1e-4) within each question's group (Bessel std, TRL's convention).",
        }
        for metric, title in TABLE_METRICS.items():
            if metric.startswith("grad") and config.get("grad_params") == "none":
                continue
            parts += ["", f"## {title}", "", notes[metric], "", self.format_table(metric)]
        return "\n".join(parts) + "\n"

    def to_summary(self) -> dict[str, Any]:
        """The JSON-able summary written to `summary.json`."""

        def keyed(mapping: Mapping) -> dict:
            return {str(k): v for k, v in mapping.items()}

        return {
            "config": self.config,
            "group_by": self.group_by,
            "checkpoints": [asdict(c) for c in self.checkpoints],
            "questions": {
                str(g): [q.question_id for q in self.questions if q.level == g]
                for g in dict.fromkeys(q.level for q in self.questions)
            },
            "accuracy": {str(s): keyed(cells) for s, cells in self.accuracy().items()},
            "tables": {
                metric: {str(s): keyed(cells) for s, cells in self.table(metric).items()}
                for metric in TABLE_METRICS
                if not (metric.startswith("grad") and self.config.get("grad_params") == "none")
            },
            "ungraded_questions": {str(s): n for s, n in self.ungraded_questions().items()},
            "timing": self.timing,
            "training_logs": self.training_logs,
            "versions": package_versions(),
            "created": self.created,
        }

    @classmethod
    def load(cls, output_dir: str | os.PathLike) -> AnalysisResult:
        """Read a saved analysis back (`summary.json` and `trajectories.jsonl`), e.g. to redraw its figures or
        tables without sampling again. Questions come back with their id, row index and level only."""
        out = Path(output_dir)
        for name in (SUMMARY_FILE, TRAJECTORIES_FILE):
            if not (out / name).is_file():
                raise FileNotFoundError(f"No {name} in {out}: not the output directory of an analysis.")
        summary = json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8"))
        with (out / TRAJECTORIES_FILE).open(encoding="utf-8") as f:
            records = [TrajectoryRecord(**json.loads(line)) for line in f if line.strip()]
        levels = {str(r.level): r.level for r in records}  # JSON object keys are strings; the records keep the type
        index = {r.question_id: r.question_index for r in records}
        questions = [
            Question(index.get(qid, -1), qid, levels.get(level, level), [], "", "", "")
            for level, ids in summary["questions"].items()
            for qid in ids
        ]
        return cls(
            checkpoints=[Checkpoint(**c) for c in summary["checkpoints"]],
            questions=questions,
            records=records,
            group_by=summary["group_by"],
            config=summary["config"],
            timing=summary["timing"],
            training_logs=summary.get("training_logs", {}),
            created=summary.get("created", ""),
        )

    def write_records(self, path: str | os.PathLike, records: Sequence[TrajectoryRecord] | None = None, mode="w"):
        with open(path, mode, encoding="utf-8") as f:
            for record in self.records if records is None else records:
                f.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")

    def save(self, output_dir: str | os.PathLike, *, plots: bool = True, records: bool = True) -> dict[str, Any]:
        """Write the trajectories, `summary.json`, `tables.md`, the CSV tables and (with `plots`) the figures.

        Returns:
            `dict` of what was written: name -> path (figures: name -> list of PNG and SVG paths).
        """
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Any] = {}
        if records:
            self.write_records(out / TRAJECTORIES_FILE)
        paths["trajectories"] = out / TRAJECTORIES_FILE
        paths["tables"] = out / TABLES_FILE
        paths["tables"].write_text(self.to_markdown(), encoding="utf-8")
        for metric in TABLE_METRICS:
            if metric.startswith("grad") and self.config.get("grad_params") == "none":
                continue
            paths[f"{metric}_csv"] = self._write_stats_csv(out / f"{metric}_stats.csv", metric)
        paths["accuracy_csv"] = self._write_accuracy_csv(out / ACCURACY_FILE)
        if plots:
            paths["figures"] = self.plot(out)
        summary = self.to_summary()
        summary["files"] = {k: [str(p) for p in v] if isinstance(v, list) else str(v) for k, v in paths.items()}
        if "figures" in paths:
            summary["files"]["figures"] = {k: [str(p) for p in v] for k, v in paths["figures"].items()}
        paths["summary"] = out / SUMMARY_FILE
        paths["summary"].write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=_json_default) + "\n")
        logger.info("Wrote the analysis to %s", out)
        return paths

    def plot(self, output_dir: str | os.PathLike) -> dict[str, list[Path]]:
        """Draw and save the figures (PNG and SVG): confidence-advantage (paper Fig. 1), gradient norms (Fig. 2,
        unweighted and advantage-weighted), accuracy per level over steps (App. B.1), and, when training logs were
        found, the live per-bin dynamics over updates."""
        figures: dict[str, Figure] = {
            "confidence_advantage": _plots.plot_confidence_advantage(self),
            "accuracy": _plots.plot_accuracy(
                self,
                question_log=self.training_logs.get("question_log"),
                trainer_state=self.training_logs.get("trainer_state"),
            ),
        }
        if self.config.get("grad_params") != "none":
            figures["gradient_norms"] = _plots.plot_gradient_norms(self, weighted=False)
            figures["gradient_norms_weighted"] = _plots.plot_gradient_norms(self, weighted=True)
        state = self.training_logs.get("trainer_state")
        if state:
            try:
                figures["training_dynamics"] = _plots.plot_training_dynamics(state)
            except ValueError as err:
                logger.warning("No training-dynamics figure: %s", err)
        saved = {}
        for name, figure in figures.items():
            saved[name] = _plots.save_figure(figure, output_dir, name)
            plt.close(figure)
        return saved

    def _write_stats_csv(self, path: Path, metric: str) -> Path:
        table = self.table(metric)
        columns = [(s, g) for s in self.steps for g in self.groups]
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([metric] + [f"step{s}/{self._group_slug(g)}" for s, g in columns])
            for stat in STATISTICS:
                writer.writerow([stat] + [table[s][g][stat] for s, g in columns])
        return path

    def _write_accuracy_csv(self, path: Path) -> Path:
        accuracy = self.accuracy()
        keys = list(next(iter(next(iter(accuracy.values())).values())).keys()) if accuracy else []
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["step", self.group_by, *keys])
            for step, cells in accuracy.items():
                for group, cell in cells.items():
                    writer.writerow([step, group, *(cell[k] for k in keys)])
        return path

    def _group_slug(self, group: int | str) -> str:
        return f"bin{group}" if self.group_by == "difficulty" else f"level{group}"


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"Not JSON-serialisable: {type(value).__name__}")
