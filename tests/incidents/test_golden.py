"""Every example incident's diagnosis, pinned: a restructuring must leave the JSON of `diagnose` identical.

A deliberate change of a verdict, evidence or patch updates the pins with

    make regen

and the diff of tests/golden/diagnoses.json shows, per incident, what changed.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import pytest


import corpus  # noqa: E402
from corpus import ROOT, expected_incidents  # noqa: E402

# the corpus is diagnosed once per worker: the suites that read it run on one
pytestmark = pytest.mark.xdist_group(corpus.GROUP)

PINS = ROOT / "tests" / "golden" / "diagnoses.json"
INCIDENTS = expected_incidents()


def pin(path: pathlib.Path) -> dict:
    """The diagnosis as `diagnose --format json` gives it (the repository's location left out), as a digest of the
    whole document plus the parts a reviewer reads."""
    doc = corpus.diagnosis(path)
    text = json.dumps(doc, sort_keys=True).replace(str(ROOT), "<repo>")
    return {
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "findings": [f"{f['runbook']}/{f['root_cause']['slug']} {f['severity']} {f['confidence']}"
                     + (" primary" if f["primary"] else "")
                     + "".join(f" {p['target']}:{p['key']}" for p in f["patches"]) for f in doc["findings"]],
    }


def _key(slug: str, name: str) -> str:
    return f"{slug}/{name}"


@pytest.fixture(scope="module")
def pins() -> dict:
    return json.loads(PINS.read_text())


def test_every_example_incident_is_pinned(pins):
    assert sorted(pins) == sorted(_key(s, n) for s, n, _, _ in INCIDENTS), "run `make regen`"


@pytest.mark.parametrize("slug,name,path,expected", INCIDENTS, ids=[_key(s, n) for s, n, _, _ in INCIDENTS])
def test_diagnosis_is_unchanged(pins, slug, name, path, expected):
    assert pin(path) == pins.get(_key(slug, name)), "the diagnosis changed; if on purpose: make regen"


@pytest.mark.parametrize("slug,name,path,expected", INCIDENTS, ids=[_key(s, n) for s, n, _, _ in INCIDENTS])
def test_no_detector_fails_on_an_example(slug, name, path, expected):
    """A detector that raises is reported as a warning instead of hiding the others' findings; on the examples none
    may raise (a proposal its root cause does not declare is refused with an error)."""
    failed = [w for w in corpus.diagnosis(path)["warnings"] if w.startswith("detector ")]
    assert failed == []


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        raise SystemExit(__doc__)
    PINS.write_text(json.dumps({_key(s, n): pin(p) for s, n, p, _ in INCIDENTS}, indent=1, sort_keys=True) + "\n")
    print(f"pinned {len(INCIDENTS)} diagnoses in {PINS.relative_to(ROOT)}")
