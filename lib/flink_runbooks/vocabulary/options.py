"""The configuration keys (deprecated spellings included) that the option classes of each release's ``flink-dist``
declare: a key no release here declares and close to one that is declared is probably misspelled.

The table is data (``options.json``), generated from the releases' own jars (javap of every ``*Options`` class) by
``scripts/record/config-value-invalid/option_keys.sh``; so is ``option_types.json``, how each release reads the
options whose values carry a number, a duration or a size (the builder's ``longType()``/``intType()``,
``durationType()``, ``memoryType()``, or the boxed default of releases before typed builders).
"""
from __future__ import annotations

import json
import pathlib

_TABLE = json.loads((pathlib.Path(__file__).with_name("options.json")).read_text())

RELEASES: tuple[str, ...] = tuple(_TABLE["releases"])
# key -> the releases (of RELEASES) that declare it
KEYS: dict[str, tuple[str, ...]] = {key: tuple(releases) for key, releases in _TABLE["keys"].items()}

_TYPES = json.loads((pathlib.Path(__file__).with_name("option_types.json")).read_text())
TYPED_RELEASES: tuple[str, ...] = tuple(_TYPES["releases"])
# key -> {release: "number" | "duration" | "memory size"}
TYPES: dict[str, dict[str, str]] = _TYPES["types"]


def option_type(key: str, version: tuple[int, ...] | None) -> str | None:
    """How the release nearest ``version`` (at or below it) reads ``key``: "number" (a plain long or int, no unit),
    "duration", "memory size", or None when no release at hand declares it with one of these types."""
    by_release = TYPES.get(key)
    if not by_release:
        return None
    if not version:
        return by_release.get(TYPED_RELEASES[-1])
    wanted = tuple(version[:2])
    older = [r for r in TYPED_RELEASES if tuple(int(p) for p in r.split(".")) <= wanted]
    release = older[-1] if older else TYPED_RELEASES[0]
    return by_release.get(release)
