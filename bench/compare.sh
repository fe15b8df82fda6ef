#!/bin/sh
# Two builds of iovm, the same jobs, interleaved in one session: whether a
# change (a refactoring, a new helper) made any job slower. For each of
# ROUNDS rounds it runs, first for BEFORE then for AFTER, iovm's legs of
# bench/blk.sh (virtio-blk, virtio-scsi, LSI) and bench/vhost.sh (iovm's
# vhost-user-blk rows), then prints per job the median IOPS of each build,
# its min-max over the rounds (the noise), after/before and the p99s.
# QEMU's and the floor's legs are left out: they do not change with iovm.
#
# Usage: bench/compare.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [ROUNDS] [SECS]
#   (ROUNDS default 3, SECS per job default 2; the raw output goes to
#   AFTER_BUILD_DIR/compare.log). Not part of the test suite.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
before=$(realpath "$1") after=$(realpath "$2")
rounds=${3:-3} secs=${4:-2}
for d in "$before" "$after"; do
	[ -x "$d/iovm" ] || { echo "compare.sh: no iovm in $d (build it first)" >&2; exit 1; }
done
log=$after/compare.log
: >"$log"
for r in $(seq "$rounds"); do
	for b in before after; do
		dir=$before
		[ $b = after ] && dir=$after
		echo "=== round $r $b blk" >>"$log"
		BUILD=$dir bench/blk.sh --secs "$secs" --rounds 1 --pin 0,1 \
			--only iovm,iovm-scsi,iovm-lsi >>"$log" 2>&1 || true
		echo "=== round $r $b vhost" >>"$log"
		TIME=$secs bench/vhost.sh "$dir" >>"$log" 2>&1 || true
	done
done
python3 bench/compare.py "$log"
