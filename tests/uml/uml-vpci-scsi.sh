#!/bin/sh
# Linux's virtio_pci and virtio_scsi in User-Mode Linux driving iovm's own
# virtio-pci transport and virtio-scsi HBA (`iovm vhost-user-pci --disk
# ...,if=virtio-scsi`; suite 'uml'): the disk appears behind a PCI function,
# sg_inq, sg_readcap and sg_vpd answer on its sg node, fio verify=crc32c
# passes at 4k and 64k, QD1 and QD16; then 20 unbind/rebind of the function
# and 20 virtio_scsi reloads, each followed by sg_inq and a verified write,
# leave iovm up and the disk working. VPCI_CYCLES=N runs N of each instead
# (to chase a rare failure; raise UML_TIMEOUT with it).
# usage: uml-vpci-scsi.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"
command -v sg_inq >/dev/null || uml_skip "sg3-utils missing"

vpci_tmpdir scsi scsi
truncate -s 64M "$tmp/disk.img"
echo "${VPCI_CYCLES:-20}" >"$tmp/cycles.conf"

cat >"$tmp/script.sh" <<'EOS'
set -e
. "$UML_TESTS/uml-wait.sh"
modprobe -d "$UML_MODULES" virtio_pci
modprobe -d "$UML_MODULES" virtio_scsi
uml_wait_disk sd "virtio_scsi load"
case $(readlink -f /sys/block/$UML_DISK) in
*/pci0000:00/*) ;;
*) echo "$UML_DISK is not behind PCI"; exit 11 ;;
esac
sg=$UML_SG
sg_inq /dev/$sg >sg_inq.out || { cat sg_inq.out; exit 12; }
sg_readcap /dev/$sg >sg_readcap.out || { cat sg_readcap.out; exit 13; }
sg_vpd --page=0x83 /dev/$sg >sg_vpd.out || { cat sg_vpd.out; exit 14; }
uml_fio_matrix /dev/$UML_DISK
# unbind/rebind and driver reload, 20 times each (cycles.conf: more, to
# chase a rare failure): every cycle resets the device, tears down and sets
# up its queues and MSI-X vectors, rescans
bdf=$(basename "$(readlink -f /sys/block/$UML_DISK | sed 's,/virtio[0-9]*/.*,,')")
cycles=$(cat cycles.conf)
for i in $(seq $cycles); do
	echo "cycle $i"
	echo "$bdf" >/sys/bus/pci/drivers/virtio-pci/unbind
	echo "$bdf" >/sys/bus/pci/drivers/virtio-pci/bind
	uml_check_sd "rebind $i"
	modprobe -d "$UML_MODULES" -r virtio_scsi
	modprobe -d "$UML_MODULES" virtio_scsi
	uml_check_sd "reload $i"
done
echo "$cycles unbind/rebind and $cycles virtio_scsi reloads" >cycles.ok
EOS

vpci_start "$tmp" scsi --disk "path=$tmp/disk.img,if=virtio-scsi"
uml_run "$tmp" "$tmp/script.sh" "$VPCI_DEV"
st=$?
cat "$tmp/output.log"
vpci_stop scsi
if [ "$st" != 0 ]; then
	tail -n 40 "$tmp/console.log"
	echo "--- iovm:"
	tail -n 20 "$tmp/scsi.log"
	uml_fail "the UML script exited $st"
fi
fail=0
grep -q 'Vendor identification: IOVM' "$tmp/sg_inq.out" && echo "ok: sg_inq: vendor IOVM" ||
	{ cat "$tmp/sg_inq.out"; echo "FAIL: sg_inq"; fail=1; }
grep -q 'Last LBA=131071' "$tmp/sg_readcap.out" && echo "ok: sg_readcap: 131072 blocks" ||
	{ cat "$tmp/sg_readcap.out"; echo "FAIL: sg_readcap"; fail=1; }
[ -s "$tmp/sg_vpd.out" ] && echo "ok: sg_vpd device identification" || { echo "FAIL: sg_vpd"; fail=1; }
for bs in 4k 64k; do
	for qd in 1 16; do
		awk -F';' -v bs=$bs -v qd=$qd '{ printf "ok: %s QD%d randwrite+verify: %d KiB written, %d KiB verified\n", bs, qd, $47, $6 }' \
			"$tmp/fio-$bs-qd$qd.out"
	done
done
[ -e "$tmp/cycles.ok" ] && echo "ok: $(cat "$tmp/cycles.ok"), each followed by sg_inq and a verified write" ||
	{ echo "FAIL: the rebind/reload loop did not finish"; fail=1; }
if grep -Ei 'error|refus|warn' "$tmp/scsi.log" | grep -vq '(0 refused)'; then
	cat "$tmp/scsi.log"; echo "FAIL: iovm logged a problem"; fail=1
fi
echo "ok: UML ran $UML_SECONDS s"
exit $fail
