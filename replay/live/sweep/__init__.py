"""Sweeps: many tree configs live on the same prompts and models, on this machine (``runner``) or
on a Dask cluster (``cluster``); the sweep directory, atomic commits of results, config grids.
"""
