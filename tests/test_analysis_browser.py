"""The report renders in a real headless browser (Chromium), with its embedded plots visible.

CI: apt-get update && apt-get install -y chromium
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from replay.cli import main

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _browser() -> str | None:
    for name in BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(_browser() is None, reason="needs headless Chromium: apt-get update && apt-get install -y chromium")
def test_report_renders_in_chromium(tmp_path):
    from matplotlib.image import imread

    assert main(["report", "sample_dumps/synthetic_article", "-o", str(tmp_path / "report"), "--no-progress"]) == 0
    page = tmp_path / "report" / "index.html"
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run(
            [
                _browser(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--screenshot={shot}",
                "--window-size=1280,2000",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert shot.is_file(), res.stderr[-2000:]
    img = imread(shot)[:, :, :3]  # [2000, 1280, 3] float in [0, 1]
    assert img.shape[:2] == (2000, 1280)
    non_white = np.mean(np.any(img < 0.9, axis=2))
    assert non_white > 0.03, f"page looks blank: {non_white:.4f} non-white"
    assert img.std() > 0.05
    # matplotlib's first colour (#1f77b4) only appears if an embedded plot rendered
    blue = np.all(np.abs(img - np.array([31, 119, 180]) / 255) < 0.06, axis=2)
    assert blue.sum() > 2000, f"no plot pixels ({blue.sum()})"
