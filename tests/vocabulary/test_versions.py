"""The one version type: parsed from what logs and users write, compared with tuples, printed as Flink prints it."""
import pytest
from flink_runbooks.vocabulary.versions import FlinkVersion, minor_text, release_text


@pytest.mark.parametrize("text, parsed", [("1.20.3", (1, 20, 3)), ("1.19-SNAPSHOT", (1, 19)), ("2.0", (2, 0)),
                                          (" 1.18.1 ", (1, 18, 1)), ((1, 17), (1, 17))])
def test_a_release_is_read_from_its_text(text, parsed):
    version = FlinkVersion.parse(text)
    assert version == parsed and isinstance(version, FlinkVersion)


@pytest.mark.parametrize("text", [None, "", "unknown", "v"])
def test_no_release_in_the_text_is_none(text):
    assert FlinkVersion.parse(text) is None


def test_versions_compare_with_plain_tuples_and_print_as_flink_does():
    version = FlinkVersion.parse("1.20.3")
    assert (1, 15) <= version < (2, 0) and version.minor == (1, 20)
    assert str(version) == "1.20.3" and str(version.minor) == "1.20"
    assert release_text((1, 18)) == "1.18" and release_text(None) == ""
    assert minor_text("1.17.2") == "1.17" and minor_text(None) is None


@pytest.mark.parametrize("typed, kept", [("1.18.1", "1.18.1"), ("v2.1", "2.1"), ("1.20", "1.20")])
def test_a_version_a_user_types_is_checked(typed, kept):
    assert FlinkVersion.typed(typed) == kept


@pytest.mark.parametrize("typed", ["1.21", "3.0", "latest", "18"])
def test_a_version_that_is_not_a_flink_release_is_refused_with_a_reason(typed):
    with pytest.raises(ValueError, match="is not a Flink version"):
        FlinkVersion.typed(typed)
