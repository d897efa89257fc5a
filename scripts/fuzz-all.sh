#!/usr/bin/env bash
# Runs every fuzz target of the module, one at a time, for the given time each:
#   scripts/fuzz-all.sh 20s        (make fuzz FUZZTIME=20s)
# A target is any `func FuzzXxx(` at the start of a line in a *_test.go file
# (outside .git, hidden directories, testdata and vendor); it runs as
#   go test -run '^$' -fuzz '^FuzzXxx$' -fuzztime "$1" ./dir
# All targets run even when one fails; the exit status is 1 if any failed.
# New crashers land in the package's testdata/fuzz, as go test does. $GO, if
# set, replaces the go command.
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 FUZZTIME   (for example 20s or 1000x)" >&2
	exit 2
fi
fuzztime=$1
cd "$(dirname "$0")/.."

targets=()
while IFS= read -r -d '' file; do
	dir=$(dirname "$file")
	while IFS= read -r name; do
		targets+=("$dir $name")
	done < <(sed -n -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$file")
done < <(find . \( -name .git -o -name 'testdata' -o -name vendor -o -path './*/.*' \) -prune -o -name '*_test.go' -type f -print0 | sort -z)

if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz-all: no fuzz targets found" >&2
	exit 1
fi

failed=()
for t in "${targets[@]}"; do
	dir=${t%% *}
	name=${t#* }
	echo "=== $name ($dir, $fuzztime)"
	if ! ${GO:-go} test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$dir"; then
		failed+=("$name ($dir)")
	fi
done

echo "fuzz-all: ran ${#targets[@]} targets"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'fuzz-all: FAILED %s\n' "${failed[@]}" >&2
	exit 1
fi
