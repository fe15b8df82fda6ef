#!/bin/bash
# LSI 53C895A benchmark: the probe's sym53c8xx-style driver (bench=lsi:
# bench=blk's jobs plus 16k sequential write/read, tagged commands in
# flight, every read verified) on iovm's LSI and on QEMU's lsi53c895a +
# scsi-hd (cache=none, aio=io_uring), same file, same jobs, same run, beside
# the file's own floor (fio, io_uring, O_DIRECT, same jobs; skipped without
# fio). Prints per job IOPS, bandwidth, mean/p99 latency, host CPU time of
# the VMM per I/O (without the time its vCPU runs guest code), and the
# ratios iovm/QEMU and write/read. --rounds N repeats all alternately and
# reports medians.
#
# Usage: bench/lsi.sh [--secs N] [--region SIZE] [--rounds N]
#                     [--file PATH] [--only floor,iovm,qemu]
# Needs build/iovm and build/guest/probe/probe.elf (BUILD=dir for another
# build) and qemu-system-x86_64. Not part of the test suite.
set -eu
. "$(dirname "$0")/lib.sh"

secs=3
region=$((64 << 20))
rounds=1
file=$build/bench-lsi.img
only=floor,iovm,qemu

usage() { sed -n '2,14s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
	case $1 in
	--secs) secs=$2; shift 2 ;;
	--region) region=$(tobytes "$2"); shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--file) file=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "lsi.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
	esac
done
for n in "$secs" "$rounds"; do
	case $n in '' | *[!0-9]*) echo "lsi.sh: --secs and --rounds take numbers" >&2; exit 2 ;; esac
done
[ $((region % 65536)) = 0 ] && [ "$region" -gt 0 ] ||
	{ echo "lsi.sh: --region must be a multiple of 64k" >&2; exit 2; }

need_built "$iovm" "$probe"
make_disk

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mem=$(( (region >> 20) / 64 + 128 ))M

# floor: the probe's jobs with fio on the file (io_uring, O_DIRECT)
floor() {
	command -v fio >/dev/null || { echo "lsi.sh: fio not installed, no floor" >&2; return 0; }
	for j in randread-4k-qd1:randread:4k:1 randread-4k-qd32:randread:4k:32 \
		randwrite-4k-qd32:randwrite:4k:32 seqread-64k-qd16:read:64k:16 \
		seqwrite-64k-qd16:write:64k:16 seqread-16k-qd16:read:16k:16 \
		seqwrite-16k-qd16:write:16k:16; do
		IFS=: read -r name rw bs qd <<<"$j"
		fio --name=floor --filename="$file" --direct=1 --ioengine=io_uring \
			--rw="$rw" --bs="$bs" --iodepth="$qd" --offset="$offset" \
			--size="$region" --time_based --runtime="$secs" \
			--output-format=terse --terse-version=3 2>/dev/null |
			awk -F';' -v n="$name" '{
				w = ($7 == 0) ? 1 : 0	# no read bytes: a write job
				iops = w ? $49 : $8; bw = w ? $48 : $7; lat = w ? $81 : $40
				printf "floor job=%s iops=%d bw_mbs=%.1f lat_mean_us=%d lat_p99_us=0 ios=0 cpu_us_per_io=0\n", n, iops, bw * 1024 / 1e6, lat
			}' >>"$tmp/results"
	done
}

append="bench=lsi secs=$secs region=$region region_off=$offset"
echo "lsi.sh: file=$file region=$((region >> 20))M secs=$secs rounds=$rounds host=$(nproc) CPUs, $(uname -r)"
failed=0
for round in $(seq 1 "$rounds"); do
case ,$only, in *,floor,*)
	echo "== floor (fio, io_uring, O_DIRECT; round $round)"
	floor
	;;
esac
case ,$only, in *,iovm,*)
	echo "== iovm LSI (round $round)"
	run_vmm iovm "$iovm" run --kernel "$probe" --memory "$mem" \
		--disk "path=$file,if=lsi,cache=none" --append "$append" || failed=1
	;;
esac
case ,$only, in *,qemu,*)
	echo "== QEMU lsi53c895a (round $round)"
	if [ -z "$qemu" ]; then
		echo "lsi.sh: qemu-system-x86_64 not installed, skipped" >&2
	else
		run_vmm qemu "$qemu" -enable-kvm -bios /usr/share/qemu/qboot.rom \
			-nographic -no-reboot -m "$mem" -kernel "$probe" -append "$append" \
			-device isa-debug-exit,iobase=0xf4,iosize=1 \
			-device lsi53c895a,id=scsi0 \
			-drive "file=$file,if=none,id=d0,format=raw,cache=none,aio=io_uring" \
			-device scsi-hd,drive=d0,bus=scsi0.0,scsi-id=0 || failed=1
	fi
	;;
esac
done

echo
awk "$awk_lib$awk_jobs"'
END {
	for (k in cnt) {
		iops[k] = sprintf("%.0f", med(v_iops, k, cnt[k]))
		bw[k] = sprintf("%.1f", med(v_bw, k, cnt[k]))
		mean[k] = sprintf("%.0f", med(v_mean, k, cnt[k]))
		p99[k] = sprintf("%.0f", med(v_p99, k, cnt[k]))
		cpu[k] = sprintf("%.2f", med(v_cpu, k, cnt[k]))
	}
	printf "%-14s %-5s %8s %8s %9s %9s %10s\n", "job", "who", "iops", "MB/s", "mean_us", "p99_us", "cpu_us/io"
	for (i = 1; i <= njobs; i++) {
		j = order[i]
		split("floor iovm qemu", w, " ")
		for (k = 1; k <= 3; k++)
			if ((w[k], j) in iops)
				printf "%-14s %-5s %8s %8s %9s %9s %10s\n", j, w[k], iops[w[k], j], bw[w[k], j], mean[w[k], j], p99[w[k], j], cpu[w[k], j]
	}
	printf "\n%-14s %15s %17s\n", "job", "iops iovm/qemu", "cpu/io iovm/qemu"
	for (i = 1; i <= njobs; i++) {
		j = order[i]
		printf "%-14s %15s %17s\n", j, r(iops["iovm", j], iops["qemu", j]), r(cpu["iovm", j], cpu["qemu", j])
	}
	printf "\n%-5s %22s %22s\n", "who", "write/read 64k", "write/read 16k"
	split("floor iovm qemu", w, " ")
	for (k = 1; k <= 3; k++)
		printf "%-5s %22s %22s\n", w[k], r(iops[w[k], "seqwrite-64k-qd16"], iops[w[k], "seqread-64k-qd16"]), r(iops[w[k], "seqwrite-16k-qd16"], iops[w[k], "seqread-16k-qd16"])
}' "$tmp/results"
exit $failed
