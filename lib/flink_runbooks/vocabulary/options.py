"""The configuration keys (deprecated spellings included) that the option classes of each release's ``flink-dist``
declare: a key no release here declares and close to one that is declared is probably misspelled.

The table is data (``options.json``), generated from the releases' own jars (javap of every ``*Options`` class) by
``scripts/record/config-value-invalid/option_keys.sh``.
"""
from __future__ import annotations

import json
import pathlib

_TABLE = json.loads((pathlib.Path(__file__).with_name("options.json")).read_text())

RELEASES: tuple[str, ...] = tuple(_TABLE["releases"])
# key -> the releases (of RELEASES) that declare it
KEYS: dict[str, tuple[str, ...]] = {key: tuple(releases) for key, releases in _TABLE["keys"].items()}
