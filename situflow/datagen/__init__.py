"""Seeded generators of sample streams for the demo, tests and benchmarks."""
