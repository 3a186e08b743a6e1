"""Secret redaction for every report, notebook output and published page.

Keys are judged like Flink's ``GlobalConfiguration.isSensitive`` (a key is sensitive when it contains one of the
fragments below, case-insensitively), extended with the Kafka client and cloud credential names seen in incident
bundles. Free text (log lines, stack traces) is scrubbed of ``key=value`` / ``key: value`` / ``key = value`` pairs
whose key is sensitive, of JAAS ``password="..."`` options and of AWS access key ids.
"""
from __future__ import annotations

import re

REDACTED = "******"

SENSITIVE_KEY_FRAGMENTS = (
    "password",
    "passwd",
    "secret",
    "jaas.config",
    "fs.azure.account.key",
    "apikey",
    "api-key",
    "api_key",
    "access.key",
    "access-key",
    "accesskey",
    "access_key",
    "secret.key",
    "auth-params",
    "service-key",
    "token",
    "basic-auth",
    "credentials",
    "private.key",
    "private-key",
    "keystore.key",
    "ssl.key.password",
    "http-headers",
)

_KEY_CHARS = r"[A-Za-z0-9_.\-]"
_FRAGMENTS = "|".join(re.escape(f) for f in sorted(SENSITIVE_KEY_FRAGMENTS, key=len, reverse=True))
# A sensitive key followed by its value: key=value, key = value, key: value and Flink's "key, value" log form.
# The value runs to whitespace, a list separator or a closing quote/brace; quoted values are taken whole, and a
# JAAS config (which contains spaces) runs to its terminating semicolon.
_PAIR = re.compile(
    rf"(?P<key>{_KEY_CHARS}*(?i:{_FRAGMENTS}){_KEY_CHARS}*)(?P<sep>\s*[=:]\s*|,\s+)"
    rf"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;}}\]]+(?:\s+required\b[^;]*;?)?)"
)
_JAAS_OPTION = re.compile(r"(?P<key>password|username|secret|token)\s*=\s*(?P<value>\"[^\"]*\"|'[^']*'|[^\s;]+)", re.I)
_AWS_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_BEARER = re.compile(r"(?i)(authorization:\s*bearer\s+|bearer\s+)[A-Za-z0-9._\-]{12,}")


def is_sensitive_key(key: str) -> bool:
    k = key.lower()
    return any(fragment in k for fragment in SENSITIVE_KEY_FRAGMENTS)


def redact_value(key: str, value: str | None) -> str | None:
    if value is None:
        return None
    return REDACTED if is_sensitive_key(key) else value


def redact_text(text: str | None) -> str | None:
    """Scrub secrets out of free text; everything else is left byte for byte."""
    if not text:
        return text

    def pair(m: re.Match[str]) -> str:
        if m.group("value") == REDACTED:
            return m.group(0)
        return f"{m.group('key')}{m.group('sep')}{REDACTED}"

    def jaas_line(line: str) -> str:
        # A JAAS config printed on its own line (Kafka's ConsumerConfig dump) keeps its module name only.
        if "loginmodule" in line.lower() and "=" in line:
            return _JAAS_OPTION.sub(lambda m: f"{m.group('key')}={REDACTED}" if m.group("key").lower() != "username"
                                    else m.group(0), line)
        return line

    lowered = text.lower()
    out = text
    # The patterns are costly on long lines and almost never match: look for their literal parts first.
    if "loginmodule" in lowered:
        out = "\n".join(jaas_line(line) for line in out.split("\n"))
    if any(fragment in lowered for fragment in SENSITIVE_KEY_FRAGMENTS):
        out = _PAIR.sub(pair, out)
    if "akia" in lowered or "asia" in lowered:
        out = _AWS_ACCESS_KEY_ID.sub(REDACTED, out)
    if "bearer" in lowered:
        out = _BEARER.sub(lambda m: m.group(1) + REDACTED, out)
    return out
