/*
 * ksasl.c: see ksasl.h.  SCRAM as in RFC 5802 section 3:
 *
 *   SaltedPassword  = PBKDF2(HMAC-H, password, salt, i)
 *   ClientKey       = HMAC(SaltedPassword, "Client Key")
 *   StoredKey       = H(ClientKey)
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
 *   ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)
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

static const char *const mech_names[] = {
#define X(e, s) [KSASL_##e] = s,
	KSASL_MECHS(X)
#undef X
};
_Static_assert(ARRAY_SIZE(mech_names) == KSASL_MECH_COUNT, "mechanism table");

int ksasl_mech_parse(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(mech_names); i++)
		if (strcmp(name, mech_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *ksasl_mech_name(int mech)
{
	if (mech < 0 || mech >= KSASL_MECH_COUNT)
		return "?";
	return mech_names[mech];
}

int ksasl_plain_token(const char *user, const char *password, uint8_t **out,
    size_t *outlen, char *err, size_t errlen)
{
	size_t ul = strlen(user), pl = strlen(password);
	uint8_t *p;

	/* RFC 4616: authzid NUL authcid NUL passwd, each up to 255 bytes. */
	if (ul == 0 || ul > 255 || pl > 255) {
		snprintf(err, errlen, "SASL/PLAIN user name must be 1..255 bytes "
		    "and password at most 255 bytes");
		return -1;
	}
	p = malloc(ul + pl + 2);
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p[0] = 0;
	memcpy(p + 1, user, ul);
	p[1 + ul] = 0;
	memcpy(p + 2 + ul, password, pl);
	*out = p;
	*outlen = ul + pl + 2;
	return 0;
}

#define SCRAM_MAX_HASH 64 /* SHA-512 */

struct ksasl_scram {
	const EVP_MD *md;
	size_t hlen;
	char *password;
	char *client_first_bare; /* "n=user,r=cnonce" */
	size_t cnonce_len;       /* the nonce starts at the end of bare */
	char *msg;               /* last message we built */
	uint8_t server_sig[SCRAM_MAX_HASH];
	int have_server_sig;
};

void ksasl_scram_free(struct ksasl_scram *s)
{
	if (s == NULL)
		return;
	if (s->password != NULL) {
		OPENSSL_cleanse(s->password, strlen(s->password));
		free(s->password);
	}
	free(s->client_first_bare);
	free(s->msg);
	OPENSSL_cleanse(s->server_sig, sizeof(s->server_sig));
	free(s);
}

/* Appends src to dst with ',' and '=' escaped as RFC 5802 saslname wants. */
static size_t scram_escape(char *dst, const char *src)
{
	size_t n = 0;

	for (; *src != '\0'; src++) {
		if (*src == '=') {
			memcpy(dst + n, "=3D", 3);
			n += 3;
		} else if (*src == ',') {
			memcpy(dst + n, "=2C", 3);
			n += 3;
		} else {
			dst[n++] = *src;
		}
	}
	dst[n] = '\0';
	return n;
}

struct ksasl_scram *ksasl_scram_new(int mech, const char *user,
    const char *password, const char *nonce, char *err, size_t errlen)
{
	struct ksasl_scram *s = NULL;
	char nbuf[64];
	size_t ul = strlen(user), nl;

	if (mech != KSASL_SCRAM_SHA_256 && mech != KSASL_SCRAM_SHA_512) {
		snprintf(err, errlen, "%s is not a SCRAM mechanism",
		    ksasl_mech_name(mech));
		return NULL;
	}
	if (ul == 0 || ul > 255) {
		snprintf(err, errlen, "SCRAM user name must be 1..255 bytes");
		return NULL;
	}
	if (nonce == NULL) {
		uint8_t rnd[24];
		if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
			snprintf(err, errlen, "no randomness for the SCRAM nonce");
			return NULL;
		}
		scram_b64_encode(nbuf, sizeof(nbuf), rnd, sizeof(rnd));
		nonce = nbuf;
	}
	nl = strlen(nonce);
	if (nl == 0 || nl > 64 || strchr(nonce, ',') != NULL) {
		snprintf(err, errlen, "bad SCRAM client nonce");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto oom;
	s->md = mech == KSASL_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
	s->hlen = (size_t)EVP_MD_get_size(s->md);
	s->password = strdup(password);
	/* "n=" + escaped user (at most 3x) + ",r=" + nonce */
	s->client_first_bare = malloc(2 + 3 * ul + 3 + nl + 1);
	if (s->password == NULL || s->client_first_bare == NULL)
		goto oom;
	memcpy(s->client_first_bare, "n=", 2);
	size_t n = 2 + scram_escape(s->client_first_bare + 2, user);
	memcpy(s->client_first_bare + n, ",r=", 3);
	memcpy(s->client_first_bare + n + 3, nonce, nl + 1);
	s->cnonce_len = nl;
	return s;
oom:
	ksasl_scram_free(s);
	snprintf(err, errlen, "out of memory");
	return NULL;
}

int ksasl_scram_client_first(struct ksasl_scram *s, const char **msg,
    size_t *len)
{
	size_t bl = strlen(s->client_first_bare);
	char *m = malloc(3 + bl + 1);

	if (m == NULL)
		return -1;
	memcpy(m, "n,,", 3); /* no channel binding, no authzid */
	memcpy(m + 3, s->client_first_bare, bl + 1);
	free(s->msg);
	s->msg = m;
	*msg = m;
	*len = 3 + bl;
	return 0;
}

static int scram_hmac(const EVP_MD *md, const uint8_t *key, size_t keylen,
    const void *data, size_t len, uint8_t *out)
{
	unsigned int ol = 0;

	return HMAC(md, key, (int)keylen, data, len, out, &ol) == NULL ? -1 : 0;
}

/* Finds "k=value" among the comma-separated attributes of msg. */
static int scram_attr(const char *msg, size_t len, char key, const char **val,
    size_t *vlen)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;
		while (j < len && msg[j] != ',')
			j++;
		if (j - i >= 2 && msg[i] == key && msg[i + 1] == '=') {
			*val = msg + i + 2;
			*vlen = j - i - 2;
			return 0;
		}
		i = j + 1;
	}
	return -1;
}

int ksasl_scram_client_final(struct ksasl_scram *s, const uint8_t *server_first,
    size_t len, const char **msg, size_t *msglen, char *err, size_t errlen)
{
	const char *sf = (const char *)server_first, *nonce, *salt64, *it;
	size_t nlen, slen, itlen, bl = strlen(s->client_first_bare);
	uint8_t salt[256], salted[SCRAM_MAX_HASH], ckey[SCRAM_MAX_HASH];
	uint8_t stored[SCRAM_MAX_HASH], csig[SCRAM_MAX_HASH], skey[SCRAM_MAX_HASH];
	size_t saltlen = 0;
	char *auth = NULL, *out = NULL, proof64[4 * SCRAM_MAX_HASH / 3 + 8];
	long iter = 0;
	int rc = -1;

	if (len == 0 || len > KSASL_SCRAM_MAX_MSG) {
		snprintf(err, errlen, "SCRAM server-first-message of %zu bytes "
		    "(must be 1..%d)", len, KSASL_SCRAM_MAX_MSG);
		goto out;
	}
	for (size_t i = 0; i < len; i++) {
		if (server_first[i] < 0x20 || server_first[i] > 0x7e) {
			snprintf(err, errlen, "SCRAM server-first-message has a "
			    "non-printable byte at offset %zu", i);
			goto out;
		}
	}
	if (len >= 2 && sf[0] == 'm' && sf[1] == '=') {
		snprintf(err, errlen, "SCRAM server requires an unsupported "
		    "mandatory extension");
		goto out;
	}
	if (len < 2 || sf[0] != 'r' || sf[1] != '=' ||
	    scram_attr(sf, len, 'r', &nonce, &nlen) != 0 ||
	    scram_attr(sf, len, 's', &salt64, &slen) != 0 ||
	    scram_attr(sf, len, 'i', &it, &itlen) != 0) {
		snprintf(err, errlen, "SCRAM server-first-message lacks r=, s= "
		    "or i=");
		goto out;
	}
	if (nlen <= s->cnonce_len ||
	    memcmp(nonce, s->client_first_bare + bl - s->cnonce_len,
		s->cnonce_len) != 0) {
		snprintf(err, errlen, "SCRAM server nonce does not extend the "
		    "client nonce");
		goto out;
	}
	if (scram_b64_decode(salt, sizeof(salt), &saltlen, salt64, slen) != 0 ||
	    saltlen == 0) {
		snprintf(err, errlen, "SCRAM salt is not valid base64 of 1..%zu "
		    "bytes", sizeof(salt));
		goto out;
	}
	if (itlen == 0 || itlen > 9) {
		snprintf(err, errlen, "SCRAM iteration count is not a number");
		goto out;
	}
	for (size_t i = 0; i < itlen; i++) {
		if (it[i] < '0' || it[i] > '9') {
			snprintf(err, errlen, "SCRAM iteration count is not a "
			    "number");
			goto out;
		}
		iter = iter * 10 + (it[i] - '0');
	}
	if (iter < KSASL_SCRAM_MIN_ITER || iter > KSASL_SCRAM_MAX_ITER) {
		snprintf(err, errlen, "SCRAM iteration count %ld outside %d..%d",
		    iter, KSASL_SCRAM_MIN_ITER, KSASL_SCRAM_MAX_ITER);
		goto out;
	}

	if (PKCS5_PBKDF2_HMAC(s->password, (int)strlen(s->password), salt,
		(int)saltlen, (int)iter, s->md, (int)s->hlen, salted) != 1 ||
	    scram_hmac(s->md, salted, s->hlen, "Client Key", 10, ckey) != 0 ||
	    EVP_Digest(ckey, s->hlen, stored, NULL, s->md, NULL) != 1 ||
	    scram_hmac(s->md, salted, s->hlen, "Server Key", 10, skey) != 0) {
		snprintf(err, errlen, "SCRAM key derivation failed in OpenSSL");
		goto out;
	}

	/* client-final-message-without-proof = "c=biws,r=" nonce, where biws
	 * is base64("n,,"): no channel binding. */
	size_t wpl = 9 + nlen;
	size_t authlen = bl + 1 + len + 1 + wpl;
	auth = malloc(authlen + 1);
	out = malloc(wpl + 3 + sizeof(proof64));
	if (auth == NULL || out == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	memcpy(out, "c=biws,r=", 9);
	memcpy(out + 9, nonce, nlen);
	snprintf(auth, authlen + 1, "%s,%.*s,%.*s", s->client_first_bare,
	    (int)len, sf, (int)wpl, out);
	if (scram_hmac(s->md, stored, s->hlen, auth, authlen, csig) != 0 ||
	    scram_hmac(s->md, skey, s->hlen, auth, authlen, s->server_sig) != 0) {
		snprintf(err, errlen, "SCRAM signature failed in OpenSSL");
		goto out;
	}
	s->have_server_sig = 1;
	for (size_t i = 0; i < s->hlen; i++)
		ckey[i] ^= csig[i]; /* ckey is now ClientProof */
	scram_b64_encode(proof64, sizeof(proof64), ckey, s->hlen);
	memcpy(out + wpl, ",p=", 3);
	memcpy(out + wpl + 3, proof64, strlen(proof64) + 1);
	free(s->msg);
	s->msg = out;
	out = NULL;
	*msg = s->msg;
	*msglen = strlen(s->msg);
	rc = 0;
out:
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(ckey, sizeof(ckey));
	OPENSSL_cleanse(stored, sizeof(stored));
	OPENSSL_cleanse(skey, sizeof(skey));
	free(auth);
	free(out);
	return rc;
}

int ksasl_scram_verify_server(struct ksasl_scram *s, const uint8_t *server_final,
    size_t len, char *err, size_t errlen)
{
	const char *sf = (const char *)server_final, *v;
	uint8_t sig[SCRAM_MAX_HASH + 3];
	size_t vlen, siglen = 0;

	if (!s->have_server_sig) {
		snprintf(err, errlen, "SCRAM server-final-message before the "
		    "client-final-message");
		return -1;
	}
	if (len > KSASL_SCRAM_MAX_MSG)
		len = KSASL_SCRAM_MAX_MSG;
	if (scram_attr(sf, len, 'e', &v, &vlen) == 0) {
		/* The server's reason is printable by RFC; cap its length. */
		int shown = (int)MIN(vlen, 200);
		for (int i = 0; i < shown; i++)
			if (v[i] < 0x20 || v[i] > 0x7e)
				shown = i;
		snprintf(err, errlen, "SCRAM server reported error: %.*s", shown,
		    v);
		return -1;
	}
	if (scram_attr(sf, len, 'v', &v, &vlen) != 0 ||
	    scram_b64_decode(sig, sizeof(sig), &siglen, v, vlen) != 0 ||
	    siglen != s->hlen) {
		snprintf(err, errlen, "SCRAM server-final-message has no valid "
		    "v= signature");
		return -1;
	}
	if (CRYPTO_memcmp(sig, s->server_sig, s->hlen) != 0) {
		snprintf(err, errlen, "SCRAM server signature does not match: "
		    "the server does not know the password");
		return -1;
	}
	return 0;
}
