"""Query fuzzing (issue #12, point 6): generated and mutated queries never crash ``situflow run``.

Every input either compiles and runs on a small random stream (exit 0), or is refused with
``QUERY_FILE:line:col: message`` and exit 2; never a traceback, never a hang (a per-case time
budget, :mod:`tests.fuzz.harness`). Generated trees also print to canonical text that parses
back to the same tree, the property query ids rely on (``situflow check`` prints that text).

The default run is bounded (about a minute); ``pytest -m slow tests/fuzz`` runs many more
examples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import grammar
from tests.fuzz.harness import run, streams, words
from tests.fuzz.mutations import mutated, seeds
from tests.profiles import scaled

SEEDS = seeds()
GENERATED = st.one_of(grammar.tpstream_queries(), grammar.sase_queries(),
                      grammar.cogra_queries())


def fuzz(examples: int, slow: bool = False
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hypothesis settings of a fuzz test, ``examples`` in the ``ci`` profile (tests/profiles.py):
    the suite's runs draw the same examples every time (derandomized, so CI cannot fail on a
    new draw); the long runs (``-m slow``, or the ``deep`` profile) draw anew."""
    return settings(max_examples=scaled(examples / 100), database=None, derandomize=not slow,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module", autouse=True)
def compiled_kernels() -> None:
    """Run each bundled example once, so that compiling the numba kernels of the three engines
    does not count against the first cases' budgets."""
    for text in SEEDS[:5]:
        run(text, [{"ts": t, "type": "A", "x": t, "k": 0} for t in range(3)])


def canonical_round_trip(tree: Any) -> None:
    text = grammar.canonical(tree)
    again = grammar.parse(text)
    assert grammar.canonical(again) == text
    assert grammar.normalized(again) == grammar.normalized(tree)


def generated_case(data: st.DataObject) -> None:
    run(grammar.canonical(data.draw(GENERATED)), data.draw(streams()))


def mutated_case(data: st.DataObject) -> None:
    seed = st.one_of(st.sampled_from(SEEDS), GENERATED.map(grammar.canonical))
    text = data.draw(mutated(seed))
    run(text, data.draw(streams(words(text))))


@fuzz(300)
@given(GENERATED)
def test_canonical_text_parses_back_to_the_same_tree(tree: Any) -> None:
    canonical_round_trip(tree)


@fuzz(150)
@given(st.data())
def test_generated_queries_run_or_are_refused_with_a_located_error(data: st.DataObject) -> None:
    generated_case(data)


@fuzz(600)
@given(st.data())
def test_mutated_queries_run_or_are_refused_with_a_located_error(data: st.DataObject) -> None:
    mutated_case(data)


@pytest.mark.slow
@fuzz(3000, slow=True)
@given(GENERATED)
def test_canonical_round_trip_long_run(tree: Any) -> None:
    canonical_round_trip(tree)


@pytest.mark.slow
@fuzz(1500, slow=True)
@given(st.data())
def test_generated_queries_long_run(data: st.DataObject) -> None:
    generated_case(data)


@pytest.mark.slow
@fuzz(5000, slow=True)
@given(st.data())
def test_mutated_queries_long_run(data: st.DataObject) -> None:
    mutated_case(data)
