/* LSI 53C895A DMA: guest (or on-chip RAM, or register window) addresses of
 * the SCRIPTS' moves, and the data phase of a command: READ/WRITE moves
 * gathered as iovecs on guest memory for the backend, parameter data
 * through a bounce buffer. */
#include <string.h>

#include "scsi/lsi_chip.h"
#include "scsi/lsi_internal.h"

void *lsi_dma_ptr(struct lsi *s, uint64_t addr, uint64_t len)
{
	if (s->ram_base && addr >= s->ram_base &&
	    addr - s->ram_base < LSI_RAM_SIZE) {
		uint64_t off = addr - s->ram_base;

		if (len > LSI_RAM_SIZE - off)
			return NULL;
		return s->ram + off;
	}
	return gmem_ptr(s->p.mem, addr, len);
}

int lsi_dma_reg(const struct lsi *s, uint64_t addr, uint64_t len)
{
	if (!s->mmio_base || addr < s->mmio_base ||
	    addr - s->mmio_base >= s->mmio_size ||
	    len > s->mmio_size - (addr - s->mmio_base))
		return -1;
	return (addr - s->mmio_base) & (LSI_NREGS - 1);
}

void lsi_seg_done(struct scsi_req *req, int res)
{
	struct lsi_cmd *c = container_of(req, struct lsi_cmd, req);
	struct lsi *s = c->s;

	c->seg_busy = false;
	c->niov = 0;
	c->seg_pos = c->pos;
	if (c->aborted || c->pos == c->xfer) {
		if (!c->ended) {
			c->ended = true;
			scsi_disk_end(req);	/* done() follows */
		}
		return;
	}
	if (c == s->cur)
		lsi_wake(s);	/* a move stalled on the full iovec array */
}

static void seg_submit(struct lsi *s, struct lsi_cmd *c)
{
	int ret;

	c->seg_busy = true;
	ret = scsi_disk_segment(&c->req, c->iov, c->niov, c->seg_pos);
	if (ret < 0) {
		/* Not queued (the target checked the range, the queue has a
		 * slot per command): the command still completes, with an
		 * error status instead of GOOD. */
		c->seg_failed = true;
		lsi_seg_done(&c->req, ret);
	}
}

/* Data phase of a READ/WRITE: gather the move as an iovec on guest memory.
 * The backend moves the data; nothing is copied here. */
int lsi_dma_direct(struct lsi *s, struct lsi_cmd *c, uint8_t *p,
		   uint32_t *count)
{
	uint32_t n = c->xfer - c->pos;
	struct iovec *last = c->niov ? &c->iov[c->niov - 1] : NULL;

	if (n > *count)
		n = *count;
	if (c->seg_busy)
		return LSI_BUS_WAIT;	/* the array is on its way */
	if (last && (uint8_t *)last->iov_base + last->iov_len == p) {
		last->iov_len += n;
	} else {
		if (c->niov == LSI_CMD_MAX_IOV) {
			seg_submit(s, c);
			if (c->seg_busy)
				return LSI_BUS_WAIT;
			/* it failed at once: the array is free again */
		}
		c->iov[c->niov].iov_base = p;
		c->iov[c->niov].iov_len = n;
		c->niov++;
	}
	c->pos += n;
	*count -= n;
	s->moved_data = true;
	if (c->pos == c->xfer)
		seg_submit(s, c);
	return LSI_BUS_OK;
}

int lsi_dma_param(struct lsi *s, struct lsi_cmd *c, uint8_t *p,
		  uint32_t *count)
{
	uint8_t *buf = (uint8_t *)c->param_iov.iov_base + c->pos;
	uint32_t n = c->xfer - c->pos;

	if (n > *count)
		n = *count;
	if (c->dir == SCSI_DIR_FROM_DEV) {
		memcpy(p, buf, n);
		s->regs[LSI_SFBR] = p[0];
		s->last_in = p[n - 1];
	} else {
		memcpy(buf, p, n);
		s->regs[LSI_SFBR] = p[0];
	}
	c->pos += n;
	*count -= n;
	s->moved_data = true;
	if (c->dir == SCSI_DIR_TO_DEV && c->pos == c->xfer) {
		struct lsi_target *t = &s->tgt[c->target];

		c->req.iov = &c->param_iov;
		c->req.iovcnt = 1;
		c->req.buf_len = c->xfer;
		c->req.buf_dir = SCSI_DIR_TO_DEV;
		c->submitted = true;
		scsi_disk_submit(t->disk, &c->req);
	}
	return LSI_BUS_OK;
}
