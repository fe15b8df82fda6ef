#!/bin/bash
# The probe's virtio-scsi test on iovm with real disk files: SPC/SBC commands
# with data and sense checks, BAD_TARGET, OVERRUN, task management with
# commands in flight, random writes then verified reads at 4k/16k/64k and
# QD 1/32; then the host file is checked for the pattern the probe reports.
# Polling with cache=none on 1 vCPU; MSI-X with cache=writeback and indirect
# descriptors on 2 vCPUs (two request queues); a second disk at target 2
# LUN 1 beside the first, tested through that address.
# Usage: scsi-iovm.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 check=$3
need_kvm
make_scratch
disk=$scratch/disk.img
disk2=$scratch/disk2.img
fallocate -l 32M "$disk" || die "cannot create $disk"
fallocate -l 24M "$disk2" || die "cannot create $disk2"

n=0
for cfg in "1 none $disk mode=poll" \
	"2 writeback $disk mode=msix indirect=1" \
	"1 none $disk2 mode=poll target=2 lun=1 region=4M event_idx=0"; do
	set -- $cfg
	cpus=$1 cache=$2 file=$3
	shift 3
	n=$((n + 1))
	run_probe "$scratch/log$n" 180 "$iovm" run --kernel "$probe" \
		--cpus "$cpus" --memory 128M \
		--disk "path=$disk,if=virtio-scsi,cache=$cache" \
		--disk "path=$disk2,if=virtio-scsi,cache=$cache,target=2,lun=1" \
		--append "test=vscsi seed=$((20 + n)) $*"
	skip_if_no_disks "$scratch/log$n"
	expect_pass "$scratch/log$n"
	check_pattern "$scratch/log$n" vscsi "$file" ||
		die "host file does not hold what the guest wrote ($cfg)"
done
echo "PASS"
