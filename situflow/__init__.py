"""situflow: situations, temporal patterns, sequential patterns and event trends on streams."""

__version__ = "0.1.0"
