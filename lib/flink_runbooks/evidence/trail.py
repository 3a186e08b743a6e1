"""The evidence a finding shows: events in the order they make the case, each listed once, with a note on why."""
from __future__ import annotations

from typing import Callable

from flink_runbooks.model import Event


def evidence_trail() -> tuple[list[Event], dict[int, str], Callable[[Event | None, str], None]]:
    """An empty trail: the events, their notes by position, and ``add(event, note)``, which skips ``None`` and
    events already listed (the first note stays)."""
    events: list[Event] = []
    notes: dict[int, str] = {}

    def add(event: Event | None, note: str) -> None:
        if event is not None and event not in events:
            notes[len(events)] = note
            events.append(event)

    return events, notes, add
