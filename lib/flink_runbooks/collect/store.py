"""Save an ingested incident (events as Parquet, the rest as JSON) so several runbooks over one incident do not
re-read the raw logs."""
from __future__ import annotations

import json
import pathlib
from dataclasses import asdict

from flink_runbooks.parse.config import ConfigSource, EffectiveConfig
from flink_runbooks.model import ClusterSnapshot, Event, Folded, Incident, InputFile

EVENTS = "events.parquet"
META = "incident.json"


def save_incident(incident: Incident, directory: str | pathlib.Path) -> pathlib.Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rows = [ev.to_dict() for ev in incident.events]
    table = pa.Table.from_pylist(rows, schema=_events_schema())
    pq.write_table(table, out / EVENTS)
    cfg = incident.config
    meta = {
        "flink_version": incident.flink_version,
        "version_source": incident.version_source,
        "inputs": [asdict(f) for f in incident.inputs],
        "warnings": incident.warnings,
        "folded": [asdict(f) for f in incident.folded],
        "scan": incident.scan,
        "config_file": {"path": cfg.file_path, "format": cfg.file_format, "text": cfg.file_text},
        "config": _config_history(cfg),
        "rest": [snapshot.to_dict() for snapshot in incident.rest],
    }
    (out / META).write_text(json.dumps(meta, indent=1))
    return out


def _config_history(cfg: EffectiveConfig) -> list[dict]:
    """Every observed value (not only the effective one), so a reload applies the same precedence."""
    seen, out = set(), []
    for key in cfg:
        for v in cfg.history(key):
            ident = (v.key, v.value, v.source)
            if ident not in seen:
                seen.add(ident)
                out.append({"key": v.key, "value": v.value, "source": asdict(v.source)})
    return out


def load_incident(directory: str | pathlib.Path) -> Incident:
    import pyarrow.parquet as pq

    src = pathlib.Path(directory)
    if not (src / META).exists() or not (src / EVENTS).exists():
        raise FileNotFoundError(f"{src} is not an incident cache (expected {META} and {EVENTS})")
    meta = json.loads((src / META).read_text())
    events = [Event.from_dict(r) for r in pq.read_table(src / EVENTS).to_pylist()]
    config = EffectiveConfig()
    for item in meta["config"]:
        config.add(item["key"], item["value"], ConfigSource(**item["source"]))
    cf = meta.get("config_file") or {}
    if cf.get("path"):
        config.set_file(cf["path"], cf.get("text"), cf.get("format"))
    return Incident(events=events, config=config, flink_version=meta.get("flink_version"),
                    version_source=meta.get("version_source"),
                    inputs=[InputFile(**f) for f in meta.get("inputs", [])], warnings=meta.get("warnings", []),
                    folded=[Folded(**f) for f in meta.get("folded", [])], scan=meta.get("scan", {}),
                    rest=[ClusterSnapshot.from_dict(s) for s in meta.get("rest", [])])


def _events_schema():
    import pyarrow as pa

    link = pa.struct([("cls", pa.string()), ("message", pa.string()), ("kind", pa.string())])
    return pa.schema([
        ("file", pa.string()), ("line", pa.int64()), ("ts", pa.string()), ("level", pa.string()),
        ("logger", pa.string()), ("thread", pa.string()), ("message", pa.string()), ("chain", pa.list_(link)),
        ("frames", pa.list_(pa.string())), ("body", pa.list_(pa.string())), ("truncated", pa.bool_()),
        ("role", pa.string()), ("host", pa.string()),
    ])
