#!/bin/sh
# The RBD part of bench/netdisk.sh, with the legs of its first run: iovm
# vhost-user-blk (librbd callbacks), iovm-poll (the image's notification
# eventfd), qemu-storage-daemon's rbd driver and `rbd bench`. See
# bench/netdisk.sh --help for the environment (TIME, ROUNDS, CEPH_DIR).
# Usage: bench/rbd.sh [BUILD_DIR]
exec sh "$(dirname "$0")/netdisk.sh" --kind rbd --legs iovm,iovm-poll,qsd,floor "$@"
