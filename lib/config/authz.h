/*
 * authz.h: who may do what to which mirror on the admin listener (module
 * prefix authz_).
 *
 * The rules come from the authorization section of mirrord.yaml
 * (daemonconf parses and validates them with the authz_check_* helpers
 * below; this module compiles them and answers questions).  An authz object
 * is immutable: a reload builds a new one from the new config and the admin
 * server swaps it in.  It owns copies of everything it needs, so the config
 * it came from may be freed.
 *
 * Operations (the ACL vocabulary, as Kafka's resource operations):
 *   describe          ListMirrors, DescribeMirrors
 *   alter             CreateMirror, AddTopicsToMirror, RemoveTopicsFromMirror,
 *                     PauseMirrorTopics, ResumeMirrorTopics,
 *                     RecoverMirrorTopics, DeleteMirror
 *   describe_configs  DescribeConfigs of a mirror (CLUSTER_MIRROR, 64)
 *   alter_configs     IncrementalAlterConfigs of a mirror
 * "all" in a rule stands for every one.  As in Kafka, allowing alter
 * implies allowing describe and allowing alter_configs implies
 * describe_configs; a deny implies nothing.
 *
 * Decision for (principal, operation, mirror), when authorization is on:
 *   1. a super user is allowed everything;
 *   2. a deny rule that matches wins over any allow rule;
 *   3. otherwise a matching allow rule allows;
 *   4. otherwise denied (deny by default).
 * A rule matches when its principal is the principal or "Type:*" of the same
 * type ("User:*" matches every user, User:ANONYMOUS included), the operation
 * is among its operations, and one of its mirror patterns matches the mirror
 * name: a literal name, a prefix ending in '*' ("prod-*"), or "*".
 *
 * When authorization is off every principal may do everything.  This module
 * logs nothing: the caller knows the peer and the request.
 */
#ifndef MIRRORD_AUTHZ_H
#define MIRRORD_AUTHZ_H

#include <stddef.h>

struct config;
struct authz;

#define AUTHZ_ANONYMOUS "User:ANONYMOUS"

/* Operations: id, name. */
#define AUTHZ_OPS(X) \
	X(DESCRIBE, "describe") \
	X(ALTER, "alter") \
	X(DESCRIBE_CONFIGS, "describe_configs") \
	X(ALTER_CONFIGS, "alter_configs")

enum authz_op {
#define X(e, s) AUTHZ_##e,
	AUTHZ_OPS(X)
#undef X
	AUTHZ_OP_COUNT
};

#define AUTHZ_OP_BIT(op) (1u << (op))
#define AUTHZ_OP_ALL ((1u << AUTHZ_OP_COUNT) - 1)

/* Limits on what the config may hold (checked by daemonconf). */
#define AUTHZ_MAX_RULES 1000
#define AUTHZ_MAX_PATTERNS 1000     /* mirror patterns in one rule */
#define AUTHZ_MAX_SUPER_USERS 1000
#define AUTHZ_MAX_PRINCIPAL_LEN 1024

const char *authz_op_name(enum authz_op op);

/* ---- validation helpers (daemonconf) -------------------------------------- */

/* An operation's name or "all" into a mask of AUTHZ_OP_BIT()s; -1 if none. */
int authz_parse_op(const char *s, unsigned *mask);
/*
 * 0 if s is a principal "Type:name" (User:alice, User:CN=host,O=org); with
 * wildcard, "Type:*" is accepted too.  -1 with the reason in why.
 */
int authz_check_principal(const char *s, int wildcard, char *why,
    size_t whylen);
/* 0 if s is a mirror name, a prefix ending in '*', or "*"; -1 with why. */
int authz_check_pattern(const char *s, char *why, size_t whylen);

/* ---- the rule set ------------------------------------------------------ */

/*
 * Builds the rules of cfg's authorization section.  authn_on tells whether
 * the admin listener authenticates clients (its security protocol is not
 * PLAINTEXT); authorization.enabled = auto turns authorization on then, or
 * when any rule or super user is configured.  NULL with the reason in err
 * only when out of memory (cfg is valid: daemonconf checked it).
 */
struct authz *authz_new(const struct config *cfg, int authn_on, char *err,
    size_t errlen);
void authz_free(struct authz *az);

int authz_enabled(const struct authz *az);
size_t authz_rule_count(const struct authz *az);
size_t authz_super_user_count(const struct authz *az);
/* One line on what is in force: "on (3 rules, 1 super user)", "off (...)". */
void authz_describe(const struct authz *az, char *buf, size_t len);

/*
 * 1 if principal may do op to the mirror named mirror, else 0.  When why is
 * not NULL it gets the reason for the log: "super user", "allowed by
 * authorization.acls[2] (mirrord.yaml:31)", "denied by authorization.acls[0]
 * (mirrord.yaml:20)", "no rule allows it", "authorization is off".
 */
int authz_allowed(const struct authz *az, const char *principal,
    enum authz_op op, const char *mirror, char *why, size_t whylen);

/*
 * 1 if principal may alter at least some mirror name (conservatively: each
 * allow rule's own name or prefix is tried against the deny rules), used
 * to warn when anonymous clients can change mirrors.
 */
int authz_may_alter_some(const struct authz *az, const char *principal);

#endif
