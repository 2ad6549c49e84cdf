/*
 * props.h: a reader for Java .properties files, the format Kafka's tools
 * take with --command-config and --mirror-config, so kafka-mirrors can read
 * the files operators already have.
 *
 * The grammar is java.util.Properties.load(): comment lines start with '#'
 * or '!'; a key ends at the first unescaped '=', ':' or whitespace; one
 * separator and the whitespace around it are skipped; a line ending in an
 * odd number of backslashes continues on the next line with its leading
 * whitespace dropped; \t \n \r \f \uXXXX escapes are decoded (UTF-16
 * surrogate pairs are joined, the result is UTF-8) and a backslash before
 * any other character stands for that character.  A later duplicate key
 * replaces the earlier value, as in Java.
 *
 * Two differences from Java, both deliberate: bytes are taken as UTF-8
 * (Java's InputStream overload reads ISO-8859-1) and must be valid UTF-8;
 * a NUL character (a raw byte or \u0000) is an error, because the values end
 * up in C strings and Kafka protocol strings.
 *
 * The struct props owns every string in it.
 */
#ifndef MIRRORD_PROPS_H
#define MIRRORD_PROPS_H

#include <stddef.h>

/* Hard caps: a properties file is configuration, not data. */
#define PROPS_MAX_FILE_BYTES (1024 * 1024)
#define PROPS_MAX_ENTRIES 10000

struct props {
	size_t n;      /* entries, in order of first appearance */
	char **names;  /* names[i] and values[i] are NUL-terminated UTF-8 */
	char **values;
	size_t cap;    /* allocated slots (internal) */
};

void props_init(struct props *p);
void props_fini(struct props *p);

/*
 * Parses len bytes of buf; srcname names the input in errors.  On error
 * returns -1 with "srcname:line: reason" in err (the line where the bad
 * logical line starts) and leaves p empty.  p must be initialised.
 */
int props_parse_buf(struct props *p, const char *buf, size_t len,
    const char *srcname, char *err, size_t errlen);

/* Reads and parses a file; errors are "path: reason" or "path:line: reason". */
int props_parse_file(struct props *p, const char *path, char *err,
    size_t errlen);

/* The value of name, or NULL. */
const char *props_get(const struct props *p, const char *name);

#endif
