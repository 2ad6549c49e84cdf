/*
 * ksasl.h: the client side of the SASL mechanisms mirrord speaks to Kafka
 * brokers: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
 * RFC 7677).  Pure message construction and verification: no I/O, no
 * logging.  kconn carries the tokens in SaslAuthenticate requests.
 *
 * A struct ksasl_scram owns a copy of the password and the derived keys and
 * wipes them when freed.  Error strings never contain secrets.
 *
 * Not done: SASLprep (RFC 4013) normalisation of the user name and password
 * is not applied; like librdkafka, the bytes are used as given.
 */
#ifndef MIRRORD_KSASL_H
#define MIRRORD_KSASL_H

#include <stddef.h>
#include <stdint.h>

/* X(enum suffix, name as in sasl.mechanism) */
#define KSASL_MECHS(X) \
	X(PLAIN, "PLAIN") \
	X(SCRAM_SHA_256, "SCRAM-SHA-256") \
	X(SCRAM_SHA_512, "SCRAM-SHA-512")

enum ksasl_mech {
#define X(e, s) KSASL_##e,
	KSASL_MECHS(X)
#undef X
	KSASL_MECH_COUNT
};

/* Returns the mechanism for its sasl.mechanism name (case-sensitive, as in
 * Kafka), or -1. */
int ksasl_mech_parse(const char *name);
const char *ksasl_mech_name(int mech);

/*
 * PLAIN: the single client message "\0user\0password" (empty authzid).
 * Writes a malloc'd token to *out (the caller wipes and frees it).
 */
int ksasl_plain_token(const char *user, const char *password, uint8_t **out,
    size_t *outlen, char *err, size_t errlen);

/* Bounds on what a server may ask of us (RFC 7677 requires >= 4096; Kafka
 * stores at most 16384 iterations).  The upper bound keeps a hostile server
 * from making us spin the event loop in PBKDF2. */
#define KSASL_SCRAM_MIN_ITER 4096
#define KSASL_SCRAM_MAX_ITER 16384
#define KSASL_SCRAM_MAX_MSG 4096

struct ksasl_scram;

/*
 * Starts a SCRAM exchange.  nonce is the client nonce: NULL draws 24 random
 * bytes (base64, 32 characters); tests pass the RFC's fixed nonce.
 */
struct ksasl_scram *ksasl_scram_new(int mech, const char *user,
    const char *password, const char *nonce, char *err, size_t errlen);
void ksasl_scram_free(struct ksasl_scram *s);

/* client-first-message ("n,,n=user,r=nonce"); valid until the next call. */
int ksasl_scram_client_first(struct ksasl_scram *s, const char **msg,
    size_t *len);

/*
 * Takes the server-first-message, checks it (nonce extends ours, salt and
 * iteration count within bounds, no mandatory extensions) and builds the
 * client-final-message with the proof.  *msg is valid until the next call.
 */
int ksasl_scram_client_final(struct ksasl_scram *s, const uint8_t *server_first,
    size_t len, const char **msg, size_t *msglen, char *err, size_t errlen);

/* Checks the server-final-message: "v=" must carry the server signature we
 * expect (constant-time compare); "e=" is reported as the server's error. */
int ksasl_scram_verify_server(struct ksasl_scram *s, const uint8_t *server_final,
    size_t len, char *err, size_t errlen);

#endif
