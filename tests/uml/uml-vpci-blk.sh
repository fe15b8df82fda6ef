#!/bin/sh
# Linux's virtio_pci and virtio_blk in User-Mode Linux driving iovm's own
# virtio-pci transport and virtio-blk (`iovm vhost-user-pci`, UML's PCI over
# virtio; suite 'uml'): the disk appears behind a PCI function, and fio
# verify=crc32c passes at 4k and 64k, QD1 and QD16, with MSI-X and again
# with pci=nomsi (INTx); the host file holds what UML wrote; 20 driver
# unbind/rebind and 20 virtio_blk reloads leave iovm up and the disk working.
# usage: uml-vpci-blk.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"

vpci_tmpdir blk blk
truncate -s 64M "$tmp/disk.img"

cat >"$tmp/script.sh" <<'EOS'
set -e
. "$UML_TESTS/uml-wait.sh"
modprobe -d "$UML_MODULES" virtio_pci
modprobe -d "$UML_MODULES" virtio_blk
uml_wait_disk vd "modprobe virtio_blk"
[ "$(cat /sys/block/vda/size)" = 131072 ] ||
	{ echo "vda has $(cat /sys/block/vda/size) sectors"; exit 11; }
path=$(readlink -f /sys/block/vda)
case $path in
*/pci0000:00/*) echo "vda: $path" ;;
*) echo "vda is not behind PCI: $path"; exit 12 ;;
esac
pdev=${path%%/virtio*}
nmsi=$(ls "$pdev/msi_irqs" 2>/dev/null | wc -l)
echo "msi vectors: $nmsi"
echo "$nmsi" >msi.count
uml_fio_matrix /dev/vda
if [ "$(cat mode)" = msix ]; then
	# unbind/rebind and driver reload, 20 times each: every cycle resets
	# the device, tears down and sets up its queues and MSI-X vectors
	bdf=$(basename "$pdev")
	for i in $(seq 20); do
		echo "cycle $i"
		echo "$bdf" >/sys/bus/pci/drivers/virtio-pci/unbind
		echo "$bdf" >/sys/bus/pci/drivers/virtio-pci/bind
		uml_wait_disk vd "rebind $i"
		modprobe -d "$UML_MODULES" -r virtio_blk
		modprobe -d "$UML_MODULES" virtio_blk
		uml_wait_disk vd "reload $i"
	done
	echo "20 unbind/rebind and 20 virtio_blk reloads"
	fio --name=after --filename=/dev/$UML_DISK --direct=1 --ioengine=libaio \
		--iodepth=16 --rw=randwrite --bs=4k --size=8M --verify=crc32c \
		--do_verify=1 --verify_fatal=1 >fio-after.out ||
		{ cat fio-after.out; echo "fio after the rebinds failed"; exit 15; }
	echo "rebinds" >rebinds.ok
fi
# a pattern the host checks in the file
printf 'iovm-vpci-%s\n' "$(cat /proc/sys/kernel/random/boot_id)" >pattern
dd if=pattern of=/dev/$UML_DISK bs=4096 seek=4095 conv=sync oflag=direct 2>/dev/null
sync
EOS

fail=0
for mode in msix intx; do
	vpci_start "$tmp" blk --disk "path=$tmp/disk.img"
	echo $mode >"$tmp/mode"
	rm -f "$tmp/rebinds.ok"
	args="$VPCI_DEV"
	[ $mode = intx ] && args="$args pci=nomsi"
	# shellcheck disable=SC2086
	uml_run "$tmp" "$tmp/script.sh" $args
	st=$?
	cat "$tmp/output.log"
	vpci_stop blk
	if [ "$st" != 0 ]; then
		tail -n 40 "$tmp/console.log"
		echo "--- iovm:"
		tail -n 40 "$tmp/blk.log"
		uml_fail "$mode: the UML script exited $st"
	fi
	# iovm's own count of the interrupt messages it sent
	msgs=$(sed -n 's/.*session over: .*, \([0-9]*\) MSI and \([0-9]*\) INTx messages.*/\1 \2/p' \
		"$tmp/blk.log" | head -1)
	echo "ok: $mode: iovm sent (MSI INTx) messages: $msgs"
	set -- $msgs
	if [ $mode = msix ] && { [ "${1:-0}" = 0 ] || [ "${2:-1}" != 0 ]; }; then
		echo "FAIL: msix: iovm sent $msgs (MSI INTx) messages"; fail=1
	elif [ $mode = intx ] && { [ "${2:-0}" = 0 ] || [ "${1:-1}" != 0 ]; }; then
		echo "FAIL: intx: iovm sent $msgs (MSI INTx) messages"; fail=1
	fi
	nmsi=$(cat "$tmp/msi.count")
	if [ $mode = msix ] && [ "$nmsi" -lt 2 ]; then
		echo "FAIL: msix: virtio_pci uses $nmsi MSI vectors"; fail=1
	elif [ $mode = intx ] && [ "$nmsi" != 0 ]; then
		echo "FAIL: intx: pci=nomsi, yet $nmsi MSI vectors"; fail=1
	else
		echo "ok: $mode: $nmsi MSI vectors"
	fi
	for bs in 4k 64k; do
		for qd in 1 16; do
			awk -F';' -v m=$mode -v bs=$bs -v qd=$qd '{ printf "ok: %s %s QD%d randwrite+verify: %d KiB written, %d KiB verified, write %d KiB/s\n", m, bs, qd, $47, $6, $48 }' \
				"$tmp/fio-$bs-qd$qd.out"
		done
	done
	if dd if="$tmp/disk.img" bs=4096 skip=4095 count=1 2>/dev/null |
		grep -q '^iovm-vpci-'; then
		echo "ok: $mode: the host file holds UML's last write"
	else
		echo "FAIL: $mode: UML's last write is not in the host file"; fail=1
	fi
	if [ $mode = msix ]; then
		[ -e "$tmp/rebinds.ok" ] &&
			echo "ok: 20 unbind/rebind and 20 virtio_blk reloads, then fio verify" ||
			{ echo "FAIL: rebind loop"; fail=1; }
	fi
	echo "ok: $mode: UML ran $UML_SECONDS s"
done
exit $fail
