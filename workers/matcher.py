"""The matcher service: TPStream and SASE+ queries over ``<stream>.ordered`` → ``matches.<query>``.

Everything but the languages and the output topics is shared with the trends service:
see :mod:`workers.evaluation`. Run: ``python -m workers.matcher worker``.
"""

from topics.catalog import TopicRole
from workers.app import run
from workers.evaluation import evaluator_app

app, queries, config = evaluator_app("matcher", ("tpstream", "sase"), TopicRole.MATCHES)

if __name__ == "__main__":
    run(app, config)
