"""The tables every number comes from: labelled runs, one row per round and per tree node (built
round by round or from the batch arrays, with Dask over many runs), every metric's definition
and the metric tables.
"""

from replay.util.old_paths import forward as _forward

__getattr__ = _forward(__name__)  # analysis.tables was one module before issue 21: its names still import from here
