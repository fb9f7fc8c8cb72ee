"""Errors at the Kafka edge, classified: what is wrong and what to fix, in one line.

Wherever the project talks to a cluster (admin, consumers, producers, local copy workers, Spark
tasks) a librdkafka error becomes one of these kinds:

    authentication   wrong SASL credentials (names the mechanism and the user)
    tls              the broker's certificate is not trusted, is for another host, has expired;
                     or the broker refused the client's certificate
    protocol         the broker closed the connection at once: security.protocol does not
                     match its listener (PLAINTEXT client, TLS listener...)
    authorization    an ACL is missing (names the principal, the operation and the resource)
    unreachable      nothing answers at bootstrap.servers
    unknown_topic    the topic does not exist (only when the principal may describe it: Kafka
                     answers TOPIC_AUTHORIZATION_FAILED for a topic one may not see, existing
                     or not)
    other            anything else, with librdkafka's own words

A wrong password usually surfaces from a call only as ``_TRANSPORT`` ("Failed to get
metadata"): the cause reaches the client's ``error_cb``. :class:`ErrorWatch` is that callback;
it keeps the last classified cause, which :func:`classify` prefers over a vague transport
error or time-out.

Invariants:
    * Messages never contain a secret: they name users, mechanisms, file paths and resources,
      never a password, token or key (librdkafka's messages do not either).
    * :class:`KafkaAccessError` and every value here pickle (they cross process boundaries:
      local copy workers, Spark tasks); librdkafka's ``KafkaException`` does not.
    * ``cluster_wide`` problems (authentication, TLS, unreachable) stop a verb before anything is
      written (exit 2); an authorization failure on one topic or group is reported for it.
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.errors import OffsetLedgerError, first_line

AUTHENTICATION, TLS, AUTHORIZATION = "authentication", "tls", "authorization"
UNREACHABLE, UNKNOWN_TOPIC, OTHER = "unreachable", "unknown_topic", "other"
PROTOCOL = "protocol"  # security.protocol does not match the listener
CLUSTER_WIDE = (AUTHENTICATION, TLS, PROTOCOL, UNREACHABLE)
# What a long-running job rides out (a broker restarting or away, a leader moving, an answer not
# given yet); everything else is fixed in the configuration and stops it with its error line.
TRANSIENT = (UNREACHABLE, OTHER)

_AUTH_CODES = {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE",
               "UNSUPPORTED_SASL_MECHANISM"}
_AUTHZ_CODES = {"TOPIC_AUTHORIZATION_FAILED": "TOPIC", "GROUP_AUTHORIZATION_FAILED": "GROUP",
                "CLUSTER_AUTHORIZATION_FAILED": "CLUSTER",
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TRANSACTIONAL_ID",
                "DELEGATION_TOKEN_AUTHORIZATION_FAILED": "DELEGATION_TOKEN"}
_UNKNOWN_TOPIC_CODES = {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION",
                        "UNKNOWN_TOPIC_ID"}
# Codes that only say "it did not work": a cause seen by error_cb explains them better.
_VAGUE_CODES = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_NOENT", "_FATAL",
                "REQUEST_TIMED_OUT", "_WAIT_COORD", "_RESOLVE", "_DESTROY", "_MSG_TIMED_OUT",
                "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "_TIMED_OUT_QUEUE"}
_SSL_TEXT = re.compile(r"SSL handshake failed|certificate verify failed|SSL routines|"
                       r"ssl\.ca\.location|_SSL", re.I)
_AUTH_TEXT = re.compile(r"SASL authentication error|Authentication failed|"
                        r"invalid credentials|SASL_AUTHENTICATION_FAILED|_AUTHENTICATION", re.I)
# librdkafka's texts of the authorization codes (delivery reports keep only the text).
_AUTHZ_TEXT = {re.compile(r"Topic authorization failed", re.I): "TOPIC_AUTHORIZATION_FAILED",
               re.compile(r"Group authorization failed", re.I): "GROUP_AUTHORIZATION_FAILED",
               re.compile(r"Cluster authorization failed", re.I): "CLUSTER_AUTHORIZATION_FAILED",
               re.compile(r"Transactional Id authorization failed", re.I):
                   "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
_CLOSED_EARLY = re.compile(r"connection closed by peer.*(APIVERSION_QUERY|SSL_HANDSHAKE)", re.I)
# A cause older than this is not taken to explain a new failure.
CAUSE_TTL_S = 120.0
# Causes of one name at most this far apart are one streak (librdkafka's reconnect back-off is
# at most 10 s): ``ErrorWatch.persistent_cause``.
STREAK_GAP_S = 30.0


@dataclass(frozen=True)
class Problem:
    """A classified Kafka error: ``message`` is one line, with what to fix."""

    kind: str
    message: str

    @property
    def cluster_wide(self) -> bool:
        return self.kind in CLUSTER_WIDE


class KafkaAccessError(OffsetLedgerError):
    """A classified Kafka error (``kind`` as :class:`Problem`); pickles with its kind."""

    def __init__(self, message: str, kind: str = OTHER) -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.kind))

    @property
    def cluster_wide(self) -> bool:
        return self.kind in CLUSTER_WIDE

    @classmethod
    def of(cls, problem: Problem) -> KafkaAccessError:
        return cls(problem.message, problem.kind)


class ErrorWatch:
    """A client's ``error_cb``: keeps the last cause worth naming (authentication, TLS, a
    connection closed during the handshake), so a vague failure can be explained.

    librdkafka calls it from ``poll``/``flush``/``consume`` (or after a failed admin call,
    from the admin client's ``poll``): :func:`serve` does that for an admin client.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cause: tuple[float, str, str] | None = None  # (when, code name, text)
        self._streak_since = 0.0  # when causes of the current cause's name began to recur
        self.fatal: tuple[str, str] | None = None

    def __call__(self, err: Any) -> None:
        name, text = _name(err), _text(err)
        if getattr(err, "fatal", lambda: False)():
            self.fatal = (name, text)
        if name in _AUTH_CODES or name == "_SSL" or _SSL_TEXT.search(text) \
                or _AUTH_TEXT.search(text) or _CLOSED_EARLY.search(text) \
                or name in _AUTHZ_CODES:
            now = time.monotonic()
            with self._lock:
                previous = self._cause
                if previous is None or previous[1] != name or now - previous[0] > STREAK_GAP_S:
                    self._streak_since = now
                self._cause = (now, name, text)

    def cause(self) -> tuple[str, str] | None:
        """``(code name, text)`` of the last cause seen within :data:`CAUSE_TTL_S`."""
        with self._lock:
            if self._cause is None or time.monotonic() - self._cause[0] > CAUSE_TTL_S:
                return None
            return self._cause[1], self._cause[2]

    def persistent_cause(self, seconds: float) -> tuple[str, str] | None:
        """The last cause if causes of its name kept coming (each within
        :data:`STREAK_GAP_S` of the previous) for at least ``seconds``, and still come: a
        long-running client tells a lasting failure from a broker restarting."""
        with self._lock:
            if self._cause is None or time.monotonic() - self._cause[0] > STREAK_GAP_S:
                return None
            if self._cause[0] - self._streak_since < seconds:
                return None
            return self._cause[1], self._cause[2]


def watched(config: Mapping[str, Any]) -> tuple[dict[str, Any], ErrorWatch]:
    """``config`` with an :class:`ErrorWatch` as its ``error_cb`` (a given one is still
    called)."""
    watch = ErrorWatch()
    out = dict(config)
    given = out.get("error_cb")
    if given is not None:
        def both(err: Any) -> None:
            watch(err)
            given(err)
        out["error_cb"] = both
    else:
        out["error_cb"] = watch
    return out, watch


def serve(client: Any, seconds: float = 0.2) -> None:
    """Let librdkafka deliver queued ``error_cb`` calls of ``client`` (after a failure)."""
    try:
        client.poll(seconds)
    except Exception:  # a destroyed or failed client: nothing more to learn from it
        pass


# --- classification ----------------------------------------------------------------------------


def _error_of(error: Any) -> Any:
    """The ``KafkaError`` inside a ``KafkaException`` (or the value itself)."""
    args = getattr(error, "args", None)
    if args and hasattr(args[0], "code") and hasattr(args[0], "str"):
        return args[0]
    return error


def _name(err: Any) -> str:
    try:
        return str(err.name())
    except Exception:
        return ""


def _text(err: Any) -> str:
    if hasattr(err, "str") and callable(err.str):
        try:
            return str(err.str())
        except Exception:
            pass
    return first_line(err, 600) if isinstance(err, BaseException) else str(err)


def _user(properties: Mapping[str, Any]) -> str:
    """The principal the client presents (no secret): SASL user, certificate CN, or a hint."""
    if properties.get("sasl.username"):
        return f"User:{properties['sasl.username']}"
    cert = properties.get("ssl.certificate.location")
    if cert:
        cn = certificate_cn(str(cert))
        return f"User:{cn}" if cn else f"the principal of certificate {cert}"
    if str(properties.get("sasl.mechanism", properties.get("sasl.mechanisms", ""))).upper() \
            == "OAUTHBEARER":
        return "the OAUTHBEARER token's principal"
    return "User:ANONYMOUS"


def certificate_cn(path: str) -> str | None:
    """The CN of a PEM certificate's subject (the principal under the usual mapping rule)."""
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
    except Exception:
        return None
    for rdn in decoded.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _mechanism(properties: Mapping[str, Any]) -> str:
    return str(properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI")


def classify(error: Any, alias: str, properties: Mapping[str, Any], *,
             operation: str | None = None, resource: str | None = None,
             watch: ErrorWatch | None = None) -> Problem:
    """Classify a librdkafka error (``KafkaError``, ``KafkaException``, exception or text).

    Args:
        alias: the cluster's alias, named in the message.
        properties: the cluster's librdkafka properties (read for the user, mechanism and
            certificate paths only; nothing of them is copied into the message but those).
        operation: the ACL operation the call needed, e.g. ``READ`` (for authorization).
        resource: what it was done on, e.g. ``topic Orders`` or ``group G``.
        watch: the client's :class:`ErrorWatch`, whose cause explains a vague error.
    """
    err = _error_of(error)
    name, text = _name(err), _text(err)
    cause = watch.cause() if watch is not None else None
    if cause is not None and (name in _VAGUE_CODES or not name):
        name, text = cause
    if watch is not None and watch.fatal is not None and name in ("_FATAL", ""):
        name, text = watch.fatal
    if name not in _AUTHZ_CODES:
        name = next((code for pattern, code in _AUTHZ_TEXT.items() if pattern.search(text)),
                    name)
    where = _where(alias)
    bootstrap = properties.get("bootstrap.servers", "?")
    if name in _AUTH_CODES or _AUTH_TEXT.search(text):
        user = properties.get("sasl.username")
        who = f"user {user} ({_mechanism(properties)})" if user else _mechanism(properties)
        return Problem(AUTHENTICATION, f"{where}: authentication failed for {who}: check "
                       f"{_key(alias, 'sasl.username')} and sasl.password (or the "
                       f"mechanism's credentials); the broker said: {_short(text)}")
    if name == "_SSL" or _SSL_TEXT.search(text):
        return Problem(TLS, f"{where}: TLS handshake with {bootstrap} failed: "
                       f"{tls_reason(properties, text)}")
    if name in _AUTHZ_CODES:
        return Problem(AUTHORIZATION, not_authorized(alias, properties, _AUTHZ_CODES[name],
                                                     operation, resource))
    if name in _UNKNOWN_TOPIC_CODES:
        return Problem(UNKNOWN_TOPIC, f"{where}: {resource or 'the topic'} does not exist")
    if _CLOSED_EARLY.search(text) or name in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE") \
            or (name in _VAGUE_CODES and operation is None):
        # Something answers but the connection fails without a cause: TLS on one side only?
        mismatch = protocol_mismatch(properties)
        if mismatch is not None:
            return Problem(PROTOCOL, f"{where}: {mismatch}")
        return Problem(UNREACHABLE, f"{where} is unreachable at {bootstrap}: {_short(text)}")
    what = f"{operation} {resource}" if operation and resource else (resource or "a request")
    return Problem(OTHER, f"{where}: {what} failed: {name + ': ' if name else ''}{_short(text)}")


def _where(alias: str) -> str:
    """``cluster P``; a description such as ``the target cluster`` stays as it is (copy tasks
    know their clients' settings, not the aliases)."""
    return alias if " " in alias else f"cluster {alias}"


def _key(alias: str, key: str) -> str:
    return f"{key} of {alias}" if " " in alias else f"clusters.{alias}.{key}"


def not_authorized(alias: str, properties: Mapping[str, Any], resource_type: str,
                   operation: str | None, resource: str | None) -> str:
    """The message of a missing ACL: who, what, on which resource, and the ACL to add."""
    principal = _user(properties)
    op = (operation or "the needed operation").upper()
    target = resource or resource_type.lower()
    if resource_type == "CLUSTER" and operation and operation.upper() in ("WRITE",
                                                                          "IDEMPOTENT_WRITE"):
        # An idempotent producer's InitProducerId: WRITE on a topic it writes (Kafka 3+).
        return (f"{_where(alias)}: {principal} is not authorized to write {target} (the "
                f"idempotent producer was refused): add ACL --allow-principal {principal} "
                f"--operation Write --{_acl_flag(target)} on {_where(alias)}")
    return (f"{_where(alias)}: {principal} is not authorized to {op} {target}: add ACL "
            f"--allow-principal {principal} --operation {op.title().replace('_', '')} "
            f"--{_acl_flag(target, resource_type)} on {_where(alias)}")


def _acl_flag(resource: str, resource_type: str = "TOPIC") -> str:
    """``topic X`` -> ``topic X`` as ``kafka-acls`` spells the resource (``--topic X``)."""
    kind, _, name = resource.partition(" ")
    if kind in ("topic", "group", "transactional-id") and name:
        return f"{kind} {name}"
    return "cluster" if resource_type == "CLUSTER" else f"{resource_type.lower()} {resource}"


def _short(text: str) -> str:
    # librdkafka's "(after 325ms in state AUTH_REQ, 1 identical error(s) suppressed)" and the
    # broker prefix say nothing to a user.
    text = re.sub(r"\s*\(after \d+ms in state [A-Z_]+.*\)\s*$", "", text)
    text = re.sub(r"^(sasl_ssl|ssl|sasl_plaintext|plaintext)?:?/?/?[^ ]+/(bootstrap|\d+): ", "",
                  text, flags=re.I)
    return text.strip()[:300]


# --- TLS: which of "not trusted", "another host", "expired"; TLS on one side only ----------


def _host_port(bootstrap: str) -> tuple[str, int] | None:
    target = bootstrap.split(",")[0].strip()
    if "://" in target:
        target = target.split("://", 1)[1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def protocol_mismatch(properties: Mapping[str, Any], timeout: float = 3.0) -> str | None:
    """Whether the listener at ``bootstrap.servers`` speaks TLS while the client does not, or
    the other way round (a broker closing such connections at once looks "unreachable")."""
    where = _host_port(str(properties.get("bootstrap.servers", "")))
    if where is None:
        return None
    protocol = str(properties.get("security.protocol", "PLAINTEXT")).upper()
    client_tls = protocol in ("SSL", "SASL_SSL")
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection(where, timeout=timeout) as sock:
            try:
                with context.wrap_socket(sock, server_hostname=where[0]) as tls:
                    tls.do_handshake()
                    listener_tls = True
            except (ssl.SSLError, ConnectionError, TimeoutError):
                listener_tls = False
    except OSError:
        return None  # nothing answers: unreachable indeed
    if listener_tls == client_tls:
        return None
    hint = "SSL or SASL_SSL" if listener_tls else "PLAINTEXT or SASL_PLAINTEXT"
    speaks = "expects TLS" if listener_tls else "does not speak TLS"
    return (f"the listener at {where[0]}:{where[1]} {speaks}, but security.protocol is "
            f"{protocol}: set it to {hint} (as the broker's listener is configured)")


def tls_reason(properties: Mapping[str, Any], text: str = "") -> str:
    """Why the TLS handshake failed, checked with Python's ``ssl`` against the same CA."""
    ca = properties.get("ssl.ca.location")
    diagnosis = _probe_tls(str(properties.get("bootstrap.servers", "")), ca,
                           properties.get("ssl.certificate.location"),
                           properties.get("ssl.key.location"))
    return diagnosis or (f"{_short(text)}; check ssl.ca.location"
                         f"{f' ({ca})' if ca else ''}")


def _probe_tls(bootstrap: str, ca: Any, cert: Any, key: Any, timeout: float = 5.0) -> str | None:
    where = _host_port(bootstrap)
    if where is None:
        return None
    host, port = where
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if cert and key:
            context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        return f"the TLS files cannot be used: {exc}; check ssl.ca.location, " \
               "ssl.certificate.location and ssl.key.location"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock, \
                context.wrap_socket(sock, server_hostname=host) as tls:
            tls.do_handshake()
            # The server's certificate verified. Under TLS 1.3 a broker that refuses the
            # client's certificate says so with an alert after the handshake: read for it.
            tls.settimeout(1.0)
            try:
                tls.recv(1)
            except ssl.SSLError as exc:
                return _client_refused(cert, exc)
            except (TimeoutError, OSError):
                return None
            return None
    except ssl.SSLCertVerificationError as exc:
        reason = (exc.verify_message or str(exc)).strip()
        if "expired" in reason:
            return f"the broker's certificate has expired ({reason}): renew it on the broker"
        if "not yet valid" in reason:
            return f"the broker's certificate is not yet valid ({reason}): check clocks"
        if "Hostname mismatch" in reason or "IP address mismatch" in reason:
            return (f"the broker's certificate is not for {host} ({reason}): use a host name "
                    "the certificate names (its subjectAltName), or reissue it")
        return (f"the broker's certificate is not trusted ({reason}): set ssl.ca.location to "
                f"the CA that signed it{f' (now {ca})' if ca else ''}")
    except ssl.SSLError as exc:
        return _client_refused(cert, exc) if "certificate" in str(exc).lower() else None
    except OSError:
        return None


def _client_refused(cert: Any, exc: ssl.SSLError) -> str:
    return (f"the broker refused the client certificate ({cert or 'none given'}: "
            f"{exc.reason or exc}): set ssl.certificate.location and ssl.key.location to a "
            "certificate signed by a CA the broker trusts")
