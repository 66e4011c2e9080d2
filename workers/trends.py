"""The trends service: COGRA queries over ``<stream>.ordered`` → ``trends.<query>``.

Everything but the language and the output topics is shared with the matcher service:
see :mod:`workers.evaluation`. Run: ``python -m workers.trends worker``.
"""

from topics.catalog import TopicRole
from workers.app import run
from workers.evaluation import evaluator_app

app, queries, config = evaluator_app("trends", ("cogra",), TopicRole.TRENDS)

if __name__ == "__main__":
    run(app, config)
