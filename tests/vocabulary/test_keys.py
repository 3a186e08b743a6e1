"""Flink's configuration keys across releases: renames, removals, the newest spelling of each option."""
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.versions import FlinkVersion


def test_key_table():
    assert keys.canonical("state.backend") == "state.backend.type"
    assert keys.canonical("taskmanager.network.memory.fraction") == "taskmanager.memory.network.fraction"
    assert keys.canonical("some.unknown.key") == "some.unknown.key"
    assert keys.aliases("state.checkpoints.dir") == (
        "execution.checkpointing.dir", "state.checkpoints.dir", "state.backend.fs.checkpointdir")
    assert keys.aliases("execution.checkpointing.unaligned") == (
        "execution.checkpointing.unaligned.enabled", "execution.checkpointing.unaligned")
    assert keys.aliases("restart-strategy") == ("restart-strategy.type", "restart-strategy")
    assert keys.aliases("state.backend.rocksdb.localdir") == ("state.backend.rocksdb.localdir",)
    assert keys.removed_in("state.backend.local-recovery") == (2, 0)
    assert keys.removed_in("execution.state-recovery.from-local") is None
    assert keys.removed_in("taskmanager.heap.size") == (2, 0)
    assert keys.superseded_by("jobmanager.heap.size") == "jobmanager.memory.process.size"
    # every spelling belongs to exactly one concept
    names = [kn.name for c in keys.CONCEPTS for kn in c.names]
    assert len(names) == len(set(names))


def test_a_key_is_spelled_as_the_release_reads_it():
    assert keys.name_for("execution.checkpointing.dir", FlinkVersion.parse("1.19.1")) == "state.checkpoints.dir"
    assert keys.name_for("state.checkpoints.dir", FlinkVersion.parse("1.20.0")) == "execution.checkpointing.dir"
    assert keys.name_for("state.checkpoints.dir", (2, 0)) == "execution.checkpointing.dir"


def test_the_delegation_token_switch_took_its_name_in_1_17():
    assert keys.name_for("security.delegation.tokens.enabled", (1, 16)) == "security.kerberos.fetch.delegation-token"
    assert keys.name_for("security.kerberos.fetch.delegation-token", (1, 17)) == "security.delegation.tokens.enabled"
    assert keys.name_for("security.delegation.tokens.enabled", (2, 3)) == "security.delegation.tokens.enabled"
    # 2.3 still reads the older spelling as a deprecated key
    assert keys.is_valid_in("security.kerberos.fetch.delegation-token", (2, 3))
    assert keys.canonical("security.keytab") == "security.kerberos.login.keytab"


def test_high_availability_took_its_type_suffix_in_1_17():
    assert keys.name_for("high-availability.type", (1, 16)) == "high-availability"
    assert keys.name_for("high-availability", (1, 20)) == "high-availability.type"
    assert keys.aliases("high-availability") == ("high-availability.type", "high-availability", "recovery.mode")
