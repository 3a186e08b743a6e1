"""No secret reaches a byte the tool writes: every secret form planted in a config file, in the configuration Flink
logs at start-up, in dynamic ``-D`` properties and in log lines, then ``diagnose`` (text and JSON),
``--save-incident``, ``triage``, ``serve`` and the site build; every file written and every byte printed is scanned
for the planted values."""
from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from conftest import example
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
    "aws_id": "AKIAPL4NTEDKEY0001",
    "java_opts": "Pl4ntTrustPw",
    "apikey": "Pl4ntApiKey",
    "url_secret": "Pl4ntUrlSecret",
    "bearer": "Pl4ntBearerTok3n",
    "basic": "UGw0bnRCYXNpYzpwdw==",
    "json": "Pl4ntJsonPw",
    "token": "Pl4ntK8sTok3n",
    "dynamic": "Pl4ntDynamicPw",
    "jdbc_log": "Pl4ntJdbcLogPw",
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
]


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
        ]
        log.write_text("\n".join(lines))
    tm = next((inc / "log").glob("*taskexecutor*.log"))
    # A failure chain that ends in a password: the value ends the JSON string it lands in.
    tm.write_text(tm.read_text() + (
        "2026-11-22 02:56:00,000 ERROR org.apache.flink.runtime.taskmanager.Task                    [] - "
        "Source: lookup (1/1) switched from RUNNING to FAILED.\n"
        "java.lang.RuntimeException: lookup join failed\n"
        "\tat com.example.Lookup.eval(Lookup.java:42)\n"
        f"Caused by: java.io.IOException: lookup failed for jdbc:mysql://db/app?user=app&password={P['jdbc_log']}\n"
        "\t... 1 more\n"))
    return inc


def leaks(*texts: str | bytes) -> list[str]:
    found = []
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        found += [name for name, value in PLANTED.items() if value.encode() in data]
    return sorted(set(found))


def tree_leaks(root: pathlib.Path) -> dict[str, list[str]]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            bad = leaks(path.read_bytes())
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
    meta = json.loads((saved / "incident.json").read_text())
    # the user's config text is kept for diffs, masked
    assert "s3.secret-key: ******" in meta["config_file"]["text"]
    assert "-Djavax.net.ssl.trustStorePassword=******" in meta["config_file"]["text"]
    values = {c["key"]: c["value"] for c in meta["config"]}
    assert values["security.ssl.truststore-password"] == "******"  # from the -D properties
    assert values["metrics.reporter.dghttp.apikey"] == "******"

    code = cli.main(["diagnose", str(planted)])
    out, err = capsys.readouterr()
    assert code == 1 and "evidence:" in out
    assert leaks(out, err) == []

    # A diff against the user's file: the secret lines next to the change are context lines, masked.
    from flink_runbooks.collect.store import load_incident
    from flink_runbooks.model import Patch
    from flink_runbooks.render.patches import render_config_diff

    diff = render_config_diff([Patch("flink", "execution.checkpointing.tolerable-failed-checkpoints", "3", "why")],
                              load_incident(saved).config, (1, 20))
    assert " kubernetes.token: ******" in diff and "+execution.checkpointing.tolerable-failed-checkpoints: 3" in diff
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
    shutil.copy(pathlib.Path(__file__).resolve().parents[1] / "runbooks" / f"{slug}.ipynb", root / "runbooks")
    example_dir = root / "data" / slug / "storage-permission-denied"
    shutil.copytree(planted, example_dir)
    shutil.copy(example(slug, "storage-permission-denied") / "expected.json", example_dir)
    report = build_site(tmp_path / "site", runbooks=[slug], root=root, spark=spark, jobs=1)
    assert (tmp_path / "site" / "index.html").exists()
    assert not report.failed, report.failed
    assert tree_leaks(tmp_path / "site") == {}
