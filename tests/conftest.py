"""Shared fixtures: one SparkSession for the whole run, paths to the example incidents."""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


@pytest.fixture(scope="session")
def spark():
    from flink_runbooks.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    return DATA


def example(slug: str, name: str) -> pathlib.Path:
    path = DATA / slug / name
    assert path.exists(), f"missing example incident {path}"
    return path
