"""The Spark jobs of situflow: archive indexes, offline queries with index-pruned replay
(thesis chapter 3), windowed aggregation from lightweight indexes, and backfill. The planning
is in the core (:mod:`situflow.offline`); these modules run it on Spark."""
