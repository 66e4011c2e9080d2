"""Names vulture (``make lint``) cannot see used: read by a framework, by name, or only through
the environment. Each entry says who uses it; ``--ignore-decorators`` and ``--ignore-names`` in
the Makefile cover the decorated functions and the callback parameters."""

# ruff: noqa
from workers.matcher import Matcher

# prometheus_client calls a custom collector's collect().
Matcher.collect

# aiokafka reads the consumer attribute that workers/faust_patches.py sets on it.
_._fetch_max_wait_ms

# Read positionally by a match statement (``case InsertLine(i, line)``).
_.before_event

# The device counters are read by name: DeviceCounters.snapshot() and workers/metrics.py.
from situflow.devices.counters import DeviceCounters

DeviceCounters.kernel_seconds
DeviceCounters.bytes_to_device
DeviceCounters.bytes_from_device
DeviceCounters.cpu_fallbacks

# The filter's implementations are called by name (tests/devices, bench/devices_filter.py).
from situflow.devices.filter import Filter

Filter.multi_threaded

# Hypothesis runs a state machine's @invariant methods; pytest collects its TestCase.
from tests.devices.test_queues import QueueAgainstAList

QueueAgainstAList.the_thesis_invariants_hold_and_the_valid_data_is_idxr_to_idxw
_.test_random_operation_sequences_keep_the_invariants

# Faust reads its configuration's attributes (workers/kslack.py bounds the queued bundles).
_.stream_buffer_maxsize

# Spark merges an accumulator's values with its AccumulatorParam's addInPlace.
from batch.offline import RangeResults

RangeResults.addInPlace
