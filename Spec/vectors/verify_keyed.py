#!/usr/bin/env python3
"""Recomputes the keyed-archive test vectors of Spec/0004-trusted-archives.md §6.6 and §6.7.

Independent of the Swift code: §6.6's chunk ids with the standard library (hmac, hashlib), and
§6.7's gear table with Python's `cryptography` package (Debian python3-cryptography), whose
ChaCha20 takes a 16-byte nonce: the 4-byte little-endian block counter (0), then the 12-byte
nonce (zero).

Usage: python3 verify_keyed.py     exit status 0 when every value equals the Spec's.
"""
import hashlib
import hmac
import struct
import sys

KEY = bytes(range(32))
failures = 0


def check(name, got, want):
    global failures
    ok = got == want
    failures += 0 if ok else 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {got}" + ("" if ok else f" (the Spec says {want})"))


# §6.6: id = HMAC-SHA-256(idKey, raw), idKey = 00 01 ... 1f.
check('id("cairn")', hmac.new(KEY, b"cairn", hashlib.sha256).hexdigest(),
      "89e3205848c139a70b66aefeaf5670280bd9494cb0c7b1acf77c1405c2bd743b")
check('id("")', hmac.new(KEY, b"", hashlib.sha256).hexdigest(),
      "d38b42096d80f45f826b44a9d5607de72496a415d3f4a1a8c88e3bb9da8dc1cb")

# §6.7: gear[i] = little-endian u64 of bytes 8i..8i+8 of the ChaCha20 keystream (RFC 8439),
# chunkerKey = 00 01 ... 1f, nonce 00 x 12, counter from 0.
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms  # noqa: E402

stream = Cipher(algorithms.ChaCha20(KEY, bytes(16)), mode=None).encryptor().update(bytes(2048))
gear = struct.unpack("<256Q", stream)
for index, want in [(0, 0x6A19C5D97D2BFD39), (1, 0x494ADCB87703BD8D), (2, 0xCC6ADEBC6FD8358A),
                    (3, 0x9224EAD84C7DCCB2), (255, 0x7343D61FB3C443B8)]:
    check(f"gear[{index}]", f"0x{gear[index]:016X}", f"0x{want:016X}")

sys.exit(1 if failures else 0)
