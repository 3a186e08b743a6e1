"""Kerberos credentials that ran out: a ticket (TGT) or a Hadoop delegation token expired, or was never usable.

What fails is the client of an external system (HDFS, HBase, Kafka, ZooKeeper), in the wording of that client:

- Hadoop's token check (``AbstractDelegationTokenSecretManager#checkToken``, returned to the client as a
  ``RemoteException(...SecretManager$InvalidToken)``): ``Token has expired, current time: … expected renewal time:
  …`` and ``Token for real user: , can't be found in cache`` in Hadoop 3.4.1 (hadoop-client-api-3.4.1.jar);
  ``token (HDFS_DELEGATION_TOKEN token 123 for flink) is expired`` / ``… can't be found in cache`` in Hadoop 2.x
  (as quoted in the issue; no Hadoop 2 jar was at hand to check it);
- the JDK's Kerberos (``GSS initiate failed``, ``Failed to find any Kerberos tgt``, ``Unable to obtain password from
  user``; checked in OpenJDK 17's modules) and Hadoop's ``TGT is expired. Aborting renew thread for …``;
- the Kafka client (2.4.1 – 3.8.0): ``An error: (…) occurred when evaluating SASL token received from the Kafka
  Broker. … Kafka Client will go to AUTHENTICATION_FAILED state.`` and ``Could not find a 'KafkaClient' entry in the
  JAAS configuration``; ZooKeeper's client shaded in flink-dist: ``No JAAS configuration section named 'Client' was
  found …`` / ``Client cannot SASL-authenticate because the specified JAAS configuration section 'Client' could not
  be found.``

Flink's side (``KerberosLoginProvider``, ``HadoopModule``, ``DefaultDelegationTokenManager`` of the 1.20.3 and 2.3.0
jars) says how it logged in (``Attempting to login to KDC using principal: … keytab: …`` or ``Attempting to load
user's ticket cache``) and whether anything renews the tokens (``Tokens update task not started because …``). A
login from the ticket cache is never renewed by Flink (only a keytab login starts the TGT renewal task), so the job
dies when the ticket, or a token obtained with it, reaches its lifetime.

``security.delegation.tokens.enabled`` (``security.kerberos.fetch.delegation-token`` before 1.17) contains "token":
Flink's own log and this project's redaction hide its value, so the switch is read only when shown plainly.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector, signature, version_key
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "kerberos-token-expired"

# AbstractDelegationTokenSecretManager#checkToken, Hadoop 3.4.1 (the real user is usually empty)
TOKEN_EXPIRED = re.compile(r"Token (?:\S+ )?has expired, current time: (?P<now>[\d-]+ [\d:,]+[+-]?\d*) "
                           r"expected renewal time: (?P<renew>[\d-]+ [\d:,]+[+-]?\d*)")
TOKEN_NOT_IN_CACHE = re.compile(r"Token for real user: [^,\n]*, can't be found in cache")
# the same checks in Hadoop 2.x, naming the token
OLD_TOKEN_EXPIRED = re.compile(r"token \((?P<token>[A-Z_]+ token \d+ for [^)\s]+)\) is expired")
OLD_TOKEN_NOT_IN_CACHE = re.compile(r"token \((?P<token>[A-Z_]+ token \d+ for [^)\s]+)\) can't be found in cache")
# the JDK (sun.security.jgss.krb5) and Hadoop's UserGroupInformation renewal thread
NO_TGT = re.compile(r"Failed to find any Kerberos tgt")
TGT_EXPIRED = re.compile(r"TGT is expired\. Aborting renew thread for (?P<user>\S+?)\.?$", re.M)
# Krb5LoginModule: the keytab holds no key for the principal asked for
NO_KEY_FOR_PRINCIPAL = re.compile(r"Unable to obtain password from user")
# the Kafka client's wrapper of a GSSAPI failure (SaslClientAuthenticator#createSaslToken, 2.4.1 – 3.8.0)
KAFKA_SASL = re.compile(r"occurred when evaluating SASL token received from the Kafka Broker")
# JaasContext#loadClientContext (Kafka 2.4.1 – 3.8.0) and ZooKeeperSaslClient (flink-dist's shaded ZooKeeper)
KAFKA_NO_CONTEXT = re.compile(r"Could not find a '(?P<context>\w+)' entry in the JAAS configuration")
ZK_NO_CONTEXT = re.compile(r"(?:No JAAS configuration section named '|the specified JAAS configuration section ')"
                           r"(?P<context>\w+)'")
# Flink: KerberosLoginProvider#doLogin and DefaultDelegationTokenManager (1.20.3, 2.3.0)
KEYTAB_LOGIN = re.compile(r"Attempting to login to KDC using principal: (?P<principal>\S+) keytab: ")
CACHE_LOGIN = re.compile(r"Attempting to load user's ticket cache|Loaded user's ticket cache successfully")
NO_RENEWAL = re.compile(r"Tokens update task not started because either no tokens obtained or none of the tokens "
                        r"specified its renewal date")
TOKEN_MANAGER = re.compile(r"Loading delegation token providers|Obtaining delegation tokens")
HADOOP_MODULE = re.compile(r"Hadoop user set to \S+")

_KEYTAB = "flink:security.kerberos.login.keytab"
_PRINCIPAL = "flink:security.kerberos.login.principal"
_TOKENS = "flink:security.delegation.tokens.enabled"
_CONTEXTS = "flink:security.kerberos.login.contexts"
_RESTORE = "ops:restart from the latest checkpoint once the credentials are valid"
_KLIST = "ops:list the principals the keytab holds"
_COLLECT = "ops:collect how Flink logged in"
_RENEWAL_DATE = "ops:find why no token has a renewal date"


class KerberosTokenExpired(Detector):
    slug = SLUG
    title = "Kerberos ticket or delegation token expired"
    category = "cluster"
    meaning = ("A Kerberos ticket (TGT) or a Hadoop delegation token the job uses for HDFS, HBase, Kafka or ZooKeeper "
               "expired or cannot be used, and nothing renews it: the job fails on every access until credentials "
               "are valid again.")
    versions = ("1.x – 2.x (the token framework and its keys since 1.17; security.kerberos.fetch.delegation-token "
                "before); Hadoop 2.x and 3.4 wordings, Kafka clients 2.4 – 3.8")
    exception_classes = ("org.apache.hadoop.security.token.SecretManager$InvalidToken",
                         "javax.security.sasl.SaslException", "org.ietf.jgss.GSSException",
                         "javax.security.auth.login.LoginException",
                         "org.apache.kafka.common.errors.SaslAuthenticationException")
    config_keys = ("security.kerberos.login.keytab", "security.kerberos.login.principal",
                   "security.kerberos.login.use-ticket-cache", "security.kerberos.login.contexts",
                   "security.delegation.tokens.enabled")
    collect_next = ("the JobManager log from its start (KerberosLoginProvider's 'Attempting to login to KDC using "
                    "principal' or 'Attempting to load user's ticket cache', and the DefaultDelegationTokenManager's "
                    "'Tokens update task' line) and the security.kerberos.* settings")
    signatures = (
        signature(TOKEN_EXPIRED), TOKEN_NOT_IN_CACHE.pattern, signature(OLD_TOKEN_EXPIRED),
        signature(OLD_TOKEN_NOT_IN_CACHE), NO_TGT.pattern, r"TGT is expired\. Aborting renew thread",
        NO_KEY_FOR_PRINCIPAL.pattern, KAFKA_SASL.pattern, signature(KAFKA_NO_CONTEXT), signature(ZK_NO_CONTEXT),
        signature(KEYTAB_LOGIN), CACHE_LOGIN.pattern, NO_RENEWAL.pattern, TOKEN_MANAGER.pattern,
        HADOOP_MODULE.pattern,
    )
    wordings = (
        Wording(SLUG, signature(TOKEN_EXPIRED), "1.13 – 2.x",
                "org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSecretManager#checkToken "
                "(hadoop-client-api 3.4.1, the NameNode's Hadoop deciding the wording)",
                "org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.security.token.SecretManager$InvalidToken): "
                "Token has expired, current time: 2026-11-22 03:14:07,512+0000 expected renewal time: "
                "2026-11-22 03:02:55,104+0000"),
        Wording(SLUG, TOKEN_NOT_IN_CACHE.pattern, "1.13 – 2.x",
                "org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSecretManager#checkToken "
                "(hadoop-client-api 3.4.1, the NameNode's Hadoop deciding the wording)",
                "org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.security.token.SecretManager$InvalidToken): "
                "Token for real user: , can't be found in cache"),
        Wording(SLUG, signature(OLD_TOKEN_EXPIRED), "1.13 – 1.20",
                "AbstractDelegationTokenSecretManager of Hadoop 2.x (a NameNode on Hadoop 2), as quoted in the issue (not checked "
                "in a jar)",
                "org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.security.token.SecretManager$InvalidToken): "
                "token (HDFS_DELEGATION_TOKEN token 123 for flink) is expired"),
        Wording(SLUG, NO_TGT.pattern, "1.13 – 2.x",
                "sun.security.jgss.krb5 (OpenJDK 17), wrapped by Hadoop's IPC client or Kafka's SASL client",
                "javax.security.sasl.SaslException: GSS initiate failed [Caused by GSSException: No valid "
                "credentials provided (Mechanism level: Failed to find any Kerberos tgt)]"),
        Wording(SLUG, signature(KAFKA_NO_CONTEXT), "1.13 – 2.x",
                "org.apache.kafka.common.security.JaasContext#loadClientContext (Kafka clients 2.4.1 – 3.8.0)",
                "java.lang.IllegalArgumentException: Could not find a 'KafkaClient' entry in the JAAS configuration. "
                "System property 'java.security.auth.login.config' is /tmp/jaas-4203781129358911224.conf"),
    )
    root_causes = (
        RootCause("ticket-cache-only",
                  "Flink logged in from a ticket cache, not a keytab: it cannot renew the TGT nor obtain new "
                  "tokens, so the job fails when the ticket (typically a day, renewable up to seven) or a token "
                  "obtained with it reaches its lifetime.",
                  "KerberosLoginProvider's 'Attempting to load user's ticket cache', or a configuration setting "
                  "security.kerberos.login.use-ticket-cache true without security.kerberos.login.keytab, next to an "
                  "expired TGT or token.",
                  patches=(_KEYTAB, _PRINCIPAL, _RESTORE)),
        RootCause("delegation-token-not-renewed",
                  "A delegation token reached its lifetime (HDFS: 7 days at most) because Flink's token framework "
                  "does not renew or re-obtain it: the framework is switched off, or it obtained no token with a "
                  "renewal date.",
                  "An expired or unknown delegation token, next to DefaultDelegationTokenManager's 'Tokens update "
                  "task not started …', or security.delegation.tokens.enabled (security.kerberos.fetch."
                  "delegation-token) set where the start shows the Hadoop login but no token manager.",
                  patches=(_TOKENS, _RENEWAL_DATE, _RESTORE)),
        RootCause("login-context-missing",
                  "A keytab is configured but the Kafka (KafkaClient) or ZooKeeper (Client) login context is not in "
                  "security.kerberos.login.contexts: Flink gives that client no Kerberos credentials.",
                  "Kafka's 'Could not find a 'KafkaClient' entry in the JAAS configuration' or ZooKeeper's 'JAAS "
                  "configuration section 'Client'' message, with the context absent from "
                  "security.kerberos.login.contexts.",
                  patches=(_CONTEXTS,)),
        RootCause("keytab-principal-mismatch",
                  "The keytab holds no key for the configured principal: the login from it fails.",
                  "'Unable to obtain password from user' (Krb5LoginModule) where a keytab is configured.",
                  patches=(_PRINCIPAL, _KLIST)),
        RootCause("undetermined",
                  "Kerberos credentials failed, but how Flink logged in and what should renew them is not in the "
                  "evidence.",
                  "An expired TGT or token without Flink's login lines or its security settings.",
                  patches=(_COLLECT,),
                  next_evidence="the JobManager log from its start (the 'Attempting to login to KDC using "
                                "principal' or 'Attempting to load user's ticket cache' line and the 'Tokens update "
                                "task' line) and the Flink configuration's security.kerberos.* and "
                                "security.delegation.tokens.enabled settings."),
    )

    templates = {
        "what token": "a delegation token{token} expired{when}",
        "token name": " ({token})",
        "when": " (expected renewal {renew}, refused at {now})",
        "what unknown token": "the server no longer knows a delegation token (expired and removed)",
        "what tgt": "no valid Kerberos ticket (TGT) was left to authenticate with",
        "what kafka context": "the Kafka client found no '{context}' login context",
        "what zk context": "the ZooKeeper client found no '{context}' login context",
        "what principal": "the login from the keytab failed: it holds no key for the principal",
        "head": "Kerberos credentials failed: {what}{client}. ",
        "client kafka": " (Kafka client, SASL/GSSAPI)",
        "ticket-cache-only": "Flink logged in from {how}, not from a keytab: nothing renews that ticket, and the "
                             "tokens obtained with it cannot be re-obtained once it expires. With a keytab Flink "
                             "renews the TGT and re-obtains tokens before they expire.",
        "how log": "the user's ticket cache (as its log says)",
        "how config": "the ticket cache (security.kerberos.login.use-ticket-cache {cache} and no "
                      "security.kerberos.login.keytab in the configuration)",
        "delegation-token-not-renewed": "Nothing renews the job's delegation tokens ({why}). An HDFS token lives 7 "
                                        "days at most, then every access fails.",
        "why no renewal": "the token manager logged that its update task was not started, having no token with "
                          "a renewal date",
        "why disabled": "{key} is set and the JobManager's start shows the Hadoop login but no token manager: the "
                        "framework is off",
        "login-context-missing": "A keytab is configured, but security.kerberos.login.contexts ({contexts}) does not "
                                 "list '{context}': Flink hands the keytab only to the listed contexts.",
        "keytab-principal-mismatch": "The keytab holds no key for principal {principal}, so the login fails before "
                                     "any token is obtained.",
        "undetermined": "How Flink logged in (keytab or ticket cache) and what should renew the credentials is not "
                        "in the evidence.",
        "undetermined keytab": " Flink logged in from a keytab, which renews the ticket and re-obtains tokens: why "
                               "that failed (the KDC unreachable, the keytab's key changed, the token manager's "
                               "'Failed to update tokens' warnings) is not in the evidence.",
        "excerpt": " This is an excerpt: Flink's login lines and settings are not in it.",
        "unset": "unset",
        "note failure": "the credentials failed: {what}",
        "note cache": "Flink logged in from the ticket cache",
        "note keytab": "Flink logged in from a keytab",
        "note no renewal": "nothing renews the tokens",
        "keytab": "Log in from a keytab: Flink then renews the TGT and re-obtains delegation tokens before they "
                  "expire. The keytab must be readable on every JobManager and TaskManager host (on YARN it is "
                  "shipped; on Kubernetes mount it, e.g. as a secret).",
        "principal for keytab": "The principal the keytab holds a key for.",
        "principal klist": "Set the principal to one the keytab lists (`klist -kt` on it), including its realm.",
        "restore": "Once the credentials are valid again, restart the job (it resumes from its latest checkpoint "
                   "or savepoint); until then every restart fails the same way.",
        "tokens": "Let Flink obtain and renew delegation tokens: set {key} to true (Flink hides this key's value as "
                  "it hides every key naming a token, so the value reads ******). If an external scheduler "
                  "(Oozie) obtains the tokens instead, that scheduler must renew them before their lifetime ends.",
        "renewal date": "The token framework runs but obtained no token with a renewal date, so it never renews "
                        "nor re-obtains them; switching it on changes nothing. Enable DEBUG for the Hadoop token "
                        "provider: it logs 'Renewal interval is … for token …' or 'Negative renewal interval so no "
                        "renewal date is calculated'. Check which renewer the provider asks for "
                        "(security.kerberos.token.provider.hadoopfs.renewer) and that the NameNode lets Flink's "
                        "principal renew those tokens.",
        "renewal date snippet": "logger.dtm.name = org.apache.flink.runtime.security\nlogger.dtm.level = DEBUG",
        "contexts": "Give the keytab to the {client} client too: Flink writes a login entry for every listed "
                    "context.",
        "klist": "List the principals the keytab holds and compare them with the configured one.",
        "klist snippet": "klist -kt \"$KEYTAB\"   # the file security.kerberos.login.keytab names",
        "collect": "Collect the JobManager log from its start and the security.kerberos.* settings: they say whether "
                   "Flink logged in from a keytab or a ticket cache and whether its token manager renews tokens.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failure = self._failure(incident)
        if failure is None:
            return []
        event, kind, m = failure
        config = incident.config
        keytab = config.lookup("security.kerberos.login.keytab")
        principal = config.get("security.kerberos.login.principal")
        keytab_login = incident.first(KEYTAB_LOGIN)
        cache_login = incident.first(CACHE_LOGIN)
        config_read = config.file_path is not None or len(config) > 0
        evidence, notes, add = evidence_trail()
        what = self._what(kind, m)
        add(event, self.say("note failure", what=what))
        kafka = incident.first(KAFKA_SASL) is not None or kind == "kafka context"
        summary = self.say("head", what=what, client=self.say("client kafka") if kafka else "")
        details: dict = {"failure": what}
        if keytab is not None or keytab_login is not None:
            details["login"] = "keytab"
        elif cache_login is not None:
            details["login"] = "ticket cache"
        if principal or keytab_login:
            details["principal"] = principal or keytab_login[1]["principal"]
        confidence = 0.85
        patches = []
        has_keytab = keytab is not None or keytab_login is not None

        if kind in ("kafka context", "zk context") and (has_keytab or config_read):
            context = m["context"]
            contexts = config.get("security.kerberos.login.contexts") or ""
            listed = [c.strip() for c in contexts.split(",") if c.strip()]
            if has_keytab and context not in listed:
                cause = "login-context-missing"
                add(keytab_login[0] if keytab_login else None, self.say("note keytab"))
                summary += self.say(cause, contexts=contexts or self.say("unset"), context=context)
                patches.append(self.flink_patch(incident, "security.kerberos.login.contexts",
                                                ",".join(listed + [context]),
                                                self.say("contexts", client="Kafka" if context == "KafkaClient"
                                                         else "ZooKeeper")))
                return [self._finding(cause, summary, evidence, notes, confidence, patches, details)]
        if kind == "principal" and has_keytab:
            cause = "keytab-principal-mismatch"
            add(keytab_login[0] if keytab_login else None, self.say("note keytab"))
            summary += self.say(cause, principal=details.get("principal", "<configured principal>"))
            patches = [self.flink_patch(incident, "security.kerberos.login.principal",
                                        "<a principal the keytab lists>", self.say("principal klist")),
                       self.ops_patch("list the principals the keytab holds", self.say("klist"),
                                      snippet=self.say("klist snippet"))]
            return [self._finding(cause, summary, evidence, notes, confidence, patches, details)]

        expired = kind in ("tgt", "token", "unknown token")
        no_renewal = incident.first(NO_RENEWAL)
        tokens = config.lookup("security.delegation.tokens.enabled")
        # Flink hides the switch's value (its name holds "token"): set, with a start that shows the Hadoop login but
        # no token manager, it is off
        tokens_off = tokens is not None and (tokens.value.strip().lower() == "false" or (
            incident.first(HADOOP_MODULE) is not None and incident.first(TOKEN_MANAGER) is None))
        # the configuration names the ticket cache only when it sets the option: a Kafka client may carry its own
        # keytab in sasl.jaas.config without any security.kerberos.* setting
        cache_set = config.lookup("security.kerberos.login.use-ticket-cache") is not None
        cache_only = cache_login is not None and keytab_login is None or (
            cache_set and keytab is None and keytab_login is None
            and config.get_bool("security.kerberos.login.use-ticket-cache", True))
        if expired and cache_only and not has_keytab:
            cause = "ticket-cache-only"
            if cache_login is not None:
                add(cache_login[0], self.say("note cache"))
                how = self.say("how log")
            else:
                how = self.say("how config", cache=config.get("security.kerberos.login.use-ticket-cache"))
            summary += self.say(cause, how=how)
            patches = [
                self.flink_patch(incident, "security.kerberos.login.keytab", "<absolute path of the keytab>",
                                 self.say("keytab")),
                self.flink_patch(incident, "security.kerberos.login.principal",
                                 details.get("principal", "<principal>@<REALM>"), self.say("principal for keytab")),
                self.ops_patch("restart from the latest checkpoint once the credentials are valid",
                               self.say("restore")),
            ]
        elif kind in ("token", "unknown token") and (no_renewal is not None or tokens_off):
            cause = "delegation-token-not-renewed"
            key = version_key(incident, "security.delegation.tokens.enabled")
            if no_renewal is not None:
                add(no_renewal[0], self.say("note no renewal"))
                why = self.say("why no renewal")
            else:
                why = self.say("why disabled", key=tokens.key)
            summary += self.say(cause, why=why)
            patches = [
                self.flink_patch(incident, "security.delegation.tokens.enabled", "true", self.say("tokens", key=key))
                if tokens_off else
                self.ops_patch("find why no token has a renewal date", self.say("renewal date"),
                               snippet=self.say("renewal date snippet")),
                self.ops_patch("restart from the latest checkpoint once the credentials are valid",
                               self.say("restore")),
            ]
        else:
            cause, confidence = "undetermined", 0.4
            summary += self.say("undetermined")
            if has_keytab:
                summary += self.say("undetermined keytab")
            if is_excerpt(incident) and not config_read:
                summary += self.say("excerpt")
            patches = [self.ops_patch("collect how Flink logged in", self.say("collect"))]
        add(keytab_login[0] if keytab_login else None, self.say("note keytab"))
        return [self._finding(cause, summary, evidence, notes, confidence, patches, details)]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _failure(incident: Incident):
        """The first failure that names how the credentials failed, with its kind."""
        for kind, rx in (("token", TOKEN_EXPIRED), ("token", OLD_TOKEN_EXPIRED), ("unknown token", TOKEN_NOT_IN_CACHE),
                         ("unknown token", OLD_TOKEN_NOT_IN_CACHE), ("kafka context", KAFKA_NO_CONTEXT),
                         ("zk context", ZK_NO_CONTEXT), ("principal", NO_KEY_FOR_PRINCIPAL), ("tgt", NO_TGT),
                         ("tgt", TGT_EXPIRED)):
            found = list(incident.find(rx))
            if found:
                found.sort(key=lambda h: (not h[0].chain, h[0].ts or "", h[0].line))
                return found[0][0], kind, found[0][1]
        return None

    def _what(self, kind: str, m: re.Match[str]) -> str:
        if kind == "token":
            groups = m.groupdict()
            token = self.say("token name", token=groups["token"]) if groups.get("token") else ""
            when = self.say("when", renew=groups["renew"], now=groups["now"]) if groups.get("renew") else ""
            return self.say("what token", token=token, when=when)
        if kind == "unknown token":
            return self.say("what unknown token")
        if kind == "kafka context":
            return self.say("what kafka context", context=m["context"])
        if kind == "zk context":
            return self.say("what zk context", context=m["context"])
        if kind == "principal":
            return self.say("what principal")
        return self.say("what tgt")

    def _finding(self, cause, summary, evidence, notes, confidence, patches, details) -> Finding:
        return self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                            details=details)
