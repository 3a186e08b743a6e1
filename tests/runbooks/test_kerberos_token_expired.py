"""Detector kerberos-token-expired: a ticket-cache login that nothing renews, delegation tokens nobody renews, a
Kafka login context left out, a keytab without the principal's key; undetermined without Flink's login lines; a
broker principal unknown to the KDC is not this runbook's."""
from __future__ import annotations

from corpus import example, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "kerberos-token-expired"
NO_TGT = ("Caused by: org.ietf.jgss.GSSException: No valid credentials provided (Mechanism level: Failed to find any "
          "Kerberos tgt)")
EXPIRED = ("org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.security.token.SecretManager$InvalidToken): "
           "Token has expired, current time: 2026-11-21 10:45:19,866+0000 expected renewal time: "
           "2026-11-15 10:40:05,301+0000")


def _detect(text: str, config: dict[str, str] | None = None, version: str | None = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version, file="taskmanager.log"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def test_a_ticket_cache_login_is_named_and_a_keytab_proposed(spark):
    primary = _diagnose("ticket-cache-hdfs-sink-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "ticket-cache-only")
    assert primary.details["login"] == "ticket cache"
    assert "ticket cache (as its log says)" in primary.summary
    assert any("Attempting to load user's ticket cache" in e.text for e in primary.evidence)
    assert any("Failed to find any Kerberos tgt" in e.text for e in primary.evidence)
    flink = {p.key: p.proposed for p in primary.patches if p.target == "flink"}
    assert set(flink) == {"security.kerberos.login.keytab", "security.kerberos.login.principal"}
    assert any(p.target == "ops" and "restart" in p.key for p in primary.patches)


def test_tokens_without_a_renewal_date_are_not_fixed_by_the_switch(spark):
    primary = _diagnose("token-not-renewed-keytab-1.18", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "delegation-token-not-renewed")
    assert "expected renewal 2026-11-15 10:40:05,301+0000" in primary.summary
    assert any("Tokens update task not started" in e.text for e in primary.evidence)
    assert primary.details["login"] == "keytab"
    # the framework already runs: switching it on would hide nothing and fix nothing
    assert not any(p.target == "flink" for p in primary.patches)
    assert any(p.key == "find why no token has a renewal date" for p in primary.patches)


def test_the_token_switch_off_is_switched_on_in_the_release_spelling():
    text = "\n".join([
        line("10:00:00,000", "Hadoop user set to flink@EXAMPLE.COM (auth:KERBEROS)",
             logger="org.apache.flink.runtime.security.modules.HadoopModule"),
        line("10:00:01,000", "Job ingest (2b7e9d41c0a3f5e6d8b1a2c4e6f80913) switched from state CREATED to RUNNING."),
        EXPIRED])
    config = {"security.kerberos.login.keytab": "/etc/security/keytabs/flink.keytab",
              "security.kerberos.login.principal": "flink@EXAMPLE.COM"}
    for version, key in (("1.16.3", "security.kerberos.fetch.delegation-token"),
                         ("1.18.1", "security.delegation.tokens.enabled")):
        [f] = _detect(text, {**config, key: "false"}, version)
        assert f.root_cause.slug == "delegation-token-not-renewed"
        switch = next(p for p in f.patches if p.target == "flink")
        # the value is hidden like Flink hides every key naming a token; the reason spells it out
        assert (switch.key, switch.proposed) == (key, "true") and f"{key} to true" in switch.reason
    # the switch not set: its default (on) is not blamed
    [f] = _detect(text, config, "1.18.1")
    assert f.root_cause.slug == "undetermined"


def test_a_kafka_context_left_out_of_the_login_contexts(spark):
    primary = _diagnose("kafka-client-context-missing-1.17", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "login-context-missing")
    assert "does not list 'KafkaClient'" in primary.summary
    contexts = next(p for p in primary.patches if p.target == "flink")
    assert (contexts.key, contexts.current, contexts.proposed) == (
        "security.kerberos.login.contexts", "Client", "Client,KafkaClient")


def test_a_keytab_without_the_principal_asks_for_klist_and_never_shows_the_keytab():
    text = "\n".join([
        line("10:00:00,000", "Attempting to login to KDC using principal: flink/jm@EXAMPLE.COM keytab: "
             "/etc/security/keytabs/flink.keytab",
             logger="org.apache.flink.runtime.security.token.hadoop.KerberosLoginProvider"),
        line("10:00:00,200", "Could not start cluster entrypoint StandaloneSessionClusterEntrypoint.", level="ERROR",
             logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint"),
        "javax.security.auth.login.LoginException: Unable to obtain password from user",
    ])
    [f] = _detect(text, {"security.kerberos.login.keytab": "/etc/security/keytabs/flink.keytab",
                         "security.kerberos.login.principal": "flink/jm@EXAMPLE.COM"})
    assert f.root_cause.slug == "keytab-principal-mismatch"
    assert "flink/jm@EXAMPLE.COM" in f.summary
    klist = next(p for p in f.patches if p.target == "ops")
    assert "klist -kt" in klist.snippet and "/etc/security" not in klist.snippet
    assert not any("/etc/security" in (p.reason or "") for p in f.patches)


def test_an_excerpt_without_the_login_is_undetermined_and_says_what_to_collect(spark):
    primary = _diagnose("excerpt-hdfs-token-expired", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert primary.confidence < 0.5
    assert "Attempting to load user's ticket cache" in primary.summary
    assert [p.key for p in primary.patches] == ["collect how Flink logged in"]


def test_a_ticket_missing_with_a_keytab_login_is_not_blamed_on_the_ticket_cache():
    text = "\n".join([
        line("10:00:00,000", "Attempting to login to KDC using principal: flink@EXAMPLE.COM keytab: /k/flink.keytab",
             logger="org.apache.flink.runtime.security.token.hadoop.KerberosLoginProvider"),
        line("12:00:00,000", "Failed to update tokens, will try again in 3600000 ms", level="WARN",
             logger="org.apache.flink.runtime.security.token.DefaultDelegationTokenManager"),
        NO_TGT])
    [f] = _detect(text)
    assert f.root_cause.slug == "undetermined"
    assert "Flink logged in from a keytab" in f.summary


def test_a_broker_principal_unknown_to_the_kdc_is_not_this_runbook(spark):
    d = _diagnose("near-miss-kafka-server-not-found", spark)
    assert not any(f.runbook == SLUG for f in d.findings)
    assert d.primary.runbook == "kafka-client-timeout"


def test_every_wording_is_recognised():
    for wording in get_detector(SLUG).wordings:
        [f] = _detect(wording.example)
        assert f.runbook == SLUG, wording.example


def test_the_ticket_cache_is_read_from_the_configuration_only_where_it_is_set():
    [f] = _detect(NO_TGT, {"security.kerberos.login.use-ticket-cache": "true"})
    assert f.root_cause.slug == "ticket-cache-only"
    assert "use-ticket-cache true and no security.kerberos.login.keytab" in f.summary
    # a configuration silent on Kerberos (a Kafka client may log in with its own JAAS keytab) names nothing
    [f] = _detect(NO_TGT, {"parallelism.default": "4"})
    assert f.root_cause.slug == "undetermined"


def test_a_zookeeper_context_left_out_is_added_to_the_listed_ones():
    text = ("javax.security.auth.login.LoginException: Client cannot SASL-authenticate because the specified JAAS "
            "configuration section 'Client' could not be found.")
    [f] = _detect(text, {"security.kerberos.login.keytab": "/etc/security/keytabs/flink.keytab",
                         "security.kerberos.login.principal": "flink@EXAMPLE.COM",
                         "security.kerberos.login.contexts": "KafkaClient"})
    assert f.root_cause.slug == "login-context-missing"
    contexts = next(p for p in f.patches if p.target == "flink")
    assert contexts.proposed == "KafkaClient,Client" and "ZooKeeper" in contexts.reason
