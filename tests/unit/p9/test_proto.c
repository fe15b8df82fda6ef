/* 9P2000.L codec: every message encodes and decodes back to the same bytes
 * and fields; malformed buffers are refused with the right errno. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "p9/proto.h"

static struct p9_str S(const char *s)
{
	return (struct p9_str){ strlen(s), s };
}

static const struct p9_qid Q = { P9_QTDIR, 0x01020304, 0x1122334455667788ull };

/* One filled-in example of every message type. */
static int sample(uint8_t type, struct p9_msg *m)
{
	static const char payload[] = "payload bytes";

	memset(m, 0, sizeof(*m));
	m->type = type;
	m->tag = 0xbeef;
	switch (type) {
	case P9_TVERSION: case P9_RVERSION:
		m->u.version.msize = 512000;
		m->u.version.version = S(P9_VERSION_L);
		break;
	case P9_TAUTH:
		m->u.tauth.afid = 3;
		m->u.tauth.uname = S("user");
		m->u.tauth.aname = S("/srv");
		m->u.tauth.n_uname = 1000;
		break;
	case P9_TATTACH:
		m->u.tattach.fid = 1;
		m->u.tattach.afid = P9_NOFID;
		m->u.tattach.uname = S("root");
		m->u.tattach.aname = S("");
		m->u.tattach.n_uname = 0;
		break;
	case P9_RAUTH: case P9_RATTACH: case P9_RSYMLINK: case P9_RMKNOD:
	case P9_RMKDIR:
		m->u.rqid.qid = Q;
		break;
	case P9_RLERROR:
		m->u.rlerror.ecode = ENOENT;
		break;
	case P9_TFLUSH:
		m->u.tflush.oldtag = 77;
		break;
	case P9_TWALK:
		m->u.twalk.fid = 1;
		m->u.twalk.newfid = 2;
		m->u.twalk.nwname = P9_MAXWELEM;
		for (int i = 0; i < P9_MAXWELEM; i++)
			m->u.twalk.wname[i] = S(i & 1 ? "odd" : "even-name");
		break;
	case P9_RWALK:
		m->u.rwalk.nwqid = 3;
		for (int i = 0; i < 3; i++) {
			m->u.rwalk.wqid[i] = Q;
			m->u.rwalk.wqid[i].path += i;
		}
		break;
	case P9_TSTATFS: case P9_TREADLINK: case P9_TCLUNK: case P9_TREMOVE:
		m->u.tfid.fid = 42;
		break;
	case P9_RSTATFS:
		m->u.rstatfs.type = 0xef53;
		m->u.rstatfs.bsize = 4096;
		m->u.rstatfs.blocks = 1000000;
		m->u.rstatfs.bfree = 500000;
		m->u.rstatfs.bavail = 400000;
		m->u.rstatfs.files = 65536;
		m->u.rstatfs.ffree = 60000;
		m->u.rstatfs.fsid = 0xabcdef0123ull;
		m->u.rstatfs.namelen = 255;
		break;
	case P9_TLOPEN:
		m->u.tlopen.fid = 5;
		m->u.tlopen.flags = 02;
		break;
	case P9_RLOPEN: case P9_RLCREATE:
		m->u.ropen.qid = Q;
		m->u.ropen.iounit = 8192;
		break;
	case P9_TLCREATE:
		m->u.tlcreate.fid = 5;
		m->u.tlcreate.name = S("new.txt");
		m->u.tlcreate.flags = 0102;
		m->u.tlcreate.mode = 0644;
		m->u.tlcreate.gid = 100;
		break;
	case P9_TSYMLINK:
		m->u.tsymlink.fid = 5;
		m->u.tsymlink.name = S("link");
		m->u.tsymlink.target = S("../target/path");
		m->u.tsymlink.gid = 100;
		break;
	case P9_TMKNOD:
		m->u.tmknod.dfid = 5;
		m->u.tmknod.name = S("fifo");
		m->u.tmknod.mode = 010644;
		m->u.tmknod.major = 1;
		m->u.tmknod.minor = 2;
		m->u.tmknod.gid = 7;
		break;
	case P9_TRENAME:
		m->u.trename.fid = 5;
		m->u.trename.dfid = 6;
		m->u.trename.name = S("renamed");
		break;
	case P9_RREADLINK:
		m->u.rreadlink.target = S("/abs/target");
		break;
	case P9_TGETATTR:
		m->u.tgetattr.fid = 9;
		m->u.tgetattr.mask = P9_GETATTR_BASIC;
		break;
	case P9_RGETATTR:
		m->u.rgetattr.valid = P9_GETATTR_BASIC;
		m->u.rgetattr.qid = Q;
		m->u.rgetattr.a.mode = 0100644;
		m->u.rgetattr.a.uid = 1000;
		m->u.rgetattr.a.gid = 1001;
		m->u.rgetattr.a.nlink = 2;
		m->u.rgetattr.a.size = 1ull << 40;
		m->u.rgetattr.a.blksize = 4096;
		m->u.rgetattr.a.blocks = 8;
		m->u.rgetattr.a.mtime_sec = 1700000000;
		m->u.rgetattr.a.mtime_nsec = 999999999;
		m->u.rgetattr.a.data_version = 3;
		break;
	case P9_TSETATTR:
		m->u.tsetattr.fid = 9;
		m->u.tsetattr.valid = P9_SETATTR_MODE | P9_SETATTR_SIZE;
		m->u.tsetattr.mode = 0600;
		m->u.tsetattr.uid = 1;
		m->u.tsetattr.gid = 2;
		m->u.tsetattr.size = 12345;
		m->u.tsetattr.atime_sec = 1;
		m->u.tsetattr.atime_nsec = 2;
		m->u.tsetattr.mtime_sec = 3;
		m->u.tsetattr.mtime_nsec = 4;
		break;
	case P9_TXATTRWALK:
		m->u.txattrwalk.fid = 1;
		m->u.txattrwalk.newfid = 2;
		m->u.txattrwalk.name = S("user.test");
		break;
	case P9_RXATTRWALK:
		m->u.rxattrwalk.size = 99;
		break;
	case P9_TXATTRCREATE:
		m->u.txattrcreate.fid = 1;
		m->u.txattrcreate.name = S("user.test");
		m->u.txattrcreate.size = 5;
		m->u.txattrcreate.flags = 1;
		break;
	case P9_TREAD: case P9_TREADDIR:
		m->u.tread.fid = 3;
		m->u.tread.offset = 1ull << 33;
		m->u.tread.count = 4096;
		break;
	case P9_RREAD: case P9_RREADDIR:
		m->u.rdata = (struct p9_data){ sizeof(payload), payload };
		break;
	case P9_TWRITE:
		m->u.twrite.fid = 3;
		m->u.twrite.offset = 77;
		m->u.twrite.d = (struct p9_data){ sizeof(payload), payload };
		break;
	case P9_RWRITE:
		m->u.rwrite.count = 4096;
		break;
	case P9_TFSYNC:
		m->u.tfsync.fid = 3;
		m->u.tfsync.datasync = 1;
		break;
	case P9_TLOCK:
		m->u.tlock.fid = 3;
		m->u.tlock.type = P9_LOCK_TYPE_WRLCK;
		m->u.tlock.flags = P9_LOCK_FLAGS_BLOCK;
		m->u.tlock.start = 10;
		m->u.tlock.length = 20;
		m->u.tlock.proc_id = 1234;
		m->u.tlock.client_id = S("guest");
		break;
	case P9_RLOCK:
		m->u.rlock.status = P9_LOCK_BLOCKED;
		break;
	case P9_TGETLOCK: case P9_RGETLOCK:
		m->u.getlock.fid = type == P9_TGETLOCK ? 3 : 0;
		m->u.getlock.type = P9_LOCK_TYPE_RDLCK;
		m->u.getlock.start = 1;
		m->u.getlock.length = 2;
		m->u.getlock.proc_id = 3;
		m->u.getlock.client_id = S("guest");
		break;
	case P9_TLINK:
		m->u.tlink.dfid = 1;
		m->u.tlink.fid = 2;
		m->u.tlink.name = S("hard");
		break;
	case P9_TMKDIR:
		m->u.tmkdir.dfid = 1;
		m->u.tmkdir.name = S("dir");
		m->u.tmkdir.mode = 0755;
		m->u.tmkdir.gid = 5;
		break;
	case P9_TRENAMEAT:
		m->u.trenameat.olddirfid = 1;
		m->u.trenameat.oldname = S("a");
		m->u.trenameat.newdirfid = 2;
		m->u.trenameat.newname = S("b");
		break;
	case P9_TUNLINKAT:
		m->u.tunlinkat.dfid = 1;
		m->u.tunlinkat.name = S("gone");
		m->u.tunlinkat.flags = P9_AT_REMOVEDIR;
		break;
	case P9_RRENAME: case P9_RSETATTR: case P9_RXATTRCREATE: case P9_RFSYNC:
	case P9_RLINK: case P9_RRENAMEAT: case P9_RUNLINKAT: case P9_RFLUSH:
	case P9_RCLUNK: case P9_RREMOVE:
		break;
	default:
		return -1;
	}
	return 0;
}

static const uint8_t all_types[] = {
	P9_RLERROR, P9_TSTATFS, P9_RSTATFS, P9_TLOPEN, P9_RLOPEN, P9_TLCREATE,
	P9_RLCREATE, P9_TSYMLINK, P9_RSYMLINK, P9_TMKNOD, P9_RMKNOD, P9_TRENAME,
	P9_RRENAME, P9_TREADLINK, P9_RREADLINK, P9_TGETATTR, P9_RGETATTR,
	P9_TSETATTR, P9_RSETATTR, P9_TXATTRWALK, P9_RXATTRWALK, P9_TXATTRCREATE,
	P9_RXATTRCREATE, P9_TREADDIR, P9_RREADDIR, P9_TFSYNC, P9_RFSYNC,
	P9_TLOCK, P9_RLOCK, P9_TGETLOCK, P9_RGETLOCK, P9_TLINK, P9_RLINK,
	P9_TMKDIR, P9_RMKDIR, P9_TRENAMEAT, P9_RRENAMEAT, P9_TUNLINKAT,
	P9_RUNLINKAT, P9_TVERSION, P9_RVERSION, P9_TAUTH, P9_RAUTH, P9_TATTACH,
	P9_RATTACH, P9_TFLUSH, P9_RFLUSH, P9_TWALK, P9_RWALK, P9_TREAD,
	P9_RREAD, P9_TWRITE, P9_RWRITE, P9_TCLUNK, P9_RCLUNK, P9_TREMOVE,
	P9_RREMOVE,
};

static void test_round_trip_every_message(void **state)
{
	uint8_t a[1024], b[1024];

	for (size_t i = 0; i < sizeof(all_types); i++) {
		struct p9_msg m, d;
		int la, lb;

		assert_int_equal(sample(all_types[i], &m), 0);
		la = p9_encode(&m, a, sizeof(a));
		assert_true(la >= P9_HDRSZ);
		assert_int_equal(p9_get32(a), la);
		assert_int_equal(p9_decode(a, la, false, &d), 0);
		assert_int_equal(d.type, m.type);
		assert_int_equal(d.tag, m.tag);
		lb = p9_encode(&d, b, sizeof(b));
		assert_int_equal(la, lb);
		assert_memory_equal(a, b, la);
		/* Every shorter buffer is refused as malformed. */
		for (int cut = 0; cut < la; cut++) {
			struct p9_msg x;

			assert_int_not_equal(p9_decode(a, cut, false, &x), 0);
		}
		/* and so is every encode buffer too small. */
		for (int cut = 0; cut < la; cut++)
			assert_int_equal(p9_encode(&m, b, cut), -ENOSPC);
	}
}

static void test_fields_survive(void **state)
{
	uint8_t a[1024];
	struct p9_msg m, d;
	int len;

	sample(P9_TWALK, &m);
	len = p9_encode(&m, a, sizeof(a));
	assert_int_equal(p9_decode(a, len, false, &d), 0);
	assert_int_equal(d.u.twalk.nwname, P9_MAXWELEM);
	assert_int_equal(d.u.twalk.wname[15].len, 3);
	assert_memory_equal(d.u.twalk.wname[15].s, "odd", 3);

	sample(P9_RGETATTR, &m);
	memset(&d, 0, sizeof(d));	/* the attr struct has padding */
	len = p9_encode(&m, a, sizeof(a));
	assert_int_equal(len, 160);	/* Linux's fixed Rgetattr size */
	assert_int_equal(p9_decode(a, len, false, &d), 0);
	assert_memory_equal(&d.u.rgetattr.a, &m.u.rgetattr.a, sizeof(m.u.rgetattr.a));
	assert_int_equal(d.u.rgetattr.qid.path, Q.path);

	sample(P9_TWRITE, &m);
	len = p9_encode(&m, a, sizeof(a));
	assert_int_equal(p9_decode(a, len, false, &d), 0);
	assert_int_equal(d.u.twrite.d.count, m.u.twrite.d.count);
	assert_memory_equal(d.u.twrite.d.data, m.u.twrite.d.data, m.u.twrite.d.count);
}

/* A payload left out of the buffer is still counted in size[4]: the
 * scatter-gather layout of Twrite and Rread. */
static void test_header_only_payload(void **state)
{
	uint8_t a[64];
	struct p9_msg m, d;
	int len;

	sample(P9_TWRITE, &m);
	m.u.twrite.d = (struct p9_data){ 1u << 22, NULL };
	len = p9_encode(&m, a, sizeof(a));
	assert_int_equal(len, P9_TWRITE_HDRSZ);
	assert_int_equal(p9_get32(a), P9_TWRITE_HDRSZ + (1u << 22));
	assert_int_equal(p9_decode(a, len, true, &d), 0);
	assert_null(d.u.twrite.d.data);
	assert_int_equal(d.u.twrite.d.count, 1u << 22);
	/* Not header-only: size disagrees with the buffer. */
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);

	sample(P9_RREAD, &m);
	m.u.rdata = (struct p9_data){ 100, NULL };
	len = p9_encode(&m, a, sizeof(a));
	assert_int_equal(len, P9_IOHDRSZ);
	assert_int_equal(p9_get32(a), P9_IOHDRSZ + 100);
}

static void test_hostile(void **state)
{
	uint8_t a[1024];
	struct p9_msg m, d;
	int len;

	sample(P9_TLCREATE, &m);
	len = p9_encode(&m, a, sizeof(a));
	/* size field larger / smaller than the buffer */
	p9_put32(a, len + 1);
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);
	p9_put32(a, len - 1);
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);
	p9_put32(a, 3);
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);
	p9_put32(a, len);
	/* string length running past the end */
	a[P9_HDRSZ + 4] = 0xff;
	a[P9_HDRSZ + 5] = 0xff;
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);
	/* trailing bytes after the last field */
	sample(P9_TCLUNK, &m);
	len = p9_encode(&m, a, sizeof(a));
	a[len] = 0;
	p9_put32(a, len + 1);
	assert_int_equal(p9_decode(a, len + 1, false, &d), -EPROTO);
	/* walk over 16 names */
	sample(P9_TWALK, &m);
	len = p9_encode(&m, a, sizeof(a));
	a[P9_HDRSZ + 8] = 17;
	assert_int_equal(p9_decode(a, len, false, &d), -EINVAL);
	m.u.twalk.nwname = 17;
	assert_int_equal(p9_encode(&m, a, sizeof(a)), -EINVAL);
	/* unknown type */
	sample(P9_TCLUNK, &m);
	len = p9_encode(&m, a, sizeof(a));
	a[4] = 99;
	assert_int_equal(p9_decode(a, len, false, &d), -EOPNOTSUPP);
	/* Twrite count larger than the data present */
	sample(P9_TWRITE, &m);
	len = p9_encode(&m, a, sizeof(a));
	p9_put32(a + P9_HDRSZ + 12, 1000);
	assert_int_equal(p9_decode(a, len, false, &d), -EPROTO);
}

static void test_dirents(void **state)
{
	uint8_t buf[256];
	size_t pos = 0, len = 0;
	struct p9_dirent d;
	const char *names[] = { ".", "..", "file" };

	for (int i = 0; i < 3; i++) {
		size_t nl = strlen(names[i]);
		uint8_t *p = buf + len;

		memset(p, 0, p9_dirent_size(nl));
		p[0] = i == 2 ? P9_QTFILE : P9_QTDIR;
		p[5] = 10 + i;		/* qid.path */
		p[13] = i + 1;		/* offset */
		p[21] = i == 2 ? 8 : 4;	/* DT_REG, DT_DIR */
		p[22] = nl;
		memcpy(p + 24, names[i], nl);
		len += p9_dirent_size(nl);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(p9_dirent_next(buf, len, &pos, &d), 1);
		assert_int_equal(d.qid.path, 10 + i);
		assert_int_equal(d.offset, i + 1);
		assert_int_equal(d.name.len, strlen(names[i]));
		assert_memory_equal(d.name.s, names[i], d.name.len);
	}
	assert_int_equal(p9_dirent_next(buf, len, &pos, &d), 0);
	pos = 0;
	assert_int_equal(p9_dirent_next(buf, len - 1, &pos, &d), 1);
	assert_int_equal(p9_dirent_next(buf, len - 1, &pos, &d), 1);
	assert_int_equal(p9_dirent_next(buf, len - 1, &pos, &d), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_every_message),
		cmocka_unit_test(test_fields_survive),
		cmocka_unit_test(test_header_only_payload),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_dirents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
