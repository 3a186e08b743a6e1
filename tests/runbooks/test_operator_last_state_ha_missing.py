"""Detector operator-last-state-ha-missing: the operator's refusal to restore from last state, told apart by what came
before it (no Kubernetes HA, the job ending, the HA metadata deleted); the manual restore in the form the operator
release has; an upgrade that only waited for the HA metadata is not this runbook's."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.render.patches import render_flinkdeployment_patch

SLUG = "operator-last-state-ha-missing"
REFUSED_1_13 = ("2026-11-28 09:22:20,533 o.a.f.k.o.l.AuditUtils         [INFO ][risk/fraud-scoring] >>> "
                "Event[JobManagerDeployment] | Warning | RESTOREFAILED   | HA metadata is not available to restore "
                "from last state.It is possible that the job has finished or terminally failed, or the configmaps "
                "have been deleted.")


def _detect(text: str, config: dict[str, str] | None = None, version: str | None = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version, file="operator.log"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def test_no_kubernetes_ha_gets_a_manual_restore_and_ha_proposed(spark):
    primary = _diagnose("no-ha-last-state-operator-1.13", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "ha-not-configured")
    assert primary.details["deployment"] == "risk/fraud-scoring"
    assert "high-availability.type not set in the configuration read" in primary.summary
    restore = primary.patches[0]
    assert restore.target == "ops" and restore.urgent
    assert "ls -t s3://risk-flink/checkpoints/fraud-scoring/7e3c1a9b5d2f4e6a8c0b1d3f5a7e9c2b/" in restore.snippet
    assert "kubectl -n risk patch flinkdeployment fraud-scoring --type merge" in restore.snippet
    assert "savepointRedeployNonce" in restore.snippet
    flink = {p.key: p.proposed for p in primary.patches if p.target == "flink"}
    assert flink["high-availability.type"] == "kubernetes" and "high-availability.storageDir" in flink
    merge = render_flinkdeployment_patch(primary.patches, "1.20.3", name="fraud-scoring")
    assert "high-availability.type: kubernetes" in merge


def test_a_job_that_failed_before_the_upgrade_is_named_not_the_ha_setup(spark):
    primary = _diagnose("job-failed-then-upgrade-operator-1.10", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "job-terminal")
    assert primary.details["job state before"] == "FAILED"
    assert any("Job status changed from RUNNING to FAILED" in e.text for e in primary.evidence)
    assert not any(p.target == "flink" for p in primary.patches)  # HA was configured: nothing to switch on
    assert any(p.key == "find why the job ended" for p in primary.patches)


def test_ha_metadata_deleted_on_operator_1_6_is_restored_by_recreating_the_resource(spark):
    primary = _diagnose("stateless-suspend-then-last-state-operator-1.6", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "ha-metadata-deleted")
    assert primary.details["operator"] == "1.0 – 1.6"
    assert any("Deleting Kubernetes HA metadata" in e.text for e in primary.evidence)
    restore = primary.patches[0]
    assert "kubectl -n payments delete flinkdeployment ledger-sync" in restore.snippet
    assert "savepointRedeployNonce" not in restore.snippet
    keep = next(p for p in primary.patches if p.key == "keep the HA ConfigMaps")
    assert not keep.urgent and "stateless" in keep.reason


def test_a_pasted_event_alone_is_undetermined_and_says_what_to_collect(spark):
    primary = _diagnose("excerpt-describe-events", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert primary.confidence < 0.5 and primary.details["operator"] == "1.13+"
    assert "Deleting Kubernetes HA metadata" in primary.summary
    assert [p.key for p in primary.patches] == ["restore the job from its latest checkpoint or savepoint",
                                                "collect what happened before the refusal"]


def test_an_upgrade_that_waited_for_the_ha_metadata_is_not_this_runbook(spark):
    d = _diagnose("near-miss-waiting-for-upgradeable-state", spark)
    assert not any(f.runbook == SLUG for f in d.findings)


def test_the_operator_banner_decides_the_restore_form_and_ha_is_spelled_for_the_flink_release():
    banner = ("2026-11-28 09:00:00,006 o.a.f.k.o.FlinkOperator        [INFO ]  Starting Flink Kubernetes Operator "
              "(Version: 1.7.0, Flink Version: 1.18.1, Rev:1a2b3c4, Date:2023-11-20T10:00:00+01:00)")
    [f] = _detect(banner + "\n" + REFUSED_1_13, {"taskmanager.numberOfTaskSlots": "2"}, "1.16.3")
    assert f.root_cause.slug == "ha-not-configured" and f.details["operator"] == "1.7"
    assert "delete flinkdeployment fraud-scoring" in f.patches[0].snippet
    ha = next(p for p in f.patches if p.target == "flink" and p.proposed == "kubernetes")
    assert ha.key == "high-availability"
    # HA set to NONE is not configured either; a set HA type is not blamed
    [f] = _detect(REFUSED_1_13, {"high-availability": "NONE"}, "1.16.3")
    assert f.root_cause.slug == "ha-not-configured"
    [f] = _detect(REFUSED_1_13, {"high-availability.type": "kubernetes"})
    assert f.root_cause.slug == "undetermined"


def test_every_wording_is_recognised():
    for wording in get_detector(SLUG).wordings:
        [f] = _detect(wording.example)
        assert f.runbook == SLUG, wording.example
