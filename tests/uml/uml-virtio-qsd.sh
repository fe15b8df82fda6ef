#!/bin/sh
# virtio_blk in User-Mode Linux over virtio_uml (a vhost-user front-end)
# against qemu-storage-daemon's vhost-user-blk export on a file, UML memory
# on tmpfs (suite 'uml'): fio verify=crc32c, 4k random writes then reads,
# QD1 and QD16 (libaio). The reference for iovm's own vhost-user-blk: it
# needs neither iovm nor the virtio_uml patch (qsd offers back-end requests).
# usage: uml-virtio-qsd.sh   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
command -v qemu-storage-daemon >/dev/null ||
	uml_skip "qemu-storage-daemon missing (package qemu-system-common)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uml-qsd.XXXXXX")
qsd_pid=
cleanup() {
	[ -n "$qsd_pid" ] && kill "$qsd_pid" 2>/dev/null && wait "$qsd_pid"
	rm -rf "$tmp"
}
trap cleanup EXIT

truncate -s 64M "$tmp/disk.img"
qemu-storage-daemon \
	--blockdev "driver=file,node-name=file0,filename=$tmp/disk.img" \
	--blockdev driver=raw,node-name=disk0,file=file0 \
	--export "type=vhost-user-blk,id=exp0,node-name=disk0,writable=on,addr.type=unix,addr.path=$tmp/blk.sock" \
	>"$tmp/qsd.log" 2>&1 &
qsd_pid=$!
# UML connects once, at boot: the socket must be listening first.
for _ in $(seq 100); do
	[ -S "$tmp/blk.sock" ] && break
	kill -0 "$qsd_pid" 2>/dev/null || break
	sleep 0.1
done
[ -S "$tmp/blk.sock" ] ||
	{ cat "$tmp/qsd.log"; uml_fail "qemu-storage-daemon made no socket"; }

cat >"$tmp/script.sh" <<'EOS'
set -e
. "$UML_TESTS/uml-wait.sh"
modprobe -d "$UML_MODULES" virtio_blk
uml_wait_disk vd "modprobe virtio_blk"
[ "$(cat /sys/block/vda/size)" = 131072 ] ||
	{ echo "vda has $(cat /sys/block/vda/size) sectors"; exit 11; }
for qd in 1 16; do
	fio --name=verify-qd$qd --filename=/dev/vda --direct=1 \
		--ioengine=libaio --iodepth=$qd --rw=randwrite --bs=4k \
		--size=32M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=terse --terse-version=3 >fio-qd$qd.out ||
		{ cat fio-qd$qd.out; echo "fio QD$qd failed"; exit 12; }
	echo "fio QD$qd: verified"
done
EOS
uml_run "$tmp" "$tmp/script.sh" "virtio_uml.device=$tmp/blk.sock:2"
st=$?
cat "$tmp/output.log"
if [ "$st" != 0 ]; then
	tail -n 40 "$tmp/console.log"
	echo "--- qemu-storage-daemon:"
	cat "$tmp/qsd.log"
	uml_fail "the UML script exited $st"
fi
for qd in 1 16; do
	# terse v3: field 6 is the read KiB, 47 the write KiB.
	awk -F';' -v qd=$qd '{ printf "ok: QD%d 4k randwrite+verify: %d KiB written, %d KiB read back\n", qd, $47, $6 }' \
		"$tmp/fio-qd$qd.out"
done
echo "ok: UML ran $UML_SECONDS s"
