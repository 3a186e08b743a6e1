"""``flink-runbooks``: the command line used by people on call and by incident automation.

Exit codes (a contract): 0 nothing found, 1 findings, 2 bad input or usage (or an output that cannot be written),
3 (triage, site) a runbook failed, 4 internal error, 130 / 143 interrupted (Ctrl-C / SIGTERM), 141 the reader of
standard output went away (``| head``), said nowhere.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

from flink_runbooks.render.terminal import printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
# A crash must not look like "findings" (1) to automation; 3 is triage's "a runbook failed".
EXIT_INTERNAL_ERROR = 4
# The shell's convention, 128 + the signal's number.
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE


class Terminated(KeyboardInterrupt):
    """SIGTERM (a stopping service manager or automation's timeout), handled like Ctrl-C."""


def _on_sigterm(_signum, _frame):
    raise Terminated()


def flink_version(text: str) -> str:
    """``--flink-version``: a Flink release number (1.0 to 1.20, 2.x), e.g. ``1.18.1``; anything else is a usage error."""
    from flink_runbooks.vocabulary.versions import FlinkVersion

    try:
        return FlinkVersion.typed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def prometheus_duration(text: str) -> str:
    """``alert-rules --for``: a Prometheus duration (``30s``, ``5m``, ``1h30m``); anything else is a usage error."""
    from flink_runbooks.apps.alert_rules import prometheus_duration as checked

    try:
        return checked(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line on stderr, exit 2
        self.exit(EXIT_BAD_INPUT, f"flink-runbooks: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    from flink_runbooks import __version__

    p = _Parser(prog="flink-runbooks", description="Diagnose Apache Flink incidents from their logs and configs.")
    p.add_argument("--version", action="version", version=f"flink-runbooks {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("diagnose", help="diagnose an incident and print findings with evidence and patches")
    d.add_argument("paths", nargs="+", metavar="PATH",
                   help="log files, directories (recursive), globs or Hadoop URIs, plus flink-conf.yaml/config.yaml; "
                        "'-' reads a pasted excerpt from standard input; an http(s):// URL of a JobManager is pulled "
                        "first (see `pull`)")
    d.add_argument("--flink-version", type=flink_version,
                   help="the Flink version, when the logs do not tell (e.g. 1.18.1); a version the logs print wins")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="text: every finding in full, every evidence line whole, every warning")
    d.add_argument("--runbooks", help="comma-separated runbook slugs to run (default: all)")
    d.add_argument("--save-incident", metavar="DIR",
                   help="also save the structured incident (Parquet + JSON) for notebooks: incident_cache=DIR")
    _spark_options(d)

    _pull_options(d, required_out=False)

    pl = sub.add_parser("pull", help="pull logs, configuration and REST documents from a running cluster's JobManager "
                                     "into an incident folder (read-only GETs, redacted as written)")
    pl.add_argument("url", metavar="URL", help="the JobManager's (or HistoryServer's) REST address, e.g. "
                                               "http://jobmanager:8081; credentials from FLINK_RUNBOOKS_REST_TOKEN, "
                                               "FLINK_RUNBOOKS_REST_USER/_PASSWORD or ~/.netrc; or "
                                               "k8s://NAMESPACE/NAME, a FlinkDeployment, FlinkSessionJob or pod "
                                               "prefix, through the kubeconfig")
    _pull_options(pl, required_out=True)

    ar = sub.add_parser("alert-rules", help="Prometheus alerting rules on Flink's own metrics, each with its runbook_url")
    ar.add_argument("--site-url", default="", help="where the runbook site is published (sets runbook_url)")
    ar.add_argument("--rest-url", default="", metavar="URL",
                    help="the JobManager's REST address, set as the flink_rest_url annotation that serve pulls "
                         "(Prometheus templates such as {{ $labels.flink_rest_url }} are kept)")
    ar.add_argument("--format", choices=("rules", "prometheusrule"), default="rules",
                    help="a Prometheus rule file, or a PrometheusRule resource of the Prometheus Operator")
    ar.add_argument("--checkpoint-timeout-ms", type=int, default=600_000,
                    help="the jobs' checkpoint timeout (default %(default)s, Flink's default)")
    ar.add_argument("--expected-taskmanagers", type=int, help="alert when fewer TaskManagers are registered "
                                                               "(default: when their number drops)")
    ar.add_argument("--for", dest="hold", type=prometheus_duration, metavar="DURATION",
                    help="how long every rule's condition must hold before it fires, e.g. 30s or 2m (default: each "
                         "rule's own, 0 to 15 minutes); shorter on a staging cluster to see the alerts at once")

    t = sub.add_parser("triage", help="diagnose, run the matching runbook notebooks, write a report and patches")
    t.add_argument("paths", nargs="+", metavar="PATH", help="the incident's logs and config files (as for diagnose)")
    t.add_argument("--out", required=True, metavar="DIR", help="output directory (must be empty unless --force)")
    t.add_argument("--flink-version", type=flink_version, help="the Flink version, when the logs do not tell")
    t.add_argument("--runbooks", help="comma-separated runbook slugs to execute (default: those with findings)")
    t.add_argument("--jobs", type=int, default=2, help="runbooks executed in parallel (default 2)")
    t.add_argument("--timeout", type=float, default=600, help="seconds per runbook before it is killed (default 600)")
    t.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    t.add_argument("--format", choices=("text", "json"), default="text")
    t.add_argument("--runbooks-dir", help=argparse.SUPPRESS)  # test notebooks stand in for runbooks
    _spark_options(t)

    s = sub.add_parser("serve", help="HTTP endpoint for Alertmanager webhooks that runs triage")
    s.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default %(default)s: this machine only; 0.0.0.0 for every "
                        "interface, e.g. in a container Alertmanager reaches)")
    s.add_argument("--port", type=int, default=8089, help="the port to listen on (default %(default)s)")
    s.add_argument("--logs-root", required=True, metavar="DIR", help="only incident folders under this directory are accepted")
    s.add_argument("--out-root", required=True, metavar="DIR", help="each triage writes into a new timestamped folder here")
    s.add_argument("--jobs", type=int, default=2, help="runbooks each triage executes in parallel (default 2)")
    s.add_argument("--timeout", type=float, default=600, help="seconds per runbook before it is killed (default 600)")
    s.add_argument("--max-concurrent", type=int, default=None,
                   help="triages run at once (default: 1 on a machine of two cores or fewer, else half the cores); "
                        "later alerts wait in order, at most 100")
    s.add_argument("--allow-rest-url", action="append", default=[], metavar="URL", dest="allow_rest_url",
                   help="a JobManager (or HistoryServer) REST address alerts may name in flink_rest_url, e.g. "
                        "http://orders-jm:8081 (repeat for each cluster; without a port any port of the host, with a "
                        "path every address under it). Without it, alerts naming a REST address are refused (403): "
                        "the pull sends the REST credentials of the environment or ~/.netrc")

    w = sub.add_parser("site", help="build the static runbook site: every runbook executed against its example incident")
    w.add_argument("--out", default="build/site", metavar="DIR",
                   help="output directory (default build/site; an earlier site there is replaced as a whole)")
    w.add_argument("--jobs", type=int, default=2, help="runbooks executed in parallel (default 2)")
    w.add_argument("--runbooks", help="comma-separated runbook slugs to publish (default: every runbook)")

    ls = sub.add_parser("runbooks", help="list the runbooks")
    ls.add_argument("--format", choices=("text", "json"), default="text")

    n = sub.add_parser("new-runbook", help="create the four parts of a new runbook (detector, notebook, example "
                                           "incident, tests) from templates")
    n.add_argument("slug", help="the runbook's slug, e.g. sql-connector-missing (its URL and JSON value)")
    n.add_argument("--title", required=True, help="one line: the failure as a user would name it")
    n.add_argument("--category", required=True, help="the site's category, e.g. connectors")
    n.add_argument("--incident", default="example", help="name of the first example incident (default: example)")
    return p


def _spark_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--master", help="Spark master (default local[2]; e.g. spark://host:7077)")
    g.add_argument("--remote", help="Spark Connect URL (e.g. sc://host:15002)")


def _requested_spark(args):
    """The Spark session the user named (``--master``, ``--remote`` or their environment variables), else None:
    ingestion then reads small local inputs in this process and starts local Spark for the rest."""
    from flink_runbooks.collect.spark import get_spark

    named = args.master or args.remote or os.environ.get("FLINK_RUNBOOKS_SPARK_MASTER") \
        or os.environ.get("FLINK_RUNBOOKS_SPARK_REMOTE")
    return get_spark(master=args.master, remote=args.remote) if named else None


def _selected_detectors(spec: str | None):
    """The runbooks ``--runbooks`` names; a name that is none of them is a KeyError saying which one was meant."""
    import difflib

    from flink_runbooks.detectors import all_detectors, get_detector, slugs

    if not spec:
        return all_detectors()
    chosen = []
    for slug in (s.strip() for s in spec.split(",")):
        if not slug:
            continue
        try:
            chosen.append(get_detector(slug))
        except KeyError:
            close = difflib.get_close_matches(slug, slugs(), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else "; `flink-runbooks runbooks` lists them"
            raise KeyError(f"unknown runbook {slug!r}{hint}") from None
    return chosen


def _pull_options(p: argparse.ArgumentParser, *, required_out: bool) -> None:
    if required_out:
        p.add_argument("--out", required=True, metavar="DIR", help="the incident folder to write (new or empty)")
    else:
        p.add_argument("--pull-dir", metavar="DIR",
                       help="where a pulled URL's incident folder goes (default: a new folder in the system's "
                            "temporary directory, named on standard error)")
    p.add_argument("--job", metavar="ID|NAME", help="the job to pull (default: the jobs that failed, are failing or "
                                                     "restart, else every running job)")
    # no default here: building the parser must not import the network code (collect.rest's REQUEST_TIMEOUT_S)
    p.add_argument("--timeout", type=float, metavar="S", help="seconds to wait for each request (default 10)")
    p.add_argument("--ca-cert", metavar="FILE", help="CA certificate(s) to trust for https")
    p.add_argument("--insecure", action="store_true", help="do not check the server's TLS certificate (said in the "
                                                           "output and the manifest)")
    p.add_argument("--kubeconfig", metavar="FILE", help="for k8s://NAMESPACE/NAME: the kubeconfig (default: "
                                                        "KUBECONFIG, ~/.kube/config, else in-cluster)")
    p.add_argument("--context", metavar="NAME", help="for k8s://: the kubeconfig context (default: its current one)")


def _is_pulled(path: str) -> bool:
    """An http(s):// JobManager or a k8s://NAMESPACE/NAME object, pulled before it is read."""
    from flink_runbooks.collect.kubernetes import is_kubernetes_url
    from flink_runbooks.collect.rest import is_rest_url

    return is_rest_url(path) or is_kubernetes_url(path)


def _pull(url: str, out: str, args, progress=None):
    from flink_runbooks.collect import kubernetes, rest

    if kubernetes.is_kubernetes_url(url):
        report = kubernetes.pull(url, out, kubeconfig=args.kubeconfig, context=args.context,
                                 timeout=args.timeout or kubernetes.REQUEST_TIMEOUT_S, progress=progress)
        for warning in report.warnings:
            _say(f"warning: {warning}")
        return report
    report = rest.pull(url, out, job=args.job, timeout=args.timeout or rest.REQUEST_TIMEOUT_S, ca_cert=args.ca_cert,
                       insecure=args.insecure, progress=progress)
    for warning in report.warnings:
        _say(f"warning: {warning}")
    return report


@contextlib.contextmanager
def _urls_pulled(paths: list[str], args, progress):
    """Each http(s):// URL among the paths pulled into an incident folder first (kept: the findings point into it)."""
    if not any(_is_pulled(p) for p in paths):
        yield paths
        return
    out = []
    for i, path in enumerate(paths):
        if not _is_pulled(path):
            out.append(path)
            continue
        if args.pull_dir:
            folder = os.path.join(args.pull_dir, f"pull-{i}") if sum(map(_is_pulled, paths)) > 1 else args.pull_dir
        else:
            folder = tempfile.mkdtemp(prefix="flink-runbooks-pull-")
        report = _pull(path, folder, args, progress)
        _say(f"pulled {report.source} into {report.out}" + (" (partial)" if report.partial else ""))
        out.append(str(report.out))
    yield out


def cmd_alert_rules(args) -> int:
    from flink_runbooks.apps.alert_rules import render

    sys.stdout.write(render(args.format, site_url=args.site_url, rest_url=args.rest_url,
                            checkpoint_timeout_ms=args.checkpoint_timeout_ms,
                            expected_taskmanagers=args.expected_taskmanagers, hold=args.hold))
    return EXIT_CLEAN


def cmd_pull(args) -> int:
    from flink_runbooks.collect.progress import for_stderr
    from flink_runbooks.collect.rest import PullError

    progress = for_stderr()
    try:
        report = _pull(args.url, args.out, args, progress)
    except PullError as exc:
        if progress:
            progress.done()
        _say(exc)
        return EXIT_BAD_INPUT
    if progress:
        progress.done()
    print(f"pulled {report.source} (Flink {report.flink_version or 'version unknown'}) into {report.out}: "
          f"{len(report.jobs)} job(s), {len(report.logs)} log file(s)" + (", partial" if report.partial else ""))
    print(f"diagnose it with: flink-runbooks diagnose {report.out}")
    return EXIT_CLEAN


def cmd_diagnose(args) -> int:
    from flink_runbooks.collect.progress import for_stderr
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.collect.listing import InputError, check_local_paths
    from flink_runbooks.diagnose import ingest
    from flink_runbooks.render.report import to_json
    from flink_runbooks.render.terminal import answer
    from flink_runbooks.collect.spark import SparkUnavailable

    progress = for_stderr()
    try:
        detectors = _selected_detectors(args.runbooks)
    except KeyError as exc:
        _say(exc.args[0])
        return EXIT_BAD_INPUT
    from flink_runbooks.collect.rest import PullError

    try:
        with _stdin_as_file(args.paths) as pasted, _urls_pulled(pasted, args, progress) as paths:
            check_local_paths(paths)
            incident = ingest(paths, _requested_spark(args), flink_version=args.flink_version, progress=progress)
            inputs = _shown_inputs(args.paths, paths)
    except (InputError, SparkUnavailable, PullError) as exc:
        if progress:
            progress.done()
        _say(exc)
        return EXIT_BAD_INPUT
    if args.save_incident:
        from flink_runbooks.collect.store import save_incident

        save_incident(incident, args.save_incident)
    if progress:
        progress(f"judging {len(incident.events):,} records")
    diagnosis = run_detectors(incident, detectors)
    if progress:
        progress.done()
    if args.format == "json":
        sys.stdout.write(to_json(diagnosis) + "\n")
    else:
        sys.stdout.write(answer(diagnosis, inputs=inputs, width=_terminal_width(), verbose=args.verbose,
                                color=sys.stdout.isatty()))
    return EXIT_FINDINGS if diagnosis.findings else EXIT_CLEAN


def _terminal_width() -> int:
    """The terminal's columns; 100 when standard output is a pipe or a file (``COLUMNS`` overrides both)."""
    import shutil

    return shutil.get_terminal_size(fallback=(100, 24)).columns


def _shown_inputs(given: list[str], read: list[str]):
    """How each input is named in the answer: as typed, ``stdin`` for a paste, the URL for a pulled folder; a path
    of the one directory given is shown relative to it."""
    from flink_runbooks.render.terminal import shown_inputs

    def as_read(path: str) -> str:
        return path if "://" in path else os.path.abspath(path)

    def label(typed: str) -> str:
        return "stdin" if typed == "-" else typed

    return shown_inputs([(as_read(r), label(g)) for g, r in zip(given, read)])


# A paste is a few kilobytes; more than this on standard input is a file that should be named instead.
MAX_STDIN_BYTES = 64 << 20


@contextlib.contextmanager
def _stdin_as_file(paths: list[str]):
    """``-`` among the paths: standard input (a trace pasted into the terminal, or piped) saved as ``stdin.log`` in a
    private temporary folder for the length of the run, so both ingestion paths read it like any file."""
    if "-" not in paths:
        yield paths
        return
    from flink_runbooks.collect.listing import InputError

    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if not data.strip():
        raise InputError("nothing on standard input: paste the stack trace or log excerpt, then end it with Ctrl-D")
    if len(data) > MAX_STDIN_BYTES:
        raise InputError(f"more than {MAX_STDIN_BYTES >> 20} MiB on standard input: save it to a file and name that")
    with tempfile.TemporaryDirectory(prefix="flink-runbooks-") as folder:
        pasted = os.path.join(folder, "stdin.log")
        with open(pasted, "wb") as f:
            f.write(data)
        yield [pasted if p == "-" else p for p in paths]


def cmd_triage(args) -> int:
    import json

    from flink_runbooks.collect.listing import InputError
    from flink_runbooks.collect.spark import SparkUnavailable
    from flink_runbooks.apps.triage import TriageError, triage

    quiet = args.format == "json" or not sys.stderr.isatty()
    progress = None if quiet else (lambda msg: print(f"flink-runbooks: {printable(msg, newlines=False)}",
                                                     file=sys.stderr, flush=True))
    try:
        runbooks = [r.strip() for r in args.runbooks.split(",") if r.strip()] if args.runbooks else None
        if runbooks and not args.runbooks_dir:
            _selected_detectors(args.runbooks)
        report = triage(args.paths, args.out, spark=_requested_spark(args),
                        flink_version=args.flink_version, runbooks=runbooks, jobs=args.jobs,
                        timeout_s=args.timeout, force=args.force, runbooks_dir=args.runbooks_dir, progress=progress)
    except (InputError, TriageError, KeyError, SparkUnavailable) as exc:
        _say(exc.args[0] if exc.args else exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        report = os.path.join(args.out, "report.json")
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        _say(f"{what}; {report} lists what completed" if os.path.exists(report) else what)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=2))
    else:
        from flink_runbooks.render.terminal import answer

        sys.stdout.write(answer(report.diagnosis, inputs=_shown_inputs(args.paths, args.paths),
                                width=_terminal_width()))
        for r in report.runbooks:
            print(f"runbook {r.runbook}: {r.status} ({r.duration_s:.1f}s)" + (f": {printable(r.error, newlines=False)}"
                                                                           if r.error else ""))
        print(f"report: {printable(report.out / 'report.md', newlines=False)}")
    return report.exit_code


def cmd_serve(args) -> int:
    from flink_runbooks.apps.serve import run_server

    return run_server(host=args.host, port=args.port, logs_root=args.logs_root, out_root=args.out_root,
                      jobs=args.jobs, timeout_s=args.timeout, max_concurrent=args.max_concurrent,
                      allowed_rest_urls=args.allow_rest_url)


def cmd_site(args) -> int:
    from flink_runbooks.apps.site import SiteError, build_site
    from flink_runbooks.apps.triage import EXIT_RUNBOOK_FAILED

    runbooks = [r.strip() for r in args.runbooks.split(",") if r.strip()] if args.runbooks else None
    try:
        report = build_site(args.out, runbooks=runbooks, jobs=args.jobs,
                            progress=lambda msg: print(f"flink-runbooks: {msg}", file=sys.stderr, flush=True))
    except SiteError as exc:
        _say(exc)
        return EXIT_BAD_INPUT
    for r in report.failed:
        print(f"runbook {r.slug}: failed against its example incident: {printable(r.error, newlines=False)}",
              file=sys.stderr)
    for link in report.broken_links:
        print(f"broken link: {link}", file=sys.stderr)
    print(report.out / "index.html")
    return EXIT_CLEAN if report.ok else EXIT_RUNBOOK_FAILED


def cmd_runbooks(args) -> int:
    import json

    from flink_runbooks.detectors import all_detectors

    rows = [{"slug": d.slug, "title": d.title, "category": d.category, "meaning": d.meaning,
             "root_causes": [rc.slug for rc in d.root_causes]} for d in all_detectors()]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['slug']:45} {r['category']:15} {r['title']}")
    return EXIT_CLEAN


def cmd_new_runbook(args) -> int:
    from flink_runbooks.apps.scaffold import ScaffoldError, new_runbook
    from flink_runbooks.catalogue import PROJECT_ROOT

    try:
        written = new_runbook(args.slug, args.title, args.category, incident=args.incident)
    except ScaffoldError as exc:
        _say(exc)
        return EXIT_BAD_INPUT
    for path in written:
        print(path.relative_to(PROJECT_ROOT))
    print(f"Next: put the incident's logs into data/{args.slug}/{args.incident}/, write the detector's signatures "
          f"and judgement, then the notebook's narrative; the tests fail until then.", file=sys.stderr)
    return EXIT_CLEAN


def _say(message: object) -> None:
    """One line on stderr; a message may quote a file name or log text, so control characters are shown escaped."""
    print(f"flink-runbooks: {printable(message, newlines=False)}", file=sys.stderr)


def _one_line(exc: Exception) -> str:
    """An exception as one line without secrets: a Java error (Py4J) by its own first line, not Py4J's trace."""
    from flink_runbooks.parse.redact import redact_text

    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return printable(redact_text(first)[:500], newlines=False)


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    args = _parser().parse_args(argv)
    handler = {"diagnose": cmd_diagnose, "triage": cmd_triage, "serve": cmd_serve, "site": cmd_site,
               "runbooks": cmd_runbooks, "new-runbook": cmd_new_runbook, "pull": cmd_pull,
               "alert-rules": cmd_alert_rules}[args.command]
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread and args.command != "serve" else None
    try:
        code = handler(args)
        sys.stdout.flush()  # here, where a reader that went away is caught, not at the interpreter's exit
        return code
    except BrokenPipeError:
        # `runbooks | head`: the reader has what it wanted; the rest goes nowhere, and so does the final flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:
        print(f"flink-runbooks: {'terminated' if isinstance(exc, Terminated) else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the exit code contract covers every failure
        if os.environ.get("FLINK_RUNBOOKS_DEBUG"):
            raise
        print(f"flink-runbooks: internal error: {_one_line(exc)} (set FLINK_RUNBOOKS_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
