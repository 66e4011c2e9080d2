"""The shared match buffer and Dewey versions (SASE+ §5.1, Figure 4)."""

from __future__ import annotations

import pytest

from situflow.nfa.sharedbuffer.buffer import BufferedEvent, BufferNode, retrieve
from situflow.nfa.sharedbuffer.versions import Dewey
from tests.nfa.harness import QUERY3, Harness, figure3
from tests.nfa.harness import batches as make_batches


@pytest.mark.parametrize(("version", "ancestor", "compatible"), [
    ("2.0.0", "1.0", False),  # the paper's example: e6->e4 (2.0.0) vs e4->e3 (1.0)
    ("1.0.0", "1.0", True),  # prefix
    ("1.0", "1", True),
    ("1.1", "1.0", True),  # differs in the last digit, larger
    ("1.0", "1.1", False),
    ("1.0", "1.0", False),
    ("2.0", "1.0", False),
])
def test_s5_dewey_compatibility(version, ancestor, compatible):
    assert Dewey.parse(version).is_compatible_with(Dewey.parse(ancestor)) is compatible


def test_dewey_stages_and_splits():
    v = Dewey.start(1).add_stage()
    assert str(v) == "1.0"
    assert str(v.increase()) == "1.1"
    assert str(v.add_stage()) == "1.0.0"


def test_s4_retrieval_gives_r1_r2_r3_and_never_the_wrong_result():
    h = Harness.for_query(QUERY3)
    op = h.compiled.operator()
    buffers = []
    for b in make_batches(figure3(), 1):
        op.process(b)
        buffers.append([(m.node, m.start) for r in op.partitions["GOOG"].runs
                        for m in r.members])
    matches = [m.bindings for m in h.run(figure3())]
    assert {"a": ["e1", "e2", "e3", "e4"], "b": ["e6"]} not in matches
    # After e5 the e1-run's buffer is e1..e5 (version 1.0) and the e3-run's is e3, e4 (2.0).
    after_e5 = {t: [[e.id for e in per] for per in retrieve(node, 2)] for node, t in buffers[4]}
    assert after_e5 == {1: [["e1", "e2", "e3", "e4", "e5"], []], 3: [["e3", "e4"], []]}


def test_runs_share_the_nodes_of_a_common_prefix():
    # R1 and R3 share e1..e5: the node of e5 in R3's history is R1's node.
    h = Harness.for_query(QUERY3)
    op = h.compiled.operator()
    for b in make_batches(figure3()[:6], 1):
        op.process(b)
    [r1_run] = [r for r in op.partitions["GOOG"].runs if r.members[0].start == 1]  # v=1.0
    e6 = r1_run.members[0].node
    assert e6.event.id == "e6" and e6.pred is not None and e6.pred.event.id == "e5"


def test_cached_histories_give_the_walk_on_every_branch():
    # A trunk e0..e5 of component 0 with branches at e2 and e4, retrieved in an order that
    # creates, reuses and drops caches; each answer equals the uncached walk.
    def walk(node: BufferNode | None) -> list[list[str]]:
        chain = []
        while node is not None:
            chain.append(node.event)
            node = node.pred
        return [[e.id for e in reversed(chain) if e.seq < 10], [e.id for e in reversed(chain)
                                                                 if e.seq >= 10]]

    trunk: list[BufferNode] = []
    for i in range(6):
        trunk.append(BufferNode(BufferedEvent(i, f"e{i}", i, ()), 0, trunk[-1] if trunk else None))
    leaves = [BufferNode(BufferedEvent(10 + k, f"b{k}", 10 + k, ()), 1, trunk[k]) for k in range(6)]
    branch = BufferNode(BufferedEvent(7, "x7", 7, ()), 0, trunk[2])
    leaves.append(BufferNode(BufferedEvent(20, "b20", 20, ()), 1, branch))
    for k in [3, 5, 6, 1, 5, 0, 6, 4, 2]:
        assert [[e.id for e in per] for per in retrieve(leaves[k], 2)] == walk(leaves[k])
