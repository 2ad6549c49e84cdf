/*
 * adminauth.h: security of the admin listener, as on a Kafka broker's
 * listener (server.security_protocol): TLS (the SSL_CTX, the principal of a
 * client certificate) and SASL (SaslHandshake v0-1, SaslAuthenticate v0-2,
 * PLAIN and SCRAM-SHA-256/512 against the credential store).
 *
 * adminsrv owns the sockets and frames; it asks this module what to do with
 * each request of a connection (adminauth_request) and, after a v0
 * SaslHandshake, with each raw SASL token (adminauth_raw_token).  Before a
 * client on a SASL listener has authenticated, only ApiVersions,
 * SaslHandshake and SaslAuthenticate are served; anything else closes the
 * connection, as Kafka does.
 *
 * Never logs a password or a key: only user names, mechanisms and reasons.
 */
#ifndef MIRRORD_ADMINAUTH_H
#define MIRRORD_ADMINAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "kbuf.h"

struct config;
struct adminauth;
struct adminauth_conn;
typedef struct ssl_st SSL;

/* Builds the listener's security from cfg: loads the certificate, key and
 * CA files and the credential store.  NULL with the reason in err. */
struct adminauth *adminauth_new(const struct config *cfg, char *err,
    size_t errlen);
/* SIGHUP: reads the TLS files and the credential store again (the paths
 * need a restart); on error what was loaded before stays. */
int adminauth_reload(struct adminauth *aa, const struct config *cfg,
    char *err, size_t errlen);
void adminauth_free(struct adminauth *aa);

/* 1 if connections start with a TLS handshake (SSL, SASL_SSL). */
int adminauth_tls(const struct adminauth *aa);
/* A new server-side SSL for one connection, or NULL. */
SSL *adminauth_ssl_new(struct adminauth *aa);

/* Why a TLS handshake failed, as far as ssl knows (buf is left alone
 * otherwise): the verification error or the alert we sent. */
void adminauth_tls_failure(SSL *ssl, char *buf, size_t len);

/* Per connection.  peer names it in logs ("127.0.0.1:5555"). */
struct adminauth_conn *adminauth_conn_new(struct adminauth *aa,
    const char *peer);
void adminauth_conn_free(struct adminauth_conn *ac);

/*
 * After the TLS handshake: on an SSL listener a verified client certificate
 * makes the principal "User:" + its subject (RFC 2253), written to
 * principal.  Idempotent.  -1 (logged) when that subject is empty or does
 * not fit in plen: the caller closes the connection.
 */
int adminauth_conn_tls_ready(struct adminauth_conn *ac, SSL *ssl,
    char *principal, size_t plen);
/* 1 once adminauth_conn_tls_ready() has seen the handshake complete. */
int adminauth_conn_tls_established(const struct adminauth_conn *ac);
/* 1 while the next frame is a raw SASL token (after SaslHandshake v0). */
int adminauth_conn_raw(const struct adminauth_conn *ac);

enum adminauth_verdict {
	ADMINAUTH_DISPATCH,       /* hand the request to the dispatcher */
	ADMINAUTH_RESPOND,        /* answer with out, error_code; go on */
	ADMINAUTH_RESPOND_CLOSE,  /* answer with out, then close */
	ADMINAUTH_CLOSE,          /* close now; why says why */
};

/*
 * The gate in front of the dispatcher, for every request of a connection.
 * SaslHandshake and SaslAuthenticate are answered here (response body in
 * out); on success principal gets "User:<name>".
 */
int adminauth_request(struct adminauth_conn *ac, int16_t api_key,
    int16_t api_version, struct kr *body, struct karena *arena,
    struct kw *out, int16_t *error_code, char *principal, size_t plen,
    char *why, size_t whylen);

/*
 * A raw SASL token (Kafka's framing after SaslHandshake v0): the answer
 * token goes to out (adminsrv frames it).  Returns ADMINAUTH_RESPOND or
 * ADMINAUTH_CLOSE (a failed login closes the connection).
 */
int adminauth_raw_token(struct adminauth_conn *ac, const uint8_t *tok,
    size_t len, struct kw *out, char *principal, size_t plen, char *why,
    size_t whylen);

/* Largest raw token accepted. */
#define ADMINAUTH_MAX_TOKEN 8192

/*
 * Largest request frame (size prefix) accepted from a client on a SASL
 * listener before it has logged in: Kafka's sasl.server.max.receive.size
 * default.  Larger is refused at the size prefix, before any of it is
 * buffered.  Not a config key: what may come before the login is
 * ApiVersions, SaslHandshake and a SaslAuthenticate whose token is at most
 * ADMINAUTH_MAX_TOKEN bytes, so no client needs more, and less saves
 * nothing the buffered-byte limits do not.
 */
#define ADMINAUTH_MAX_RECEIVE_UNAUTHENTICATED 524288

/* 0 while the listener needs a SASL login that this connection has not
 * completed, else 1. */
int adminauth_conn_authenticated(const struct adminauth_conn *ac);

#endif
