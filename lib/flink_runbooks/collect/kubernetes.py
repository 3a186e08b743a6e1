"""Pull an incident from Kubernetes: ``k8s://NAMESPACE/NAME`` (a FlinkDeployment or FlinkSessionJob, else the pods
whose ``app`` label is NAME or whose name starts with it), read through the official client with read-only calls and
written as an incident bundle the ordinary ingestion reads:

- ``kubernetes/<kind>-<name>.yaml``: the Flink resource (its configuration and status);
- ``kubernetes/pods.json``: the pods (a ``List``, as ``kubectl get pods -o json`` prints it), environment values
  masked;
- ``kubernetes/events.json``: the namespace's events about those objects;
- ``log/<pod>/<container>.log`` and ``<container>-previous.log``: the containers' logs, current and before the last
  restart, the newest bytes when over the cap, redacted as written;
- ``manifest.json``: the source, the kubeconfig context, every request with its status, what was cut and whether the
  pull is partial.

The configuration comes from ``--kubeconfig``, ``KUBECONFIG`` or ``~/.kube/config``, else the pod's service account
when running inside the cluster.
"""
from __future__ import annotations

import datetime
import json
import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from flink_runbooks.collect.rest import PullError, PullReport, write_redacted_tail
from flink_runbooks.parse.redact import redact_text, redact_value

REQUEST_TIMEOUT_S = 10.0
MAX_LOG_BYTES = 64 << 20
_CHUNK = 1 << 20
MAX_PODS = 50
_URL = re.compile(r"^k8s://(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/(?P<name>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)/?$")
_RESOURCES = (("FlinkDeployment", "flinkdeployments"), ("FlinkSessionJob", "flinksessionjobs"))


def is_kubernetes_url(text: str) -> bool:
    return text.strip().lower().startswith("k8s://")


@dataclass
class _Request:
    path: str
    status: int | None = None
    error: str | None = None


@dataclass
class _Session:
    api: Any
    source: str
    timeout: float
    requests: list[_Request] = field(default_factory=list)

    def call(self, path: str, fn: Callable, *args, **kwargs) -> Any:
        """One read-only request, recorded; an API error becomes a one-line :class:`PullError` naming the status."""
        from kubernetes.client.exceptions import ApiException

        record = _Request(path)
        self.requests.append(record)
        try:
            result = fn(*args, _request_timeout=self.timeout, **kwargs)
        except ApiException as exc:
            record.status, record.error = exc.status, f"HTTP {exc.status} {exc.reason}"
            hint = " (forbidden: the kubeconfig's user may not read this)" if exc.status == 403 else ""
            raise PullError(f"GET {path} on {self.source}: HTTP {exc.status} {exc.reason}{hint}") from None
        except Exception as exc:  # urllib3's connection errors, timeouts, TLS failures
            record.error = _reason(exc)
            raise PullError(f"GET {path} on {self.source}: {record.error}") from None
        record.status = 200
        return result


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    if "Connection refused" in text:
        return "connection refused (is the API server of this kubeconfig reachable?)"
    if "timed out" in text.lower():
        return "no answer in time (timed out)"
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _api_client(kubeconfig: str | None, context: str | None):
    """A client of the kubeconfig (``--kubeconfig``, KUBECONFIG, ~/.kube/config) or, in a pod, of its service
    account; no retries, so a server that is gone is said at once."""
    from kubernetes import client, config

    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    path = path.split(os.pathsep)[0]
    try:
        if os.path.exists(path):
            config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
            where = context or _current_context(path)
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig:
            config.load_incluster_config(client_configuration=configuration)
            where = "in-cluster service account"
        else:
            raise PullError(f"no kubeconfig: {path} does not exist (pass --kubeconfig FILE or set KUBECONFIG)")
    except PullError:
        raise
    except Exception as exc:  # config.ConfigException: a broken file, an unknown context
        raise PullError(f"cannot use the kubeconfig {path}: {str(exc).splitlines()[0][:300]}") from None
    configuration.retries = 0
    return client.ApiClient(configuration), where


def _current_context(path: str) -> str | None:
    from kubernetes import config

    try:
        _, active = config.list_kube_config_contexts(config_file=path)
        return active.get("name") if active else None
    except Exception:
        return None


def pull(url: str, out: str | os.PathLike, *, kubeconfig: str | None = None, context: str | None = None,
         timeout: float = REQUEST_TIMEOUT_S, max_log_bytes: int = MAX_LOG_BYTES,
         progress: Callable[[str], None] | None = None) -> PullReport:
    """Pull ``k8s://NAMESPACE/NAME`` into the folder ``out`` (new or empty). Raises :class:`PullError` when nothing
    can be pulled (no kubeconfig, an unknown object, refused); a failure after that keeps what was pulled, marked
    partial."""
    m = _URL.match(url.strip())
    if not m:
        raise PullError(f"{url!r} is not k8s://NAMESPACE/NAME (NAME: a FlinkDeployment, FlinkSessionJob or pod prefix)")
    namespace, name = m["namespace"], m["name"]
    root = pathlib.Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise PullError(f"{root} already exists and is not an empty folder; nothing was written")
    from kubernetes import client

    api_client, where = _api_client(kubeconfig, context)
    source = f"k8s://{namespace}/{name}"
    session = _Session(api_client, source, timeout)
    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    say = progress or (lambda _message: None)
    resource, kind = None, None
    for kind_name, plural in _RESOURCES:
        try:
            resource = session.call(f"/apis/flink.apache.org/v1beta1/namespaces/{namespace}/{plural}/{name}",
                                    custom.get_namespaced_custom_object, "flink.apache.org", "v1beta1", namespace,
                                    plural, name)
            kind = kind_name
            break
        except PullError as exc:
            if "HTTP 404" not in str(exc):
                raise
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    pods = api_client.sanitize_for_serialization(
        session.call(pods_path + f"?labelSelector=app={name}", core.list_namespaced_pod, namespace,
                     label_selector=f"app={name}")).get("items") or []
    if not pods:
        everything = api_client.sanitize_for_serialization(session.call(pods_path, core.list_namespaced_pod, namespace))
        pods = [p for p in everything.get("items") or [] if (p.get("metadata") or {}).get("name", "").startswith(name)]
    if resource is None and not pods:
        raise PullError(f"no FlinkDeployment, FlinkSessionJob or pod named {name} in namespace {namespace} "
                        f"({source}, context {where})")
    report = PullReport(root, source, None)
    root.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    documents = root / "kubernetes"
    documents.mkdir()
    if resource is not None:
        _write_yaml(documents / f"{kind.lower()}-{name}.yaml", _redacted_resource(resource))
        version = re.fullmatch(r"v?(\d+)_(\d+)", str((resource.get("spec") or {}).get("flinkVersion") or ""))
        report.flink_version = f"{version[1]}.{version[2]}" if version else None
    pods = pods[:MAX_PODS]
    _write_json(documents / "pods.json", {"apiVersion": "v1", "kind": "List", "items": [_redacted_pod(p) for p in pods]})
    names = {name} | {(p.get("metadata") or {}).get("name") for p in pods}
    try:
        events = api_client.sanitize_for_serialization(
            session.call(f"/api/v1/namespaces/{namespace}/events", core.list_namespaced_event, namespace))
        items = [e for e in events.get("items") or []
                 if (e.get("involvedObject") or {}).get("name") in names
                 or str((e.get("involvedObject") or {}).get("name") or "").startswith(name)]
        _write_json(documents / "events.json", {"apiVersion": "v1", "kind": "List", "items": items})
        for pod in pods:
            _pull_logs(session, core, namespace, pod, root, max_log_bytes, report, say)
    except PullError as exc:
        if "HTTP 403" in str(exc) and "/events" in str(exc):
            report.warnings.append(f"{exc}; the bundle has no events")
            for pod in pods:
                try:
                    _pull_logs(session, core, namespace, pod, root, max_log_bytes, report, say)
                except PullError as later:
                    report.partial = True
                    report.warnings.append(f"the pull stopped early, the bundle is partial: {later}")
                    break
        else:
            report.partial = True
            report.warnings.append(f"the pull stopped early, the bundle is partial: {exc}")
    manifest = {
        "source": source, "context": where, "pulled_at": started.isoformat(timespec="seconds"),
        "flink_version": report.flink_version, "partial": report.partial, "resource": kind,
        "pods": sorted(n for n in names if n != name or resource is None), "logs": report.logs,
        "warnings": report.warnings,
        "requests": [{"path": r.path, "status": r.status, **({"error": r.error} if r.error else {})}
                     for r in session.requests],
    }
    _write_json(root / "manifest.json", manifest)
    return report


def _pull_logs(session: _Session, core, namespace: str, pod: dict, root: pathlib.Path, cap: int,
               report: PullReport, say) -> None:
    pod_name = (pod.get("metadata") or {}).get("name") or "pod"
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    for container in (pod.get("spec") or {}).get("containers") or []:
        cname = container.get("name") or "container"
        restarted = (statuses.get(cname) or {}).get("restartCount") or (statuses.get(cname) or {}).get("lastState", {}).get("terminated")
        for previous in ((False, True) if restarted else (False,)):
            say(f"logs of {pod_name}/{cname}" + (" (previous)" if previous else ""))
            path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}/log?container={cname}" + ("&previous=true" if previous else "")
            dest = root / "log" / _safe(pod_name) / (_safe(cname) + ("-previous" if previous else "") + ".log")
            try:
                # limit_bytes would keep the oldest bytes: stream what the server sends, keep the newest cap
                response = session.call(path, core.read_namespaced_pod_log, pod_name, namespace, container=cname,
                                        previous=previous, _preload_content=False)
            except PullError as exc:
                if re.search(r"HTTP (400|404)", str(exc)):  # no previous container, a pod not started yet
                    report.warnings.append(f"{exc} (this log is not in the bundle)")
                    continue
                raise
            try:
                _, cut = write_redacted_tail(response.stream(_CHUNK), dest, cap)
            except Exception as exc:  # the server went away while sending the log
                dest.unlink(missing_ok=True)
                raise PullError(f"GET {path} on {session.source}: {_reason(exc)} while reading the log") from None
            finally:
                response.release_conn()
            report.logs.append(str(dest.relative_to(root)))
            if cut:
                report.warnings.append(f"{dest.relative_to(root)}: only the newest {cap >> 20} MiB kept")


def _redacted_pod(pod: dict) -> dict:
    """A pod without what a diagnosis never needs and may hold secrets: environment values (kept by name only)."""
    pod = json.loads(json.dumps(pod))
    for section in ("containers", "initContainers"):
        for container in (pod.get("spec") or {}).get(section) or []:
            for env in container.get("env") or []:
                if "value" in env:
                    env["value"] = "******"
    (pod.get("metadata") or {}).pop("managedFields", None)
    return pod


def _redacted_resource(resource: dict) -> dict:
    resource = json.loads(json.dumps(resource))
    (resource.get("metadata") or {}).pop("managedFields", None)
    conf = (resource.get("spec") or {}).get("flinkConfiguration")
    if isinstance(conf, dict):
        resource["spec"]["flinkConfiguration"] = {k: redact_value(k, v) if isinstance(v, str) else v
                                                  for k, v in conf.items()}
    for section in ("jobManager", "taskManager"):
        template = ((resource.get("spec") or {}).get(section) or {}).get("podTemplate")
        if isinstance(template, dict):
            _redacted_pod(template)
            resource["spec"][section]["podTemplate"] = _redacted_pod(template)
    return resource


def _write_json(path: pathlib.Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact_text(json.dumps(doc, indent=4, sort_keys=True)) + "\n")


def _write_yaml(path: pathlib.Path, doc: Any) -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact_text(yaml.safe_dump(doc, sort_keys=True, default_flow_style=False)))


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)
