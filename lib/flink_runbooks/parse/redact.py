"""Secret redaction, applied where values enter the model (config entries, the config file text kept for diffs,
logged and dynamic properties, log records, evidence), never on rendered output: a redaction pass over serialised
JSON or finished text can eat a closing quote or mangle an ordinary word.

Keys are judged like Flink's ``GlobalConfiguration.isSensitive`` (a key is sensitive when it contains one of
:data:`FLINK_SENSITIVE_KEYS`, case-insensitively; the list of Flink 2.1), extended with the Kafka client, database and
cloud credential names seen in incident bundles (``basic.auth.user.info``, ``pwd``, ``AccountKey``, cookies).
Values are judged by their shape wherever they appear: ``key=value`` / ``key: value`` / ``key, value`` pairs whose
key is sensitive (``-Djavax.net.ssl.keyStorePassword=...``, ``password=`` in query strings and JDBC URLs, ODBC
``Pwd=...;``), ``"password": "..."`` in JSON, JAAS ``password="..."`` and ``user_<name>="..."`` options, URL
user-info (``s3://KEY:SECRET@bucket``), Oracle ``jdbc:oracle:thin:user/password@host``, ``Authorization:
Bearer/Basic ...``, ``Cookie:`` / ``Set-Cookie:`` headers, signatures of signed URLs (Azure SAS ``sig=``, S3
``X-Amz-Signature`` / ``X-Amz-Credential``, ``Signature=``), ZooKeeper digest credentials (``addauth digest
user:password``, ``digest:user:...``), PEM private keys (markers kept, key material masked; also key lines whose
markers a log reader dropped, and over several lines with :func:`redact_lines`) and AWS access key ids. Keys that
only say where credentials come from (``basic.auth.credentials.source``, ``fs.s3a.aws.credentials.provider``) stay.
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
    "credential",
    "passphrase",  # ssl.key.passphrase, PEM key passphrases
    "private.key",
    "private-key",
    "private_key",
    "privatekey",
    "keystore.key",
    "ssl.key.password",
    "pwd",  # ODBC / JDBC Pwd=...;
    # Kafka / Confluent Schema Registry "user:password" (basic.auth.user.info); Flink's basic-auth only covers the
    # hyphenated spelling.
    "user.info",
    "user-info",
    "user_info",
    "userinfo",
    "accountkey",  # Azure storage connection strings: AccountKey=...
    "sharedaccesskey",  # Azure Event Hubs / Service Bus: SharedAccessKey=...
    "cookie",
    "superdigest",  # -Dzookeeper.DigestAuthenticationProvider.superDigest=super:...
)
# Keys that contain a fragment above but name where credentials come from (a class, USER_INFO), a switch, or the
# names of Kubernetes Secrets, not a credential.
_HARMLESS_KEY = re.compile(r"(?i)(?:credentials?[._-]?(?:source|provider)s?|delegation\.tokens\.enabled|"
                           r"fetch\.delegation-token|image\.pull-secrets)[\"']?$")

_KEY_CHARS = r"[A-Za-z0-9_.\-]"
_FRAGMENTS = "|".join(re.escape(f) for f in sorted(SENSITIVE_KEY_FRAGMENTS, key=len, reverse=True))
# A sensitive key followed by its value (tried only where a key can start: inside a long token every position would be
# tried against every fragment): key=value, key = value, key: value and Flink's "key, value" log form.
# The value runs to whitespace, a list or query separator or a quote; quoted values are taken whole, and a JAAS
# config (which contains spaces) runs to its terminating semicolon.
_PAIR = re.compile(
    rf"(?<!{_KEY_CHARS})(?P<key>{_KEY_CHARS}*(?i:{_FRAGMENTS}){_KEY_CHARS}*)(?:(?P<sep>\s*[=:]\s*)"
    rf"(?P<value>\"[^\"]*\"|'[^']*'|\[[^\]\n]*\]|\{{[^}}\n]*\}}|(?:[^\s,;}}\]&\"'<>]|,(?!\s))+(?:\s+required\b[^;]*;?)?)"
    # Flink's logged "key, value": the value is the rest of the line (it may hold spaces and commas); it stops at
    # '<' so that a safety pass over a finished page never eats its markup.
    rf"|(?P<lsep>,[ \t]+)(?P<lvalue>[^\n<]+))"
)
# JSON / YAML flow form: "password": "..." (the key is quoted, the value may be).
_QUOTED_PAIR = re.compile(
    rf"(?P<key>[\"'][^\"'\n]*(?i:{_FRAGMENTS})[^\"'\n]*[\"'])(?P<sep>\s*[:=]\s*)"
    # JSON inside a JSON string (a logged request body) escapes its quotes: \"password\":\"...\"
    rf"(?P<value>\\\"(?:[^\"\\\n]|\\[^\"])*\\\"|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s,;}}\]&\"'<>]+)"
)
_JAAS_OPTION = re.compile(r"(?P<key>password|username|secret|token)\s*=\s*(?P<value>\"[^\"]*\"|'[^']*'|[^\s;]+)", re.I)
_AWS_ACCESS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AROA|AIDA|AGPA|ANPA)[0-9A-Z]{16}(?![A-Z0-9])")
# scheme://user:password@host -> scheme://******@host (the user part of a cloud URL is an access key).
# The password runs to the last '@' of the address: cloud secret keys hold '/' and passwords may hold '@'.
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<info>[^/\s@:\"'<>]*:[^\s\"'<>]+)@")
_AUTHORIZATION = re.compile(
    # the scheme may already be starred out: a key glued in front ("PWDAuthorization: Basic …") masked it as a value
    r"(?i)(?P<head>(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|negotiate|\*{6})\s+)?"
    r"|\b(?:bearer|basic)\s+(?=[A-Za-z0-9._~+/=\-]{12,})(?=[A-Za-z0-9._~+/=\-]*?(?-i:[0-9._~+/=\-]|[a-z][A-Z])))(?P<value>[A-Za-z0-9._~+/=\-]+)"
)

# Cookie: a=b; c=d / Set-Cookie: a=b; Path=/: every name=value pair of the header (later pairs need their "=", so a
# sentence after a semicolon stays).
_COOKIE = re.compile(
    r"(?i)(?P<head>(?:set-)?cookie2?[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<value>[^\s;,\"'<>\\]+(?:;[ \t]*[^\s;,\"'<>\\=]+=[^\s;,\"'<>\\]*)*)"
)
# jdbc:oracle:thin:user/password@host (also @//host and the oci driver): the user stays, the password goes.
_ORACLE_URL = re.compile(
    r"(?i)(?P<head>jdbc:oracle:[a-z0-9]+:[^/\s@:\"'<>()]*/)(?P<value>\"[^\"\n]*\"|[^@\s\"'<>]+)(?=@)"
)
# The signature of a signed URL (Azure SAS sig=, S3 presigned X-Amz-Signature, GCS and S3 v2 Signature=) and the
# S3 credential scope; the other SAS parameters (sv, se, sp, ...) say nothing secret and stay.
_SIGNED_URL_PARAM = re.compile(
    r"(?i)(?<![\w.-])(?P<key>sig|signature|x-amz-signature|x-amz-credential|x-goog-signature)"
    r"=(?P<value>[^\s&\"'<>;,#]+)"
)
# ZooKeeper's digest scheme: "addauth digest user:password", an ACL id "digest:user:hash" (or 'digest,'user:hash as
# getAcl prints it), addAuthInfo("digest", "user:password".getBytes()). The user stays.
_ZK_DIGEST = re.compile(
    r"(?i)(?P<head>digest(?:[\"']?\s*,\s*[\"']?|:|[ \t]+)(?P<user>[\w.@-]+):)(?P<value>[^\s\"'<>,;)]+)"
)
# JAAS options that hold a user's password: user_<name>="..." (ZooKeeper's DigestLoginModule and Kafka's
# PlainLoginModule on the server side), often on a line of their own in a JAAS file.
_JAAS_USER_OPTION = re.compile(r"(?<![\w.-])(?P<key>user_[\w.-]+)(?P<sep>\s*=\s*)(?P<value>\"[^\"]*\"|'[^']*')")
# PEM private keys: the markers stay, the key material between them goes. Without its end marker (a record cut
# short) everything that can belong to the key goes: base64 lines and the Proc-Type / DEK-Info headers.
_PEM_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY_CHAR = r"(?:[A-Za-z0-9+/=:,.\s-]|\\[rnt])"
_PEM = re.compile(
    rf"(?P<begin>{_PEM_BEGIN})(?:(?P<body>{_PEM_BODY_CHAR}*?)(?P<end>{_PEM_END})|(?P<rest>{_PEM_BODY_CHAR}*))"
)
_PEM_END_RE = re.compile(_PEM_END)
_PEM_BEGIN_RE = re.compile(_PEM_BEGIN)
# A line of a key: base64, or a Proc-Type / DEK-Info header of a legacy encrypted key.
_KEY_LINE = re.compile(r"\s*(?:#+\s*)?[A-Za-z0-9+/=:,. -]*\s*")
_LINE_LEAD = re.compile(r"\s*(?:#+\s*)?")
_KEY_LAST_LINE = re.compile(r"[A-Za-z0-9+/]{1,64}={0,2}")
_LEADING_SEPARATORS = re.compile(r"(?:\s|\\[rnt])*")
_TRAILING_SEPARATORS = re.compile(r"(?:\s|\\[rnt])*$")
# Key material whose markers a log did not keep: base64 runs of at least a PEM line (64 characters), one after the
# other as PEM lines are (or wrapped wider, joined), then the shorter last line. A run must mix upper and lower case
# and digits (a hex digest does not) and not read as a path.
#
# Base64 that is no key: the plots and fonts of report pages (data: URIs, notebook outputs) - PNG, JPEG, GIF, SVG,
# XML, WebP, WOFF and WOFF2, TrueType.
_NOT_KEY_MATERIAL = ("iVBORw0KGgo", "/9j/", "R0lGOD", "PHN2Zy", "PD94bWwg", "UklGR", "d09G", "AAEAAA")
_B64 = r"[A-Za-z0-9+/]"
_BASE64_RUN = re.compile(rf"(?<!{_B64}){_B64}{{64}}")  # the cheap first look
_KEY_MATERIAL = re.compile(
    rf"(?:(?<=\\[rnt])|(?<![\w+/=.\\-]))(?P<run>{_B64}{{64,}}={{0,2}}(?:(?:\s|\\[rnt])+{_B64}{{64,}}={{0,2}})*)"
    rf"(?P<last>(?:\s|\\[rnt])+{_B64}{{1,63}}={{0,2}})?(?=\\[rnt]|-----|[^\w+/=.\\-]|$)"
)


def is_sensitive_key(key: str) -> bool:
    k = key.lower()
    return any(fragment in k for fragment in SENSITIVE_KEY_FRAGMENTS) and not _HARMLESS_KEY.search(k)


def redact_value(key: str, value: str | None) -> str | None:
    """A configuration value as the model may keep it: masked whole under a sensitive key, otherwise scrubbed of
    credential-shaped parts (``env.java.opts.all: -Djavax.net.ssl.keyStorePassword=...``, URLs with user-info)."""
    if value is None:
        return None
    return REDACTED if is_sensitive_key(key) else redact_text(value)


def _is_redacted(value: str) -> bool:
    return value.strip("\"'") == REDACTED


def _looks_like_key_material(run: str) -> bool:
    chars = re.sub(r"\s|\\[rnt]|=", "", run)
    return (any(c.isupper() for c in chars) and any(c.islower() for c in chars) and any(c.isdigit() for c in chars)
            and not run.startswith("/") and "//" not in run and chars.count("/") * 16 <= len(chars))


def _mask_pem(m: re.Match[str]) -> str:
    body = m.group("body") if m.group("end") is not None else m.group("rest")
    if not body.strip().replace("\\n", "").replace("\\r", "").replace("\\t", ""):
        return m.group(0)  # nothing but separators (already masked, or an empty block)
    lead = _LEADING_SEPARATORS.match(body).group(0)
    trail = _TRAILING_SEPARATORS.search(body).group(0) if m.group("end") is not None else ""
    return m.group("begin") + lead + REDACTED + trail + (m.group("end") or "")


def _is_key_tail(word: str) -> bool:
    """The shorter last line of a key, not the word after it: base64 that a sentence would not hold."""
    return word.endswith("=") or len(word) >= 16 or re.search(r"[0-9+/]", word) is not None


def _mask_key_material(m: re.Match[str]) -> str:
    run, last = m.group("run"), m.group("last") or ""
    if (not _looks_like_key_material(run) or run.startswith(_NOT_KEY_MATERIAL)
            or m.string.endswith("base64,", 0, m.start())):
        return m.group(0)
    last_is_key = bool(last) and _is_key_tail(last.strip().replace("\\n", "").replace("\\r", "").replace("\\t", ""))
    # One run of 64-odd characters inside a sentence is an id (S3's extended request id): a key is several lines,
    # one long joined run, or a line of its own (indented or commented out, perhaps).
    lines = len(re.split(r"(?:\s|\\[rnt])+", run)) + last_is_key
    alone = not re.search(r"[A-Za-z0-9]", m.string[:m.start()] + m.string[m.end():])
    if lines < 2 and len(run) < 128 and not alone:
        return m.group(0)
    return REDACTED if last_is_key else REDACTED + last


def redact_text(text: str | None) -> str | None:
    """Scrub secrets out of free text; everything else is left byte for byte."""
    if not text:
        return text

    def pair(m: re.Match[str]) -> str:
        sep, value = (m.group("sep"), m.group("value")) if m.group("sep") is not None else (m.group("lsep"), m.group("lvalue"))
        if _is_redacted(value) or _HARMLESS_KEY.search(m.group("key")):
            return m.group(0)
        if sep.startswith(",") and not re.search(r"[._-]", m.group("key")):
            # "key, value" is Flink's logged form of a configuration key, which always has a separator in its name;
            # a bare word before a comma is prose ("refused credentials, a missing ACL").
            return m.group(0)
        return f"{m.group('key')}{sep}{REDACTED}"

    def quoted_pair(m: re.Match[str]) -> str:
        # JSON and YAML flow text keeps its quotes, so it still parses.
        if _is_redacted(m.group("value")) or _HARMLESS_KEY.search(m.group("key")):
            return m.group(0)
        value = m.group("value")
        quote = '\\"' if value.startswith('\\"') else value[0] if value[0] in "\"'" else ""
        return f"{m.group('key')}{m.group('sep')}{quote}{REDACTED}{quote}"

    def keep_head(m: re.Match[str]) -> str:
        return m.group(0) if _is_redacted(m.group("value")) else m.group("head") + REDACTED

    def quoted_value(m: re.Match[str]) -> str:
        value = m.group("value")
        return m.group(0) if _is_redacted(value) else f"{m.group('key')}{m.group('sep')}{value[0]}{REDACTED}{value[0]}"

    def zk_digest(m: re.Match[str]) -> str:
        # "digest sha256:..." is an image or file digest, not a ZooKeeper user.
        if _is_redacted(m.group("value")) or re.fullmatch(r"(?i)sha-?\d*|md5", m.group("user")):
            return m.group(0)
        return m.group("head") + REDACTED

    def jaas_line(line: str) -> str:
        # A JAAS config printed on its own line (Kafka's ConsumerConfig dump) keeps its module name only.
        if "loginmodule" in line.lower() and "=" in line:
            return _JAAS_OPTION.sub(lambda m: f"{m.group('key')}={REDACTED}" if m.group("key").lower() != "username"
                                    else m.group(0), line)
        return line

    lowered = text.lower()
    out = text
    # The patterns are costly on long lines and almost never match: look for their literal parts first.
    if "PRIVATE KEY" in out:
        out = _PEM.sub(_mask_pem, out)
    if len(out) >= 64 and any(len(word) >= 64 for word in out.split()) and _BASE64_RUN.search(out):
        out = _KEY_MATERIAL.sub(_mask_key_material, out)
    if "loginmodule" in lowered:
        out = "\n".join(jaas_line(line) for line in out.split("\n"))
    if "user_" in lowered and "=" in out:
        out = _JAAS_USER_OPTION.sub(quoted_value, out)
    if "cookie" in lowered:
        # Before the key pairs: a pair would take only the first cookie of the header.
        out = _COOKIE.sub(keep_head, out)
    if any(fragment in lowered for fragment in SENSITIVE_KEY_FRAGMENTS):
        if '"' in out or "'" in out:
            out = _QUOTED_PAIR.sub(quoted_pair, out)
        out = _PAIR.sub(pair, out)
    if "://" in out and "@" in out:
        out = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", out)
    if "jdbc:oracle:" in lowered:
        out = _ORACLE_URL.sub(keep_head, out)
    if "sig=" in lowered or "signature=" in lowered or "x-amz-credential=" in lowered:
        out = _SIGNED_URL_PARAM.sub(lambda m: m.group(0) if _is_redacted(m.group("value"))
                                    else f"{m.group('key')}={REDACTED}", out)
    if "digest" in lowered:
        out = _ZK_DIGEST.sub(zk_digest, out)
    if "authorization" in lowered or "bearer" in lowered or "basic" in lowered:
        out = _AUTHORIZATION.sub(lambda m: m.group(0) if _is_redacted(m.group("value")) else m.group("head") + REDACTED, out)
    if any(prefix in out for prefix in ("AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA")):
        out = _AWS_ACCESS_KEY_ID.sub(REDACTED, out)
    return out


def redact_lines(lines: list[str]) -> list[str]:
    """The lines of one record through :func:`redact_text`, and the lines of a private key masked whole: a PEM key
    printed over several lines shows on none of them alone that it is a key (its last line is short base64)."""
    out: list[str] = []
    inside = ""  # "pem" after a begin marker, "bare" after a line of key material whose marker was not kept
    for line in lines:
        end = _PEM_END_RE.search(line) if inside else None
        material = line[:end.start()] if end else line
        indent = _LINE_LEAD.match(material).group(0)  # kept: indentation and a comment marker
        content = material[len(indent):].strip()
        if end or (inside == "pem" and _KEY_LINE.fullmatch(material)) or (
                inside == "bare" and _KEY_LAST_LINE.fullmatch(content) and _is_key_tail(content)):
            out.append((indent + REDACTED if content else material) + (line[end.start():] if end else ""))
            # A bare key ends with its first line shorter than a full one.
            inside = "" if end or (inside == "bare" and len(content) < 64) else inside
            continue
        begin = _PEM_BEGIN_RE.search(line)
        redacted = redact_text(line) or line
        if begin and not _PEM_END_RE.search(line, begin.end()):
            inside = "pem"
        elif redacted != line and _KEY_MATERIAL.fullmatch(line[len(_LINE_LEAD.match(line).group(0)):].strip()):
            inside = "bare"
        else:
            inside = ""
        out.append(redacted)
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
