"""Flink releases: the one type every part of the package compares, formats and parses versions with."""
from __future__ import annotations

import re

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
# What a user may type: 1.0 to 1.20 or 2.x, with an optional "v" and a qualifier ("1.18.1", "v2.1", "1.19-SNAPSHOT").
_TYPED = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-[\w.]+)?")


class FlinkVersion(tuple):
    """A Flink release as a tuple of ints, ``(1, 20)`` or ``(1, 20, 3)``: it compares with plain tuples
    (``version >= (1, 15)``), prints as ``1.20.3`` and knows its release line (``minor``)."""

    def __new__(cls, parts) -> "FlinkVersion":
        return super().__new__(cls, (int(p) for p in parts))

    @classmethod
    def parse(cls, text) -> "FlinkVersion | None":
        """The release a text starts with (``"1.20.3"``, ``"1.19-SNAPSHOT"``), a tuple as it is, or None."""
        if text is None or text == "":
            return None
        if isinstance(text, tuple):
            return cls(text)
        m = _RELEASE.match(str(text).strip())
        return cls(x for x in m.groups() if x is not None) if m else None

    @classmethod
    def typed(cls, text: str) -> str:
        """A Flink version a user typed (``--flink-version``, an alert's annotation), without its ``v``; anything but
        a release from 1.0 to 1.20 or 2.x raises ``ValueError`` with a one-line reason."""
        m = _TYPED.fullmatch(text.strip())
        if not m or not ((m.group(1) == "1" and int(m.group(2)) <= 20) or (m.group(1) == "2" and int(m.group(2)) <= 9)):
            raise ValueError(f"{text!r} is not a Flink version (expected e.g. 1.18.1, 1.20 or 2.1)")
        return text.strip().removeprefix("v")

    @property
    def minor(self) -> "FlinkVersion":
        """The release line, ``(1, 20)`` of ``(1, 20, 3)``."""
        return FlinkVersion(self[:2])

    def __str__(self) -> str:
        return ".".join(map(str, self))

    def __repr__(self) -> str:
        return f"FlinkVersion({str(self)!r})"


def release_text(version) -> str:
    """``"1.20.3"`` of a version (or of a tuple), ``""`` of None."""
    return str(FlinkVersion(version)) if version else ""


def minor_text(version) -> str | None:
    """``"1.20"`` of ``1.20.3`` (a version, a tuple or a string), None when there is none."""
    v = FlinkVersion.parse(version)
    return str(v.minor) if v is not None and len(v) >= 2 else None
