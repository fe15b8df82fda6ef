#!/bin/bash
# The probe itself against a reference VMM: QEMU (KVM, qboot, virtio-blk-pci)
# runs basic on 2 vCPUs, blk in poll and MSI-X modes (pattern then checked on
# the host file) and blk-ro. A failure here is a probe bug, not an iovm one.
# Usage: probe-qemu.sh PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
probe=$1 check=$2
need_kvm
need_qemu
make_scratch
disk=$scratch/disk.img
truncate -s 32M "$disk"

q=("$qemu" -enable-kvm -bios "$bios" -kernel "$probe" -nographic -no-reboot
	-m 128 -device isa-debug-exit,iobase=0xf4,iosize=1)

run_probe "$scratch/basic" 60 "${q[@]}" -smp 2 -append "test=basic cpus=2"
expect_pass "$scratch/basic"
grep -q '^probe: cpu 1 apic_id=[0-9]* alive' "$scratch/basic" ||
	die "AP did not report alive"

for mode in poll msix; do
	run_probe "$scratch/blk-$mode" 120 "${q[@]}" -append "test=blk mode=$mode" \
		-drive "file=$disk,if=none,id=d0,format=raw,cache=none,aio=io_uring" \
		-device virtio-blk-pci,drive=d0,disable-legacy=on
	expect_pass "$scratch/blk-$mode"
	check_pattern "$scratch/blk-$mode" blk "$disk" || die "host file check failed"
done

run_probe "$scratch/ro" 60 "${q[@]}" -append "test=blk-ro" \
	-drive "file=$disk,if=none,id=d0,format=raw,readonly=on" \
	-device virtio-blk-pci,drive=d0,disable-legacy=on
expect_pass "$scratch/ro"
echo "PASS"
