"""The ``specreplay`` command: a thin dispatcher over per-topic command modules.

Each module in COMMAND_MODULES exposes ``register(subparsers)``; a command's parser sets
``func`` (args -> exit code). Modules that need torch import it inside ``func``, so ``--help`` and
the offline commands never load it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import SpecReplayError

COMMAND_MODULES = (
    "replay.commands",
    "replay.scale_commands",
    "analysis.commands",
    "analysis.recommend_cli",
    "replay.live.commands",
    "replay.live.models_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specreplay",
        description="Replay, analyse and regenerate tree speculative decoding dumps.",
        epilog="Start with: specreplay replay sample_dumps/article_round",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # a package not installed yet is fine; a broken import inside a module is not
            if exc.name is None or not name.startswith(exc.name):
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpecReplayError as exc:
        print(f"specreplay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specreplay: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
