/* The LSI 53C895A SCRIPTS processor: the one entry the HBA thread calls. */
#ifndef IOVM_SCSI_LSI_SCRIPTS_H
#define IOVM_SCSI_LSI_SCRIPTS_H

struct lsi;

/* Runs SCRIPTS while the processor is running, at most budget units (an
 * instruction, or 4 KiB of a memory move). Returns the units used.
 * Called with the HBA lock held. */
long lsi_scripts_run(struct lsi *s, long budget);

#endif
