#!/bin/sh
# Network-disk benchmark (issue 17): the same jobs on the same network disk,
# in the same run, through iovm and through QEMU's own drivers, beside the
# server driven with no VMM at all. Kinds (--kind, comma-separated; default
# all three), each on its own server started by this script:
#   rbd         a 256 MiB RBD image on a real Ceph cluster on this machine
#               (tests/ceph/cluster.sh: one mon, three BlueStore OSDs on
#               loopback; rbd_cache off), written through once, then
#               16 MiB of 4k random reads over it (warms the OSDs)
#   nbd-qcow2   a 256 MiB qcow2 file (every cluster allocated, random data)
#               served by qemu-nbd (--cache=none --aio=io_uring, --shared 16,
#               daemonised) on a UNIX socket
#   nbd-memory  nbdkit's memory plugin, 256 MiB, filled with the same data
#               (daemonised with -P: nbdkit -f dies with its parent)
# Legs (--legs, comma-separated; default iovm,iovm-p0,iovm-nogather,qsd,
# floor,probe):
#   iovm        `iovm vhost-user-blk --disk path=rbd:...|nbd+unix:...`
#               with its defaults, driven by bench/vhost-client as in
#               bench/vhost.sh (no guest; one queue; the client polls)
#   iovm-p0     the same with poll-us=0 (the queue thread never spins)
#   iovm-p50    the same with poll-us=50 (the default, explicitly)
#   iovm-poll   rbd: the same with IOVM_RBD_COMPLETIONS=poll (the image's
#               notification eventfd instead of librbd's callbacks)
#   iovm-nogather nbd, scattered jobs only: the same with
#               IOVM_NBD_GATHER=0: one NBD command per memory-contiguous
#               run of a request's buffers (no copy), instead of short runs
#               gathered into one buffer and command (which also turns
#               the hold of iovm-nohold off)
#   iovm-nohold nbd, sequential jobs only: the same with IOVM_NBD_HOLD=0:
#               each merge group goes to the server as soon as it is
#               popped, instead of being held while 4 reads and writes
#               are out (virtio/blk.c, hold_group)
#   qsd         `qemu-storage-daemon --blockdev rbd|nbd --export
#               vhost-user-blk` on the same image or server
#   floor       the server with no VMM: `rbd bench` with as many threads as
#               the job's depth (no latency or CPU figure), or fio's nbd
#               engine (libnbd, one connection) at the job's depth
#   probe       the probe guest's blk jobs (data-verified) on `iovm run
#               --disk path=...` and on QEMU (-drive file=rbd:...|nbd...,
#               virtio-blk-pci, an iothread), through bench/blk.sh
#               --disk-uri; rows probe-iovm and probe-qemu
# Jobs (vhost-client): 4k random read and write at QD1 and QD32, 64k
# sequential read and write at QD16, and for NBD two scattered jobs: 64k
# random reads and writes at QD8 whose data are sixteen 4k pieces apart in
# memory (iovm gathers them into one command, iovm-nogather sends one per
# piece, QEMU one command from its iovecs).
# Every job runs on every leg before the next job; ROUNDS repeat it all.
# Reports per kind, job and leg the round of median IOPS (IOPS, MB/s, mean
# and p99 latency, CPU per I/O of the VMM or back-end process: all its
# threads, librbd's included, not the NBD server's), the spread of IOPS
# between rounds, and the ratios against qsd, QEMU and the floor. A leg
# that fails is reported (stderr and under the tables) and the others still
# run; the exit status is then 1.
#
# Usage: bench/netdisk.sh [--kind K[,K...]] [--legs L[,L...]] [BUILD_DIR]
# Environment: TIME seconds per job (5), ROUNDS (1), JOBS (vhost-client job
#              specs, replacing the default list), CEPH_DIR (a running
#              cluster from tests/ceph/cluster.sh; default: start one),
#              SIZE_MB (256), CLIENT_IRQ=1 (vhost-client --irq for the iovm
#              and qsd legs: the client sleeps on interrupts instead of
#              polling, so it leaves the cluster's daemons a CPU),
#              PROBE_OPTS (more bench/blk.sh options for the probe legs, e.g.
#              "--mode msix --wait hlt": the probe's vCPU halts between
#              completions instead of spinning)
set -eu

kinds=rbd,nbd-qcow2,nbd-memory
legs=iovm,iovm-p0,iovm-nogather,qsd,floor,probe
while [ $# -gt 0 ]; do
	case $1 in
	--kind) kinds=$2; shift 2 ;;
	--legs) legs=$2; shift 2 ;;
	*) break ;;
	esac
done
. "$(dirname "$0")/vhost-lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
t=${TIME:-5}
client_opts=
[ "${CLIENT_IRQ:-0}" = 0 ] || client_opts=--irq
rounds=${ROUNDS:-1}
MiB=1048576
for k in $(echo "$kinds" | tr ',' ' '); do
	case $k in rbd | nbd-qcow2 | nbd-memory) ;;
	*) echo "$me: --kind: $k is not rbd, nbd-qcow2 or nbd-memory" >&2; exit 2 ;;
	esac
done
for l in $(echo "$legs" | tr ',' ' '); do
	case $l in iovm | iovm-p0 | iovm-p50 | iovm-poll | iovm-nogather | iovm-nohold | qsd | floor | probe) ;;
	*) echo "$me: --legs: unknown leg $l" >&2; exit 2 ;;
	esac
done
has_leg() { case ,$legs, in *,$1,*) return 0 ;; esac; return 1; }

need_built "$iovm" "$client"
has_leg probe && need_built "$build/guest/probe/probe.elf"
need_tool() {	# TOOL WHY
	command -v "$1" >/dev/null ||
		{ echo "$me: $1 missing ($2; tools/install-deps.sh)" >&2; exit 1; }
}
need_tool timeout coreutils
need_tool python3 "for the tables"
has_leg qsd && need_tool qemu-storage-daemon "the qsd leg"
has_leg probe && need_tool qemu-system-x86_64 "the probe leg's QEMU"
case ,$kinds, in *,rbd,*)
	need_tool rbd "Ceph's client, ceph-common"
	# qemu-img lists the block drivers that qemu-storage-daemon has too
	has_leg qsd && command -v qemu-img >/dev/null && { qemu-img --help | grep '^Supported formats' | grep -qw rbd ||
		{ echo "$me: QEMU has no rbd block driver (qemu-block-extra)" >&2; exit 1; }; }
	;;
esac
case ,$kinds, in *,nbd-*)
	need_tool qemu-img "to make the qcow2 and raw images"
	need_tool nbdcopy "libnbd-bin: fills nbdkit's memory"
	has_leg floor && { need_tool fio "the NBD floor"
		fio --enghelp 2>/dev/null | grep -qw nbd ||
			{ echo "$me: this fio has no nbd engine (the NBD floor needs one built with libnbd)" >&2; exit 1; }; }
	;;
esac
case ,$kinds, in *,nbd-qcow2,*) need_tool qemu-nbd "the nbd-qcow2 server" ;; esac
case ,$kinds, in *,nbd-memory,*) need_tool nbdkit "the nbd-memory server" ;; esac

make_work iovm-netdisk-bench
: >"$work/results"
: >"$work/failed"
: >"$work/loads"
srv_pid=""
cdir=""
own_cluster=0
# Everything this script started is stopped at exit, by its pid.
cleanup_all() {
	stop_server
	[ $own_cluster = 0 ] || sh "$root/tests/ceph/cluster.sh" stop "$cdir" >/dev/null 2>&1 || true
	cleanup
}
trap cleanup_all EXIT INT TERM

# stop_server: the NBD server this script started, if any (SIGTERM by pid,
# then waits for it).
stop_server() {
	[ -n "$srv_pid" ] || return 0
	kill "$srv_pid" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$srv_pid" 2>/dev/null || break
		sleep 0.05
	done
	srv_pid=""
}

# A raw file of random data: the NBD images' content (reads must reach
# data, not holes or zeroes the server answers without looking).
raw=$work/data.raw
make_raw() {
	[ -f "$raw" ] || dd if=/dev/urandom of="$raw" bs=1M count="$size_mb" status=none
}

# start_kind KIND: the server of KIND, and for it $uri (iovm's path= and
# the probe's --disk-uri), $iovm_extra (iovm's further disk options),
# $qsd_blockdev, $ceph_conf. Returns 1 (said on stderr) if it cannot.
start_kind() {
	iovm_extra="" ceph_conf=""
	case $1 in
	rbd)
		if [ -z "$cdir" ]; then
			cdir=${CEPH_DIR:-}
			if [ -z "$cdir" ]; then
				cdir=$work/ceph
				own_cluster=1
				sh "$root/tests/ceph/cluster.sh" start "$cdir" >&2 ||
					{ echo "$me: no Ceph cluster" >&2; own_cluster=0; cdir=""; return 1; }
			fi
		fi
		ceph_conf=$cdir/ceph.conf
		img=bench$$
		rbd -c "$ceph_conf" create "iovm/$img" --size ${size_mb}M || return 1
		# Reads must reach the OSDs' data, not unwritten objects.
		rbd -c "$ceph_conf" bench --io-type write --io-size 4M --io-threads 16 \
			--io-total ${size_mb}M --io-pattern seq "iovm/$img" >/dev/null || return 1
		# A fresh image's first reads are slow (the OSDs load its
		# objects' metadata): without this pass, the first leg of the
		# first job, iovm's, paid for it in every round (4k QD1 reads
		# 0.62-0.79 of qsd's IOPS; with it 0.93-1.09, inside the
		# rounds' spread: bench/RESULTS.md, "the cold first leg").
		rbd -c "$ceph_conf" bench --io-type read --io-size 4K --io-threads 16 \
			--io-total 16M --io-pattern rand "iovm/$img" >/dev/null || return 1
		uri=rbd:iovm/$img
		iovm_extra=,conf=$ceph_conf
		qsd_blockdev="driver=rbd,node-name=n,pool=iovm,image=$img,conf=$ceph_conf,cache.direct=on"
		;;
	nbd-qcow2)
		make_raw
		rm -f "$work/nbd.sock" "$work/disk.qcow2"
		qemu-img convert -f raw -O qcow2 "$raw" "$work/disk.qcow2" || return 1
		# --persistent: it serves one client after another
		qemu-nbd --fork --persistent --pid-file "$work/server.pid" -f qcow2 -x disk \
			--shared 16 --cache=none --aio=io_uring --socket "$work/nbd.sock" \
			"$work/disk.qcow2" 2>"$work/server.log" ||
			{ cat "$work/server.log" >&2; echo "$me: qemu-nbd did not start" >&2; return 1; }
		srv_pid=$(cat "$work/server.pid")
		;;
	nbd-memory)
		make_raw
		rm -f "$work/nbd.sock"
		nbdkit -U "$work/nbd.sock" -P "$work/server.pid" -e disk memory ${size_mb}M \
			2>"$work/server.log" ||
			{ cat "$work/server.log" >&2; echo "$me: nbdkit did not start" >&2; return 1; }
		for _ in $(seq 100); do
			[ -s "$work/server.pid" ] && break
			sleep 0.05
		done
		srv_pid=$(cat "$work/server.pid")
		;;
	esac
	case $1 in nbd-*)
		uri="nbd+unix:///disk?socket=$work/nbd.sock"
		for _ in $(seq 100); do
			[ -S "$work/nbd.sock" ] && break
			sleep 0.05
		done
		[ "$1" = nbd-qcow2 ] || nbdcopy "$raw" "$uri" ||
			{ echo "$me: nbdcopy could not fill $uri" >&2; return 1; }
		qsd_blockdev="driver=nbd,node-name=n,server.type=unix,server.path=$work/nbd.sock,export=disk"
		;;
	esac
}

# stop_kind KIND: stops KIND's server (the cluster stays for the run).
stop_kind() {
	case $1 in
	rbd) rbd -c "$ceph_conf" rm "iovm/$img" >/dev/null 2>&1 || true ;;
	*) stop_server ;;
	esac
}

# start_backend NAME LABEL JOB CMD...: CMD, serving $work/NAME.sock, in
# the background as $bpid (its output in $work/NAME.log); returns 1, the
# leg failed, if the socket does not come.
start_backend() {
	name=$1 label=$2 job=$3
	shift 3
	rm -f "$work/$name.sock"
	"$@" >"$work/$name.log" 2>&1 &
	bpid=$!
	wait_sock "$work/$name.sock" && return 0
	stop_backend
	leg_failed "$label" "$job" "$name did not start"
	return 1
}

# run_iovm KIND LABEL JOB [DISK_OPTS [ENV...]]
run_iovm() {
	label="kind=$1 backend=$2" job=$3 dopts=${4:-}
	shift 3
	[ $# = 0 ] || shift
	start_backend iovm "$label" "$job" env "$@" "$iovm" vhost-user-blk \
		--socket "$work/iovm.sock" --disk "path=$uri$iovm_extra$dopts" --once || return 0
	run_client iovm "$label" "$job" $client_opts || stop_backend
	wait_backend
}

# rbd bench: the job's depth as threads; a fixed amount per job (its time
# at the cluster's pace is not known in advance).
floor_rbd() {	# NAME RW BS QD
	case $2 in
	randread) ty=read pat=rand ;; randwrite) ty=write pat=rand ;;
	read) ty=read pat=seq ;; *) ty=write pat=seq ;;
	esac
	# (about 5-30 s each at this machine's pace)
	case $ty-$3-$4 in
	write-4k-1) total=8M ;; read-4k-1) total=16M ;; write-4k-*) total=32M ;;
	read-4k-*) total=64M ;; write-*) total=256M ;; *) total=512M ;;
	esac
	# rbd wants 4K, not 4k
	if ! out=$(timeout 300 rbd -c "$ceph_conf" bench --io-type $ty \
		--io-size "$(echo "$3" | tr k K)" --io-threads "$4" --io-total $total \
		--io-pattern $pat "iovm/$img" 2>&1); then
		leg_failed "kind=rbd backend=floor" "$1" "rbd bench failed"
		return 0
	fi
	# "elapsed: 3   ops: 8192   ops/sec: 2661.2   bytes/sec: 10 MiB/s"
	echo "$out" | awk -v j="$1" -v bs="$3" '/^elapsed:/ {
		b = (bs == "64k" ? 65536 : 4096)
		printf "kind=rbd backend=floor job=%s iops=%d bw_mbs=%.1f lat_mean_us=- lat_p99_us=- cpu_us_per_io=-\n",
			j, $6, $6 * b / 1e6 }' >>"$work/results"
}

# fio's nbd engine (libnbd's aio on one connection) at the job's depth, in
# the same 64 MiB at 1 MiB as the client; its CPU is fio's own (usr+sys).
floor_nbd() {	# KIND NAME RW BS QD
	if ! timeout $((t + 60)) fio --name="$2" --ioengine=nbd --uri="$uri" --rw="$3" \
		--bs="$4" --iodepth="$5" --offset=1M --size=64M --time_based \
		--runtime="$t" --randrepeat=0 --norandommap --output-format=json \
		>"$work/fio.json" 2>"$work/fio.log"; then
		tail -n 3 "$work/fio.log" >&2
		leg_failed "kind=$1 backend=floor" "$2" "fio failed"
		return 0
	fi
	python3 - "$work/fio.json" "$1" "$2" "$4" >>"$work/results" <<'PY'
import json, sys
text = open(sys.argv[1]).read()	# after fio's "connected to NBD server"
j = json.loads(text[text.index("{"):])["jobs"][0]
d = j["write"] if j["write"]["total_ios"] > j["read"]["total_ios"] else j["read"]
ios, secs = d["total_ios"], j["job_runtime"] / 1000
iops = ios / secs
bs = int(sys.argv[4].rstrip("kK")) * 1024
p99 = d["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1000
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * secs * 1e6 / ios
print("kind=%s backend=floor job=%s iops=%.0f bw_mbs=%.1f lat_mean_us=%.1f lat_p99_us=%.1f ios=%d cpu_us_per_io=%.2f"
      % (sys.argv[2], sys.argv[3], iops, iops * bs / 1e6, d["lat_ns"]["mean"] / 1000, p99, ios, cpu))
PY
}

run_floor() {	# KIND JOB
	set -- "$1" $(echo "$2" | tr ':' ' ')
	if [ "$1" = rbd ]; then
		floor_rbd "$2" "$3" "$4" "$5"
	else
		floor_nbd "$@"
	fi
}

# The probe's five jobs on iovm run and on QEMU, one boot each, through
# bench/blk.sh (its region: 64 MiB at 1 MiB).
run_probe() {	# KIND
	: >"$work/probe.results"
	if ! BUILD=$build bash "$root/bench/blk.sh" --disk-uri "$uri" \
		${ceph_conf:+--ceph-conf "$ceph_conf"} --only iovm,qemu --rounds 1 ${PROBE_OPTS:-} \
		--secs "$t" --region 64M --results "$work/probe.results" >"$work/probe.log" 2>&1; then
		tail -n 8 "$work/probe.log" >&2
		grep -q '^iovm ' "$work/probe.results" || leg_failed "kind=$1 backend=probe-iovm" all "see above"
		grep -q '^qemu ' "$work/probe.results" || leg_failed "kind=$1 backend=probe-qemu" all "see above"
	fi
	sed -e "s/^iovm /kind=$1 backend=probe-iovm /" -e "s/^qemu /kind=$1 backend=probe-qemu /" \
		"$work/probe.results" >>"$work/results"
}

base_jobs="randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32
randwrite-4k-qd1:randwrite:4k:1 randwrite-4k-qd32:randwrite:4k:32
seqread-64k-qd16:read:64k:16 seqwrite-64k-qd16:write:64k:16"
seg_jobs="randread-64k-qd8-seg4k:randread:64k:8:4k randwrite-64k-qd8-seg4k:randwrite:64k:8:4k"

for r in $(seq "$rounds"); do
	for k in $(echo "$kinds" | tr ',' ' '); do
		echo "round $r kind $k start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/loads"
		echo "$me: round $r: $k (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
		if ! start_kind "$k"; then
			leg_failed "kind=$k backend=all" all "its server did not start"
			stop_kind "$k"
			continue
		fi
		jobs=${JOBS:-$base_jobs}
		[ -n "${JOBS:-}" ] || [ "$k" = rbd ] || jobs="$jobs $seg_jobs"
		for j in $jobs; do
			! has_leg iovm || run_iovm "$k" iovm "$j"
			! has_leg iovm-p0 || run_iovm "$k" iovm-p0 "$j" ,poll-us=0
			! has_leg iovm-p50 || run_iovm "$k" iovm-p50 "$j" ,poll-us=50
			! has_leg iovm-poll || [ "$k" != rbd ] ||
				run_iovm "$k" iovm-poll "$j" "" IOVM_RBD_COMPLETIONS=poll
			# (it differs only on scattered jobs: NAME:RW:BS:QD:SEG)
			case $j in *:*:*:*:*)
				! has_leg iovm-nogather || [ "$k" = rbd ] ||
					run_iovm "$k" iovm-nogather "$j" "" IOVM_NBD_GATHER=0 ;;
			esac
			case $j in *:read:*:* | *:write:*:*)
				! has_leg iovm-nohold || [ "$k" = rbd ] ||
					run_iovm "$k" iovm-nohold "$j" "" IOVM_NBD_HOLD=0 ;;
			esac
			! has_leg qsd || { qsd_label="kind=$k backend=qsd"; run_qsd "$qsd_blockdev" "$j" $client_opts; }
			! has_leg floor || run_floor "$k" "$j"
		done
		! has_leg probe || run_probe "$k"
		stop_kind "$k"
		echo "round $r kind $k end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/loads"
	done
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, load now $(cut -d' ' -f1-3 /proc/loadavg), $size_mb MiB disks, $t s per job, median of $rounds rounds, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), vhost-client ${client_opts:-polling}${PROBE_OPTS:+, probe $PROBE_OPTS}"
echo
sed 's/^/    /' "$work/loads"
echo
python3 - "$work/results" <<'PY'
import sys

runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if "job" in kv:
        runs.setdefault((kv["kind"], kv["backend"], kv["job"]), []).append(kv)

def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

rows, spread = {}, {}
for key, rs in runs.items():
    rs.sort(key=lambda kv: num(kv["iops"]) or 0)
    rows[key] = rs[len(rs) // 2]
    lo, hi, med = num(rs[0]["iops"]), num(rs[-1]["iops"]), num(rows[key]["iops"])
    spread[key] = "±%.0f%%" % (50 * (hi - lo) / med) if len(rs) > 1 and med else "-"

order = ["iovm", "iovm-p0", "iovm-p50", "iovm-poll", "iovm-nogather", "iovm-nohold", "qsd", "floor",
         "probe-iovm", "probe-qemu"]
kinds, jobs = [], []
for (k, b, j) in runs:
    if k not in kinds:
        kinds.append(k)
    if j not in jobs:
        jobs.append(j)

def ratio(a, b, key):
    x, y = num(a.get(key)) if a else None, num(b.get(key)) if b else None
    return "%.2f" % (x / y) if x is not None and y else "-"

for k in kinds:
    print("## %s" % k)
    print()
    print("| job | leg | IOPS | rounds' spread | MB/s | avg lat µs | p99 lat µs | CPU µs/IO |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for j in jobs:
        for b in order:
            r = rows.get((k, b, j))
            if r:
                print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (j, b, r["iops"], spread[(k, b, j)],
                      r["bw_mbs"], r["lat_mean_us"], r["lat_p99_us"], r["cpu_us_per_io"]))
    print()
    print("| job | iovm/qsd IOPS | iovm/qsd CPU/IO | iovm/qsd p99 | iovm/floor IOPS | probe iovm/QEMU IOPS | probe iovm/QEMU CPU/IO | probe iovm/QEMU p99 | probe iovm/floor IOPS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for j in jobs:
        g = lambda b: rows.get((k, b, j))
        i, q, f, pi, pq = g("iovm"), g("qsd"), g("floor"), g("probe-iovm"), g("probe-qemu")
        cells = [ratio(i, q, "iops"), ratio(i, q, "cpu_us_per_io"), ratio(i, q, "lat_p99_us"),
                 ratio(i, f, "iops"), ratio(pi, pq, "iops"), ratio(pi, pq, "cpu_us_per_io"),
                 ratio(pi, pq, "lat_p99_us"), ratio(pi, f, "iops")]
        if any(c != "-" for c in cells):
            print("| %s | %s |" % (j, " | ".join(cells)))
    others = [b for b in ("iovm-p0", "iovm-p50", "iovm-poll", "iovm-nogather", "iovm-nohold") if any((k, b, j) in rows for j in jobs)]
    if others:
        print()
        print("| job | " + " | ".join("%s/iovm IOPS | %s/iovm CPU/IO" % (b, b) for b in others) + " |")
        print("|---|" + "---:|---:|" * len(others))
        for j in jobs:
            i = rows.get((k, "iovm", j))
            if not any((k, b, j) in rows for b in others):
                continue
            print("| %s | %s |" % (j, " | ".join("%s | %s" % (ratio(rows.get((k, b, j)), i, "iops"),
                  ratio(rows.get((k, b, j)), i, "cpu_us_per_io")) for b in others)))
    print()
PY
report_failed
