/* Host-side check of the probe's data pattern in a disk image file:
 * blk-check FILE OFFSET LEN SEED exits 0 when bytes [OFFSET, OFFSET+LEN)
 * hold the pattern (guest/probe/lib/pattern.h), 1 on a mismatch, 2 on
 * usage or I/O errors. blk-check --write FILE OFFSET LEN SEED writes it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"

static int parse(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || !*s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	static uint64_t buf[1 << 17];	/* 1 MiB */
	uint64_t off, len, seed, done = 0;
	bool write = argc > 1 && strcmp(argv[1], "--write") == 0;
	int fd;

	if (write) {
		argc--;
		argv++;
	}
	if (argc != 5 || parse(argv[2], &off) || parse(argv[3], &len) ||
	    parse(argv[4], &seed) || off % 8 || len % 8) {
		fprintf(stderr, "usage: blk-check [--write] FILE OFFSET LEN "
			"SEED (OFFSET and LEN multiples of 8)\n");
		return 2;
	}
	fd = write ? open(argv[1], O_WRONLY | O_CREAT, 0644)
		   : open(argv[1], O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "blk-check: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	while (done < len) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);
		ssize_t r;
		size_t bad;

		if (write) {
			pattern_fill(buf, off + done, n, seed);
			if (pwrite(fd, buf, n, (off_t)(off + done)) != (ssize_t)n) {
				fprintf(stderr, "blk-check: %s: write failed at %"
					PRIu64 "\n", argv[1], off + done);
				return 2;
			}
			done += n;
			continue;
		}
		r = pread(fd, buf, n, (off_t)(off + done));
		if (r != (ssize_t)n) {
			fprintf(stderr, "blk-check: %s: short read at %" PRIu64
				"\n", argv[1], off + done);
			return 2;
		}
		bad = pattern_check(buf, off + done, n, seed);
		if (bad != n) {
			fprintf(stderr, "blk-check: %s: mismatch at offset %"
				PRIu64 " (seed %" PRIu64 ")\n", argv[1],
				off + done + bad, seed);
			return 1;
		}
		done += n;
	}
	if (close(fd) < 0) {
		fprintf(stderr, "blk-check: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	printf("blk-check: %s: %" PRIu64 " bytes at %" PRIu64 " %s seed %"
	       PRIu64 "\n", argv[1], len, off, write ? "written with" : "match",
	       seed);
	return 0;
}
