"""paraeval's version, from the installed distribution's metadata."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("paraeval")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
