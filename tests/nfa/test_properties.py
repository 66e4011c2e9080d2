"""Property tests: the NFA^b equals the brute-force definition (``reference.py``) on random small
streams and random queries (sequence length <= 5, Kleene plus, negation, every strategy,
CONSUME), whatever the batch size, and across snapshot/restore."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situflow.lang import sase
from tests.nfa.harness import Harness, feed
from tests.nfa.reference import Reference
from tests.profiles import scaled

STRATEGIES = ["strict_contiguity", "partition_contiguity", "skip_till_next_match",
              "skip_till_any_match"]


def _earlier(draw: Any, comp: tuple[str, str, bool]) -> str:
    _, var, kleene = comp
    if not kleene:
        return f"{var}.x"
    return draw(st.sampled_from([f"{var}[1].x", f"{var}[{var}.LEN].x", f"avg({var}[].x)"]))


@st.composite
def queries(draw: Any, compiled: bool = False) -> str:
    """A random query; ``compiled``: one the compiled loop runs (partition contiguity or skip
    till next match, no negation, no ``CONSUME``)."""
    n = draw(st.integers(1, 3))
    comps = [(draw(st.sampled_from("AB")), f"v{k}", draw(st.booleans())) for k in range(n)]
    preds: list[str] = []
    c = st.integers(0, 2)
    for k, (_, v, kleene) in enumerate(comps):
        options = []
        if kleene:
            options += [f"{v}[1].x > {draw(c)}", f"{v}[i].x > {v}[i-1].x",
                        f"{v}[i].x >= avg({v}[..i-1].x)", f"{v}[i].x <= max({v}[..i-1].x)",
                        f"{v}.LEN <= 2", f"{v}.LEN >= 2", f"{v}[2].x > {draw(c)}",
                        f"{v}[{v}.LEN].x < {draw(c)}", f"sum({v}[].x) > {draw(c)}",
                        f"{v}[i].x != {v}[1].x"]
            if k:
                options.append(f"{v}[i].x >= {_earlier(draw, comps[k - 1])}")
        else:
            options += [f"{v}.x > {draw(c)}", f"{v}.x <= {draw(c)}"]
            if k:
                options += [f"{v}.x >= {_earlier(draw, comps[k - 1])}",
                            f"{v}.x != {_earlier(draw, comps[k - 1])}"]
        preds += draw(st.lists(st.sampled_from(options), max_size=2, unique=True))
    parts = [f"{t}+ {v}[]" if kleene else f"{t} {v}" for t, v, kleene in comps]
    negation_at = None if compiled else draw(st.none() | st.integers(0, n))
    if negation_at is not None:
        parts.insert(negation_at, f"~({draw(st.sampled_from('ABC'))} w)")
        if draw(st.booleans()):
            neighbour = comps[max(negation_at - 1, 0)]
            preds.append(f"w.x = {_earlier(draw, neighbour)}")
    equivalence = draw(st.sampled_from(["", "[k]", "PARTITION BY k"]))
    if equivalence == "[k]":
        preds.insert(0, "[k]")
    leading_or_trailing = negation_at in (0, n)
    window = draw(st.integers(1, 6) if leading_or_trailing else st.none() | st.integers(1, 6))
    consume = not compiled and draw(st.booleans()) and draw(st.booleans()) and negation_at != n
    variables = ", ".join(p.split()[-1].rstrip(")") for p in parts)
    strategies = STRATEGIES[1:3] if compiled else STRATEGIES
    text = f"PATTERN SEQ({', '.join(parts)}) WHERE {draw(st.sampled_from(strategies))}"
    text += f"({variables}) {{ {' AND '.join(preds)} }}"
    if window is not None:
        text += f" WITHIN {window} seconds"
    if equivalence.startswith("PARTITION"):
        text += " " + equivalence
    if consume:
        text += " CONSUME"
    return text


@st.composite
def streams(draw: Any, longest: int = 8) -> list[dict[str, Any]]:
    size = draw(st.integers(0, longest))
    events, ts = [], 0
    for i in range(size):
        ts += draw(st.integers(0, 2))
        event: dict[str, Any] = {"id": i, "seq": i, "ts": ts,
                                 "type": draw(st.sampled_from("AABBC")), "x": draw(st.integers(0, 3))}
        key = draw(st.sampled_from(["p", "q", "q", None]))
        if key is not None:
            event["k"] = key
        events.append(event)
    return events


def _nfa_keys(results: list[Any], query: sase.SaseQuery) -> Counter[Any]:
    return Counter(tuple((c.var, tuple(m.bindings[c.var])) for c in query.positives)
                   for m in results)


def _records(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "seq"} for e in events]


SETTINGS = settings(max_examples=scaled(15),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(queries(), streams())
def test_the_nfa_finds_exactly_the_matches_of_the_definition(text, events):
    h = Harness.for_query(text)
    query = h.compiled.ast
    window = query.within.seconds if query.within is not None else float("inf")
    expected = Counter(Reference(query, window).matches(events))
    assert _nfa_keys(h.run(_records(events)), query) == expected, text
    assert _nfa_keys(h.run(_records(events), merge_runs=False), query) == expected, text


@settings(max_examples=scaled(6), suppress_health_check=[HealthCheck.too_slow])
@given(queries(), streams(), st.integers(1, 8), st.data())
def test_batch_size_and_snapshots_do_not_change_the_results(text, events, size, data):
    h = Harness.for_query(text)
    records = _records(events)
    whole = [m.to_dict() for m in h.run(records)]
    assert [m.to_dict() for m in h.run(records, batch=size)] == whole
    cut = data.draw(st.integers(0, len(records)))
    op = h.compiled.operator()
    first = feed(op, records[:cut], finish=False)
    restored = h.compiled.restore(json.loads(json.dumps(op.snapshot())))
    rest = feed(restored, records[cut:], offset=cut)
    assert [m.to_dict() for m in first + rest] == whole

