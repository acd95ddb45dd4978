#!/bin/sh
# Regenerates the golden archives of the version-hop tests: the sample notes app's seeded data
# (3 notes, seed 1) exported in data versions 1, 2 and 3. Run from the package root after
# `swift build`; commit the results with `git add -f` (*.cairn is ignored). They are meant to be
# made once: an archive written by an old exporter must keep importing.
set -eu
sample=.build/debug/cairn-migration-sample
fixtures=Tests/CairnMigrationTests/Fixtures
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$sample" seed "$scratch/notes"
for version in 1 2 3; do
    rm -f "$fixtures/notes-v$version.cairn"
    "$sample" export "$scratch/notes" "$fixtures/notes-v$version.cairn" --version "$version"
done
