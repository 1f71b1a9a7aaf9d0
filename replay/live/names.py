"""Turn the CLI's model arguments (paths, short names, a pair name) into model paths.

Stdlib only: resolving happens before torch is imported, so a missing model fails in a second
with the `specreplay models fetch` command to run, not after a minute of loading the other one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ModelLoadError
from .fetch import resolve_model, resolve_pair


@dataclass(frozen=True)
class ModelPaths:
    draft: Path | None
    target: Path | None


def resolve_model_args(
    draft: str | None, target: str | None, pair: str | None, models_dir: str | Path | None = None
) -> ModelPaths:
    """``--pair NAME`` or ``--draft``/``--target`` (each a path or a short name) -> paths.

    ``models_dir`` None means fetch's default: ``$SPECREPLAY_MODELS``, else ~/.cache/specreplay/models.
    Raises ModelNotFetchedError (names the fetch command) for a known name not in the cache.
    """
    if pair is not None:
        if draft is not None or target is not None:
            raise ModelLoadError(f"--pair {pair} names both models: drop --draft/--target, or drop --pair")
        d, t = resolve_pair(pair, models_dir)
        return ModelPaths(d, t)
    return ModelPaths(
        resolve_model(draft, models_dir) if draft is not None else None,
        resolve_model(target, models_dir) if target is not None else None,
    )


def require_both(paths: ModelPaths) -> ModelPaths:
    if paths.draft is None or paths.target is None:
        missing = " and ".join(f"--{role}" for role in ("draft", "target") if getattr(paths, role) is None)
        raise ModelLoadError(f"missing {missing}: give --draft and --target (paths or short names), or --pair NAME")
    return paths
