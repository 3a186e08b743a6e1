"""Detectors: one module per runbook, named after its slug (``-`` becomes ``_``).

A detector declares what it needs from the logs (``signatures`` and ``frames``, pushed down into Spark as one
pre-filter) and judges an :class:`~flink_runbooks.model.Incident`; it never touches files. Adding a runbook means
adding a module here that defines one :class:`Detector` subclass; the registry finds it by itself.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from flink_runbooks.collect.scan import Prefilter
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

__all__ = ["Detector", "all_detectors", "all_wordings", "get_detector", "prefilter", "slugs"]


@lru_cache(maxsize=1)
def _registry() -> dict[str, Detector]:
    found: dict[str, Detector] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Detector) and obj is not Detector and obj.__module__ == module.__name__:
                detector = obj()
                expected = info.name.replace("_", "-")
                if detector.slug != expected:
                    raise RuntimeError(f"detector module {info.name} declares slug {detector.slug!r}, expected {expected!r}")
                found[detector.slug] = detector
    return dict(sorted(found.items()))


def all_detectors() -> list[Detector]:
    return list(_registry().values())


def get_detector(slug: str) -> Detector:
    try:
        return _registry()[slug]
    except KeyError:
        raise KeyError(f"unknown runbook {slug!r}; known: {', '.join(_registry())}") from None


def slugs() -> list[str]:
    return list(_registry())


@lru_cache(maxsize=1)
def all_wordings() -> tuple[Wording, ...]:
    """Flink's wordings every runbook declares (``Detector.wordings``), in catalogue order."""
    return tuple(w for d in all_detectors() for w in d.wordings)


@lru_cache(maxsize=1)
def prefilter() -> Prefilter:
    """What the scan must keep for the catalogue: every runbook's signatures, wordings and stack frames."""
    return Prefilter.of(all_detectors())
