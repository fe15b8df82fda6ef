# Shared by the tests of `iovm vhost-user-pci` in User-Mode Linux (suite
# 'uml'), sourced after lib.sh: starts iovm serving one PCI function on a
# socket UML connects to at boot, and stops it.
#   vpci_start DIR NAME ARGS...  iovm vhost-user-pci --socket DIR/NAME.sock
#                  ARGS in the background (log DIR/NAME.log); returns once
#                  the socket listens (fails the test if iovm exits first).
#                  Sets VPCI_DEV: the virtio_uml.device= argument for it.
#   vpci_stop NAME SIGTERMs it and waits; fails the test unless it exited 0.
#   vpci_tmpdir TAG NAME...  makes the test's dir $tmp; at exit kills the
#                  iovm started as each NAME (if still running), removes $tmp.
# IOVM: the iovm binary (meson passes it as the test's first argument).

IOVM=${IOVM:-${1:-}}
# Every PCI access is a message UML waits for: on a loaded 2-core machine a
# run takes minutes. Generous, so that only a hang reaches it.
UML_TIMEOUT=${UML_TIMEOUT:-1800}
[ -x "${IOVM:-}" ] || uml_skip "no iovm binary (pass it as the first argument)"
[ -n "$UML_VPCI_ID" ] || uml_skip "the UML kernel has no CONFIG_UML_PCI_OVER_VIRTIO_DEVICE_ID"

vpci_start() {
	local dir=$1 name=$2 pid
	shift 2
	"$IOVM" vhost-user-pci --socket "$dir/$name.sock" "$@" >"$dir/$name.log" 2>&1 &
	pid=$!
	eval "vpci_pid_$name=$pid"
	UML_PEERS="${UML_PEERS:-} $pid"	# their stacks if UML times out
	# UML connects once, at boot: the socket must listen first. iovm
	# prints its "waiting for a client" line once it does.
	for _ in $(seq 600); do
		grep -q 'waiting for a client' "$dir/$name.log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q 'waiting for a client' "$dir/$name.log" ||
		{ cat "$dir/$name.log"; uml_fail "iovm vhost-user-pci $name did not start"; }
	VPCI_DEV="virtio_uml.device=$dir/$name.sock:$UML_VPCI_ID"
}

vpci_stop() {
	local name=$1 pid st
	eval "pid=\${vpci_pid_$name:-}"
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	st=0
	wait "$pid" || st=$?
	eval "vpci_pid_$name="
	[ "$st" = 0 ] || uml_fail "iovm vhost-user-pci $name exited $st"
}

vpci_tmpdir() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/uml-vpci-$1.XXXXXX")
	shift
	vpci_names=$*
	trap vpci_cleanup EXIT
}

vpci_cleanup() {
	local n p
	for n in $vpci_names; do
		eval "p=\${vpci_pid_$n:-}"
		[ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p"
	done
	rm -rf "$tmp"
}
