/* LSI 53C895A register file: reads and writes of the registers (from the
 * CPU through the I/O and memory BARs, and from SCRIPTS), chip reset, and
 * the on-chip SCRIPTS RAM. */
#include <string.h>

#include "scsi/lsi_chip.h"
#include "scsi/lsi_internal.h"

void lsi_chip_reset(struct lsi *s)
{
	memset(s->regs, 0, sizeof(s->regs));
	s->dstat = s->sist0 = s->sist1 = 0;
	s->istat = 0;
	s->carry = false;
	s->scr = LSI_SCR_IDLE;
	s->sto_pending = false;
	s->regs[LSI_SCNTL0] = 0xc0;
	s->regs[LSI_SCID] = LSI_HOST_ID;
	s->regs[LSI_DCMD] = 0x40;
	s->regs[LSI_CTEST2] = LSI_CTEST2_DACK;
	s->regs[LSI_RESPID0] = 0x80;
	s->regs[LSI_GPREG] = 0x0f;
	lsi_update_irq(s);
}

/* ---- register file ------------------------------------------------------ */

uint8_t lsi_reg_read(struct lsi *s, unsigned int off, bool scripts)
{
	uint8_t v;

	switch (off) {
	case LSI_DSTAT:
		v = s->dstat | LSI_DSTAT_DFE;
		s->dstat = 0;
		lsi_update_irq(s);
		return v;
	case LSI_SIST0:
		v = s->sist0;
		s->sist0 = 0;
		lsi_update_irq(s);
		return v;
	case LSI_SIST1:
		v = s->sist1;
		s->sist1 = 0;
		lsi_update_irq(s);
		return v;
	case LSI_ISTAT:
		v = s->istat & ~LSI_ISTAT_CON;
		if (s->connected)
			v |= LSI_ISTAT_CON;
		return v;
	case 0x15:	/* ISTAT1 exists on later chips: reads as zero */
		return 0;
	case LSI_SSTAT0:
		v = s->regs[LSI_SSTAT0];
		if (s->regs[LSI_SCNTL1] & LSI_SCNTL1_RST)
			v |= LSI_SSTAT0_RST;
		return v;
	case LSI_SSTAT1:
		return s->connected ? s->phase : 0;
	case LSI_SSTAT2:
		return s->connected ? 0 : LSI_SSTAT2_LDSC;
	case LSI_SBCL:
		if (!s->connected)
			return 0;
		v = LSI_SBCL_BSY | s->phase;
		if (!s->req_wait)
			v |= LSI_SBCL_REQ;
		if (s->atn)
			v |= LSI_SBCL_ATN;
		if (s->ack_hold || s->ack)
			v |= LSI_SBCL_ACK;
		return v;
	case LSI_CTEST0:
		return 0xff;
	case LSI_CTEST1:
		return 0xf0;	/* DMA FIFO empty */
	case LSI_CTEST2:
		v = s->regs[LSI_CTEST2] | LSI_CTEST2_DACK | LSI_CTEST2_CM;
		if (s->istat & LSI_ISTAT_SIGP) {
			s->istat &= ~LSI_ISTAT_SIGP;
			v |= LSI_CTEST2_SIGP;
		}
		return v;
	case LSI_CTEST3:
		return (s->regs[LSI_CTEST3] & 0x0f) | (LSI_PCI_REVISION << 4);
	case LSI_SIDL:
		return s->last_in;
	case LSI_SIDL + 1:
	case LSI_SBDL + 1:
		return 0;
	case LSI_SBDL:
		if (s->connected && s->phase == LSI_PHASE_MSG_IN &&
		    s->msgin_pos < s->msgin_len)
			return s->msgin[s->msgin_pos];
		return 0;
	case LSI_STEST4:
		/* An LVD bus (SMODE 11), and the clock multiplier locks. */
		return 0xc0 | LSI_STEST4_LCKFRQ;
	case LSI_MACNTL:
		return 0x50;	/* chip type nibble, memory access local */
	default:
		return s->regs[off];
	}
}

static void dsp_written(struct lsi *s)
{
	if (!(s->regs[LSI_DMODE] & LSI_DMODE_MAN))
		lsi_scripts_start(s);
}

void lsi_reg_write(struct lsi *s, unsigned int off, uint8_t val, bool scripts)
{
	switch (off) {
	case LSI_SCNTL1:
		if ((val & LSI_SCNTL1_RST) &&
		    !(s->regs[LSI_SCNTL1] & LSI_SCNTL1_RST)) {
			s->regs[LSI_SCNTL1] = val & ~LSI_SCNTL1_CON;
			lsi_bus_reset(s, "SCSI bus reset");
			lsi_scsi_interrupt(s, LSI_SIST0_RST, 0);
			return;
		}
		/* CON is the bus state, not a control bit. */
		s->regs[LSI_SCNTL1] = (val & ~LSI_SCNTL1_CON) |
				      (s->connected ? LSI_SCNTL1_CON : 0);
		return;
	case LSI_SCNTL2:
		s->regs[off] = val & ~(LSI_SCNTL2_WSR | LSI_SCNTL2_WSS);
		return;
	case LSI_SDID:
		s->regs[off] = val & 0x0f;
		return;
	case LSI_SFBR:
		/* Written by SCRIPTS register moves (and CPUs that insist). */
		s->regs[off] = val;
		return;
	case LSI_SSID:
	case LSI_SBCL:
	case LSI_DSTAT:
	case LSI_SSTAT0:
	case LSI_SSTAT1:
	case LSI_SSTAT2:
	case LSI_CTEST0:
	case LSI_CTEST1:
	case LSI_SIST0:
	case LSI_SIST1:
	case LSI_SIDL:
	case LSI_SBDL:
	case LSI_STEST4:
	case 0x15:
		return;	/* read-only */
	case LSI_ISTAT:
		s->istat = (s->istat & 0x0f) |
			   (val & (LSI_ISTAT_SEM | LSI_ISTAT_SIGP));
		if (val & LSI_ISTAT_INTF) {
			s->istat &= ~LSI_ISTAT_INTF;
			lsi_update_irq(s);
		}
		if (val & LSI_ISTAT_ABRT) {
			s->scr = LSI_SCR_IDLE;
			lsi_dma_interrupt(s, LSI_DSTAT_ABRT);
		}
		if (val & LSI_ISTAT_SRST) {
			/* The chip lets go of the bus: targets see it as a
			 * lost nexus and drop their tasks. */
			lsi_bus_reset(s, "chip soft reset");
			lsi_chip_reset(s);
		}
		if ((val & LSI_ISTAT_SIGP) && s->scr == LSI_SCR_WAIT_RESEL) {
			s->scr = LSI_SCR_RUN;
			lsi_kick(s);
		}
		return;
	case LSI_CTEST2:
		s->regs[off] = val & 0x08;
		return;
	case LSI_CTEST3:
		s->regs[off] = val & 0x0f & ~(LSI_CTEST3_CLF | LSI_CTEST3_FLF);
		return;
	case LSI_DSP + 3:
		s->regs[off] = val;
		if (!scripts)
			dsp_written(s);
		return;
	case LSI_DCNTL:
		s->regs[off] = val & ~LSI_DCNTL_STD;
		if ((val & LSI_DCNTL_STD) && !scripts)
			lsi_scripts_start(s);
		return;
	case LSI_DIEN:
	case LSI_SIEN0:
	case LSI_SIEN1:
		s->regs[off] = val;
		lsi_update_irq(s);
		return;
	case LSI_STIME1:
		s->regs[off] = val;
		/* The general purpose timer is used by drivers to measure the
		 * SCSI clock; we expire it at once (the clock is nominal). */
		if (val & LSI_STIME1_GEN_MASK)
			lsi_scsi_interrupt(s, 0, LSI_SIST1_GEN);
		return;
	default:
		s->regs[off] = val;
		return;
	}
}

/* ---- access from the CPU ----------------------------------------------- */

void lsi_reg_io(struct lsi *s, uint64_t off, void *data, unsigned int len,
		bool is_write)
{
	uint8_t *d = data;

	pthread_mutex_lock(&s->lock);
	for (unsigned int i = 0; i < len; i++) {
		unsigned int r = (off + i) & (LSI_NREGS - 1);

		if (is_write)
			lsi_reg_write(s, r, d[i], false);
		else
			d[i] = lsi_reg_read(s, r, false);
	}
	pthread_mutex_unlock(&s->lock);
}

void lsi_ram_io(struct lsi *s, uint64_t off, void *data, unsigned int len,
		bool is_write)
{
	if (off >= LSI_RAM_SIZE || len > LSI_RAM_SIZE - off) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	/* SCRIPTS fetch from this RAM on the HBA thread: a word written by
	 * the CPU must not be seen half-written. */
	pthread_mutex_lock(&s->lock);
	if (is_write)
		memcpy(s->ram + off, data, len);
	else
		memcpy(data, s->ram + off, len);
	pthread_mutex_unlock(&s->lock);
}

void lsi_set_mmio_base(struct lsi *s, uint64_t gpa, uint64_t size)
{
	pthread_mutex_lock(&s->lock);
	s->mmio_base = gpa;
	s->mmio_size = size;
	pthread_mutex_unlock(&s->lock);
}

void lsi_set_ram_base(struct lsi *s, uint64_t gpa)
{
	pthread_mutex_lock(&s->lock);
	s->ram_base = gpa;
	pthread_mutex_unlock(&s->lock);
}
