/* 9P2000.L codec. One visitor per message walks its fields in wire order;
 * the same visitor encodes or decodes, so the two directions cannot drift
 * apart. */
#include <errno.h>
#include <string.h>

#include "p9/proto.h"

struct codec {
	uint8_t *buf;		/* encode: output; decode: input (const) */
	size_t len;
	size_t off;
	size_t extra;		/* payload bytes counted but not in buf */
	bool enc;
	bool hdr_only;
	int err;
};

static bool room(struct codec *c, size_t n)
{
	if (c->err)
		return false;
	if (n > c->len - c->off) {
		c->err = c->enc ? -ENOSPC : -EPROTO;
		return false;
	}
	return true;
}

static void io_n(struct codec *c, void *v, size_t n)
{
	uint8_t *p = v;
	uint64_t x = 0;

	if (!room(c, n))
		return;
	if (c->enc) {
		memcpy(&x, v, n);
		for (size_t i = 0; i < n; i++)
			c->buf[c->off + i] = x >> (8 * i);
	} else {
		for (size_t i = 0; i < n; i++)
			x |= (uint64_t)c->buf[c->off + i] << (8 * i);
		memcpy(p, &x, n);
	}
	c->off += n;
}

static void io8(struct codec *c, uint8_t *v) { io_n(c, v, 1); }
static void io16(struct codec *c, uint16_t *v) { io_n(c, v, 2); }
static void io32(struct codec *c, uint32_t *v) { io_n(c, v, 4); }
static void io64(struct codec *c, uint64_t *v) { io_n(c, v, 8); }

static void iostr(struct codec *c, struct p9_str *s)
{
	io16(c, &s->len);
	if (!room(c, s->len))
		return;
	if (c->enc)
		memcpy(c->buf + c->off, s->s, s->len);
	else
		s->s = (const char *)c->buf + c->off;
	c->off += s->len;
}

static void ioqid(struct codec *c, struct p9_qid *q)
{
	io8(c, &q->type);
	io32(c, &q->version);
	io64(c, &q->path);
}

static void iodata(struct codec *c, struct p9_data *d)
{
	io32(c, &d->count);
	if (c->err)
		return;
	if (c->enc && !d->data) {
		c->extra = d->count;
		return;
	}
	if (!c->enc && c->hdr_only) {
		d->data = NULL;
		c->extra = d->count;
		return;
	}
	if (!room(c, d->count))
		return;
	if (c->enc)
		memcpy(c->buf + c->off, d->data, d->count);
	else
		d->data = c->buf + c->off;
	c->off += d->count;
}

static void io_attr(struct codec *c, struct p9_attr *a)
{
	io32(c, &a->mode);
	io32(c, &a->uid);
	io32(c, &a->gid);
	io64(c, &a->nlink);
	io64(c, &a->rdev);
	io64(c, &a->size);
	io64(c, &a->blksize);
	io64(c, &a->blocks);
	io64(c, &a->atime_sec);
	io64(c, &a->atime_nsec);
	io64(c, &a->mtime_sec);
	io64(c, &a->mtime_nsec);
	io64(c, &a->ctime_sec);
	io64(c, &a->ctime_nsec);
	io64(c, &a->btime_sec);
	io64(c, &a->btime_nsec);
	io64(c, &a->gen);
	io64(c, &a->data_version);
}

/* The body of every message; returns -EOPNOTSUPP for unknown types. */
static int io_body(struct codec *c, struct p9_msg *m)
{
	switch (m->type) {
	case P9_TVERSION:
	case P9_RVERSION:
		io32(c, &m->u.version.msize);
		iostr(c, &m->u.version.version);
		break;
	case P9_TAUTH:
		io32(c, &m->u.tauth.afid);
		iostr(c, &m->u.tauth.uname);
		iostr(c, &m->u.tauth.aname);
		io32(c, &m->u.tauth.n_uname);
		break;
	case P9_TATTACH:
		io32(c, &m->u.tattach.fid);
		io32(c, &m->u.tattach.afid);
		iostr(c, &m->u.tattach.uname);
		iostr(c, &m->u.tattach.aname);
		io32(c, &m->u.tattach.n_uname);
		break;
	case P9_RAUTH:
	case P9_RATTACH:
	case P9_RSYMLINK:
	case P9_RMKNOD:
	case P9_RMKDIR:
		ioqid(c, &m->u.rqid.qid);
		break;
	case P9_RLERROR:
		io32(c, &m->u.rlerror.ecode);
		break;
	case P9_TFLUSH:
		io16(c, &m->u.tflush.oldtag);
		break;
	case P9_TWALK:
		io32(c, &m->u.twalk.fid);
		io32(c, &m->u.twalk.newfid);
		io16(c, &m->u.twalk.nwname);
		if (!c->err && m->u.twalk.nwname > P9_MAXWELEM)
			return -EINVAL;
		for (unsigned int i = 0; i < m->u.twalk.nwname && !c->err; i++)
			iostr(c, &m->u.twalk.wname[i]);
		break;
	case P9_RWALK:
		io16(c, &m->u.rwalk.nwqid);
		if (!c->err && m->u.rwalk.nwqid > P9_MAXWELEM)
			return -EINVAL;
		for (unsigned int i = 0; i < m->u.rwalk.nwqid && !c->err; i++)
			ioqid(c, &m->u.rwalk.wqid[i]);
		break;
	case P9_TSTATFS:
	case P9_TREADLINK:
	case P9_TCLUNK:
	case P9_TREMOVE:
		io32(c, &m->u.tfid.fid);
		break;
	case P9_RSTATFS:
		io32(c, &m->u.rstatfs.type);
		io32(c, &m->u.rstatfs.bsize);
		io64(c, &m->u.rstatfs.blocks);
		io64(c, &m->u.rstatfs.bfree);
		io64(c, &m->u.rstatfs.bavail);
		io64(c, &m->u.rstatfs.files);
		io64(c, &m->u.rstatfs.ffree);
		io64(c, &m->u.rstatfs.fsid);
		io32(c, &m->u.rstatfs.namelen);
		break;
	case P9_TLOPEN:
		io32(c, &m->u.tlopen.fid);
		io32(c, &m->u.tlopen.flags);
		break;
	case P9_RLOPEN:
	case P9_RLCREATE:
		ioqid(c, &m->u.ropen.qid);
		io32(c, &m->u.ropen.iounit);
		break;
	case P9_TLCREATE:
		io32(c, &m->u.tlcreate.fid);
		iostr(c, &m->u.tlcreate.name);
		io32(c, &m->u.tlcreate.flags);
		io32(c, &m->u.tlcreate.mode);
		io32(c, &m->u.tlcreate.gid);
		break;
	case P9_TSYMLINK:
		io32(c, &m->u.tsymlink.fid);
		iostr(c, &m->u.tsymlink.name);
		iostr(c, &m->u.tsymlink.target);
		io32(c, &m->u.tsymlink.gid);
		break;
	case P9_TMKNOD:
		io32(c, &m->u.tmknod.dfid);
		iostr(c, &m->u.tmknod.name);
		io32(c, &m->u.tmknod.mode);
		io32(c, &m->u.tmknod.major);
		io32(c, &m->u.tmknod.minor);
		io32(c, &m->u.tmknod.gid);
		break;
	case P9_TRENAME:
		io32(c, &m->u.trename.fid);
		io32(c, &m->u.trename.dfid);
		iostr(c, &m->u.trename.name);
		break;
	case P9_RREADLINK:
		iostr(c, &m->u.rreadlink.target);
		break;
	case P9_TGETATTR:
		io32(c, &m->u.tgetattr.fid);
		io64(c, &m->u.tgetattr.mask);
		break;
	case P9_RGETATTR:
		io64(c, &m->u.rgetattr.valid);
		ioqid(c, &m->u.rgetattr.qid);
		io_attr(c, &m->u.rgetattr.a);
		break;
	case P9_TSETATTR:
		io32(c, &m->u.tsetattr.fid);
		io32(c, &m->u.tsetattr.valid);
		io32(c, &m->u.tsetattr.mode);
		io32(c, &m->u.tsetattr.uid);
		io32(c, &m->u.tsetattr.gid);
		io64(c, &m->u.tsetattr.size);
		io64(c, &m->u.tsetattr.atime_sec);
		io64(c, &m->u.tsetattr.atime_nsec);
		io64(c, &m->u.tsetattr.mtime_sec);
		io64(c, &m->u.tsetattr.mtime_nsec);
		break;
	case P9_TXATTRWALK:
		io32(c, &m->u.txattrwalk.fid);
		io32(c, &m->u.txattrwalk.newfid);
		iostr(c, &m->u.txattrwalk.name);
		break;
	case P9_RXATTRWALK:
		io64(c, &m->u.rxattrwalk.size);
		break;
	case P9_TXATTRCREATE:
		io32(c, &m->u.txattrcreate.fid);
		iostr(c, &m->u.txattrcreate.name);
		io64(c, &m->u.txattrcreate.size);
		io32(c, &m->u.txattrcreate.flags);
		break;
	case P9_TREAD:
	case P9_TREADDIR:
		io32(c, &m->u.tread.fid);
		io64(c, &m->u.tread.offset);
		io32(c, &m->u.tread.count);
		break;
	case P9_RREAD:
	case P9_RREADDIR:
		iodata(c, &m->u.rdata);
		break;
	case P9_TWRITE:
		io32(c, &m->u.twrite.fid);
		io64(c, &m->u.twrite.offset);
		iodata(c, &m->u.twrite.d);
		break;
	case P9_RWRITE:
		io32(c, &m->u.rwrite.count);
		break;
	case P9_TFSYNC:
		io32(c, &m->u.tfsync.fid);
		io32(c, &m->u.tfsync.datasync);
		break;
	case P9_TLOCK:
		io32(c, &m->u.tlock.fid);
		io8(c, &m->u.tlock.type);
		io32(c, &m->u.tlock.flags);
		io64(c, &m->u.tlock.start);
		io64(c, &m->u.tlock.length);
		io32(c, &m->u.tlock.proc_id);
		iostr(c, &m->u.tlock.client_id);
		break;
	case P9_RLOCK:
		io8(c, &m->u.rlock.status);
		break;
	case P9_TGETLOCK:
		io32(c, &m->u.getlock.fid);
		/* fall through */
	case P9_RGETLOCK:
		io8(c, &m->u.getlock.type);
		io64(c, &m->u.getlock.start);
		io64(c, &m->u.getlock.length);
		io32(c, &m->u.getlock.proc_id);
		iostr(c, &m->u.getlock.client_id);
		break;
	case P9_TLINK:
		io32(c, &m->u.tlink.dfid);
		io32(c, &m->u.tlink.fid);
		iostr(c, &m->u.tlink.name);
		break;
	case P9_TMKDIR:
		io32(c, &m->u.tmkdir.dfid);
		iostr(c, &m->u.tmkdir.name);
		io32(c, &m->u.tmkdir.mode);
		io32(c, &m->u.tmkdir.gid);
		break;
	case P9_TRENAMEAT:
		io32(c, &m->u.trenameat.olddirfid);
		iostr(c, &m->u.trenameat.oldname);
		io32(c, &m->u.trenameat.newdirfid);
		iostr(c, &m->u.trenameat.newname);
		break;
	case P9_TUNLINKAT:
		io32(c, &m->u.tunlinkat.dfid);
		iostr(c, &m->u.tunlinkat.name);
		io32(c, &m->u.tunlinkat.flags);
		break;
	case P9_RRENAME:
	case P9_RSETATTR:
	case P9_RXATTRCREATE:
	case P9_RFSYNC:
	case P9_RLINK:
	case P9_RRENAMEAT:
	case P9_RUNLINKAT:
	case P9_RFLUSH:
	case P9_RCLUNK:
	case P9_RREMOVE:
		break;
	default:
		return -EOPNOTSUPP;
	}
	return c->err;
}

int p9_encode(const struct p9_msg *m, void *buf, size_t len)
{
	struct codec c = { .buf = buf, .len = len, .off = P9_HDRSZ, .enc = true };
	struct p9_msg tmp = *m;	/* the visitor takes non-const pointers */
	uint64_t total;
	int ret;

	if (len < P9_HDRSZ)
		return -ENOSPC;
	ret = io_body(&c, &tmp);
	if (ret)
		return ret;
	total = (uint64_t)c.off + c.extra;
	if (total > UINT32_MAX)
		return -EINVAL;
	p9_put32(c.buf, total);
	c.buf[4] = m->type;
	c.buf[5] = m->tag;
	c.buf[6] = m->tag >> 8;
	return c.off;
}

int p9_decode(const void *buf, size_t len, bool hdr_only, struct p9_msg *m)
{
	struct codec c = { .buf = (uint8_t *)buf, .len = len, .off = P9_HDRSZ,
			   .hdr_only = hdr_only };
	uint32_t size;
	int ret;

	if (len < P9_HDRSZ)
		return -EPROTO;
	size = p9_get32(buf);
	m->type = c.buf[4];
	m->tag = p9_get16(c.buf + 5);
	if (size < P9_HDRSZ || (!hdr_only && size != len))
		return -EPROTO;
	if (size < len)
		return -EPROTO;
	c.len = size < len ? size : len;
	ret = io_body(&c, m);
	if (ret)
		return ret;
	if (c.off + c.extra != size)
		return -EPROTO;
	return 0;
}

int p9_dirent_next(const void *data, size_t len, size_t *pos,
		   struct p9_dirent *d)
{
	struct codec c = { .buf = (uint8_t *)data, .len = len, .off = *pos };

	if (*pos >= len)
		return 0;
	ioqid(&c, &d->qid);
	io64(&c, &d->offset);
	io8(&c, &d->type);
	iostr(&c, &d->name);
	if (c.err)
		return -EPROTO;
	*pos = c.off;
	return 1;
}

const char *p9_type_name(uint8_t type)
{
	static const char *const names[] = {
		[P9_TLERROR] = "Tlerror", [P9_RLERROR] = "Rlerror",
		[P9_TSTATFS] = "Tstatfs", [P9_TLOPEN] = "Tlopen",
		[P9_TLCREATE] = "Tlcreate", [P9_TSYMLINK] = "Tsymlink",
		[P9_TMKNOD] = "Tmknod", [P9_TRENAME] = "Trename",
		[P9_TREADLINK] = "Treadlink", [P9_TGETATTR] = "Tgetattr",
		[P9_TSETATTR] = "Tsetattr", [P9_TXATTRWALK] = "Txattrwalk",
		[P9_TXATTRCREATE] = "Txattrcreate", [P9_TREADDIR] = "Treaddir",
		[P9_TFSYNC] = "Tfsync", [P9_TLOCK] = "Tlock",
		[P9_TGETLOCK] = "Tgetlock", [P9_TLINK] = "Tlink",
		[P9_TMKDIR] = "Tmkdir", [P9_TRENAMEAT] = "Trenameat",
		[P9_TUNLINKAT] = "Tunlinkat", [P9_TVERSION] = "Tversion",
		[P9_TAUTH] = "Tauth", [P9_TATTACH] = "Tattach",
		[P9_TFLUSH] = "Tflush", [P9_TWALK] = "Twalk",
		[P9_TREAD] = "Tread", [P9_TWRITE] = "Twrite",
		[P9_TCLUNK] = "Tclunk", [P9_TREMOVE] = "Tremove",
	};

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}
