/* Register access for the LSI unit tests: the CPU's 1- and 4-byte reads
 * and writes of the HBA under test, `hba`, which this header owns. */
#ifndef IOVM_TESTS_LSI_REGS_IO_H
#define IOVM_TESTS_LSI_REGS_IO_H

#include <stdint.h>

#include "scsi/lsi53c895a.h"

static struct lsi *hba;

static inline uint8_t reg_rd(unsigned int off)
{
	uint8_t v;

	lsi_reg_io(hba, off, &v, 1, false);
	return v;
}

static inline void reg_wr(unsigned int off, uint8_t v)
{
	lsi_reg_io(hba, off, &v, 1, true);
}

static inline uint32_t reg_rd32(unsigned int off)
{
	uint32_t v;

	lsi_reg_io(hba, off, &v, 4, false);
	return v;
}

static inline void reg_wr32(unsigned int off, uint32_t v)
{
	lsi_reg_io(hba, off, &v, 4, true);
}

#endif
