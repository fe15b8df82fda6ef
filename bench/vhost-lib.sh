# Shared by the vhost-user benchmarks (bench/vhost.sh, vhost-inflight.sh),
# sourced first with the build folder as $1: the paths, the test file, the
# work folder, `iovm vhost-user-blk` and bench/vhost-client runs, and the
# median selection of the result tables. Not a command.

me=${0##*/}
# -h, --help: the script's header comment (what it measures, its usage
# and environment).
case ${1:-} in
-h | --help) sed -n '2,/^set -eu/s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
build=$(realpath "${1:-build}")
iovm=$build/iovm
client=$build/bench/vhost-client
file=${FILE:-/var/tmp/iovm-vhost-bench.img}
size_mb=${SIZE_MB:-256}

# need_built FILE...: exits unless every file is an executable.
need_built() {
	for p in "$@"; do
		[ -x "$p" ] || { echo "$me: $p missing (ninja -C $build)" >&2; exit 1; }
	done
}

# make_work NAME: a fresh $work folder /tmp/NAME.XXXXXX, removed at exit
# with the back-end $bpid (if one runs).
make_work() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	bpid=""
	trap cleanup EXIT INT TERM
}
cleanup() {
	[ -z "$bpid" ] || kill "$bpid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}

# make_file: a fully written $file of $size_mb MiB: reads must reach the
# disk, not holes. Kept between runs while its size fits.
make_file() {
	if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != $((size_mb * 1048576)) ]; then
		echo "$me: writing $size_mb MiB test file $file" >&2
		dd if=/dev/urandom of="$file" bs=1M count="$size_mb" oflag=direct status=none
	fi
}

# wait_sock PATH: waits up to 5 s for the back-end's socket.
wait_sock() {
	for _ in $(seq 100); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	echo "$me: no socket at $1" >&2
	cat "$work"/*.log >&2
	exit 1
}

# start_iovm: `iovm vhost-user-blk --once` serving $file (cache=none, then
# $IOVM_DISK_OPTS) on $work/iovm.sock, its pid in $bpid; returns when the
# socket is there.
start_iovm() {
	rm -f "$work/iovm.sock"
	"$iovm" vhost-user-blk --socket "$work/iovm.sock" \
		--disk "path=$file,cache=none${IOVM_DISK_OPTS:+,$IOVM_DISK_OPTS}" \
		--once >"$work/iovm.log" 2>&1 &
	bpid=$!
	wait_sock "$work/iovm.sock"
}

# wait_backend: waits for the back-end $bpid to exit (iovm --once: after
# its client).
wait_backend() {
	wait "$bpid" 2>/dev/null || true
	bpid=""
}

# run_client NAME LABEL JOB [OPTION...]: one bench/vhost-client job of $t
# seconds against the back-end $bpid on $work/NAME.sock; its result line,
# after LABEL, is appended to $work/results.
run_client() {
	sock=$1 label=$2 job=$3
	shift 3
	"$client" --socket "$work/$sock.sock" --pid "$bpid" --time "$t" "$@" "$job" |
		sed "s/^/$label /" >>"$work/results"
}

# print_header [TEXT]: the run's first line: time, machine, load and
# settings, TEXT at its end.
print_header() {
	echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), file $file ($size_mb MiB), $t s per job, median of $rounds rounds${1:-}"
}

# The start of the Python program that prints a run's tables (the rest
# comes from the script): reads $work/results (argv[1]), whose lines are
# key=value words; argv[2] is the key naming the set-up. For each set-up
# and job, rows[(set-up, job)] is the run with the median IOPS (all its
# figures); jobs holds the jobs in order of first appearance.
# print_runs(column, setups) prints the table of those rows, one per job
# and set-up, column naming the set-up.
median_py='import sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    runs.setdefault((kv[sys.argv[2]], kv["job"]), []).append(kv)
rows = {}
for key, rs in runs.items():
    rs.sort(key=lambda kv: float(kv["iops"]))
    rows[key] = rs[len(rs) // 2]
jobs = []
for (b, j) in rows:
    if j not in jobs:
        jobs.append(j)

def print_runs(column, setups):
    print("| job | %s | IOPS | MB/s | avg lat µs | p99 lat µs | CPU µs/IO |" % column)
    print("|---|---|---:|---:|---:|---:|---:|")
    for j in jobs:
        for s in setups:
            r = rows.get((s, j))
            if r:
                print("| %s | %s | %s | %s | %s | %s | %s |" % (j, s, r["iops"], r["bw_mbs"],
                      r["lat_mean_us"], r["lat_p99_us"], r["cpu_us_per_io"]))
    print()
'
