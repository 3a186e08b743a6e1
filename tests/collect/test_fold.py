"""Folding repeated records: the driver holds a bounded number of records whatever the size of the logs."""
from __future__ import annotations

from flink_runbooks.collect.fold import DROPPED, Folder, fingerprint


def _record(n: int, file: str = "file:/logs/jm.log", message: str | None = None) -> dict:
    row = {"kind": "record", "file": file, "block": 0, "line_index": n, "ts": f"2026-11-27 10:{n // 60 % 60:02d}:{n % 60:02d}.000",
           "level": "INFO", "logger": "o.a.f.r.c.CheckpointCoordinator",
           "message": message or f"Completed checkpoint {n} for job 7d3c2f0e8b1a4c6d9e5f0a1b2c3d4e5f ({n * 1000} bytes)",
           "chain": []}
    row["fingerprint"] = fingerprint(row)
    return row


def test_numbers_and_ids_do_not_make_records_different_but_words_and_config_values_do():
    assert fingerprint(_record(1)) == fingerprint(_record(99999))
    assert fingerprint(_record(1)) != fingerprint(_record(1, message="Triggering checkpoint 1 for job 7d3c"))
    a = _record(1, message="Loading configuration property: taskmanager.numberOfTaskSlots, 4")
    b = _record(1, message="Loading configuration property: taskmanager.numberOfTaskSlots, 8")
    assert fingerprint(a) != fingerprint(b)
    # which process a file is: per file
    banner = "Starting TaskManager with ResourceID: 10.0.0.{}:35000-abc"
    assert fingerprint(_record(1, "file:/a.log", banner)) != fingerprint(_record(1, "file:/b.log", banner))


def test_the_first_and_last_records_of_a_kind_are_kept_and_the_others_counted_with_their_span():
    folder = Folder(keep_first=5, keep_last=10)
    for n in reversed(range(1000)):  # in any order, as partitions arrive
        folder.add(_record(n))
    kept = sorted(r["line_index"] for r in folder.records())
    assert kept == list(range(5)) + list(range(990, 1000))
    [repeat] = list(folder.repeat_rows())
    assert repeat["count"] == 985 and repeat["line_index"] == 5 and repeat["last_line_index"] == 989


def test_folders_fold_again_what_other_folders_folded():
    workers = [Folder(keep_first=5, keep_last=10) for _ in range(3)]
    for n in range(3000):
        workers[n // 1000].add(_record(n))
    driver = Folder(keep_first=5, keep_last=10)
    for worker in workers:
        for row in list(worker.records()) + list(worker.repeat_rows()):
            driver.add(row)
    kept = sorted(r["line_index"] for r in driver.records())
    assert kept == list(range(5)) + list(range(2990, 3000))
    [repeat] = list(driver.repeat_rows())
    assert repeat["count"] == 2985 and repeat["line_index"] == 5 and repeat["last_line_index"] == 2989


def test_kinds_beyond_the_limit_are_counted_as_dropped():
    folder = Folder(max_fingerprints=3)
    for n in range(5):
        folder.add(_record(n, message=f"kind {'abcde'[n]}"))
    folder.add({"kind": "repeat", "fingerprint": DROPPED, "count": 7})
    assert len(list(folder.records())) == 3 and folder.dropped == 9
