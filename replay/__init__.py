"""specreplay offline side: read dumps, rebuild trees, replay acceptance. Never imports torch."""

__version__ = "0.1.0"
