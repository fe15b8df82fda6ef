# Sourced inside UML by the tests' scripts (. "$UML_TESTS/uml-wait.sh";
# lib.sh's init exports UML_TESTS, this folder): waiting for a disk that a
# driver probes asynchronously.
#   uml_wait_disk PREFIX WHAT  waits up to 60 s for a disk /sys/block/PREFIX*
#                  (vd, sd) with its /dev node and, for a SCSI disk, its sg
#                  node; sets UML_DISK (vda, sdb...) and UML_SG (sg0..., or
#                  empty). Else prints what there is (WHAT: the step that
#                  should have made it) and exits 10. Names are not assumed
#                  to come back the same after a driver reload.

uml_wait_disk() {
	local n=0 d
	while :; do
		UML_DISK= UML_SG=
		for d in /sys/block/"$1"*; do
			[ -e "$d" ] || continue
			UML_DISK=${d##*/}
			[ -b "/dev/$UML_DISK" ] || UML_DISK=
			break
		done
		if [ -n "$UML_DISK" ]; then
			# a SCSI disk also needs its sg node (sd and sg probe apart)
			[ -d "/sys/block/$UML_DISK/device/scsi_generic" ] || break
			UML_SG=$(ls "/sys/block/$UML_DISK/device/scsi_generic" 2>/dev/null)
			[ -n "$UML_SG" ] && [ -c "/dev/$UML_SG" ] && break
		fi
		n=$((n + 1))
		if [ $n -gt 600 ]; then
			echo "no /dev/$1* 60 s after $2"
			cat /proc/partitions
			dmesg | tail -30
			exit 10
		fi
		sleep 0.1
	done
}
