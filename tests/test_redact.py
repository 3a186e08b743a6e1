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
