# Shared by the UML vhost-user tests (uml-vhost-user-blk.sh, -scsi.sh),
# sourced after lib.sh, not run: an iovm back-end on a socket of the test's
# own directory, started before UML (which connects once, at boot), and
# its checks once UML has gone: still up, nothing refused, a clean SIGTERM.
#   backend_start DIR CMD ARGS...  runs `$iovm CMD --socket DIR/vhu.sock
#                                  ARGS...` (log DIR/iovm.log, pid
#                                  $backend_pid) and waits for its socket
#   backend_check DIR              fails unless the back-end is still up and
#                                  logged no refusal, dropped client or
#                                  error; then stops it with SIGTERM, which
#                                  must exit 0
#   backend_setup NAME             skips without the kernel or fio; makes
#                                  $tmp (mktemp -d NAME.XXXXXX), removed at
#                                  exit with the back-end killed
#   backend_uml DIR VIRTIO_ID      boots UML on DIR/script.sh with the
#                                  back-end as its device VIRTIO_ID, shows
#                                  the script's output; fails (with UML's
#                                  console and iovm's log) unless it exits 0
#   backend_kill                   for the EXIT trap
#   backend_wait_sock SOCK PID     the socket of a back-end started elsewhere

backend_pid=

backend_setup() {
	uml_require
	command -v fio >/dev/null || uml_skip "fio missing"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap 'backend_kill; rm -rf "$tmp"' EXIT
}

backend_start() {
	local dir=$1 cmd=$2
	shift 2
	"$iovm" "$cmd" --socket "$dir/vhu.sock" "$@" >"$dir/iovm.log" 2>&1 &
	backend_pid=$!
	backend_wait_sock "$dir/vhu.sock" "$backend_pid" && return 0
	cat "$dir/iovm.log"
	uml_fail "iovm $cmd made no socket"
}

# backend_wait_sock SOCK PID: 0 once SOCK exists, 1 if PID exits first or
# 30 s pass (bounded only against a hang: it appears in milliseconds).
# Also used by bench/uml.sh.
backend_wait_sock() {
	for _ in $(seq 300); do
		[ -S "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

backend_uml() {
	local st=0
	uml_run "$1" "$1/script.sh" "virtio_uml.device=$1/vhu.sock:$2" || st=$?
	cat "$1/output.log"
	[ "$st" = 0 ] && return 0
	tail -n 40 "$1/console.log"
	echo "--- iovm:"
	cat "$1/iovm.log"
	uml_fail "the UML script exited $st"
}

backend_check() {
	local dir=$1 st=0
	kill -0 "$backend_pid" 2>/dev/null ||
		{ cat "$dir/iovm.log"; uml_fail "iovm died while UML ran"; }
	if grep -E "refused|dropping|error|warning" "$dir/iovm.log"; then
		uml_fail "iovm refused or dropped UML (log above)"
	fi
	grep -q "client connected" "$dir/iovm.log" ||
		{ cat "$dir/iovm.log"; uml_fail "UML never connected to iovm"; }
	kill -TERM "$backend_pid"
	wait "$backend_pid" || st=$?
	backend_pid=
	[ "$st" = 0 ] || { cat "$dir/iovm.log"; uml_fail "iovm exited $st on SIGTERM"; }
}

backend_kill() {
	[ -z "$backend_pid" ] && return 0
	kill -KILL "$backend_pid" 2>/dev/null
	wait "$backend_pid" 2>/dev/null
	backend_pid=
}
