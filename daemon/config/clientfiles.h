/*
 * config/clientfiles.h: a mirror's source client settings with the files they name
 * read off the event loop (module prefix clientfiles_).
 *
 * A mirror's configs come from the wire, so the files they name
 * (ssl.ca.location, ssl.certificate.location, ssl.key.location) are read by
 * the fileload worker, checked again against mirrors.allowed_file_dirs as
 * it is when they are read (a mirror stored before a check, or a file that
 * changed since, is refused here), and handed to the caller as the client
 * properties plus ssl.*.pem properties carrying the contents, ready for
 * kconn_config_set().  Every named file is read, whatever
 * security.protocol is: a mirror that names a bad file is unusable.
 */
#ifndef MIRRORD_CLIENTFILES_H
#define MIRRORD_CLIENTFILES_H

#include <stddef.h>

struct event_base;
struct mirrorconf;
struct clientfiles;

/*
 * On success err is NULL and names/values hold n client properties (valid
 * during the call only; the contents may be private keys).  On failure err
 * says which key, which path and why ("ssl.ca.location: /x: not a regular
 * file (a fifo)") and names/values are NULL.  Runs once, on the loop, never
 * from inside clientfiles_start(), unless cancelled first.
 */
typedef void (*clientfiles_cb)(void *arg, const char *err,
    const char *const *names, const char *const *values, size_t n);

/* The number of file-naming properties among mc's client properties. */
size_t clientfiles_count(const struct mirrorconf *mc);

/*
 * Starts reading.  mc must stay alive until the callback or
 * clientfiles_cancel(); allowed is copied.  NULL with err filled when nothing
 * could be started (out of memory, no thread).
 */
struct clientfiles *clientfiles_start(struct event_base *base,
    const struct mirrorconf *mc, const char *const *allowed, clientfiles_cb cb,
    void *arg, char *err, size_t errlen);
/* The callback will not run.  NULL is a no-op.  Not from the callback. */
void clientfiles_cancel(struct clientfiles *sf);

#endif
