/* Online resize of a disk (blk_resize): the image grows (or has grown), and
 * the backend's size follows it with one atomic store that the queue
 * threads' range checks see on their next request. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#include "block/driver.h"

/* A file or block device: *now is the size the image has once the call
 * is done (extended to new_size, when given and the file is shorter). */
static int local_resize(struct blk_backend *be, uint64_t new_size,
			uint64_t *now, char *err, size_t errlen)
{
	struct stat st;
	uint64_t cur;

	if (fstat(be->fd, &st)) {
		snprintf(err, errlen, "%s: %s", blk_name(be), strerror(errno));
		return -errno;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(be->fd, BLKGETSIZE64, &cur)) {
			snprintf(err, errlen, "%s: cannot read the device's size: %s",
				 blk_name(be), strerror(errno));
			return -errno;
		}
		if (new_size && new_size != cur) {
			snprintf(err, errlen, "%s: a block device is %" PRIu64
				 " bytes and cannot be grown from here: grow it (lvextend, ...) and resize without a size",
				 blk_name(be), cur);
			return -EINVAL;
		}
		*now = cur;
		return 0;
	}
	cur = st.st_size;
	if (!new_size || new_size == cur) {
		*now = cur;
		return 0;
	}
	/* Never shorten a file, even past the disk's end: what the operator
	 * put there is not ours to cut. */
	if (cur > new_size) {
		snprintf(err, errlen, "%s: the file is already %" PRIu64 " bytes, more than the %"
			 PRIu64 " asked: resize without a size to take all of it",
			 blk_name(be), cur, new_size);
		return -EINVAL;
	}
	if (be->ro) {
		snprintf(err, errlen, "%s: the disk is read-only, so iovm does not extend its file: grow the file and resize without a size",
			 blk_name(be));
		return -EROFS;
	}
	if (ftruncate(be->fd, new_size)) {
		snprintf(err, errlen, "%s: cannot extend the file to %" PRIu64 " bytes: %s",
			 blk_name(be), new_size, strerror(errno));
		return -errno;
	}
	*now = new_size;
	return 0;
}

int blk_resize(struct blk_backend *be, uint64_t new_size, char *err,
	       size_t errlen)
{
	uint64_t old = blk_size(be), now = 0;
	uint32_t bs = be->block_size ? be->block_size : 512;
	int ret;

	if (new_size > INT64_MAX) {
		snprintf(err, errlen, "%s: %" PRIu64 " bytes is more than a file can hold",
			 blk_name(be), new_size);
		return -EFBIG;
	}
	if (new_size % bs) {
		snprintf(err, errlen, "%s: %" PRIu64 " bytes is not a multiple of the disk's %" PRIu32
			 "-byte logical block", blk_name(be), new_size, bs);
		return -EINVAL;
	}
	if (new_size && new_size < old) {
		snprintf(err, errlen, "%s: shrinking is refused (%" PRIu64 " bytes now, %" PRIu64
			 " asked): the guest may have data there", blk_name(be), old, new_size);
		return -EINVAL;
	}
	if (be->drv) {
		if (!be->drv->resize) {
			snprintf(err, errlen, "%s: an %s disk cannot change size", blk_name(be),
				 be->drv->name);
			return -EOPNOTSUPP;
		}
		if (be->ro && new_size > old) {
			snprintf(err, errlen, "%s: the disk is read-only, so iovm does not resize its image: grow the image and resize without a size",
				 blk_name(be));
			return -EROFS;
		}
		ret = be->drv->resize(be, new_size > old ? new_size : 0, &now, err, errlen);
	} else {
		ret = local_resize(be, new_size, &now, err, errlen);
	}
	if (ret)
		return ret;
	if (now < old) {
		snprintf(err, errlen, "%s: the image is %" PRIu64 " bytes, smaller than the disk's %"
			 PRIu64 ": refused (restore its size)", blk_name(be), now, old);
		return -EINVAL;
	}
	if (now % bs) {
		snprintf(err, errlen, "%s: the image is %" PRIu64 " bytes, not a multiple of the disk's %"
			 PRIu32 "-byte logical block", blk_name(be), now, bs);
		return -EINVAL;
	}
	/* After the image has its size: a queue thread that sees the new
	 * size finds the new blocks there. */
	__atomic_store_n(&be->size, now, __ATOMIC_RELEASE);
	return 0;
}
