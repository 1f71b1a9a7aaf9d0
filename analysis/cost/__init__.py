"""What speculation costs and what a run measured: the cost model, which cost model a run's
speedups use (and the words that say so), and the timings a dump carries.
"""
