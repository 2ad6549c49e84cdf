/*
 * scram.h: the server side of SASL SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
 * RFC 7677) and of SASL/PLAIN checked against SCRAM credentials, for
 * mirrord's admin listener.  The client side is lib/ksasl.
 *
 * Pure message handling, no I/O and no logging.  A server knows a user by
 * salt, iteration count, StoredKey and ServerKey only (struct scram_cred),
 * never the password.  Error strings never contain secrets.
 *
 * Unknown users: the exchange goes on with a made-up salt derived from a
 * per-process secret, so a client cannot tell an unknown user from a wrong
 * password (both fail at the client-final-message).
 */
#ifndef MIRRORD_SCRAM_H
#define MIRRORD_SCRAM_H

#include <stddef.h>
#include <stdint.h>

#define SCRAM_MAX_HASH 64      /* SHA-512 */
#define SCRAM_SALT_BYTES 16    /* what scram_cred_derive() draws */
#define SCRAM_MAX_SALT 128
#define SCRAM_MIN_ITER 4096    /* RFC 7677 */
#define SCRAM_MAX_ITER 16384   /* Kafka's upper bound; bounds PBKDF2 work */
#define SCRAM_MAX_MSG 4096     /* longest client message accepted */
#define SCRAM_MAX_PLAIN_PASSWORD 1024 /* RFC 4616 says 255; be lenient */

/* One user's credential for one mechanism (a ksasl_mech value). */
struct scram_cred {
	int mech;                          /* KSASL_SCRAM_SHA_256 or _512 */
	int iterations;
	uint8_t salt[SCRAM_MAX_SALT];
	size_t salt_len;
	uint8_t stored_key[SCRAM_MAX_HASH];
	uint8_t server_key[SCRAM_MAX_HASH];
};

/* Hash length of a SCRAM mechanism (32 or 64), 0 for others. */
size_t scram_hash_len(int mech);

/*
 * Derives a credential from a password: a fresh random salt when salt is
 * NULL.  iterations must be SCRAM_MIN_ITER..SCRAM_MAX_ITER.
 */
int scram_cred_derive(int mech, const char *password, size_t pwlen,
    const uint8_t *salt, size_t salt_len, int iterations,
    struct scram_cred *out, char *err, size_t errlen);

/* 1 if password matches cred (constant-time compare of StoredKey). */
int scram_cred_check_password(const struct scram_cred *cred,
    const char *password, size_t pwlen);

/* Base64 (standard alphabet, padded).  Encode returns -1 if dst is short;
 * decode is strict (length a multiple of 4, padding only at the end). */
int scram_b64_encode(char *dst, size_t dstlen, const uint8_t *src, size_t len);
int scram_b64_decode(uint8_t *dst, size_t dstlen, size_t *outlen,
    const char *src, size_t len);

/*
 * Looks a user's credential up for the server: returns 0 and fills *cred,
 * or -1 when the user has none for that mechanism.
 */
typedef int (*scram_lookup_fn)(void *arg, const char *user, int mech,
    struct scram_cred *cred);

struct scram_server;

struct scram_server *scram_server_new(int mech, scram_lookup_fn lookup,
    void *arg);
void scram_server_free(struct scram_server *s);

/*
 * One client message in, one server message out (*out valid until the next
 * call or free).  Returns:
 *   1  continue: send *out, wait for the next client message
 *   0  authenticated: send *out (server-final "v=..."); scram_server_user()
 *      names the user
 *  -1  failed: why says what (never a secret); *out may hold a
 *      server-final "e=..." message for transports that carry one
 */
int scram_server_step(struct scram_server *s, const uint8_t *in, size_t len,
    const char **out, size_t *outlen, char *why, size_t whylen);
const char *scram_server_user(const struct scram_server *s);
/* The user the client-first-message named (authenticated or not), or NULL. */
const char *scram_server_claimed_user(const struct scram_server *s);

/*
 * SASL/PLAIN (RFC 4616): parses "authzid\0authcid\0passwd".  On success
 * returns 0 with the user copied to user (NUL-terminated) and the password
 * pointing into msg (*pw, *pwlen).  An authzid, if given, must equal the
 * user, as Kafka requires.
 */
int scram_plain_parse(const uint8_t *msg, size_t len, char *user,
    size_t userlen, const char **pw, size_t *pwlen, char *why, size_t whylen);

#endif
