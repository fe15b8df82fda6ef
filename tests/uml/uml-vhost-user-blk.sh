#!/bin/sh
# virtio_blk in User-Mode Linux over virtio_uml (a vhost-user front-end)
# against `iovm vhost-user-blk` on a file, UML's memory a tmpfs file
# (suite 'uml'): fio (libaio, O_DIRECT) verify=crc32c random writes then
# their read-back at 4k and 64k, QD1 and QD16; then UML reads the whole disk
# and the host file must hold the same bytes; iovm must have refused
# nothing, still be up after UML has gone, and exit 0 on SIGTERM.
# usage: uml-vhost-user-blk.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
iovm=$(realpath "${1:?usage: uml-vhost-user-blk.sh IOVM}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/backend.sh"
backend_setup uml-vhu-blk

# Random bytes everywhere, so that a write lost or misplaced shows.
head -c $((64 << 20)) /dev/urandom >"$tmp/disk.img"
backend_start "$tmp" vhost-user-blk --disk "path=$tmp/disk.img"

cat >"$tmp/script.sh" <<'EOS'
set -e
. "$UML_TESTS/uml-wait.sh"
modprobe -d "$UML_MODULES" virtio_blk
uml_wait_disk vd "modprobe virtio_blk"
[ "$(cat /sys/block/vda/size)" = 131072 ] ||
	{ echo "vda has $(cat /sys/block/vda/size) sectors"; exit 11; }
# job NAME BS QD OFFSET SIZE: random writes, then fio reads them all back
job() {
	fio --name=$1 --filename=/dev/vda --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=$2 --iodepth=$3 --offset=$4 --size=$5 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=terse --terse-version=3 >fio-$1.out 2>fio-$1.err ||
		{ cat fio-$1.out fio-$1.err; echo "fio $1 failed"; exit 12; }
	echo "fio $1: verified"
}
job 4k-qd1 4k 1 0 4M
job 4k-qd16 4k 16 8M 8M
job 64k-qd1 64k 1 16M 8M
job 64k-qd16 64k 16 24M 16M
dd if=/dev/vda bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1 >disk.sha
EOS
backend_uml "$tmp" 2
for j in 4k-qd1:4096 4k-qd16:8192 64k-qd1:8192 64k-qd16:16384; do
	name=${j%:*} kib=${j#*:}
	# terse v3: field 6 the KiB read, 47 the KiB written. fio's verify
	# pass is reads: all of it must have come back.
	set -- $(awk -F';' '{ print $6, $47 }' "$tmp/fio-$name.out")
	[ "${1:-}" = "$kib" ] && [ "${2:-}" = "$kib" ] ||
		uml_fail "fio $name: ${2:-?} KiB written, ${1:-?} KiB read back, $kib expected"
	echo "ok: $name randwrite+verify: $2 KiB written, $1 KiB read back and verified"
done
[ "$(cat "$tmp/disk.sha")" = "$(sha256sum <"$tmp/disk.img" | cut -d' ' -f1)" ] ||
	uml_fail "the host file differs from what UML read through iovm"
echo "ok: the host file holds what UML wrote (sha256 of all 64 MiB)"
backend_check "$tmp"
echo "ok: iovm refused nothing, outlived UML, exited 0 on SIGTERM; UML ran $UML_SECONDS s"
