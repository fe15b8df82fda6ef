#!/bin/sh
# virtio-scsi request path: requests/s with the per-queue pool (as shipped)
# vs malloc+memset of the whole request, alternating rounds, medians.
# Usage: bench/vscsi-req.sh [ROUNDS] [SECS]   (after ninja -C build)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-5}
secs=${2:-2}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for cmd in tur read4k; do
	for qd in 1 32; do
		: >/tmp/vscsi-pool.$$; : >/tmp/vscsi-malloc.$$
		i=0
		while [ $i -lt "$rounds" ]; do
			for v in pool malloc; do
				build/bench/bench-vscsi-$v cmd=$cmd qd=$qd secs=$secs |
					sed 's/.*reqs_per_s=//' >>/tmp/vscsi-$v.$$
			done
			i=$((i + 1))
		done
		p=$(median </tmp/vscsi-pool.$$)
		m=$(median </tmp/vscsi-malloc.$$)
		echo "cmd=$cmd qd=$qd pool=$p malloc_memset=$m ratio=$(echo "$p $m" | awk '{printf "%.2f", $1/$2}')"
	done
done
rm -f /tmp/vscsi-pool.$$ /tmp/vscsi-malloc.$$
