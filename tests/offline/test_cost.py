"""The cost model of index selection (thesis §3.4.3): AT-18 and AT-13 with the numbers of the
research notes, the hypoexponential distribution against its definition, the weights file."""

from __future__ import annotations

import math
import random

import pyarrow.fs as pafs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from situflow.offline.cost import (
    THESIS_WEIGHTS,
    Case,
    CostWeights,
    StreamStats,
    cardenas,
    coverage,
    hypoexponential,
    interval_case,
    query_cost,
)
from situflow.offline.pattern import PatternQuery, Symbol
from situflow.offline.selection import Costs, IndexCandidate, select_indexes

A, B_STAR, C, D = Symbol("A"), Symbol("B", kleene=True), Symbol("C"), Symbol("D")


def test_at18_cardenas_and_exponential_candidate_length() -> None:
    pattern = PatternQuery((Symbol("S1"), Symbol("S2", kleene=True), Symbol("S3")), 300)
    stats = StreamStats(rows=1_000_000, span=1_000_000)   # e1.t = 1, eN.t = 10^6
    cover = coverage(pattern, {0: 0.001}, stats)
    assert interval_case(pattern, [0]) is Case.S1
    assert cover.intervals == pytest.approx(1000)
    assert cover.extend == 300
    assert cover.alpha == pytest.approx(1 - (1 - 300 / 1e6) ** 1000) == pytest.approx(0.2592, abs=1e-4)
    within, partial = hypoexponential([0.01], 300)
    assert within == pytest.approx(1 - math.exp(-3)) == pytest.approx(0.9502, abs=1e-4)
    mean = 1 / 0.01 - 300 * math.exp(-3) / (1 - math.exp(-3))
    assert partial / within == pytest.approx(mean) == pytest.approx(84.28, abs=1e-2)


def test_at13_numbers_of_the_greedy_counterexample() -> None:
    pattern = PatternQuery((A, B_STAR, C, D), 100)
    stats = StreamStats(rows=1_000_000, span=1_000_000)   # Δt = 1, a window holds 100 events
    ac = coverage(pattern, {0: 0.01, 2: 0.02}, stats)
    cd = coverage(pattern, {2: 0.02, 3: 0.03}, stats)
    assert interval_case(pattern, [0, 2]) is Case.S1 and interval_case(pattern, [2, 3]) is Case.S3
    assert ac.intervals == pytest.approx(1e6 * 0.01 * (1 - math.exp(-2)))   # ≈ 8647
    assert round(ac.intervals) == 8647 and ac.alpha == pytest.approx(0.579, abs=1e-3)
    assert cd.intervals == pytest.approx(600) and cd.alpha == pytest.approx(0.058, abs=1e-3)
    assert ac.extend == cd.extend == 100


def test_at13_select_indexes_takes_the_adjacent_pair_for_two_indexes() -> None:
    """With secondary reads cheap against primary ones, the best of the k = 2 frontier is {C, D},
    not greedy's {A, C}; when they are expensive, no index pays."""
    pattern = PatternQuery((A, B_STAR, C, D), 100)
    stats = StreamStats(rows=1_000_000, span=1_000_000)
    candidates = [IndexCandidate(0, "a", 0.01), IndexCandidate(2, "c", 0.02), IndexCandidate(3, "d", 0.03)]

    def estimator(config: frozenset[IndexCandidate]) -> Costs:
        cover = coverage(pattern, {c.position: c.selectivity for c in config}, stats)
        return Costs(pio=cover.alpha * stats.rows, sio=sum(c.selectivity for c in config) * stats.rows)

    def names(config: frozenset[IndexCandidate]) -> set[str]:
        return {pattern.symbols[c.position].name for c in config}

    cheap = select_indexes(pattern, candidates, estimator, lambda c: c.pio + 0.01 * c.sio)
    best_pair, _ = min(cheap.frontiers[2], key=lambda entry: entry[1].pio + 0.01 * entry[1].sio)
    assert names(best_pair) == {"C", "D"}
    assert estimator(best_pair).pio < estimator(frozenset(candidates[:2])).pio
    expensive = select_indexes(pattern, candidates, estimator, lambda c: c.pio + 100 * c.sio)
    assert expensive.chosen == frozenset()


def test_base_case_extend_is_two_windows_minus_the_candidate_length() -> None:
    """ERRATUM 4: 2w − µc (Δt⁻ = 0), and with Δt⁻ = 1 one tick less per BS outside."""
    pattern = PatternQuery((Symbol("A"), Symbol("B"), Symbol("C")), 50)
    stats = StreamStats(rows=10_000, span=10_000)
    cover = coverage(pattern, {1: 0.1}, stats)
    assert interval_case(pattern, [1]) is Case.BASE
    assert cover.length == 0 and cover.extend == 100
    assert coverage(pattern, {1: 0.1}, stats, min_gap=1).extend == 98


def test_one_selected_block_has_its_fixed_span_and_no_window_loss() -> None:
    pattern = PatternQuery((Symbol("A"), Symbol("B"), Symbol("C"), Symbol("D")), 10)
    cover = coverage(pattern, {0: 0.5, 2: 0.2}, StreamStats(rows=1000, span=2000))
    assert cover.intervals == pytest.approx(1000 * 0.5 * 0.2)
    assert cover.length == pytest.approx(2 * 2.0)
    assert coverage(PatternQuery(pattern.symbols, 3), {0: 0.5, 2: 0.2},
                    StreamStats(rows=1000, span=2000)).intervals == 0


def test_no_index_covers_everything() -> None:
    cover = coverage(PatternQuery((A, C), 10), {}, StreamStats(rows=100, span=500))
    assert cover.alpha == 1 and cover.intervals == 1


def _simulated(rates: list[float], x: float, draws: int = 40_000) -> tuple[float, float]:
    generator = random.Random(7)
    sums = [sum(generator.expovariate(r) for r in rates) for _ in range(draws)]
    below = [s for s in sums if s <= x]
    return len(below) / draws, sum(below) / draws


@pytest.mark.parametrize("rates", [[0.02, 0.05], [0.01, 0.01, 0.01], [0.01, 0.01, 0.03],
                                   [0.02, 0.0200001, 0.1]])
def test_hypoexponential_matches_its_definition(rates: list[float]) -> None:
    """Distinct, equal (Erlang) and nearly equal rates (spread apart) against simulation."""
    within, partial = hypoexponential(rates, 150)
    simulated_within, simulated_partial = _simulated(rates, 150)
    assert within == pytest.approx(simulated_within, abs=0.01)
    assert partial == pytest.approx(simulated_partial, rel=0.03)


@given(st.lists(st.floats(0.001, 1.0), min_size=1, max_size=6), st.floats(1, 1000))
def test_hypoexponential_is_a_distribution_below_x(rates: list[float], x: float) -> None:
    within, partial = hypoexponential(rates, x)
    assert 0 <= within <= 1
    assert 0 <= partial <= within * x * (1 + 1e-9)
    assert hypoexponential(rates, x * 2)[0] >= within - 1e-9


def test_cardenas_bounds() -> None:
    assert cardenas(0, 10, 100) == 0 and cardenas(5, 200, 100) == 1
    assert cardenas(1, 10, 100) == pytest.approx(0.1)
    assert cardenas(0.2, 200, 100) == pytest.approx(0.2)   # fewer than one interval expected


def test_weights_default_to_the_thesis_and_round_trip(tmp_path) -> None:
    fs = pafs.LocalFileSystem()
    assert CostWeights.load(fs, str(tmp_path)) == THESIS_WEIGHTS == CostWeights(1.13, 2.53, 12.73, 0.0)
    calibrated = CostWeights(pio=2e-5, sio=3e-5, sort=1e-8, per_interval=1e-3)
    path = calibrated.save(fs, str(tmp_path))
    assert path.endswith("_index/_calibration.json")
    assert CostWeights.load(fs, str(tmp_path)) == calibrated


def test_query_cost_is_equation_3_1_in_pages() -> None:
    weights = CostWeights(pio=1.0, sio=2.0, sort=0.5, per_interval=3.0)
    cost = query_cost(weights, primary_bytes=8192 * 10, index_rows=8, index_row_bytes=1024,
                      intervals=2)
    assert cost == pytest.approx(10 + 2 * 1 + 0.5 * 8 * 3 + 3 * 2)


def test_order_free_patterns_replay_around_the_rarest_symbol() -> None:
    """TPStream and COGRA: ±w around a hit of the rarest symbol where ±w around a hit of every
    other meets it, so with every other within 2w."""
    pattern = PatternQuery((Symbol("A"), Symbol("T", kleene=True), Symbol("B")), 10)
    cover = coverage(pattern, {0: 0.001, 2: 0.01}, StreamStats(rows=1e6, span=1e6), ordered=False)
    assert cover.intervals == pytest.approx(1e6 * 0.001 * (1 - math.exp(-0.01 * 40)))
    assert cover.extend == 20 and cover.alpha == pytest.approx(cardenas(cover.intervals, 20, 1e6))
