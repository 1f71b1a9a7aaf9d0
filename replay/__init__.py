"""specreplay offline side: read dumps, rebuild trees, replay acceptance. Never imports torch."""


def __getattr__(name: str) -> str:
    if name == "__version__":  # one source: the package metadata (replay.util.version)
        from .util.version import package_version

        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
