"""Each runbook is one declaration: its sentences are templates (checked when the class is defined), its notebook
shows the settings the detector declares, and nothing it declares goes unused."""
from __future__ import annotations

import ast
import fnmatch
import inspect
import json
import re

import pytest
from corpus import ROOT
from flink_runbooks.detectors import all_detectors
from flink_runbooks.detectors.base import Detector

DETECTORS = all_detectors()


def _literals_outside_templates(detector: Detector) -> set[str]:
    """The string constants of the detector's module, except the keys and texts of its ``templates``."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(detector)))
    declared = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "templates" for t in node.targets):
            declared = {id(n) for n in ast.walk(node)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in declared}


def _names_built_for_say(detector: Detector) -> list[re.Pattern[str]]:
    """Template names built at run time (``self.say(f"job {outcome}")``), as patterns of the names they can give."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(detector)))
    built = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "say" and node.args
                and isinstance(node.args[0], ast.JoinedStr)):
            built.append(re.compile("".join(re.escape(part.value) if isinstance(part, ast.Constant) else ".+"
                                            for part in node.args[0].values)))
    return built


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.slug)
def test_every_template_is_used(detector):
    """A template is said by name (or by a name built from a fixed pattern), or is the verdict of a declared root
    cause."""
    used = _literals_outside_templates(detector) | {rc.slug for rc in detector.root_causes}
    built = _names_built_for_say(detector)
    unused = [name for name in detector.templates if name not in used and not any(p.fullmatch(name) for p in built)]
    assert unused == []


def test_a_template_with_an_expression_is_refused_when_the_runbook_is_declared():
    with pytest.raises(ValueError, match="not a plain name"):
        type("Broken", (Detector,), {"slug": "broken", "templates": {"head": "{len(found)} found"}})


def test_say_refuses_missing_and_unused_facts():
    class Example(Detector):
        slug = "example"
        templates = {"head": "{count} restarts in {minutes:.0f} min"}

    assert Example().say("head", count=3, minutes=4.2) == "3 restarts in 4 min"
    with pytest.raises(ValueError, match="missing minutes"):
        Example().say("head", count=3)
    with pytest.raises(ValueError, match="not in the template: job"):
        Example().say("head", count=3, minutes=1, job="x")


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.slug)
def test_the_notebook_shows_the_settings_its_detector_declares(detector):
    notebook = json.loads((ROOT / "runbooks" / f"{detector.slug}.ipynb").read_text())
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert "run.config()" in code, "the notebook lists the settings itself; declare them as config_keys"
    assert detector.config_keys, f"{detector.slug} declares no config_keys"
    assert detector.collect_next


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.slug)
def test_each_wording_belongs_to_the_runbook_that_declares_it(detector):
    """A wording shared by two runbooks is declared by both."""
    assert {w.runbook for w in detector.wordings} <= {detector.slug}


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.slug)
def test_every_declared_pattern_runs_in_the_browser_and_the_prefilter(detector):
    """The site's trace page runs the wordings, signatures and frames as JS regexes, and the pre-filter joins every
    signature into one expression: a named group (use ``signature()``) or a construct JS lacks fails here, not at
    the site build."""
    from flink_runbooks.apps.site_signatures import to_js_regex

    for pattern in (*[w.pattern for w in detector.wordings], *detector.signatures, *detector.frames):
        to_js_regex(pattern)
    for pattern in (*detector.signatures, *detector.frames):
        assert "(?P<" not in pattern, f"{detector.slug}: a named group in {pattern!r}"


def _literal(node: ast.AST, names: dict) -> str | None:
    """A string the source spells out: a constant, a module-level constant's name, or an f-string of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), str):
        return names[node.id]
    if isinstance(node, ast.JoinedStr):
        parts = [_literal(v.value if isinstance(v, ast.FormattedValue) else v, names) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    return None


_PATCH_CALLS = {"flink_patch": ("flink", 1), "ops_patch": ("ops", 0), "kafka_patch": ("kafka", 0),
                "code_patch": ("code", 0)}


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.slug)
def test_every_change_a_detector_spells_out_is_declared_by_one_of_its_causes(detector):
    """A proposal no cause declares is refused when the detector runs: on an input no example covers that is a crash
    in front of a user. Every key written in the source must be declared by at least one of the runbook's causes."""
    from flink_runbooks.detectors.base import _declared_key
    from flink_runbooks.vocabulary import keys

    module = inspect.getmodule(detector)
    names = {k: v for k, v in vars(module).items() if isinstance(v, str)}
    declared = {_declared_key(d) for rc in detector.root_causes for d in rc.patches}
    undeclared = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in _PATCH_CALLS):
            continue
        target, position = _PATCH_CALLS[node.func.attr]
        if len(node.args) <= position:
            continue
        key = _literal(node.args[position], names)
        if key is None:
            continue  # computed at run time: the examples and the unit tests cover those
        key = keys.canonical(key) if target == "flink" else key
        if not any(t == target and fnmatch.fnmatchcase(key, k) for t, k in declared):
            undeclared.append(f"{target}:{key} (line {node.lineno})")
    assert not undeclared, f"{detector.slug}: proposals no cause declares: {undeclared}"
