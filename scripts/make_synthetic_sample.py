"""Regenerate sample_dumps/synthetic_article: many rounds of the article's config, `all` layout.

Synthetic until real runs exist: draft rows and target choices come from replay.testing.synth's known
acceptance model (see the manifest's hit_probs). Deterministic for a given --seed.

    python scripts/make_synthetic_sample.py            # rewrites sample_dumps/synthetic_article
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from replay.core.config import TreeConfig
from replay.testing.synth import write_synthetic_run

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="sample_dumps/synthetic_article")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--early-stop-rate", type=float, default=0.05, help="fraction of rounds with fewer draft steps")
    args = ap.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    write_synthetic_run(out, ARTICLE, args.rounds, seed=args.seed, early_stop_rate=args.early_stop_rate)
    print(f"wrote {args.rounds} rounds to {out}")


if __name__ == "__main__":
    main()
