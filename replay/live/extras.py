"""The packages the live harness needs beyond the core install (the ``live`` extra).

A live command checks them after its cheap argument checks and before anything imports them, so a
core-only install gets one line saying what to install instead of an import traceback.
"""

from __future__ import annotations

import importlib.util

from .errors import MissingLiveDependencyError

LIVE_PACKAGES = ("torch", "transformers")
INSTALL_LIVE = "pip install 'specreplay[live]'"


def require_live_packages(packages: tuple[str, ...] = LIVE_PACKAGES) -> None:
    # find_spec, not import: the check stays instant; the command imports them right after anyway.
    for name in packages:
        if importlib.util.find_spec(name) is None:
            raise MissingLiveDependencyError(f"the live harness needs {name}: {INSTALL_LIVE}")
