/*
 * cfgprov.c: see cfgprov.h.  A value is scanned for "${word:"; each such
 * reference is parsed into a struct ref, checked against the caller's
 * policy, and (cfgprov_resolve) replaced by what its provider reads.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfgprov.h"
#include "compat.h"
#include "props.h"
#include "safefile.h"

#define MAX_PATH 4096
#define MAX_KEY 1024

static const char *const kind_names[] = {
#define X(e, s) [CFGPROV_##e] = s,
	CFGPROV_KINDS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(kind_names) == CFGPROV_COUNT, "provider names");

const char *cfgprov_kind_name(int kind)
{
	return kind >= 0 && kind < CFGPROV_COUNT ? kind_names[kind] : "?";
}

/* One reference: value[start, end) is "${...}". */
struct ref {
	size_t start, end;
	int kind;
	char path[MAX_PATH];  /* file: the file; dir: the directory */
	char key[MAX_KEY];    /* file: the key; dir/credential: the file name;
	                       * env: the variable */
};

static int word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

/*
 * Finds the next "${word:" at or after from.  Returns 1 with *start at the
 * '$' and *end past the closing '}' (or 0 in *end when there is none), 0
 * when there is no reference left.
 */
static int next_ref(const char *v, size_t from, size_t *start, size_t *end)
{
	const char *p = v + from, *q, *close;

	while ((p = strstr(p, "${")) != NULL) {
		for (q = p + 2; word_char(*q); q++)
			;
		if (q > p + 2 && *q == ':') {
			close = strchr(q, '}');
			*start = (size_t)(p - v);
			*end = close != NULL ? (size_t)(close - v) + 1 : 0;
			return 1;
		}
		p += 2;
	}
	return 0;
}

int cfgprov_has_ref(const char *value)
{
	size_t s, e;

	return value != NULL && next_ref(value, 0, &s, &e);
}

/* A file name of its own: no '/', not "." or "..". */
static int plain_name(const char *s)
{
	return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
	    strcmp(s, "..") != 0;
}

static int env_name(const char *s)
{
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (; *s != '\0'; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return 0;
	return 1;
}

/* How a reference of each provider is written, for messages. */
static const char *const forms[] = {
	[CFGPROV_FILE] = "${file:/path/to/file.properties:key}",
	[CFGPROV_DIR] = "${dir:/path/to/dir:filename}",
	[CFGPROV_ENV] = "${env:VARIABLE}",
	[CFGPROV_CREDENTIAL] = "${credential:NAME}",
};
_Static_assert(ARRAY_SIZE(forms) == CFGPROV_COUNT, "provider forms");

/* Parses the reference at v[start, end) into r.  rt is its text for
 * messages.  Errors name the property and the reference. */
static int parse_ref(const char *name, const char *v, size_t start,
    size_t end, struct ref *r, const char *rt, char *err, size_t errlen)
{
	const char *colon, *body, *sep;
	size_t plen, blen;

	memset(r, 0, sizeof(*r));
	r->start = start;
	r->end = end;
	r->kind = -1;
	colon = strchr(v + start + 2, ':');
	plen = (size_t)(colon - (v + start + 2));
	for (int k = 0; k < CFGPROV_COUNT; k++)
		if (strlen(kind_names[k]) == plen &&
		    strncmp(kind_names[k], v + start + 2, plen) == 0)
			r->kind = k;
	if (r->kind < 0) {
		seterr(err, errlen, "%s: %s: unknown config provider '%.*s' "
		    "(known: file, dir, env, credential)", name, rt, (int)MIN(plen, 64),
		    v + start + 2);
		return -1;
	}
	body = colon + 1;
	blen = (size_t)(v + end - 1 - body);
	switch (r->kind) {
	case CFGPROV_FILE:
	case CFGPROV_DIR:
		sep = memchr(body, ':', blen);
		if (sep == NULL || sep == body || sep + 1 == v + end - 1) {
			seterr(err, errlen, "%s: %s: expected %s", name, rt,
			    forms[r->kind]);
			return -1;
		}
		if ((size_t)(sep - body) >= sizeof(r->path) ||
		    (size_t)(v + end - 1 - (sep + 1)) >= sizeof(r->key)) {
			seterr(err, errlen, "%s: %s: the path or the key is too "
			    "long", name, rt);
			return -1;
		}
		memcpy(r->path, body, (size_t)(sep - body));
		memcpy(r->key, sep + 1, (size_t)(v + end - 1 - (sep + 1)));
		if (r->path[0] != '/') {
			seterr(err, errlen, "%s: %s: the path must be absolute", name,
			    rt);
			return -1;
		}
		if (r->kind == CFGPROV_DIR && !plain_name(r->key)) {
			seterr(err, errlen, "%s: %s: '%s' is not a file name of "
			    "its own (no '/', not . or ..)", name, rt, r->key);
			return -1;
		}
		return 0;
	case CFGPROV_ENV:
	case CFGPROV_CREDENTIAL:
		if (blen == 0 || blen >= sizeof(r->key)) {
			seterr(err, errlen, "%s: %s: expected %s", name, rt,
			    forms[r->kind]);
			return -1;
		}
		memcpy(r->key, body, blen);
		if (r->kind == CFGPROV_ENV && !env_name(r->key)) {
			seterr(err, errlen, "%s: %s: '%s' is not an environment "
			    "variable name", name, rt, r->key);
			return -1;
		}
		if (r->kind == CFGPROV_CREDENTIAL && !plain_name(r->key)) {
			seterr(err, errlen, "%s: %s: '%s' is not a credential "
			    "name (no '/', not . or ..)", name, rt, r->key);
			return -1;
		}
		return 0;
	}
	return -1;
}

/* The reference's text, cut for messages. */
static void ref_text(const char *v, size_t start, size_t end, char *buf,
    size_t len)
{
	size_t n = end > start ? end - start : strlen(v + start);

	if (n > 200)
		snprintf(buf, len, "%.200s...", v + start);
	else
		snprintf(buf, len, "%.*s", (int)n, v + start);
}

static const char *cred_dir(const struct cfgprov_opts *o)
{
	const char *d = o->credentials_dir;

	if (d == NULL)
		d = getenv("CREDENTIALS_DIRECTORY");
	return d != NULL && d[0] != '\0' ? d : NULL;
}

/* The file a dir or credential reference names, into buf. */
static int entry_path(const char *name, const struct ref *r, const char *rt,
    const struct cfgprov_opts *o, char *buf, size_t len, char *err,
    size_t errlen)
{
	const char *dir = r->path;
	size_t dl;

	if (r->kind == CFGPROV_CREDENTIAL && (dir = cred_dir(o)) == NULL) {
		seterr(err, errlen, "%s: %s: $CREDENTIALS_DIRECTORY is not set "
		    "(mirrord was not started by systemd with credentials; "
		    "give one with LoadCredential=%s:/path/to/file in the unit)",
		    name, rt, r->key);
		return -1;
	}
	for (dl = strlen(dir); dl > 1 && dir[dl - 1] == '/'; dl--)
		;
	if ((size_t)snprintf(buf, len, "%.*s/%s", (int)dl, dir, r->key) >= len) {
		seterr(err, errlen, "%s: %s: the path is too long", name, rt);
		return -1;
	}
	return 0;
}

/* Reads a file the operator named: a regular file of at most the cap. */
static int read_trusted(const char *path, char **out, size_t *outlen,
    char *err, size_t errlen)
{
	struct stat sb;
	char *buf = NULL;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		seterr(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if (sb.st_size > (off_t)CFGPROV_MAX_VALUE) {
		seterr(err, errlen, "%s: larger than %u bytes", path,
		    CFGPROV_MAX_VALUE);
		goto fail;
	}
	if ((buf = malloc((size_t)sb.st_size + 1)) == NULL) {
		seterr(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	while (len < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)sb.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			seterr(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break; /* shrank meanwhile: take what is there */
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	*out = buf;
	*outlen = len;
	return 0;
fail:
	if (buf != NULL) {
		memset(buf, 0, len);
		free(buf);
	}
	close(fd);
	return -1;
}

static int read_file(const struct cfgprov_opts *o, int kind, const char *path,
    char **out, size_t *outlen, char *err, size_t errlen)
{
	if (o->read != NULL && kind != CFGPROV_CREDENTIAL)
		return o->read(o->read_arg, path, out, outlen, err, errlen);
	/* Credentials come from the service manager, never from a name a
	 * client chose: they are read as the operator's. */
	if (o->untrusted && kind != CFGPROV_CREDENTIAL)
		return safefile_read(path, o->dirs, CFGPROV_MAX_VALUE, out,
		    outlen, err, errlen);
	return read_trusted(path, out, outlen, err, errlen);
}

static void wipe_free(char *p, size_t n)
{
	if (p == NULL)
		return;
	memset(p, 0, n);
	free(p);
}

/* Whether the thing a reference names is there, short of reading it. */
static int look_ref(const char *name, const struct ref *r, const char *rt,
    const struct cfgprov_opts *o, char *err, size_t errlen)
{
	char path[MAX_PATH + MAX_KEY + 2], why[512];
	const char *p = path;
	struct stat sb;

	switch (r->kind) {
	case CFGPROV_ENV:
		if (getenv(r->key) == NULL) {
			seterr(err, errlen, "%s: %s: environment variable %s is "
			    "not set", name, rt, r->key);
			return -1;
		}
		return 0;
	case CFGPROV_FILE:
		p = r->path;
		break;
	default:
		if (entry_path(name, r, rt, o, path, sizeof(path), err,
		    errlen) != 0)
			return -1;
	}
	if (o->untrusted && r->kind != CFGPROV_CREDENTIAL) {
		if (safefile_check(p, o->dirs, why, sizeof(why)) != 0) {
			seterr(err, errlen, "%s: %s: %s", name, rt, why);
			return -1;
		}
		return 0;
	}
	if (stat(p, &sb) != 0) {
		seterr(err, errlen, "%s: %s: %s: %s", name, rt, p,
		    strerror(errno));
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		seterr(err, errlen, "%s: %s: %s: not a regular file", name, rt, p);
		return -1;
	}
	return 0;
}

/* What one reference stands for: *out malloc'd, *outlen its length. */
static int fetch_ref(const char *name, const struct ref *r, const char *rt,
    const struct cfgprov_opts *o, char **out, size_t *outlen, char *err,
    size_t errlen)
{
	char path[MAX_PATH + MAX_KEY + 2], why[512];
	char *buf = NULL;
	size_t len = 0;
	struct props pr;
	const char *v;

	*out = NULL;
	switch (r->kind) {
	case CFGPROV_ENV:
		if ((v = getenv(r->key)) == NULL) {
			seterr(err, errlen, "%s: %s: environment variable %s is "
			    "not set", name, rt, r->key);
			return -1;
		}
		if ((*out = strdup(v)) == NULL)
			goto oom;
		*outlen = strlen(v);
		return 0;
	case CFGPROV_FILE:
		if (read_file(o, r->kind, r->path, &buf, &len, why,
		    sizeof(why)) != 0) {
			seterr(err, errlen, "%s: %s: %s", name, rt, why);
			return -1;
		}
		props_init(&pr);
		if (props_parse_buf(&pr, buf, len, r->path, why, sizeof(why)) != 0) {
			wipe_free(buf, len);
			seterr(err, errlen, "%s: %s: %s", name, rt, why);
			return -1;
		}
		wipe_free(buf, len);
		if ((v = props_get(&pr, r->key)) == NULL) {
			props_fini(&pr);
			seterr(err, errlen, "%s: %s: key '%s' not found in %s", name,
			    rt, r->key, r->path);
			return -1;
		}
		*out = strdup(v);
		*outlen = strlen(v);
		/* props_fini frees without wiping; wipe the values first. */
		for (size_t i = 0; i < pr.n; i++)
			memset(pr.values[i], 0, strlen(pr.values[i]));
		props_fini(&pr);
		if (*out == NULL)
			goto oom;
		return 0;
	default: /* dir, credential: the whole file */
		if (entry_path(name, r, rt, o, path, sizeof(path), err,
		    errlen) != 0)
			return -1;
		if (read_file(o, r->kind, path, &buf, &len, why,
		    sizeof(why)) != 0) {
			seterr(err, errlen, "%s: %s: %s", name, rt, why);
			return -1;
		}
		if (memchr(buf, '\0', len) != NULL) {
			wipe_free(buf, len);
			seterr(err, errlen, "%s: %s: %s holds a NUL byte", name, rt,
			    path);
			return -1;
		}
		while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
			buf[--len] = '\0';
		*out = buf;
		*outlen = len;
		return 0;
	}
oom:
	seterr(err, errlen, "%s: %s: out of memory", name, rt);
	return -1;
}

/* Walks the references of value; for each, checks form and policy, then
 * look_ref (look) or appends its content to *acc (acc != NULL). */
static int walk(const char *name, const char *value,
    const struct cfgprov_opts *o, int look, char **acc, size_t *acclen,
    void (*files)(void *arg, const char *path), void *files_arg,
    char *err, size_t errlen)
{
	size_t from = 0, start, end;
	struct ref *r = malloc(sizeof(*r));
	char rt[256];
	int rc = -1;

	if (r == NULL) {
		seterr(err, errlen, "%s: out of memory", name);
		return -1;
	}
	while (next_ref(value, from, &start, &end)) {
		ref_text(value, start, end, rt, sizeof(rt));
		if (end == 0) {
			seterr(err, errlen, "%s: %s: the reference has no "
			    "closing '}'", name, rt);
			goto out;
		}
		if (parse_ref(name, value, start, end, r, rt, err, errlen) != 0)
			goto out;
		if (!(o->allowed & (1u << r->kind))) {
			seterr(err, errlen, "%s: %s: config provider %s is not "
			    "allowed here%s%s", name, rt, kind_names[r->kind],
			    o->refused_hint != NULL ? " " : "",
			    o->refused_hint != NULL ? o->refused_hint : "");
			goto out;
		}
		if (look && look_ref(name, r, rt, o, err, errlen) != 0)
			goto out;
		if (files != NULL && r->kind == CFGPROV_FILE) {
			files(files_arg, r->path);
		} else if (files != NULL && r->kind == CFGPROV_DIR) {
			char path[MAX_PATH + MAX_KEY + 2];

			if (entry_path(name, r, rt, o, path, sizeof(path), err,
			    errlen) != 0)
				goto out;
			files(files_arg, path);
		}
		if (acc != NULL) {
			char *part, *grown;
			size_t plen;

			if (fetch_ref(name, r, rt, o, &part, &plen, err,
			    errlen) != 0)
				goto out;
			/* The text before the reference, then its content. */
			if (*acclen + (start - from) + plen > CFGPROV_MAX_VALUE ||
			    (grown = malloc(*acclen + (start - from) + plen + 1)) == NULL) {
				wipe_free(part, plen);
				seterr(err, errlen, "%s: %s: the resolved value is "
				    "too long or out of memory", name, rt);
				goto out;
			}
			memcpy(grown, *acc, *acclen);
			memcpy(grown + *acclen, value + from, start - from);
			memcpy(grown + *acclen + (start - from), part, plen);
			wipe_free(*acc, *acclen);
			wipe_free(part, plen);
			*acclen += (start - from) + plen;
			grown[*acclen] = '\0';
			*acc = grown;
		}
		from = end;
	}
	if (acc != NULL) {
		size_t rest = strlen(value + from);
		char *grown = malloc(*acclen + rest + 1);

		if (grown == NULL) {
			seterr(err, errlen, "%s: out of memory", name);
			goto out;
		}
		memcpy(grown, *acc, *acclen);
		memcpy(grown + *acclen, value + from, rest + 1);
		wipe_free(*acc, *acclen);
		*acclen += rest;
		*acc = grown;
	}
	rc = 0;
out:
	free(r);
	return rc;
}

int cfgprov_check(const char *name, const char *value,
    const struct cfgprov_opts *o, int look, char *err, size_t errlen)
{
	if (value == NULL)
		return 0;
	return walk(name, value, o, look, NULL, NULL, NULL, NULL, err, errlen);
}

int cfgprov_files(const char *name, const char *value,
    const struct cfgprov_opts *o, void (*fn)(void *arg, const char *path),
    void *arg, char *err, size_t errlen)
{
	if (value == NULL)
		return 0;
	return walk(name, value, o, 0, NULL, NULL, fn, arg, err, errlen);
}

int cfgprov_resolve(const char *name, const char *value,
    const struct cfgprov_opts *o, char **out, char *err, size_t errlen)
{
	char *acc = calloc(1, 1);
	size_t acclen = 0;

	*out = NULL;
	if (acc == NULL) {
		seterr(err, errlen, "%s: out of memory", name);
		return -1;
	}
	if (walk(name, value, o, 0, &acc, &acclen, NULL, NULL, err,
	    errlen) != 0) {
		wipe_free(acc, acclen);
		return -1;
	}
	*out = acc;
	return 0;
}
