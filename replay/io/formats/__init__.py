"""One dump matrix from one file, in any encoding: .npy/.npz, .pt without torch, text (one file at
a time in matrix_io, many at once in textbatch and arraybatch).
"""
