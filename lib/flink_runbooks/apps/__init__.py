"""Applications on top of the pipeline: the CLI, triage, the Alertmanager receiver, the site, the benchmark."""
