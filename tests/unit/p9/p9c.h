/* A minimal synchronous 9P client over p9_call, for the unit tests: encodes
 * a T-message, runs it through the server, decodes the reply. */
#ifndef TESTS_P9C_H
#define TESTS_P9C_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "p9/proto.h"
#include "p9/server.h"

struct p9c {
	struct p9_session *s;
	uint8_t *out;
	size_t outsz;
	uint8_t req[16384];
	struct p9_msg r;	/* last reply */
	size_t rlen;
};

static inline struct p9_str S(const char *s)
{
	return (struct p9_str){ strlen(s), s };
}

/* Sends raw bytes; returns the reply length. */
static inline size_t p9c_raw(struct p9c *c, const void *buf, size_t len)
{
	struct iovec in = { (void *)buf, len };
	struct iovec out = { c->out, c->outsz };

	c->rlen = p9_call(c->s, &in, 1, &out, 1);
	return c->rlen;
}

/* 0 when the reply is the matching R-message, -ecode for Rlerror, -EIO
 * for anything else. */
static inline int p9c_decode_reply(struct p9c *c, uint8_t ttype)
{
	if (!c->rlen || p9_decode(c->out, c->rlen, false, &c->r))
		return -EIO;
	if (c->r.type == P9_RLERROR)
		return -(int)c->r.u.rlerror.ecode;
	return c->r.type == ttype + 1 ? 0 : -EIO;
}

static inline int p9c_rpc(struct p9c *c, struct p9_msg *t)
{
	size_t need = sizeof(c->req);
	uint8_t *buf = c->req;
	int len, ret;

	if (t->type == P9_TWRITE)
		need = P9_TWRITE_HDRSZ + t->u.twrite.d.count;
	if (need > sizeof(c->req))
		buf = malloc(need);
	t->tag = 1;
	len = p9_encode(t, buf, need);
	if (len < 0) {
		if (buf != c->req)
			free(buf);
		return len;
	}
	p9c_raw(c, buf, len);
	if (buf != c->req)
		free(buf);
	ret = p9c_decode_reply(c, t->type);
	return ret;
}

static inline int p9c_version(struct p9c *c, uint32_t msize)
{
	struct p9_msg t = { .type = P9_TVERSION };

	t.u.version.msize = msize;
	t.u.version.version = S(P9_VERSION_L);
	return p9c_rpc(c, &t);
}

static inline int p9c_attach(struct p9c *c, uint32_t fid)
{
	struct p9_msg t = { .type = P9_TATTACH };

	t.u.tattach.fid = fid;
	t.u.tattach.afid = P9_NOFID;
	t.u.tattach.uname = S("root");
	t.u.tattach.aname = S("");
	t.u.tattach.n_uname = 0;
	return p9c_rpc(c, &t);
}

/* Walks a '/'-separated path (up to 16 names) from fid to newfid. */
static inline int p9c_walk(struct p9c *c, uint32_t fid, uint32_t newfid,
			   const char *path)
{
	struct p9_msg t = { .type = P9_TWALK };
	char tmp[1024], *save = NULL, *tok;
	int ret;

	t.u.twalk.fid = fid;
	t.u.twalk.newfid = newfid;
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (tok = strtok_r(tmp, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save))
		t.u.twalk.wname[t.u.twalk.nwname++] = S(tok);
	ret = p9c_rpc(c, &t);
	if (!ret && c->r.u.rwalk.nwqid != t.u.twalk.nwname)
		return -ENOENT;	/* partial walk */
	return ret;
}

static inline int p9c_fidop(struct p9c *c, uint8_t type, uint32_t fid)
{
	struct p9_msg t = { .type = type };

	t.u.tfid.fid = fid;
	return p9c_rpc(c, &t);
}

static inline int p9c_lopen(struct p9c *c, uint32_t fid, uint32_t flags)
{
	struct p9_msg t = { .type = P9_TLOPEN };

	t.u.tlopen.fid = fid;
	t.u.tlopen.flags = flags;
	return p9c_rpc(c, &t);
}

static inline int p9c_lcreate(struct p9c *c, uint32_t fid, const char *name,
			      uint32_t flags, uint32_t mode)
{
	struct p9_msg t = { .type = P9_TLCREATE };

	t.u.tlcreate.fid = fid;
	t.u.tlcreate.name = S(name);
	t.u.tlcreate.flags = flags;
	t.u.tlcreate.mode = mode;
	t.u.tlcreate.gid = 0;
	return p9c_rpc(c, &t);
}

static inline int p9c_write(struct p9c *c, uint32_t fid, uint64_t off,
			    const void *data, uint32_t count)
{
	struct p9_msg t = { .type = P9_TWRITE };

	t.u.twrite.fid = fid;
	t.u.twrite.offset = off;
	t.u.twrite.d = (struct p9_data){ count, data };
	return p9c_rpc(c, &t);
}

static inline int p9c_read(struct p9c *c, uint32_t fid, uint64_t off,
			   uint32_t count)
{
	struct p9_msg t = { .type = P9_TREAD };

	t.u.tread.fid = fid;
	t.u.tread.offset = off;
	t.u.tread.count = count;
	return p9c_rpc(c, &t);
}

static inline int p9c_getattr(struct p9c *c, uint32_t fid)
{
	struct p9_msg t = { .type = P9_TGETATTR };

	t.u.tgetattr.fid = fid;
	t.u.tgetattr.mask = P9_GETATTR_BASIC;
	return p9c_rpc(c, &t);
}

static inline int p9c_mkdir(struct p9c *c, uint32_t dfid, const char *name,
			    uint32_t mode)
{
	struct p9_msg t = { .type = P9_TMKDIR };

	t.u.tmkdir.dfid = dfid;
	t.u.tmkdir.name = S(name);
	t.u.tmkdir.mode = mode;
	return p9c_rpc(c, &t);
}

static inline int p9c_symlink(struct p9c *c, uint32_t dfid, const char *name,
			      const char *target)
{
	struct p9_msg t = { .type = P9_TSYMLINK };

	t.u.tsymlink.fid = dfid;
	t.u.tsymlink.name = S(name);
	t.u.tsymlink.target = S(target);
	return p9c_rpc(c, &t);
}

static inline int p9c_unlinkat(struct p9c *c, uint32_t dfid, const char *name,
			       uint32_t flags)
{
	struct p9_msg t = { .type = P9_TUNLINKAT };

	t.u.tunlinkat.dfid = dfid;
	t.u.tunlinkat.name = S(name);
	t.u.tunlinkat.flags = flags;
	return p9c_rpc(c, &t);
}

static inline int p9c_renameat(struct p9c *c, uint32_t od, const char *on,
			       uint32_t nd, const char *nn)
{
	struct p9_msg t = { .type = P9_TRENAMEAT };

	t.u.trenameat.olddirfid = od;
	t.u.trenameat.oldname = S(on);
	t.u.trenameat.newdirfid = nd;
	t.u.trenameat.newname = S(nn);
	return p9c_rpc(c, &t);
}

static inline int p9c_readdir(struct p9c *c, uint32_t fid, uint64_t off,
			      uint32_t count)
{
	struct p9_msg t = { .type = P9_TREADDIR };

	t.u.tread.fid = fid;
	t.u.tread.offset = off;
	t.u.tread.count = count;
	return p9c_rpc(c, &t);
}

#endif
