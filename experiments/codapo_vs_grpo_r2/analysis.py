"""Round 2's registered analysis (PREREGISTRATION.md, amendment 2; issue 35): the level-7 primary, its tests and
label, the group-sequential look, the fixed-sequence attribution, the secondaries, and the regime and mechanism
tables from the question logs.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r2/analysis.py \\
        --final-seeds N --pilot-rules experiments/codapo_vs_grpo_r2/results/pilot_grpo_level7_32/pilot_rules.json

`N` is the cap the cost rule committed (`cost_rule.py`); `--pilot-rules` is the 32-update pilot's verdict
(`pilot_rules.py`), which names the primary endpoint (`greedy` or, when the floor rule fired, `pass8`). The script
runs only at a registered look: when the seeds complete in every arm are exactly seeds 0..9 and N > 10 (the interim
look) or seeds 0..N-1 (the final analysis); at any other count it stops without reading a result.

What it computes, on the per-seed differences of a run endpoint (seed = unit; `stats.py` of round 1):
- **primary**: CoDaPO - GRPO on the primary endpoint: the held-out level-7 greedy accuracy (points) averaged over
  the read-outs after updates 8, 16, 24 and 32; or, by the floor rule, level-7 pass@8 at T = 1.0 averaged over
  updates 16 and 32;
- the 95 % paired t interval (two-sided p), the paired bootstrap interval, the one-sided t p-values and the exact
  sign-flip p-values of "effect <= 0" and of "effect >= 5";
- the **label**: `gain` when both tests reject "effect <= 0", `no gain of 5 points or more` when both reject
  "effect >= 5", `gain smaller than 5 points` when both labels hold (the interval lies between 0 and 5),
  `inconclusive` otherwise; each test at the look's nominal one-sided level (`stats.group_sequential_levels`:
  O'Brien-Fleming-type spending of 0.025 per label, one interim look at 10 seeds);
- **attribution** by a fixed sequence: CoDaPO - GRPO with CoDaPO's loss (`grpo_token_loss`) is tested with the same
  rule only if the primary is labelled a gain (`gain` or `gain smaller than 5 points`); the loss arm - GRPO is an
  interval;
- **secondaries** (tests and the label the rule would give, no verdict of their own): level-7 greedy over the read-
  outs 8 and 16 (the rare window); level-7 pass@8 and avg@8 after updates 16 and 32 (and their mean); the other of the
  two primary candidates; and, when the look stopped the campaign early and the uniform control
  (`codapo_uniform`) ran on the same seeds, CoDaPO - uniform control and uniform control - GRPO, descriptively;
- **regime**: level-7 discovery (fresh groups with a success) per arm over updates 1-16 and 17-32, and GRPO's over
  the 8 updates before each read-out, with the read-outs where it exceeds 30 % labelled outside the rare regime;
- **mechanism**: S picks by level and by their B group's outcome, level 7's share of S picks and of all rollouts,
  the success rate of level-7 S groups against their B groups, generated tokens, gradient norms and clip fraction.

Writes `analysis.json` and `analysis.md` to `--output-dir` (default: the results folder).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import stats  # round 1's modules, by name (PYTHONPATH=experiments/codapo_vs_grpo)
from report import (
    budget_at,
    clip_fraction_on_s,
    compare,
    discovery_rate,
    load_runs,
    pooled,
    s_pick_outcomes,
    s_picks_by_level,
)


HERE = Path(__file__).resolve().parent

HARD_LEVEL = 7
BAND_LEVELS = (4, 5)
ARMS = ("grpo", "codapo", "grpo_token_loss")
SMALLEST_EFFECT = 5.0  # points
ALPHA = 0.025  # one-sided, per label
INTERIM_SEEDS = 10
MAX_SEEDS = 14
UPDATES = 32
RARE_REGIME_DISCOVERY = 0.30  # level-7 discovery above which a read-out is outside the rare regime
REGIME_WINDOW = 8  # updates before a read-out that its regime label looks at
GAIN_LABELS = ("gain", "gain smaller than 5 points")


@dataclass(frozen=True)
class Endpoint:
    """A run endpoint: the mean over `steps` of the hard level's `metric` (points) in the `kind` read-outs."""

    name: str
    kind: str
    metric: str
    steps: tuple[int, ...]
    description: str


ENDPOINTS = {
    e.name: e
    for e in (
        Endpoint("greedy", "greedy", "avg@n", (8, 16, 24, 32), "level-7 greedy accuracy, mean of updates 8/16/24/32"),
        Endpoint("pass8", "pass8", "pass@8", (16, 32), "level-7 pass@8 at T = 1.0, mean of updates 16 and 32"),
        Endpoint("rare_window", "greedy", "avg@n", (8, 16), "level-7 greedy accuracy, mean of updates 8 and 16"),
        Endpoint("pass8_16", "pass8", "pass@8", (16,), "level-7 pass@8 at T = 1.0 after update 16"),
        Endpoint("pass8_32", "pass8", "pass@8", (32,), "level-7 pass@8 at T = 1.0 after update 32"),
        Endpoint("avg8", "pass8", "avg@n", (16, 32), "level-7 avg@8 at T = 1.0, mean of updates 16 and 32"),
        Endpoint("avg8_16", "pass8", "avg@n", (16,), "level-7 avg@8 at T = 1.0 after update 16"),
        Endpoint("avg8_32", "pass8", "avg@n", (32,), "level-7 avg@8 at T = 1.0 after update 32"),
    )
}
PRIMARY_CANDIDATES = ("greedy", "pass8")
SECONDARIES = ("rare_window", "pass8_16", "pass8_32", "avg8_16", "avg8_32", "avg8")


def level_points(summary: Mapping, level: int, metric: str, where: str = "a read-out") -> float:
    """`metric` of `level` in a read-out's summary, in points; a summary without the level is an error (a read-out
    that lost its hard level must never pass for a zero).

    Example:
        >>> s = {"benchmarks": {"arithmetic": {"metrics": {"avg@n": 0.5},
        ...      "levels": {"7": {"metrics": {"avg@n": 0.045}}}}}}
        >>> round(level_points(s, 7, "avg@n"), 6)
        4.5
    """
    try:
        levels = compare.accuracy_by_level(summary, metric)
    except KeyError as error:
        raise ValueError(f"{where} has no {metric!r} (is it the right kind of read-out?): {error}") from None
    if str(level) not in levels:
        raise ValueError(f"{where} has no level {level} (levels {sorted(k for k in levels if k != 'all')}).")
    return 100.0 * levels[str(level)]


def endpoint_value(evals: Mapping[str, Mapping], endpoint: Endpoint, where: str = "a run") -> float:
    """A run's endpoint from its read-outs (`evals`: `step<N>-<kind>` -> summary); every read-out must exist."""
    missing = [s for s in endpoint.steps if f"step{s}-{endpoint.kind}" not in evals]
    if missing:
        raise ValueError(f"{where} lacks the {endpoint.kind} read-outs after updates {missing} ({endpoint.name}).")
    return statistics.fmean(
        level_points(
            evals[f"step{s}-{endpoint.kind}"], HARD_LEVEL, endpoint.metric, f"{where}, step{s}-{endpoint.kind}"
        )
        for s in endpoint.steps
    )


def label(gain: bool, below_smallest: bool) -> str:
    """The registered label from the two one-sided decisions (each: t and sign-flip test both reject).

    Example:
        >>> label(True, True), label(True, False), label(False, True), label(False, False)
        ('gain smaller than 5 points', 'gain', 'no gain of 5 points or more', 'inconclusive')
    """
    if gain and below_smallest:
        return "gain smaller than 5 points"
    if gain:
        return "gain"
    if below_smallest:
        return "no gain of 5 points or more"
    return "inconclusive"


def decide_contrast(differences: Sequence[float], level: float, smallest_effect: float = SMALLEST_EFFECT) -> dict:
    """The registered tests of per-seed differences at a look's nominal one-sided `level`, and the label."""
    d = [float(x) for x in differences]
    t = stats.paired_t_interval(d)
    boot = stats.paired_bootstrap_interval(d)
    p = {
        "t_gain": stats.one_sided_t_p_value(d, 0.0, "greater"),
        "flip_gain": stats.sign_flip_p_value(d, 0.0, "greater"),
        "t_below": stats.one_sided_t_p_value(d, smallest_effect, "less"),
        "flip_below": stats.sign_flip_p_value(d, smallest_effect, "less"),
    }
    gain = p["t_gain"] < level and p["flip_gain"] < level
    below = p["t_below"] < level and p["flip_below"] < level
    adjusted = stats.paired_t_interval(d, confidence=1.0 - 2.0 * level)
    return {
        "n": len(d),
        "differences": d,
        "mean": t.mean,
        "sd": t.sd,
        "t95": [t.low, t.high],
        "t_two_sided_p": t.p_value,
        "bootstrap95": [boot.low, boot.high],
        "nominal_level": level,
        "t_at_level": [adjusted.low, adjusted.high],
        "p": p,
        "gain": gain,
        "below_smallest": below,
        "label": label(gain, below),
    }


def look(complete: Sequence[int], final_seeds: int) -> tuple[str, float]:
    """Which registered look `complete` (the seeds finished in every arm) is, and its nominal one-sided level.

    Example:
        >>> look(range(10), 14)[0], round(look(range(10), 14)[1], 4), look(range(14), 14)[0]
        ('interim', 0.008, 'final')
    """
    if not INTERIM_SEEDS <= final_seeds <= MAX_SEEDS:
        raise ValueError(f"The registered cap lies in {INTERIM_SEEDS}..{MAX_SEEDS} seeds, got {final_seeds}.")
    seeds = sorted(complete)
    if seeds == list(range(final_seeds)):
        if final_seeds == INTERIM_SEEDS:
            return "final", ALPHA  # no interim look when the cap is the look
        return "final", stats.group_sequential_levels(INTERIM_SEEDS / final_seeds, ALPHA).final_level
    if seeds == list(range(INTERIM_SEEDS)) and final_seeds > INTERIM_SEEDS:
        return "interim", stats.group_sequential_levels(INTERIM_SEEDS / final_seeds, ALPHA).interim_level
    raise ValueError(
        f"Seeds {seeds} complete in every arm are not a registered look (seeds 0-{INTERIM_SEEDS - 1}, or 0-"
        f"{final_seeds - 1} for the final analysis): no result is read."
    )


def boundaries_table(alpha: float = ALPHA) -> list[dict]:
    """The nominal one-sided levels of the interim look (10 seeds) and the final analysis, for each possible cap."""
    rows = [{"final_seeds": INTERIM_SEEDS, "interim_level": None, "final_level": alpha}]
    for n in range(INTERIM_SEEDS + 1, MAX_SEEDS + 1):
        rows.append({"final_seeds": n, **asdict(stats.group_sequential_levels(INTERIM_SEEDS / n, alpha))})
    return rows


def arm_values(runs: Mapping, arm: str, seeds: Sequence[int], endpoint: Endpoint) -> list[float]:
    return [endpoint_value(runs[arm, s]["evals"], endpoint, f"{arm}-seed{s}") for s in seeds]


def contrast(runs: Mapping, treatment: str, control: str, seeds: Sequence[int], endpoint: Endpoint, level: float):
    treated, controlled = arm_values(runs, treatment, seeds, endpoint), arm_values(runs, control, seeds, endpoint)
    out = decide_contrast(stats.paired_differences(treated, controlled), level)
    return {"treatment": treatment, "control": control, "endpoint": endpoint.name, **out}


# ---------------------------------------------------------------------------------------------------------------------
# Question logs: regime and mechanism
# ---------------------------------------------------------------------------------------------------------------------


def discovery_between(logs: Sequence[Sequence[dict]], first: int, last: int, level: int = HARD_LEVEL) -> list[int]:
    """[discovered, groups] of `level`'s fresh groups over updates `first`..`last`, pooled over `logs`."""
    return list(pooled([{"questions": rows} for rows in logs], discovery_rate, level, first, last))


def regime_labels(logs: Sequence[Sequence[dict]], steps: Sequence[int], window: int = REGIME_WINDOW) -> list[dict]:
    """Per read-out step: pooled level-7 discovery over the `window` updates up to it, and whether it lies outside
    the rare regime (discovery above `RARE_REGIME_DISCOVERY`)."""
    out = []
    for step in steps:
        hit, groups = discovery_between(logs, max(1, step - window + 1), step)
        share = hit / groups if groups else None
        out.append(
            {
                "step": step,
                "discovered": hit,
                "groups": groups,
                "discovery": share,
                "outside_rare_regime": share is not None and share > RARE_REGIME_DISCOVERY,
            }
        )
    return out


def rollout_share(rows: Sequence[dict], level: int = HARD_LEVEL) -> list[int]:
    """[rollouts of `level`, all rollouts] over every group of a log (fresh and S groups)."""
    return [sum(r["num_generations"] for r in rows if r["level"] == level), sum(r["num_generations"] for r in rows)]


def s_groups_against_b(rows: Sequence[dict], level: int = HARD_LEVEL) -> dict[str, int]:
    """For the questions of `level` that S picked: correct / generated completions of their B group (the update
    that picked them) and of their S groups (the next update, phase 1, same question id).

    Example:
        >>> rows = [{"step": 1, "phase": 0, "question_id": "a", "level": 7, "selected": True, "num_correct": 1,
        ...          "num_generations": 8},
        ...         {"step": 2, "phase": 1, "question_id": "a", "level": 7, "selected": None, "num_correct": 3,
        ...          "num_generations": 8},
        ...         {"step": 2, "phase": 1, "question_id": "a", "level": 7, "selected": None, "num_correct": 2,
        ...          "num_generations": 8}]
        >>> s_groups_against_b(rows)
        {'picks': 1, 'b_correct': 1, 'b_samples': 8, 's_groups': 2, 's_correct': 5, 's_samples': 16}
    """
    picks = [r for r in rows if r["phase"] == 0 and r.get("selected") and r["level"] == level]
    s_rows = {}
    for r in rows:
        if r["phase"] == 1:
            s_rows.setdefault((r["step"], r["question_id"]), []).append(r)
    out = Counter(picks=len(picks))
    for pick in picks:
        out["b_correct"] += pick["num_correct"]
        out["b_samples"] += pick["num_generations"]
        for r in s_rows.get((pick["step"] + 1, pick["question_id"]), []):
            out["s_groups"] += 1
            out["s_correct"] += r["num_correct"]
            out["s_samples"] += r["num_generations"]
    return {k: out[k] for k in ("picks", "b_correct", "b_samples", "s_groups", "s_correct", "s_samples")}


def mean_logged(log_history: Sequence[dict], key: str) -> float | None:
    """Mean of a per-update metric over a run's updates (entries with a `reward` are updates)."""
    values = [h[key] for h in log_history if "reward" in h and h.get(key) is not None]
    values = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    return statistics.fmean(values) if values else None


def mechanism(runs: Mapping, arm: str, seeds: Sequence[int]) -> dict:
    """The mechanism table's row of an arm, pooled (counts) or averaged (per-run means) over `seeds`."""
    arm_runs = [runs[arm, s] for s in seeds if (arm, s) in runs]
    picks = sum((s_picks_by_level(r["questions"]) for r in arm_runs), Counter())
    outcomes = sum((s_pick_outcomes(r["questions"]) for r in arm_runs), Counter())
    share = [sum(x) for x in zip(*(rollout_share(r["questions"]) for r in arm_runs))] or [0, 0]
    s_vs_b = Counter()
    for r in arm_runs:
        s_vs_b.update(s_groups_against_b(r["questions"]))

    def mean_of(values):
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    return {
        "runs": len(arm_runs),
        "s_picks_by_level": {str(lv): picks[lv] for lv in (*BAND_LEVELS, HARD_LEVEL)},
        "s_picks_by_outcome": {o: outcomes[o] for o in ("none", "mixed", "all")},
        "level7_share_of_s_picks": picks[HARD_LEVEL] / sum(picks.values()) if picks else None,
        "level7_rollouts": share,
        "level7_s_vs_b": dict(s_vs_b),
        "generated_tokens": mean_of([budget_at(r["log"], UPDATES)["tokens"] for r in arm_runs]),
        "grad_norm": mean_of([mean_logged(r["log"], "grad_norm") for r in arm_runs]),
        "clip_fraction": mean_of([mean_logged(r["log"], "clip_ratio/region_mean") for r in arm_runs]),
        "clip_fraction_on_s": mean_of([clip_fraction_on_s(r["log"]) for r in arm_runs]),
    }


# ---------------------------------------------------------------------------------------------------------------------
# The analysis and its report
# ---------------------------------------------------------------------------------------------------------------------


def complete_seeds(runs: Mapping, arms: Sequence[str] = ARMS) -> list[int]:
    return sorted(s for s in {seed for _, seed in runs} if all((arm, s) in runs for arm in arms))


def analyse(runs: Mapping, warm: Mapping, final_seeds: int, primary: str) -> dict:
    """Everything the registration asks for, as plain data (`runs`, `warm`: `report.load_runs`)."""
    if primary not in PRIMARY_CANDIDATES:
        raise ValueError(f"The primary endpoint is one of {PRIMARY_CANDIDATES}, got {primary!r}.")
    seeds = complete_seeds(runs)
    stage, level = look(seeds, final_seeds)
    primary_endpoint = ENDPOINTS[primary]
    out: dict = {
        "stage": stage,
        "seeds": seeds,
        "final_seeds": final_seeds,
        "nominal_level": level,
        "boundaries": boundaries_table(),
        "primary_endpoint": asdict(primary_endpoint),
        "primary": contrast(runs, "codapo", "grpo", seeds, primary_endpoint, level),
    }
    if out["primary"]["label"] in GAIN_LABELS:
        out["attribution"] = contrast(runs, "codapo", "grpo_token_loss", seeds, primary_endpoint, level)
    else:
        out["attribution"] = {"tested": False, "why": "the primary is not labelled a gain (fixed sequence)"}
    out["loss_arm_vs_grpo"] = contrast(runs, "grpo_token_loss", "grpo", seeds, primary_endpoint, level)
    out["stop"] = stage == "final" or out["primary"]["label"] != "inconclusive"
    other = "pass8" if primary == "greedy" else "greedy"
    out["secondaries"] = {
        name: {
            pair: contrast(runs, *pair.split(" - "), seeds, ENDPOINTS[name], level)
            for pair in ("codapo - grpo", "codapo - grpo_token_loss", "grpo_token_loss - grpo")
        }
        for name in (*SECONDARIES, other)
    }
    if all(("codapo_uniform", s) in runs for s in seeds):  # run only if the look stopped the campaign early
        out["uniform_control"] = {
            pair: contrast(runs, *pair.split(" - "), seeds, primary_endpoint, level)
            for pair in ("codapo - codapo_uniform", "codapo_uniform - grpo")
        }
    out["per_arm"] = per_arm_table(runs, warm, seeds)
    logs = {arm: [runs[arm, s]["questions"] for s in seeds] for arm in ARMS}
    out["regime"] = {
        "discovery": {
            arm: {"1-16": discovery_between(logs[arm], 1, 16), "17-32": discovery_between(logs[arm], 17, UPDATES)}
            for arm in ARMS
        },
        "grpo_read_outs": regime_labels(logs["grpo"], ENDPOINTS["greedy"].steps),
    }
    out["mechanism"] = {arm: mechanism(runs, arm, seeds) for arm in ARMS}
    return out


def per_arm_table(runs: Mapping, warm: Mapping, seeds: Sequence[int]) -> list[dict]:
    """Mean (over `seeds`) held-out points per arm and read-out: level 7 at every read-out, levels 4 and 5 where
    read; the warm start's read-outs first."""
    rows = []
    for kind, summary in sorted(warm.items()):
        rows.append({"arm": "warm start", "read_out": kind, **read_out_levels(summary, kind)})
    for arm in ARMS:
        names = sorted({name for s in seeds for name in runs[arm, s]["evals"]}, key=_step_order)
        for name in names:
            values = [
                read_out_levels(runs[arm, s]["evals"][name], name) for s in seeds if name in runs[arm, s]["evals"]
            ]
            keys = sorted(set.intersection(*(set(v) for v in values)))
            rows.append({"arm": arm, "read_out": name, **{k: statistics.fmean(v[k] for v in values) for k in keys}})
    return rows


def _step_order(name: str) -> tuple[int, str]:
    step, _, kind = name.removeprefix("step").partition("-")
    return int(step), kind


def read_out_levels(summary: Mapping, name: str) -> dict[str, float]:
    """The levels a read-out holds, in points (`avg@n`; `pass@8` too for a pass8 read-out); level 7 must be there."""
    out = {f"L{lv} avg": level_points(summary, int(lv), "avg@n", name)
           for lv in compare.accuracy_by_level(summary) if lv != "all"}  # fmt: skip
    if f"L{HARD_LEVEL} avg" not in out:
        raise ValueError(f"{name} has no level {HARD_LEVEL}.")
    if name.endswith("pass8"):
        out[f"L{HARD_LEVEL} pass@8"] = level_points(summary, HARD_LEVEL, "pass@8", name)
    return out


def fmt_contrast(c: Mapping) -> str:
    if not c.get("tested", True):
        return f"not tested: {c['why']}"
    p = c["p"]
    return (
        f"{c['mean']:+.2f} [{c['t95'][0]:+.2f}, {c['t95'][1]:+.2f}] (95 % t; at the look's level "
        f"[{c['t_at_level'][0]:+.2f}, {c['t_at_level'][1]:+.2f}]), SD {c['sd']:.2f}; one-sided p of effect <= 0: "
        f"t {p['t_gain']:.4f}, sign-flip {p['flip_gain']:.4f}; of effect >= 5: t {p['t_below']:.4f}, sign-flip "
        f"{p['flip_below']:.4f}; label: **{c['label']}**"
    )


def percent(pair: Sequence[int]) -> str:
    return f"{100 * pair[0] / pair[1]:.1f} % ({pair[0]}/{pair[1]})" if pair[1] else "-"


def to_markdown(result: Mapping) -> str:
    """The analysis as markdown: the look, the label, the tests, and the tables."""
    p = result["primary"]
    lines = [
        f"# Round 2 analysis: {result['stage']} look, seeds 0-{max(result['seeds'])} of a cap of "
        f"{result['final_seeds']}",
        "",
        f"Primary endpoint: {result['primary_endpoint']['description']} (points). Nominal one-sided level at this "
        f"look: {result['nominal_level']:.4f} per label (both the t and the sign-flip test must pass it).",
        "",
        f"- **CoDaPO - GRPO (primary)**: {fmt_contrast(p)}",
        f"- CoDaPO - GRPO with CoDaPO's loss (fixed sequence): {fmt_contrast(result['attribution'])}",
        f"- GRPO with CoDaPO's loss - GRPO (interval only): {result['loss_arm_vs_grpo']['mean']:+.2f} "
        f"[{result['loss_arm_vs_grpo']['t95'][0]:+.2f}, {result['loss_arm_vs_grpo']['t95'][1]:+.2f}]",
        f"- The campaign {'stops here' if result['stop'] else 'goes on to the final analysis'}.",
        "",
        "| seed | GRPO | CoDaPO | difference |",
        "|---|---|---|---|",
    ]
    grpo = [c - d for c, d in zip(_arm(result, "codapo"), p["differences"])]
    for seed, g, c, d in zip(result["seeds"], grpo, _arm(result, "codapo"), p["differences"]):
        lines.append(f"| {seed} | {g:.2f} | {c:.2f} | {d:+.2f} |")
    lines += ["", "## Secondaries (no verdict of their own)", "", "| endpoint | contrast | result |", "|---|---|---|"]
    for name, pairs in result["secondaries"].items():
        for pair, c in pairs.items():
            lines.append(f"| {ENDPOINTS[name].description} | {pair} | {fmt_contrast(c)} |")
    for pair, c in result.get("uniform_control", {}).items():
        lines.append(f"| uniform control (descriptive) | {pair} | {c['mean']:+.2f} [{c['t95'][0]:+.2f}, "
                     f"{c['t95'][1]:+.2f}] |")  # fmt: skip
    lines += ["", "## Held-out points per arm (mean over seeds)", ""]
    for row in result["per_arm"]:
        cells = ", ".join(f"{k} {v:.2f}" for k, v in row.items() if k not in ("arm", "read_out"))
        lines.append(f"- {row['arm']}, {row['read_out']}: {cells}")
    lines += ["", "## Regime: level-7 discovery (fresh groups with a success)", "", "| arm | 1-16 | 17-32 |",
              "|---|---|---|"]  # fmt: skip
    for arm, d in result["regime"]["discovery"].items():
        lines.append(f"| {arm} | {percent(d['1-16'])} | {percent(d['17-32'])} |")
    lines += ["", "GRPO, the 8 updates up to each read-out (above 30 %: outside the rare regime):", ""]
    for r in result["regime"]["grpo_read_outs"]:
        flag = " **outside the rare regime**" if r["outside_rare_regime"] else ""
        lines.append(f"- update {r['step']}: {percent([r['discovered'], r['groups']])}{flag}")
    lines += [
        "",
        "## Mechanism",
        "",
        "| arm | S picks L4/L5/L7 | S picks none/mixed/all | L7 share of S picks | L7 share of rollouts | L7 B groups of"
        " S picks | their S groups | tokens | grad norm | clip | clip on S |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, m in result["mechanism"].items():
        sb, s_share = m["level7_s_vs_b"], m["level7_share_of_s_picks"]
        lines.append(
            f"| {arm} | {'/'.join(str(v) for v in m['s_picks_by_level'].values())} | "
            f"{'/'.join(str(v) for v in m['s_picks_by_outcome'].values())} | "
            f"{'-' if s_share is None else f'{100 * s_share:.1f} %'} | "
            f"{percent(m['level7_rollouts'])} | {percent([sb.get('b_correct', 0), sb.get('b_samples', 0)])} | "
            f"{percent([sb.get('s_correct', 0), sb.get('s_samples', 0)])} | {_num(m['generated_tokens'], '.0f')} | "
            f"{_num(m['grad_norm'], '.3f')} | {_num(m['clip_fraction'], '.4f')} | {_num(m['clip_fraction_on_s'], '.4f')} |"
        )
    return "\n".join(lines) + "\n"


def _arm(result: Mapping, arm: str) -> list[float]:
    return [float(v) for v in result["primary_values"][arm]]


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--final-seeds", type=int, required=True, help="the cap the cost rule committed")
    parser.add_argument("--pilot-rules", type=Path, required=True, help="pilot_rules.py's output (names the primary)")
    parser.add_argument("--output-dir", type=Path, default=None, help="default: --results-dir")
    options = parser.parse_args(argv)
    primary = json.loads(options.pilot_rules.read_text())["primary"]
    warm, runs = load_runs(options.results_dir / "runs")
    result = analyse(runs, warm, options.final_seeds, primary)
    result["primary_values"] = {
        arm: arm_values(runs, arm, result["seeds"], ENDPOINTS[primary]) for arm in ARMS
    }  # fmt: skip
    out = options.output_dir or options.results_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "analysis.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "analysis.md").write_text(to_markdown(result))
    print(to_markdown(result))
    return result


if __name__ == "__main__":
    main()
