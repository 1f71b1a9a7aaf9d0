"""One way in for any source of rounds, and the way out: dump directories grouped into rounds
(grouping, rounds, manifest, fastread), RoundBatch stacks, writing dumps; formats/ reads one
file in any encoding, packed/ is the packed run format.
"""
