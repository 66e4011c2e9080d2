"""The trends service: COGRA queries over ``<stream>.ordered`` → ``trends.<query>``.

Reads the ordered events and the COGRA queries; writes each query's trend results with their
ids; keeps per ordered partition each query's operator and each key's position in the
``operators`` table. Everything but the language, the output topics and the hand-off rule is
shared with the deriver and the matcher (:mod:`workers.evaluation`).

The hand-off (batch/README.md, "Backfill"), for a query submitted with a backfill: an operator
that begins on a partition at an event of time ``t`` (recorded with its ``QueryStart`` and kept
in the checkpoint) misses the earlier events of the windows that begin at or before ``t``, so it
sends none of those windows; the backfill publishes exactly them, whole. A window that begins
after ``t`` holds only events the operator saw (the ordered topic is in time order). A query
submitted without a backfill sends every window: nothing else would publish the first ones.
Design: ARCHITECTURE.md, "The services". Run: ``situflow serve trends``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import faust

from situflow.runtime import PartitionOperators
from topics.catalog import TopicRole
from workers.app import run
from workers.evaluation import EvaluatingService
from workers.settings import ServiceConfig


def build_app(config: ServiceConfig) -> faust.App:
    """The trends service's Faust app over ``config`` (nothing happens at import)."""
    service = EvaluatingService(config, ("cogra",), "operators", output_role=TopicRole.TRENDS)

    async def evaluate(state: PartitionOperators, event: Any) -> list[Any]:
        async def send_whole_windows(name: str, query_id: str, results: Sequence[Any]
                                     ) -> list[Any]:
            if name in service.queries.handoffs:
                begun = state.begun[name]
                results = [r for r in results if r.window_start > begun]
            return await service.send_results(name, query_id, results)

        return await service.evaluate_events(state, event,
                                             list(state.operators.items()),
                                             send_whole_windows)

    service.evaluate_with(evaluate)
    return service.app


def main() -> None:
    config = ServiceConfig.from_env("trends")
    run(build_app(config), config)


if __name__ == "__main__":
    main()
