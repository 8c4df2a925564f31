"""TLS for SSL and SASL_SSL listeners: an ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys, and
the principal of a client certificate (``ssl.principal.mapping.rules``).

Key stores and trust stores are PEM, as Kafka takes them: ``ssl.keystore.type=PEM`` with
``ssl.keystore.location`` (one file: the certificate chain and the private key, which may be
an encrypted PKCS#8 key with ``ssl.key.password``) or the inline ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``; ``ssl.truststore.type=PEM`` with ``ssl.truststore.location``
or the inline ``ssl.truststore.certificates``. JKS and PKCS12 stores are refused with a message
that says to convert them. ``ssl.enabled.protocols`` bounds the TLS versions and
``ssl.protocol`` caps them (TLSv1.2: no TLS 1.3, as with a JVM's TLSv1.2 context);
``ssl.cipher.suites`` takes Kafka's (IANA) names or OpenSSL's for TLS 1.2. Python's ``ssl``
cannot choose TLS 1.3 suites: a list that names some but not all of them is refused, and one
naming none turns TLS 1.3 off (as a JVM does). Problems raise ``ConfigError`` naming the key.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable

from cryptography import x509

from odradek.config_def import ConfigError

_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


def server_context(get: Callable[[str], object], key_of: Callable[[str], str], listener: str = "") -> ssl.SSLContext:
    """The server context of one listener; ``get(key)`` reads a (listener-overridden) ssl key,
    ``key_of(key)`` is the name to put in messages."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_keystore(ctx, get, key_of, listener)
    auth = str(get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise ConfigError(f"{key_of('ssl.client.auth')}: expected none, requested or required", key_of("ssl.client.auth"))
    has_trust = load_truststore(ctx, get, key_of)
    if auth != "none" and not has_trust:
        raise ConfigError(
            f"{key_of('ssl.client.auth')}={auth} needs a trust store to check client certificates: "
            f"set {key_of('ssl.truststore.location')} (PEM)",
            key_of("ssl.client.auth"),
        )
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[auth]
    set_protocols(ctx, get, key_of)
    _set_ciphers(ctx, get("ssl.cipher.suites"), key_of("ssl.cipher.suites"))
    return ctx


def load_keystore(ctx: ssl.SSLContext, get, key_of, listener: str) -> None:
    location, inline_key, chain = get("ssl.keystore.location"), get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    password = get("ssl.key.password")
    if location is None and inline_key is None:
        raise ConfigError(
            f"{key_of('ssl.keystore.location')}: TLS listener {listener} needs a key store (a PEM file with the "
            f"certificate chain and the private key), or {key_of('ssl.keystore.key')} and "
            f"{key_of('ssl.keystore.certificate.chain')}",
            key_of("ssl.keystore.location"),
        )
    _require_pem(get, key_of, "ssl.keystore.type")
    try:
        if location is not None:
            ctx.load_cert_chain(str(location), password=password)
        else:
            if chain is None:
                raise ConfigError(
                    f"{key_of('ssl.keystore.certificate.chain')}: needed with {key_of('ssl.keystore.key')}",
                    key_of("ssl.keystore.certificate.chain"),
                )
            with tempfile.TemporaryDirectory() as tmp:  # mode 0700: load_cert_chain reads files only
                path = os.path.join(tmp, "keystore.pem")
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(f"{chain}\n{inline_key}\n")
                ctx.load_cert_chain(path, password=password)
    except (ssl.SSLError, OSError) as exc:
        key = "ssl.keystore.location" if location is not None else "ssl.keystore.key"
        raise ConfigError(
            f"{key_of(key)}: cannot load the key store ({_reason(exc)}); it needs the PEM certificate chain "
            f"and private key, and an encrypted key needs the right {key_of('ssl.key.password')}",
            key_of(key),
        ) from None


def load_truststore(ctx: ssl.SSLContext, get, key_of) -> bool:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if location is None and inline is None:
        return False
    _require_pem(get, key_of, "ssl.truststore.type")
    try:
        if location is not None:
            ctx.load_verify_locations(cafile=str(location))
        else:
            ctx.load_verify_locations(cadata=str(inline))
    except (ssl.SSLError, OSError) as exc:
        key = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise ConfigError(f"{key_of(key)}: cannot load the trust store ({_reason(exc)})", key_of(key)) from None
    return True


def _require_pem(get, key_of, key: str) -> None:
    kind = str(get(key) or "JKS").upper()
    if kind != "PEM":
        raise ConfigError(
            f"{key_of(key)}={kind}: Odradek reads PEM stores only; set {key_of(key)}=PEM and convert the "
            "store (keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes or -nocerts)",
            key_of(key),
        )


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)


def set_protocols(ctx: ssl.SSLContext, get, key_of) -> None:
    """The TLS versions ``ssl.enabled.protocols`` allows, capped by ``ssl.protocol`` as the
    protocol of a JVM's SSLContext caps them: TLSv1.2 keeps TLS 1.3 off even when it is
    enabled; TLSv1.3 (the default) or TLS caps nothing."""
    key = key_of("ssl.enabled.protocols")
    names = list(get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"])
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown:
        raise ConfigError(f"{key}: {', '.join(unknown)} not supported; choose among TLSv1.2, TLSv1.3", key)
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    protocol, protocol_key = str(get("ssl.protocol") or "TLS"), key_of("ssl.protocol")
    if protocol == "TLS":
        return
    cap = _TLS_VERSIONS.get(protocol)
    if cap is None:
        raise ConfigError(f"{protocol_key}: {protocol} not supported; choose TLSv1.3, TLSv1.2 or TLS", protocol_key)
    if cap < ctx.minimum_version:
        raise ConfigError(
            f"{protocol_key}={protocol} is older than every protocol in {key} ({', '.join(names)}); "
            f"add {protocol} to {key} or raise {protocol_key}",
            protocol_key,
        )
    ctx.maximum_version = min(ctx.maximum_version, cap)


def openssl_cipher_name(name: str) -> str:
    """A TLS 1.2 suite's OpenSSL name from its IANA (Java) name; OpenSSL names pass through."""
    if not name.startswith("TLS_"):
        return name
    kx, _, rest = name[4:].partition("_WITH_")
    rest = rest.replace("AES_128", "AES128").replace("AES_256", "AES256").replace("CHACHA20_POLY1305", "CHACHA20-POLY1305")
    rest = re.sub(r"_SHA$", "-SHA", rest).replace("_", "-")
    if rest.endswith("-SHA-SHA"):
        rest = rest[: -len("-SHA")]
    prefix = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    out = prefix + rest
    return out.replace("CHACHA20-POLY1305-SHA256", "CHACHA20-POLY1305")


def _set_ciphers(ctx: ssl.SSLContext, suites, key: str) -> None:
    if not suites:
        return
    tls13 = [s for s in suites if s in _TLS13_SUITES]
    tls12 = [s for s in suites if s not in _TLS13_SUITES]
    if tls13 and set(tls13) != _TLS13_SUITES:
        raise ConfigError(
            f"{key}: Python's ssl module cannot restrict TLS 1.3 cipher suites; list all of "
            f"{', '.join(sorted(_TLS13_SUITES))} or none of them (then TLS 1.3 is off)",
            key,
        )
    if not tls13:
        if ctx.minimum_version > ssl.TLSVersion.TLSv1_2:
            raise ConfigError(f"{key}: no TLS 1.3 suite listed but only TLSv1.3 is enabled", key)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if not tls12:
        if ctx.maximum_version < ssl.TLSVersion.TLSv1_3:
            raise ConfigError(f"{key}: only TLS 1.3 suites listed but TLSv1.3 is not enabled", key)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    names = [openssl_cipher_name(s) for s in tls12]
    known = {c["name"] for c in ctx.get_ciphers()}
    missing = [s for s, n in zip(tls12, names, strict=True) if n not in known]
    if missing:
        raise ConfigError(f"{key}: unknown or unavailable cipher suite {missing[0]}", key)
    ctx.set_ciphers(":".join(names))


# -- the principal of a client certificate (ssl.principal.mapping.rules) ---------------------

_RULE = re.compile(r"^RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU])?$")


class PrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``DEFAULT`` (the distinguished name as is) and
    ``RULE:<regex>/<replacement>/[L|U]`` (first rule whose regex matches the whole name;
    ``$1`` in the replacement is the first group; L/U lower or upper case the result)."""

    def __init__(self, rules_text: str | None, key: str = "ssl.principal.mapping.rules"):
        self.rules: list[tuple[re.Pattern, str, str] | None] = []
        for raw in _split_rules(rules_text or "DEFAULT"):
            if raw == "DEFAULT":
                self.rules.append(None)
                continue
            m = _RULE.match(raw)
            if not m:
                raise ConfigError(f"{key}: invalid rule {raw!r}; expected DEFAULT or RULE:pattern/replacement/[LU]", key)
            try:
                pattern = re.compile(m.group(1).replace("\\/", "/"))
            except re.error as exc:
                raise ConfigError(f"{key}: invalid regex in {raw!r}: {exc}", key) from None
            replacement = re.sub(r"\$(\d)", r"\\\1", m.group(2).replace("\\/", "/"))
            self.rules.append((pattern, replacement, m.group(3) or ""))

    def name(self, dn: str) -> str | None:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn, count=1)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        return None


def _split_rules(text: str) -> list[str]:
    rules, current = [], ""
    for part in re.split(r",(?=\s*(?:RULE:|DEFAULT))", text):
        current = part.strip()
        if current:
            rules.append(current)
    return rules


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as RFC 2253 names it (what Kafka's DEFAULT rule gives)."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
