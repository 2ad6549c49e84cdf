/*
 * adminauth.c: see adminauth.h.
 *
 * A connection on a SASL listener moves INIT -> MECH (SaslHandshake v1,
 * tokens in SaslAuthenticate) or RAW (SaslHandshake v0, raw tokens) ->
 * DONE; a failure closes the connection.  PLAIN derives the SCRAM keys
 * from the password it is given (PBKDF2, at most SCRAM_MAX_ITER
 * iterations: bounded work on the loop, a few milliseconds).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "adminauth.h"
#include "cfgprov.h"
#include "compat.h"
#include "credstore.h"
#include "daemonconf.h"
#include "kerr.h"
#include "kp_gen.h"
#include "kproto.h"
#include "ksasl.h"
#include "log.h"
#include "scram.h"
#include "secretbox.h"

/* Kafka's words for a failed login, whatever the reason. */
#define AUTH_FAILED_MSG "Authentication failed: Invalid username or password"

struct adminauth {
	int protocol;                 /* enum config_security_protocol */
	int client_auth;              /* enum config_client_auth */
	SSL_CTX *ctx;
	int mechs[KSASL_MECH_COUNT];  /* enabled */
	struct credstore *creds;
	char *creds_path;
};

enum { AS_INIT, AS_MECH, AS_RAW, AS_DONE };

struct adminauth_conn {
	struct adminauth *aa;
	char peer[64];
	int state;
	int mech;
	int tls_checked;
	int tls_refused;          /* the certificate names no usable principal */
	struct scram_server *scram;
};

/* ---- listener ------------------------------------------------------- */

static int is_tls(int proto)
{
	return proto == CONFIG_SEC_SSL || proto == CONFIG_SEC_SASL_SSL;
}

static int is_sasl(int proto)
{
	return proto == CONFIG_SEC_SASL_PLAINTEXT || proto == CONFIG_SEC_SASL_SSL;
}

static void ssl_err(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "unknown OpenSSL error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
}

static int pw_cb(char *buf, int size, int rwflag, void *u)
{
	const char *pw = u;
	size_t n = pw != NULL ? strlen(pw) : 0;

	(void)rwflag;
	if (n > (size_t)size)
		return -1;
	memcpy(buf, pw, n);
	return (int)n;
}

static SSL_CTX *make_ctx(const struct config *cfg, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	char e[256], *kpw = NULL;
	int mode = SSL_VERIFY_NONE, rc;

	if (ctx == NULL) {
		ssl_err(e, sizeof(e));
		snprintf(err, errlen, "server.security_protocol: cannot set up "
		    "TLS: %s", e);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* Resumed sessions with client certificates need a context id, or
	 * OpenSSL fails the resumption with an internal_error alert. */
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"mirrord-admin",
	    13);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	if (SSL_CTX_use_certificate_chain_file(ctx,
	    cfg->server_ssl_certificate_location) != 1) {
		ssl_err(e, sizeof(e));
		snprintf(err, errlen, "server.ssl.certificate_location %s: "
		    "cannot load the certificate: %s",
		    cfg->server_ssl_certificate_location, e);
		goto fail;
	}
	if (cfg->server_ssl_key_password != NULL) {
		/* A reference (${credential:NAME}...) is read now, never kept. */
		if (cfgprov_resolve("server.ssl.key_password",
		    cfg->server_ssl_key_password, &(struct cfgprov_opts){
		    .allowed = CFGPROV_ALL }, &kpw, err, errlen) != 0)
			goto fail;
		SSL_CTX_set_default_passwd_cb(ctx, pw_cb);
		SSL_CTX_set_default_passwd_cb_userdata(ctx, kpw);
	}
	rc = SSL_CTX_use_PrivateKey_file(ctx, cfg->server_ssl_key_location,
	    SSL_FILETYPE_PEM);
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	secretbox_wipe_free(kpw);
	if (rc != 1) {
		ssl_err(e, sizeof(e));
		snprintf(err, errlen, "server.ssl.key_location %s: cannot load "
		    "the private key%s: %s", cfg->server_ssl_key_location,
		    cfg->server_ssl_key_password != NULL ?
		    " (is server.ssl.key_password right?)" : "", e);
		goto fail;
	}
	/* The password is needed only while loading the key. */
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_err(e, sizeof(e));
		snprintf(err, errlen, "server.ssl.key_location %s does not match "
		    "server.ssl.certificate_location %s: %s",
		    cfg->server_ssl_key_location,
		    cfg->server_ssl_certificate_location, e);
		goto fail;
	}
	if (cfg->server_ssl_ca_location != NULL) {
		STACK_OF(X509_NAME) *names;

		if (SSL_CTX_load_verify_locations(ctx,
		    cfg->server_ssl_ca_location, NULL) != 1) {
			ssl_err(e, sizeof(e));
			snprintf(err, errlen, "server.ssl.ca_location %s: cannot "
			    "load: %s", cfg->server_ssl_ca_location, e);
			goto fail;
		}
		names = SSL_load_client_CA_file(cfg->server_ssl_ca_location);
		if (names != NULL)
			SSL_CTX_set_client_CA_list(ctx, names);
	}
	if (cfg->server_ssl_client_auth == CONFIG_CLIENT_AUTH_REQUESTED)
		mode = SSL_VERIFY_PEER;
	else if (cfg->server_ssl_client_auth == CONFIG_CLIENT_AUTH_REQUIRED)
		mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	SSL_CTX_set_verify(ctx, mode, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

struct adminauth *adminauth_new(const struct config *cfg, char *err,
    size_t errlen)
{
	struct adminauth *aa = calloc(1, sizeof(*aa));

	if (aa == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	aa->protocol = cfg->server_security_protocol;
	aa->client_auth = cfg->server_ssl_client_auth;
	if (is_tls(aa->protocol) && (aa->ctx = make_ctx(cfg, err, errlen)) == NULL)
		goto fail;
	if (is_sasl(aa->protocol)) {
		char why[256];

		if (config_sasl_mechanisms(cfg->server_sasl_enabled_mechanisms,
		    aa->mechs, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "server.sasl.enabled_mechanisms: %s",
			    why);
			goto fail;
		}
		aa->creds_path = strdup(cfg->server_sasl_credentials_file);
		if (aa->creds_path == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		aa->creds = credstore_load(aa->creds_path, 0, why, sizeof(why));
		if (aa->creds == NULL) {
			snprintf(err, errlen, "server.sasl.credentials_file %s", why);
			goto fail;
		}
		if (aa->mechs[KSASL_PLAIN] &&
		    aa->protocol == CONFIG_SEC_SASL_PLAINTEXT)
			log_warnx("admin: SASL/PLAIN on SASL_PLAINTEXT sends "
			    "passwords in clear; prefer SASL_SSL or SCRAM");
		log_info("admin: %zu SCRAM credential(s) loaded from %s",
		    credstore_count(aa->creds), aa->creds_path);
	}
	log_info("admin: listener security %s%s%s",
	    config_security_protocol_name(aa->protocol),
	    is_tls(aa->protocol) ? ", client certificates " : "",
	    !is_tls(aa->protocol) ? "" :
	    aa->client_auth == CONFIG_CLIENT_AUTH_REQUIRED ? "required" :
	    aa->client_auth == CONFIG_CLIENT_AUTH_REQUESTED ? "requested" :
	    "not asked for");
	return aa;
fail:
	adminauth_free(aa);
	return NULL;
}

int adminauth_reload(struct adminauth *aa, const struct config *cfg,
    char *err, size_t errlen)
{
	struct credstore *cs;
	char why[256];
	int rc = 0;

	/* The paths need a restart (cfg has the running ones); the files they
	 * name are read again, so certificates can be renewed in place. */
	if (aa->ctx != NULL) {
		char e[512];
		SSL_CTX *ctx = make_ctx(cfg, e, sizeof(e));

		if (ctx == NULL) {
			snprintf(err, errlen, "%s; keeping the TLS files loaded "
			    "before", e);
			rc = -1;
		} else {
			/* Connections keep a reference to their own context. */
			SSL_CTX_free(aa->ctx);
			aa->ctx = ctx;
			log_info("admin: TLS certificate, key and CA files reloaded");
		}
	}
	if (aa->creds_path == NULL)
		return rc;
	cs = credstore_load(aa->creds_path, 0, why, sizeof(why));
	if (cs == NULL) {
		if (rc < 0)
			log_warnx("reload: %s", err);
		snprintf(err, errlen, "server.sasl.credentials_file %s; keeping "
		    "the credentials loaded before", why);
		return -1;
	}
	credstore_free(aa->creds);
	aa->creds = cs;
	log_info("admin: %zu SCRAM credential(s) reloaded from %s",
	    credstore_count(cs), aa->creds_path);
	return rc;
}

void adminauth_free(struct adminauth *aa)
{
	if (aa == NULL)
		return;
	SSL_CTX_free(aa->ctx);
	credstore_free(aa->creds);
	free(aa->creds_path);
	free(aa);
}

int adminauth_tls(const struct adminauth *aa)
{
	return aa != NULL && aa->ctx != NULL;
}

/* Remembers the last alert we sent (a static string) for the log. */
static void info_cb(const SSL *ssl, int where, int ret)
{
	/* SSL_CB_READ_ALERT and _WRITE_ALERT share the SSL_CB_ALERT bit. */
	if (where & SSL_CB_ALERT)
		SSL_set_app_data((SSL *)(uintptr_t)ssl, (void *)(uintptr_t)(
		    ((where & SSL_CB_READ) ? 0x200 : 0x100) | (ret & 0xff)));
}

SSL *adminauth_ssl_new(struct adminauth *aa)
{
	SSL *ssl = aa->ctx != NULL ? SSL_new(aa->ctx) : NULL;

	if (ssl != NULL)
		SSL_set_info_callback(ssl, info_cb);
	return ssl;
}

void adminauth_tls_failure(SSL *ssl, char *buf, size_t len)
{
	long vr;
	uintptr_t alert;

	if (ssl == NULL)
		return;
	vr = SSL_get_verify_result(ssl);
	alert = (uintptr_t)SSL_get_app_data(ssl);
	if (vr != X509_V_OK)
		snprintf(buf, len, "client certificate not accepted: %s",
		    X509_verify_cert_error_string(vr));
	else if (alert == (0x100 | 116)) /* TLS 1.3 certificate_required */
		snprintf(buf, len, "the client sent no certificate "
		    "(server.ssl.client_auth is required)");
	else if (alert & 0x200) /* e.g. the client does not trust us */
		snprintf(buf, len, "the client sent alert: %s",
		    SSL_alert_desc_string_long((int)(alert & 0xff)));
	else if (alert != 0)
		snprintf(buf, len, "sent alert: %s",
		    SSL_alert_desc_string_long((int)(alert & 0xff)));
}

/* ---- connection ----------------------------------------------------- */

struct adminauth_conn *adminauth_conn_new(struct adminauth *aa,
    const char *peer)
{
	struct adminauth_conn *ac = calloc(1, sizeof(*ac));

	if (ac == NULL)
		return NULL;
	ac->aa = aa;
	snprintf(ac->peer, sizeof(ac->peer), "%s", peer);
	ac->state = is_sasl(aa->protocol) ? AS_INIT : AS_DONE;
	ac->mech = -1;
	return ac;
}

void adminauth_conn_free(struct adminauth_conn *ac)
{
	if (ac == NULL)
		return;
	scram_server_free(ac->scram);
	free(ac);
}

int adminauth_conn_tls_ready(struct adminauth_conn *ac, SSL *ssl,
    char *principal, size_t plen)
{
	X509 *cert;
	BIO *bio;
	char *dn = NULL;
	long len = 0;

	if (ac->tls_checked || ssl == NULL)
		return ac->tls_refused ? -1 : 0;
	ac->tls_checked = 1;
	log_debug("admin: %s: TLS handshake done (%s, %s)", ac->peer,
	    SSL_get_version(ssl), SSL_get_cipher_name(ssl));
	/* On SASL_SSL the principal comes from SASL, as on Kafka. */
	if (ac->aa->protocol != CONFIG_SEC_SSL)
		return 0;
	cert = SSL_get1_peer_certificate(ssl);
	if (cert == NULL)
		return 0;
	if (SSL_get_verify_result(ssl) != X509_V_OK) {
		X509_free(cert);
		return 0;
	}
	bio = BIO_new(BIO_s_mem());
	/* RFC 2253 as Java's X500Principal.getName() writes it: UTF-8 kept. */
	if (bio != NULL && X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0,
	    XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0)
		len = BIO_get_mem_data(bio, &dn);
	/* A verified certificate whose subject cannot be the principal whole
	 * is refused: serving it as User:ANONYMOUS or as a cut name could
	 * match another principal's rules. */
	if (len <= 0) {
		log_warnx("admin: %s: the client certificate's subject is empty or "
		    "unreadable; closing connection", ac->peer);
		ac->tls_refused = 1;
	} else if ((size_t)len + sizeof("User:") > plen) {
		log_warnx("admin: %s: the client certificate's subject (%.64s...) is "
		    "%ld bytes, longer than the %zu a principal may hold; closing "
		    "connection", ac->peer, dn, len, plen - sizeof("User:"));
		ac->tls_refused = 1;
	} else {
		snprintf(principal, plen, "User:%.*s", (int)len, dn);
		log_info("admin: %s: authenticated by client certificate as %s",
		    ac->peer, principal);
	}
	BIO_free(bio);
	X509_free(cert);
	return ac->tls_refused ? -1 : 0;
}

int adminauth_conn_tls_established(const struct adminauth_conn *ac)
{
	return ac->tls_checked;
}

int adminauth_conn_raw(const struct adminauth_conn *ac)
{
	return ac->state == AS_RAW;
}

int adminauth_conn_authenticated(const struct adminauth_conn *ac)
{
	return !is_sasl(ac->aa->protocol) || ac->state == AS_DONE;
}

static int lookup_cb(void *arg, const char *user, int mech,
    struct scram_cred *cred)
{
	struct adminauth *aa = arg;

	return credstore_lookup(aa->creds, user, mech, cred);
}

static void authenticated(struct adminauth_conn *ac, const char *user,
    char *principal, size_t plen)
{
	ac->state = AS_DONE;
	snprintf(principal, plen, "User:%s", user);
	log_info("admin: %s: authenticated as %s (SASL %s)", ac->peer,
	    principal, ksasl_mech_name(ac->mech));
}

static void auth_failed(struct adminauth_conn *ac, const char *user,
    const char *why)
{
	log_warnx("admin: %s: SASL %s authentication failed%s%s%s: %s; "
	    "closing connection", ac->peer, ksasl_mech_name(ac->mech),
	    user != NULL ? " for user '" : "", user != NULL ? user : "",
	    user != NULL ? "'" : "", why);
}

/*
 * One SASL token of the chosen mechanism.  Returns 1 (continue: send out),
 * 0 (authenticated: send out) or -1 (failed; why for the log).
 */
static int sasl_step(struct adminauth_conn *ac, const uint8_t *tok,
    size_t len, const uint8_t **out, size_t *outlen, char *principal,
    size_t plen, char *why, size_t whylen)
{
	*out = NULL;
	*outlen = 0;
	if (len > ADMINAUTH_MAX_TOKEN) {
		snprintf(why, whylen, "SASL token of %zu bytes (at most %d)", len,
		    ADMINAUTH_MAX_TOKEN);
		auth_failed(ac, NULL, why);
		return -1;
	}
	if (ac->mech == KSASL_PLAIN) {
		char user[256];
		const char *pw;
		size_t pwl;
		struct scram_cred cred;
		int ok;

		if (scram_plain_parse(tok, len, user, sizeof(user), &pw, &pwl,
		    why, whylen) < 0) {
			auth_failed(ac, NULL, why);
			return -1;
		}
		if (credstore_lookup(ac->aa->creds, user, KSASL_SCRAM_SHA_512,
		    &cred) == 0 || credstore_lookup(ac->aa->creds, user,
		    KSASL_SCRAM_SHA_256, &cred) == 0) {
			ok = scram_cred_check_password(&cred, pw, pwl);
		} else {
			/* Spend the same PBKDF2 work on an unknown user, so the
			 * answer's timing does not tell users apart. */
			memset(&cred, 0, sizeof(cred));
			cred.mech = KSASL_SCRAM_SHA_512;
			cred.iterations = SCRAM_MIN_ITER;
			cred.salt_len = SCRAM_SALT_BYTES;
			(void)scram_cred_check_password(&cred, pw, pwl);
			ok = 0;
		}
		OPENSSL_cleanse(&cred, sizeof(cred));
		if (!ok) {
			snprintf(why, whylen, "unknown user or wrong password");
			auth_failed(ac, user, why);
			return -1;
		}
		authenticated(ac, user, principal, plen);
		return 0;
	} else {
		const char *o;
		int rc;

		if (ac->scram == NULL &&
		    (ac->scram = scram_server_new(ac->mech, lookup_cb, ac->aa)) == NULL) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		rc = scram_server_step(ac->scram, tok, len, &o, outlen, why,
		    whylen);
		*out = (const uint8_t *)o;
		if (rc < 0) {
			auth_failed(ac, scram_server_claimed_user(ac->scram), why);
			return -1;
		}
		if (rc == 0)
			authenticated(ac, scram_server_user(ac->scram), principal,
			    plen);
		return rc;
	}
}

static void enabled_list(const struct adminauth *aa, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int m = 0; m < KSASL_MECH_COUNT; m++)
		if (aa->mechs[m] && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
			    n ? ", " : "", ksasl_mech_name(m));
}

static int handshake(struct adminauth_conn *ac, int16_t ver, struct kr *body,
    struct karena *arena, struct kw *out, int16_t *ec, char *why,
    size_t whylen)
{
	struct kp_sasl_handshake_request req;
	struct kp_sasl_handshake_response resp;
	struct kstr names[KSASL_MECH_COUNT];
	char mech[64], list[128];
	int verdict = ADMINAUTH_RESPOND;

	kp_sasl_handshake_request_init(&req);
	if (kp_sasl_handshake_request_decode(body, arena, ver, &req) < 0 ||
	    body->err || kp_expect_end(body) < 0) {
		snprintf(why, whylen, "malformed SaslHandshake: %s",
		    body->why != NULL ? body->why : "decode error");
		return ADMINAUTH_CLOSE;
	}
	kp_sasl_handshake_response_init(&resp);
	resp.mechanisms = names;
	resp.mechanisms_n = 0;
	for (int m = 0; m < KSASL_MECH_COUNT; m++)
		if (ac->aa->mechs[m])
			names[resp.mechanisms_n++] = kstr_c(ksasl_mech_name(m));
	snprintf(mech, sizeof(mech), "%.*s",
	    req.mechanism.len > 0 ? (int)MIN(req.mechanism.len, 63) : 0,
	    req.mechanism.p != NULL ? req.mechanism.p : "");
	if (!is_sasl(ac->aa->protocol) || ac->state == AS_DONE) {
		/* As a broker does once SASL is over (or never started). */
		resp.error_code = KERR_ILLEGAL_SASL_STATE;
	} else if (ac->state != AS_INIT) {
		resp.error_code = KERR_ILLEGAL_SASL_STATE;
		verdict = ADMINAUTH_RESPOND_CLOSE;
		log_warnx("admin: %s: second SaslHandshake during "
		    "authentication; closing connection", ac->peer);
	} else {
		int m = ksasl_mech_parse(mech);

		if (m < 0 || !ac->aa->mechs[m] ||
		    req.mechanism.len != (int32_t)strlen(mech)) {
			enabled_list(ac->aa, list, sizeof(list));
			resp.error_code = KERR_UNSUPPORTED_SASL_MECHANISM;
			verdict = ADMINAUTH_RESPOND_CLOSE;
			log_warnx("admin: %s: SASL mechanism '%s' is not enabled "
			    "(enabled: %s); closing connection", ac->peer, mech,
			    list);
		} else {
			ac->mech = m;
			ac->state = ver == 0 ? AS_RAW : AS_MECH;
		}
	}
	*ec = resp.error_code;
	if (kp_sasl_handshake_response_encode(out, ver, &resp) < 0 || out->err) {
		snprintf(why, whylen, "cannot encode the SaslHandshake response");
		return ADMINAUTH_CLOSE;
	}
	return verdict;
}

static int authenticate(struct adminauth_conn *ac, int16_t ver,
    struct kr *body, struct karena *arena, struct kw *out, int16_t *ec,
    char *principal, size_t plen, char *why, size_t whylen)
{
	struct kp_sasl_authenticate_request req;
	struct kp_sasl_authenticate_response resp;
	const uint8_t *tok = NULL;
	size_t toklen = 0;
	int verdict = ADMINAUTH_RESPOND, rc;

	kp_sasl_authenticate_request_init(&req);
	if (kp_sasl_authenticate_request_decode(body, arena, ver, &req) < 0 ||
	    body->err || kp_expect_end(body) < 0) {
		snprintf(why, whylen, "malformed SaslAuthenticate: %s",
		    body->why != NULL ? body->why : "decode error");
		return ADMINAUTH_CLOSE;
	}
	kp_sasl_authenticate_response_init(&resp);
	resp.auth_bytes = (struct kbytes){ (const uint8_t *)"", 0 };
	if (!is_sasl(ac->aa->protocol) || ac->state == AS_DONE) {
		resp.error_code = KERR_ILLEGAL_SASL_STATE;
		resp.error_message = kstr_c(is_sasl(ac->aa->protocol) ?
		    "SaslAuthenticate request received after successful "
		    "authentication" : "This listener does not use SASL");
	} else if (ac->state != AS_MECH) {
		resp.error_code = KERR_ILLEGAL_SASL_STATE;
		resp.error_message = kstr_c("SaslAuthenticate before "
		    "SaslHandshake");
		verdict = ADMINAUTH_RESPOND_CLOSE;
		log_warnx("admin: %s: SaslAuthenticate before SaslHandshake; "
		    "closing connection", ac->peer);
	} else {
		rc = sasl_step(ac, req.auth_bytes.p != NULL ? req.auth_bytes.p :
		    (const uint8_t *)"", req.auth_bytes.len > 0 ?
		    (size_t)req.auth_bytes.len : 0, &tok, &toklen, principal,
		    plen, why, whylen);
		if (rc < 0) {
			resp.error_code = KERR_SASL_AUTHENTICATION_FAILED;
			resp.error_message = kstr_c(AUTH_FAILED_MSG);
			verdict = ADMINAUTH_RESPOND_CLOSE;
		} else if (tok != NULL) {
			resp.auth_bytes = (struct kbytes){ tok, (int32_t)toklen };
		}
	}
	*ec = resp.error_code;
	if (kp_sasl_authenticate_response_encode(out, ver, &resp) < 0 ||
	    out->err) {
		snprintf(why, whylen, "cannot encode the SaslAuthenticate "
		    "response");
		return ADMINAUTH_CLOSE;
	}
	return verdict;
}

int adminauth_request(struct adminauth_conn *ac, int16_t api_key,
    int16_t api_version, struct kr *body, struct karena *arena,
    struct kw *out, int16_t *error_code, char *principal, size_t plen,
    char *why, size_t whylen)
{
	*error_code = 0;
	if ((api_key == KP_API_SASL_HANDSHAKE ||
	    api_key == KP_API_SASL_AUTHENTICATE) &&
	    !kp_api_served(api_key, api_version))
		return ADMINAUTH_DISPATCH; /* the dispatcher refuses the version */
	if (api_key == KP_API_SASL_HANDSHAKE)
		return handshake(ac, api_version, body, arena, out, error_code,
		    why, whylen);
	if (api_key == KP_API_SASL_AUTHENTICATE)
		return authenticate(ac, api_version, body, arena, out,
		    error_code, principal, plen, why, whylen);
	if (ac->state == AS_DONE || api_key == KP_API_API_VERSIONS)
		return ADMINAUTH_DISPATCH;
	snprintf(why, whylen, "%s before SASL authentication completed",
	    kp_api_name(api_key));
	return ADMINAUTH_CLOSE;
}

int adminauth_raw_token(struct adminauth_conn *ac, const uint8_t *tok,
    size_t len, struct kw *out, char *principal, size_t plen, char *why,
    size_t whylen)
{
	const uint8_t *o;
	size_t ol;
	int rc;

	if (ac->state != AS_RAW) {
		snprintf(why, whylen, "raw SASL token outside a SaslHandshake v0 "
		    "exchange");
		return ADMINAUTH_CLOSE;
	}
	rc = sasl_step(ac, tok, len, &o, &ol, principal, plen, why, whylen);
	if (rc < 0)
		return ADMINAUTH_CLOSE; /* Kafka closes without an answer here */
	if (ol > 0)
		kw_raw(out, o, ol);
	return ADMINAUTH_RESPOND;
}
