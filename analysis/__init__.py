"""specreplay analysis: tables, metrics, plots, offline config comparison and HTML reports.

Data flows one way: ``replay`` results (RoundResult) → tables (pandas) → metrics → plots/reports.
Submodules are imported on demand so that ``specreplay --help`` stays fast; torch is never
imported anywhere in this package.

Modules: runs (load dump directories), tables, metrics, plots, treeplot, subtree (exact replay
of contained configs), costmodel, gamma_strategies, compare, report, commands (CLI).
"""

__all__ = [
    "runs",
    "tables",
    "metrics",
    "plots",
    "treeplot",
    "subtree",
    "costmodel",
    "gamma_strategies",
    "compare",
    "report",
    "commands",
]
