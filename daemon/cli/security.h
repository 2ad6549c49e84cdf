/*
 * cli/security.h: the security settings of kafka-mirrors' --command-config (Kafka
 * client property names) and its TLS handshake on a blocking-style socket.
 * The SASL exchange itself runs in kafka-mirrors over its request framing,
 * with lib/ksasl's client messages.
 *
 * Properties understood:
 *   security.protocol                PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
 *   ssl.ca.location                  PEM CA file (librdkafka's name)
 *   ssl.truststore.location          the same, with ssl.truststore.type=PEM (Java's)
 *   ssl.certificate.location, ssl.key.location, ssl.key.password
 *   ssl.keystore.location            PEM key and certificate in one file,
 *                                    with ssl.keystore.type=PEM (Java's)
 *   ssl.endpoint.identification.algorithm   https (default) or empty
 *   sasl.mechanism                   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
 *   sasl.username, sasl.password     (librdkafka's names)
 *   sasl.jaas.config                 Java's PlainLoginModule/ScramLoginModule
 *                                    line with username="..." password="..."
 */
#ifndef MIRRORD_CLISEC_H
#define MIRRORD_CLISEC_H

#include <stddef.h>

typedef struct ssl_st SSL;

struct clisec {
	int tls, sasl;
	char *ca, *cert, *key, *key_password;
	int truststore_pem, keystore_pem; /* ssl.*store.type=PEM seen */
	char *truststore, *keystore;
	int verify_host;                  /* default 1 */
	int mech;                         /* ksasl mechanism, -1 unset */
	char *user, *password;
};

void clisec_init(struct clisec *s);
void clisec_fini(struct clisec *s);
/* 1 if key is one of ours (stored), 0 if not, -1 bad value (err says). */
int clisec_prop(struct clisec *s, const char *key, const char *value,
    char *err, size_t errlen);
/* After all properties: the combination is complete (err names what is
 * missing). */
int clisec_check(struct clisec *s, char *err, size_t errlen);

/* TLS handshake on the connected non-blocking fd, within timeout_ms;
 * host is checked against the certificate unless verify_host is 0. */
SSL *clisec_tls_connect(const struct clisec *s, int fd, const char *host,
    int timeout_ms, char *err, size_t errlen);
void clisec_tls_close(SSL *ssl);

#endif
