/* libFuzzer harness for the LSI 53C895A model: the input is guest memory
 * holding a SCRIPTS program and its tables, run from DSP 0x1000 with DSA
 * 0x8000, and resumed after each interrupt a few times, as a driver would.
 * Two disk targets sit on the bus; any SCRIPTS, table, message or CDB the
 * input makes up must end in an interrupt or a wait, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scsi/lsi53c895a.h"
#include "scsi/lsi_regs.h"

#define RAM_SIZE (1u << 20)
#define DISK_SIZE (1u << 20)

static uint8_t *ram;
static struct gmem mem;
static struct blk_backend be;
static struct lsi *hba;

static void reg_wr(unsigned int off, uint8_t v)
{
	lsi_reg_io(hba, off, &v, 1, true);
}

static uint8_t reg_rd(unsigned int off)
{
	uint8_t v;

	lsi_reg_io(hba, off, &v, 1, false);
	return v;
}

static void reg_wr32(unsigned int off, uint32_t v)
{
	lsi_reg_io(hba, off, &v, 4, true);
}

static void init(void)
{
	struct lsi_params p = { 0 };
	int fd = memfd_create("fuzz-lsi-disk", 0);

	if (fd < 0 || ftruncate(fd, DISK_SIZE) < 0)
		abort();
	be.fd = fd;
	be.fd_buffered = -1;
	be.size = DISK_SIZE;
	be.block_size = 512;
	be.phys_block_size = 512;
	ram = calloc(1, RAM_SIZE);
	mem.n = 1;
	mem.r[0].size = RAM_SIZE;
	mem.r[0].hva = ram;
	p.mem = &mem;
	hba = lsi_create(&p);
	if (!ram || !hba || lsi_attach(hba, 0, &be) || lsi_attach(hba, 1, &be))
		abort();
	lsi_set_ram_base(hba, 0xf0000000u);
	lsi_set_mmio_base(hba, 0xf1000000u, 4096);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!hba)
		init();
	/* A clean chip and bus for every input. */
	reg_wr(LSI_ISTAT, LSI_ISTAT_SRST);
	reg_wr(LSI_ISTAT, 0);
	reg_wr(LSI_SCNTL1, LSI_SCNTL1_RST);
	reg_wr(LSI_SCNTL1, 0);
	lsi_poll(hba, true, 1);
	memset(ram, 0, 0x20000);
	if (size > 0x20000 - 0x1000)
		size = 0x20000 - 0x1000;
	memcpy(ram + 0x1000, data, size);
	/* The first bytes double as register setup, like a driver's init. */
	if (size >= 4) {
		reg_wr(LSI_CCNTL0, data[0] & (LSI_CCNTL0_ENPMJ |
					     LSI_CCNTL0_PMJCTL));
		reg_wr(LSI_CCNTL1, data[1] & 0x06);
		reg_wr(LSI_DCNTL, data[2] & LSI_DCNTL_SSM);
		reg_wr(LSI_SCID, LSI_HOST_ID | (data[3] & LSI_SCID_RRE));
		reg_wr32(LSI_PMJAD1, 0x1000 + (data[3] & 0xf0));
		reg_wr32(LSI_PMJAD2, 0x1000 + (data[3] & 0xf0));
	}
	reg_wr(LSI_SIEN0, 0xff);
	reg_wr(LSI_SIEN1, 0xff);
	reg_wr(LSI_DIEN, 0xff);
	reg_wr32(LSI_DSA, 0x8000);
	reg_wr32(LSI_DSP, 0x1000);
	for (int round = 0; round < 8; round++) {
		uint8_t istat;

		lsi_poll(hba, true, 20000);
		istat = reg_rd(LSI_ISTAT);
		reg_rd(LSI_DSTAT);
		reg_rd(LSI_SIST0);
		reg_rd(LSI_SIST1);
		if (istat & LSI_ISTAT_INTF)
			reg_wr(LSI_ISTAT, LSI_ISTAT_INTF);
		/* resume where it stopped, or wake a WAIT RESELECT */
		if (round & 1)
			reg_wr(LSI_ISTAT, LSI_ISTAT_SIGP);
		else
			reg_wr32(LSI_DSP, 0x1000 + ((round * 0x40) & 0xfff));
	}
	lsi_poll(hba, true, 1);
	return 0;
}
