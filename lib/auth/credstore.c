/* credstore.c: see credstore.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "compat.h"
#include "credstore.h"
#include "ksasl.h"

struct credent {
	char *user;
	struct scram_cred cred;
};

struct credstore {
	struct credent *v;
	size_t n, cap;
};

struct credstore *credstore_new(void)
{
	return calloc(1, sizeof(struct credstore));
}

void credstore_free(struct credstore *cs)
{
	if (cs == NULL)
		return;
	for (size_t i = 0; i < cs->n; i++)
		free(cs->v[i].user);
	if (cs->v != NULL)
		OPENSSL_cleanse(cs->v, cs->cap * sizeof(*cs->v));
	free(cs->v);
	free(cs);
}

int credstore_check_user(const char *name, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (n == 0 || n > 255) {
		snprintf(err, errlen, "user name must be 1..255 bytes");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c <= 0x20 || c == 0x7f) {
			snprintf(err, errlen, "user name must not contain "
			    "whitespace or control characters");
			return -1;
		}
	}
	return 0;
}

static struct credent *find(const struct credstore *cs, const char *user,
    int mech)
{
	for (size_t i = 0; i < cs->n; i++)
		if (cs->v[i].cred.mech == mech && strcmp(cs->v[i].user, user) == 0)
			return &cs->v[i];
	return NULL;
}

int credstore_lookup(const struct credstore *cs, const char *user, int mech,
    struct scram_cred *out)
{
	const struct credent *e = cs != NULL ? find(cs, user, mech) : NULL;

	if (e == NULL)
		return -1;
	*out = e->cred;
	return 0;
}

int credstore_set(struct credstore *cs, const char *user,
    const struct scram_cred *cred, char *err, size_t errlen)
{
	struct credent *e;

	if (credstore_check_user(user, err, errlen) < 0)
		return -1;
	if (scram_hash_len(cred->mech) == 0) {
		snprintf(err, errlen, "%s is not a SCRAM mechanism",
		    ksasl_mech_name(cred->mech));
		return -1;
	}
	if ((e = find(cs, user, cred->mech)) != NULL) {
		e->cred = *cred;
		return 0;
	}
	if (cs->n == cs->cap) {
		size_t nc = cs->cap ? cs->cap * 2 : 8;
		struct credent *nv = calloc(nc, sizeof(*nv));

		if (nv == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (cs->n > 0)
			memcpy(nv, cs->v, cs->n * sizeof(*nv));
		if (cs->v != NULL)
			OPENSSL_cleanse(cs->v, cs->cap * sizeof(*cs->v));
		free(cs->v);
		cs->v = nv;
		cs->cap = nc;
	}
	e = &cs->v[cs->n];
	if ((e->user = strdup(user)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->cred = *cred;
	cs->n++;
	return 0;
}

size_t credstore_delete(struct credstore *cs, const char *user, int mech)
{
	size_t removed = 0, j = 0;

	for (size_t i = 0; i < cs->n; i++) {
		if (strcmp(cs->v[i].user, user) == 0 &&
		    (mech < 0 || cs->v[i].cred.mech == mech)) {
			free(cs->v[i].user);
			removed++;
			continue;
		}
		cs->v[j++] = cs->v[i];
	}
	cs->n = j;
	if (cs->v != NULL)
		OPENSSL_cleanse(cs->v + j, (cs->cap - j) * sizeof(*cs->v));
	return removed;
}

size_t credstore_count(const struct credstore *cs)
{
	return cs->n;
}

void credstore_entry(const struct credstore *cs, size_t i, const char **user,
    int *mech, int *iterations)
{
	*user = cs->v[i].user;
	*mech = cs->v[i].cred.mech;
	*iterations = cs->v[i].cred.iterations;
}

/* "name=B64" field into buf; returns the decoded length or -1. */
static int field_b64(const char *tok, const char *name, uint8_t *buf,
    size_t cap, size_t *len)
{
	size_t nl = strlen(name);
	uint8_t tmp[SCRAM_MAX_SALT + 8]; /* room for the padding's slack */

	if (strncmp(tok, name, nl) != 0 || tok[nl] != '=' ||
	    scram_b64_decode(tmp, sizeof(tmp), len, tok + nl + 1,
	    strlen(tok + nl + 1)) < 0 || *len > cap)
		return -1;
	memcpy(buf, tmp, *len);
	return 0;
}

static int parse_line(struct credstore *cs, char *line, char *why,
    size_t whylen)
{
	char *tok[6], *save = NULL, *p, *end;
	struct scram_cred c;
	size_t n = 0, kl = 0;
	long it;
	int mech;

	for (p = strtok_r(line, " \t", &save); p != NULL;
	    p = strtok_r(NULL, " \t", &save)) {
		if (n == ARRAY_SIZE(tok)) {
			snprintf(why, whylen, "too many fields (expected: USER "
			    "MECHANISM iterations=N salt=B64 stored_key=B64 "
			    "server_key=B64)");
			return -1;
		}
		tok[n++] = p;
	}
	if (n != ARRAY_SIZE(tok)) {
		snprintf(why, whylen, "expected 6 fields: USER MECHANISM "
		    "iterations=N salt=B64 stored_key=B64 server_key=B64");
		return -1;
	}
	if (credstore_check_user(tok[0], why, whylen) < 0)
		return -1;
	mech = ksasl_mech_parse(tok[1]);
	if (mech < 0 || scram_hash_len(mech) == 0) {
		snprintf(why, whylen, "mechanism must be SCRAM-SHA-256 or "
		    "SCRAM-SHA-512");
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.mech = mech;
	if (strncmp(tok[2], "iterations=", 11) != 0) {
		snprintf(why, whylen, "third field must be iterations=N");
		return -1;
	}
	errno = 0;
	it = strtol(tok[2] + 11, &end, 10);
	if (errno != 0 || *end != '\0' || end == tok[2] + 11 ||
	    it < SCRAM_MIN_ITER || it > SCRAM_MAX_ITER) {
		snprintf(why, whylen, "iterations must be %d..%d", SCRAM_MIN_ITER,
		    SCRAM_MAX_ITER);
		return -1;
	}
	c.iterations = (int)it;
	if (field_b64(tok[3], "salt", c.salt, sizeof(c.salt), &c.salt_len) < 0 ||
	    c.salt_len == 0) {
		snprintf(why, whylen, "fourth field must be salt=BASE64 of 1..%d "
		    "bytes", SCRAM_MAX_SALT);
		return -1;
	}
	if (field_b64(tok[4], "stored_key", c.stored_key, sizeof(c.stored_key),
	    &kl) < 0 || kl != scram_hash_len(mech)) {
		snprintf(why, whylen, "fifth field must be stored_key=BASE64 of "
		    "%zu bytes for %s", scram_hash_len(mech), tok[1]);
		return -1;
	}
	if (field_b64(tok[5], "server_key", c.server_key, sizeof(c.server_key),
	    &kl) < 0 || kl != scram_hash_len(mech)) {
		snprintf(why, whylen, "sixth field must be server_key=BASE64 of "
		    "%zu bytes for %s", scram_hash_len(mech), tok[1]);
		return -1;
	}
	if (find(cs, tok[0], mech) != NULL) {
		snprintf(why, whylen, "user '%s' has a second %s line", tok[0],
		    tok[1]);
		return -1;
	}
	return credstore_set(cs, tok[0], &c, why, whylen);
}

struct credstore *credstore_load(const char *path, int missing_ok, char *err,
    size_t errlen)
{
	struct credstore *cs = NULL;
	struct stat st;
	char *buf = NULL, *line, *save = NULL;
	ssize_t got;
	size_t len = 0;
	int fd, lineno = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT && missing_ok)
			return credstore_new();
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen, "%s: mode %04o lets group or others access "
		    "the credentials; chmod 600 it", path,
		    (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if (st.st_size > CREDSTORE_MAX_FILE_BYTES) {
		snprintf(err, errlen, "%s: %lld bytes is larger than %d", path,
		    (long long)st.st_size, CREDSTORE_MAX_FILE_BYTES);
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	while (len < (size_t)st.st_size &&
	    (got = read(fd, buf + len, (size_t)st.st_size - len)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "%s: read: %s", path, strerror(errno));
			goto fail;
		}
		len += (size_t)got;
	}
	buf[len] = '\0';
	if (memchr(buf, '\0', len) != NULL) {
		snprintf(err, errlen, "%s: contains a NUL byte", path);
		goto fail;
	}
	cs = credstore_new();
	if (cs == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* strtok_r skips empty lines; count them with a manual split. */
	for (line = buf; line != NULL; line = save) {
		char why[256];
		char *nl = strchr(line, '\n'), *q;

		save = nl != NULL ? nl + 1 : NULL;
		if (nl != NULL)
			*nl = '\0';
		lineno++;
		if ((q = strchr(line, '\r')) != NULL && q[1] == '\0')
			*q = '\0';
		q = line + strspn(line, " \t");
		if (*q == '\0' || *q == '#')
			continue;
		if (parse_line(cs, q, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			goto fail;
		}
	}
	OPENSSL_cleanse(buf, len);
	free(buf);
	close(fd);
	return cs;
fail:
	if (buf != NULL) {
		OPENSSL_cleanse(buf, len);
		free(buf);
	}
	credstore_free(cs);
	close(fd);
	return NULL;
}

int credstore_save(const struct credstore *cs, const char *path, char *err,
    size_t errlen)
{
	char tmp[4096];
	FILE *f = NULL;
	int fd, rc = -1;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path,
	    (long)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		return -1;
	}
	f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fprintf(f, "# mirrord SCRAM credentials: salted keys, no passwords.\n"
	    "# Managed with mirrord --add-user/--delete-user; see mirrord(8).\n");
	for (size_t i = 0; i < cs->n; i++) {
		const struct credent *e = &cs->v[i];
		size_t hl = scram_hash_len(e->cred.mech);
		char salt[4 * SCRAM_MAX_SALT / 3 + 8];
		char sk[4 * SCRAM_MAX_HASH / 3 + 8], vk[4 * SCRAM_MAX_HASH / 3 + 8];

		scram_b64_encode(salt, sizeof(salt), e->cred.salt, e->cred.salt_len);
		scram_b64_encode(sk, sizeof(sk), e->cred.stored_key, hl);
		scram_b64_encode(vk, sizeof(vk), e->cred.server_key, hl);
		fprintf(f, "%s %s iterations=%d salt=%s stored_key=%s "
		    "server_key=%s\n", e->user, ksasl_mech_name(e->cred.mech),
		    e->cred.iterations, salt, sk, vk);
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		snprintf(err, errlen, "%s: write: %s", tmp, strerror(errno));
		goto out;
	}
	if (fclose(f) != 0) {
		f = NULL;
		snprintf(err, errlen, "%s: close: %s", tmp, strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "%s: cannot rename to %s: %s", tmp, path,
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f != NULL)
		fclose(f);
	if (rc < 0)
		unlink(tmp);
	return rc;
}
