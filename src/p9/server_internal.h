/* What the 9P2000.L server's files share: sessions, fids, nodes and the
 * per-request state the handlers get, and the handlers dispatch calls.
 * Private to src/p9/: callers use p9/server.h. */
#ifndef IOVM_P9_SERVER_INTERNAL_H
#define IOVM_P9_SERVER_INTERNAL_H

#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "p9/proto.h"
#include "p9/server.h"

#define P9_TARGET_MAX 4095

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)

/* mapped-xattr: where the guest's view of an object is kept (QEMU's names
 * and sizes, so a folder can move between the two VMMs). */
#define VIRTFS_PREFIX "user.virtfs."
#define VIRTFS_UID "user.virtfs.uid"
#define VIRTFS_GID "user.virtfs.gid"
#define VIRTFS_MODE "user.virtfs.mode"
#define VIRTFS_RDEV "user.virtfs.rdev"

/* A host object reached by a walk: an O_PATH descriptor, and where it was
 * reached from (for Tremove/Trename and for ".."). Nodes are shared by
 * cloned fids and by children; the root node has no parent. */
struct p9_node {
	atomic_uint refs;
	int fd;
	struct p9_session *sess;	/* whose budget fd is in (the root: none) */
	struct p9_node *parent;
	uint16_t namelen;
	char name[];
};

enum fid_kind { FID_PATH, FID_FILE, FID_DIR, FID_XATTR_READ, FID_XATTR_WRITE };

struct p9_fid {
	uint32_t fid;
	struct p9_fid *hnext;
	unsigned int refs;		/* under session lock */
	bool unlinked;			/* out of the table (clunk, remove) */
	uint32_t uid;
	struct p9_node *node;
	_Atomic int ofd;		/* opened descriptor, -1 until lopen */
	_Atomic int kind;
	pthread_mutex_t lock;		/* readdir position, xattr state */
	/* xattr fids */
	char *xname;
	uint8_t *xbuf;
	size_t xsize, xcopied;
	int xflags;
};

struct p9_server {
	struct p9_node *root;
	int procfd;			/* /proc/self/fd, to reopen O_PATH fds */
	dev_t root_dev;
	bool ro;
	bool is_root;			/* running as uid 0: pass uid/gid through */
	enum p9_security sec;
	uint32_t msize;
	struct p9_limits lim;
	atomic_uint nodes;
	/* p9_server_stats: relaxed atomics (server.h says why). */
	uint64_t st_ops[P9_STAT_TYPES];
	uint64_t st_errors, st_read, st_written;
	uint64_t st_fids, st_open;
};

static inline void p9_stat_add(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline void p9_stat_sub(uint64_t *c, uint64_t n)
{
	__atomic_fetch_sub(c, n, __ATOMIC_RELAXED);
}

struct p9_session {
	struct p9_server *srv;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	struct p9_fid **buckets;
	uint32_t nbuckets;
	uint32_t nfids;
	atomic_uint nopen;
	atomic_uint fds;		/* host descriptors held, see fd_take */
	atomic_uint xattr_bytes;
	_Atomic uint32_t msize;
	struct p9_req pending;		/* list head */
	uint32_t npending;
	uint64_t seq;
};

/* One request as a handler sees it: the decoded message m, the reply r it
 * fills, and the transport's iovecs (payloads go straight to and from them). */
struct op {
	struct p9_session *s;
	struct p9_server *srv;
	struct p9_msg *m;
	struct p9_msg *r;
	struct iovec *in;
	unsigned int nin;
	struct iovec *out;
	unsigned int nout;
	size_t out_len;
	struct p9_req *req;
};

/* fid.c: the descriptor budget */
int fd_take(struct p9_session *s);
void fd_give(struct p9_session *s);
uint64_t fd_budget(uint64_t extra);
void fd_pool_set(uint64_t pool);
int take_open_slot(struct p9_session *s);
void give_open_slot(struct p9_session *s);

/* fid.c: nodes */
struct p9_node *node_new(struct p9_server *srv, struct p9_session *sess,
			 int fd, struct p9_node *parent, const char *name,
			 size_t namelen);
void node_get(struct p9_node *n);
void node_put(struct p9_server *srv, struct p9_node *n);
int node_stat(struct p9_node *n, struct stat *st);
void make_qid(struct p9_server *srv, const struct stat *st, struct p9_qid *q);

/* fid.c: the fid table */
struct p9_fid *fid_get(struct p9_session *s, uint32_t fid);
void fid_put(struct p9_session *s, struct p9_fid *f);
int fid_swap_node(struct p9_session *s, struct p9_fid *f, struct p9_node *n,
		  struct p9_node **old);
int fid_add(struct p9_session *s, uint32_t fid, struct p9_node *node,
	    uint32_t uid);
struct p9_fid *fid_unlink(struct p9_session *s, uint32_t fid);
void fid_clear_all(struct p9_session *s);

/* A node's O_PATH descriptor reached through /proc/self/fd: relative to
 * p9_server.procfd (proc_name), or as a whole path (proc_path). */
static inline int proc_name(int fd, char *buf)
{
	snprintf(buf, 16, "%d", fd);
	return 0;
}

static inline int proc_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
	return 0;
}

/* security.c: how owners and modes reach the host */
uint32_t create_mode(struct p9_server *srv, mode_t type, uint32_t mode);
int node_guest_stat(struct p9_server *srv, struct p9_node *n, struct stat *st);
int set_new_attrs(struct p9_server *srv, int fd, uint32_t uid, uint32_t gid,
		  uint32_t mode, uint64_t rdev);
int setattr_host(struct op *o, struct p9_fid *f, const struct stat *st);
int setattr_mapped(struct op *o, struct p9_fid *f, const struct stat *st);
uint8_t mapped_dtype(int dirfd, const char *name);

/* path.c: walks and operations on names */
int h_walk(struct op *o);
int h_getattr(struct op *o);
int h_setattr(struct op *o);
int h_lcreate(struct op *o);
int h_mkdir(struct op *o);
int h_symlink(struct op *o);
int h_mknod(struct op *o);
int h_readlink(struct op *o);
int h_link(struct op *o);
int h_rename(struct op *o);
int h_renameat(struct op *o);
int h_unlinkat(struct op *o);
int h_remove(struct op *o);
int h_statfs(struct op *o);

/* data.c: open files and their data */
int open_flags(uint32_t p9, bool ro);
int h_lopen(struct op *o);
int h_read(struct op *o);
int h_write(struct op *o);
int h_readdir(struct op *o);
int h_fsync(struct op *o);

/* lock.c */
int h_lock(struct op *o);
int h_getlock(struct op *o);

/* xattr.c */
int h_xattrwalk(struct op *o);
int h_xattrcreate(struct op *o);
int xattr_commit(struct p9_fid *f);

#endif
