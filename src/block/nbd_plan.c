/* The NBD driver's pure parts: command planning, export checks and
 * reconnect timing (nbd_plan.h). */
#include <errno.h>

#include "block/nbd_plan.h"

/* The gathered runs so far: iovecs from first to the current run, len
 * bytes at off, in runs runs (one: it goes from where it is). */
struct gathered {
	unsigned int first, runs;
	uint64_t len, off;
};

static int send_gathered(enum nbd_plan_cmd kind, uint32_t flags, const struct iovec *iov,
			 unsigned int end, struct gathered *g,
			 int (*send)(void *opaque, const struct nbd_cmd *cmd),
			 void *opaque)
{
	struct nbd_cmd cmd = { .cmd = kind, .flags = flags, .iov = iov + g->first,
			       .iovcnt = end - g->first, .len = g->len, .off = g->off };
	unsigned int i = g->first;

	if (!g->runs)
		return 0;
	if (g->runs == 1) {
		while (!iov[i].iov_len)
			i++;
		cmd = (struct nbd_cmd){ .cmd = kind, .flags = flags, .buf = iov[i].iov_base,
					.len = g->len, .off = g->off };
	}
	g->runs = 0;
	return send(opaque, &cmd);
}

int nbd_plan_commands(enum nbd_plan_cmd kind, uint32_t flags, const struct iovec *iov,
		      unsigned int iovcnt, uint64_t offset, uint64_t max,
		      const struct nbd_gather *how,
		      int (*send)(void *opaque, const struct nbd_cmd *cmd),
		      void *opaque)
{
	uint64_t direct = how && how->max ? how->direct : 0;
	uint64_t gather = how ? how->max : 0;
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
		if (len < direct) {
			if (g.runs && g.len + len > gather &&
			    (ret = send_gathered(kind, flags, iov, start, &g, send, opaque)))
				return ret;
			if (!g.runs)
				g = (struct gathered){ start, 0, 0, offset };
			g.runs++;
			g.len += len;
			offset += len;
			continue;
		}
		if ((ret = send_gathered(kind, flags, iov, start, &g, send, opaque)))
			return ret;
		while (len) {
			struct nbd_cmd cmd = { .cmd = kind, .flags = flags, .buf = base,
					       .len = len < max ? len : max, .off = offset };

			if ((ret = send(opaque, &cmd)))
				return ret;
			base += cmd.len;
			offset += cmd.len;
			len -= cmd.len;
		}
	}
	return send_gathered(kind, flags, iov, iovcnt, &g, send, opaque);
}

/* A TRIM or WRITE_ZEROES range, in pieces the protocol can carry. */
static int send_range(struct nbd_cmd *c, uint64_t offset, uint64_t len,
		      int (*send)(void *opaque, const struct nbd_cmd *cmd),
		      void *opaque)
{
	while (len) {
		int ret;

		c->off = offset;
		c->len = len < NBD_MAX_RANGE ? len : NBD_MAX_RANGE;
		ret = send(opaque, c);
		if (ret)
			return ret;
		offset += c->len;
		len -= c->len;
	}
	return 0;
}

static bool in_export(const struct nbd_export *e, uint64_t offset, uint64_t len)
{
	if (offset > e->size || len > e->size - offset)
		return false;
	return e->min_block <= 1 || (!(offset % e->min_block) && !(len % e->min_block));
}

int nbd_plan_request(const struct nbd_export *e, enum blk_op op,
		     const struct iovec *iov, unsigned int iovcnt,
		     uint64_t offset, uint64_t len, const struct nbd_gather *g,
		     int (*send)(void *opaque, const struct nbd_cmd *cmd),
		     void *opaque)
{
	struct nbd_gather cut = { 0 };
	struct nbd_cmd c = { 0 };

	if (op == BLK_OP_FLUSH) {
		if (!e->can_flush)
			return NBD_PLAN_NOTHING;
		c.cmd = NBD_PLAN_FLUSH;
		return send(opaque, &c);
	}
	if ((op == BLK_OP_DISCARD && !e->can_trim) ||
	    ((op == BLK_OP_WRITE_ZEROES || op == BLK_OP_ZERO_UNMAP) && !e->can_zero))
		return -EOPNOTSUPP;
	if (!in_export(e, offset, len) || (op != BLK_OP_READ && e->ro))
		return -EIO;
	switch (op) {
	case BLK_OP_READ:
	case BLK_OP_WRITE:
		if (g) {
			cut.max = g->max < e->max_payload ? g->max : e->max_payload;
			cut.direct = g->direct < cut.max ? g->direct : cut.max;
		}
		if (op == BLK_OP_READ)
			return nbd_plan_commands(NBD_PLAN_READ, 0, iov, iovcnt, offset,
						 e->max_payload, &cut, send, opaque);
		return nbd_plan_commands(NBD_PLAN_WRITE, e->fua_writes ? NBD_PLAN_FLAG_FUA : 0,
					 iov, iovcnt, offset, e->max_payload, &cut,
					 send, opaque);
	case BLK_OP_DISCARD:
		c.cmd = NBD_PLAN_TRIM;
		break;
	case BLK_OP_WRITE_ZEROES:
		/* The guest said not to deallocate (virtio-blk WRITE_ZEROES
		 * without UNMAP; SCSI WRITE SAME without UNMAP): NO_HOLE. */
		c.cmd = NBD_PLAN_ZERO;
		c.flags = NBD_PLAN_FLAG_NO_HOLE;
		break;
	case BLK_OP_ZERO_UNMAP:
		/* Zeroes, deallocated if the server likes (virtio-blk's UNMAP
		 * flag, SCSI WRITE SAME with UNMAP). Never FAST_ZERO: it asks
		 * the server to fail at once rather than write zeroes slowly,
		 * for a client that would then do something else (qemu-img
		 * skipping a pre-zeroing pass). No guest request means that:
		 * virtio-blk and SCSI promise zeroes however long it takes,
		 * and a guest told its zeroing failed would see an I/O error
		 * on a command the device offered, not a fallback. */
		c.cmd = NBD_PLAN_ZERO;
		break;
	default:
		return -EINVAL;
	}
	if (c.cmd == NBD_PLAN_ZERO && e->fua_writes)
		c.flags |= NBD_PLAN_FLAG_FUA;
	return send_range(&c, offset, len, send, opaque);
}

unsigned int nbd_plan_export_changes(const struct nbd_export *was,
				     const struct nbd_export *now)
{
	unsigned int changed = 0;

	if (was->size != now->size)
		changed |= NBD_CHANGED_SIZE;
	if (was->ro != now->ro)
		changed |= NBD_CHANGED_RO;
	if (was->min_block != now->min_block)
		changed |= NBD_CHANGED_MIN_BLOCK;
	if (was->can_flush != now->can_flush || was->can_trim != now->can_trim ||
	    was->can_zero != now->can_zero)
		changed |= NBD_CHANGED_FEATURES;
	if (was->multi_conn != now->multi_conn)
		changed |= NBD_CHANGED_MULTI_CONN;
	return changed;
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
	rc->attempting = false;
	rc->backoff_ns *= 2;
	if (rc->backoff_ns > NBD_BACKOFF_MAX_NS)
		rc->backoff_ns = NBD_BACKOFF_MAX_NS;
	rc->next_try = now + rc->backoff_ns;
}

bool nbd_rc_try_now(const struct nbd_reconnect *rc, uint64_t now)
{
	return rc->down && !rc->attempting && now >= rc->next_try;
}

uint64_t nbd_rc_attempt_ns(const struct nbd_reconnect *rc)
{
	return rc->timeout_ns < NBD_ATTEMPT_MAX_NS ? rc->timeout_ns : NBD_ATTEMPT_MAX_NS;
}

void nbd_rc_attempt(struct nbd_reconnect *rc, uint64_t now)
{
	rc->attempting = true;
	rc->attempt_until = now + nbd_rc_attempt_ns(rc);
}

bool nbd_rc_attempt_overdue(const struct nbd_reconnect *rc, uint64_t now)
{
	return rc->attempting && now >= rc->attempt_until;
}

bool nbd_rc_stalled(struct nbd_reconnect *rc, uint64_t now, uint64_t replies,
		    bool owing)
{
	if (!owing || replies != rc->replies_seen) {
		rc->replies_seen = replies;
		rc->quiet_since = now;
		return false;
	}
	return now - rc->quiet_since >= rc->timeout_ns;
}

uint64_t nbd_rc_stall_due(const struct nbd_reconnect *rc)
{
	return rc->quiet_since + rc->timeout_ns;
}

void nbd_rc_silent(struct nbd_reconnect *rc, uint64_t now)
{
	rc->down = true;
	rc->fresh = false;
	rc->attempting = false;
	rc->down_since = rc->quiet_since;
	rc->backoff_ns = NBD_BACKOFF_FIRST_NS;
	rc->next_try = now;
}

bool nbd_rc_up(struct nbd_reconnect *rc)
{
	bool outage = rc->down && !rc->fresh;

	rc->down = rc->fresh = rc->attempting = false;
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
	uint64_t next = rc->attempting ? rc->attempt_until : rc->next_try;

	if (!rc->down)
		return now;
	if (nbd_rc_expired(rc, now) || next < give_up)
		return next;
	return give_up;
}
