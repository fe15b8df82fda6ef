#!/bin/sh
# COMPARE AND WRITE rate of `iovm vhost-user-scsi`, driven by
# bench/vhost-client (no guest): 1-block COMPARE AND WRITE at random LBAs
# at QD1 and QD32 (each compares zeroes and writes zeroes on a fresh sparse
# image, so every command must win), next to WRITE(16) of the same block
# size at the same depths as the reference: the price of the compare, the
# mutex and the OFD range lock (src/scsi/disk_cmp.c). Each round starts
# its own back-end on a new image (cache=none by default, as bench/vhost.sh;
# IOVM_DISK_OPTS adds options). Prints one line per job and round, then the
# medians.
#
# usage: bench/caw.sh [BUILD]   (default build)
# environment: T seconds per job (5), ROUNDS (3), BS (512), SIZE_MB (256),
#   FILE (the image: /var/tmp/iovm-caw-bench.img)
set -eu
FILE=${FILE:-/var/tmp/iovm-caw-bench.img}
. "$(dirname "$0")/vhost-lib.sh"
t=${T:-5}
rounds=${ROUNDS:-3}
bs=${BS:-512}
need_built "$iovm" "$client"
make_work iovm-caw
: >"$work/results"
print_header ", block $bs"
fail=0
for r in $(seq "$rounds"); do
	for job in caw-qd1:randcaw:$bs:1 caw-qd32:randcaw:$bs:32 \
		write-qd1:randwrite:$bs:1 write-qd32:randwrite:$bs:32; do
		rm -f "$file"
		truncate -s "${size_mb}M" "$file"
		start_iovm scsi || { leg_failed "round $r" "$job" "back-end did not start"; fail=1; continue; }
		run_client iovm-scsi "round=$r" "$job" --device scsi || fail=1
		stop_backend
	done
done
cat "$work/results"
echo "# medians (iops, p99 us, back-end cpu us per I/O):"
for j in caw-qd1 caw-qd32 write-qd1 write-qd32; do
	grep "job=$j " "$work/results" | sed 's/.* iops=\([0-9]*\) .*lat_p99_us=\([0-9.]*\) .*cpu_us_per_io=\([0-9.]*\).*/\1 \2 \3/' |
		sort -n | awk -v j="$j" '{ a[NR] = $0 } END { if (NR) print j, a[int((NR + 1) / 2)]; else print j, "no result" }'
done
rm -f "$file"
exit "$fail"
