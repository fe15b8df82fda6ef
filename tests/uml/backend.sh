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
#   backend_kill                   for the EXIT trap

backend_pid=

backend_start() {
	local dir=$1 cmd=$2
	shift 2
	"$iovm" "$cmd" --socket "$dir/vhu.sock" "$@" >"$dir/iovm.log" 2>&1 &
	backend_pid=$!
	# Bounded only against a hang: the socket appears in milliseconds.
	for _ in $(seq 300); do
		[ -S "$dir/vhu.sock" ] && return 0
		kill -0 "$backend_pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$dir/iovm.log"
	uml_fail "iovm $cmd made no socket"
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
