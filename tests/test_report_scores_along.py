"""The report's temperature curve of a run loaded with scores_along is the one computed without it: a run
whose validate rows have no scores is known without the curve's reading, a run with scores is walked."""

from unittest import mock

import pytest

from analysis.report import sampling_curves as curves_module
from analysis.report.options import ReportOptions
from analysis.report.sampling_curves import sampling_curves, scores_along
from analysis.tables.runs import TABLES_METRICS, load_runs


def _curves(directory: str, along: bool, opts: ReportOptions) -> tuple:
    (run,) = load_runs([directory], tables=TABLES_METRICS, progress=False, per_batch=scores_along if along else None)
    tables: dict = {}
    skipped: dict = {}
    opts = ReportOptions(temperatures=opts.temperatures, on_skipped=skipped.__setitem__)
    got = sampling_curves([run], opts, tables)
    shown = [(c.label, c.figure is None, str(c.table), c.notes) for c in got]
    return (
        shown,
        {k: v.to_dict("list") for k, v in tables.items()},
        {k: [(s.what, s.reason) for s in v] for k, v in skipped.items()},
    )


@pytest.mark.parametrize("directory", ["sample_dumps/article_round", "sample_dumps/qwen2.5-coder/chain4"])
@pytest.mark.parametrize("temperatures", [(0.0, 0.7), (0.0,)])
def test_the_curve_is_the_same_with_scores_along(directory: str, temperatures: tuple) -> None:
    opts = ReportOptions(temperatures=temperatures)
    assert _curves(directory, True, opts) == _curves(directory, False, opts)


def test_a_run_without_scores_is_not_read_again_for_the_curve() -> None:
    opts = ReportOptions(temperatures=(0.0, 0.7))
    with mock.patch.object(curves_module, "compare_sampling_run", side_effect=AssertionError("read again")):
        shown, tables, _ = _curves("sample_dumps/article_round", True, opts)
    assert shown[0][1] and "no scores" in shown[0][3][0]
    assert tables == {}
