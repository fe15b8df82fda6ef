#!/bin/sh
# What inflight I/O tracking (vhost-user INFLIGHT_SHMFD, which QEMU's
# vhost-user-blk always asks for) costs `iovm vhost-user-blk`: the same jobs
# from bench/vhost-client without and with --inflight, alternated, on the
# same file in the same run. Prints the median run of each (by IOPS) and the
# ratios. A run that fails is reported and the others go on (exit status 1).
# Usage: bench/vhost-inflight.sh [BUILD_DIR]   (env: FILE, SIZE_MB, TIME, ROUNDS;
#        -h, --help: this text)
# Run it under /work/heavy (or alone on the machine).
set -eu

. "$(dirname "$0")/vhost-lib.sh"
t=${TIME:-3}
rounds=${ROUNDS:-3}

JOBS="randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32
randwrite-4k-qd32:randwrite:4k:32 seqwrite-64k-qd16:write:64k:16"

need_built "$iovm" "$client"
make_work iovm-vhost-inflight
make_file

# run MODE JOB: one back-end, one client job; MODE plain or inflight.
run() {
	if ! start_iovm; then
		leg_failed "mode=$1" "$2" "iovm vhost-user-blk did not start"
		return 0
	fi
	opt=
	[ "$1" = plain ] || opt=--inflight
	run_client iovm "mode=$1" "$2" $opt || stop_backend
	wait_backend
}

: >"$work/results"
for _ in $(seq "$rounds"); do
	for j in $JOBS; do
		run plain "$j"
		run inflight "$j"
	done
done

print_header
{ printf "%s\n" "$median_py"; cat <<'EOF'; } | python3 - "$work/results" mode
print_runs("tracking", ("plain", "inflight"))
print("| job | inflight/plain IOPS | inflight/plain CPU per I/O |")
print("|---|---:|---:|")
for j in jobs:
    p, i = rows.get(("plain", j)), rows.get(("inflight", j))
    if p and i:
        print("| %s | %.3f | %.3f |" % (j, float(i["iops"]) / float(p["iops"]),
              float(i["cpu_us_per_io"]) / float(p["cpu_us_per_io"])))
EOF
report_failed
