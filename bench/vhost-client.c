/* vhost-client: a minimal vhost-user-blk or vhost-user-scsi front-end for
 * benchmarking a back-end with no guest at all. Guest RAM is a memfd shared
 * with the back-end; one virtqueue; requests are kept in flight at a fixed
 * depth and completions are found by polling the used ring (no interrupts
 * asked for). Reports IOPS, bandwidth, mean and p99 latency, and the
 * back-end's CPU time per I/O (from /proc/PID/task/x/schedstat of --pid).
 *
 *   vhost-client --socket PATH [--device blk|scsi] [--pid PID] [--time SEC]
 *                [--offset BYTES] [--region BYTES] [--yield | --irq] [--inflight] JOB...
 *   JOB = NAME:randread|randwrite|read|write|randcaw:BS:QD[:SEG]   e.g. rr:randread:4k:1
 * SEG (blk only): each request's data is BS/SEG descriptors of SEG bytes,
 * none adjacent in memory (a SEG gap between them), as a guest's scattered
 * pages: e.g. r64:randread:64k:8:4k. Without it, one descriptor of BS.
 * randcaw (--device scsi): COMPARE AND WRITE of BS (at most 32 blocks) at
 * random LBAs, comparing zeroes and writing zeroes, so on a region of
 * zeroes (a fresh image) every command must succeed; a MISCOMPARE stops
 * the client like any other failure.
 * --irq asks the back-end for interrupts (the avail ring's NO_INTERRUPT
 * flag clear) and sleeps on the call eventfd whenever the used ring has
 * nothing new, as a guest whose vCPU halts between completions: the
 * client then takes no CPU while it waits, which matters on a host whose
 * back-end (a Ceph cluster, say) needs every core.
 * I/O stays inside [offset, offset+region) of the disk (default: offset 1M,
 * region 64M, as bench/blk-floor and the probe). --inflight asks for the
 * back-end's inflight buffer (INFLIGHT_SHMFD) and hands it back, as QEMU's
 * vhost-user-blk does: the cost of that bookkeeping shows.
 *
 * --device scsi (default blk) drives a virtio-scsi HBA instead: only its
 * first request queue (virtqueue 2) is set up, and each I/O is a READ(16)
 * or WRITE(16) to target 0, LUN 0. Before the jobs, TEST UNIT READY is sent
 * until GOOD and READ CAPACITY(16) gives the disk's size and block size. A
 * command that does not end in VIRTIO_SCSI_S_OK and GOOD, with all its data
 * moved, stops the client with its sense key/ASC/ASCQ. Neither mode checks
 * the data read (writes carry a fixed fill pattern).
 *
 * One line per job on stdout, in bench/blk-floor's format:
 *   job=NAME iops=N bw_mbs=N lat_mean_us=N lat_p99_us=N ios=N cpu_us_per_io=N */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sched.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/le.h"
#include "vhost/proto.h"
#include "virtio/blk.h"
#include "virtio/ring.h"
#include "virtio/scsi.h"
#include "vwire.h"

#define QSIZE 256
#define MAX_QD 128
#define RAM_SIZE (64u << 20)
#define DATA_OFF (1u << 20)	/* data buffers start here; rings below */

static int sock;
static uint8_t *ram;
static bool inflight;
/* --device scsi; the virtqueue used: blk's only one, or scsi's first
 * request queue. */
static bool scsi;
static unsigned int qidx;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vhost-client: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void send_msg(uint32_t req, uint32_t flags, const void *p, uint32_t size,
		     const int *fds, unsigned int nfds)
{
	struct vhu_hdr h = { req, VHU_VERSION | flags, size };

	if (vwire_send(sock, &h, p, fds, nfds, 0) != (ssize_t)(sizeof(h) + size))
		die("send request %u: %s", req, strerror(errno));
}

/* Reads the reply to req into p; returns the reply's fd (-1: none). */
static int recv_reply_hdr(uint32_t req, void *p, uint32_t max, uint32_t *size)
{
	struct vhu_hdr h;
	int fd;

	if (vwire_recv_hdr(sock, &h, &fd) != sizeof(h))
		die("no reply to request %u", req);
	if (h.request != req || h.size > max)
		die("bad reply to request %u", req);
	if (h.size && recv(sock, p, h.size, MSG_WAITALL) != h.size)
		die("short reply to request %u", req);
	*size = h.size;
	return fd;
}

static uint32_t recv_reply(uint32_t req, void *p, uint32_t max)
{
	uint32_t size;
	int fd = recv_reply_hdr(req, p, max, &size);

	if (fd >= 0)
		close(fd);
	return size;
}

/* GET_INFLIGHT_FD's reply carries the buffer's fd. */
static int recv_reply_fd(uint32_t req, void *p, uint32_t max)
{
	uint32_t size;
	int fd = recv_reply_hdr(req, p, max, &size);

	if (fd < 0)
		die("bad reply to request %u", req);
	return fd;
}

static uint64_t get_u64(uint32_t req)
{
	uint64_t v;

	send_msg(req, 0, NULL, 0, NULL, 0);
	recv_reply(req, &v, sizeof(v));
	return v;
}

/* A request with REPLY_ACK: waits until the back-end has applied it. */
static void send_acked(uint32_t req, const void *p, uint32_t size, const int *fds,
		       unsigned int nfds)
{
	uint64_t status;

	send_msg(req, VHU_FLAG_NEED_REPLY, p, size, fds, nfds);
	recv_reply(req, &status, sizeof(status));
	if (status)
		die("request %u failed", req);
}

/* ---- the virtqueue, driver side ---- */

struct ring {
	struct virtq_desc *desc;
	volatile uint16_t *avail;	/* flags, idx, ring[] */
	volatile uint16_t *used;	/* flags, idx, then elems */
	uint16_t avail_idx, used_idx;
	int kick;
};

static struct ring vq;
static const uint64_t desc_gpa = 0, avail_gpa = 0x4000, used_gpa = 0x8000;

/* One request in flight. blk: hdr is the virtio_blk_outhdr, status its
 * status byte. scsi: hdr is the virtio_scsi_cmd_req (header and CDB),
 * status the start of the virtio_scsi_cmd_resp. */
struct slot {
	struct virtio_blk_outhdr {
		uint32_t type;
		uint32_t ioprio;
		uint64_t sector;
	} *hdr;
	uint8_t *status;
	uint64_t data_gpa;
	uint64_t t0;
};

static struct slot slots[MAX_QD];

/* Request/response areas: blk 32 bytes a slot, scsi SCSI_SLOT (the
 * response at half of it), all below DATA_OFF. */
#define SLOT_AREA 0x10000
#define SCSI_SLOT 512u

/* The protocol features agreed with the back-end. */
static uint64_t pf;
static bool irq;	/* --irq: completions signalled, waited for on call_fd */
static int call_fd = -1;

static void setup(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t f;
	int memfd;

	sock = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)))
		die("connect %s: %s", path, strerror(errno));
	memfd = memfd_create("vhost-client-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* Back-ends (iovm's among them) may refuse memfds that can shrink. */
	if (memfd < 0 || ftruncate(memfd, RAM_SIZE) ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))
		die("memfd: %s", strerror(errno));
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		   memfd, 0);
	if (ram == MAP_FAILED)
		die("mmap: %s", strerror(errno));

	f = get_u64(VHU_GET_FEATURES);
	if (!(f & (1ull << VHU_F_PROTOCOL_FEATURES)) || !(f & (1ull << VIRTIO_F_VERSION_1)))
		die("back-end lacks protocol features or VERSION_1");
	pf = get_u64(VHU_GET_PROTOCOL_FEATURES);
	if (!(pf & (1ull << VHU_PF_REPLY_ACK)))
		die("back-end lacks REPLY_ACK");
	if (inflight && !(pf & (1ull << VHU_PF_INFLIGHT_SHMFD)))
		die("--inflight: back-end lacks INFLIGHT_SHMFD");
	pf &= (1ull << VHU_PF_REPLY_ACK) | (1ull << VHU_PF_MQ) | (1ull << VHU_PF_CONFIG) |
	      (inflight ? 1ull << VHU_PF_INFLIGHT_SHMFD : 0);
	send_msg(VHU_SET_PROTOCOL_FEATURES, 0, &pf, 8, NULL, 0);
	send_acked(VHU_SET_OWNER, NULL, 0, NULL, 0);
	if (scsi && (pf & (1ull << VHU_PF_MQ)) && get_u64(VHU_GET_QUEUE_NUM) <= qidx)
		die("back-end has no virtqueue %u (is it virtio-scsi?)", qidx);
	/* No event index: the avail ring's NO_INTERRUPT flag then tells the
	 * back-end not to signal, as this client polls (--irq: it asks for
	 * signals and sleeps on them). virtio-scsi: no
	 * device features (no hotplug events, T10 PI or bidirectional
	 * commands are used). */
	f = (1ull << VIRTIO_F_VERSION_1) | (1ull << VHU_F_PROTOCOL_FEATURES) |
	    (scsi ? 0 : f & (1ull << VIRTIO_BLK_F_FLUSH));
	send_acked(VHU_SET_FEATURES, &f, 8, NULL, 0);
	{
		struct vhu_mem_table t = { .nregions = 1 };

		t.r[0] = (struct vhu_region){ 0, RAM_SIZE, (uintptr_t)ram, 0 };
		send_acked(VHU_SET_MEM_TABLE, &t, VHU_MEM_TABLE_HDR_SIZE + sizeof(t.r[0]),
			   &memfd, 1);
	}
	if (inflight) {
		struct vhu_inflight in = { 0, 0, qidx + 1, QSIZE };
		int fd;

		send_msg(VHU_GET_INFLIGHT_FD, 0, &in, sizeof(in), NULL, 0);
		fd = recv_reply_fd(VHU_GET_INFLIGHT_FD, &in, sizeof(in));
		send_acked(VHU_SET_INFLIGHT_FD, &in, sizeof(in), &fd, 1);
		close(fd);
	}
	vq.desc = (struct virtq_desc *)(ram + desc_gpa);
	vq.avail = (volatile uint16_t *)(ram + avail_gpa);
	vq.used = (volatile uint16_t *)(ram + used_gpa);
	vq.avail[0] = irq ? 0 : VIRTQ_AVAIL_F_NO_INTERRUPT;
	{
		struct vhu_vring_state st = { qidx, QSIZE };
		struct vhu_vring_addr a = { qidx, 0, (uintptr_t)ram + desc_gpa,
					    (uintptr_t)ram + used_gpa,
					    (uintptr_t)ram + avail_gpa, 0 };
		uint64_t idx = qidx;

		send_acked(VHU_SET_VRING_NUM, &st, sizeof(st), NULL, 0);
		send_acked(VHU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0);
		st.num = 0;
		send_acked(VHU_SET_VRING_BASE, &st, sizeof(st), NULL, 0);
		call_fd = eventfd(0, EFD_CLOEXEC);
		vq.kick = eventfd(0, EFD_CLOEXEC);
		send_acked(VHU_SET_VRING_CALL, &idx, 8, &call_fd, 1);
		send_acked(VHU_SET_VRING_KICK, &idx, 8, &vq.kick, 1);
		st.num = 1;
		send_acked(VHU_SET_VRING_ENABLE, &st, sizeof(st), NULL, 0);
	}
	close(memfd);
}

static void publish(void)
{
	uint16_t used_flags;

	__atomic_store_n(&vq.avail[1], vq.avail_idx, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	used_flags = __atomic_load_n(&vq.used[0], __ATOMIC_ACQUIRE);
	if (!(used_flags & VIRTQ_USED_F_NO_NOTIFY)) {
		uint64_t one = 1;

		if (write(vq.kick, &one, sizeof(one)) != sizeof(one))
			die("kick: %s", strerror(errno));
	}
}

static uint64_t capacity_bytes(void)
{
	struct vhu_config c = { .offset = 0, .size = 8 };
	uint64_t sectors;

	send_msg(VHU_GET_CONFIG, 0, &c, VHU_CONFIG_HDR_SIZE + 8, NULL, 0);
	if (recv_reply(VHU_GET_CONFIG, &c, sizeof(c)) != VHU_CONFIG_HDR_SIZE + 8)
		die("GET_CONFIG failed");
	memcpy(&sectors, c.data, 8);
	return sectors * 512;
}

/* ---- virtio-scsi ---- */

#define SCSI_TEST_UNIT_READY 0x00
#define SCSI_READ_16 0x88
#define SCSI_WRITE_16 0x8a
#define SCSI_SERVICE_ACTION_IN_16 0x9e
#define SCSI_SAI_READ_CAPACITY_16 0x10
#define SCSI_STATUS_GOOD 0x00
#define SCSI_STATUS_CHECK_CONDITION 0x02
#define SCSI_SENSE_UNIT_ATTENTION 0x6

/* Target 0, LUN 0, in the virtio-scsi LUN field: 1, the target, then the
 * LUN in flat space addressing (0x40 | LUN >> 8, LUN & 0xff), as Linux's
 * virtio_scsi sends it; iovm decodes flat space and peripheral addressing
 * alike. */
static const uint8_t scsi_lun[8] = { 1, 0, 0x40, 0, 0, 0, 0, 0 };
/* cdb_size and sense_size from the config space (the spec's defaults if
 * the back-end has no config messages); disk block size and size. */
static uint32_t cdb_size = VIRTIO_SCSI_CDB_DEFAULT;
static uint32_t sense_size = VIRTIO_SCSI_SENSE_DEFAULT;
static uint32_t max_sectors = 0xffff;
static uint32_t lbsize;
static uint64_t tag;

/* SCSI's big-endian fields. */
static void be_put(uint8_t *p, uint64_t v, unsigned int n)
{
	while (n--) {
		p[n] = v;
		v >>= 8;
	}
}

static uint64_t be_get(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

static void scsi_config(void)
{
	struct vhu_config c = { .offset = 0, .size = VIRTIO_SCSI_CFG_LEN };

	if (!(pf & (1ull << VHU_PF_CONFIG)))
		return;
	send_msg(VHU_GET_CONFIG, 0, &c, VHU_CONFIG_HDR_SIZE + c.size, NULL, 0);
	if (recv_reply(VHU_GET_CONFIG, &c, sizeof(c)) != VHU_CONFIG_HDR_SIZE + c.size)
		die("GET_CONFIG failed");
	if (!le_get32(c.data + VIRTIO_SCSI_CFG_NUM_QUEUES))
		die("virtio-scsi config: no request queues");
	cdb_size = le_get32(c.data + VIRTIO_SCSI_CFG_CDB_SIZE);
	sense_size = le_get32(c.data + VIRTIO_SCSI_CFG_SENSE_SIZE);
	max_sectors = le_get32(c.data + VIRTIO_SCSI_CFG_MAX_SECTORS);
	if (cdb_size < 16 || VIRTIO_SCSI_REQ_HDR + cdb_size > SCSI_SLOT / 2 ||
	    VIRTIO_SCSI_RESP_HDR + sense_size > SCSI_SLOT / 2)
		die("virtio-scsi config: cdb_size %u or sense_size %u does not fit (cdb_size 16-%u, sense_size up to %u)",
		    cdb_size, sense_size, SCSI_SLOT / 2 - VIRTIO_SCSI_REQ_HDR,
		    SCSI_SLOT / 2 - VIRTIO_SCSI_RESP_HDR);
}

static void scsi_slot_init(unsigned int s)
{
	uint8_t *h = ram + SLOT_AREA + s * SCSI_SLOT;

	slots[s].hdr = (void *)h;
	slots[s].status = h + SCSI_SLOT / 2;
	memset(h, 0, VIRTIO_SCSI_REQ_HDR + cdb_size);	/* task attr SIMPLE (0) */
	memcpy(h, scsi_lun, sizeof(scsi_lun));
}

static uint8_t *scsi_cdb(unsigned int s)
{
	return (uint8_t *)slots[s].hdr + VIRTIO_SCSI_REQ_HDR;
}

/* Fills slot s's three descriptors: the request header (with the CDB),
 * then data out, the response, or the response, then data in; none: the
 * request and the response only. The response byte starts at 0xff, which
 * no back-end writes, so that an unanswered request shows. */
static void scsi_queue(unsigned int s, uint32_t len, bool to_dev)
{
	struct slot *sl = &slots[s];
	struct virtq_desc *d = &vq.desc[s * 3];
	uint64_t req = (uint8_t *)sl->hdr - ram, resp = sl->status - ram;
	uint32_t rlen = VIRTIO_SCSI_RESP_HDR + sense_size;
	uint16_t a = vq.avail_idx++;

	le_put64((uint8_t *)sl->hdr + 8, tag++);
	sl->status[11] = 0xff;
	d[0] = (struct virtq_desc){ req, VIRTIO_SCSI_REQ_HDR + cdb_size, VIRTQ_DESC_F_NEXT,
				    s * 3 + 1 };
	if (!len)
		d[1] = (struct virtq_desc){ resp, rlen, VIRTQ_DESC_F_WRITE, 0 };
	else if (to_dev) {
		d[1] = (struct virtq_desc){ sl->data_gpa, len, VIRTQ_DESC_F_NEXT, s * 3 + 2 };
		d[2] = (struct virtq_desc){ resp, rlen, VIRTQ_DESC_F_WRITE, 0 };
	} else {
		d[1] = (struct virtq_desc){ resp, rlen, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE,
					    s * 3 + 2 };
		d[2] = (struct virtq_desc){ sl->data_gpa, len, VIRTQ_DESC_F_WRITE, 0 };
	}
	vq.avail[2 + (a % QSIZE)] = s * 3;
}

/* The outcome of slot s's command, as an initiator sees it: 0 GOOD with
 * every byte moved; else the sense key (fixed or descriptor format sense)
 * of a CHECK CONDITION, or -1, with a one-line description in msg. */
static int scsi_result(unsigned int s, char *msg, size_t len)
{
	const uint8_t *r = slots[s].status, *sense = r + VIRTIO_SCSI_RESP_HDR;
	uint32_t sense_len = le_get32(r), resid = le_get32(r + 4);
	uint8_t key = 0, asc = 0, ascq = 0;

	if (r[11] != VIRTIO_SCSI_S_OK) {
		snprintf(msg, len, "virtio-scsi response %u%s", r[11],
			 r[11] == 0xff ? " (none written: is the back-end virtio-scsi?)" : "");
		return -1;
	}
	if (r[10] == SCSI_STATUS_GOOD) {
		if (!resid)
			return 0;
		snprintf(msg, len, "GOOD but %u bytes not moved", resid);
		return -1;
	}
	if (sense_len > sense_size)
		sense_len = sense_size;
	if (r[10] != SCSI_STATUS_CHECK_CONDITION || sense_len < 4) {
		snprintf(msg, len, "SCSI status 0x%02x", r[10]);
		return -1;
	}
	if ((sense[0] & 0x7f) >= 0x72) {	/* descriptor format */
		key = sense[1] & 0xf;
		asc = sense[2];
		ascq = sense[3];
	} else if (sense_len >= 14) {
		key = sense[2] & 0xf;
		asc = sense[12];
		ascq = sense[13];
	}
	snprintf(msg, len, "CHECK CONDITION, sense key 0x%x, ASC/ASCQ 0x%02x/0x%02x", key, asc,
		 ascq);
	return key ? key : -1;
}

/* Runs one command on slot 0 and waits for it (setup only: no job runs).
 * Returns scsi_result's value. */
static int scsi_sync(const uint8_t *cdb, unsigned int cdb_len, uint32_t in_len,
		     char *msg, size_t len)
{
	uint64_t deadline = mono_ns() + 10000000000ull;

	slots[0].data_gpa = DATA_OFF;
	scsi_slot_init(0);
	memcpy(scsi_cdb(0), cdb, cdb_len);
	scsi_queue(0, in_len, false);
	publish();
	while (__atomic_load_n(&vq.used[1], __ATOMIC_ACQUIRE) == vq.used_idx) {
		if (mono_ns() > deadline)
			die("SCSI command 0x%02x: no completion in 10 s", cdb[0]);
		sched_yield();
	}
	vq.used_idx++;
	return scsi_result(0, msg, len);
}

/* Brings LUN 0 up as an initiator would: TEST UNIT READY until GOOD (a
 * unit attention, e.g. power on or reset, is reported once and cleared by
 * being reported; iovm's disks start without one), then READ CAPACITY(16)
 * for the block size and the size in bytes. */
static uint64_t scsi_start(void)
{
	uint8_t tur[6] = { SCSI_TEST_UNIT_READY };
	uint8_t rc[16] = { SCSI_SERVICE_ACTION_IN_16, SCSI_SAI_READ_CAPACITY_16 };
	const uint8_t *d = ram + DATA_OFF;
	char msg[128];
	int ret, tries;

	for (tries = 0; (ret = scsi_sync(tur, sizeof(tur), 0, msg, sizeof(msg))); tries++)
		if (ret != SCSI_SENSE_UNIT_ATTENTION || tries == 8)
			die("TEST UNIT READY: %s", msg);
	be_put(rc + 10, 32, 4);
	if (scsi_sync(rc, sizeof(rc), 32, msg, sizeof(msg)))
		die("READ CAPACITY(16): %s", msg);
	lbsize = be_get(d + 8, 4);
	if (lbsize < 512 || lbsize & (lbsize - 1))
		die("READ CAPACITY(16): block size %u", lbsize);
	return (be_get(d, 8) + 1) * lbsize;
}

/* ---- jobs ---- */

struct job {
	char name[64];
	bool write, random;
	bool caw;		/* randcaw: COMPARE AND WRITE, data-out 2 x bs */
	uint32_t bs;
	unsigned int qd;
	uint32_t seg;		/* SEG: bytes per data descriptor; 0: bs */
};

/* Descriptors per slot: slot s owns [s * dstride, (s + 1) * dstride). */
static unsigned int dstride = 3;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* scsi: the CDB's LBA; the rest of it was set per job (scsi_job_init). */
static void scsi_submit(unsigned int s, const struct job *j, uint64_t off)
{
	be_put(scsi_cdb(s) + 2, off / lbsize, 8);
	scsi_queue(s, j->caw ? 2 * j->bs : j->bs, j->write);
	slots[s].t0 = mono_ns();
}

/* The data descriptors: one of bs, or bs / seg of seg bytes each, every
 * other seg-sized piece of the slot's buffer (so no two are adjacent). */
static void blk_submit(unsigned int s, const struct job *j, uint64_t off)
{
	struct slot *sl = &slots[s];
	unsigned int first = s * dstride, n = dstride - 2;
	struct virtq_desc *d = &vq.desc[first];
	uint16_t flags = VIRTQ_DESC_F_NEXT | (j->write ? 0 : VIRTQ_DESC_F_WRITE);
	uint32_t len = n > 1 ? j->seg : j->bs;
	uint16_t a = vq.avail_idx++;

	sl->hdr->type = j->write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
	sl->hdr->ioprio = 0;
	sl->hdr->sector = off / 512;
	*sl->status = 0xff;
	d[0] = (struct virtq_desc){ (uint8_t *)sl->hdr - ram, 16, VIRTQ_DESC_F_NEXT, first + 1 };
	for (unsigned int i = 0; i < n; i++)
		d[1 + i] = (struct virtq_desc){ sl->data_gpa + (uint64_t)i * 2 * len, len, flags,
						first + 2 + i };
	d[n + 1] = (struct virtq_desc){ sl->status - ram, 1, VIRTQ_DESC_F_WRITE, 0 };
	vq.avail[2 + (a % QSIZE)] = first;
	sl->t0 = mono_ns();
}

static void submit(unsigned int s, const struct job *j, uint64_t off)
{
	if (scsi)
		scsi_submit(s, j, off);
	else
		blk_submit(s, j, off);
}

/* CPU time (ns) used so far by every thread of pid. */
static uint64_t proc_cpu_ns(int pid)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	uint64_t sum = 0;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		die("--pid %d: %s", pid, strerror(errno));
	while ((e = readdir(d))) {
		char p[300];
		unsigned long long ns;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", pid, e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &ns) == 1)
			sum += ns;
		fclose(f);
	}
	closedir(d);
	return sum;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t region_off = 1u << 20, region_len = 64u << 20;
/* --yield: give the CPU away between empty polls (hosts with fewer free
 * cores than the client and the back-end need). */
static bool yield;

static void run_job(const struct job *j, uint64_t cap, double secs, int pid)
{
	uint64_t nblocks = region_len / j->bs, seq = 0, ios = 0, lat_sum = 0;
	size_t nlat = 0, maxlat = 1u << 20;
	uint32_t *lat = malloc(maxlat * sizeof(*lat));
	uint64_t t_start, t_end, cpu0, cpu1, deadline;
	unsigned int inflight = 0;

	if (!lat || !nblocks || region_off + region_len > cap || region_off % j->bs)
		die("job %s: region does not fit the disk or the block size", j->name);
	if (scsi && (j->bs % lbsize || j->bs / 512 > max_sectors))
		die("job %s: block size %u is not a multiple of the disk's %u or above max_sectors %u",
		    j->name, j->bs, lbsize, max_sectors);
	if (j->caw && (!scsi || j->bs / lbsize > 32))
		die("job %s: COMPARE AND WRITE needs --device scsi and at most 32 blocks", j->name);
	if (j->seg && scsi)
		die("job %s: SEG is for --device blk only", j->name);
	dstride = j->seg ? 2 + j->bs / j->seg : 3;
	if (j->qd * dstride > QSIZE)
		die("job %s: %u requests of %u descriptors do not fit the %u-entry queue",
		    j->name, j->qd, dstride, QSIZE);
	for (unsigned int s = 0; s < j->qd; s++) {
		uint8_t *base = ram + DATA_OFF + (size_t)s * (2 * j->bs + 4096);

		if (j->caw) {
			/* compare zeroes, write zeroes: every command wins
			 * on a region that holds zeroes (a fresh image) */
			scsi_slot_init(s);
			scsi_cdb(s)[0] = 0x89;
			scsi_cdb(s)[13] = j->bs / lbsize;
			slots[s].data_gpa = base - ram;
			memset(base, 0, 2 * j->bs);
			continue;
		}
		if (scsi) {
			scsi_slot_init(s);
			scsi_cdb(s)[0] = j->write ? SCSI_WRITE_16 : SCSI_READ_16;
			be_put(scsi_cdb(s) + 10, j->bs / lbsize, 4);
		} else {
			slots[s].hdr = (void *)(ram + SLOT_AREA + s * 32);
			slots[s].status = ram + SLOT_AREA + s * 32 + 16;
		}
		slots[s].data_gpa = base - ram;
		memset(base, 0x5a + s, j->bs);
	}
	cpu0 = proc_cpu_ns(pid);
	t_start = mono_ns();
	deadline = t_start + (uint64_t)(secs * 1e9);
	for (unsigned int s = 0; s < j->qd; s++) {
		uint64_t blk = j->random ? next_rand() % nblocks : seq++ % nblocks;

		submit(s, j, region_off + blk * j->bs);
		inflight++;
	}
	publish();
	while (inflight) {
		uint16_t used_idx = __atomic_load_n(&vq.used[1], __ATOMIC_ACQUIRE);
		bool resubmitted = false;
		uint64_t t = 0;

		while (vq.used_idx != used_idx) {
			const volatile uint32_t *e =
				(const volatile uint32_t *)(vq.used + 2) + 2 * (vq.used_idx % QSIZE);
			unsigned int s = e[0] / dstride;
			uint64_t l;

			vq.used_idx++;
			if (s >= j->qd)
				die("job %s: used ring names descriptor %u, not one of ours",
				    j->name, e[0]);
			if (scsi) {
				char msg[128];

				if (scsi_result(s, msg, sizeof(msg)))
					die("job %s: %s at LBA %" PRIu64, j->name, msg,
					    be_get(scsi_cdb(s) + 2, 8));
			} else if (*slots[s].status != VIRTIO_BLK_S_OK)
				die("job %s: request failed (status %u)", j->name,
				    *slots[s].status);
			if (!t)
				t = mono_ns();
			l = t - slots[s].t0;
			lat_sum += l;
			if (nlat < maxlat)
				lat[nlat++] = l > UINT32_MAX ? UINT32_MAX : l;
			ios++;
			inflight--;
			if (t < deadline) {
				uint64_t blk = j->random ? next_rand() % nblocks : seq++ % nblocks;

				submit(s, j, region_off + blk * j->bs);
				inflight++;
				resubmitted = true;
			}
		}
		if (resubmitted)
			publish();
		else if (irq && inflight &&
			 vq.used_idx == __atomic_load_n(&vq.used[1], __ATOMIC_ACQUIRE)) {
			/* Nothing new: sleep until the back-end signals. A
			 * signal sent since the used index was read is
			 * counted in the eventfd, so none is lost. (The
			 * back-end may have made the shared file
			 * non-blocking: poll, then read.) */
			struct pollfd pfd = { .fd = call_fd, .events = POLLIN };
			uint64_t n;

			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				die("poll call eventfd: %s", strerror(errno));
			if (read(call_fd, &n, sizeof(n)) != sizeof(n) && errno != EINTR &&
			    errno != EAGAIN)
				die("read call eventfd: %s", strerror(errno));
		} else if (vq.used_idx == used_idx && yield)
			sched_yield();
	}
	t_end = mono_ns();
	cpu1 = proc_cpu_ns(pid);
	qsort(lat, nlat, sizeof(*lat), cmp_u32);
	{
		double el = (t_end - t_start) / 1e9;
		double iops = ios / el;

		printf("job=%s iops=%.0f bw_mbs=%.1f lat_mean_us=%.1f lat_p99_us=%.1f "
		       "ios=%" PRIu64 " cpu_us_per_io=%.2f\n",
		       j->name, iops, iops * j->bs / 1e6, lat_sum / 1e3 / ios,
		       lat[(size_t)(nlat * 0.99)] / 1e3, ios,
		       pid > 0 ? (cpu1 - cpu0) / 1e3 / ios : 0.0);
		fflush(stdout);
	}
	free(lat);
}

static uint32_t parse_bs(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	if (!v || v % 512 || v > (4u << 20))
		die("bad block size %s", s);
	return v;
}

static void parse_job(const char *arg, struct job *j)
{
	char buf[128], *name, *rw, *bs, *qd, *seg;

	snprintf(buf, sizeof(buf), "%s", arg);
	name = strtok(buf, ":");
	rw = strtok(NULL, ":");
	bs = strtok(NULL, ":");
	qd = strtok(NULL, ":");
	seg = strtok(NULL, ":");
	if (!name || !rw || !bs || !qd || strtok(NULL, ":"))
		die("bad job '%s' (NAME:RW:BS:QD[:SEG])", arg);
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->caw = !strcmp(rw, "randcaw");
	j->write = strstr(rw, "write") || j->caw;
	j->random = !strncmp(rw, "rand", 4);
	j->bs = parse_bs(bs);
	j->qd = atoi(qd);
	if (!j->qd || j->qd > MAX_QD || j->qd > QSIZE / 3)
		die("bad queue depth %s (1-%d)", qd, QSIZE / 3);
	j->seg = seg ? parse_bs(seg) : 0;
	if (j->seg && (j->bs % j->seg || j->bs / j->seg > QSIZE - 2))
		die("job %s: SEG must divide BS into at most %d pieces", arg, QSIZE - 2);
	if (j->seg == j->bs)
		j->seg = 0;
	if ((uint64_t)j->qd * (2 * j->bs + 4096) > RAM_SIZE - DATA_OFF)
		die("job %s needs more buffer memory", arg);
}

static const char usage[] =
	"usage: vhost-client --socket PATH [--device blk|scsi] [--pid PID] [--time SEC] [--offset B] [--region B] [--yield | --irq] [--inflight] NAME:RW:BS:QD[:SEG]...";

int main(int argc, char **argv)
{
	const char *path = NULL;
	double secs = 5;
	int pid = 0, i;
	uint64_t cap;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "blk") && strcmp(argv[i], "scsi"))
				die("--device %s: blk or scsi", argv[i]);
			scsi = !strcmp(argv[i], "scsi");
		}
		else if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			pid = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--time") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--yield"))
			yield = true;
		else if (!strcmp(argv[i], "--irq"))
			irq = true;
		else if (!strcmp(argv[i], "--inflight"))
			inflight = true;
		else if (!strcmp(argv[i], "--offset") && i + 1 < argc)
			region_off = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--region") && i + 1 < argc)
			region_len = strtoull(argv[++i], NULL, 0);
		else
			die("%s", usage);
	}
	if (!path || i == argc || (yield && irq))
		die("%s", usage);
	qidx = scsi ? VIRTIO_SCSI_REQ_Q0 : 0;
	setup(path);
	if (scsi) {
		scsi_config();
		cap = scsi_start();
	} else
		cap = capacity_bytes();
	for (; i < argc; i++) {
		struct job j;

		parse_job(argv[i], &j);
		run_job(&j, cap, secs, pid);
	}
	close(sock);
	return 0;
}
