"""The event queue of thesis §4.3.1: logical indexes, their invariants and the Fig. 4.3 mapping."""

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from situflow.devices.queues import EventQueue, QueueFull


def test_fig_4_3_logical_slots_22_to_28_of_nine_sit_at_physical_4_to_8_then_0_and_1():
    queue = EventQueue(9, np.int64)
    queue.idxr, queue.idxw = 22, 29
    assert [queue.physical(i) for i in range(queue.idxr, queue.idxw)] == [4, 5, 6, 7, 8, 0, 1]
    assert queue.segments(queue.idxr, queue.idxw) == [(4, 9), (0, 2)]
    assert len(queue) == 7 and queue.free == 2


def test_values_come_out_in_the_order_they_went_in_across_the_wrap_around():
    queue = EventQueue(5, np.int64)
    assert queue.enqueue(np.arange(4)) == 4
    assert list(queue.dequeue(3)) == [0, 1, 2]
    assert queue.enqueue(np.arange(10, 14)) == 4
    assert list(queue.dequeue()) == [3, 10, 11, 12, 13]


def test_a_full_queue_takes_only_what_fits_and_refuses_larger_reservations():
    queue = EventQueue(3, np.float64)
    assert queue.enqueue(np.arange(5.0)) == 3
    assert queue.free == 0
    with pytest.raises(QueueFull):
        queue.reserve(1)


def test_reserved_slots_are_invisible_to_the_reader_until_published():
    queue = EventQueue(4, np.int64)
    queue.reserve(2)
    assert len(queue) == 0 and queue.free == 2
    queue.publish(2)
    assert len(queue) == 2


def test_a_queue_holds_whole_events_of_a_structured_type():
    event = np.dtype([("time", np.uint64), ("payload", np.float32, 6)])
    queue = EventQueue(4, event)
    values = np.zeros(3, event)
    values["time"] = [5, 6, 7]
    queue.enqueue(values)
    assert list(queue.dequeue()["time"]) == [5, 6, 7]


def test_a_device_queue_keeps_its_slots_in_shared_memory_and_behaves_the_same(device):
    queue = EventQueue(7, np.int32, device)
    queue.enqueue(np.arange(5, dtype=np.int32))
    queue.dequeue(4)
    queue.enqueue(np.arange(10, 16, dtype=np.int32))
    assert list(queue.dequeue()) == [4, 10, 11, 12, 13, 14, 15]


class QueueAgainstAList(RuleBasedStateMachine):
    """Random enqueue, reserve/publish and dequeue sequences against a Python list."""

    def __init__(self):
        super().__init__()
        self.queue = EventQueue(9, np.int64)
        self.model: list[int] = []
        self.next = 0

    @rule(count=st.integers(0, 12))
    def enqueue(self, count):
        values = np.arange(self.next, self.next + count)
        taken = self.queue.enqueue(values)
        assert taken == min(count, 9 - len(self.model))
        self.model.extend(values[:taken].tolist())
        self.next += count

    @rule(count=st.integers(0, 12))
    def dequeue(self, count):
        expected, self.model = self.model[:count], self.model[count:]
        assert self.queue.dequeue(count).tolist() == expected

    @invariant()
    def the_thesis_invariants_hold_and_the_valid_data_is_idxr_to_idxw(self):
        q = self.queue
        assert q.idxr <= q.idxw
        assert q.idxw - q.idxr <= q.size
        assert q.peek().tolist() == self.model
        assert sum(end - begin for begin, end in q.segments(q.idxr, q.idxw)) == len(self.model)


QueueAgainstAList.TestCase.settings = settings(max_examples=60, stateful_step_count=30,
                                               deadline=None)
test_random_operation_sequences_keep_the_invariants = QueueAgainstAList.TestCase
