/*
 * secretbox.h: secrets at rest.  Seals short strings (SASL passwords, key
 * passwords from CreateMirror) with AES-256-GCM under one key per daemon,
 * so the metadata log and its snapshots never hold them in clear.
 *
 * A sealed value is text, so it travels wherever a config value does:
 *
 *   enc:v1:<base64 of: key id (4) | nonce (12) | ciphertext | tag (16)>
 *
 * The nonce is random for every value.  The key id is the first 4 bytes of
 * SHA-256("mirrord secretbox key id" | key): it tells "sealed under another
 * key" (a wrong key file) from "damaged" without trying to decrypt.  The
 * caller passes associated data that binds a value to where it belongs
 * (mirror and config name), so a sealed value copied to another mirror or
 * key does not open.
 *
 * The key file holds the 32-byte key in base64 on one line (mode 0600), or
 * the 32 raw bytes.  secretbox_create_key_file() writes a new random one;
 * it never replaces an existing file.
 *
 * Nothing here logs; every error names what is wrong, never a secret.
 */
#ifndef MIRRORD_SECRETBOX_H
#define MIRRORD_SECRETBOX_H

#include <stddef.h>
#include <stdint.h>

#define SECRETBOX_KEY_LEN 32
#define SECRETBOX_PREFIX "enc:v1:"
#define SECRETBOX_MAX_PLAIN (1u << 20)

struct secretbox;

/* A box for key (copied; the copy is wiped by secretbox_free).  NULL on
 * ENOMEM. */
struct secretbox *secretbox_new(const uint8_t key[SECRETBOX_KEY_LEN]);
void secretbox_free(struct secretbox *b);
/* The key id as 8 hex digits (for messages: it reveals nothing). */
const char *secretbox_key_id(const struct secretbox *b);

/*
 * Reads the key of path.  Returns 0; -1 with errno ENOENT and err filled
 * when the file does not exist; -1 with err filled when it is unreadable
 * or holds no valid key.  Errors name the path.
 */
int secretbox_load_key(const char *path, uint8_t key[SECRETBOX_KEY_LEN],
    char *err, size_t errlen);
/* Creates path (mode 0600, never over an existing file) holding a new
 * random key, fsyncs it and its directory, and returns the key. */
int secretbox_create_key_file(const char *path,
    uint8_t key[SECRETBOX_KEY_LEN], char *err, size_t errlen);

/* 1 if value has the sealed form's prefix. */
int secretbox_is_sealed(const char *value);
/* The key id (8 hex digits) a sealed value names, into id[9]; -1 if the
 * value is not well-formed. */
int secretbox_sealed_key_id(const char *sealed, char id[9]);

/* Seals plain (at most SECRETBOX_MAX_PLAIN bytes) with associated data
 * aad[0..aadlen); *out is a malloc'd NUL-terminated sealed value. */
int secretbox_seal(const struct secretbox *b, const char *plain,
    const void *aad, size_t aadlen, char **out, char *err, size_t errlen);
/* Opens a sealed value; *out is the malloc'd plain text (wipe it before
 * free: secretbox_wipe_free).  Fails naming the reason: not the sealed
 * form, sealed under another key (both key ids), or damaged/not for this
 * place (authentication failed). */
int secretbox_open(const struct secretbox *b, const char *sealed,
    const void *aad, size_t aadlen, char **out, char *err, size_t errlen);

/* Zeroes a NUL-terminated string and frees it.  NULL is a no-op. */
void secretbox_wipe_free(char *s);

#endif
