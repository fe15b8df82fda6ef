/* What the LSI 53C895A SCRIPTS processor uses of the rest of the chip: its
 * registers, interrupts, DMA addresses and the SCSI bus. The processor calls
 * down through these alone; nothing here calls the processor back. */
#ifndef IOVM_SCSI_LSI_CHIP_H
#define IOVM_SCSI_LSI_CHIP_H

#include <stdbool.h>
#include <stdint.h>

struct lsi;

/* lsi_regfile.c: register reads and writes with their side effects
 * (scripts: the access comes from SCRIPTS, not the CPU). */
uint8_t lsi_reg_read(struct lsi *s, unsigned int off, bool scripts);
void lsi_reg_write(struct lsi *s, unsigned int off, uint8_t val, bool scripts);

/* lsi_irq.c: interrupt latches. An interrupt halts SCRIPTS as on the chip. */
void lsi_update_irq(struct lsi *s);
void lsi_dma_interrupt(struct lsi *s, uint8_t dstat);
void lsi_scsi_interrupt(struct lsi *s, uint8_t sist0, uint8_t sist1);

/* lsi_dma.c */
void *lsi_dma_ptr(struct lsi *s, uint64_t addr, uint64_t len);
/* Register offset when [addr, addr+len) lies in the chip's own register
 * window (SCRIPTS may move data to and from their registers), else -1. */
int lsi_dma_reg(const struct lsi *s, uint64_t addr, uint64_t len);

/* lsi_bus.c: bus operations. Each returns LSI_BUS_OK, LSI_BUS_WAIT (the
 * target has no REQ yet: retry the instruction later), LSI_BUS_FAULT (bad
 * DMA address) or LSI_BUS_FREE (not connected). */
enum { LSI_BUS_OK, LSI_BUS_WAIT, LSI_BUS_FAULT, LSI_BUS_FREE };
int lsi_bus_phase(struct lsi *s);	/* valid phase or -WAIT/-FREE */
int lsi_bus_move(struct lsi *s, uint64_t addr, uint32_t *count);
int lsi_bus_select(struct lsi *s, unsigned int id, bool atn);
bool lsi_bus_reselect(struct lsi *s);
void lsi_bus_set_atn(struct lsi *s, bool on);
void lsi_bus_set_ack(struct lsi *s);
void lsi_bus_clear_ack(struct lsi *s);
bool lsi_bus_connected(struct lsi *s);

#endif
