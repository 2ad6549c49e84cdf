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
#include <openssl/ssl.h>

#include "compat.h"
#include "kconn.h"
#include "ksasl.h"

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

int kconn_config_prepare(struct kconn_config *cfg, char *err, size_t errlen)
{
	SSL_CTX *ctx = NULL;
	char ebuf[256];

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
	if (cfg->ssl_key_location != NULL && cfg->ssl_cert_location == NULL) {
		snprintf(err, errlen, "ssl.key.location is set but "
		    "ssl.certificate.location is not");
		return -1;
	}
	if (cfg->ssl_cert_location != NULL && cfg->ssl_key_location == NULL) {
		snprintf(err, errlen, "ssl.certificate.location is set but "
		    "ssl.key.location is not");
		return -1;
	}
	if (!security_tls[cfg->security] || cfg->ssl_ctx != NULL)
		return 0;

	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		ssl_errstr(ebuf, sizeof(ebuf), "SSL_CTX_new failed");
		snprintf(err, errlen, "TLS: %s", ebuf);
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (cfg->ssl_ca_location != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, cfg->ssl_ca_location,
			NULL) != 1) {
			ssl_errstr(ebuf, sizeof(ebuf), "unreadable");
			snprintf(err, errlen, "ssl.ca.location %s: %s",
			    cfg->ssl_ca_location, ebuf);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ssl_errstr(ebuf, sizeof(ebuf), "no system CA store");
		snprintf(err, errlen, "TLS: system CA store: %s", ebuf);
		goto fail;
	}
	if (cfg->ssl_cert_location != NULL) {
		SSL_CTX_set_default_passwd_cb(ctx, key_password_cb);
		SSL_CTX_set_default_passwd_cb_userdata(ctx,
		    cfg->ssl_key_password);
		if (SSL_CTX_use_certificate_chain_file(ctx,
			cfg->ssl_cert_location) != 1) {
			ssl_errstr(ebuf, sizeof(ebuf), "unreadable");
			snprintf(err, errlen, "ssl.certificate.location %s: %s",
			    cfg->ssl_cert_location, ebuf);
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, cfg->ssl_key_location,
			SSL_FILETYPE_PEM) != 1) {
			ssl_errstr(ebuf, sizeof(ebuf), "unreadable");
			snprintf(err, errlen, "ssl.key.location %s: %s",
			    cfg->ssl_key_location, ebuf);
			goto fail;
		}
		if (SSL_CTX_check_private_key(ctx) != 1) {
			snprintf(err, errlen, "ssl.key.location %s does not "
			    "match ssl.certificate.location %s",
			    cfg->ssl_key_location, cfg->ssl_cert_location);
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
