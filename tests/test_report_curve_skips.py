"""The report's curve note names every T a round was refused at, and the first reason, from one walk."""

from analysis.report.sampling_curves import _curve_skips


def test_the_note_names_every_refused_temperature_not_the_last_rounds() -> None:
    skipped = [("a", 0.1, "x"), ("a", 0.2, "x"), ("b", 0.5, "y"), ("c", 0.9, "x")]
    entries, temps, first = _curve_skips(iter(skipped), [0.1, 0.2, 0.5, 0.9])
    assert temps == [0.1, 0.2, 0.5, 0.9]
    assert first == "x"
    assert [e.what for e in entries] == ["round a", "round b", "round c"]
    assert "T = 0.1, 0.2 (2 of the curve's 4): x" in entries[0].reason
