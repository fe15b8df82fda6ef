/* LSI 53C895A register offsets, bits and SCRIPTS instruction encodings.
 * Plain #defines only, so the freestanding probe guest shares them. */
#ifndef IOVM_SCSI_LSI_REGS_H
#define IOVM_SCSI_LSI_REGS_H

#define LSI_PCI_VENDOR 0x1000
#define LSI_PCI_DEVICE 0x0012
#define LSI_PCI_REVISION 0x07
#define LSI_PCI_CLASS 0x010000	/* mass storage, SCSI */

#define LSI_IO_BAR_SIZE 256	/* BAR0: registers in I/O space */
#define LSI_MMIO_BAR_SIZE 1024	/* BAR1: registers in memory space */
#define LSI_RAM_SIZE 8192	/* BAR2: SCRIPTS RAM */
#define LSI_NREGS 256

/* Register offsets. */
#define LSI_SCNTL0 0x00
#define LSI_SCNTL1 0x01
#define LSI_SCNTL2 0x02
#define LSI_SCNTL3 0x03
#define LSI_SCID 0x04
#define LSI_SXFER 0x05
#define LSI_SDID 0x06
#define LSI_GPREG 0x07
#define LSI_SFBR 0x08
#define LSI_SOCL 0x09
#define LSI_SSID 0x0a
#define LSI_SBCL 0x0b
#define LSI_DSTAT 0x0c
#define LSI_SSTAT0 0x0d
#define LSI_SSTAT1 0x0e
#define LSI_SSTAT2 0x0f
#define LSI_DSA 0x10
#define LSI_ISTAT 0x14
#define LSI_CTEST0 0x18
#define LSI_CTEST1 0x19
#define LSI_CTEST2 0x1a
#define LSI_CTEST3 0x1b
#define LSI_TEMP 0x1c
#define LSI_DFIFO 0x20
#define LSI_CTEST4 0x21
#define LSI_CTEST5 0x22
#define LSI_CTEST6 0x23
#define LSI_DBC 0x24
#define LSI_DCMD 0x27
#define LSI_DNAD 0x28
#define LSI_DSP 0x2c
#define LSI_DSPS 0x30
#define LSI_SCRATCHA 0x34
#define LSI_DMODE 0x38
#define LSI_DIEN 0x39
#define LSI_SBR 0x3a
#define LSI_DCNTL 0x3b
#define LSI_ADDER 0x3c
#define LSI_SIEN0 0x40
#define LSI_SIEN1 0x41
#define LSI_SIST0 0x42
#define LSI_SIST1 0x43
#define LSI_SLPAR 0x44
#define LSI_SWIDE 0x45
#define LSI_MACNTL 0x46
#define LSI_GPCNTL 0x47
#define LSI_STIME0 0x48
#define LSI_STIME1 0x49
#define LSI_RESPID0 0x4a
#define LSI_RESPID1 0x4b
#define LSI_STEST0 0x4c
#define LSI_STEST1 0x4d
#define LSI_STEST2 0x4e
#define LSI_STEST3 0x4f
#define LSI_SIDL 0x50
#define LSI_STEST4 0x52
#define LSI_SODL 0x54
#define LSI_CCNTL0 0x56
#define LSI_CCNTL1 0x57
#define LSI_SBDL 0x58
#define LSI_SCRATCHB 0x5c
#define LSI_SCRATCHC 0x60	/* SCRATCHC..SCRATCHJ up to 0x7f */
#define LSI_PMJAD1 0xc0
#define LSI_PMJAD2 0xc4
#define LSI_RBC 0xc8
#define LSI_UA 0xcc
#define LSI_ESA 0xd0
#define LSI_IA 0xd4
#define LSI_SBC 0xd8
#define LSI_CSBC 0xdc

/* ISTAT */
#define LSI_ISTAT_DIP 0x01
#define LSI_ISTAT_SIP 0x02
#define LSI_ISTAT_INTF 0x04
#define LSI_ISTAT_CON 0x08
#define LSI_ISTAT_SEM 0x10
#define LSI_ISTAT_SIGP 0x20
#define LSI_ISTAT_SRST 0x40
#define LSI_ISTAT_ABRT 0x80

/* DSTAT */
#define LSI_DSTAT_IID 0x01
#define LSI_DSTAT_SIR 0x04
#define LSI_DSTAT_SSI 0x08
#define LSI_DSTAT_ABRT 0x10
#define LSI_DSTAT_BF 0x20
#define LSI_DSTAT_MDPE 0x40
#define LSI_DSTAT_DFE 0x80

/* SIST0 / SIEN0 */
#define LSI_SIST0_PAR 0x01
#define LSI_SIST0_RST 0x02
#define LSI_SIST0_UDC 0x04
#define LSI_SIST0_SGE 0x08
#define LSI_SIST0_RSL 0x10
#define LSI_SIST0_SEL 0x20
#define LSI_SIST0_CMP 0x40
#define LSI_SIST0_MA 0x80
/* SIST1 / SIEN1 */
#define LSI_SIST1_HTH 0x01
#define LSI_SIST1_GEN 0x02
#define LSI_SIST1_STO 0x04
#define LSI_SIST1_SBMC 0x10

#define LSI_SCNTL1_RST 0x08
#define LSI_SCNTL1_CON 0x10
#define LSI_SCNTL2_WSR 0x01
#define LSI_SCNTL2_WSS 0x08
#define LSI_SCID_RRE 0x40
#define LSI_SCID_SRE 0x20
#define LSI_SSTAT0_RST 0x02
#define LSI_SSTAT0_WOA 0x04
#define LSI_SSTAT2_LDSC 0x02
#define LSI_SOCL_ATN 0x08
#define LSI_SBCL_REQ 0x80
#define LSI_SBCL_ACK 0x40
#define LSI_SBCL_BSY 0x20
#define LSI_SBCL_SEL 0x10
#define LSI_SBCL_ATN 0x08
#define LSI_CTEST2_DACK 0x01
#define LSI_CTEST2_CM 0x10
#define LSI_CTEST2_SIGP 0x40
#define LSI_CTEST3_CLF 0x04
#define LSI_CTEST3_FLF 0x08
#define LSI_DMODE_MAN 0x01
#define LSI_DCNTL_COM 0x01
#define LSI_DCNTL_STD 0x04
#define LSI_DCNTL_IRQM 0x08
#define LSI_DCNTL_SSM 0x10
#define LSI_STEST1_DBLEN 0x08
#define LSI_STEST1_DBLSEL 0x04
#define LSI_STEST4_LCKFRQ 0x20
#define LSI_STIME1_GEN_MASK 0x0f
#define LSI_CCNTL0_PMJCTL 0x40
#define LSI_CCNTL0_ENPMJ 0x80
#define LSI_CCNTL1_EN64DBMV 0x01
#define LSI_CCNTL1_EN64TIBMV 0x02
#define LSI_CCNTL1_64TIMOD 0x04

/* SCSI bus phases (MSG, C/D, I/O lines). */
#define LSI_PHASE_DATA_OUT 0
#define LSI_PHASE_DATA_IN 1
#define LSI_PHASE_COMMAND 2
#define LSI_PHASE_STATUS 3
#define LSI_PHASE_MSG_OUT 6
#define LSI_PHASE_MSG_IN 7

/* SCRIPTS encodings (first dword of an instruction). */
#define SCR_PHASE(p) ((unsigned int)(p) << 24)
/* Block move: MOVE (bit 27) or CHMOV; table indirect (28), indirect (29). */
#define SCR_CHMOV_ABS(n) (0x00000000u | (n))
#define SCR_MOVE_ABS(n) (0x08000000u | (n))
#define SCR_CHMOV_TBL 0x10000000u
#define SCR_MOVE_TBL 0x18000000u
#define SCR_MOVE_IND(n) (0x28000000u | (n))
/* I/O: select (ATN: bit 24, table: bit 25, relative alternate: bit 26). */
#define SCR_SEL_ABS(id) (0x40000000u | ((unsigned int)(id) << 16))
#define SCR_SEL_ABS_ATN(id) (0x41000000u | ((unsigned int)(id) << 16))
#define SCR_SEL_TBL 0x42000000u
#define SCR_SEL_TBL_ATN 0x43000000u
#define SCR_WAIT_DISC 0x48000000u
#define SCR_WAIT_RESEL 0x50000000u
#define SCR_SET(f) (0x58000000u | (f))
#define SCR_CLR(f) (0x60000000u | (f))
#define SCR_CARRY 0x00000400u
#define SCR_TRG 0x00000200u
#define SCR_ACK 0x00000040u
#define SCR_ATN 0x00000008u
/* Register moves: reg = SFBR op d, SFBR = reg op d, reg = reg op d. */
#define SCR_REG_OFS(r) ((((unsigned int)(r) & 0x7f) << 16) | ((r) & 0x80))
#define SCR_SFBR_REG(r, op, d) (0x68000000u | SCR_REG_OFS(r) | (op) | (((d) & 0xffu) << 8))
#define SCR_REG_SFBR(r, op, d) (0x70000000u | SCR_REG_OFS(r) | (op) | (((d) & 0xffu) << 8))
#define SCR_REG_REG(r, op, d) (0x78000000u | SCR_REG_OFS(r) | (op) | (((d) & 0xffu) << 8))
#define SCR_LOAD 0x00000000u
#define SCR_SHL 0x01000000u
#define SCR_OR 0x02000000u
#define SCR_XOR 0x03000000u
#define SCR_AND 0x04000000u
#define SCR_SHR 0x05000000u
#define SCR_ADD 0x06000000u
#define SCR_ADDC 0x07000000u
#define SCR_SFBR_DATA 0x00800000u
#define SCR_LOAD_REG(r, d) SCR_REG_REG(r, SCR_LOAD, d)
#define SCR_FROM_REG(r) SCR_REG_SFBR(r, SCR_OR, 0)
#define SCR_TO_REG(r) SCR_SFBR_REG(r, SCR_OR, 0)
/* Transfer control. */
#define SCR_JUMP 0x80080000u
#define SCR_JUMPR 0x80880000u
#define SCR_CALL 0x88080000u
#define SCR_RETURN 0x90080000u
#define SCR_INT 0x98080000u
#define SCR_INT_FLY 0x98180000u
#define IFFALSE(a) (0x00080000u | (a))
#define IFTRUE(a) (0x00000000u | (a))
#define WHEN(p) (0x00030000u | SCR_PHASE(p))
#define IF(p) (0x00020000u | SCR_PHASE(p))
#define DATA(d) (0x00040000u | ((d) & 0xffu))
#define MASK(d, m) (0x00040000u | ((((m) ^ 0xffu) & 0xffu) << 8) | ((d) & 0xffu))
#define CARRYSET 0x00200000u
/* Memory move (3 dwords: insn, src, dst), load and store. */
#define SCR_COPY(n) (0xc0000000u | 0x01000000u | (n))
#define SCR_LOAD_ABS(r, n) (0xe1000000u | (((unsigned int)(r) & 0xff) << 16) | (n))
#define SCR_LOAD_REL(r, n) (0xf1000000u | (((unsigned int)(r) & 0xff) << 16) | (n))
#define SCR_STORE_ABS(r, n) (0xe0000000u | (((unsigned int)(r) & 0xff) << 16) | (n))
#define SCR_STORE_REL(r, n) (0xf0000000u | (((unsigned int)(r) & 0xff) << 16) | (n))

/* SCSI messages. */
#define LSI_MSG_COMMAND_COMPLETE 0x00
#define LSI_MSG_EXTENDED 0x01
#define LSI_MSG_SAVE_DP 0x02
#define LSI_MSG_RESTORE_DP 0x03
#define LSI_MSG_DISCONNECT 0x04
#define LSI_MSG_INITIATOR_DET_ERR 0x05
#define LSI_MSG_ABORT 0x06
#define LSI_MSG_REJECT 0x07
#define LSI_MSG_NOP 0x08
#define LSI_MSG_PARITY_ERROR 0x09
#define LSI_MSG_BUS_DEVICE_RESET 0x0c
#define LSI_MSG_ABORT_TAG 0x0d
#define LSI_MSG_CLEAR_QUEUE 0x0e
#define LSI_MSG_SIMPLE_TAG 0x20
#define LSI_MSG_HEAD_TAG 0x21
#define LSI_MSG_ORDERED_TAG 0x22
#define LSI_MSG_IGNORE_RESIDUE 0x23
#define LSI_MSG_IDENTIFY 0x80
#define LSI_EXT_SDTR 0x01
#define LSI_EXT_WDTR 0x03
#define LSI_EXT_PPR 0x04

#endif
