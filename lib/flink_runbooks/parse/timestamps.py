"""Event timestamps (``YYYY-MM-DD HH:MM:SS.mmm``, as :func:`~flink_runbooks.parse.layouts.normalize_ts` writes them)
as times and the spans between them."""
from __future__ import annotations

from datetime import datetime


def parse_ts(ts: str | None) -> datetime | None:
    """``2024-03-01 10:00:00.123`` -> datetime; None when absent or odd."""
    if not ts:
        return None
    try:
        return datetime.strptime(ts[:23], "%Y-%m-%d %H:%M:%S.%f")
    except ValueError:
        try:
            return datetime.strptime(ts[:19], "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None


def seconds(ts: str | None) -> float | None:
    """The timestamp as seconds on a common scale (only differences mean anything); None without one."""
    t = parse_ts(ts)
    return t.timestamp() if t else None


def seconds_between(earlier: str | None, later: str | None) -> float | None:
    a, b = parse_ts(earlier), parse_ts(later)
    return (b - a).total_seconds() if a and b else None


def span_ms(start: str | None, end: str | None) -> int | None:
    between = seconds_between(start, end)
    return int(between * 1000) if between is not None else None
