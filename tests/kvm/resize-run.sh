#!/bin/bash
# `resize` under `iovm run`: the probe guest started --paused with a
# virtio-blk, a virtio-scsi and an LSI disk (32 MiB files), each grown
# through `iovm ctl resize` before any guest instruction runs. Each disk's
# device must take the size and say what it told: virtio-blk has no driver
# yet (DRIVER_OK unset: "guest-notified: no" and the notice; the driver
# reads the new capacity when it starts), the two SCSI disks hold a unit
# attention for their initiator's next command ("guest-notified: yes").
# `disks` shows the new sizes, a shrink is refused, and `shutdown` ends
# the VM with status 0.
# Usage: resize-run.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch_vm
api=$scratch/api.sock
for d in blk scsi lsi; do
	fallocate -l 32M "$scratch/$d.img" || die "cannot create $scratch/$d.img"
done

"$iovm" run --paused --kernel "$probe" --memory 128M \
	--disk "path=$scratch/blk.img,cache=writeback" \
	--disk "path=$scratch/scsi.img,cache=writeback,if=virtio-scsi" \
	--disk "path=$scratch/lsi.img,cache=writeback,if=lsi" \
	--append "test=basic" --api-socket "$api" >"$scratch/log" 2>&1 &
pid=$!
wait_api "$scratch/log"

ok resize disk=disk0 size=64M
has "old-size: 33554432"
has "new-size: 67108864"
has "guest-notified: no"
grep -q "^notice: no driver is using the device yet" "$scratch/out" || die "blk: $(cat "$scratch/out")"
for d in disk1 disk2; do
	ok resize disk=$d size=48M
	has "new-size: 50331648"
	has "changed: yes"
	has "guest-notified: yes"
done
[ "$(stat -c %s "$scratch/lsi.img")" = 50331648 ] || die "the LSI disk's file did not grow"
ok disks
grep -q "^disk0  virtio-blk   64M" "$scratch/out" || die "disks: $(cat "$scratch/out")"
grep -q "^disk2  lsi          48M" "$scratch/out" || die "disks: $(cat "$scratch/out")"
if ctl resize disk=disk1 size=32M >"$scratch/out" 2>&1; then
	die "a shrink was accepted: $(cat "$scratch/out")"
fi
grep -q "shrinking is refused" "$scratch/out" || die "shrink: $(cat "$scratch/out")"
ok shutdown
wait "$pid"
rc=$?
pid=
[ "$rc" = 0 ] || { cat "$scratch/log"; die "exit status $rc after shutdown, expected 0"; }
echo PASS
