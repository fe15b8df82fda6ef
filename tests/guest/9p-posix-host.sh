# The host's half of 9p-posix.sh (sourced, not run): lays out the shares the
# script works on and checks afterwards what landed on the host. Used by the
# TCG guest's 9p-tcp test and by UML's tests of iovm's virtio-9p.
#   p9posix_prepare DIR  makes DIR/rw (a 10,000-entry folder big/, a 64 MiB
#                  random host.bin, escaping symlinks), DIR/ro and
#                  DIR/outside (a secret the shares must not reach); sets
#                  P9POSIX_HOST_SHA, the sha256 of host.bin (9p-posix.sh's
#                  fourth argument). Serve DIR/rw read-write, DIR/ro read-only.
#   p9posix_check DIR OUTPUT  after 9p-posix.sh ran with its stdout in OUTPUT:
#                  it ended "ALL OK", the file it wrote has its checksum on
#                  the host, the owners and modes it set are only in
#                  security=mapped-xattr's user.virtfs.* xattrs (the host files
#                  stay ours at 0600), outside/ and ro/ are untouched. Prints
#                  the "PART OK" lines; returns 1 with "FAIL: ..." otherwise.

p9posix_prepare() {
	local d=$1
	mkdir -p "$d/rw/big" "$d/ro" "$d/outside"
	echo HOSTSECRET >"$d/outside/secret"
	ln -s ../outside/secret "$d/rw/esc-rel"
	ln -s "$d/outside" "$d/rw/esc-abs"
	ln -s .. "$d/rw/esc-up"
	(cd "$d/rw/big" && seq -f 'entry%05g' 0 9999 | xargs touch)
	head -c 67108864 /dev/urandom >"$d/rw/host.bin"
	P9POSIX_HOST_SHA=$(sha256sum <"$d/rw/host.bin" | cut -d' ' -f1)
	echo "read-only content" >"$d/ro/keep"
	mkdir "$d/ro/dir"
}

# _p9posix_xattr DIR FILE FIELD: the number QEMU's mapped-xattr layout keeps
# in user.virtfs.FIELD of DIR/rw/FILE.
_p9posix_xattr() {
	python3 -c 'import os, sys; print(int.from_bytes(os.getxattr(sys.argv[1], "user.virtfs." + sys.argv[2]), "little"))' "$1/rw/$2" "$3"
}

p9posix_check() {
	local d=$1 out=$2 sha me f
	grep -q "ALL OK" "$out" || { echo "FAIL: the 9P POSIX script did not finish"; return 1; }
	sha=$(sed -n 's/^GUESTSHA \([0-9a-f]*\).*/\1/p' "$out" | tr -d '\r')
	[ -n "$sha" ] || { echo "FAIL: the 9P POSIX script printed no checksum"; return 1; }
	[ "$(sha256sum <"$d/rw/guest.bin" | cut -d' ' -f1)" = "$sha" ] ||
		{ echo "FAIL: the file the guest wrote differs on the host"; return 1; }
	# security=mapped-xattr (the default): the files the guest made stay
	# iovm's user's at mode 0600 on the host, whatever the guest asked for;
	# the guest's owners and modes are in QEMU's user.virtfs.* xattrs
	me="$(id -u):$(id -g):600"
	for f in created hard suid; do
		[ "$(stat -c %u:%g:%a "$d/rw/$f")" = "$me" ] || {
			echo "FAIL: $f is $(stat -c %u:%g:%a "$d/rw/$f") on the host, expected $me"
			return 1
		}
	done
	[ "$(_p9posix_xattr "$d" created mode)" = $((0100644)) ] ||
		{ echo "FAIL: stored mode of a created file"; return 1; }
	[ "$(_p9posix_xattr "$d" hard uid):$(_p9posix_xattr "$d" hard gid)" = 1234:4321 ] ||
		{ echo "FAIL: stored owner after chown"; return 1; }
	[ "$(_p9posix_xattr "$d" hard mode)" = $((0100751)) ] ||
		{ echo "FAIL: stored mode after chmod"; return 1; }
	[ "$(_p9posix_xattr "$d" suid mode)" = $((0106755)) ] ||
		{ echo "FAIL: stored setuid mode"; return 1; }
	[ ! -e "$d/outside/stolen" ] && [ "$(cat "$d/outside/secret")" = HOSTSECRET ] ||
		{ echo "FAIL: outside folder touched"; return 1; }
	[ "$(cat "$d/ro/keep")" = "read-only content" ] && [ -d "$d/ro/dir" ] &&
		[ ! -e "$d/ro/new" ] || { echo "FAIL: read-only share changed"; return 1; }
	grep -E '^[A-Z]+ OK' "$out" | tr -d '\r' | tr '\n' ' '
	echo
}
