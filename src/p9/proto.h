/* 9P2000.L wire format: message types, the decoded message structure, and
 * an encoder/decoder for flat buffers shared by the server, clients and
 * tests. Strings and payloads decode as pointers into the buffer (no copy). */
#ifndef IOVM_P9_PROTO_H
#define IOVM_P9_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define P9_VERSION_L "9P2000.L"
#define P9_NOTAG 0xffffu
#define P9_NOFID 0xffffffffu
#define P9_MAXWELEM 16
#define P9_HDRSZ 7		/* size[4] type[1] tag[2] */
#define P9_IOHDRSZ 11		/* Rread: size type tag count[4] */
#define P9_TWRITE_HDRSZ 23	/* size type tag fid[4] offset[8] count[4] */
#define P9_QIDSZ 13

enum p9_type {
	P9_TLERROR = 6, P9_RLERROR,
	P9_TSTATFS = 8, P9_RSTATFS,
	P9_TLOPEN = 12, P9_RLOPEN,
	P9_TLCREATE = 14, P9_RLCREATE,
	P9_TSYMLINK = 16, P9_RSYMLINK,
	P9_TMKNOD = 18, P9_RMKNOD,
	P9_TRENAME = 20, P9_RRENAME,
	P9_TREADLINK = 22, P9_RREADLINK,
	P9_TGETATTR = 24, P9_RGETATTR,
	P9_TSETATTR = 26, P9_RSETATTR,
	P9_TXATTRWALK = 30, P9_RXATTRWALK,
	P9_TXATTRCREATE = 32, P9_RXATTRCREATE,
	P9_TREADDIR = 40, P9_RREADDIR,
	P9_TFSYNC = 50, P9_RFSYNC,
	P9_TLOCK = 52, P9_RLOCK,
	P9_TGETLOCK = 54, P9_RGETLOCK,
	P9_TLINK = 70, P9_RLINK,
	P9_TMKDIR = 72, P9_RMKDIR,
	P9_TRENAMEAT = 74, P9_RRENAMEAT,
	P9_TUNLINKAT = 76, P9_RUNLINKAT,
	P9_TVERSION = 100, P9_RVERSION,
	P9_TAUTH = 102, P9_RAUTH,
	P9_TATTACH = 104, P9_RATTACH,
	P9_TFLUSH = 108, P9_RFLUSH,
	P9_TWALK = 110, P9_RWALK,
	P9_TREAD = 116, P9_RREAD,
	P9_TWRITE = 118, P9_RWRITE,
	P9_TCLUNK = 120, P9_RCLUNK,
	P9_TREMOVE = 122, P9_RREMOVE,
};

/* qid.type */
#define P9_QTDIR 0x80
#define P9_QTSYMLINK 0x02
#define P9_QTFILE 0x00

/* Tgetattr request_mask / Rgetattr valid */
#define P9_GETATTR_MODE 0x1ull
#define P9_GETATTR_NLINK 0x2ull
#define P9_GETATTR_UID 0x4ull
#define P9_GETATTR_GID 0x8ull
#define P9_GETATTR_RDEV 0x10ull
#define P9_GETATTR_ATIME 0x20ull
#define P9_GETATTR_MTIME 0x40ull
#define P9_GETATTR_CTIME 0x80ull
#define P9_GETATTR_INO 0x100ull
#define P9_GETATTR_SIZE 0x200ull
#define P9_GETATTR_BLOCKS 0x400ull
#define P9_GETATTR_BASIC 0x7ffull

/* Tsetattr valid */
#define P9_SETATTR_MODE 0x1u
#define P9_SETATTR_UID 0x2u
#define P9_SETATTR_GID 0x4u
#define P9_SETATTR_SIZE 0x8u
#define P9_SETATTR_ATIME 0x10u
#define P9_SETATTR_MTIME 0x20u
#define P9_SETATTR_CTIME 0x40u
#define P9_SETATTR_ATIME_SET 0x80u
#define P9_SETATTR_MTIME_SET 0x100u

/* Tlock type / status / flags */
#define P9_LOCK_TYPE_RDLCK 0
#define P9_LOCK_TYPE_WRLCK 1
#define P9_LOCK_TYPE_UNLCK 2
#define P9_LOCK_SUCCESS 0
#define P9_LOCK_BLOCKED 1
#define P9_LOCK_ERROR 2
#define P9_LOCK_GRACE 3
#define P9_LOCK_FLAGS_BLOCK 1

/* Tunlinkat flags */
#define P9_AT_REMOVEDIR 0x200

/* Tlopen/Tlcreate flags (Linux's generic open flags on the wire) */
#define P9_DOTL_ACCMODE 03
#define P9_DOTL_CREATE 0100
#define P9_DOTL_EXCL 0200
#define P9_DOTL_NOCTTY 0400
#define P9_DOTL_TRUNC 01000
#define P9_DOTL_APPEND 02000
#define P9_DOTL_NONBLOCK 04000
#define P9_DOTL_DSYNC 010000
#define P9_DOTL_FASYNC 020000
#define P9_DOTL_DIRECT 040000
#define P9_DOTL_LARGEFILE 0100000
#define P9_DOTL_DIRECTORY 0200000
#define P9_DOTL_NOFOLLOW 0400000
#define P9_DOTL_NOATIME 01000000
#define P9_DOTL_CLOEXEC 02000000
#define P9_DOTL_SYNC 04000000

struct p9_str {
	uint16_t len;
	const char *s;		/* not NUL-terminated */
};

struct p9_qid {
	uint8_t type;
	uint32_t version;
	uint64_t path;
};

struct p9_data {
	uint32_t count;
	const void *data;	/* NULL: payload not present in this buffer */
};

struct p9_attr {		/* Rgetattr body after valid and qid */
	uint32_t mode, uid, gid;
	uint64_t nlink, rdev, size, blksize, blocks;
	uint64_t atime_sec, atime_nsec, mtime_sec, mtime_nsec;
	uint64_t ctime_sec, ctime_nsec, btime_sec, btime_nsec;
	uint64_t gen, data_version;
};

struct p9_msg {
	uint8_t type;
	uint16_t tag;
	union {
		struct { uint32_t msize; struct p9_str version; } version;
		struct { uint32_t afid; struct p9_str uname, aname; uint32_t n_uname; } tauth;
		struct { uint32_t fid, afid; struct p9_str uname, aname; uint32_t n_uname; } tattach;
		struct { struct p9_qid qid; } rqid;	/* Rauth Rattach Rsymlink Rmknod Rmkdir */
		struct { uint32_t ecode; } rlerror;
		struct { uint16_t oldtag; } tflush;
		struct { uint32_t fid, newfid; uint16_t nwname; struct p9_str wname[P9_MAXWELEM]; } twalk;
		struct { uint16_t nwqid; struct p9_qid wqid[P9_MAXWELEM]; } rwalk;
		struct { uint32_t fid; } tfid;	/* Tstatfs Treadlink Tclunk Tremove */
		struct { uint32_t type, bsize; uint64_t blocks, bfree, bavail, files, ffree, fsid; uint32_t namelen; } rstatfs;
		struct { uint32_t fid, flags; } tlopen;
		struct { struct p9_qid qid; uint32_t iounit; } ropen;	/* Rlopen Rlcreate */
		struct { uint32_t fid; struct p9_str name; uint32_t flags, mode, gid; } tlcreate;
		struct { uint32_t fid; struct p9_str name, target; uint32_t gid; } tsymlink;
		struct { uint32_t dfid; struct p9_str name; uint32_t mode, major, minor, gid; } tmknod;
		struct { uint32_t fid, dfid; struct p9_str name; } trename;
		struct { struct p9_str target; } rreadlink;
		struct { uint32_t fid; uint64_t mask; } tgetattr;
		struct { uint64_t valid; struct p9_qid qid; struct p9_attr a; } rgetattr;
		struct { uint32_t fid, valid, mode, uid, gid; uint64_t size, atime_sec, atime_nsec, mtime_sec, mtime_nsec; } tsetattr;
		struct { uint32_t fid, newfid; struct p9_str name; } txattrwalk;
		struct { uint64_t size; } rxattrwalk;
		struct { uint32_t fid; struct p9_str name; uint64_t size; uint32_t flags; } txattrcreate;
		struct { uint32_t fid; uint64_t offset; uint32_t count; } tread;	/* Tread Treaddir */
		struct p9_data rdata;	/* Rread Rreaddir */
		struct { uint32_t fid; uint64_t offset; struct p9_data d; } twrite;
		struct { uint32_t count; } rwrite;
		struct { uint32_t fid, datasync; } tfsync;
		struct { uint32_t fid; uint8_t type; uint32_t flags; uint64_t start, length; uint32_t proc_id; struct p9_str client_id; } tlock;
		struct { uint8_t status; } rlock;
		struct { uint32_t fid; uint8_t type; uint64_t start, length; uint32_t proc_id; struct p9_str client_id; } getlock;	/* T and R (R has no fid) */
		struct { uint32_t dfid, fid; struct p9_str name; } tlink;
		struct { uint32_t dfid; struct p9_str name; uint32_t mode, gid; } tmkdir;
		struct { uint32_t olddirfid; struct p9_str oldname; uint32_t newdirfid; struct p9_str newname; } trenameat;
		struct { uint32_t dfid; struct p9_str name; uint32_t flags; } tunlinkat;
	} u;
};

/* Encodes m into buf (size[4] included). A payload whose data pointer is
 * NULL is left out of the buffer but counted in size[4], so the caller can
 * place it elsewhere (scatter-gather). Returns the encoded length (without
 * such a payload) or -ENOSPC / -EINVAL (unknown type, too many names). */
int p9_encode(const struct p9_msg *m, void *buf, size_t len);

/* Decodes a whole message of len bytes. size[4] must equal len, every
 * field must lie within it and nothing may trail it. With hdr_only, a
 * Twrite/Rread/Rreaddir payload is not expected in buf (data = NULL) and
 * size[4] may exceed len by its count. Returns 0, -EPROTO (malformed),
 * -EINVAL (walk over 16 names), -EOPNOTSUPP (unknown type). */
int p9_decode(const void *buf, size_t len, bool hdr_only, struct p9_msg *m);

/* One Rreaddir entry. */
struct p9_dirent {
	struct p9_qid qid;
	uint64_t offset;
	uint8_t type;
	struct p9_str name;
};

/* Parses the entry at *pos in an Rreaddir payload, advancing *pos.
 * Returns 1 with an entry, 0 at the end, -EPROTO if malformed. */
int p9_dirent_next(const void *data, size_t len, size_t *pos,
		   struct p9_dirent *d);

/* Bytes one Rreaddir entry takes on the wire. */
static inline size_t p9_dirent_size(size_t namelen)
{
	return P9_QIDSZ + 8 + 1 + 2 + namelen;
}

/* Little-endian stores/loads, for code that patches headers in place. */
static inline void p9_put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static inline uint32_t p9_get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint16_t p9_get16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

const char *p9_type_name(uint8_t type);

#endif
