#!/bin/bash
# The probe's sym53c8xx-style LSI driver against a reference model: QEMU's
# lsi53c895a + scsi-hd (KVM, qboot) with two disks (IDs 0 and 3) runs the
# probe's lsi test. A failure here is a probe driver bug, not an iovm one;
# QEMU queues only reads (its writes complete connected), so the test does
# not ask every command to disconnect.
# Usage: lsi-qemu.sh PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
probe=$1
need_kvm
need_qemu
make_scratch
truncate -s 64M "$scratch/d0.img" "$scratch/d3.img"

run_probe "$scratch/log" 120 "$qemu" -enable-kvm -bios "$bios" \
	-kernel "$probe" -nographic -no-reboot -m 128 \
	-device isa-debug-exit,iobase=0xf4,iosize=1 \
	-device lsi53c895a,id=scsi0 \
	-drive "file=$scratch/d0.img,if=none,id=d0,format=raw,cache=none" \
	-device scsi-hd,drive=d0,bus=scsi0.0,scsi-id=0 \
	-drive "file=$scratch/d3.img,if=none,id=d3,format=raw,cache=none" \
	-device scsi-hd,drive=d3,bus=scsi0.0,scsi-id=3 \
	-append "test=lsi lsi_target=0 lsi_target2=3 qd=16 lsi_absent=5"
expect_pass "$scratch/log"
grep -q '^probe: lsi target 3: 16 tagged reads+writes in flight' \
	"$scratch/log" || die "target 3 not exercised"
grep -q '^probe: lsi target 5 absent: selection timeout' "$scratch/log" ||
	die "no selection timeout"
echo "PASS"
