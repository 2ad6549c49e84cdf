/*
 * safefile.h: reading files whose names come from untrusted input.
 *
 * CreateMirror carries file names (ssl.ca.location, ssl.certificate.location,
 * ssl.key.location, and the ${file:...} / ${dir:...} config providers) from
 * any admin client.  Such a name is only ever opened when
 *
 *   - it is absolute and, once every symbolic link is resolved, lies inside
 *     one of the directories the operator allows in mirrord.yaml
 *     (mirrors.allowed_file_dirs), and
 *   - it names a regular file (never a device, fifo, socket, directory or
 *     anything under /proc, /sys or /dev), no larger than the cap.
 *
 * safefile_check() looks without opening (lstat/realpath only), so it is
 * cheap enough for an admin handler; safefile_read() opens with
 * O_NONBLOCK | O_NOCTTY, re-checks the opened descriptor with fstat and reads
 * at most max bytes.  Both name what is wrong in err: the path, and "not a
 * regular file", "outside the allowed directories (/etc/mirrord, ...)",
 * "larger than 1048576 bytes", or the system error.
 */
#ifndef MIRRORD_SAFEFILE_H
#define MIRRORD_SAFEFILE_H

#include <stddef.h>

/* Default cap for a PEM file or a properties file named over the wire. */
#define SAFEFILE_DEFAULT_MAX (1u << 20)

/*
 * allowed: NULL-terminated list of absolute directory names; NULL or empty
 * means no file named over the wire may be read at all.
 * The size cap of safefile_check() is SAFEFILE_DEFAULT_MAX; it also refuses
 * a file the process may not read (access(R_OK)).
 * Returns 0, or -1 with err filled.
 */
int safefile_check(const char *path, const char *const *allowed, char *err,
    size_t errlen);

/*
 * Reads the whole file into a NUL-terminated malloc'd buffer (*out, length
 * in *outlen, both untouched on error) after the checks above.
 * Returns 0, or -1 with err filled.
 */
int safefile_read(const char *path, const char *const *allowed, size_t max,
    char **out, size_t *outlen, char *err, size_t errlen);

#endif
