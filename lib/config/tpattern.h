/*
 * tpattern.h: topic patterns as Kafka users write them.  A pattern is a Java
 * regular expression matched against a whole topic name, as
 * java.util.regex.Matcher.matches() does: "foo|bar" selects exactly "foo"
 * and "bar".  mirrord compiles patterns with PCRE2 (UTF, anchored at both
 * ends), whose syntax is Java's for everything people put in topic
 * patterns (classes, \d \w \s, \Q..\E, (?i), lazy and possessive
 * quantifiers, atomic groups, look-around).
 *
 * Patterns come from the wire, so every one is bounded: its length, the
 * nesting of its parentheses and its compiled size when it is compiled;
 * backtracking steps, depth and heap on every match.  tpattern_check() also
 * tries a pattern on worst-case names and refuses one that hits a limit
 * there.  A match that hits a limit later is no match, logged once per
 * compiled pattern; a pattern that keeps hitting limits is disabled (it
 * matches nothing) so that a discovery pass never stalls on it.
 *
 * Used by mstate (mirror include/exclude patterns), mirrorconf
 * (mirror.topics.include/exclude) and the kafka-mirrors CLI.  Not
 * thread-safe: a compiled pattern keeps its match scratch and counters.
 */
#ifndef MIRRORD_TPATTERN_H
#define MIRRORD_TPATTERN_H

#include <stddef.h>

#define TPATTERN_MAX_LEN 4096        /* bytes of pattern text */
#define TPATTERN_MAX_NEST 32         /* nested parentheses */
#define TPATTERN_MAX_COMPILED 16384  /* bytes of compiled pattern */
#define TPATTERN_MATCH_LIMIT 100000  /* backtracking steps per match */
#define TPATTERN_DEPTH_LIMIT 2000    /* nested backtracking frames per match */
#define TPATTERN_HEAP_LIMIT_KIB 2048 /* heap for backtracking per match */
#define TPATTERN_MAX_STRIKES 8       /* limit hits before a pattern is disabled */

struct tpattern;

/*
 * Compiles pattern (NUL-terminated).  NULL with the reason in err, written
 * to follow the pattern's name: "is not a valid regular expression: missing
 * closing parenthesis at offset 3", "is refused: ...".
 */
struct tpattern *tpattern_new(const char *pattern, char *err, size_t errlen);
/* NULL is a no-op. */
void tpattern_free(struct tpattern *p);
/* The pattern as given. */
const char *tpattern_text(const struct tpattern *p);

/*
 * What the admin operations call: compiles pattern and tries it on
 * worst-case names (long runs of the characters it names, with and without
 * a tail that fails the match); 0, or -1 with "<what> '<pattern>' <reason>"
 * in err (the pattern cut at 200 bytes; what NULL: no word before it), the
 * reason as for tpattern_new(); a limit hit names the limit and its value.
 */
int tpattern_check(const char *pattern, const char *what, char *err,
    size_t errlen);

/*
 * 1 if the whole of name matches.  A match that hits a limit, a name that
 * is not UTF-8, or a disabled pattern: 0, and the first such outcome of
 * each compiled pattern is logged (log_warnx).
 */
int tpattern_match(struct tpattern *p, const char *name);
/* The same without logging: 1, 0, or -1 with the reason in err. */
int tpattern_match_err(struct tpattern *p, const char *name, char *err,
    size_t errlen);

/*
 * Comma-separated lists of patterns and names (the CLI's --topic,
 * mirror.topics.include): cuts s in place at its next separating comma,
 * one that is not escaped, between \Q and \E, or inside (), [] or {}, so
 * "a{1,3},b" is two entries.  Returns the entry (not trimmed); *rest is
 * what follows, NULL after the last entry.
 */
char *tpattern_list_next(char *s, char **rest);

#endif
