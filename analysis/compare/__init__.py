"""Other tree configs replayed exactly on a recorded run: the comparison (round by round and from
the batch arrays), the sub-tree replay it rests on, dynamic-gamma strategies.
"""

from replay.util.old_paths import forward as _forward

__getattr__ = _forward(__name__)  # analysis.compare was one module before issue 21: its names still import from here
