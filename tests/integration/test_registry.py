"""The query registry through a real broker: submit, list, delete, watchers and the CLI.

Every test uses its own control topic (``<prefix>.queries``) and query names, so tests share the
session's broker, and never touch the ``situflow.queries`` that services of other tests follow.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from situflow.cli import main
from situflow.errors import QueryError
from situflow.settings import ENV_BOOTSTRAP, KafkaSettings
from topics.registry import (
    ENV_TOPIC,
    QueryNotRegistered,
    QueryRecord,
    RegistryWatcher,
    delete,
    encode_record,
    list_queries,
    submit,
)
from workers.broker import free_port

EXAMPLES = Path(__file__).parents[2] / "situflow" / "examples"
TPSTREAM = (EXAMPLES / "aggressive_drivers.tps").read_text()
COGRA = (EXAMPLES / "downtrends.cogra").read_text()
SASE = (EXAMPLES / "rising_stocks.sase").read_text()
BAD = "FROM S\nDEFINE A AS x >\nPATTERN A before B WITHIN 5s RETURN count(A) AS n"


@pytest.fixture
def registry(topic_prefix: str) -> str:
    return f"{topic_prefix}.queries"


async def existing_topics(kafka: KafkaSettings) -> set[str]:
    admin = AIOKafkaAdminClient(**kafka.client_kwargs())
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def end_offset(kafka: KafkaSettings, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    async with AIOKafkaConsumer(**kafka.client_kwargs()) as consumer:
        return int((await consumer.end_offsets([tp]))[tp])


async def produce_raw(kafka: KafkaSettings, topic: str, key: bytes | None, value: bytes) -> None:
    async with AIOKafkaProducer(**kafka.client_kwargs()) as producer:
        await producer.send_and_wait(topic, value, key=key, partition=0)


@pytest.mark.integration
def test_submitted_queries_are_listed_until_deleted(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    drivers, downtrends = f"{topic_prefix}.drivers", f"{topic_prefix}.downtrends"

    async def scenario() -> dict[str, object]:
        submitted = await submit(kafka, TPSTREAM, name=drivers, source_path="drivers.tps",
                                 topic=registry)
        await submit(kafka, COGRA, name=downtrends, topic=registry)
        both = await list_queries(kafka, topic=registry)
        deleted = await delete(kafka, drivers, topic=registry)
        with pytest.raises(QueryNotRegistered, match=f"no query named '{drivers}'"):
            await delete(kafka, drivers, topic=registry)
        return {
            "listed": {name: (r.language, r.text) for name, r in both.items()},
            "listed record": both[drivers] == submitted,
            "deleted record": deleted == submitted,
            "source": submitted.source,
            "output topics exist": {f"matches.{drivers}", f"trends.{downtrends}"}
            <= await existing_topics(kafka),
            "after delete": list(await list_queries(kafka, topic=registry)),
        }

    assert asyncio.run(scenario()) == {
        "listed": {drivers: ("tpstream", TPSTREAM), downtrends: ("cogra", COGRA)},
        "listed record": True,
        "deleted record": True,
        "source": "drivers.tps",
        "output topics exist": True,
        "after delete": [downtrends],
    }


@pytest.mark.integration
def test_a_query_is_registered_under_its_canonical_id(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    """The id ignores whitespace: a re-submit that only reformats keeps the query's id."""
    name = f"{topic_prefix}.rising"

    async def scenario() -> tuple[str, str]:
        first = await submit(kafka, SASE, name=name, topic=registry)
        again = await submit(kafka, SASE.replace(" ", "  "), name=name, topic=registry)
        return first.query_id, again.query_id

    first, again = asyncio.run(scenario())
    assert first == again


@pytest.mark.integration
def test_an_invalid_query_is_rejected_with_its_position_and_nothing_is_written(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    name = f"{topic_prefix}.bad"

    async def scenario() -> tuple[QueryError, dict[str, QueryRecord], bool]:
        with pytest.raises(QueryError) as raised:
            await submit(kafka, BAD, name=name, topic=registry)
        listed = await list_queries(kafka, topic=registry)
        return raised.value, listed, f"matches.{name}" in await existing_topics(kafka)

    error, listed, output_created = asyncio.run(scenario())
    assert error.render("bad.tps", BAD).startswith("bad.tps:3:1: expected an expression")
    assert (listed, output_created) == ({}, False)


@pytest.mark.integration
def test_each_registry_write_is_its_own_batch_so_the_end_offset_counts_every_record(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    """Reading "to the end" trusts ListOffsets(latest); tansu 0.6 answers it right only when
    the newest batch holds one record (tests/integration/test_broker.py). Registry writes are
    single-record batches, so the answer counts submits and deletes alike."""

    async def scenario() -> tuple[int, list[str]]:
        for n in range(3):
            await submit(kafka, TPSTREAM, name=f"{topic_prefix}.q{n}", topic=registry)
        await delete(kafka, f"{topic_prefix}.q1", topic=registry)
        return await end_offset(kafka, registry), list(await list_queries(kafka, topic=registry))

    assert asyncio.run(scenario()) == (4, [f"{topic_prefix}.q0", f"{topic_prefix}.q2"])


@pytest.mark.integration
def test_a_watcher_syncs_past_a_batch_of_several_records_from_another_writer(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    """On tansu 0.6 the end offset then points inside the batch; fetches return whole batches,
    so the watcher still applies every record of it before it counts as synced."""
    names = [f"{topic_prefix}.b{n}" for n in range(3)]
    records = [QueryRecord(name, "tpstream", TPSTREAM, "id", 0) for name in names]

    async def scenario() -> list[str]:
        await submit(kafka, TPSTREAM, name=names[0], topic=registry)  # creates the topic
        async with AIOKafkaProducer(**kafka.client_kwargs()) as producer:
            batch = producer.create_batch()
            for record in records:
                key, value = encode_record(record)
                assert batch.append(key=key, value=value, timestamp=None) is not None
            batch.close()
            await (await producer.send_batch(batch, registry, partition=0))
        async with RegistryWatcher(kafka, topic=registry) as watcher:
            await watcher.wait_synced()
            return list(watcher.queries)

    assert asyncio.run(scenario()) == names


@pytest.mark.integration
def test_a_watcher_knows_earlier_queries_when_synced_and_follows_later_changes(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    early, late = f"{topic_prefix}.early", f"{topic_prefix}.late"

    async def scenario() -> dict[str, object]:
        await submit(kafka, TPSTREAM, name=early, topic=registry)
        changes: asyncio.Queue[tuple[str, str | None]] = asyncio.Queue()

        async def on_change(name: str, record: QueryRecord | None) -> None:
            await changes.put((name, record.language if record else None))

        async with RegistryWatcher(kafka, topic=registry, on_change=on_change) as watcher:
            await watcher.wait_synced()
            synced = (list(watcher.queries), changes.get_nowait())
            await submit(kafka, COGRA, name=late, topic=registry)
            await delete(kafka, early, topic=registry)
            async with asyncio.timeout(30):
                live = [await changes.get(), await changes.get()]
            return {"synced": synced, "live": live, "now": list(watcher.queries)}

    assert asyncio.run(scenario()) == {
        "synced": ([early], (early, "tpstream")),
        "live": [(late, "cogra"), (early, None)],
        "now": [late],
    }


@pytest.mark.integration
def test_a_watcher_knows_where_it_read_each_query_and_waits_to_reach_a_written_record(
    kafka: KafkaSettings, topic_prefix: str, registry: str
) -> None:
    """Services stamp their output with the offset of a query's registration; a service
    downstream waits until its own watcher has read that far (``reached``), unless no such
    record exists."""
    early, late = f"{topic_prefix}.early", f"{topic_prefix}.late"

    async def scenario() -> dict[str, object]:
        await submit(kafka, TPSTREAM, name=early, topic=registry)
        async with RegistryWatcher(kafka, topic=registry) as watcher:
            await watcher.wait_synced()
            before = (watcher.position, await watcher.reached(1))
            await submit(kafka, SASE, name=late, topic=registry)
            async with asyncio.timeout(30):
                reached = await watcher.reached(1)
            return {"before": before, "reached": reached, "position": watcher.position,
                    "offsets": {name: q.offset for name, q in watcher.queries.items()}}

    assert asyncio.run(scenario()) == {
        "before": (1, False),  # offset 1 is not written yet: no wait
        "reached": True,
        "position": 2,
        "offsets": {early: 0, late: 1},
    }


@pytest.mark.integration
def test_a_watcher_logs_and_skips_records_that_are_no_query(
    kafka: KafkaSettings, topic_prefix: str, registry: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"{topic_prefix}.good"

    async def scenario() -> list[str]:
        await submit(kafka, TPSTREAM, name=name, topic=registry)
        await produce_raw(kafka, registry, b"broken", b"{not json")
        await produce_raw(kafka, registry, None, b"{}")
        async with RegistryWatcher(kafka, topic=registry) as watcher:
            await watcher.wait_synced()
            return list(watcher.queries)

    with caplog.at_level(logging.WARNING, logger="topics.registry"):
        assert asyncio.run(scenario()) == [name]
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped {registry} offset 1: query 'broken': value is not JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        f"skipped {registry} offset 2: record without a key (the key is the query name)",
    ]


@pytest.fixture
def cli_env(kafka: KafkaSettings, registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI connects through the environment, as in a deployment."""
    monkeypatch.setenv(ENV_BOOTSTRAP, kafka.bootstrap_servers)
    monkeypatch.setenv(ENV_TOPIC, registry)


@pytest.mark.integration
@pytest.mark.usefixtures("cli_env")
def test_the_query_commands_submit_list_and_delete(
    topic_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"{topic_prefix}.drivers"
    query = tmp_path / "drivers.tps"
    query.write_text(TPSTREAM)

    assert main(["query", "submit", str(query), "--name", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"registered {name}: tpstream query ")
    assert out.rstrip().endswith(f"results in matches.{name}")

    assert main(["query", "list"]) == 0
    ((listed_name, language, query_id),) = [line.split() for line in
                                            capsys.readouterr().out.splitlines()]
    assert (listed_name, language) == (name, "tpstream")

    assert main(["query", "list", "--json"]) == 0
    (record,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert (record["name"], record["id"], record["text"], record["source"]) == (
        name, query_id, TPSTREAM, str(query),
    )

    assert main(["query", "delete", name]) == 0
    assert capsys.readouterr().out == f"deleted {name}; matches.{name} keeps its results\n"
    assert main(["query", "delete", name]) == 1
    assert capsys.readouterr().err == (
        f"situflow: no query named '{name}' is registered (registered: none)\n"
    )


@pytest.mark.integration
@pytest.mark.usefixtures("cli_env")
def test_query_submit_of_the_registered_query_again_writes_nothing_and_a_change_replaces_it(
    kafka: KafkaSettings, topic_prefix: str, registry: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """What a deployment's registration job does at every upgrade: the same file again (or
    only reformatted) is a no-op; another text, or another stream, replaces the query."""
    name = f"{topic_prefix}.rising"
    query = tmp_path / "rising.sase"
    submit_it = ["query", "submit", str(query), "--name", name, "--stream", "stocks",
                 "--key-fields", "symbol"]

    def run(text: str, *extra: str) -> str:
        query.write_text(text)
        assert main([*submit_it, *extra]) == 0
        return capsys.readouterr().out.split(":")[0]

    states = [run(SASE), run(SASE), run(SASE.replace(" ", "  ")),
              run(SASE.replace("1000", "2000")), run(SASE.replace("1000", "2000")),
              run(SASE.replace("1000", "2000"), "--time-unit", "0.001")]
    assert states == [f"{state} {name}" for state in (
        "registered", "unchanged", "unchanged", "registered", "unchanged", "registered")]
    assert asyncio.run(end_offset(kafka, registry)) == 3
    assert main(["query", "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


@pytest.mark.integration
@pytest.mark.usefixtures("cli_env")
def test_query_submit_reports_a_bad_query_as_check_does_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = tmp_path / "bad.tps"
    query.write_text(BAD)
    assert main(["query", "submit", str(query)]) == 2
    assert capsys.readouterr().err.startswith(f"{query}:3:1: expected an expression")
    assert main(["query", "list"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.integration
@pytest.mark.usefixtures("cli_env")
def test_topics_create_makes_the_catalog_topics_once(
    topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = f"{topic_prefix}.cars"
    command = ["topics", "create", "--stream", stream, "--partitions", "2",
               "--situations", f"{topic_prefix}.situations"]  # other tests' have 4 partitions

    assert main(command) == 0
    first = capsys.readouterr().out.splitlines()
    assert main(command) == 0
    second = capsys.readouterr().out.splitlines()

    assert [line.split()[0] for line in second] == ["exists"] * len(second)
    assert {f"created  {stream}{suffix} (2 partitions)"
            for suffix in ("", ".ordered", ".late")} <= set(first)
    assert f"exists   {topic_prefix}.queries (1 partition)" in second


def test_an_unreachable_broker_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """Through the installed console script, run outside the checkout: it finds workers/."""
    script = Path(sys.executable).with_name("situflow")
    if not script.exists():
        pytest.skip("the situflow console script is not installed")
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [str(script), "query", "list", "--wait", "0.5"],
        cwd=tmp_path, env={**os.environ, ENV_BOOTSTRAP: address},
        capture_output=True, text=True, check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"situflow: cannot reach Kafka at {address} (retried for 0.5s); "
               f"is it running? {ENV_BOOTSTRAP} names the brokers\n",
    )
