"""What a person looks at: acceptance plots, tree drawings, sweep plots, the example round, and the
self-contained HTML report.
"""
