#!/bin/bash
# Malformed virtio-blk requests from the probe on iovm (a buffer outside
# guest RAM, a length past its end, a descriptor loop, a read-only status
# byte): each must fail or put the device into NEEDS_RESET, never complete
# OK; after a reset the device works again, and iovm keeps running.
# Usage: blk-hostile.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch
disk=$scratch/disk.img
fallocate -l 8M "$disk" || die "cannot create $disk"

for mode in poll msix; do
	run_probe "$scratch/log" 120 "$iovm" run --kernel "$probe" \
		--memory 64M --disk "path=$disk" --append "test=blk-hostile mode=$mode"
	skip_if_no_disks "$scratch/log"
	expect_pass "$scratch/log"
	[ "$(grep -c 'device works after reset' "$scratch/log")" = 4 ] ||
		die "not every case recovered after a reset"
done
echo "PASS"
