"""Allen's relations, standard meanings (AT-05, with the papers' finishes read as finished-by)."""

from __future__ import annotations

import itertools

import pytest

from situflow.tpstream.match.allen import INVERSE, RANGES, RELATIONS, relation
from situflow.tpstream.match.situations import Situation, SituationBuffer

PAIRS = [
    ((1, 3), (5, 8), "before"), ((1, 3), (3, 8), "meets"), ((1, 5), (3, 8), "overlaps"),
    ((1, 3), (1, 8), "starts"), ((3, 5), (1, 8), "during"), ((3, 8), (1, 8), "finishes"),
    ((1, 8), (1, 8), "equals"),
]


@pytest.mark.parametrize("a, b, name", PAIRS)
def test_at05_each_pair_has_its_relation_and_the_swapped_pair_the_inverse(a, b, name):
    assert relation(*a, *b) == name
    assert relation(*b, *a) == INVERSE[name]


def test_the_papers_finishes_is_standard_finished_by():
    # Table 5.1: "A finishes B" := A.ts < B.ts < A.te = B.te
    assert relation(1, 8, 3, 8) == "finished-by"


def test_exactly_one_relation_holds_for_every_pair_of_intervals():
    spans = [(s, e) for s, e in itertools.product(range(5), repeat=2) if s < e]
    seen = {relation(*a, *b) for a in spans for b in spans}
    assert seen == set(RELATIONS)


def test_range_queries_find_exactly_the_related_situations():
    spans = [(s, e) for s, e in itertools.product(range(7), repeat=2) if s < e]
    for xs, xe in spans:
        for length in (1, 2, 3):
            disjoint = [(s, s + length) for s in range(0, 7, length)]
            buffer = SituationBuffer()
            for s, e in disjoint:
                buffer.append(Situation(0, s, e))
            for name in RANGES:
                found = [(buffer.items[i].ts, buffer.items[i].te)
                         for i in buffer.related(name, xs, xe)]
                assert found == [(s, e) for s, e in disjoint if relation(xs, xe, s, e) == name]
