/* Parsing of --disk and --share. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lib/kvopt.h"

struct parse_ctx {
	void *out;
	char *err;
	size_t errlen;
};

static int bad(struct parse_ctx *c, const char *fmt, const char *key,
	       const char *value)
{
	snprintf(c->err, c->errlen, fmt, key, value ? value : "");
	return -EINVAL;
}

bool config_pr_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (!n || n > 127)
		return false;
	for (size_t i = 0; i < n; i++)
		if (id[i] <= 0x20 || id[i] >= 0x7f)
			return false;
	return true;
}

bool config_path_is_rbd(const char *path)
{
	return path && !strncmp(path, "rbd:", 4);
}

bool config_path_is_nbd(const char *path)
{
	static const char *const schemes[] = {
		"nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
		"nbd+vsock://", "nbds+vsock://",
	};

	for (size_t i = 0; path && i < sizeof(schemes) / sizeof(*schemes); i++)
		if (!strncmp(path, schemes[i], strlen(schemes[i])))
			return true;
	return false;
}

static int disk_str(struct parse_ctx *c, const char *key, const char *value,
		    const char **dst)
{
	if (!value || !*value)
		return bad(c, "--disk: %s= needs a value%s", key, value);
	free((char *)*dst);
	*dst = strdup(value);
	return *dst ? 0 : -ENOMEM;
}

const char *const disk_limit_names[LIM_N] = {
	"iops", "iops-rd", "iops-wr", "bps", "bps-rd", "bps-wr",
};
const char *const disk_limit_burst_names[LIM_N] = {
	"iops-burst", "iops-rd-burst", "iops-wr-burst",
	"bps-burst", "bps-rd-burst", "bps-wr-burst",
};

bool disk_limits_any(const struct disk_limits *l)
{
	for (unsigned int i = 0; i < LIM_N; i++)
		if (l->rate[i])
			return true;
	return false;
}

int disk_limits_check(const struct disk_limits *l, char *err, size_t errlen)
{
	for (unsigned int i = 0; i < LIM_N; i++) {
		const char *name = l->rate[i] > CONFIG_LIMIT_MAX ? disk_limit_names[i] :
				  l->burst[i] > CONFIG_LIMIT_MAX ?
				  disk_limit_burst_names[i] : NULL;

		if (name) {
			snprintf(err, errlen, "%s is above the largest limit, 10^15",
				 name);
			return -EINVAL;
		}
		if (l->burst[i] && !l->rate[i]) {
			snprintf(err, errlen, "%s needs %s (a burst of no limit)",
				 disk_limit_burst_names[i], disk_limit_names[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/* iops=N, bps=SIZE, their -rd/-wr and -burst forms: 1 if key is none of
 * them. Byte values take the K, M, G suffixes of sizes. */
static int disk_limit_item(struct parse_ctx *c, const char *key,
			   const char *value, struct disk_limits *l)
{
	for (unsigned int i = 0; i < LIM_N; i++) {
		bool burst = !strcmp(key, disk_limit_burst_names[i]);
		bool bytes = i >= LIM_BPS;
		uint64_t v;

		if (!burst && strcmp(key, disk_limit_names[i]))
			continue;
		if (bytes ? parse_size(value, &v) || v > CONFIG_LIMIT_MAX :
			    parse_uint(value, 0, CONFIG_LIMIT_MAX, &v))
			return bad(c, bytes ?
				   "--disk: %s=%s is not a size from 0 to 10^15 bytes (per second; K, M, G suffixes)" :
				   "--disk: %s=%s is not a number from 0 to 10^15", key, value);
		*(burst ? &l->burst[i] : &l->rate[i]) = v;
		return 0;
	}
	return 1;
}

static int disk_item(const char *key, const char *value, void *opaque)
{
	struct parse_ctx *c = opaque;
	struct disk_cfg *d = c->out;
	uint64_t v;
	int ret;

	if (!strcmp(key, "path") || !strcmp(key, "file")) {
		if (!value || !*value)
			return bad(c, "--disk: %s= needs a file name%s", key, value);
		free((char *)d->path);	/* path= given twice: the last wins */
		d->path = strdup(value);
		return d->path ? 0 : -ENOMEM;
	}
	if (!strcmp(key, "if")) {
		if (value && !strcmp(value, "virtio-blk"))
			d->iface = DISK_IF_VIRTIO_BLK;
		else if (value && !strcmp(value, "virtio-scsi"))
			d->iface = DISK_IF_VIRTIO_SCSI;
		else if (value && !strcmp(value, "lsi"))
			d->iface = DISK_IF_LSI;
		else
			return bad(c, "--disk: %s=%s is not one of virtio-blk, virtio-scsi, lsi",
				   key, value);
		return 0;
	}
	if (!strcmp(key, "ro") || !strcmp(key, "readonly")) {
		if (parse_bool(value, &d->ro))
			return bad(c, "--disk: %s=%s is not on or off", key, value);
		return 0;
	}
	if (!strcmp(key, "cache")) {
		if (value && !strcmp(value, "none"))
			d->cache = CACHE_NONE;
		else if (value && !strcmp(value, "writeback"))
			d->cache = CACHE_WRITEBACK;
		else
			return bad(c, "--disk: %s=%s is not none or writeback", key, value);
		return 0;
	}
	if (!strcmp(key, "queues")) {
		if (parse_uint(value, 1, 64, &v))
			return bad(c, "--disk: %s=%s is not a number from 1 to 64", key, value);
		d->queues = v;
		return 0;
	}
	if (!strcmp(key, "poll-us")) {
		if (parse_uint(value, 0, CONFIG_POLL_US_MAX, &v))
			return bad(c, "--disk: %s=%s is not a number from 0 to "
				   "10000 (microseconds)", key, value);
		d->poll_us = v;
		d->poll_set = true;
		return 0;
	}
	if (!strcmp(key, "pr-state") || !strcmp(key, "pr-id")) {
		const char **dst = key[3] == 's' ? &d->pr_state : &d->pr_id;

		if (!value || !*value)
			return bad(c, "--disk: %s= needs a value%s", key, value);
		if (key[3] == 'i' && !config_pr_id_ok(value))
			return bad(c, "--disk: %s=%s is not 1 to 127 printable "
				   "characters (no spaces)", key, value);
		free((char *)*dst);
		*dst = strdup(value);
		return *dst ? 0 : -ENOMEM;
	}
	if (!strcmp(key, "conf"))
		return disk_str(c, key, value, &d->rbd_conf);
	if (!strcmp(key, "user"))
		return disk_str(c, key, value, &d->rbd_user);
	if (!strcmp(key, "keyring"))
		return disk_str(c, key, value, &d->rbd_keyring);
	if (!strcmp(key, "timeout")) {
		if (parse_uint(value, 1, CONFIG_NBD_TIMEOUT_MAX, &v))
			return bad(c, "--disk: %s=%s is not a number of seconds from 1 to 86400",
				   key, value);
		d->timeout_s = v;
		d->timeout_set = true;
		return 0;
	}
	if (!strcmp(key, "target")) {
		if (parse_uint(value, 0, 15, &v))
			return bad(c, "--disk: %s=%s is not a number from 0 to 15", key, value);
		d->target = v;
		d->target_set = true;
		return 0;
	}
	if (!strcmp(key, "lun")) {
		if (parse_uint(value, 0, 255, &v))
			return bad(c, "--disk: %s=%s is not a number from 0 to 255", key, value);
		d->lun = v;
		return 0;
	}
	ret = disk_limit_item(c, key, value, &d->limits);
	if (ret <= 0)
		return ret;
	return bad(c, "--disk: unknown option '%s'%s (see iovm run --help)", key, NULL);
}

static int parse_disk(const char *arg, struct disk_cfg *out, char *err,
		      size_t errlen)
{
	struct parse_ctx c = { out, err, errlen };
	char msg[160];
	int ret;

	memset(out, 0, sizeof(*out));
	/* A bare file name (or rbd:/NBD URI, whose query may hold '=') is
	 * accepted as path=. */
	if (!strchr(arg, ',') && (!strchr(arg, '=') ||
				  config_path_is_rbd(arg) || config_path_is_nbd(arg))) {
		out->path = strdup(arg);
		return out->path ? 0 : -ENOMEM;
	}
	ret = kvopt_foreach(arg, disk_item, &c);
	if (ret == -EINVAL && !err[0])
		snprintf(err, errlen, "--disk: malformed option string '%s'", arg);
	if (ret)
		return ret;
	if (!out->path) {
		snprintf(err, errlen, "--disk: path=FILE is required");
		return -EINVAL;
	}
	if (out->iface == DISK_IF_VIRTIO_BLK && (out->target_set || out->lun)) {
		snprintf(err, errlen, "--disk: target= and lun= apply to SCSI disks (if=virtio-scsi or if=lsi)");
		return -EINVAL;
	}
	if (out->iface == DISK_IF_VIRTIO_BLK && (out->pr_state || out->pr_id)) {
		snprintf(err, errlen, "--disk: pr-state= and pr-id= apply to SCSI disks (if=virtio-scsi or if=lsi)");
		return -EINVAL;
	}
	if (!config_path_is_rbd(out->path) &&
	    (out->rbd_conf || out->rbd_user || out->rbd_keyring)) {
		snprintf(err, errlen, "--disk: conf=, user= and keyring= apply to Ceph RBD disks (path=rbd:POOL/IMAGE)");
		return -EINVAL;
	}
	if (!config_path_is_nbd(out->path) && out->timeout_set) {
		snprintf(err, errlen, "--disk: timeout= applies to NBD disks (path=nbd://..., nbd+unix://...)");
		return -EINVAL;
	}
	if (config_path_is_rbd(out->path) && strchr(out->path, '@') && !out->ro) {
		snprintf(err, errlen, "--disk: %s: an RBD snapshot is read-only; add ro", out->path);
		return -EINVAL;
	}
	if (out->iface == DISK_IF_LSI && out->lun) {
		snprintf(err, errlen, "--disk: if=lsi disks support lun=0 only");
		return -EINVAL;
	}
	if (disk_limits_check(&out->limits, msg, sizeof(msg))) {
		snprintf(err, errlen, "--disk: %s", msg);
		return -EINVAL;
	}
	return 0;
}

unsigned int config_disks_poll_us(const struct disk_cfg *const *disks,
				  unsigned int n)
{
	unsigned int us = 0;
	bool set = false;

	for (unsigned int i = 0; i < n; i++) {
		if (disks[i]->poll_set && (!set || disks[i]->poll_us > us))
			us = disks[i]->poll_us;
		set |= disks[i]->poll_set;
	}
	return set ? us : CONFIG_POLL_US_DEFAULT;
}

static int share_item(const char *key, const char *value, void *opaque)
{
	struct parse_ctx *c = opaque;
	struct share_cfg *s = c->out;
	uint64_t v;

	if (!strcmp(key, "path")) {
		if (!value || !*value)
			return bad(c, "--share: %s= needs a folder%s", key, value);
		free((char *)s->path);
		s->path = strdup(value);
		return s->path ? 0 : -ENOMEM;
	}
	if (!strcmp(key, "tag")) {
		/* virtio-9p's mount_tag is at most 36 bytes in practice;
		 * the config field has no hard limit but Linux reads it
		 * into a small buffer. */
		if (!value || !*value || strlen(value) > 36)
			return bad(c, "--share: %s=%s must be 1 to 36 characters", key, value);
		free((char *)s->tag);
		s->tag = strdup(value);
		return s->tag ? 0 : -ENOMEM;
	}
	if (!strcmp(key, "ro") || !strcmp(key, "readonly")) {
		if (parse_bool(value, &s->ro))
			return bad(c, "--share: %s=%s is not on or off", key, value);
		return 0;
	}
	if (!strcmp(key, "msize")) {
		if (parse_size(value, &v) || v < 4096 || v > P9_MAX_MSIZE)
			return bad(c, "--share: %s=%s must be from 4K to 64M", key, value);
		s->msize = v;
		return 0;
	}
	if (!strcmp(key, "poll-us")) {
		if (parse_uint(value, 0, CONFIG_POLL_US_MAX, &v))
			return bad(c, "--share: %s=%s is not a number from 0 to "
				   "10000 (microseconds)", key, value);
		s->poll_us = v;
		s->poll_set = true;
		return 0;
	}
	if (!strcmp(key, "security")) {
		if (value && !strcmp(value, "mapped-xattr"))
			s->security = SHARE_SEC_MAPPED_XATTR;
		else if (value && !strcmp(value, "none"))
			s->security = SHARE_SEC_NONE;
		else if (value && !strcmp(value, "passthrough"))
			s->security = SHARE_SEC_PASSTHROUGH;
		else
			return bad(c, "--share: %s=%s is not one of mapped-xattr, none, passthrough",
				   key, value);
		return 0;
	}
	return bad(c, "--share: unknown option '%s'%s", key, NULL);
}

static int parse_share(const char *arg, bool need_tag, struct share_cfg *out,
		       char *err, size_t errlen)
{
	struct parse_ctx c = { out, err, errlen };
	int ret;

	memset(out, 0, sizeof(*out));
	out->msize = P9_DEFAULT_MSIZE;
	out->poll_us = CONFIG_POLL_US_DEFAULT;
	ret = kvopt_foreach(arg, share_item, &c);
	if (ret == -EINVAL && !err[0])
		snprintf(err, errlen, "--share: malformed option string '%s'", arg);
	if (ret)
		return ret;
	if (!out->path) {
		snprintf(err, errlen, "--share: path=DIR is required");
		return -EINVAL;
	}
	if (need_tag && !out->tag) {
		snprintf(err, errlen, "--share: tag=NAME is required");
		return -EINVAL;
	}
	return 0;
}

/* On error nothing stays allocated, so callers can simply bail out. */
int config_parse_disk(const char *arg, struct disk_cfg *out, char *err,
		      size_t errlen)
{
	int ret = parse_disk(arg, out, err, errlen);

	if (ret)
		config_free_disk(out);
	return ret;
}

void config_free_disk(struct disk_cfg *d)
{
	free((char *)d->path);
	free((char *)d->pr_state);
	free((char *)d->pr_id);
	free((char *)d->rbd_conf);
	free((char *)d->rbd_user);
	free((char *)d->rbd_keyring);
	d->path = d->pr_state = d->pr_id = NULL;
	d->rbd_conf = d->rbd_user = d->rbd_keyring = NULL;
}

int config_parse_share(const char *arg, bool need_tag, struct share_cfg *out,
		       char *err, size_t errlen)
{
	int ret = parse_share(arg, need_tag, out, err, errlen);

	if (ret) {
		free((char *)out->path);
		free((char *)out->tag);
		out->path = out->tag = NULL;
	}
	return ret;
}

const char *disk_if_name(enum disk_if iface)
{
	switch (iface) {
	case DISK_IF_VIRTIO_BLK: return "virtio-blk";
	case DISK_IF_VIRTIO_SCSI: return "virtio-scsi";
	case DISK_IF_LSI: return "lsi";
	}
	return "?";
}
