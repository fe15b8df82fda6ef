/* LSI 53C895A interrupt and wake-up signalling: the DSTAT/SIST latches
 * summarised in ISTAT and on the INTx line, and the kick that starts or
 * wakes the SCRIPTS processor on the HBA thread. */
#include <unistd.h>

#include "scsi/lsi_chip.h"
#include "scsi/lsi_internal.h"

void lsi_kick(struct lsi *s)
{
	uint64_t one = 1;

	if (s->kick_fd >= 0 && write(s->kick_fd, &one, sizeof(one)) < 0)
		return;	/* counter full: the thread is awake anyway */
}

/* Something the processor may be waiting for happened. */
void lsi_wake(struct lsi *s)
{
	if (s->scr == LSI_SCR_WAIT_BUS || s->scr == LSI_SCR_WAIT_RESEL) {
		s->scr = LSI_SCR_RUN;
		lsi_kick(s);
	}
}

void lsi_update_irq(struct lsi *s)
{
	bool level;

	if (s->dstat)
		s->istat |= LSI_ISTAT_DIP;
	else
		s->istat &= ~LSI_ISTAT_DIP;
	if (s->sist0 || s->sist1)
		s->istat |= LSI_ISTAT_SIP;
	else
		s->istat &= ~LSI_ISTAT_SIP;
	level = (s->dstat & s->regs[LSI_DIEN]) ||
		(s->sist0 & s->regs[LSI_SIEN0]) ||
		(s->sist1 & s->regs[LSI_SIEN1]) || (s->istat & LSI_ISTAT_INTF);
	if (level != s->irq_level) {
		__atomic_store_n(&s->irq_level, level, __ATOMIC_SEQ_CST);
		if (s->p.set_irq)
			s->p.set_irq(s->p.irq_opaque, level);
	}
}

void lsi_dma_interrupt(struct lsi *s, uint8_t dstat)
{
	s->dstat |= dstat;
	s->scr = LSI_SCR_IDLE;
	lsi_update_irq(s);
}

void lsi_scsi_interrupt(struct lsi *s, uint8_t sist0, uint8_t sist1)
{
	/* Fatal conditions halt SCRIPTS whether or not they are enabled as
	 * interrupts; the others (CMP, SEL, RSL, GEN, HTH) only when they
	 * are. */
	uint8_t halt0 = LSI_SIST0_MA | LSI_SIST0_UDC | LSI_SIST0_RST |
			LSI_SIST0_PAR | LSI_SIST0_SGE;
	uint8_t halt1 = LSI_SIST1_STO | LSI_SIST1_SBMC;

	s->sist0 |= sist0;
	s->sist1 |= sist1;
	if ((sist0 & (halt0 | s->regs[LSI_SIEN0])) ||
	    (sist1 & (halt1 | s->regs[LSI_SIEN1])))
		s->scr = LSI_SCR_IDLE;
	lsi_update_irq(s);
}

void lsi_scripts_start(struct lsi *s)
{
	s->scr = LSI_SCR_RUN;
	if (s->kick_fd >= 0) {
		uint64_t one = 1;

		if (write(s->kick_fd, &one, sizeof(one)) < 0)
			return;	/* counter full: the thread is awake */
	}
}
