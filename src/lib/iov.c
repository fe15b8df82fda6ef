/* Scatter-gather helpers (see iov.h). */
#include <string.h>

#include "lib/iov.h"

size_t iov_size(const struct iovec *iov, unsigned int cnt)
{
	size_t t = 0;

	for (unsigned int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* The copy of both directions: to_iov says which way. */
static size_t iov_copy(const struct iovec *iov, unsigned int cnt, size_t offset,
		       uint8_t *buf, size_t len, int to_iov)
{
	size_t done = 0;

	for (unsigned int i = 0; i < cnt && done < len; i++) {
		size_t l = iov[i].iov_len;
		uint8_t *p;

		if (offset >= l) {
			offset -= l;
			continue;
		}
		l -= offset;
		if (l > len - done)
			l = len - done;
		p = (uint8_t *)iov[i].iov_base + offset;
		if (to_iov)
			memcpy(p, buf + done, l);
		else
			memcpy(buf + done, p, l);
		done += l;
		offset = 0;
	}
	return done;
}

size_t iov_to_buf(const struct iovec *iov, unsigned int cnt, size_t offset,
		  void *buf, size_t len)
{
	return iov_copy(iov, cnt, offset, buf, len, 0);
}

size_t iov_from_buf(const struct iovec *iov, unsigned int cnt, size_t offset,
		    const void *buf, size_t len)
{
	return iov_copy(iov, cnt, offset, (uint8_t *)buf, len, 1);
}

unsigned int iov_slice(const struct iovec *src, unsigned int cnt, size_t skip,
		       struct iovec *dst)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < cnt; i++) {
		size_t len = src[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		dst[n].iov_base = (uint8_t *)src[i].iov_base + skip;
		dst[n].iov_len = len - skip;
		skip = 0;
		n++;
	}
	return n;
}

unsigned int iov_skip(struct iovec *iov, unsigned int cnt, size_t skip)
{
	unsigned int i = 0;

	while (i < cnt && skip >= iov[i].iov_len) {
		skip -= iov[i].iov_len;
		i++;
	}
	if (i < cnt) {
		iov[i].iov_base = (uint8_t *)iov[i].iov_base + skip;
		iov[i].iov_len -= skip;
	}
	return i;
}

unsigned int iov_trim(struct iovec *iov, unsigned int cnt, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < cnt && len; i++) {
		if (iov[i].iov_len >= len) {
			iov[i].iov_len = len;
			return i + 1;
		}
		len -= iov[i].iov_len;
	}
	return i;
}

void iov_window(struct iovec *iov, unsigned int cnt, size_t off, size_t len,
		struct iov_window *w)
{
	unsigned int i = 0, j;
	size_t rem = len;

	while (i < cnt && off >= iov[i].iov_len) {
		off -= iov[i].iov_len;
		i++;
	}
	w->first = w->last = NULL;
	w->iov = iov + i;
	w->n = 0;
	if (i == cnt || !len)
		return;
	w->first = &iov[i];
	w->first_save = iov[i];
	iov[i].iov_base = (uint8_t *)iov[i].iov_base + off;
	iov[i].iov_len -= off;
	for (j = i; j < cnt; j++) {
		if (iov[j].iov_len >= rem) {
			w->last = &iov[j];
			w->last_save = iov[j];
			if (j == i)
				w->last_save = w->first_save;
			iov[j].iov_len = rem;
			j++;
			break;
		}
		rem -= iov[j].iov_len;
	}
	w->n = j - i;
}

void iov_window_restore(struct iov_window *w)
{
	if (w->last)
		*w->last = w->last_save;
	if (w->first)
		*w->first = w->first_save;
}
