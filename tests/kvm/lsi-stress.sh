#!/bin/bash
# iovm's LSI 53C895A under sustained load, through the probe's
# sym53c8xx-style driver: 32 tagged commands kept in flight for 20 s,
# random 4k/16k/64k reads and writes mixed (never two on the same 4 KiB at
# once), each write a new generation of the pattern and each read checked
# against the generation last written there, every completion checked to
# name a tag in flight, with GOOD status, and a done queue slot that holds
# one of the driver's CCBs; then the whole region is read back and checked.
# The result depends on what the model does, not on how fast: the run stops
# at 20 s whatever it reached, and only a command that never completes
# (none for 60 s) fails it by time.
# Usage: lsi-stress.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch

truncate -s 64M "$scratch/d0.img"
run_probe "$scratch/log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "path=$scratch/d0.img,if=lsi,cache=none" \
	--append "test=lsi-stress qd=32 secs=20 region=16777216 region_off=1048576 io_timeout_ms=60000"
skip_if_no_disks "$scratch/log"
expect_pass "$scratch/log"
line=$(grep -m1 '^probe: lsi stress ios=' "$scratch/log") ||
	die "no stress summary line"
reads=$(echo "$line" | tr ' ' '\n' | sed -n 's/^reads=//p')
writes=$(echo "$line" | tr ' ' '\n' | sed -n 's/^writes=//p')
secs=$(echo "$line" | tr ' ' '\n' | sed -n 's/^secs=//p')
[ "${reads:-0}" -gt 0 ] && [ "${writes:-0}" -gt 0 ] ||
	die "not mixed: reads=$reads writes=$writes"
[ "${secs:-0}" -ge 20 ] || die "ran ${secs}s, not 20"
echo "PASS"
