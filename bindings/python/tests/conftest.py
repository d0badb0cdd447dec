"""Shared fixtures of the rltrain binding tests: where the repository's configs and header are."""

import os
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "learning: trains on a Gymnasium environment to a threshold (minutes); deselect with -m 'not learning'",
    )


@pytest.fixture(scope="session")
def source_dir() -> Path:
    """The rltrain source tree (RLTRAIN_SOURCE_DIR, or the one these tests are in)."""
    root = Path(os.environ.get("RLTRAIN_SOURCE_DIR", Path(__file__).resolve().parents[3]))
    if not (root / "include" / "rltrain.h").is_file():
        pytest.fail(f"{root} is not the rltrain source tree: set RLTRAIN_SOURCE_DIR")
    return root


@pytest.fixture(scope="session")
def configs(source_dir) -> Path:
    return source_dir / "configs"
