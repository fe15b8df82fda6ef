/* --metrics-listen tcp:[HOST:]PORT: a thread of its own serving the
 * Prometheus text of api/metrics.h over HTTP/1.1 GET /metrics, for a
 * scraper. One request per connection, its head bounded, a slow client
 * timed out; nothing of it runs on a vCPU or queue thread. */
#ifndef IOVM_API_METRICS_HTTP_H
#define IOVM_API_METRICS_HTTP_H

#include <stddef.h>

#include "api/objects.h"

/* Longest request head (request line and headers) read. */
#define METRICS_HTTP_MAX_HEAD 8192
/* How long a connection may take to send its head or take the reply. */
#define METRICS_HTTP_TIMEOUT_S 5

struct metrics_http;

/* Listens on spec ("tcp:PORT" on 127.0.0.1, "tcp:HOST:PORT",
 * "tcp:[IPV6]:PORT") and serves o's statistics from a new thread. NULL
 * with a one-line reason in err. */
struct metrics_http *metrics_http_start(const char *spec,
					struct api_objects *o, char *err,
					size_t errlen);
/* The address bound ("tcp:127.0.0.1:9100"; the port chosen for 0). */
const char *metrics_http_addr(const struct metrics_http *m);
/* Stops the thread, closes the socket, frees m (NULL: nothing). */
void metrics_http_stop(struct metrics_http *m);

/* The request head parser, apart for unit tests and the fuzz harness:
 * buf[0..len) is what arrived so far. Returns 0 while the head is not
 * complete (no empty line yet) and len < METRICS_HTTP_MAX_HEAD, else the
 * status to answer: 200 (GET /metrics), 404 (GET of another path), 405
 * (another method), 400 (anything else: a bad request line or header, a
 * head too long, a version other than HTTP/1.x). */
int metrics_http_parse(const char *buf, size_t len);

#endif
