"""flink-runbooks: runbooks for Apache Flink production exceptions.

Collect (``ingest``: Spark reads logs and configs), judge (``detectors``: plain Python over the structured
evidence), render (``render``, ``patches``: reports and config diffs). Notebooks under ``runbooks/`` call these.
"""

__version__ = "0.1.0"
