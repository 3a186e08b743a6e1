"""Secrets never leave the tool: keys, free text, config files, CLI output."""
from __future__ import annotations

import json

import pytest

from flink_runbooks.apps import cli
from flink_runbooks.parse.redact import REDACTED, is_sensitive_key, redact_lines, redact_text, redact_value

SECRETS = ["hunter2", "s3cr3tValue", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG", "jaasPass!", "tok-abcdef123456"]


@pytest.mark.parametrize("key", ["security.delegation.token.provider.hadoopfs.secret", "s3.secret-key", "fs.s3a.secret.key", "s3.access-key", "sasl.jaas.config",
                                 "ssl.truststore.password", "security.ssl.keystore-password",
                                 "fs.azure.account.key.acct.blob.core.windows.net", "metrics.reporter.dghttp.apikey",
                                 "kubernetes.token", "basic.auth.user.info", "schema.registry.basic.auth.user.info",
                                 "properties.basic.auth.user.info", "catalog.db.pwd", "rest.session.cookie",
                                 "zookeeper.DigestAuthenticationProvider.superDigest"])
def test_sensitive_keys(key):
    assert is_sensitive_key(key)
    assert redact_value(key, "x") == REDACTED


@pytest.mark.parametrize("key", ["execution.checkpointing.interval", "state.backend.type", "taskmanager.memory.process.size",
                                 # where credentials come from, not a credential: kept for the reader
                                 "basic.auth.credentials.source", "fs.s3a.aws.credentials.provider",
                                 # a switch and the names of Kubernetes Secrets: a proposal must stay readable
                                 "security.delegation.tokens.enabled", "security.kerberos.fetch.delegation-token",
                                 "kubernetes.container.image.pull-secrets"])
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

from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402

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
    # Kafka / Schema Registry user info: a ConsumerConfig dump line, a config key, the logged "key, value" form
    lambda s: f"\tbasic.auth.user.info = app:{s}",
    lambda s: f"schema.registry.basic.auth.user.info: app:{s}",
    lambda s: f"Loading configuration property: properties.basic.auth.user.info, app:{s}",
    lambda s: f"jdbc:oracle:thin:app/{s}@db.example.com:1521/ORCL",
    lambda s: f"jdbc:oracle:thin:app/{s}@//db.example.com:1521/orders",
    lambda s: f"https://acct.blob.core.windows.net/ckpt/x?sv=2022-11-02&ss=b&sp=rwl&se=2027-01-01&sig={s}%3D&spr=https",
    lambda s: f"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={s}",
    lambda s: f"https://b.s3.amazonaws.com/k?X-Amz-Credential={s}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=1",
    lambda s: f"https://b.s3.amazonaws.com/k?X-Amz-Security-Token={s}&X-Amz-Date=1",
    lambda s: f"-----BEGIN RSA PRIVATE KEY-----\\nMIIEow{s}\\n-----END RSA PRIVATE KEY-----",  # one line, \n escapes
    lambda s: f"-----BEGIN PRIVATE KEY-----\nMIIEvQ{s}\nQx7Yz0Ab==\n-----END PRIVATE KEY-----",  # across lines
    lambda s: f"-----BEGIN ENCRYPTED PRIVATE KEY----- MIIFH{s}",  # cut before its end marker
    lambda s: f"Driver={{ODBC Driver 18}};Server=db;Uid=app;Pwd={s};Encrypt=yes",
    lambda s: f"Cookie: JSESSIONID={s}; theme=dark",
    lambda s: f"Cookie: theme=dark; session={s}",
    lambda s: f"Set-Cookie: session={s}; Path=/; HttpOnly",
    lambda s: f"addauth digest bob:{s}",
    lambda s: f"setAcl /flink digest:bob:{s}:cdrwa",
    lambda s: f'zk.addAuthInfo("digest", "bob:{s}".getBytes())',
    lambda s: f'org.apache.zookeeper.server.auth.DigestLoginModule required user_super="{s}" user_bob="b";',
    lambda s: f'    user_super="{s}"',
    lambda s: f"-Dzookeeper.DigestAuthenticationProvider.superDigest=super:{s}",
    lambda s: f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
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
# a key glued in front of the header ("PWDAuthorization") starred the scheme out and left the credential
@example(form=4, secret="Zq22222222", before="PWD", after="")
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
    # the text answer wraps its lines at words: the warning is read across them
    assert f"{tmp_path / 'passwd'}: unknown log layout" in " ".join(capsys.readouterr().out.split())


def test_logged_key_value_form_is_masked_but_prose_before_a_comma_is_not():
    assert redact_text("Loading configuration property: s3.secret-key, abc123") == \
        f"Loading configuration property: s3.secret-key, {REDACTED}"
    assert redact_text("the brokers refused credentials, a missing ACL") == "the brokers refused credentials, a missing ACL"



# --- each credential form in the context it is met in -------------------------------------------------------------

KEY_LINE_1 = "MIIEowIBAAKCAQEAx4UbaDzY5Q1k9n0a8b7c6d5e4f3g2h1iJ0kLmNoPqRsTuVwX"
KEY_LINE_2 = "yZ1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoPqRsTuVw+/Z"
KEY_LAST = "Qx7Yz0Ab=="
LOG = "2026-11-22 02:53:49,000 WARN  org.apache.flink.runtime.rest.RestClient [] - "


@pytest.mark.parametrize("text,secrets_in_text,kept", [
    # a Kafka ConsumerConfig dump line, and its harmless neighbour
    ("\tbasic.auth.user.info = app:Pl4ntUserInfo", ["app:Pl4ntUserInfo"], "\tbasic.auth.user.info = "),
    ("\tbasic.auth.credentials.source = USER_INFO", [], "\tbasic.auth.credentials.source = USER_INFO"),
    # config keys, as the file and as Flink logs them
    ("schema.registry.basic.auth.user.info: app:Pl4ntUserInfo", ["Pl4ntUserInfo"], "schema.registry.basic.auth.user.info: "),
    ("Loading configuration property: properties.basic.auth.user.info, app:Pl4ntUserInfo", ["Pl4ntUserInfo"],
     "Loading configuration property: properties.basic.auth.user.info, "),
    ("-Dzookeeper.DigestAuthenticationProvider.superDigest=super:Pl4ntDigest= -Xmx1g", ["Pl4ntDigest"], " -Xmx1g"),
    # log lines
    ("java.sql.SQLException: ORA-01017: invalid username/password; logon denied "
     "(jdbc:oracle:thin:app/Pl4ntOra@db.example.com:1521/ORCL)", ["Pl4ntOra"],
     "ORA-01017: invalid username/password; logon denied (jdbc:oracle:thin:app/"),
    ("connect to jdbc:oracle:thin:app/Pl4ntOra@//db:1521/orders failed", ["Pl4ntOra"], "@//db:1521/orders failed"),
    (LOG + "GET https://acct.blob.core.windows.net/ckpt/chk-3?sv=2022-11-02&ss=b&srt=co&sp=rwl"
     "&se=2027-01-01T00:00:00Z&spr=https&sig=Pl4ntSas%2Fx%3D returned 403", ["Pl4ntSas"],
     "?sv=2022-11-02&ss=b&srt=co&sp=rwl&se=2027-01-01T00:00:00Z&spr=https&sig=" + REDACTED + " returned 403"),
    (LOG + "presigned https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAPL4NTCRED0001%2F"
     "20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host"
     "&X-Amz-Security-Token=Pl4ntSts&X-Amz-Signature=4f3aPl4ntSig expired",
     ["Pl4ntSig", "Pl4ntSts", "ASIAPL4NTCRED0001"], "&X-Amz-Expires=900&X-Amz-SignedHeaders=host&"),
    (LOG + "bad key -----BEGIN RSA PRIVATE KEY-----\\n" + KEY_LINE_1 + "\\n" + KEY_LINE_2 + "\\n" + KEY_LAST
     + "\\n-----END RSA PRIVATE KEY-----\\n in ssl.key", [KEY_LINE_1, KEY_LINE_2, KEY_LAST],
     f"bad key -----BEGIN RSA PRIVATE KEY-----\\n{REDACTED}\\n-----END RSA PRIVATE KEY-----\\n in ssl.key"),
    ("-----BEGIN EC PRIVATE KEY-----\n" + KEY_LINE_1 + "\n" + KEY_LAST + "\n-----END EC PRIVATE KEY-----",
     [KEY_LINE_1, KEY_LAST], f"-----BEGIN EC PRIVATE KEY-----\n{REDACTED}\n-----END EC PRIVATE KEY-----"),
    # a key whose marker lines the log reader did not keep: its lines joined into one
    (KEY_LINE_1 + " " + KEY_LINE_2 + " " + KEY_LAST, [KEY_LINE_1, KEY_LINE_2, KEY_LAST], REDACTED),
    ("[Microsoft][ODBC Driver 18] login failed: Driver={ODBC Driver 18};Server=db;Uid=app;Pwd=Pl4ntPwd;Encrypt=yes",
     ["Pl4ntPwd"], "login failed: Driver={ODBC Driver 18};Server=db;Uid=app;Pwd=" + REDACTED + ";Encrypt=yes"),
    (LOG + "request headers: Cookie: JSESSIONID=Pl4ntJs; csrftoken=Pl4ntCsrf; the call failed", ["Pl4ntJs", "Pl4ntCsrf"],
     f"request headers: Cookie: {REDACTED}; the call failed"),
    (LOG + "Set-Cookie: SESSION=Pl4ntSet; Path=/; HttpOnly", ["Pl4ntSet"], "Set-Cookie: "),
    ("[zk: localhost:2181(CONNECTED) 0] addauth digest flink:Pl4ntZk", ["Pl4ntZk"], "addauth digest flink:" + REDACTED),
    ("setAcl /flink digest:flink:Pl4ntHash=:cdrwa", ["Pl4ntHash"], "setAcl /flink digest:flink:"),
    ('zk.addAuthInfo("digest", "flink:Pl4ntZk".getBytes())', ["Pl4ntZk"], f'"flink:{REDACTED}".getBytes())'),
    ('Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_super="Pl4ntSuper" '
     'user_flink="Pl4ntFlink"; };', ["Pl4ntSuper", "Pl4ntFlink"], f'required user_super="{REDACTED}" '),
    ('    user_super="Pl4ntSuper"', ["Pl4ntSuper"], f'    user_super="{REDACTED}"'),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Pl4ntAzure==;EndpointSuffix=core.windows.net",
     ["Pl4ntAzure"], ";EndpointSuffix=core.windows.net"),
    # a cloud secret key holds '/', a password may hold '@': the user-info runs to the address's last '@'
    ("s3a://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPl4ntUrlKEY@bucket/p", ["bPl4ntUrlKEY", "wJalrXUtnFEMI"],
     f"s3a://{REDACTED}@bucket/p"),
    ("s3://app:p@Pl4ntAt@bucket/ck", ["Pl4ntAt"], f"s3://{REDACTED}@bucket/ck"),
    # JSON inside a JSON string (a logged request body)
    (LOG + 'body: {\\"user\\":\\"app\\",\\"password\\":\\"Pl4ntEscJson\\"} rejected', ["Pl4ntEscJson"],
     f'\\"password\\":\\"{REDACTED}\\"}} rejected'),
    ("password=abc,Pl4ntComma&next=1", ["Pl4ntComma"], "&next=1"),
    # Flink logs "key, value": the value is the rest of the line, spaces and commas included
    ("Loading configuration property: s3.secret-key, correct horse, Pl4ntSpaced", ["Pl4ntSpaced", "horse"],
     f"s3.secret-key, {REDACTED}"),
    ("ssl.key.passphrase=Pl4ntPhrase credential=Pl4ntCred private_key: Pl4ntPk privateKey=Pl4ntPk2",
     ["Pl4ntPhrase", "Pl4ntCred", "Pl4ntPk"], "privateKey="),
])
def test_credential_forms_in_context(text, secrets_in_text, kept):
    out = redact_text(text)
    assert kept in out, out
    assert not [s for s in secrets_in_text if s in out], out


@pytest.mark.parametrize("text", [
    # where credentials come from, not what they are
    "\tbasic.auth.credentials.source = USER_INFO",
    "fs.s3a.aws.credentials.provider: org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    # an image digest, an AWS request id, a hex digest, a path: ids a reader needs
    "Pulled image flink@sha256 digest sha256:4b7d3e6f0a5c9b2d8e1f4a7c",
    "Access Denied (Service: Amazon S3; Status Code: 403; Request ID: 7N2QWX4K8D1M3F0B; S3 Extended Request ID: "
    "hT9q2Lw3oBfV8kR1yZc6eA4pNmD7sX0uJgQ5tW2vC8bE1iH6kL9oR3fY4aZ7nM2xP5sU8dG=; Proxy: null)",
    "sha256 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "Checkpoint path /data/flink/checkpoints/OrdersJob2024/8f2e9c1a4b7d3e6f0a5c9b2d8e1f4a7c/shared/Ab1x",
    # a SAS without its signature says nothing secret
    "https://acct.blob.core.windows.net/ckpt?sv=2022-11-02&ss=b&sp=rwl&se=2027-01-01",
    "no cookie, retrying",
])
def test_harmless_neighbours_of_credentials_are_kept(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("text,masked", [
    ("\tsasl.jaas.config = [hidden]", f"\tsasl.jaas.config = {REDACTED}"),  # Kafka's own mask, not "******]"
    ("Uid=app;Pwd={Pl4nt;Braced};Server=db", f"Uid=app;Pwd={REDACTED};Server=db"),  # an ODBC value in braces
])
def test_a_bracketed_value_is_masked_whole(text, masked):
    assert redact_text(text) == masked


def test_images_in_pages_and_notebooks_are_not_taken_for_keys():
    """Report pages and executed notebooks pass through redaction whole: their plots must survive it."""
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3).decode()
    for text in (f'<img alt="checkpoint durations" src="data:image/png;base64,{png}">',
                 json.dumps({"output_type": "display_data", "data": {"image/png": png + "\n", "text/plain": "<Figure>"}}),
                 f"src: url(data:font/woff2;base64,{base64.b64encode(b'wOF2' + bytes(range(200))).decode()})"):
        assert redact_text(text) == text


def test_masked_json_still_parses():
    doc = {"Cookie": "a=Pl4ntA; b=Pl4ntB", "url": "https://a.blob.core.windows.net/c?sv=1&sig=Pl4ntSig",
           "key": f"-----BEGIN PRIVATE KEY-----\n{KEY_LINE_1}\n{KEY_LAST}\n-----END PRIVATE KEY-----",
           "basic.auth.user.info": "app:Pl4ntInfo", "jdbc": "jdbc:oracle:thin:app/Pl4ntOra@//db:1521/svc",
           "odbc": "Uid=app;Pwd=Pl4ntPwd;"}
    out = redact_text(json.dumps(doc))
    parsed = json.loads(out)
    assert set(parsed) == set(doc)
    assert "Pl4nt" not in out and KEY_LINE_1 not in out and KEY_LAST not in out
    assert parsed["key"] == f"-----BEGIN PRIVATE KEY-----\n{REDACTED}\n-----END PRIVATE KEY-----"


def test_a_private_key_over_several_lines_of_one_record_is_masked_whole():
    lines = ["failed to load the TLS key", "-----BEGIN RSA PRIVATE KEY-----", "Proc-Type: 4,ENCRYPTED",
             "DEK-Info: AES-128-CBC,3F2A", "", KEY_LINE_1, KEY_LINE_2, KEY_LAST, "-----END RSA PRIVATE KEY-----",
             "falling back to PEM file /etc/flink/tls.pem"]
    out = redact_lines(lines)
    assert out[0] == lines[0] and out[-1] == lines[-1]
    assert out[1] == lines[1] and out[-2] == lines[-2]
    assert all(line in (REDACTED, "") for line in out[2:-2]), out
    # Without its markers (the log reader did not keep them) the lines still read as key material.
    assert redact_lines([KEY_LINE_1, KEY_LINE_2, KEY_LAST, "next"]) == [REDACTED, REDACTED, REDACTED, "next"]
    # Commented out in a config file, indented in pasted YAML: the marker and the indentation stay.
    assert redact_lines(["# -----BEGIN PRIVATE KEY-----", f"# {KEY_LINE_1}", f"# {KEY_LAST}", "# -----END PRIVATE KEY-----",
                         "a.b: 1"]) == ["# -----BEGIN PRIVATE KEY-----", f"# {REDACTED}", f"# {REDACTED}",
                                        "# -----END PRIVATE KEY-----", "a.b: 1"]
    assert redact_lines([f"    {KEY_LINE_1}", f"    {KEY_LAST}"]) == [f"    {REDACTED}", f"    {REDACTED}"]
