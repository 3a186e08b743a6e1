"""The decision table: every runbook × root cause, with the evidence it needs, the changes it may propose and the
Flink versions, generated from the detectors' own declarations (the same ones the detectors judge with, so the table
cannot drift from the code).

``python -m flink_runbooks.render.decision_table`` prints it; ``--write`` refreshes ``data/DECISIONS.md``.
"""
from __future__ import annotations

import argparse
import html
import pathlib
import re
import sys

from flink_runbooks.detectors import all_detectors
from flink_runbooks.detectors.base import Detector
from flink_runbooks.model import RootCause
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.versions import release_text

DECISIONS_FILE = pathlib.Path(__file__).resolve().parents[3] / "data" / "DECISIONS.md"
TARGETS = {"flink": "config", "kafka": "Kafka client", "code": "job code", "ops": "action"}


def key_spellings(key: str) -> str:
    """``key`` with the releases that read each of its spellings, e.g. ``a`` (1.20+), ``b`` (up to 1.19)."""
    concept = keys.concept_of(key)
    if concept is None or len(concept.names) == 1:
        return f"`{key}`"
    parts = []
    for name in concept.names:
        since, until = name.since, name.removed_in
        older = [n for n in concept.names if n.since is not None and (since is None or n.since > since)]
        upper = min((n.since for n in older), default=None)  # a newer spelling takes over from here
        if since and until:
            span = f"{release_text(since)} – before {release_text(until)}"
        elif since:
            span = f"{release_text(since)}+"
        elif upper and until:
            span = f"before {release_text(upper)}; removed in {release_text(until)}"
        elif upper:
            span = f"before {release_text(upper)}"
        elif until:
            span = f"before {release_text(until)}"
        else:
            span = "all"
        parts.append(f"`{name.name}` ({span})")
    return ", ".join(parts)


def _patches(rc: RootCause) -> str:
    if not rc.patches:
        return "none"
    out = []
    for declared in rc.patches:
        target, _, key = declared.partition(":")
        label = TARGETS.get(target, target)
        shown = key_spellings(keys.canonical(key)) if target == "flink" and "*" not in key else f"`{key}`"
        out.append(f"{label}: {shown}")
    return "<br>".join(out)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _verdict_check(detector: Detector, rc: RootCause) -> str:
    parts = []
    if rc.next_evidence:
        parts.append(f"**Collect next:** {rc.next_evidence}")
    change = detector.would_change(rc.slug)
    if change:
        parts.append(change)
    return "<br>".join(_cell(p) for p in parts) or "–"


def decision_table(detectors: list[Detector] | None = None) -> str:
    """The whole table as Markdown."""
    detectors = detectors if detectors is not None else all_detectors()
    lines = [
        "# Decision table",
        "",
        "Generated from the detectors' declarations by `python -m flink_runbooks.render.decision_table --write`; "
        "`tests/render/test_decision_table.py` fails when this file and the code disagree. Each row is one verdict a runbook "
        "can reach: the positive evidence it requires, every change a finding with it may propose (config keys with "
        "the spelling each Flink release reads; findings use the incident's version's spelling), the releases it "
        "applies to, and what would change the verdict. `undetermined` rows are the answer when no cause has "
        "positive evidence: they name the evidence to collect next.",
        "",
    ]
    total = sum(len(d.root_causes) for d in detectors)
    lines.append(f"{len(detectors)} runbooks, {total} verdicts.")
    lines.append("")
    for d in detectors:
        lines.append(f"## `{d.slug}`: {d.title}")
        lines.append("")
        lines.append(f"{_cell(d.meaning)} Versions: {_cell(d.versions)}.")
        lines.append("")
        lines.append("| root cause | means | evidence required | may propose | versions | what would change the verdict |")
        lines.append("|---|---|---|---|---|---|")
        for rc in d.root_causes:
            lines.append(f"| `{rc.slug}` | {_cell(rc.summary)} | {_cell(rc.evidence_hint) or '–'} | {_patches(rc)} | "
                         f"{_cell(rc.versions or d.versions)} | {_verdict_check(d, rc)} |")
        lines.append("")
    return "\n".join(lines)


def _inline_html(markdown_cell: str) -> str:
    """One table cell of the Markdown above as HTML: escaped text, `code` spans, **bold**, <br> line breaks."""
    out = []
    for i, part in enumerate(markdown_cell.replace("\\|", "|").split("`")):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            text = html.escape(part).replace("&lt;br&gt;", "<br>")
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text))
    return "".join(out)


def decision_table_html(detectors: list[Detector] | None = None, pages: dict[str, str] | None = None) -> str:
    """The same table as an HTML fragment for the site (runbook names link to their pages when ``pages`` has them)."""
    pages = pages or {}
    out: list[str] = []
    for line in decision_table(detectors).splitlines()[2:]:
        if line.startswith("## "):
            slug = line.split("`")[1]
            title = _inline_html(line[3:])
            link = f'<a href="{html.escape(pages[slug])}">{title}</a>' if slug in pages else title
            out.append(f'<h2 id="{html.escape(slug)}">{link}</h2>')
        elif line.startswith("|---"):
            continue
        elif line.startswith("| root cause |"):
            heads = [c.strip() for c in line.strip("|").split(" | ")]
            out.append('<div class="table-scroll"><table class="decisions"><thead><tr>'
                       + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr></thead><tbody>")
        elif line.startswith("| "):
            cells = re.split(r"(?<!\\) \| ", line[2:-2])
            out.append("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in cells) + "</tr>")
        elif not line and out and out[-1].startswith("<tr>"):
            out.append("</tbody></table></div>")
        elif line:
            out.append(f"<p>{_inline_html(line)}</p>")
    if out and out[-1].startswith("<tr>"):
        out.append("</tbody></table></div>")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flink_runbooks.render.decision_table",
                                     description="Print (or --write to data/DECISIONS.md) the decision table.")
    parser.add_argument("--write", action="store_true", help=f"write {DECISIONS_FILE}")
    args = parser.parse_args(argv)
    text = decision_table()
    if args.write:
        DECISIONS_FILE.write_text(text)
        print(f"wrote {DECISIONS_FILE}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
