#!/bin/bash
# iovm's LSI 53C895A under KVM, driven by the probe's sym53c8xx-style driver
# (SCRIPTS in the chip's RAM, start/done queues, tagged commands): two disks
# on one HBA (targets 0 and 3), INQUIRY, READ CAPACITY, unit attention and
# REQUEST SENSE, data checks, CHECK CONDITION past the end, 16 tagged
# reads and writes in flight at once, each of which must have disconnected
# and come back by reselection, and a selection timeout on an empty ID
# delivered as INTA# through the IOAPIC. Then the host checks the data the guest
# wrote, and a bad target= is refused with a clear error. One disk gives
# poll-us=0 (the only one given, so the HBA's thread never spins: every
# kick and completion must wake it).
# Usage: lsi-iovm.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch

truncate -s 64M "$scratch/d0.img" "$scratch/d3.img"
run_probe "$scratch/log" 120 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "path=$scratch/d0.img,if=lsi,cache=none" \
	--disk "path=$scratch/d3.img,if=lsi,target=3,poll-us=0" \
	--append "test=lsi lsi_target=0 lsi_target2=3 qd=16 expect_disconnect=1 intx=1 lsi_absent=5"
skip_if_no_disks "$scratch/log"
expect_pass "$scratch/log"
grep -q '^probe: lsi target 0: 16 tagged reads+writes in flight, reselections=1[6-9]' \
	"$scratch/log" || die "target 0: tagged commands did not all disconnect"
grep -q '^probe: lsi target 3: 16 tagged reads+writes in flight' \
	"$scratch/log" || die "target 3 not exercised"
grep -q '^probe: lsi target 5 absent: selection timeout, interrupts=[1-9]' \
	"$scratch/log" || die "no selection timeout interrupt on INTA#"

# The 64k the probe wrote at 1 MiB went to the right file, not the other.
cmp -s -n 65536 -i 1048576:1048576 "$scratch/d0.img" "$scratch/d3.img" &&
	die "both disks hold the same data: targets mixed up"
[ "$(head -c 1114112 "$scratch/d0.img" | tail -c 65536 | tr -d '\0' | wc -c)" -gt 0 ] ||
	die "nothing written to target 0's file"

# Configuration errors are one clear line, not a crash.
run_probe "$scratch/log2" 30 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "path=$scratch/d0.img,if=lsi,target=7" --append "test=basic"
grep -q '^probe: start' "$scratch/log2" && die "target=7 (the HBA's own ID) accepted"
grep -q 'error: .*target=7' "$scratch/log2" || die "no error naming target=7"
run_probe "$scratch/log3" 30 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "path=$scratch/d0.img,if=lsi,target=2" \
	--disk "path=$scratch/d3.img,if=lsi,target=2" --append "test=basic"
grep -q '^probe: start' "$scratch/log3" && die "two disks at target 2 accepted"
grep -q 'error: .*target=2 is already taken' "$scratch/log3" ||
	die "no error for a taken target"
echo "PASS"
