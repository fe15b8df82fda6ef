/* The configuration of a VM and of the device backends, as parsed from the
 * command line. Shared by `iovm run` and the standalone device servers. */
#ifndef IOVM_CONFIG_H
#define IOVM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_MAX_DISKS 16
#define CONFIG_MAX_SHARES 8

enum disk_if { DISK_IF_VIRTIO_BLK, DISK_IF_VIRTIO_SCSI, DISK_IF_LSI };
enum cache_mode { CACHE_NONE, CACHE_WRITEBACK };

/* A disk's I/O limits (--disk iops=N,...; the control socket's set-limits):
 * token buckets of block/throttle.h. Each limit is a rate (operations or
 * bytes per second; 0: none) with a burst (the bucket's size in the same
 * unit; 0: the default, a tenth of a second of the rate, at least 1). A
 * total limit and its -rd/-wr ones may be set together: a request then
 * needs tokens from each. */
enum disk_limit {
	LIM_IOPS, LIM_IOPS_RD, LIM_IOPS_WR,
	LIM_BPS, LIM_BPS_RD, LIM_BPS_WR,
	LIM_N
};

struct disk_limits {
	uint64_t rate[LIM_N];
	uint64_t burst[LIM_N];
};

/* The largest rate or burst (10^15 operations or bytes): the buckets'
 * arithmetic cannot overflow below it. */
#define CONFIG_LIMIT_MAX 1000000000000000ull

/* "iops", "iops-rd", ..., "bps-wr", and "iops-burst", ..., "bps-wr-burst":
 * the option and API names, indexed by enum disk_limit. */
extern const char *const disk_limit_names[LIM_N];
extern const char *const disk_limit_burst_names[LIM_N];

/* Whether l is usable: every value within CONFIG_LIMIT_MAX and no burst
 * without its rate. 0, or -EINVAL with a one-line message in err. */
int disk_limits_check(const struct disk_limits *l, char *err, size_t errlen);

/* Whether any limit is set. */
bool disk_limits_any(const struct disk_limits *l);

struct disk_cfg {
	const char *path;
	enum disk_if iface;
	bool ro;
	enum cache_mode cache;
	unsigned int queues;	/* 0: one per vCPU (or per client request) */
	unsigned int target;	/* SCSI target id (virtio-scsi, lsi) */
	unsigned int lun;	/* SCSI LUN (virtio-scsi) */
	bool target_set;	/* target= was given */
	unsigned int poll_us;	/* poll-us=: the queue thread's spin */
	bool poll_set;		/* poll-us= was given */
	const char *pr_state;	/* pr-state=: SCSI persistent reservation
				 * state file, "none"; NULL: IMAGE.pr */
	const char *pr_id;	/* pr-id=: this process's I_T nexus name */
	/* Network disks (path=rbd:..., an NBD URI; block/driver.h). */
	const char *rbd_conf;	/* conf=: ceph.conf; NULL: Ceph's search */
	const char *rbd_user;	/* user=: the Ceph client id (no "client.") */
	const char *rbd_keyring;	/* keyring=: a keyring file */
	unsigned int timeout_s;	/* timeout=: NBD: how long requests wait for
				 * a lost server before they fail */
	bool timeout_set;
	struct disk_limits limits;	/* iops=, bps=, ...: none by default */
};

/* NBD's timeout= default (seconds): long enough for a server restart,
 * short enough that a guest's I/O errors come before its own watchdogs. */
#define CONFIG_NBD_TIMEOUT_DEFAULT 30
#define CONFIG_NBD_TIMEOUT_MAX 86400

/* Whether path names a network disk: rbd:... or an NBD URI. */
bool config_path_is_rbd(const char *path);
bool config_path_is_nbd(const char *path);

/* How long a disk's I/O thread busy-polls before it sleeps, by default
 * (microseconds; QEMU's iothreads poll up to 32). */
#define CONFIG_POLL_US_DEFAULT 50
#define CONFIG_POLL_US_MAX 10000

#define P9_DEFAULT_MSIZE (4u << 20)
#define P9_MAX_MSIZE (64u << 20)

/* security=: how the guest's owners and modes reach the host (QEMU's
 * virtfs security models; see iovm run --help). */
enum share_security {
	SHARE_SEC_MAPPED_XATTR,	/* the default */
	SHARE_SEC_NONE,
	SHARE_SEC_PASSTHROUGH,
};

struct share_cfg {
	const char *path;
	const char *tag;
	bool ro;
	uint32_t msize;		/* largest msize the server accepts */
	enum share_security security;
	unsigned int poll_us;	/* poll-us=: virtio-9p's ring watch before a
				 * sleep (CONFIG_POLL_US_DEFAULT unless set) */
	bool poll_set;		/* poll-us= was given */
};

struct vm_config {
	const char *kernel;
	const char *initrd;
	const char *append;
	uint64_t mem_size;
	unsigned int cpus;
	const char *cpu_features;	/* --cpu: "+feat,-feat,..." or NULL */
	struct disk_cfg disks[CONFIG_MAX_DISKS];
	unsigned int ndisks;
	struct share_cfg shares[CONFIG_MAX_SHARES];
	unsigned int nshares;
};

/* Parse one --disk argument. On error returns -EINVAL and writes a one-line
 * message (without "iovm: ") to err; nothing stays allocated then. Does not
 * touch the file system. */
int config_parse_disk(const char *arg, struct disk_cfg *out, char *err,
		      size_t errlen);

/* Frees what config_parse_disk allocated in d (path, pr-state, pr-id). */
void config_free_disk(struct disk_cfg *d);

/* A pr-id= value: 1 to 127 printable ASCII characters, no spaces. */
bool config_pr_id_ok(const char *id);

/* The poll-us= of a device that serves these disks (an HBA serves
 * several): the largest any of them gives, or CONFIG_POLL_US_DEFAULT when
 * none does. */
unsigned int config_disks_poll_us(const struct disk_cfg *const *disks,
				  unsigned int n);

/* Parse one --share argument
 * (path=DIR,tag=NAME[,ro][,msize=SIZE][,security=MODEL]).
 * need_tag: tag= is required (virtio-9p), not for 9p-serve. */
int config_parse_share(const char *arg, bool need_tag, struct share_cfg *out,
		       char *err, size_t errlen);

const char *disk_if_name(enum disk_if iface);

#endif
