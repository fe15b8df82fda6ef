#!/bin/bash
# The probe's full virtio-blk test on iovm with a real disk file: every
# request type with data checks, error statuses, random writes then verified
# reads at 4k/16k/64k and QD 1/32; then the host file is checked for the
# pattern the probe reports. Polling with cache=none on 1 vCPU; MSI-X with
# cache=writeback, indirect descriptors and requests spread over both queues
# of a 2-vCPU VM; polling without EVENT_IDX and with poll-us=0 (the queue
# thread never spins: every request and completion must wake it), and MSI-X
# with the vCPU halted between interrupts, on a smaller region.
# Usage: blk-iovm.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 check=$3
need_kvm
make_scratch
disk=$scratch/disk.img
fallocate -l 32M "$disk" || die "cannot create $disk"

n=0
for cfg in "1 none mode=poll" "2 writeback mode=msix indirect=1 queues=2" \
	"1 none,poll-us=0 mode=poll event_idx=0 region=4M" \
	"1 none mode=msix wait=hlt region=4M"; do
	set -- $cfg
	cpus=$1 cache=$2
	shift 2
	n=$((n + 1))
	run_probe "$scratch/log$n" 120 "$iovm" run --kernel "$probe" \
		--cpus "$cpus" --memory 128M --disk "path=$disk,cache=$cache" \
		--append "test=blk seed=$((10 + n)) $*"
	skip_if_no_disks "$scratch/log$n"
	expect_pass "$scratch/log$n"
	check_pattern "$scratch/log$n" blk "$disk" ||
		die "host file does not hold what the guest wrote ($cfg)"
done
echo "PASS"
