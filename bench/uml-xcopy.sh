#!/bin/bash
# EXTENDED COPY against dd: 1 GiB copied within one image by Linux's
# virtio_scsi in User-Mode Linux on `iovm vhost-user-scsi`, two ways:
#   xcopy  sg_xcopy on the disk's sg node: EXTENDED COPY commands of
#          BPT blocks each (one segment), done by the host with
#          copy_file_range; no data crosses the guest or iovm's memory
#   dd     dd of the same range on the sd node, 1 MiB blocks, O_DIRECT
#          both ways: every byte read into the guest and written back
#   idle   the same boot with nothing copied: the baseline subtracted
# Each leg is its own iovm and its own UML boot. Reported per leg: wall
# time of the copy inside the guest (date around the command) and host CPU
# time (user + system, /proc/PID/stat of the iovm process, all its threads
# and io_uring workers) over the whole boot minus the idle boot's. The
# destination range is checked against the source on the host (cmp).
# Usage: bench/uml-xcopy.sh [--rounds N] [--bpt BLOCKS] [--cache writeback|none]
# Needs build/iovm, sg3-utils and the UML kernel (IOVM_UML_DIR or
# build/uml). The image (2 GiB + 1 MiB, the first GiB random) is
# BUILD/bench-xcopy.img, kept between runs. Not part of the test suite.
set -eu
. "$(dirname "$0")/lib.sh"
rounds=1
bpt=65535
cache=writeback
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--bpt) bpt=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//p}' "$0"; exit 0 ;;
	*) echo "$me: unknown option $1" >&2; exit 2 ;;
	esac
done
need_built "$iovm"
: "${IOVM_UML_DIR:=$build/uml}"
export IOVM_UML_DIR
. "$root/tests/uml/lib.sh"
uml_require
. "$root/tests/uml/backend.sh"
command -v sg_xcopy >/dev/null || { echo "$me: sg3-utils missing" >&2; exit 1; }

file=$build/bench-xcopy.img
gib=$((1 << 30))
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != $((2 * gib + (1 << 20))) ]; then
	rm -f "$file"
	head -c $gib /dev/urandom >"$file"
	truncate -s $((2 * gib + (1 << 20))) "$file"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-xcopy.XXXXXX")
trap 'backend_kill; rm -rf "$work"' EXIT
blocks=$((gib / 512))

# leg NAME: one iovm, one UML boot; prints "wall_s cpu_s"
leg() {
	local name=$1 dir=$work/$1 t pid
	mkdir -p "$dir"
	cat >"$dir/script.sh" <<EOS
set -e
modprobe -d "\$UML_MODULES" virtio_scsi
dev=/sys/bus/scsi/devices/0:0:0:0
n=0
while ! ls \$dev/block/* >/dev/null 2>&1 || ! ls \$dev/scsi_generic/* >/dev/null 2>&1; do
	n=\$((n + 1)); [ \$n -le 600 ] || exit 10; sleep 0.1
done
sd=/dev/\$(ls \$dev/block) sg=/dev/\$(ls \$dev/scsi_generic)
while [ ! -b \$sd ] || [ ! -c \$sg ]; do sleep 0.1; done
t0=\$(date +%s.%N)
case $name in
xcopy) sg_xcopy if=\$sg of=\$sg bs=512 skip=0 seek=$blocks count=$blocks bpt=$bpt >x.out 2>&1 ||
	{ cat x.out; exit 11; } ;;
dd) dd if=\$sd of=\$sd bs=1M count=1024 skip=0 seek=1024 iflag=direct oflag=direct 2>x.out ||
	{ cat x.out; exit 11; } ;;
esac
t1=\$(date +%s.%N)
echo "wall \$(echo "\$t1 - \$t0" | bc)"
EOS
	# a fresh destination: zeroes, no blocks (the copy writes them)
	fallocate -p -o $gib -l $gib "$file"
	"$iovm" vhost-user-scsi --socket "$dir/vhu.sock" \
		--disk "path=$file,target=0,cache=$cache" >"$dir/iovm.log" 2>&1 &
	backend_pid=$!
	backend_wait_sock "$dir/vhu.sock" "$backend_pid" || { cat "$dir/iovm.log"; exit 1; }
	UML_MEM=512M uml_run "$dir" "$dir/script.sh" "virtio_uml.device=$dir/vhu.sock:8" \
		>"$dir/uml.out" 2>&1 || { cat "$dir/output.log" "$dir/iovm.log"; exit 1; }
	pid=$backend_pid
	t=$(awk -v hz="$hz" '{ print ($14 + $15) / hz }' "/proc/$pid/stat")
	kill -TERM "$pid"; wait "$pid" || true
	backend_pid=
	if [ "$name" != idle ]; then
		cmp -n $gib "$file" "$file" -i 0:$gib ||
			{ echo "$me: $name: the copy differs from its source" >&2; exit 1; }
	fi
	echo "$(awk '/^wall/ { print $2 }' "$dir/output.log") $t"
}

echo "# $(date -u +%FT%TZ) $(uname -n): $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# 1 GiB within one image, cache=$cache, sg_xcopy bpt=$bpt ($((bpt * 512 / 1024)) KiB per EXTENDED COPY), dd bs=1M O_DIRECT"
printf '%-6s %5s %10s %14s\n' leg round wall_s iovm_cpu_s
for r in $(seq "$rounds"); do
	set -- $(leg idle); idle_cpu=$2
	for l in xcopy dd; do
		set -- $(leg $l)
		printf '%-6s %5s %10.2f %14.2f\n' $l "$r" "$1" "$(echo "$2 - $idle_cpu" | bc)"
	done
	printf '%-6s %5s %10s %14.2f\n' idle "$r" - "$idle_cpu"
done
