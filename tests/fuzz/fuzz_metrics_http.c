/* --metrics-listen's HTTP request head parser, fed a head as a scraper (or
 * anyone on the network) might send it: whole, and as it arrives in
 * pieces, which must never give another answer than the whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so that a read past it is caught. */
	char *buf = malloc(size ? size : 1);
	int whole, st = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	whole = metrics_http_parse(buf, size);
	if (whole && whole != 200 && whole != 400 && whole != 404 && whole != 405)
		abort();
	/* The server parses what it has received until it gets an answer:
	 * a prefix that answers must answer as the whole does (both end at
	 * the same complete line). */
	for (size_t n = 1; n < size && !st; n += 1 + n / 8)
		st = metrics_http_parse(buf, n);
	if (st && st != whole)
		abort();
	free(buf);
	return 0;
}
