/* Freestanding string, number parsing and formatting helpers. */
#include "lib/libc.h"

void *memset(void *d, int c, size_t n)
{
	uint8_t *p = d;

	while (n--)
		*p++ = (uint8_t)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	uint8_t *dp = d;
	const uint8_t *sp = s;

	while (n--)
		*dp++ = *sp++;
	return d;
}

void *memmove(void *d, const void *s, size_t n)
{
	uint8_t *dp = d;
	const uint8_t *sp = s;

	if (dp < sp || dp >= sp + n)
		return memcpy(d, s, n);
	while (n--)
		dp[n] = sp[n];
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int strcmp(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (unsigned char)*a - (unsigned char)*b;
		if (!*a)
			break;
	}
	return 0;
}

int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0, base = 10;
	bool any = false;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (;; s++) {
		unsigned int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (v > (UINT64_MAX - d) / base)
			return -1;
		v = v * base + d;
		any = true;
	}
	if (!any)
		return -1;
	switch (*s) {
	case 'k': case 'K': v <<= 10; s++; break;
	case 'm': case 'M': v <<= 20; s++; break;
	case 'g': case 'G': v <<= 30; s++; break;
	default: break;
	}
	if (*s)
		return -1;
	*out = v;
	return 0;
}

struct outbuf {
	char *buf;
	size_t size, len;
};

static void put(struct outbuf *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void put_num(struct outbuf *o, uint64_t v, unsigned int base, bool neg,
		    int width, char pad, bool left, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char tmp[24];
	int n = 0, len;

	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v);
	len = n + neg;
	if (neg && pad == '0')
		put(o, '-');
	if (!left)
		for (; width > len; width--)
			put(o, pad);
	if (neg && pad != '0')
		put(o, '-');
	while (n)
		put(o, tmp[--n]);
	if (left)
		for (; width > len; width--)
			put(o, ' ');
}

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct outbuf o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		int width = 0, lng = 0;
		bool left = false;
		char pad = ' ';

		if (*fmt != '%') {
			put(&o, *fmt);
			continue;
		}
		fmt++;
		if (*fmt == '-') {
			left = true;
			fmt++;
		}
		if (*fmt == '0') {
			pad = '0';
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
		case 'i': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);

			put_num(&o, v < 0 ? -(uint64_t)v : (uint64_t)v, 10,
				v < 0, width, pad, left, false);
			break;
		}
		case 'u':
		case 'x':
		case 'X': {
			uint64_t v = lng ? va_arg(ap, uint64_t)
					 : va_arg(ap, unsigned int);

			put_num(&o, v, *fmt == 'u' ? 10 : 16, false, width, pad,
				left, *fmt == 'X');
			break;
		}
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			put_num(&o, (uintptr_t)va_arg(ap, void *), 16, false,
				width, pad, left, false);
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			int len;

			if (!s)
				s = "(null)";
			len = (int)strlen(s);
			if (!left)
				for (; width > len; width--)
					put(&o, ' ');
			while (*s)
				put(&o, *s++);
			if (left)
				for (; width > len; width--)
					put(&o, ' ');
			break;
		}
		case 'c':
			put(&o, (char)va_arg(ap, int));
			break;
		case '%':
			put(&o, '%');
			break;
		default:
			put(&o, '%');
			if (*fmt)
				put(&o, *fmt);
			else
				fmt--;
			break;
		}
	}
	if (size)
		buf[o.len < size ? o.len : size - 1] = 0;
	return (int)o.len;
}

int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}
