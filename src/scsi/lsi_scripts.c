/* The 53C8xx SCRIPTS processor: fetches and executes instructions from
 * guest memory or the on-chip RAM, on the HBA thread. Every fetch and DMA
 * address comes from the guest and is checked; a bad one is a bus fault,
 * an undefined encoding an illegal instruction interrupt, as on the chip. */
#include <string.h>

#include "scsi/lsi_chip.h"
#include "scsi/lsi_internal.h"
#include "scsi/lsi_scripts.h"

static int32_t sext24(uint32_t v)
{
	return (int32_t)(v << 8) >> 8;
}

/* Moves that may touch words the driver shares with the SCRIPTS (start
 * and done queue slots, mailboxes) and polls or fills while we run. The
 * chip moves a naturally aligned dword in one PCI transaction, so the CPU
 * sees the old word or the new one; a byte-wise copy (what a compiler
 * makes of a short memcpy) lets it read a half-written DSA off the done
 * queue and complete the wrong command. Each aligned word is one access:
 * loads acquire, stores release, so a done queue slot is seen only after
 * the status byte and data the SCRIPTS moved before it. */
static void guest_get(void *dst, const uint8_t *p, uint32_t n)
{
	uint8_t *d = dst;

	while (n) {
		uintptr_t a = (uintptr_t)p;

		if (n >= 4 && !(a & 3)) {
			uint32_t v = __atomic_load_n((const uint32_t *)p,
						     __ATOMIC_ACQUIRE);

			memcpy(d, &v, 4);
			d += 4, p += 4, n -= 4;
		} else if (n >= 2 && !(a & 1)) {
			uint16_t v = __atomic_load_n((const uint16_t *)p,
						     __ATOMIC_ACQUIRE);

			memcpy(d, &v, 2);
			d += 2, p += 2, n -= 2;
		} else {
			*d++ = __atomic_load_n(p, __ATOMIC_ACQUIRE);
			p++, n--;
		}
	}
}

static void guest_put(uint8_t *p, const void *src, uint32_t n)
{
	const uint8_t *b = src;

	while (n) {
		uintptr_t a = (uintptr_t)p;

		if (n >= 4 && !(a & 3)) {
			uint32_t v;

			memcpy(&v, b, 4);
			__atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
			b += 4, p += 4, n -= 4;
		} else if (n >= 2 && !(a & 1)) {
			uint16_t v;

			memcpy(&v, b, 2);
			__atomic_store_n((uint16_t *)p, v, __ATOMIC_RELEASE);
			b += 2, p += 2, n -= 2;
		} else {
			__atomic_store_n(p, *b, __ATOMIC_RELEASE);
			b++, p++, n--;
		}
	}
}

/* Memory moves up to this size go word by word through guest_get/put;
 * longer ones are bulk data, copied as such. */
#define LSI_WORD_MOVE_MAX 64

static bool dma_read(struct lsi *s, uint64_t addr, void *buf, uint32_t len)
{
	const uint8_t *p = lsi_dma_ptr(s, addr, len);

	if (!p)
		return false;
	guest_get(buf, p, len);
	return true;
}

static bool read32(struct lsi *s, uint64_t addr, uint32_t *v)
{
	return dma_read(s, addr, v, 4);
}

static void bus_fault(struct lsi *s)
{
	lsi_dma_interrupt(s, LSI_DSTAT_BF);
}

static void illegal(struct lsi *s)
{
	lsi_dma_interrupt(s, LSI_DSTAT_IID);
}

/* The instruction cannot go on until the target asserts REQ (or a target
 * reselects): run it again from the start when something happens. */
static void wait_for(struct lsi *s, uint32_t insn_addr, enum lsi_scr_state st)
{
	lsi_set32(s, LSI_DSP, insn_addr);
	s->scr = st;
}

/* A bus operation found the bus in a state that forbids it. */
static bool bus_trouble(struct lsi *s, int ph, uint32_t insn_addr)
{
	if (s->sto_pending) {
		/* Selection timed out: reported now, with DSP after the
		 * instruction that waited for the target (as the chip). */
		s->sto_pending = false;
		lsi_scsi_interrupt(s, 0, LSI_SIST1_STO);
		return true;
	}
	if (ph == -LSI_BUS_WAIT) {
		wait_for(s, insn_addr, LSI_SCR_WAIT_BUS);
		return true;
	}
	if (ph == -LSI_BUS_FREE) {
		/* A bus phase on a free bus: the chip reports the bus as
		 * lost rather than hang. */
		lsi_scsi_interrupt(s, LSI_SIST0_UDC, 0);
		return true;
	}
	return false;
}

/* The target changed phase during (or before) a block move. */
static void phase_mismatch(struct lsi *s, uint32_t insn_addr, uint32_t left,
			   uint64_t addr, uint8_t move_phase)
{
	uint8_t ccntl0 = s->regs[LSI_CCNTL0];

	lsi_set_dbc(s, left);
	lsi_set32(s, LSI_DNAD, (uint32_t)addr);
	/* FIFO byte counters agree with DBC: nothing is left in the FIFO. */
	s->regs[LSI_DFIFO] = left & 0xff;
	s->regs[LSI_CTEST5] = (s->regs[LSI_CTEST5] & ~3) | ((left >> 8) & 3);
	lsi_set32(s, LSI_RBC, left | (uint32_t)(addr >> 32) << 24);
	lsi_set32(s, LSI_UA, (uint32_t)addr);
	lsi_set32(s, LSI_IA, insn_addr);
	if (ccntl0 & LSI_CCNTL0_ENPMJ) {
		/* Phase mismatch jump: SCRIPTS handle it, no interrupt. */
		uint32_t target;

		if (ccntl0 & LSI_CCNTL0_PMJCTL)
			target = (move_phase & 1) ? lsi_get32(s, LSI_PMJAD2) :
						    lsi_get32(s, LSI_PMJAD1);
		else
			target = lsi_get32(s, LSI_PMJAD1);
		lsi_set32(s, LSI_DSP, target);
		return;
	}
	lsi_scsi_interrupt(s, LSI_SIST0_MA, 0);
}

static void block_move(struct lsi *s, uint32_t insn, uint32_t arg,
		       uint32_t insn_addr)
{
	uint8_t phase = (insn >> 24) & 7;
	uint32_t count = insn & 0xffffff;
	uint64_t addr = arg;
	uint32_t left;
	int ph, ret;

	if (insn & (1u << 29)) {
		uint32_t a;

		if (!read32(s, arg, &a)) {
			bus_fault(s);
			return;
		}
		addr = a;
	} else if (insn & (1u << 28)) {
		uint32_t t[2];
		uint32_t ta = lsi_get32(s, LSI_DSA) + sext24(arg);
		uint8_t ti = LSI_CCNTL1_EN64TIBMV | LSI_CCNTL1_64TIMOD;

		if (!dma_read(s, ta, t, 8)) {
			bus_fault(s);
			return;
		}
		count = t[0] & 0xffffff;
		addr = t[1];
		if ((s->regs[LSI_CCNTL1] & ti) == ti) {
			/* 40-bit table indirect: address bits 39:32 in the
			 * count word's top byte. */
			addr |= (uint64_t)(t[0] >> 24) << 32;
		} else if (s->regs[LSI_CCNTL1] & LSI_CCNTL1_EN64TIBMV) {
			/* Selector mode: the top byte picks the register
			 * that holds address bits 63:32. */
			unsigned int sel = (t[0] >> 24) & 0x1f;
			unsigned int reg;

			if (sel < 0x10)
				reg = LSI_SCRATCHC + 4 * sel;	/* C..R */
			else if (sel <= 0x15)
				reg = 0xa0 + 4 * (sel - 0x10);	/* MMRS..DBMS */
			else {
				illegal(s);
				return;
			}
			addr |= (uint64_t)lsi_get32(s, reg) << 32;
		}
	} else if (s->regs[LSI_CCNTL1] & LSI_CCNTL1_EN64DBMV) {
		/* 64-bit direct move: a third dword with bits 63:32 */
		uint32_t hi, dsp = lsi_get32(s, LSI_DSP);

		if (!read32(s, dsp, &hi)) {
			bus_fault(s);
			return;
		}
		lsi_set32(s, LSI_DSP, dsp + 4);
		lsi_set32(s, 0xb4, hi);	/* DBMS */
		addr |= (uint64_t)hi << 32;
	}
	lsi_set_dbc(s, count);
	lsi_set32(s, LSI_DNAD, (uint32_t)addr);
	if (!count) {
		illegal(s);	/* a zero byte count is illegal */
		return;
	}
	ph = lsi_bus_phase(s);
	if (s->sto_pending || ph < 0) {
		bus_trouble(s, ph, insn_addr);
		return;
	}
	if (ph != phase) {
		phase_mismatch(s, insn_addr, count, addr, phase);
		return;
	}
	left = count;
	ret = lsi_bus_move(s, addr, &left);
	if (ret == LSI_BUS_FAULT) {
		bus_fault(s);
		return;
	}
	if (ret == LSI_BUS_WAIT) {
		wait_for(s, insn_addr, LSI_SCR_WAIT_BUS);
		return;
	}
	if (ret == LSI_BUS_FREE) {
		lsi_scsi_interrupt(s, LSI_SIST0_UDC, 0);
		return;
	}
	addr += count - left;
	lsi_set_dbc(s, left);
	lsi_set32(s, LSI_DNAD, (uint32_t)addr);
	s->regs[LSI_DFIFO] = left & 0xff;
	if (left)
		phase_mismatch(s, insn_addr, left, addr, phase);
}

static void io_insn(struct lsi *s, uint32_t insn, uint32_t arg, uint32_t dsp,
		    uint32_t insn_addr)
{
	unsigned int op = (insn >> 27) & 7;
	uint32_t alt = arg;
	uint32_t id_word = insn;
	bool set = op == 3;

	if (insn & (1u << 26))
		alt = dsp + sext24(arg);
	if (s->sto_pending) {
		bus_trouble(s, 0, insn_addr);	/* the selection timed out */
		return;
	}
	switch (op) {
	case 0:	/* SELECT */
		if (insn & (1u << 25)) {
			uint32_t ta = lsi_get32(s, LSI_DSA) + sext24(insn);

			if (!read32(s, ta, &id_word)) {
				bus_fault(s);
				return;
			}
			s->regs[LSI_SCNTL3] = id_word >> 24;
			s->regs[LSI_SXFER] = id_word >> 8;
		}
		s->regs[LSI_SDID] = (id_word >> 16) & 0x0f;
		/* Already connected, or a target wins arbitration with a
		 * reselection: take the alternate address. */
		if (lsi_bus_connected(s) || lsi_bus_reselect(s)) {
			lsi_set32(s, LSI_DSP, alt);
			return;
		}
		lsi_bus_select(s, (id_word >> 16) & 0x0f, insn & (1u << 24));
		return;
	case 1:	/* WAIT DISCONNECT */
		if (lsi_bus_connected(s))
			wait_for(s, insn_addr, LSI_SCR_WAIT_BUS);
		return;
	case 2:	/* WAIT RESELECT */
		if (s->istat & LSI_ISTAT_SIGP) {
			lsi_set32(s, LSI_DSP, alt);
			return;
		}
		/* Reselected already (a SELECT lost arbitration to the
		 * target and jumped here): go on as reselected. */
		if (lsi_bus_connected(s))
			return;
		if (!lsi_bus_reselect(s))
			wait_for(s, insn_addr, LSI_SCR_WAIT_RESEL);
		return;
	case 3:	/* SET */
	case 4:	/* CLEAR */
		if (insn & SCR_TRG) {
			/* This model is an initiator only: SET TARGET is an
			 * illegal instruction for it. */
			if (set) {
				illegal(s);
				return;
			}
		}
		if (insn & SCR_CARRY)
			s->carry = set;
		if (insn & SCR_ATN)
			lsi_bus_set_atn(s, set);
		if (insn & SCR_ACK) {
			if (set)
				lsi_bus_set_ack(s);
			else
				lsi_bus_clear_ack(s);
		}
		return;
	default:
		illegal(s);
		return;
	}
}

static void reg_insn(struct lsi *s, uint32_t insn)
{
	unsigned int op = (insn >> 27) & 7;
	unsigned int alu = (insn >> 24) & 7;
	unsigned int reg = ((insn >> 16) & 0x7f) | (insn & 0x80);
	uint8_t data = insn >> 8;
	uint8_t a, b, r;
	unsigned int sum;

	switch (op) {
	case 5:	/* reg = SFBR op data */
		a = s->regs[LSI_SFBR];
		b = data;
		break;
	case 6:	/* SFBR = reg op data */
		a = lsi_reg_read(s, reg, true);
		b = data;
		break;
	default:	/* 7: reg = reg op (data or SFBR) */
		a = lsi_reg_read(s, reg, true);
		b = (insn & SCR_SFBR_DATA) ? s->regs[LSI_SFBR] : data;
		break;
	}
	switch (alu) {
	case 0:
		r = b;
		break;
	case 1:	/* shift left through carry */
		r = (uint8_t)(a << 1) | s->carry;
		s->carry = a >> 7;
		break;
	case 2:
		r = a | b;
		break;
	case 3:
		r = a ^ b;
		break;
	case 4:
		r = a & b;
		break;
	case 5:	/* shift right through carry */
		r = (a >> 1) | (s->carry << 7);
		s->carry = a & 1;
		break;
	case 6:
		sum = a + b;
		r = sum;
		s->carry = sum > 0xff;
		break;
	default:
		sum = a + b + s->carry;
		r = sum;
		s->carry = sum > 0xff;
		break;
	}
	if (op == 6)
		s->regs[LSI_SFBR] = r;
	else
		lsi_reg_write(s, reg, r, true);
}

static void transfer(struct lsi *s, uint32_t insn, uint32_t arg, uint32_t dsp,
		     uint32_t insn_addr)
{
	unsigned int op = (insn >> 27) & 7;
	bool jump_if = insn & (1u << 19);
	bool match = true;
	uint32_t addr = arg;

	if (op > 3) {
		illegal(s);
		return;
	}
	if (insn & (1u << 17)) {
		int ph;

		if (insn & (1u << 16)) {
			/* WHEN: wait for the target's REQ first. */
			ph = lsi_bus_phase(s);
			if (s->sto_pending || ph < 0) {
				bus_trouble(s, ph, insn_addr);
				return;
			}
		} else {
			ph = lsi_bus_connected(s) ? s->phase : 0;
		}
		match = match && (uint32_t)ph == ((insn >> 24) & 7);
	}
	if (insn & (1u << 18)) {
		uint8_t mask = ~(insn >> 8);

		match = match && (s->regs[LSI_SFBR] & mask) == (insn & mask);
	}
	if (insn & (1u << 21))
		match = match && s->carry;
	if (match != jump_if)
		return;
	if (insn & (1u << 23)) {
		addr = dsp + sext24(arg);
		lsi_set32(s, LSI_ADDER, addr);
	}
	switch (op) {
	case 0:
		lsi_set32(s, LSI_DSP, addr);
		return;
	case 1:
		lsi_set32(s, LSI_TEMP, dsp);
		lsi_set32(s, LSI_DSP, addr);
		return;
	case 2:
		lsi_set32(s, LSI_DSP, lsi_get32(s, LSI_TEMP));
		return;
	default:
		if (insn & (1u << 20)) {
			/* Interrupt on the fly: SCRIPTS go on. */
			s->istat |= LSI_ISTAT_INTF;
			lsi_update_irq(s);
			return;
		}
		lsi_dma_interrupt(s, LSI_DSTAT_SIR);
		return;
	}
}

/* A memory move with the chip's own registers at one end or both
 * (drivers copy registers to memory and back this way): byte by byte
 * through the register file, side effects included. */
static void reg_move(struct lsi *s, uint32_t src, uint32_t dst,
		     uint32_t count)
{
	int rs = lsi_dma_reg(s, src, count), rd = lsi_dma_reg(s, dst, count);
	uint8_t *ps = rs < 0 ? lsi_dma_ptr(s, src, count) : NULL;
	uint8_t *pd = rd < 0 ? lsi_dma_ptr(s, dst, count) : NULL;

	uint8_t buf[LSI_NREGS];

	if ((rs < 0 && !ps) || (rd < 0 && !pd) || count > LSI_NREGS) {
		bus_fault(s);
		return;
	}
	/* Memory ends in whole words (a DSA copied to a done queue slot). */
	if (rs < 0)
		guest_get(buf, ps, count);
	for (uint32_t i = 0; i < count; i++) {
		if (rs >= 0)
			buf[i] = lsi_reg_read(s, (rs + i) & 0xff, true);
		if (rd >= 0)
			lsi_reg_write(s, (rd + i) & 0xff, buf[i], true);
	}
	if (rd < 0)
		guest_put(pd, buf, count);
	lsi_set_dbc(s, 0);
}

static void memory_move(struct lsi *s, uint32_t insn, uint32_t src,
			uint32_t dsp)
{
	uint32_t count = insn & 0xffffff;
	uint32_t dst;
	void *ps, *pd;

	if (!read32(s, dsp, &dst)) {
		bus_fault(s);
		return;
	}
	lsi_set32(s, LSI_DSP, dsp + 4);
	lsi_set32(s, LSI_DNAD, dst);
	if (!count)
		return;
	if (lsi_dma_reg(s, src, count) >= 0 || lsi_dma_reg(s, dst, count) >= 0) {
		reg_move(s, src, dst, count);
		return;
	}
	ps = lsi_dma_ptr(s, src, count);
	pd = lsi_dma_ptr(s, dst, count);
	if (!ps || !pd) {
		bus_fault(s);
		return;
	}
	if (count <= LSI_WORD_MOVE_MAX) {
		uint8_t buf[LSI_WORD_MOVE_MAX];

		guest_get(buf, ps, count);
		guest_put(pd, buf, count);
	} else {
		memmove(pd, ps, count);
	}
	lsi_set_dbc(s, 0);
	s->step_cost += count / 4096;
}

static void load_store(struct lsi *s, uint32_t insn, uint32_t arg)
{
	unsigned int n = insn & 7;
	unsigned int reg = (insn >> 16) & 0xff;
	uint32_t addr = arg;
	uint8_t buf[4];

	if (n == 0 || n > 4 || reg + n > LSI_NREGS) {
		illegal(s);
		return;
	}
	if (insn & (1u << 28))
		addr = lsi_get32(s, LSI_DSA) + sext24(arg);
	if (lsi_dma_reg(s, addr, n) >= 0) {
		/* register to register through the register window */
		int r = lsi_dma_reg(s, addr, n);

		for (unsigned int i = 0; i < n; i++) {
			if (insn & (1u << 24))
				lsi_reg_write(s, reg + i,
					      lsi_reg_read(s, (r + i) & 0xff, true),
					      true);
			else
				lsi_reg_write(s, (r + i) & 0xff,
					      lsi_reg_read(s, reg + i, true), true);
		}
		return;
	}
	if (insn & (1u << 24)) {
		if (!dma_read(s, addr, buf, n)) {
			bus_fault(s);
			return;
		}
		for (unsigned int i = 0; i < n; i++)
			lsi_reg_write(s, reg + i, buf[i], true);
	} else {
		uint8_t *p = lsi_dma_ptr(s, addr, n);

		if (!p) {
			bus_fault(s);
			return;
		}
		for (unsigned int i = 0; i < n; i++)
			buf[i] = lsi_reg_read(s, reg + i, true);
		guest_put(p, buf, n);
	}
}

static void step(struct lsi *s)
{
	uint32_t insn_addr = lsi_get32(s, LSI_DSP);
	uint32_t w[2];
	uint32_t dsp;

	if (!dma_read(s, insn_addr, w, 8)) {
		bus_fault(s);
		return;
	}
	dsp = insn_addr + 8;
	s->regs[LSI_DCMD] = w[0] >> 24;
	lsi_set_dbc(s, w[0] & 0xffffff);
	lsi_set32(s, LSI_DSPS, w[1]);
	lsi_set32(s, LSI_DSP, dsp);
	switch (w[0] >> 30) {
	case 0:
		block_move(s, w[0], w[1], insn_addr);
		break;
	case 1:
		if (((w[0] >> 27) & 7) < 5)
			io_insn(s, w[0], w[1], dsp, insn_addr);
		else
			reg_insn(s, w[0]);
		break;
	case 2:
		transfer(s, w[0], w[1], dsp, insn_addr);
		break;
	default:
		if (w[0] & (1u << 29))
			load_store(s, w[0], w[1]);
		else
			memory_move(s, w[0], w[1], dsp);
		break;
	}
}

long lsi_scripts_run(struct lsi *s, long budget)
{
	long n = 0;

	while (s->scr == LSI_SCR_RUN && n < budget) {
		s->step_cost = 1;
		step(s);
		n += s->step_cost;
		if (s->scr == LSI_SCR_RUN &&
		    (s->regs[LSI_DCNTL] & LSI_DCNTL_SSM))
			lsi_dma_interrupt(s, LSI_DSTAT_SSI);
	}
	return n;
}
