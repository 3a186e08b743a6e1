"""``make bench``: diagnose generated incident bundles of 100 MB, 1 GB and 5 GB and compare with the baselines.

For every size it measures:

* end to end: ``flink-runbooks diagnose <bundle> --format json`` in a fresh process (JVM start included), its wall
  time, the peak resident memory of the Python driver and of the JVM, and the JVM's peak heap from its GC log;
* steady state: the ingest alone in a warm Spark session (bytes are uncompressed log bytes);
* the baselines over the same files: ``grep -E`` for the same patterns, and the plain single-process Python reader;
* whether the findings are the same at every size and the injected incidents are found where they were put.

Results go to ``build/bench/results.json`` and ``build/bench/results.md`` (the table in the README).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import threading
import time

from flink_runbooks.apps.bench import baselines
from flink_runbooks.apps.bench.generate import generate, parse_size

ROOT = pathlib.Path(__file__).resolve().parents[4]
OUT = ROOT / "build" / "bench"
DRIVER_MEMORY = os.environ.get("FLINK_RUNBOOKS_DRIVER_MEMORY", "1g")  # what get_spark gives the driver JVM
GENERATOR_VERSION = 1  # bump when generate.py changes what it writes, so cached bundles are rebuilt


def bundle(size: str) -> tuple[pathlib.Path, dict]:
    """The generated bundle for ``size``, reused when an identical one exists."""
    path, manifest_path = OUT / size, OUT / f"{size}.json"
    if manifest_path.exists() and path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("generator") == GENERATOR_VERSION:
            return path, manifest
    print(f"generating the {size} bundle in {path} ...", flush=True)
    manifest = generate(path, parse_size(size))
    manifest["generator"] = GENERATOR_VERSION
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path, manifest


def log_files(path: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name not in ("flink-conf.yaml", "config.yaml"))


class _PeakMemory(threading.Thread):
    """Polls the resident memory of a process and of its JVM child until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.python_peak, self.jvm_peak = pid, 0, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.python_peak = max(self.python_peak, _rss(self.pid))
            for child in _children(self.pid):
                if "java" in _comm(child):
                    self.jvm_peak = max(self.jvm_peak, _rss(child))
            self._done.wait(0.05)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _rss(pid: int) -> int:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(m.group(1)) * 1024 if m else 0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def end_to_end(path: pathlib.Path, work: pathlib.Path) -> dict:
    """One ``diagnose`` in a fresh process: wall time, peak memory, peak heap, the JSON it printed."""
    gc_log = work / "gc.log"
    gc_log.unlink(missing_ok=True)
    env = dict(os.environ, PYSPARK_SUBMIT_ARGS=f"--driver-java-options -Xlog:gc:file={gc_log} pyspark-shell")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "flink_runbooks", "diagnose", str(path), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    monitor = _PeakMemory(proc.pid)
    monitor.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - started
    monitor.stop()
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"diagnose exited {proc.returncode}: {err.strip()[-2000:]}")
    return {"seconds": seconds, "python_rss": monitor.python_peak, "jvm_rss": monitor.jvm_peak,
            "heap_peak": _heap_peak(gc_log), "report": json.loads(out)}


def _heap_peak(gc_log: pathlib.Path) -> int | None:
    """Peak heap in use (before any collection), from ``-Xlog:gc`` lines such as
    ``GC(3) Pause Young (Normal) (G1 Evacuation Pause) 245M->60M(1024M) 3.456ms``."""
    if not gc_log.exists():
        return None
    before = re.findall(r"(\d+)M->\d+M\(\d+M\)", gc_log.read_text())
    return max(int(b) for b in before) << 20 if before else None


def steady_ingest(spark, path: pathlib.Path) -> tuple[float, int]:
    from flink_runbooks.collect.ingest import ingest

    started = time.perf_counter()
    incident = ingest([str(path)], spark)
    return time.perf_counter() - started, len(incident.events)


def findings_of(report: dict) -> list[tuple]:
    """What must not change with the size: runbook, root cause, severity, primary, patched keys."""
    return sorted((f["runbook"], f["root_cause"]["slug"] if f.get("root_cause") else None, f["severity"],
                   f["primary"], tuple(sorted(p["key"] for p in f.get("patches", []))))
                  for f in report["findings"])


def injected_found(report: dict, manifest: dict) -> list[str]:
    """Problems with the injected incidents: each must be a finding with evidence from a file it was put in."""
    files_of: dict[str, list[str]] = {}
    for entry in manifest["injected"]:
        files_of.setdefault(entry["incident"].split("/")[0], []).append(entry["file"])
    problems = []
    for slug, files in files_of.items():
        finding = next((f for f in report["findings"] if f["runbook"] == slug), None)
        if finding is None:
            problems.append(f"{slug} not found")
        elif not any(e["file"].endswith("/" + f) for e in finding.get("evidence", []) for f in files):
            problems.append(f"{slug}: no evidence from {', '.join(files)}")
    return problems


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = int(re.search(r"MemTotal:\s+(\d+)", pathlib.Path("/proc/meminfo").read_text()).group(1)) >> 20
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    import pyspark

    return (f"{os.cpu_count()} cores ({cpu}), {mem} GiB RAM, {java}, Python {platform.python_version()}, "
            f"PySpark {pyspark.__version__}, local[2], driver memory {DRIVER_MEMORY}")


def _mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:,.0f} MiB"


def markdown(results: list[dict], machine_text: str) -> str:
    lines = [f"Machine: {machine_text}.", "",
             f"| bundle | files | diagnose end to end | ingest (warm) | ingest throughput | grep -E | plain Python "
             f"| vs Python | driver heap peak (limit {DRIVER_MEMORY}) | JVM RSS | Python RSS | findings |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        python = f"{r['python_s']:.1f} s" if r.get("python_s") is not None else "not run"
        ratio = f"{r['python_s'] / r['ingest_s']:.1f}×" if r.get("python_s") is not None else "–"
        lines.append(
            f"| {r['size']} ({r['bytes'] / 2**20:,.0f} MiB) | {r['files']} | {r['e2e_s']:.1f} s | {r['ingest_s']:.1f} s "
            f"| {r['bytes'] / 2**20 / r['ingest_s']:.0f} MiB/s | {r['grep_s']:.1f} s ({r['grep_s'] / r['ingest_s']:.2f}×) "
            f"| {python} | {ratio} | {_mb(r['heap_peak'])} | {_mb(r['jvm_rss'])} "
            f"| {_mb(r['python_rss'])} | {r['findings_note']} |")
    lines += ["", "Ratios: grep -E time / ingest time (below 1: grep is faster), plain-Python time / ingest time "
              "(above 1: Spark is faster)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100MB,1GB,5GB")
    parser.add_argument("--python-baseline-max", default="1GB",
                        help="largest bundle the plain-Python reader is run on (it is slow)")
    args = parser.parse_args(argv)
    from flink_runbooks.collect.spark import get_spark

    OUT.mkdir(parents=True, exist_ok=True)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bundles = {size: bundle(size) for size in sizes}
    machine_text = machine()
    spark = get_spark()
    steady_ingest(spark, bundles[sizes[0]][0])  # warm-up: JIT, Python workers
    results, reference = [], None
    for size in sizes:
        path, manifest = bundles[size]
        files = log_files(path)
        print(f"[{size}] diagnose end to end ...", flush=True)
        e2e = end_to_end(path, OUT)
        print(f"[{size}] ingest in a warm session ...", flush=True)
        ingest_s, events = steady_ingest(spark, path)
        print(f"[{size}] grep -E ...", flush=True)
        grep_s, grep_lines = baselines.run_grep(files)
        python_s = records = None
        if parse_size(size) <= parse_size(args.python_baseline_max):
            print(f"[{size}] plain Python reader ...", flush=True)
            python_s, records = baselines.python_reader(files)
        found = findings_of(e2e["report"])
        reference = reference or found
        problems = injected_found(e2e["report"], manifest)
        if size == sizes[0]:
            note = f"{len(found)} findings"
        else:
            note = f"same as {sizes[0]}" if found == reference else f"DIFFERENT from {sizes[0]}"
        if problems:
            note += "; " + "; ".join(problems)
        result = {"size": size, "bytes": manifest["log_bytes"], "files": len(files), "e2e_s": e2e["seconds"],
                  "ingest_s": ingest_s, "events": events, "grep_s": grep_s, "grep_lines": grep_lines,
                  "python_s": python_s, "python_records": records, "heap_peak": e2e["heap_peak"],
                  "jvm_rss": e2e["jvm_rss"], "python_rss": e2e["python_rss"],
                  "findings": found, "problems": problems, "findings_note": note}
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k not in ("findings", "problems")}), flush=True)
    (OUT / "results.json").write_text(json.dumps({"machine": machine_text, "results": results}, indent=2) + "\n")
    table = markdown(results, machine_text)
    (OUT / "results.md").write_text(table)
    print(table)
    as_planted = all(r["findings"] == reference and not r["problems"] for r in results)
    return 0 if as_planted else 1


if __name__ == "__main__":
    raise SystemExit(main())
