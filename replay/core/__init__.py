"""The words and rules of the domain, each written once: the vocabulary, draft trees, tree
configs and their grammar, which nodes a draft step expands, greedy acceptance, the per-round
record. No dump formats, no kernels over many rounds.
"""
