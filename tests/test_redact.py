"""Secrets never leave the tool: keys, free text, config files, CLI output."""
from __future__ import annotations

import json

import pytest

from flink_runbooks.apps import cli
from flink_runbooks.parse.redact import REDACTED, is_sensitive_key, redact_text, redact_value

SECRETS = ["hunter2", "s3cr3tValue", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG", "jaasPass!", "tok-abcdef123456"]


@pytest.mark.parametrize("key", ["s3.secret-key", "fs.s3a.secret.key", "s3.access-key", "sasl.jaas.config",
                                 "ssl.truststore.password", "security.ssl.keystore-password",
                                 "fs.azure.account.key.acct.blob.core.windows.net", "metrics.reporter.dghttp.apikey",
                                 "kubernetes.token"])
def test_sensitive_keys(key):
    assert is_sensitive_key(key)
    assert redact_value(key, "x") == REDACTED


@pytest.mark.parametrize("key", ["execution.checkpointing.interval", "state.backend.type", "taskmanager.memory.process.size"])
def test_ordinary_keys_are_kept(key):
    assert not is_sensitive_key(key) and redact_value(key, "5s") == "5s"


@pytest.mark.parametrize("text,kept", [
    ("\tsasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"app\" password=\"jaasPass!\";", "sasl.jaas.config"),
    ("\tssl.truststore.password = hunter2", "ssl.truststore.password"),
    ("Loading configuration property: s3.secret-key, s3cr3tValue", "s3.secret-key"),
    ("-D fs.s3a.access.key=AKIAIOSFODNN7EXAMPLE -D fs.s3a.secret.key=wJalrXUtnFEMI/K7MDENG", "fs.s3a.secret.key"),
    ("Authorization: Bearer tok-abcdef123456", "Authorization"),
    ("s3.access-key: AKIAIOSFODNN7EXAMPLE", "s3.access-key"),
])
def test_free_text_is_scrubbed(text, kept):
    out = redact_text(text)
    assert kept in out
    assert not any(s in out for s in SECRETS), out


def test_text_without_secrets_is_unchanged():
    line = "2024-01-01 00:00:00,000 INFO a.B [] - Completed checkpoint 3 for job x (10 bytes, checkpointDuration=5 ms)"
    assert redact_text(line) == line


def test_cli_json_never_contains_secret_values(spark, capsys, tmp_path):
    (tmp_path / "flink-conf.yaml").write_text(
        "s3.secret-key: s3cr3tValue\ns3.access-key: AKIAIOSFODNN7EXAMPLE\nexecution.checkpointing.interval: 10s\n")
    (tmp_path / "taskmanager.log").write_text(
        "2024-01-01 00:00:00,000 INFO  org.apache.kafka.clients.consumer.ConsumerConfig [] - ConsumerConfig values: \n"
        "\tsasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"app\" password=\"jaasPass!\";\n"
        "\tssl.truststore.password = hunter2\n"
        "2024-01-01 00:00:01,000 ERROR org.apache.flink.runtime.taskmanager.Task [] - failed "
        "Authorization: Bearer tok-abcdef123456\n"
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n")
    code = cli.main(["diagnose", str(tmp_path), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 1 and json.loads(out)["findings"]
    assert not any(s in out for s in SECRETS)
    cli.main(["diagnose", str(tmp_path)])
    text = capsys.readouterr().out
    assert not any(s in text for s in SECRETS)


# --- property: secret forms at any position, through every output format ----------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

FORMS = [
    lambda s: f"password={s}",
    lambda s: f"lookup failed for jdbc:mysql://db/app?user=app&password={s}",
    lambda s: f"jdbc:sqlserver://db;user=app;password={s};encrypt=true",
    lambda s: f"s3://AKIAIOSFODNN7EXAMPLE:{s}@bucket/x",
    lambda s: f"Authorization: Bearer {s}",
    lambda s: f"Authorization: Basic {s}",
    lambda s: f'{{"user": "app", "password": "{s}"}}',
    lambda s: f"-Djavax.net.ssl.keyStorePassword={s} -Xmx1g",
    lambda s: f"Loading configuration property: security.ssl.keystore-password, {s}",
    lambda s: f"s3.secret-key: {s}",
    lambda s: f'sasl.jaas.config = x.PlainLoginModule required username="u" password="{s}";',
    lambda s: f"metrics.reporter.dghttp.apikey={s}",
]
secrets = st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=8, max_size=16).map(lambda s: "Zq" + s)
# Surroundings: anything printable, quotes, backslashes and control characters included.
surround = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
AWS_IDS = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s)


def _diagnosis_with(text: str):
    """A diagnosis whose event, evidence, summary and details carry ``text``, built through ingestion's entry."""
    from flink_runbooks.collect.ingest import _to_event
    from flink_runbooks.diagnose import Diagnosis
    from flink_runbooks.model import Evidence, Finding, Incident, RootCause
    from flink_runbooks.parse.config import ConfigSource, EffectiveConfig

    event = _to_event({"file": "tm.log", "line_index": 0, "ts": None, "level": "ERROR", "logger": "x", "thread": text,
                       "message": text, "chain": [{"cls": "java.io.IOException", "message": text, "kind": "top"}],
                       "frames": [], "body": [text], "truncated": False}, 0)
    config = EffectiveConfig()
    config.add("table.catalog.url", text, ConfigSource("log", "jm.log", 1))
    finding = Finding("checkpoint-expired", "t", RootCause("x", text), text, 0.5,
                      evidence=[Evidence.of(event, note=text)], primary=True, details={"line": text})
    return Diagnosis(Incident(events=[event], config=config), [finding])


def _check(text: str, secret: str) -> None:
    from flink_runbooks.render.report import to_json, to_text

    assert secret not in (redact_text(text) or "")
    diagnosis = _diagnosis_with(text)
    rendered = to_json(diagnosis)
    json.loads(rendered)  # always parses
    assert secret not in rendered
    assert secret not in to_text(diagnosis)
    assert secret not in json.dumps(diagnosis.incident.config.to_dict(redacted=False))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(form=st.sampled_from(range(len(FORMS))), secret=secrets, before=surround, after=surround)
def test_secret_forms_anywhere_never_survive_and_json_parses(form, secret, before, after):
    from hypothesis import assume

    assume(secret not in before + after)
    # A value runs to the next separator: text glued to its end belongs to the secret and goes with it.
    _check(before + " " + FORMS[form](secret) + " " + after, secret)
    _check(before + FORMS[form](secret), secret)  # a secret ending the string (and the JSON string)


@settings(max_examples=100, deadline=None)
@given(key=AWS_IDS, before=surround, after=surround)
def test_access_key_ids_anywhere(key, before, after):
    from hypothesis import assume

    assume(not before[-1:].isalnum() or before[-1:].islower())
    _check(before + key + (" " if after[:1].isalnum() else "") + after, key)


def test_file_names_in_warnings_stay_readable(spark, capsys, tmp_path):
    """Redaction applies to values: a file named passwd keeps its name and its warning."""
    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "jobmanager.log").write_text(
        "2024-01-01 00:00:01,000 ERROR org.apache.flink.runtime.taskmanager.Task [] - failed\n"
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n")
    cli.main(["diagnose", str(tmp_path / "passwd"), str(tmp_path / "jobmanager.log"), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert any(w.startswith(f"{tmp_path / 'passwd'}: unknown log layout") for w in doc["warnings"]), doc["warnings"]
    cli.main(["diagnose", str(tmp_path / "passwd"), str(tmp_path / "jobmanager.log")])
    assert f"{tmp_path / 'passwd'}: unknown log layout" in capsys.readouterr().out


def test_logged_key_value_form_is_masked_but_prose_before_a_comma_is_not():
    assert redact_text("Loading configuration property: s3.secret-key, abc123") == \
        f"Loading configuration property: s3.secret-key, {REDACTED}"
    assert redact_text("the brokers refused credentials, a missing ACL") == "the brokers refused credentials, a missing ACL"
