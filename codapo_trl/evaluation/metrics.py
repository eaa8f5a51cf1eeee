"""Evaluation metrics (avg@n, unbiased pass@k), their aggregation per benchmark and level, and markdown tables.

Everything here is pure Python and works on plain summary dictionaries (the `summary.json` an evaluation writes), so
tables can be rebuilt and compared from files without a model or torch.

Definitions, for a question with `n` graded samples of which `c` are correct:

- **avg@n**: `c / n`, averaged over questions (the paper's "mean accuracy" over 32 samples at temperature 0.6);
- **pass@k**: the unbiased estimator `1 - C(n - c, k) / C(n, k)` of the probability that at least one of `k`
  samples is correct (Chen et al., 2021), averaged over questions; defined for `1 <= k <= n`. `pass@1 == avg@n`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codapo_trl.command_line import read_json_file


__all__ = [
    "QuestionOutcome",
    "average_over_benchmarks",
    "compare_summaries",
    "default_ks",
    "format_level_table",
    "format_pass_at_k_table",
    "format_results_table",
    "level_sort_key",
    "load_summary",
    "pass_at_k",
    "summarise_outcomes",
]

AVG_KEY = "avg@n"
"""Key of the mean accuracy over samples in metric dictionaries (the table header shows the real `n`)."""

_DIFFICULTY_ORDER = ("EASY", "MEDIUM", "MEDIUM_HARD", "HARD", "VERY_HARD", "UNKNOWN_DIFFICULTY")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate for one question: `1 - C(n - c, k) / C(n, k)`.

    Computed as `1 - prod_{i = n - c + 1}^{n} (1 - k / i)`, which equals the binomial ratio without forming huge
    binomial coefficients (exact to float rounding for any `n`).

    Args:
        n (`int`): samples drawn for the question (`n >= 1`).
        c (`int`): correct samples among them (`0 <= c <= n`).
        k (`int`): the `k` of pass@k (`1 <= k <= n`).

    Returns:
        `float`: the probability that at least one of `k` samples drawn without replacement from the `n` is correct.

    Raises:
        `ValueError`: `k > n`, `k < 1`, `n < 1` or `c` outside `[0, n]`.

    Example:

    ```python
    >>> pass_at_k(5, 2, 2)  # 1 - C(3, 2) / C(5, 2) = 1 - 3 / 10
    0.7
    >>> pass_at_k(32, 8, 1)  # pass@1 is c / n
    0.25
    ```
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if n < 1:
        raise ValueError(f"pass@k needs at least one sample, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n={n}, got c={c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per question, got n={n}")
    if n - c < k:  # every draw of k samples contains a correct one
        return 1.0
    all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        all_wrong *= 1.0 - k / i
    return 1.0 - all_wrong


def default_ks(n: int) -> list[int]:
    """The powers of two up to `n`, and `n` itself: `default_ks(32) == [1, 2, 4, 8, 16, 32]`."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    ks = [1 << i for i in range(n.bit_length()) if 1 << i <= n]
    return ks if ks[-1] == n else [*ks, n]


@dataclass(frozen=True)
class QuestionOutcome:
    """The graded samples of one question: `n` samples, `c` correct, and the question's difficulty level."""

    n: int
    c: int
    level: int | str | None = None


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else float("nan")


def summarise_outcomes(outcomes: Sequence[QuestionOutcome], ks: Iterable[int]) -> dict[str, float]:
    """avg@n and pass@k (each k of `ks` that is at most every question's `n`), averaged over questions.

    Returns:
        `dict[str, float]`: `{"avg@n": ..., "pass@1": ..., ...}`; NaN values when `outcomes` is empty.
    """
    metrics = {AVG_KEY: _mean([o.c / o.n for o in outcomes])}
    smallest_n = min((o.n for o in outcomes), default=0)
    for k in ks:
        if k <= smallest_n:
            metrics[f"pass@{k}"] = _mean([pass_at_k(o.n, o.c, k) for o in outcomes])
    return metrics


def level_sort_key(level: Any) -> tuple:
    """Order levels: integers numerically, then TACO-style difficulty labels from easy to hard, then the rest."""
    text = str(level)
    if text.lstrip("-").isdigit():
        return (0, int(text), "")
    upper = text.upper()
    if upper in _DIFFICULTY_ORDER:
        return (1, _DIFFICULTY_ORDER.index(upper), "")
    return (2, 0, text)


def average_over_benchmarks(benchmarks: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The unweighted mean over benchmarks of each metric all of them report (the "Average" column of the paper)."""
    if not benchmarks:
        return {}
    metric_sets = [set(b["metrics"]) for b in benchmarks.values()]
    shared = [m for m in next(iter(benchmarks.values()))["metrics"] if all(m in s for s in metric_sets)]
    return {m: _mean([b["metrics"][m] for b in benchmarks.values()]) for m in shared}


# ---------------------------------------------------------------------------------------------------------------------
# Markdown tables
# ---------------------------------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.2f}"


def _delta(value: float | None, base: float | None) -> str:
    if value is None or base is None or math.isnan(value) or math.isnan(base):
        return "-"
    return f"{100 * (value - base):+.2f}"


def _metric_label(metric: str, summary: Mapping[str, Any]) -> str:
    if metric == AVG_KEY:
        return f"avg@{summary.get('config', {}).get('num_samples', 'n')}"
    return metric


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def _label(summary: Mapping[str, Any]) -> str:
    return str(summary.get("label") or summary.get("model") or "model")


def format_results_table(summaries: Sequence[Mapping[str, Any]] | Mapping[str, Any], metric: str = AVG_KEY) -> str:
    """A table laid out like the paper's main table: one row per model, benchmarks as columns, then Average.

    Args:
        summaries: one summary dictionary or several (e.g. [`EvaluationResult.to_summary`] or loaded files).
        metric (`str`, *optional*, defaults to `"avg@n"`): the metric in the cells (`"avg@n"`, `"pass@4"`, ...), in %.
    """
    if isinstance(summaries, Mapping):
        summaries = [summaries]
    names: dict[str, str] = {}
    for summary in summaries:
        for name, bench in summary["benchmarks"].items():
            names.setdefault(name, bench.get("display_name", name))
    header = ["Model", *names.values(), "Average"]
    rows = []
    for summary in summaries:
        cells = [_label(summary)]
        for name in names:
            bench = summary["benchmarks"].get(name)
            cells.append(_pct(bench["metrics"].get(metric)) if bench else "-")
        cells.append(_pct(summary.get("average", {}).get(metric)))
        rows.append(cells)
    return _table(header, rows)


def format_pass_at_k_table(summary: Mapping[str, Any]) -> str:
    """One row per benchmark (and the Average row), columns avg@n and every pass@k, in %."""
    metrics: list[str] = []
    for bench in summary["benchmarks"].values():
        metrics.extend(m for m in bench["metrics"] if m not in metrics)
    header = ["Benchmark", "Questions", *(_metric_label(m, summary) for m in metrics)]
    rows = [
        [
            bench.get("display_name", name),
            str(bench["num_questions"]),
            *(_pct(bench["metrics"].get(m)) for m in metrics),
        ]
        for name, bench in summary["benchmarks"].items()
    ]
    if len(summary["benchmarks"]) > 1:
        rows.append(["Average", "", *(_pct(summary.get("average", {}).get(m)) for m in metrics)])
    return _table(header, rows)


def _as_summary(result: Any) -> Mapping[str, Any]:
    return result.to_summary() if hasattr(result, "to_summary") else result


def format_level_table(
    results: Any,
    benchmark: str | None = None,
    metric: str = AVG_KEY,
) -> str:
    """Per-level table of one benchmark, for one result or several side by side (with differences vs the first).

    Args:
        results: an [`EvaluationResult`], a summary dictionary, or a mapping `label -> result` (e.g.
            `{"before": r0, "after": r1}`) to compare.
        benchmark (`str`, *optional*): which benchmark; defaults to the first one with levels.
        metric (`str`, *optional*, defaults to `"avg@n"`): the metric in the cells, in %.

    Returns:
        `str`: a markdown table with one row per level and an "All" row.

    Example:

    ```python
    >>> print(format_level_table({"before": before, "after": after}, "arithmetic"))  # doctest: +SKIP
    | Level | Questions | before avg@4 | after avg@4 | Δ after |
    ...
    ```
    """
    if isinstance(results, Mapping) and "benchmarks" not in results:
        labelled = {str(label): _as_summary(r) for label, r in results.items()}
    else:
        summary = _as_summary(results)
        labelled = {_label(summary): summary}
    if not labelled:
        raise ValueError("No results to tabulate.")
    first = next(iter(labelled.values()))
    if benchmark is None:
        benchmark = next((n for n, b in first["benchmarks"].items() if b.get("levels")), None)
        if benchmark is None:
            raise ValueError("None of the benchmarks has levels; pass benchmark= to tabulate one anyway.")
    for label, summary in labelled.items():
        if benchmark not in summary["benchmarks"]:
            raise ValueError(f"Benchmark {benchmark!r} is not in the results {label!r}.")
    levels: list[str] = []
    for summary in labelled.values():
        levels.extend(lv for lv in summary["benchmarks"][benchmark].get("levels", {}) if lv not in levels)
    levels.sort(key=level_sort_key)
    labels = list(labelled)
    metric_name = _metric_label(metric, first)
    header = [
        "Level",
        "Questions",
        *(f"{label} {metric_name}" if len(labels) > 1 else metric_name for label in labels),
    ]
    header.extend(f"Δ {label}" for label in labels[1:])

    def row(name: str, groups: list[Mapping[str, Any] | None]) -> list[str]:
        values = [g["metrics"].get(metric) if g else None for g in groups]
        count = next((str(g["num_questions"]) for g in groups if g), "0")
        return [name, count, *(_pct(v) for v in values), *(_delta(v, values[0]) for v in values[1:])]

    rows = [
        row(lv, [s["benchmarks"][benchmark].get("levels", {}).get(lv) for s in labelled.values()]) for lv in levels
    ]
    rows.append(row("All", [s["benchmarks"][benchmark] for s in labelled.values()]))
    return _table(header, rows)


# ---------------------------------------------------------------------------------------------------------------------
# Comparing summary files
# ---------------------------------------------------------------------------------------------------------------------


def load_summary(path: str | os.PathLike) -> dict[str, Any]:
    """Read a `summary.json` written by an evaluation, with a clear error for anything else."""
    summary = read_json_file(path, "summary file")
    if not isinstance(summary, dict) or not isinstance(summary.get("benchmarks"), dict):
        raise ValueError(f"{path} is not an evaluation summary (no 'benchmarks' object).")
    return summary


def compare_summaries(
    summaries: Sequence[Mapping[str, Any] | str | os.PathLike],
    metric: str = AVG_KEY,
) -> str:
    """Put two or more evaluation summaries side by side, with differences vs the first, as markdown.

    The Average column is recomputed over the benchmarks every summary has, so that rows stay comparable when the
    files cover different benchmarks (the ones left out are listed). Benchmarks with levels in every summary also get
    a per-level table.

    Args:
        summaries: summary dictionaries, [`EvaluationResult`] objects or paths of `summary.json` files (at least
            two).
        metric (`str`, *optional*, defaults to `"avg@n"`): the metric to compare (`"avg@n"`, `"pass@8"`, ...).
    """
    if len(summaries) < 2:
        raise ValueError("--compare needs at least two summary files.")
    loaded = [load_summary(s) if isinstance(s, (str, os.PathLike)) else _as_summary(s) for s in summaries]
    labels = [_label(s) for s in loaded]
    for i, label in enumerate(labels):  # make row labels unique
        if labels.count(label) > 1:
            source = summaries[i]
            suffix = Path(source).parent.name if isinstance(source, (str, os.PathLike)) else str(i + 1)
            labels[i] = f"{label} ({suffix or i + 1})"
    names: dict[str, str] = {}
    for summary in loaded:
        for name, bench in summary["benchmarks"].items():
            names.setdefault(name, bench.get("display_name", name))
    shared = [n for n in names if all(n in s["benchmarks"] for s in loaded)]

    def value(summary: Mapping[str, Any], name: str) -> float | None:
        bench = summary["benchmarks"].get(name)
        return bench["metrics"].get(metric) if bench else None

    def average(summary: Mapping[str, Any]) -> float | None:
        values = [value(summary, n) for n in shared]
        return None if not values or any(v is None for v in values) else _mean(values)  # type: ignore[arg-type]

    header = ["Model", *names.values(), "Average"]
    rows = [[label, *(_pct(value(s, n)) for n in names), _pct(average(s))] for label, s in zip(labels, loaded)]
    base = loaded[0]
    for label, summary in zip(labels[1:], loaded[1:]):
        rows.append(
            [
                f"Δ {label} vs {labels[0]}",
                *(_delta(value(summary, n), value(base, n)) for n in names),
                _delta(average(summary), average(base)),
            ]
        )
    parts = [f"### {_metric_label(metric, base)} (%)", "", _table(header, rows)]
    missing = [names[n] for n in names if n not in shared]
    if missing:
        parts += ["", f"Average over the benchmarks all files share; not in every file: {', '.join(missing)}."]
    settings = {
        key: [s.get("config", {}).get(key) for s in loaded]
        for key in ("num_samples", "temperature", "top_p", "max_new_tokens", "seed", "limit")
    }
    differing = {k: v for k, v in settings.items() if len(set(map(str, v))) > 1}
    if differing:
        parts += ["", "Settings differ: " + "; ".join(f"{k} = {v}" for k, v in differing.items()) + "."]
    for name in shared:
        if all(s["benchmarks"][name].get("levels") for s in loaded):
            parts += [
                "",
                f"### {names[name]} per level",
                "",
                format_level_table(dict(zip(labels, loaded)), name, metric),
            ]
    return "\n".join(parts)
