"""Flink's memory-size and duration syntax (``MemorySize.parse`` and ``TimeUtils.parseDuration``)."""
from __future__ import annotations

import re

_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}
_DURATION_UNITS_MS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "min": 60_000, "m": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Zµ]*)\s*$")


def parse_memory_size(text: str | int | None) -> int | None:
    """``"1728m"`` -> 1811939328. Returns None for None or unparseable text (never raises)."""
    if text is None:
        return None
    if isinstance(text, int):
        return text
    m = _NUMBER_UNIT.match(str(text))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def parse_duration_ms(text: str | int | None) -> int | None:
    """``"5 s"`` -> 5000, ``"10min"`` -> 600000, ``"60000"`` -> 60000 (Flink reads a bare number as ms)."""
    if text is None:
        return None
    if isinstance(text, int):
        return text
    m = _NUMBER_UNIT.match(str(text))
    if not m or m.group(2).lower() not in _DURATION_UNITS_MS:
        return None
    return int(float(m.group(1)) * _DURATION_UNITS_MS[m.group(2).lower()])


def format_size(num_bytes: int | float | None) -> str:
    """Bytes as the shortest exact Flink size (``1g``, ``1536m``), else rounded megabytes."""
    if num_bytes is None:
        return "?"
    n = int(num_bytes)
    for unit, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    if n >= 1 << 20:
        return f"{round(n / (1 << 20))}m"
    return f"{n}b"


def format_duration(ms: int | float | None) -> str:
    """Milliseconds as the shortest exact Flink duration (``10 min``, ``90 s``, ``250 ms``)."""
    if ms is None:
        return "?"
    n = int(ms)
    for unit, factor in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} ms"


def human_duration(ms: int | float | None) -> str:
    """A duration for prose: whole seconds from 10 s on (``95513`` -> ``96 s``), exact below."""
    if ms is None:
        return "?"
    return format_duration(round(ms / 1000) * 1000 if ms >= 10_000 else ms)


def human_span(seconds: float) -> str:
    """A span of wall-clock time for prose, in minutes and seconds (``125`` -> ``2 min 5 s``)."""
    minutes, secs = divmod(int(round(seconds)), 60)
    if not minutes:
        return f"{secs} s"
    return f"{minutes} min" + (f" {secs} s" if secs else "")


def human_size(num_bytes: int) -> str:
    """A state or file size for prose, in GiB from 1 GiB on, else MiB."""
    return f"{num_bytes / (1 << 30):.1f} GiB" if num_bytes >= 1 << 30 else f"{num_bytes / (1 << 20):.0f} MiB"
