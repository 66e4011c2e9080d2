"""The trends service: COGRA queries over ``<stream>.ordered`` → ``trends.<query>``.

Reads the ordered events and the COGRA queries; writes each query's trend results with their
ids; keeps per ordered partition each query's operator and each key's position in the
``operators`` table. Everything but the language and the output topics is shared with the
deriver and the matcher (:mod:`workers.evaluation`).
Design: ARCHITECTURE.md, "The services". Run: ``python -m workers.trends worker``.
"""

from __future__ import annotations

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
        return await service.evaluate_events(state, event,
                                             list(state.operators.items()),
                                             service.send_results)

    service.evaluate_with(evaluate)
    return service.app


def main() -> None:
    config = ServiceConfig.from_env("trends")
    run(build_app(config), config)


if __name__ == "__main__":
    main()
