"""Fixtures only: one SparkSession for the whole run, the folder of example incidents, one ``flink-runbooks serve``
for the live tier's incidents. Helpers the test modules
share are modules of their own (``corpus``: the example incidents and incidents built in tests; ``support``: a
file server, Chromium and left-over processes)."""
from __future__ import annotations

import pathlib

import pytest

from corpus import DATA


@pytest.fixture(scope="session")
def spark():
    from flink_runbooks.collect.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    return DATA


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """One ``flink-runbooks serve`` answering for every live incident of the run, as in production."""
    from live_cluster import serve

    with serve(tmp_path_factory.mktemp("serve")) as running:
        yield running
