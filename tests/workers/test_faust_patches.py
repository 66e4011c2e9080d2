"""The Faust internals situflow patches still exist in the installed Faust (workers/faust_patches.py).

Each patch replaces a private attribute that Faust may rename or reshape in any release; these
tests fail then, instead of the patch silently doing nothing (a 1.5 s fetch wait on every hop,
or transactions per output partition).
"""

from __future__ import annotations

import inspect

import pytest
from aiokafka import AIOKafkaConsumer

from workers import faust_patches


@pytest.mark.parametrize(("owner", "name"), faust_patches.PATCHED,
                         ids=[f"{owner.__name__}.{name}" for owner, name in faust_patches.PATCHED])
def test_every_patched_attribute_is_faust_s_and_is_replaced(owner: type, name: str) -> None:
    faust_patches.install(20)
    patched = getattr(owner, name)
    assert patched.situflow_wrapped
    original = patched.__wrapped__
    assert original.__module__.startswith("faust."), f"{owner.__name__}.{name} is not Faust's"


def test_the_originals_take_the_arguments_the_patches_pass() -> None:
    faust_patches.install(20)
    consumer_thread, transactions = (getattr(owner, name).__wrapped__
                                     for owner, name in faust_patches.PATCHED)
    assert list(inspect.signature(consumer_thread).parameters) == ["self", "transport"]
    send = inspect.signature(transactions).parameters
    assert list(send) == ["self", "topic", "key", "value", "partition", "timestamp", "headers",
                          "transactional_id"]
    assert send["transactional_id"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_consumer_reads_the_fetch_wait_the_patch_sets_when_it_starts() -> None:
    assert "self._fetch_max_wait_ms" in inspect.getsource(AIOKafkaConsumer.start)


def test_installing_twice_wraps_once_and_sets_the_latest_fetch_wait() -> None:
    faust_patches.install(20)
    first = [getattr(owner, name) for owner, name in faust_patches.PATCHED]
    faust_patches.install(7)
    try:
        assert [getattr(owner, name) for owner, name in faust_patches.PATCHED] == first
        assert faust_patches.fetch_max_wait_ms == 7
    finally:
        faust_patches.install(20)
