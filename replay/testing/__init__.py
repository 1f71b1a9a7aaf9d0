"""Generators that tests and benches use: synthetic dumps from a known acceptance model (synth),
the same as arrays (batch_synth), tiny random-weight models (tiny); and references the tests hold
the engine equal to (sampling_ref, round_sampling, round_summaries). No library module imports
this package (tests/test_layers.py).
"""
