#!/bin/bash
# The VMM core under KVM with the coretest guest. Usage:
#   core-guest.sh IOVM COREGUEST CASE
# CASE: ports, ports-2cpu, irq, crash, reset, poweroff, signal, tty, refuse,
# highmem (for highmem COREGUEST is the probe: it prints the memory map it
# was given).
set -u
IOVM=$1 guest=$2 case=$3
. "$(dirname "$0")/core-lib.sh"
need_kvm

case $case in
ports)
	run_vm 30 run --kernel "$guest" --memory 32M --append p
	expect_rc 33
	expect_line out '^coretest: start$'
	expect_line out '^coretest: rep-ok$'
	;;
ports-2cpu)
	# The AP waits in KVM for a SIPI that never comes: stopping must
	# still take it out of KVM_RUN.
	run_vm 30 run --kernel "$guest" --memory 32M --cpus 2 --append p
	expect_rc 33
	expect_line out '^coretest: rep-ok$'
	;;
crash)
	run_vm 30 run --kernel "$guest" --memory 32M --append c
	expect_rc 2
	expect_line err 'vCPU 0: KVM_EXIT_SHUTDOWN \(triple fault\).* at RIP 0x[0-9a-f]+ .*code: [0-9a-f ]+$'
	;;
irq)
	run_vm 30 run --kernel "$guest" --memory 32M --append i
	expect_rc 33
	expect_line out '^coretest: irq-ok$'
	;;
poweroff)
	run_vm 30 run --kernel "$guest" --memory 32M --append o
	expect_rc 0
	expect_line err 'guest powered off \(ACPI S5\)'
	;;
reset)
	run_vm 30 run --kernel "$guest" --memory 32M --append r
	expect_rc 0
	expect_line err 'reset through the i8042'
	;;
signal)
	echo "+ iovm run --append h & kill -TERM"
	"$IOVM" run --kernel "$guest" --memory 32M --cpus 2 --append h \
		</dev/null >"$scratch/out" 2>"$scratch/err" &
	pid=$!
	for _ in $(seq 50); do
		grep -q 'coretest: start' "$scratch/out" && break
		sleep 0.1
	done
	kill -TERM "$pid"
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		die "iovm ignored SIGTERM for 10 s"
	fi
	wait "$pid"
	rc=$?
	cat "$scratch/err"
	expect_rc 143
	expect_line err 'Terminated: stopping the VM'
	;;
highmem)
	# 5 GiB: 3 GiB below the PCI hole, 2 GiB from 4 GiB up.
	run_vm 60 run --kernel "$guest" --memory 5G --append "test=basic pio_n=4"
	expect_rc 1
	expect_line out '^probe: mem base=0x100000 len=0xbff00000 type=1'
	expect_line out '^probe: mem base=0xfec00000 len=0x1400000 type=2'
	expect_line out '^probe: mem base=0x100000000 len=0x80000000 type=1'
	expect_line out '^probe: PASS'
	;;
tty)
	command -v script >/dev/null || die "script(1) (util-linux) is missing"
	echo "+ core-tty-inner.sh in a pseudo-terminal"
	script -qec "$(dirname "$0")/core-tty-inner.sh $IOVM $guest $scratch/tty" /dev/null \
		</dev/null >/dev/null
	cat "$scratch/tty.rc"
	grep -qx 'exit=33' "$scratch/tty.rc" || die "guest exit status lost"
	grep -qx 'crash=2' "$scratch/tty.rc" || die "crash status lost"
	grep -qx 'signal=143' "$scratch/tty.rc" || die "SIGTERM status lost"
	before=$(cat "$scratch/tty.before")
	[ "$(cat "$scratch/tty.during")" != "$before" ] ||
		die "terminal not in raw mode while iovm runs"
	for s in after-exit after-crash after-signal; do
		[ "$(cat "$scratch/tty.$s")" = "$before" ] ||
			die "terminal not restored ($s)"
	done
	;;
refuse)
	printf 'just some text, not a kernel\n' >"$scratch/notakernel"
	run_vm 30 run --kernel "$scratch/notakernel"
	expect_rc 1
	expect_line err "^iovm: error: $scratch/notakernel is neither a Linux bzImage nor a multiboot ELF$"
	[ "$(wc -l <"$scratch/err")" = 1 ] || die "more than one error line"
	run_vm 30 run --kernel "$scratch/missing"
	expect_rc 1
	expect_line err "^iovm: error: cannot open kernel '$scratch/missing': No such file or directory$"
	;;
*)
	die "unknown case $case"
	;;
esac
echo PASS
