"""Offline evaluation over the archive: index-pruned replay (thesis chapter 3, Körber 2021).

The planner turns a compiled query into the thesis' pattern model (:mod:`.pattern`), asks the
indexes for candidates, computes replay intervals (§3.4.2) with the indexes a cost model
chooses (§3.4.3), and replays each merged interval through the same core operator as the CLI
and the services, with a fresh state. Nothing here imports Spark or Kafka: the Spark jobs of
``batch/`` run these functions on the driver and in their tasks.
"""
