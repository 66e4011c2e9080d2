"""The trends service: COGRA queries over ``<stream>.ordered`` → ``trends.<query>``.

Everything but the language and the output topics is shared with the deriver and the matcher:
see :mod:`workers.evaluation`. Run: ``python -m workers.trends worker``.
"""

from typing import Any

from topics.catalog import TopicRole
from workers.app import ServiceConfig, run
from workers.evaluation import EvaluatingService, Evaluation

config = ServiceConfig.from_env("trends")
service = EvaluatingService(config, ("cogra",), "operators", output_role=TopicRole.TRENDS)
app, queries = service.app, service.queries


async def evaluate(evaluation: Evaluation, event: Any) -> list[Any]:
    return await service.evaluate_events(evaluation, event, list(evaluation.operators.items()),
                                         service.send_results)


service.evaluate_with(evaluate)

if __name__ == "__main__":
    run(app, config)
