"""The words and rules of the domain, each written once: the vocabulary, draft trees, tree
configs and their grammar, which nodes a draft step expands, greedy acceptance, the per-round
record, and the sampling rule at temperature T on column-major rounds (sampling), whose passes
over every recorded cell are compiled loops (loops, numba); how a figure is written in JSON, read
as the text reads it (json_figures). No dump formats.
"""
