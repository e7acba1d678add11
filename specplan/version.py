"""specplan's version: what `--version` prints and every SARIF report names as its driver."""

__version__ = "0.1.0"
