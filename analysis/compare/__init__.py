"""Other tree configs replayed exactly on a recorded run: the comparison (round by round and from
the batch arrays), the sub-tree replay it rests on, dynamic-gamma strategies.
"""
