#!/bin/sh
# vhost-user benchmark: the same jobs, on the same file, in the same run,
# against
#   iovm       `iovm vhost-user-blk` (cache=none: O_DIRECT, io_uring)
#   iovm-scsi  `iovm vhost-user-scsi`, the same disk options: one SCSI disk
#              (target 0, LUN 0) behind iovm's virtio-scsi HBA
#   qsd        `qemu-storage-daemon --export type=vhost-user-blk`
#              (cache.direct=on, aio=io_uring)
#   floor      the host itself: bench/blk-floor (io_uring, O_DIRECT) on the
#              file
# The back-ends are driven by bench/vhost-client (no guest: memfd memory,
# one virtqueue, completions found by polling the used ring); for iovm-scsi
# it sends READ(16)/WRITE(16) on the HBA's first request queue. Jobs, as the
# probe's and blk-floor's: 4k random read QD1 and QD32, 4k random write QD32,
# 64k sequential read and write QD16, all in the file's 64 MiB at offset
# 1 MiB; each job runs on every back-end in turn before the next job.
# Reports IOPS, MB/s, mean and p99 latency, CPU per I/O of the back-end (all
# its threads; for the floor, blk-floor's own CPU), ratios against qsd and
# the floor, iovm-scsi against iovm (IOPS, p99, CPU per I/O) and the floor,
# and the 64k sequential jobs of each back-end against the floor's 1 MiB
# QD8 jobs (the file's best bandwidth), if blk-floor runs them.
# A leg that fails (a back-end that does not start, a client error) is
# reported on stderr and under the tables, the others still run; the exit
# status is then 1.
#
# Usage: bench/vhost.sh [BUILD_DIR]     (default build; -h, --help: this text)
# Environment: FILE (default /var/tmp/iovm-vhost-bench.img), SIZE_MB (256),
#              TIME seconds per job (5), ROUNDS (1; the run with the median IOPS of
#              ROUNDS is reported per job),
#              YIELD=1 (the client yields the CPU between empty polls: for
#              hosts with fewer idle cores than client + back-end threads),
#              IOVM_DISK_OPTS (appended to iovm's --disk, both devices, e.g.
#              poll-us=0)
set -eu

. "$(dirname "$0")/vhost-lib.sh"
t=${TIME:-5}
rounds=${ROUNDS:-1}
yield=
[ "${YIELD:-0}" = 0 ] || yield=--yield

JOBS="randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32
randwrite-4k-qd32:randwrite:4k:32 seqread-64k-qd16:read:64k:16
seqwrite-64k-qd16:write:64k:16"

floor=$build/bench/blk-floor
need_built "$iovm" "$client" "$floor"
for p in qemu-storage-daemon timeout; do
	command -v $p >/dev/null || { echo "vhost.sh: $p missing (tools/install-deps.sh)" >&2; exit 1; }
done

make_work iovm-vhost-bench
make_file

# run_iovm DEVICE LABEL JOB: `iovm vhost-user-DEVICE`, one client job.
run_iovm() {
	if ! start_iovm "$1"; then
		leg_failed "backend=$2" "$3" "iovm vhost-user-$1 did not start"
		return 0
	fi
	if [ "$1" = blk ]; then
		run_client iovm "backend=$2" "$3" $yield || stop_backend
	else
		run_client "iovm-$1" "backend=$2" "$3" --device "$1" $yield || stop_backend
	fi
	wait_backend
}

# The floor: blk-floor runs the five jobs, then its 1 MiB sequential
# ones, on the file itself.
run_floor() {
	rc=0
	"$floor" "$file" --secs "$t" >"$work/floor.out" 2>"$work/floor.log" || rc=$?
	grep '^job=' "$work/floor.out" | sed 's/^/backend=floor /' >>"$work/results" || true
	[ $rc = 0 ] || { cat "$work/floor.log" >&2; leg_failed backend=floor all "blk-floor exit status $rc"; }
}

# Jobs interleave the set-ups, so that drifting load on a shared machine
# hits them alike.
: >"$work/results"
for r in $(seq "$rounds"); do
	for j in $JOBS; do
		run_iovm blk iovm "$j"
		run_iovm scsi iovm-scsi "$j"
		run_qsd "file,filename=$file,node-name=n,cache.direct=on,aio=io_uring" "$j" $yield
	done
	run_floor
done

print_header "${yield:+, client $yield}${IOVM_DISK_OPTS:+, iovm --disk ...,$IOVM_DISK_OPTS}"
{ printf "%s\n" "$median_py"; cat <<'EOF'; } | python3 - "$work/results" backend
def ratio(a, b, key):
    if not (a and b) or not float(b[key]):
        return "-"
    return "%.2f" % (float(a[key]) / float(b[key]))

print_runs("backend", ("iovm", "iovm-scsi", "qsd", "floor"))
print("| job | iovm/qsd IOPS | iovm/floor IOPS | iovm/qsd CPU per I/O |")
print("|---|---:|---:|---:|")
for j in jobs:
    i, q, f = rows.get(("iovm", j)), rows.get(("qsd", j)), rows.get(("floor", j))
    if not (i and q and f):
        continue
    print("| %s | %.2f | %.2f | %.2f |" % (j, float(i["iops"]) / float(q["iops"]),
          float(i["iops"]) / float(f["iops"]),
          float(i["cpu_us_per_io"]) / float(q["cpu_us_per_io"])))
print()
# The same disk behind iovm's two devices: what the SCSI layer costs.
print("| job | iovm-scsi/iovm IOPS | iovm-scsi/iovm p99 | iovm-scsi/iovm CPU per I/O | iovm-scsi/floor IOPS |")
print("|---|---:|---:|---:|---:|")
for j in jobs:
    s, i, f = rows.get(("iovm-scsi", j)), rows.get(("iovm", j)), rows.get(("floor", j))
    if s and (i or f):
        print("| %s | %s | %s | %s | %s |" % (j, ratio(s, i, "iops"), ratio(s, i, "lat_p99_us"),
              ratio(s, i, "cpu_us_per_io"), ratio(s, f, "iops")))
# 64k sequential against the file's best bandwidth (blk-floor's 1 MiB QD8
# jobs): a back-end that merges adjacent requests beats the floor's own 64k
# jobs, so those are no floor for bandwidth.
if rows.get(("floor", "seqread-1m-qd8")) or rows.get(("floor", "seqwrite-1m-qd8")):
    print()
    print("| job | floor 1m MB/s | iovm/floor1m | iovm-scsi/floor1m | qsd/floor1m |")
    print("|---|---:|---:|---:|---:|")
    for rw in ("read", "write"):
        j, f = "seq%s-64k-qd16" % rw, rows.get(("floor", "seq%s-1m-qd8" % rw))
        if f:
            print("| %s | %s | %s | %s | %s |" % (j, f["bw_mbs"],
                  ratio(rows.get(("iovm", j)), f, "bw_mbs"),
                  ratio(rows.get(("iovm-scsi", j)), f, "bw_mbs"),
                  ratio(rows.get(("qsd", j)), f, "bw_mbs")))
EOF
report_failed
