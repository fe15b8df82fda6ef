#!/bin/sh
# vhost-user-blk benchmark: the same jobs, on the same file, in the same run,
# against
#   iovm   `iovm vhost-user-blk` (cache=none: O_DIRECT, io_uring)
#   qsd    `qemu-storage-daemon --export type=vhost-user-blk` (cache.direct=on,
#          aio=io_uring)
#   floor  the host itself: fio with io_uring and O_DIRECT on the file
# Both back-ends are driven by bench/vhost-client (no guest: memfd memory,
# one virtqueue, completions found by polling the used ring). Jobs: 4k random
# read QD1 and QD32, 4k random write QD32, 64k sequential read and write QD16.
# Reports IOPS, MB/s, mean and p99 latency, CPU per I/O of the back-end (all
# its threads; for the floor, fio's own CPU), and ratios against qsd and the
# floor.
#
# Usage: bench/vhost.sh [BUILD_DIR]     (default build)
# Environment: FILE (default /var/tmp/iovm-vhost-bench.img), SIZE_MB (1024),
#              TIME seconds per job (5), ROUNDS (1; best of ROUNDS per job)
set -eu

build=$(realpath "${1:-build}")
iovm=$build/iovm
client=$build/bench/vhost-client
file=${FILE:-/var/tmp/iovm-vhost-bench.img}
size_mb=${SIZE_MB:-1024}
t=${TIME:-5}
rounds=${ROUNDS:-1}

JOBS="4k-randread-qd1:randread:4k:1 4k-randread-qd32:randread:4k:32
4k-randwrite-qd32:randwrite:4k:32 64k-read-qd16:read:64k:16
64k-write-qd16:write:64k:16"

for p in "$iovm" "$client"; do
	[ -x "$p" ] || { echo "vhost.sh: $p missing (ninja -C $build)" >&2; exit 1; }
done
for p in qemu-storage-daemon fio; do
	command -v $p >/dev/null || { echo "vhost.sh: $p missing (tools/install-deps.sh)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/iovm-vhost-bench.XXXXXX)
bpid=""
cleanup() {
	[ -z "$bpid" ] || kill "$bpid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# A fully written file: reads must reach the disk, not holes.
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != $((size_mb * 1048576)) ]; then
	echo "vhost.sh: writing $size_mb MiB test file $file" >&2
	dd if=/dev/urandom of="$file" bs=1M count="$size_mb" oflag=direct status=none
fi

wait_sock() {
	for _ in $(seq 100); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	echo "vhost.sh: no socket at $1" >&2
	cat "$work"/*.log >&2
	exit 1
}

# run_client NAME JOB: one job against the back-end on $work/NAME.sock
run_client() {
	"$client" --socket "$work/$1.sock" --pid "$bpid" --time "$t" "$2" |
		sed "s/^/backend=$1 /" >>"$work/results"
}

stop_backend() {
	kill "$bpid"
	wait "$bpid" 2>/dev/null || true
	bpid=""
}

run_iovm() {
	rm -f "$work/iovm.sock"
	"$iovm" vhost-user-blk --socket "$work/iovm.sock" --disk "path=$file,cache=none" \
		--once >"$work/iovm.log" 2>&1 &
	bpid=$!
	wait_sock "$work/iovm.sock"
	run_client iovm "$1"
	wait "$bpid" 2>/dev/null || true	# --once: exits after the client
	bpid=""
}

run_qsd() {
	rm -f "$work/qsd.sock"
	qemu-storage-daemon \
		--blockdev "file,filename=$file,node-name=n,cache.direct=on,aio=io_uring" \
		--export "type=vhost-user-blk,id=e,node-name=n,addr.type=unix,addr.path=$work/qsd.sock,writable=on" \
		>"$work/qsd.log" 2>&1 &
	bpid=$!
	wait_sock "$work/qsd.sock"
	run_client qsd "$1"
	stop_backend
}

# The floor: fio's own numbers for the same jobs, CPU per I/O from its
# usr+sys time.
run_floor() {
	for j in $1; do
		name=${j%%:*}
		rest=${j#*:}
		rw=${rest%%:*}
		rest=${rest#*:}
		bs=${rest%%:*}
		qd=${rest#*:}
		fio --name="$name" --filename="$file" --direct=1 --ioengine=io_uring \
			--rw="$rw" --bs="$bs" --iodepth="$qd" --time_based \
			--runtime="$t" --output-format=json >"$work/fio.json" 2>/dev/null
		python3 - "$work/fio.json" "$name" "$bs" >>"$work/results" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
j = d["jobs"][0]
name, bs = sys.argv[2], sys.argv[3]
op = j["write"] if j["write"]["io_bytes"] else j["read"]
ios = op["total_ios"]
rt = op["runtime"] / 1000.0
iops = ios / rt
cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1000.0
clat = op["clat_ns"]
p99 = clat["percentile"]["99.000000"] / 1000.0
print("backend=floor job=%s iops=%.0f mbps=%.1f lat_avg_us=%.1f lat_p99_us=%.1f "
      "cpu_us_per_io=%.2f ios=%d" % (name, iops, op["bw_bytes"] / 1e6,
      op["lat_ns"]["mean"] / 1000.0, p99, cpu_s * 1e6 / ios, ios))
EOF
	done
}

# Jobs interleave the three set-ups, so that drifting load on a shared
# machine hits them alike.
: >"$work/results"
for r in $(seq "$rounds"); do
	for j in $JOBS; do
		run_iovm "$j"
		run_qsd "$j"
		run_floor "$j"
	done
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, file $file ($size_mb MiB), $t s per job, best of $rounds"
python3 - "$work/results" <<'EOF'
import sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    key = (kv["backend"], kv["job"])
    if key not in rows or float(kv["iops"]) > float(rows[key]["iops"]):
        rows[key] = kv
jobs = []
for (b, j) in rows:
    if j not in jobs:
        jobs.append(j)
print("| job | backend | IOPS | MB/s | avg lat µs | p99 lat µs | CPU µs/IO |")
print("|---|---|---:|---:|---:|---:|---:|")
for j in jobs:
    for b in ("iovm", "qsd", "floor"):
        r = rows.get((b, j))
        if r:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (j, b, r["iops"], r["mbps"],
                  r["lat_avg_us"], r["lat_p99_us"], r["cpu_us_per_io"]))
print()
print("| job | iovm/qsd IOPS | iovm/floor IOPS | iovm/qsd CPU per I/O |")
print("|---|---:|---:|---:|")
for j in jobs:
    i, q, f = rows.get(("iovm", j)), rows.get(("qsd", j)), rows.get(("floor", j))
    if not (i and q and f):
        continue
    print("| %s | %.2f | %.2f | %.2f |" % (j, float(i["iops"]) / float(q["iops"]),
          float(i["iops"]) / float(f["iops"]),
          float(i["cpu_us_per_io"]) / float(q["cpu_us_per_io"])))
EOF
