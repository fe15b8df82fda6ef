/* Option-string and number parsing shared by every command. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/kvopt.h"

/* Copies one item up to an unescaped comma, turning ",," into ",". */
static const char *next_item(const char *p, char *out)
{
	while (*p) {
		if (*p == ',') {
			if (p[1] != ',')
				break;
			p++;
		}
		*out++ = *p++;
	}
	*out = '\0';
	return *p == ',' ? p + 1 : p;
}

int kvopt_foreach(const char *arg, int (*fn)(const char *key, const char *value,
					      void *opaque),
		  void *opaque)
{
	char *item = malloc(strlen(arg) + 1);
	const char *p = arg;
	int ret = 0;

	if (!item)
		return -ENOMEM;
	while (*p && !ret) {
		char *eq;

		p = next_item(p, item);
		if (!*item) {
			ret = -EINVAL;
			break;
		}
		eq = strchr(item, '=');
		if (eq)
			*eq = '\0';
		ret = fn(item, eq ? eq + 1 : NULL, opaque);
	}
	free(item);
	return ret;
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return errno == ERANGE ? -ERANGE : -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (ULLONG_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "on", "yes", "true", "1" };
	static const char *const no[] = { "off", "no", "false", "0" };

	if (!s) {
		*out = true;
		return 0;
	}
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}
