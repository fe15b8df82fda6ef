/* SCSI disk target: persistent reservations (SPC-4 PERSISTENT RESERVE IN/
 * OUT, all six types, APTPL) and SPC-2 RESERVE(6)/RELEASE(6): the service
 * actions, the conflict rules every command passes, and the unit
 * attentions of a nexus whose registration another process removed. The
 * state lives in disk_prfile.c's file, shared by every process on the
 * image; each process is one I_T nexus, named by its pr-id. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"
#include "scsi/disk_pr.h"

#define ASC_INVALID_RELEASE 0x2604	/* INVALID RELEASE OF PERSISTENT RESERVATION */
#define ASC_INSUFFICIENT_REG 0x5504	/* INSUFFICIENT REGISTRATION RESOURCES */

enum { PRI_READ_KEYS, PRI_READ_RESERVATION, PRI_REPORT_CAPS, PRI_FULL_STATUS };
enum { PRO_REGISTER, PRO_RESERVE, PRO_RELEASE, PRO_CLEAR, PRO_PREEMPT,
       PRO_PREEMPT_ABORT, PRO_REGISTER_IGNORE };

#define PRO_PARAM_LEN 24

/* ---- the state and what it means for one nexus ---- */

int pr_find(const struct pr_state *st, const char *id)
{
	for (uint32_t i = 0; i < st->nregs && i < PR_MAX_REGS; i++)
		if (!strncmp(st->regs[i].id, id, PR_ID_MAX))
			return i;
	return -1;
}

static bool all_regs(uint8_t type)
{
	return type == PR_WE_AR || type == PR_EA_AR;
}

static bool type_ok(uint8_t type)
{
	return type == PR_WE || type == PR_EA || type == PR_WE_RO ||
	       type == PR_EA_RO || type == PR_WE_AR || type == PR_EA_AR;
}

static bool is_holder(const struct pr_state *st, const char *id)
{
	if (!st->type)
		return false;
	if (all_regs(st->type))
		return pr_find(st, id) >= 0;
	return !strncmp(st->holder, id, PR_ID_MAX);
}

uint8_t pr_decide(const struct pr_state *st, const char *id)
{
	bool reg = pr_find(st, id) >= 0;

	if (st->spc2[0] && strncmp(st->spc2, id, PR_ID_MAX))
		return PR_BLOCK_SPC2;
	if (!st->type || is_holder(st, id))
		return 0;
	switch (st->type) {
	case PR_WE:
		return PR_BLOCK_WRITE;
	case PR_EA:
		return PR_BLOCK_WRITE | PR_BLOCK_READ;
	case PR_WE_RO: case PR_WE_AR:
		return reg ? 0 : PR_BLOCK_WRITE;
	default:	/* EA_RO, EA_AR */
		return reg ? 0 : PR_BLOCK_WRITE | PR_BLOCK_READ;
	}
}

/* SPC-4's and SBC-3's tables of commands in the presence of reservations,
 * by class: always allowed, reads (blocked by exclusive access), writes
 * (blocked by every type; any command not named here counts as one), and
 * those an SPC-2 reservation of another nexus lets through. */
enum pr_class { PC_ALLOWED, PC_SPC2_OK, PC_READ, PC_WRITE };

static enum pr_class classify(const uint8_t *cdb, unsigned int len)
{
	switch (cdb[0]) {
	case INQUIRY: case REPORT_LUNS: case REQUEST_SENSE: case MAINTENANCE_IN:
	case RELEASE_6:
		return PC_SPC2_OK;
	case TEST_UNIT_READY: case READ_CAPACITY_10: case RESERVE_6:
	case PERSISTENT_RESERVE_IN: case PERSISTENT_RESERVE_OUT:
		return PC_ALLOWED;
	case SERVICE_ACTION_IN_16:	/* READ CAPACITY(16); GET LBA STATUS reads */
		return len > 1 && (cdb[1] & 0x1f) == SAI_READ_CAPACITY_16 ?
		       PC_ALLOWED : PC_READ;
	case READ_6: case READ_10: case READ_12: case READ_16:
	case VERIFY_10: case VERIFY_12: case VERIFY_16:
	case MODE_SENSE_6: case MODE_SENSE_10:
	case PRE_FETCH_10: case PRE_FETCH_16:
	case READ_DEFECT_10: case READ_DEFECT_12:
	case 0x3c: case 0x4d: case 0x84: /* READ BUFFER, LOG SENSE, RECEIVE
					  * COPY RESULTS */
		return PC_READ;
	case START_STOP_UNIT:		/* START=1, no power condition: allowed */
		return len > 4 && (cdb[4] & 0xf1) == 0x01 ? PC_ALLOWED : PC_WRITE;
	case PREVENT_ALLOW:		/* allowing removal is allowed */
		return len > 4 && !(cdb[4] & 0x03) ? PC_ALLOWED : PC_WRITE;
	}
	return PC_WRITE;
}

/* What changed for this nexus between the snapshot it had and a newer one
 * someone else committed: the unit attention SPC gives it. */
static void ua_diff(struct disk_pr *pr, const struct pr_state *old,
		    const struct pr_state *now)
{
	bool was = pr_find(old, pr->id) >= 0, is = pr_find(now, pr->id) >= 0;
	uint8_t ua = 0;

	if (was && !is)
		ua = now->clear_seq != old->clear_seq ? 0x03 : 0x05;
	else if (was && now->release_seq != old->release_seq)
		ua = 0x04;
	if (ua)
		__atomic_store_n(&pr->ua, ua, __ATOMIC_RELAXED);
}

static void set_cache(struct disk_pr *pr, uint64_t gen)
{
	__atomic_store_n(&pr->cache, gen << 8 | pr_decide(&pr->cur, pr->id),
			 __ATOMIC_RELEASE);
}

static void corrupt(struct disk_pr *pr, const char *msg)
{
	if (!pr->broken)
		pr_err("%s", msg);
	pr->broken = true;
}

/* pr->lock held: the snapshot of the committed generation. */
static void refresh_locked(struct disk_pr *pr)
{
	struct pr_state st;
	uint64_t gen;
	char msg[512];
	int ret;

	ret = prf_snapshot(pr, &st, &gen);
	if (ret == -EAGAIN)
		return;	/* busy: the cache stays stale, the next command retries */
	if (ret) {
		snprintf(msg, sizeof(msg), "%s: persistent reservation state is "
			 "corrupt (bad checksum): keeping the last good state; "
			 "remove the file to clear all reservations", pr->path);
		corrupt(pr, msg);
		set_cache(pr, prf_gen(pr));
		return;
	}
	ua_diff(pr, &pr->cur, &st);
	pr->cur = st;
	set_cache(pr, gen);
}

/* pr->lock held: PR_PROBE attaches the file if it is there now (create:
 * makes it, for a first change). */
static void probe_locked(struct disk_pr *pr, bool create)
{
	char err[512] = "";
	int ret;

	if (pr->mode != PR_PROBE)
		return;
	__atomic_store_n(&pr->next_probe_ns, prf_now_ns() + PRF_PROBE_NS,
			 __ATOMIC_RELAXED);
	ret = create ? prf_create(pr, err, sizeof(err)) :
		       prf_probe(pr, err, sizeof(err));
	if (ret) {
		corrupt(pr, err);
		__atomic_store_n(&pr->mode, PR_LOCAL, __ATOMIC_RELAXED);
	}
}

/* PR_PROBE: time to look for the file again. */
static bool probe_due(const struct disk_pr *pr)
{
	uint64_t due;

	if (__atomic_load_n(&pr->mode, __ATOMIC_RELAXED) != PR_PROBE)
		return false;
	due = __atomic_load_n(&pr->next_probe_ns, __ATOMIC_RELAXED);
	return prf_now_ns() >= due;
}

static void __attribute__((noinline)) slow_path(struct disk_pr *pr, bool probe)
{
	pthread_mutex_lock(&pr->lock);
	if (probe)
		probe_locked(pr, false);
	refresh_locked(pr);
	pthread_mutex_unlock(&pr->lock);
}

static bool cache_valid(const struct disk_pr *pr, uint64_t *c)
{
	const uint64_t *genp = __atomic_load_n(&pr->genp, __ATOMIC_ACQUIRE);
	uint64_t g = __atomic_load_n(genp, __ATOMIC_ACQUIRE);

	*c = __atomic_load_n(&pr->cache, __ATOMIC_ACQUIRE);
	return *c >> 8 == (g & (UINT64_MAX >> 8));
}

/* The cached decision for the committed generation: one atomic load
 * while it is valid, the slow path (snapshot, probe) when not. */
static uint64_t current(struct disk_pr *pr)
{
	bool probe = probe_due(pr);
	uint64_t c;

	if (probe || !cache_valid(pr, &c)) {
		slow_path(pr, probe);
		cache_valid(pr, &c);
	}
	return c;
}

/* For EXTENDED COPY (disk_xcopy.c): whether this process's reads (write:
 * writes) of d, a copy's source (destination) named by a command that
 * another disk received, would meet RESERVATION CONFLICT. */
bool disk_pr_blocks(struct scsi_disk *d, bool write)
{
	struct disk_pr *pr = d->pr;
	uint8_t bits;

	if (!pr)
		return false;
	bits = current(pr) & 0xff;
	if (bits & PR_BLOCK_SPC2)
		return true;
	return bits & (write ? PR_BLOCK_WRITE : PR_BLOCK_READ);
}

bool disk_pr_gate(struct scsi_disk *d, struct scsi_req *req, bool bad)
{
	struct disk_pr *pr = d->pr;
	uint8_t op = req->cdb_len ? req->cdb[0] : 0xff, bits, ua;
	enum pr_class cls;
	uint64_t c;

	if (!pr)
		return false;
	c = current(pr);
	if (__atomic_load_n(&pr->ua, __ATOMIC_RELAXED) && op != INQUIRY &&
	    op != REPORT_LUNS && op != REQUEST_SENSE) {
		ua = __atomic_exchange_n(&pr->ua, 0, __ATOMIC_RELAXED);
		if (ua) {
			disk_check(req, SENSE_UNIT_ATTENTION, 0x2a00 | ua);
			req->done(req);
			return true;
		}
	}
	bits = c & 0xff;
	if (bad || !bits)
		return false;
	cls = classify(req->cdb, req->cdb_len);
	if (bits & PR_BLOCK_SPC2) {
		if (cls == PC_SPC2_OK)
			return false;
	} else if (cls == PC_ALLOWED || cls == PC_SPC2_OK ||
		   (cls == PC_READ && !(bits & PR_BLOCK_READ)) ||
		   (cls == PC_WRITE && !(bits & PR_BLOCK_WRITE))) {
		return false;
	}
	req->status = SAM_STAT_RESERVATION_CONFLICT;
	req->sense_len = 0;
	req->done(req);
	return true;
}

uint8_t disk_pr_take_ua(struct scsi_disk *d)
{
	return d->pr ? __atomic_exchange_n(&d->pr->ua, 0, __ATOMIC_RELAXED) : 0;
}

/* ---- the decoder's part ---- */

static void pr_bad(struct decoded *dc, uint16_t asc, int field, bool cd)
{
	dc->bad = true;
	dc->err = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = asc,
				  .field = field, .bit = -1, .cd = cd };
}

void disk_pr_decode(const uint8_t *cdb, struct decoded *dc)
{
	uint8_t sa = cdb[1] & 0x1f;

	switch (cdb[0]) {
	case PERSISTENT_RESERVE_IN:
		dc->info.xfer = be16(cdb + 7);
		dc->info.dir = dc->info.xfer ? SCSI_DIR_FROM_DEV : SCSI_DIR_NONE;
		return;
	case PERSISTENT_RESERVE_OUT:
		if (sa == PRO_RESERVE || sa == PRO_RELEASE || sa == PRO_PREEMPT ||
		    sa == PRO_PREEMPT_ABORT) {
			if (cdb[2] >> 4)	/* SCOPE: LU_SCOPE only */
				return pr_bad(dc, ASC_INVALID_FIELD_CDB, 2, true);
			if (!type_ok(cdb[2] & 0x0f))
				return pr_bad(dc, ASC_INVALID_FIELD_CDB, 2, true);
		}
		/* SPEC_I_PT is not supported: the list is always 24 bytes */
		if (be32(cdb + 5) != PRO_PARAM_LEN)
			return pr_bad(dc, ASC_PARAM_LIST_LENGTH, -1, false);
		dc->info.dir = SCSI_DIR_TO_DEV;
		dc->info.xfer = PRO_PARAM_LEN;
		return;
	}
	/* RESERVE(6), RELEASE(6): no data (no third-party, no extents) */
}

/* ---- PERSISTENT RESERVE IN ---- */

/* The nexus' TransportID: iSCSI format 00h, its pr-id as the name. */
static size_t transport_id(const char *id, uint8_t *p)
{
	size_t n = strnlen(id, PR_ID_MAX - 1) + 1;

	n = (n + 3) & ~(size_t)3;
	if (n < 20)
		n = 20;
	memset(p, 0, 4 + n);
	p[0] = 0x05;			/* format 0, protocol iSCSI */
	put16(p + 2, n);
	memcpy(p + 4, id, strnlen(id, PR_ID_MAX - 1));
	return 4 + n;
}

/* The data-in of PERSISTENT RESERVE IN from st into buf (SCSI_PARAM_MAX
 * bytes); returns its length. */
static size_t pr_in(const struct pr_state *st, const uint8_t *cdb, uint8_t *buf)
{
	size_t n = 8;

	memset(buf, 0, 8);
	put32(buf, st->prgen);
	switch (cdb[1] & 0x1f) {
	case PRI_READ_KEYS:
		for (uint32_t i = 0; i < st->nregs; i++, n += 8)
			put64(buf + n, st->regs[i].key);
		put32(buf + 4, n - 8);
		break;
	case PRI_READ_RESERVATION:
		if (st->type) {
			int h = all_regs(st->type) ? -1 : pr_find(st, st->holder);

			memset(buf + 8, 0, 16);
			put64(buf + 8, h >= 0 ? st->regs[h].key : 0);
			buf[8 + 13] = st->scope << 4 | st->type;
			n += 16;
		}
		put32(buf + 4, n - 8);
		break;
	case PRI_REPORT_CAPS:
		put16(buf, 8);
		buf[2] = 0x04 | 0x01;	/* ATP_C (one target port), PTPL_C */
		buf[3] = 0x80 | (st->aptpl ? 0x01 : 0);	/* TMV, PTPL_A */
		buf[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02; /* WE_AR EA_RO WE_RO EA WE */
		buf[5] = 0x01;				    /* EA_AR */
		buf[6] = buf[7] = 0;
		n = 8;
		break;
	default:	/* READ FULL STATUS */
		for (uint32_t i = 0; i < st->nregs; i++) {
			uint8_t *e = buf + n;
			bool h = is_holder(st, st->regs[i].id);

			memset(e, 0, 24);
			put64(e, st->regs[i].key);
			e[12] = h ? 0x01 : 0;		/* R_HOLDER */
			e[13] = h ? (st->scope << 4 | st->type) : 0;
			put16(e + 18, 1);		/* relative target port */
			put32(e + 20, transport_id(st->regs[i].id, e + 24));
			n += 24 + be32(e + 20);
		}
		put32(buf + 4, n - 8);
		break;
	}
	return n;
}

/* ---- PERSISTENT RESERVE OUT, RESERVE(6), RELEASE(6) ---- */

struct pro {
	uint8_t sa, scope, type;
	bool aptpl;
	uint64_t key, sakey;
};

enum { R_GOOD, R_CONFLICT, R_SENSE };

static void add_reg(struct pr_state *st, const char *id, uint64_t key)
{
	struct pr_reg *r = &st->regs[st->nregs++];

	memset(r, 0, sizeof(*r));
	r->key = key;
	snprintf(r->id, sizeof(r->id), "%s", id);
}

static void release(struct pr_state *st)
{
	st->type = st->scope = 0;
	memset(st->holder, 0, sizeof(st->holder));
}

/* Removes registration i; a holder takes its reservation with it (for the
 * all-registrants types, the last registrant does). */
static void remove_reg(struct pr_state *st, uint32_t i)
{
	bool holder = st->type && !all_regs(st->type) &&
		      !strncmp(st->holder, st->regs[i].id, PR_ID_MAX);

	st->regs[i] = st->regs[--st->nregs];
	memset(&st->regs[st->nregs], 0, sizeof(st->regs[0]));
	if (holder) {
		if (st->type == PR_WE_RO || st->type == PR_EA_RO)
			st->release_seq++;
		release(st);
	} else if (all_regs(st->type) && !st->nregs) {
		release(st);
	}
}

/* Removes the registrations of key (but ours); returns how many. */
static unsigned int remove_key(struct pr_state *st, uint64_t key, const char *self)
{
	unsigned int n = 0;

	for (uint32_t i = 0; i < st->nregs;) {
		if (st->regs[i].key == key && strncmp(st->regs[i].id, self, PR_ID_MAX)) {
			remove_reg(st, i);
			n++;
		} else {
			i++;
		}
	}
	return n;
}

static int pro_register(const char *id, struct pr_state *st, const struct pro *o,
			struct sense *s)
{
	int i = pr_find(st, id);
	bool ignore = o->sa == PRO_REGISTER_IGNORE;

	if (i < 0) {
		if (!ignore && o->key)
			return R_CONFLICT;
		if (!o->sakey)
			return R_GOOD;
		if (st->nregs >= PR_MAX_REGS) {
			*s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST,
					     .asc = ASC_INSUFFICIENT_REG,
					     .field = -1, .bit = -1 };
			return R_SENSE;
		}
		add_reg(st, id, o->sakey);
	} else {
		if (!ignore && o->key != st->regs[i].key)
			return R_CONFLICT;
		if (o->sakey)
			st->regs[i].key = o->sakey;
		else
			remove_reg(st, i);
	}
	st->aptpl = o->aptpl;
	st->prgen++;
	return R_GOOD;
}

static int pro_preempt(const char *id, struct pr_state *st, const struct pro *o,
		       struct sense *s)
{
	int h = st->type && !all_regs(st->type) ? pr_find(st, st->holder) : -1;

	if (st->type && all_regs(st->type) && !o->sakey) {
		/* preempting an all-registrants reservation: everyone else
		 * goes, the new reservation is ours */
		for (uint32_t i = 0; i < st->nregs;) {
			if (strncmp(st->regs[i].id, id, PR_ID_MAX))
				remove_reg(st, i);
			else
				i++;
		}
	} else if (h >= 0 && st->regs[h].key == o->sakey) {
		bool changes = st->type != o->type || st->scope != o->scope;

		remove_key(st, o->sakey, id);
		if (changes)	/* the registrants left are told */
			st->release_seq++;
	} else {
		if (!o->sakey) {
			*s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST,
					     .asc = ASC_INVALID_FIELD_PARAM,
					     .field = 8, .bit = -1 };
			return R_SENSE;
		}
		if (!remove_key(st, o->sakey, id))
			return R_CONFLICT;
		st->prgen++;
		return R_GOOD;
	}
	st->type = o->type;
	st->scope = o->scope;
	memset(st->holder, 0, sizeof(st->holder));
	if (!all_regs(o->type))
		snprintf(st->holder, sizeof(st->holder), "%s", id);
	st->prgen++;
	return R_GOOD;
}

/* Applies o to st for nexus id: R_GOOD (st may have changed), R_CONFLICT,
 * or R_SENSE with s. */
static int pro_apply(const char *id, struct pr_state *st, const struct pro *o,
		     struct sense *s)
{
	int i = pr_find(st, id);

	if (o->sa != PRO_REGISTER && o->sa != PRO_REGISTER_IGNORE &&
	    (i < 0 || st->regs[i].key != o->key))
		return R_CONFLICT;
	switch (o->sa) {
	case PRO_REGISTER: case PRO_REGISTER_IGNORE:
		return pro_register(id, st, o, s);
	case PRO_RESERVE:
		if (!st->type) {
			st->type = o->type;
			st->scope = o->scope;
			if (!all_regs(o->type))
				snprintf(st->holder, sizeof(st->holder), "%s", id);
			return R_GOOD;
		}
		if (is_holder(st, id) && st->type == o->type && st->scope == o->scope)
			return R_GOOD;
		return R_CONFLICT;
	case PRO_RELEASE:
		if (!is_holder(st, id))
			return R_GOOD;
		if (st->type != o->type || st->scope != o->scope) {
			*s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST,
					     .asc = ASC_INVALID_RELEASE,
					     .field = -1, .bit = -1 };
			return R_SENSE;
		}
		if (st->type != PR_WE && st->type != PR_EA)
			st->release_seq++;
		release(st);
		return R_GOOD;
	case PRO_CLEAR:
		while (st->nregs)
			remove_reg(st, 0);
		release(st);
		st->clear_seq++;
		st->prgen++;
		return R_GOOD;
	default:	/* PREEMPT, PREEMPT AND ABORT */
		return pro_preempt(id, st, o, s);
	}
}

/* RESERVE(6)/RELEASE(6) (SPC-2), with CRH=0: both conflict while any
 * nexus is registered; RELEASE by a nexus that holds nothing does nothing. */
static int spc2_apply(const char *id, struct pr_state *st, bool reserve)
{
	if (st->nregs)
		return R_CONFLICT;
	if (reserve) {
		if (st->spc2[0] && strncmp(st->spc2, id, PR_ID_MAX))
			return R_CONFLICT;
		snprintf(st->spc2, sizeof(st->spc2), "%s", id);
	} else if (!strncmp(st->spc2, id, PR_ID_MAX)) {
		memset(st->spc2, 0, sizeof(st->spc2));
	}
	return R_GOOD;
}

/* Read-modify-commit of the shared state under its lock. op < 0: SPC-2
 * (-1 RESERVE, -2 RELEASE, -3 drop any: a LU reset, -4 drop ours: an I_T
 * nexus loss). Returns R_*. */
static int change(struct disk_pr *pr, const struct pro *o, int op,
		  struct sense *s)
{
	struct pr_state st;
	uint64_t gen;
	int ret;
	bool create = op == -1 || (o && (o->sa == PRO_REGISTER ||
					 o->sa == PRO_REGISTER_IGNORE) && o->sakey);

	pthread_mutex_lock(&pr->lock);
	probe_locked(pr, create);
	if (pr->broken) {
		pthread_mutex_unlock(&pr->lock);
		*s = (struct sense){ .key = SENSE_HARDWARE_ERROR,
				     .asc = ASC_INTERNAL_TARGET_FAILURE,
				     .field = -1, .bit = -1 };
		return R_SENSE;
	}
	if (prf_lock(pr)) {
		pthread_mutex_unlock(&pr->lock);
		*s = (struct sense){ .key = SENSE_HARDWARE_ERROR,
				     .asc = ASC_INTERNAL_TARGET_FAILURE,
				     .field = -1, .bit = -1 };
		return R_SENSE;
	}
	refresh_locked(pr);
	if (pr->broken) {
		ret = R_SENSE;
		*s = (struct sense){ .key = SENSE_HARDWARE_ERROR,
				     .asc = ASC_INTERNAL_TARGET_FAILURE,
				     .field = -1, .bit = -1 };
		goto out;
	}
	gen = prf_gen(pr);
	st = pr->cur;
	ret = R_GOOD;
	if (op == -3 || (op == -4 && !strncmp(st.spc2, pr->id, PR_ID_MAX)))
		memset(st.spc2, 0, sizeof(st.spc2));
	else if (op == -1 || op == -2)
		ret = spc2_apply(pr->id, &st, op == -1);
	else if (op >= 0)
		ret = pro_apply(pr->id, &st, o, s);
	if (ret == R_GOOD && memcmp(&st, &pr->cur, sizeof(st))) {
		prf_commit(pr, &st, gen);
		pr->cur = st;
		set_cache(pr, gen + 1);
	}
out:
	prf_unlock(pr);
	pthread_mutex_unlock(&pr->lock);
	return ret;
}

static void finish(struct scsi_req *req, int ret, const struct sense *s)
{
	if (ret == R_CONFLICT) {
		req->status = SAM_STAT_RESERVATION_CONFLICT;
		req->sense_len = 0;
	} else if (ret == R_SENSE) {
		disk_check_condition(req, s);
	}
	req->done(req);
}

void disk_pr_command(struct scsi_disk *d, struct scsi_req *req,
		     const struct decoded *dc)
{
	struct disk_pr *pr = d->pr;
	const uint8_t *cdb = req->cdb;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST,
			   .asc = ASC_PARAM_LIST_LENGTH, .field = -1, .bit = -1 };
	uint8_t p[PRO_PARAM_LEN];
	struct pro o;
	int ret;

	switch (cdb[0]) {
	case PERSISTENT_RESERVE_IN: {
		uint8_t buf[SCSI_PARAM_MAX];
		size_t n;

		/* done() runs after the unlock: it may submit the next command */
		pthread_mutex_lock(&pr->lock);
		probe_locked(pr, false);
		refresh_locked(pr);
		n = pr_in(&pr->cur, cdb, buf);
		pthread_mutex_unlock(&pr->lock);
		disk_send_in(req, buf, min_sz(n, dc->info.xfer));
		return;
	}
	case RESERVE_6: case RELEASE_6:
		ret = change(pr, NULL, cdb[0] == RESERVE_6 ? -1 : -2, &s);
		finish(req, ret, &s);
		return;
	}
	req->xferred = iov_to_buf(req->iov, req->iovcnt, 0, p, sizeof(p));
	if (req->xferred < PRO_PARAM_LEN)
		return finish(req, R_SENSE, &s);
	s.asc = ASC_INVALID_FIELD_PARAM;
	if (p[20] & 0x08) {	/* SPEC_I_PT: not supported (SIP_C=0) */
		s.field = 20;
		s.bit = 3;
		return finish(req, R_SENSE, &s);
	}
	if (p[20] & 0xf2 || p[21]) {	/* reserved */
		s.field = p[21] && !(p[20] & 0xf2) ? 21 : 20;
		return finish(req, R_SENSE, &s);
	}
	o = (struct pro){ .sa = cdb[1] & 0x1f, .scope = cdb[2] >> 4,
			  .type = cdb[2] & 0x0f, .aptpl = p[20] & 0x01,
			  .key = be64(p), .sakey = be64(p + 8) };
	/* ALL_TG_PT: accepted as is: there is one target port */
	ret = change(pr, &o, o.sa, &s);
	finish(req, ret, &s);
}

/* A LU reset releases any SPC-2 reservation; an I_T nexus loss ours. */
void disk_pr_reset(struct scsi_disk *d, bool nexus)
{
	struct sense s;
	struct pr_state *st;

	if (!d->pr)
		return;
	st = &d->pr->cur;
	pthread_mutex_lock(&d->pr->lock);
	refresh_locked(d->pr);
	if (!st->spc2[0] || (nexus && strncmp(st->spc2, d->pr->id, PR_ID_MAX))) {
		pthread_mutex_unlock(&d->pr->lock);
		return;
	}
	pthread_mutex_unlock(&d->pr->lock);
	change(d->pr, NULL, nexus ? -4 : -3, &s);
}

/* ---- life cycle ---- */

static void default_id(char *id)
{
	char host[64] = "localhost";

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = 0;
	snprintf(id, PR_ID_MAX, "%s:%ld", host, (long)getpid());
}

static struct disk_pr *pr_new(const char *path, bool explicit_path,
			      const char *id, bool defer, char *err,
			      size_t errlen)
{
	struct disk_pr *pr = calloc(1, sizeof(*pr));

	if (!pr) {
		snprintf(err, errlen, "persistent reservations: out of memory");
		return NULL;
	}
	pthread_mutex_init(&pr->lock, NULL);
	pr->fd = -1;
	if (id)
		snprintf(pr->id, sizeof(pr->id), "%s", id);
	else
		default_id(pr->id);
	pr->explicit_path = explicit_path;
	if (path && !(pr->path = strdup(path))) {
		free(pr);
		snprintf(err, errlen, "persistent reservations: out of memory");
		return NULL;
	}
	if (prf_init(pr, defer, err, errlen)) {
		prf_close(pr);
		free(pr->path);
		pthread_mutex_destroy(&pr->lock);
		free(pr);
		return NULL;
	}
	return pr;
}

static void pr_free(struct disk_pr *pr)
{
	if (!pr)
		return;
	prf_close(pr);
	free(pr->path);
	pthread_mutex_destroy(&pr->lock);
	free(pr);
}

/* The default of scsi_disk_create: IMAGE.pr, looked for by the first
 * command (no system call here), made on first use. */
void disk_pr_create(struct scsi_disk *d)
{
	char err[512] = "", *path = NULL;

	/* a network disk has no folder of its own for the state file */
	if (d->be->path && blk_is_local(d->be) &&
	    asprintf(&path, "%s.pr", d->be->path) < 0)
		path = NULL;
	d->pr = pr_new(path, false, NULL, true, err, sizeof(err));
	free(path);
}

void disk_pr_destroy(struct scsi_disk *d)
{
	pr_free(d->pr);
	d->pr = NULL;
}

int scsi_disk_pr_setup(struct scsi_disk *d, const char *state, const char *id,
		       char *err, size_t errlen)
{
	char *def = NULL;
	struct disk_pr *pr;

	if (id && !config_pr_id_ok(id)) {
		snprintf(err, errlen, "pr-id=%s: 1 to %d printable characters", id,
			 PR_ID_MAX - 1);
		return -EINVAL;
	}
	if (state && !strcmp(state, "none"))
		state = NULL;
	else if (!state && d->be->path && blk_is_local(d->be) &&
		 asprintf(&def, "%s.pr", d->be->path) < 0)
		def = NULL;
	pr = pr_new(state ? state : def, state != NULL, id, false, err, errlen);
	free(def);
	if (!pr)
		return -EINVAL;
	pr_free(d->pr);
	d->pr = pr;
	return 0;
}

const char *scsi_disk_pr_id(const struct scsi_disk *d)
{
	return d->pr ? d->pr->id : NULL;
}
