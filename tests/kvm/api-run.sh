#!/bin/bash
# `iovm run --api-socket` with the probe guest: started --paused (no vCPU
# runs a guest instruction), query-status says paused, query-disks shows
# the disk, resumed, and the probe's blk job then runs to its PASS;
# then a probe holding after its test (vCPUs running) is paused, seen
# paused, resumed, seen running, and `shutdown` stops the VM with status 0
# and removes the socket.
# Usage: api-run.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch_vm
disk=$scratch/disk.img
api=$scratch/api.sock
fallocate -l 32M "$disk" || die "cannot create $disk"

# 1. Paused from the start: the probe's job runs only after resume.
"$iovm" run --paused --kernel "$probe" --memory 128M --disk "path=$disk,cache=writeback" \
	--append "test=blk seed=7" --api-socket "$api" >"$scratch/log1" 2>&1 &
pid=$!
wait_api "$scratch/log1"
ok status
has "status: paused"
has "running: no"
has "command: run"
ok disks
has "disk0  virtio-blk  32M   no  writeback  1       $disk"
grep -q '^probe:' "$scratch/log1" && die "the probe ran while paused"
ok resume
wait "$pid"
rc=$?
pid=
cat "$scratch/log1"
[ "$rc" = 1 ] || die "exit status $rc after resume, expected 1 (probe PASS)"
grep -q '^probe: PASS' "$scratch/log1" || die "no probe: PASS"
[ ! -e "$api" ] || die "the API socket outlived iovm"

# 2. Paused while running, resumed, shut down through the API.
"$iovm" run --kernel "$probe" --memory 64M --cpus 2 \
	--append "test=basic hold_ms=600000" --api-socket "$api" >"$scratch/log2" 2>&1 &
pid=$!
wait_api "$scratch/log2"
for _ in $(seq 1200); do
	grep -q '^probe: HOLD' "$scratch/log2" && break
	kill -0 "$pid" 2>/dev/null || { cat "$scratch/log2"; die "iovm exited before HOLD"; }
	sleep 0.05
done
grep -q '^probe: HOLD' "$scratch/log2" || die "no probe: HOLD"
ok status
has "status: running"
ok pause
ok status
has "status: paused"
ok pause		# pausing a paused VM is no error
ok resume
ok status
has "status: running"
ok shutdown
wait "$pid"
rc=$?
pid=
cat "$scratch/log2"
[ "$rc" = 0 ] || die "exit status $rc after shutdown, expected 0"
[ ! -e "$api" ] || die "the API socket outlived iovm"
echo PASS
