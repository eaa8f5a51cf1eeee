"""The paired statistics of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo/stats.py`).

The module lives outside the package (it is part of the experiment, not the library); it is loaded from its file.
Expected values are computed by hand or are published reference values (paired t-test sample sizes as tabulated by
G*Power / Cohen), so a wrong formula (wrong degrees of freedom, SD instead of standard error, one-sided quantile,
unpaired differences, a normal instead of a t quantile) fails.
"""

from __future__ import annotations

import doctest
import math
import statistics
from pathlib import Path

import pytest
from helpers_scripts import load_script


pytest.importorskip("scipy")

PATH = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo" / "stats.py"


stats = load_script(PATH, "codapo_vs_grpo_stats")


def test_docstring_examples_hold():
    failures, attempted = doctest.testmod(stats, verbose=False)
    assert attempted >= 5
    assert failures == 0


def test_paired_differences_pair_by_position_and_reject_mismatched_seeds():
    assert stats.paired_differences([50.0, 40.0, 30.0], [45.0, 42.0, 30.0]) == [5.0, -2.0, 0.0]
    with pytest.raises(ValueError, match="one value per seed"):
        stats.paired_differences([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        stats.paired_differences([float("nan")], [1.0])


def test_paired_t_interval_by_hand():
    # d = [1, 2, 3, 4, 5, 6]: mean 3.5, sd = sqrt(3.5), se = sqrt(3.5 / 6), t_{0.975, 5} = 2.570582 (table value).
    result = stats.paired_t_interval([1, 2, 3, 4, 5, 6])
    se = math.sqrt(3.5 / 6)
    assert result.n == 6
    assert result.mean == pytest.approx(3.5)
    assert result.sd == pytest.approx(math.sqrt(3.5))
    assert result.low == pytest.approx(3.5 - 2.570582 * se, abs=1e-5)
    assert result.high == pytest.approx(3.5 + 2.570582 * se, abs=1e-5)
    # t = 3.5 / se = 4.5826 with 5 df: two-sided p = 0.00593 (table / independent computation)
    assert result.p_value == pytest.approx(0.005934, abs=2e-5)
    # 90 % uses t_{0.95, 5} = 2.015048
    narrow = stats.paired_t_interval([1, 2, 3, 4, 5, 6], confidence=0.90)
    assert narrow.high - narrow.mean == pytest.approx(2.015048 * se, abs=1e-5)


def test_paired_t_interval_two_seeds_is_the_cauchy_case():
    # df = 1: t quantile = tan(pi * 0.475) = 12.7062; p = 1 - 2 / pi * atan(|t|).
    diffs = [2.9, -15.7]
    result = stats.paired_t_interval(diffs)
    se = abs(diffs[0] - diffs[1]) / math.sqrt(2) / math.sqrt(2)
    quantile = math.tan(math.pi * 0.475)
    assert result.low == pytest.approx(-6.4 - quantile * se, rel=1e-9)
    assert result.high == pytest.approx(-6.4 + quantile * se, rel=1e-9)
    assert result.p_value == pytest.approx(1 - 2 / math.pi * math.atan(6.4 / se), rel=1e-9)


def test_paired_t_interval_degenerate_and_bad_input():
    same = stats.paired_t_interval([2.0, 2.0, 2.0])
    assert (same.low, same.mean, same.high, same.p_value) == (2.0, 2.0, 2.0, 0.0)
    assert stats.paired_t_interval([0.0, 0.0]).p_value == 1.0
    with pytest.raises(ValueError, match="at least 2"):
        stats.paired_t_interval([1.0])
    with pytest.raises(ValueError, match="confidence"):
        stats.paired_t_interval([1.0, 2.0], confidence=95)


def test_paired_bootstrap_interval_is_seeded_bounded_and_close_to_t_for_many_seeds():
    diffs = [3.1, -1.2, 4.4, 0.5, 2.2, 6.0]
    a = stats.paired_bootstrap_interval(diffs, seed=3)
    b = stats.paired_bootstrap_interval(diffs, seed=3)
    assert a == b
    assert min(diffs) <= a.low < a.mean < a.high <= max(diffs)
    assert a.mean == pytest.approx(statistics.fmean(diffs))
    # the percentile interval of the mean is narrower than the range, wider at 99 % than at 80 %
    wide = stats.paired_bootstrap_interval(diffs, confidence=0.99, seed=3)
    narrow = stats.paired_bootstrap_interval(diffs, confidence=0.80, seed=3)
    assert wide.low < a.low < narrow.low and narrow.high < a.high < wide.high
    # With many pairs the bootstrap interval of the mean approaches mean +- 1.96 * sd / sqrt(n).
    many = [((i * 7919) % 101) / 10.0 for i in range(400)]
    boot = stats.paired_bootstrap_interval(many, resamples=4000, seed=0)
    half = 1.96 * statistics.stdev(many) / math.sqrt(len(many))
    assert boot.high - boot.low == pytest.approx(2 * half, rel=0.08)
    assert (boot.low + boot.high) / 2 == pytest.approx(statistics.fmean(many), abs=0.1 * half)


def test_power_matches_published_paired_t_sample_sizes():
    # Two-sided paired t-test, alpha 0.05, power 0.8 (G*Power): d = 1 -> 10 pairs, d = 0.5 -> 34, d = 0.8 -> 15.
    assert stats.required_seeds(1.0, 1.0) == 10
    assert stats.required_seeds(0.5, 1.0) == 34
    assert stats.required_seeds(8.0, 10.0) == 15
    assert stats.required_seeds(-5.0, 10.0) == 34  # the sign of the effect does not matter
    # power grows with n and the effect; at effect 0 it is alpha
    assert stats.paired_t_power(0.0, 1.0, 8) == pytest.approx(0.05, abs=1e-9)
    assert stats.paired_t_power(1.0, 1.0, 6) < stats.paired_t_power(1.0, 1.0, 10) < stats.paired_t_power(1.5, 1.0, 10)
    assert stats.paired_t_power(1.0, 1.0, 10) == pytest.approx(0.8031, abs=5e-4)
    # large effects: power 1, never NaN (scipy's noncentral-t lower tail is NaN at some noncentralities)
    for effect in (4.0, 8.0, 10.0, 20.0):
        assert stats.paired_t_power(effect, 1.0, 6) == pytest.approx(1.0, abs=1e-6)


def test_detectable_effect_inverts_required_seeds():
    for sd, n in ((1.0, 6), (13.2, 6), (5.0, 10), (8.0, 12)):
        effect = stats.detectable_effect(sd, n)
        assert stats.paired_t_power(effect, sd, n) == pytest.approx(0.8, abs=1e-6)
        assert stats.required_seeds(effect * 1.001, sd) == n
    assert stats.detectable_effect(13.2, 6) == pytest.approx(13.2 * stats.detectable_effect(1.0, 6))


def test_power_bad_input():
    with pytest.raises(ValueError, match="n >= 2"):
        stats.paired_t_power(1.0, 1.0, 1)
    with pytest.raises(ValueError, match="sd"):
        stats.paired_t_power(1.0, 0.0, 5)
    with pytest.raises(ValueError, match="non-zero"):
        stats.required_seeds(0.0, 1.0)


def test_verdict_rule():
    def interval(low, high):
        return stats.PairedInterval((low + high) / 2, low, high, 6, 1.0, "paired-t", 0.95)

    assert stats.verdict(interval(0.5, 9.0), 5.0) == "confirm"
    assert stats.verdict(interval(-3.0, 4.0), 5.0) == "refute"  # any gain is below the smallest effect of interest
    assert stats.verdict(interval(-9.0, -1.0), 5.0) == "refute"  # the treatment is worse
    assert stats.verdict(interval(-2.0, 8.0), 5.0) == "inconclusive"
    assert stats.verdict(interval(0.0, 8.0), 5.0) == "inconclusive"  # touching 0 is not above it
    with pytest.raises(ValueError, match="smallest_effect"):
        stats.verdict(interval(1.0, 2.0), 0.0)


# The sign-flip (paired permutation) test: issue 27's non-parametric check of round 1's rule.


def _brute_force_sign_flip(differences, null, alternative):
    """Enumerate the sign patterns of the centred differences with integer arithmetic (hand examples are in
    integer points), independently of the module's tolerance."""
    centred = [d - null for d in differences]
    observed = sum(centred)
    count = 0
    for mask in range(2 ** len(centred)):
        total = sum(abs(c) if mask >> i & 1 else -abs(c) for i, c in enumerate(centred))
        count += {"less": total <= observed, "greater": total >= observed, "two-sided": abs(total) >= abs(observed)}[
            alternative
        ]
    return count / 2 ** len(centred)


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
@pytest.mark.parametrize(
    ("differences", "null"),
    [([-20, -17, -5, -26, 7, 3], 5), ([4, -1, 6, 2, -3], 0), ([1, 2, 3, 4, 5, 6, 7], 4), ([-2, 9, 0, 5], 1)],
)
def test_sign_flip_matches_brute_force_enumeration(differences, null, alternative):
    assert stats.sign_flip_p_value(differences, null, alternative) == pytest.approx(
        _brute_force_sign_flip(differences, null, alternative), abs=1e-12
    )


def test_sign_flip_hand_values_and_round_1():
    # all six centred differences negative: only the observed pattern is as extreme -> 1/64
    assert stats.sign_flip_p_value([-1, -2, -3, -4, -5, -6], 0.0, "less") == 1 / 64
    # centred by the null of 5 points: [-25, -22, -10, -31, +2, -2], sum -88; as extreme or more: all negative (-92)
    # and the two patterns with one of the 2s positive (-88 each: the observed one and its tie) -> 3/64
    assert stats.sign_flip_p_value([-20, -17, -5, -26, 7, 3], 5.0, "less") == 3 / 64
    # round 1's per-seed level-5 differences (CoDaPO - GRPO, report.md): "the effect is 5 or more" at p = 2/64
    round_1 = [-19.625, -17.25, -5.375, -25.875, 7.0, 2.75]
    assert stats.sign_flip_p_value(round_1, 5.0, "less") == pytest.approx(2 / 64)
    assert stats.sign_flip_p_value(round_1, 0.0, "two-sided") == pytest.approx(12 / 64)
    # [4, -1, 6]: sums of the 8 patterns 11, 9, 3, 1, -1, -3, -9, -11; observed 9 -> "greater" 2/8, "less" 7/8
    assert stats.sign_flip_p_value([4, -1, 6], 0, "greater") == 2 / 8
    assert stats.sign_flip_p_value([4, -1, 6], 0, "less") == 7 / 8


def test_sign_flip_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        stats.sign_flip_p_value([])
    with pytest.raises(ValueError, match="alternative"):
        stats.sign_flip_p_value([1.0, 2.0], alternative="below")
    with pytest.raises(ValueError, match="finite"):
        stats.sign_flip_p_value([1.0, math.nan])
    with pytest.raises(ValueError, match="2\\^21"):
        stats.sign_flip_p_value([1.0] * 21)


def test_one_sided_t_p_value_matches_the_interval():
    """p < a exactly when the two-sided 1 - 2a interval lies on the alternative's side of the null."""
    differences = [6.0, 7.5, 3.0, 9.0, 5.5, 8.0, 4.0, 7.0]
    for level in (0.008, 0.0226, 0.025):
        interval = stats.paired_t_interval(differences, confidence=1 - 2 * level)
        for null in (0.0, 3.0, 4.0, 5.0, 9.0):
            assert (stats.one_sided_t_p_value(differences, null, "greater") < level) == (interval.low > null)
            assert (stats.one_sided_t_p_value(differences, null, "less") < level) == (interval.high < null)
    # the two one-sided p-values of the same null add up to 1; twice the smaller is the two-sided p
    up, down = (stats.one_sided_t_p_value(differences, 0.0, a) for a in ("greater", "less"))
    assert up + down == pytest.approx(1.0) and 2 * min(up, down) == pytest.approx(
        stats.paired_t_interval(differences).p_value
    )
    assert stats.one_sided_t_p_value([2.0, 2.0], 0.0, "greater") == 0.0
    assert stats.one_sided_t_p_value([2.0, 2.0], 5.0, "greater") == 1.0
    with pytest.raises(ValueError, match="alternative"):
        stats.one_sided_t_p_value(differences, 0.0, "two-sided")


def test_group_sequential_levels_spend_alpha_as_registered():
    """Published values (Lan-DeMets O'Brien-Fleming-type, one-sided 0.025, looks at 1/2 and 1: z 2.963 and 1.969),
    and a simulation of the canonical joint normal: the chance of crossing at either look is alpha, at the first
    look the spent alpha."""
    import numpy as np

    half = stats.group_sequential_levels(0.5)
    assert half.interim_z == pytest.approx(2.963, abs=1e-3) and half.final_z == pytest.approx(1.969, abs=1e-3)
    levels = stats.group_sequential_levels(10 / 14)  # round 2: one look at 10 of 14 seeds
    assert levels.interim_level == pytest.approx(stats.obrien_fleming_spending(10 / 14))
    assert 0.0079 < levels.interim_level < 0.0081 and 0.0225 < levels.final_level < 0.0227
    rng = np.random.default_rng(0)
    n = 2_000_000
    first = rng.standard_normal(n)
    increment = rng.standard_normal(n)
    t = 10 / 14
    z1 = first
    z2 = math.sqrt(t) * first + math.sqrt(1 - t) * increment  # corr(z1, z2) = sqrt(t)
    crossed_first = z1 >= levels.interim_z
    crossed = crossed_first | (z2 >= levels.final_z)
    assert crossed_first.mean() == pytest.approx(levels.interim_level, abs=4e-4)
    assert crossed.mean() == pytest.approx(0.025, abs=4e-4)
    # 8 of 14 seeds: the look's level is below the smallest sign-flip p of 8 seeds (1/256), as the issue says
    assert stats.group_sequential_levels(8 / 14).interim_level < 1 / 256
    assert stats.group_sequential_levels(10 / 14).interim_level > 1 / 1024
    with pytest.raises(ValueError, match="information fraction"):
        stats.group_sequential_levels(1.0)
