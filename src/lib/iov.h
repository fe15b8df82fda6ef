/* Scatter-gather helpers: totals, copies between an iovec array and a flat
 * buffer, and cutting arrays to a byte range. Every function is bounded by
 * the array's count and the lengths it is given, never by a terminator. */
#ifndef IOVM_LIB_IOV_H
#define IOVM_LIB_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Bytes in iov[0..cnt). */
size_t iov_size(const struct iovec *iov, unsigned int cnt);

/* Copy up to len bytes, starting offset bytes into the array, to or from
 * buf; return the bytes copied (less when the array ends first). */
size_t iov_to_buf(const struct iovec *iov, unsigned int cnt, size_t offset,
		  void *buf, size_t len);
size_t iov_from_buf(const struct iovec *iov, unsigned int cnt, size_t offset,
		    const void *buf, size_t len);

/* Writes into dst the entries of src that follow its first skip bytes
 * (dst must have room for cnt entries); returns how many. */
unsigned int iov_slice(const struct iovec *src, unsigned int cnt, size_t skip,
		       struct iovec *dst);

/* In place: drops skip bytes from the front of iov[0..cnt) and returns
 * the index of the first entry left (cnt if none is). */
unsigned int iov_skip(struct iovec *iov, unsigned int cnt, size_t skip);

/* In place: cuts iov[0..cnt) to its first len bytes; returns the number of
 * entries that hold them. */
unsigned int iov_trim(struct iovec *iov, unsigned int cnt, uint64_t len);

/* A window [off, off + len) of an iovec array, made by trimming the array
 * in place (iov, n: the window's entries); iov_window_restore puts the two
 * trimmed entries back. */
struct iov_window {
	struct iovec *iov;
	unsigned int n;
	struct iovec *first, *last;
	struct iovec first_save, last_save;
};

void iov_window(struct iovec *iov, unsigned int cnt, size_t off, size_t len,
		struct iov_window *w);
void iov_window_restore(struct iov_window *w);

#endif
