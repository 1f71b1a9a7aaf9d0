"""specreplay offline side: read dumps, rebuild trees, replay acceptance. Never imports torch."""

# Old import paths (before issue 21's folder move) that users' code imports keep working.
from replay.util.old_paths import install as _install_old_paths

_install_old_paths()


def __getattr__(name: str):
    if name == "__version__":  # one source: the package metadata (replay.util.version)
        from .util.version import package_version

        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
