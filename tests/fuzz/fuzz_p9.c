/* libFuzzer harness for the 9P2000.L decoder and the server's dispatcher:
 * the input is a session's worth of client messages served against a
 * small temporary folder. The server must answer each with a well-formed
 * reply (or nothing when even Rlerror does not fit), never crash, and
 * never leak fids, open files or descriptors past the session.
 *
 * Input: [u8 reply piece size][records...], record = [u16 len][len bytes]
 * (the length is independent of the message's own size field, so sizes
 * that disagree with the buffer are reached too). */
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/log.h"
#include "p9/proto.h"
#include "p9/server.h"

#define MSIZE 65536
#define MAX_RECORDS 64

static struct p9_server *srv;
static uint8_t reply[MSIZE];

static void make_tree(const char *dir)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/file", dir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	snprintf(p, sizeof(p), "%s/dir", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/dir/inner", dir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	snprintf(p, sizeof(p), "%s/link", dir);
	if (symlink("/etc", p) && 0)
		abort();
	snprintf(p, sizeof(p), "%s/up", dir);
	if (symlink("..", p) && 0)
		abort();
}

static char dir[] = "/tmp/p9fuzz.XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(path) && 0;
}

static void cleanup(void)
{
	p9_server_close(srv);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct p9_server_cfg cfg = { .msize = MSIZE };
	char err[256];

	log_threshold = LOG_ERR;
	if (!mkdtemp(dir))
		abort();
	make_tree(dir);
	cfg.path = dir;
	/* Small limits, so the fuzzer reaches them. */
	cfg.lim.max_fids = 64;
	cfg.lim.max_open = 8;
	cfg.lim.max_pending = 4;
	cfg.lim.max_fds = 256;
	cfg.lim.xattr_budget = 4096;
	if (p9_server_open(&cfg, &srv, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	atexit(cleanup);
	return 0;
}

static void check_reply(const uint8_t *r, size_t len, size_t room)
{
	struct p9_msg m;

	if (!len)
		return;
	if (len > room || len < P9_HDRSZ || p9_get32(r) != len)
		abort();
	if (p9_decode(r, len, false, &m))
		abort();	/* the server produced a malformed reply */
	if (!(m.type & 1))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct p9_session *s;
	struct p9_stats st;
	size_t pos = 1, piece;
	int records = 0;

	if (size < 1)
		return 0;
	piece = data[0] ? data[0] : sizeof(reply);
	s = p9_session_new(srv);
	if (!s)
		abort();
	while (pos + 2 <= size && records++ < MAX_RECORDS) {
		size_t len = data[pos] | data[pos + 1] << 8;
		struct iovec in[8], out[64];
		unsigned int nin = 0, nout = 0;
		uint8_t *msg;
		size_t off, rlen, room = 0;

		pos += 2;
		if (len > size - pos)
			len = size - pos;
		/* A private copy: the server may only read the request, and
		 * ASan catches any access past it. */
		msg = malloc(len ? len : 1);
		memcpy(msg, data + pos, len);
		pos += len;
		for (off = 0; off < len && nin < 8; nin++) {
			size_t l = nin == 7 ? len - off : (len - off + 1) / 2;

			in[nin] = (struct iovec){ msg + off, l };
			off += l;
		}
		for (off = 0; off < sizeof(reply) && nout < 64; nout++) {
			size_t l = nout == 63 ? sizeof(reply) - off : piece;

			if (l > sizeof(reply) - off)
				l = sizeof(reply) - off;
			out[nout] = (struct iovec){ reply + off, l };
			off += l;
			room += l;
		}
		rlen = p9_call(s, in, nin, out, nout);
		check_reply(reply, rlen, room);
		free(msg);
	}
	p9_session_free(s);
	/* Everything the session held is gone: only the root node remains. */
	s = p9_session_new(srv);
	p9_session_stats(s, &st);
	if (st.nodes != 1 || st.fids || st.open || st.pending)
		abort();
	p9_session_free(s);
	return 0;
}
