/* iovm-exit: ends the VM with a status through the exit device at port 0xf4
 * (QEMU's isa-debug-exit semantics, also implemented by iovm). Built static
 * by tools/mkguest.sh and installed in the guest image as /bin/iovm-exit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>

#define EXIT_PORT 0xf4
/* The VMM exits with (v << 1) | 1 and a host exit status has 8 bits, so only
 * 7 bits of v survive the trip. */
#define EXIT_MAX 127

static int parse_status(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno || end == s || *end || *out < 0 || *out > 255)
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	long status;

	if (argc != 2 || parse_status(argv[1], &status)) {
		fprintf(stderr, "usage: iovm-exit STATUS (0-255): end the VM "
				"through port 0x%x\n", EXIT_PORT);
		return 2;
	}
	if (status > EXIT_MAX) {
		fprintf(stderr, "iovm-exit: status %ld does not fit the exit "
				"port, reporting %d\n", status, EXIT_MAX);
		status = EXIT_MAX;
	}
	if (ioperm(EXIT_PORT, 1, 1)) {
		fprintf(stderr, "iovm-exit: ioperm(0x%x): %s\n", EXIT_PORT,
			strerror(errno));
		return 1;
	}
	outb((unsigned char)status, EXIT_PORT);
	/* Still running: nothing claimed the port. */
	fprintf(stderr, "iovm-exit: no exit device at port 0x%x\n", EXIT_PORT);
	return 1;
}
