#!/bin/bash
# iovm boots the default Linux guest's bzImage far enough for the kernel's
# early console: its version, our command line and the e820 map iovm gave
# it; then the test stops it with SIGTERM. (On a PVM host the kernel, left
# alone, would later hit an instruction PVM cannot emulate, XSAVE family;
# if it gets there first, iovm must report that stop clearly.)
# Usage: core-linux.sh IOVM BZIMAGE
set -u
IOVM=$1 bz=$2
. "$(dirname "$0")/core-lib.sh"
need_kvm
if [ ! -r "$bz" ]; then
	echo "SKIPPED: no Linux guest at $bz (build it with tools/mkguest.sh build/guest)"
	exit 77
fi

# The test waits for what it checks (the e820 map is printed early in
# setup_arch), then stops the VM, rather than racing a deadline: on PVM the
# kernel's code is emulated and the same lines took from 30 s on a quiet
# machine to more than 600 s at load 10. Meson's timeout is the only bound.
last='BIOS-e820: \[mem 0x00000000fec00000-0x00000000ffffffff\] reserved'
echo "+ iovm run --kernel $bz --memory 96M ..."
"$IOVM" run --kernel "$bz" --memory 96M \
	--append "earlyprintk=serial,ttyS0 console=ttyS0 iovm_test_marker" \
	</dev/null >"$scratch/out" 2>"$scratch/err" &
vm=$!
while kill -0 "$vm" 2>/dev/null && ! grep -Eq -- "$last" "$scratch/out"; do
	sleep 1
done
kill -TERM "$vm" 2>/dev/null
wait "$vm"
rc=$?
sed -i 's/\r$//' "$scratch/out"
sed 's/^/out: /' "$scratch/out" | head -100
sed 's/^/err: /' "$scratch/err"
echo "status: $rc"
expect_line out '^\[ *[0-9.]+\] Linux version [0-9]+\.[0-9]+'
expect_line out '^\[ *[0-9.]+\] Command line: earlyprintk=serial,ttyS0 console=ttyS0 iovm_test_marker$'
# The e820 map of a 96 MiB guest, exactly as iovm builds it.
expect_line out 'BIOS-e820: \[mem 0x0000000000000000-0x000000000009fbff\] usable'
expect_line out 'BIOS-e820: \[mem 0x000000000009fc00-0x00000000000fffff\] reserved'
expect_line out 'BIOS-e820: \[mem 0x0000000000100000-0x0000000005ffffff\] usable'
expect_line out "$last"
if [ "$rc" = 2 ] && [ -e /sys/module/kvm_pvm ]; then
	# PVM: the kernel got to an instruction PVM cannot emulate (XSAVE
	# family) before the stop; iovm must have said so clearly.
	expect_line err '^iovm: error: vCPU 0: KVM_EXIT_[A-Z_]+.* at RIP 0x[0-9a-f]+ .*code: [0-9a-f ]+$'
else
	expect_rc 143
	expect_line err 'Terminated: stopping the VM'
fi
echo PASS
