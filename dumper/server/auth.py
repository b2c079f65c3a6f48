"""Authentication plugins of the endpoint: ``mysql_native_password`` and ``caching_sha2_password``.

What the server keeps per user is a hash, never the password (MySQL's forms, so a hash can be copied
from ``mysql.user.authentication_string``):

* native: ``*`` + 40 hex digits = SHA1(SHA1(password)) — a login proves knowledge of SHA1(password);
* caching_sha2: ``$A$005$`` + 20 salt bytes + 43 characters of SHA-256 crypt (Drepper's SHA-crypt,
  5000 rounds, MySQL's ``mysys/crypt_genhash_impl.cc``).

caching_sha2_password (MySQL ``sql/auth/sha2_password.cc``, client side as PyMySQL's
``_auth.caching_sha2_password_auth``): the client answers the 20-byte nonce with
``SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce)``. *Fast auth* checks that against the in-memory
cache of ``SHA256(SHA256(pw))`` (filled by a successful full auth) and sends ``0x01 0x03``. Otherwise
*full auth*: ``0x01 0x04``, then the client sends the password in clear over TLS, or — on a plain
connection — asks for the RSA public key (``0x02``) and sends ``RSA-OAEP(pw + NUL XOR nonce)``.
A plain-text password on a plain connection is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cached_property

from binlog.wire import xor_with_nonce

NATIVE = "mysql_native_password"
CACHING_SHA2 = "caching_sha2_password"
PLUGINS = (NATIVE, CACHING_SHA2)

SHA2_PREFIX = "$A$"
SHA2_SALT_LEN = 20
SHA2_DIGEST_LEN = 43
_B64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# caching_sha2_password's one-byte messages after 0x01 (AuthMoreData) and the client's key request.
FAST_AUTH_SUCCESS = b"\x01\x03"
PERFORM_FULL_AUTH = b"\x01\x04"
REQUEST_PUBLIC_KEY = b"\x02"


class AuthConfigError(ValueError):
    """A stored password form that is not one of the two hashes (or a plain password)."""


# -- SHA-256 crypt (the $A$ form) ---------------------------------------------------------------------

def _b64_from_24bit(b2: int, b1: int, b0: int, n: int) -> str:
    w = (b2 << 16) | (b1 << 8) | b0
    out = []
    for _ in range(n):
        out.append(_B64[w & 0x3F])
        w >>= 6
    return "".join(out)


_ORDER = ((0, 10, 20), (21, 1, 11), (12, 22, 2), (3, 13, 23), (24, 4, 14), (15, 25, 5), (6, 16, 26),
          (27, 7, 17), (18, 28, 8), (9, 19, 29))


def sha256_crypt(password: bytes, salt: bytes, rounds: int = 5000) -> str:
    """The 43-character digest of Drepper's SHA-crypt (SHA-256); MySQL uses a 20-byte salt."""
    sha = hashlib.sha256
    alt = sha(password + salt + password).digest()
    ctx = sha(password + salt)
    n = len(password)
    for left in range(n, 0, -32):
        ctx.update(alt if left > 32 else alt[:left])
    i = n
    while i:
        ctx.update(alt if i & 1 else password)
        i >>= 1
    a = ctx.digest()
    dp = sha(password * n).digest()
    p = (dp * (n // 32 + 1))[:n]
    ds = sha(salt * (16 + a[0])).digest()
    s = (ds * (len(salt) // 32 + 1))[:len(salt)]
    c = a
    for r in range(rounds):
        h = sha(p if r & 1 else c)
        if r % 3:
            h.update(s)
        if r % 7:
            h.update(p)
        h.update(c if r & 1 else p)
        c = h.digest()
    out = "".join(_b64_from_24bit(c[x], c[y], c[z], 4) for x, y, z in _ORDER)
    return out + _b64_from_24bit(0, c[31], c[30], 3)


def caching_sha2_hash(password: str, salt: bytes | None = None) -> str:
    """The ``$A$005$…`` string MySQL stores for a caching_sha2_password user."""
    if salt is None:
        # MySQL's salts are any 7-bit bytes but NUL and '$'; ours keep to crypt's 64 characters, so the
        # string can be pasted into a TOML file as it is.
        salt = "".join(secrets.choice(_B64) for _ in range(SHA2_SALT_LEN)).encode("ascii")
    return f"{SHA2_PREFIX}005${salt.decode('ascii')}{sha256_crypt(password.encode('utf-8'), salt)}"


def native_hash(password: str) -> str:
    """The ``*HEX`` string MySQL stores for a mysql_native_password user."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode("utf-8")).digest()).hexdigest().upper()


# -- a user's credential ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Credential:
    """What the server knows of one user: its plugin and the hash(es) that plugin checks."""

    plugin: str
    native: bytes | None = None         # SHA1(SHA1(pw)); b"" for an empty password
    sha2: str | None = None             # the $A$ form; "" for an empty password

    @classmethod
    def from_config(cls, secret: str, plugin: str | None = None) -> Credential:
        """``secret``: a plain password, ``*HEX`` (native) or ``$A$005$…`` (caching_sha2). The plugin
        follows the hash's form; a plain password is hashed at once (the plain text is not kept)."""
        if secret.startswith("*") and len(secret) == 41:
            try:
                native = bytes.fromhex(secret[1:])
            except ValueError:
                raise AuthConfigError("a '*' password hash needs 40 hex digits after the '*'") from None
            if plugin not in (None, NATIVE):
                raise AuthConfigError(f"a '*' hash is a {NATIVE} hash, not {plugin}")
            return cls(NATIVE, native=native)
        if secret.startswith(SHA2_PREFIX):
            parse_sha2(secret)
            if plugin not in (None, CACHING_SHA2):
                raise AuthConfigError(f"a '$A$' hash is a {CACHING_SHA2} hash, not {plugin}")
            return cls(CACHING_SHA2, sha2=secret)
        plugin = plugin or NATIVE
        if plugin not in PLUGINS:
            raise AuthConfigError(f"unknown auth plugin {plugin!r} (known: {', '.join(PLUGINS)})")
        if plugin == NATIVE:
            return cls(NATIVE, native=hashlib.sha1(hashlib.sha1(secret.encode()).digest()).digest()
                       if secret else b"")
        return cls(CACHING_SHA2, sha2=caching_sha2_hash(secret) if secret else "")

    def check_full(self, password: bytes) -> bool:
        """caching_sha2 full auth: the plain password against the $A$ hash."""
        if self.sha2 is None:
            return False
        if self.sha2 == "":
            return password == b""
        rounds, salt, digest = parse_sha2(self.sha2)
        return hmac.compare_digest(sha256_crypt(password, salt, rounds), digest)

    @cached_property
    def is_empty(self) -> bool:
        return self.native == b"" or self.sha2 == ""


def parse_sha2(secret: str) -> tuple[int, bytes, str]:
    """``$A$RRR$<salt 20><digest 43>`` → (rounds, salt, digest); RRR is thousands of rounds, hex."""
    parts = secret.split("$", 3)
    body = parts[3] if len(parts) == 4 else ""
    try:
        rounds = int(parts[2], 16) * 1000 if len(parts) == 4 else 0
    except ValueError:
        rounds = 0
    if parts[:2] != ["", "A"] or not rounds or len(body) != SHA2_SALT_LEN + SHA2_DIGEST_LEN \
            or not body.isascii():
        raise AuthConfigError("a '$A$' password hash must be $A$005$ + 20 salt characters + 43 digest "
                              "characters (MySQL's caching_sha2_password authentication_string)")
    return rounds, body[:SHA2_SALT_LEN].encode("ascii"), body[SHA2_SALT_LEN:]


# -- the wire checks ----------------------------------------------------------------------------------

def check_native_scramble(stored: bytes | None, nonce: bytes, response: bytes) -> bool:
    """mysql_native_password: response = SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw)))."""
    if stored is None:
        return False
    if stored == b"":
        return response == b""
    if len(response) != 20:
        return False
    mask = hashlib.sha1(nonce + stored).digest()
    stage1 = bytes(a ^ b for a, b in zip(response, mask, strict=True))
    return hmac.compare_digest(hashlib.sha1(stage1).digest(), stored)


def sha2_fast_digest(password: bytes) -> bytes:
    """What the fast-auth cache holds for a user: SHA256(SHA256(pw))."""
    return hashlib.sha256(hashlib.sha256(password).digest()).digest()


def check_sha2_scramble(cached: bytes, nonce: bytes, response: bytes) -> bool:
    """caching_sha2 fast auth: response = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce)."""
    if len(response) != 32:
        return False
    mask = hashlib.sha256(cached + nonce).digest()
    stage1 = bytes(a ^ b for a, b in zip(response, mask, strict=True))
    return hmac.compare_digest(hashlib.sha256(stage1).digest(), cached)


class RsaKeys:
    """The server's RSA pair for caching_sha2 full auth on a plain connection (made once per server)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    @property
    def size(self) -> int:
        return self._key.key_size // 8

    def decrypt_password(self, cipher: bytes, nonce: bytes) -> bytes | None:
        """The password the client encrypted (RSA-OAEP with SHA-1, as libmysql and PyMySQL do)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        try:
            plain = self._key.decrypt(cipher, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()),
                                                           algorithm=hashes.SHA1(), label=None))
        except ValueError:
            return None
        plain = xor_with_nonce(plain, nonce)
        return plain[:-1] if plain.endswith(b"\0") else None
