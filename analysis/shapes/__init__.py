"""Tree-shape search: the acceptance model estimated from dumps, the exact search over shapes,
``recommend`` and its output, and predicted speedups for ``generate --config auto``.
"""
