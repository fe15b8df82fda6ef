#!/bin/bash
# A read-only virtio-blk disk on iovm: the device offers VIRTIO_BLK_F_RO,
# OUT, WRITE_ZEROES and DISCARD get IOERR (strict_ro=1), reads work, and the
# host file is byte-for-byte unchanged afterwards. The read-only disk is the
# second of two, so the probe also finds a device past the first.
# Usage: blk-ro.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 check=$3
need_kvm
make_scratch
disk=$scratch/disk.img
truncate -s 8M "$disk" "$scratch/rw.img" || die "cannot create $disk"
"$check" --write "$disk" 0 $((8 << 20)) 42 || die "cannot fill $disk"
before=$(sha256sum <"$disk")

run_probe "$scratch/log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "path=$scratch/rw.img" --disk "path=$disk,ro" \
	--append "test=blk-ro strict_ro=1 blk_dev=1"
skip_if_no_disks "$scratch/log"
expect_pass "$scratch/log"
[ "$(sha256sum <"$disk")" = "$before" ] || die "read-only disk file changed"
"$check" "$disk" 0 $((8 << 20)) 42 || die "read-only disk content changed"
echo "PASS"
