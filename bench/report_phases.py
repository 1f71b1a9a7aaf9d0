"""``specreplay report`` with the CPU seconds and peak resident memory at each phase's start and end.

    nice -n 10 /usr/bin/time -v python bench/report_phases.py RUN -o OUT     # then report's own options

Each phase of analysis.report.html (tables/ with the node metrics' counts, the page's tables, the
config comparison and gamma strategies, the drawn rounds, the recommendation, the temperature curve,
the page) is wrapped to print
``[phase] NAME start|end: cpu S s, peak MB, now MB`` on stderr (getrusage of this process: the peak only
grows, so a phase's own peak is its end's when it rose there). ``--no-progress`` is added.
"""

from __future__ import annotations

import functools
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import analysis.report.html as html  # noqa: E402
import analysis.report.report_dir as report_dir  # noqa: E402
from replay.cli import main  # noqa: E402

# (the module whose global the phase is called through, its name)
PHASES = (
    (report_dir, "report_page"),
    (html, "all_metrics"),
    (html, "_comparisons"),
    (html, "_shape_figures"),
    (html, "_recommendations"),
    (html, "sampling_curves"),
    (report_dir, "render_page"),
    (report_dir, "write_run_tables"),
)


def mark(what: str) -> None:
    u = resource.getrusage(resource.RUSAGE_SELF)
    now = ""
    try:  # the resident memory now (Linux): what a phase leaves held, beside the peak that only grows
        with open("/proc/self/statm") as f:
            now = f", now {int(f.read().split()[1]) * resource.getpagesize() / 2**20:.0f} MB"
    except OSError:
        pass
    print(
        f"[phase] {what}: cpu {u.ru_utime + u.ru_stime:.1f} s, peak {u.ru_maxrss / 1024:.0f} MB{now}", file=sys.stderr
    )


def wrapped(module, name: str):
    f = getattr(module, name)

    @functools.wraps(f)
    def phase(*args, **kwargs):
        mark(f"{name} start")
        try:
            return f(*args, **kwargs)
        finally:
            mark(f"{name} end")

    return phase


if __name__ == "__main__":
    for module, name in PHASES:
        setattr(module, name, wrapped(module, name))
    mark("start")
    code = main(["report", *sys.argv[1:], "--no-progress"])
    mark("end")
    sys.exit(code)
