# Sourced inside UML by the tests' scripts (. "$UML_TESTS/uml-wait.sh";
# lib.sh's init exports UML_TESTS, this folder): waiting for a disk that a
# driver probes asynchronously, and the fio jobs and checks the disk tests
# share.
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

#   uml_fio_verify DEV NAME BS QD OFFSET SIZE  random writes of BS at depth
#                  QD (libaio, O_DIRECT) over SIZE bytes from OFFSET of DEV,
#                  every block then read back and checked (verify=crc32c);
#                  fio's terse (v3) output in fio-NAME.out. Exits 13 if fio
#                  fails, after printing its output.
uml_fio_verify() {
	fio --name="$2" --filename="$1" --direct=1 --ioengine=libaio \
		--iodepth="$4" --rw=randwrite --bs="$3" --offset="$5" --size="$6" \
		--verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=terse --terse-version=3 >"fio-$2.out" ||
		{ cat "fio-$2.out"; echo "fio $2 failed"; exit 13; }
	echo "fio $2: written and verified"
}

#   uml_check_sd WHAT  after WHAT (a rebind, a driver reload): the SCSI disk
#                  is back (uml_wait_disk sd), answers sg_inq on its sg node
#                  and takes a small verified write (4k at QD4, 256 KiB).
#                  Exits 18 or 19 if not.
uml_check_sd() {
	uml_wait_disk sd "$1"
	sg_inq "/dev/$UML_SG" >/dev/null || { echo "sg_inq after $1 failed"; exit 18; }
	fio --name=c --filename="/dev/$UML_DISK" --direct=1 --ioengine=libaio \
		--iodepth=4 --rw=randwrite --bs=4k --size=256k --verify=crc32c \
		--do_verify=1 --verify_fatal=1 >fio-cycle.out ||
		{ cat fio-cycle.out; echo "fio after $1 failed"; exit 19; }
}

#   uml_fio_matrix DEV  uml_fio_verify at 4k (from 0) and 64k (from 32M), each
#                  at QD1 and QD16, 16 MiB each: fio-4k-qd1.out ...
#                  fio-64k-qd16.out, the disk tests' common matrix.
uml_fio_matrix() {
	local bs qd
	for bs in 4k 64k; do
		for qd in 1 16; do
			uml_fio_verify "$1" $bs-qd$qd $bs $qd \
				$([ $bs = 4k ] && echo 0 || echo 32M) 16M
		done
	done
}
