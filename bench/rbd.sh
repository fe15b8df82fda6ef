#!/bin/sh
# Network-disk benchmark: the same jobs on the same RBD image, in the same
# run, of a real Ceph cluster on this machine (tests/ceph/cluster.sh: one
# mon, three BlueStore OSDs on loopback, rbd_cache off), against
#   iovm       `iovm vhost-user-blk --disk path=rbd:...` (the default:
#              librbd's callback thread posts completions to the queue)
#   iovm-poll  the same with IOVM_RBD_COMPLETIONS=poll (the image's
#              notification eventfd on the queue thread's io_uring,
#              rbd_poll_io_events: no thread hop)
#   qsd        `qemu-storage-daemon --blockdev rbd --export vhost-user-blk`
#   floor      `rbd bench` on the host (librbd with no VMM; no CPU figure)
# driven by bench/vhost-client as in bench/vhost.sh. Jobs: 4k random read
# QD1 and QD32, 4k random write QD1 and QD32, 64k sequential read QD16.
# Reports IOPS, MB/s, mean and p99 latency, back-end CPU per I/O, and
# ratios iovm/qsd, iovm/floor and iovm-poll/iovm. A leg that fails is
# reported and the others still run (exit status 1 then).
# Usage: bench/rbd.sh [BUILD_DIR]   Environment: TIME (5 s per job),
#        ROUNDS (1; the median-IOPS round is reported), CEPH_DIR (a running
#        cluster's folder from tests/ceph/cluster.sh; default: start one)
set -eu

. "$(dirname "$0")/vhost-lib.sh"
t=${TIME:-5}
rounds=${ROUNDS:-1}
size_mb=256
JOBS="randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32
randwrite-4k-qd1:randwrite:4k:1 randwrite-4k-qd32:randwrite:4k:32
seqread-64k-qd16:read:64k:16"
need_built "$iovm" "$client"
for p in qemu-storage-daemon rbd timeout; do
	command -v $p >/dev/null || { echo "rbd.sh: $p missing (tools/install-deps.sh)" >&2; exit 1; }
done
make_work iovm-rbd-bench
cluster=$(dirname "$0")/../tests/ceph/cluster.sh
cdir=${CEPH_DIR:-}
if [ -z "$cdir" ]; then
	cdir=$work/ceph
	sh "$cluster" start "$cdir" >&2 || { echo "rbd.sh: no Ceph cluster" >&2; exit 1; }
	trap 'sh "$cluster" stop "$cdir"; cleanup' EXIT INT TERM
fi
conf=$cdir/ceph.conf
img=bench$$
file="rbd:iovm/$img"
rbd -c "$conf" create "iovm/$img" --size ${size_mb}M
# Reads must reach the OSDs' data, not unwritten objects.
rbd -c "$conf" bench --io-type write --io-size 4M --io-threads 16 --io-total ${size_mb}M \
	--io-pattern seq "iovm/$img" >/dev/null

run_iovm() {	# LABEL JOB [ENV...]
	label=$1 job=$2
	shift 2
	rm -f "$work/iovm.sock"
	env "$@" "$iovm" vhost-user-blk --socket "$work/iovm.sock" \
		--disk "path=$file,conf=$conf" --once >"$work/iovm.log" 2>&1 &
	bpid=$!
	if ! wait_sock "$work/iovm.sock"; then
		stop_backend
		leg_failed "backend=$label" "$job" "iovm did not start"
		return 0
	fi
	run_client iovm "backend=$label" "$job" || stop_backend
	wait_backend
}

# rbd bench: as many I/Os as the job would do in about $t s at the
# cluster's pace is unknown in advance, so a fixed amount per job.
run_floor() {
	set -- $(echo "$1" | tr ':' ' ')
	name=$1 rw=$2 bs=$3 qd=$4
	case $rw in
	randread) ty=read pat=rand ;; randwrite) ty=write pat=rand ;;
	read) ty=read pat=seq ;; *) ty=write pat=seq ;;
	esac
	total=32M
	[ "$bs" = 64k ] && total=512M
	[ "$ty" = read ] && [ "$bs" = 4k ] && total=64M
	# rbd wants 4K, not 4k
	if ! out=$(timeout 300 rbd -c "$conf" bench --io-type $ty --io-size "$(echo $bs | tr k K)" \
		--io-threads $qd --io-total $total --io-pattern $pat "iovm/$img" 2>&1); then
		leg_failed backend=floor "$name" "rbd bench failed"
		return 0
	fi
	# "elapsed: 3   ops: 8192   ops/sec: 2661.2   bytes/sec: 10 MiB/s"
	echo "$out" | awk -v j="$name" -v bs="$bs" '/^elapsed:/ {
		b = (bs == "64k" ? 65536 : 4096)
		printf "backend=floor job=%s iops=%d bw_mbs=%.1f lat_mean_us=- lat_p99_us=- cpu_us_per_io=-\n",
			j, $6, $6 * b / 1e6 }' >>"$work/results"
}

: >"$work/results"
for r in $(seq "$rounds"); do
	for j in $JOBS; do
		run_iovm iovm "$j"
		run_iovm iovm-poll "$j" IOVM_RBD_COMPLETIONS=poll
		run_qsd "driver=rbd,node-name=n,pool=iovm,image=$img,conf=$conf,cache.direct=on" "$j"
		run_floor "$j"
	done
done
rbd -c "$conf" rm "iovm/$img" >/dev/null 2>&1 || true

print_header ", Ceph: 1 mon + 3 OSDs on loopback (BlueStore on sparse files), rbd_cache off"
{ printf "%s\n" "$median_py"; cat <<'PY'; } | python3 - "$work/results" backend
def ratio(a, b, key):
    try:
        return "%.2f" % (float(a[key]) / float(b[key]))
    except (TypeError, ValueError, ZeroDivisionError, KeyError):
        return "-"

print_runs("backend", ("iovm", "iovm-poll", "qsd", "floor"))
print("| job | iovm/qsd IOPS | iovm/floor IOPS | iovm/qsd CPU per I/O | iovm-poll/iovm IOPS | iovm-poll/iovm CPU per I/O |")
print("|---|---:|---:|---:|---:|---:|")
for j in jobs:
    i, c, q, f = (rows.get((b, j)) for b in ("iovm", "iovm-poll", "qsd", "floor"))
    print("| %s | %s | %s | %s | %s | %s |" % (j, ratio(i, q, "iops"), ratio(i, f, "iops"),
          ratio(i, q, "cpu_us_per_io"), ratio(c, i, "iops"), ratio(c, i, "cpu_us_per_io")))
PY
report_failed
