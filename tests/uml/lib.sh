# Shared by the User-Mode Linux tests (suite 'uml'), sourced, not run: finds
# the UML kernel (tools/mkuml.sh), skips when it is missing or cannot run, and
# boots it with the host's / as its root (hostfs) to run one host shell
# script as PID 1, whose exit status comes back through a file.
#
# Interface (see tests/uml/README.md):
#   UML_KERNEL     the kernel: $IOVM_UML, else $IOVM_UML_DIR/linux (meson
#                  passes the build's uml/), else build/uml/linux beside tests/
#   UML_MODULES    its modules tree (modprobe -d "$UML_MODULES" NAME in UML)
#   UML_VPCI_ID    the virtio device ID of virt-pci (virtio_uml.device=SOCK:ID
#                  for a virtio-pcidev back-end), from the kernel's config
#   uml_skip REASON        prints "SKIPPED: REASON", exits 77
#   uml_fail REASON        prints "FAIL: REASON", exits 1
#   uml_require            uml_skip unless the kernel exists and runs
#   uml_run DIR SCRIPT [KERNEL_ARGS...]
#                  boots UML to run `sh SCRIPT` (cwd DIR, env UML_DIR=DIR,
#                  UML_MODULES, TMPDIR=DIR, PATH) as PID 1; returns its exit
#                  status. DIR: an existing directory of the caller (its
#                  mktemp -d, outside /dev, /proc and /sys, which UML mounts
#                  over). Writes DIR/console.log (kernel console), DIR/output.log
#                  (SCRIPT's stdout and stderr), DIR/status, DIR/init.sh.
#                  UML's memory file is in a mktemp -d dir on /dev/shm (tmpfs,
#                  shareable with vhost-user back-ends), removed afterwards.
#                  UML_MEM (default 512M) sizes it; UML_TIMEOUT (default 600 s)
#                  bounds the boot: on expiry the blocked tasks' stacks are
#                  asked for (sysrq w through UML's mconsole), the UML
#                  kernel's own stack and the back-ends' (UML_PEERS, pids)
#                  taken with gdb, the UML (its own processes only) is
#                  killed, the console's tail and its warnings shown and 124
#                  returned; no status file (UML crashed, script killed)
#                  returns 125; a virt-pci warning on the console (a PCI
#                  access its back-end left unanswered) returns 126.
#                  Sets UML_SECONDS: how long the UML ran (boot to power-off).

uml_skip() { echo "SKIPPED: $*"; exit 77; }
uml_fail() { echo "FAIL: $*"; exit 1; }

_uml_here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${IOVM_UML:-}" ]; then
	UML_KERNEL=$IOVM_UML
elif [ -n "${IOVM_UML_DIR:-}" ]; then
	UML_KERNEL=$IOVM_UML_DIR/linux
else
	UML_KERNEL=$_uml_here/../../build/uml/linux
fi
UML_MODULES=$(dirname "$UML_KERNEL")/modules
UML_VPCI_ID=$(sed -n 's/^CONFIG_UML_PCI_OVER_VIRTIO_DEVICE_ID=//p' \
	"$(dirname "$UML_KERNEL")/config" 2>/dev/null)

uml_require() {
	[ -e "$UML_KERNEL" ] ||
		uml_skip "no UML kernel at $UML_KERNEL (build it: tools/mkuml.sh)"
	[ -x "$UML_KERNEL" ] || uml_skip "$UML_KERNEL is not executable"
	# UML answers --version as a host program, before it boots.
	"$UML_KERNEL" --version >/dev/null 2>&1 ||
		uml_skip "$UML_KERNEL cannot run on this host"
	command -v pgrep >/dev/null || uml_skip "pgrep (procps) missing"
}

# Tail of a log for a failure message.
_uml_tail() {
	[ -s "$1" ] || return 0
	echo "--- last lines of $1:"
	tail -n "${2:-40}" "$1"
}

# _uml_kill_group PID MARK: SIGKILLs what is left of the UML whose pid (and
# process group) is PID: its own processes only, those whose command line
# holds MARK (our init's path, which no other process has).
_uml_kill_group() {
	local p
	for p in $(pgrep -g "$1" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$2" &&
			kill -KILL "$p" 2>/dev/null
	done
	return 0
}

# _uml_host_state PID: what the UML kernel process PID is doing, seen from
# the host: its state, wait channel and system call, and, with gdb, the
# UML kernel's own stack (the kernel runs in that process). For a UML that
# no longer answers its mconsole (a loop with interrupts off, or a host
# system call that does not return), where sysrq cannot help.
_uml_host_state() {
	echo "--- UML kernel process $1 on the host:"
	for t in /proc/"$1"/task/*; do
		echo "task ${t##*/}: state $(cut -d' ' -f3 "$t/stat" 2>/dev/null)," \
			"wchan $(cat "$t/wchan" 2>/dev/null)," \
			"syscall $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
	done
	_uml_gdb_stacks "$1" "$UML_KERNEL"
}

# _uml_gdb_stacks PID [BINARY]: every thread's stack of PID, with gdb (its
# symbols from BINARY when given), or a line saying there is no gdb.
_uml_gdb_stacks() {
	command -v gdb >/dev/null || { echo "(no gdb: no stacks)"; return 0; }
	timeout 30 gdb -p "$1" -batch -nx -ex "thread apply all bt 40" ${2:+"$2"} 2>&1 |
		grep -E '^(#|Thread)' || true
}

# _uml_peers_state: with gdb, the threads' stacks of each back-end process
# in UML_PEERS (pids, set by whoever started them, e.g. vpci_start): a UML
# that waits for an answer that never comes may be waiting on one of them.
_uml_peers_state() {
	local p
	for p in ${UML_PEERS:-}; do
		kill -0 "$p" 2>/dev/null || { echo "--- back-end $p: gone"; continue; }
		echo "--- back-end $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)):"
		_uml_gdb_stacks "$p"
	done
}

# _uml_sysrq MEMDIR KEY: sends "sysrq KEY" to the UML whose uml_dir is
# MEMDIR through its management console (a datagram socket, protocol of
# arch/um/drivers/mconsole_user.c: magic, version 2, length, text); the
# kernel prints the answer (e.g. the blocked tasks' stacks) on its console.
_uml_sysrq() {
	local sock
	sock=$(find "$1" -name mconsole -type s 2>/dev/null | head -n 1)
	[ -n "$sock" ] || return 0
	python3 - "$sock" "sysrq $2" <<'EOF' 2>/dev/null || true
import os, socket, struct, sys, tempfile
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
me = tempfile.mktemp(prefix="uml-mc-")
s.bind(me)
try:
    cmd = sys.argv[2].encode()
    s.sendto(struct.pack("<III", 0xcafebabe, 2, len(cmd)) + cmd.ljust(512, b"\0"), sys.argv[1])
    s.settimeout(5)
    s.recv(4096)
finally:
    os.unlink(me)
EOF
}

uml_run() {
	local dir script memdir st t0 pid deadline timedout state
	dir=$(cd "${1:?uml_run DIR SCRIPT [ARGS...]}" && pwd) || return 2
	script=$(realpath "${2:?uml_run DIR SCRIPT [ARGS...]}") || return 2
	shift 2
	rm -f "$dir/status" "$dir/status.tmp"
	# PID 1 inside UML. The status goes through hostfs into a file, synced
	# before the power-off, so the caller never guesses it from the console.
	cat >"$dir/init.sh" <<EOF
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export UML_DIR='$dir' UML_MODULES='$UML_MODULES' TMPDIR='$dir' HOME='$dir'
export UML_TESTS='$_uml_here'
mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
cd '$dir' || exit 1
/bin/sh '$script' >'$dir/output.log' 2>&1 </dev/null
echo \$? >'$dir/status.tmp'
mv '$dir/status.tmp' '$dir/status'
sync
echo o >/proc/sysrq-trigger
# The power-off runs from a workqueue; PID 1 must not exit meanwhile.
while :; do sleep 1; done
EOF
	chmod 755 "$dir/init.sh"
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		memdir=$(mktemp -d /dev/shm/iovm-uml.XXXXXX) || return 2
	else
		memdir=$(mktemp -d) || return 2
	fi
	t0=$(date +%s.%N)
	# uml_dir: UML's umid directory (its mconsole socket), else in ~/.uml.
	# UML makes itself a session and process group leader (setsid) at
	# start, so its pid names the group of its helpers and user processes.
	TMPDIR=$memdir "$UML_KERNEL" mem="${UML_MEM:-512M}" \
		root=/dev/root rootfstype=hostfs rw init="$dir/init.sh" \
		con=null con0=null,fd:1 ssl=null uml_dir="$memdir" "$@" \
		</dev/null >"$dir/console.log" 2>&1 &
	pid=$!
	# Wait for it to end (a zombie counts as ended) or for the deadline.
	deadline=$(($(date +%s) + ${UML_TIMEOUT:-600}))
	timedout=0
	while state=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) &&
		[ "$state" != Z ]; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			timedout=1
			# what UML's tasks are blocked in, for the log
			_uml_sysrq "$memdir" w
			sleep 1
			_uml_host_state "$pid"
			_uml_peers_state
			break
		fi
		sleep 0.1
	done
	_uml_kill_group "$pid" "$dir/init.sh"
	st=0
	wait "$pid" || st=$?
	rm -rf "$memdir"
	UML_SECONDS=$(awk -v a="$t0" -v b="$(date +%s.%N)" \
		'BEGIN { printf "%.2f", b - a }')
	if [ "$timedout" = 1 ]; then
		echo "FAIL: UML did not power off within ${UML_TIMEOUT:-600} s (killed)"
		_uml_tail "$dir/output.log" 20
		_uml_tail "$dir/console.log" 120
		echo "--- warnings anywhere in the console:"
		grep -n -E 'WARNING|virt-pci|BUG|blocked for more' "$dir/console.log" | head -n 20
		return 124
	fi
	if [ ! -s "$dir/status" ]; then
		echo "FAIL: UML exited ($st) without the script's status"
		_uml_tail "$dir/output.log" 20
		_uml_tail "$dir/console.log"
		return 125
	fi
	# virt-pci gave up waiting for its back-end (tools/uml/patches/0003):
	# a register read returned all-ones to the driver, whatever it did next
	if grep -q 'um virt-pci' "$dir/console.log"; then
		echo "FAIL: virt-pci warned (a PCI access went unanswered):"
		grep -n -A3 'um virt-pci' "$dir/console.log" | head -n 20
		return 126
	fi
	return "$(cat "$dir/status")"
}
