"""Replaying rounds: rebuild each round's tree and walk acceptance. ``batch/`` is the vectorised
kernel every command runs on; ``runs`` opens either source in batches, reading it as ``options``
says and telling the run's stderr lines from ``run_notes``; ``render`` prints a replay as text.
"""
