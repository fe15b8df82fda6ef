#!/bin/sh
# virtio_scsi in User-Mode Linux over virtio_uml (a vhost-user front-end)
# against `iovm vhost-user-scsi` on a file, UML's memory a tmpfs file
# (suite 'uml'): sg_inq and sg_readcap on the disk's sg node, fio (libaio,
# O_DIRECT) verify=crc32c of random writes at 4k and 64k, QD1 and QD16, on
# its sd node; iovm
# must have refused nothing, still be up after UML has gone, and exit 0 on
# SIGTERM.
# usage: uml-vhost-user-scsi.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
iovm=$(realpath "${1:?usage: uml-vhost-user-scsi.sh IOVM}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/backend.sh"
backend_setup uml-vhu-scsi
command -v sg_inq >/dev/null || uml_skip "sg3-utils missing"

truncate -s 64M "$tmp/disk.img"
backend_start "$tmp" vhost-user-scsi --disk "path=$tmp/disk.img,target=0"

cat >"$tmp/script.sh" <<'EOS'
set -e
modprobe -d "$UML_MODULES" virtio_scsi
dev=/sys/bus/scsi/devices/0:0:0:0
n=0
while ! ls $dev/block/* >/dev/null 2>&1 || ! ls $dev/scsi_generic/* >/dev/null 2>&1; do
	n=$((n + 1))
	[ $n -le 600 ] || { echo "no SCSI disk 0:0:0:0"; ls /sys/bus/scsi/devices; exit 10; }
	sleep 0.1
done
sd=$(ls $dev/block) sg=$(ls $dev/scsi_generic)
n=0
while [ ! -b /dev/$sd ] || [ ! -c /dev/$sg ]; do
	n=$((n + 1))
	[ $n -le 600 ] || { echo "no /dev/$sd or /dev/$sg"; exit 10; }
	sleep 0.1
done
echo "disk: /dev/$sd, /dev/$sg"
sg_inq /dev/$sg >inq.out || { cat inq.out; echo "sg_inq failed"; exit 11; }
grep -q "Vendor identification: IOVM" inq.out || { cat inq.out; echo "sg_inq: vendor"; exit 11; }
grep -q "Peripheral device type: disk" inq.out || { cat inq.out; echo "sg_inq: type"; exit 11; }
echo "sg_inq: $(grep -E 'Vendor|Product' inq.out | tr -s ' ' | tr '\n' ' ')"
sg_readcap /dev/$sg >cap.out || { cat cap.out; echo "sg_readcap failed"; exit 11; }
grep -q "Number of logical blocks=131072" cap.out || { cat cap.out; echo "sg_readcap: capacity"; exit 11; }
grep -q "Logical block length=512 bytes" cap.out || { cat cap.out; echo "sg_readcap: block"; exit 11; }
echo "sg_readcap: 131072 blocks of 512 bytes"
. "$UML_TESTS/uml-wait.sh"
uml_fio_matrix /dev/$sd
EOS
backend_uml "$tmp" 8
# terse v3: field 6 the KiB read, 47 the KiB written.
for j in 4k-qd1 4k-qd16 64k-qd1 64k-qd16; do
	set -- $(awk -F';' '{ print $6, $47 }' "$tmp/fio-$j.out")
	[ "${1:-}" = 16384 ] && [ "${2:-}" = 16384 ] ||
		uml_fail "fio $j: ${2:-?} KiB written, ${1:-?} KiB read back, 16384 expected"
	echo "ok: $j randwrite+verify: $2 KiB written, $1 KiB read back and verified"
done
backend_check "$tmp"
echo "ok: iovm refused nothing, outlived UML, exited 0 on SIGTERM; UML ran $UML_SECONDS s"
