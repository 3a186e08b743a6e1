"""The examples in the library's docstrings are true."""
from __future__ import annotations

import doctest
import importlib

import pytest
from corpus import ROOT

LIB = ROOT / "lib"
MODULES = sorted(".".join(p.relative_to(LIB).with_suffix("").parts) for p in (LIB / "flink_runbooks").rglob("*.py")
                 if ">>>" in p.read_text() and p.name != "__main__.py")


def test_some_modules_have_examples():
    assert "flink_runbooks.model" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted and result.failed == 0
