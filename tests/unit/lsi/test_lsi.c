/* LSI 53C895A model driven like sym53c8xx drives the chip: a SCRIPTS
 * program with a start queue, table-indirect moves off the DSA, tagged
 * commands that disconnect and come back by reselection, a done queue and
 * INTFLY. Fake guest RAM, a fake block queue that completes when and in
 * the order the test says, no KVM. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_blkq.h"
#include "scsi/disk.h"
#include "scsi/lsi53c895a.h"
#include "lsi_regs_io.h"
#include "scsi/lsi_regs.h"

#define RAM_SIZE (32u << 20)
#define DISK_SIZE (16u << 20)
#define SCRIPTS 0x1000u
#define CMDBASE_VAR 0x800u
#define DONEPTR 0x804u
#define SAVED 0x808u
#define JOBPTR 0x80cu
#define MSGBUF 0x810u
#define DONEQ 0x900u
#define JOBQ 0xa00u
#define CMDBASE 0x100000u	/* DSA = CMDBASE | tag << 8 */
#define DROUT 0x200000u		/* per-tag data routines */
#define SGBASE 0x400000u	/* per-tag big SG tables */
#define DBUF 0x800000u		/* data buffers */
#define RAM_BAR 0xf0000000u

/* Command block (DSA-relative). */
#define OFF_SELECT 0x00
#define OFF_MSGOUT 0x08
#define OFF_CMD 0x10
#define OFF_STATUS 0x18
#define OFF_MSGIN 0x20
#define OFF_DATAP 0x28
#define OFF_MSGOUT_BYTES 0x40
#define OFF_CDB 0x50
#define OFF_STATUS_BYTE 0x60
#define OFF_MSGIN_BYTE 0x61
#define OFF_SG 0x80		/* up to 16 entries */

static uint8_t *ram;
static struct gmem mem;
static struct blk_backend be[2];
static int irq_level;
static uint32_t L_start, L_dispatch;

static void set_irq(void *opaque, int level)
{
	irq_level = level;
}

static void w32(uint32_t addr, uint32_t v)
{
	memcpy(ram + addr, &v, 4);
}

static uint32_t r32(uint32_t addr)
{
	uint32_t v;

	memcpy(&v, ram + addr, 4);
	return v;
}

/* ---- a tiny SCRIPTS assembler ---- */

struct prog {
	uint32_t base;
	uint32_t w[1024];
	unsigned int n;
};

static uint32_t here(const struct prog *p)
{
	return p->base + p->n * 4;
}

static unsigned int emit(struct prog *p, uint32_t a, uint32_t b)
{
	p->w[p->n++] = a;
	p->w[p->n++] = b;
	return p->n - 1;
}

static void patch(struct prog *p, unsigned int at, uint32_t addr)
{
	p->w[at] = addr;
}

static void load(const struct prog *p)
{
	memcpy(ram + p->base, p->w, p->n * 4);
}

/* The main SCRIPTS, in the style of sym53c8xx's firmware. */
static void build_main(struct prog *p, uint32_t base)
{
	unsigned int to_idle, sel_alt, f_cmd, to_msgin, to_data1, to_data2;
	unsigned int to_status, to_command, to_complete, to_disc, to_savedp;
	unsigned int back[8], nb = 0, resel_alt, to_err4;
	uint32_t L_idle, L_msgin, L_data, L_status, L_command, L_complete;
	uint32_t L_disc, L_savedp, L_sigp;

	memset(p, 0, sizeof(*p));
	p->base = base;
	L_start = here(p);
	emit(p, SCR_LOAD_ABS(LSI_DSA, 4), JOBPTR);
	emit(p, SCR_LOAD_REL(LSI_DSA, 4), 0);
	emit(p, SCR_FROM_REG(LSI_DSA + 2), 0);
	to_idle = emit(p, SCR_JUMP ^ IFTRUE(DATA(0)), 0);
	sel_alt = emit(p, SCR_SEL_TBL_ATN ^ OFF_SELECT, 0);
	/* the job is taken: advance the start queue */
	emit(p, SCR_LOAD_ABS(LSI_SCRATCHA, 4), JOBPTR);
	emit(p, SCR_REG_REG(LSI_SCRATCHA, SCR_ADD, 4), 0);
	emit(p, SCR_REG_REG(LSI_SCRATCHA + 1, SCR_ADDC, 0), 0);
	emit(p, SCR_STORE_ABS(LSI_SCRATCHA, 4), JOBPTR);
	emit(p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), 0xe1);
	emit(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_MSG_OUT), OFF_MSGOUT);
	f_cmd = emit(p, SCR_JUMP ^ IFFALSE(WHEN(LSI_PHASE_COMMAND)), 0);
	emit(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_COMMAND), OFF_CMD);
	L_dispatch = here(p);
	patch(p, f_cmd, L_dispatch);
	to_msgin = emit(p, SCR_JUMP ^ IFTRUE(WHEN(LSI_PHASE_MSG_IN)), 0);
	to_data1 = emit(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_DATA_IN)), 0);
	to_data2 = emit(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_DATA_OUT)), 0);
	to_status = emit(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_STATUS)), 0);
	to_command = emit(p, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_COMMAND)), 0);
	emit(p, SCR_INT, 0xe2);
	L_command = here(p);
	emit(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_COMMAND), OFF_CMD);
	back[nb++] = emit(p, SCR_JUMP, 0);
	L_data = here(p);
	emit(p, SCR_LOAD_REL(LSI_TEMP, 4), OFF_DATAP);
	emit(p, SCR_RETURN, 0);
	L_status = here(p);
	emit(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_STATUS), OFF_STATUS);
	back[nb++] = emit(p, SCR_JUMP, 0);
	L_msgin = here(p);
	emit(p, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_MSG_IN), OFF_MSGIN);
	to_complete = emit(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_COMMAND_COMPLETE)), 0);
	to_disc = emit(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_DISCONNECT)), 0);
	to_savedp = emit(p, SCR_JUMP ^ IFTRUE(DATA(LSI_MSG_SAVE_DP)), 0);
	emit(p, SCR_INT, 0xe3);
	L_savedp = here(p);
	emit(p, SCR_CLR(SCR_ACK), 0);
	back[nb++] = emit(p, SCR_JUMP, 0);
	L_disc = here(p);
	emit(p, SCR_CLR(SCR_ACK), 0);
	emit(p, SCR_WAIT_DISC, 0);
	emit(p, SCR_JUMP, L_start);
	L_complete = here(p);
	emit(p, SCR_CLR(SCR_ACK | SCR_ATN), 0);
	emit(p, SCR_WAIT_DISC, 0);
	emit(p, SCR_STORE_ABS(LSI_DSA, 4), SAVED);
	emit(p, SCR_LOAD_ABS(LSI_DSA, 4), DONEPTR);
	emit(p, SCR_LOAD_ABS(LSI_SCRATCHA, 4), SAVED);
	emit(p, SCR_STORE_REL(LSI_SCRATCHA, 4), 0);
	emit(p, SCR_REG_REG(LSI_DSA, SCR_ADD, 4), 0);
	emit(p, SCR_REG_REG(LSI_DSA + 1, SCR_ADDC, 0), 0);
	emit(p, SCR_STORE_ABS(LSI_DSA, 4), DONEPTR);
	emit(p, SCR_INT_FLY, 0);
	emit(p, SCR_JUMP, L_start);
	L_idle = here(p);
	resel_alt = emit(p, SCR_WAIT_RESEL, 0);
	/* reselected: IDENTIFY, then SIMPLE QUEUE TAG + tag */
	emit(p, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_IN), MSGBUF);
	to_err4 = emit(p, SCR_INT ^ IFFALSE(MASK(0x80, 0x80)), 0xe4);
	emit(p, SCR_CLR(SCR_ACK), 0);
	emit(p, SCR_MOVE_ABS(2) ^ SCR_PHASE(LSI_PHASE_MSG_IN), MSGBUF + 1);
	emit(p, SCR_CLR(SCR_ACK), 0);
	emit(p, SCR_LOAD_ABS(LSI_DSA, 4), CMDBASE_VAR);
	emit(p, SCR_REG_SFBR(LSI_SIDL, SCR_OR, 0), 0);	/* SFBR = tag */
	emit(p, SCR_TO_REG(LSI_DSA + 1), 0);
	back[nb++] = emit(p, SCR_JUMP, 0);
	L_sigp = here(p);
	emit(p, SCR_FROM_REG(LSI_CTEST2), 0);	/* clears SIGP */
	emit(p, SCR_JUMP, L_start);

	(void)to_err4;
	patch(p, to_idle, L_idle);
	patch(p, sel_alt, L_idle);
	patch(p, resel_alt, L_sigp);
	patch(p, to_msgin, L_msgin);
	patch(p, to_data1, L_data);
	patch(p, to_data2, L_data);
	patch(p, to_status, L_status);
	patch(p, to_command, L_command);
	patch(p, to_complete, L_complete);
	patch(p, to_disc, L_disc);
	patch(p, to_savedp, L_savedp);
	for (unsigned int i = 0; i < nb; i++)
		patch(p, back[i], L_dispatch);
}

static uint32_t dsa_of(unsigned int tag)
{
	return CMDBASE | tag << 8;
}

struct sg {
	uint32_t addr, len;
};

/* A command block with its data routine: CHMOV_TBL per segment. */
static void make_cmd(unsigned int tag, unsigned int target, const uint8_t *cdb,
		     unsigned int cdb_len, int phase, const struct sg *sg,
		     unsigned int nsg)
{
	uint32_t d = dsa_of(tag);
	uint32_t rout = DROUT + tag * 0x4000;
	uint32_t sgt = nsg > 16 ? SGBASE + tag * 0x4000 : d + OFF_SG;
	struct prog p;

	memset(ram + d, 0, 0x100);
	w32(d + OFF_SELECT, target << 16);
	w32(d + OFF_MSGOUT, 3);
	w32(d + OFF_MSGOUT + 4, d + OFF_MSGOUT_BYTES);
	w32(d + OFF_CMD, cdb_len);
	w32(d + OFF_CMD + 4, d + OFF_CDB);
	w32(d + OFF_STATUS, 1);
	w32(d + OFF_STATUS + 4, d + OFF_STATUS_BYTE);
	w32(d + OFF_MSGIN, 1);
	w32(d + OFF_MSGIN + 4, d + OFF_MSGIN_BYTE);
	w32(d + OFF_DATAP, rout);
	ram[d + OFF_MSGOUT_BYTES] = LSI_MSG_IDENTIFY | 0x40;
	ram[d + OFF_MSGOUT_BYTES + 1] = LSI_MSG_SIMPLE_TAG;
	ram[d + OFF_MSGOUT_BYTES + 2] = tag;
	memcpy(ram + d + OFF_CDB, cdb, cdb_len);
	ram[d + OFF_STATUS_BYTE] = 0xff;

	memset(&p, 0, sizeof(p));
	p.base = rout;
	for (unsigned int i = 0; i < nsg; i++) {
		w32(sgt + i * 8, sg[i].len);
		w32(sgt + i * 8 + 4, sg[i].addr);
		if (phase >= 0)
			emit(&p, SCR_CHMOV_TBL ^ SCR_PHASE(phase),
			     sgt + i * 8 - d);
	}
	emit(&p, SCR_JUMP, L_dispatch);
	load(&p);
}

/* Large data routines do not fit struct prog: write them directly. */
static void make_big_cmd(unsigned int tag, const uint8_t *cdb,
			 unsigned int cdb_len, int phase, const struct sg *sg,
			 unsigned int nsg)
{
	uint32_t d = dsa_of(tag);
	uint32_t rout = DROUT + tag * 0x4000;
	uint32_t sgt = SGBASE + tag * 0x4000;

	make_cmd(tag, 0, cdb, cdb_len, -1, NULL, 0);
	for (unsigned int i = 0; i < nsg; i++) {
		w32(sgt + i * 8, sg[i].len);
		w32(sgt + i * 8 + 4, sg[i].addr);
		w32(rout + i * 8, SCR_CHMOV_TBL ^ SCR_PHASE(phase));
		w32(rout + i * 8 + 4, sgt + i * 8 - d);
	}
	w32(rout + nsg * 8, SCR_JUMP);
	w32(rout + nsg * 8 + 4, L_dispatch);
}

static unsigned int njobs;

static void queue_job(unsigned int tag)
{
	w32(JOBQ + njobs * 4, dsa_of(tag));
	w32(JOBQ + (njobs + 1) * 4, 0);
	njobs++;
}

/* Starts the SCRIPTS at START, or wakes them from WAIT RESELECT. */
static void kick(bool first)
{
	if (first)
		reg_wr32(LSI_DSP, L_start);
	else
		reg_wr(LSI_ISTAT, LSI_ISTAT_SIGP);
}

static unsigned int ndone(void)
{
	return (r32(DONEPTR) - DONEQ) / 4;
}

static void rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 10);
	cdb[0] = op;
	cdb[2] = lba >> 24;
	cdb[3] = lba >> 16;
	cdb[4] = lba >> 8;
	cdb[5] = lba;
	cdb[7] = blocks >> 8;
	cdb[8] = blocks;
}

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + (off >> 9) * 13 + 1);
}

static int setup(void **state)
{
	struct lsi_params p = { 0 };
	char path[] = "/tmp/iovm-lsi-XXXXXX";
	static uint8_t buf[65536];
	struct prog *prog = calloc(1, sizeof(*prog));

	ram = aligned_alloc(4096, RAM_SIZE);
	assert_non_null(ram);
	memset(ram, 0, RAM_SIZE);
	mem.n = 1;
	mem.r[0].gpa = 0;
	mem.r[0].size = RAM_SIZE;
	mem.r[0].hva = ram;
	for (int i = 0; i < 2; i++) {
		int fd = mkstemp(path);

		assert_true(fd >= 0);
		unlink(path);
		strcpy(path, "/tmp/iovm-lsi-XXXXXX");
		for (uint64_t off = 0; off < DISK_SIZE; off += sizeof(buf)) {
			for (unsigned int j = 0; j < sizeof(buf); j++)
				buf[j] = pattern(off + j) ^ i;
			assert_int_equal(pwrite(fd, buf, sizeof(buf), off),
					 sizeof(buf));
		}
		memset(&be[i], 0, sizeof(be[i]));
		be[i].fd = fd;
		be[i].fd_buffered = -1;
		be[i].size = DISK_SIZE;
		be[i].block_size = 512;
		be[i].phys_block_size = 512;
		strcpy(be[i].serial, "LSITEST");
	}
	p.mem = &mem;
	p.set_irq = set_irq;
	hba = lsi_create(&p);
	assert_non_null(hba);
	assert_int_equal(lsi_attach(hba, 0, &be[0]), 0);
	assert_int_equal(lsi_attach(hba, 2, &be[1]), 0);
	assert_int_equal(lsi_attach(hba, LSI_HOST_ID, &be[1]), -EINVAL);
	assert_int_equal(lsi_attach(hba, 2, &be[1]), -EBUSY);
	build_main(prog, SCRIPTS);
	load(prog);
	free(prog);
	w32(CMDBASE_VAR, CMDBASE);
	w32(DONEPTR, DONEQ);
	w32(JOBPTR, JOBQ);
	w32(JOBQ, 0);
	njobs = 0;
	fake_blkq_order(FAKE_FIFO);
	fake_blkq_reset_stats();
	irq_level = 0;
	/* interrupts as sym53c8xx enables them */
	reg_wr(LSI_DIEN, LSI_DSTAT_IID | LSI_DSTAT_SIR | LSI_DSTAT_BF |
				 LSI_DSTAT_ABRT | LSI_DSTAT_MDPE);
	reg_wr(LSI_SIEN0, LSI_SIST0_MA | LSI_SIST0_UDC | LSI_SIST0_RST |
				  LSI_SIST0_PAR | LSI_SIST0_SGE);
	reg_wr(LSI_SIEN1, LSI_SIST1_STO | LSI_SIST1_HTH);
	*state = NULL;
	return 0;
}

static int teardown(void **state)
{
	fake_blkq_order(FAKE_FIFO);
	lsi_poll(hba, true, 1 << 20);
	lsi_destroy(hba);
	close(be[0].fd);
	close(be[1].fd);
	free(ram);
	return 0;
}

static void run(void)
{
	lsi_poll(hba, true, 1 << 22);
}

/* After the SCRIPTS went idle: no interrupt but INTFLY. */
static void expect_idle(void)
{
	uint8_t istat = reg_rd(LSI_ISTAT);

	assert_int_equal(istat & (LSI_ISTAT_DIP | LSI_ISTAT_SIP), 0);
}

/* REQUEST SENSE to target t as job tag, run to completion: the 18 bytes
 * of sense data land at DBUF + 0x1000. */
static void request_sense(unsigned int tag, unsigned int t)
{
	static const uint8_t rs[6] = { 0x03, 0, 0, 0, 18, 0 };
	const struct sg ss = { DBUF + 0x1000, 18 };

	make_cmd(tag, t, rs, 6, LSI_PHASE_DATA_IN, &ss, 1);
	queue_job(tag);
	kick(false);
	run();
	expect_idle();
}

static void test_read_write_complete(void **state)
{
	uint8_t cdb[10];
	struct sg sg[3] = { { DBUF, 4096 }, { DBUF + 0x3000, 512 },
			    { DBUF + 0x5000, 3584 } };
	uint8_t want[8192];

	/* READ(10) 16 blocks at LBA 8 into three segments. */
	rw10(cdb, 0x28, 8, 16);
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_IN, sg, 3);
	queue_job(1);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ndone(), 1);
	assert_int_equal(r32(DONEQ), dsa_of(1));
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE], 0);
	for (unsigned int i = 0; i < sizeof(want); i++)
		want[i] = pattern(8 * 512 + i);
	assert_memory_equal(ram + DBUF, want, 4096);
	assert_memory_equal(ram + DBUF + 0x3000, want + 4096, 512);
	assert_memory_equal(ram + DBUF + 0x5000, want + 4608, 3584);
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_INTF);
	assert_int_equal(irq_level, 1);
	reg_wr(LSI_ISTAT, LSI_ISTAT_INTF);
	assert_int_equal(irq_level, 0);

	/* WRITE(10) of those 16 blocks to LBA 100 on target 2. */
	for (unsigned int i = 0; i < 4096; i++)
		ram[DBUF + i] = (uint8_t)~i;
	rw10(cdb, 0x2a, 100, 16);
	make_cmd(2, 2, cdb, 10, LSI_PHASE_DATA_OUT, sg, 3);
	queue_job(2);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ndone(), 2);
	assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE], 0);
	{
		uint8_t got[8192];

		assert_int_equal(pread(be[1].fd, got, 8192, 100 * 512), 8192);
		assert_memory_equal(got, ram + DBUF, 4096);
		assert_memory_equal(got + 4096, ram + DBUF + 0x3000, 512);
		assert_memory_equal(got + 4608, ram + DBUF + 0x5000, 3584);
	}
	/* The data went to the backend as one request of the guest's own
	 * segments, in place. */
	assert_int_equal(fake_blkq_stats()->max_iovcnt, 3);
	assert_int_equal(lsi_cmds_active(hba), 0);
}

/* Two reads and two writes are in flight at once; the disk completes them
 * in reverse order; each is reselected by its tag as it completes. */
static void test_tagged_out_of_order(void **state)
{
	uint8_t cdb[10];
	struct sg sg;

	fake_blkq_order(FAKE_HOLD);
	for (unsigned int t = 0; t < 4; t++) {
		bool wr = t & 1;

		sg.addr = DBUF + t * 0x10000;
		sg.len = 0x8000;
		if (wr)
			memset(ram + sg.addr, 0xa0 + t, sg.len);
		rw10(cdb, wr ? 0x2a : 0x28, 1000 + t * 64, 64);
		make_cmd(t + 4, 0, cdb, 10,
			 wr ? LSI_PHASE_DATA_OUT : LSI_PHASE_DATA_IN, &sg, 1);
		queue_job(t + 4);
	}
	kick(true);
	run();
	/* All four went to the disk before any completed; the bus is free
	 * and the SCRIPTS wait for a reselection. */
	assert_int_equal(fake_blkq_pending(), 4);
	assert_int_equal(lsi_cmds_active(hba), 4);
	assert_int_equal(ndone(), 0);
	assert_int_equal(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON, 0);
	assert_int_equal(fake_blkq_stats()->reads, 2);
	assert_int_equal(fake_blkq_stats()->writes, 2);

	fake_blkq_order(FAKE_LIFO);
	run();
	assert_int_equal(ndone(), 4);
	for (unsigned int i = 0; i < 4; i++) {
		unsigned int tag = 7 - i;

		assert_int_equal(r32(DONEQ + i * 4), dsa_of(tag));
		assert_int_equal(ram[dsa_of(tag) + OFF_STATUS_BYTE], 0);
	}
	for (unsigned int t = 0; t < 4; t++) {
		uint8_t got[0x8000];
		uint64_t off = (1000 + t * 64) * 512ull;

		if (t & 1) {
			assert_int_equal(pread(be[0].fd, got, sizeof(got), off),
					 sizeof(got));
			assert_memory_equal(got, ram + DBUF + t * 0x10000,
					    sizeof(got));
		} else {
			for (unsigned int j = 0; j < sizeof(got); j++)
				assert_int_equal(ram[DBUF + t * 0x10000 + j],
						 pattern(off + j));
		}
	}
	assert_int_equal(lsi_cmds_active(hba), 0);
	expect_idle();
}

/* INQUIRY returns less than the guest's buffer: the target leaves the
 * data phase early, a phase mismatch with the residual in DBC. */
static void test_inquiry_phase_mismatch(void **state)
{
	uint8_t cdb[6] = { 0x12, 0, 0, 0, 255, 0 };
	struct sg sg = { DBUF, 255 };
	uint32_t dbc, dsp;
	uint8_t sist0;

	make_cmd(3, 0, cdb, 6, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(3);
	kick(true);
	run();
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_SIP);
	assert_int_equal(irq_level, 1);
	sist0 = reg_rd(LSI_SIST0);
	assert_true(sist0 & LSI_SIST0_MA);
	assert_int_equal(reg_rd(LSI_SIST1), 0);
	dbc = reg_rd32(LSI_DBC) & 0xffffff;
	assert_true(dbc > 0 && dbc < 255);
	/* the FIFO counters agree with DBC (no bytes stuck in the FIFO) */
	assert_int_equal(reg_rd(LSI_DFIFO), dbc & 0xff);
	assert_int_equal(reg_rd32(LSI_DNAD), DBUF + 255 - dbc);
	dsp = reg_rd32(LSI_DSP);
	assert_int_equal(dsp, DROUT + 3 * 0x4000 + 8);
	assert_int_equal(ram[DBUF], 0x00);	/* direct access disk */
	assert_int_equal(ram[DBUF + 2] >= 5, 1);	/* SPC version */
	/* resume at the dispatcher: status, complete */
	reg_wr32(LSI_DSP, L_dispatch);
	run();
	expect_idle();
	assert_int_equal(ndone(), 1);
	assert_int_equal(ram[dsa_of(3) + OFF_STATUS_BYTE], 0);

	/* Same with the phase mismatch jump (ENPMJ): no interrupt, the
	 * SCRIPTS go to PMJAD with IA/RBC/UA describing the move. */
	make_cmd(3, 0, cdb, 6, LSI_PHASE_DATA_IN, &sg, 1);
	reg_wr32(LSI_PMJAD1, L_dispatch);
	reg_wr32(LSI_PMJAD2, L_dispatch);
	reg_wr(LSI_CCNTL0, LSI_CCNTL0_ENPMJ);
	queue_job(3);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ndone(), 2);
	assert_int_equal(reg_rd32(LSI_IA), DROUT + 3 * 0x4000);
	assert_int_equal(reg_rd32(LSI_RBC) & 0xffffff, dbc);
	assert_int_equal(reg_rd32(LSI_UA), DBUF + 255 - dbc);
}

/* Bad SCSI status: CHECK CONDITION, then REQUEST SENSE gets the sense the
 * target kept (no autosense on a parallel bus). */
static void test_check_condition_sense(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { DBUF, 512 };

	rw10(cdb, 0x28, DISK_SIZE / 512, 1);	/* past the end */
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(1);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE],
			 SAM_STAT_CHECK_CONDITION);
	request_sense(2, 0);
	assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE], 0);
	assert_int_equal(ram[DBUF + 0x1000] & 0x7f, 0x70);
	assert_int_equal(ram[DBUF + 0x1000 + 2] & 0xf, SENSE_ILLEGAL_REQUEST);
	assert_int_equal(ram[DBUF + 0x1000 + 12], 0x21);	/* LBA range */
}

/* A transfer of 4 MiB over 1024 scattered pages: host memory stays at
 * the per-command bound, the segments go to the disk in rounds of at most
 * LSI_CMD_MAX_IOV iovecs. */
static void test_memory_bound(void **state)
{
	static struct sg sg[1024];
	uint8_t cdb[10];
	struct fake_stats *st = fake_blkq_stats();

	for (unsigned int i = 0; i < 1024; i++) {
		/* every other page: no two segments merge */
		sg[i].addr = DBUF + i * 8192;
		sg[i].len = 4096;
		memset(ram + sg[i].addr, i & 0xff, 4096);
	}
	rw10(cdb, 0x2a, 0, 8192);
	make_big_cmd(9, cdb, 10, LSI_PHASE_DATA_OUT, sg, 1024);
	queue_job(9);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(9) + OFF_STATUS_BYTE], 0);
	assert_true(st->writes >= 1024 / 128);
	assert_true(st->max_iovcnt <= 128);
	assert_true(lsi_cmd_mem_bound() <= 4096);
	for (unsigned int i = 0; i < 1024; i += 97) {
		uint8_t got[4096];

		assert_int_equal(pread(be[0].fd, got, 4096, i * 4096ull), 4096);
		assert_memory_equal(got, ram + sg[i].addr, 4096);
	}
	/* and back, as a read */
	memset(ram + DBUF, 0, 1024 * 8192);
	rw10(cdb, 0x28, 0, 8192);
	make_big_cmd(10, cdb, 10, LSI_PHASE_DATA_IN, sg, 1024);
	queue_job(10);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(10) + OFF_STATUS_BYTE], 0);
	for (unsigned int i = 0; i < 1024; i++)
		assert_int_equal(ram[sg[i].addr + 4095], i & 0xff);
}

static void run_at(uint32_t dsp)
{
	reg_wr32(LSI_DSP, dsp);
	run();
}

static void test_illegal_instructions(void **state)
{
	static const uint32_t bad[][2] = {
		{ 0xa0080000, 0 },	/* transfer control opcode 4 */
		{ 0xe1340000, 0x800 },	/* LOAD of 0 bytes */
		{ 0xe1340005, 0x800 },	/* LOAD of 5 bytes */
		{ SCR_SET(SCR_TRG), 0 },	/* target role */
		{ SCR_MOVE_ABS(0) ^ SCR_PHASE(0), 0x800 },	/* zero count */
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		w32(0x3000, bad[i][0]);
		w32(0x3004, bad[i][1]);
		run_at(0x3000);
		assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_DIP);
		assert_int_equal(irq_level, 1);
		assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_IID);
		assert_int_equal(irq_level, 0);
	}
	/* and the chip still works */
	test_read_write_complete(state);
}

static void test_bad_dma(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { RAM_SIZE - 1024, 4096 };	/* runs off RAM */

	/* SCRIPTS outside guest RAM */
	run_at(RAM_SIZE + 0x1000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
	/* a LOAD from outside RAM */
	w32(0x3000, SCR_LOAD_ABS(LSI_SCRATCHA, 4));
	w32(0x3004, 0xfff00000);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
	/* table indirect off a wild DSA */
	reg_wr32(LSI_DSA, 0x7ff00000);
	w32(0x3000, SCR_MOVE_TBL ^ SCR_PHASE(LSI_PHASE_MSG_OUT));
	w32(0x3004, 0);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
	/* memory move to nowhere */
	w32(0x3000, SCR_COPY(16));
	w32(0x3004, 0x2000);
	w32(0x3008, RAM_SIZE - 8);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
	/* a data phase move past the end of RAM: bus fault mid-command */
	rw10(cdb, 0x28, 0, 8);
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(1);
	kick(true);
	run();
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON);
	/* the driver resets the bus; the target drops the task */
	reg_wr(LSI_SCNTL1, LSI_SCNTL1_RST);
	assert_true(reg_rd(LSI_SSTAT0) & LSI_SSTAT0_RST);
	reg_wr(LSI_SCNTL1, 0);
	assert_true(reg_rd(LSI_SIST0) & LSI_SIST0_RST);
	run();
	assert_int_equal(lsi_cmds_active(hba), 0);
	assert_int_equal(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON, 0);
	/* after the reset the next command gets UNIT ATTENTION, then works */
	w32(JOBPTR, JOBQ);
	njobs = 0;
	w32(DONEPTR, DONEQ);
	/* every target on the bus saw the reset */
	for (unsigned int t = 0; t <= 2; t += 2) {
		uint8_t tur[6] = { 0 };

		make_cmd(1, t, tur, 6, -1, NULL, 0);
		queue_job(1);
		kick(t == 0);
		run();
		expect_idle();
		assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE],
				 SAM_STAT_CHECK_CONDITION);
		request_sense(2, t);
		assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE], 0);
		assert_int_equal(ram[DBUF + 0x1000 + 2] & 0xf,
				 SENSE_UNIT_ATTENTION);
	}
	w32(JOBPTR, JOBQ);
	njobs = 0;
	w32(DONEPTR, DONEQ);
	test_read_write_complete(state);
}

/* A bus reset while a WRITE's backend I/O is in flight (iovecs on guest
 * memory): sym53c8xx then retries the WRITE from the same buffer and, once
 * the retry has completed, reuses the buffer. The aborted WRITE must not
 * run after the retry and put the buffer's new contents over it: the
 * target takes nothing new until the aborted I/O has finished. The disk
 * here finishes the newest request first. */
static void test_reset_waits_for_aborted_io(void **state)
{
	const struct sg sg = { DBUF, 0x2000 };
	uint8_t cdb[10], tur[6] = { 0 }, got[0x2000];

	fake_blkq_order(FAKE_HOLD);
	memset(ram + DBUF, 0x11, sg.len);
	rw10(cdb, 0x2a, 3000, 16);
	make_cmd(4, 0, cdb, 10, LSI_PHASE_DATA_OUT, &sg, 1);
	queue_job(4);
	kick(true);
	run();
	/* moved to the backend, disconnected, its I/O pending */
	assert_int_equal(fake_blkq_pending(), 1);
	assert_int_equal(ndone(), 0);
	assert_int_equal(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON, 0);

	reg_wr(LSI_SCNTL1, LSI_SCNTL1_RST);
	reg_wr(LSI_SCNTL1, 0);
	assert_true(reg_rd(LSI_SIST0) & LSI_SIST0_RST);	/* signalled at once */
	assert_int_equal(lsi_cmds_active(hba), 1);	/* until its I/O ends */

	/* The driver restarts: TEST UNIT READY (the reset's UNIT ATTENTION)
	 * and the WRITE again, with the same tag and buffer. */
	w32(JOBPTR, JOBQ);
	njobs = 0;
	make_cmd(5, 0, tur, 6, -1, NULL, 0);
	queue_job(5);
	make_cmd(4, 0, cdb, 10, LSI_PHASE_DATA_OUT, &sg, 1);
	queue_job(4);
	kick(true);
	run();
	for (int i = 0; i < 4 && ndone() < 2; i++) {
		fake_blkq_release_newest();
		run();
	}
	assert_int_equal(ndone(), 2);
	assert_int_equal(ram[dsa_of(5) + OFF_STATUS_BYTE],
			 SAM_STAT_CHECK_CONDITION);
	assert_int_equal(ram[dsa_of(4) + OFF_STATUS_BYTE], 0);
	/* the WRITE has completed: the driver reuses its buffer */
	memset(ram + DBUF, 0x22, sg.len);
	fake_blkq_order(FAKE_FIFO);
	run();
	assert_int_equal(lsi_cmds_active(hba), 0);
	assert_int_equal(pread(be[0].fd, got, sizeof(got), 3000 * 512),
			 sizeof(got));
	for (unsigned int i = 0; i < sizeof(got); i++)
		assert_int_equal(got[i], 0x11);
}

static void test_selection_timeout(void **state)
{
	uint8_t cdb[6] = { 0 };

	make_cmd(1, 5, cdb, 6, -1, NULL, 0);	/* no target at ID 5 */
	queue_job(1);
	kick(true);
	run();
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_SIP);
	assert_int_equal(reg_rd(LSI_SIST0), 0);
	assert_true(reg_rd(LSI_SIST1) & LSI_SIST1_STO);
	/* DSP is past the instruction that waited for MSG OUT */
	assert_int_equal(reg_rd32(LSI_DSP), L_start + 10 * 8);
}

/* Negotiation: WDTR and SDTR get answers the driver can live with
 * (narrow, asynchronous); an unknown message gets MESSAGE REJECT. */
static void test_negotiation(void **state)
{
	struct prog p;
	uint8_t *m = ram + 0x5000;

	memset(&p, 0, sizeof(p));
	p.base = 0x4000;
	m[0] = LSI_MSG_IDENTIFY;
	m[1] = LSI_MSG_EXTENDED;
	m[2] = 2;
	m[3] = LSI_EXT_WDTR;
	m[4] = 1;
	m[8] = LSI_MSG_EXTENDED;
	m[9] = 3;
	m[10] = LSI_EXT_SDTR;
	m[11] = 10;
	m[12] = 31;
	m[16] = 0x3f;	/* not a message we know */
	emit(&p, SCR_SEL_ABS_ATN(2), 0);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), 0xe1);
	emit(&p, SCR_MOVE_ABS(5) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), 0x5000);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_IN)), 0xe2);
	emit(&p, SCR_MOVE_ABS(4) ^ SCR_PHASE(LSI_PHASE_MSG_IN), 0x5100);
	emit(&p, SCR_SET(SCR_ATN), 0);
	emit(&p, SCR_CLR(SCR_ACK), 0);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), 0xe3);
	emit(&p, SCR_MOVE_ABS(5) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), 0x5008);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_IN)), 0xe4);
	emit(&p, SCR_MOVE_ABS(5) ^ SCR_PHASE(LSI_PHASE_MSG_IN), 0x5110);
	emit(&p, SCR_SET(SCR_ATN), 0);
	emit(&p, SCR_CLR(SCR_ACK), 0);
	emit(&p, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), 0x5010);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_IN)), 0xe5);
	emit(&p, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_IN), 0x5120);
	emit(&p, SCR_CLR(SCR_ACK), 0);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_COMMAND)), 0xe6);
	emit(&p, SCR_INT, 0x10);
	load(&p);
	run_at(0x4000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_DSPS), 0x10);
	assert_memory_equal(ram + 0x5100, ((uint8_t[]){ 1, 2, 3, 0 }), 4);
	assert_memory_equal(ram + 0x5110, ((uint8_t[]){ 1, 3, 1, 10, 0 }), 5);
	assert_int_equal(ram[0x5120], LSI_MSG_REJECT);
	assert_int_equal(reg_rd(LSI_SBCL) & 7, LSI_PHASE_COMMAND);
	/* abort the nexus: ABORT message, bus free */
	m[24] = LSI_MSG_ABORT;
	memset(&p, 0, sizeof(p));
	p.base = 0x4000;
	emit(&p, SCR_SET(SCR_ATN), 0);
	emit(&p, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), 0xe1);
	emit(&p, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), 0x5018);
	emit(&p, SCR_WAIT_DISC, 0);
	emit(&p, SCR_INT, 0x11);
	load(&p);
	run_at(0x4000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_DSPS), 0x11);
	assert_int_equal(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON, 0);
}

/* SCRIPTS from the on-chip RAM, where sym53c8xx puts them on a 895A. */
static void test_scripts_ram(void **state)
{
	struct prog p;
	uint8_t buf[LSI_RAM_SIZE];

	build_main(&p, RAM_BAR);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, p.w, p.n * 4);
	for (unsigned int off = 0; off < sizeof(buf); off += 4)
		lsi_ram_io(hba, off, buf + off, 4, true);
	lsi_set_ram_base(hba, RAM_BAR);
	{
		uint32_t v;

		lsi_ram_io(hba, 8, &v, 4, false);
		assert_int_equal(v, p.w[2]);
	}
	test_read_write_complete(state);
	/* a RAM-relative LOAD/STORE works too */
	w32(0x3000, SCR_LOAD_ABS(LSI_SCRATCHB, 4));
	w32(0x3004, RAM_BAR + 4);
	w32(0x3008, SCR_INT);
	w32(0x300c, 0x22);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_SCRATCHB), p.w[1]);
}

static void test_registers(void **state)
{
	/* SIGP: set by the CPU, cleared by reading CTEST2 */
	reg_wr(LSI_ISTAT, LSI_ISTAT_SIGP);
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_SIGP);
	assert_true(reg_rd(LSI_CTEST2) & LSI_CTEST2_SIGP);
	assert_false(reg_rd(LSI_ISTAT) & LSI_ISTAT_SIGP);
	/* scratch, temp, dsa hold what is written */
	reg_wr32(LSI_SCRATCHA, 0x12345678);
	reg_wr32(LSI_TEMP, 0xdeadbeef);
	reg_wr32(0x7c, 0xcafef00d);	/* SCRATCHJ */
	assert_int_equal(reg_rd32(LSI_SCRATCHA), 0x12345678);
	assert_int_equal(reg_rd32(LSI_TEMP), 0xdeadbeef);
	assert_int_equal(reg_rd32(0x7c), 0xcafef00d);
	/* MBOX (sym uses SCRATCHA/B and MBOX as scratch too) */
	reg_wr(0x16, 0x5a);
	assert_int_equal(reg_rd(0x16), 0x5a);
	/* the clock quadrupler locks */
	reg_wr(LSI_STEST1, LSI_STEST1_DBLEN);
	assert_true(reg_rd(LSI_STEST4) & LSI_STEST4_LCKFRQ);
	/* register arithmetic with carry, from SCRIPTS */
	w32(0x3000, SCR_LOAD_REG(LSI_SCRATCHB, 0xf0));
	w32(0x3008, SCR_REG_REG(LSI_SCRATCHB, SCR_ADD, 0x20));
	w32(0x3010, SCR_REG_REG(LSI_SCRATCHB + 1, SCR_ADDC, 0));
	w32(0x3018, SCR_REG_SFBR(LSI_SCRATCHB, SCR_SHL, 0));
	w32(0x3020, SCR_SFBR_REG(LSI_SCRATCHB + 2, SCR_OR, 0x01));
	w32(0x3028, SCR_INT ^ IFTRUE(CARRYSET));
	w32(0x302c, 0x30);
	w32(0x3030, SCR_CALL);
	w32(0x3034, 0x3040);
	w32(0x3038, SCR_INT);
	w32(0x303c, 0x31);
	w32(0x3040, SCR_RETURN);
	reg_wr32(LSI_SCRATCHB, 0);
	run_at(0x3000);
	assert_int_equal(reg_rd32(LSI_DSPS), 0x31);
	reg_rd(LSI_DSTAT);
	/* 0xf0 + 0x20 = 0x110: byte 0x10, carry into byte 1; SFBR = 0x20,
	 * byte 2 = 0x21 */
	assert_int_equal(reg_rd32(LSI_SCRATCHB), 0x00210110);
	/* single step: one instruction, then SSI */
	reg_wr(LSI_DCNTL, LSI_DCNTL_SSM);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SSI);
	assert_int_equal(reg_rd32(LSI_DSP), 0x3008);
	reg_wr(LSI_DCNTL, 0);
	/* ABRT stops the SCRIPTS processor */
	w32(0x3100, SCR_WAIT_RESEL);
	w32(0x3104, 0x3100);
	run_at(0x3100);
	reg_wr(LSI_ISTAT, LSI_ISTAT_ABRT);
	reg_wr(LSI_ISTAT, 0);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_ABRT);
	/* soft reset: registers back to their defaults */
	reg_wr(LSI_ISTAT, LSI_ISTAT_SRST);
	reg_wr(LSI_ISTAT, 0);
	assert_int_equal(reg_rd(LSI_SCID) & 0x0f, LSI_HOST_ID);
	assert_int_equal(reg_rd32(LSI_SCRATCHA), 0);
}

/* A completion is waiting when the SCRIPTS try to select: the target wins
 * arbitration, SELECT takes its alternate address, and the job stays in
 * the start queue for later (sym53c8xx's UNGETJOB path). */
static void test_select_loses_to_reselect(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { DBUF, 4096 };
	struct sg sg2 = { DBUF + 0x10000, 4096 };

	fake_blkq_order(FAKE_HOLD);
	rw10(cdb, 0x28, 0, 8);
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(1);
	kick(true);
	run();
	assert_int_equal(lsi_cmds_active(hba), 1);
	rw10(cdb, 0x28, 64, 8);
	make_cmd(2, 2, cdb, 10, LSI_PHASE_DATA_IN, &sg2, 1);
	queue_job(2);
	fake_blkq_order(FAKE_FIFO);
	kick(false);	/* SIGP: START runs with tag 1's status pending */
	run();
	expect_idle();
	assert_int_equal(ndone(), 2);
	assert_int_equal(r32(DONEQ), dsa_of(1));
	assert_int_equal(r32(DONEQ + 4), dsa_of(2));
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE], 0);
	assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE], 0);
	assert_int_equal(ram[DBUF + 0x10000 + 100], pattern(64 * 512 + 100) ^ 1);
}

/* A tag reused while its command is in flight: the task set is aborted
 * and the new command gets OVERLAPPED COMMANDS ATTEMPTED; the aborted
 * command's I/O finishes but it is never reselected. */
static void test_overlapped_tag(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { DBUF, 4096 };

	fake_blkq_order(FAKE_HOLD);
	rw10(cdb, 0x28, 0, 8);
	make_cmd(5, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(5);
	kick(true);
	run();
	assert_int_equal(lsi_cmds_active(hba), 1);
	/* block 6 carries tag 5 again */
	make_cmd(6, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	ram[dsa_of(6) + OFF_MSGOUT_BYTES + 2] = 5;
	queue_job(6);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ndone(), 1);
	assert_int_equal(r32(DONEQ), dsa_of(6));
	assert_int_equal(ram[dsa_of(6) + OFF_STATUS_BYTE],
			 SAM_STAT_CHECK_CONDITION);
	fake_blkq_order(FAKE_FIFO);
	run();
	assert_int_equal(lsi_cmds_active(hba), 0);
	assert_int_equal(ndone(), 1);	/* tag 5 never came back */
	request_sense(7, 0);
	assert_int_equal(ram[DBUF + 0x1000 + 2] & 0xf, SENSE_ABORTED_COMMAND);
	assert_int_equal(ram[DBUF + 0x1000 + 12], 0x4e);
}

/* Data above 4 GiB, as sym53c8xx addresses it with DAC: the table entry's
 * top byte holds address bits 39:32 (CCNTL1 64TIMOD|EN64TIBMV), or picks
 * the register with bits 63:32 (selector mode, EN64TIBMV alone). */
static void test_high_dma(void **state)
{
	static uint8_t high[65536];
	uint8_t cdb[10];
	struct sg sg = { 0x1000, 4096 };

	memset(high, 0, sizeof(high));
	mem.r[1].gpa = 0x100000000ull;
	mem.r[1].size = sizeof(high);
	mem.r[1].hva = high;
	mem.n = 2;
	reg_wr(LSI_CCNTL1, LSI_CCNTL1_EN64TIBMV | LSI_CCNTL1_64TIMOD);
	rw10(cdb, 0x28, 16, 8);
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	w32(dsa_of(1) + OFF_SG, 4096 | 0x01000000);	/* bits 39:32 = 1 */
	queue_job(1);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE], 0);
	for (unsigned int i = 0; i < 4096; i += 511)
		assert_int_equal(high[0x1000 + i], pattern(16 * 512 + i));

	/* selector mode: selector 2 = SCRATCHE holds the high half */
	memset(high, 0, sizeof(high));
	reg_wr(LSI_CCNTL1, LSI_CCNTL1_EN64TIBMV);
	reg_wr32(LSI_SCRATCHC + 8, 1);
	make_cmd(2, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	w32(dsa_of(2) + OFF_SG, 4096 | 0x02000000);
	queue_job(2);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE], 0);
	assert_int_equal(high[0x1000 + 7], pattern(16 * 512 + 7));

	/* 64-bit direct moves (EN64DBMV): every direct block move has a
	 * third dword with address bits 63:32 */
	memset(high, 0, sizeof(high));
	reg_wr(LSI_CCNTL1, LSI_CCNTL1_EN64DBMV);
	ram[0x5000] = LSI_MSG_IDENTIFY;	/* untagged, no disconnect */
	memcpy(ram + 0x5010, cdb, 10);
	{
		static const uint32_t prog[] = {
			SCR_SEL_ABS_ATN(0), 0,
			SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), 0x5000, 0,
			SCR_MOVE_ABS(10) ^ SCR_PHASE(LSI_PHASE_COMMAND), 0x5010, 0,
			SCR_MOVE_ABS(4096) ^ SCR_PHASE(LSI_PHASE_DATA_IN), 0x2000, 1,
			SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_STATUS), 0x5020, 0,
			SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_IN), 0x5021, 0,
			SCR_CLR(SCR_ACK), 0,
			SCR_WAIT_DISC, 0,
			SCR_INT, 0x44,
		};

		memcpy(ram + 0x6000, prog, sizeof(prog));
	}
	ram[0x5020] = 0xff;
	run_at(0x6000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_DSPS), 0x44);
	assert_int_equal(ram[0x5020], 0);
	assert_int_equal(high[0x2000 + 9], pattern(16 * 512 + 9));
	reg_wr(LSI_CCNTL1, 0);
	mem.n = 1;
}

/* An untagged command (sym53c8xx's REQUEST SENSE) while a tagged one is
 * disconnected: both run, nothing is aborted. */
static void test_untagged_beside_tagged(void **state)
{
	uint8_t cdb[10];
	uint8_t tur[6] = { 0 };
	struct sg sg = { DBUF, 4096 };

	fake_blkq_order(FAKE_HOLD);
	rw10(cdb, 0x28, 0, 8);
	make_cmd(5, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	queue_job(5);
	kick(true);
	run();
	make_cmd(6, 0, tur, 6, -1, NULL, 0);
	w32(dsa_of(6) + OFF_MSGOUT, 1);	/* IDENTIFY only: untagged */
	queue_job(6);
	kick(false);
	run();
	assert_int_equal(ndone(), 1);
	assert_int_equal(r32(DONEQ), dsa_of(6));
	assert_int_equal(ram[dsa_of(6) + OFF_STATUS_BYTE], 0);
	assert_int_equal(lsi_cmds_active(hba), 1);
	fake_blkq_order(FAKE_FIFO);
	run();
	expect_idle();
	assert_int_equal(ndone(), 2);
	assert_int_equal(ram[dsa_of(5) + OFF_STATUS_BYTE], 0);
}

/* Memory moves and LOAD/STORE that hit the chip's own register window (the
 * memory BAR): the registers are read and written, as on the chip. */
static void test_register_window(void **state)
{
	const uint32_t win = 0xf1000000u;

	lsi_set_mmio_base(hba, win, 4096);
	w32(0x2000, 0x11223344);
	reg_wr32(LSI_DSA, 0xcafe0000);
	w32(0x3000, SCR_COPY(4));
	w32(0x3004, 0x2000);
	w32(0x3008, win + LSI_SCRATCHB);	/* memory -> SCRATCHB */
	w32(0x300c, SCR_COPY(4));
	w32(0x3010, win + 0x400 + LSI_SCRATCHB);	/* a mirror of it */
	w32(0x3014, 0x2010);			/* SCRATCHB -> memory */
	w32(0x3018, SCR_LOAD_ABS(LSI_SCRATCHA, 4));
	w32(0x301c, win + LSI_DSA);		/* DSA -> SCRATCHA */
	w32(0x3020, SCR_INT);
	w32(0x3024, 0x33);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_SCRATCHB), 0x11223344);
	assert_int_equal(r32(0x2010), 0x11223344);
	assert_int_equal(reg_rd32(LSI_SCRATCHA), 0xcafe0000);
	/* more than the register file in one move: bus fault */
	w32(0x3000, SCR_COPY(4096));
	w32(0x3004, win);
	w32(0x3008, 0x4000);
	run_at(0x3000);
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_BF);
}

/* IDENTIFY without the disconnect privilege: the target keeps the bus
 * while the backend works (no REQ), the SCRIPTS wait in the phase check,
 * and go on when the data is in, without a reselection. */
static void test_no_disconnect_privilege(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { DBUF, 8192 };

	fake_blkq_order(FAKE_HOLD);
	rw10(cdb, 0x28, 32, 16);
	make_cmd(3, 0, cdb, 10, LSI_PHASE_DATA_IN, &sg, 1);
	w32(dsa_of(3) + OFF_MSGOUT, 1);
	ram[dsa_of(3) + OFF_MSGOUT_BYTES] = LSI_MSG_IDENTIFY;	/* no 0x40 */
	queue_job(3);
	kick(true);
	run();
	assert_int_equal(ndone(), 0);
	assert_true(reg_rd(LSI_ISTAT) & LSI_ISTAT_CON);
	assert_int_equal(reg_rd(LSI_SBCL) & LSI_SBCL_REQ, 0);
	assert_int_equal(reg_rd(LSI_ISTAT) & (LSI_ISTAT_DIP | LSI_ISTAT_SIP), 0);
	fake_blkq_order(FAKE_FIFO);
	run();
	expect_idle();
	assert_int_equal(ndone(), 1);
	assert_int_equal(ram[dsa_of(3) + OFF_STATUS_BYTE], 0);
	assert_int_equal(ram[DBUF + 8191], pattern(32 * 512 + 8191));
}

/* The backend refuses a segment outright: the command ends in CHECK
 * CONDITION (HARDWARE ERROR, INTERNAL TARGET FAILURE), never GOOD. */
static void test_segment_refused(void **state)
{
	uint8_t cdb[10];
	struct sg sg = { DBUF, 4096 };

	rw10(cdb, 0x2a, 0, 8);
	make_cmd(1, 0, cdb, 10, LSI_PHASE_DATA_OUT, &sg, 1);
	queue_job(1);
	fake_blkq_fail_next(-EAGAIN);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE],
			 SAM_STAT_CHECK_CONDITION);
	request_sense(2, 0);
	assert_int_equal(ram[DBUF + 0x1000 + 2] & 0xf, SENSE_HARDWARE_ERROR);
	assert_int_equal(ram[DBUF + 0x1000 + 12], 0x44);
	assert_int_equal(lsi_cmds_active(hba), 0);
}

/* With D_SENSE set (control mode page), the sense the HBA makes itself is
 * in descriptor format, like the target's own: here the INTERNAL TARGET
 * FAILURE of a segment the queue refused. */
static void test_descriptor_sense(void **state)
{
	/* MODE SELECT(6), PF: header, then the control page as it is with
	 * D_SENSE set */
	static const uint8_t ms[6] = { 0x15, 0x10, 0, 0, 16, 0 };
	static const uint8_t ctl[16] = { 0, 0, 0, 0, 0x0a, 0x0a, 0x04, 0x10,
					 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
	static const uint8_t rs[6] = { 0x03, 0, 0, 0, 8, 0 };
	const struct sg msg = { DBUF + 0x2000, sizeof(ctl) };
	const struct sg ss = { DBUF + 0x1000, 8 };
	uint8_t cdb[10];
	struct sg sg = { DBUF, 4096 };

	memcpy(ram + DBUF + 0x2000, ctl, sizeof(ctl));
	make_cmd(1, 0, ms, 6, LSI_PHASE_DATA_OUT, &msg, 1);
	queue_job(1);
	kick(true);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(1) + OFF_STATUS_BYTE], SAM_STAT_GOOD);

	rw10(cdb, 0x2a, 0, 8);
	make_cmd(2, 0, cdb, 10, LSI_PHASE_DATA_OUT, &sg, 1);
	queue_job(2);
	fake_blkq_fail_next(-EAGAIN);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(2) + OFF_STATUS_BYTE],
			 SAM_STAT_CHECK_CONDITION);
	/* descriptor sense without descriptors is 8 bytes: ask for those */
	memset(ram + DBUF + 0x1000, 0xff, 18);
	make_cmd(3, 0, rs, 6, LSI_PHASE_DATA_IN, &ss, 1);
	queue_job(3);
	kick(false);
	run();
	expect_idle();
	assert_int_equal(ram[dsa_of(3) + OFF_STATUS_BYTE], SAM_STAT_GOOD);
	assert_int_equal(ram[DBUF + 0x1000] & 0x7f, 0x72);
	assert_int_equal(ram[DBUF + 0x1000 + 1] & 0xf, SENSE_HARDWARE_ERROR);
	assert_int_equal(ram[DBUF + 0x1000 + 2], 0x44);
	assert_int_equal(ram[DBUF + 0x1000 + 3], 0x00);
	assert_int_equal(ram[DBUF + 0x1000 + 7], 0);	/* no descriptors */
	assert_int_equal(lsi_cmds_active(hba), 0);
}

/* ---- whole-word stores ---- */

/* The driver polls its done queue while the SCRIPTS write it: a DSA must
 * land in one store, or the CPU can read half of it and complete a command
 * that is still running. The slot page is read-only while the SCRIPTS run;
 * each store into it faults, is let through alone (single step: the trap
 * flag), and the page is protected again, so every store instruction is
 * seen and what the CPU could read before each one is recorded. */
#if defined(__x86_64__)
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#define WORDS_PAGE 0x7000u
#define WORDS_N 4
#define SNAP_MAX 64
#define X86_TF 0x100

static uint32_t snap[SNAP_MAX][WORDS_N];
static volatile unsigned int nsnap;

static void words_protect(int prot)
{
	if (mprotect(ram + WORDS_PAGE, 4096, prot))
		abort();
}

static void words_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uint8_t *a = si->si_addr;

	(void)sig;
	if (a < ram + WORDS_PAGE || a >= ram + WORDS_PAGE + 4096)
		abort();	/* a real crash */
	if (nsnap < SNAP_MAX)
		memcpy(snap[nsnap], ram + WORDS_PAGE, sizeof(snap[0]));
	nsnap++;
	words_protect(PROT_READ | PROT_WRITE);
	uc->uc_mcontext.gregs[REG_EFL] |= X86_TF;
}

static void words_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig, (void)si;
	uc->uc_mcontext.gregs[REG_EFL] &= ~X86_TF;
	words_protect(PROT_READ);
}

static void test_whole_word_stores(void **state)
{
	const uint32_t win = 0xf1000000u;
	static const uint32_t want[WORDS_N] = {
		0x12345678, 0x9abcdef0, 0x12345678, 0x0badf00d,
	};
	struct sigaction sa = { .sa_flags = SA_SIGINFO }, old_segv, old_trap;
	unsigned int n;

	(void)state;
	lsi_set_mmio_base(hba, win, 4096);
	reg_wr32(LSI_DSA, want[0]);
	w32(0x2000, want[1]);
	w32(0x2004, want[3]);
	/* sym's ways of putting a DSA in a done queue slot */
	w32(0x3000, SCR_STORE_ABS(LSI_DSA, 4));	/* STORE */
	w32(0x3004, WORDS_PAGE);
	w32(0x3008, SCR_COPY(4));		/* memory move */
	w32(0x300c, 0x2000);
	w32(0x3010, WORDS_PAGE + 4);
	w32(0x3014, SCR_COPY(4));		/* register -> memory */
	w32(0x3018, win + LSI_DSA);
	w32(0x301c, WORDS_PAGE + 8);
	w32(0x3020, SCR_STORE_ABS(LSI_SCRATCHA, 4));
	w32(0x3024, WORDS_PAGE + 12);
	w32(0x3028, SCR_INT);
	w32(0x302c, 0x44);
	reg_wr32(LSI_SCRATCHA, want[3]);

	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = words_segv;
	assert_int_equal(sigaction(SIGSEGV, &sa, &old_segv), 0);
	sa.sa_sigaction = words_trap;
	assert_int_equal(sigaction(SIGTRAP, &sa, &old_trap), 0);
	nsnap = 0;
	words_protect(PROT_READ);
	run_at(0x3000);
	words_protect(PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGTRAP, &old_trap, NULL);

	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	for (unsigned int w = 0; w < WORDS_N; w++)
		assert_int_equal(r32(WORDS_PAGE + 4 * w), want[w]);
	n = nsnap < SNAP_MAX ? nsnap : SNAP_MAX;
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int w = 0; w < WORDS_N; w++)
			if (snap[i][w] != 0 && snap[i][w] != want[w])
				fail_msg("word %u seen half-written: %08x (store %u of %u)",
					 w, snap[i][w], i + 1, nsnap);
	/* one store per word, nothing else writes the page */
	assert_int_equal(nsnap, WORDS_N);
}
#else
static void test_whole_word_stores(void **state)
{
	(void)state;
	skip();
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_write_complete, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tagged_out_of_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inquiry_phase_mismatch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_condition_sense,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_memory_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_illegal_instructions, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_dma, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_waits_for_aborted_io,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_selection_timeout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_negotiation, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_scripts_ram, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_registers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_select_loses_to_reselect,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlapped_tag, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_high_dma, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untagged_beside_tagged,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_register_window, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_disconnect_privilege,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_segment_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_descriptor_sense, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_whole_word_stores, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
