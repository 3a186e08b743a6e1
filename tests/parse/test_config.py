import doctest
import re

import pytest
import yaml

from flink_runbooks.parse import config as config_module
from flink_runbooks.parse.config import (
    ConfigError,
    ConfigSource,
    EffectiveConfig,
    config_from_text,
    detect_conf_format,
    parse_flat_conf,
    parse_yaml_conf,
    unquote,
)

FLAT = """\
# Flink configuration (legacy format)
jobmanager.rpc.address: flink-jm   # trailing comment
taskmanager.numberOfTaskSlots: 4

state.backend: rocksdb
state.backend.incremental: 'true'
state.checkpoints.dir: s3://bucket/ckpt#not-part-of-the-value
env.java.opts: -XX:+UseG1GC -Dfoo=bar: baz
broken-line-without-space:value
empty.value:
taskmanager.numberOfTaskSlots: 8
"""

NESTED = """\
# Flink 1.20 standard YAML
execution:
  checkpointing:
    interval: 30s
    unaligned.enabled: true
    tolerable-failed-checkpoints: 3
state.backend.type: rocksdb
taskmanager:
  memory:
    process.size: 4g
    managed.fraction: 0.4
pipeline.jars: [a.jar, b.jar]
env.java.opts.all:
  - -XX:+UseG1GC
  - -Dx=y
kubernetes.label: yes
release.date: 2024-01-01
hex.value: 0x10
quoted.number: "5"
null.value:
"""


# --- legacy flink-conf.yaml ------------------------------------------------------------------------------------------

def test_flat_parser_follows_flinks_line_rules():
    warnings: list[str] = []
    entries = parse_flat_conf(FLAT, "/conf/flink-conf.yaml", warnings)
    as_dict = {k: v for k, v, _ in entries}
    assert as_dict["jobmanager.rpc.address"] == "flink-jm"
    # '#' starts a comment anywhere, even inside a value
    assert as_dict["state.checkpoints.dir"] == "s3://bucket/ckpt"
    # split at the first ': ' only
    assert as_dict["env.java.opts"] == "-XX:+UseG1GC -Dfoo=bar: baz"
    # quotes are kept, as Flink's legacy parser keeps them
    assert as_dict["state.backend.incremental"] == "'true'"
    assert "broken-line-without-space" not in " ".join(as_dict)
    assert "empty.value" not in as_dict
    assert ("jobmanager.rpc.address", "flink-jm", 2) in entries


def test_flat_parser_keeps_duplicates_in_order_and_warns():
    warnings: list[str] = []
    entries = parse_flat_conf(FLAT, "/conf/flink-conf.yaml", warnings)
    slots = [(v, line) for k, v, line in entries if k == "taskmanager.numberOfTaskSlots"]
    assert slots == [("4", 3), ("8", 11)]
    assert any("/conf/flink-conf.yaml:11" in w and "overrides line 3" in w for w in warnings)
    assert any("/conf/flink-conf.yaml:9" in w and "missing space" in w for w in warnings)
    assert any("/conf/flink-conf.yaml:10" in w for w in warnings)
    assert any(":6" in w and "quoted" in w for w in warnings)


def test_flat_duplicate_last_wins_and_quotes_are_removed_on_lookup():
    cfg = config_from_text(FLAT, "/conf/flink-conf.yaml")
    assert cfg.get("taskmanager.numberOfTaskSlots") == "8"
    assert cfg.get_int("taskmanager.numberOfTaskSlots") == 8
    assert cfg.get("state.backend.incremental") == "true"
    assert cfg.get_bool("state.backend.incremental") is True
    assert [cv.value for cv in cfg.history("state.backend.incremental")] == ["'true'"]
    assert cfg.file_format == "flat"
    assert cfg.file_path == "/conf/flink-conf.yaml"
    assert cfg.file_text == FLAT
    assert any("missing space" in w for w in cfg.warnings)


def test_flat_parser_never_raises_on_garbage():
    assert parse_flat_conf(": \n:::\n\x00\n  \n#\n{[}\n", "x") == []


def test_unquote():
    assert unquote("'true'") == "true"
    assert unquote('"a \\"b\\""') == 'a "b"'
    assert unquote("'it''s'") == "it's"
    assert unquote("'unbalanced") == "'unbalanced"
    assert unquote("plain") == "plain"


# --- standard config.yaml --------------------------------------------------------------------------------------------

def test_nested_yaml_is_flattened_with_lines():
    warnings: list[str] = []
    entries = parse_yaml_conf(NESTED, "/conf/config.yaml", warnings)
    got = {k: (v, line) for k, v, line in entries}
    assert got["execution.checkpointing.interval"] == ("30s", 4)
    assert got["execution.checkpointing.unaligned.enabled"] == ("true", 5)
    assert got["execution.checkpointing.tolerable-failed-checkpoints"] == ("3", 6)
    assert got["state.backend.type"] == ("rocksdb", 7)
    assert got["taskmanager.memory.process.size"] == ("4g", 10)
    assert got["taskmanager.memory.managed.fraction"] == ("0.4", 11)


def test_nested_yaml_renders_values_like_flink_logs_them():
    got = {k: v for k, v, _ in parse_yaml_conf(NESTED, "/conf/config.yaml")}
    assert got["pipeline.jars"] == "[a.jar, b.jar]"
    # YAML flow text as Flink's emitter writes it: ':' inside a flow item gets quoted
    assert got["env.java.opts.all"] == "['-XX:+UseG1GC', -Dx=y]"
    assert yaml.safe_load(got["env.java.opts.all"]) == ["-XX:+UseG1GC", "-Dx=y"]
    # YAML 1.2 core schema: 'yes' and dates are strings, hex is an integer
    assert got["kubernetes.label"] == "yes"
    assert got["release.date"] == "2024-01-01"
    assert got["hex.value"] == "16"
    assert got["quoted.number"] == "5"
    assert "null.value" not in got


def test_nested_yaml_null_leaf_is_a_warning():
    warnings: list[str] = []
    parse_yaml_conf(NESTED, "/conf/config.yaml", warnings)
    assert warnings == ["/conf/config.yaml:20: null.value has no value, skipped"]


def test_nested_and_dotted_forms_of_one_key_later_wins():
    text = "execution.checkpointing.interval: 10s\nexecution:\n  checkpointing:\n    interval: 20s\n"
    warnings: list[str] = []
    entries = parse_yaml_conf(text, "config.yaml", warnings)
    assert entries == [("execution.checkpointing.interval", "10s", 1), ("execution.checkpointing.interval", "20s", 4)]
    assert config_from_text(text, "config.yaml").get("execution.checkpointing.interval") == "20s"
    assert warnings and "overrides line 1" in warnings[0]


@pytest.mark.parametrize("text, line, problem", [
    ("a: 1\nb: c: d\n", 2, "mapping values are not allowed here"),
    ("a: 1\nb:\n  c: 1\n d: 2\n", 4, "expected <block end>"),
    ("a:\n\tb: 1\n", 2, "found character '\\t'"),
    ("a: [1, 2\n", 2, ""),
])
def test_broken_yaml_names_file_and_line(text, line, problem):
    with pytest.raises(ConfigError) as excinfo:
        parse_yaml_conf(text, "/x/config.yaml")
    message = str(excinfo.value)
    assert message.startswith(f"broken YAML in /x/config.yaml line {line}: ")
    assert problem in message
    assert "\n" not in message


def test_yaml_document_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"/x/config.yaml line 1: .*mapping"):
        parse_yaml_conf("- a\n- b\n", "/x/config.yaml")


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        config_from_text("a: b: c\n", "config.yaml")


def test_empty_yaml():
    assert parse_yaml_conf("", "config.yaml") == []
    assert parse_yaml_conf("# nothing here\n\n", "config.yaml") == []
    assert len(config_from_text("", "config.yaml")) == 0


def test_detect_conf_format():
    assert detect_conf_format("a.b: 1\n", "/opt/flink/conf/flink-conf.yaml") == "flat"
    assert detect_conf_format("a.b: 1\n", "/opt/flink/conf/config.yaml") == "nested"
    assert detect_conf_format("a:\n  b: 1\n", "flink-config-configmap.yaml") == "nested"
    assert detect_conf_format("a.b: 1\nc: d\n", "dump.yaml") == "flat"
    assert detect_conf_format("a: b: c\n", "dump.yaml") == "flat"


def test_docstring_samples_hold():
    assert doctest.testmod(config_module).failed == 0


# --- sources and precedence ------------------------------------------------------------------------------------------

def test_config_source_str():
    assert str(ConfigSource("file", "/etc/flink/flink-conf.yaml", 12)) == "flink-conf.yaml:12"
    assert str(ConfigSource("log", "/x/jm.log", 109)) == "log /x/jm.log:109"
    assert str(ConfigSource("dynamic", "/x/tm.log", 80)) == "-D on /x/tm.log:80"
    assert str(ConfigSource("override")) == "--set override"
    assert str(ConfigSource("dynamic", "/x/tm.log", 80, "-D")) == "-D on /x/tm.log:80"
    assert str(ConfigSource("dynamic", detail="FLINK_PROPERTIES")) == "-D (FLINK_PROPERTIES)"
    assert str(ConfigSource("override", detail="--set")) == "--set override"
    assert str(ConfigSource("rest", "/x/rest/jobs/j/checkpoints-config.json")) == "REST /x/rest/jobs/j/checkpoints-config.json"
    with pytest.raises(ValueError):
        ConfigSource("jmx")


def test_precedence_file_log_dynamic_override():
    cfg = EffectiveConfig()
    key = "taskmanager.memory.process.size"
    cfg.add(key, "1g", ConfigSource("override"))
    cfg.add(key, "2g", ConfigSource("dynamic", "/x/tm.log", 80))
    cfg.add(key, "3g", ConfigSource("log", "/x/tm.log", 50))
    cfg.add(key, "4g", ConfigSource("file", "/conf/flink-conf.yaml", 3))
    assert cfg.get(key) == "1g"
    assert [cv.value for cv in cfg.history(key)] == ["1g", "2g", "3g", "4g"]

    cfg = EffectiveConfig()
    cfg.add(key, "4g", ConfigSource("file", "/conf/flink-conf.yaml", 3))
    assert cfg.lookup(key).source.kind == "file"
    cfg.add(key, "3g", ConfigSource("log", "/x/tm.log", 50))
    assert cfg.get(key) == "3g"
    cfg.add(key, "2g", ConfigSource("dynamic", "/x/tm.log", 80))
    assert cfg.get(key) == "2g"
    cfg.add(key, "2.5g", ConfigSource("log", "/x/tm2.log", 50))
    assert cfg.get(key) == "2g"
    # what a pulled job's REST documents say it ran with outranks -D; only the user's --set beats it
    cfg.add(key, "1.5g", ConfigSource("rest", "/x/rest/jobs/j/checkpoints-config.json"))
    cfg.add(key, "1.7g", ConfigSource("dynamic", "/x/tm.log", 81))
    assert cfg.get(key) == "1.5g"
    cfg.add(key, "1g", ConfigSource("override"))
    assert cfg.get(key) == "1g"
    assert str(cfg.lookup(key).source) == "--set override"


def test_same_rank_later_add_wins():
    cfg = EffectiveConfig()
    cfg.add("parallelism.default", "2", ConfigSource("log", "/x/jm.log", 10))
    cfg.add("parallelism.default", "3", ConfigSource("log", "/x/jm.log", 90))
    assert cfg.get("parallelism.default") == "3"
    assert cfg.lookup("parallelism.default").source.line == 90


# --- alias-aware lookups ---------------------------------------------------------------------------------------------

def test_old_name_stored_new_name_asked_and_vice_versa():
    cfg = EffectiveConfig()
    cfg.add("state.backend.local-recovery", "true", ConfigSource("file", "flink-conf.yaml", 4))
    cfg.add("pekko.ask.timeout", "30 s", ConfigSource("log", "jm.log", 20))
    assert cfg.get("execution.state-recovery.from-local") == "true"
    assert cfg.lookup("execution.state-recovery.from-local").key == "state.backend.local-recovery"
    assert cfg.get("akka.ask.timeout") == "30 s"
    assert cfg.get_duration_ms("akka.ask.timeout") == 30_000
    assert "execution.state-recovery.from-local" in cfg
    assert "akka.ask.timeout" in cfg
    assert "state.backend.type" not in cfg
    assert len(cfg) == 2


def test_newer_name_wins_when_both_present():
    cfg = EffectiveConfig()
    cfg.add("execution.state-recovery.from-local", "false", ConfigSource("file", "config.yaml", 2))
    # a deprecated spelling does not override the newer one, even from a higher-ranked source (Flink's rule)
    cfg.add("state.backend.local-recovery", "true", ConfigSource("dynamic", "tm.log", 5))
    assert cfg.get("state.backend.local-recovery") == "false"
    assert cfg.get_bool("execution.state-recovery.from-local") is False
    assert [cv.key for cv in cfg.history("state.backend.local-recovery")] == [
        "execution.state-recovery.from-local", "state.backend.local-recovery"]


def test_fallback_option_reads_local_recovery():
    cfg = EffectiveConfig()
    cfg.add("state.backend.local-recovery", "true", ConfigSource("file", "flink-conf.yaml", 1))
    assert cfg.get("execution.checkpointing.local-backup.enabled") == "true"
    cfg.add("execution.checkpointing.local-backup.enabled", "false", ConfigSource("file", "flink-conf.yaml", 2))
    assert cfg.get("execution.checkpointing.local-backup.enabled") == "false"
    assert cfg.get("execution.state-recovery.from-local") == "true"


# --- typed getters and views -----------------------------------------------------------------------------------------

def test_typed_getters():
    cfg = config_from_text(
        "a.bool: TRUE\na.int: 42\na.float: 0.25\na.size: 1728m\na.duration: 10 min\n"
        "bad.bool: maybe\nbad.int: 4x\nbad.size: lots\nbad.duration: soon\n", "flink-conf.yaml")
    assert cfg.get_bool("a.bool") is True
    assert cfg.get_int("a.int") == 42
    assert cfg.get_float("a.float") == 0.25
    assert cfg.get_bytes("a.size") == 1728 * 1024 * 1024
    assert cfg.get_duration_ms("a.duration") == 600_000
    for getter in (cfg.get_bool, cfg.get_int, cfg.get_float, cfg.get_bytes, cfg.get_duration_ms):
        assert getter("missing.key") is None
    assert cfg.get_bool("bad.bool") is None
    assert cfg.get_int("bad.int") is None
    assert cfg.get_float("bad.bool") is None
    assert cfg.get_bytes("bad.size") is None
    assert cfg.get_duration_ms("bad.duration") is None
    assert cfg.get("missing.key", "fallback") == "fallback"


def test_items_sorted_and_to_dict_redacted():
    cfg = EffectiveConfig()
    cfg.add("s3.secret-key", "hunter2", ConfigSource("file", "/c/flink-conf.yaml", 7))
    cfg.add("b.key", "'quoted'", ConfigSource("dynamic", "/x/tm.log", 3))
    cfg.add("a.key", "1", ConfigSource("log", "/x/jm.log", 9))
    assert [k for k, _ in cfg.items()] == ["a.key", "b.key", "s3.secret-key"]
    assert dict(cfg.items())["b.key"].value == "quoted"
    redacted = cfg.to_dict()
    assert redacted == {
        "a.key": {"value": "1", "source": "log /x/jm.log:9"},
        "b.key": {"value": "quoted", "source": "-D on /x/tm.log:3"},
        "s3.secret-key": {"value": "******", "source": "flink-conf.yaml:7"},
    }
    assert "hunter2" not in repr(redacted)
    # The secret never entered the model: even the unredacted view has only the mask.
    assert cfg.to_dict(redacted=False)["s3.secret-key"]["value"] == "******"


def test_nested_config_from_text():
    cfg = config_from_text(NESTED, "/opt/flink/conf/config.yaml")
    assert cfg.file_format == "nested"
    assert cfg.get_bytes("taskmanager.memory.process.size") == 4 << 30
    assert cfg.get_bool("execution.checkpointing.unaligned") is True
    assert cfg.get_int("execution.checkpointing.tolerable-failed-checkpoints") == 3
    assert re.fullmatch(r"config\.yaml:\d+", str(cfg.lookup("state.backend").source))


# ---------------------------------------------------------------------------------------------- very many keys

MANY = 100_000


def test_a_flat_file_with_very_many_keys_is_read_up_to_the_limit_with_a_warning():
    text = "".join(f"custom.key{i}: {i}\n" for i in range(MANY))
    warnings: list[str] = []
    entries = parse_flat_conf(text, "flink-conf.yaml", warnings)
    assert len(entries) == config_module.MAX_CONFIG_KEYS
    assert entries[-1] == (f"custom.key{config_module.MAX_CONFIG_KEYS - 1}", str(config_module.MAX_CONFIG_KEYS - 1),
                           config_module.MAX_CONFIG_KEYS)
    assert warnings == [f"flink-conf.yaml:{config_module.MAX_CONFIG_KEYS + 1}: more than "
                        f"{config_module.MAX_CONFIG_KEYS:,} configuration keys; the rest of the file is ignored"]


@pytest.mark.slow  # ruamel composes ten thousand entries
def test_a_yaml_file_with_very_many_keys_is_read_up_to_the_limit_with_a_warning():
    # block lists: every value spans lines, which once made each entry rescan the whole text
    text = "".join(f"custom{i}:\n  - a\n  - b\n" for i in range(MANY))
    warnings: list[str] = []
    entries = parse_yaml_conf(text, "config.yaml", warnings)
    assert len(entries) == config_module.MAX_CONFIG_KEYS
    assert entries[:2] == [("custom0", "[a, b]", 1), ("custom1", "[a, b]", 4)]
    assert [w for w in warnings if "more than" in w] == [
        f"config.yaml:{3 * config_module.MAX_CONFIG_KEYS + 1}: more than {config_module.MAX_CONFIG_KEYS:,} "
        f"configuration keys; the rest of the file is ignored"]


def test_a_nested_map_of_very_many_keys_is_cut_inside_the_map():
    text = "custom:\n" + "".join(f"  key{i}: {i}\n" for i in range(MANY))
    entries = parse_yaml_conf(text, "config.yaml", [])
    # the map's own key counts too
    assert len(entries) == config_module.MAX_CONFIG_KEYS - 1 and entries[-1][0] == f"custom.key{len(entries) - 1}"


def test_the_effective_configuration_holds_a_bounded_number_of_keys():
    cfg = EffectiveConfig()
    for i in range(config_module.MAX_EFFECTIVE_KEYS + 500):
        cfg.add(f"custom.key{i}", "1", ConfigSource("log", "/x/jm.log", i + 1))
    cfg.add("custom.key0", "2", ConfigSource("dynamic", "/x/jm.log", 1))  # a key it holds still changes
    assert len(cfg) == config_module.MAX_EFFECTIVE_KEYS and cfg.ignored_keys == 500
    assert cfg.get("custom.key0") == "2"
