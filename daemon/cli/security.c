/* cli/security.c: see cli/security.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "security.h"
#include "ksasl.h"

void clisec_init(struct clisec *s)
{
	memset(s, 0, sizeof(*s));
	s->verify_host = 1;
	s->mech = -1;
}

static void wipe_free(char *p)
{
	if (p != NULL) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
}

void clisec_fini(struct clisec *s)
{
	free(s->ca);
	free(s->cert);
	free(s->key);
	free(s->truststore);
	free(s->keystore);
	wipe_free(s->key_password);
	free(s->user);
	wipe_free(s->password);
	clisec_init(s);
}

static int set(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst != NULL ? 1 : -1;
}

/* The value of name="..." (or name=word) in a JAAS line, unescaped. */
static char *jaas_value(const char *line, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = line; (p = strstr(p, name)) != NULL; p += nl) {
		const char *q = p + nl;
		char *out, *o;

		if (p > line && p[-1] != ' ' && p[-1] != '\t')
			continue;
		while (*q == ' ')
			q++;
		if (*q != '=')
			continue;
		q++;
		while (*q == ' ')
			q++;
		out = o = malloc(strlen(q) + 1);
		if (out == NULL)
			return NULL;
		if (*q == '"') {
			for (q++; *q != '\0' && *q != '"'; q++) {
				if (*q == '\\' && q[1] != '\0')
					q++;
				*o++ = *q;
			}
		} else {
			while (*q != '\0' && *q != ' ' && *q != ';')
				*o++ = *q++;
		}
		*o = '\0';
		return out;
	}
	return NULL;
}

int clisec_prop(struct clisec *s, const char *k, const char *v, char *err,
    size_t errlen)
{
	if (strcmp(k, "security.protocol") == 0) {
		if (strcasecmp(v, "PLAINTEXT") == 0)
			s->tls = 0, s->sasl = 0;
		else if (strcasecmp(v, "SSL") == 0)
			s->tls = 1, s->sasl = 0;
		else if (strcasecmp(v, "SASL_PLAINTEXT") == 0)
			s->tls = 0, s->sasl = 1;
		else if (strcasecmp(v, "SASL_SSL") == 0)
			s->tls = 1, s->sasl = 1;
		else {
			snprintf(err, errlen, "security.protocol=%s: expected "
			    "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v);
			return -1;
		}
		return 1;
	}
	if (strcmp(k, "ssl.ca.location") == 0)
		return set(&s->ca, v);
	if (strcmp(k, "ssl.truststore.location") == 0)
		return set(&s->truststore, v);
	if (strcmp(k, "ssl.keystore.location") == 0)
		return set(&s->keystore, v);
	if (strcmp(k, "ssl.truststore.type") == 0 ||
	    strcmp(k, "ssl.keystore.type") == 0) {
		if (strcasecmp(v, "PEM") != 0) {
			snprintf(err, errlen, "%s=%s: only PEM stores are read "
			    "(or use ssl.ca.location, ssl.certificate.location "
			    "and ssl.key.location)", k, v);
			return -1;
		}
		if (k[4] == 't')
			s->truststore_pem = 1;
		else
			s->keystore_pem = 1;
		return 1;
	}
	if (strcmp(k, "ssl.certificate.location") == 0)
		return set(&s->cert, v);
	if (strcmp(k, "ssl.key.location") == 0)
		return set(&s->key, v);
	if (strcmp(k, "ssl.key.password") == 0 ||
	    strcmp(k, "ssl.keystore.password") == 0)
		return set(&s->key_password, v);
	if (strcmp(k, "ssl.endpoint.identification.algorithm") == 0) {
		if (v[0] == '\0' || strcasecmp(v, "none") == 0)
			s->verify_host = 0;
		else if (strcasecmp(v, "https") == 0)
			s->verify_host = 1;
		else {
			snprintf(err, errlen, "%s=%s: expected https or empty", k, v);
			return -1;
		}
		return 1;
	}
	if (strcmp(k, "sasl.mechanism") == 0 || strcmp(k, "sasl.mechanisms") == 0) {
		s->mech = ksasl_mech_parse(v);
		if (s->mech < 0) {
			snprintf(err, errlen, "%s=%s: expected PLAIN, SCRAM-SHA-256 "
			    "or SCRAM-SHA-512", k, v);
			return -1;
		}
		return 1;
	}
	if (strcmp(k, "sasl.username") == 0)
		return set(&s->user, v);
	if (strcmp(k, "sasl.password") == 0)
		return set(&s->password, v);
	if (strcmp(k, "sasl.jaas.config") == 0) {
		char *u = jaas_value(v, "username"), *p = jaas_value(v, "password");

		if (u == NULL || p == NULL) {
			free(u);
			wipe_free(p);
			/* The value holds a password: never quote it. */
			snprintf(err, errlen, "sasl.jaas.config: expected a "
			    "PlainLoginModule or ScramLoginModule line with "
			    "username=\"...\" and password=\"...\"");
			return -1;
		}
		free(s->user);
		wipe_free(s->password);
		s->user = u;
		s->password = p;
		return 1;
	}
	return 0;
}

int clisec_check(struct clisec *s, char *err, size_t errlen)
{
	if (s->truststore != NULL && s->ca == NULL) {
		if (!s->truststore_pem) {
			snprintf(err, errlen, "ssl.truststore.location needs "
			    "ssl.truststore.type=PEM (or use ssl.ca.location)");
			return -1;
		}
		s->ca = s->truststore;
		s->truststore = NULL;
	}
	if (s->keystore != NULL && s->cert == NULL) {
		if (!s->keystore_pem) {
			snprintf(err, errlen, "ssl.keystore.location needs "
			    "ssl.keystore.type=PEM (or use ssl.certificate.location "
			    "and ssl.key.location)");
			return -1;
		}
		s->cert = strdup(s->keystore);
		s->key = s->keystore;
		s->keystore = NULL;
	}
	if ((s->cert == NULL) != (s->key == NULL)) {
		snprintf(err, errlen, "ssl.certificate.location and "
		    "ssl.key.location go together");
		return -1;
	}
	if (s->sasl) {
		if (s->mech < 0) {
			snprintf(err, errlen, "security.protocol SASL_* needs "
			    "sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)");
			return -1;
		}
		if (s->user == NULL || s->password == NULL) {
			snprintf(err, errlen, "security.protocol SASL_* needs "
			    "sasl.jaas.config (or sasl.username and sasl.password)");
			return -1;
		}
	}
	return 0;
}

static void ssl_errstr(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "TLS error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

static int pw_cb(char *buf, int size, int rwflag, void *u)
{
	size_t n = strlen(u);

	(void)rwflag;
	if (n > (size_t)size)
		return -1;
	memcpy(buf, u, n);
	return (int)n;
}

SSL *clisec_tls_connect(const struct clisec *s, int fd, const char *host,
    int timeout_ms, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;
	char e[256];
	struct in6_addr a6;
	struct in_addr a4;
	int rc;

	if (ctx == NULL) {
		ssl_errstr(e, sizeof(e));
		snprintf(err, errlen, "TLS: %s", e);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((s->ca != NULL ? SSL_CTX_load_verify_locations(ctx, s->ca, NULL) :
	    SSL_CTX_set_default_verify_paths(ctx)) != 1) {
		ssl_errstr(e, sizeof(e));
		snprintf(err, errlen, "ssl.ca.location %s: %s",
		    s->ca != NULL ? s->ca : "(system default)", e);
		goto fail;
	}
	if (s->cert != NULL) {
		if (s->key_password != NULL) {
			SSL_CTX_set_default_passwd_cb(ctx, pw_cb);
			SSL_CTX_set_default_passwd_cb_userdata(ctx, s->key_password);
		}
		if (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1) {
			ssl_errstr(e, sizeof(e));
			snprintf(err, errlen, "ssl.certificate.location %s: %s",
			    s->cert, e);
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, s->key, SSL_FILETYPE_PEM) != 1) {
			ssl_errstr(e, sizeof(e));
			snprintf(err, errlen, "ssl.key.location %s: %s", s->key, e);
			goto fail;
		}
	}
	ssl = SSL_new(ctx);
	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1) {
		ssl_errstr(e, sizeof(e));
		snprintf(err, errlen, "TLS: %s", e);
		goto fail;
	}
	if (inet_pton(AF_INET, host, &a4) != 1 &&
	    inet_pton(AF_INET6, host, &a6) != 1)
		SSL_set_tlsext_host_name(ssl, host);
	if (s->verify_host) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);

		if (inet_pton(AF_INET, host, &a4) == 1 ||
		    inet_pton(AF_INET6, host, &a6) == 1)
			X509_VERIFY_PARAM_set1_ip_asc(vp, host);
		else
			X509_VERIFY_PARAM_set1_host(vp, host, 0);
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd };

		ERR_clear_error();
		rc = SSL_connect(ssl);
		if (rc == 1)
			break;
		switch (SSL_get_error(ssl, rc)) {
		case SSL_ERROR_WANT_READ:
			pfd.events = POLLIN;
			break;
		case SSL_ERROR_WANT_WRITE:
			pfd.events = POLLOUT;
			break;
		default: {
			long vr = SSL_get_verify_result(ssl);

			if (vr != X509_V_OK)
				snprintf(e, sizeof(e), "certificate verify failed: %s",
				    X509_verify_cert_error_string(vr));
			else
				ssl_errstr(e, sizeof(e));
			snprintf(err, errlen, "TLS handshake failed: %s", e);
			goto fail;
		}
		}
		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0) {
			snprintf(err, errlen, "TLS handshake timed out after %d ms",
			    timeout_ms);
			goto fail;
		}
		if (rc < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			goto fail;
		}
	}
	SSL_CTX_free(ctx); /* ssl holds its own reference */
	return ssl;
fail:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

void clisec_tls_close(SSL *ssl)
{
	if (ssl == NULL)
		return;
	SSL_shutdown(ssl);
	SSL_free(ssl);
}
