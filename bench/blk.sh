#!/bin/bash
# Block benchmark: the probe guest's virtio-blk jobs (4k randread QD1/QD32,
# 4k randwrite QD32, 64k seq read/write QD16, all data-verified) on iovm and
# on QEMU (virtio-blk-pci, cache=none, aio=io_uring, an iothread) against the
# same raw file in the same run, beside the floor (bench/blk-floor: the same
# jobs with io_uring straight on the file). Prints per job IOPS, bandwidth,
# mean/p99 latency, host CPU time of the VMM process per I/O (excluding the
# time its vCPUs run guest code), and the ratios iovm/QEMU and iovm/floor.
# The floor also runs 1 MiB sequential reads and writes at QD8, the file's
# best bandwidth, and the 64k sequential jobs of every leg are reported
# against it ("64k seq / floor 1m"): a VMM that merges adjacent requests
# beats the floor's own 64k jobs.
# The virtio-scsi rows run the same jobs (plus a 16k sequential pair) over
# iovm's virtio-scsi (--disk ...,if=virtio-scsi) and QEMU's virtio-scsi-pci
# with an iothread + scsi-hd (cache=none, aio=io_uring).
# The LSI rows run the same jobs (plus a 16k sequential pair) through the
# probe's sym53c8xx-style driver on iovm's LSI 53C895A (--disk ...,if=lsi)
# and on QEMU's lsi53c895a + scsi-hd (cache=none, aio=io_uring).
#
# Usage: bench/blk.sh [--secs N] [--region SIZE] [--file PATH] [--mode poll|msix]
#                     [--wait spin|hlt]
#                     [--only floor,floor-poll,floor-batch,iovm,qemu,iovm-scsi,qemu-scsi,iovm-lsi,qemu-lsi]
#                     [--rounds N] [--guest DIR] [--fio-accel kvm|tcg]
#                     [--pin VCPU_CPU,IO_CPU] [--iovm-opts OPTS] [--qemu PATH]
#                     [--disk-uri URI [--ceph-conf CONF]] [--results FILE]
# --mode msix --wait hlt: virtio completions by MSI-X, the vCPU halted between.
# --only iovm-fio,qemu-fio: the same five jobs with fio (direct=1, libaio, no
# data verification) on /dev/vda of the default Linux guest (build/guest/
# bzImage + initramfs.cpio.gz, or --guest DIR) on iovm and on QEMU (virtio-blk-
# pci, iothread, cache=none, aio=io_uring). Needs hardware KVM to mean
# anything; --fio-accel tcg runs QEMU's leg under TCG (checks the plumbing).
# --only floor-poll adds the floor busy-polling its completions (blk-floor
# --poll): the disk's latency without a wakeup, what a spinning VMM queue
# thread can reach at best. --only floor-batch adds the floor taking every
# ready completion (checking each) before it refills, as the probe's job
# loop does (blk-floor --batch): the floor for that guest with a VMM that
# costs nothing, the figure that tells the VMM's share of a gap to the floor
# at depth from the guest's (column iovm/fl-batch).
# --rounds N repeats floor, iovm and QEMU N times, interleaved, and reports
# the median of each figure (the host may be shared and noisy).
# --pin V,I pins, once the probe's jobs start, every VMM's vCPU thread to
# CPU V and its I/O thread (iovm's queue/SCRIPTS thread, QEMU's iothread, or
# QEMU's main loop for its LSI) to CPU I, and runs the floor on CPU I: the
# same placement for all, instead of whatever the scheduler picks (on a host
# whose disk interrupts one CPU, the placement moves QD1 by up to 2x).
# --iovm-opts OPTS appends OPTS to every iovm --disk (e.g. poll-us=0).
# --qemu PATH: the QEMU binary (default: qemu-system-x86_64 on PATH).
# --disk-uri URI: a network disk instead of the file, the same for both
# VMMs: rbd:POOL/IMAGE (iovm path=rbd:..., QEMU file=rbd:POOL/IMAGE, with
# --ceph-conf CONF as iovm's conf= and QEMU's :conf=) or an NBD URI
# (nbd://..., nbd+unix:///EXPORT?socket=PATH: both take it as it is).
# QEMU's drive is cache=none (its rbd driver then turns rbd_cache off, as
# iovm's cache=none does) without aio= (a file's option). The disk must
# hold --region plus 2 MiB; the floor legs need a file and are refused.
# --results FILE appends the tables' raw lines ("WHO job=... iops=...
# cpu_us_per_io=...", one per leg, job and round that passed) to FILE, for
# scripts that run this one (bench/netdisk.sh).
# A leg that fails (the probe fails, the VMM does not start, QEMU missing)
# is reported as failed, with its reason (the run's whole log is kept as
# BUILD/blk-LEG-roundN.log), and the run goes on with the other
# legs; the tables take each leg's figures from its rounds that passed
# (column "ok": rounds passed/run), and the script exits 1.
# Needs a build (build/iovm, build/guest/probe/probe.elf, build/bench/blk-floor;
# BUILD=dir to use another) and qemu-system-x86_64. Not part of the test suite.
# (fio in a Linux guest needs hardware KVM; on PVM hosts only the probe runs.)
set -eu
. "$(dirname "$0")/lib.sh"

secs=3
region=$((256 << 20))
file=$build/bench-blk.img
mode=poll
wait=spin
guest=""
fio_accel=kvm
only=floor,iovm,qemu,iovm-scsi,qemu-scsi,iovm-lsi,qemu-lsi
rounds=1
pin=""
iovm_opts=""
disk_uri=""
ceph_conf=""
results_out=""

usage() { sed -n '2,/^set -eu/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
	case $1 in
	--secs) secs=$2; shift 2 ;;
	--region) region=$(tobytes "$2"); shift 2 ;;
	--file) file=$2; shift 2 ;;
	--mode) mode=$2; shift 2 ;;
	--wait) wait=$2; shift 2 ;;
	--guest) guest=$2; shift 2 ;;
	--fio-accel) fio_accel=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--pin) pin=$2; shift 2 ;;
	--iovm-opts) iovm_opts=,$2; shift 2 ;;
	--qemu) qemu=$2; shift 2 ;;
	--disk-uri) disk_uri=$2; shift 2 ;;
	--ceph-conf) ceph_conf=$2; shift 2 ;;
	--results) results_out=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "blk.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
	esac
done
case $mode in poll | msix) ;; *) echo "blk.sh: --mode is poll or msix" >&2; exit 2 ;; esac
case $mode,$wait in poll,spin | msix,spin | msix,hlt) ;;
*) echo "blk.sh: --wait is spin or hlt (hlt needs --mode msix)" >&2; exit 2 ;; esac
case $secs in '' | *[!0-9]*) echo "blk.sh: bad --secs" >&2; exit 2 ;; esac
case $fio_accel in kvm | tcg) ;; *) echo "blk.sh: --fio-accel is kvm or tcg" >&2; exit 2 ;; esac
case $rounds in '' | 0 | *[!0-9]*) echo "blk.sh: bad --rounds" >&2; exit 2 ;; esac
[ $((region % 65536)) = 0 ] && [ "$region" -gt 0 ] ||
	{ echo "blk.sh: --region must be a multiple of 64k" >&2; exit 2; }

floor=$build/bench/blk-floor
need_built "$iovm" "$probe" "$floor"
case $pin in
'') ;;
*[!0-9,]* | *,*,* | ,* | *,) echo "blk.sh: --pin is VCPU_CPU,IO_CPU" >&2; exit 2 ;;
*,*) [ "${pin%,*}" -lt "$(nproc)" ] && [ "${pin#*,}" -lt "$(nproc)" ] ||
	{ echo "blk.sh: --pin: this host has CPUs 0-$(($(nproc) - 1))" >&2; exit 2; } ;;
*) echo "blk.sh: --pin is VCPU_CPU,IO_CPU" >&2; exit 2 ;;
esac

# The disk each VMM opens: the file (raw, aio=io_uring for QEMU), or the
# network disk of --disk-uri.
qemu_drive="file=$file,format=raw,cache=none,aio=io_uring"
iovm_disk="path=$file,cache=none"
case $disk_uri in
'') [ -z "$ceph_conf" ] || { echo "blk.sh: --ceph-conf goes with --disk-uri rbd:..." >&2; exit 2; }
	make_disk ;;
rbd:*)
	offset=$((1 << 20))
	file=$disk_uri
	iovm_disk="path=$disk_uri,cache=none${ceph_conf:+,conf=$ceph_conf}"
	qemu_drive="file=$disk_uri${ceph_conf:+:conf=$ceph_conf},format=raw,cache=none" ;;
nbd://* | nbds://* | nbd+unix://* | nbds+unix://*)
	[ -z "$ceph_conf" ] || { echo "blk.sh: --ceph-conf is for rbd: disks" >&2; exit 2; }
	offset=$((1 << 20))
	file=$disk_uri
	iovm_disk="path=$disk_uri,cache=none"
	qemu_drive="file=$disk_uri,format=raw,cache=none" ;;
*) echo "blk.sh: --disk-uri is rbd:POOL/IMAGE or an NBD URI (nbd://, nbd+unix://...)" >&2; exit 2 ;;
esac
case ,$only, in *,floor*) [ -z "$disk_uri" ] ||
	{ echo "blk.sh: the floor legs run on a file, not --disk-uri (--only without floor*)" >&2; exit 2; } ;;
esac
case ,$only, in *,qemu*) [ -z "$disk_uri" ] || [ -z "$qemu" ] || "$qemu" -drive format=help 2>/dev/null |
	grep -qw "${disk_uri%%[:+]*}" ||
	{ echo "blk.sh: $qemu has no ${disk_uri%%[:+]*} block driver (Debian: qemu-block-extra for rbd)" >&2; exit 1; } ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mem=$(( (region >> 20) / 64 + 128 ))M	# probe buffers + latency samples

# leg_failed WHO REASON: records that WHO failed this round (the tables
# say so) and makes the script exit 1 at the end.
leg_failed() {
	echo "$1 $round ${2:-failed}" >>"$tmp/failed"
	echo "$me: $1 FAILED in round $round: ${2:-failed}" >&2
	failed=1
}

# leg_ran WHO: counts a round of WHO (for the "ok" column).
leg_ran() {
	echo "$1" >>"$tmp/ran"
}

# show NAME CMD...: run_vmm, then prints the run's job lines; a failed run
# is recorded as such and its partial figures are left out of the tables.
show() {
	keep=$(wc -l <"$tmp/results")
	leg_ran "$1"
	if run_vmm "$@"; then
		grep '^job=' "$tmp/$1.log" || true
	else
		grep '^job=' "$tmp/$1.log" || true
		head -n "$keep" "$tmp/results" >"$tmp/results.keep"
		mv "$tmp/results.keep" "$tmp/results"
		why=$(grep -m1 -E '^probe: (FAIL|CRASH)' "$tmp/$1.log" || true)
		[ -n "$why" ] || why=$(grep -v '^ *$' "$tmp/$1.err" 2>/dev/null | tail -n 1 || true)
		# the whole log (the probe's diagnostics) outlives the run
		cat "$tmp/$1.log" "$tmp/$1.err" >"$build/blk-$1-round$round.log" 2>/dev/null &&
			why="${why:-exit status $rc, no PASS} (log: $build/blk-$1-round$round.log)"
		leg_failed "$1" "${why:-exit status $rc, no PASS}"
	fi
	rm -f "$tmp/$1.log" "$tmp/fifo"
}

# need_qemu WHO: true when QEMU is there, else WHO fails this round.
need_qemu() {
	if [ -n "$qemu" ] && [ -x "$qemu" ]; then
		return 0
	fi
	leg_ran "$1"
	leg_failed "$1" "QEMU not found (${qemu:-qemu-system-x86_64 not on PATH})"
	return 1
}

# qemu_probe NAME APPEND ARGS...: shows a QEMU run of the probe's bench
# (threads named for --pin) with the devices in ARGS
qemu_probe() {
	qname=$1 qappend=$2
	shift 2
	show "$qname" "$qemu" -name bench,debug-threads=on -enable-kvm -bios /usr/share/qemu/qboot.rom \
		-nographic -no-reboot -m "$mem" -kernel "$probe" -append "$qappend" \
		-device isa-debug-exit,iobase=0xf4,iosize=1 "$@"
}

# run_floor NAME [ARGS...]: the floor program (on the I/O CPU with --pin),
# its job lines recorded under NAME
run_floor() {
	fname=$1
	shift
	leg_ran "$fname"
	if ${pin:+taskset -c "${pin#*,}"} "$floor" "$file" --offset "$offset" \
		--region "$region" --secs "$secs" "$@" >"$tmp/floor.out" 2>"$tmp/floor.err"; then
		sed -n "s/^job=/$fname job=/p" "$tmp/floor.out" >>"$tmp/results"
	else
		leg_failed "$fname" "$(tail -n 1 "$tmp/floor.err")"
	fi
}

append="bench=blk secs=$secs region=$region region_off=$offset mode=$mode wait=$wait"
echo "blk.sh: file=$file region=$((region >> 20))M secs=$secs mode=$mode wait=$wait rounds=$rounds pin=${pin:-no} iovm-opts=${iovm_opts#,} host=$(nproc) CPUs, $(uname -r)"
failed=0
: >"$tmp/results"
: >"$tmp/failed"
: >"$tmp/ran"
for round in $(seq "$rounds"); do
[ "$rounds" = 1 ] || echo "== round $round"
case ,$only, in *,floor,*)
	echo "== floor (io_uring, O_DIRECT)"
	run_floor floor
	;;
esac
case ,$only, in *,floor-poll,*)
	echo "== floor-poll (io_uring, O_DIRECT, busy-polling the completion queue)"
	run_floor floor-poll --poll
	;;
esac
case ,$only, in *,floor-batch,*)
	echo "== floor-batch (io_uring, O_DIRECT, refilling after every ready completion, as the probe)"
	run_floor floor-batch --batch
	;;
esac
case ,$only, in *,iovm,*)
	echo "== iovm"
	show iovm "$iovm" run --kernel "$probe" --memory "$mem" \
		--disk "$iovm_disk$iovm_opts" --append "$append"
	;;
esac
case ,$only, in *,qemu,*)
	echo "== QEMU"
	if need_qemu qemu; then
		qemu_probe qemu "$append" \
			-object iothread,id=io0 \
			-drive "$qemu_drive,if=none,id=d0" \
			-device virtio-blk-pci,drive=d0,disable-legacy=on,iothread=io0
	fi
	;;
esac
scsi_append="bench=vscsi secs=$secs region=$region region_off=$offset mode=$mode"
case ,$only, in *,iovm-scsi,*)
	echo "== iovm virtio-scsi"
	show iovm-scsi "$iovm" run --kernel "$probe" --memory "$mem" \
		--disk "$iovm_disk,if=virtio-scsi$iovm_opts" --append "$scsi_append"
	;;
esac
case ,$only, in *,qemu-scsi,*)
	echo "== QEMU virtio-scsi"
	if need_qemu qemu-scsi; then
		qemu_probe qemu-scsi "$scsi_append" \
			-object iothread,id=io1 \
			-drive "$qemu_drive,if=none,id=d0" \
			-device virtio-scsi-pci,iothread=io1,disable-legacy=on \
			-device scsi-hd,drive=d0
	fi
	;;
esac
lsi_append="bench=lsi secs=$secs region=$region region_off=$offset"
case ,$only, in *,iovm-lsi,*)
	echo "== iovm LSI 53C895A"
	show iovm-lsi "$iovm" run --kernel "$probe" --memory "$mem" \
		--disk "$iovm_disk,if=lsi$iovm_opts" --append "$lsi_append"
	;;
esac
case ,$only, in *,qemu-lsi,*)
	echo "== QEMU lsi53c895a"
	if need_qemu qemu-lsi; then
		qemu_probe qemu-lsi "$lsi_append" \
			-device lsi53c895a,id=scsi0 \
			-drive "$qemu_drive,if=none,id=d0" \
			-device scsi-hd,drive=d0,bus=scsi0.0,scsi-id=0
	fi
	;;
esac
case ,$only, in *,iovm-fio,* | *,qemu-fio,*)
	guest=${guest:-$build/guest}
	for f in "$guest/bzImage" "$guest/initramfs.cpio.gz"; do
		[ -r "$f" ] || { echo "blk.sh: $f missing: tools/mkguest.sh $guest" >&2; exit 1; }
	done
	# The guest script prints the probe's line format (start marker, job
	# lines, PASS), so run_vmm and the table serve both. Terse v3 fields:
	# read kb/bw/iops 6/7/8, clat p99 18, lat mean 40; writes are +41.
	fio_b64=$(sed -e "s/@SECS@/$secs/; s/@OFF@/$offset/; s/@LEN@/$region/" <<'GUEST' | base64 -w0
dev=/dev/vda
[ -b $dev ] || { echo "fio: no $dev"; exit 1; }
echo "probe: bench region offset=@OFF@ len=@LEN@ secs=@SECS@ fio"
ok=1
for j in randread-4k-qd1:randread:4096:1 randread-4k-qd32:randread:4096:32 \
	randwrite-4k-qd32:randwrite:4096:32 seqread-64k-qd16:read:65536:16 \
	seqwrite-64k-qd16:write:65536:16; do
	set -- $(echo $j | tr : ' ')
	case $2 in *write) w=1 ;; *) w=0 ;; esac
	out=$(fio --name=$1 --filename=$dev --direct=1 --ioengine=libaio \
		--rw=$2 --bs=$3 --iodepth=$4 --offset=@OFF@ --size=@LEN@ \
		--runtime=@SECS@ --time_based --randrepeat=0 --norandommap \
		--output-format=terse --terse-version=3 --percentile_list=99) ||
		{ echo "fio: $1 failed"; ok=0; continue; }
	echo "$out" | awk -F';' -v name=$1 -v bs=$3 -v w=$w '{
		o = w ? 41 : 0; split($(18 + o), p, "=")
		printf "job=%s iops=%d bw_mbs=%.1f lat_mean_us=%.1f lat_p99_us=%.1f ios=%d\n",
			name, $(8 + o), $(7 + o) * 1024 / 1e6, $(40 + o), p[2],
			$(6 + o) * 1024 / bs }'
done
[ $ok = 1 ] && echo "probe: PASS"
GUEST
)
	fio_append="console=ttyS0 quiet iovm.net=0 iovm.cmd=$fio_b64"
	;;
esac
case ,$only, in *,iovm-fio,*)
	echo "== iovm, fio in Linux"
	if [ -d /sys/module/kvm_pvm ]; then
		echo "blk.sh: iovm-fio skipped: /dev/kvm is PVM here, where Linux cannot boot" >&2
	else
	show iovm-fio "$iovm" run --kernel "$guest/bzImage" \
		--initrd "$guest/initramfs.cpio.gz" --memory 1G --cpus 2 \
		--disk "$iovm_disk$iovm_opts" --append "$fio_append"
	fi
	;;
esac
case ,$only, in *,qemu-fio,*)
	echo "== QEMU, fio in Linux (accel $fio_accel)"
	if need_qemu qemu-fio; then
		show qemu-fio "$qemu" -accel "$fio_accel" -nographic -no-reboot \
			-m 1G -smp 2 -kernel "$guest/bzImage" \
			-initrd "$guest/initramfs.cpio.gz" -append "$fio_append" \
			-device isa-debug-exit,iobase=0xf4,iosize=1 \
			-object iothread,id=io0 \
			-drive "$qemu_drive,if=none,id=d0" \
			-device virtio-blk-pci,drive=d0,disable-legacy=on,iothread=io0
	fi
	;;
esac
done

[ -z "$results_out" ] || cat "$tmp/results" >>"$results_out"
echo
awk -v ranf="$tmp/ran" -v failf="$tmp/failed" "$awk_lib$awk_jobs"'
function v(x) { return x == "" ? "-" : x }
# "ok" column: rounds of who that passed / rounds run
function ok(who) { return (who in nran) ? (nran[who] - nfail[who]) "/" nran[who] : "-" }
# the jobs a leg runs: the 16k pair only on the SCSI and LSI legs
function runs(who, j) { return who ~ /scsi|lsi/ || j !~ /-16k-/ }
BEGIN {
	while ((getline line < ranf) > 0)
		nran[line]++
	while ((getline line < failf) > 0) {
		split(line, f, " ")
		nfail[f[1]]++
		why[++nwhy] = line
	}
}
END {
	for (k in cnt) {
		iops[k] = sprintf("%.0f", med(v_iops, k, cnt[k]))
		bw[k] = sprintf("%.1f", med(v_bw, k, cnt[k]))
		mean[k] = sprintf("%.1f", med(v_mean, k, cnt[k]))
		p99[k] = sprintf("%.1f", med(v_p99, k, cnt[k]))
		cpu[k] = v_cpu[k, 1] == "" ? "" : sprintf("%.2f", med(v_cpu, k, cnt[k]))
	}
	# every leg failed: the job names of the probe
	if (!njobs && nwhy)
		njobs = split("randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd32 seqread-64k-qd16 seqwrite-64k-qd16 seqread-16k-qd16 seqwrite-16k-qd16", order, " ")
	printf "%-18s %-9s %9s %9s %11s %11s %11s %5s\n", "job", "who", "iops", "MB/s", "mean_us", "p99_us", "cpu_us/io", "ok"
	for (i = 1; i <= njobs; i++) {
		j = order[i]
		nw = split("floor floor-poll floor-batch iovm qemu iovm-scsi qemu-scsi iovm-lsi qemu-lsi iovm-fio qemu-fio", w, " ")
		for (k = 1; k <= nw; k++)
			if ((w[k], j) in iops)
				printf "%-18s %-9s %9s %9s %11s %11s %11s %5s\n", j, w[k], iops[w[k], j], bw[w[k], j], mean[w[k], j], p99[w[k], j], v(cpu[w[k], j]), ok(w[k])
			else if (nfail[w[k]] && runs(w[k], j))
				printf "%-18s %-9s %9s %9s %11s %11s %11s %5s\n", j, w[k], "FAILED", "-", "-", "-", "-", ok(w[k])
	}
	printf "\n%-18s %12s %12s %14s %14s %12s %12s\n", "job", "iops iovm/qemu", "iops iovm/floor", "cpu/io iovm/qemu", "p99 iovm/qemu", "iovm/fl-batch", "p99 iovm/fl"
	for (i = 1; i <= njobs; i++) {
		j = order[i]
		if (j ~ /-1m-/)
			continue
		printf "%-18s %12s %12s %14s %14s %12s %12s\n", j, r(iops["iovm", j], iops["qemu", j]), r(iops["iovm", j], iops["floor", j]), r(cpu["iovm", j], cpu["qemu", j]), r(p99["iovm", j], p99["qemu", j]), r(iops["iovm", j], iops["floor-batch", j]), r(p99["iovm", j], p99["floor", j])
	}
	# 64k sequential against the best bandwidth of the file (1 MiB, QD8): the
	# VMMs merge adjacent requests, which the 64k jobs of the floor do not
	if (("floor", "seqread-1m-qd8") in bw) {
		printf "\n%-18s %9s %9s %9s %9s %9s %9s\n", "64k seq / floor 1m", "floor MB/s", "iovm", "qemu", "iovm-scsi", "qemu-scsi", "iovm-lsi"
		split("read write", rw, " ")
		for (x = 1; x <= 2; x++) {
			fl = bw["floor", "seq" rw[x] "-1m-qd8"]
			j = "seq" rw[x] "-64k-qd16"
			printf "%-18s %9s %9s %9s %9s %9s %9s\n", j, fl, r(bw["iovm", j], fl), r(bw["qemu", j], fl), r(bw["iovm-scsi", j], fl), r(bw["qemu-scsi", j], fl), r(bw["iovm-lsi", j], fl)
		}
	}
	if (("iovm-scsi", "seqread-64k-qd16") in iops || ("qemu-scsi", "seqread-64k-qd16") in iops) {
		printf "\n%-18s %17s %17s %15s %15s\n", "job", "scsi iops iovm/qemu", "scsi cpu/io i/q", "iovm scsi/blk", "qemu scsi/blk"
		for (i = 1; i <= njobs; i++) {
			j = order[i]
			printf "%-18s %17s %17s %15s %15s\n", j, r(iops["iovm-scsi", j], iops["qemu-scsi", j]), r(cpu["iovm-scsi", j], cpu["qemu-scsi", j]), r(iops["iovm-scsi", j], iops["iovm", j]), r(iops["qemu-scsi", j], iops["qemu", j])
		}
		printf "virtio-scsi write/read: iovm 64k %s 16k %s, qemu 64k %s 16k %s\n", r(iops["iovm-scsi", "seqwrite-64k-qd16"], iops["iovm-scsi", "seqread-64k-qd16"]), r(iops["iovm-scsi", "seqwrite-16k-qd16"], iops["iovm-scsi", "seqread-16k-qd16"]), r(iops["qemu-scsi", "seqwrite-64k-qd16"], iops["qemu-scsi", "seqread-64k-qd16"]), r(iops["qemu-scsi", "seqwrite-16k-qd16"], iops["qemu-scsi", "seqread-16k-qd16"])
	}
	if (("iovm-fio", "seqread-64k-qd16") in iops || ("qemu-fio", "seqread-64k-qd16") in iops) {
		printf "\n%-18s %18s %18s\n", "job", "fio iops iovm/qemu", "fio p99 iovm/qemu"
		for (i = 1; i <= njobs; i++) {
			j = order[i]
			printf "%-18s %18s %18s\n", j, r(iops["iovm-fio", j], iops["qemu-fio", j]), r(p99["iovm-fio", j], p99["qemu-fio", j])
		}
	}
	if (("iovm-lsi", "seqread-64k-qd16") in iops || ("qemu-lsi", "seqread-64k-qd16") in iops) {
		printf "\n%-18s %16s %18s %16s\n", "job", "LSI iops iovm/qemu", "LSI cpu/io iovm/qemu", "iovm LSI/virtio"
		for (i = 1; i <= njobs; i++) {
			j = order[i]
			printf "%-18s %16s %18s %16s\n", j, r(iops["iovm-lsi", j], iops["qemu-lsi", j]), r(cpu["iovm-lsi", j], cpu["qemu-lsi", j]), r(iops["iovm-lsi", j], iops["iovm", j])
		}
		printf "LSI write/read: iovm 64k %s 16k %s, qemu 64k %s 16k %s\n", r(iops["iovm-lsi", "seqwrite-64k-qd16"], iops["iovm-lsi", "seqread-64k-qd16"]), r(iops["iovm-lsi", "seqwrite-16k-qd16"], iops["iovm-lsi", "seqread-16k-qd16"]), r(iops["qemu-lsi", "seqwrite-64k-qd16"], iops["qemu-lsi", "seqread-64k-qd16"]), r(iops["qemu-lsi", "seqwrite-16k-qd16"], iops["qemu-lsi", "seqread-16k-qd16"])
	}
	if (nwhy) {
		printf "\nFAILED legs (the tables above use only the rounds that passed):\n"
		for (i = 1; i <= nwhy; i++) {
			split(why[i], f, " ")
			printf "  %-9s round %s: %s\n", f[1], f[2], substr(why[i], length(f[1]) + length(f[2]) + 3)
		}
	}
}' "$tmp/results"
exit $failed
