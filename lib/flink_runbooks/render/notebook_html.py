"""An executed runbook notebook as a standalone HTML page (triage's ``runbooks/*.html``): the runbook's title, then
its verdict, then the narrative with the outputs; no code (the notebooks only call into lib/) and no prompts.

The page needs no script: JupyterLab's template is used without require.js, MathJax, Mermaid and the widget
manager (so it loads nothing from the network and works offline), JavaScript outputs are left out, and a
Content-Security-Policy forbids every script, so even markup that slipped into an output cannot run.
"""
from __future__ import annotations

import pathlib

from flink_runbooks.parse.redact import redact_text

# Cells whose code a reader does not need (parameters, the call into lib/): pages show only their output.
HIDDEN_INPUT_TAGS = frozenset({"setup", "parameters", "injected-parameters"})

# Inline styles and data: images (the plots) only; no script, no plugin, no request anywhere.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'none'; object-src 'none'; style-src 'unsafe-inline'; "
                           "img-src data:; font-src data:; base-uri 'none'; form-action 'none'")

# The cell that shows the verdict: moved under the title, so the answer is on the first screen.
VERDICT_CELL_SOURCE = "run.summary()"

# Facts read as text (left-aligned, top-aligned), proposed changes as a reviewer expects a diff to look.
PAGE_STYLE = """
.jp-RenderedHTMLCommon table { margin-left: 0 }
.jp-RenderedHTMLCommon td, .jp-RenderedHTMLCommon th { text-align: left; vertical-align: top }
.jp-RenderedHTMLCommon pre { background: #f6f8fa; padding: .5rem .75rem; border-radius: 4px; white-space: pre-wrap }
pre.patch-diff .diff-add { background: #dafbe1; color: #116329 }
pre.patch-diff .diff-del { background: #ffebe9; color: #82071e }
pre.patch-diff .diff-hunk { color: #0550ae }
pre.patch-diff .diff-file { font-weight: bold }
.verdict { border-left: 4px solid #c62828; padding-left: .75rem }
"""

_TEMPLATE_NAME = "flink-runbooks-report.html.j2"
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head -%}
<meta http-equiv="Content-Security-Policy" content="{{ resources.content_security_policy | e }}">
{{ super() }}
<style>{{ resources.page_style }}</style>
{%- endblock html_head -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block data_javascript scoped -%}{%- endblock data_javascript -%}
"""


def _exporter():
    import jinja2
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    cfg = Config()
    # Notebooks are thin (their code calls lib/): a reader needs the outputs, neither the calls nor "In [n]:".
    cfg.TemplateExporter.exclude_input = True
    cfg.TemplateExporter.exclude_input_prompt = True
    cfg.TemplateExporter.exclude_output_prompt = True
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    exporter = HTMLExporter(config=cfg, extra_loaders=[jinja2.DictLoader({_TEMPLATE_NAME: _TEMPLATE})])
    exporter.template_file = _TEMPLATE_NAME
    return exporter


def verdict_first(nb):
    """``nb`` with the verdict cell right under the title (the first heading), ahead of the runbook's narrative."""
    import nbformat

    cells = nb.cells
    verdict = next((i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.strip() == VERDICT_CELL_SOURCE),
                   None)
    title = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"), None)
    if verdict is None or title is None or title > verdict:
        return nb
    cell = cells.pop(verdict)
    heading, _, rest = cells[title].source.partition("\n")
    if heading.startswith("# ") and rest.strip():
        cells[title] = nbformat.v4.new_markdown_cell(heading)
        cells.insert(title + 1, nbformat.v4.new_markdown_cell(rest.strip("\n")))
    cells.insert(title + 1, cell)
    return nb


def notebook_page(notebook: pathlib.Path) -> str:
    """The page for an executed notebook, redacted."""
    import nbformat

    nb = verdict_first(nbformat.read(notebook, as_version=4))
    body, _ = _exporter().from_notebook_node(nb, resources={"content_security_policy": CONTENT_SECURITY_POLICY,
                                                            "page_style": PAGE_STYLE})
    return redact_text(body)


def render_html(notebook: pathlib.Path) -> pathlib.Path:
    """Write the executed notebook's page beside it (``.html``; code of cells tagged ``setup`` hidden)."""
    target = notebook.with_suffix(".html")
    target.write_text(notebook_page(notebook))
    return target
