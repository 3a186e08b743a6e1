"""The options each release declares, read from the generated data file."""
from flink_runbooks.vocabulary import options


def test_every_release_declares_the_options_runbooks_patch():
    for key in ("execution.checkpointing.timeout", "taskmanager.memory.process.size", "restart-strategy.type"):
        assert set(options.KEYS[key]) == set(options.RELEASES), key


def test_a_renamed_option_is_declared_by_the_releases_that_read_it():
    assert options.KEYS["execution.checkpointing.dir"] == ("1.20", "2.3")
    assert "state.backend.type" in options.KEYS and "no.such.option" not in options.KEYS
