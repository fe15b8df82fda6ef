/* LSI 53C895A SCSI bus and the targets on it: selection and reselection,
 * phases, messages, and the hand-off of each command to its scsi/disk.c
 * logical unit. A command's data phase goes to the backend (lsi_dma.c); the
 * target then disconnects, accepts more commands, and reselects the
 * initiator when the status is ready, so reads and writes alike are queued
 * and no data is copied. */
#include <string.h>

#include "lib/log.h"
#include "scsi/lsi_chip.h"
#include "scsi/lsi_internal.h"

/* ---- commands ------------------------------------------------------------ */

/* Sense of a condition the HBA finds itself, in the format the target's
 * control mode page (D_SENSE) asks for, like the target's own. */
static void make_sense(struct lsi *s, struct lsi_cmd *c, uint8_t key,
		       uint16_t asc)
{
	c->req.sense_len = scsi_disk_sense(s->tgt[c->target].disk, key, asc,
					   c->req.sense);
}

static void param_put(struct lsi *s, struct lsi_cmd *c)
{
	if (c->param >= 0) {
		s->param_free |= 1u << c->param;
		c->param = -1;
	}
}

static bool param_get(struct lsi *s, struct lsi_cmd *c)
{
	if (!s->param_free)
		return false;
	c->param = __builtin_ctz(s->param_free);
	s->param_free &= ~(1u << c->param);
	c->param_iov.iov_base = s->param_mem + (size_t)c->param * SCSI_PARAM_MAX;
	c->param_iov.iov_len = SCSI_PARAM_MAX;
	return true;
}

static void resel_remove(struct lsi *s, struct lsi_cmd *c)
{
	struct lsi_cmd **pp;

	if (!c->queued)
		return;
	for (pp = &s->resel_head; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	s->resel_tail = &s->resel_head;
	while (*s->resel_tail)
		s->resel_tail = &(*s->resel_tail)->next;
	c->queued = false;
	c->next = NULL;
}

static void aborted_io_over(struct lsi *s, unsigned int target);
static void tgt_next(struct lsi *s);

static void cmd_free(struct lsi *s, struct lsi_cmd *c)
{
	if (c->abort_io) {
		c->abort_io = false;
		if (!--s->tgt[c->target].aborted_io)
			aborted_io_over(s, c->target);
	}
	resel_remove(s, c);
	if (s->cur == c)
		s->cur = NULL;
	param_put(s, c);
	c->in_use = false;
	c->next = s->free_cmds;
	s->free_cmds = c;
	s->active--;
	if (c->rw_counted)
		s->active_rw[c->dir == SCSI_DIR_TO_DEV]--;
}

static struct lsi_cmd *cmd_alloc(struct lsi *s)
{
	struct lsi_cmd *c = s->free_cmds;

	if (!c)
		return NULL;
	s->free_cmds = c->next;
	c->next = NULL;
	c->in_use = true;
	c->direct = c->began = c->ended = c->seg_busy = false;
	c->submitted = c->done = c->queued = c->aborted = false;
	c->own_status = c->seg_failed = c->rw_counted = c->abort_io = false;
	c->pos = c->seg_pos = c->xfer = 0;
	c->niov = 0;
	c->param = -1;
	c->status = SAM_STAT_GOOD;
	s->active++;
	return c;
}

/* Backend I/O of c is in flight: the target's done() will come. */
static bool cmd_busy(const struct lsi_cmd *c)
{
	return c->seg_busy || (c->submitted && !c->done) ||
	       (c->ended && !c->done);
}

/* c stays until its done(): counted in its target's aborted_io. */
static void abort_io_start(struct lsi *s, struct lsi_cmd *c)
{
	struct lsi_target *t = &s->tgt[c->target];

	c->abort_io = true;
	t->aborted_io++;
	t->aborted_batch++;
}

/* Drops a task (ABORT messages, bus reset). Its backend I/O, if any,
 * finishes first; it never reselects. */
static void cmd_abort(struct lsi *s, struct lsi_cmd *c, bool reset)
{
	resel_remove(s, c);
	if (s->cur == c)
		s->cur = NULL;
	c->aborted = true;
	s->aborted_total++;
	if (cmd_busy(c)) {
		scsi_disk_abort(&c->req, reset);
		abort_io_start(s, c);
		return;
	}
	if (c->began && !c->ended) {
		scsi_disk_abort(&c->req, reset);
		c->ended = true;
		scsi_disk_end(&c->req);	/* done() frees it, at once: the
					 * target starts no stage for an
					 * aborted request */
		return;
	}
	cmd_free(s, c);
}

/* The last command aborted on target has finished its backend I/O. */
static void aborted_io_over(struct lsi *s, unsigned int target)
{
	struct lsi_target *t = &s->tgt[target];

	log_rated_here(LOG_INFO, "lsi: target %u: the %u commands aborted have finished their backend I/O",
		       target, t->aborted_batch);
	t->aborted_batch = 0;
	if (s->connected && s->sel_hold && s->target == target) {
		s->sel_hold = false;	/* the target answers its selection */
		tgt_next(s);
		lsi_wake(s);
	}
}

/* Returns how many it aborted. */
static unsigned int abort_matching(struct lsi *s, int target, int lun,
				   int tag, bool reset)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < LSI_MAX_CMDS; i++) {
		struct lsi_cmd *c = &s->cmds[i];

		if (!c->in_use || c->aborted)
			continue;
		if (target >= 0 && c->target != target)
			continue;
		if (lun >= 0 && c->lun != lun)
			continue;
		if (tag != -2 && c->tag != tag)
			continue;
		cmd_abort(s, c, reset);
		n++;
	}
	return n;
}

static void cmd_ready(struct lsi *s, struct lsi_cmd *c)
{
	c->queued = true;
	c->next = NULL;
	*s->resel_tail = c;
	s->resel_tail = &c->next;
	lsi_wake(s);
}

static void lsi_req_done(struct scsi_req *req)
{
	struct lsi_cmd *c = container_of(req, struct lsi_cmd, req);
	struct lsi *s = c->s;

	if (c->aborted) {
		cmd_free(s, c);
		return;
	}
	c->done = true;
	switch (req->host) {
	case SCSI_HOST_OK:
		c->status = req->status;
		break;
	case SCSI_HOST_ABORTED:
	case SCSI_HOST_RESET:
		c->status = SAM_STAT_TASK_ABORTED;
		break;
	default:	/* buffer mismatch: cannot happen with our buffers */
		c->status = SAM_STAT_CHECK_CONDITION;
		make_sense(s, c, SENSE_HARDWARE_ERROR, 0x4400);
		break;
	}
	if (c->seg_failed && c->status == SAM_STAT_GOOD) {
		/* data the backend never saw must not report GOOD:
		 * INTERNAL TARGET FAILURE */
		c->status = SAM_STAT_CHECK_CONDITION;
		make_sense(s, c, SENSE_HARDWARE_ERROR, 0x4400);
	}
	if (!c->direct && c->dir == SCSI_DIR_FROM_DEV) {
		/* Non-direct data-in: the data phase follows, for what the
		 * target produced. */
		uint64_t n = req->xferred;

		if (req->host != SCSI_HOST_OK)
			n = 0;
		c->xfer = n < c->param_iov.iov_len ? n : c->param_iov.iov_len;
		c->pos = 0;
	}
	if (c == s->cur) {
		if (s->req_wait) {
			tgt_next(s);
			lsi_wake(s);
		}
		return;
	}
	cmd_ready(s, c);
}

/* ---- the target side of the bus ---------------------------------------- */

static void set_phase(struct lsi *s, uint8_t phase)
{
	s->phase = phase;
	s->req_wait = false;
}

static void msgin_push(struct lsi *s, uint8_t b)
{
	if (s->msgin_len < LSI_MSG_MAX)
		s->msgin[s->msgin_len++] = b;
}

static void bus_free(struct lsi *s)
{
	s->connected = false;
	s->req_wait = false;
	s->atn = false;
	s->ack = false;
	s->cur = NULL;
	s->phase = 0;
	s->msgin_len = s->msgin_pos = 0;
	s->msgout_len = 0;
	s->cdb_len = s->cdb_need = 0;
	s->selecting = false;
	s->sel_hold = false;
	s->bus_status = -1;
	s->regs[LSI_SCNTL1] &= ~LSI_SCNTL1_CON;
	s->regs[LSI_SSID] &= 0x7f;
}

/* The target decides what it wants after each bus event. */
static void tgt_next(struct lsi *s)
{
	struct lsi_cmd *c = s->cur;

	if (s->sel_hold) {
		s->req_wait = true;	/* no REQ yet: see lsi_bus_select */
		return;
	}

	if (s->msgin_pos < s->msgin_len) {
		set_phase(s, LSI_PHASE_MSG_IN);
		return;
	}
	s->msgin_len = s->msgin_pos = 0;
	if (s->atn) {
		set_phase(s, LSI_PHASE_MSG_OUT);
		return;
	}
	if (!c) {
		if (s->bus_status >= 0)
			set_phase(s, LSI_PHASE_STATUS);
		else
			set_phase(s, LSI_PHASE_COMMAND);
		return;
	}
	if (c->pos < c->xfer) {
		if (c->direct ||
		    (c->dir == SCSI_DIR_TO_DEV && !c->submitted) ||
		    (c->dir == SCSI_DIR_FROM_DEV && c->done)) {
			set_phase(s, c->dir == SCSI_DIR_FROM_DEV ?
					     LSI_PHASE_DATA_IN :
					     LSI_PHASE_DATA_OUT);
			return;
		}
	}
	if (c->done) {
		set_phase(s, LSI_PHASE_STATUS);
		return;
	}
	if (s->disc_priv) {
		/* The backend has it: free the bus for other commands and
		 * reselect when the status is ready. */
		if (s->moved_data)
			msgin_push(s, LSI_MSG_SAVE_DP);
		msgin_push(s, LSI_MSG_DISCONNECT);
		s->after_msgin = LSI_AFTER_FREE;
		s->disconnecting = c;
		set_phase(s, LSI_PHASE_MSG_IN);
		return;
	}
	s->req_wait = true;	/* no disconnect privilege: hold the bus */
}

static unsigned int cdb_size(uint8_t op)
{
	static const uint8_t len[8] = { 6, 10, 10, 10, 16, 12, 10, 10 };

	return len[op >> 5];
}

/* A tag (or the one untagged slot) of this I_T_L still in use. An untagged
 * command beside tagged ones is allowed: sym53c8xx sends its REQUEST SENSE
 * untagged while other tagged commands are disconnected. */
static bool tag_overlaps(struct lsi *s, unsigned int target, unsigned int lun,
			 int tag)
{
	for (unsigned int i = 0; i < LSI_MAX_CMDS; i++) {
		const struct lsi_cmd *c = &s->cmds[i];

		if (!c->in_use || c->aborted || c->target != target ||
		    c->lun != lun)
			continue;
		if (c->tag == tag)
			return true;
	}
	return false;
}

static void own_check(struct lsi *s, struct lsi_cmd *c, uint8_t key,
		      uint16_t asc)
{
	c->own_status = true;
	c->done = true;
	c->status = SAM_STAT_CHECK_CONDITION;
	make_sense(s, c, key, asc);
	c->xfer = 0;
}

/* The CDB is in: decode it, record the direction, and start it. */
static void cmd_start(struct lsi *s)
{
	struct lsi_target *t = &s->tgt[s->target];
	struct lsi_cmd *c;
	struct scsi_cmd_info info;
	bool lun_ok = scsi_lun_present(&t->luns, s->lun);

	bool overlap = tag_overlaps(s, s->target, s->lun, s->sel_tag);

	s->selecting = false;
	if (overlap) {
		/* A tag still in use: the initiator lost track. Abort the
		 * task set as SAM asks, then report the overlap. */
		abort_matching(s, s->target, s->lun, -2, false);
	}
	c = cmd_alloc(s);
	if (!c) {
		s->bus_status = SAM_STAT_TASK_SET_FULL;
		tgt_next(s);
		return;
	}
	c->target = s->target;
	c->lun = s->lun;
	c->tag = s->sel_tag;
	memcpy(c->req.cdb, s->cdb, sizeof(c->req.cdb));
	c->req.cdb_len = s->cdb_len;
	c->req.q = s->q;
	c->req.done = lsi_req_done;
	c->req.seg_done = lsi_seg_done;
	c->req.iov = NULL;
	c->req.iovcnt = 0;
	c->req.buf_len = 0;
	c->req.buf_dir = SCSI_DIR_NONE;
	c->req.sense_len = 0;
	s->cur = c;
	if (overlap) {
		own_check(s, c, SENSE_ABORTED_COMMAND, 0x4e00);
		tgt_next(s);
		return;
	}

	if (s->cdb[0] == 0x03 && t->sense_len && t->sense_lun == s->lun) {
		/* REQUEST SENSE after our CHECK CONDITION: the sense we kept. */
		uint32_t alloc = s->cdb[4];

		if (!param_get(s, c)) {
			s->cur = NULL;
			cmd_free(s, c);
			s->bus_status = SAM_STAT_BUSY;
			tgt_next(s);
			return;
		}
		memcpy(c->param_iov.iov_base, t->sense, t->sense_len);
		c->dir = SCSI_DIR_FROM_DEV;
		c->xfer = alloc < t->sense_len ? alloc : t->sense_len;
		c->own_status = true;
		c->done = true;
		c->status = SAM_STAT_GOOD;
		t->sense_len = 0;
		tgt_next(s);
		return;
	}
	if (t->sense_lun == s->lun)
		t->sense_len = 0;	/* contingent allegiance ends */

	if (lun_ok) {
		scsi_disk_decode(t->disk, s->cdb, s->cdb_len, &info);
	} else {
		info.dir = s->cdb[0] == 0x12 || s->cdb[0] == 0xa0 ||
					   s->cdb[0] == 0x03 ?
				   SCSI_DIR_FROM_DEV :
				   SCSI_DIR_NONE;
		info.xfer = SCSI_PARAM_MAX;
		info.direct = false;
	}
	c->dir = info.dir;
	c->xfer = info.dir == SCSI_DIR_NONE ? 0 : info.xfer;
	c->direct = info.direct;

	if (c->direct && c->dir != SCSI_DIR_NONE) {
		unsigned int w = c->dir == SCSI_DIR_TO_DEV;

		c->rw_counted = true;
		if (++s->active_rw[w] > s->peak_rw[w])
			s->peak_rw[w] = s->active_rw[w];
	}
	if (c->direct) {
		if (scsi_disk_begin(t->disk, &c->req) == 1) {
			/* done() ran: CHECK CONDITION, no data phase */
			c->xfer = 0;
			tgt_next(s);
			return;
		}
		c->began = true;
		if (!c->xfer) {
			c->ended = true;
			scsi_disk_end(&c->req);
		}
		tgt_next(s);
		return;
	}
	if (c->dir == SCSI_DIR_TO_DEV && c->xfer > SCSI_PARAM_MAX) {
		own_check(s, c, SENSE_ILLEGAL_REQUEST, 0x1a00);
		tgt_next(s);
		return;
	}
	if (c->dir != SCSI_DIR_NONE && !param_get(s, c)) {
		s->cur = NULL;
		cmd_free(s, c);
		s->bus_status = SAM_STAT_BUSY;
		tgt_next(s);
		return;
	}
	if (c->dir == SCSI_DIR_TO_DEV) {
		c->param_iov.iov_len = c->xfer;
		tgt_next(s);	/* data-out first, submit when it is in */
		return;
	}
	if (c->dir == SCSI_DIR_FROM_DEV) {
		if (c->xfer < c->param_iov.iov_len)
			c->param_iov.iov_len = c->xfer;
		c->req.iov = &c->param_iov;
		c->req.iovcnt = 1;
		c->req.buf_len = c->param_iov.iov_len;
		c->req.buf_dir = SCSI_DIR_FROM_DEV;
		c->xfer = 0;	/* known when done() reports xferred */
	}
	c->submitted = true;
	if (lun_ok)
		scsi_disk_submit(t->disk, &c->req);
	else
		scsi_lun_absent_submit(&t->luns, &c->req);
	tgt_next(s);
}

/* Parses one complete message from the initiator. Returns true when the
 * bytes so far are a whole message. */
static bool msgout_complete(struct lsi *s)
{
	uint8_t *m = s->msgout;
	unsigned int n = s->msgout_len;

	if (m[0] & LSI_MSG_IDENTIFY)
		return true;
	if (m[0] >= 0x20 && m[0] <= 0x2f)
		return n >= 2;
	if (m[0] == LSI_MSG_EXTENDED)
		return n >= 2 && n >= 2u + (m[1] ? m[1] : 256);
	return true;
}

static void msgout_exec(struct lsi *s)
{
	uint8_t *m = s->msgout;
	struct lsi_target *t = &s->tgt[s->target];

	if (m[0] & LSI_MSG_IDENTIFY) {
		s->lun = m[0] & 0x07;
		s->disc_priv = m[0] & 0x40;
		s->identified = true;
		return;
	}
	switch (m[0]) {
	case LSI_MSG_SIMPLE_TAG:
	case LSI_MSG_HEAD_TAG:
	case LSI_MSG_ORDERED_TAG:
		if (!s->selecting) {
			msgin_push(s, LSI_MSG_REJECT);
			return;
		}
		s->sel_tag = m[1];
		return;
	case LSI_MSG_EXTENDED:
		if (m[2] == LSI_EXT_SDTR && m[1] == 3) {
			/* We move data at memory speed whatever the bus
			 * timing: answer asynchronous (offset 0). */
			msgin_push(s, LSI_MSG_EXTENDED);
			msgin_push(s, 3);
			msgin_push(s, LSI_EXT_SDTR);
			msgin_push(s, m[3]);
			msgin_push(s, 0);
			return;
		}
		if (m[2] == LSI_EXT_WDTR && m[1] == 2) {
			/* Narrow transfers: no odd-byte (WSR/WSS) cases. */
			msgin_push(s, LSI_MSG_EXTENDED);
			msgin_push(s, 2);
			msgin_push(s, LSI_EXT_WDTR);
			msgin_push(s, 0);
			return;
		}
		msgin_push(s, LSI_MSG_REJECT);	/* PPR and others */
		return;
	case LSI_MSG_ABORT:
		abort_matching(s, s->target, s->lun, -2, false);
		s->msgout_abort = true;
		return;
	case LSI_MSG_ABORT_TAG:
		if (s->cur)
			cmd_abort(s, s->cur, false);
		else if (s->sel_tag >= 0)
			abort_matching(s, s->target, s->lun, s->sel_tag, false);
		s->msgout_abort = true;
		return;
	case LSI_MSG_CLEAR_QUEUE:
		abort_matching(s, s->target, s->lun, -2, false);
		s->msgout_abort = true;
		return;
	case LSI_MSG_BUS_DEVICE_RESET:
		abort_matching(s, s->target, -1, -2, true);
		if (t->disk)
			scsi_disk_reset(t->disk, false);
		t->sense_len = 0;
		s->msgout_abort = true;
		return;
	case LSI_MSG_NOP:
	case LSI_MSG_REJECT:	/* the initiator refused ours: fine */
	case LSI_MSG_INITIATOR_DET_ERR:
	case LSI_MSG_PARITY_ERROR:
		return;
	default:
		msgin_push(s, LSI_MSG_REJECT);
		return;
	}
}

static void msgout_byte(struct lsi *s, uint8_t b)
{
	if (s->msgout_skip) {
		s->msgout_skip--;
		return;
	}
	s->msgout[s->msgout_len++] = b;
	if (s->msgout_len == 2 && s->msgout[0] == LSI_MSG_EXTENDED &&
	    2u + (s->msgout[1] ? s->msgout[1] : 256) > LSI_MSG_MAX) {
		/* Longer than any message we implement: reject, skip it. */
		s->msgout_skip = s->msgout[1] ? s->msgout[1] : 256;
		s->msgout_len = 0;
		msgin_push(s, LSI_MSG_REJECT);
		return;
	}
	if (!msgout_complete(s))
		return;
	msgout_exec(s);
	s->msgout_len = 0;
}

/* ---- bus services for the SCRIPTS processor ---------------------------- */

static void ack_release(struct lsi *s)
{
	if (!s->ack_hold)
		return;
	s->ack_hold = false;
	if (s->after_msgin == LSI_AFTER_FREE) {
		struct lsi_cmd *c = s->disconnecting;

		s->after_msgin = LSI_AFTER_NEXT;
		s->disconnecting = NULL;
		bus_free(s);
		if (c && c->in_use && c->done && !c->aborted && !c->queued)
			cmd_ready(s, c);	/* completed meanwhile */
		return;
	}
	tgt_next(s);
}

int lsi_bus_phase(struct lsi *s)
{
	ack_release(s);
	if (!s->connected)
		return -LSI_BUS_FREE;
	if (s->req_wait)
		return -LSI_BUS_WAIT;
	return s->phase;
}

void lsi_bus_set_atn(struct lsi *s, bool on)
{
	s->atn = on;
	if (on)
		s->regs[LSI_SOCL] |= LSI_SOCL_ATN;
	else
		s->regs[LSI_SOCL] &= ~LSI_SOCL_ATN;
	/* The target answers ATN at its next REQ: MESSAGE OUT. A message
	 * being received (ACK held) finishes first. */
	if (on && s->connected && !s->ack_hold && !s->req_wait &&
	    s->phase != LSI_PHASE_MSG_IN)
		set_phase(s, LSI_PHASE_MSG_OUT);
}

void lsi_bus_set_ack(struct lsi *s)
{
	s->ack = true;
}

void lsi_bus_clear_ack(struct lsi *s)
{
	s->ack = false;
	ack_release(s);
}

bool lsi_bus_connected(struct lsi *s)
{
	ack_release(s);
	return s->connected;
}

int lsi_bus_select(struct lsi *s, unsigned int id, bool atn)
{
	s->bus_events++;
	s->regs[LSI_SSTAT0] |= LSI_SSTAT0_WOA;
	if (id >= LSI_MAX_TARGETS || id == LSI_HOST_ID || !s->tgt[id].disk) {
		s->sto_pending = true;
		return LSI_BUS_FREE;
	}
	bus_free(s);
	s->connected = true;
	s->regs[LSI_SCNTL1] |= LSI_SCNTL1_CON;
	s->target = id;
	s->lun = 0;
	s->sel_tag = -1;
	s->identified = false;
	s->disc_priv = false;
	s->selecting = true;
	s->moved_data = false;
	s->msgout_abort = false;
	s->msgout_skip = 0;
	lsi_bus_set_atn(s, atn);
	tgt_next(s);
	if (s->tgt[id].aborted_io) {
		/* Commands a reset or an ABORT took from this target still
		 * have backend I/O in flight, on iovecs into guest memory the
		 * initiator has taken back: a WRITE among them would write
		 * what the buffer holds when it runs, over a retry that has
		 * completed since. So the target asserts no REQ until that
		 * I/O has finished (aborted_io_over): nothing sent after the
		 * abort can complete before it, and the driver gets no buffer
		 * back that the backend still reads. Like QEMU's drain on a
		 * reset, but no thread waits: SCRIPTS wait for REQ. */
		s->sel_hold = true;
		s->req_wait = true;
		log_rated_here(LOG_INFO, "lsi: target %u selected while %u aborted commands have backend I/O in flight: it answers once they have finished",
			       id, s->tgt[id].aborted_io);
	}
	return LSI_BUS_OK;
}

bool lsi_bus_reselect(struct lsi *s)
{
	struct lsi_cmd *c = s->resel_head;

	if (s->connected || !c)
		return false;
	s->bus_events++;
	s->resel_head = c->next;
	if (!s->resel_head)
		s->resel_tail = &s->resel_head;
	c->queued = false;
	c->next = NULL;
	bus_free(s);
	s->connected = true;
	s->regs[LSI_SCNTL1] |= LSI_SCNTL1_CON;
	s->target = c->target;
	s->lun = c->lun;
	s->sel_tag = c->tag;
	s->identified = true;
	s->disc_priv = true;
	s->moved_data = false;
	s->msgout_abort = false;
	s->msgout_skip = 0;
	s->cur = c;
	s->regs[LSI_SSID] = 0x80 | c->target;
	if (!(s->regs[LSI_DCNTL] & LSI_DCNTL_COM))
		s->regs[LSI_SFBR] = 1u << (c->target & 7);
	/* a target's IDENTIFY has DiscPriv clear */
	msgin_push(s, LSI_MSG_IDENTIFY | c->lun);
	if (c->tag >= 0) {
		msgin_push(s, LSI_MSG_SIMPLE_TAG);
		msgin_push(s, (uint8_t)c->tag);
	}
	set_phase(s, LSI_PHASE_MSG_IN);
	if (s->regs[LSI_SIEN0] & LSI_SIST0_RSL)
		lsi_scsi_interrupt(s, LSI_SIST0_RSL, 0);
	return true;
}

static int move_msgin(struct lsi *s, uint8_t *p, uint32_t *count)
{
	uint32_t avail = s->msgin_len - s->msgin_pos;
	uint32_t n = *count < avail ? *count : avail;

	memcpy(p, s->msgin + s->msgin_pos, n);
	s->regs[LSI_SFBR] = p[0];
	s->last_in = p[n - 1];
	s->msgin_pos += n;
	*count -= n;
	if (s->msgin_pos == s->msgin_len) {
		/* The initiator holds ACK on the last byte: the target acts
		 * once it is released (CLR ACK, or the next bus operation). */
		s->msgin_len = s->msgin_pos = 0;
		s->ack_hold = true;
	}
	return LSI_BUS_OK;
}

static int move_msgout(struct lsi *s, const uint8_t *p, uint32_t *count)
{
	uint32_t n = *count;

	s->regs[LSI_SFBR] = p[0];
	for (uint32_t i = 0; i < n; i++)
		msgout_byte(s, p[i]);
	*count = 0;
	/* ATN drops with the last byte of a MESSAGE OUT move. */
	lsi_bus_set_atn(s, false);
	s->msgout_len = 0;
	s->msgout_skip = 0;
	if (s->msgout_abort) {
		s->msgout_abort = false;
		bus_free(s);
		return LSI_BUS_OK;
	}
	tgt_next(s);
	return LSI_BUS_OK;
}

static int move_command(struct lsi *s, const uint8_t *p, uint32_t *count)
{
	uint32_t n;

	if (!s->cdb_len)
		s->cdb_need = cdb_size(p[0]);
	n = s->cdb_need - s->cdb_len;
	if (n > *count)
		n = *count;
	memcpy(s->cdb + s->cdb_len, p, n);
	s->regs[LSI_SFBR] = p[0];
	s->cdb_len += n;
	*count -= n;
	if (s->cdb_len == s->cdb_need)
		cmd_start(s);
	return LSI_BUS_OK;
}

static void keep_sense(struct lsi *s, const struct lsi_cmd *c)
{
	struct lsi_target *t = &s->tgt[s->target];
	uint8_t n = c->req.sense_len;

	if (n > SCSI_SENSE_MAX)
		n = SCSI_SENSE_MAX;
	memcpy(t->sense, c->req.sense, n);
	t->sense_len = n;
	t->sense_lun = c->lun;
}

static int move_status(struct lsi *s, uint8_t *p, uint32_t *count)
{
	struct lsi_cmd *c = s->cur;
	uint8_t st;

	if (c) {
		st = c->status;
		if (st == SAM_STAT_CHECK_CONDITION && c->req.sense_len)
			keep_sense(s, c);
		cmd_free(s, c);
	} else {
		st = s->bus_status;
		s->bus_status = -1;
	}
	p[0] = st;
	s->regs[LSI_SFBR] = st;
	s->last_in = st;
	*count -= 1;
	msgin_push(s, LSI_MSG_COMMAND_COMPLETE);
	s->after_msgin = LSI_AFTER_FREE;
	s->disconnecting = NULL;
	set_phase(s, LSI_PHASE_MSG_IN);
	return LSI_BUS_OK;
}

int lsi_bus_move(struct lsi *s, uint64_t addr, uint32_t *count)
{
	uint8_t *p;
	int ret;

	s->bus_events++;
	if (!*count)
		return LSI_BUS_OK;
	p = lsi_dma_ptr(s, addr, *count);
	if (!p)
		return LSI_BUS_FAULT;
	switch (s->phase) {
	case LSI_PHASE_MSG_IN:
		return move_msgin(s, p, count);
	case LSI_PHASE_MSG_OUT:
		return move_msgout(s, p, count);
	case LSI_PHASE_COMMAND:
		return move_command(s, p, count);
	case LSI_PHASE_STATUS:
		return move_status(s, p, count);
	case LSI_PHASE_DATA_IN:
	case LSI_PHASE_DATA_OUT:
		if (!s->cur)
			return LSI_BUS_FREE;
		ret = s->cur->direct ? lsi_dma_direct(s, s->cur, p, count) :
				       lsi_dma_param(s, s->cur, p, count);
		if (ret == LSI_BUS_OK && s->cur && s->cur->pos == s->cur->xfer)
			tgt_next(s);
		return ret;
	}
	return LSI_BUS_FREE;
}

/* ---- resets -------------------------------------------------------------- */

/* SCSI bus reset: every target drops every task. */
void lsi_bus_reset(struct lsi *s, const char *why)
{
	unsigned int n, busy = 0;

	n = abort_matching(s, -1, -1, -2, true);
	for (unsigned int i = 0; i < LSI_MAX_TARGETS; i++)
		busy += s->tgt[i].aborted_io;
	if (n || busy)
		log_rated_here(LOG_INFO, "lsi: %s: %u commands aborted; %u aborted commands have backend I/O in flight",
			       why, n, busy);
	for (unsigned int i = 0; i < LSI_MAX_TARGETS; i++) {
		if (s->tgt[i].disk)
			scsi_disk_reset(s->tgt[i].disk, false);
		s->tgt[i].sense_len = 0;
	}
	s->after_msgin = LSI_AFTER_NEXT;
	s->disconnecting = NULL;
	s->ack_hold = false;
	bus_free(s);
	s->sto_pending = false;
}
