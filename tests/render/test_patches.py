import json

import pytest
import yaml

from flink_runbooks.vocabulary import keys
from flink_runbooks.parse.config import ConfigSource, EffectiveConfig, config_from_text, parse_flat_conf, parse_yaml_conf
from flink_runbooks.model import Patch
from flink_runbooks.render.patches import (
    apply_patches_to_text,
    apply_to_config,
    flat_value_problem,
    render_config_diff,
    render_flinkdeployment_patch,
    render_kafka_properties,
    yaml_scalar,
)

FLAT = """\
# Flink configuration
jobmanager.rpc.address: flink-jm

# recovery
state.backend.local-recovery: false   # off until we have local disks
state.backend: rocksdb
s3.secret-key: hunter2
execution.checkpointing.interval: 5s
"""

# What the model keeps of that file for diffs: secret values are masked where they enter it.
FLAT_KEPT = FLAT.replace("hunter2", "******")

NESTED = """\
# Flink 1.20
execution:
  checkpointing:
    interval: 5s   # every 5 seconds
    dir: s3://bucket/ckpt
state:
  backend:
    local-recovery: false
taskmanager.numberOfTaskSlots: 2
"""


def flink(key, proposed):
    return Patch("flink", key, proposed, "because")


def kafka(key, proposed):
    return Patch("kafka", key, proposed, "because")


def new_text(patches, cfg, version):
    text, notes = apply_patches_to_text(patches, cfg.file_text, cfg.file_path, cfg.file_format, version)
    return text


# --- key spelling per version ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, version, expected", [
    ("execution.state-recovery.from-local", (1, 16), "state.backend.local-recovery"),
    ("execution.state-recovery.from-local", (1, 19, 2), "state.backend.local-recovery"),
    ("state.backend.local-recovery", (1, 20), "execution.state-recovery.from-local"),
    ("state.backend.local-recovery", (2, 0), "execution.state-recovery.from-local"),
    ("state.backend.local-recovery", None, "state.backend.local-recovery"),
    ("execution.state-recovery.from-local", None, "state.backend.local-recovery"),
    ("state.backend", (1, 16), "state.backend"),
    ("state.backend", (1, 18), "state.backend.type"),
    ("restart-strategy.type", None, "restart-strategy"),
    ("akka.ask.timeout", (1, 17), "akka.ask.timeout"),
    ("akka.ask.timeout", (1, 18), "pekko.ask.timeout"),
    ("pekko.ask.timeout", (1, 16), "akka.ask.timeout"),
    ("taskmanager.network.memory.max", (1, 15), "taskmanager.memory.network.max"),
    ("taskmanager.memory.network.max", None, "taskmanager.memory.network.max"),
    ("execution.checkpointing.unaligned", (1, 20), "execution.checkpointing.unaligned.enabled"),
    ("execution.checkpointing.unaligned.enabled", (1, 16), "execution.checkpointing.unaligned"),
    ("state.checkpoint-storage", (1, 12), "state.checkpoint-storage"),  # older than every spelling
    ("execution.checkpointing.timeout", (1, 9), "execution.checkpointing.timeout"),
    ("not.a.known.key", (1, 20), "not.a.known.key"),
])
def test_name_for(key, version, expected):
    assert keys.name_for(key, version) == expected


def test_name_for_never_picks_a_removed_spelling():
    for concept in keys.CONCEPTS:
        for kn in concept.names:
            assert keys.is_valid_in(keys.name_for(kn.name, (2, 0)), (2, 0)), kn.name


# --- config diffs ----------------------------------------------------------------------------------------------------

def test_in_place_edit_keeps_comments_order_and_renames_for_1_20():
    cfg = config_from_text(FLAT, "/etc/flink/flink-conf.yaml")
    patches = [flink("execution.state-recovery.from-local", "true"),
               flink("execution.checkpointing.tolerable-failed-checkpoints", "3")]
    diff = render_config_diff(patches, cfg, (1, 20))
    assert diff.splitlines()[:2] == ["--- a/flink-conf.yaml", "+++ b/flink-conf.yaml"]
    assert "-state.backend.local-recovery: false   # off until we have local disks" in diff
    assert "+execution.state-recovery.from-local: true   # off until we have local disks" in diff
    assert "+execution.checkpointing.tolerable-failed-checkpoints: 3" in diff
    assert new_text(patches, cfg, (1, 20)) == FLAT_KEPT.replace(
        "state.backend.local-recovery: false", "execution.state-recovery.from-local: true"
    ) + "execution.checkpointing.tolerable-failed-checkpoints: 3\n"


def test_deprecated_key_kept_for_1_16():
    cfg = config_from_text(FLAT, "/etc/flink/flink-conf.yaml")
    patches = [flink("execution.state-recovery.from-local", "true")]
    diff = render_config_diff(patches, cfg, (1, 16))
    assert "+state.backend.local-recovery: true   # off until we have local disks" in diff
    assert "execution.state-recovery" not in diff
    assert new_text(patches, cfg, "1.16.3") == FLAT_KEPT.replace("local-recovery: false", "local-recovery: true")


def test_unknown_version_keeps_the_files_spelling():
    text = "execution.state-recovery.from-local: false\n"
    cfg = config_from_text(text, "flink-conf.yaml")
    assert new_text([flink("state.backend.local-recovery", "true")], cfg, None) == \
        "execution.state-recovery.from-local: true\n"


def test_duplicates_and_old_spellings_collapse_to_one_line():
    text = "state.backend.local-recovery: false\na: 1\nexecution.state-recovery.from-local: false\n"
    cfg = config_from_text(text, "flink-conf.yaml")
    assert new_text([flink("state.backend.local-recovery", "true")], cfg, (1, 20)) == \
        "a: 1\nexecution.state-recovery.from-local: true\n"


def test_removal_drops_every_spelling():
    cfg = config_from_text(FLAT, "/etc/flink/flink-conf.yaml")
    patches = [flink("state.backend.type", None)]
    diff = render_config_diff(patches, cfg, (1, 18))
    assert "-state.backend: rocksdb" in diff
    assert not [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert "state.backend: rocksdb" not in new_text(patches, cfg, (1, 18))


def test_secrets_never_printed_even_in_context_lines():
    cfg = config_from_text(FLAT, "/etc/flink/flink-conf.yaml")
    diff = render_config_diff([flink("state.backend.type", "hashmap"), flink("s3.access-key", "AKIDEXAMPLE")], cfg,
                              (1, 18))
    assert " s3.secret-key: ******" in diff
    assert "+s3.access-key: ******" in diff
    assert "hunter2" not in diff and "AKIDEXAMPLE" not in diff


def test_nested_insert_under_existing_parent_and_rename_for_1_20():
    cfg = config_from_text(NESTED, "/opt/flink/conf/config.yaml")
    patches = [flink("execution.checkpointing.tolerable-failed-checkpoints", "3"),
               flink("state.backend.local-recovery", "true")]
    patched = new_text(patches, cfg, (1, 20))
    assert patched == """\
# Flink 1.20
execution:
  checkpointing:
    interval: 5s   # every 5 seconds
    dir: s3://bucket/ckpt
    tolerable-failed-checkpoints: 3
  state-recovery.from-local: true
taskmanager.numberOfTaskSlots: 2
"""
    diff = render_config_diff(patches, cfg, (1, 20))
    assert diff.startswith("--- a/config.yaml\n+++ b/config.yaml\n")
    assert "+    tolerable-failed-checkpoints: 3" in diff
    assert "-state:" in diff and "-    local-recovery: false" in diff
    assert dict((k, v) for k, v, _ in parse_yaml_conf(patched, "config.yaml")) == {
        "execution.checkpointing.interval": "5s",
        "execution.checkpointing.dir": "s3://bucket/ckpt",
        "execution.checkpointing.tolerable-failed-checkpoints": "3",
        "execution.state-recovery.from-local": "true",
        "taskmanager.numberOfTaskSlots": "2",
    }


def test_nested_edit_in_place_keeps_comment_and_for_1_19_keeps_old_key():
    cfg = config_from_text(NESTED, "config.yaml")
    patched = new_text([flink("execution.checkpointing.interval", "60 s"),
                        flink("execution.state-recovery.from-local", "true")], cfg, (1, 19))
    assert "    interval: 60 s   # every 5 seconds\n" in patched
    assert "state:\n  backend:\n    local-recovery: true\n" in patched


def test_nested_new_key_without_parent_is_appended_as_dotted_key():
    cfg = config_from_text(NESTED, "config.yaml")
    patched = new_text([flink("restart-strategy.type", "exponential-delay")], cfg, (1, 20))
    assert patched == NESTED + "restart-strategy.type: exponential-delay\n"


def test_nested_values_are_quoted_so_flink_reads_them_back():
    cfg = config_from_text(NESTED, "config.yaml")
    values = {"pipeline.name": "job: nightly #3", "a.bool": "true", "a.hash": "#x", "a.null": "null",
              "a.octal": "010", "a.list": "[x, y]", "a.quote": "it's", "a.yes": "yes"}
    patched = new_text([flink(k, v) for k, v in values.items()], cfg, (1, 20))
    parsed = {k: v for k, v, _ in parse_yaml_conf(patched, "config.yaml")}
    assert {k: parsed[k] for k in values} == values
    assert "pipeline.name: 'job: nightly #3'" in patched
    assert "a.bool: true\n" in patched


def test_flat_values_flink_cannot_read_become_a_note():
    assert flat_value_problem("a#b")
    assert flat_value_problem("") and flat_value_problem(" x") and flat_value_problem("a\nb")
    assert flat_value_problem("a: b") is None and flat_value_problem("'q'") is None
    cfg = config_from_text("a: 1\n", "flink-conf.yaml")
    diff = render_config_diff([flink("pipeline.name", "job#1")], cfg, (1, 17))
    assert "+# pipeline.name cannot be set in flink-conf.yaml" in diff
    assert "+pipeline.name" not in diff
    # 1.17 reads env.java.opts.all (env.java.opts is its deprecated spelling)
    assert render_config_diff([flink("env.java.opts", "-Da=b: c")], cfg, (1, 17)).endswith(
        "+env.java.opts.all: -Da=b: c\n")
    assert render_config_diff([flink("env.java.opts", "-Da=b: c")], cfg, (1, 16)).endswith("+env.java.opts: -Da=b: c\n")


def test_yaml_scalar():
    assert yaml_scalar("5s") == "5s"
    assert yaml_scalar("a: b") == "'a: b'"
    assert yaml_scalar("x #y") == "'x #y'"
    assert yaml_scalar("it's") == "it's"
    assert yaml_scalar("'q'") == "'''q'''"
    assert yaml_scalar("on") == "'on'"
    assert yaml_scalar("two\nlines") == '"two\\nlines"'
    assert yaml_scalar("") == "''"


@pytest.mark.parametrize("version, name", [(None, "flink-conf.yaml"), ((1, 18), "flink-conf.yaml"),
                                           ((1, 19), "config.yaml"), ("2.0.0", "config.yaml")])
def test_no_file_known_picks_the_versions_file(version, name):
    diff = render_config_diff([flink("state.backend.local-recovery", "true")], EffectiveConfig(), version)
    expected_key = keys.name_for("state.backend.local-recovery", version if not isinstance(version, str) else (2, 0))
    assert diff == f"--- a/{name}\n+++ b/{name}\n@@ -0,0 +1 @@\n+{expected_key}: true\n"


def test_no_file_but_other_sources_still_diff_against_empty_file():
    cfg = EffectiveConfig()
    cfg.add("execution.checkpointing.interval", "5s", ConfigSource("log", "/x/jm.log", 10))
    diff = render_config_diff([flink("execution.checkpointing.interval", "60s")], cfg, (1, 20))
    assert diff.endswith("@@ -0,0 +1 @@\n+execution.checkpointing.interval: 60s\n")


def test_only_flink_patches_make_a_diff():
    cfg = config_from_text(FLAT, "flink-conf.yaml")
    assert render_config_diff([kafka("reconnect.backoff.ms", "1000"), Patch("ops", "restart", None, "r")], cfg,
                              (1, 18)) == ""
    assert render_config_diff([flink("jobmanager.rpc.address", "flink-jm")], cfg, (1, 18)) == ""
    assert render_config_diff([], cfg, (1, 18)) == ""


def test_patching_leaves_the_config_untouched():
    cfg = config_from_text(FLAT, "flink-conf.yaml")
    render_config_diff([flink("state.backend.type", None)], cfg, (1, 20))
    assert cfg.file_text == FLAT_KEPT
    assert cfg.get("state.backend.type") == "rocksdb"


def test_flat_patched_text_reparses():
    cfg = config_from_text(FLAT, "flink-conf.yaml")
    patched = new_text([flink("state.backend.type", "hashmap"), flink("execution.checkpointing.interval", None)],
                       cfg, (1, 18))
    parsed = {k: v for k, v, _ in parse_flat_conf(patched, "flink-conf.yaml")}
    assert parsed["state.backend.type"] == "hashmap"
    assert "state.backend" not in parsed
    assert "execution.checkpointing.interval" not in parsed


# --- Kubernetes operator ---------------------------------------------------------------------------------------------

def test_flinkdeployment_patch_round_trips():
    patches = [flink("state.backend.local-recovery", "true"),
               flink("execution.checkpointing.tolerable-failed-checkpoints", "3"),
               flink("akka.ask.timeout", None),
               flink("s3.secret-key", "hunter2"),
               kafka("reconnect.backoff.ms", "1000")]
    doc = yaml.safe_load(render_flinkdeployment_patch(patches, (1, 20), name="orders"))
    assert doc == {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": "orders"},
        "spec": {"flinkConfiguration": {
            "execution.state-recovery.from-local": "true",
            "execution.checkpointing.tolerable-failed-checkpoints": "3",
            "pekko.ask.timeout": None,
            "akka.ask.timeout": None,
            "s3.secret-key": "******",
        }},
    }


def test_flinkdeployment_patch_uses_the_versions_names_and_default_name():
    doc = yaml.safe_load(render_flinkdeployment_patch([flink("execution.state-recovery.from-local", "true")], "1.17.2"))
    assert doc["metadata"]["name"] == "<your-deployment>"
    assert doc["spec"]["flinkConfiguration"] == {"state.backend.local-recovery": "true"}
    assert render_flinkdeployment_patch([kafka("a", "b")], (1, 20)) == ""


# --- Kafka clients ---------------------------------------------------------------------------------------------------

def test_kafka_rendering():
    out = render_kafka_properties([kafka("reconnect.backoff.ms", "1000"),
                                   kafka("properties.reconnect.backoff.max.ms", "5000"),
                                   kafka("transaction.timeout.ms", "900000"),
                                   kafka("sasl.jaas.config", 'PlainLoginModule required password="pw";'),
                                   flink("ignored", "x")])
    assert set(out) == {"datastream", "sql", "properties"}
    java = out["datastream"]
    source, sink = java.split("Properties producerConfig")
    assert 'KafkaSource.<String>builder()' in source
    assert '.setProperty("reconnect.backoff.ms", "1000")' in source
    assert '.setProperty("reconnect.backoff.max.ms", "5000")' in source
    assert "transaction.timeout.ms" not in source  # a producer-only property
    assert 'producerConfig.setProperty("transaction.timeout.ms", "900000");' in java
    assert ".setKafkaProducerConfig(producerConfig)" in sink
    assert out["sql"].splitlines() == [
        "'properties.reconnect.backoff.ms' = '1000',",
        "'properties.reconnect.backoff.max.ms' = '5000',",
        "'properties.transaction.timeout.ms' = '900000',",
        "'properties.sasl.jaas.config' = '******'",
    ]
    assert out["properties"].splitlines() == [
        "reconnect.backoff.ms=1000", "reconnect.backoff.max.ms=5000", "transaction.timeout.ms=900000",
        "sasl.jaas.config=******"]
    assert "pw" not in repr(out)


def test_kafka_consumer_only_property_has_no_sink_block_and_empty_input():
    out = render_kafka_properties([kafka("enable.auto.commit", "false")])
    assert "KafkaSink" not in out["datastream"]
    assert render_kafka_properties([flink("a", "b")]) == {}


# --- re-checking a patched configuration -----------------------------------------------------------------------------

def test_apply_to_config():
    cfg = config_from_text(FLAT, "flink-conf.yaml")
    cfg.add("taskmanager.network.memory.fraction", "0.4", ConfigSource("dynamic", "tm.log", 3))
    out = apply_to_config([flink("taskmanager.memory.network.fraction", "0.1"),
                           flink("state.backend.type", None),
                           kafka("reconnect.backoff.ms", "1")], cfg)
    assert out["taskmanager.memory.network.fraction"] == "0.1"
    assert "taskmanager.network.memory.fraction" not in out
    assert "state.backend" not in out and "state.backend.type" not in out
    assert out["jobmanager.rpc.address"] == "flink-jm"
    assert "reconnect.backoff.ms" not in out
    assert list(out) == sorted(out)
    assert cfg.get("taskmanager.memory.network.fraction") == "0.4"  # the config itself is unchanged


# ------------------------------------------------------------------------------------------------ version spelling


@pytest.mark.parametrize("slug,name,version", [
    ("checkpoint-metadata-already-exists", "shared-nfs-mount-1.16", (1, 16)),
    ("oom-java-heap", "jobmanager-heap-checkpoints", (1, 12)),
    ("restart-strategy-exhausted", "no-restart-strategy-1.10", (1, 10)),
    ("insufficient-network-buffers", "legacy-network-at-min-v1.9", (1, 9)),
])
def test_json_patch_keys_are_spelled_for_the_incidents_version(spark, capsys, slug, name, version):
    from corpus import DATA
    from flink_runbooks.apps import cli
    from flink_runbooks.vocabulary import keys as key_names

    path = DATA / slug / name
    if not path.exists():
        pytest.skip(f"example {slug}/{name} is not there")
    cli.main(["diagnose", str(path), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    flink_keys = [p["key"] for f in doc["findings"] for p in f["patches"] if p["target"] == "flink"]
    assert flink_keys, "the example proposes config changes"
    for key in flink_keys:
        assert key_names.is_valid_in(key, version), f"{key} is not read by Flink {version}"
    assert all(f["would_change_verdict"] for f in doc["findings"])
