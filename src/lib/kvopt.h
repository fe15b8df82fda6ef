/* Parsing of "key=value,key,key=value" option strings and of sizes. */
#ifndef IOVM_LIB_KVOPT_H
#define IOVM_LIB_KVOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Calls fn(key, value, opaque) for each comma-separated item; value is NULL
 * for a bare key. The string is copied, so arg is left untouched. ",," stands
 * for a literal comma inside a value (as in QEMU). Returns the first non-zero
 * return value of fn, or 0. */
int kvopt_foreach(const char *arg, int (*fn)(const char *key, const char *value,
					      void *opaque),
		  void *opaque);

/* "512", "64K", "512M", "2G", "1T" (binary units, optional trailing 'B' or
 * "iB"). Returns 0 or -EINVAL / -ERANGE. */
int parse_size(const char *s, uint64_t *out);

/* Unsigned decimal or 0x-hex integer within [min, max]. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* "on/off/yes/no/true/false/1/0"; a bare key (value NULL) means true. */
int parse_bool(const char *s, bool *out);

#endif
