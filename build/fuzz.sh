#!/usr/bin/env bash
# `make fuzz`: runs every Go fuzz target (func FuzzX(f *testing.F) in a
# backend package's _test.go files; docs/FUZZING.md lists them) for
# FUZZTIME each, one after another, and fails if any finds a failing input.
#
#   FUZZTIME      time per target, a go test -fuzztime value (default 10m)
#   FUZZPARALLEL  fuzzing workers per target, go test -parallel (default 1,
#                 kind to a shared machine)
#   FUZZ          only the targets whose name matches this extended regular
#                 expression (default: all)
#   FUZZLOGS      where each target's log goes (default out/fuzz)
#
# A failing input is written by go test to the package's
# testdata/fuzz/FuzzX/: fix the code and commit that file as a regression
# seed (plain `go test` runs it). At the end the script prints one line per
# target: time, execs, new interesting inputs, result.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10m}
FUZZPARALLEL=${FUZZPARALLEL:-1}
FUZZ=${FUZZ:-.}
FUZZLOGS=${FUZZLOGS:-out/fuzz}
mkdir -p "$FUZZLOGS"

# "<name> <./package/dir>" for every fuzz target, sorted.
mapfile -t targets < <(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' backend |
	sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\2 ./\1/#' | sort -k2,2 -k1,1 | grep -E "^($FUZZ)" || true)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no target matches FUZZ=$FUZZ" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each, -parallel $FUZZPARALLEL; logs in $FUZZLOGS"
failed=()
summary=()
for t in "${targets[@]}"; do
	read -r name pkg <<<"$t"
	log="$FUZZLOGS/$name.log"
	echo "== $name ($pkg)"
	start=$(date +%s)
	if $GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPARALLEL" "$pkg" >"$log" 2>&1; then
		result=ok
	else
		result=FAILED
		failed+=("$name")
		grep -E -A8 '^--- FAIL|Failing input written' "$log" | head -20
	fi
	last=$(grep -E '^fuzz: elapsed' "$log" | tail -n1)
	line=$(printf '%-24s %-26s %5ss  %s  %s' "$name" "$pkg" "$(($(date +%s) - start))" "${last#fuzz: }" "$result")
	summary+=("$line")
	echo "$line"
done
echo
echo "fuzz: summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: FAILED: ${failed[*]} (failing inputs under the packages' testdata/fuzz/; logs in $FUZZLOGS)" >&2
	exit 1
fi
