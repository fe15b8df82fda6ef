/* The LSI 53C895A on its own thread over the real file backend: a command
 * whose backend work is slow (a 512 MiB WRITE SAME of zeroes, the longest the disk takes, an UNMAP, both
 * on a file system where zeroes must be written) is held in flight at the
 * backend's test gate, and the CPU's register accesses must go on
 * meanwhile: they take the HBA's lock, which the slow work must not hold.
 * Then the data and the status are checked. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../block/blk_hold.h"
#include "../virtio/uring_fail.h"
#include "scsi/disk.h"
#include "scsi/lsi53c895a.h"
#include "lsi_regs_io.h"
#include "scsi/lsi_regs.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define DISK_SIZE (GiB + 2 * MiB)
#define RAM_SIZE (4u << 20)
#define SCRIPTS 0x1000u
#define MSGOUT 0x3000u
#define CDB 0x3010u
#define STATUS 0x3020u
#define MSGIN 0x3021u
#define DBUF 0x4000u
#define DONE_INT 0x99

static uint8_t *ram;
static struct gmem mem;
static struct blk_backend be;
static char path[64];
static uint32_t L_start, at_cmd, at_data_out, at_data_in;

static pthread_mutex_t irq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t irq_cond = PTHREAD_COND_INITIALIZER;
static int irq_level;

static void set_irq(void *opaque, int level)
{
	pthread_mutex_lock(&irq_lock);
	irq_level = level;
	pthread_cond_broadcast(&irq_cond);
	pthread_mutex_unlock(&irq_lock);
}

/* Waits for the interrupt (the timeout only guards against a hang). */
static bool wait_irq(int secs)
{
	struct timespec t;
	bool up;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += secs;
	pthread_mutex_lock(&irq_lock);
	while (!irq_level &&
	       pthread_cond_timedwait(&irq_cond, &irq_lock, &t) == 0)
		;
	up = irq_level;
	pthread_mutex_unlock(&irq_lock);
	return up;
}

static void emit(uint32_t *at, uint32_t a, uint32_t b)
{
	memcpy(ram + *at, &a, 4);
	memcpy(ram + *at + 4, &b, 4);
	*at += 8;
}

/* One untagged command to target 0 without disconnect privilege: the
 * target holds the bus while its backend works, the SCRIPTS wait for its
 * next phase. Ends with INT DONE_INT; other INTs report where it went
 * wrong. */
static void build_scripts(void)
{
	uint32_t at = SCRIPTS, j_out, j_in, L_status;

	L_start = at;
	emit(&at, SCR_SEL_ABS_ATN(0), 0);
	emit(&at, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_OUT)), 0xe1);
	emit(&at, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_OUT), MSGOUT);
	emit(&at, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_COMMAND)), 0xe2);
	at_cmd = at;
	emit(&at, SCR_MOVE_ABS(16) ^ SCR_PHASE(LSI_PHASE_COMMAND), CDB);
	j_out = at;
	emit(&at, SCR_JUMP ^ IFTRUE(WHEN(LSI_PHASE_DATA_OUT)), 0);
	j_in = at;
	emit(&at, SCR_JUMP ^ IFTRUE(IF(LSI_PHASE_DATA_IN)), 0);
	L_status = at;
	emit(&at, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_STATUS)), 0xe3);
	emit(&at, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_STATUS), STATUS);
	emit(&at, SCR_INT ^ IFFALSE(WHEN(LSI_PHASE_MSG_IN)), 0xe4);
	emit(&at, SCR_MOVE_ABS(1) ^ SCR_PHASE(LSI_PHASE_MSG_IN), MSGIN);
	emit(&at, SCR_CLR(SCR_ACK), 0);
	emit(&at, SCR_WAIT_DISC, 0);
	emit(&at, SCR_INT, DONE_INT);
	memcpy(ram + j_out + 4, &at, 4);
	at_data_out = at;
	emit(&at, SCR_MOVE_ABS(0) ^ SCR_PHASE(LSI_PHASE_DATA_OUT), DBUF);
	emit(&at, SCR_JUMP, L_status);
	memcpy(ram + j_in + 4, &at, 4);
	at_data_in = at;
	emit(&at, SCR_MOVE_ABS(0) ^ SCR_PHASE(LSI_PHASE_DATA_IN), DBUF);
	emit(&at, SCR_JUMP, L_status);
}

/* Starts cdb; a data phase, if any, moves len bytes at DBUF. */
static void start(const uint8_t *cdb, unsigned int len)
{
	static const uint8_t cdb_len[8] = { 6, 10, 10, 10, 16, 12, 10, 10 };
	uint32_t cmd = SCR_MOVE_ABS(cdb_len[cdb[0] >> 5]) ^
		       SCR_PHASE(LSI_PHASE_COMMAND);
	uint32_t out = SCR_MOVE_ABS(len) ^ SCR_PHASE(LSI_PHASE_DATA_OUT);
	uint32_t in = SCR_MOVE_ABS(len) ^ SCR_PHASE(LSI_PHASE_DATA_IN);

	memcpy(ram + at_cmd, &cmd, 4);
	memcpy(ram + at_data_out, &out, 4);
	memcpy(ram + at_data_in, &in, 4);
	ram[MSGOUT] = LSI_MSG_IDENTIFY;	/* LUN 0, no disconnect */
	memcpy(ram + CDB, cdb, 16);
	ram[STATUS] = 0xff;
	reg_wr32(LSI_DSP, L_start);
}

/* Waits for the end of the command; returns its status byte. */
static uint8_t finish(void)
{
	assert_true(wait_irq(300));
	assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
	assert_int_equal(reg_rd32(LSI_DSPS), DONE_INT);
	assert_false(wait_irq(0));
	return ram[STATUS];
}

static void write_same16_ndob(uint8_t *cdb, uint64_t lba, uint32_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = 0x93;
	cdb[1] = 0x01;	/* NDOB: zeroes, no data-out */
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = lba >> (56 - 8 * i);
	for (int i = 0; i < 4; i++)
		cdb[10 + i] = blocks >> (24 - 8 * i);
}

static void fill(uint64_t off, uint64_t len, uint8_t v)
{
	assert_true(blk_fill(path, off, len, v));
}

static bool holds(uint64_t off, uint64_t len, uint8_t v)
{
	return blk_holds(path, off, len, v);
}

static int setup(void **state)
{
	/* writeback: the page cache absorbs the 512 MiB, the test stays quick */
	struct disk_cfg cfg = { .cache = CACHE_WRITEBACK };
	struct lsi_params p = { 0 };
	char err[256];
	int fd;

	strcpy(path, "/tmp/iovm-lsi-slow-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, DISK_SIZE), 0);
	close(fd);
	cfg.path = path;
	assert_int_equal(blk_open(&be, &cfg, err, sizeof(err)), 0);
	ram = aligned_alloc(4096, RAM_SIZE);
	assert_non_null(ram);
	memset(ram, 0, RAM_SIZE);
	mem.n = 1;
	mem.r[0].gpa = 0;
	mem.r[0].size = RAM_SIZE;
	mem.r[0].hva = ram;
	build_scripts();
	irq_level = 0;
	p.mem = &mem;
	p.set_irq = set_irq;
	p.threaded = true;
	hba = lsi_create(&p);
	assert_non_null(hba);
	assert_int_equal(lsi_attach(hba, 0, &be), 0);
	assert_int_equal(lsi_start(hba), 0);
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
	lsi_destroy(hba);
	blk_close(&be);
	unlink(path);
	free(ram);
	return 0;
}

/* While the backend holds a command, the CPU writes and reads a register
 * and sees the command in flight: the accesses must answer now, not when
 * the backend is done (if they wait, the watchdog opens the gate after
 * BLK_HOLD_WATCHDOG_MS and the test fails). */
static bool registers_answer(struct blk_hold *h, uint32_t v)
{
	uint8_t istat;

	reg_wr32(LSI_SCRATCHA, v);
	if (reg_rd32(LSI_SCRATCHA) != v)
		return false;
	istat = reg_rd(LSI_ISTAT);
	return (istat & LSI_ISTAT_CON) &&
	       !(istat & (LSI_ISTAT_DIP | LSI_ISTAT_SIP)) && !blk_hold_fired(h);
}

/* MAXIMUM WRITE SAME LENGTH: 1 Mi blocks (disk_int.h) */
#define WS_LEN (512 * MiB)

static void test_write_same_512m_does_not_stall(void **state)
{
	static struct blk_hold h;	/* outlives a failed assert */
	uint8_t cdb[16];
	bool answered;

	fill(0, MiB, 0xab);
	fill(WS_LEN - MiB, 2 * MiB, 0xab);
	assert_int_equal(blk_hold_start(&h, true, true), 0);
	write_same16_ndob(cdb, 0, WS_LEN / 512);
	start(cdb, 0);
	assert_true(blk_hold_arrived(&h, 1, 30000));
	answered = registers_answer(&h, 0x5ca1ab1e);
	blk_hold_release(&h);
	assert_int_equal(finish(), SAM_STAT_GOOD);
	assert_true(blk_hold_end(&h));
	assert_true(answered);
	assert_true(holds(0, WS_LEN, 0));
	assert_true(holds(WS_LEN, MiB, 0xab));
}

/* UNMAP where the file cannot deallocate: the target zeroes the range,
 * by writes here, held the same way. */
static void test_unmap_does_not_stall(void **state)
{
	static const uint64_t lba = 4096, blocks = (256 * MiB) / 512;
	uint8_t cdb[16] = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 };
	uint8_t *p = ram + DBUF;
	static struct blk_hold h;	/* outlives a failed assert */
	bool answered;

	fill(0, 260 * MiB, 0xab);
	memset(p, 0, 24);
	p[1] = 22;	/* data length */
	p[3] = 16;	/* block descriptor data length */
	for (int i = 0; i < 8; i++)
		p[8 + i] = lba >> (56 - 8 * i);
	for (int i = 0; i < 4; i++)
		p[16 + i] = blocks >> (24 - 8 * i);
	assert_int_equal(blk_hold_start(&h, true, true), 0);
	start(cdb, 24);
	assert_true(blk_hold_arrived(&h, 1, 30000));
	answered = registers_answer(&h, 0x0ddba11);
	blk_hold_release(&h);
	assert_int_equal(finish(), SAM_STAT_GOOD);
	assert_true(blk_hold_end(&h));
	assert_true(answered);
	assert_true(holds(0, lba * 512, 0xab));
	assert_true(holds(lba * 512, blocks * 512, 0));
	assert_true(holds(lba * 512 + blocks * 512, MiB, 0xab));
}

/* Writes of zeroes that fail end the command in CHECK CONDITION with
 * MEDIUM ERROR, WRITE ERROR sense (REQUEST SENSE), never GOOD. */
static void test_write_same_error(void **state)
{
	static const uint8_t rs[16] = { 0x03, 0, 0, 0, 18 };
	static struct blk_hold h;	/* outlives a failed assert */
	uint8_t cdb[16];
	int ro = open(path, O_RDONLY);

	assert_true(ro >= 0);
	assert_true(dup2(ro, be.fd) == be.fd);
	if (be.fd_buffered >= 0)
		assert_true(dup2(ro, be.fd_buffered) == be.fd_buffered);
	close(ro);
	assert_int_equal(blk_hold_start(&h, false, true), 0);
	write_same16_ndob(cdb, 0, (8 * MiB) / 512);
	start(cdb, 0);
	assert_int_equal(finish(), SAM_STAT_CHECK_CONDITION);
	assert_true(blk_hold_end(&h));
	start(rs, 18);
	assert_int_equal(finish(), SAM_STAT_GOOD);
	assert_int_equal(ram[DBUF + 2] & 0xf, SENSE_MEDIUM_ERROR);
	assert_int_equal(ram[DBUF + 12], 0x0c);	/* WRITE ERROR */
}

/* The backend's io_uring breaks under a READ: the command must end (CHECK
 * CONDITION with a medium or hardware error) instead of leaving the guest waiting for ever,
 * and so must the next one, which the dead queue fails at once. The wait
 * for the interrupt only guards against a hang. */
static void test_uring_failure(void **state)
{
	static const uint8_t rs[16] = { 0x03, 0, 0, 0, 18 };
	uint8_t cdb[16] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 8 };	/* READ(10), 8 blocks */

	fill(0, MiB, 0xab);
	uring_fail_arm(true);
	for (int i = 0; i < 2; i++) {
		start(cdb, 4096);
		assert_true(wait_irq(60));
		assert_true(reg_rd(LSI_DSTAT) & LSI_DSTAT_SIR);
		assert_int_equal(reg_rd32(LSI_DSPS), DONE_INT);
		assert_int_equal(ram[STATUS], SAM_STAT_CHECK_CONDITION);
		start(rs, 18);
		assert_int_equal(finish(), SAM_STAT_GOOD);
		/* a medium or a hardware error, whichever way the dead queue
		 * failed it (in flight, or refused at submission) */
		assert_true((ram[DBUF + 2] & 0xf) == SENSE_MEDIUM_ERROR ||
			    (ram[DBUF + 2] & 0xf) == SENSE_HARDWARE_ERROR);
	}
	assert_true(uring_fail_count() > 0);
	uring_fail_arm(false);
	uring_fail_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_same_512m_does_not_stall,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unmap_does_not_stall,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_same_error, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_uring_failure, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
