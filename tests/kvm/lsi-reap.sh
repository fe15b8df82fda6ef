#!/bin/bash
# The probe's LSI driver takes a done queue entry only once the SCRIPTS have
# moved donepos past it, never while the device may still be storing it:
# QEMU 7.2's lsi53c895a stores each SCRIPTS DWORD to guest RAM with memcpy,
# which writes the same 4 bytes twice, so a driver that clears the entry
# between the two stores sees it come back, and a lap later takes the stale
# entry as the completion of the tag's next command, before its status
# (issue 12: "tag N status ff, 100 ms later 0" on QEMU's LSI leg). The
# probe plays that device against lsi_reap (no chip involved), then checks
# that an entry stored again after it was taken is reported, not taken.
# Usage: lsi-reap.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch

run_probe "$scratch/log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--append "test=lsi-reap"
expect_pass "$scratch/log"
grep -q '^probe: lsi reap selftest: 389 completions over 3 laps, each held back until donepos moved (389)' \
	"$scratch/log" || die "no selftest summary"

run_probe "$scratch/log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--append "test=lsi-reap lsi_reap_revive=1"
[ "$rc" = 3 ] || die "revived entry: VMM exit status $rc, expected 3 (probe FAIL)"
grep -q '^probe: FAIL lsi: done queue entry [0-9]* holds [0-9a-f]* again, 1 completions after the CPU took and cleared it' \
	"$scratch/log" || die "a revived done queue entry was not reported"
echo "PASS"
