"""Generators and per-round references that tests and benches use: synthetic dumps from a known
acceptance model (synth), the same as arrays (batch_synth), tiny random-weight models (tiny); the
references the engine is held equal to: the plain scalar sampling walk (sampling_ref), the round
sampling and summaries (round_sampling, round_summaries), the round and node tables and recommend's
statistics (table_rows, stats_reference), a block's node-metric counts from its node table
(frame_counts), the per-round records written one by one (records_reference), and the sub-tree
comparison round by round (subtree_walk, compare_at_t, compare_reference); and what only tests and
benches call: whole runs held in memory (in_memory), any list of paths grouped (path_grouping), a
sweep's commits seen from outside (sweep_commit). No library module imports this package
(tests/test_layers.py).
"""
