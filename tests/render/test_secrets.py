"""No secret reaches a byte the tool writes: every secret form planted in a config file, in the configuration Flink
logs at start-up, in dynamic ``-D`` properties, in a Kafka client's configuration dump, in log lines and in a pasted
note, then ``diagnose`` (text and JSON), ``--save-incident``, ``triage``, ``serve`` and the site build; every file
written and every byte printed is scanned for the planted values, and so is every string of every Parquet and JSON
file once decoded (Parquet compresses and dictionary-encodes its strings, so their bytes alone prove nothing)."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from corpus import ROOT, example
from flink_runbooks.apps import cli

# its module-scoped fixtures are built once: every test of the module runs on one worker
pytestmark = pytest.mark.xdist_group("test_secrets")

# Distinct values, so a scan for them cannot hit anything else.
PLANTED = {
    "s3_secret": "Pl4ntS3cretKey",
    "s3a_secret": "Pl4ntS3aSecret",
    "keystore": "Pl4ntKeystorePw",
    "jaas": "Pl4ntJaasPw",
    "azure": "Pl4ntAzureKey==",
    "jdbc": "Pl4ntJdbcPw",
    "aws_id": "AKIAPL4NTEDKEY000001",
    "java_opts": "Pl4ntTrustPw",
    "apikey": "Pl4ntApiKey",
    "url_secret": "Pl4ntUrlSecret",
    "bearer": "Pl4ntBearerTok3n",
    "basic": "UGw0bnRCYXNpYzpwdw==",
    "json": "Pl4ntJsonPw",
    "token": "Pl4ntK8sTok3n",
    "dynamic": "Pl4ntDynamicPw",
    "jdbc_log": "Pl4ntJdbcLogPw",
    "userinfo": "Pl4ntUserInfoPw",
    "kafka_userinfo": "Pl4ntKafkaInfoPw",
    "oracle": "Pl4ntOraclePw",
    "oracle_log": "Pl4ntOracleLogPw",
    "sas": "Pl4ntSasSig",
    "sas_log": "Pl4ntSasLogSig",
    "amz_sig": "Pl4ntAmzSignature",
    "amz_token": "Pl4ntAmzStsToken",
    "pem_escaped": "Pl4ntPemEscaped",
    "pem_line": "Pl4ntPemLineOne",
    "pem_tail": "Pl4ntPemTail",
    "pwd": "Pl4ntOdbcPwd",
    "cookie": "Pl4ntCookieA",
    "cookie_2": "Pl4ntCookieB",
    "zk_digest": "Pl4ntZkDigest",
    "zk_super": "Pl4ntZkSuper",
    "zk_jaas": "Pl4ntZkJaas",
    "account_key": "Pl4ntAccountKey",
}
P = PLANTED

CONFIG_LINES = [
    f"s3.secret-key: {P['s3_secret']}",
    f"fs.s3a.secret.key: {P['s3a_secret']}",
    f"s3.access-key: {P['aws_id']}",
    f"security.ssl.keystore-password: {P['keystore']}",
    "security.kafka.sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required "
    f"username=\"app\" password=\"{P['jaas']}\";",
    f"fs.azure.account.key.acct.blob.core.windows.net: {P['azure']}",
    f"env.java.opts.taskmanager: -Djavax.net.ssl.trustStorePassword={P['java_opts']} -XX:+UseG1GC",
    f"metrics.reporter.dghttp.apikey: {P['apikey']}",
    f"state.savepoints.dir: s3://{P['aws_id']}:{P['url_secret']}@bucket/savepoints",
    f"table.catalog.url: jdbc:mysql://db/app?user=app&password={P['jdbc']}",
    f"kubernetes.token: {P['token']}",
    f"schema.registry.basic.auth.user.info: app:{P['userinfo']}",
    "basic.auth.credentials.source: USER_INFO",
    f"table.catalog.oracle.url: jdbc:oracle:thin:app/{P['oracle']}@//db.example.com:1521/orders",
    "fs.azure.sas.ckpt.acct.blob.core.windows.net: sv=2022-11-02&ss=b&srt=co&sp=rwl&se=2027-01-01T00:00:00Z&spr=https"
    f"&sig={P['sas']}%3D",
    f"env.java.opts.jobmanager: -Dzookeeper.DigestAuthenticationProvider.superDigest=super:{P['zk_super']}= -Xss2m",
]

# PEM lines are 64 characters of base64; the last one is shorter.
PEM_LINES = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBA" + P["pem_line"],
    "x4UbaDzY5Q1k9n0a8b7c6d5e4f3g2h1iJ0kLmNoPqRsTuVwXyZaBcDeFgHiJkLm9",
    P["pem_tail"] + "9x==",
]
assert [len(line) for line in PEM_LINES[:2]] == [64, 64]


def plant(root: pathlib.Path) -> pathlib.Path:
    """An example incident (genuine Flink 1.20.3 logs) with every secret form added where users leave them."""
    src = example("checkpoint-tolerable-failure-threshold", "storage-permission-denied")
    inc = root / "incident"
    shutil.copytree(src, inc, ignore=shutil.ignore_patterns("expected.json"))
    conf = inc / "flink-conf.yaml"
    conf.write_text(conf.read_text() + "\n".join(CONFIG_LINES) + "\n")
    for log in (inc / "log").glob("flink-flink-*-0-vm.log"):
        lines = log.read_text().split("\n")
        # dynamic properties, as the start-up script prints them
        lines[7] += f" -D security.ssl.truststore-password={P['dynamic']}"
        stamp = "2026-11-22 02:53:48,470 INFO  org.apache.flink.configuration.GlobalConfiguration           [] - "
        logged = [stamp + "Loading configuration property: " + line.replace(": ", ", ", 1) for line in CONFIG_LINES]
        logged.append(stamp + f"Loading dynamic configuration property: fs.s3a.secret.key, {P['s3a_secret']}")
        lines[20:20] = logged
        warn = "2026-11-22 02:53:49,000 WARN  org.apache.flink.runtime.rest.RestClient                     [] - "
        lines[40:40] = [
            warn + f"request failed with Authorization: Bearer {P['bearer']}",
            warn + f"proxy said Authorization: Basic {P['basic']}",
            warn + f"catalog answered {{\"user\": \"app\", \"password\": \"{P['json']}\"}}",
            warn + f"cannot reach s3://{P['aws_id']}:{P['url_secret']}@bucket/x",
            warn + "GET https://acct.blob.core.windows.net/ckpt/chk-3/_metadata?sv=2022-11-02&ss=b&srt=co&sp=rwl"
                   f"&se=2027-01-01T00:00:00Z&spr=https&sig={P['sas_log']}%3D returned 403",
            warn + "upload to https://bucket.s3.amazonaws.com/chk-3?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                   f"&X-Amz-Credential={P['aws_id']}%2F20261122%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261122T025349Z"
                   f"&X-Amz-Expires=900&X-Amz-Security-Token={P['amz_token']}&X-Amz-SignedHeaders=host"
                   f"&X-Amz-Signature={P['amz_sig']} expired",
            warn + f"catalog login failed: Driver={{ODBC Driver 18}};Server=db;Uid=app;Pwd={P['pwd']};Encrypt=yes",
            warn + f"history server answered 401 to Cookie: JSESSIONID={P['cookie']}; csrftoken={P['cookie_2']}",
            warn + f"ZooKeeper refused create on /flink/default for ACL digest:flink:{P['zk_digest']}=:cdrwa",
            warn + "JAAS section Server: org.apache.zookeeper.server.auth.DigestLoginModule required "
                   f"user_super=\"{P['zk_jaas']}\";",
            warn + "storage connection DefaultEndpointsProtocol=https;AccountName=acct;"
                   f"AccountKey={P['account_key']}==;EndpointSuffix=core.windows.net",
            warn + "could not parse the TLS key -----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
                   f"{P['pem_escaped']}\\n-----END PRIVATE KEY-----",
        ]
        log.write_text("\n".join(lines))
    tm = next((inc / "log").glob("*taskexecutor*.log"))
    tm.write_text(tm.read_text() + (
        # A Kafka client's configuration dump: the user info next to its harmless source setting.
        "2026-11-22 02:55:00,000 INFO  org.apache.kafka.clients.consumer.ConsumerConfig              [] - "
        "ConsumerConfig values: \n"
        "\tauto.offset.reset = earliest\n"
        "\tbasic.auth.credentials.source = USER_INFO\n"
        f"\tbasic.auth.user.info = app:{P['kafka_userinfo']}\n"
        "\tbootstrap.servers = [kafka:9092]\n"
        "\tsasl.jaas.config = [hidden]\n"
        # A failure chain that ends in a password: the value ends the JSON string it lands in.
        "2026-11-22 02:56:00,000 ERROR org.apache.flink.runtime.taskmanager.Task                    [] - "
        "Source: lookup (1/1) switched from RUNNING to FAILED.\n"
        "java.lang.RuntimeException: lookup join failed\n"
        "\tat com.example.Lookup.eval(Lookup.java:42)\n"
        f"Caused by: java.io.IOException: lookup failed for jdbc:mysql://db/app?user=app&password={P['jdbc_log']}\n"
        "\t... 1 more\n"
        "Caused by: java.sql.SQLException: ORA-01017: invalid username/password; logon denied "
        f"(jdbc:oracle:thin:app/{P['oracle_log']}@db.example.com:1521/ORCL)\n"
        "\t... 2 more\n"))
    # A note pasted next to the logs: the Kubernetes secret the TaskManager mounted, its key over several lines.
    (inc / "log" / "kubectl-describe-secret.txt").write_text(
        "The TaskManager mounted this secret:\n"
        "  tls.key: |\n" + "".join(f"    {line}\n" for line in
                                    ["-----BEGIN PRIVATE KEY-----", *PEM_LINES, "-----END PRIVATE KEY-----"]))
    return inc


def leaks(*texts: str | bytes) -> list[str]:
    found = []
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        found += [name for name, value in PLANTED.items() if value.encode() in data]
    return sorted(set(found))


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def decoded_strings(path: pathlib.Path) -> list[str]:
    """Every string a Parquet or JSON file holds, as a reader of that format gets it back."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return _strings(pq.read_table(path).to_pylist())
    if path.suffix in (".json", ".ipynb"):
        return _strings(json.loads(path.read_text()))
    return []


def tree_leaks(root: pathlib.Path) -> dict[str, list[str]]:
    """Planted values in any file under ``root``: its bytes, and the strings of its Parquet or JSON once decoded."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            bad = sorted(set(leaks(path.read_bytes()) + leaks(*decoded_strings(path))))
            if bad:
                out[str(path.relative_to(root))] = bad
    return out


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return plant(tmp_path_factory.mktemp("secrets"))


def test_every_planted_value_is_in_the_inputs(planted):
    """The scan below is only worth something if the values are really there to leak."""
    data = b"".join(p.read_bytes() for p in planted.rglob("*") if p.is_file())
    assert leaks(data) == sorted(PLANTED)


def test_diagnose_text_json_and_saved_incident_hold_no_secret(spark, capsys, planted, tmp_path):
    saved = tmp_path / "saved"
    code = cli.main(["diagnose", str(planted), "--format", "json", "--save-incident", str(saved)])
    out, err = capsys.readouterr()
    assert code == 1, err
    doc = json.loads(out)  # the JSON parses even with a password at the end of a string
    assert doc["findings"][0]["runbook"] == "checkpoint-tolerable-failure-threshold"
    assert leaks(out, err) == []
    assert tree_leaks(saved) == {}
    # What is scanned above: the events table decoded, every event of the planted forms in it.
    events = decoded_strings(saved / "events.parquet")
    for kept in ("basic.auth.user.info = ******", "basic.auth.credentials.source = USER_INFO", "Pwd=******;",
                 "jdbc:oracle:thin:app/******@db.example.com", "sig=******", "X-Amz-Signature=******",
                 "Cookie: ******", "digest:flink:******", 'user_super="******"', "-----BEGIN PRIVATE KEY-----"):
        assert any(kept in s for s in events), kept
    meta = json.loads((saved / "incident.json").read_text())
    # the user's config text is kept for diffs, masked
    assert "s3.secret-key: ******" in meta["config_file"]["text"]
    assert "-Djavax.net.ssl.trustStorePassword=******" in meta["config_file"]["text"]
    assert "schema.registry.basic.auth.user.info: ******" in meta["config_file"]["text"]
    assert "&sig=******" in meta["config_file"]["text"]
    values = {c["key"]: c["value"] for c in meta["config"]}
    assert values["security.ssl.truststore-password"] == "******"  # from the -D properties
    assert values["metrics.reporter.dghttp.apikey"] == "******"
    assert values["schema.registry.basic.auth.user.info"] == "******"
    assert values["basic.auth.credentials.source"] == "USER_INFO"  # says where credentials come from: kept
    assert values["table.catalog.oracle.url"] == "jdbc:oracle:thin:app/******@//db.example.com:1521/orders"

    code = cli.main(["diagnose", str(planted)])
    out, err = capsys.readouterr()
    assert code == 1 and "  Evidence:" in out
    assert leaks(out, err) == []

    # A diff against the user's file: the secret lines next to the change are context lines, masked.
    from flink_runbooks.collect.store import load_incident
    from flink_runbooks.model import Patch
    from flink_runbooks.render.patches import render_config_diff

    diff = render_config_diff([Patch("flink", "execution.checkpointing.tolerable-failed-checkpoints", "3", "why")],
                              load_incident(saved).config, (1, 20))
    assert "+execution.checkpointing.tolerable-failed-checkpoints: 3" in diff
    assert " env.java.opts.jobmanager: -Dzookeeper.DigestAuthenticationProvider.superDigest=****** -Xss2m" in diff
    assert "&sig=******" in diff and " table.catalog.oracle.url: jdbc:oracle:thin:app/******@//db" in diff
    assert leaks(diff) == []


def test_serve_writes_and_answers_no_secret(spark, planted, tmp_path):
    from fastapi.testclient import TestClient

    from flink_runbooks.apps.serve import create_app

    logs_root = tmp_path / "logs"
    shutil.copytree(planted, logs_root / "orders")
    out_root = tmp_path / "reports"
    nb = tmp_path / "nb"
    nb.mkdir()  # no notebooks: the runbooks are reported failed, the report is still written
    client = TestClient(create_app(str(logs_root), str(out_root), spark=spark, runbooks_dir=str(nb)))
    payload = {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "FlinkJobFailed"}, "annotations": {"flink_logs": "orders"}}]}
    answer = client.post("/alerts", json=payload)
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run"]
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        view = client.get(f"/runs/{run_id}")
        assert view.status_code == 200, view.text  # valid JSON, never a 500
        if view.json()["status"] != "running":
            break
        time.sleep(0.5)
    view = client.get(f"/runs/{run_id}").json()
    assert view["status"] == "done", view
    assert view["report"]["findings"]
    listing = client.get("/runs")
    assert listing.status_code == 200
    assert leaks(json.dumps(view), listing.text) == []
    assert tree_leaks(out_root) == {}


@pytest.mark.notebook
def test_triage_writes_no_secret(spark, planted, tmp_path, capsys):
    out = tmp_path / "triage"
    code = cli.main(["triage", str(planted), "--out", str(out), "--runbooks", "checkpoint-tolerable-failure-threshold",
                     "--format", "json"])
    printed, err = capsys.readouterr()
    assert code == 1, err
    json.loads(printed)
    json.loads((out / "report.json").read_text())
    assert (out / "runbooks" / "checkpoint-tolerable-failure-threshold.html").exists()
    assert leaks(printed, err) == []
    assert tree_leaks(out) == {}


@pytest.mark.notebook
def test_site_page_of_an_example_incident_with_secrets_holds_none(spark, planted, tmp_path):
    """The site built for one runbook whose example incident carries every planted secret."""
    from flink_runbooks.apps.site import build_site

    slug = "checkpoint-tolerable-failure-threshold"
    root = tmp_path / "repo"
    (root / "runbooks").mkdir(parents=True)
    shutil.copy(ROOT / "runbooks" / f"{slug}.ipynb", root / "runbooks")
    example_dir = root / "data" / slug / "storage-permission-denied"
    shutil.copytree(planted, example_dir)
    shutil.copy(example(slug, "storage-permission-denied") / "expected.json", example_dir)
    report = build_site(tmp_path / "site", runbooks=[slug], root=root, spark=spark, jobs=1)
    assert (tmp_path / "site" / "index.html").exists()
    assert not report.failed, report.failed
    assert tree_leaks(tmp_path / "site") == {}
