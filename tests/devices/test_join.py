"""Windowed join (thesis §4.3.4): the four implementations against a brute-force join of the
merged streams, and the publish order of Fig. 4.5 (B2.3) under simulated schedules."""

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from situflow.devices.join import IMPLEMENTATIONS, PairProbe, SlotPublisher, WindowedJoin


def brute_join(left_times, left, right_times, right, window, radius):
    """Events one by one in time order (left first on ties), each against the other stream's
    last ``window`` events, oldest first."""
    events = sorted([(t, 0, i) for i, t in enumerate(left_times)]
                    + [(t, 1, i) for i, t in enumerate(right_times)])
    payloads, seen, pairs = (left, right), ([], []), []
    for _, side, i in events:
        for j in seen[1 - side][-window:]:
            a, b = payloads[side][i], payloads[1 - side][j]
            d2 = a.dtype.type(0.0)
            for k in range(a.shape[0]):
                d2 = d2 + (a[k] - b[k]) * (a[k] - b[k])
            if d2 <= a.dtype.type(radius) * a.dtype.type(radius):
                pairs.append((i, j) if side == 0 else (j, i))
        seen[side].append(i)
    return pairs


def run_join(implementation, device, window, radius, left_times, left, right_times, right,
             parts=5, seed=0):
    join = WindowedJoin(window, radius, implementation,
                        device if implementation in ("dispatch", "zero-copy") else None)
    rng = np.random.default_rng(seed)
    cuts_left = np.sort(rng.integers(0, len(left_times) + 1, size=parts - 1))
    cuts_right = np.sort(rng.integers(0, len(right_times) + 1, size=parts - 1))
    pairs = []
    for a, b in zip(np.split(np.arange(len(left_times)), cuts_left),
                    np.split(np.arange(len(right_times)), cuts_right), strict=True):
        got = join.process(left_times[a], left[a], right_times[b], right[b])
        pairs += list(zip(*(g.tolist() for g in got), strict=True))
    pairs += list(zip(*(g.tolist() for g in join.finish()), strict=True))
    return pairs


def streams(seed, n_left, n_right, dims=2, dtype=np.float64):
    rng = np.random.default_rng(seed)
    left_times = np.sort(rng.integers(0, 500, n_left))
    right_times = np.sort(rng.integers(0, 500, n_right))
    left = rng.random((n_left, dims)).astype(dtype)
    right = rng.random((n_right, dims)).astype(dtype)
    left[rng.random(n_left) < 0.05, 0] = np.nan  # a missing value matches nothing
    return left_times, left, right_times, right


@cache
def expected(window, radius):
    return brute_join(*streams(window, 1500, 1100), window, radius)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(("window", "radius"), [(1, 0.3), (63, 0.1), (64, 0.1), (65, 0.1),
                                                (700, 0.03)])
def test_every_implementation_returns_the_brute_force_pairs_in_order(
        window, radius, implementation, device):
    want = expected(window, radius)
    assert want  # the case joins something
    got = run_join(implementation, device, window, radius, *streams(window, 1500, 1100),
                   seed=window)
    assert got == want


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_all_pairs_match_and_no_pair_matches_at_the_extremes_of_selectivity(implementation, device):
    data = streams(5, 300, 200, dims=6, dtype=np.float32)
    everything = brute_join(*data, 100, 10.0)
    assert run_join(implementation, device, 100, 10.0, *data) == everything
    assert run_join(implementation, device, 100, 0.0, *data) == []


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_empty_batches_and_one_sided_streams_join_nothing_until_the_other_side_arrives(
        implementation, device):
    join = WindowedJoin(10, 1.0, implementation,
                        device if implementation in ("dispatch", "zero-copy") else None)
    none = (np.empty(0, np.int64), np.empty((0, 1)))
    assert [len(a) for a in join.process(*none, *none)] == [0, 0]
    left = (np.array([1, 2, 3]), np.zeros((3, 1)))
    assert [len(a) for a in join.process(*left, *none)] == [0, 0]
    got = join.process(*none, np.array([2]), np.zeros((1, 1)))
    # The right stream reached 2: the left events at 1 and 2 are taken; the left stream passed 2
    # (it showed 3): the right event at 2 is taken and meets them; the left event at 3 waits for
    # the right stream to reach 3, or for the end.
    assert [a.tolist() for a in got] == [[0, 1], [0, 0]]
    assert [a.tolist() for a in join.finish()] == [[2], [0]]


def test_an_event_waits_until_the_other_stream_has_passed_its_time():
    join = WindowedJoin(10, 0.0)
    left_then_right = join.process(np.array([5]), np.zeros((1, 1)), np.array([5]), np.zeros((1, 1)))
    # Left at 5 is taken (ties: left first), right at 5 must wait: the left stream could still
    # deliver another event at 5, which comes before it.
    assert [a.tolist() for a in left_then_right] == [[], []]
    got = join.process(np.array([5, 6]), np.zeros((2, 1)), np.empty(0, np.int64), np.empty((0, 1)))
    assert [a.tolist() for a in got] == [[0, 1], [0, 0]]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_a_consumer_reading_at_any_moment_never_sees_an_unwritten_slot(counts, random):
    """Work-groups reserve slots in one order, write slot by slot interleaved at random, and
    complete in any order; after every step, every slot below idxw is written."""
    publisher = SlotPublisher()
    written: set[int] = set()
    pending = []  # (start, count, next slot to write)
    steps = [("reserve", c) for c in counts]
    random.shuffle(steps)
    while steps or pending:
        if steps and (not pending or random.random() < 0.4):
            _, count = steps.pop()
            pending.append([publisher.reserve(count), count, 0])
        else:
            group = random.choice(pending)
            start, count, done = group
            if done < count:
                written.add(start + done)
                group[2] += 1
            else:
                pending.remove(group)
                publisher.complete(start, count)
        assert all(slot in written for slot in range(publisher.idxw))
    assert publisher.idxw == sum(counts)


def test_figure_4_5_the_second_wavefront_is_published_only_after_the_first():
    publisher = SlotPublisher()
    wf1, wf2 = publisher.reserve(2), publisher.reserve(2)
    publisher.complete(wf2, 2)
    assert publisher.idxw == 0
    publisher.complete(wf1, 2)
    assert publisher.idxw == 4


@given(st.lists(st.integers(0, 4), max_size=20), st.randoms(use_true_random=False),
       st.integers(0, 20))
@settings(max_examples=200, deadline=None)
def test_completing_many_segments_at_once_publishes_what_completing_them_one_by_one_does(
        counts, random, completed):
    one, many = SlotPublisher(), SlotPublisher()
    segments = [(one.reserve(c), c) for c in counts]
    for c in counts:
        many.reserve(c)
    random.shuffle(segments)
    segments = segments[:completed]
    for start, count in segments:
        one.complete(start, count)
    many.complete_all(np.array([s for s, _ in segments], np.int64),
                      np.array([c for _, c in segments], np.int64))
    assert many.idxw == one.idxw


def test_a_window_must_hold_an_event_streams_come_in_time_order_and_devices_are_given():
    with pytest.raises(ValueError, match="at least one event"):
        WindowedJoin(0, 1.0)
    with pytest.raises(ValueError, match="in time order"):
        WindowedJoin(5, 1.0).process(np.array([2, 1]), np.zeros((2, 1)), np.array([], np.int64),
                                     np.zeros((0, 1)))
    with pytest.raises(ValueError, match="at least 0"):
        WindowedJoin(5, -1.0)
    with pytest.raises(ValueError, match="needs an OpenCL device"):
        WindowedJoin(5, 1.0, "dispatch")


def test_a_new_event_against_a_window_of_2_20_events_gives_the_same_pairs_everywhere(device):
    rng = np.random.default_rng(20)
    size = 1 << 20
    xt = rng.random((6, size + 2)).astype(np.float32)
    row, lo, hi = np.array([size, size + 1]), np.array([0, 1]), np.array([size, size])
    radius = 0.25
    # numpy in the same order: squared differences added dimension by dimension, in float32.
    want_probe, want_other = [], []
    for p in (0, 1):
        d2 = np.zeros(size, np.float32)
        for k in range(6):
            t = xt[k, row[p]] - xt[k, :size]
            d2 = d2 + t * t
        hits = np.flatnonzero(d2[lo[p]:hi[p]] <= np.float32(radius) * np.float32(radius)) + lo[p]
        want_probe += [p] * len(hits)
        want_other += hits.tolist()
    assert want_other
    for implementation in IMPLEMENTATIONS:
        probe = PairProbe(radius, implementation, device)
        probes, others = probe(xt, row, lo, hi)
        assert (probes.tolist(), others.tolist()) == (want_probe, want_other), implementation
