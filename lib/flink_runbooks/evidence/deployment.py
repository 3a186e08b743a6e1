"""Where the incident's Flink runs: the deployment read from entrypoint banners, resource ids and the config."""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.model import Incident

_YARN = re.compile(r"Yarn(?:TaskExecutorRunner|SessionClusterEntrypoint|JobClusterEntrypoint|"
                   r"ApplicationClusterEntryPoint|ResourceManager)|container_(?:e\d+_)?\d{10,}_\d+_\d+_\d+")
_NATIVE_K8S = re.compile(r"Kubernetes(?:TaskExecutorRunner|SessionClusterEntrypoint|ApplicationClusterEntrypoint)|"
                         r"KubernetesResourceManagerDriver")
_K8S_POD = re.compile(r"Kubernetes\w*(?:Entrypoint|EntryPoint|Runner)|-taskmanager-\d+-\d+")
_STANDALONE = re.compile(r"Standalone\w*(?:Entrypoint|EntryPoint)|Starting TaskManager")


@dataclass(frozen=True)
class Deployment:
    platform: str | None  # kubernetes | yarn | standalone; None when nothing tells
    native: bool  # Flink's own resource manager starts the TaskManagers (YARN, native Kubernetes)

    @property
    def containerised(self) -> bool:
        """TaskManagers run in containers with a memory limit that the platform enforces."""
        return self.platform in ("kubernetes", "yarn")

    @property
    def memory_target(self) -> str:
        """How the legacy ``taskmanager.heap.size`` is read: ``yarn`` and ``kubernetes`` (native) size the whole
        container, ``standalone`` (scripts, docker, standalone Kubernetes) the Flink memory."""
        return self.platform if self.native else "standalone"


def deployment(incident: Incident) -> Deployment:
    for ev in incident.events:
        text = f"{ev.logger or ''} {ev.message}"
        if _YARN.search(text):
            return Deployment("yarn", True)
        if _NATIVE_K8S.search(text):
            return Deployment("kubernetes", True)
    target = incident.config.get("execution.target") or ""
    if incident.config.get("kubernetes.cluster-id") and target.startswith("kubernetes"):
        return Deployment("kubernetes", True)
    if target.startswith("yarn"):
        return Deployment("yarn", True)
    banners = "\n".join(ev.message for ev in incident.events if "Starting " in ev.message or "ResourceID" in ev.message)
    if _K8S_POD.search(banners):
        return Deployment("kubernetes", False)
    if _STANDALONE.search(banners):
        return Deployment("standalone", False)
    return Deployment(None, False)
