/* The host's own figures for bench/9p.sh: sequential buffered write then
 * read of a file in chunks (the probe's request payload size), and the
 * metadata job done with system calls (openat O_CREAT, fstat, close,
 * unlinkat per file). Prints job= lines in the probe's format.
 * Usage: p9-floor FILE SIZE CHUNK DIR FILES */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"

int main(int argc, char **argv)
{
	uint64_t size, chunk, t0, ns, off;
	unsigned int files;
	char *buf;
	int fd, dfd;

	if (argc != 6) {
		fprintf(stderr, "usage: p9-floor FILE SIZE CHUNK DIR FILES\n");
		return 2;
	}
	size = strtoull(argv[2], NULL, 0);
	chunk = strtoull(argv[3], NULL, 0);
	files = strtoul(argv[5], NULL, 0);
	buf = malloc(chunk);
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	dfd = open(argv[4], O_RDONLY | O_DIRECTORY);
	if (!buf || !chunk || fd < 0 || dfd < 0) {
		perror("p9-floor");
		return 1;
	}
	for (uint64_t i = 0; i < chunk; i++)
		buf[i] = i * 31 + 7;
	t0 = mono_ns();
	for (off = 0; off < size; off += chunk)
		if (pwrite(fd, buf, size - off < chunk ? size - off : chunk, off) <= 0)
			return perror("pwrite"), 1;
	ns = mono_ns() - t0;
	printf("job=seqwrite chunk=%llu bytes=%llu ns=%llu bw_mbs=%llu\n",
	       (unsigned long long)chunk, (unsigned long long)size,
	       (unsigned long long)ns, (unsigned long long)(size * 1000 / ns));
	t0 = mono_ns();
	for (off = 0; off < size; off += chunk)
		if (pread(fd, buf, size - off < chunk ? size - off : chunk, off) <= 0)
			return perror("pread"), 1;
	ns = mono_ns() - t0;
	printf("job=seqread chunk=%llu bytes=%llu ns=%llu bw_mbs=%llu\n",
	       (unsigned long long)chunk, (unsigned long long)size,
	       (unsigned long long)ns, (unsigned long long)(size * 1000 / ns));
	close(fd);
	unlink(argv[1]);
	t0 = mono_ns();
	for (unsigned int i = 0; i < files; i++) {
		char name[32];
		struct stat st;
		int f;

		snprintf(name, sizeof(name), "m%u", i);
		f = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL, 0644);
		if (f < 0 || fstat(f, &st) || close(f) || unlinkat(dfd, name, 0))
			return perror("metadata"), 1;
	}
	ns = mono_ns() - t0;
	printf("job=metadata files=%u ops=%u ns=%llu ops_s=%llu files_s=%llu\n",
	       files, files * 4, (unsigned long long)ns,
	       (unsigned long long)(files * 4ull * 1000000000ull / ns),
	       (unsigned long long)(files * 1000000000ull / ns));
	return 0;
}
