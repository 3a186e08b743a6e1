"""An executed runbook notebook as a standalone HTML page (triage's ``runbooks/*.html``).

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

_TEMPLATE_NAME = "flink-runbooks-report.html.j2"
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head -%}
<meta http-equiv="Content-Security-Policy" content="{{ resources.content_security_policy | e }}">
{{ super() }}
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
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    exporter = HTMLExporter(config=cfg, extra_loaders=[jinja2.DictLoader({_TEMPLATE_NAME: _TEMPLATE})])
    exporter.template_file = _TEMPLATE_NAME
    return exporter


def notebook_page(notebook: pathlib.Path) -> str:
    """The page for an executed notebook, redacted."""
    import nbformat

    body, _ = _exporter().from_notebook_node(nbformat.read(notebook, as_version=4),
                                             resources={"content_security_policy": CONTENT_SECURITY_POLICY})
    return redact_text(body)


def render_html(notebook: pathlib.Path) -> pathlib.Path:
    """Write the executed notebook's page beside it (``.html``; code of cells tagged ``setup`` hidden)."""
    target = notebook.with_suffix(".html")
    target.write_text(notebook_page(notebook))
    return target
