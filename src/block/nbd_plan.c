/* The NBD driver's pure parts: command planning and reconnect timing
 * (nbd_plan.h). */
#include <stddef.h>

#include "block/nbd_plan.h"

int nbd_plan_segments(const struct iovec *iov, unsigned int iovcnt,
		      uint64_t offset, uint64_t max,
		      int (*send)(void *opaque, void *buf, uint64_t len,
				  uint64_t off),
		      void *opaque)
{
	unsigned int i = 0;

	while (i < iovcnt) {
		char *base = iov[i].iov_base;
		uint64_t len = iov[i].iov_len;

		/* a run of iovecs that follow each other in memory */
		for (i++; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue;
			if ((char *)iov[i].iov_base != base + len)
				break;
			len += iov[i].iov_len;
		}
		while (len) {
			uint64_t n = len < max ? len : max;
			int ret = send(opaque, base, n, offset);

			if (ret)
				return ret;
			base += n;
			offset += n;
			len -= n;
		}
	}
	return 0;
}

/* The gathered runs so far: iovecs from first to the current run, len
 * bytes at off, in runs runs (one: it goes from where it is). */
struct gathered {
	unsigned int first, runs;
	uint64_t len, off;
};

static int send_gathered(const struct iovec *iov, unsigned int end,
			 struct gathered *g,
			 int (*send)(void *opaque, const struct nbd_cmd *cmd),
			 void *opaque)
{
	struct nbd_cmd cmd = { NULL, iov + g->first, end - g->first, g->len, g->off };
	unsigned int i = g->first;

	if (!g->runs)
		return 0;
	if (g->runs == 1) {
		while (!iov[i].iov_len)
			i++;
		cmd = (struct nbd_cmd){ iov[i].iov_base, NULL, 0, g->len, g->off };
	}
	g->runs = 0;
	return send(opaque, &cmd);
}

int nbd_plan_commands(const struct iovec *iov, unsigned int iovcnt,
		      uint64_t offset, uint64_t max, uint64_t gather,
		      int (*send)(void *opaque, const struct nbd_cmd *cmd),
		      void *opaque)
{
	struct gathered g = { 0 };
	unsigned int i = 0;
	int ret;

	while (i < iovcnt) {
		unsigned int start = i;
		char *base = iov[i].iov_base;
		uint64_t len = iov[i].iov_len;

		for (i++; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue;
			if (!len) {	/* the run starts at its first byte */
				base = iov[i].iov_base;
				len = iov[i].iov_len;
				continue;
			}
			if ((char *)iov[i].iov_base != base + len)
				break;
			len += iov[i].iov_len;
		}
		if (!len)
			continue;
		if (len < gather) {
			if (g.runs && g.len + len > gather &&
			    (ret = send_gathered(iov, start, &g, send, opaque)))
				return ret;
			if (!g.runs)
				g = (struct gathered){ start, 0, 0, offset };
			g.runs++;
			g.len += len;
			offset += len;
			continue;
		}
		if ((ret = send_gathered(iov, start, &g, send, opaque)))
			return ret;
		while (len) {
			struct nbd_cmd cmd = { base, NULL, 0, len < max ? len : max, offset };

			if ((ret = send(opaque, &cmd)))
				return ret;
			base += cmd.len;
			offset += cmd.len;
			len -= cmd.len;
		}
	}
	return send_gathered(iov, iovcnt, &g, send, opaque);
}

void nbd_rc_init(struct nbd_reconnect *rc, uint64_t timeout_ns)
{
	*rc = (struct nbd_reconnect){ .timeout_ns = timeout_ns,
				      .backoff_ns = NBD_BACKOFF_FIRST_NS };
}

void nbd_rc_lost(struct nbd_reconnect *rc, uint64_t now, bool fresh)
{
	if (rc->down) {
		nbd_rc_failed(rc, now);
		return;
	}
	rc->down = true;
	rc->fresh = fresh;
	rc->down_since = now;
	rc->backoff_ns = NBD_BACKOFF_FIRST_NS;
	rc->next_try = fresh ? now : now + rc->backoff_ns;
}

void nbd_rc_failed(struct nbd_reconnect *rc, uint64_t now)
{
	rc->backoff_ns *= 2;
	if (rc->backoff_ns > NBD_BACKOFF_MAX_NS)
		rc->backoff_ns = NBD_BACKOFF_MAX_NS;
	rc->next_try = now + rc->backoff_ns;
}

bool nbd_rc_try_now(const struct nbd_reconnect *rc, uint64_t now)
{
	return rc->down && now >= rc->next_try;
}

bool nbd_rc_up(struct nbd_reconnect *rc)
{
	bool outage = rc->down && !rc->fresh;

	rc->down = rc->fresh = false;
	rc->backoff_ns = NBD_BACKOFF_FIRST_NS;
	return outage;
}

bool nbd_rc_expired(const struct nbd_reconnect *rc, uint64_t now)
{
	return rc->down && now - rc->down_since >= rc->timeout_ns;
}

uint64_t nbd_rc_next_event(const struct nbd_reconnect *rc, uint64_t now)
{
	uint64_t give_up = rc->down_since + rc->timeout_ns;

	if (!rc->down)
		return now;
	if (nbd_rc_expired(rc, now) || rc->next_try < give_up)
		return rc->next_try;
	return give_up;
}
