/*
 * kblock.h: a blocking Kafka client connection for code that must wait for
 * its answer anyway: the replicated metadata log (lib/metadata/mlog_kafka.c), whose
 * interface is synchronous like fsync, and the tools built on it.
 *
 * One TCP connection (TLS and SASL from a prepared struct kconn_config, the
 * same settings the data plane's kconn uses), requests sent one at a time,
 * every step bounded by a deadline.  No event loop and no threads: a caller
 * on the loop thread blocks for at most the timeout it passes.  The codec is
 * the generated kp_ one, through kp_api_table's adaptors.
 *
 * The struct kconn_config is the caller's and must outlive the connection.
 */
#ifndef MIRRORD_KBLOCK_H
#define MIRRORD_KBLOCK_H

#include <stddef.h>
#include <stdint.h>

struct karena;
struct kconn_config;
struct kblock;

/* Connects to host:port, runs TLS and SASL as cfg says, within timeout_ms.
 * NULL with err naming the address and the step that failed. */
struct kblock *kblock_connect(const struct kconn_config *cfg,
    const char *host, int port, int timeout_ms, char *err, size_t errlen);
void kblock_free(struct kblock *c);
/* "host:port" of the connection. */
const char *kblock_addr(const struct kblock *c);

/*
 * One round trip: encodes req (the request struct of api_key), sends it,
 * waits at most timeout_ms for the answer and decodes it into resp (the
 * response struct of the same key, initialised here).  Decoded strings
 * point into the returned frame: free() it after use.  NULL with err on a
 * transport error, a timeout or a malformed answer; the connection is then
 * unusable (Kafka answers in order): free it.
 */
uint8_t *kblock_call(struct kblock *c, int16_t api_key, int16_t version,
    const void *req, void *resp, struct karena *a, int timeout_ms, char *err,
    size_t errlen);

#endif
