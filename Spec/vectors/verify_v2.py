#!/usr/bin/env python3
"""Recomputes the format 2.0 and 2.1 test vectors of Spec/0001-container-format.md §15.2 and
§15.3 from their bytes.

Independent of the Swift code: it follows only the rules of Spec/0001 (versions 2.0 and 2.1) and uses only
the Python standard library (zlib.crc32 for CRC-32, hashlib.sha256 for SHA-256). It parses every
record of the archive given as hex (default: v2.hex beside this script), checks and recomputes

  - every record's frame (§3.2) and CRC-32 (§1.4),
  - every varint field (§1.3: LEB128, shortest form, at most 10 bytes) and zigzag value,
  - the entry lists (§6.1) of entry records, of the pack's item table (§7.5) and of the manifest,
  - the pack's section lengths, inline chunk ids and content digest (§7.5),
  - chunk records' ids (§7.1, codec 0 only), chunk references and file ends (§8),
  - the order of §9, every commit's counts (§10.1) and chain digest (§10.3), records of unknown
    skippable types skipped from commit 0 to the final commit and refused elsewhere (§3.3),
  - the manifest records (§11.2), the manifest body (§11.3–§11.6) against the records,
  - format 2.1: the manifest index (§11.8) just before the final commit, against the manifest records,
  - format 2.2 (Spec/0004-trusted-archives.md §3): every signature record's fields and placement
    (§3.3 rules 1-6, and §3.4 rule 3: the root signature and the index before the final commit), and every
    Ed25519 signature (RFC 8032) verified over the message of §3.2 with the published test key's
    public key (Spec/0004 "Test vectors"); this needs Python's `cryptography` package (Debian
    python3-cryptography), imported only when the archive is 2.2,
  - the footer (§12): manifest digest, counts, chain digest,

and prints a record map, the chain digests and the resume tokens of every verified prefix (§10.5).
Only codec 0 (none) is decoded: the vector is written with `--compression none`.

Usage: python3 verify_v2.py [FILE.hex]     exit status 0 when every check passes (default: v2.hex;
Spec/vectors/v2.1.hex is the 2.1 vector, Spec/vectors/v2.2.hex the signed 2.2 vector).
"""

import hashlib
import os
import sys
import zlib

Z = bytes(32)
NO_OPEN_ENTRY = 0xFFFFFFFFFFFFFFFF
MAX_RECORD_PAYLOAD = 16 * 1024 * 1024
MAX_CHUNK = 8 * 1024 * 1024
MAX_SEGMENT = 4 * 1024 * 1024
MAX_ITEMS = 65536
NAMES = {1: "header", 2: "chunk", 3: "entry", 4: "chunk references", 5: "file end", 6: "commit",
         10: "footer", 11: "pack", 12: "manifest", 13: "manifest index", 14: "signature"}
# Spec/0004 "Test vectors": the published test signing key (never a real one).
TEST_KEY_SEED = bytes(range(32))
TEST_KEY_ID = b"CAIRNTES"
SIGNATURE_DOMAIN = b"Cairn archive signature\0"


def ed25519_public_key(seed):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    return Ed25519PrivateKey.from_private_bytes(seed).public_key()


def ed25519_valid(public_key, signature, message):
    from cryptography.exceptions import InvalidSignature
    try:
        public_key.verify(signature, message)
        return True
    except InvalidSignature:
        return False
KINDS = {1: "file", 2: "directory", 3: "symlink", 4: "hard link", 5: "FIFO", 6: "character device",
         7: "block device"}


class Bad(Exception):
    pass


def sha(b):
    return hashlib.sha256(b).digest()


def u(b, o, n):
    if o + n > len(b):
        raise Bad(f"field at {o} runs past the end")
    return int.from_bytes(b[o:o + n], "little")


class Reader:
    """Reads the fields of one payload or section; `base` is its archive offset (for messages)."""

    def __init__(self, data, base=0, what=""):
        self.b, self.p, self.base, self.what = data, 0, base, what

    def fail(self, msg):
        raise Bad(f"{self.what} at offset {self.base + self.p}: {msg}")

    def left(self):
        return len(self.b) - self.p

    def raw(self, n):
        if n < 0 or self.left() < n:
            self.fail(f"{n} bytes needed, {self.left()} left")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def u8(self):
        return self.raw(1)[0]

    def uint(self, n):
        return int.from_bytes(self.raw(n), "little")

    def varint(self, limit=None):
        """§1.3: unsigned LEB128, 1..10 bytes, shortest form."""
        value, shift = 0, 0
        while True:
            byte = self.u8()
            if shift == 63 and byte > 1:
                self.fail("varint does not fit 64 bits")
            value |= (byte & 0x7F) << shift
            if byte & 0x80 == 0:
                if byte == 0 and shift > 0:
                    self.fail("varint not in its shortest form")
                break
            shift += 7
        if limit is not None and value > limit:
            self.fail(f"varint {value} over the limit {limit}")
        return value

    def zigzag(self):
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def vbytes(self, limit):
        return self.raw(self.varint(limit))


def wrap64(v):
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def decode_entries(r, maximum=None):
    """§6.1: a list of entries in columns."""
    count = r.varint(min(maximum if maximum is not None else r.left(), r.left()))
    kinds = []
    for _ in range(count):
        k = r.u8()
        if k not in KINDS:
            r.fail(f"unknown kind {k}")
        kinds.append(k)
    entries, prev = [], b""
    for k in kinds:
        shared = r.varint(len(prev))
        suffix = r.vbytes(4096 - shared)
        path = prev[:shared] + suffix
        if not path:
            r.fail("empty path")
        entries.append({"kind": k, "path": path})
        prev = path
    for e in entries:
        e["mode"] = r.varint(0o7777)
    for e in entries:
        e["uid"] = r.varint(0xFFFFFFFF)
    for e in entries:
        e["gid"] = r.varint(0xFFFFFFFF)
    seconds = 0
    for e in entries:
        seconds = wrap64(seconds + r.zigzag())
        e["sec"] = seconds
    for e in entries:
        e["nsec"] = r.varint(999_999_999)
    for e in entries:
        e["size"] = r.varint() if e["kind"] == 1 else 0
    for e in entries:
        e["target"] = b""
        if e["kind"] in (3, 4):
            e["target"] = r.vbytes(4096)
            if not e["target"]:
                r.fail("empty link target")
    for e in entries:
        if e["kind"] in (6, 7):
            e["device"] = (r.varint(0xFFFFFFFF), r.varint(0xFFFFFFFF))
    for e in entries:
        xattrs = []
        for _ in range(r.varint(128)):
            name = r.vbytes(255)
            if not name:
                r.fail("empty xattr name")
            xattrs.append((name, r.vbytes(65536)))
        e["xattrs"] = xattrs
    return entries


def entry_key(e):
    """The fields a manifest row and a record must agree on."""
    return (e["kind"], e["path"], e["mode"], e["uid"], e["gid"], e["sec"], e["nsec"], e["size"], e["target"],
            e.get("device"), tuple(e["xattrs"]))


def section(payload, start, end, codec, raw_length, what):
    if codec != 0:
        raise Bad(f"{what}: codec {codec}; this script decodes codec 0 (none) only")
    data = payload[start:end]
    if len(data) != raw_length:
        raise Bad(f"{what}: stored {len(data)} bytes, declares {raw_length}")
    return data


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "v2.hex")
    with open(path) as fh:
        text = "".join(line for line in fh if not line.lstrip().startswith("#"))
    a = bytes.fromhex("".join(text.split()))
    print(f"{os.path.relpath(path)}: {len(a)} bytes, SHA-256 {sha(a).hex()}")

    # §2 prelude
    if len(a) < 12 or a[:8] != bytes.fromhex("89434149524E0D0A"):
        raise Bad("not a Cairn archive")
    major, minor = u(a, 8, 2), u(a, 10, 2)
    if major != 2:
        raise Bad(f"this script checks format 2.x, found {major}.{minor}")
    print(f"prelude: format {major}.{minor}")

    chain_link = [sha(a[:12])]       # digests added since the chain was last primed
    chain_prev = Z                   # C_(k-1), or Z before commit 0
    chunks = []                      # chunk index space (§8.5): dicts with id, raw, form, ...
    record_ids = {}                  # id -> chunk index, chunk records only (§8.4 rule 3)
    packs, refs, entries = [], [], []
    totals = {"content": 0, "stored": 0}
    open_file = None
    awaiting = None                  # a commit must follow this record (§9)
    previous = None
    sequence = 0
    verified = [(0, bytes(32))]      # (verified length, chain digest) after each commit / footer
    manifest_start, manifest_body, manifest_hash = None, b"", hashlib.sha256()
    manifest_records = []            # (framed length, d(m)) of each manifest record
    mindex = None                    # 2.1: the manifest index (§11.8): offset, end, entries
    footer = None
    rows = []
    # 2.2 (Spec/0004 §3): signatures
    sig = {"c0": None, "commit_end": None, "commit_d": None, "since_commit": [], "key": None, "first": None,
           "root": None, "prefixes": 0, "public": ed25519_public_key(TEST_KEY_SEED) if minor >= 2 else None}
    o = 12
    while o < len(a):
        if len(a) - o < 12:
            raise Bad(f"record at {o} runs past the end")
        t, flags, reserved, length = a[o], a[o + 1], u(a, o + 2, 2), u(a, o + 4, 4)
        if t == 0 or reserved != 0 or flags & 0xFE:
            raise Bad(f"record at {o}: bad type or reserved bits")
        if length > MAX_RECORD_PAYLOAD:
            raise Bad(f"record at {o}: length over 16 MiB")
        if 12 + length > len(a) - o:
            raise Bad(f"record at {o} truncated")
        framed = a[o:o + 12 + length]
        crc = u(framed, 8 + length, 4)
        if zlib.crc32(framed[:8 + length]) != crc:
            raise Bad(f"record at {o}: CRC-32 mismatch")
        payload = framed[8:8 + length]
        d = sha(framed)
        name = NAMES.get(t) if t != 14 or minor >= 2 else None
        if name is None and t not in (7, 8, 9) and flags & 1 and footer is None:
            # §3.3: an unknown skippable record (a later minor's) is skipped in the body, from
            # commit 0 to the final commit; it belongs to the chain and the order rules look
            # through it. After the final commit the manifest then does not start right after
            # a commit (§9), which the manifest's own check below refuses.
            if manifest_start is not None:
                raise Bad(f"unknown record type {t} inside the manifest")
            if sequence == 0:
                raise Bad(f"unknown record type {t} before the first commit")
            chain_link.append(d)
            rows.append((o, f"skipped type {t}", length, crc, d, "unknown, skippable: skipped (§3.3)"))
            o += 12 + length
            continue
        if name is None or t in (7, 8, 9) or (t == 13 and minor < 1):
            raise Bad(f"record at {o}: type {t} is not a {major}.{minor} record type")
        if footer is not None:
            raise Bad("data after the footer")
        if manifest_start is not None and t not in (12, 10):
            raise Bad(f"{name} record at {o} follows the manifest")
        # Spec/0004 §3.3 rule 3: between the root signature and the final commit only the index.
        if sig["root"] is not None and manifest_start is None and t not in (6, 13, 12, 10):
            raise Bad(f"{name} record at {o} between the root signature and the final commit")
        if t == 14:
            note = check_signature(a, o, flags, payload, sig, sequence, manifest_start)
            rows.append((o, name, length, crc, d, note))
            chain_link.append(d)
            sig["since_commit"].append(t)
            o += 12 + length
            continue
        # §9: the manifest index is looked through by the order rules (§11.8).
        if awaiting is not None and t not in (6, 13):
            raise Bad(f"{name} record at {o} where a commit must follow the {awaiting}")
        note = ""
        r = Reader(payload, o + 8, name)
        if t == 1:
            if o != 12:
                raise Bad("second header record")
            note = (f"chunking kind {payload[0]}, codec {payload[1]}, flags {payload[2]}, "
                    f"min {u(payload, 4, 4)}, avg {u(payload, 8, 4)}, max {u(payload, 12, 4)}")
            awaiting = "header"
        elif t == 3:
            if open_file is not None:
                raise Bad("entry record while a file is open")
            lst = decode_entries(r, 1)
            if len(lst) != 1 or r.left():
                r.fail("an entry record holds exactly one entry and nothing after it")
            e = lst[0]
            index = len(entries)
            row = {"entry": e, "loc": ("record", o), "first": len(refs), "count": 0, "digest": None}
            entries.append(row)
            if e["kind"] == 1:
                open_file = {"index": index, "bytes": 0, "refs": 0, "ids": b""}
            else:
                awaiting = f"{KINDS[e['kind']]} entry"
            note = f"entry {index}: {KINDS[e['kind']]} {e['path'].decode(errors='replace')}, size {e['size']}"
        elif t == 2:
            if open_file is None:
                raise Bad("chunk record outside a file")
            cid, codec, res, raw_len = r.raw(32), r.u8(), r.raw(3), r.uint(4)
            if res != b"\0\0\0" or not 1 <= raw_len <= MAX_CHUNK:
                r.fail("bad chunk prefix")
            stored = payload[40:]
            if codec != 0:
                raise Bad("this script decodes codec 0 only")
            if len(stored) != raw_len or sha(stored) != cid:
                r.fail("chunk bytes do not match rawLength and id")
            if cid in record_ids:
                r.fail("chunk stored twice as a chunk record")
            record_ids[cid] = len(chunks)
            chunks.append({"form": 0, "id": cid, "offset": o, "raw": raw_len, "stored": len(stored), "codec": codec})
            totals["stored"] += len(stored)
            note = f"chunk {len(chunks) - 1}: id {cid.hex()[:16]}…, raw {raw_len}"
        elif t == 4:
            if open_file is None:
                raise Bad("chunk references outside a file")
            entry_index, count = r.uint(8), r.uint(4)
            if entry_index != open_file["index"] or not 1 <= count <= 65536 or length != 12 + 36 * count:
                r.fail("bad chunk references record")
            for _ in range(count):
                cid, ref_len = r.raw(32), r.uint(4)
                if cid not in record_ids or chunks[record_ids[cid]]["raw"] != ref_len:
                    r.fail("reference to a chunk record not stored before it, or wrong length")
                refs.append(record_ids[cid])
                open_file["bytes"] += ref_len
                open_file["refs"] += 1
                open_file["ids"] += cid
                totals["content"] += ref_len
            note = f"entry {entry_index}: {count} reference(s) to chunk {record_ids[cid]}"
        elif t == 5:
            if open_file is None:
                raise Bad("file end outside a file")
            entry_index, size, count, digest = r.uint(8), r.uint(8), r.uint(8), r.raw(32)
            if (entry_index, size, count, digest) != (open_file["index"], open_file["bytes"], open_file["refs"],
                                                     sha(open_file["ids"])):
                r.fail("file end does not match the file's references")
            row = entries[entry_index]
            row["count"], row["digest"] = count, digest
            row["entry"] = dict(row["entry"], size=size)
            open_file = None
            awaiting = "file end"
            note = f"entry {entry_index}: size {size}, {count} chunk(s), content digest {digest.hex()[:16]}…"
        elif t == 11:
            if open_file is not None:
                raise Bad("pack inside a file")
            table_codec, content_codec, res = r.u8(), r.u8(), r.raw(2)
            table_raw, table_stored, content_raw, content_digest = r.uint(4), r.uint(4), r.uint(4), r.raw(32)
            if res != b"\0\0" or not 1 <= table_raw <= MAX_CHUNK or content_raw > MAX_CHUNK:
                r.fail("bad pack prefix")
            if table_stored > length - 48:
                r.fail("item table runs past the record")
            content_stored = length - 48 - table_stored
            if content_raw == 0 and (content_stored != 0 or content_codec != 0):
                r.fail("empty content must be 0 bytes with codec 0")
            table = section(payload, 48, 48 + table_stored, table_codec, table_raw, "item table")
            content = section(payload, 48 + table_stored, length, content_codec, content_raw, "content")
            tr = Reader(table, o, "pack item table")
            items = decode_entries(tr, MAX_ITEMS)
            if not items:
                tr.fail("a pack holds no item")
            before = len(chunks)
            n_chunks = before
            pack_index = len(packs)
            position, ids = 0, b""
            first_entry = len(entries)
            for e in items:
                row = {"entry": e, "loc": ("pack", pack_index), "first": len(refs), "count": 0, "digest": None}
                if e["kind"] == 1:
                    k = tr.varint()
                    if k == 0 and e["size"] > 0:       # inline: the next `size` bytes, a new chunk
                        data = content[position:position + e["size"]]
                        if len(data) != e["size"]:
                            raise Bad(f"pack at {o}: inline files overrun the content")
                        cid = sha(data)
                        ids += cid
                        chunks.append({"form": 1, "id": cid, "pack": pack_index, "raw": e["size"],
                                       "packOffset": position, "offset": o})
                        refs.append(n_chunks)
                        n_chunks += 1
                        position += e["size"]
                        row["count"] = 1
                    elif k >= 1:                          # the same bytes as chunk k - 1
                        if e["size"] == 0 or k - 1 >= n_chunks or chunks[k - 1]["raw"] != e["size"]:
                            tr.fail(f"content reference {k} invalid")
                        refs.append(k - 1)
                        row["count"] = 1
                    totals["content"] += e["size"]
                entries.append(row)
            if tr.left():
                tr.fail("bytes after the last field")
            if position != content_raw:
                raise Bad(f"pack at {o}: inline sizes sum to {position}, content is {content_raw}")
            if sha(ids) != content_digest:
                raise Bad(f"pack at {o}: content digest mismatch")
            packs.append({"offset": o, "entries": len(items), "content": content_raw, "digest": content_digest,
                          "first": first_entry})
            totals["stored"] += content_stored
            awaiting = "pack"
            note = (f"pack {pack_index}: {len(items)} items, table {table_raw} bytes (codec {table_codec}), "
                    f"content {content_raw} bytes (codec {content_codec}), "
                    f"{n_chunks - before} inline chunk(s), content digest {content_digest.hex()[:16]}…")
        elif t == 6:
            if open_file is not None and previous != 4:
                raise Bad(f"commit at {o} inside a file not after chunk references")
            # Spec/0004 §3.3 rule 6: only when the root signature directly follows the commit it
            # signs (no item after it) does the final commit follow it without an item between.
            after_root = sig["root"] is not None and sig["root"]["final"] is None
            if open_file is None and awaiting is None and not (after_root and sig["root"]["direct"]):
                raise Bad(f"commit at {o} follows no header, entry, pack or file end")
            fields = [r.uint(8) for _ in range(7)]
            digest = r.raw(32)
            if length != 88:
                r.fail("commit payload is not 88 bytes")
            computed = sha(chain_prev + b"".join(chain_link))
            expect = [sequence, len(entries), len(chunks), totals["content"], totals["stored"],
                      open_file["index"] if open_file else NO_OPEN_ENTRY, open_file["bytes"] if open_file else 0]
            if fields != expect:
                r.fail(f"commit counts {fields} differ from the records' {expect}")
            if digest != computed:
                r.fail("chain digest mismatch")
            note = (f"commit {sequence}: entries {fields[1]}, chunks {fields[2]}, content {fields[3]}, "
                    f"stored {fields[4]}, C_{sequence} = {digest.hex()}")
            sequence += 1
            chain_prev, chain_link = digest, []
            awaiting = None
            verified.append((o + 12 + length, digest))
            if sig["c0"] is None:
                sig["c0"] = digest
            if after_root:
                sig["root"]["final"] = o
            sig["commit_end"], sig["commit_d"], sig["since_commit"] = o + 12 + length, d, []
        elif t == 13:
            if flags != 1:
                raise Bad(f"manifest index at {o} without the skippable flag")
            if sequence == 0 or open_file is not None or manifest_start is not None:
                raise Bad(f"manifest index at {o} before commit 0, inside a file or after the manifest")
            if length < 4 or (length - 4) % 36:
                r.fail("a manifest index payload is 36 bytes per manifest record and a u32 count")
            n = u(payload, length - 4, 4)
            if n != (length - 4) // 36:
                r.fail(f"the count {n} does not match the payload length {length}")
            mindex = {"offset": o, "end": o + 12 + length,
                     "entries": [(u(payload, 36 * i, 4), payload[36 * i + 4:36 * i + 36]) for i in range(n)]}
            note = f"manifest index: {n} manifest record(s)"
        elif t == 12:
            if open_file is not None:
                raise Bad("manifest inside a file")
            if manifest_start is None:
                if verified[-1][0] != o:
                    raise Bad("the manifest does not start right after a commit")
                manifest_start = o
            codec, res, raw_len = r.u8(), r.raw(3), r.uint(4)
            if res != b"\0\0\0" or not 1 <= raw_len <= MAX_SEGMENT:
                r.fail("bad manifest record prefix")
            manifest_body += section(payload, 8, length, codec, raw_len, "manifest segment")
            manifest_hash.update(framed)
            manifest_records.append((len(framed), d))
            note = f"manifest segment: codec {codec}, {raw_len} body bytes"
        elif t == 10:
            if open_file is not None:
                raise Bad("footer inside a file")
            if manifest_start is None:
                if verified[-1][0] != o:
                    raise Bad("the footer does not follow a commit or manifest")
                manifest_start = o
            if length != 128 or payload[120:] != b"CAIRNEND":
                r.fail("bad footer")
            f = [u(payload, i, 8) for i in (0, 8)] + [payload[16:48]] + [u(payload, i, 8) for i in (48, 56, 64, 72, 80)]
            chain = payload[88:120]
            computed = sha(chain_prev + b"".join(chain_link))
            if chain != computed:
                r.fail("footer chain digest mismatch")
            if f[0] != manifest_start or f[1] != o - manifest_start or f[2] != manifest_hash.digest():
                r.fail("footer does not describe the manifest")
            if f[3:] != [len(entries), len(chunks), len(refs), totals["content"], totals["stored"]]:
                r.fail("footer counts differ")
            check_manifest(manifest_body, manifest_start, chunks, packs, refs, entries)
            if mindex is not None:
                # §11.8: a final index (followed by one commit, then the manifest) lists every
                # manifest record, in order.
                if mindex["entries"] != manifest_records:
                    raise Bad(f"the manifest index at {mindex['offset']} does not describe the manifest records")
            check_root_signature(sig, payload, minor)
            footer = f
            note = (f"manifest {manifest_start}+{f[1]}, manifest digest {f[2].hex()[:16]}…, "
                    f"chain {chain.hex()}")
            verified.append((o + 12 + length, chain))
        # §11.8: an index is final only when a commit and then the manifest follow it; one that
        # any other record follows is stale (a write resumed after it) and ignored.
        if mindex is not None and t != 13:
            after = mindex.get("after")
            if after is None:
                mindex["after"] = "commit" if t == 6 else None
                if t != 6:
                    mindex = None
            elif after == "commit" and t not in (12, 10):
                mindex = None
        if t != 10:
            chain_link.append(d)
        if t not in (6, 13):
            sig["since_commit"].append(t)
        rows.append((o, name, length, crc, d, note))
        previous = t
        o += 12 + length
    if footer is None:
        raise Bad("no footer: the archive is incomplete")

    print("\nrecord map (offset, type, payload length, CRC-32, d(r) = SHA-256 of the framed record):")
    for (off, name, length, crc, d, note) in rows:
        print(f"  0x{off:03X} {name:<17} {length:>4}  {crc:08X}  d={d.hex()[:16]}…  {note}")
    print("\nresume tokens (§10.5): a copy holding L..(next-1) bytes verifies the first 'length' bytes:")
    for i, (length, digest) in enumerate(verified):
        upto = verified[i + 1][0] - 1 if i + 1 < len(verified) else len(a)
        print(f"  {length:>5} … {upto:>5}  cairn1-{length}-{digest.hex()}")
    if sig["first"] is not None:
        print(f"\nsigned (Spec/0004 §3): {sig['prefixes']} prefix signature(s) and the root signature verify"
              f" with the test key {TEST_KEY_ID.hex()} (public key {sig['public'].public_bytes_raw().hex()})")
    print("\nOK: every CRC-32, varint, record digest, chain digest, commit count, the pack's content digest,"
          " the manifest body and digest and the footer recomputed from the Spec's rules")


def check_signature(a, o, flags, payload, sig, sequence, manifest_start):
    """Spec/0004 §3.2 fields and §3.3 placement of the signature record at `o`; verifies a
    prefix signature now (a root one at the footer)."""
    if flags != 1:
        raise Bad(f"signature record at {o} without the skippable flag (§3.3 rule 1)")
    if sequence == 0 or manifest_start is not None:
        raise Bad(f"signature record at {o} before commit 0 or inside the manifest (§3.3 rule 2)")
    if len(payload) != 82:
        raise Bad(f"signature record at {o}: a payload of {len(payload)} bytes, not 82")
    kind, algorithm, key_id, signed_length, signature = payload[0], payload[1], payload[2:10], u(payload, 10, 8), payload[18:82]
    if kind not in (0, 1):
        raise Bad(f"signature record at {o}: unknown kind {kind}")
    if algorithm != 1:
        raise Bad(f"signature record at {o}: unknown signature algorithm {algorithm}")
    # §3.3 rule 2: a prefix signature directly follows its commit (only signatures between); the
    # root signature signs the last commit before it, the final link's records may lie between.
    direct = all(t == 14 for t in sig["since_commit"])
    if (kind == 0 and not direct) or signed_length != sig["commit_end"]:
        raise Bad(f"the signature record at offset {o} does not follow the commit it signs (§3.3 rule 2)")
    if sig["first"] is None:
        # §3.3 rule 5: signed when the record right after commit 0 is its prefix signature.
        if sequence != 1 or kind != 0:
            raise Bad(f"signature record at {o} in an archive that is not signed (§3.3 rule 5)")
        sig["first"] = (algorithm, key_id)
    elif sig["first"] != (algorithm, key_id):
        raise Bad(f"signature record at {o}: signed by two keys (§3.3 rule 4)")
    if sig["root"] is not None:
        raise Bad(f"signature record at {o} after the root signature (§3.3 rule 3)")
    if key_id != TEST_KEY_ID:
        raise Bad(f"signature record at {o}: key id {key_id.hex()}, not the test key's {TEST_KEY_ID.hex()}")
    message = SIGNATURE_DOMAIN + bytes([kind]) + signed_length.to_bytes(8, "little") + sig["c0"] + sig["commit_d"]
    if kind == 0:
        if 14 in sig["since_commit"]:
            raise Bad(f"two prefix signatures after one commit, at {o} (§3.3 rule 3)")
        if not ed25519_valid(sig["public"], signature, message):
            raise Bad(f"the signature at offset {o} does not verify")
        sig["prefixes"] += 1
        return f"prefix signature of 0..<{signed_length} by key {key_id.hex()}: verifies"
    sig["root"] = {"offset": o, "message": message, "signature": signature, "final": None, "direct": direct}
    return f"root signature of 0..<{signed_length} and the footer by key {key_id.hex()}: checked at the footer"


def check_root_signature(sig, footer_payload, minor):
    """Spec/0004 §3.2: the root signature signs its prefix message and the footer's bytes 0..<88."""
    if sig["first"] is None:
        return
    root = sig["root"]
    if root is None or root["final"] is None:
        raise Bad("a signed archive without a root signature followed by the final commit (§3.4 rule 3)")
    if not ed25519_valid(sig["public"], root["signature"], root["message"] + footer_payload[:88]):
        raise Bad(f"the signature at offset {root['offset']} does not verify")


def check_manifest(body, base, chunks, packs, refs, entries):
    """§11.3–§11.6: decodes the body and compares it with what the records rebuilt."""
    r = Reader(body, base, "manifest body")
    count = r.varint(r.left())
    if count != len(chunks):
        r.fail(f"{count} chunks, records hold {len(chunks)}")
    prev_offset, prev_pack, first_record = 0, 0, True
    for index in range(count):
        form = r.u8()
        c = chunks[index]
        if form == 0:
            cid = r.raw(32)
            offset = prev_offset + r.varint()
            if not (offset > prev_offset or first_record):
                r.fail("chunk offsets do not increase")
            raw_len, stored, codec = r.varint(MAX_CHUNK), r.varint(MAX_RECORD_PAYLOAD), r.u8()
            if c["form"] != 0 or (cid, offset, raw_len, stored, codec) != (c["id"], c["offset"], c["raw"], c["stored"],
                                                                          c["codec"]):
                r.fail(f"chunk row {index} differs from its chunk record")
            prev_offset, first_record = offset, False
        elif form == 1:
            pack = prev_pack + r.varint(0xFFFFFFFF)
            raw_len = r.varint(MAX_CHUNK)
            if c["form"] != 1 or (pack, raw_len) != (c["pack"], c["raw"]):
                r.fail(f"packed chunk row {index} differs from its pack")
            prev_pack = pack
        else:
            r.fail(f"unknown chunk form {form}")
    n = r.varint(r.left())
    if n != len(packs):
        r.fail("pack count differs")
    prev_offset = 0
    for i, p in enumerate(packs):
        offset = prev_offset + r.varint()
        if not (offset > prev_offset or i == 0):
            r.fail("pack offsets do not increase")
        got = (offset, r.varint(MAX_ITEMS), r.varint(MAX_CHUNK), r.raw(32))
        if got != (p["offset"], p["entries"], p["content"], p["digest"]):
            r.fail(f"pack row {i} differs from its record")
        prev_offset = offset
    n = r.varint(r.left())
    if n != len(refs):
        r.fail("reference count differs")
    previous = -1
    for i in range(n):
        value = previous + 1 + r.zigzag()
        if value != refs[i]:
            r.fail(f"reference {i} is {value}, records say {refs[i]}")
        previous = value
    listed = decode_entries(r)
    if len(listed) != len(entries):
        r.fail("entry count differs")
    prev_offset, prev_pack, saw_record = 0, 0, False
    for i, (e, row) in enumerate(zip(listed, entries)):
        if entry_key(e) != entry_key(row["entry"]):
            r.fail(f"entry {i} differs from its record")
        form = r.u8()
        if form == 0:
            offset = prev_offset + r.varint()
            if not (offset > prev_offset or not saw_record):
                r.fail("entry offsets do not increase")
            loc = ("record", offset)
            prev_offset, saw_record = offset, True
        elif form == 1:
            pack = prev_pack + r.varint(0xFFFFFFFF)
            loc = ("pack", pack)
            prev_pack = pack
        else:
            r.fail(f"unknown location {form}")
        if loc != row["loc"]:
            r.fail(f"entry {i} location {loc}, records say {row['loc']}")
    running = 0
    for i, row in enumerate(entries):
        if row["entry"]["kind"] != 1:
            continue
        c = r.varint(len(refs) - running)
        if c != row["count"] or row["first"] != running:
            r.fail(f"entry {i}: reference count {c}, records say {row['count']}")
        running += c
    if running != len(refs):
        r.fail("files do not use every reference")
    for i, row in enumerate(entries):
        if row["entry"]["kind"] == 1 and row["loc"][0] == "record":
            if r.raw(32) != row["digest"]:
                r.fail(f"entry {i}: content digest differs")
    if r.left():
        r.fail(f"{r.left()} bytes after the last field")


if __name__ == "__main__":
    try:
        main()
    except Bad as error:
        print(f"FAILED: {error}")
        sys.exit(1)
