"""The tables every number comes from: labelled runs, one row per round and per tree node (built
from the batch arrays, with Dask over many runs), every metric's definition and the metric tables.
"""
