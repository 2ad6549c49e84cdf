/*
 * secretbox.c: see secretbox.h.  AES-256-GCM through OpenSSL's EVP
 * interface; base64 through EVP_EncodeBlock/EVP_DecodeBlock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "compat.h"
#include "secretbox.h"

#define ID_LEN 4
#define NONCE_LEN 12
#define TAG_LEN 16
#define KEY_FILE_MAX 4096
#define ID_LABEL "mirrord secretbox key id"

struct secretbox {
	uint8_t key[SECRETBOX_KEY_LEN];
	uint8_t id[ID_LEN];
	char idhex[2 * ID_LEN + 1];
};

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 0xf];
	}
	out[2 * n] = '\0';
}

struct secretbox *secretbox_new(const uint8_t key[SECRETBOX_KEY_LEN])
{
	struct secretbox *b = calloc(1, sizeof(*b));
	uint8_t md[SHA256_DIGEST_LENGTH];
	EVP_MD_CTX *ctx;
	unsigned int mdlen = 0;

	if (b == NULL)
		return NULL;
	memcpy(b->key, key, SECRETBOX_KEY_LEN);
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, ID_LABEL, strlen(ID_LABEL)) != 1 ||
	    EVP_DigestUpdate(ctx, key, SECRETBOX_KEY_LEN) != 1 ||
	    EVP_DigestFinal_ex(ctx, md, &mdlen) != 1) {
		EVP_MD_CTX_free(ctx);
		secretbox_free(b);
		return NULL;
	}
	EVP_MD_CTX_free(ctx);
	memcpy(b->id, md, ID_LEN);
	hex(b->id, ID_LEN, b->idhex);
	return b;
}

void secretbox_free(struct secretbox *b)
{
	if (b == NULL)
		return;
	OPENSSL_cleanse(b, sizeof(*b));
	free(b);
}

const char *secretbox_key_id(const struct secretbox *b)
{
	return b->idhex;
}

void secretbox_wipe_free(char *s)
{
	if (s == NULL)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

/* ---- base64 ----------------------------------------------------------- */

/* Decodes standard base64 (with padding) of exactly n chars into out
 * (room for 3 * n / 4 bytes).  Returns the length, or -1. */
static int b64_decode(const char *s, size_t n, uint8_t *out)
{
	int len, pad = 0;

	if (n == 0 || n % 4 != 0 || n > INT_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '=') {
			/* Only at the end, at most two. */
			if (i < n - 2)
				return -1;
			pad++;
		} else if (pad > 0 || !((c >= 'A' && c <= 'Z') ||
		    (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '+' || c == '/')) {
			return -1;
		}
	}
	len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	if (len < 0)
		return -1;
	return len - pad;
}

static char *b64_encode(const uint8_t *p, size_t n)
{
	char *out;

	if (n > (size_t)INT_MAX / 2)
		return NULL;
	/* One spare byte: a key file adds a newline. */
	out = malloc(4 * ((n + 2) / 3) + 2);
	if (out != NULL)
		EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

/* ---- key files --------------------------------------------------------- */

int secretbox_load_key(const char *path, uint8_t key[SECRETBOX_KEY_LEN],
    char *err, size_t errlen)
{
	uint8_t buf[KEY_FILE_MAX + 1], dec[KEY_FILE_MAX];
	struct stat sb;
	ssize_t n;
	size_t len = 0, a, z;
	int fd, rc = -1, e;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		e = errno;
		seterr(err, errlen, "%s: cannot open the key file: %s", path,
		    strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		seterr(err, errlen, "%s: the key file is not a regular file",
		    path);
		goto out;
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			seterr(err, errlen, "%s: cannot read the key file: %s",
			    path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > KEY_FILE_MAX) {
		seterr(err, errlen, "%s: the key file is larger than %d bytes: "
		    "it is not a key", path, KEY_FILE_MAX);
		goto out;
	}
	if (len == SECRETBOX_KEY_LEN) {
		/* 32 raw bytes, e.g. head -c32 /dev/urandom. */
		memcpy(key, buf, SECRETBOX_KEY_LEN);
		rc = 0;
		goto out;
	}
	for (a = 0; a < len && (buf[a] == ' ' || buf[a] == '\t' ||
	    buf[a] == '\n' || buf[a] == '\r'); a++)
		;
	for (z = len; z > a && (buf[z - 1] == ' ' || buf[z - 1] == '\t' ||
	    buf[z - 1] == '\n' || buf[z - 1] == '\r'); z--)
		;
	if (b64_decode((const char *)buf + a, z - a, dec) != SECRETBOX_KEY_LEN) {
		seterr(err, errlen, "%s: the key file must hold a 32-byte key, "
		    "in base64 (openssl rand -base64 32) or raw", path);
		goto out;
	}
	memcpy(key, dec, SECRETBOX_KEY_LEN);
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	OPENSSL_cleanse(dec, sizeof(dec));
	close(fd);
	if (rc != 0)
		errno = EINVAL;
	return rc;
}

/* fsync of the directory holding path, so a new file's name is durable. */
static int fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, rc;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int secretbox_create_key_file(const char *path,
    uint8_t key[SECRETBOX_KEY_LEN], char *err, size_t errlen)
{
	char *text = NULL;
	size_t len, off = 0;
	int fd;

	if (RAND_bytes(key, SECRETBOX_KEY_LEN) != 1) {
		seterr(err, errlen, "%s: no random bytes for a new key", path);
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (fd < 0) {
		seterr(err, errlen, "%s: cannot create the key file: %s", path,
		    strerror(errno));
		return -1;
	}
	if ((text = b64_encode(key, SECRETBOX_KEY_LEN)) == NULL) {
		seterr(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	len = strlen(text);
	text[len++] = '\n'; /* b64_encode left room for it */
	text[len] = '\0';
	/* The umask may only have narrowed 0600; make it exactly that. */
	if (fchmod(fd, 0600) != 0)
		goto syserr;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto syserr;
		off += (size_t)n;
	}
	if (fsync(fd) != 0)
		goto syserr;
	OPENSSL_cleanse(text, len);
	free(text);
	close(fd);
	if (fsync_parent(path) != 0) {
		seterr(err, errlen, "%s: cannot fsync its directory: %s", path,
		    strerror(errno));
		return -1;
	}
	return 0;
syserr:
	seterr(err, errlen, "%s: cannot write the key file: %s", path,
	    strerror(errno));
fail:
	if (text != NULL) {
		OPENSSL_cleanse(text, strlen(text));
		free(text);
	}
	close(fd);
	unlink(path);
	OPENSSL_cleanse(key, SECRETBOX_KEY_LEN);
	return -1;
}

/* ---- sealing ------------------------------------------------------------ */

int secretbox_is_sealed(const char *value)
{
	return value != NULL && strncmp(value, SECRETBOX_PREFIX,
	    strlen(SECRETBOX_PREFIX)) == 0;
}

/* The decoded body of a sealed value into *raw (malloc'd); its length. */
static int sealed_body(const char *sealed, uint8_t **raw, size_t *rawlen)
{
	const char *s = sealed + strlen(SECRETBOX_PREFIX);
	size_t n = strlen(s);
	uint8_t *p;
	int len;

	if (!secretbox_is_sealed(sealed) || n > 4 * (size_t)SECRETBOX_MAX_PLAIN)
		return -1;
	if ((p = malloc(3 * (n / 4) + 3)) == NULL)
		return -1;
	len = b64_decode(s, n, p);
	if (len < ID_LEN + NONCE_LEN + TAG_LEN) {
		free(p);
		return -1;
	}
	*raw = p;
	*rawlen = (size_t)len;
	return 0;
}

int secretbox_sealed_key_id(const char *sealed, char id[9])
{
	uint8_t *raw;
	size_t len;

	if (sealed_body(sealed, &raw, &len) != 0)
		return -1;
	hex(raw, ID_LEN, id);
	free(raw);
	return 0;
}

int secretbox_seal(const struct secretbox *b, const char *plain,
    const void *aad, size_t aadlen, char **out, char *err, size_t errlen)
{
	size_t n = strlen(plain);
	uint8_t *raw = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	int len, rc = -1;

	*out = NULL;
	if (n > SECRETBOX_MAX_PLAIN || aadlen > INT_MAX) {
		seterr(err, errlen, "value too long to encrypt (%zu bytes, at "
		    "most %u)", n, SECRETBOX_MAX_PLAIN);
		return -1;
	}
	raw = malloc(ID_LEN + NONCE_LEN + n + TAG_LEN);
	ctx = EVP_CIPHER_CTX_new();
	if (raw == NULL || ctx == NULL) {
		seterr(err, errlen, "out of memory");
		goto out;
	}
	memcpy(raw, b->id, ID_LEN);
	if (RAND_bytes(raw + ID_LEN, NONCE_LEN) != 1) {
		seterr(err, errlen, "no random bytes for a nonce");
		goto out;
	}
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN,
	    NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, b->key, raw + ID_LEN) != 1 ||
	    (aadlen > 0 && EVP_EncryptUpdate(ctx, NULL, &len, aad,
	    (int)aadlen) != 1) ||
	    EVP_EncryptUpdate(ctx, raw + ID_LEN + NONCE_LEN, &len,
	    (const uint8_t *)plain, (int)n) != 1 ||
	    EVP_EncryptFinal_ex(ctx, raw + ID_LEN + NONCE_LEN + len, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN,
	    raw + ID_LEN + NONCE_LEN + n) != 1) {
		seterr(err, errlen, "AES-256-GCM encryption failed");
		goto out;
	}
	{
		char *body = b64_encode(raw, ID_LEN + NONCE_LEN + n + TAG_LEN);
		size_t pl = strlen(SECRETBOX_PREFIX);

		if (body == NULL || (*out = malloc(pl + strlen(body) + 1)) == NULL) {
			free(body);
			seterr(err, errlen, "out of memory");
			goto out;
		}
		memcpy(*out, SECRETBOX_PREFIX, pl);
		memcpy(*out + pl, body, strlen(body) + 1);
		free(body);
	}
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	if (raw != NULL) {
		OPENSSL_cleanse(raw, ID_LEN + NONCE_LEN + n + TAG_LEN);
		free(raw);
	}
	return rc;
}

int secretbox_open(const struct secretbox *b, const char *sealed,
    const void *aad, size_t aadlen, char **out, char *err, size_t errlen)
{
	EVP_CIPHER_CTX *ctx = NULL;
	uint8_t *raw = NULL, *ct, *tag;
	char *plain = NULL, id[9];
	size_t rawlen, n;
	int len, rc = -1;

	*out = NULL;
	if (sealed_body(sealed, &raw, &rawlen) != 0) {
		seterr(err, errlen, "not a well-formed encrypted value (%s...)",
		    SECRETBOX_PREFIX);
		return -1;
	}
	if (memcmp(raw, b->id, ID_LEN) != 0) {
		hex(raw, ID_LEN, id);
		seterr(err, errlen, "encrypted under key id %s, but the key "
		    "file holds key id %s", id, b->idhex);
		goto out;
	}
	n = rawlen - ID_LEN - NONCE_LEN - TAG_LEN;
	ct = raw + ID_LEN + NONCE_LEN;
	tag = ct + n;
	ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL || aadlen > INT_MAX ||
	    (plain = malloc(n + 1)) == NULL) {
		seterr(err, errlen, "out of memory");
		goto out;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN,
	    NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, b->key, raw + ID_LEN) != 1 ||
	    (aadlen > 0 && EVP_DecryptUpdate(ctx, NULL, &len, aad,
	    (int)aadlen) != 1) ||
	    EVP_DecryptUpdate(ctx, (uint8_t *)plain, &len, ct, (int)n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1 ||
	    EVP_DecryptFinal_ex(ctx, (uint8_t *)plain + len, &len) != 1) {
		seterr(err, errlen, "the encrypted value does not authenticate "
		    "(damaged, or stored for another mirror or key)");
		goto out;
	}
	plain[n] = '\0';
	if (memchr(plain, '\0', n) != NULL) {
		seterr(err, errlen, "the decrypted value holds a NUL byte");
		goto out;
	}
	*out = plain;
	plain = NULL;
	rc = 0;
out:
	EVP_CIPHER_CTX_free(ctx);
	if (plain != NULL) {
		OPENSSL_cleanse(plain, n + 1);
		free(plain);
	}
	if (raw != NULL) {
		OPENSSL_cleanse(raw, rawlen);
		free(raw);
	}
	return rc;
}
