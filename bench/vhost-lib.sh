# Shared by the vhost-user benchmarks (bench/vhost.sh, vhost-inflight.sh,
# rbd.sh, caw.sh), sourced first with the build folder as $1: the paths, the test
# file, the work folder, `iovm vhost-user-blk` / `vhost-user-scsi`,
# qemu-storage-daemon and bench/vhost-client runs, the record of failed
# legs, and the median selection of the result tables. Not a command.

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

# A benchmark that loses one leg still reports the others: a back-end
# that does not come up or a client run that fails is noted (leg_failed)
# and the script goes on; report_failed lists them after the tables.

# leg_failed LABEL JOB [REASON]: notes on stderr and in $work/failed that
# LABEL's JOB gave no result.
leg_failed() {
	echo "$me: $1 job ${2%%:*} failed${3:+: $3}" >&2
	echo "$1 job ${2%%:*}" >>"$work/failed"
}

# report_failed: the failed legs, if any, after the tables; returns 1 then.
report_failed() {
	[ -s "$work/failed" ] || return 0
	echo
	echo "Failed legs (no result; the reasons are on stderr):"
	sed 's/^/- /' "$work/failed"
	return 1
}

# wait_sock PATH: waits up to 5 s for the back-end's socket NAME.sock;
# else says so with its log NAME.log (not the other legs' logs) and
# returns 1.
wait_sock() {
	for _ in $(seq 100); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	echo "$me: no socket at $1" >&2
	[ ! -f "${1%.sock}.log" ] || cat "${1%.sock}.log" >&2
	return 1
}

# start_iovm [DEVICE]: `iovm vhost-user-DEVICE --once` (DEVICE blk, the
# default, or scsi) serving $file (cache=none, then $IOVM_DISK_OPTS) on
# $work/iovm.sock (blk) or $work/iovm-scsi.sock, its pid in $bpid; returns
# when the socket is there, or 1 (with the back-end stopped) if it never
# comes.
start_iovm() {
	dev=${1:-blk}
	name=iovm
	[ "$dev" = blk ] || name=iovm-$dev
	rm -f "$work/$name.sock"
	"$iovm" "vhost-user-$dev" --socket "$work/$name.sock" \
		--disk "path=$file,cache=none${IOVM_DISK_OPTS:+,$IOVM_DISK_OPTS}" \
		--once >"$work/$name.log" 2>&1 &
	bpid=$!
	wait_sock "$work/$name.sock" || { stop_backend; return 1; }
}

# wait_backend: waits for the back-end $bpid to exit (iovm --once: after
# its client).
wait_backend() {
	wait "$bpid" 2>/dev/null || true
	bpid=""
}

# stop_backend: stops the back-end $bpid (SIGTERM) and waits for it.
stop_backend() {
	kill "$bpid" 2>/dev/null || true
	wait_backend
}

# run_client NAME LABEL JOB [OPTION...]: one bench/vhost-client job of $t
# seconds against the back-end $bpid on $work/NAME.sock; its result line,
# after LABEL, is appended to $work/results. A client that fails, or runs
# a minute past its time (a back-end that stopped answering), is a failed
# leg (leg_failed, the end of $work/NAME.log on stderr): returns 1, and the
# caller stops the back-end.
run_client() {
	sock=$1 label=$2 job=$3
	shift 3
	limit=$(awk -v t="$t" 'BEGIN { print int(t) + 60 }')
	rc=0
	timeout -k 5 "$limit" "$client" --socket "$work/$sock.sock" --pid "$bpid" \
		--time "$t" "$@" "$job" >"$work/client.out" || rc=$?
	sed "s/^/$label /" "$work/client.out" >>"$work/results"
	[ $rc != 0 ] || return 0
	[ ! -f "$work/$sock.log" ] || tail -n 5 "$work/$sock.log" >&2
	why="vhost-client exit status $rc"
	[ $rc != 124 ] || why="vhost-client timed out after $limit s"
	leg_failed "$label" "$job" "$why"
	return 1
}

# run_qsd BLOCKDEV JOB [OPTION...]: the qsd leg of JOB: qemu-storage-daemon
# exporting `--blockdev BLOCKDEV` (whose node-name must be n) as
# vhost-user-blk on $work/qsd.sock, one run_client job against it (OPTIONs
# to the client), then stopped. A daemon that does not start is a failed
# leg; the script goes on either way. Its result lines are labelled
# $qsd_label (default backend=qsd).
run_qsd() {
	blockdev=$1 qjob=$2
	shift 2
	rm -f "$work/qsd.sock"
	qemu-storage-daemon --blockdev "$blockdev" \
		--export "type=vhost-user-blk,id=e,node-name=n,addr.type=unix,addr.path=$work/qsd.sock,writable=on" \
		>"$work/qsd.log" 2>&1 &
	bpid=$!
	if ! wait_sock "$work/qsd.sock"; then
		stop_backend
		leg_failed "${qsd_label:-backend=qsd}" "$qjob" "qemu-storage-daemon did not start"
		return 0
	fi
	run_client qsd "${qsd_label:-backend=qsd}" "$qjob" "$@" || true
	stop_backend
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
