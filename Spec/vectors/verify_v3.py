#!/usr/bin/env python3
"""Recomputes the format 3.0 (encrypted archive) test vectors of Spec/0004-trusted-archives.md
("Test vectors", §6.2-§6.4) from the Spec's rules, and compares them with Spec/vectors/v3.0.txt.

Independent of the Swift code: Python's standard library (hmac, hashlib, base64, zlib.crc32)
and the `cryptography` package (Debian python3-cryptography): X25519, HKDF-SHA-256,
ChaCha20-Poly1305 (RFC 8439), Argon2id (RFC 9106), and the ChaCha20 stream cipher.

`cryptography` has no XChaCha20-Poly1305, so it is put together here from its parts, as
draft-irtf-cfrg-xchacha-03 §2.3 defines it:
  subkey = HChaCha20(key, nonce[0:16]);
  XChaCha20-Poly1305(key, nonce, m, ad) = ChaCha20-Poly1305(subkey, 00 00 00 00 || nonce[16:24], m, ad).
HChaCha20 (§2.2) is the ChaCha20 block function without its final addition, keeping words 0-3 and
12-15. It is taken from cryptography's ChaCha20, whose 16-byte nonce is the block's words 12-15
(a 4-byte little-endian counter, then the 12-byte nonce): one block of keystream (encrypting 64
zero bytes) with nonce[0:16] in words 12-15 is the block function's output, and subtracting the
input state (the constants "expand 32-byte k" in words 0-3, nonce[0:16] in words 12-15) from it,
word by word modulo 2^32, gives the rounds' state before the addition.

Usage: python3 verify_v3.py            exit status 0 when every value equals v3.0.txt's.
       python3 verify_v3.py --write    writes v3.0.txt from the values computed here.
"""
import base64
import hashlib
import hmac
import os
import struct
import sys
import zlib

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "v3.0.txt")


def run(start, count):
    return bytes((start + i) & 0xFF for i in range(count))


# The fixed inputs (Spec/0004, Test vectors).
BLOCK_KEY = run(0x00, 32)
ID_KEY = run(0x20, 32)
CHUNKER_KEY = run(0x40, 32)
ARCHIVE_ID = run(0x80, 16)
BLOCK_NONCE = run(0xC0, 24)
BLOCK_INDEX = 1
BLOCK_PLAINTEXT = b"cairn 3.0 sealed block vector\n"
IDENTITY = run(0x60, 32)
EPHEMERAL = run(0xA0, 32)
FILE_KEY = run(0xE0, 16)
PAYLOAD_NONCE = run(0xF0, 16)
PASSPHRASE = b"cairn test passphrase"
SALT = run(0x90, 16)
OPS, MEM = 1, 8192


# --- XChaCha20-Poly1305 from cryptography's parts ---------------------------------------------
def hchacha20(key, nonce16):
    block = Cipher(algorithms.ChaCha20(key, nonce16), mode=None).encryptor().update(bytes(64))
    out = struct.unpack("<16I", block)
    constants = struct.unpack("<4I", b"expand 32-byte k")
    words12 = struct.unpack("<4I", nonce16)
    first = [(out[i] - constants[i]) & 0xFFFFFFFF for i in range(4)]
    last = [(out[12 + i] - words12[i]) & 0xFFFFFFFF for i in range(4)]
    return struct.pack("<8I", *(first + last))


def xchacha20poly1305_seal(key, nonce24, plaintext, ad):
    subkey = hchacha20(key, nonce24[:16])
    return ChaCha20Poly1305(subkey).encrypt(bytes(4) + nonce24[16:], plaintext, ad)


# draft-irtf-cfrg-xchacha-03 §2.2.1: the HChaCha20 test vector, so the construction above is
# checked against the draft before it is used.
assert hchacha20(
    bytes.fromhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
    bytes.fromhex("000000090000004a0000000031415927"),
).hex() == "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc", "HChaCha20 (draft §2.2.1)"


# --- §6.3 sealed blocks ----------------------------------------------------------------------
def block_ad(index, final):
    return b"cairn-block-v1" + ARCHIVE_ID + struct.pack("<Q", index) + bytes([1 if final else 0])


# --- §6.4.1 age v1 ---------------------------------------------------------------------------
def b64(data):
    return base64.b64encode(data).decode().rstrip("=")


def hkdf(ikm, salt, info, length=32):
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def age_file(stanzas, file_key, nonce, payload):
    """stanzas: (arguments, body) pairs. Returns the whole file."""
    header = b"age-encryption.org/v1\n"
    for arguments, body in stanzas:
        header += b"-> " + b" ".join(arguments) + b"\n"
        text = b64(body).encode()
        lines = [text[i:i + 64] for i in range(0, len(text), 64)]
        if len(text) % 64 == 0:
            lines.append(b"")
        header += b"\n".join(lines) + b"\n"
    header += b"---"
    mac = hmac.new(hkdf(file_key, b"", b"header"), header, hashlib.sha256).digest()
    header += b" " + b64(mac).encode() + b"\n"
    payload_key = hkdf(file_key, nonce, b"payload")
    assert len(payload) <= 65536
    sealed = ChaCha20Poly1305(payload_key).encrypt(bytes(11) + b"\x01", payload, None)
    return header + nonce + sealed


# --- §6.4.2 X25519 ---------------------------------------------------------------------------
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def bech32(hrp, data):
    def polymod(values):
        generator = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
        check = 1
        for value in values:
            top = check >> 25
            check = (check & 0x1FFFFFF) << 5 ^ value
            for i in range(5):
                check ^= generator[i] if (top >> i) & 1 else 0
        return check

    groups, accumulator, bits = [], 0, 0
    for byte in data:
        accumulator, bits = accumulator << 8 | byte, bits + 8
        while bits >= 5:
            bits -= 5
            groups.append(accumulator >> bits & 31)
    if bits:
        groups.append(accumulator << (5 - bits) & 31)
    low = hrp.lower()
    expanded = [ord(c) >> 5 for c in low] + [0] + [ord(c) & 31 for c in low]
    value = polymod(expanded + groups + [0] * 6) ^ 1
    checksum = [(value >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(BECH32[g] for g in groups + checksum)


def raw_public(private):
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def x25519_stanza(recipient, ephemeral, file_key):
    share = raw_public(ephemeral)
    shared = X25519PrivateKey.from_private_bytes(ephemeral).exchange(X25519PublicKey.from_public_bytes(recipient))
    wrap = hkdf(shared, share + recipient, b"age-encryption.org/v1/X25519")
    body = ChaCha20Poly1305(wrap).encrypt(bytes(12), file_key, None)
    return [b"X25519", b64(share).encode()], body


# --- §6.4.3 cairn-argon2id -------------------------------------------------------------------
def argon2id_stanza(passphrase, salt, ops, mem, file_key):
    wrap = Argon2id(salt=salt, length=32, iterations=ops, lanes=1, memory_cost=mem // 1024).derive(passphrase)
    body = ChaCha20Poly1305(wrap).encrypt(bytes(12), file_key, None)
    return [b"cairn-argon2id", b64(salt).encode(), str(ops).encode(), str(mem).encode()], body


# --- the vectors -----------------------------------------------------------------------------
def vectors():
    v = {}
    secrets = bytes([1]) + BLOCK_KEY + ID_KEY + CHUNKER_KEY
    v["secrets"] = secrets
    for final in (0, 1):
        ad = block_ad(BLOCK_INDEX, final)
        v[f"block.final{final}.ad"] = ad
        v[f"block.final{final}.sealed"] = BLOCK_NONCE + xchacha20poly1305_seal(BLOCK_KEY, BLOCK_NONCE, BLOCK_PLAINTEXT, ad)
    recipient = raw_public(IDENTITY)
    v["x25519.recipient"] = bech32("age", recipient).encode()
    arguments, body = x25519_stanza(recipient, EPHEMERAL, FILE_KEY)
    v["x25519.stanza"] = b"-> " + b" ".join(arguments) + b"\n" + b64(body).encode() + b"\n"
    v["x25519.keyblock"] = age_file([(arguments, body)], FILE_KEY, PAYLOAD_NONCE, secrets)
    arguments, body = argon2id_stanza(PASSPHRASE, SALT, OPS, MEM, FILE_KEY)
    v["argon2id.stanza"] = b"-> " + b" ".join(arguments) + b"\n" + b64(body).encode() + b"\n"
    v["argon2id.keyblock"] = age_file([(arguments, body)], FILE_KEY, PAYLOAD_NONCE, secrets)
    # §6.2: the prelude, then the envelope record framed by Spec/0001 §3.1 (type 15, flags 0,
    # reserved 0, length, payload, CRC-32 of header and payload).
    key_block = v["x25519.keyblock"]
    payload = struct.pack("<I", 16384) + ARCHIVE_ID + struct.pack("<I", len(key_block)) + key_block
    record = struct.pack("<BBHI", 15, 0, 0, len(payload)) + payload
    record += struct.pack("<I", zlib.crc32(record))
    v["envelope"] = bytes.fromhex("89434149524e0d0a") + struct.pack("<HH", 3, 0) + record
    return v


TEXT = ("x25519.recipient",)


def render(v):
    lines = [
        "# Spec/0004-trusted-archives.md, Test vectors: format 3.0 (encrypted archives), from the fixed",
        "# inputs the Spec lists. One value a line, `name = hex` (text for the recipient); '#' lines are",
        "# comments. Written and checked by verify_v3.py; checked against the Swift code by",
        "# Tests/CairnTests/SpecVectorV3Tests.swift.",
    ]
    for name, value in v.items():
        lines.append(f"{name} = {value.decode() if name in TEXT else value.hex()}")
    return "\n".join(lines) + "\n"


def main():
    computed = vectors()
    if sys.argv[1:] == ["--write"]:
        with open(VECTORS, "w") as out:
            out.write(render(computed))
        print(f"wrote {VECTORS}")
        return 0
    stored = {}
    with open(VECTORS) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, value = line.partition(" = ")
                stored[name] = value
    failures = 0
    for name, value in computed.items():
        text = value.decode() if name in TEXT else value.hex()
        ok = stored.get(name) == text
        failures += 0 if ok else 1
        shown = text if len(text) <= 72 else f"{text[:32]}…{text[-32:]} ({len(value)} bytes)"
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {shown}" + ("" if ok else f" (v3.0.txt says {stored.get(name)})"))
    for name in stored.keys() - computed.keys():
        failures += 1
        print(f"FAIL {name}: in v3.0.txt, not computed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
