"""Replaying rounds: rebuild each round's tree and walk acceptance. ``replayer`` (with ``rebuild``) is
the scalar reference, one round at a time; ``batch/`` is the vectorised kernel with the same
results as arrays; ``runs`` opens either source in batches; ``render`` prints a replay as text.
"""
