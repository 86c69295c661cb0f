"""poimen-memory: why each line of code is the way it is, from the agent sessions behind it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("poimen-memory")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"
