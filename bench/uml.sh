#!/bin/bash
# UML block benchmark: fio (libaio, O_DIRECT) in User-Mode Linux, whose
# virtio_blk reaches its back-end through virtio_uml (a vhost-user front-end),
# against the same file in the same run:
#   iovm      `iovm vhost-user-blk` (cache=none: O_DIRECT, io_uring)
#   qsd       `qemu-storage-daemon --export type=vhost-user-blk` (cache.direct=on,
#             aio=io_uring)
#   iovm-lsi  sym53c8xx in UML on iovm's LSI 53C895A over virt-pci (`iovm
#             vhost-user-pci ... if=lsi`, cache=none): every register access
#             of the driver is a virtio-pcidev message UML waits for
# Jobs: 4k random read and write at QD1 and QD16, 16k and 64k sequential
# read and write at QD16, all on the file's first --size bytes, --secs seconds each
# after a 1 s ramp. Each job of each leg is its own UML boot (0.2-1 s), and
# rounds interleave the legs job by job, so that drifting load on a shared
# machine hits them alike. Prints per job and leg the median over the rounds
# that passed of IOPS, MB/s and p99 completion latency (fio's clat), the
# spread of IOPS over the rounds (min-max), the ratios iovm/qsd (IOPS:
# > 1 is iovm faster; p99: < 1 is iovm faster), and per leg sequential
# writes against reads at 16k and 64k (the LSI seeds' measure: a model that
# queued only reads ran writes at a quarter of read speed).
#
# What the figures mean: every fio system call in UML is a ptrace round trip
# to the UML kernel (a host process), and UML's interrupts are host SIGIOs,
# so UML's own costs sit on top of both back-ends alike and shrink their
# differences, most at QD1; see bench/RESULTS.md. The run's header line
# gives the price of one system call in UML and on the host, measured in
# the run (dd of 1-byte blocks: one read and one write each).
#
# Usage: bench/uml.sh [--secs N] [--rounds N] [--size SIZE] [--file PATH]
#                     [--only iovm,qsd,iovm-lsi] [--uml KERNEL] [--mem SIZE]
# --secs N      seconds per job (default 5)
# --rounds N    rounds (default 1); medians are over the rounds that passed
# --size SIZE   the region the jobs use, k/m/g suffixes (default 256m); the
#               file is written with random data once and kept while its size
#               fits
# --file PATH   the test file (default BUILD/bench-uml.img)
# --only LEGS   the legs to run (default iovm,qsd,iovm-lsi)
# --uml KERNEL  the UML kernel (default $IOVM_UML, else BUILD/uml/linux, made
#               by tools/mkuml.sh BUILD/uml)
# --mem SIZE    UML's memory (default 512M), a file on /dev/shm
# BUILD=dir selects the build (default build). A leg that fails (back-end
# does not start, UML does not see the disk, fio fails) is reported with its
# reason, the other legs still run and print, and the script exits 1,
# keeping the logs of every run (UML's console, fio's output, the back-end's
# log) in the folder it names at the end.
# Needs build/iovm, fio, qemu-storage-daemon and the UML kernel. Not part of
# the test suite.
set -eu
. "$(dirname "$0")/lib.sh"

secs=5
rounds=1
region=$((256 << 20))
file=$build/bench-uml.img
only=iovm,qsd,iovm-lsi
mem=512M

usage() { sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//p}' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
	case $1 in
	--secs) secs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--size) region=$(tobytes "$2"); shift 2 ;;
	--file) file=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--uml) IOVM_UML=$(realpath "$2"); export IOVM_UML; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "uml.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
	esac
done
case $secs$rounds in *[!0-9]*) echo "uml.sh: --secs and --rounds take numbers" >&2; exit 2 ;; esac

# tests/uml/lib.sh finds the kernel from IOVM_UML or IOVM_UML_DIR.
[ -n "${IOVM_UML:-}" ] || export IOVM_UML_DIR=${IOVM_UML_DIR:-$build/uml}
. "$root/tests/uml/lib.sh"
uml_require
need_built "$iovm"
command -v fio >/dev/null || { echo "uml.sh: fio missing (tools/install-deps.sh)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/iovm-bench-uml.XXXXXX")
bpid=
cleanup() {
	if [ -n "$bpid" ]; then
		kill -KILL "$bpid" 2>/dev/null || true
		wait "$bpid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != "$region" ]; then
	echo "uml.sh: writing $((region >> 20)) MiB of random data to $file" >&2
	rm -f "$file"
	head -c "$region" /dev/urandom >"$file"
fi

# name:rw:bs:iodepth
JOBS="randread-4k-qd1:randread:4k:1 randread-4k-qd16:randread:4k:16
randwrite-4k-qd1:randwrite:4k:1 randwrite-4k-qd16:randwrite:4k:16
seqread-16k-qd16:read:16k:16 seqwrite-16k-qd16:write:16k:16
seqread-64k-qd16:read:64k:16 seqwrite-64k-qd16:write:64k:16"

# ---- the legs ----------------------------------------------------------------
# leg_LEG start DIR: starts LEG's back-end on DIR/sock (pid in $bpid) and sets
# $uml_args (UML's device argument), $uml_mod (the driver modules to load, in
# order) and $uml_dev (the disk's sysfs block folder, glob allowed); or
# prints why the leg failed and returns 1, or why it cannot run here and
# returns 2 (reported as "not run", not as a failure). The caller stops
# $bpid.

# wait_sock DIR LOG: the back-end's socket (tests/uml/backend.sh).
. "$root/tests/uml/backend.sh"
wait_sock() {
	backend_wait_sock "$1/sock" "$bpid" && return 0
	echo "no socket (log: $2)"
	return 1
}

leg_iovm() {
	"$iovm" vhost-user-blk --socket "$1/sock" --disk "path=$file,cache=none" \
		--once >"$1/backend.log" 2>&1 &
	bpid=$!
	uml_args="virtio_uml.device=$1/sock:2" uml_mod=virtio_blk uml_dev=/sys/block/vda
	wait_sock "$1" "$1/backend.log"
}

leg_qsd() {
	command -v qemu-storage-daemon >/dev/null ||
		{ echo "qemu-storage-daemon missing (package qemu-system-common)"; return 2; }
	qemu-storage-daemon \
		--blockdev "file,filename=$file,node-name=n,cache.direct=on,aio=io_uring" \
		--export "type=vhost-user-blk,id=e,node-name=n,addr.type=unix,addr.path=$1/sock,writable=on" \
		>"$1/backend.log" 2>&1 &
	bpid=$!
	uml_args="virtio_uml.device=$1/sock:2" uml_mod=virtio_blk uml_dev=/sys/block/vda
	wait_sock "$1" "$1/backend.log"
}

# iovm's LSI over virt-pci (UML's PCI over virtio, `iovm vhost-user-pci`):
# sym53c8xx drives the LSI through its MMIO BAR, the disk is SCSI target 0.
leg_iovm-lsi() {
	[ -n "$UML_VPCI_ID" ] ||
		{ echo "the UML kernel has no CONFIG_UML_PCI_OVER_VIRTIO"; return 2; }
	"$iovm" vhost-user-pci --socket "$1/sock" --disk "path=$file,cache=none,if=lsi" \
		>"$1/backend.log" 2>&1 &
	bpid=$!
	uml_args="virtio_uml.device=$1/sock:$UML_VPCI_ID" uml_mod=sym53c8xx
	uml_dev="/sys/bus/scsi/devices/*:0:0:0/block/sd*"
	wait_sock "$1" "$1/backend.log"
}

# run_one LEG JOB ROUND: one UML boot running one fio job against LEG. Appends
# a result line (or the reason it failed) to $work/results.
run_one() {
	local leg=$1 name rw bs qd dir why st kind
	IFS=: read -r name rw bs qd <<<"$2"
	dir=$work/$leg-$name-r$3
	mkdir -p "$dir"
	# Not in a $(...) subshell: the leg sets $bpid and the UML arguments.
	st=0
	"leg_$leg" "$dir" >"$dir/leg.out" || st=$?
	if [ "$st" != 0 ]; then
		why=$(head -n 1 "$dir/leg.out")
		[ "$st" = 2 ] && kind=notrun || kind=failed
		echo "leg=$leg job=$name $kind=${why// /_}" >>"$work/results"
		stop_backend
		return 0
	fi
	cat >"$dir/script.sh" <<EOS
set -e
for m in $uml_mod; do modprobe -d "\$UML_MODULES" \$m; done
n=0
until ls -d $uml_dev >/dev/null 2>&1; do
	n=\$((n + 1))
	[ \$n -le 600 ] || { echo "no disk at $uml_dev"; exit 10; }
	sleep 0.1
done
dev=/dev/\$(basename \$(ls -d $uml_dev | head -n 1))
n=0
until [ -b \$dev ]; do
	n=\$((n + 1))
	[ \$n -le 600 ] || { echo "no \$dev"; exit 10; }
	sleep 0.1
done
fio --name=$name --filename=\$dev --direct=1 --ioengine=libaio --rw=$rw \\
	--bs=$bs --iodepth=$qd --size=$region --time_based --ramp_time=1 \\
	--runtime=$secs --output-format=json --output=fio.json
EOS
	st=0
	UML_MEM=$mem UML_TIMEOUT=$((secs * 4 + 120)) \
		uml_run "$dir" "$dir/script.sh" $uml_args >"$dir/uml.out" 2>&1 || st=$?
	stop_backend
	if [ "$st" != 0 ] || [ ! -s "$dir/fio.json" ]; then
		why="UML script exited $st: $(tail -n 1 "$dir/output.log" 2>/dev/null) (logs: $dir)"
		echo "leg=$leg job=$name failed=${why// /_}" >>"$work/results"
		return 0
	fi
	python3 - "$dir/fio.json" "$leg" "$name" >>"$work/results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
p99 = d["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1000
print("leg=%s job=%s iops=%.0f mbs=%.1f p99_us=%.0f" %
      (sys.argv[2], sys.argv[3], d["iops"], d["bw_bytes"] / 1e6, p99))
EOF
}

# stop_backend: the leg's back-end, once UML has gone (iovm --once has
# exited by itself; qsd needs a signal).
stop_backend() {
	[ -n "$bpid" ] || return 0
	kill "$bpid" 2>/dev/null || true
	wait "$bpid" 2>/dev/null || true
	bpid=
}

# What one system call costs in UML (a ptrace round trip to the UML
# kernel) and on the host: dd of 1-byte blocks is one read and one write
# per block. Measured once per run, on the same machine state.
syscall_ns() {
	local t0 t1 n=$1
	t0=$(date +%s%N)
	dd if=/dev/zero of=/dev/null bs=1 count="$n" 2>/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / (2 * n)))
}
host_sys=$(syscall_ns 200000)
mkdir -p "$work/syscall"
cat >"$work/syscall/script.sh" <<EOS
t0=\$(date +%s%N)
dd if=/dev/zero of=/dev/null bs=1 count=20000 2>/dev/null
t1=\$(date +%s%N)
echo \$(((t1 - t0) / 40000)) >ns
EOS
uml_sys="?"
if UML_MEM=$mem uml_run "$work/syscall" "$work/syscall/script.sh" >"$work/syscall/uml.out" 2>&1; then
	uml_sys=$(cat "$work/syscall/ns")
fi

: >"$work/results"
for r in $(seq "$rounds"); do
	for j in $JOBS; do
		for leg in ${only//,/ }; do
			case $leg in
			iovm | qsd | iovm-lsi) run_one "$leg" "$j" "$r" ;;
			*) echo "uml.sh: unknown leg '$leg'" >&2; exit 2 ;;
			esac
		done
	done
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), UML $("$UML_KERNEL" --version 2>/dev/null | head -n 1) mem=$mem, file $file ($((region >> 20)) MiB), $secs s per job, $rounds rounds"
echo "# one system call (dd bs=1): ${uml_sys} ns in UML, ${host_sys} ns on the host"
st=0
python3 - "$work/results" "$only" "$rounds" <<'EOF' || st=$?
import sys
from statistics import median
legs = sys.argv[2].split(",")
nrounds = int(sys.argv[3])
runs, fails, notrun, jobs = {}, {}, {}, []
for line in open(sys.argv[1]):
    kv = dict(w.split("=", 1) for w in line.split())
    key = (kv["leg"], kv["job"])
    if kv["job"] not in jobs:
        jobs.append(kv["job"])
    if "failed" in kv:
        fails.setdefault(key, []).append(kv["failed"].replace("_", " "))
    elif "notrun" in kv:
        notrun[kv["leg"]] = kv["notrun"].replace("_", " ")
    else:
        runs.setdefault(key, []).append(kv)
def med(key, f):
    return median(float(r[f]) for r in runs[key])
print("| job | leg | ok | IOPS | IOPS min-max | MB/s | p99 us |")
print("|---|---|---:|---:|---:|---:|---:|")
for j in jobs:
    for l in legs:
        k = (l, j)
        if l in notrun:
            continue
        ok = len(runs.get(k, []))
        if not ok:
            print("| %s | %s | 0/%d | failed | | | |" % (j, l, nrounds))
            continue
        io = [float(r["iops"]) for r in runs[k]]
        print("| %s | %s | %d/%d | %.0f | %.0f-%.0f | %.1f | %.0f |" %
              (j, l, ok, nrounds, med(k, "iops"), min(io), max(io), med(k, "mbs"),
               med(k, "p99_us")))
if "iovm" in legs and "qsd" in legs:
    print()
    print("| job | iovm/qsd IOPS | iovm/qsd p99 |")
    print("|---|---:|---:|")
    for j in jobs:
        a, b = ("iovm", j), ("qsd", j)
        if a in runs and b in runs:
            p = med(b, "p99_us")
            print("| %s | %.2f | %s |" % (j, med(a, "iops") / med(b, "iops"),
                  "%.2f" % (med(a, "p99_us") / p) if p else "-"))
seq = [(b, "seqwrite-%s-qd16" % b, "seqread-%s-qd16" % b) for b in ("16k", "64k")]
rows = [(l, b, med((l, w), "mbs") / med((l, r), "mbs"))
        for l in legs for b, w, r in seq if (l, w) in runs and (l, r) in runs]
if rows:
    print()
    print("| leg | seq QD16 write/read MB/s, 16k | 64k |")
    print("|---|---:|---:|")
    for l in legs:
        got = {b: x for (ll, b, x) in rows if ll == l}
        if got:
            print("| %s | %s | %s |" % (l, *("%.2f" % got[b] if b in got else "-"
                                                for b in ("16k", "64k"))))
for l, why in notrun.items():
    print()
    print("not run: %s: %s" % (l, why))
if fails:
    print()
    for (l, j), why in sorted(fails.items()):
        print("failed: %s %s (%d of %d rounds): %s" % (l, j, len(why), nrounds, why[0]))
    sys.exit(1)
EOF
if [ "$st" = 0 ]; then
	rm -rf "$work"
else
	echo "logs of every run: $work"
fi
exit "$st"
