"""Paired statistics over seeds for the CoDaPO-vs-GRPO experiment (pure functions; pre-registered in
`PREREGISTRATION.md`).

Each seed gives one run per arm from the same warm start and the same question order, so the unit of analysis is
the seed and the quantity is the per-seed difference `treatment - control` of an endpoint (e.g. hard-level held-out
accuracy, in points). On those differences:

- [`paired_t_interval`]: mean difference, its Student-t confidence interval (`n - 1` degrees of freedom) and the
  two-sided p-value of "mean difference = 0";
- [`paired_bootstrap_interval`]: percentile interval of the mean difference, resampling seeds with replacement
  (seeded, reproducible);
- [`paired_t_power`] and [`required_seeds`]: power of the two-sided paired t-test (noncentral t) and the smallest
  number of seeds that reaches a target power for a given effect and SD of the differences;
- [`detectable_effect`]: the smallest effect `n` seeds detect with that power;
- [`verdict`]: the pre-registered decision rule (confirm / refute / inconclusive) from an interval;
- [`sign_flip_p_value`]: the exact sign-flip (paired permutation) test of a mean difference against a null value,
  which does not assume normal differences (added after round 1, issue 27);
- [`one_sided_t_p_value`]: the one-sided paired t-test of a mean difference against a null value;
- [`obrien_fleming_spending`] and [`group_sequential_levels`]: the nominal one-sided levels of a design with one
  interim look (Lan-DeMets O'Brien-Fleming-type alpha spending; round 2's amendment 2, issue 35).

The quantiles come from `scipy.stats` (installed with the project's environment).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as scipy_stats
from scipy.integrate import quad
from scipy.optimize import brentq


__all__ = [
    "PairedInterval",
    "SequentialLevels",
    "detectable_effect",
    "group_sequential_levels",
    "obrien_fleming_spending",
    "one_sided_t_p_value",
    "paired_bootstrap_interval",
    "paired_differences",
    "paired_t_interval",
    "paired_t_power",
    "required_seeds",
    "sign_flip_p_value",
    "verdict",
]


@dataclass(frozen=True)
class PairedInterval:
    """A confidence interval for the mean of paired differences.

    Args:
        mean (`float`): mean difference over seeds.
        low (`float`): lower end of the interval.
        high (`float`): upper end of the interval.
        n (`int`): number of pairs (seeds).
        sd (`float`): sample standard deviation of the differences (`n - 1` in the denominator).
        method (`str`): `"paired-t"` or `"paired-bootstrap"`.
        confidence (`float`): the coverage, e.g. 0.95.
        p_value (`float` or `None`): two-sided p-value of "mean difference = 0" (t-test only).
    """

    mean: float
    low: float
    high: float
    n: int
    sd: float
    method: str
    confidence: float
    p_value: float | None = None


def paired_differences(treatment: Sequence[float], control: Sequence[float]) -> list[float]:
    """Per-seed differences `treatment[i] - control[i]`.

    Args:
        treatment (`Sequence[float]`): the endpoint of the treatment arm, one value per seed.
        control (`Sequence[float]`): the endpoint of the control arm, for the same seeds in the same order.

    Raises:
        `ValueError`: different lengths (the seeds do not pair up) or a non-finite value.

    Example:
        >>> paired_differences([52.0, 48.5], [49.1, 64.2])
        [2.8999999999999986, -15.700000000000003]
    """
    if len(treatment) != len(control):
        raise ValueError(
            f"Paired differences need one value per seed in both arms; got {len(treatment)} and {len(control)}."
        )
    values = [float(t) - float(c) for t, c in zip(treatment, control)]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"Paired differences must be finite, got {values}.")
    return values


def _check(differences: Sequence[float], confidence: float) -> list[float]:
    values = [float(d) for d in differences]
    if len(values) < 2:
        raise ValueError(f"An interval over seeds needs at least 2 paired seeds, got {len(values)}.")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"Differences must be finite, got {values}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}.")
    return values


def paired_t_interval(differences: Sequence[float], confidence: float = 0.95) -> PairedInterval:
    """Student-t interval for the mean of paired differences, and the two-sided p-value of a zero mean.

    `mean +- t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n)`. With all differences equal (`sd = 0`) the interval is
    the point and the p-value is 0 (or 1 when the mean is 0).

    Args:
        differences (`Sequence[float]`): per-seed differences (at least 2).
        confidence (`float`, *optional*, defaults to 0.95): coverage.

    Example:
        >>> r = paired_t_interval([2.9, -15.7])  # the pilot's CoDaPO - GRPO, all levels, two seeds
        >>> round(r.mean, 2), round(r.low, 1), round(r.high, 1), round(r.p_value, 2)
        (-6.4, -124.6, 111.8, 0.62)
    """
    values = _check(differences, confidence)
    n = len(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    se = sd / math.sqrt(n)
    if se == 0.0:
        return PairedInterval(mean, mean, mean, n, sd, "paired-t", confidence, 0.0 if mean != 0.0 else 1.0)
    quantile = float(scipy_stats.t.ppf(0.5 + confidence / 2, df=n - 1))
    p_value = float(2 * scipy_stats.t.sf(abs(mean) / se, df=n - 1))
    return PairedInterval(mean, mean - quantile * se, mean + quantile * se, n, sd, "paired-t", confidence, p_value)


def paired_bootstrap_interval(
    differences: Sequence[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> PairedInterval:
    """Percentile bootstrap interval for the mean of paired differences (seeds resampled with replacement).

    Args:
        differences (`Sequence[float]`): per-seed differences (at least 2).
        confidence (`float`, *optional*, defaults to 0.95): coverage.
        resamples (`int`, *optional*, defaults to 10000): bootstrap resamples.
        seed (`int`, *optional*, defaults to 0): seed of the resampling (the same inputs give the same interval).

    Returns:
        [`PairedInterval`]: the interval between the `(1 - confidence) / 2` and `(1 + confidence) / 2` quantiles
        (linear interpolation) of the resampled means; always inside `[min(differences), max(differences)]`.
    """
    values = _check(differences, confidence)
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100 for a percentile interval, got {resamples}.")
    n = len(values)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    alpha = (1.0 - confidence) / 2

    def quantile(q: float) -> float:
        position = q * (resamples - 1)
        lower = math.floor(position)
        upper = min(lower + 1, resamples - 1)
        return means[lower] + (position - lower) * (means[upper] - means[lower])

    return PairedInterval(
        statistics.fmean(values),
        quantile(alpha),
        quantile(1.0 - alpha),
        n,
        statistics.stdev(values),
        "paired-bootstrap",
        confidence,
    )


def paired_t_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test at level `alpha` with `n` seeds, true mean difference `effect` and SD of
    the differences `sd` (noncentral t with `n - 1` degrees of freedom and noncentrality `effect / sd * sqrt(n)`).

    Example:
        >>> round(paired_t_power(1.0, 1.0, 10), 3)  # Cohen's d = 1, 10 pairs
        0.803
    """
    if n < 2:
        raise ValueError(f"A paired t-test needs n >= 2 seeds, got {n}.")
    if sd <= 0 or not math.isfinite(sd):
        raise ValueError(f"sd must be a positive number, got {sd}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}.")
    df = n - 1
    critical = float(scipy_stats.t.ppf(1 - alpha / 2, df))
    noncentrality = abs(effect) / sd * math.sqrt(n)
    upper = float(scipy_stats.nct.sf(critical, df, noncentrality))
    # P(T < -critical) written as an upper tail by symmetry: scipy's lower tail returns NaN for some large nc
    lower = float(scipy_stats.nct.sf(critical, df, -noncentrality))
    lower = 0.0 if math.isnan(lower) else lower
    if math.isnan(upper):
        raise ArithmeticError(f"Power undefined for effect {effect}, sd {sd}, n {n} (scipy returned NaN).")
    return min(1.0, upper + lower)


def required_seeds(effect: float, sd: float, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 10_000) -> int:
    """Smallest number of paired seeds for which the two-sided paired t-test reaches `power`.

    Args:
        effect (`float`): the true mean difference to detect (same unit as `sd`, e.g. accuracy points); not 0.
        sd (`float`): standard deviation of the per-seed differences. From the SD `s` of one arm's endpoint over
            seeds and a correlation `r` between paired arms, `sd = s * sqrt(2 * (1 - r))` (`s * sqrt(2)` unpaired).
        power (`float`, *optional*, defaults to 0.8): target power.
        alpha (`float`, *optional*, defaults to 0.05): two-sided level.
        max_seeds (`int`, *optional*): give up (ValueError) above this.

    Example:
        >>> required_seeds(1.0, 1.0), required_seeds(0.5, 1.0)  # Cohen's d = 1 and 0.5
        (10, 34)
    """
    if effect == 0 or not math.isfinite(effect):
        raise ValueError(f"effect must be a non-zero number, got {effect}.")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}.")
    for n in range(2, max_seeds + 1):
        if paired_t_power(effect, sd, n, alpha) >= power:
            return n
    raise ValueError(f"More than {max_seeds} seeds needed for effect {effect} with sd {sd}.")


def detectable_effect(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest true mean difference that `n` paired seeds detect with `power` (two-sided paired t-test), for
    differences with standard deviation `sd`: the minimum detectable effect, in the unit of `sd`.

    Example:
        >>> round(detectable_effect(1.0, 6), 2), round(detectable_effect(1.0, 10), 2)  # in SDs of the differences
        (1.43, 1.0)
    """
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}.")
    if paired_t_power(1e-9 * sd, sd, n, alpha) >= power:
        raise ValueError(f"power {power} is not above alpha {alpha}.")
    return float(brentq(lambda effect: paired_t_power(effect, sd, n, alpha) - power, 1e-9 * sd, 100.0 * sd))


def verdict(interval: PairedInterval, smallest_effect: float) -> str:
    """The pre-registered decision for `treatment - control` from its interval.

    - `"confirm"`: the whole interval is above 0 (the treatment is better);
    - `"refute"`: the whole interval is below `smallest_effect` (any advantage is smaller than the smallest effect
      of interest, or the treatment is worse);
    - `"inconclusive"`: otherwise (the interval holds 0 and effects of at least `smallest_effect`).

    Example:
        >>> verdict(PairedInterval(4.0, 1.0, 7.0, 6, 3.0, "paired-t", 0.95), 5.0)
        'confirm'
    """
    if smallest_effect <= 0:
        raise ValueError(f"smallest_effect must be > 0, got {smallest_effect}.")
    if interval.low > 0:
        return "confirm"
    if interval.high < smallest_effect:
        return "refute"
    return "inconclusive"


def sign_flip_p_value(
    differences: Sequence[float], null: float = 0.0, alternative: str = "less", max_exact: int = 20
) -> float:
    """Exact p-value of the sign-flip (paired permutation) test of "the mean difference is `null`".

    Under the null hypothesis each centred difference `d_i - null` is as likely to have either sign (symmetric
    about 0), so the `2^n` ways of flipping the signs are equally likely. The p-value is the share of them whose
    sum is at least as extreme as the observed sum: `alternative="less"` counts sums `<=` the observed one (evidence
    that the mean is below `null`, e.g. "the effect is smaller than 5 points" with `null=5`), `"greater"` counts
    sums `>=` it, `"two-sided"` counts absolute sums `>=` its absolute value. Sums are compared with a relative
    tolerance of 1e-9 so that ties (e.g. a difference equal to `null`) count as extreme. The smallest attainable
    one-sided p-value is `2^-n` (1/64 with 6 seeds).

    Args:
        differences (`Sequence[float]`): per-seed differences (at least 1).
        null (`float`, *optional*, defaults to 0.0): the mean difference under the null hypothesis.
        alternative (`str`, *optional*, defaults to `"less"`): `"less"`, `"greater"` or `"two-sided"`.
        max_exact (`int`, *optional*, defaults to 20): refuse more differences than this (2^n sums are enumerated).

    Example:
        >>> sign_flip_p_value([-3.0, -1.0, 2.0], null=0.0)  # sums <= -2: -6, -4, -2 of 8
        0.375
        >>> sign_flip_p_value([-1.0, -2.0, -3.0], alternative="less")  # the most extreme of 8 sign patterns
        0.125
    """
    values = [float(d) - float(null) for d in differences]
    if not values:
        raise ValueError("The sign-flip test needs at least one difference.")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"Differences and null must be finite, got {list(differences)} and {null}.")
    if len(values) > max_exact:
        raise ValueError(f"{len(values)} differences give 2^{len(values)} sign patterns; at most {max_exact}.")
    if alternative not in ("less", "greater", "two-sided"):
        raise ValueError(f"alternative must be 'less', 'greater' or 'two-sided', got {alternative!r}.")
    magnitudes = [abs(v) for v in values]
    observed = sum(values)
    tolerance = 1e-9 * max(sum(magnitudes), 1.0)
    extreme = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(values)):
        total = sum(sign * m for sign, m in zip(signs, magnitudes))
        if alternative == "less":
            extreme += total <= observed + tolerance
        elif alternative == "greater":
            extreme += total >= observed - tolerance
        else:
            extreme += abs(total) >= abs(observed) - tolerance
    return extreme / 2 ** len(values)


def one_sided_t_p_value(differences: Sequence[float], null: float = 0.0, alternative: str = "greater") -> float:
    """One-sided p-value of the paired t-test of "the mean difference is `null`" (`n - 1` degrees of freedom).

    `alternative="greater"`: evidence that the mean is above `null` (e.g. a gain, `null=0`); `"less"`: below it
    (e.g. "the effect is smaller than 5 points", `null=5`). `p < a` holds exactly when the two-sided `1 - 2a` t
    interval lies above (`"greater"`) or below (`"less"`) `null`. All differences equal: 0 when they lie on the
    alternative's side of `null`, else 1.

    Example:
        >>> round(one_sided_t_p_value([1.0, 2.0, 3.0], 0.0, "greater"), 4)  # t = 2 / (1 / sqrt(3)) = 3.46, 2 df
        0.0371
        >>> round(one_sided_t_p_value([1.0, 2.0, 3.0], 5.0, "less"), 4)  # t = -3 / (1 / sqrt(3)) = -5.20
        0.0175
    """
    values = _check(differences, 0.95)
    if alternative not in ("less", "greater"):
        raise ValueError(f"alternative must be 'less' or 'greater', got {alternative!r}.")
    if not math.isfinite(null):
        raise ValueError(f"null must be finite, got {null}.")
    n = len(values)
    shift = statistics.fmean(values) - null
    se = statistics.stdev(values) / math.sqrt(n)
    sign = 1.0 if alternative == "greater" else -1.0
    if se == 0.0:
        return 0.0 if sign * shift > 0 else 1.0
    return float(scipy_stats.t.sf(sign * shift / se, df=n - 1))


def obrien_fleming_spending(fraction: float, alpha: float = 0.025) -> float:
    """The one-sided alpha spent by information fraction `fraction` under Lan and DeMets' O'Brien-Fleming-type
    spending function, `2 - 2 Phi(z_{1 - alpha / 2} / sqrt(fraction))` (all of `alpha` at `fraction = 1`).

    Example:
        >>> round(obrien_fleming_spending(0.5), 5), round(obrien_fleming_spending(1.0), 12)
        (0.00153, 0.025)
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}.")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}.")
    z = float(scipy_stats.norm.isf(alpha / 2))
    return float(2 * scipy_stats.norm.sf(z / math.sqrt(fraction)))


@dataclass(frozen=True)
class SequentialLevels:
    """Nominal one-sided levels of a group-sequential design with one interim look and a final analysis.

    Args:
        fraction (`float`): information fraction of the interim look (seeds at the look / seeds at the end).
        alpha (`float`): the one-sided level spent in all.
        interim_level (`float`): the nominal one-sided p below which the interim look rejects (alpha spent there).
        final_level (`float`): the nominal one-sided p below which the final analysis rejects.
        interim_z (`float`): the interim boundary on the z scale.
        final_z (`float`): the final boundary on the z scale.
    """

    fraction: float
    alpha: float
    interim_level: float
    final_level: float
    interim_z: float
    final_z: float


def group_sequential_levels(fraction: float, alpha: float = 0.025) -> SequentialLevels:
    """Boundaries of a one-sided group-sequential test with one interim look at information fraction `fraction`
    and O'Brien-Fleming-type spending (`obrien_fleming_spending`).

    The interim look spends `a1 = obrien_fleming_spending(fraction, alpha)` (boundary `z1 = Phi^-1(1 - a1)`); the
    final boundary `z2` solves `a1 + P(Z1 < z1, Z2 >= z2) = alpha` for the canonical joint normal of the two
    statistics (correlation `sqrt(fraction)`), by numerical integration. Applied to a t or sign-flip test, a look
    rejects when its one-sided p is below the look's nominal level `1 - Phi(z)`.

    Example:
        >>> levels = group_sequential_levels(0.5)  # the textbook two-look design: z = 2.96 and 1.97
        >>> round(levels.interim_z, 2), round(levels.final_z, 2)
        (2.96, 1.97)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"The interim look needs an information fraction in (0, 1), got {fraction}.")
    spent = obrien_fleming_spending(fraction, alpha)
    z1 = float(scipy_stats.norm.isf(spent))
    rho = math.sqrt(fraction)
    spread = math.sqrt(1.0 - rho * rho)

    def crossing_late(z2: float) -> float:  # P(Z1 < z1, Z2 >= z2)
        value, _ = quad(
            lambda z: scipy_stats.norm.pdf(z) * scipy_stats.norm.sf((z2 - rho * z) / spread),
            -math.inf,
            z1,
            epsabs=1e-13,
        )
        return value

    z2 = float(brentq(lambda z2: spent + crossing_late(z2) - alpha, 0.0, 10.0, xtol=1e-12))
    return SequentialLevels(fraction, alpha, spent, float(scipy_stats.norm.sf(z2)), z1, z2)
