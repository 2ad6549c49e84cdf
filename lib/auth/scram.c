/*
 * scram.c: see scram.h.  RFC 5802 section 3, from the server's side:
 *
 *   StoredKey       = H(HMAC(SaltedPassword, "Client Key"))
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")
 *   ClientSignature = HMAC(StoredKey, AuthMessage)
 *   ClientKey       = ClientProof XOR ClientSignature; H(ClientKey) must be StoredKey
 *   ServerSignature = HMAC(ServerKey, AuthMessage), sent as "v="
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "compat.h"
#include "ksasl.h"
#include "scram.h"

#define SCRAM_NONCE_BYTES 24
#define SCRAM_MAX_USER 255

size_t scram_hash_len(int mech)
{
	return mech == KSASL_SCRAM_SHA_256 ? 32 : mech == KSASL_SCRAM_SHA_512 ? 64 : 0;
}

static const EVP_MD *scram_md(int mech)
{
	return mech == KSASL_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
}

int scram_b64_encode(char *dst, size_t dstlen, const uint8_t *src, size_t len)
{
	if (dstlen < 4 * ((len + 2) / 3) + 1)
		return -1;
	EVP_EncodeBlock((unsigned char *)dst, src, (int)len);
	return 0;
}

int scram_b64_decode(uint8_t *dst, size_t dstlen, size_t *outlen,
    const char *src, size_t len)
{
	size_t pad = 0;
	int n;

	if (len == 0 || len % 4 != 0 || len / 4 * 3 > dstlen)
		return -1;
	if (src[len - 1] == '=')
		pad++;
	if (src[len - 2] == '=')
		pad++;
	for (size_t i = 0; i < len - pad; i++) {
		char ch = src[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '+' || ch == '/'))
			return -1;
	}
	n = EVP_DecodeBlock(dst, (const unsigned char *)src, (int)len);
	if (n < 0 || (size_t)n < pad)
		return -1;
	*outlen = (size_t)n - pad;
	return 0;
}

static int hmac(const EVP_MD *md, const uint8_t *key, size_t keylen,
    const void *data, size_t len, uint8_t *out)
{
	unsigned int ol = 0;

	return HMAC(md, key, (int)keylen, data, len, out, &ol) == NULL ? -1 : 0;
}

/* SaltedPassword -> StoredKey, ServerKey. */
static int keys_from_salted(const EVP_MD *md, size_t hl, const uint8_t *salted,
    uint8_t *stored, uint8_t *server)
{
	uint8_t ckey[SCRAM_MAX_HASH];
	int rc = -1;

	if (hmac(md, salted, hl, "Client Key", 10, ckey) == 0 &&
	    EVP_Digest(ckey, hl, stored, NULL, md, NULL) == 1 &&
	    hmac(md, salted, hl, "Server Key", 10, server) == 0)
		rc = 0;
	OPENSSL_cleanse(ckey, sizeof(ckey));
	return rc;
}

int scram_cred_derive(int mech, const char *password, size_t pwlen,
    const uint8_t *salt, size_t salt_len, int iterations,
    struct scram_cred *out, char *err, size_t errlen)
{
	size_t hl = scram_hash_len(mech);
	uint8_t salted[SCRAM_MAX_HASH];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (hl == 0) {
		snprintf(err, errlen, "%s is not a SCRAM mechanism",
		    ksasl_mech_name(mech));
		return -1;
	}
	if (iterations < SCRAM_MIN_ITER || iterations > SCRAM_MAX_ITER) {
		snprintf(err, errlen, "iterations %d outside %d..%d", iterations,
		    SCRAM_MIN_ITER, SCRAM_MAX_ITER);
		return -1;
	}
	if (salt == NULL) {
		if (RAND_bytes(out->salt, SCRAM_SALT_BYTES) != 1) {
			snprintf(err, errlen, "no randomness for the salt");
			return -1;
		}
		out->salt_len = SCRAM_SALT_BYTES;
	} else {
		if (salt_len == 0 || salt_len > SCRAM_MAX_SALT) {
			snprintf(err, errlen, "salt must be 1..%d bytes", SCRAM_MAX_SALT);
			return -1;
		}
		memcpy(out->salt, salt, salt_len);
		out->salt_len = salt_len;
	}
	out->mech = mech;
	out->iterations = iterations;
	if (PKCS5_PBKDF2_HMAC(password, (int)pwlen, out->salt, (int)out->salt_len,
		iterations, scram_md(mech), (int)hl, salted) != 1 ||
	    keys_from_salted(scram_md(mech), hl, salted, out->stored_key,
		out->server_key) != 0) {
		snprintf(err, errlen, "key derivation failed in OpenSSL");
		goto out;
	}
	rc = 0;
out:
	OPENSSL_cleanse(salted, sizeof(salted));
	return rc;
}

int scram_cred_check_password(const struct scram_cred *cred,
    const char *password, size_t pwlen)
{
	struct scram_cred t;
	char err[128];
	size_t hl = scram_hash_len(cred->mech);
	int ok;

	if (hl == 0 || scram_cred_derive(cred->mech, password, pwlen, cred->salt,
	    cred->salt_len, cred->iterations, &t, err, sizeof(err)) < 0)
		return 0;
	ok = CRYPTO_memcmp(t.stored_key, cred->stored_key, hl) == 0;
	OPENSSL_cleanse(&t, sizeof(t));
	return ok;
}

int scram_plain_parse(const uint8_t *msg, size_t len, char *user,
    size_t userlen, const char **pw, size_t *pwlen, char *why, size_t whylen)
{
	const uint8_t *n1, *n2;
	size_t azl, ul;

	n1 = len > 0 ? memchr(msg, '\0', len) : NULL;
	n2 = n1 != NULL ? memchr(n1 + 1, '\0', len - (size_t)(n1 + 1 - msg)) : NULL;
	if (n1 == NULL || n2 == NULL ||
	    memchr(n2 + 1, '\0', len - (size_t)(n2 + 1 - msg)) != NULL) {
		snprintf(why, whylen, "SASL/PLAIN message is not "
		    "authzid NUL authcid NUL passwd");
		return -1;
	}
	azl = (size_t)(n1 - msg);
	ul = (size_t)(n2 - n1 - 1);
	if (ul == 0 || ul > SCRAM_MAX_USER || ul >= userlen) {
		snprintf(why, whylen, "SASL/PLAIN user name must be 1..%d bytes",
		    SCRAM_MAX_USER);
		return -1;
	}
	if (azl > 0 && (azl != ul || memcmp(msg, n1 + 1, ul) != 0)) {
		snprintf(why, whylen, "SASL/PLAIN authorization id differs from "
		    "the user name");
		return -1;
	}
	memcpy(user, n1 + 1, ul);
	user[ul] = '\0';
	*pw = (const char *)(n2 + 1);
	*pwlen = len - (size_t)(n2 + 1 - msg);
	if (*pwlen > SCRAM_MAX_PLAIN_PASSWORD) {
		snprintf(why, whylen, "SASL/PLAIN password longer than %d bytes",
		    SCRAM_MAX_PLAIN_PASSWORD);
		return -1;
	}
	return 0;
}

/* ---- the SCRAM server ------------------------------------------------- */

enum { SS_FIRST, SS_FINAL, SS_DONE, SS_FAILED };

struct scram_server {
	int mech;
	int state;
	const EVP_MD *md;
	size_t hl;
	scram_lookup_fn lookup;
	void *arg;
	struct scram_cred cred;
	int known;             /* cred is the user's; else a decoy */
	char user[SCRAM_MAX_USER + 1];
	char gs2[SCRAM_MAX_USER + 16]; /* the gs2 header the client sent */
	size_t gs2_len;
	char *client_first_bare;
	char *server_first;
	char *nonce;           /* client nonce + server nonce */
	char *out;
};

/* A per-process key for decoy salts: stable for a user within one run. */
static uint8_t decoy_key[32];
static int decoy_ready;

static void decoy_cred(struct scram_server *s)
{
	uint8_t mac[SCRAM_MAX_HASH];

	if (!decoy_ready) {
		if (RAND_bytes(decoy_key, sizeof(decoy_key)) != 1)
			memset(decoy_key, 0x5a, sizeof(decoy_key));
		decoy_ready = 1;
	}
	memset(&s->cred, 0, sizeof(s->cred));
	s->cred.mech = s->mech;
	s->cred.iterations = SCRAM_MIN_ITER;
	hmac(EVP_sha256(), decoy_key, sizeof(decoy_key), s->user,
	    strlen(s->user), mac);
	memcpy(s->cred.salt, mac, SCRAM_SALT_BYTES);
	s->cred.salt_len = SCRAM_SALT_BYTES;
	/* No ClientKey hashes to this StoredKey but by chance. */
	RAND_bytes(s->cred.stored_key, (int)s->hl);
	RAND_bytes(s->cred.server_key, (int)s->hl);
}

struct scram_server *scram_server_new(int mech, scram_lookup_fn lookup,
    void *arg)
{
	struct scram_server *s;

	if (scram_hash_len(mech) == 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->mech = mech;
	s->md = scram_md(mech);
	s->hl = scram_hash_len(mech);
	s->lookup = lookup;
	s->arg = arg;
	return s;
}

void scram_server_free(struct scram_server *s)
{
	if (s == NULL)
		return;
	free(s->client_first_bare);
	free(s->server_first);
	free(s->nonce);
	free(s->out);
	OPENSSL_cleanse(s, sizeof(*s));
	free(s);
}

const char *scram_server_user(const struct scram_server *s)
{
	return s->state == SS_DONE ? s->user : NULL;
}

const char *scram_server_claimed_user(const struct scram_server *s)
{
	return s->user[0] != '\0' ? s->user : NULL;
}

/* Unescapes a saslname ("=2C" -> ',', "=3D" -> '='). */
static int saslname(const char *p, size_t len, char *out, size_t outlen)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = p[i];

		if (c == '=') {
			if (i + 3 > len)
				return -1;
			if (strncmp(p + i, "=2C", 3) == 0)
				c = ',';
			else if (strncmp(p + i, "=3D", 3) == 0)
				c = '=';
			else
				return -1;
			i += 2;
		} else if (c == ',' || (unsigned char)c < 0x20 || c == 0x7f) {
			return -1;
		}
		if (n + 1 >= outlen)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return n > 0 ? 0 : -1;
}

static int printable(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] < 0x20 || p[i] == 0x7f)
			return 0;
	return 1;
}

static char *memdup0(const void *p, size_t len)
{
	char *s = malloc(len + 1);

	if (s != NULL) {
		memcpy(s, p, len);
		s[len] = '\0';
	}
	return s;
}

static int set_out(struct scram_server *s, char *m, const char **out,
    size_t *outlen)
{
	free(s->out);
	s->out = m;
	*out = m;
	*outlen = m != NULL ? strlen(m) : 0;
	return m != NULL ? 0 : -1;
}

static int fail(struct scram_server *s, const char *e, const char **out,
    size_t *outlen, char *why, size_t whylen, const char *fmt, const char *arg)
{
	char buf[64];

	s->state = SS_FAILED;
	snprintf(why, whylen, fmt, arg != NULL ? arg : "");
	snprintf(buf, sizeof(buf), "e=%s", e);
	set_out(s, memdup0(buf, strlen(buf)), out, outlen);
	return -1;
}

static int step_first(struct scram_server *s, const char *m, size_t len,
    const char **out, size_t *outlen, char *why, size_t whylen)
{
	const char *p = m, *end = m + len, *c1, *c2, *bare, *r;
	char az[SCRAM_MAX_USER + 1] = "", salt64[4 * SCRAM_MAX_SALT / 3 + 8];
	char snonce64[4 * SCRAM_NONCE_BYTES / 3 + 8], *sf;
	uint8_t rnd[SCRAM_NONCE_BYTES];
	size_t rl, sflen;

	/* gs2-header: ("n" | "y") "," [ "a=" saslname ] "," */
	if (len >= 1 && m[0] == 'p')
		return fail(s, "channel-bindings-not-supported", out, outlen, why,
		    whylen, "SCRAM channel binding is not supported%s", NULL);
	if (len < 3 || (m[0] != 'n' && m[0] != 'y') || m[1] != ',')
		return fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM client-first-message has no gs2 header%s", NULL);
	c1 = m + 1;
	c2 = memchr(c1 + 1, ',', (size_t)(end - c1 - 1));
	if (c2 == NULL)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM client-first-message has no gs2 header%s", NULL);
	if (c2 > c1 + 1) {
		if (c2 - c1 < 3 || c1[1] != 'a' || c1[2] != '=' ||
		    saslname(c1 + 3, (size_t)(c2 - c1 - 3), az, sizeof(az)) < 0)
			return fail(s, "invalid-encoding", out, outlen, why, whylen,
			    "SCRAM authorization id is malformed%s", NULL);
	}
	s->gs2_len = (size_t)(c2 + 1 - m);
	if (s->gs2_len >= sizeof(s->gs2))
		return fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM gs2 header too long%s", NULL);
	memcpy(s->gs2, m, s->gs2_len);
	bare = c2 + 1;
	/* client-first-message-bare: "n=" saslname ",r=" nonce ["," ext] */
	if (end - bare < 2 || bare[0] != 'n' || bare[1] != '=')
		return fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM client-first-message lacks n=%s", NULL);
	p = memchr(bare, ',', (size_t)(end - bare));
	if (p == NULL || saslname(bare + 2, (size_t)(p - bare - 2), s->user,
	    sizeof(s->user)) < 0)
		return fail(s, "invalid-username-encoding", out, outlen, why,
		    whylen, "SCRAM user name is malformed%s", NULL);
	if (az[0] != '\0' && strcmp(az, s->user) != 0)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM authorization id differs from the user name%s", NULL);
	r = p + 1;
	if (end - r < 3 || r[0] != 'r' || r[1] != '=')
		return fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM client-first-message lacks r=%s", NULL);
	r += 2;
	p = memchr(r, ',', (size_t)(end - r));
	rl = p != NULL ? (size_t)(p - r) : (size_t)(end - r);
	if (rl == 0 || rl > 256)
		return fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM client nonce must be 1..256 bytes%s", NULL);
	for (const char *e = p; e != NULL && e < end;) {
		/* Extensions: Kafka's tokenauth=true (delegation tokens) is
		 * not served here. */
		const char *n = memchr(e + 1, ',', (size_t)(end - e - 1));
		size_t el = (size_t)((n != NULL ? n : end) - e - 1);

		if (el >= 10 && strncmp(e + 1, "tokenauth=", 10) == 0)
			return fail(s, "extensions-not-supported", out, outlen,
			    why, whylen, "SCRAM delegation tokens are not "
			    "supported%s", NULL);
		e = n;
	}
	s->client_first_bare = memdup0(bare, (size_t)(end - bare));
	if (RAND_bytes(rnd, sizeof(rnd)) != 1 ||
	    scram_b64_encode(snonce64, sizeof(snonce64), rnd, sizeof(rnd)) < 0)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "no randomness for the SCRAM nonce%s", NULL);
	s->nonce = malloc(rl + strlen(snonce64) + 1);
	if (s->client_first_bare == NULL || s->nonce == NULL)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "out of memory%s", NULL);
	memcpy(s->nonce, r, rl);
	memcpy(s->nonce + rl, snonce64, strlen(snonce64) + 1);

	s->known = s->lookup(s->arg, s->user, s->mech, &s->cred) == 0 &&
	    s->cred.mech == s->mech && s->cred.salt_len > 0;
	if (!s->known)
		decoy_cred(s);
	scram_b64_encode(salt64, sizeof(salt64), s->cred.salt, s->cred.salt_len);
	sflen = 2 + strlen(s->nonce) + 3 + strlen(salt64) + 3 + 12 + 1;
	sf = malloc(sflen);
	if (sf == NULL)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "out of memory%s", NULL);
	snprintf(sf, sflen, "r=%s,s=%s,i=%d", s->nonce, salt64,
	    s->cred.iterations);
	s->server_first = sf;
	s->state = SS_FINAL;
	if (set_out(s, memdup0(sf, strlen(sf)), out, outlen) < 0)
		return fail(s, "other-error", out, outlen, why, whylen,
		    "out of memory%s", NULL);
	return 1;
}

static int step_final(struct scram_server *s, const char *m, size_t len,
    const char **out, size_t *outlen, char *why, size_t whylen)
{
	const char *pp, *c, *r, *rv, *re, *end = m + len;
	size_t wpl, cbl = 0, pl = 0, nl = strlen(s->nonce), authlen, rvl;
	uint8_t cb[SCRAM_MAX_USER + 16], proof[SCRAM_MAX_HASH + 3];
	uint8_t csig[SCRAM_MAX_HASH], ckey[SCRAM_MAX_HASH], h[SCRAM_MAX_HASH];
	uint8_t ssig[SCRAM_MAX_HASH];
	char *auth = NULL, *sfinal = NULL, v64[4 * SCRAM_MAX_HASH / 3 + 8];
	int rc = -1, ok;

	/* "c=" cbind ",r=" nonce ["," ext] ",p=" proof; p= is last. */
	pp = NULL;
	for (const char *q = m; q + 3 <= end; q++)
		if (q[0] == ',' && q[1] == 'p' && q[2] == '=')
			pp = q;
	if (len < 2 || m[0] != 'c' || m[1] != '=' || pp == NULL) {
		rc = fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM client-final-message lacks c= or p=%s", NULL);
		goto out;
	}
	wpl = (size_t)(pp - m);
	c = m + 2;
	r = memchr(c, ',', wpl - 2);
	if (r == NULL || scram_b64_decode(cb, sizeof(cb), &cbl, c,
	    (size_t)(r - c)) < 0 || cbl != s->gs2_len ||
	    memcmp(cb, s->gs2, cbl) != 0) {
		rc = fail(s, "channel-bindings-dont-match", out, outlen, why,
		    whylen, "SCRAM channel binding does not match the gs2 "
		    "header%s", NULL);
		goto out;
	}
	r++;
	/*
	 * The nonce must be ours; like Kafka before 4.0 we accept one that
	 * ends with ours: librdkafka before 2.6.1 sends the client nonce
	 * twice.  The proof covers the whole message either way.
	 */
	rv = r + 2;
	rvl = (size_t)(m + wpl - rv);
	if (rvl > 0 && (re = memchr(rv, ',', rvl)) != NULL)
		rvl = (size_t)(re - rv);
	if ((size_t)(m + wpl - r) < 2 || r[0] != 'r' || r[1] != '=' ||
	    rvl < nl || memcmp(rv + rvl - nl, s->nonce, nl) != 0) {
		rc = fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM nonce does not match%s", NULL);
		goto out;
	}
	if (scram_b64_decode(proof, sizeof(proof), &pl, pp + 3,
	    (size_t)(end - pp - 3)) < 0 || pl != s->hl) {
		rc = fail(s, "invalid-proof", out, outlen, why, whylen,
		    "SCRAM proof is not %s", s->hl == 32 ? "32 bytes" : "64 bytes");
		goto out;
	}
	authlen = strlen(s->client_first_bare) + 1 + strlen(s->server_first) +
	    1 + wpl;
	auth = malloc(authlen + 1);
	if (auth == NULL) {
		rc = fail(s, "other-error", out, outlen, why, whylen,
		    "out of memory%s", NULL);
		goto out;
	}
	snprintf(auth, authlen + 1, "%s,%s,%.*s", s->client_first_bare,
	    s->server_first, (int)wpl, m);
	if (hmac(s->md, s->cred.stored_key, s->hl, auth, authlen, csig) < 0 ||
	    hmac(s->md, s->cred.server_key, s->hl, auth, authlen, ssig) < 0) {
		rc = fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM signature failed in OpenSSL%s", NULL);
		goto out;
	}
	for (size_t i = 0; i < s->hl; i++)
		ckey[i] = proof[i] ^ csig[i];
	if (EVP_Digest(ckey, s->hl, h, NULL, s->md, NULL) != 1) {
		rc = fail(s, "other-error", out, outlen, why, whylen,
		    "SCRAM hash failed in OpenSSL%s", NULL);
		goto out;
	}
	ok = CRYPTO_memcmp(h, s->cred.stored_key, s->hl) == 0;
	if (!ok || !s->known) {
		rc = fail(s, "invalid-proof", out, outlen, why, whylen,
		    s->known ? "SCRAM proof does not match the stored key%s" :
		    "SCRAM user is not known%s", NULL);
		goto out;
	}
	scram_b64_encode(v64, sizeof(v64), ssig, s->hl);
	sfinal = malloc(2 + strlen(v64) + 1);
	if (sfinal == NULL) {
		rc = fail(s, "other-error", out, outlen, why, whylen,
		    "out of memory%s", NULL);
		goto out;
	}
	memcpy(sfinal, "v=", 2);
	memcpy(sfinal + 2, v64, strlen(v64) + 1);
	set_out(s, sfinal, out, outlen);
	s->state = SS_DONE;
	rc = 0;
out:
	OPENSSL_cleanse(ckey, sizeof(ckey));
	OPENSSL_cleanse(csig, sizeof(csig));
	OPENSSL_cleanse(ssig, sizeof(ssig));
	free(auth);
	return rc;
}

int scram_server_step(struct scram_server *s, const uint8_t *in, size_t len,
    const char **out, size_t *outlen, char *why, size_t whylen)
{
	*out = NULL;
	*outlen = 0;
	if (len == 0 || len > SCRAM_MAX_MSG || !printable(in, len))
		return fail(s, "invalid-encoding", out, outlen, why, whylen,
		    "SCRAM message is empty, too long or not printable%s", NULL);
	switch (s->state) {
	case SS_FIRST:
		return step_first(s, (const char *)in, len, out, outlen, why,
		    whylen);
	case SS_FINAL:
		return step_final(s, (const char *)in, len, out, outlen, why,
		    whylen);
	default:
		snprintf(why, whylen, "SCRAM exchange is already %s",
		    s->state == SS_DONE ? "complete" : "failed");
		s->state = SS_FAILED;
		return -1;
	}
}
