"""The Faust services of situflow and what they share: Kafka settings and the embedded broker.

Each service module is thin wiring between topics (:mod:`topics`) and the core operators
(:mod:`situflow`); Kafka clients are imported here and in :mod:`batch`, never in the core.
"""
