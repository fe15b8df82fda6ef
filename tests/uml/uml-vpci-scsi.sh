#!/bin/sh
# Linux's virtio_pci with virtio_scsi and with 9pnet_virtio in User-Mode Linux
# driving iovm's own virtio-pci transport, virtio-scsi HBA and virtio-9p
# (two `iovm vhost-user-pci` functions, one UML; suite 'uml'): sg_inq and
# sg_readcap answer and fio verify=crc32c passes on the SCSI disk; the
# share mounts with trans=virtio, msize=512000, and a 64 MiB file keeps its
# sha256 both ways (UML writes, the host reads; the host writes, UML reads).
# usage: uml-vpci-scsi-9p.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"
command -v sg_inq >/dev/null || uml_skip "sg3-utils missing"

vpci_tmpdir s9 scsi p9
truncate -s 64M "$tmp/disk.img"
mkdir "$tmp/share"
head -c 64M /dev/urandom >"$tmp/share/from-host"
sha256sum <"$tmp/share/from-host" | cut -d' ' -f1 >"$tmp/from-host.sha"

cat >"$tmp/script.sh" <<'EOS'
set -e
modprobe -d "$UML_MODULES" virtio_pci
modprobe -d "$UML_MODULES" virtio_scsi
modprobe -d "$UML_MODULES" 9pnet_virtio
n=0
while [ ! -b /dev/sda ] || [ ! -c /dev/sg0 ]; do
	n=$((n + 1))
	[ $n -le 300 ] || { echo "no /dev/sda"; cat /proc/partitions; exit 10; }
	sleep 0.1
done
case $(readlink -f /sys/block/sda) in
*/pci0000:00/*) ;;
*) echo "sda is not behind PCI"; exit 11 ;;
esac
sg_inq /dev/sg0 >sg_inq.out || { cat sg_inq.out; exit 12; }
sg_readcap /dev/sg0 >sg_readcap.out || { cat sg_readcap.out; exit 13; }
fio --name=v --filename=/dev/sda --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bs=4k --size=16M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --output-format=terse --terse-version=3 >fio.out ||
	{ cat fio.out; echo "fio failed"; exit 14; }
mkdir -p /tmp/m
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /tmp/m ||
	{ dmesg | tail -20; exit 15; }
grep ' /tmp/m 9p ' /proc/mounts >mount.out
sha256sum </tmp/m/from-host | cut -d' ' -f1 >from-host.uml.sha
head -c 64M /dev/urandom >from-uml.tmp
sha256sum <from-uml.tmp | cut -d' ' -f1 >from-uml.sha
cp from-uml.tmp /tmp/m/from-uml
rm from-uml.tmp
umount /tmp/m
# The HBA goes before UML's power-off (see uml-vpci-lsi.sh).
modprobe -d "$UML_MODULES" -r virtio_scsi
EOS

vpci_start "$tmp" scsi --disk "path=$tmp/disk.img,if=virtio-scsi"
dev_scsi=$VPCI_DEV
vpci_start "$tmp" p9 --share "path=$tmp/share,tag=share"
uml_run "$tmp" "$tmp/script.sh" "$dev_scsi" "$VPCI_DEV"
st=$?
cat "$tmp/output.log"
vpci_stop scsi
vpci_stop p9
if [ "$st" != 0 ]; then
	tail -n 40 "$tmp/console.log"
	echo "--- iovm:"
	tail -n 20 "$tmp/scsi.log" "$tmp/p9.log"
	uml_fail "the UML script exited $st"
fi
fail=0
grep -q 'Vendor identification' "$tmp/sg_inq.out" && echo "ok: virtio-scsi sg_inq" ||
	{ echo "FAIL: sg_inq"; fail=1; }
grep -q 'Last LBA=131071' "$tmp/sg_readcap.out" && echo "ok: virtio-scsi sg_readcap: 131072 blocks" ||
	{ cat "$tmp/sg_readcap.out"; echo "FAIL: sg_readcap"; fail=1; }
awk -F';' '{ printf "ok: virtio-scsi 4k QD16 randwrite+verify: %d KiB written, %d KiB verified\n", $47, $6 }' "$tmp/fio.out"
grep -q 'msize=512000' "$tmp/mount.out" && echo "ok: 9p mounted: $(cat "$tmp/mount.out")" ||
	{ cat "$tmp/mount.out"; echo "FAIL: 9p mount options"; fail=1; }
if cmp -s "$tmp/from-host.sha" "$tmp/from-host.uml.sha"; then
	echo "ok: 9p: 64 MiB host file read in UML, sha256 $(cat "$tmp/from-host.sha")"
else
	echo "FAIL: 9p: the host file reads differently in UML"; fail=1
fi
if [ "$(sha256sum <"$tmp/share/from-uml" | cut -d' ' -f1)" = "$(cat "$tmp/from-uml.sha")" ]; then
	echo "ok: 9p: 64 MiB written in UML, same sha256 on the host"
else
	echo "FAIL: 9p: what UML wrote differs on the host"; fail=1
fi
echo "ok: UML ran $UML_SECONDS s"
exit $fail
