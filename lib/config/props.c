/*
 * props.c: see props.h.  Two passes over the input: a UTF-8 check (so every
 * later error can trust the bytes), then logical lines, each split into key
 * and value and unescaped into its own allocation.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compat.h"
#include "props.h"

void props_init(struct props *p)
{
	memset(p, 0, sizeof(*p));
}

void props_fini(struct props *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->names[i]);
		free(p->values[i]);
	}
	free(p->names);
	free(p->values);
	props_init(p);
}

const char *props_get(const struct props *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->names[i], name) == 0)
			return p->values[i];
	return NULL;
}

PRINTF_LIKE(5, 6)
static int perr(char *err, size_t errlen, const char *src, int line,
    const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(err, errlen, "%s:%d: %s", src, line, msg);
	else
		snprintf(err, errlen, "%s: %s", src, msg);
	return -1;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF. */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

static size_t utf8_put(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\f';
}

static int is_eol(char c)
{
	return c == '\n' || c == '\r';
}

/* Reads the 4 hex digits after "\u" at s[0..n); -1 if malformed. */
static int32_t hex4(const char *s, size_t n)
{
	int32_t v = 0;

	if (n < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		int d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/*
 * Decodes the escapes of s[0..n) into a new NUL-terminated string.  The
 * output is never longer than the input (an escape of 6 or 12 characters
 * yields at most 4 bytes).  what is "key" or "value" for errors.
 */
static char *unescape(const char *s, size_t n, const char *what,
    const char *src, int line, char *err, size_t errlen)
{
	char *out = malloc(n + 1), *o = out;
	size_t i = 0;

	if (out == NULL) {
		perr(err, errlen, src, line, "out of memory");
		return NULL;
	}
	while (i < n) {
		char c = s[i++];
		int32_t u, lo;

		if (c != '\\') {
			*o++ = c;
			continue;
		}
		if (i == n)
			break; /* a lone trailing backslash stands for nothing */
		c = s[i++];
		switch (c) {
		case 't': *o++ = '\t'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 'f': *o++ = '\f'; break;
		case 'u':
			if ((u = hex4(s + i, n - i)) < 0) {
				perr(err, errlen, src, line,
				    "malformed \\uXXXX escape in %s (need 4 hex digits)",
				    what);
				goto fail;
			}
			i += 4;
			if (u >= 0xdc00 && u <= 0xdfff) {
				perr(err, errlen, src, line,
				    "unpaired UTF-16 low surrogate \\u%04X in %s",
				    (unsigned)u, what);
				goto fail;
			}
			if (u >= 0xd800 && u <= 0xdbff) {
				if (n - i < 6 || s[i] != '\\' || s[i + 1] != 'u' ||
				    (lo = hex4(s + i + 2, n - i - 2)) < 0xdc00 ||
				    lo > 0xdfff) {
					perr(err, errlen, src, line,
					    "unpaired UTF-16 high surrogate \\u%04X in %s",
					    (unsigned)u, what);
					goto fail;
				}
				i += 6;
				u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (u == 0) {
				perr(err, errlen, src, line,
				    "\\u0000 (NUL) is not allowed in %s", what);
				goto fail;
			}
			o += utf8_put(o, (uint32_t)u);
			break;
		default:
			*o++ = c;
			break;
		}
	}
	*o = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

static int props_set(struct props *p, char *name, char *value)
{
	for (size_t i = 0; i < p->n; i++) {
		if (strcmp(p->names[i], name) == 0) {
			free(name);
			free(p->values[i]);
			p->values[i] = value;
			return 0;
		}
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		char **nn, **nv;

		if (cap > PROPS_MAX_ENTRIES)
			cap = PROPS_MAX_ENTRIES;
		if (p->n == cap)
			return -1;
		if ((nn = realloc(p->names, cap * sizeof(*nn))) == NULL)
			return -1;
		p->names = nn;
		if ((nv = realloc(p->values, cap * sizeof(*nv))) == NULL)
			return -1;
		p->values = nv;
		p->cap = cap;
	}
	p->names[p->n] = name;
	p->values[p->n] = value;
	p->n++;
	return 0;
}

/* Splits one logical line (continuations already joined) and stores it. */
static int parse_logical(struct props *p, const char *l, size_t n,
    const char *src, int line, char *err, size_t errlen)
{
	size_t klen = 0, vstart;
	int has_sep = 0;
	char *name, *value;

	while (klen < n) {
		char c = l[klen];

		if (c == '\\') {
			klen += 2; /* the escaped character belongs to the key */
			continue;
		}
		if (c == '=' || c == ':') {
			has_sep = 1;
			break;
		}
		if (is_ws(c))
			break;
		klen++;
	}
	if (klen > n)
		klen = n;
	vstart = klen < n ? klen + 1 : n;
	while (vstart < n && is_ws(l[vstart]))
		vstart++;
	if (!has_sep && vstart < n && (l[vstart] == '=' || l[vstart] == ':')) {
		vstart++;
		while (vstart < n && is_ws(l[vstart]))
			vstart++;
	}
	if ((name = unescape(l, klen, "key", src, line, err, errlen)) == NULL)
		return -1;
	if ((value = unescape(l + vstart, n - vstart, "value", src, line, err,
	    errlen)) == NULL) {
		free(name);
		return -1;
	}
	if (props_set(p, name, value) < 0) {
		free(name);
		free(value);
		return perr(err, errlen, src, line, "more than %d entries",
		    PROPS_MAX_ENTRIES);
	}
	return 0;
}

int props_parse_buf(struct props *p, const char *buf, size_t len,
    const char *srcname, char *err, size_t errlen)
{
	char *lbuf = NULL;
	size_t i, ln;
	int line = 1, rc = -1;

	if (len > PROPS_MAX_FILE_BYTES)
		return perr(err, errlen, srcname, 0,
		    "larger than %d bytes", PROPS_MAX_FILE_BYTES);
	for (i = 0; i < len;) {
		size_t k;

		if (buf[i] == '\0')
			return perr(err, errlen, srcname, line,
			    "NUL byte in input");
		if ((k = utf8_seq((const unsigned char *)buf + i, len - i)) == 0)
			return perr(err, errlen, srcname, line,
			    "invalid UTF-8 (byte 0x%02x)", (unsigned char)buf[i]);
		if (buf[i] == '\n' || (buf[i] == '\r' &&
		    (i + 1 == len || buf[i + 1] != '\n')))
			line++;
		i += k;
	}
	if ((lbuf = malloc(len + 1)) == NULL)
		return perr(err, errlen, srcname, 0, "out of memory");

	line = 1;
	i = 0;
	while (i < len) {
		int start_line = line;

		while (i < len && is_ws(buf[i]))
			i++;
		if (i < len && (buf[i] == '#' || buf[i] == '!')) {
			while (i < len && !is_eol(buf[i]))
				i++;
		}
		if (i == len || is_eol(buf[i])) {
			/* Blank or comment line: a trailing '\' never continues it. */
			goto newline;
		}
		ln = 0;
		for (;;) {
			size_t seg = ln, bs = 0;

			while (i < len && !is_eol(buf[i]))
				lbuf[ln++] = buf[i++];
			while (bs < ln - seg && lbuf[ln - 1 - bs] == '\\')
				bs++;
			if (bs % 2 == 0)
				break;
			ln--; /* drop the continuation backslash */
			if (i == len)
				break;
			i += (buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n') ? 2 : 1;
			line++;
			while (i < len && is_ws(buf[i]))
				i++;
		}
		if (parse_logical(p, lbuf, ln, srcname, start_line, err, errlen) < 0)
			goto out;
newline:
		if (i < len) {
			i += (buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n') ? 2 : 1;
			line++;
		}
	}
	rc = 0;
out:
	free(lbuf);
	if (rc < 0)
		props_fini(p);
	return rc;
}

int props_parse_file(struct props *p, const char *path, char *err,
    size_t errlen)
{
	FILE *f;
	struct stat st;
	char *buf = NULL;
	size_t n;
	int rc = -1;

	if ((f = fopen(path, "rb")) == NULL)
		return perr(err, errlen, path, 0, "cannot open: %s",
		    strerror(errno));
	if (fstat(fileno(f), &st) < 0) {
		perr(err, errlen, path, 0, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		perr(err, errlen, path, 0, "not a regular file");
		goto out;
	}
	if (st.st_size > PROPS_MAX_FILE_BYTES) {
		perr(err, errlen, path, 0, "larger than %d bytes",
		    PROPS_MAX_FILE_BYTES);
		goto out;
	}
	/* One byte of slack so a file that grew since fstat is noticed. */
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		perr(err, errlen, path, 0, "out of memory");
		goto out;
	}
	n = fread(buf, 1, (size_t)st.st_size + 1, f);
	if (ferror(f)) {
		perr(err, errlen, path, 0, "read error: %s", strerror(errno));
		goto out;
	}
	if (n > (size_t)st.st_size) {
		perr(err, errlen, path, 0, "file changed while being read");
		goto out;
	}
	rc = props_parse_buf(p, buf, n, path, err, errlen);
out:
	free(buf);
	fclose(f);
	return rc;
}
