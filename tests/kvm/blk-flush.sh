#!/bin/bash
# Durability of completed FLUSHes: the probe writes a region, issues FLUSH
# and prints "probe: FLUSHED ..." when it completed; the test kills iovm with
# SIGKILL on seeing that line and checks the host file holds the data. Run
# with cache=none and cache=writeback.
# Usage: blk-flush.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 check=$3
need_kvm
make_scratch_vm

n=0
for cache in none writeback; do
	n=$((n + 1))
	disk=$scratch/disk$n.img
	log=$scratch/log$n
	fallocate -l 16M "$disk" || die "cannot create $disk"
	echo "+ iovm run ... --disk path=$disk,cache=$cache (killed on FLUSHED)"
	"$iovm" run --kernel "$probe" --memory 64M \
		--disk "path=$disk,cache=$cache" \
		--append "test=blk-flush seed=$((20 + n)) region=8M hold_ms=60000" \
		>"$log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do	# 60 s
		grep -q '^probe: FLUSHED' "$log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	pid=""
	cat "$log"
	skip_if_no_disks "$log"
	grep -q '^probe: FLUSHED' "$log" || die "no FLUSHED marker (status $rc)"
	[ "$rc" = 137 ] || die "iovm was not killed by SIGKILL (status $rc)"
	off=$(field "$log" "probe: FLUSHED" offset)
	len=$(field "$log" "probe: FLUSHED" len)
	seed=$(field "$log" "probe: FLUSHED" seed)
	"$check" "$disk" "$off" "$len" "$seed" ||
		die "flushed data missing from the host file (cache=$cache)"
done
echo "PASS"
