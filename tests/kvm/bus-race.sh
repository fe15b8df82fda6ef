#!/bin/bash
# The probe on 2 vCPUs: vCPU 0 moves the virtio-blk BAR and toggles the
# command register's memory decoding (each a dispatch-table update on the
# vCPU that takes the config write) while vCPU 1 reads one of the device's
# registers at both addresses, with the two interleaved by construction
# (each update waits for the other vCPU's next reads). Every read must get
# the register or all-ones; iovm must not crash. The unit test core-bus-tsan
# is the one that catches an unsafe table update deterministically; this is
# the same path end to end.
# Usage: bus-race.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch
truncate -s 16M "$scratch/disk.img"

run_probe "$scratch/log" 240 "$iovm" run --kernel "$probe" --cpus 2 \
	--memory 64M --disk "path=$scratch/disk.img" --append "test=bus-race rounds=250"
expect_pass "$scratch/log"
grep -q '^probe: bus-race updates=1000 .* wrong=0' "$scratch/log" ||
	die "the probe did not report 1000 updates with no wrong read"
echo "PASS"
