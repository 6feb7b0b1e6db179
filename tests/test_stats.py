"""The statistics module: intervals that cover what they should, clustered intervals that
widen when items are correlated, paired verdicts, McNemar on a known table."""

from __future__ import annotations

import numpy as np
import pytest

from nanobot_memory_adapters.stats import (
    MIN_CLUSTERS,
    format_difference,
    format_estimate,
    format_p,
    mcnemar_exact,
    mean_ci,
    median_difference,
    newcombe_paired,
    paired_difference,
    rounded,
    wilson_ci,
)


def test_bootstrap_interval_contains_the_true_mean_of_a_seeded_sample():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(40):  # coverage near the nominal 95 % over repeated samples
        sample = rng.normal(0.6, 0.2, size=80)
        e = mean_ci(sample.tolist(), seed=1, n_boot=1000)
        assert e.low <= e.value <= e.high and e.method == "bootstrap" and e.n == 80
        hits += e.low <= 0.6 <= e.high
    assert hits >= 34  # 40 draws at 95 %: fewer than 34 would be a broken interval


def test_bootstrap_is_deterministic_for_a_seed_and_varies_with_it():
    v = np.random.default_rng(3).random(50).tolist()
    assert mean_ci(v, seed=5) == mean_ci(v, seed=5)
    assert mean_ci(v, seed=5).low != mean_ci(v, seed=6).low


def test_clustered_interval_is_wider_when_clusters_are_correlated():
    rng = np.random.default_rng(11)
    centres = rng.normal(0.5, 0.2, size=10)  # ten "conversations", strong shared effect
    values = np.concatenate([c + rng.normal(0, 0.02, size=30) for c in centres])
    clusters = np.repeat(np.arange(10), 30).tolist()
    plain = mean_ci(values.tolist())
    clustered = mean_ci(values.tolist(), clusters=clusters)
    assert clustered.method == "cluster-bootstrap" and clustered.n_clusters == 10
    assert (clustered.high - clustered.low) > 3 * (plain.high - plain.low)


def test_one_cluster_falls_back_to_items_and_says_so():
    e = mean_ci([0.1, 0.5, 0.9, 0.4], clusters=["c"] * 4)
    assert e.method == "bootstrap (1 cluster)" and e.high > e.low


def test_wilson_for_plain_proportions_matches_the_textbook_value():
    # 8 of 10, 95 %: Wilson interval 0.490 .. 0.943 (Newcombe 1998, table I style)
    e = wilson_ci(8, 10)
    assert (round(e.low, 3), round(e.high, 3)) == (0.490, 0.943)
    assert mean_ci([1] * 8 + [0] * 2).method == "wilson"
    zero = mean_ci([0] * 30)
    assert zero.low == 0 and zero.high > 0.1  # not a point at 0, as a bootstrap would give


def test_mcnemar_exact_on_a_known_table():
    # discordant pairs 1 vs 9: two-sided exact binomial p = 22/1024 = 0.021484375
    a = [1] * 1 + [0] * 9 + [1] * 20 + [0] * 5
    b = [0] * 1 + [1] * 9 + [1] * 20 + [0] * 5
    assert mcnemar_exact(a, b) == pytest.approx(22 / 1024)
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]) == 1.0


def test_paired_difference_verdicts():
    better = [1] * 70 + [0] * 30
    worse = [1] * 30 + [0] * 70
    d = paired_difference(better, worse, names=("simple_rag", "no_memory"))
    assert d.distinguishable and d.verdict == "simple_rag > no_memory" and d.low > 0
    assert d.p_value is not None and d.p_value < 0.001
    flipped = paired_difference(worse, better, names=("simple_rag", "no_memory"))
    assert flipped.verdict == "no_memory > simple_rag" and flipped.high < 0
    same = paired_difference(better, better)
    assert not same.distinguishable and same.verdict == "not distinguishable"
    assert same.p_value == 1.0
    noisy = paired_difference([1, 0] * 10, [0, 1] * 10)
    assert not noisy.distinguishable and noisy.low < 0 < noisy.high
    graded = paired_difference([0.5, 0.7, 0.9], [0.4, 0.6, 0.95])
    assert graded.p_value is None  # McNemar only for 0/1 outcomes


def test_paired_difference_by_cluster_is_wider():
    rng = np.random.default_rng(2)
    shift = np.repeat(rng.normal(0.05, 0.3, size=8), 25)
    a = (0.5 + shift + rng.normal(0, 0.01, 200)).tolist()
    b = (0.5 + rng.normal(0, 0.01, 200)).tolist()
    clusters = np.repeat(np.arange(8), 25).tolist()
    plain = paired_difference(a, b)
    clustered = paired_difference(a, b, clusters=clusters)
    assert (clustered.high - clustered.low) > (plain.high - plain.low)
    assert clustered.method == "cluster-bootstrap"


def test_bad_input_gets_one_clear_error():
    with pytest.raises(ValueError, match="non-empty"):
        mean_ci([])
    with pytest.raises(ValueError, match="pair them"):
        paired_difference([1, 0], [1])
    with pytest.raises(ValueError, match="labels for"):
        mean_ci([1.0, 2.0], clusters=["x"])


def test_formatting():
    e = mean_ci([1] * 8 + [0] * 2)
    assert format_estimate(e) == "0.800 [0.49, 0.94] n=10"
    d = paired_difference([1] * 70 + [0] * 30, [1] * 30 + [0] * 70, names=("A", "B"))
    assert format_difference(d).endswith("A > B") and format_difference(d).startswith("+0.400")


def test_few_discordant_pairs_all_one_way_are_not_a_verdict():
    # 4 discordant tests of 200, all favouring a: no bootstrap resample goes below 0,
    # but McNemar's exact p is 2 * 0.5**4 = 0.125: not a difference at 95 %
    a = [1] * 4 + [1] * 100 + [0] * 96
    b = [0] * 4 + [1] * 100 + [0] * 96
    d = paired_difference(a, b, names=("A", "B"))
    assert d.low >= 0 and d.p_value == pytest.approx(0.125)
    assert not d.distinguishable and d.verdict == "not distinguishable"
    # with enough discordant pairs all one way, both agree
    many = paired_difference([1] * 12 + [0] * 188, [0] * 200, names=("A", "B"))
    assert many.distinguishable and many.verdict == "A > B" and many.p_value is not None
    assert many.p_value < 0.05


def test_clustered_binary_interval_is_never_narrower_than_wilson():
    # 17 "personas" with the same 12-test design: every cluster has mean 4/12, so a
    # cluster bootstrap is a point at 0.333; all 1s is a point at 1.0
    same = ([1] * 4 + [0] * 8) * 17
    personas = [i // 12 for i in range(len(same))]
    e = mean_ci(same, clusters=personas)
    w = wilson_ci(sum(same), len(same))
    assert e.method == "cluster-bootstrap+wilson" and e.n_clusters == 17
    assert e.low <= w.low and e.high >= w.high and e.high - e.low > 0.1
    assert mean_ci(same, clusters=personas, method="bootstrap").high - \
        mean_ci(same, clusters=personas, method="bootstrap").low < 1e-9
    perfect = mean_ci([1] * 204, clusters=personas)
    assert perfect.high == 1.0 and perfect.low < 0.99
    # when the clusters differ, the union is as wide as the cluster bootstrap
    spread = [1] * 120 + [0] * 84
    by = [i // 12 for i in range(204)]
    boot = mean_ci(spread, clusters=by, method="bootstrap")
    union = mean_ci(spread, clusters=by)
    assert union.low == min(boot.low, wilson_ci(120, 204).low)
    assert union.high == max(boot.high, wilson_ci(120, 204).high)
    assert union.high - union.low > wilson_ci(120, 204).high - wilson_ci(120, 204).low


def test_rounding_keeps_significant_digits():
    assert rounded(3.2e-9) == 3.2e-9 and rounded(0.1234567) == 0.123457
    assert rounded(None) is None and rounded(0.0) == 0.0 and MIN_CLUSTERS == 5
    assert f"{rounded(-0.0):+.2f}" == "+0.00"  # a bound of -0.0 never prints as -0.00


def test_p_values_print_as_a_bound_below_a_thousandth():
    assert format_p(3.2e-9) == "<0.001" and format_p(0.0) == "<0.001"
    assert format_p(0.0361) == "0.0361" and format_p(1.0) == "1" and format_p(None) == "–"


def test_a_paired_difference_of_0_1_values_is_never_a_point():
    # 17 clusters with the same 12-test design: a - b is -8/12 in every cluster, so the
    # cluster bootstrap is a point; all pairs discordant one way: every bootstrap is a point
    a = ([1] * 4 + [0] * 8) * 17
    b = [1] * 204
    by = [i // 12 for i in range(204)]
    d = paired_difference(a, b, clusters=by, names=("A", "B"))
    low, high = newcombe_paired(a, b)
    assert d.method == "cluster-bootstrap+newcombe" and d.verdict == "B > A"
    assert d.low <= low < d.value < high <= d.high and d.high - d.low > 0.05
    every = paired_difference([0] * 60, [1] * 60, names=("A", "B"))
    assert every.value == every.low == -1.0 and -1.0 < every.high < -0.9
    # Newcombe's (1998) paired example, 53/16/8/9 of 86: method 10 gives -0.0177 to 0.2018
    x = [1] * 53 + [1] * 16 + [0] * 8 + [0] * 9
    y = [1] * 53 + [0] * 16 + [1] * 8 + [0] * 9
    lo, hi = newcombe_paired(x, y)
    assert abs(lo - (-0.0177)) < 5e-4 and abs(hi - 0.2018) < 5e-4


def test_a_bound_that_rounds_to_zero_prints_without_a_minus_sign():
    """A zero lift's Newcombe bound is -0.0026: it printed as ``[-0.00,+0.00]``."""
    from nanobot_memory_adapters.stats import format_bounds, format_number

    assert format_number(-0.0026, 2, signed=True) == "+0.00"
    assert format_number(-0.0026, 2) == "0.00" and format_number(-0.006, 2) == "-0.01"
    assert format_bounds(-0.0026, 0.0026, signed=True, sep=",") == "[+0.00,+0.00]"
    assert format_bounds(-0.2, 0.0026, signed=True) == "[-0.20, +0.00]"


def test_median_difference_of_independent_samples_covers_a_known_shift_and_zero():
    rng = np.random.default_rng(3)
    base = rng.normal(50, 5, size=200)
    shifted = median_difference(base + 13, rng.normal(50, 5, size=150))
    assert shifted.low < 13 < shifted.high and shifted.low > 10  # the shift, not 0
    assert shifted.n == 150 and shifted.method == "bootstrap (independent)"
    same = median_difference(base, rng.normal(50, 5, size=200))
    assert same.low < 0 < same.high  # no shift: the interval covers 0
    assert median_difference(base, base[::-1]) == median_difference(base, base[::-1])
    with pytest.raises(ValueError, match="b: need a non-empty list"):
        median_difference(base, [])


def test_percentile_ci_brackets_the_percentile_and_narrows_with_n():
    import random

    from nanobot_memory_adapters.stats import percentile, percentile_ci

    rng = random.Random(1)
    small = [rng.lognormvariate(3, 0.3) for _ in range(40)]
    large = [rng.lognormvariate(3, 0.3) for _ in range(400)]
    for values in (small, large):
        for p in (50, 95):
            est = percentile_ci(values, p)
            assert est.value == percentile(values, p)
            assert est.low <= est.value <= est.high and est.n == len(values)
    assert (percentile_ci(large, 50).high - percentile_ci(large, 50).low
            < percentile_ci(small, 50).high - percentile_ci(small, 50).low)


def test_median_ratio_of_twice_as_slow_is_two():
    from nanobot_memory_adapters.stats import median_ratio

    base = [10.0 + i % 7 for i in range(60)]
    est = median_ratio([2 * v for v in base], base)
    assert est.value == 2.0 and est.low <= 2.0 <= est.high
    assert est.low > 1.5 and est.high < 2.5
