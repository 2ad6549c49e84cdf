/*
 * mirrorconf.c: see mirrorconf.h.  The key table comes first; validation,
 * parsing, the librdkafka bridge and the reference writers are driven by it.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <librdkafka/rdkafka.h>

#include "cfgprov.h"
#include "compat.h"
#include "daemonconf.h"
#include "kerr.h"
#include "mirrorconf.h"
#include "tpattern.h"
#include "safefile.h"

#define ERR_INVALID_CONFIG KERR_INVALID_CONFIG   /* 40 */
#define ERR_INVALID_REQUEST KERR_INVALID_REQUEST /* 42 */

enum mtype {
	MT_STRING,    /* any non-empty string */
	MT_INT,       /* integer in [lo, hi] */
	MT_BOOL,      /* true|false */
	MT_ENUM,      /* one of choices ("a|b|c"); case-insensitive if MF_NOCASE */
	MT_HOSTLIST,  /* host:port[,host:port...] */
	MT_REGEXLIST, /* comma-separated topic patterns (tpattern.h) */
	MT_NAMELIST,  /* comma-separated config names */
	MT_CLUSTERID, /* [A-Za-z0-9._-]+ */
	MT_PRINCIPALMAP, /* Type:name=Type:name[,...], may be empty */
};

enum mkind {
	MK_SOURCE, /* bootstrap.servers, cluster id */
	MK_CLIENT, /* a client property, passed to the client as given */
	MK_MIRROR, /* a mirror.* option, parsed into struct mirrorconf */
};

#define MF_REQUIRED 0x1
#define MF_NOCASE 0x2

struct mkey {
	const char *name;
	enum mkind kind;
	enum mtype type;
	const char *def;     /* default as text (documentation and parse) */
	int64_t lo, hi;
	const char *choices;
	size_t off;          /* MK_MIRROR: offsetof(struct mirrorconf, ...) */
	unsigned flags;
	const char *desc;
};

#define O(f) offsetof(struct mirrorconf, f)
#define KIP_PROPS_EXCLUDE \
	"follower.replication.throttled.replicas,leader.replication.throttled.replicas," \
	"message.timestamp.difference.max.ms,log.message.timestamp.before.max.ms," \
	"log.message.timestamp.after.max.ms,message.timestamp.type," \
	"unclean.leader.election.enable,min.insync.replicas"

static const struct mkey mkeys[] = {
	{ "bootstrap.servers", MK_SOURCE, MT_HOSTLIST, NULL, 0, 0, NULL, 0, MF_REQUIRED,
	  "Bootstrap servers of the source cluster, host:port[,host:port...]." },
	{ "mirror.source.cluster.id", MK_SOURCE, MT_CLUSTERID, NULL, 0, 0, NULL, 0, 0,
	  "Cluster id of the source, as in the KIP's mirror configs. "
	  "It is checked for form and kept with the mirror; the id ListMirrors shows is the one mirrord learns from the source on first contact." },

	{ "client.id", MK_CLIENT, MT_STRING, "mirrord", 0, 0, NULL, 0, 0,
	  "Client id sent to the source brokers, as seen in their request logs and quotas." },
	{ "security.protocol", MK_CLIENT, MT_ENUM, "plaintext", 0, 0, "plaintext|ssl|sasl_plaintext|sasl_ssl", 0, MF_NOCASE,
	  "Protocol used to talk to the brokers (case does not matter)." },
	{ "sasl.mechanism", MK_CLIENT, MT_ENUM, "PLAIN", 0, 0, "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512", 0, 0,
	  "SASL mechanism when security.protocol is sasl_plaintext or sasl_ssl. "
	  "The librdkafka spelling sasl.mechanisms is accepted as well." },
	{ "sasl.username", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "SASL user name." },
	{ "sasl.password", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "SASL password (secret: never shown or logged)." },
	{ "ssl.ca.location", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "PEM file of the CA certificates that sign the brokers' certificates. "
	  "Unset means the system trust store." },
	{ "ssl.certificate.location", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "PEM file of the client certificate, for TLS client authentication." },
	{ "ssl.key.location", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "PEM file of the client certificate's private key." },
	{ "ssl.key.password", MK_CLIENT, MT_STRING, NULL, 0, 0, NULL, 0, 0,
	  "Password of an encrypted private key (secret: never shown or logged)." },
	{ "ssl.endpoint.identification.algorithm", MK_CLIENT, MT_ENUM, "https", 0, 0, "none|https", 0, MF_NOCASE,
	  "Whether the broker's host name is checked against its certificate: https checks, none does not." },
	{ "enable.ssl.certificate.verification", MK_CLIENT, MT_BOOL, "true", 0, 0, NULL, 0, 0,
	  "Whether the broker's certificate chain is verified at all. "
	  "Only turn it off for tests." },
	{ "request.timeout.ms", MK_CLIENT, MT_INT, "30000", 1, 900000, NULL, 0, 0,
	  "How long one request may wait for its response before it fails and is retried." },
	{ "socket.timeout.ms", MK_CLIENT, MT_INT, "60000", 10, 300000, NULL, 0, 0,
	  "Default timeout of network requests." },
	{ "socket.connection.setup.timeout.ms", MK_CLIENT, MT_INT, "30000", 1000, INT32_MAX, NULL, 0, 0,
	  "Longest time to set up a connection: TCP connect, TLS and SASL handshakes." },
	{ "connections.max.idle.ms", MK_CLIENT, MT_INT, "0", 0, INT32_MAX, NULL, 0, 0,
	  "Connections idle for this long are closed; 0 keeps them open." },
	{ "max.in.flight.requests.per.connection", MK_CLIENT, MT_INT, "1000000", 1, 1000000, NULL, 0, 0,
	  "Most requests in flight on one connection." },
	{ "receive.message.max.bytes", MK_CLIENT, MT_INT, "100000000", 1000, INT32_MAX, NULL, 0, 0,
	  "Largest response frame accepted from a broker; a larger one closes the connection." },

	{ "mirror.fetch.wait.max.ms", MK_MIRROR, MT_INT, "1000", 0, 300000, NULL, O(fetch_wait_max_ms), 0,
	  "Longest time the source may hold a Fetch while waiting for mirror.fetch.min.bytes." },
	{ "mirror.fetch.min.bytes", MK_MIRROR, MT_INT, "1", 1, 104857600, NULL, O(fetch_min_bytes), 0,
	  "Least data the source should gather before answering a Fetch." },
	{ "mirror.fetch.max.bytes", MK_MIRROR, MT_INT, "1048576", 1, 1073741824, NULL, O(fetch_max_bytes), 0,
	  "Most bytes fetched for one partition per Fetch. "
	  "A first batch larger than this is still returned whole." },
	{ "mirror.fetch.response.max.bytes", MK_MIRROR, MT_INT, "10485760", 1024, 1073741824, NULL, O(fetch_response_max_bytes), 0,
	  "Most bytes in one Fetch response across all partitions." },
	{ "mirror.fetch.backoff.ms", MK_MIRROR, MT_INT, "1000", 0, 300000, NULL, O(fetch_backoff_ms), 0,
	  "Pause before fetching again after a Fetch to the source failed." },
	{ "mirror.fetch.sessions", MK_MIRROR, MT_BOOL, "true", 0, 0, NULL, O(fetch_sessions), 0,
	  "Use incremental fetch sessions (KIP-227) where the source supports them (Fetch v7+): "
	  "a Fetch then lists only the partitions whose fetch position changed, not all of them. "
	  "A source that opens no session is fetched in full every time." },
	{ "mirror.coalesce.max.bytes", MK_MIRROR, MT_INT, "0", 0, 1000000, NULL, O(coalesce_max_bytes), 0,
	  "0 (the default) copies every batch as the source holds it. "
	  "A size N merges runs of consecutive small batches of a partition into batches of at most N bytes before they are produced: "
	  "uncompressed CreateTime batches of one source leader epoch, taken from one Fetch answer "
	  "(transactional ones too once committed: the destination gets committed data as ordinary batches; control batches never). "
	  "Every record keeps its offset, timestamp, key, value and headers, so offsets still match; "
	  "what changes is where batches begin and end on the destination (fewer, larger ones), their CRCs, "
	  "and the offset and timestamp deltas inside the merged records. "
	  "For sources written in many small batches (linger.ms 0), whose copy is otherwise bounded by the destination broker's work per batch. "
	  "N should stay below the destination topics' max.message.bytes: a merged batch refused as too large fails its partition, "
	  "whose automatic retry merges into batches of half that size until they fit." },
	{ "mirror.metadata.refresh.interval.ms", MK_MIRROR, MT_INT, "30000", 1000, 86400000, NULL, O(metadata_refresh_interval_ms), 0,
	  "How often source metadata is read again: leaders, partition counts and topics matching mirror.topics.include. "
	  "Also how often the configs of the mirrored topics are compared with the source's and the differences applied to the destination." },
	{ "mirror.failed.retry.initial.backoff.ms", MK_MIRROR, MT_INT, "1000", 1, 86400000, NULL, O(failed_retry_initial_backoff_ms), 0,
	  "First pause before a FAILED partition is retried. "
	  "Each further retry doubles it, with full jitter, up to mirror.failed.retry.max.backoff.ms." },
	{ "mirror.failed.retry.max.backoff.ms", MK_MIRROR, MT_INT, "300000", 1, 86400000, NULL, O(failed_retry_max_backoff_ms), 0,
	  "Longest pause between retries of a FAILED partition." },
	{ "mirror.failed.retry.max.attempts", MK_MIRROR, MT_INT, "100", 0, 32767, NULL, O(failed_retry_max_attempts), 0,
	  "Automatic retries of a FAILED partition before it stays FAILED; 0 never retries." },
	{ "mirror.foreign.writes", MK_MIRROR, MT_ENUM, "fail", 0, 0, "fail|skip-over", O(foreign_writes), 0,
	  "What a partition does when the destination partition holds records mirrord did not write (someone else produced to it). "
	  "fail: it stays FAILED, naming the offsets, and is never retried automatically. "
	  "skip-over: it records the foreign offsets as a translation anchor and copies every source record after them; "
	  "a partition FAILED that way resumes once this is set (kafka-mirrors --resume)." },
	{ "mirror.allow.loops", MK_MIRROR, MT_ENUM, "false", 0, 0, "false|true", O(allow_loops), 0,
	  "Whether a topic that is itself the active destination of a mirror on the source cluster may be added to this mirror. "
	  "mirrord marks every topic it mirrors on its destination (committed metadata in the consumer group __mirrord_mirrors) "
	  "and reads those marks on the source at AddTopicsToMirror: false refuses such a topic, naming the mirror and its source cluster "
	  "(a loop when that is this mirrord's destination); true mirrors it anyway." },
	{ "mirror.topics.include", MK_MIRROR, MT_REGEXLIST, "", 0, 0, NULL, O(topics_include), 0,
	  "Comma-separated regular expressions (Java syntax on PCRE2, matching the whole name) of source topics to mirror automatically. "
	  "Empty mirrors only the topics added by name." },
	{ "mirror.topics.exclude", MK_MIRROR, MT_REGEXLIST, "__.*", 0, 0, NULL, O(topics_exclude), 0,
	  "Comma-separated regular expressions of source topics never mirrored automatically. "
	  "It takes precedence over mirror.topics.include." },
	{ "mirror.groups.include", MK_MIRROR, MT_REGEXLIST, ".*", 0, 0, NULL, O(groups_include), 0,
	  "Comma-separated regular expressions (Java syntax, matching the whole name) of source consumer groups whose committed offsets of mirrored topics are translated and committed to the destination. "
	  "Empty syncs no group." },
	{ "mirror.groups.exclude", MK_MIRROR, MT_REGEXLIST, "", 0, 0, NULL, O(groups_exclude), 0,
	  "Comma-separated regular expressions of consumer groups never synced. "
	  "It takes precedence over mirror.groups.include." },
	{ "mirror.groups.sync.interval.ms", MK_MIRROR, MT_INT, "5000", 100, 86400000, NULL, O(groups_sync_interval_ms), 0,
	  "How often consumer-group offsets are synced from the source to the destination (and once more when a topic is stopped)." },
	{ "mirror.topic.properties.exclude", MK_MIRROR, MT_NAMELIST, KIP_PROPS_EXCLUDE, 0, 0, NULL, O(topic_properties_exclude_n), 0,
	  "Comma-separated topic config names that are not copied from the source topic to the mirror topic, "
	  "neither at creation nor afterwards; the destination topic's own values of these are left alone (never deleted). "
	  "The value replaces the default list." },
	{ "mirror.acls.sync", MK_MIRROR, MT_BOOL, "false", 0, 0, NULL, O(acls_sync), 0,
	  "Whether ACL bindings of the source are copied to the destination every mirror.metadata.refresh.interval.ms: "
	  "those on mirrored topics (LITERAL names and PREFIXED patterns that match one; not the wildcard *) "
	  "and on consumer groups selected by mirror.groups.include/exclude (LITERAL names), ALLOW and DENY, every operation. "
	  "Bindings mirrord copied and the source no longer has are deleted from the destination; no other binding is ever deleted. "
	  "Bindings of mirrord's own destination principal are not copied." },
	{ "mirror.acls.principal.map", MK_MIRROR, MT_PRINCIPALMAP, "", 0, 0, NULL, O(acls_map_n), 0,
	  "Comma-separated source=destination principal pairs (User:alice=User:alice-dr) applied to the ACL bindings mirror.acls.sync copies; "
	  "a principal not named is copied as it is." },
	{ "mirror.topic.read.only", MK_MIRROR, MT_BOOL, "true", 0, 0, NULL, O(topic_read_only), 0,
	  "Whether mirrored destination topics are kept read-only for everyone but mirrord while the destination runs an authorizer: "
	  "for every principal holding ALLOW WRITE (or ALL) on a mirrored topic there, mirrord adds a DENY WRITE binding on that topic, "
	  "and removes exactly those when the topic stops being mirrored or the mirror is deleted. "
	  "Without an authorizer it does nothing (foreign writes are still detected by the data plane). "
	  "When it is not set explicitly, a destination that refuses mirrord the ACL requests gets a log line and a metric, not a warning on the mirror's partitions." },
};

/* Java client keys with a librdkafka-named equivalent, and what to use. */
static const struct {
	const char *prefix;
	const char *advice;
} unsupported[] = {
	{ "sasl.jaas.config", "set sasl.mechanism, sasl.username and sasl.password instead" },
	{ "ssl.truststore.", "give the CA certificates as a PEM file in ssl.ca.location instead" },
	{ "ssl.keystore.", "give ssl.certificate.location and ssl.key.location (PEM files) instead" },
	{ "sasl.kerberos.", "GSSAPI is not supported; use PLAIN or SCRAM-SHA-256/512" },
	{ "sasl.oauthbearer.", "OAUTHBEARER is not supported; use PLAIN or SCRAM-SHA-256/512" },
	{ "sasl.login.", "use sasl.username and sasl.password" },
	{ "sasl.client.callback.handler.class", "use sasl.username and sasl.password" },
};

#define NMKEYS ARRAY_SIZE(mkeys)

static const struct mkey *mkey_find(const char *name)
{
	if (strcmp(name, "sasl.mechanisms") == 0)
		name = "sasl.mechanism";
	for (size_t i = 0; i < NMKEYS; i++)
		if (strcmp(mkeys[i].name, name) == 0)
			return &mkeys[i];
	return NULL;
}

int mirrorconf_is_known(const char *name)
{
	return mkey_find(name) != NULL;
}

int mirrorconf_is_secret(const char *name)
{
	return config_key_is_secret(name);
}

/* The closest key of the kinds in mask (1 << kind), if it looks like a typo. */
static const char *suggest(const char *name, unsigned mask)
{
	size_t bestd = SIZE_MAX, limit = MAX(strlen(name) / 4, 2);
	const char *best = NULL;

	for (size_t i = 0; i < NMKEYS; i++) {
		size_t d;

		if (!(mask & (1u << mkeys[i].kind)))
			continue;
		d = config_edit_distance(name, mkeys[i].name);
		if (d < bestd) {
			bestd = d;
			best = mkeys[i].name;
		}
	}
	return bestd <= limit ? best : NULL;
}

/* ---- value checks ----------------------------------------------------- */

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (*s == '\0' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int enum_index(const struct mkey *k, const char *s)
{
	size_t n = strlen(s);
	int idx = 0;

	for (const char *p = k->choices;; idx++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && ((k->flags & MF_NOCASE) ? strncasecmp(p, s, n) : strncmp(p, s, n)) == 0)
			return idx;
		if (bar == NULL)
			return -1;
		p = bar + 1;
	}
}

/* host:port[,host:port...], with daemonconf's rules and messages. */
static int check_hostlist(const char *s, char *why, size_t whylen)
{
	char *list = NULL;

	if (config_parse_hostlist(s, &list, why, whylen) < 0)
		return -1;
	free(list);
	return 0;
}

static void regexes_free(struct mirrorconf_regexes *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->src[i]);
		tpattern_free(r->re[i]);
	}
	free(r->src);
	free(r->re);
	memset(r, 0, sizeof(*r));
}

/*
 * Compiles a comma-separated pattern list (a comma inside (), [], {} or
 * \Q..\E, or escaped, is the pattern's); out may be NULL to only check.
 * Each pattern must match the whole topic name, like Java's
 * Matcher.matches(), and is checked against the limits of tpattern.h.
 */
static int compile_regexes(const char *s, struct mirrorconf_regexes *out,
    char *why, size_t whylen)
{
	struct mirrorconf_regexes r = { 0 };
	char *copy = strdup(s), *rest = copy, *tok;
	int rc = -1;

	if (copy == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	r.src = calloc(MIRRORCONF_MAX_PATTERNS, sizeof(*r.src));
	r.re = calloc(MIRRORCONF_MAX_PATTERNS, sizeof(*r.re));
	if (r.src == NULL || r.re == NULL) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	while (rest != NULL) {
		size_t n;

		tok = tpattern_list_next(rest, &rest);
		while (*tok == ' ')
			tok++;
		for (n = strlen(tok); n > 0 && tok[n - 1] == ' '; n--)
			tok[n - 1] = '\0';
		if (*tok == '\0')
			continue;
		if (r.n == MIRRORCONF_MAX_PATTERNS) {
			snprintf(why, whylen, "more than %d patterns", MIRRORCONF_MAX_PATTERNS);
			goto out;
		}
		if (tpattern_check(tok, NULL, why, whylen) != 0)
			goto out;
		if ((r.re[r.n] = tpattern_new(tok, why, whylen)) == NULL)
			goto out;   /* checked just now: out of memory */
		if ((r.src[r.n] = strdup(tok)) == NULL) {
			tpattern_free(r.re[r.n]);
			snprintf(why, whylen, "out of memory");
			goto out;
		}
		r.n++;
	}
	if (out != NULL) {
		*out = r;
		memset(&r, 0, sizeof(r));
	}
	rc = 0;
out:
	regexes_free(&r);
	free(copy);
	return rc;
}

static int split_names(const char *s, char ***out, size_t *outn, char *why, size_t whylen)
{
	char *copy = strdup(s), *save = NULL, *tok, **v = NULL;
	size_t n = 0;

	if (copy == NULL)
		goto oom;
	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char **nv;
		size_t len;

		while (*tok == ' ')
			tok++;
		for (len = strlen(tok); len > 0 && tok[len - 1] == ' '; len--)
			tok[len - 1] = '\0';
		if (*tok == '\0')
			continue;
		for (const char *p = tok; *p != '\0'; p++) {
			if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') {
				snprintf(why, whylen, "'%.64s' is not a topic config name", tok);
				goto fail;
			}
		}
		if (n == 1024) {
			snprintf(why, whylen, "more than 1024 names");
			goto fail;
		}
		if ((nv = realloc(v, (n + 1) * sizeof(*v))) == NULL)
			goto oom;
		v = nv;
		if ((v[n] = strdup(tok)) == NULL)
			goto oom;
		n++;
	}
	free(copy);
	if (out != NULL) {
		*out = v;
		*outn = n;
	} else {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
	}
	return 0;
oom:
	snprintf(why, whylen, "out of memory");
fail:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	free(copy);
	return -1;
}

/*
 * mirror.acls.principal.map: "A=B,C=D", each side Type:name without ',' or
 * '='; empty means none.  Stores the pairs into mc when it is not NULL.
 */
static int parse_pmap(const char *v, struct mirrorconf *mc, char *why,
    size_t whylen)
{
	const char *p = v;

	while (*p != '\0') {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		const char *c1, *c2;
		size_t l1, l2;

		if (eq == NULL || memchr(eq + 1, '=', len - (size_t)(eq - p) - 1) != NULL) {
			snprintf(why, whylen, "expected source=destination principal pairs "
			    "separated by commas, got \"%.*s\"", (int)MIN(len, 200), p);
			return -1;
		}
		l1 = (size_t)(eq - p);
		l2 = len - l1 - 1;
		c1 = memchr(p, ':', l1);
		c2 = memchr(eq + 1, ':', l2);
		if (c1 == NULL || c1 == p || (size_t)(c1 - p) + 1 >= l1 ||
		    c2 == NULL || c2 == eq + 1 || (size_t)(c2 - eq - 1) + 1 >= l2) {
			snprintf(why, whylen, "\"%.*s\": a principal is Type:name "
			    "(User:alice) on both sides of '='", (int)MIN(len, 200), p);
			return -1;
		}
		if (mc != NULL) {
			char **f = realloc(mc->acls_map_from, (mc->acls_map_n + 1) * sizeof(*f));
			char **t;

			if (f == NULL)
				goto oom;
			mc->acls_map_from = f;
			t = realloc(mc->acls_map_to, (mc->acls_map_n + 1) * sizeof(*t));
			if (t == NULL)
				goto oom;
			mc->acls_map_to = t;
			f[mc->acls_map_n] = strndup(p, l1);
			t[mc->acls_map_n] = strndup(eq + 1, l2);
			if (f[mc->acls_map_n] == NULL || t[mc->acls_map_n] == NULL) {
				free(f[mc->acls_map_n]);
				free(t[mc->acls_map_n]);
				goto oom;
			}
			mc->acls_map_n++;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
oom:
	snprintf(why, whylen, "out of memory");
	return -1;
}

static void pmap_free(struct mirrorconf *mc)
{
	for (size_t i = 0; i < mc->acls_map_n; i++) {
		free(mc->acls_map_from[i]);
		free(mc->acls_map_to[i]);
	}
	free(mc->acls_map_from);
	free(mc->acls_map_to);
	mc->acls_map_from = mc->acls_map_to = NULL;
	mc->acls_map_n = 0;
}

static void describe_expected(const struct mkey *k, char *buf, size_t len)
{
	switch (k->type) {
	case MT_INT:
		snprintf(buf, len, "expected an integer from %" PRId64 " to %" PRId64, k->lo, k->hi);
		break;
	case MT_BOOL:
		snprintf(buf, len, "expected true or false");
		break;
	case MT_ENUM: {
		size_t used = (size_t)snprintf(buf, len, "expected one of ");

		for (const char *p = k->choices; *p != '\0' && used + 2 < len; p++)
			buf[used++] = *p == '|' ? ',' : *p;
		buf[MIN(used, len - 1)] = '\0';
		break;
	}
	default:
		snprintf(buf, len, "invalid value");
		break;
	}
}

/*
 * Checks one value against its key; why gets the reason (without the
 * value).  Returns 0 or -1.
 */
static int check_value(const struct mkey *k, const char *v, char *why, size_t whylen)
{
	int64_t n;

	switch (k->type) {
	case MT_STRING:
		if (*v == '\0') {
			snprintf(why, whylen, "must not be empty");
			return -1;
		}
		return 0;
	case MT_INT:
		if (parse_int(v, &n) < 0 || n < k->lo || n > k->hi) {
			describe_expected(k, why, whylen);
			return -1;
		}
		return 0;
	case MT_BOOL:
		if (strcasecmp(v, "true") != 0 && strcasecmp(v, "false") != 0) {
			describe_expected(k, why, whylen);
			return -1;
		}
		return 0;
	case MT_ENUM:
		if (enum_index(k, v) < 0) {
			describe_expected(k, why, whylen);
			return -1;
		}
		return 0;
	case MT_HOSTLIST:
		return check_hostlist(v, why, whylen);
	case MT_REGEXLIST:
		return compile_regexes(v, NULL, why, whylen);
	case MT_NAMELIST:
		return split_names(v, NULL, NULL, why, whylen);
	case MT_PRINCIPALMAP:
		return parse_pmap(v, NULL, why, whylen);
	case MT_CLUSTERID:
		if (*v == '\0' || strlen(v) > 255 || strspn(v,
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(v)) {
			snprintf(why, whylen, "expected a cluster id of letters, digits, '.', '_' and '-'");
			return -1;
		}
		return 0;
	}
	return -1;
}

static int fail(int16_t *code, int16_t c, char *msg, size_t msglen, const char *fmt, ...)
    PRINTF_LIKE(5, 6);

static int fail(int16_t *code, int16_t c, char *msg, size_t msglen, const char *fmt, ...)
{
	va_list ap;

	if (code != NULL)
		*code = c;
	if (msg != NULL && msglen > 0) {
		va_start(ap, fmt);
		vsnprintf(msg, msglen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int has_control(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/*
 * Checks one name/value; what is "mirror config" or "client property" for
 * messages, mask the key kinds accepted.
 */
static int check_one(const char *name, const char *value, const char *what,
    unsigned mask, int16_t *code, char *msg, size_t msglen)
{
	const struct mkey *k;
	const char *sug;
	char why[256];

	if (*name == '\0')
		return fail(code, ERR_INVALID_CONFIG, msg, msglen, "Empty %s name", what);
	if (strlen(name) > MIRRORCONF_MAX_NAME)
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "%s name '%.64s...' is longer than %d bytes", what, name, MIRRORCONF_MAX_NAME);
	/* Names and values end up in logs and error messages: no control
	 * characters that could forge log lines or terminal output. */
	if (has_control(name))
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "Invalid %s name: it contains control characters", what);
	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
		if (strncmp(name, unsupported[i].prefix, strlen(unsupported[i].prefix)) == 0)
			return fail(code, ERR_INVALID_CONFIG, msg, msglen,
			    "%c%s %s is not supported: %s", toupper((unsigned char)what[0]), what + 1,
			    name, unsupported[i].advice);
	k = mkey_find(name);
	if (k == NULL || !(mask & (1u << k->kind))) {
		if (k != NULL)
			return fail(code, ERR_INVALID_CONFIG, msg, msglen,
			    "%s is not a %s here; it has its own setting", name, what);
		if ((sug = suggest(name, mask)) != NULL)
			return fail(code, ERR_INVALID_CONFIG, msg, msglen,
			    "Unknown %s '%s'; did you mean '%s'?", what, name, sug);
		return fail(code, ERR_INVALID_CONFIG, msg, msglen, "Unknown %s '%s'", what, name);
	}
	if (value == NULL)
		return 0;
	if (strlen(value) > MIRRORCONF_MAX_VALUE)
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "Value of %s %s is longer than %d bytes", what, name, MIRRORCONF_MAX_VALUE);
	if (has_control(value))
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "Invalid value for %s %s: it contains control characters", what, name);
	/* A config provider reference (${file:...}) is checked by
	 * lib/cfgprov where it is read: its value is known only at use. */
	if (cfgprov_has_ref(value)) {
		if (k->kind == MK_CLIENT)
			return 0;
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "%c%s %s cannot be a config provider reference (${...}): only "
		    "client properties can", toupper((unsigned char)what[0]),
		    what + 1, name);
	}
	if (check_value(k, value, why, sizeof(why)) < 0) {
		if (mirrorconf_is_secret(name))
			return fail(code, ERR_INVALID_CONFIG, msg, msglen,
			    "Invalid value for %s %s (value hidden): %s", what, name, why);
		return fail(code, ERR_INVALID_CONFIG, msg, msglen,
		    "Invalid value '%.128s' for %s %s: %s", value, what, name, why);
	}
	return 0;
}

int mirrorconf_check_client_prop(const char *name, const char *value,
    char *err, size_t errlen)
{
	return check_one(name, value, "client property", 1u << MK_CLIENT, NULL, err, errlen);
}

static const char *lookup(const char *const *names, const char *const *values,
    size_t n, const char *name)
{
	const char *v = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct mkey *k = mkey_find(names[i]);

		if (k != NULL && strcmp(k->name, name) == 0)
			v = values[i];
	}
	return v;
}

int mirrorconf_validate(const char *const *names, const char *const *values,
    size_t n, int16_t *err_code, char *msg, size_t msglen)
{
	const unsigned all = 1u << MK_SOURCE | 1u << MK_CLIENT | 1u << MK_MIRROR;
	const char *proto, *v1, *v2;
	int64_t a, b;

	if (err_code != NULL)
		*err_code = 0;
	if (msg != NULL && msglen > 0)
		msg[0] = '\0';
	if (n > MIRRORCONF_MAX_CONFIGS)
		return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
		    "Too many mirror configs: %zu (at most %d)", n, MIRRORCONF_MAX_CONFIGS);
	for (size_t i = 0; i < n; i++) {
		const struct mkey *ki;

		if (names[i] == NULL)
			return fail(err_code, ERR_INVALID_REQUEST, msg, msglen, "Mirror config %zu has a null name", i);
		if (check_one(names[i], values[i], "mirror config", all, err_code, msg, msglen) < 0)
			return -1;
		ki = mkey_find(names[i]);
		for (size_t j = 0; j < i; j++) {
			const struct mkey *kj = mkey_find(names[j]);

			if (kj == ki)
				return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
				    "Mirror config %s is given more than once", names[i]);
		}
	}
	v1 = lookup(names, values, n, "bootstrap.servers");
	if (v1 == NULL)
		return fail(err_code, ERR_INVALID_REQUEST, msg, msglen,
		    "Missing required mirror config bootstrap.servers (the source cluster's host:port list)");

	/* Combinations. */
	v1 = lookup(names, values, n, "mirror.failed.retry.initial.backoff.ms");
	v2 = lookup(names, values, n, "mirror.failed.retry.max.backoff.ms");
	if (v1 == NULL)
		v1 = mkey_find("mirror.failed.retry.initial.backoff.ms")->def;
	if (v2 == NULL)
		v2 = mkey_find("mirror.failed.retry.max.backoff.ms")->def;
	if (parse_int(v1, &a) == 0 && parse_int(v2, &b) == 0 && a > b)
		return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
		    "mirror.failed.retry.initial.backoff.ms (%" PRId64 ") must not exceed "
		    "mirror.failed.retry.max.backoff.ms (%" PRId64 ")", a, b);
	proto = lookup(names, values, n, "security.protocol");
	if (proto != NULL && strncasecmp(proto, "sasl_", 5) == 0 &&
	    (lookup(names, values, n, "sasl.username") == NULL ||
	     lookup(names, values, n, "sasl.password") == NULL))
		return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
		    "security.protocol %s needs sasl.username and sasl.password", proto);
	if (lookup(names, values, n, "ssl.key.location") != NULL &&
	    lookup(names, values, n, "ssl.certificate.location") == NULL)
		return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
		    "ssl.key.location is set but ssl.certificate.location is not");
	return 0;
}

void mirrorconf_free(struct mirrorconf *mc)
{
	if (mc == NULL)
		return;
	free(mc->bootstrap_servers);
	free(mc->source_cluster_id);
	for (size_t i = 0; i < mc->client_n; i++) {
		free(mc->client_names[i]);
		if (mc->client_values[i] != NULL) {
			memset(mc->client_values[i], 0, strlen(mc->client_values[i]));
			free(mc->client_values[i]);
		}
	}
	free(mc->client_names);
	free(mc->client_values);
	regexes_free(&mc->topics_include);
	regexes_free(&mc->topics_exclude);
	regexes_free(&mc->groups_include);
	regexes_free(&mc->groups_exclude);
	pmap_free(mc);
	for (size_t i = 0; i < mc->topic_properties_exclude_n; i++)
		free(mc->topic_properties_exclude[i]);
	free(mc->topic_properties_exclude);
	free(mc);
}

/* Stores a mirror.* value (already validated) into mc. */
static int set_mirror(struct mirrorconf *mc, const struct mkey *k, const char *v,
    char *why, size_t whylen)
{
	void *f = (char *)mc + k->off;
	int64_t n;

	switch (k->type) {
	case MT_INT:
		if (parse_int(v, &n) < 0)
			return -1;
		*(int64_t *)f = n;
		return 0;
	case MT_BOOL:
		*(int64_t *)f = strcasecmp(v, "true") == 0;
		return 0;
	case MT_PRINCIPALMAP:
		pmap_free(mc);
		return parse_pmap(v, mc, why, whylen);
	case MT_ENUM: {
		/* The index of the choice. */
		const char *c = k->choices;
		size_t vl = strlen(v);

		for (n = 0; c != NULL; n++) {
			const char *bar = strchr(c, '|');
			size_t cl = bar ? (size_t)(bar - c) : strlen(c);

			if (cl == vl && strncasecmp(c, v, cl) == 0) {
				*(int64_t *)f = n;
				return 0;
			}
			c = bar ? bar + 1 : NULL;
		}
		return -1;
	}
	case MT_REGEXLIST:
		regexes_free(f);
		return compile_regexes(v, f, why, whylen);
	case MT_NAMELIST:
		for (size_t i = 0; i < mc->topic_properties_exclude_n; i++)
			free(mc->topic_properties_exclude[i]);
		free(mc->topic_properties_exclude);
		mc->topic_properties_exclude = NULL;
		mc->topic_properties_exclude_n = 0;
		return split_names(v, &mc->topic_properties_exclude,
		    &mc->topic_properties_exclude_n, why, whylen);
	default:
		return -1;
	}
}

int mirrorconf_parse(const char *const *names, const char *const *values,
    size_t n, struct mirrorconf **out, int16_t *err_code, char *msg,
    size_t msglen)
{
	struct mirrorconf *mc;
	char why[256];

	*out = NULL;
	if (mirrorconf_validate(names, values, n, err_code, msg, msglen) < 0)
		return -1;
	if ((mc = calloc(1, sizeof(*mc))) == NULL)
		goto oom;
	for (size_t i = 0; i < NMKEYS; i++)
		if (mkeys[i].kind == MK_MIRROR &&
		    set_mirror(mc, &mkeys[i], mkeys[i].def, why, sizeof(why)) < 0)
			goto oom;
	mc->client_names = calloc(n + 1, sizeof(char *));
	mc->client_values = calloc(n + 1, sizeof(char *));
	if (mc->client_names == NULL || mc->client_values == NULL)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct mkey *k = mkey_find(names[i]);

		if (values[i] == NULL)
			continue;
		switch (k->kind) {
		case MK_SOURCE:
			if (strcmp(k->name, "bootstrap.servers") == 0) {
				/* Normalised: "a:1, b:2 " becomes "a:1,b:2". */
				if (config_parse_hostlist(values[i], &mc->bootstrap_servers,
				    why, sizeof(why)) < 0)
					goto oom; /* validated above: only ENOMEM is left */
			} else if ((mc->source_cluster_id = strdup(values[i])) == NULL) {
				goto oom;
			}
			break;
		case MK_CLIENT:
			/* Canonical names: sasl.mechanisms is stored as sasl.mechanism. */
			mc->client_names[mc->client_n] = strdup(k->name);
			mc->client_values[mc->client_n] = strdup(values[i]);
			if (mc->client_names[mc->client_n] == NULL ||
			    mc->client_values[mc->client_n] == NULL) {
				mc->client_n++;
				goto oom;
			}
			mc->client_n++;
			break;
		case MK_MIRROR:
			if (set_mirror(mc, k, values[i], why, sizeof(why)) < 0) {
				mirrorconf_free(mc);
				return fail(err_code, ERR_INVALID_CONFIG, msg, msglen,
				    "Invalid value for mirror config %s: %s", k->name, why);
			}
			break;
		}
	}
	*out = mc;
	return 0;
oom:
	mirrorconf_free(mc);
	return fail(err_code, KERR_UNKNOWN_SERVER_ERROR, msg, msglen, "Out of memory parsing mirror configs");
}

static int regex_any(const struct mirrorconf_regexes *r, const char *s)
{
	for (size_t i = 0; i < r->n; i++)
		if (tpattern_match(r->re[i], s))
			return 1;
	return 0;
}

int mirrorconf_topic_selected(const struct mirrorconf *mc, const char *topic)
{
	return regex_any(&mc->topics_include, topic) && !regex_any(&mc->topics_exclude, topic);
}

int mirrorconf_group_selected(const struct mirrorconf *mc, const char *group)
{
	return regex_any(&mc->groups_include, group) && !regex_any(&mc->groups_exclude, group);
}

const char *mirrorconf_map_principal(const struct mirrorconf *mc,
    const char *principal)
{
	for (size_t i = 0; i < mc->acls_map_n; i++)
		if (strcmp(mc->acls_map_from[i], principal) == 0)
			return mc->acls_map_to[i];
	return principal;
}

int mirrorconf_topic_property_excluded(const struct mirrorconf *mc, const char *name)
{
	if (strcmp(name, "mirror.name") == 0)
		return 1; /* the KIP's association config is never copied */
	for (size_t i = 0; i < mc->topic_properties_exclude_n; i++)
		if (strcmp(mc->topic_properties_exclude[i], name) == 0)
			return 1;
	return 0;
}

int mirrorconf_is_file_key(const char *name)
{
	const struct mkey *k = mkey_find(name);
	size_t n = strlen(name), sl = strlen(".location");

	/* Every *.location key of the table names a file. */
	return k != NULL && k->kind == MK_CLIENT && n > sl &&
	    strcmp(name + n - sl, ".location") == 0;
}

int mirrorconf_check_files(const char *const *names,
    const char *const *values, size_t n, const char *const *allowed,
    int16_t *err_code, char *msg, size_t msglen)
{
	char e2[600];

	for (size_t i = 0; i < n; i++) {
		if (names[i] == NULL || values[i] == NULL ||
		    !mirrorconf_is_file_key(names[i]))
			continue;
		if (safefile_check(values[i], allowed, e2, sizeof(e2)) != 0) {
			*err_code = ERR_INVALID_CONFIG;
			snprintf(msg, msglen, "Invalid value for mirror config "
			    "%s: %s", names[i], e2);
			return -1;
		}
	}
	return 0;
}

void mirrorconf_client_pairs(const struct mirrorconf *mc,
    const char *const **names, const char *const **values, size_t *n)
{
	*names = (const char *const *)mc->client_names;
	*values = (const char *const *)mc->client_values;
	*n = mc->client_n;
}

int mirrorconf_apply_rdkafka(const struct mirrorconf *mc,
    struct rd_kafka_conf_s *conf, char *err, size_t errlen)
{
	char rerr[512];

	if (rd_kafka_conf_set(conf, "bootstrap.servers", mc->bootstrap_servers,
	    rerr, sizeof(rerr)) != RD_KAFKA_CONF_OK) {
		snprintf(err, errlen, "librdkafka rejected bootstrap.servers: %s", rerr);
		return -1;
	}
	for (size_t i = 0; i < mc->client_n; i++) {
		const char *name = mc->client_names[i];

		if (rd_kafka_conf_set(conf, name, mc->client_values[i], rerr,
		    sizeof(rerr)) == RD_KAFKA_CONF_OK)
			continue;
		if (mirrorconf_is_secret(name))
			snprintf(err, errlen, "librdkafka rejected %s (value hidden)", name);
		else
			snprintf(err, errlen, "librdkafka rejected %s: %s", name, rerr);
		return -1;
	}
	return 0;
}

/* ---- reference writers -------------------------------------------------- */

static const char *kind_title(enum mkind k)
{
	switch (k) {
	case MK_SOURCE: return "Source cluster";
	case MK_CLIENT: return "Source client properties (librdkafka names)";
	case MK_MIRROR: return "Mirror options";
	}
	return "?";
}

static void type_text(const struct mkey *k, char *buf, size_t len)
{
	switch (k->type) {
	case MT_STRING: snprintf(buf, len, "string"); break;
	case MT_INT: snprintf(buf, len, "integer, %" PRId64 " to %" PRId64, k->lo, k->hi); break;
	case MT_BOOL: snprintf(buf, len, "boolean"); break;
	case MT_ENUM: snprintf(buf, len, "one of %s", k->choices); break;
	case MT_HOSTLIST: snprintf(buf, len, "host:port list"); break;
	case MT_REGEXLIST: snprintf(buf, len, "regex list"); break;
	case MT_NAMELIST: snprintf(buf, len, "name list"); break;
	case MT_CLUSTERID: snprintf(buf, len, "cluster id"); break;
	case MT_PRINCIPALMAP: snprintf(buf, len, "principal map"); break;
	}
}

static const char *def_text(const struct mkey *k)
{
	if (k->flags & MF_REQUIRED)
		return "none, required";
	if (k->def == NULL)
		return "unset";
	if (k->def[0] == '\0')
		return "empty";
	return k->def;
}

void mirrorconf_write_mdoc(FILE *out)
{
	char t[128], line[1024];
	size_t used;

	fputs(".\\\" Generated from the key table in lib/config/mirrorconf.c by\n"
	    ".\\\" test/tools/config_docgen mirror-mdoc.\n", out);
	for (int kind = MK_SOURCE; kind <= MK_MIRROR; kind++) {
		fprintf(out, ".Ss %s\n.Bl -tag -width Ds\n", kind_title((enum mkind)kind));
		for (size_t i = 0; i < NMKEYS; i++) {
			const struct mkey *k = &mkeys[i];

			if (k->kind != (enum mkind)kind)
				continue;
			type_text(k, t, sizeof(t));
			fprintf(out, ".It Cm %s Pq \"%s\"\n", k->name, t);
			config_mdoc_text(out, k->desc);
			/* Spaces after commas let long default lists wrap. */
			used = (size_t)snprintf(line, sizeof(line), "Default: ");
			for (const char *p = def_text(k); *p != '\0' && used + 3 < sizeof(line); p++) {
				line[used++] = *p;
				if (*p == ',' && p[1] != ' ')
					line[used++] = ' ';
			}
			line[used] = '\0';
			config_mdoc_text(out, line);
		}
		fputs(".El\n", out);
	}
}

void mirrorconf_write_example(FILE *out)
{
	char t[128];

	fputs("# Mirror configs for kafka-mirrors --create --mirror-config FILE.\n"
	    "# Generated from the key table in lib/config/mirrorconf.c.\n", out);
	for (int kind = MK_SOURCE; kind <= MK_MIRROR; kind++) {
		fprintf(out, "\n# ---- %s\n", kind_title((enum mkind)kind));
		for (size_t i = 0; i < NMKEYS; i++) {
			const struct mkey *k = &mkeys[i];

			if (k->kind != (enum mkind)kind)
				continue;
			type_text(k, t, sizeof(t));
			fprintf(out, "\n# %s\n# Type: %s. Default: %s.\n", k->desc, t, def_text(k));
			if (k->flags & MF_REQUIRED)
				fprintf(out, "%s=127.0.0.1:9092\n", k->name);
			else
				fprintf(out, "#%s=%s\n", k->name, k->def ? k->def : "");
		}
	}
}
