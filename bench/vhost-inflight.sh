#!/bin/sh
# What inflight I/O tracking (vhost-user INFLIGHT_SHMFD, which QEMU's
# vhost-user-blk always asks for) costs `iovm vhost-user-blk`: the same jobs
# from bench/vhost-client without and with --inflight, alternated, on the
# same file in the same run. Prints the median run of each (by IOPS) and the
# ratios.
# Usage: bench/vhost-inflight.sh [BUILD_DIR]   (env: FILE, SIZE_MB, TIME, ROUNDS)
# Run it under /work/heavy (or alone on the machine).
set -eu

build=$(realpath "${1:-build}")
iovm=$build/iovm
client=$build/bench/vhost-client
file=${FILE:-/var/tmp/iovm-vhost-bench.img}
size_mb=${SIZE_MB:-256}
t=${TIME:-3}
rounds=${ROUNDS:-3}

JOBS="randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32
randwrite-4k-qd32:randwrite:4k:32 seqwrite-64k-qd16:write:64k:16"

for p in "$iovm" "$client"; do
	[ -x "$p" ] || { echo "vhost-inflight.sh: $p missing (ninja -C $build)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/iovm-vhost-inflight.XXXXXX)
bpid=""
cleanup() {
	[ -z "$bpid" ] || kill "$bpid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != $((size_mb * 1048576)) ]; then
	echo "vhost-inflight.sh: writing $size_mb MiB test file $file" >&2
	dd if=/dev/urandom of="$file" bs=1M count="$size_mb" oflag=direct status=none
fi

# run MODE JOB: one back-end, one client job; MODE plain or inflight.
run() {
	rm -f "$work/s.sock"
	"$iovm" vhost-user-blk --socket "$work/s.sock" --disk "path=$file,cache=none" \
		--once >"$work/iovm.log" 2>&1 &
	bpid=$!
	for _ in $(seq 100); do
		[ -S "$work/s.sock" ] && break
		sleep 0.05
	done
	opt=
	[ "$1" = plain ] || opt=--inflight
	"$client" --socket "$work/s.sock" --pid "$bpid" --time "$t" $opt "$2" |
		sed "s/^/mode=$1 /" >>"$work/results"
	wait "$bpid" 2>/dev/null || true
	bpid=""
}

: >"$work/results"
for _ in $(seq "$rounds"); do
	for j in $JOBS; do
		run plain "$j"
		run inflight "$j"
	done
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), file $file ($size_mb MiB), $t s per job, median of $rounds rounds"
python3 - "$work/results" <<'EOF'
import sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    runs.setdefault((kv["mode"], kv["job"]), []).append(kv)
rows = {}
for key, rs in runs.items():
    rs.sort(key=lambda kv: float(kv["iops"]))
    rows[key] = rs[len(rs) // 2]
jobs = []
for (m, j) in rows:
    if j not in jobs:
        jobs.append(j)
print("| job | tracking | IOPS | MB/s | avg lat µs | p99 lat µs | CPU µs/IO |")
print("|---|---|---:|---:|---:|---:|---:|")
for j in jobs:
    for m in ("plain", "inflight"):
        r = rows.get((m, j))
        if r:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (j, m, r["iops"], r["bw_mbs"],
                  r["lat_mean_us"], r["lat_p99_us"], r["cpu_us_per_io"]))
print()
print("| job | inflight/plain IOPS | inflight/plain CPU per I/O |")
print("|---|---:|---:|")
for j in jobs:
    p, i = rows.get(("plain", j)), rows.get(("inflight", j))
    if p and i:
        print("| %s | %.3f | %.3f |" % (j, float(i["iops"]) / float(p["iops"]),
              float(i["cpu_us_per_io"]) / float(p["cpu_us_per_io"])))
EOF
