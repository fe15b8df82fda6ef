/* LSI 53C895A driver (see lsi.h): register sequences and SCRIPTS after
 * sym53c8xx (sym_hipd.c, sym_fw2.h), reduced to what the probe needs. */
#include "lib/pci.h"
#include "lib/probe.h"
#include "lsi.h"
#include "../../src/scsi/lsi_regs.h"

#define SQ_LEN 128		/* start queue entries (> LSI_NTAGS) */
#define DQ_LEN 128		/* done queue entries */
#define IDLE_JOB 1		/* start queue entry with nothing to do */

/* Host memory the SCRIPTS read and write (sym: the HCB's queues). */
struct lsi_shared {
	uint32_t startpos;	/* address of the next start queue entry */
	uint32_t donepos;	/* address of the next done queue entry */
	uint32_t ccb_base;	/* DSA of tag 0 (64 KiB aligned) */
	uint32_t one;		/* the constant IDLE_JOB */
	uint32_t saved;		/* scratch */
	uint32_t msgin[3];	/* reselection IDENTIFY + SIMPLE TAG + tag */
	uint32_t pad[8];
	uint32_t sq[SQ_LEN][2];	/* DSA or IDLE_JOB, next entry address */
	uint32_t dq[DQ_LEN][2];	/* DSA or 0, next entry address */
};

/* SCRIPTS interrupt codes (DSPS on SIR). */
#define SIR_SEL_NO_MSGOUT 0xe1
#define SIR_BAD_PHASE 0xe2
#define SIR_BAD_MSG 0xe3
#define SIR_RESEL_NO_IDENT 0xe4

#define OFF(f) ((uint32_t)__builtin_offsetof(struct lsi_ccb, f))

struct scr {
	uint32_t base;
	uint32_t w[512];
	unsigned int n;
};

static uint32_t here(struct scr *p)
{
	return p->base + p->n * 4;
}

static unsigned int op(struct scr *p, uint32_t a, uint32_t b)
{
	p->w[p->n++] = a;
	p->w[p->n++] = b;
	return p->n - 1;
}

static void build_scripts(struct lsi_hba *h, struct scr *p)
{
	uint32_t sh = virt_to_phys(h->sh);
	uint32_t startpos = sh + __builtin_offsetof(struct lsi_shared, startpos);
	uint32_t donepos = sh + __builtin_offsetof(struct lsi_shared, donepos);
	uint32_t ccb_base = sh + __builtin_offsetof(struct lsi_shared, ccb_base);
	uint32_t one = sh + __builtin_offsetof(struct lsi_shared, one);
	uint32_t saved = sh + __builtin_offsetof(struct lsi_shared, saved);
	uint32_t msgin = sh + __builtin_offsetof(struct lsi_shared, msgin);
	unsigned int f_idle, f_sel, f_cmd, f_disp[6], f_msg[3], f_back[4];
	unsigned int f_resel, nb = 0;
	uint32_t a_idle, a_data, a_status, a_msgin, a_command, a_complete;
	uint32_t a_disc, a_savedp, a_sigp;

	p->n = 0;
	p->base = h->ram_phys;
	/* START: clear SIGP (reading CTEST2), take the next job. */
	h->a_start = here(p);
	op(p, SCR_FROM_REG(LSI_CTEST2), 0);
	op(p, SCR_LOAD_ABS(LSI_DSA, 4), startpos);
	op(p, SCR_LOAD_REL(LSI_TEMP, 4), 4);
	op(p, SCR_LOAD_REL(LSI_DSA, 4), 0);
	op(p, SCR_FROM_REG(LSI_DSA), 0);
	f_idle = op(p, SCR_JUMP ^ IFTRUE(DATA(IDLE_JOB)), 0);
	/* SELECT with ATN; reselected meanwhile: the job stays queued. */
	f_sel = op(p, SCR_SEL_TBL_ATN ^ OFF(select), 0);
	op(p, SCR_STORE_ABS(LSI_DSA, 4), saved);
	op(p, SCR_LOAD_ABS(LSI_DSA, 4), startpos);
	op(p, SCR_LOAD_ABS(LSI_SCRATCHA, 4), one);
	op(p, SCR_STORE_REL(LSI_SCRATCHA, 4), 0);
	op(p, SCR_STORE_ABS(LSI_TEMP, 4), startpos);
	op(p, SCR_LOAD_ABS(LSI_DSA, 4), saved);
	op(p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), SIR_SEL_NO_MSGOUT);
	op(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_MSG_OUT), OFF(msgout));
	f_cmd = op(p, SCR_JUMP ^ IFFALSE(WHEN(LSI_PHASE_COMMAND)), 0);
	op(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_COMMAND), OFF(cmd));
	/* DISPATCH */
	h->a_dispatch = here(p);
	p->w[f_cmd] = h->a_dispatch;
	f_disp[0] = op(p, SCR_JUMP ^ IFTRUE(WHEN(LSI_PHASE_MSG_IN)), 0);
	f_disp[1] = op(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_DATA_IN)), 0);
	f_disp[2] = op(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_DATA_OUT)), 0);
	f_disp[3] = op(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_STATUS)), 0);
	f_disp[4] = op(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_COMMAND)), 0);
	op(p, SCR_INT, SIR_BAD_PHASE);
	a_command = here(p);
	op(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_COMMAND), OFF(cmd));
	f_back[nb++] = op(p, SCR_JUMP, 0);
	/* DATA: jump to the command's moves (sym: LASTP -> TEMP, RETURN). */
	a_data = here(p);
	op(p, SCR_LOAD_REL(LSI_TEMP, 4), OFF(datap));
	op(p, SCR_RETURN, 0);
	a_status = here(p);
	op(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_STATUS), OFF(status));
	f_back[nb++] = op(p, SCR_JUMP, 0);
	a_msgin = here(p);
	op(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_MSG_IN), OFF(msgin));
	f_msg[0] = op(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_COMMAND_COMPLETE)), 0);
	f_msg[1] = op(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_DISCONNECT)), 0);
	f_msg[2] = op(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_SAVE_DP)), 0);
	op(p, SCR_INT, SIR_BAD_MSG);
	a_savedp = here(p);
	op(p, SCR_CLR(SCR_ACK), 0);
	f_back[nb++] = op(p, SCR_JUMP, 0);
	a_disc = here(p);
	op(p, SCR_REG_REG(LSI_SCNTL2, SCR_AND, 0x7f), 0);
	op(p, SCR_CLR(SCR_ACK | SCR_ATN), 0);
	op(p, SCR_WAIT_DISC, 0);
	op(p, SCR_JUMP, h->a_start);
	/* COMPLETE: DSA to the done queue (sym's DONE). */
	a_complete = here(p);
	op(p, SCR_REG_REG(LSI_SCNTL2, SCR_AND, 0x7f), 0);
	op(p, SCR_CLR(SCR_ACK | SCR_ATN), 0);
	op(p, SCR_WAIT_DISC, 0);
	op(p, SCR_STORE_ABS(LSI_DSA, 4), saved);
	op(p, SCR_LOAD_ABS(LSI_DSA, 4), donepos);
	op(p, SCR_LOAD_ABS(LSI_SCRATCHA, 4), saved);
	op(p, SCR_STORE_REL(LSI_SCRATCHA, 4), 0);
	op(p, SCR_LOAD_REL(LSI_SCRATCHA, 4), 4);
	op(p, SCR_STORE_ABS(LSI_SCRATCHA, 4), donepos);
	op(p, SCR_JUMP, h->a_start);
	/* IDLE: wait for a reselection; SIGP: new jobs. */
	a_idle = here(p);
	f_resel = op(p, SCR_WAIT_RESEL, 0);
	/* RESELECTED: IDENTIFY, SIMPLE QUEUE TAG, tag -> DSA of that CCB. */
	op(p, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_IN), msgin);
	op(p, SCR_INT ^ IFFALSE(MASK(0x80, 0x80)), SIR_RESEL_NO_IDENT);
	op(p, SCR_CLR(SCR_ACK), 0);
	op(p, SCR_MOVE_ABS(2) ^ SCR_PHASE(LSI_PHASE_MSG_IN), msgin + 1);
	op(p, SCR_CLR(SCR_ACK), 0);
	op(p, SCR_LOAD_ABS(LSI_DSA, 4), ccb_base);
	op(p, SCR_REG_SFBR(LSI_SIDL, SCR_OR, 0), 0);	/* the tag */
	op(p, SCR_TO_REG(LSI_DSA + 1), 0);
	op(p, SCR_LOAD_REL(LSI_SCRATCHA, 4), OFF(resel));
	op(p, SCR_REG_REG(LSI_SCRATCHA, SCR_ADD, 1), 0);
	op(p, SCR_REG_REG(LSI_SCRATCHA + 1, SCR_ADDC, 0), 0);
	op(p, SCR_STORE_REL(LSI_SCRATCHA, 4), OFF(resel));
	f_back[nb++] = op(p, SCR_JUMP, 0);
	a_sigp = here(p);
	op(p, SCR_JUMP, h->a_start);
	/* Data moves: sym's DATA_IN/DATA_OUT, entered LSI_MAX_SG - nseg
	 * moves from the top so that the last one is the last segment. */
	h->a_data_in = here(p);
	for (unsigned int i = 0; i < LSI_MAX_SG; i++)
		op(p, SCR_CHMOV_TBL ^ SCR_PHASE(LSI_PHASE_DATA_IN),
		   OFF(sg) + i * 8);
	op(p, SCR_JUMP, h->a_dispatch);
	h->a_data_out = here(p);
	for (unsigned int i = 0; i < LSI_MAX_SG; i++)
		op(p, SCR_CHMOV_TBL ^ SCR_PHASE(LSI_PHASE_DATA_OUT),
		   OFF(sg) + i * 8);
	op(p, SCR_JUMP, h->a_dispatch);

	p->w[f_idle] = a_idle;
	p->w[f_sel] = a_idle;
	p->w[f_resel] = a_sigp;
	p->w[f_disp[0]] = a_msgin;
	p->w[f_disp[1]] = a_data;
	p->w[f_disp[2]] = a_data;
	p->w[f_disp[3]] = a_status;
	p->w[f_disp[4]] = a_command;
	p->w[f_msg[0]] = a_complete;
	p->w[f_msg[1]] = a_disc;
	p->w[f_msg[2]] = a_savedp;
	for (unsigned int i = 0; i < nb; i++)
		p->w[f_back[i]] = h->a_dispatch;
}

static void wr8(struct lsi_hba *h, unsigned int r, uint8_t v)
{
	mmio_write8(h->regs + r, v);
}

static uint8_t rd8(struct lsi_hba *h, unsigned int r)
{
	return mmio_read8(h->regs + r);
}

static void wr32(struct lsi_hba *h, unsigned int r, uint32_t v)
{
	mmio_write32(h->regs + r, v);
}

static uint32_t rd32(struct lsi_hba *h, unsigned int r)
{
	return mmio_read32(h->regs + r);
}

/* sym_soft_reset: abort the SCRIPTS, then reset the chip. */
static void chip_reset(struct lsi_hba *h)
{
	wr8(h, LSI_ISTAT, LSI_ISTAT_ABRT);
	for (int i = 0; i < 1000 && !(rd8(h, LSI_ISTAT) & LSI_ISTAT_DIP); i++)
		delay_us(10);
	wr8(h, LSI_ISTAT, 0);
	rd8(h, LSI_DSTAT);
	wr8(h, LSI_ISTAT, LSI_ISTAT_SRST);
	delay_us(10);
	wr8(h, LSI_ISTAT, 0);
}

/* sym_reset_scsi_bus: assert RST for 200 us, ack the interrupt. */
static void bus_reset(struct lsi_hba *h)
{
	wr8(h, LSI_STEST3, 0x80);	/* TE: tolerant enable */
	wr8(h, LSI_SCNTL1, LSI_SCNTL1_RST);
	delay_us(200);
	wr8(h, LSI_SCNTL1, 0);
	rd8(h, LSI_SIST0);
	rd8(h, LSI_SIST1);
	rd8(h, LSI_DSTAT);
}

static void init_queues(struct lsi_hba *h)
{
	for (unsigned int i = 0; i < SQ_LEN; i++) {
		h->sh->sq[i][0] = IDLE_JOB;
		h->sh->sq[i][1] = virt_to_phys(h->sh->sq[(i + 1) % SQ_LEN]);
	}
	for (unsigned int i = 0; i < DQ_LEN; i++) {
		h->sh->dq[i][0] = 0;
		h->sh->dq[i][1] = virt_to_phys(h->sh->dq[(i + 1) % DQ_LEN]);
	}
	h->sh->startpos = virt_to_phys(h->sh->sq[0]);
	h->sh->donepos = virt_to_phys(h->sh->dq[0]);
	h->sh->ccb_base = virt_to_phys(h->ccb);
	h->sh->one = IDLE_JOB;
}

int lsi_open(struct lsi_hba *h, unsigned int index)
{
	struct pci_dev *d = pci_find(0x1000, 0x0012, 0xffff, index);
	uint64_t bar, size;
	struct scr *p;

	memset(h, 0, sizeof(*h));
	if (!d) {
		pr("probe: lsi: no 53C895A (1000:0012) #%u\n", index);
		return -1;
	}
	h->pci = d;
	pci_enable(d);
	bar = pci_bar(d, 1, &size);
	if (!bar || size < 256) {
		pr("probe: lsi: no register BAR\n");
		return -1;
	}
	h->regs = phys_ptr(bar);
	bar = pci_bar(d, 2, &size);
	if (!bar || size < 4096) {
		pr("probe: lsi: no SCRIPTS RAM BAR\n");
		return -1;
	}
	h->ram = phys_ptr(bar);
	h->ram_phys = (uint32_t)bar;
	h->sh = dma_alloc(sizeof(*h->sh), 4096);
	h->ccb = dma_alloc(LSI_NTAGS * sizeof(struct lsi_ccb), 65536);
	p = dma_alloc(sizeof(*p), 64);
	if (!h->sh || !h->ccb || !p || virt_to_phys(h->ccb) >> 32) {
		pr("probe: lsi: out of memory\n");
		return -1;
	}
	init_queues(h);

	chip_reset(h);
	/* sym_init's register setup: arbitration, our ID and the ID we
	 * answer reselections on, selection timeout, burst, no 700-family
	 * compatibility, the interrupts sym enables, phase mismatch jumps. */
	wr8(h, LSI_SCNTL0, 0xca);
	wr8(h, LSI_SCNTL1, 0);
	wr8(h, LSI_SCNTL3, 0x05);
	wr8(h, LSI_SCID, LSI_SCID_RRE | 7);
	wr8(h, LSI_RESPID0, 1 << 7);
	wr8(h, LSI_RESPID1, 0);
	wr8(h, LSI_STIME0, 0x0c);
	wr8(h, LSI_DMODE, 0x80);
	wr8(h, LSI_DCNTL, LSI_DCNTL_COM);
	wr8(h, LSI_CTEST3, 0);
	wr8(h, LSI_CTEST4, 0);
	wr8(h, LSI_STEST2, 0x02);
	/* the clock quadrupler: enable, wait for the lock, select it */
	wr8(h, LSI_STEST1, LSI_STEST1_DBLEN);
	for (int i = 0; i < 50 && !(rd8(h, LSI_STEST4) & LSI_STEST4_LCKFRQ); i++)
		delay_us(20);
	wr8(h, LSI_STEST1, LSI_STEST1_DBLEN | LSI_STEST1_DBLSEL);
	wr8(h, LSI_SIEN0, LSI_SIST0_MA | LSI_SIST0_UDC | LSI_SIST0_RST |
				  LSI_SIST0_PAR | LSI_SIST0_SGE);
	wr8(h, LSI_SIEN1, LSI_SIST1_STO | LSI_SIST1_HTH);
	wr8(h, LSI_DIEN, LSI_DSTAT_MDPE | LSI_DSTAT_BF | LSI_DSTAT_SSI |
				 LSI_DSTAT_SIR | LSI_DSTAT_IID);
	bus_reset(h);

	build_scripts(h, p);
	for (unsigned int i = 0; i < p->n; i++)
		mmio_write32(h->ram + i * 4, p->w[i]);
	if (mmio_read32(h->ram + 4) != p->w[1]) {
		pr("probe: lsi: SCRIPTS RAM does not hold what was written\n");
		return -1;
	}
	pr("probe: lsi: regs=%lx ram=%x scripts=%u bytes\n",
	   (unsigned long)virt_to_phys(h->regs), h->ram_phys, p->n * 4);
	wr32(h, LSI_DSA, 0);
	wr32(h, LSI_DSP, h->a_start);
	return 0;
}

void lsi_submit(struct lsi_hba *h, unsigned int tag, unsigned int target,
		const uint8_t *cdb, unsigned int cdb_len, enum lsi_dir dir,
		void *const *seg, const uint32_t *seg_len, unsigned int nseg)
{
	struct lsi_ccb *c = &h->ccb[tag];
	uint32_t cp = virt_to_phys(c);
	unsigned int first = LSI_MAX_SG - nseg;
	uint32_t (*e)[2];

	if (tag >= LSI_NTAGS || nseg > LSI_MAX_SG || cdb_len > 16)
		probe_fail("lsi: bad submit (tag %u nseg %u)", tag, nseg);
	c->select = target << 16;
	c->msgout[0] = 3;
	c->msgout[1] = cp + OFF(msgout_bytes);
	c->msgout_bytes[0] = LSI_MSG_IDENTIFY | 0x40;	/* may disconnect */
	c->msgout_bytes[1] = LSI_MSG_SIMPLE_TAG;
	c->msgout_bytes[2] = tag;
	memcpy(c->cdb, cdb, cdb_len);
	c->cmd[0] = cdb_len;
	c->cmd[1] = cp + OFF(cdb);
	c->status[0] = 1;
	c->status[1] = cp + OFF(status_byte);
	c->msgin[0] = 1;
	c->msgin[1] = cp + OFF(msgin_byte);
	c->status_byte = 0xff;
	c->resel = 0;
	for (unsigned int i = 0; i < nseg; i++) {
		c->sg[first + i][0] = seg_len[i];
		c->sg[first + i][1] = virt_to_phys(seg[i]);
	}
	c->datap = (dir == LSI_OUT ? h->a_data_out : h->a_data_in) + first * 8;
	if (dir == LSI_NONE)
		c->datap = h->a_dispatch;	/* a data phase would be a bug */
	/* Publish the CCB, then the start queue entry. */
	mb();
	e = &h->sh->sq[h->sq_put];
	if ((*e)[0] != IDLE_JOB)
		probe_fail("lsi: start queue full");
	(*e)[0] = cp;
	h->last_sq = h->sq_put;
	h->sq_put = (h->sq_put + 1) % SQ_LEN;
}

void lsi_kick(struct lsi_hba *h)
{
	mb();
	wr8(h, LSI_ISTAT, LSI_ISTAT_SIGP);
}

static void chip_trouble(struct lsi_hba *h, uint8_t istat)
{
	uint8_t dstat = 0, sist0 = 0, sist1 = 0;

	if (istat & LSI_ISTAT_SIP) {
		sist0 = rd8(h, LSI_SIST0);
		sist1 = rd8(h, LSI_SIST1);
	}
	if (istat & LSI_ISTAT_DIP)
		dstat = rd8(h, LSI_DSTAT);
	probe_fail("lsi: interrupt istat=%x dstat=%x sist0=%x sist1=%x dsp=%x (start+%x) dsps=%x dbc=%x dsa=%x (ccb+%x) resel msg=%x",
		   istat, dstat, sist0, sist1, rd32(h, LSI_DSP),
		   rd32(h, LSI_DSP) - h->a_start, rd32(h, LSI_DSPS),
		   rd32(h, LSI_DBC) & 0xffffff, rd32(h, LSI_DSA),
		   rd32(h, LSI_DSA) - (uint32_t)virt_to_phys(h->ccb),
		   h->sh->msgin[0]);
}

/* Every few ms, while nothing completes, look at the chip's own interrupt
 * status. An MMIO read is an exit, and costly on PVM: never in a tight
 * loop. */
static void check_chip(struct lsi_hba *h)
{
	static uint64_t next_check;
	uint64_t now = rdtsc();

	if (now >= next_check) {
		uint8_t istat = rd8(h, LSI_ISTAT);

		next_check = now + ms_to_ticks(5);
		if (istat & (LSI_ISTAT_DIP | LSI_ISTAT_SIP))
			chip_trouble(h, istat);
	}
}

int lsi_reap(struct lsi_hba *h)
{
	volatile uint32_t *e = h->sh->dq[h->dq_get];
	volatile uint32_t *donepos = &h->sh->donepos;
	uint32_t dsa = *e, off, tag;

	if (!dsa) {
		check_chip(h);
		return -1;
	}
	/* The device's word, not ours: it must name one of our CCBs. A
	 * value that does not was written in pieces (or by a broken model)
	 * and would complete a command that is still running. */
	off = dsa - (uint32_t)virt_to_phys(h->ccb);
	if (off % sizeof(struct lsi_ccb) ||
	    off / sizeof(struct lsi_ccb) >= LSI_NTAGS) {
		uint32_t again = *e;

		lsi_dump(h);
		probe_fail("lsi: done queue entry %u holds %x, not a CCB (now %x)",
			   h->dq_get, dsa, again);
	}
	tag = off / sizeof(struct lsi_ccb);
	/* The status block move runs before COMPLETE stores the entry: its
	 * byte must be there the moment the entry is (see lsi_seen_status). */
	if (h->peek != h->dq_get + 1) {
		barrier();
		h->peek = h->dq_get + 1;
		h->peek_status = h->ccb[tag].status_byte;
	}
	/* COMPLETE stores the entry, then moves donepos past it. Take (and
	 * clear) the entry only once donepos has moved: before that the
	 * SCRIPTS may still be writing it. A 53C895A writes the DWORD once;
	 * QEMU writes guest RAM with memcpy, which stores a 4-byte value
	 * twice (glibc: two overlapping 4-byte moves), so a clear that lands
	 * between the two is undone, and the stale entry completes the tag's
	 * next command a lap later, before its status (issue 12). Reading
	 * donepos costs no exit: it is host memory. */
	if (*donepos == (uint32_t)virt_to_phys((void *)e)) {
		check_chip(h);
		return -1;
	}
	/* Read the CCB (status byte) only after the entry that publishes it. */
	barrier();
	*e = 0;
	h->seen_status = h->peek_status;
	h->peek = 0;
	h->last_dq = h->dq_get;
	h->dq_get = (h->dq_get + 1) % DQ_LEN;
	/* The entries cleared before this one must stay clear until the
	 * SCRIPTS come round again: one that is back was written again after
	 * the device moved donepos past it. */
	for (unsigned int k = 2; k <= LSI_DQ_RECHECK + 1; k++) {
		unsigned int j = (h->dq_get + DQ_LEN - k) % DQ_LEN;
		uint32_t v = ((volatile uint32_t *)h->sh->dq[j])[0];

		if (v) {
			lsi_dump(h);
			probe_fail("lsi: done queue entry %u holds %x again, %u completions after the CPU took and cleared it",
				   j, v, k - 1);
		}
	}
	return (int)tag;
}

void lsi_dump(struct lsi_hba *h)
{
	uint32_t sq0 = virt_to_phys(h->sh->sq[0]);
	uint32_t dq0 = virt_to_phys(h->sh->dq[0]);

	pr("probe: lsi state: istat=%x dsp=start+%x dsa=%x (ccb+%x) temp=%x sstat1=%x\n",
	   rd8(h, LSI_ISTAT), rd32(h, LSI_DSP) - h->a_start, rd32(h, LSI_DSA),
	   rd32(h, LSI_DSA) - (uint32_t)virt_to_phys(h->ccb),
	   rd32(h, LSI_TEMP), rd8(h, LSI_SSTAT1));
	pr("probe: lsi queues: cpu sq_put=%u dq_get=%u, scripts startpos=%u donepos=%u\n",
	   h->sq_put, h->dq_get, (h->sh->startpos - sq0) / 8,
	   (h->sh->donepos - dq0) / 8);
	for (unsigned int i = 0; i < SQ_LEN; i++)
		if (h->sh->sq[i][0] != IDLE_JOB)
			pr("probe: lsi sq[%u] = tag %d\n", i,
			   (int)((h->sh->sq[i][0] - virt_to_phys(h->ccb)) >> 8));
	for (unsigned int i = 0; i < DQ_LEN; i++)
		if (h->sh->dq[i][0])
			pr("probe: lsi dq[%u] = tag %d\n", i,
			   (int)((h->sh->dq[i][0] - virt_to_phys(h->ccb)) >> 8));
}

uint8_t lsi_reg8(struct lsi_hba *h, unsigned int reg)
{
	return rd8(h, reg);
}

void lsi_restart(struct lsi_hba *h)
{
	wr32(h, LSI_DSP, h->a_start);
}

uint8_t lsi_status(struct lsi_hba *h, unsigned int tag)
{
	return h->ccb[tag].status_byte;
}

uint8_t lsi_seen_status(struct lsi_hba *h)
{
	return h->seen_status;
}

uint32_t lsi_resel_count(struct lsi_hba *h, unsigned int tag)
{
	return h->ccb[tag].resel;
}

uint8_t lsi_run1(struct lsi_hba *h, unsigned int target, const uint8_t *cdb,
		 unsigned int cdb_len, enum lsi_dir dir, void *buf,
		 uint32_t len)
{
	uint64_t deadline = rdtsc() + ms_to_ticks(opt_u64("io_timeout_ms",
							  10000));
	void *seg[LSI_MAX_SG];
	uint32_t seg_len[LSI_MAX_SG];
	unsigned int n = 0;
	int tag;

	/* page-sized segments, as a scatter list from an OS would be */
	for (uint32_t off = 0; off < len; n++) {
		uint32_t l = len - off < 4096 ? len - off : 4096;

		if (n == LSI_MAX_SG)
			probe_fail("lsi: %u bytes is too long", len);
		seg[n] = (uint8_t *)buf + off;
		seg_len[n] = l;
		off += l;
	}
	lsi_submit(h, 0, target, cdb, cdb_len, dir, seg, seg_len, n);
	lsi_kick(h);
	while ((tag = lsi_reap(h)) < 0) {
		if (rdtsc() > deadline) {
			uint8_t istat = rd8(h, LSI_ISTAT);

			if (istat & (LSI_ISTAT_DIP | LSI_ISTAT_SIP))
				chip_trouble(h, istat);
			pr("probe: lsi tag 0: status %x resel %u\n",
			   lsi_status(h, 0), lsi_resel_count(h, 0));
			lsi_dump(h);
			probe_fail("lsi: command %x timed out (dsp=start+%x istat=%x)",
				   cdb[0], rd32(h, LSI_DSP) - h->a_start, istat);
		}
		cpu_relax();
	}
	if (tag != 0)
		probe_fail("lsi: completion for tag %d, expected 0", tag);
	return lsi_status(h, 0);
}

/* lsi_reap against a done queue written the way QEMU 7.2's lsi53c895a
 * writes it (SCRIPTS STORE = memcpy = the same DWORD stored twice), the
 * device side played here, no chip needed (ISTAT reads hit a zeroed page).
 * With revive, the "device" stores an entry again after the CPU took it,
 * which lsi_reap must report. */
void lsi_reap_selftest(bool revive)
{
	static struct lsi_hba hb;
	struct lsi_hba *h = &hb;
	unsigned int laps = 3, n = laps * DQ_LEN + 5, waited = 0;

	memset(h, 0, sizeof(*h));
	h->regs = dma_alloc(4096, 4096);
	h->sh = dma_alloc(sizeof(*h->sh), 4096);
	h->ccb = dma_alloc(LSI_NTAGS * sizeof(struct lsi_ccb), 65536);
	if (!h->regs || !h->sh || !h->ccb)
		probe_fail("lsi reap selftest: out of memory");
	memset((void *)h->regs, 0, 4096);
	init_queues(h);
	for (unsigned int i = 0; i < n; i++) {
		unsigned int tag = i % 16;
		uint32_t dsa = (uint32_t)virt_to_phys(&h->ccb[tag]);
		volatile uint32_t *pos = &h->sh->donepos;
		volatile uint32_t *e = phys_ptr(*pos);
		int t;

		h->ccb[tag].status_byte = 0xff;	/* lsi_submit */
		if (i == 3) {	/* this one's entry comes before its status */
			e[0] = dsa;
			if (lsi_reap(h) >= 0)
				probe_fail("lsi reap selftest: took an entry before donepos moved");
		}
		h->ccb[tag].status_byte = 0;	/* status phase */
		e[0] = dsa;			/* memcpy's first store */
		t = lsi_reap(h);
		if (t >= 0)
			probe_fail("lsi reap selftest: completion %u: took tag %d before donepos moved past its entry",
				   i, t);
		if (e[0] != dsa)
			probe_fail("lsi reap selftest: completion %u: entry cleared while the device still writes it",
				   i);
		waited++;
		e[0] = dsa;			/* memcpy's second store */
		*pos = e[1];			/* COMPLETE: donepos = next */
		t = lsi_reap(h);
		if (t != (int)tag)
			probe_fail("lsi reap selftest: completion %u: got %d, expected tag %u",
				   i, t, tag);
		if (e[0])
			probe_fail("lsi reap selftest: completion %u: entry not cleared", i);
		if (lsi_seen_status(h) != (i == 3 ? 0xff : 0))
			probe_fail("lsi reap selftest: completion %u: seen status %x",
				   i, lsi_seen_status(h));
		if (lsi_reap(h) >= 0)
			probe_fail("lsi reap selftest: completion %u: a second completion from one entry",
				   i);
		if (revive && i == DQ_LEN + 7)
			e[0] = dsa;	/* a store after donepos moved */
	}
	pr("probe: lsi reap selftest: %u completions over %u laps, each held back until donepos moved (%u), entry before status seen\n",
	   n, laps, waited);
}
