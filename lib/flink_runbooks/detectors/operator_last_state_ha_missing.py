"""The Flink Kubernetes operator cannot restore a job from its last state: the HA metadata is gone.

With ``upgradeMode: last-state`` (or the last-state fallback of a savepoint upgrade) the operator redeploys the job
from the latest checkpoint that Flink's Kubernetes HA services recorded in the cluster's ConfigMaps. When those
ConfigMaps are missing, it refuses (``AbstractFlinkService#validateHaMetadataExists``, an ``UpgradeFailureException``
with the reason ``RestoreFailed``, or ``ApplicationReconciler`` with ``UpgradeFailed`` when the JobManager deployment
is gone too). The wording per operator release (``github:apache/flink-kubernetes-operator``, release tags):

- 1.0 – 1.6: ``HA metadata not available to restore from last state. It is possible that the job has finished or
  terminally failed, or the configmaps have been deleted. Manual restore required.``
- 1.7 – 1.12: the same without ``Manual restore required.``
- 1.13 – 1.15: ``HA metadata is not available to restore from last state.It is possible that …`` (the constants
  ``MSG_HA_METADATA_NOT_AVAILABLE`` and ``MSG_JOB_FINISHED_OR_CONFIGMAPS_DELETED`` joined without a space);
- ``JobManager deployment is missing and HA data is not available to make stateful upgrades. …`` (1.0 – 1.12),
  ``… and HA metadata is not available to make stateful upgrades. …Manual restore required.`` (1.13 – 1.15).

The message is the same whatever the cause; the causes differ in what came before it: no Kubernetes HA in the
deployment's ``spec.flinkConfiguration``, the job reaching FAILED or FINISHED (Flink removes its HA data when a job
ends globally), or the operator deleting the HA metadata. Enabling HA now cannot bring the lost pointer back: the
fix is a manual restore from the latest retained checkpoint or savepoint, with HA as a proposal for the next time.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector, signature, version_key
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "operator-last-state-ha-missing"

# AbstractFlinkService#validateHaMetadataExists (operator 1.0 – 1.12 "not", 1.13 – 1.15 "is not")
RESTORE_REFUSED = re.compile(r"HA metadata (?P<is>is )?not available to restore from last state")
# ApplicationReconciler: the JobManager deployment is gone as well
JM_MISSING = re.compile(r"JobManager deployment is missing and HA (?:data|metadata) is not available to make "
                        r"stateful upgrades")
MANUAL = re.compile(r"Manual restore required")
# the resource: the operator log's "[namespace/name]", a FlinkDeployment's status or an event about it
LOG_RESOURCE = re.compile(r"^\[(?P<namespace>[\w.-]+)/(?P<name>[\w.-]+)\]")
DOC_RESOURCE = re.compile(r"FlinkDeployment (?P<name>[\w.-]+) \(namespace (?P<namespace>[\w.-]+)\)")
# JobStatusObserver (as the operator's event and its audit log line) and the FlinkDeployment's status
TERMINAL = re.compile(r"Job status changed (?:from \w+ )?to (?P<state>FAILED|FINISHED)\b"
                      r"|: job .*status (?P<status>FAILED|FINISHED)$")
# AbstractFlinkService#deleteHAData (operator 1.x)
HA_DELETED = re.compile(r"Deleting (?:Kubernetes|Zookeeper) HA metadata")
# EnvUtils#logEnvironmentInfo
OPERATOR_BANNER = re.compile(r"Starting Flink Kubernetes Operator \(Version: (?P<version>\d+\.\d+)(?:\.\d+)?")
# a FlinkDeployment's job status, as its status reads (the job id names the checkpoint directory)
JOB_STATUS = re.compile(r"FlinkDeployment [\w.-]+ \(namespace [\w.-]+\): job (?:\S+ )?(?P<job>[0-9a-f]{32}) status \w+")

NONCE_SINCE = (1, 8)  # JobSpec#savepointRedeployNonce

_RESTORE = "ops:restore the job from its latest checkpoint or savepoint"
_JOB_FAULT = "ops:find why the job ended"
_HA_TYPE = "flink:high-availability.type"
_HA_DIR = "flink:high-availability.storageDir"
_KEEP = "ops:keep the HA ConfigMaps"
_COLLECT = "ops:collect what happened before the refusal"


class OperatorLastStateHaMissing(Detector):
    slug = SLUG
    title = "Operator cannot restore from last state: HA metadata missing"
    category = "coordination"
    meaning = ("The Flink Kubernetes operator was asked to redeploy a job from its last state, but the Kubernetes HA "
               "ConfigMaps that point to the latest checkpoint are missing: it refuses, and the job stays down until "
               "it is restored by hand.")
    versions = ("1.x – 2.x on the Flink Kubernetes operator 1.0 – 1.15 (the wording changed in operator 1.7 and "
                "1.13; savepointRedeployNonce since 1.8)")
    exception_classes = ("org.apache.flink.kubernetes.operator.exception.UpgradeFailureException",
                         "org.apache.flink.kubernetes.operator.exception.RecoveryFailureException",
                         "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException")
    config_keys = ("high-availability.type", "high-availability.storageDir", "execution.checkpointing.dir",
                   "execution.checkpointing.savepoint-dir")
    collect_next = ("the operator's log for the deployment (`kubectl logs deploy/flink-kubernetes-operator | grep "
                    "'<namespace>/<name>'`), `kubectl get flinkdeployment <name> -o yaml` (spec.flinkConfiguration "
                    "and status) and `kubectl get events --field-selector involvedObject.name=<name>`")
    signatures = (
        signature(RESTORE_REFUSED), JM_MISSING.pattern, r"Job status changed (?:from \w+ )?to (?:FAILED|FINISHED)",
        HA_DELETED.pattern, signature(OPERATOR_BANNER), signature(JOB_STATUS),
    )
    wordings = (
        Wording(SLUG, signature(RESTORE_REFUSED), "1.13 – 2.x",
                "AbstractFlinkService#validateHaMetadataExists (flink-kubernetes-operator 1.13 – 1.15)",
                "org.apache.flink.kubernetes.operator.exception.UpgradeFailureException: HA metadata is not available "
                "to restore from last state.It is possible that the job has finished or terminally failed, or the "
                "configmaps have been deleted."),
        Wording(SLUG, signature(RESTORE_REFUSED), "1.13 – 1.20",
                "AbstractFlinkService#validateHaMetadataExists (flink-kubernetes-operator 1.0 – 1.6; 1.7 – 1.12 "
                "without 'Manual restore required.')",
                "org.apache.flink.kubernetes.operator.exception.RecoveryFailureException: HA metadata not available "
                "to restore from last state. It is possible that the job has finished or terminally failed, or the "
                "configmaps have been deleted. Manual restore required."),
        Wording(SLUG, JM_MISSING.pattern, "1.13 – 2.x",
                "ApplicationReconciler (flink-kubernetes-operator 1.13 – 1.15; 'HA data' in 1.0 – 1.12)",
                "org.apache.flink.kubernetes.operator.exception.UpgradeFailureException: JobManager deployment is "
                "missing and HA metadata is not available to make stateful upgrades. It is possible that the job has "
                "finished or terminally failed, or the configmaps have been deleted.Manual restore required."),
    )
    root_causes = (
        RootCause("ha-not-configured",
                  "The deployment runs without Kubernetes HA: no ConfigMap ever recorded a checkpoint, so a "
                  "last-state upgrade has nothing to restore from.",
                  "The refusal, with the FlinkDeployment's spec.flinkConfiguration read and no high-availability.type "
                  "(high-availability before 1.17) in it, or NONE.",
                  patches=(_RESTORE, _HA_TYPE, _HA_DIR)),
        RootCause("job-terminal",
                  "The job reached a globally terminal state (FAILED or FINISHED) before the upgrade: Flink removed "
                  "its HA data with the job, as it does for every job that ends.",
                  "'Job status changed … to FAILED/FINISHED' (the operator's event or log) or the FlinkDeployment's "
                  "job status FAILED/FINISHED before the refusal.",
                  patches=(_RESTORE, _JOB_FAULT)),
        RootCause("ha-metadata-deleted",
                  "The HA ConfigMaps were deleted before the upgrade (the operator logged deleting the HA metadata: "
                  "the resource deleted and recreated, a stateless redeploy, a cleanup).",
                  "The operator's 'Deleting Kubernetes HA metadata' for the deployment before the refusal.",
                  patches=(_RESTORE, _KEEP)),
        RootCause("undetermined",
                  "The operator refused the last-state restore, but what removed the HA metadata is not in the "
                  "evidence.",
                  "The refusal alone.",
                  patches=(_RESTORE, _COLLECT),
                  next_evidence="the operator's log for the deployment before the refusal (job status changes, "
                                "'Deleting Kubernetes HA metadata'), the FlinkDeployment's YAML (spec."
                                "flinkConfiguration and status.jobStatus) and its events."),
    )

    templates = {
        "head": "The operator refused to redeploy {resource} from its last state: the HA metadata (the ConfigMaps "
                "that point to the latest checkpoint) is missing{jm}. ",
        "resource": "{namespace}/{resource_name}",
        "unknown resource": "the deployment",
        "jm": ", and the JobManager deployment is gone too",
        "ha-not-configured": "Kubernetes HA is not configured ({key} {value} in the configuration read): no "
                             "ConfigMap ever held a checkpoint pointer, so a last-state restore cannot work. If the "
                             "operator's defaultConfiguration sets it for every deployment, the JobManager's "
                             "'Loading configuration property: {key}' line says so.",
        "not set": "not set",
        "job-terminal": "The job had reached {state} before: Flink deletes a job's HA data when the job ends "
                        "globally, so there was no last state to take. Enabling HA would not have changed that.",
        "ha-metadata-deleted": "The operator deleted the HA metadata of this deployment before ({when}): a deleted "
                               "and recreated resource or a stateless redeploy starts without it.",
        "undetermined": "What removed the HA metadata (no HA configured, the job ending, the ConfigMaps deleted) "
                        "is not in the evidence.",
        "note refusal": "the operator refused the last-state restore",
        "note terminal": "the job ended before the upgrade",
        "note deleted": "the HA metadata was deleted",
        "restore": "Restore by hand from the latest retained checkpoint (or a newer savepoint): list the job's "
                   "checkpoint directory ({dir}) and take the newest chk-N that holds a _metadata file, or the "
                   "newest savepoint. {how}",
        "how nonce": "Operator {operator}: set spec.job.initialSavepointPath to it and raise "
                     "spec.job.savepointRedeployNonce (1 if unset) with the merge patch below: the operator "
                     "redeploys from that path.",
        "how recreate": "Operator {operator} has no savepointRedeployNonce: delete the FlinkDeployment, check it is "
                        "gone, and apply it again with spec.job.initialSavepointPath set to that path.",
        "restore snippet nonce": "{ls}\nkubectl -n {namespace} patch flinkdeployment {resource_name} --type merge -p "
                                 "'{{\"spec\":{{\"job\":{{\"initialSavepointPath\":\"<the chk-N or savepoint "
                                 "directory>\",\"savepointRedeployNonce\":<the current nonce + 1>}}}}}}'",
        "restore snippet recreate": "{ls}\nkubectl -n {namespace} get flinkdeployment {resource_name} -o yaml > {resource_name}.yaml"
                                    "\nkubectl -n {namespace} delete flinkdeployment {resource_name}\n# set "
                                    "spec.job.initialSavepointPath in {resource_name}.yaml, drop its status, then\nkubectl "
                                    "-n {namespace} apply -f {resource_name}.yaml",
        "list": "# the newest retained checkpoint (use hdfs dfs -ls, aws s3 ls, gsutil ls as the path needs)\n"
                "ls -t {dir}/{job}/ | grep chk-",
        "unknown dir": "execution.checkpointing.dir, state.checkpoints.dir before 1.20",
        "unknown operator": "1.8 or later (on 1.7 and older, delete and recreate the resource with "
                            "initialSavepointPath instead)",
        "ha type": "Run with Kubernetes HA so that the next upgrade or JobManager loss finds the latest checkpoint "
                   "(a proposal for after the restore: it cannot bring this one back).",
        "ha dir": "Kubernetes HA keeps the job graph and checkpoint pointers' data here: a durable path every "
                  "JobManager can reach.",
        "job fault": "Find why the job ended (its FAILED exception in the JobManager log or `kubectl get "
                     "flinkdeployment {resource_name} -o yaml` under status.error) before restoring, or it ends again.",
        "keep": "Keep the HA ConfigMaps (<cluster-id>-cluster-config-map and the job's) while a last-state upgrade "
                "is pending: a suspend or upgrade with upgradeMode stateless deletes them, and so does deleting the "
                "FlinkDeployment or cleaning its namespace; change the spec with last-state or savepoint instead.",
        "collect": "Collect the operator's log for the deployment before the refusal, the FlinkDeployment's YAML "
                   "and its events: they say whether HA was configured, whether the job had ended, and whether the "
                   "HA metadata was deleted.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        refusals = [(ev, m, "restore") for ev, m in incident.find(RESTORE_REFUSED)]
        refusals += [(ev, m, "jm") for ev, m in incident.find(JM_MISSING)]
        if not refusals:
            return []
        refusals.sort(key=lambda r: (r[0].ts or "", r[0].line))
        refusal, match, kind = refusals[0]
        namespace, name = self._resource(incident)
        evidence, notes, add = evidence_trail()
        for other, _, _ in refusals[:3]:
            add(other, self.say("note refusal"))
        resource = (self.say("resource", namespace=namespace, resource_name=name) if name
                    else self.say("unknown resource"))
        summary = self.say("head", resource=resource, jm=self.say("jm") if kind == "jm" else "")
        details: dict = {"refusal": "JobManager deployment missing" if kind == "jm" else "last-state restore"}
        if name:
            details["deployment"] = f"{namespace}/{name}" if namespace else name
        operator = self._operator_version(incident, refusal, match)
        if operator:
            details["operator"] = operator

        before = refusal.ts or "~"
        terminal = next(((ev, m) for ev, m in incident.find(TERMINAL) if (ev.ts or "") <= before), None)
        deleted = next((ev for ev, _ in incident.find(HA_DELETED) if (ev.ts or "") <= before), None)
        config = incident.config
        config_read = config.file_path is not None or len(config) > 0
        ha = config.lookup("high-availability.type")
        confidence = 0.85
        if config_read and (ha is None or ha.value.strip().upper() == "NONE"):
            cause = "ha-not-configured"
            key = version_key(incident, "high-availability.type")
            summary += self.say(cause, key=ha.key if ha else key, value=ha.value if ha else self.say("not set"))
            confidence = 0.75
        elif terminal is not None:
            cause = "job-terminal"
            state = terminal[1]["state"] or terminal[1]["status"]
            add(terminal[0], self.say("note terminal"))
            summary += self.say(cause, state=state)
            details["job state before"] = state
        elif deleted is not None:
            cause = "ha-metadata-deleted"
            add(deleted, self.say("note deleted"))
            summary += self.say(cause, when=deleted.ts or "earlier")
        else:
            cause, confidence = "undetermined", 0.4
            summary += self.say("undetermined")
        patches = [self._restore(incident, operator, namespace or "<namespace>", name or "<name>")]
        if cause == "ha-not-configured":
            patches.append(self.flink_patch(incident, "high-availability.type", "kubernetes", self.say("ha type")))
            if config.lookup("high-availability.storageDir") is None:
                patches.append(self.flink_patch(incident, "high-availability.storageDir",
                                                "<durable path, e.g. s3://<bucket>/flink-ha/" + (name or "<name>")
                                                + ">", self.say("ha dir")))
        elif cause == "job-terminal":
            patches.append(self.ops_patch("find why the job ended", self.say("job fault", resource_name=name or "<name>")))
        elif cause == "ha-metadata-deleted":
            patches.append(self.ops_patch("keep the HA ConfigMaps", self.say("keep"), urgent=False))
        else:
            patches.append(self.ops_patch("collect what happened before the refusal", self.say("collect")))
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _resource(incident: Incident) -> tuple[str | None, str | None]:
        for rx in (LOG_RESOURCE, DOC_RESOURCE):
            for ev in incident.events:
                m = rx.search(ev.message or "")
                if m and (RESTORE_REFUSED.search(ev.text) or JM_MISSING.search(ev.text)):
                    return m["namespace"], m["name"]
        return None, None

    @staticmethod
    def _operator_version(incident: Incident, refusal, match) -> str | None:
        banner = incident.first(OPERATOR_BANNER)
        if banner:
            return banner[1]["version"]
        if match.re is RESTORE_REFUSED and match["is"]:
            return "1.13+"
        if MANUAL.search(refusal.text) and match.re is RESTORE_REFUSED:
            return "1.0 – 1.6"
        return None

    def _restore(self, incident: Incident, operator: str | None, namespace: str, name: str):
        config = incident.config
        checkpoints = config.get("execution.checkpointing.dir")
        job = next((m["job"] for _, m in incident.find(JOB_STATUS)), "<job id>")
        ls = self.say("list", dir=checkpoints or "<checkpoint dir>", job=job)
        nonce = self._has_nonce(operator)
        how = (self.say("how nonce", operator=operator or self.say("unknown operator")) if nonce
               else self.say("how recreate", operator=operator or self.say("unknown operator")))
        snippet = (self.say("restore snippet nonce", ls=ls, namespace=namespace, resource_name=name) if nonce
                   else self.say("restore snippet recreate", ls=ls, namespace=namespace, resource_name=name))
        return self.ops_patch("restore the job from its latest checkpoint or savepoint",
                              self.say("restore", dir=checkpoints or self.say("unknown dir"), how=how),
                              snippet=snippet)

    @staticmethod
    def _has_nonce(operator: str | None) -> bool:
        """Whether the operator release has spec.job.savepointRedeployNonce (1.8+); unknown: the newer releases."""
        if not operator or operator.endswith("+"):
            return True
        if "–" in operator:
            return False
        major, minor = (int(p) for p in operator.split(".")[:2])
        return (major, minor) >= NONCE_SINCE
