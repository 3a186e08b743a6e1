"""The options each release declares, read from the generated data file."""
from flink_runbooks.vocabulary import options


def test_every_release_declares_the_options_runbooks_patch():
    for key in ("execution.checkpointing.timeout", "taskmanager.memory.process.size", "restart-strategy.type"):
        assert set(options.KEYS[key]) == set(options.RELEASES), key


def test_a_renamed_option_is_declared_by_the_releases_that_read_it():
    assert options.KEYS["execution.checkpointing.dir"] == ("1.20", "2.3")
    assert "state.backend.type" in options.KEYS and "no.such.option" not in options.KEYS


def test_option_types_follow_each_release_jar():
    # heartbeat.timeout is a plain number of milliseconds up to 1.19 (longType) and a Duration from 1.20 on
    assert options.option_type("heartbeat.timeout", (1, 13, 6)) == "number"
    assert options.option_type("heartbeat.timeout", (1, 19, 3)) == "number"
    assert options.option_type("heartbeat.timeout", (1, 20, 3)) == "duration"
    assert options.option_type("execution.checkpointing.interval", (1, 17, 2)) == "duration"
    assert options.option_type("taskmanager.memory.process.size", (2, 3, 0)) == "memory size"
    assert options.option_type("state.backend.type", (2, 3, 0)) is None  # a string: not a number, duration or size
