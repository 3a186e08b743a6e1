"""Secret redaction, applied where values enter the model (config entries, the config file text kept for diffs,
logged and dynamic properties, log records, evidence), never on rendered output: a redaction pass over serialised
JSON or finished text can eat a closing quote or mangle an ordinary word.

Keys are judged like Flink's ``GlobalConfiguration.isSensitive`` (a key is sensitive when it contains one of
:data:`FLINK_SENSITIVE_KEYS`, case-insensitively; the list of Flink 2.1), extended with the Kafka client and cloud
credential names seen in incident bundles. Values are judged by their shape wherever they appear: ``key=value`` /
``key: value`` / ``key, value`` pairs whose key is sensitive (``-Djavax.net.ssl.keyStorePassword=...``, ``password=``
in query strings and JDBC URLs), ``"password": "..."`` in JSON, JAAS ``password="..."`` options, URL user-info
(``s3://KEY:SECRET@bucket``), ``Authorization: Bearer/Basic ...`` and AWS access key ids.
"""
from __future__ import annotations

import re
from typing import Any

REDACTED = "******"

# org.apache.flink.configuration.GlobalConfiguration.SENSITIVE_KEYS, Flink 2.1.0.
FLINK_SENSITIVE_KEYS = (
    "password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params", "service-key", "token",
    "basic-auth", "jaas.config", "http-headers",
)

SENSITIVE_KEY_FRAGMENTS = FLINK_SENSITIVE_KEYS + (
    "passwd",
    "api_key",
    "access.key",
    "access-key",
    "accesskey",
    "access_key",
    "secret.key",
    "credentials",
    "private.key",
    "private-key",
    "keystore.key",
    "ssl.key.password",
)

_KEY_CHARS = r"[A-Za-z0-9_.\-]"
_FRAGMENTS = "|".join(re.escape(f) for f in sorted(SENSITIVE_KEY_FRAGMENTS, key=len, reverse=True))
# A sensitive key followed by its value: key=value, key = value, key: value and Flink's "key, value" log form.
# The value runs to whitespace, a list or query separator or a quote; quoted values are taken whole, and a JAAS
# config (which contains spaces) runs to its terminating semicolon.
_PAIR = re.compile(
    rf"(?P<key>{_KEY_CHARS}*(?i:{_FRAGMENTS}){_KEY_CHARS}*)(?P<sep>\s*[=:]\s*|,\s+)"
    rf"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;}}\]&\"'<>]+(?:\s+required\b[^;]*;?)?)"
)
# JSON / YAML flow form: "password": "..." (the key is quoted, the value may be).
_QUOTED_PAIR = re.compile(
    rf"(?P<key>[\"'][^\"'\n]*(?i:{_FRAGMENTS})[^\"'\n]*[\"'])(?P<sep>\s*[:=]\s*)"
    rf"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s,;}}\]&\"'<>]+)"
)
_JAAS_OPTION = re.compile(r"(?P<key>password|username|secret|token)\s*=\s*(?P<value>\"[^\"]*\"|'[^']*'|[^\s;]+)", re.I)
_AWS_ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AROA|AIDA|AGPA|ANPA)[0-9A-Z]{16}(?![A-Z0-9])")
# scheme://user:password@host -> scheme://******@host (the user part of a cloud URL is an access key).
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<info>[^/\s@:\"'<>]*:[^/\s@\"'<>]+)@")
_AUTHORIZATION = re.compile(
    r"(?i)(?P<head>(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|negotiate)\s+)?"
    r"|\b(?:bearer|basic)\s+(?=[A-Za-z0-9._~+/=\-]{12,})(?=[A-Za-z0-9._~+/=\-]*?(?-i:[0-9._~+/=\-]|[a-z][A-Z])))(?P<value>[A-Za-z0-9._~+/=\-]+)"
)


def is_sensitive_key(key: str) -> bool:
    k = key.lower()
    return any(fragment in k for fragment in SENSITIVE_KEY_FRAGMENTS)


def redact_value(key: str, value: str | None) -> str | None:
    """A configuration value as the model may keep it: masked whole under a sensitive key, otherwise scrubbed of
    credential-shaped parts (``env.java.opts.all: -Djavax.net.ssl.keyStorePassword=...``, URLs with user-info)."""
    if value is None:
        return None
    return REDACTED if is_sensitive_key(key) else redact_text(value)


def _is_redacted(value: str) -> bool:
    return value.strip("\"'") == REDACTED


def redact_text(text: str | None) -> str | None:
    """Scrub secrets out of free text; everything else is left byte for byte."""
    if not text:
        return text

    def pair(m: re.Match[str]) -> str:
        if _is_redacted(m.group("value")):
            return m.group(0)
        if m.group("sep").startswith(",") and not re.search(r"[._-]", m.group("key")):
            # "key, value" is Flink's logged form of a configuration key, which always has a separator in its name;
            # a bare word before a comma is prose ("refused credentials, a missing ACL").
            return m.group(0)
        return f"{m.group('key')}{m.group('sep')}{REDACTED}"

    def quoted_pair(m: re.Match[str]) -> str:
        # JSON and YAML flow text keeps its quotes, so it still parses.
        if _is_redacted(m.group("value")):
            return m.group(0)
        quote = m.group("value")[0] if m.group("value")[0] in "\"'" else ""
        return f"{m.group('key')}{m.group('sep')}{quote}{REDACTED}{quote}"

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
        if '"' in out or "'" in out:
            out = _QUOTED_PAIR.sub(quoted_pair, out)
        out = _PAIR.sub(pair, out)
    if "://" in out and "@" in out:
        out = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", out)
    if "authorization" in lowered or "bearer" in lowered or "basic" in lowered:
        out = _AUTHORIZATION.sub(lambda m: m.group(0) if _is_redacted(m.group("value")) else m.group("head") + REDACTED, out)
    if any(prefix in out for prefix in ("AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA")):
        out = _AWS_ACCESS_KEY_ID.sub(REDACTED, out)
    return out


def redact_data(value: Any) -> Any:
    """Every string of a JSON-like structure through :func:`redact_text`, before it is serialised."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_data(v) for v in value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    return value
