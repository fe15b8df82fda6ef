#!/bin/sh
# EXTENDED COPY through Linux's virtio_scsi in User-Mode Linux against
# `iovm vhost-user-scsi` with two disks (suite 'uml'): sg_xcopy copies
# 8 MiB within disk A (to a range of its own, and overlapping by a few
# blocks), and 8 MiB from A to B, several EXTENDED COPY commands each;
# sg_copy_results reads the COPY STATUS of a held list and the operating
# parameters. After power-off the host compares the image files' ranges
# with cmp. iovm must have refused nothing and exit 0 on SIGTERM.
# usage: uml-scsi-xcopy.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
iovm=$(realpath "${1:?usage: uml-scsi-xcopy.sh IOVM}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/backend.sh"
backend_setup uml-scsi-xcopy
command -v sg_xcopy >/dev/null || uml_skip "sg3-utils (sg_xcopy) missing"

# A: 16 MiB of random data, then zeroes to 64 MiB; B: zeroes. The
# host keeps a copy of A to compare with.
head -c 16777216 /dev/urandom >"$tmp/a.img"
truncate -s 64M "$tmp/a.img"
truncate -s 64M "$tmp/b.img"
cp "$tmp/a.img" "$tmp/a.orig"
backend_start "$tmp" vhost-user-scsi \
	--disk "path=$tmp/a.img,target=0,lun=0" --disk "path=$tmp/b.img,target=0,lun=1"

cat >"$tmp/script.sh" <<'EOS'
set -e
modprobe -d "$UML_MODULES" virtio_scsi
sgof() {
	local dev=/sys/bus/scsi/devices/$1 n=0
	while ! ls $dev/scsi_generic/* >/dev/null 2>&1; do
		n=$((n + 1))
		[ $n -le 600 ] || { echo "no SCSI disk $1" >&2; exit 10; }
		sleep 0.1
	done
	sg=$(ls $dev/scsi_generic)
	n=0
	while [ ! -c /dev/$sg ]; do
		n=$((n + 1))
		[ $n -le 600 ] || { echo "no /dev/$sg" >&2; exit 10; }
		sleep 0.1
	done
	echo /dev/$sg
}
a=$(sgof 0:0:0:0) b=$(sgof 0:0:0:1)
echo "disks: A $a, B $b"
sg_inq $a | grep -q "3PC=1" || { sg_inq $a; echo "no 3PC bit"; exit 11; }
sg_copy_results --params $a >params.out || { cat params.out; exit 12; }
grep -i "maximum.*segment" params.out | head -2
# within A: blocks 0..16383 (8 MiB) to 65536.., 4 MiB per command
sg_xcopy if=$a of=$a bs=512 skip=0 seek=65536 count=16384 bpt=8192 \
	list_id=5 id_usage=hold >x1.out 2>&1 || { cat x1.out; echo "sg_xcopy within A failed"; exit 13; }
sg_copy_results --status --list_id=5 $a >st.out 2>&1 || { cat st.out; echo "copy status"; exit 14; }
cat st.out
grep -qi "completed" st.out || { echo "copy status: not completed"; exit 14; }
# A to B: 8 MiB from block 8192 to B's block 1024, the command sent to B
sg_xcopy if=$a of=$b bs=512 skip=8192 seek=1024 count=16384 bpt=4096 \
	>x2.out 2>&1 || { cat x2.out; echo "sg_xcopy A to B failed"; exit 15; }
# overlapping within A: 1 MiB from block 100000 up by 8 blocks
sg_xcopy if=$a of=$a bs=512 skip=65536 seek=65544 count=2048 bpt=2048 \
	>x3.out 2>&1 || { cat x3.out; echo "sg_xcopy overlapping failed"; exit 16; }
echo "sg_xcopy: 3 copies done"
EOS
backend_uml "$tmp" 8
backend_check "$tmp"
# within A: a.orig[0, 8M) at 32M, except the overlapping copy's range:
# a.orig[0, 1M) ends at 32M + 4K; a[32M, 32M + 4K) kept a.orig[0, 4K)
cmp -n 4096 "$tmp/a.orig" "$tmp/a.img" -i 0:33554432 ||
	uml_fail "A: the first 4 KiB of the copy within A differ"
cmp -n 1048576 "$tmp/a.orig" "$tmp/a.img" -i 0:33558528 ||
	uml_fail "A: the overlapping copy (memmove) differs"
cmp -n $((8388608 - 1052672)) "$tmp/a.orig" "$tmp/a.img" -i 1052672:34607104 ||
	uml_fail "A: the rest of the copy within A differs"
cmp -n 33554432 "$tmp/a.orig" "$tmp/a.img" ||
	uml_fail "A: the source range changed"
cmp -n 8388608 "$tmp/a.orig" "$tmp/b.img" -i 4194304:524288 ||
	uml_fail "B: the copy from A differs"
cmp -n 524288 /dev/zero "$tmp/b.img" || uml_fail "B: blocks before the copy changed"
echo "ok: within A, overlapping within A and A to B: the host's images match (cmp); UML ran $UML_SECONDS s"
