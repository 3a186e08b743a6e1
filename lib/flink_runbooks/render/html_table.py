"""The one way a table is written as HTML: every header and cell is text, escaped, so a value read from an incident
(a log line, a file name, a config value) shows as what it is and never becomes markup."""
from __future__ import annotations

import html
import re
from typing import Any, Collection, Mapping, Sequence

# Log text keeps its line breaks and indentation and wraps instead of running off the page.
PREFORMATTED_STYLE = "white-space: pre-wrap; text-align: left; font-family: monospace"


def cell_text(value: Any) -> str:
    """A cell's text: ``None`` is empty, anything else as ``str`` shows it."""
    return "" if value is None else str(value)


def html_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
               preformatted: Collection[str] = (), code: Collection[str] = (), strong: Collection[str] = (),
               css_class: str = "") -> str:
    """``rows`` (one mapping per row) as ``<table>`` with a header row and no index column.

    ``columns`` fixes the columns and their order (default: the keys of the first row, then any new keys of later
    rows); a row without a column gets an empty cell. Cells of the ``preformatted`` columns keep their line
    breaks and use a monospace font; those of ``code`` columns are set as code, of ``strong`` columns in bold.
    Markup is only ever added around a cell's escaped text, never taken from it.
    """
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    esc = lambda value: html.escape(cell_text(value), quote=True)  # noqa: E731
    pre = f' style="{PREFORMATTED_STYLE}"'
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)

    def cell(column: str, value: Any) -> str:
        text = esc(value)
        if column in code and text:
            text = f"<code>{text}</code>"
        if column in strong and text:
            text = f"<b>{text}</b>"
        return f"<td{pre if column in preformatted else ''}>{text}</td>"

    body = "".join("<tr>" + "".join(cell(c, row.get(c)) for c in columns) + "</tr>" for row in rows)
    attrs = f' class="{html.escape(css_class, quote=True)}"' if css_class else ""
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_BYTES = re.compile(r"^(\d+)\s*b(?:ytes?)?$", re.IGNORECASE)
_BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fact_text(value: Any) -> str:
    """A measured fact in words, for a table a person reads: yes/no instead of True/False, ``name: count`` pairs
    instead of a Python dict, a list as a comma-separated line ("none" when empty), a byte count in KiB/MiB/GiB
    beside the value as written."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return "; ".join(f"{fact_text(k)}: {fact_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(fact_text(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100_000 else str(value)
    text = str(value)
    m = _BYTES.match(text.strip())
    if m:
        size = int(m.group(1))
        unit, factor = next(((u, f) for u, f in _BINARY_UNITS if size >= f), ("bytes", 1))
        if factor > 1:
            return f"{size / factor:,.1f}".removesuffix(".0") + f" {unit} ({text})"
    return text


def diff_html(diff: str) -> str:
    """A unified diff as ``<pre class="patch-diff">``, each line escaped and marked as added, removed, a hunk
    header or a file name, so a page can colour it as a review tool does."""
    def line_html(line: str) -> str:
        kind = ("diff-file" if line.startswith(("+++", "---")) else "diff-add" if line.startswith("+")
                else "diff-del" if line.startswith("-") else "diff-hunk" if line.startswith("@@") else "")
        text = html.escape(line, quote=True)
        return f'<span class="{kind}">{text}</span>' if kind else text

    return '<pre class="patch-diff">' + "\n".join(line_html(line) for line in diff.rstrip("\n").split("\n")) + "</pre>"
