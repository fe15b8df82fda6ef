#!/bin/sh
# Runs inside a pseudo-terminal (core-guest.sh tty, via script(1)): iovm
# must put the terminal in raw mode while it runs and restore it when the
# guest exits, crashes, or iovm gets SIGTERM. Writes stty snapshots and
# statuses to OUT.*. Usage: core-tty-inner.sh IOVM COREGUEST OUT
iovm=$1 guest=$2 out=$3
stty -g >"$out.before"
"$iovm" run --kernel "$guest" --memory 32M --append p >/dev/null 2>&1
echo "exit=$?" >>"$out.rc"
stty -g >"$out.after-exit"
"$iovm" run --kernel "$guest" --memory 32M --append c >/dev/null 2>&1
echo "crash=$?" >>"$out.rc"
stty -g >"$out.after-crash"
# An asynchronous command gets /dev/null as stdin unless told otherwise.
exec 3<&0
"$iovm" run --kernel "$guest" --memory 32M --append h <&3 >/dev/null 2>&1 &
pid=$!
sleep 1
stty -g >"$out.during"
kill -TERM $pid
wait $pid
echo "signal=$?" >>"$out.rc"
stty -g >"$out.after-signal"
