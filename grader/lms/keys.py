"""The tool's own RSA key: it signs the tool's client-credentials requests to the platform
(AGS, NRPS), and its public half is what the platform is told at registration (a JWKS).

The private key lives in the file course.toml's [lms].tool_key names (default
.grade/lti/tool-key.pem under the course, mode 0600), never in the gradebook or the repository."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from grader.core.errors import LmsError


def make_key(path: Path) -> bool:
    """Write a new 2048-bit RSA key to `path` (0600) unless one is there. True when it was made."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(pem)
    return True


def load_key(path: Path) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError as exc:
        raise LmsError(f"the tool's key {path} does not exist: make it with `grade lms key`") from exc
    except (OSError, ValueError) as exc:
        raise LmsError(f"cannot read the tool's key {path}: {exc}") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise LmsError(f"the tool's key {path} is not an RSA key")
    return key


def key_id(key: rsa.RSAPrivateKey) -> str:
    """A stable id of the key (its public numbers' digest), the `kid` of what it signs."""
    numbers = key.public_key().public_numbers()
    return hashlib.sha256(f"{numbers.n}:{numbers.e}".encode()).hexdigest()[:16]


def public_jwks(key: rsa.RSAPrivateKey) -> dict:
    """The JWKS a platform is given to check the tool's signatures."""
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": key_id(key), "alg": "RS256", "use": "sig"})
    return {"keys": [jwk]}
