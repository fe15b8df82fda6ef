/* SCSI disk target: the emulated commands (INQUIRY and its VPD pages, MODE
 * SENSE/SELECT, READ CAPACITY, REPORT LUNS, REQUEST SENSE, REPORT
 * SUPPORTED OPERATION CODES), answered from small stack buffers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/iov.h"
#include "lib/log.h"
#include "scsi/disk_int.h"

/* ---- emulated data-in commands ---- */

/* Sends n bytes of data-in (already cut to the allocation length). */
void disk_send_in(struct scsi_req *req, const uint8_t *buf, size_t n)
{
	if (n > req->buf_len || (n && req->buf_dir != SCSI_DIR_FROM_DEV)) {
		req->host = n > req->buf_len ? SCSI_HOST_OVERRUN : SCSI_HOST_BAD_DIR;
		req->done(req);
		return;
	}
	req->xferred = iov_from_buf(req->iov, req->iovcnt, 0, buf, n);
	req->done(req);
}

static void pad(uint8_t *p, const char *s, size_t n)
{
	size_t l = strlen(s);

	memset(p, ' ', n);
	memcpy(p, s, l < n ? l : n);
}

size_t disk_std_inquiry(uint8_t *p, uint8_t pq_pdt)
{
	static const uint16_t versions[] = { 0x00a0, 0x0460, 0x04c0 };

	memset(p, 0, 96);
	p[0] = pq_pdt;
	p[2] = 0x06;		/* SPC-4 */
	p[3] = 0x12;		/* HISUP, response data format 2 */
	p[4] = 96 - 5;
	p[5] = pq_pdt == 0 ? 0x08 : 0;	/* 3PC: EXTENDED COPY */
	p[7] = 0x02;		/* CMDQUE */
	pad(p + 8, "IOVM", 8);
	pad(p + 16, "iovm disk", 16);
	pad(p + 32, IOVM_VERSION, 4);
	for (unsigned int i = 0; i < 3; i++)
		put16(p + 58 + 2 * i, versions[i]);
	return 96;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2 };

static size_t vpd_page(const struct scsi_disk *d, uint8_t page, uint8_t *p)
{
	size_t n;

	memset(p, 0, 64);
	p[1] = page;
	switch (page) {
	case 0x00:
		memcpy(p + 4, vpd_pages, sizeof(vpd_pages));
		n = 4 + sizeof(vpd_pages);
		break;
	case 0x80:
		n = strnlen(d->be->serial, sizeof(d->be->serial));
		memcpy(p + 4, d->be->serial, n);
		n += 4;
		break;
	case 0x83: {
		size_t sl = strnlen(d->be->serial, sizeof(d->be->serial));

		/* NAA locally assigned, binary */
		p[4] = 0x01;
		p[5] = 0x03;
		p[7] = 8;
		memcpy(p + 8, d->naa, 8);
		/* T10 vendor ID based, ASCII: vendor + serial */
		p[16] = 0x02;
		p[17] = 0x01;
		p[19] = 8 + sl;
		pad(p + 20, "IOVM", 8);
		memcpy(p + 28, d->be->serial, sl);
		n = 28 + sl;
		break;
	}
	case 0xb0: {
		uint32_t gran = d->be->phys_block_size > d->bs ?
				d->be->phys_block_size / d->bs : 1;

		p[4] = 0x01;	/* WSNZ */
		/* MAXIMUM COMPARE AND WRITE LENGTH (0: not supported) */
		p[5] = blk_is_local(d->be) ? MAX_CAW_BLOCKS : 0;
		put16(p + 6, gran);
		put32(p + 8, d->max_xfer_blocks);
		put32(p + 16, d->max_xfer_blocks);	/* MAXIMUM PREFETCH LENGTH */
		put32(p + 20, d->max_unmap_blocks);
		put32(p + 24, MAX_UNMAP_DESC);
		put32(p + 28, gran);
		put64(p + 36, d->max_unmap_blocks);
		n = 64;
		break;
	}
	case 0x8f:
		n = disk_xcopy_vpd(p);
		break;
	case 0xb1:
		put16(p + 4, 1);	/* non-rotating medium */
		n = 64;
		break;
	case 0xb2:
		/* LBPU, LBPWS, LBPWS10, and LBPRZ 001b where unmapped
		 * blocks read as zeroes */
		p[5] = d->be->discard_zeroes ? 0xe4 : 0xe0;
		p[6] = 0x02;	/* thin provisioned */
		n = 8;
		break;
	default:
		return 0;
	}
	put16(p + 2, n - 4);
	return n;
}

void disk_inquiry(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	uint8_t buf[128];
	size_t n;

	if (cdb[1] & 1) {
		n = vpd_page(req->disk, cdb[2], buf);
		if (!n) {
			struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_CDB,
			.field = 2, .bit = -1, .cd = true };

			disk_check_condition(req, &s);
			req->done(req);
			return;
		}
	} else {
		n = disk_std_inquiry(buf, 0x00);
	}
	disk_send_in(req, buf, min_sz(n, alloc));
}

size_t disk_report_luns(const struct scsi_lun_map *m, uint8_t sel, uint8_t *p)
{
	size_t n = 8;

	memset(p, 0, 8);
	/* select report 1: well-known LUNs only, of which there are none */
	for (unsigned int lun = 0; sel != 1 && lun < SCSI_MAX_LUNS; lun++) {
		if (!scsi_lun_present(m, lun))
			continue;
		memset(p + n, 0, 8);
		p[n + 1] = lun;	/* peripheral device addressing, bus 0 */
		n += 8;
	}
	put32(p, n - 8);
	return n;
}

size_t disk_request_sense(struct scsi_disk *d, bool desc, uint8_t *p)
{
	struct sense s = { .key = SENSE_NO_SENSE, .asc = ASC_NONE,
			.field = -1, .bit = -1, .cd = false };
	uint8_t ua = __atomic_exchange_n(&d->ua, 0, __ATOMIC_RELAXED);

	if (ua) {
		s.key = SENSE_UNIT_ATTENTION;
		s.asc = 0x2900 | ua;
	} else if (__atomic_exchange_n(&d->ua_capacity, false, __ATOMIC_RELAXED)) {
		s.key = SENSE_UNIT_ATTENTION;
		s.asc = ASC_CAPACITY_CHANGED;
	} else if ((ua = disk_pr_take_ua(d))) {
		s.key = SENSE_UNIT_ATTENTION;
		s.asc = 0x2a00 | ua;
	} else if (__atomic_load_n(&d->stopped, __ATOMIC_RELAXED)) {
		s.key = SENSE_NOT_READY;
		s.asc = ASC_NOT_READY_INIT_REQUIRED;
	}
	return disk_sense_encode(&s, desc, p);
}

size_t disk_read_capacity(const struct scsi_disk *d, bool is16, uint8_t *p)
{
	uint64_t last = disk_nblocks(d) - 1;
	unsigned int exp = 0;

	if (!is16) {
		put32(p, last > 0xffffffffull ? 0xffffffff : last);
		put32(p + 4, d->bs);
		return 8;
	}
	memset(p, 0, 32);
	put64(p, last);
	put32(p + 8, d->bs);
	while ((d->bs << (exp + 1)) <= d->be->phys_block_size && exp < 15)
		exp++;
	p[13] = exp;
	p[14] = d->be->discard_zeroes ? 0xc0 : 0x80;	/* LBPME, LBPRZ */
	return 32;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---- */

static size_t rsoc_timeouts(uint8_t *p)
{
	memset(p, 0, 12);
	put16(p, 10);	/* nominal/recommended timeouts: not specified */
	return 12;
}

void disk_rsoc(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	uint8_t buf[SCSI_PARAM_MAX];
	bool rctd = cdb[2] & 0x80;
	uint8_t opt = cdb[2] & 7, op = cdb[3];
	uint16_t sa = be16(cdb + 4);
	const struct cmd_desc *c;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_CDB,
			.field = 2, .bit = -1, .cd = true };
	size_t n;

	if (opt == 0) {
		n = 4;
		for (unsigned int i = 0; i < disk_ncmds; i++) {
			uint8_t *e = buf + n;

			memset(e, 0, 8);
			e[0] = disk_cmds[i].op;
			put16(e + 2, disk_cmds[i].sa);
			e[5] = (rctd ? 0x02 : 0) | (disk_cmds[i].has_sa ? 0x01 : 0);
			put16(e + 6, disk_cmds[i].len);
			n += 8;
			if (rctd)
				n += rsoc_timeouts(buf + n);
		}
		put32(buf, n - 4);
		disk_send_in(req, buf, min_sz(n, alloc));
		return;
	}
	c = disk_cmd_find(op, 0, true);
	switch (opt) {
	case 1:		/* opcode without service action */
		if (c && c->has_sa)
			goto invalid;
		break;
	case 2:		/* opcode + service action */
		if (c && !c->has_sa)
			goto invalid;
		if (c)
			c = disk_cmd_find(op, sa, false);
		break;
	case 3:		/* opcode, service action if it has them */
		if (c && c->has_sa)
			c = disk_cmd_find(op, sa, false);
		break;
	default:
		goto invalid;
	}
	memset(buf, 0, 4);
	if (!c) {
		buf[1] = 0x01;	/* not supported */
		disk_send_in(req, buf, min_sz(4, alloc));
		return;
	}
	buf[1] = (rctd ? 0x80 : 0) | 0x03;	/* supported per standard */
	put16(buf + 2, c->len);
	memcpy(buf + 4, c->usage, c->len);
	n = 4 + c->len;
	if (rctd)
		n += rsoc_timeouts(buf + n);
	disk_send_in(req, buf, min_sz(n, alloc));
	return;
invalid:
	disk_check_condition(req, &s);
	req->done(req);
}

/* ---- mode pages ---- */

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };

#define CACHING_PAGE 0x08
#define CONTROL_PAGE 0x0a
#define CACHING_LEN 20
#define CONTROL_LEN 12

static size_t caching_page(const struct scsi_disk *d, int pc, uint8_t *p)
{
	memset(p, 0, CACHING_LEN);
	p[0] = CACHING_PAGE;
	p[1] = CACHING_LEN - 2;
	if (pc == PC_CHANGEABLE)
		p[2] = 0x04;
	else if (pc == PC_DEFAULT || __atomic_load_n(&d->wce, __ATOMIC_RELAXED))
		p[2] = 0x04;	/* WCE */
	return CACHING_LEN;
}

static size_t control_page(const struct scsi_disk *d, int pc, uint8_t *p)
{
	memset(p, 0, CONTROL_LEN);
	p[0] = CONTROL_PAGE;
	p[1] = CONTROL_LEN - 2;
	if (pc == PC_CHANGEABLE) {
		p[2] = 0x04;	/* D_SENSE */
		return CONTROL_LEN;
	}
	if (pc == PC_CURRENT && disk_dsense(d))
		p[2] = 0x04;
	p[3] = 0x10;		/* queue algorithm: unrestricted reordering */
	put16(p + 8, 0xffff);	/* busy timeout: unlimited */
	return CONTROL_LEN;
}

void disk_mode_sense(struct scsi_req *req, const uint8_t *cdb, uint32_t alloc)
{
	struct scsi_disk *d = req->disk;
	bool ten = cdb[0] == MODE_SENSE_10;
	bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
	int pc = cdb[2] >> 6;
	uint8_t page = cdb[2] & 0x3f, sub = cdb[3];
	uint8_t buf[128];
	uint64_t medium = disk_nblocks(d);
	size_t hdr = ten ? 8 : 4, n = hdr, bdl = dbd ? 0 : llbaa ? 16 : 8;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_CDB,
			.field = 2, .bit = -1, .cd = true };

	if (pc == PC_SAVED) {
		s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_SAVING_NOT_SUPPORTED,
			.field = -1, .bit = -1, .cd = false };
		goto fail;
	}
	if (page != CACHING_PAGE && page != CONTROL_PAGE && page != 0x3f)
		goto fail;
	if (sub && !(page == 0x3f && sub == 0xff)) {
		s.field = 3;
		goto fail;
	}
	memset(buf, 0, hdr + bdl);
	if (bdl == 8) {
		put32(buf + n, medium > 0xffffffffull ? 0xffffffff : medium);
		put32(buf + n + 4, d->bs);	/* density 0, block length */
	} else if (bdl == 16) {
		put64(buf + n, medium);
		put32(buf + n + 12, d->bs);
	}
	n += bdl;
	if (page == CACHING_PAGE || page == 0x3f)
		n += caching_page(d, pc, buf + n);
	if (page == CONTROL_PAGE || page == 0x3f)
		n += control_page(d, pc, buf + n);
	/* device-specific parameter: WP, DPOFUA */
	if (ten) {
		put16(buf, n - 2);
		buf[3] = (d->be->ro ? 0x80 : 0) | 0x10;
		buf[4] = llbaa ? 0x01 : 0;
		put16(buf + 6, bdl);
	} else {
		buf[0] = n - 1;
		buf[2] = (d->be->ro ? 0x80 : 0) | 0x10;
		buf[3] = bdl;
	}
	disk_send_in(req, buf, min_sz(n, alloc));
	return;
fail:
	disk_check_condition(req, &s);
	req->done(req);
}

/* Checks a MODE SELECT parameter list (all of it) before applying it, so a
 * bad list changes nothing. */
void disk_mode_select(struct scsi_req *req, const uint8_t *cdb,
		      const uint8_t *p, size_t len)
{
	struct scsi_disk *d = req->disk;
	bool ten = cdb[0] == MODE_SELECT_10;
	size_t hdr = ten ? 8 : 4, bdl, off;
	struct sense s = { .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_PARAM_LIST_LENGTH,
			.field = -1, .bit = -1, .cd = false };
	int wce = -1, ds = -1;

	req->xferred = len;
	if (len == 0)
		goto done;
	if (len < hdr)
		goto fail;
	bdl = ten ? be16(p + 6) : p[3];
	if (bdl && bdl != (ten && (p[4] & 1) ? 16u : 8u)) {
		s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_PARAM,
			.field = ten ? 6 : 3, .bit = -1, .cd = false };
		goto fail;
	}
	if (len < hdr + bdl)
		goto fail;
	if (bdl) {
		/* the block length cannot change */
		uint32_t bl = bdl == 16 ? be32(p + hdr + 12) : be32(p + hdr + 4) & 0xffffff;

		if (bl != d->bs) {
			s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_PARAM,
			.field = hdr + (bdl == 16 ? 12 : 5), .bit = -1, .cd = false };
			goto fail;
		}
	}
	for (off = hdr + bdl; off < len;) {
		uint8_t cur[CACHING_LEN], chg[CACHING_LEN];
		const uint8_t *pg = p + off;
		size_t plen;

		if (len - off < 2)
			goto fail;
		plen = pg[1] + 2;
		s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_INVALID_FIELD_PARAM,
			.field = off, .bit = -1, .cd = false };
		if ((pg[0] & 0x3f) == CACHING_PAGE && !(pg[0] & 0x40)) {
			caching_page(d, PC_CURRENT, cur);
			caching_page(d, PC_CHANGEABLE, chg);
		} else if ((pg[0] & 0x3f) == CONTROL_PAGE && !(pg[0] & 0x40)) {
			control_page(d, PC_CURRENT, cur);
			control_page(d, PC_CHANGEABLE, chg);
		} else {
			goto fail;
		}
		if (plen != (size_t)cur[1] + 2) {
			s.field = off + 1;
			goto fail;
		}
		if (len - off < plen) {
			s = (struct sense){ .key = SENSE_ILLEGAL_REQUEST, .asc = ASC_PARAM_LIST_LENGTH,
			.field = -1, .bit = -1, .cd = false };
			goto fail;
		}
		/* only the changeable bits may differ from current values */
		for (size_t i = 2; i < plen; i++) {
			uint8_t diff = (pg[i] ^ cur[i]) & ~chg[i];

			if (diff) {
				s.field = off + i;
				s.bit = 31 - __builtin_clz(diff);
				goto fail;
			}
		}
		if ((pg[0] & 0x3f) == CACHING_PAGE)
			wce = !!(pg[2] & 0x04);
		else
			ds = !!(pg[2] & 0x04);
		off += plen;
	}
	if (wce >= 0)
		__atomic_store_n(&d->wce, wce, __ATOMIC_RELAXED);
	if (ds >= 0)
		__atomic_store_n(&d->dsense, ds, __ATOMIC_RELAXED);
done:
	req->done(req);
	return;
fail:
	disk_check_condition(req, &s);
	req->done(req);
}
