"""An executed runbook notebook as a standalone HTML page (triage's ``runbooks/*.html``)."""
from __future__ import annotations

import pathlib

from flink_runbooks.parse.redact import redact_text

# Cells whose code a reader does not need (parameters, the call into lib/): pages show only their output.
HIDDEN_INPUT_TAGS = frozenset({"setup", "parameters", "injected-parameters"})


def render_html(notebook: pathlib.Path) -> pathlib.Path:
    """The executed notebook as a standalone HTML page (code of cells tagged ``setup`` hidden)."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    exporter = HTMLExporter(config=cfg)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    target.write_text(redact_text(body))
    return target
