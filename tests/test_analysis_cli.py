"""The stats / plot / compare / report commands, end to end through the dispatcher."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from analysis.compare.configs import SPEEDUP_DIGITS
from replay.cli import main
from replay.core.headline import fixed_text
from replay.testing.replayer import replay_directory

SYNTH = "sample_dumps/synthetic_article"
ARTICLE = "sample_dumps/article_round"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["stats", "plot", "compare", "report"])
def test_help_has_examples(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and f"specreplay {command} " in out


@pytest.mark.slow
def test_stats_text_json_csv(capsys):
    code, out, err = run(capsys, "stats", ARTICLE, "--no-progress")
    # the rank-major WARNING is about the input: on stderr, once
    assert code == 0 and "rank_major_fallback" in out and "WARNING" not in out and "rank-major fallback" in err
    code, out, _ = run(capsys, "stats", SYNTH, ARTICLE, "--json", "--no-progress")
    body = json.loads(out)
    s = {r["run"]: r for r in body["summary"]}
    assert s["article_round"]["mean_accepted_length"] == 3 and s["synthetic_article"]["rounds"] == 300
    assert body["configs"]["article_round"]["topHead"] == [1, 2, 2]
    assert (
        s["article_round"]["draft_acceptance_rate"] == 0.25 and s["article_round"]["mean_acceptance_length"] == 4
    )  # 3 of 12; 3 + 1
    assert {d["name"] for d in body["definitions"]} >= {"draft_acceptance_rate", "per_position_acceptance_rate"}
    code, out, _ = run(capsys, "stats", SYNTH, "--table", "depth_acceptance", "--csv", "--no-progress")
    df = pd.read_csv(io.StringIO(out))
    assert df["depth"].tolist() == [1, 2, 3] and (df["per_position_acceptance_rate"] <= df["conditional"] + 1e-12).all()


def test_stats_export(capsys, tmp_path):
    code, _, err = run(capsys, "stats", ARTICLE, "--export", str(tmp_path), "--csv", "--no-progress")
    assert code == 0 and (tmp_path / "nodes.parquet").is_file() and (tmp_path / "rounds.csv").is_file()
    assert len(pd.read_parquet(tmp_path / "nodes.parquet")) == 13


@pytest.mark.slow
def test_compare_configs_and_grid(capsys):
    code, out, _ = run(
        capsys, "compare", SYNTH, "--configs", "[[6],[2,2],[1,1]]", "[[4],[1,1],[1]]", "--json", "--no-progress"
    )
    body = json.loads(out)
    rows = {r["config"]: r for r in body["configs"]}
    replayed = replay_directory(SYNTH).results
    own_mean = sum(r.acceptance.accepted_length for r in replayed) / len(replayed)
    assert rows["[6]|[2,2]|[1,1]"]["mean_accepted_length_lo"] == pytest.approx(
        own_mean
    )  # the recorded config = the replay
    assert rows["[4]|[1,1]|[1]"]["undecidable"] == 0 and rows["[4]|[1,1]|[1]"]["nodes"] == 7
    code, out, _ = run(
        capsys, "compare", ARTICLE, "--grid", "root=1,2 heads=1 width=1 gamma=1:2", "--csv", "--no-progress"
    )
    df = pd.read_csv(io.StringIO(out))
    assert df["config"].tolist()[0] == "[6]|[2,2]|[1,1]" and set(df["config"]) >= {"[1]", "[2]|[1]"}
    code, out, _ = run(capsys, "compare", SYNTH, "--gamma-strategies", "0", "3", "--no-progress")
    assert code == 0 and "stairway" in out and "recorded [6]|[2,2]|[1,1]" in out


def test_compare_bad_grid_is_a_user_error(capsys):
    code, _, err = run(capsys, "compare", ARTICLE, "--grid", "depth=2", "--no-progress")
    assert code == 2 and "--grid" in err


@pytest.mark.slow
def test_plot_writes_png_and_svg(capsys, tmp_path):
    code, out, _ = run(capsys, "plot", ARTICLE, "-o", str(tmp_path), "--no-progress")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert code == 0 and "round_article_round.png" in names and "tree_hits_article_round.svg" in names
    assert len(names) == 12  # 6 pictures x (png, svg)


@pytest.mark.slow
def test_report_is_self_contained(capsys, tmp_path):
    code, _, err = run(capsys, "report", ARTICLE, SYNTH, "-o", str(tmp_path), "--no-progress")
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert code == 0 and f"specreplay: wrote {tmp_path / 'index.html'}" in err
    assert page.count("data:image/png;base64,") >= 10
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # nothing loaded from outside
    for text in (
        "Offline comparison",
        "topKSpec",
        "Dynamic-gamma",
        "Per-depth acceptance",
        "article_round",
        "synthetic_article",
    ):
        assert text in page
    # the tree-shape recommendation, per run, with the defaults: the recorded config's nodes and gamma
    assert "<h2>Tree-shape recommendation</h2>" in page and page.count("budget 12 nodes, max depth 3") == 2
    assert (tmp_path / "tables" / "compare.csv").is_file()


@pytest.mark.slow
def test_analysis_never_imports_torch(tmp_path):
    code = (
        "import sys\n"
        "from replay.cli import main\n"
        f"main(['stats', '{ARTICLE}', '--no-progress'])\n"
        f"main(['compare', '{ARTICLE}', '--gamma-strategies', '--no-progress'])\n"
        f"main(['report', '{ARTICLE}', '-o', r'{tmp_path}', '--no-progress'])\n"
        "import analysis.report.treeplot, analysis.compare.gamma_strategies\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_directory_without_rounds_is_left_out(capsys, tmp_path):
    (tmp_path / "config.json").write_text('{"gamma": 1, "topKSpec": [[2]], "topHead": [1]}')
    (tmp_path / "draft_step_0_1_1").write_text("5 6\n")  # a dump file, but no round: validate_2_2 is missing
    code, out, err = run(capsys, "stats", str(tmp_path), ARTICLE, "--csv", "--no-progress")
    assert code == 1 and "left out" in err and "article_round" in out
    code, _, err = run(capsys, "stats", str(tmp_path), "--no-progress")
    assert code == 2 and "no round could be replayed" in err


REAL_SAMPLE = "sample_dumps/qwen2.5-coder/article"
# Three interleaved passes (totals.timing), as the current harness records them: seconds per pass.
PASSES = {"speculative": (1.0, 1.1, 0.95), "target-only": (1.2, 1.25, 1.0)}


@pytest.fixture
def real(tmp_path_factory):
    """The real article sample with its totals timed in one interleaved session (the samples may be
    from before the harness did that; analysis.cost.timings calls those not comparable)."""
    import shutil

    out = tmp_path_factory.mktemp("real") / "article"
    shutil.copytree(REAL_SAMPLE, out)
    body = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    t = body["totals"]
    sides = {"speculative": t, "target-only": t["baseline"]}
    t["timing"] = {
        "repeats": 3,
        "methods": {
            m: {"seconds": [sides[m]["total_s"] * f for f in PASSES[m]], "tokens": [sides[m]["new_tokens"]] * 3}
            for m in PASSES
        },
    }
    (out / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    return str(out)


def _hand_measured(path):
    """Measured speedups by hand from the manifest's totals (decode: prefill excluded) and its
    passes (end to end, prefill included: the median of the per-pass ratios)."""
    t = json.loads(open(f"{path}/manifest.json", encoding="utf-8").read())["totals"]
    b = t["baseline"]
    decode = ((b["total_s"] - b["prefill_s"]) / b["new_tokens"]) / ((t["total_s"] - t["prefill_s"]) / t["new_tokens"])
    m = t["timing"]["methods"]
    ratios = sorted(
        (ns / ss) / (nb / sb)
        for ss, ns, sb, nb in zip(
            m["speculative"]["seconds"],
            m["speculative"]["tokens"],
            m["target-only"]["seconds"],
            m["target-only"]["tokens"],
        )
    )
    return decode, ratios[1]


@pytest.mark.slow
def test_compare_uses_measured_timings_and_shows_measured_speedup(capsys, real):
    decode, wall = _hand_measured(real)
    code, out, err = run(capsys, "compare", real, SYNTH, "--configs", "[[1],[1],[1]]", "--json", "--no-progress")
    body = json.loads(out)
    assert code == 0 and body["cost_models"]["article"]["source"] == "measured: manifest timings"
    assert body["cost_models"]["synthetic_article"]["source"] == "modelled: default relative cost"
    assert body["measured"]["article"]["measured_speedup"] == pytest.approx(decode)
    assert body["measured"]["synthetic_article"] is None
    assert len(body["warnings"]) == 1 and "synthetic_article" in body["warnings"][0] and "MODELLED" in err
    rows = [r for r in body["configs"] if r["run"] == "article"]
    assert rows[0]["measured_speedup"] == pytest.approx(decode) and rows[0]["measured_speedup_wall"] == pytest.approx(
        wall
    )
    assert rows[1]["config"] == "[1]|[1]|[1]" and rows[1]["measured_speedup"] is None  # never run: modelled only
    code, out, err = run(capsys, "compare", real, SYNTH, "--configs", "[[1],[1],[1]]", "--no-progress")
    real, synth = out.split("synthetic_article: ")[:2]
    assert (
        "cost model: measured: manifest timings" in real
        and "modelled speedup" in real
        and "measured speedup (decode only)" in real
    )
    assert f"measured speedup (decode only, prefill excluded) {decode:.3f}" in real
    assert f"measured speedup (end to end, prefill included) {wall:.3f} (median of 3 interleaved pass(es)" in real
    assert (
        "WARNING: synthetic_article: no measured timings" in err  # about the input: on stderr
        and "WARNING" not in out
        and "modelled: default relative cost" in synth
        and "measured speedup" not in synth.split("definitions")[0]
    )
    assert "mean_accepted_length = (1/R) Σ_r L_r" in out and "measured_speedup = " in out  # the definitions printed


@pytest.mark.slow
def test_plot_round_option_and_typical_failing_round(capsys, tmp_path):
    code, _, _ = run(
        capsys, "plot", ARTICLE, "-o", str(tmp_path), "--round", "124_140", "--format", "png", "--no-progress"
    )
    assert code == 0 and (tmp_path / "round_article_round.png").is_file()
    code, _, _ = run(
        capsys, "plot", ARTICLE, "-o", str(tmp_path), "--show-round", "124_140", "--format", "png", "--no-progress"
    )
    assert code == 0  # the old spelling still works
    code, _, err = run(capsys, "plot", ARTICLE, "-o", str(tmp_path), "--round", "1_2", "--no-progress")
    assert code == 2 and "--round 1_2: no such round" in err
    # a run without the round keeps its typical failing round, and says so
    code, _, err = run(
        capsys, "plot", ARTICLE, SYNTH, "-o", str(tmp_path), "--round", "100_116", "--format", "png", "--no-progress"
    )
    assert code == 0 and "article_round: no round 100_116; drawing 124_140, no round failed on a mismatch" in err
    code, _, _ = run(
        capsys, "report", ARTICLE, "-o", str(tmp_path / "rep"), "--round", "124_140", "--no-tables", "--no-progress"
    )
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert code == 0 and "article_round: round 124_140, as asked." in page  # the round named once
    assert page.count("round 124_140") == page.count("round 124_140, as asked")


@pytest.mark.slow
def test_report_shows_measured_and_modelled_speedup(capsys, tmp_path, real):
    decode, wall = _hand_measured(real)
    code, _, _ = run(capsys, "report", real, "-o", str(tmp_path), "--no-progress", "--no-tables")
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert code == 0 and "<h2>Speedup: measured and modelled</h2>" in page
    speed = page[page.index("<h2>Speedup") : page.index("<h2>Accepted length")]
    for text in (
        "modelled speedup",
        "measured speedup (decode only, prefill excluded)",
        "measured speedup (end to end, prefill included)",
        "measured: manifest timings",
        fixed_text(decode, SPEEDUP_DIGITS),  # a speedup as every command prints one
        fixed_text(wall, SPEEDUP_DIGITS),
    ):
        assert text in speed, text
    assert "a typical failing round" in page and "draft_acceptance_rate = Σ_r L_r / Σ_r nodes_r" in page
