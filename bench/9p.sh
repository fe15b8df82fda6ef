#!/bin/bash
# 9P benchmark: the probe's 9P2000.L client (native at CPL 3, bench=9p) on
# iovm's virtio-9p (security=none) and on QEMU's (-fsdev
# local,security_model=none -device virtio-9p-pci: the same model, so that
# neither pays for mapped ownership) sharing the same folder in the same run, beside the
# host's own figures (bench/p9-floor: pwrite/pread of the same size in the
# same chunks, and the metadata job with system calls). For each msize:
# sequential write then read of a SIZE file with QD requests in flight;
# then a metadata job (walk, lcreate, getattr, clunk, unlinkat per file).
#
# Usage: bench/9p.sh [--size SIZE] [--msizes LIST] [--qd N] [--files N]
#                    [--dir DIR] [--only floor,iovm,qemu] [--rounds N]
#                    [--guest DIR] [--dd-accel kvm|tcg]
# --only iovm-dd,qemu-dd: the default Linux guest (build/guest/bzImage +
# initramfs.cpio.gz, or --guest DIR) mounts the share over virtio
# (trans=virtio, version=9p2000.L, msize=512000) and runs dd bs=1M: a SIZE
# file written (conv=fsync), caches dropped, read back; on iovm and on QEMU
# (same -fsdev as above). Needs hardware KVM to mean anything (on PVM hosts
# the iovm leg is skipped: Linux cannot boot there); --dd-accel tcg runs
# QEMU's leg under TCG, which checks the plumbing only.
# --rounds N repeats everything N times, interleaved, and reports medians
# (the host may be shared and noisy); even rounds run QEMU before iovm.
# The first large write after other work runs slow on some hosts (page
# cache and memory warming up), so each msize starts with an unrecorded
# pass of the host job.
# Defaults: --size 1G --msizes 8192,131072,512000,4194304 --qd 4
# --files 10000 --dir build/bench-9p. Needs a build (build/iovm,
# build/guest/probe/probe.elf, build/bench/p9-floor; BUILD=dir for another)
# and qemu-system-x86_64. Not part of the test suite.
set -eu
. "$(dirname "$0")/lib.sh"

size=1G
msizes=8192,131072,512000,4194304
qd=4
files=10000
dir=$build/bench-9p
only=floor,iovm,qemu
rounds=1
guest=""
dd_accel=kvm
dd_msize=512000

usage() { sed -n '2,30s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--msizes) msizes=$2; shift 2 ;;
	--qd) qd=$2; shift 2 ;;
	--files) files=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--guest) guest=$2; shift 2 ;;
	--dd-accel) dd_accel=$2; shift 2 ;;
	-h | --help) usage 0 ;;
	*) echo "9p.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
	esac
done
bytes=$(tobytes "$size")
case $dd_accel in kvm | tcg) ;; *) echo "9p.sh: --dd-accel is kvm or tcg" >&2; exit 2 ;; esac

floor=$build/bench/p9-floor
need_built "$iovm" "$probe" "$floor"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
maxm=0
for m in ${msizes//,/ }; do [ "$m" -gt "$maxm" ] && maxm=$m; done
mem=$(( (maxm * qd >> 20) + 256 ))M

# run NAME MSIZE CMD...: one VMM run of the probe benchmark
run() {
	name=$1 m=$2
	shift 2
	if ! timeout 1800 "$@" >"$tmp/log" 2>&1 || ! grep -q '^probe: PASS' "$tmp/log"; then
		if ! grep -q '^probe: PASS' "$tmp/log"; then
			echo "9p.sh: $name msize=$m failed:" >&2
			tail -n 5 "$tmp/log" >&2
			return 0
		fi
	fi
	sed -i 's/\r$//' "$tmp/log"	# a Linux console ends lines with CR LF
	got=$(sed -n 's/^probe: 9p version .* msize=\([0-9]*\)$/\1/p' "$tmp/log")
	sed -n "s/^job=/$name asked=$m got=$got job=/p" "$tmp/log" | tee -a "$tmp/results"
}

# The guest script prints the probe's line format (msize line, job lines,
# PASS), so run() and the table serve it too.
dd_script() {
	cat <<GUEST
echo	# the console's reset sequence ends this line, not the next
mkdir -p /mnt/share
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$dd_msize bench /mnt/share ||
	{ echo "dd: mount failed"; exit 1; }
got=\$(sed -n 's/.* \/mnt\/share 9p .*msize=\([0-9]*\).*/\1/p' /proc/mounts)
echo "probe: 9p version 9P2000.L msize=\$got"
now() { cut -d' ' -f1 /proc/uptime; }
mbs() { awk -v b=$bytes -v t0="\$1" -v t1="\$2" 'BEGIN { t = t1 - t0; if (t < 0.01) t = 0.01; printf "%.1f", b / t / 1e6 }'; }
rm -f /mnt/share/dd.dat
t0=\$(now)
dd if=/dev/zero of=/mnt/share/dd.dat bs=1M count=$((bytes >> 20)) conv=fsync 2>/dev/null ||
	{ echo "dd: write failed"; exit 1; }
t1=\$(now)
echo "job=seqwrite bw_mbs=\$(mbs \$t0 \$t1)"
sync
echo 3 >/proc/sys/vm/drop_caches
t0=\$(now)
dd if=/mnt/share/dd.dat of=/dev/null bs=1M 2>/dev/null || { echo "dd: read failed"; exit 1; }
t1=\$(now)
echo "job=seqread bw_mbs=\$(mbs \$t0 \$t1)"
rm -f /mnt/share/dd.dat
umount /mnt/share
echo "probe: PASS"
GUEST
}

# run_dd ROUND: the Linux guest's dd on each VMM that --only names
run_dd() {
	guest=${guest:-$build/guest}
	for f in "$guest/bzImage" "$guest/initramfs.cpio.gz"; do
		[ -r "$f" ] || { echo "9p.sh: $f missing: tools/mkguest.sh $guest" >&2; exit 1; }
	done
	dd_append="console=ttyS0 quiet iovm.net=0 iovm.cmd=$(dd_script | base64 -w0)"
	case ,$only, in *,iovm-dd,*)
		if [ -d /sys/module/kvm_pvm ]; then
			echo "9p.sh: iovm-dd skipped: /dev/kvm is PVM here, where Linux cannot boot" >&2
		else
			run iovm-dd "$dd_msize" "$iovm" run --kernel "$guest/bzImage" \
				--initrd "$guest/initramfs.cpio.gz" --memory 1G --cpus 2 \
				--share "path=$dir,tag=bench,msize=$dd_msize,security=none" --append "$dd_append"
		fi
		;;
	esac
	case ,$only, in *,qemu-dd,*)
		[ -n "$qemu" ] && run qemu-dd "$dd_msize" "$qemu" -accel "$dd_accel" \
			-nographic -no-reboot -m 1G -smp 2 -kernel "$guest/bzImage" \
			-initrd "$guest/initramfs.cpio.gz" -append "$dd_append" \
			-device isa-debug-exit,iobase=0xf4,iosize=1 \
			-fsdev "local,id=f0,path=$dir,security_model=none" \
			-device virtio-9p-pci,fsdev=f0,mount_tag=bench,disable-legacy=on
		;;
	esac
	return 0
}

echo "9p.sh: size=$bytes qd=$qd files=$files rounds=$rounds dir=$dir host=$(nproc) CPUs, $(uname -r), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
[ "$rounds" = 1 ] || echo "== round $round"
for m in ${msizes//,/ }; do
	case ,$only, in *,floor,* | *,iovm,* | *,qemu,*) ;; *) continue ;; esac
	append="bench=9p msize=$m size=$bytes qd=$qd files=$files"
	"$floor" "$dir/floor.dat" "$bytes" $((m - 24)) "$dir" "$files" >/dev/null
	case ,$only, in *,floor,*)
		"$floor" "$dir/floor.dat" "$bytes" $((m - 24)) "$dir" "$files" |
			sed "s/^job=/host asked=$m got=$m job=/" | tee -a "$tmp/results"
		;;
	esac
	vmms="iovm qemu"
	[ $((round % 2)) = 0 ] && vmms="qemu iovm"
	for vmm in $vmms; do
		case ,$only, in *,$vmm,*) ;; *) continue ;; esac
		if [ "$vmm" = iovm ]; then
			run iovm "$m" "$iovm" run --kernel "$probe" --memory "$mem" \
				--share "path=$dir,tag=bench,msize=$m,security=none" --append "$append"
		elif [ -n "$qemu" ]; then
			run qemu "$m" "$qemu" -enable-kvm -bios /usr/share/qemu/qboot.rom \
				-nographic -no-reboot -m "$mem" -kernel "$probe" \
				-append "$append" -device isa-debug-exit,iobase=0xf4,iosize=1 \
				-fsdev "local,id=f0,path=$dir,security_model=none" \
				-device virtio-9p-pci,fsdev=f0,mount_tag=bench,disable-legacy=on
		fi
	done
done
case ,$only, in *,iovm-dd,* | *,qemu-dd,*) run_dd "$round" ;; esac
done

echo
awk "$awk_lib"'
{
	who = $1; m = get($0, "asked"); job = get($0, "job")
	v = job == "metadata" ? get($0, "ops_s") : get($0, "bw_mbs")
	k = who SUBSEP m SUBSEP job
	vals[k, ++cnt[k]] = v; got[who, m] = get($0, "got")
	if (who ~ /-dd$/) dd_m = m
	else if (!(m in seenm)) { seenm[m] = 1; ms[++nm] = m }
}
function d(x) { return x == "" ? "-" : x }
END {
	for (k in cnt) { split(k, p, SUBSEP); val[p[1], p[2], p[3]] = sprintf("%.0f", med(vals, k, cnt[k])) }
	printf "%-8s %-9s %9s %9s %9s %9s %11s %11s\n", "msize", "job", "iovm", "qemu", "host", "iovm/qemu", "iovm/host", "qemu_msize"
	for (i = 1; i <= nm; i++) {
		m = ms[i]
		split("seqwrite seqread metadata", jobs, " ")
		for (j = 1; j <= 3; j++) {
			jb = jobs[j]
			printf "%-8s %-9s %9s %9s %9s %9s %11s %11s\n", m, jb, d(val["iovm", m, jb]), d(val["qemu", m, jb]), d(val["host", m, jb]), r(val["iovm", m, jb], val["qemu", m, jb]), r(val["iovm", m, jb], val["host", m, jb]), d(got["qemu", m])
		}
	}
	if (("iovm-dd", dd_m, "seqwrite") in val || ("qemu-dd", dd_m, "seqwrite") in val) {
		printf "\nLinux guest, dd bs=1M over virtio-9p, msize %s (MB/s)\n", dd_m
		printf "%-9s %9s %9s %9s %11s\n", "job", "iovm", "qemu", "iovm/qemu", "qemu_msize"
		split("seqwrite seqread", jobs, " ")
		for (j = 1; j <= 2; j++) {
			jb = jobs[j]
			printf "%-9s %9s %9s %9s %11s\n", jb, d(val["iovm-dd", dd_m, jb]), d(val["qemu-dd", dd_m, jb]), r(val["iovm-dd", dd_m, jb], val["qemu-dd", dd_m, jb]), d(got["qemu-dd", dd_m])
		}
	}
	print "(medians; seqwrite/seqread in MB/s, metadata in 9P requests/s (host: syscalls/s); qemu_msize: what QEMU negotiated)"
}' "$tmp/results"
