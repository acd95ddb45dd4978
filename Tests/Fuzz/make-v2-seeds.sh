#!/usr/bin/env bash
# Writes the format 2.0 seeds of Tests/Fuzz/Corpus with the cairn built in this checkout
# (`swift build`), from trees made here with fixed contents, names and times, so the seeds are
# small (tens of KiB) and every run makes the same bytes. Run as root for the device nodes
# (mknod); without root the special tree has its FIFO only. See Tests/Fuzz/README.md.
#
#   Tests/Fuzz/make-v2-seeds.sh [CAIRN]      # default .build/debug/cairn
set -euo pipefail

cd "$(dirname "$0")/../.."
CAIRN=$(realpath "${1:-.build/debug/cairn}")
CORPUS=$(realpath Tests/Fuzz/Corpus)
WORK=$(mktemp -d /tmp/cairn-seeds-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# A tree of many small files (packed), a few duplicates (references inside and across packs),
# one file over the chunking minimum (an entry record with chunk records), a symlink, a hard
# link, an empty file, a name that is not UTF-8, extended attributes, and mtimes with
# nanoseconds before 1970 and after 2262 where the file system holds them.
python3 - "$WORK/small" <<'EOF'
import os, random, sys
root = sys.argv[1]
rng = random.Random(0x5EED2)
words = [b"cairn ", b"pack ", b"entry ", b"varint ", b"commit ", b"digest ", b"record\n"]
def text(n):
    out = b""
    while len(out) < n:
        out += rng.choice(words)
    return out[:n]
os.makedirs(root + "/docs/deep")
os.makedirs(root + "/data")
files = []
for i in range(60):
    d = ["docs", "docs/deep", "data"][i % 3]
    body = text(rng.randint(40, 2500)) if i % 4 else bytes(rng.getrandbits(8) for _ in range(rng.randint(10, 600)))
    path = f"{root}/{d}/f{i:02}.txt"
    with open(path, "wb") as f:
        f.write(body)
    files.append((path, body))
for i in range(0, 12, 3):  # duplicates
    with open(f"{root}/data/copy{i}.txt", "wb") as f:
        f.write(files[i][1])
open(root + "/empty", "wb").close()
with open(root + "/large.bin", "wb") as f:
    f.write(text(24 * 1024) + bytes(rng.getrandbits(8) for _ in range(16 * 1024)) + files[5][1])
with open(os.fsencode(root) + b"/caf\xe9.txt", "wb") as f:
    f.write(b"bonjour\n")
os.symlink("f01.txt", root + "/docs/link")
os.link(files[2][0], root + "/data/hard")
os.setxattr(files[1][0], "user.cairn.seed", b"1")
os.setxattr(root + "/data", "user.cairn.dir", b"\x00\xff")
for top, dirs, names in os.walk(root):
    for name in dirs + names:
        os.utime(os.path.join(top, name), ns=(0, 1_700_000_000_500_000_000), follow_symlinks=False)
os.utime(root, ns=(0, 1_700_000_000_500_000_000))
for n, (path, _) in enumerate(files):
    os.utime(path, ns=(0, 1_700_000_000_000_000_000 + n * 1_000_000_007))
os.utime(files[7][0], ns=(0, -1_000_000_001))
EOF

# FIFOs and device nodes.
mkdir -p "$WORK/special/tree"
printf 'special\n' > "$WORK/special/tree/a.txt"
mkfifo -m 0640 "$WORK/special/tree/pipe"
mknod -m 0600 "$WORK/special/tree/null" c 1 3 2>/dev/null || true
mknod -m 0600 "$WORK/special/tree/disk" b 7 200 2>/dev/null || true
touch -h -d @1700000000 "$WORK/special/tree"/* "$WORK/special/tree"

# Relative sources: the archive's metadata names them (cairn.sources), so no temporary path.
CDC=cdc:2k:8k:32k
cd "$WORK"
for codec in none lz4 zstd zlib:6; do
    name=${codec%%:*}
    "$CAIRN" create -q -f -o "$CORPUS/v2-$name.cairn" --compression "$codec" --chunking "$CDC" small
done
"$CAIRN" create -q -f -o "$CORPUS/v2-fixed-zstd.cairn" --compression zstd:3 --chunking fixed:4k small
"$CAIRN" create -q -f -o "$CORPUS/v2-not-compressible.cairn" --not-compressible --chunking "$CDC" \
    --resources-version seed-2 --app-id org.cairn.seed --meta purpose=fuzz small
(cd special && "$CAIRN" create -q -f -o "$CORPUS/v2-special.cairn" --chunking "$CDC" tree)
cd - >/dev/null

# A copy cut in the middle of the second pack record, and a .partial that stops after a commit
# with bytes of the next record after it (what an interrupted create leaves).
python3 - "$CORPUS" <<'EOF'
import struct, sys
corpus = sys.argv[1]
data = open(f"{corpus}/v2-lz4.cairn", "rb").read()
records, offset = [], 12
while offset < len(data):
    length = struct.unpack_from("<I", data, offset + 4)[0]
    records.append((offset, data[offset], length))
    offset += 12 + length
packs = [r for r in records if r[1] == 11]
cut = packs[1][0] + (12 + packs[1][2]) // 2
open(f"{corpus}/v2-cut-mid-pack.cairn", "wb").write(data[:cut])
commits = [r for r in records if r[1] == 6]
last = commits[len(commits) // 2]
end = last[0] + 12 + last[2]
open(f"{corpus}/v2-incomplete.cairn.partial", "wb").write(data[:end + 20])
EOF

# Payloads for the entries target, straight from an archive whose sections are all stored raw:
# an entry record, a pack record (item table and content), its item table alone, a manifest
# record's payload and the manifest body.
python3 - "$CORPUS" <<'EOF'
import struct, sys
corpus = sys.argv[1]
data = open(f"{corpus}/v2-not-compressible.cairn", "rb").read()
records, offset = [], 12
while offset < len(data):
    length = struct.unpack_from("<I", data, offset + 4)[0]
    records.append((data[offset], data[offset + 8:offset + 8 + length]))
    offset += 12 + length
entry = next(p for t, p in records if t == 3)
pack = [p for t, p in records if t == 11][1]
manifest = next(p for t, p in records if t == 12)
assert manifest[0] == 0 and pack[0] == 0 and pack[1] == 0, "sections should be stored raw"
open(f"{corpus}/entries-entry-record.bin", "wb").write(entry)
open(f"{corpus}/entries-pack-payload.bin", "wb").write(pack)
open(f"{corpus}/entries-pack-table.bin", "wb").write(pack[48:48 + struct.unpack_from("<I", pack, 8)[0]])
open(f"{corpus}/entries-manifest-segment.bin", "wb").write(manifest)
open(f"{corpus}/entries-manifest-body.bin", "wb").write(manifest[8:])
EOF

cp Tests/CairnTests/Fixtures/golden-v2.cairn "$CORPUS/v2-golden.cairn"
cp Tests/CairnTests/Fixtures/golden-v2.1.cairn "$CORPUS/v2.1-golden.cairn"
ls -l "$CORPUS"
