"""``situflow status`` on canned pages: the rate arithmetic, each worker and query state, the
screen and the JSON (workers/status.py); against a running pipeline:
tests/integration/test_status.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from topics.announcements import Announcement
from topics.catalog import StreamSpec
from topics.registry import QueryRecord, QueryStatus
from workers.broker import free_port
from workers.status import (
    CRASH_LOOPING,
    FAILED,
    NOT_EVALUATED,
    NOT_READY,
    READY,
    RUNNING,
    STALE,
    STALLED,
    UNREACHABLE,
    Report,
    Scrape,
    parse_metrics,
    query_views,
    rate,
    render,
    scrape,
    total,
    worker_status,
)

NOW_MS = 1_700_000_100_000
STALE_AFTER = 30.0

FIRST_PAGE = """\
# HELP situflow_events_in_total Events consumed
# TYPE situflow_events_in_total counter
situflow_events_in_total{service="matcher",topic="situations.cars"} 1000.0
# HELP situflow_events_out_total Events or results produced
# TYPE situflow_events_out_total counter
situflow_events_out_total{service="matcher",topic="matches.aggressive"} 10.0
situflow_events_out_total{service="matcher",topic="matches.rising"} 4.0
# HELP situflow_consumer_lag Messages of an input partition not yet consumed
# TYPE situflow_consumer_lag gauge
situflow_consumer_lag{partition="0",service="matcher",topic="situations.cars"} 5.0
situflow_consumer_lag{partition="1",service="matcher",topic="situations.cars"} 7.0
"""

SECOND_PAGE = """\
# HELP situflow_events_in_total Events consumed
# TYPE situflow_events_in_total counter
situflow_events_in_total{service="matcher",topic="situations.cars"} 3000.0
# HELP situflow_events_out_total Events or results produced
# TYPE situflow_events_out_total counter
situflow_events_out_total{service="matcher",topic="matches.aggressive"} 30.0
situflow_events_out_total{service="matcher",topic="matches.rising"} 4.0
# HELP situflow_dlq_messages_total Messages sent to a dead-letter topic
# TYPE situflow_dlq_messages_total counter
situflow_dlq_messages_total{service="matcher",topic="situations.cars.dlq"} 2.0
# HELP situflow_late_events_total Events later than the K-slack bound
# TYPE situflow_late_events_total counter
situflow_late_events_total{service="matcher",topic="cars.late"} 3.0
# HELP situflow_consumer_lag Messages of an input partition not yet consumed
# TYPE situflow_consumer_lag gauge
situflow_consumer_lag{partition="0",service="matcher",topic="situations.cars"} 1.0
situflow_consumer_lag{partition="1",service="matcher",topic="situations.cars"} 2.0
# HELP situflow_open_situations Situations open in the operator states of this worker
# TYPE situflow_open_situations gauge
situflow_open_situations{service="matcher"} 12.0
# HELP situflow_partial_matches Partial matches (NFA runs) in the operator states
# TYPE situflow_partial_matches gauge
situflow_partial_matches{service="matcher"} 4.0
"""

HEALTHY = {"service": "matcher", "ready": True, "assigned": 2, "rebalancing": False,
           "inputs": {"situations.cars": [0, 1]}, "tables_recovered": True,
           "registry_synced": True, "stalled": [], "crash_looping": False, "recent_crashes": 0,
           "queries": ["aggressive", "rising"]}


def announcement(service: str = "matcher", port: int = 6066,
                 seen_ago: float = 2.0) -> Announcement:
    return Announcement(f"{service}@node-1:{port}", service, "cars", f"http://10.0.0.7:{port}",
                        "node-1", 7, NOW_MS - 60_000, NOW_MS - int(seen_ago * 1000), "0.1.0")


def answered(health: dict[str, object] | None = None) -> Scrape:
    return Scrape(HEALTHY if health is None else health, parse_metrics(FIRST_PAGE),
                  parse_metrics(SECOND_PAGE), 2.0)


REFUSED = Scrape(error="http://10.0.0.7:6066: cannot connect: connection refused")


def test_a_rate_is_a_counter_s_growth_between_two_reads_per_second() -> None:
    first, second = parse_metrics(FIRST_PAGE), parse_metrics(SECOND_PAGE)
    assert rate(first, second, 2.0, "situflow_events_in_total") == 1000.0
    assert rate(first, second, 2.0, "situflow_events_out_total") == 10.0  # summed over topics
    assert rate(first, second, 2.0, "situflow_events_out_total",
                topic="matches.aggressive") == 10.0
    assert rate(first, second, 2.0, "situflow_events_out_total", topic="matches.rising") == 0.0


def test_a_counter_that_went_down_restarted_from_zero_so_its_growth_is_its_new_value() -> None:
    first, second = parse_metrics(SECOND_PAGE), parse_metrics(FIRST_PAGE)
    assert rate(first, second, 2.0, "situflow_events_in_total") == 500.0


def test_a_counter_missing_from_a_page_counts_as_zero_and_no_time_gives_no_rate() -> None:
    first, second = parse_metrics(FIRST_PAGE), parse_metrics(SECOND_PAGE)
    assert total(first, "situflow_dlq_messages_total") == 0.0
    assert rate(first, second, 2.0, "situflow_dlq_messages_total") == 1.0
    assert rate(first, second, 0.0, "situflow_events_in_total") == 0.0


def test_a_worker_s_line_sums_the_lag_and_takes_rates_counts_and_gauges_from_its_pages() -> None:
    worker = worker_status(announcement(), answered(), STALE_AFTER, NOW_MS)
    assert (worker.state, worker.problem, worker.partitions) == (
        READY, None, {"situations.cars": [0, 1]})
    assert (worker.lag, worker.in_rate, worker.out_rate, worker.dlq, worker.late) == (
        3.0, 1000.0, 10.0, 2.0, 3.0)
    assert (worker.open_situations, worker.partial_matches) == (12.0, 4.0)
    assert (worker.queries, worker.last_seen_seconds) == (["aggressive", "rising"], 2.0)


@pytest.mark.parametrize(("health", "state", "problem"), [
    ({"crash_looping": True, "recent_crashes": 4}, CRASH_LOOPING, "4 recent crashes"),
    ({"stalled": ["situations.cars[1]"]}, STALLED, "no progress on situations.cars[1]"),
    ({"ready": False, "tables_recovered": False}, NOT_READY, "recovering its state"),
    ({"ready": False, "rebalancing": True}, NOT_READY, "rebalancing"),
    ({"ready": False, "registry_synced": False}, NOT_READY, "reading the query registry"),
    ({"ready": False, "assigned": 0}, NOT_READY, "no partitions assigned"),
], ids=["crash-looping", "stalled", "recovering", "rebalancing", "registry", "unassigned"])
def test_a_worker_that_answers_but_is_not_ready_says_why(
    health: dict[str, object], state: str, problem: str
) -> None:
    worker = worker_status(announcement(), answered({**HEALTHY, **health}), STALE_AFTER, NOW_MS)
    assert (worker.state, worker.problem) == (state, problem)


def test_a_worker_whose_pages_do_not_answer_is_unreachable_and_stale_once_its_announcement_is_old(
) -> None:
    fresh = worker_status(announcement(seen_ago=5), REFUSED, STALE_AFTER, NOW_MS)
    assert (fresh.state, fresh.partitions, fresh.lag, fresh.in_rate) == (
        UNREACHABLE, {}, None, None)
    assert fresh.problem == ("http://10.0.0.7:6066: cannot connect: connection refused; "
                             "last seen 5 s ago")
    old = worker_status(announcement(seen_ago=45), REFUSED, STALE_AFTER, NOW_MS)
    assert old.state == STALE


def test_a_worker_that_answers_but_stopped_announcing_is_stale() -> None:
    worker = worker_status(announcement(seen_ago=45), answered(), STALE_AFTER, NOW_MS)
    assert (worker.state, worker.problem) == (
        STALE, "last seen 45 s ago, but its pages answer: can it reach Kafka?")


def record(name: str, language: str = "tpstream", query_id: str = "q1") -> QueryRecord:
    return QueryRecord(name, language, "...", query_id, NOW_MS - 90_000,
                       stream=StreamSpec("cars", key_fields=("car_id",)))


def test_a_query_runs_where_a_worker_evaluates_it_and_fails_where_its_text_failed() -> None:
    queries = {"aggressive": record("aggressive"), "rising": record("rising", "sase"),
               "jams": record("jams", "cogra", "q3"), "old": record("old", query_id="q4")}
    statuses = {"rising": QueryStatus("rising", "q1", "ZeroDivisionError: division by zero",
                                      NOW_MS - 1000, "matcher"),
                "old": QueryStatus("old", "q0", "KeyError: 'x'", NOW_MS - 5000, "deriver")}
    worker = worker_status(announcement(), answered(), STALE_AFTER, NOW_MS)
    worker_with_old = worker_status(announcement(port=6067), answered(
        {**HEALTHY, "queries": ["old"]}), STALE_AFTER, NOW_MS)
    scrapes = {worker.worker: answered(), "gone@node-2:6066": REFUSED}
    views = {view.name: view for view in query_views(
        queries, statuses, [worker, worker_with_old], scrapes)}
    assert [views[name].state for name in ("aggressive", "jams", "old", "rising")] == [
        RUNNING, NOT_EVALUATED, RUNNING, FAILED]
    assert (views["aggressive"].out_rate, views["rising"].out_rate) == (10.0, 0.0)
    assert (views["rising"].error, views["rising"].failed_in) == (
        "ZeroDivisionError: division by zero", "matcher")
    assert views["old"].error is None  # the failure was of another text of the name
    assert views["aggressive"].stream == "cars"


def canned_report() -> Report:
    kslack_health = {**HEALTHY, "service": "kslack", "inputs": {"cars": [0, 1, 2, 3]}}
    del kslack_health["queries"]
    kslack = worker_status(announcement("kslack", 6070), answered(kslack_health), STALE_AFTER,
                           NOW_MS)
    matcher = worker_status(announcement(), answered(), STALE_AFTER, NOW_MS)
    gone = worker_status(announcement(port=6071, seen_ago=40), REFUSED, STALE_AFTER, NOW_MS)
    return Report([kslack, matcher, gone], query_views(
        {"aggressive": record("aggressive")}, {}, [kslack, matcher, gone],
        {matcher.worker: answered()}))


def test_the_screen_has_a_table_per_service_the_queries_and_a_verdict() -> None:
    assert render(canned_report()) == """\
kslack (stream cars): 1 of 1 worker ready
  WORKER              STATE  PARTITIONS  LAG  IN/S    OUT/S  DLQ  LATE  OPEN  PARTIAL
  kslack@node-1:6070  ready  cars 0-3    3    1000.0  10.0   2    3     12    4

matcher (stream cars): 1 of 2 workers ready
  WORKER               STATE  PARTITIONS           LAG  IN/S    OUT/S  DLQ  LATE  OPEN  PARTIAL
  matcher@node-1:6066  ready  situations.cars 0-1  3    1000.0  10.0   2    3     12    4
  matcher@node-1:6071  stale  -                    -    -       -      -    -     -     -
  matcher@node-1:6071: http://10.0.0.7:6066: cannot connect: connection refused; last seen 40 s ago

queries: 1
  NAME        LANGUAGE  STREAM  STATE    OUT/S
  aggressive  tpstream  cars    running  10.0

unhealthy: matcher@node-1:6071 stale (http://10.0.0.7:6066: cannot connect: connection \
refused; last seen 40 s ago)"""


def test_the_verdict_of_a_healthy_deployment_counts_what_is_ready() -> None:
    report = canned_report()
    healthy = Report(report.workers[:2], report.queries)
    assert healthy.healthy
    assert render(healthy).splitlines()[-1] == \
        "healthy: 2 workers of 2 services ready, 1 query running"


def test_the_stale_workers_whose_pages_do_not_answer_are_gone_for_pruning() -> None:
    report = canned_report()
    answering_but_stale = worker_status(announcement(port=6072, seen_ago=40), answered(),
                                        STALE_AFTER, NOW_MS)
    assert Report([*report.workers, answering_but_stale], []).gone == ["matcher@node-1:6071"]


def test_no_worker_at_all_is_not_healthy() -> None:
    assert Report([], []).problems == ["no worker has announced itself on the services topic"]


def test_the_json_groups_the_workers_by_service_beside_the_queries_and_the_verdict() -> None:
    report = canned_report().to_json()
    assert set(report) == {"healthy", "problems", "services", "queries"}
    assert report["healthy"] is False
    assert {service: [w["worker"] for w in workers]
            for service, workers in report["services"].items()} == {
        "kslack": ["kslack@node-1:6070"],
        "matcher": ["matcher@node-1:6066", "matcher@node-1:6071"]}
    matcher = report["services"]["matcher"][0]
    assert {key: matcher[key] for key in ("state", "partitions", "lag", "in_rate", "url")} == {
        "state": "ready", "partitions": {"situations.cars": [0, 1]}, "lag": 3.0,
        "in_rate": 1000.0, "url": "http://10.0.0.7:6066"}
    assert report["queries"][0] == {
        "name": "aggressive", "language": "tpstream", "stream": "cars", "query_id": "q1",
        "state": "running", "out_rate": 10.0, "error": None, "failed_at": None,
        "failed_in": None}


def test_a_scrape_reads_health_and_metrics_twice_and_a_worker_that_does_not_answer_is_an_error(
) -> None:
    pages = iter([FIRST_PAGE, SECOND_PAGE])

    async def health(request: web.Request) -> web.Response:
        return web.Response(text=json.dumps(HEALTHY), content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=next(pages))

    async def scenario() -> dict[str, Scrape]:
        app = web.Application()
        app.router.add_get("/health", health)
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        closed = free_port()  # nothing listens there
        try:
            return await scrape([
                Announcement("matcher@a:1", "matcher", "cars", f"http://127.0.0.1:{port}", "a",
                             1, 0, 0, "0.1.0"),
                Announcement("matcher@b:1", "matcher", "cars", f"http://127.0.0.1:{closed}",
                             "b", 1, 0, 0, "0.1.0")], interval=0.2)
        finally:
            await runner.cleanup()

    scrapes = asyncio.run(scenario())
    served, refused = scrapes["matcher@a:1"], scrapes["matcher@b:1"]
    assert (served.health, served.error) == (HEALTHY, None)
    assert served.seconds >= 0.2
    assert rate(served.first, served.second, 2.0, "situflow_events_in_total") == 1000.0
    assert refused.health is None and refused.error is not None
    assert refused.error.endswith("cannot connect: connection refused")
