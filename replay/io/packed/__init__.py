"""Packed runs: a whole dump directory as a few column-major arrays per kind of round
(docs/packed-format.md). ``pack`` packs and opens them; format, meta, blocks, write and read are
the layout, packed.json, checked blocks, the writer and the reader.
"""
