#!/bin/bash
# iovm boots the default Linux guest's bzImage far enough for the kernel's
# early console: its version, our command line and the e820 map iovm gave
# it. On a PVM host the kernel then hits an instruction PVM cannot emulate
# (XSAVE family), and iovm must report that stop clearly; on hardware KVM
# the kernel goes on booting and the test stops it with SIGTERM.
# Usage: core-linux.sh IOVM BZIMAGE
set -u
IOVM=$1 bz=$2
. "$(dirname "$0")/core-lib.sh"
need_kvm
if [ ! -r "$bz" ]; then
	echo "SKIPPED: no Linux guest at $bz (build it with tools/mkguest.sh build/guest)"
	exit 77
fi

if [ -e /sys/module/kvm_pvm ]; then
	# About 90 s on a quiet machine (PVM emulates the kernel's code),
	# 3 minutes to the first line alone at load 13 on 2 CPUs.
	limit=600
else
	limit=30 PRESERVE=1
fi
run_vm $limit run --kernel "$bz" --memory 96M \
	--append "earlyprintk=serial,ttyS0 console=ttyS0 iovm_test_marker"
expect_line out '^\[ *[0-9.]+\] Linux version [0-9]+\.[0-9]+'
expect_line out '^\[ *[0-9.]+\] Command line: earlyprintk=serial,ttyS0 console=ttyS0 iovm_test_marker$'
# The e820 map of a 96 MiB guest, exactly as iovm builds it.
expect_line out 'BIOS-e820: \[mem 0x0000000000000000-0x000000000009fbff\] usable'
expect_line out 'BIOS-e820: \[mem 0x000000000009fc00-0x00000000000fffff\] reserved'
expect_line out 'BIOS-e820: \[mem 0x0000000000100000-0x0000000005ffffff\] usable'
expect_line out 'BIOS-e820: \[mem 0x00000000fec00000-0x00000000ffffffff\] reserved'
if [ -e /sys/module/kvm_pvm ]; then
	expect_rc 2
	expect_line err '^iovm: error: vCPU 0: KVM_EXIT_[A-Z_]+.* at RIP 0x[0-9a-f]+ .*code: [0-9a-f ]+$'
else
	expect_rc 143
	expect_line err 'Terminated: stopping the VM'
fi
echo PASS
