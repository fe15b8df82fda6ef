/* SCSI disk target: sense data, fixed or descriptor format (D_SENSE), and
 * the CHECK CONDITION a command ends with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"

/* Writes sense data: descriptor format when the control mode page's
 * D_SENSE (or REQUEST SENSE's DESC) asks for it, else fixed format.
 * Returns its length. */
unsigned int disk_sense_encode(const struct sense *s, bool desc, uint8_t *p)
{
	uint8_t sks[3] = { 0 };
	bool sksv = s->field >= 0;
	unsigned int n = 8;

	if (sksv) {
		sks[0] = 0x80 | (s->cd ? 0x40 : 0) |
			 (s->bit >= 0 ? 0x08 | s->bit : 0);
		sks[1] = s->field >> 8;
		sks[2] = s->field;
	}
	if (desc) {
		memset(p, 0, 8);
		p[0] = 0x72;
		p[1] = s->key;
		p[2] = s->asc >> 8;
		p[3] = s->asc;
		if (s->info_valid) {	/* information descriptor */
			memset(p + n, 0, 12);
			p[n] = 0x00;
			p[n + 1] = 0x0a;
			p[n + 2] = 0x80;	/* VALID */
			put64(p + n + 4, s->info);
			n += 12;
		}
		if (sksv) {		/* sense key specific descriptor */
			memset(p + n, 0, 8);
			p[n] = 0x02;
			p[n + 1] = 6;
			memcpy(p + n + 4, sks, 3);
			n += 8;
		}
		p[7] = n - 8;
		return n;
	}
	memset(p, 0, 18);
	p[0] = 0x70;
	p[2] = s->key;
	/* INFORMATION holds 32 bits in fixed format; VALID says it is set */
	if (s->info_valid && s->info <= UINT32_MAX) {
		p[0] |= 0x80;
		put32(p + 3, s->info);
	}
	p[7] = 10;
	p[12] = s->asc >> 8;
	p[13] = s->asc;
	memcpy(p + 15, sks, 3);
	return 18;
}

bool disk_dsense(const struct scsi_disk *d)
{
	return d && __atomic_load_n(&d->dsense, __ATOMIC_RELAXED);
}

void disk_check_condition(struct scsi_req *req, const struct sense *s)
{
	req->status = SAM_STAT_CHECK_CONDITION;
	req->sense_len = disk_sense_encode(s, disk_dsense(req->disk), req->sense);
}

void disk_check(struct scsi_req *req, uint8_t key, uint16_t asc)
{
	struct sense s = { .key = key, .asc = asc, .field = -1, .bit = -1 };

	disk_check_condition(req, &s);
}

unsigned int scsi_disk_sense(const struct scsi_disk *d, uint8_t key,
			     uint16_t asc, uint8_t *p)
{
	struct sense s = { .key = key, .asc = asc, .field = -1, .bit = -1 };

	return disk_sense_encode(&s, disk_dsense(d), p);
}
