/* The --help text on network disks, shared by every command that takes
 * --disk. */
#ifndef IOVM_CMD_DISK_HELP_H
#define IOVM_CMD_DISK_HELP_H

#define NETDISK_HELP                                                           \
"Network disks: path= may name one instead of a file.\n"                      \
"  path=rbd:POOL[/NAMESPACE]/IMAGE[@SNAP]\n"                                  \
"      a Ceph RBD image through librbd (a snapshot needs ro). Options:\n"     \
"        conf=FILE     ceph.conf (default: Ceph's own search: $CEPH_CONF,\n"  \
"                      /etc/ceph/ceph.conf, ~/.ceph/ceph.conf, ./ceph.conf)\n" \
"        user=ID       Ceph client id without \"client.\" (default admin)\n" \
"        keyring=FILE  that client's keyring (default: as ceph.conf says)\n" \
"      cache=none (default) turns librbd's cache off: a write completes\n"   \
"      once the OSDs hold it; cache=writeback turns it on (the guest's\n"     \
"      flushes write it back). Requests wait while the cluster recovers:\n"  \
"      iovm never fails one by a timeout of its own. Opening waits at\n"     \
"      most 30 s for the monitors.\n"                                         \
"  path=nbd://HOST[:PORT]/EXPORT, nbds://HOST[:PORT]/EXPORT (TLS),\n"          \
"  path=nbd+unix:///EXPORT?socket=PATH\n"                                     \
"      an export of an NBD server (qemu-nbd, qemu-storage-daemon, nbdkit)\n" \
"      through libnbd, as the NBD URI standard spells it. TLS keys:\n"        \
"      nbds+unix://USER@/?socket=PATH&tls-psk-file=FILE (or\n"               \
"      tls-certificates=DIR). When the connection drops, iovm reconnects\n"  \
"      (after 100 ms, doubling to 2 s; an attempt with no answer is\n"       \
"      abandoned after timeout= or 10 s) and sends every request that was\n"  \
"      in flight again. Options:\n"                                          \
"        timeout=SECONDS  how long requests wait for a lost server before\n" \
"                      they fail with an I/O error (1-86400, default 30);\n" \
"                      while it stays away, new requests fail at once; the\n" \
"                      first connection, at start-up, waits as long; a\n"    \
"                      connection that owes replies and hears none for\n"    \
"                      this long (a stopped server) is cut the same way\n" \
"      One connection per queue when the server offers multi-conn, else\n"   \
"      one that all queues share; cache= is left to the server. A server\n"  \
"      that comes back with a smaller or read-only export fails requests\n"  \
"      it cannot take with an I/O error; the guest's size stays.\n"          \
"  On both, a discard need not read back as zeroes (SCSI reports LBPRZ 0),\n" \
"  and SCSI's COMPARE AND WRITE and the shared persistent-reservation file\n" \
"  (pr-state=) are for local images only.\n"

/* The --help text on I/O limits (--disk iops=...), shared likewise. */
#define LIMITS_HELP                                                            \
"I/O limits (in --disk; 0 or absent: no limit). Token buckets, as QEMU's\n"  \
"throttling and Firecracker's rate limiter: requests pass at once while a\n" \
"bucket holds tokens, then wait in order, on their queue's own timer, for\n" \
"the rate to refill it; a disk's queues share its buckets.\n"                \
"  iops=N, iops-rd=N, iops-wr=N\n"                                          \
"                operations per second: all, reads, writes (discard and\n"  \
"                write-zeroes count as writes; flushes are never limited)\n" \
"  bps=SIZE, bps-rd=SIZE, bps-wr=SIZE\n"                                    \
"                bytes per second (K, M, G suffixes, binary); a discard\n"  \
"                counts no bytes\n"                                         \
"  iops-burst=N, iops-rd-burst=N, ..., bps-wr-burst=SIZE\n"                 \
"                the bucket's size: how much passes at once after an idle\n" \
"                spell before the rate holds (default: a tenth of a second\n" \
"                of the rate, at least 1). A request larger than its\n"     \
"                bucket passes when the bucket is full and later requests\n" \
"                wait until it is paid for\n"                               \
"  Values go from 0 to 10^15. A total limit and its -rd/-wr ones may be\n"  \
"  set together (a request needs tokens from each); a burst needs its\n"    \
"  rate. The control socket's set-limits changes them while iovm runs.\n"

#endif
