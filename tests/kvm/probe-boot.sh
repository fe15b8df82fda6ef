#!/bin/bash
# The probe boots on iovm with N vCPUs, every AP reports alive, the probe's
# CPU count, memory and port-I/O lines are there, and iovm exits with the
# probe's status. Usage: probe-boot.sh IOVM PROBE_ELF NCPUS
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 n=$3
need_kvm
make_scratch

run_probe "$scratch/log" 60 "$iovm" run --kernel "$probe" --cpus "$n" \
	--memory 64M --append "test=basic cpus=$n"
expect_pass "$scratch/log"
grep -q "^probe: cpus=$n " "$scratch/log" || die "probe did not see $n CPUs"
for i in $(seq 1 $((n - 1))); do
	grep -q "^probe: cpu $i apic_id=[0-9]* alive" "$scratch/log" ||
		die "AP $i did not report alive"
done
mem=$(field "$scratch/log" "probe: mem_mb=" mem_mb)
[ -n "$mem" ] && [ "$mem" -ge 60 ] && [ "$mem" -le 64 ] ||
	die "probe saw mem_mb=$mem for --memory 64M"
grep -q '^probe: pio .*pio_cpl0_ns=[0-9]* pio_cpl3_ns=[0-9]*' "$scratch/log" ||
	die "no port-I/O measurement"

# The BSP's APIC ID is 0 whichever host CPU runs the vCPU thread (on PVM a
# CPL 3 CPUID reports the host CPU's APIC ID: MSIs addressed with it were
# lost in runs that happened to start on another host CPU).
if [ "$n" = 1 ] && command -v taskset >/dev/null; then
	for c in $(seq 0 $(($(nproc) - 1))); do
		run_probe "$scratch/log.cpu$c" 60 taskset -c "$c" "$iovm" run \
			--kernel "$probe" --memory 64M --append "test=basic"
		expect_pass "$scratch/log.cpu$c"
		grep -q "^probe: cpus=1 .*bsp_apic_id=0\$" "$scratch/log.cpu$c" ||
			die "on host CPU $c the probe's BSP saw an APIC ID other than 0"
	done
fi

# A failing probe must come back as a failure status, not a pass.
run_probe "$scratch/log2" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--append "test=no-such-test"
[ "$rc" = 3 ] || die "unknown test gave status $rc, expected 3 (FAIL)"
echo "PASS"
