"""Turn model arguments (paths, short names, a pair name) into model paths.

Stdlib only: resolving happens before torch is imported, so a missing model fails in a second
with the `specreplay models fetch` command to run, not after a minute of loading the other one.
A short name resolves to its file in the model cache (see model_cache) when that file is there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replay.live.errors import FetchError, ModelLoadError, ModelNotFetchedError

from .cache import cache_dir_or_default, is_present, model_path
from .catalogue import DEFAULT_PAIR, MODELS, PAIRS, ModelSpec, get_pair


@dataclass(frozen=True)
class ModelPaths:
    draft: Path | None
    target: Path | None


def resolve_model_args(
    draft: str | None, target: str | None, pair: str | None, models_dir: str | Path | None = None
) -> ModelPaths:
    """``--pair NAME`` or ``--draft``/``--target`` (each a path or a short name) -> paths.

    ``models_dir`` None means the default cache: ``$SPECREPLAY_MODELS``, else ~/.cache/specreplay/models.
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


def resolve_model(name_or_path: str | Path, cache_dir: str | Path | None = None) -> Path:
    """A short model name (see replay.live.models.catalogue.MODELS) or an existing path -> the GGUF file (or model directory)."""
    key = str(name_or_path)
    if key in PAIRS:
        raise FetchError(f"'{key}' names a draft/target pair, not one model: use resolve_pair('{key}')")
    if key in MODELS:
        return require_fetched(MODELS[key], cache_dir)
    path = Path(key).expanduser()
    if path.exists():
        return path
    raise ModelNotFetchedError(f"model '{key}': neither a known short name ({', '.join(MODELS)}) nor an existing path")


def resolve_pair(name: str = DEFAULT_PAIR.name, cache_dir: str | Path | None = None) -> tuple[Path, Path]:
    """A pair name (e.g. ``qwen2.5-coder``) -> (draft path, target path)."""
    pair = get_pair(name)
    cache = cache_dir_or_default(cache_dir)
    missing = [s.name for s in pair.specs if not is_present(s, cache)]
    if missing:
        raise ModelNotFetchedError(
            f"pair '{pair.name}' is not fetched yet: {', '.join(missing)} missing in {cache}: "
            f"run `specreplay models fetch --dir {cache}`"
        )
    return model_path(pair.draft, cache), model_path(pair.target, cache)


def require_fetched(spec: ModelSpec, cache_dir: str | Path | None = None) -> Path:
    path = model_path(spec, cache_dir)
    if not is_present(spec, cache_dir):
        raise ModelNotFetchedError(
            f"model '{spec.name}' is not fetched yet (expected {path}, {spec.size} bytes): "
            f"run `specreplay models fetch --dir {path.parent} --only {spec.name}`"
        )
    return path
