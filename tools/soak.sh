#!/bin/sh
# Runs meson test suites several times in a row, optionally with the machine
# loaded (stress-ng), and reports how many rounds passed: the check that a
# suite passes by what the code does and not by timing.
#
#   tools/soak.sh [-n ROUNDS] [-l CPUS] [-C BUILDDIR] [SUITE...]
#
#   -n ROUNDS   rounds (default 10)
#   -l CPUS     run `stress-ng --cpu CPUS` beside the tests (default: none)
#   -C DIR      the meson build directory (default build)
#   SUITE       meson suites to run (default: kvm guest)
#
# Each round's log is kept as DIR/soak/SUITES-round-N.log; the exit status is 0 only
# if every round passed.
set -eu

usage() {
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
}

rounds=10 load= build=build
while getopts n:l:C:h o; do
	case $o in
	n) rounds=$OPTARG ;;
	l) load=$OPTARG ;;
	C) build=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- kvm guest
case $rounds in ''|*[!0-9]*|0) echo "soak: -n wants a positive number" >&2; exit 2 ;; esac
[ -d "$build" ] || { echo "soak: no build directory $build (meson setup $build)" >&2; exit 2; }

stress=
cleanup() { [ -z "$stress" ] || kill "$stress" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
if [ -n "$load" ]; then
	command -v stress-ng >/dev/null ||
		{ echo "soak: -l needs stress-ng (apt-get install stress-ng)" >&2; exit 2; }
	stress-ng --cpu "$load" --quiet &
	stress=$!
fi

mkdir -p "$build/soak"
suites=
for s in "$@"; do suites="$suites --suite $s"; done
passed=0
for i in $(seq 1 "$rounds"); do
	log=$build/soak/$(echo "$*" | tr " " "-")-round-$i.log
	start=$(date +%s)
	# shellcheck disable=SC2086
	if meson test -C "$build" --print-errorlogs $suites >"$log" 2>&1; then
		passed=$((passed + 1))
		verdict=pass
	else
		verdict="FAIL: $(grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT)' "$log" |
			awk '{print $4}' | tr '\n' ' ')"
	fi
	echo "soak: round $i/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)): $verdict"
done
echo "soak: $passed/$rounds rounds passed (suites: $*${load:+, stress-ng --cpu $load})"
[ "$passed" = "$rounds" ]
