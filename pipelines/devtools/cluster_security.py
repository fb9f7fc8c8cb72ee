"""Secured embedded clusters: a CA made at setup, TLS listeners, SCRAM users, an authorizer.

``offset-ledger clusters up --security sasl_ssl|mtls`` (and the secured test fixture) start
the embedded brokers of :mod:`pipelines.devtools.clusters` like production ones:

    clients --EXTERNAL (SASL_SSL + SCRAM-SHA-512, or SSL with client certificates)--> broker
    broker  --INTERNAL / CONTROLLER (SSL, client certificate CN=broker)------------> itself

    <data.dir>/security/
        ca.pem ca.key            the CA made at setup (one for every alias)
        broker-keystore.pem      the brokers' key + certificate (SAN IP:127.0.0.1, DNS:localhost)
        <user>.pem <user>.key    a client certificate per user (CN=<user>), for mTLS
        users.json               generated SCRAM passwords (mode 0600)
        clients/<user>.yaml      librdkafka properties of each user (mode 0600)

Invariants:
    * ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a user may do only
      what an ACL allows. ``User:admin`` (setup only: creating ACLs) and ``User:broker`` (the
      inter-broker and controller principal) are the super users.
    * Principals are ``User:<name>`` in both mechanisms: the SCRAM user name, or the client
      certificate's CN (``ssl.principal.mapping.rules``).
    * SCRAM credentials are written into the KRaft log at format time
      (``kafka-storage format --add-scram``); passwords live only in the mode-0600 files above
      and are never printed.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledger.errors import OffsetLedgerError

SECURITY_MODES = ("sasl_ssl", "mtls")
SUPER_USER = "admin"
BROKER_PRINCIPAL = "broker"
USERS = (SUPER_USER, "replicator", "app")
MECHANISM = "SCRAM-SHA-512"

SECURED_PROPERTIES = """\
# Written by offset-ledger for the secured embedded cluster {alias}; loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{host}:{controller_port}
listeners=EXTERNAL://{host}:{port},INTERNAL://{host}:{internal_port},CONTROLLER://{host}:{controller_port}
advertised.listeners=EXTERNAL://{host}:{port},INTERNAL://{host}:{internal_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=EXTERNAL:{external},INTERNAL:SSL,CONTROLLER:SSL
ssl.keystore.type=PEM
ssl.keystore.location={pki}/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location={pki}/ca.pem
listener.name.internal.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
listener.name.external.ssl.client.auth={client_auth}
ssl.principal.mapping.rules=RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT
sasl.enabled.mechanisms={mechanism}
listener.name.external.scram-sha-512.sasl.jaas.config=\
org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:{broker};User:{admin}
"""


class SecuritySetupError(OffsetLedgerError):
    """The CA, certificates or users of a secured embedded cluster could not be made."""


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0:
        raise SecuritySetupError(f"openssl {args[0]} failed: {result.stderr.strip()[-300:]}")


def _private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


class SecurityMaterial:
    """The CA, certificates and users under ``<data_dir>/security`` (made once, then reused)."""

    def __init__(self, data_dir: Path, mode: str) -> None:
        if mode not in SECURITY_MODES:
            raise SecuritySetupError(f"security must be one of {', '.join(SECURITY_MODES)}, "
                                     f"not {mode!r}")
        self.mode = mode
        self.dir = Path(data_dir) / "security"

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    def ensure(self) -> None:
        """Make the CA, the broker's and the users' certificates and passwords if missing."""
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "clients").mkdir(exist_ok=True)
        if not self.ca.exists():
            make_ca(self.dir, "ca", "offset-ledger embedded test CA")
        if not (self.dir / "broker-keystore.pem").exists():
            sign(self.dir, "ca", BROKER_PRINCIPAL, server=True)
            key = (self.dir / f"{BROKER_PRINCIPAL}.key").read_text()
            cert = (self.dir / f"{BROKER_PRINCIPAL}.pem").read_text()
            _private(self.dir / "broker-keystore.pem", key + cert)
        for user in USERS:
            if not (self.dir / f"{user}.pem").exists():
                sign(self.dir, "ca", user)
        users = self.dir / "users.json"
        if not users.exists():
            _private(users, json.dumps({u: secrets.token_urlsafe(18) for u in USERS}))

    def password(self, user: str) -> str:
        return json.loads((self.dir / "users.json").read_text())[user]

    def client_properties(self, user: str) -> dict[str, str]:
        """librdkafka properties (without ``bootstrap.servers``) for ``user``: secrets inside."""
        props = {"ssl.ca.location": str(self.ca)}
        if self.mode == "sasl_ssl":
            props.update({"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
                          "sasl.username": user, "sasl.password": self.password(user)})
        else:
            props.update({"security.protocol": "SSL",
                          "ssl.certificate.location": str(self.dir / f"{user}.pem"),
                          "ssl.key.location": str(self.dir / f"{user}.key")})
        return props

    def write_client_files(self, bootstraps: Mapping[str, str]) -> Path:
        """``clients/<user>.yaml``: each user's ``clusters:`` section for the configuration."""
        import yaml

        folder = self.dir / "clients"
        for user in USERS:
            clusters = {alias: {"bootstrap.servers": b, **self.client_properties(user)}
                        for alias, b in bootstraps.items()}
            _private(folder / f"{user}.yaml",
                     yaml.safe_dump({"clusters": clusters}, sort_keys=False))
        return folder

    def broker_properties(self, **where: Any) -> str:
        external = "SASL_SSL" if self.mode == "sasl_ssl" else "SSL"
        client_auth = "none" if self.mode == "sasl_ssl" else "required"
        return SECURED_PROPERTIES.format(external=external, client_auth=client_auth,
                                         pki=self.dir, mechanism=MECHANISM,
                                         broker=BROKER_PRINCIPAL, admin=SUPER_USER, **where)

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments creating the SCRAM users (SASL mode only)."""
        if self.mode != "sasl_ssl":
            return []
        out = []
        for user in USERS:
            out += ["--add-scram",
                    f"{MECHANISM}=[name={user},password={self.password(user)}]"]
        return out


def make_ca(folder: Path, name: str, subject: str, days: int = 3650) -> None:
    """``<name>.pem``/``<name>.key``: a self-signed CA (tests make a second, untrusted one)."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", "-days", str(days), "-subj", f"/CN={subject}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
    (folder / f"{name}.key").chmod(0o600)


def sign(folder: Path, ca: str, cn: str, *, server: bool = False, days: int = 3650,
         sans: str = "IP:127.0.0.1,DNS:localhost") -> None:
    """``<cn>.pem``/``<cn>.key`` signed by ``<ca>``; a server certificate carries ``sans``."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{cn}.key", "-out",
             f"{cn}.csr", "-subj", f"/CN={cn}", cwd=folder)
    ext = folder / f"{cn}.ext"
    usage = "serverAuth,clientAuth" if server else "clientAuth"
    ext.write_text(f"extendedKeyUsage={usage}\n" + (f"subjectAltName={sans}\n" if server else ""))
    _openssl("x509", "-req", "-in", f"{cn}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{cn}.pem", "-days", str(days), "-extfile", ext.name,
             cwd=folder)
    (folder / f"{cn}.key").chmod(0o600)
    for leftover in (f"{cn}.csr", f"{cn}.ext"):
        (folder / leftover).unlink(missing_ok=True)


def mode_file(data_dir: Path) -> Path:
    return Path(data_dir) / "security" / "mode"


def recorded_mode(data_dir: Path) -> str | None:
    """The security mode the clusters under ``data_dir`` were formatted with, if secured."""
    try:
        return mode_file(data_dir).read_text().strip() or None
    except FileNotFoundError:
        return None


def grant(client_config: Mapping[str, Any], principal: str, resource: str, name: str,
          operations: list[str], pattern: str = "LITERAL", permission: str = "ALLOW") -> None:
    """Create ACLs (as the super user): ``resource`` is TOPIC, GROUP, BROKER (the cluster) or
    TRANSACTIONAL_ID, ``pattern`` LITERAL or PREFIXED, ``operations`` e.g. ["READ"],
    ``permission`` ALLOW or DENY (a DENY wins over any ALLOW)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [AclBinding(ResourceType[resource], name, ResourcePatternType[pattern],
                           f"User:{principal}", "*", AclOperation[op],
                           AclPermissionType[permission]) for op in operations]
    admin = AdminClient({**client_config, "log_level": 0})
    for future in admin.create_acls(bindings, request_timeout=15).values():
        future.result(timeout=30)


def revoke(client_config: Mapping[str, Any], principal: str, resource: str, name: str,
           operations: list[str], pattern: str = "LITERAL") -> None:
    """Delete the ALLOW ACLs :func:`grant` made."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    filters = [AclBindingFilter(ResourceType[resource], name, ResourcePatternType[pattern],
                                f"User:{principal}", "*", AclOperation[op],
                                AclPermissionType.ALLOW) for op in operations]
    admin = AdminClient({**client_config, "log_level": 0})
    for future in admin.delete_acls(filters, request_timeout=15).values():
        future.result(timeout=30)

