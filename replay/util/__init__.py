"""Plumbing every layer uses and that knows nothing of speculative decoding: errors that tell
the user what to fix, atomic writes, bounded reads of untrusted files, the one parallel map,
progress bars, path checks and the version.
"""
