/*
 * kconn_config.c: the connection properties of kconn (librdkafka names)
 * and the TLS context built from them.  See kconn.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "compat.h"
#include "kconn.h"
#include "ksasl.h"
#include "safefile.h"

static const char *const security_names[] = {
#define X(e, s, t, a) [KCONN_SEC_##e] = s,
	KCONN_SECURITY(X)
#undef X
};
static const uint8_t security_tls[] = {
#define X(e, s, t, a) [KCONN_SEC_##e] = t,
	KCONN_SECURITY(X)
#undef X
};
static const uint8_t security_sasl[] = {
#define X(e, s, t, a) [KCONN_SEC_##e] = a,
	KCONN_SECURITY(X)
#undef X
};
_Static_assert(ARRAY_SIZE(security_names) == KCONN_SEC_COUNT, "security table");

const char *kconn_security_name(int security)
{
	if (security < 0 || security >= KCONN_SEC_COUNT)
		return "?";
	return security_names[security];
}

int kconn_security_tls(int security)
{
	return security >= 0 && security < KCONN_SEC_COUNT &&
	    security_tls[security];
}

int kconn_security_sasl(int security)
{
	return security >= 0 && security < KCONN_SEC_COUNT &&
	    security_sasl[security];
}

/* ---- properties ------------------------------------------------------- */

void kconn_config_init(struct kconn_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->security = KCONN_SEC_PLAINTEXT;
	cfg->sasl_mech = -1;
	cfg->ssl_verify_peer = 1;
	cfg->ssl_verify_hostname = 1;        /* librdkafka >= 1.9 default */
	cfg->connect_timeout_ms = 30000;
	cfg->request_timeout_ms = 30000;
	cfg->max_inflight = 1000;
	cfg->max_inflight_bytes = 256u << 20;
	cfg->max_request_bytes = 100u << 20;
	cfg->max_response_bytes = 100000000; /* receive.message.max.bytes */
}

static void free_secret(char **p)
{
	if (*p != NULL) {
		OPENSSL_cleanse(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void kconn_config_fini(struct kconn_config *cfg)
{
	free(cfg->client_id);
	free(cfg->sasl_username);
	free_secret(&cfg->sasl_password);
	free(cfg->ssl_ca_location);
	free(cfg->ssl_cert_location);
	free(cfg->ssl_key_location);
	free_secret(&cfg->ssl_key_password);
	free(cfg->ssl_ca_pem);
	free(cfg->ssl_cert_pem);
	free_secret(&cfg->ssl_key_pem);
	if (cfg->ssl_ctx != NULL)
		SSL_CTX_free(cfg->ssl_ctx);
	memset(cfg, 0, sizeof(*cfg));
}

static int set_str(char **dst, const char *value, char *err, size_t errlen)
{
	char *v = strdup(value);

	if (v == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (*dst != NULL)
		OPENSSL_cleanse(*dst, strlen(*dst));
	free(*dst);
	*dst = v;
	return 0;
}

static int parse_long(const char *name, const char *value, long lo, long hi,
    long *out, char *err, size_t errlen)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0' || v < lo || v > hi) {
		snprintf(err, errlen, "%s: \"%s\" is not an integer in %ld..%ld",
		    name, value, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *name, const char *value, int *out, char *err,
    size_t errlen)
{
	if (strcasecmp(value, "true") == 0) {
		*out = 1;
		return 0;
	}
	if (strcasecmp(value, "false") == 0) {
		*out = 0;
		return 0;
	}
	snprintf(err, errlen, "%s: \"%s\" is not true or false", name, value);
	return -1;
}

int kconn_config_set(struct kconn_config *cfg, const char *name,
    const char *value, char *err, size_t errlen)
{
	long v;

	if (strcmp(name, "client.id") == 0) {
		if (strlen(value) > 255) {
			snprintf(err, errlen, "client.id: longer than 255 bytes");
			return -1;
		}
		return set_str(&cfg->client_id, value, err, errlen);
	}
	if (strcmp(name, "security.protocol") == 0) {
		for (int i = 0; i < KCONN_SEC_COUNT; i++) {
			if (strcasecmp(value, security_names[i]) == 0) {
				cfg->security = i;
				return 0;
			}
		}
		snprintf(err, errlen, "security.protocol: \"%s\" is not one of "
		    "plaintext, ssl, sasl_plaintext, sasl_ssl", value);
		return -1;
	}
	if (strcmp(name, "sasl.mechanism") == 0 ||
	    strcmp(name, "sasl.mechanisms") == 0) {
		int m = ksasl_mech_parse(value);
		if (m < 0) {
			snprintf(err, errlen, "%s: \"%s\" is not one of PLAIN, "
			    "SCRAM-SHA-256, SCRAM-SHA-512", name, value);
			return -1;
		}
		cfg->sasl_mech = m;
		return 0;
	}
	if (strcmp(name, "sasl.username") == 0)
		return set_str(&cfg->sasl_username, value, err, errlen);
	if (strcmp(name, "sasl.password") == 0)
		return set_str(&cfg->sasl_password, value, err, errlen);
	if (strcmp(name, "ssl.ca.location") == 0)
		return set_str(&cfg->ssl_ca_location, value, err, errlen);
	if (strcmp(name, "ssl.certificate.location") == 0)
		return set_str(&cfg->ssl_cert_location, value, err, errlen);
	if (strcmp(name, "ssl.key.location") == 0)
		return set_str(&cfg->ssl_key_location, value, err, errlen);
	if (strcmp(name, "ssl.key.password") == 0)
		return set_str(&cfg->ssl_key_password, value, err, errlen);
	if (strcmp(name, "ssl.ca.pem") == 0)
		return set_str(&cfg->ssl_ca_pem, value, err, errlen);
	if (strcmp(name, "ssl.certificate.pem") == 0)
		return set_str(&cfg->ssl_cert_pem, value, err, errlen);
	if (strcmp(name, "ssl.key.pem") == 0)
		return set_str(&cfg->ssl_key_pem, value, err, errlen);
	if (strcmp(name, "ssl.endpoint.identification.algorithm") == 0) {
		if (strcasecmp(value, "https") == 0)
			cfg->ssl_verify_hostname = 1;
		else if (strcasecmp(value, "none") == 0 || value[0] == '\0')
			cfg->ssl_verify_hostname = 0;
		else {
			snprintf(err, errlen, "%s: \"%s\" is not https or none",
			    name, value);
			return -1;
		}
		return 0;
	}
	if (strcmp(name, "enable.ssl.certificate.verification") == 0)
		return parse_bool(name, value, &cfg->ssl_verify_peer, err, errlen);
	if (strcmp(name, "socket.connection.setup.timeout.ms") == 0) {
		if (parse_long(name, value, 1, 2147483647, &v, err, errlen) != 0)
			return -1;
		cfg->connect_timeout_ms = (int)v;
		return 0;
	}
	if (strcmp(name, "socket.timeout.ms") == 0 ||
	    strcmp(name, "request.timeout.ms") == 0) {
		if (parse_long(name, value, 1, 2147483647, &v, err, errlen) != 0)
			return -1;
		cfg->request_timeout_ms = (int)v;
		return 0;
	}
	if (strcmp(name, "max.in.flight.requests.per.connection") == 0 ||
	    strcmp(name, "max.in.flight") == 0) {
		if (parse_long(name, value, 1, 1000000, &v, err, errlen) != 0)
			return -1;
		cfg->max_inflight = (int)v;
		return 0;
	}
	if (strcmp(name, "receive.message.max.bytes") == 0) {
		if (parse_long(name, value, 1000, 2147483647, &v, err, errlen) != 0)
			return -1;
		cfg->max_response_bytes = (size_t)v;
		return 0;
	}
	if (strcmp(name, "mirrord.max.in.flight.bytes") == 0) {
		if (parse_long(name, value, 1024, 2147483647, &v, err, errlen) != 0)
			return -1;
		cfg->max_inflight_bytes = (size_t)v;
		return 0;
	}
	if (strcmp(name, "mirrord.max.request.bytes") == 0) {
		if (parse_long(name, value, 1024, 2147483647, &v, err, errlen) != 0)
			return -1;
		cfg->max_request_bytes = (size_t)v;
		return 0;
	}
	return 1;
}

static const struct {
	const char *location, *pem;
} file_props[] = {
	{ "ssl.ca.location", "ssl.ca.pem" },
	{ "ssl.certificate.location", "ssl.certificate.pem" },
	{ "ssl.key.location", "ssl.key.pem" },
};

const char *kconn_file_prop_pem(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(file_props); i++)
		if (strcmp(name, file_props[i].location) == 0)
			return file_props[i].pem;
	return NULL;
}

/* The first queued OpenSSL error as text, or fallback. */
static void ssl_errstr(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "%s", fallback);
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

static int key_password_cb(char *buf, int size, int rwflag, void *u)
{
	const char *pw = u;
	size_t n;

	if (pw == NULL)
		return 0;
	n = strlen(pw);
	if (n > (size_t)size)
		return 0;
	memcpy(buf, pw, n);
	return (int)n;
}

/*
 * Fills *pem from location when it is not set yet (trusted settings only:
 * any directory, but still a regular file of at most the default cap).
 */
static int read_location(const char *prop, const char *location, char **pem,
    char *err, size_t errlen)
{
	static const char *const anywhere[] = { "/", NULL };
	char e2[600];
	size_t len;

	if (*pem != NULL || location == NULL)
		return 0;
	if (safefile_read(location, anywhere, SAFEFILE_DEFAULT_MAX, pem, &len,
	    e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "%s %s", prop, e2);
		return -1;
	}
	return 0;
}

/* "ssl.ca.location /etc/ca.pem" or "ssl.ca.pem": what to blame. */
static void source_name(char *buf, size_t len, const char *location,
    const char *prop_location, const char *prop_pem)
{
	if (location != NULL)
		snprintf(buf, len, "%s %s", prop_location, location);
	else
		snprintf(buf, len, "%s", prop_pem);
}

/* Every certificate of a PEM text into the context's trust store. */
static int load_ca(SSL_CTX *ctx, const char *pem, const char *what,
    char *err, size_t errlen)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	BIO *bio = BIO_new_mem_buf(pem, -1);
	char ebuf[256];
	int count = 0, rc = -1;
	X509 *x;

	if (bio == NULL) {
		snprintf(err, errlen, "%s: out of memory", what);
		return -1;
	}
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (X509_STORE_add_cert(store, x) != 1) {
			X509_free(x);
			ssl_errstr(ebuf, sizeof(ebuf), "cannot add it");
			snprintf(err, errlen, "%s: certificate %d: %s", what,
			    count + 1, ebuf);
			goto out;
		}
		X509_free(x);
		count++;
	}
	/* The loop ends at the end of the text (no start line) or at garbage. */
	if (ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_NO_START_LINE &&
	    count > 0) {
		ERR_clear_error();
	} else {
		ssl_errstr(ebuf, sizeof(ebuf), "no PEM certificate in it");
		snprintf(err, errlen, "%s: %s", what, count == 0 ?
		    "no PEM certificate in it" : ebuf);
		goto out;
	}
	rc = 0;
out:
	BIO_free(bio);
	return rc;
}

/* The leaf certificate, then the rest of the chain. */
static int load_chain(SSL_CTX *ctx, const char *pem, const char *what,
    char *err, size_t errlen)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	char ebuf[256];
	int rc = -1;
	X509 *x;

	if (bio == NULL) {
		snprintf(err, errlen, "%s: out of memory", what);
		return -1;
	}
	x = PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL);
	if (x == NULL || SSL_CTX_use_certificate(ctx, x) != 1) {
		ssl_errstr(ebuf, sizeof(ebuf), "no PEM certificate in it");
		snprintf(err, errlen, "%s: %s", what, ebuf);
		X509_free(x);
		goto out;
	}
	X509_free(x);
	SSL_CTX_clear_chain_certs(ctx);
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
			X509_free(x);
			ssl_errstr(ebuf, sizeof(ebuf), "bad chain certificate");
			snprintf(err, errlen, "%s: %s", what, ebuf);
			goto out;
		}
	}
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE) {
		ssl_errstr(ebuf, sizeof(ebuf), "bad chain certificate");
		snprintf(err, errlen, "%s: %s", what, ebuf);
		goto out;
	}
	ERR_clear_error();
	rc = 0;
out:
	BIO_free(bio);
	return rc;
}

static int load_key(SSL_CTX *ctx, const char *pem, const char *password,
    const char *what, const char *cert_what, char *err, size_t errlen)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key = NULL;
	char ebuf[256];
	int rc = -1;

	if (bio == NULL) {
		snprintf(err, errlen, "%s: out of memory", what);
		return -1;
	}
	key = PEM_read_bio_PrivateKey(bio, NULL, key_password_cb,
	    (void *)(uintptr_t)password);
	if (key == NULL) {
		ssl_errstr(ebuf, sizeof(ebuf), "no PEM private key in it");
		snprintf(err, errlen, "%s: %s", what, ebuf);
		goto out;
	}
	if (SSL_CTX_use_PrivateKey(ctx, key) != 1) {
		ERR_clear_error();
		snprintf(err, errlen, "%s does not match %s", what, cert_what);
		goto out;
	}
	rc = 0;
out:
	EVP_PKEY_free(key);
	BIO_free(bio);
	return rc;
}

int kconn_config_prepare(struct kconn_config *cfg, char *err, size_t errlen)
{
	SSL_CTX *ctx = NULL;
	char ebuf[256], what[600], what2[600];

	if (security_sasl[cfg->security]) {
		if (cfg->sasl_mech < 0)
			cfg->sasl_mech = KSASL_PLAIN; /* librdkafka's default */
		if (cfg->sasl_username == NULL || cfg->sasl_password == NULL) {
			snprintf(err, errlen, "security.protocol %s needs "
			    "sasl.username and sasl.password",
			    security_names[cfg->security]);
			return -1;
		}
	}
	if ((cfg->ssl_key_location != NULL || cfg->ssl_key_pem != NULL) &&
	    cfg->ssl_cert_location == NULL && cfg->ssl_cert_pem == NULL) {
		snprintf(err, errlen, "ssl.key.location is set but "
		    "ssl.certificate.location is not");
		return -1;
	}
	if ((cfg->ssl_cert_location != NULL || cfg->ssl_cert_pem != NULL) &&
	    cfg->ssl_key_location == NULL && cfg->ssl_key_pem == NULL) {
		snprintf(err, errlen, "ssl.certificate.location is set but "
		    "ssl.key.location is not");
		return -1;
	}
	if (!security_tls[cfg->security] || cfg->ssl_ctx != NULL)
		return 0;
	if (read_location("ssl.ca.location", cfg->ssl_ca_location,
	    &cfg->ssl_ca_pem, err, errlen) != 0 ||
	    read_location("ssl.certificate.location", cfg->ssl_cert_location,
	    &cfg->ssl_cert_pem, err, errlen) != 0 ||
	    read_location("ssl.key.location", cfg->ssl_key_location,
	    &cfg->ssl_key_pem, err, errlen) != 0)
		return -1;

	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		ssl_errstr(ebuf, sizeof(ebuf), "SSL_CTX_new failed");
		snprintf(err, errlen, "TLS: %s", ebuf);
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (cfg->ssl_ca_pem != NULL) {
		source_name(what, sizeof(what), cfg->ssl_ca_location,
		    "ssl.ca.location", "ssl.ca.pem");
		if (load_ca(ctx, cfg->ssl_ca_pem, what, err, errlen) != 0)
			goto fail;
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ssl_errstr(ebuf, sizeof(ebuf), "no system CA store");
		snprintf(err, errlen, "TLS: system CA store: %s", ebuf);
		goto fail;
	}
	if (cfg->ssl_cert_pem != NULL) {
		source_name(what, sizeof(what), cfg->ssl_cert_location,
		    "ssl.certificate.location", "ssl.certificate.pem");
		if (load_chain(ctx, cfg->ssl_cert_pem, what, err, errlen) != 0)
			goto fail;
		source_name(what2, sizeof(what2), cfg->ssl_key_location,
		    "ssl.key.location", "ssl.key.pem");
		if (load_key(ctx, cfg->ssl_key_pem, cfg->ssl_key_password,
		    what2, what, err, errlen) != 0)
			goto fail;
		if (SSL_CTX_check_private_key(ctx) != 1) {
			snprintf(err, errlen, "%s does not match %s", what2,
			    what);
			ERR_clear_error();
			goto fail;
		}
	}
	SSL_CTX_set_verify(ctx, cfg->ssl_verify_peer ? SSL_VERIFY_PEER :
	    SSL_VERIFY_NONE, NULL);
	cfg->ssl_ctx = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return -1;
}
