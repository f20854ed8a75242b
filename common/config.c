/* config.c - sandbox.yaml: parse (libyaml events into a small tree),
 * validate every rule of pisb.yaml(5), normalise into struct pisb_config,
 * and print the normalised form as JSON.  See config.h.
 *
 * The tree is built from parser events rather than yaml_parser_load() so
 * that anchors, aliases, foreign tags and extra documents are refused at
 * the event that carries them, with its line and column, before anything
 * could be expanded.
 */
#include "config.h"
#include "docker_policy.h"
#include "driver.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "err.h"
#include "json.h"
#include "util.h"

#define CONFIG_DEPTH 64
#define SAFE_INT_MAX 9007199254740991LL   /* 2^53 - 1 */
#define ENV_NAME_RULE "must match ^[A-Za-z_][A-Za-z0-9_]*$"

/* ---- the document tree ------------------------------------------------ */

enum ytype { YT_NULL, YT_STR, YT_INT, YT_FLOAT, YT_BOOL, YT_SEQ, YT_MAP };

struct ynode {
	enum ytype t;
	char *s;                /* scalar text, NUL-terminated (may hold NULs) */
	size_t len;
	long long i;            /* YT_INT, clamped on overflow */
	bool b;                 /* YT_BOOL */
	size_t line, col;       /* 1-based */
	struct ynode **kid;     /* seq: items; map: key, value, key, value, ... */
	size_t nkid, cap;
};

#define NPAIRS(m) ((m)->nkid / 2)
#define KEY(m, k) ((m)->kid[2 * (k)])
#define VAL(m, k) ((m)->kid[2 * (k) + 1])

static void ynode_free(struct ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkid; i++)
		ynode_free(n->kid[i]);
	free(n->kid);
	free(n->s);
	free(n);
}

static void ynode_freep(struct ynode **n)
{
	ynode_free(*n);
}

static void ynode_add(struct ynode *parent, struct ynode *kid)
{
	if (parent->nkid == parent->cap) {
		parent->cap = parent->cap ? parent->cap * 2 : 8;
		parent->kid = xrealloc(parent->kid, parent->cap * sizeof(*parent->kid));
	}
	parent->kid[parent->nkid++] = kid;
}

static bool all_digits(const char *s)
{
	if (!isdigit((unsigned char)*s))
		return false;
	while (isdigit((unsigned char)*s))
		s++;
	return *s == '\0';
}

static bool is_int_text(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	return all_digits(s);
}

static bool is_float_text(const char *s)
{
	bool digits = false;

	if (*s == '-' || *s == '+')
		s++;
	if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF") ||
	    !strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return true;
	while (isdigit((unsigned char)*s)) {
		s++;
		digits = true;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			s++;
			digits = true;
		}
	}
	if (!digits)
		return false;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '-' || *s == '+')
			s++;
		if (!all_digits(s))
			return false;
		return true;
	}
	return *s == '\0';
}

/* YAML 1.2 core schema for plain scalars (so `yes` and `on` stay strings). */
static enum ytype resolve_plain(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
	static const char *const bools[] = { "true", "True", "TRUE",
					     "false", "False", "FALSE" };

	for (size_t i = 0; i < sizeof(nulls) / sizeof(*nulls); i++)
		if (!strcmp(s, nulls[i]))
			return YT_NULL;
	for (size_t i = 0; i < sizeof(bools) / sizeof(*bools); i++)
		if (!strcmp(s, bools[i]))
			return YT_BOOL;
	if (is_int_text(s))
		return YT_INT;
	if (is_float_text(s))
		return YT_FLOAT;
	return YT_STR;
}

static void set_scalar_value(struct ynode *n)
{
	if (n->t == YT_INT) {
		errno = 0;
		n->i = strtoll(n->s, NULL, 10);   /* ERANGE clamps: out of any range */
	} else if (n->t == YT_BOOL) {
		n->b = (n->s[0] == 't' || n->s[0] == 'T');
	}
}

/* ---- loader context and messages --------------------------------------- */

struct ld {
	const char *name;       /* for messages */
	const char *base;       /* resolves relative paths; NULL: rejected */
	const char *buf;
	size_t len;
	struct pisb_err *e;
};

static int bad(struct ld *L, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(struct ld *L, const char *path, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (path && *path)
		return pisb_err_set(L->e, PISB_EXIT_USAGE, "%s: %s: %s", L->name, path, msg);
	return pisb_err_set(L->e, PISB_EXIT_USAGE, "%s: %s", L->name, msg);
}

static int bad_at(struct ld *L, size_t line, size_t col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad_at(struct ld *L, size_t line, size_t col, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pisb_err_set(L->e, PISB_EXIT_USAGE, "%s:%zu:%zu: %s", L->name, line, col, msg);
}

static char *kpath(const char *parent, const char *key)
{
	if (!parent || !*parent)
		return xstrdup(key);
	return xasprintf("%s.%s", parent, key);
}

static char *ipath(const char *parent, size_t i)
{
	return xasprintf("%s[%zu]", parent, i);
}

/* ---- YAML events -> tree ----------------------------------------------- */

/* "tag:yaml.org,2002:str" -> "!!str" for messages. */
static const char *short_tag(const char *tag, char *out, size_t n)
{
	if (pisb_str_starts(tag, "tag:yaml.org,2002:"))
		snprintf(out, n, "!!%s", tag + strlen("tag:yaml.org,2002:"));
	else
		snprintf(out, n, "%s", tag);
	return out;
}

static int check_tag(struct ld *L, const yaml_mark_t *m, const char *tag,
		     const char *const *ok)
{
	char t[256];

	if (!tag || !strcmp(tag, "!"))
		return 0;
	for (; *ok; ok++)
		if (pisb_str_starts(tag, "tag:yaml.org,2002:") &&
		    !strcmp(tag + strlen("tag:yaml.org,2002:"), *ok))
			return 0;
	return bad_at(L, m->line + 1, m->column + 1, "tag '%s' is not allowed",
		      short_tag(tag, t, sizeof(t)));
}

static int scalar_node(struct ld *L, const yaml_event_t *ev, struct ynode *n)
{
	static const char *const ok[] = { "str", "int", "float", "bool", "null", NULL };
	const char *tag = (const char *)ev->data.scalar.tag;
	const yaml_mark_t *m = &ev->start_mark;
	enum ytype plain;
	char t[256];

	if (check_tag(L, m, tag, ok) < 0)
		return -1;
	n->len = ev->data.scalar.length;
	n->s = xmalloc(n->len + 1);
	memcpy(n->s, ev->data.scalar.value, n->len);
	n->s[n->len] = '\0';
	plain = strlen(n->s) == n->len ? resolve_plain(n->s) : YT_STR;
	if (tag && strcmp(tag, "!")) {
		const char *want = tag + strlen("tag:yaml.org,2002:");

		if (!strcmp(want, "str")) {
			n->t = YT_STR;
		} else if (!strcmp(want, "int")) {
			n->t = YT_INT;
		} else if (!strcmp(want, "bool")) {
			n->t = YT_BOOL;
		} else if (!strcmp(want, "null")) {
			n->t = YT_NULL;
		} else {
			n->t = YT_FLOAT;
			if (plain == YT_INT)
				plain = YT_FLOAT;
		}
		if (n->t != YT_STR && plain != n->t)
			return bad_at(L, m->line + 1, m->column + 1,
				      "'%s' does not fit tag '%s'", n->s,
				      short_tag(tag, t, sizeof(t)));
	} else if (tag || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		n->t = YT_STR;
	} else {
		n->t = plain;
	}
	set_scalar_value(n);
	return 0;
}

/* Line and column of a byte offset (for reader errors, which have none). */
static void offset_mark(const char *buf, size_t len, size_t off, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int syntax_error(struct ld *L, yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "invalid YAML";
	size_t line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return pisb_err_set(L->e, PISB_EXIT_USAGE, "%s: out of memory", L->name);
	if (p->error == YAML_READER_ERROR) {
		offset_mark(L->buf, L->len, p->problem_offset, &line, &col);
		return bad_at(L, line, col, "%s", problem);
	}
	return bad_at(L, p->problem_mark.line + 1, p->problem_mark.column + 1, "%s", problem);
}

static int build_tree(struct ld *L, struct ynode **out)
{
	static const char *const ok_seq[] = { "seq", NULL };
	static const char *const ok_map[] = { "map", NULL };
	struct ynode *stack[CONFIG_DEPTH];
	struct ynode *root = NULL;
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, ndocs = 0, r = -1;
	bool done = false;

	*out = NULL;
	if (!yaml_parser_initialize(&p))
		return pisb_err_set(L->e, PISB_EXIT_USAGE, "%s: out of memory", L->name);
	yaml_parser_set_input_string(&p, (const unsigned char *)L->buf, L->len);
	while (!done) {
		const yaml_mark_t *m;
		struct ynode *n = NULL;

		if (!yaml_parser_parse(&p, &ev)) {
			syntax_error(L, &p);
			goto out;
		}
		m = &ev.start_mark;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (ndocs++) {
				bad_at(L, m->line + 1, m->column + 1,
				       "multiple documents are not allowed");
				goto fail_ev;
			}
			break;
		case YAML_ALIAS_EVENT:
			bad_at(L, m->line + 1, m->column + 1, "anchors and aliases are not allowed");
			goto fail_ev;
		case YAML_SCALAR_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			const yaml_char_t *anchor =
				ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.anchor :
				ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.anchor :
				ev.data.mapping_start.anchor;

			if (anchor) {
				bad_at(L, m->line + 1, m->column + 1,
				       "anchors and aliases are not allowed");
				goto fail_ev;
			}
			n = xcalloc(1, sizeof(*n));
			n->line = m->line + 1;
			n->col = m->column + 1;
			/* Attach first, so that the tree owns n whatever happens. */
			if (depth == 0) {
				root = n;
			} else {
				struct ynode *parent = stack[depth - 1];

				ynode_add(parent, n);
				if (parent->t == YT_MAP && parent->nkid % 2 == 1 &&
				    ev.type != YAML_SCALAR_EVENT) {
					bad_at(L, n->line, n->col, "mapping keys must be scalars");
					goto fail_ev;
				}
			}
			if (ev.type == YAML_SCALAR_EVENT) {
				if (scalar_node(L, &ev, n) < 0)
					goto fail_ev;
				break;
			}
			if (ev.type == YAML_SEQUENCE_START_EVENT) {
				n->t = YT_SEQ;
				if (check_tag(L, m, (const char *)ev.data.sequence_start.tag, ok_seq) < 0)
					goto fail_ev;
			} else {
				n->t = YT_MAP;
				if (check_tag(L, m, (const char *)ev.data.mapping_start.tag, ok_map) < 0)
					goto fail_ev;
			}
			if (depth == CONFIG_DEPTH) {
				bad_at(L, n->line, n->col, "nested deeper than %d levels", CONFIG_DEPTH);
				goto fail_ev;
			}
			stack[depth++] = n;
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	*out = root;
	root = NULL;
	r = 0;
	goto out;
fail_ev:
	yaml_event_delete(&ev);
out:
	ynode_free(root);
	yaml_parser_delete(&p);
	return r;
}

/* ---- generic checks ----------------------------------------------------- */

struct keyref {
	const char *s;
	size_t len, idx;
};

static int keyref_cmp(const void *a, const void *b)
{
	const struct keyref *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);

	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Index of the first (in file order) string equal to an earlier one, or -1;
 * *first gets that earlier one's index. */
static long first_dup(struct keyref *v, size_t n, size_t *first)
{
	long best = -1;

	qsort(v, n, sizeof(*v), keyref_cmp);
	for (size_t i = 1; i < n; i++)
		if (v[i].len == v[i - 1].len && !memcmp(v[i].s, v[i - 1].s, v[i].len)) {
			size_t j = i - 1;

			while (j > 0 && v[j - 1].len == v[i].len &&
			       !memcmp(v[j - 1].s, v[i].s, v[i].len))
				j--;
			if (best < 0 || v[i].idx < (size_t)best) {
				best = (long)v[i].idx;
				*first = v[j].idx;
			}
		}
	return best;
}

/* Whole-tree pass: duplicate keys and NUL bytes in keys, anywhere. */
static int check_tree(struct ld *L, const char *path, const struct ynode *n)
{
	if (n->t == YT_MAP) {
		size_t np = NPAIRS(n), first;
		_cleanup_free_ struct keyref *v = xcalloc(np ? np : 1, sizeof(*v));
		long d;

		for (size_t k = 0; k < np; k++) {
			const struct ynode *key = KEY(n, k);

			if (memchr(key->s, 0, key->len))
				return bad_at(L, key->line, key->col, "keys must not contain NUL bytes");
			v[k] = (struct keyref){ key->s, key->len, k };
		}
		d = first_dup(v, np, &first);
		if (d >= 0) {
			_cleanup_free_ char *p = kpath(path, KEY(n, d)->s);
			return bad(L, p, "duplicate key");
		}
		for (size_t k = 0; k < np; k++) {
			_cleanup_free_ char *p = kpath(path, KEY(n, k)->s);

			if (check_tree(L, p, VAL(n, k)) < 0)
				return -1;
		}
	} else if (n->t == YT_SEQ) {
		for (size_t i = 0; i < n->nkid; i++) {
			_cleanup_free_ char *p = ipath(path, i);

			if (check_tree(L, p, n->kid[i]) < 0)
				return -1;
		}
	}
	return 0;
}

static const struct ynode *mget(const struct ynode *m, const char *key)
{
	for (size_t k = 0; k < NPAIRS(m); k++)
		if (!strcmp(KEY(m, k)->s, key))
			return VAL(m, k);
	return NULL;
}

static int check_keys(struct ld *L, const char *path, const struct ynode *m,
		      const char *const *allowed)
{
	for (size_t k = 0; k < NPAIRS(m); k++) {
		const char *key = KEY(m, k)->s;
		const char *const *a;

		for (a = allowed; *a; a++)
			if (!strcmp(*a, key))
				break;
		if (!*a) {
			_cleanup_buf_ struct pisb_buf list = PISB_BUF_INIT;
			_cleanup_free_ char *p = kpath(path, key);

			for (a = allowed; *a; a++)
				pisb_buf_addf(&list, "%s%s", a == allowed ? "" : ", ", *a);
			return bad(L, p, "unknown key (expected one of: %s)", list.s);
		}
	}
	return 0;
}

static int need_map(struct ld *L, const char *path, const struct ynode *n)
{
	return n->t == YT_MAP ? 0 : bad(L, path, "must be a mapping");
}

static int need_list(struct ld *L, const char *path, const struct ynode *n)
{
	return n->t == YT_SEQ ? 0 : bad(L, path, "must be a list");
}

static bool has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* A string-typed scalar (quoted, or plain that is not a number/bool/null). */
static int need_str(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	if (n->t != YT_STR)
		return bad(L, path, "must be a string");
	if (memchr(n->s, 0, n->len))
		return bad(L, path, "must not contain NUL bytes");
	*out = xstrdup(n->s);
	return 0;
}

static int need_nonempty(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	if (need_str(L, path, n, out) < 0)
		return -1;
	if (!**out) {
		free(*out);
		*out = NULL;
		return bad(L, path, "must not be empty");
	}
	return 0;
}

/* Any non-null scalar, as its text (env values: `DEBUG: 1` means "1"). */
static int need_text(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	if (n->t == YT_NULL || n->t == YT_SEQ || n->t == YT_MAP)
		return bad(L, path, "must be a string");
	if (memchr(n->s, 0, n->len))
		return bad(L, path, "must not contain NUL bytes");
	*out = xstrdup(n->s);
	return 0;
}

/* An integer in [lo, hi]; rule NULL means "must be LO-HI". */
static int need_int(struct ld *L, const char *path, const struct ynode *n,
		    long long lo, long long hi, const char *rule, long long *out)
{
	if (n->t != YT_INT)
		return bad(L, path, "must be an integer");
	if (n->i < lo || n->i > hi) {
		if (rule)
			return bad(L, path, "%s", rule);
		return bad(L, path, "must be %lld-%lld", lo, hi);
	}
	*out = n->i;
	return 0;
}

static int need_bool(struct ld *L, const char *path, const struct ynode *n, bool *out)
{
	if (n->t != YT_BOOL)
		return bad(L, path, "must be true or false");
	*out = n->b;
	return 0;
}

/* One of a fixed set of words; returns its index. */
static int need_enum(struct ld *L, const char *path, const struct ynode *n,
		     const char *const *words, const char *rule)
{
	if (n->t == YT_STR && strlen(n->s) == n->len)
		for (int i = 0; words[i]; i++)
			if (!strcmp(n->s, words[i]))
				return i;
	return bad(L, path, "%s", rule);
}

typedef int (*item_fn)(struct ld *L, const char *path, const struct ynode *n, char **out);

/* A list whose items item() checks and converts; NULL-terminated result. */
static int need_list_of(struct ld *L, const char *path, const struct ynode *n,
			item_fn item, char ***v, size_t *nv)
{
	_cleanup_strv_ struct pisb_strv sv = PISB_STRV_INIT;

	if (need_list(L, path, n) < 0)
		return -1;
	for (size_t i = 0; i < n->nkid; i++) {
		_cleanup_free_ char *p = ipath(path, i);
		_cleanup_free_ char *s = NULL;

		if (item(L, p, n->kid[i], &s) < 0)
			return -1;
		pisb_strv_push(&sv, s);
	}
	*v = sv.v;
	*nv = sv.n;
	sv.v = NULL;
	sv.n = sv.cap = 0;
	return 0;
}

static void map_add(struct pisb_map *m, const char *k, const char *v)
{
	m->v = xrealloc(m->v, (m->n + 1) * sizeof(*m->v));
	m->v[m->n].key = xstrdup(k);
	m->v[m->n].val = xstrdup(v);
	m->n++;
}

static void map_release(struct pisb_map *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		free(m->v[i].val);
	}
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- value rules -------------------------------------------------------- */

static bool env_name_ok(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

/* The first Amp placeholder ($AMP_X or ${AMP_X}) in s, copied to out. */
static bool amp_placeholder(const char *s, char *out, size_t n)
{
	for (const char *p = strchr(s, '$'); p; p = strchr(p + 1, '$')) {
		const char *q = p + 1, *end;

		if (*q == '{')
			q++;
		if (!pisb_str_starts(q, "AMP_"))
			continue;
		end = q;
		while (isalnum((unsigned char)*end) || *end == '_')
			end++;
		if (p[1] == '{' && *end == '}')
			end++;
		snprintf(out, n, "%.*s", (int)(end - p), p);
		return true;
	}
	return false;
}

static int no_amp(struct ld *L, const char *path, const char *s)
{
	char ph[128];

	if (amp_placeholder(s, ph, sizeof(ph)))
		return bad(L, path, "Amp placeholder '%s' is not supported", ph);
	return 0;
}

static bool hostname_ok(const char *s)
{
	size_t len = strlen(s), lab = 0;
	char prev = '.';

	if (len == 0 || len > 253)
		return false;
	for (; *s; prev = *s, s++) {
		if (*s == '.') {
			if (lab == 0 || prev == '-')
				return false;
			lab = 0;
		} else if (isalnum((unsigned char)*s) || *s == '-') {
			if (lab == 0 && *s == '-')
				return false;
			if (++lab > 63)
				return false;
		} else {
			return false;
		}
	}
	return lab > 0 && prev != '-';
}

/* allowedHosts / networkAllowlist entry: exact hostname or "*.domain". */
static int host_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	_cleanup_free_ char *s = NULL;
	const char *h;

	if (need_nonempty(L, path, n, &s) < 0)
		return -1;
	for (char *p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (strstr(s, "://"))
		return bad(L, path, "must be a hostname or *.domain, not a URL");
	if (strchr(s, '/'))
		return bad(L, path, "must be a hostname or *.domain (no path)");
	if (strchr(s, ':'))
		return bad(L, path, "must be a hostname or *.domain (no port)");
	if (!strcmp(s, "*"))
		return bad(L, path, "a bare '*' is not allowed (list hostnames or *.domain)");
	h = pisb_str_starts(s, "*.") ? s + 2 : s;
	if (!hostname_ok(h))
		return bad(L, path, "must be a hostname or *.domain");
	*out = PISB_STEAL(s);
	return 0;
}

/* network.allowedHosts entry: a hostname, "*.domain", an IPv4 literal or
 * "[IPv6]", each with an optional ":port" (without one: ports 80 and 443). */
static int allowed_host_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	_cleanup_free_ char *s = NULL;
	char *colon, *host;
	unsigned char bin[16];

	if (need_nonempty(L, path, n, &s) < 0)
		return -1;
	for (char *p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (strstr(s, "://"))
		return bad(L, path, "must be a hostname or *.domain, not a URL");
	if (strchr(s, '/'))
		return bad(L, path, "must be a hostname or *.domain (no path)");
	host = s;
	if (s[0] == '[') {
		char *end = strchr(s, ']');
		if (!end)
			return bad(L, path, "an IPv6 address needs its closing ']'");
		*end = '\0';
		if (inet_pton(AF_INET6, s + 1, bin) != 1) {
			*end = ']';
			return bad(L, path, "'%s' is not an IPv6 address", s);
		}
		*end = ']';
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return bad(L, path, "after ']' only ':port' may follow");
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			return bad(L, path, "an IPv6 address goes in brackets: '[ADDR]' or '[ADDR]:PORT'");
	}
	if (colon) {
		char *end;
		long port = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || port < 1 || port > 65535)
			return bad(L, path, "the port after ':' must be 1-65535");
		*colon = '\0';
	}
	if (s[0] != '[') {
		if (!strcmp(host, "*"))
			return bad(L, path, "a bare '*' is not allowed (list hostnames or *.domain)");
		if (!hostname_ok(pisb_str_starts(host, "*.") ? host + 2 : host))
			return bad(L, path, "must be a hostname or *.domain");
	}
	if (colon)
		*colon = ':';
	*out = PISB_STEAL(s);
	return 0;
}

static int envname_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	_cleanup_free_ char *s = NULL;

	if (need_str(L, path, n, &s) < 0)
		return -1;
	if (!env_name_ok(s))
		return bad(L, path, "invalid variable name (%s)", ENV_NAME_RULE);
	if (pisb_str_starts(s, "DOCKER_") || pisb_str_starts(s, "COMPOSE_"))
		return bad(L, path, "%s is never forwarded (DOCKER_* and COMPOSE_* are always stripped)", s);
	*out = PISB_STEAL(s);
	return 0;
}

static int cmd_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	return need_str(L, path, n, out);
}

/* Lexically normalise an absolute path: no "//", "." or ".." left. */
static char *path_norm(const char *p)
{
	_cleanup_strv_ struct pisb_strv parts = PISB_STRV_INIT;
	_cleanup_free_ char *copy = xstrdup(p);
	struct pisb_buf b = PISB_BUF_INIT;
	char *save = NULL;

	for (char *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, "..")) {
			if (parts.n > 0) {
				free(parts.v[--parts.n]);
				parts.v[parts.n] = NULL;
			}
			continue;
		}
		pisb_strv_push(&parts, t);
	}
	for (size_t i = 0; i < parts.n; i++)
		pisb_buf_addf(&b, "/%s", parts.v[i]);
	if (b.len == 0)
		pisb_buf_adds(&b, "/");
	return pisb_buf_detach(&b);
}

static bool has_dotdot(const char *p)
{
	size_t n;

	while (*p) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		while (*p == '/')
			p++;
	}
	return false;
}

/* A guest directory: absolute, no "..", not "/"; normalised. */
static int abs_dir(struct ld *L, const char *path, const struct ynode *n, bool root_ok,
		   char **out)
{
	_cleanup_free_ char *s = NULL;

	if (need_nonempty(L, path, n, &s) < 0)
		return -1;
	if (s[0] != '/')
		return bad(L, path, "must be an absolute path");
	if (has_ctl(s))
		return bad(L, path, "must not contain control characters");
	if (has_dotdot(s))
		return bad(L, path, "must not contain '..'");
	*out = path_norm(s);
	if (!root_ok && !strcmp(*out, "/")) {
		free(*out);
		*out = NULL;
		return bad(L, path, "must not be /");
	}
	return 0;
}

/* A path relative to a guest directory: no leading '/', no ".."; NULL for
 * the directory itself. */
static int rel_dir(struct ld *L, const char *path, const struct ynode *n,
		   const char *what, char **out)
{
	_cleanup_free_ char *s = NULL, *norm = NULL;

	if (need_nonempty(L, path, n, &s) < 0)
		return -1;
	if (s[0] == '/')
		return bad(L, path, "must be relative to the %s (no leading /)", what);
	if (has_ctl(s))
		return bad(L, path, "must not contain control characters");
	if (has_dotdot(s))
		return bad(L, path, "must not contain '..'");
	{
		_cleanup_free_ char *abs = xasprintf("/%s", s);
		norm = path_norm(abs);
	}
	*out = strcmp(norm, "/") ? xstrdup(norm + 1) : NULL;
	return 0;
}

/* A host file or directory: absolute, or relative to the YAML's directory. */
static int host_path(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	_cleanup_free_ char *s = NULL;

	if (need_nonempty(L, path, n, &s) < 0)
		return -1;
	if (s[0] == '/') {
		*out = path_norm(s);
		return 0;
	}
	if (!L->base)
		return bad(L, path, "must be an absolute path (no directory to resolve '%s' against)", s);
	{
		_cleanup_free_ char *j = xasprintf("%s/%s", L->base, s);
		*out = path_norm(j);
	}
	return 0;
}

/* Generic string->string map (metadata, resourceLimits). */
static int load_strmap(struct ld *L, const char *path, const struct ynode *n,
		       struct pisb_map *m)
{
	if (need_map(L, path, n) < 0)
		return -1;
	for (size_t k = 0; k < NPAIRS(n); k++) {
		_cleanup_free_ char *p = kpath(path, KEY(n, k)->s);
		_cleanup_free_ char *v = NULL;

		if (!KEY(n, k)->s[0])
			return bad(L, path, "keys must not be empty");
		if (need_text(L, p, VAL(n, k), &v) < 0)
			return -1;
		map_add(m, KEY(n, k)->s, v);
	}
	return 0;
}

enum env_kind { ENV_TOP, ENV_SERVICE, ENV_REMOTE };

static int load_env(struct ld *L, const char *path, const struct ynode *n,
		    struct pisb_map *m, enum env_kind kind)
{
	if (need_map(L, path, n) < 0)
		return -1;
	for (size_t k = 0; k < NPAIRS(n); k++) {
		const char *name = KEY(n, k)->s;
		_cleanup_free_ char *p = kpath(path, name);
		_cleanup_free_ char *v = NULL;

		if (!env_name_ok(name))
			return bad(L, p, "invalid variable name (%s)", ENV_NAME_RULE);
		if (kind == ENV_SERVICE && (!strcmp(name, "PORT") || !strcmp(name, "PUBLIC_URL")))
			return bad(L, p, "is set by pisb and cannot be replaced");
		if (pisb_docker_env_refused(name))
			return bad(L, p, "docker's and compose's own variables (DOCKER_*, COMPOSE_*) are refused: they would point a docker client at another daemon");
		if (!strcmp(name, "AMP_THREAD_ID"))
			return bad(L, p, "is an Amp-only variable and is not supported");
		if (need_text(L, p, VAL(n, k), &v) < 0)
			return -1;
		if (no_amp(L, p, v) < 0)
			return -1;
		if (kind != ENV_SERVICE && strstr(v, "${services."))
			return bad(L, p, "${services.NAME.publicURL} is only available in services.NAME.env");
		map_add(m, name, v);
	}
	return 0;
}

/* ---- services ----------------------------------------------------------- */

static bool url_ok(const char *u)
{
	const char *rest;

	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return false;
	if (u[0] == '/')
		return true;
	if (pisb_str_starts(u, "http://"))
		rest = u + 7;
	else if (pisb_str_starts(u, "https://"))
		rest = u + 8;
	else
		return false;
	return *rest && *rest != '/' && *rest != '?' && *rest != '#';
}

static void link_release(struct pisb_link *l)
{
	free(l->url);
	free(l->title);
	free(l->description);
	free(l->folder);
}

/* One link {url?, title, description?}; title defaults to def_title. */
static int load_link(struct ld *L, const char *path, const struct ynode *n,
		     const char *def_title, const char *folder, struct pisb_link *l)
{
	static const char *const keys[] = { "url", "title", "description", NULL };
	const struct ynode *v;

	memset(l, 0, sizeof(*l));
	if (need_map(L, path, n) < 0)
		return -1;
	if (mget(n, "folder")) {
		_cleanup_free_ char *p = kpath(path, "folder");
		return bad(L, p, "nested folders are not allowed");
	}
	if (check_keys(L, path, n, keys) < 0)
		return -1;
	l->folder = folder ? xstrdup(folder) : NULL;
	if ((v = mget(n, "url"))) {
		_cleanup_free_ char *p = kpath(path, "url");

		if (need_nonempty(L, p, v, &l->url) < 0 || no_amp(L, p, l->url) < 0)
			goto fail;
		if (!url_ok(l->url)) {
			bad(L, p, "must be a path starting with / or an http(s) URL");
			goto fail;
		}
	}
	if ((v = mget(n, "title"))) {
		_cleanup_free_ char *p = kpath(path, "title");

		if (need_nonempty(L, p, v, &l->title) < 0 || no_amp(L, p, l->title) < 0)
			goto fail;
	} else if (def_title) {
		l->title = xstrdup(def_title);
	} else {
		_cleanup_free_ char *p = kpath(path, "title");
		bad(L, p, "is required");
		goto fail;
	}
	if ((v = mget(n, "description"))) {
		_cleanup_free_ char *p = kpath(path, "description");

		if (need_str(L, p, v, &l->description) < 0 || no_amp(L, p, l->description) < 0)
			goto fail;
	}
	return 0;
fail:
	link_release(l);
	memset(l, 0, sizeof(*l));
	return -1;
}

static void add_link(struct pisb_service *s, const struct pisb_link *l)
{
	s->links = xrealloc(s->links, (s->nlinks + 1) * sizeof(*s->links));
	s->links[s->nlinks++] = *l;
}

static int load_previews(struct ld *L, const char *path, const struct ynode *n,
			 struct pisb_service *s)
{
	size_t nfold = 0, first;
	_cleanup_free_ struct keyref *folders = NULL;
	long d;

	if (need_list(L, path, n) < 0)
		return -1;
	folders = xcalloc(n->nkid ? n->nkid : 1, sizeof(*folders));
	for (size_t i = 0; i < n->nkid; i++) {
		const struct ynode *it = n->kid[i];
		_cleanup_free_ char *p = ipath(path, i);
		struct pisb_link l;

		if (need_map(L, p, it) < 0)
			return -1;
		if (mget(it, "folder")) {
			static const char *const keys[] = { "folder", "links", NULL };
			_cleanup_free_ char *pf = kpath(p, "folder");
			_cleanup_free_ char *pl = kpath(p, "links");
			_cleanup_free_ char *folder = NULL;
			const struct ynode *links;

			if (check_keys(L, p, it, keys) < 0)
				return -1;
			if (need_nonempty(L, pf, mget(it, "folder"), &folder) < 0 ||
			    no_amp(L, pf, folder) < 0)
				return -1;
			folders[nfold++] = (struct keyref){ mget(it, "folder")->s,
							    mget(it, "folder")->len, i };
			if (!(links = mget(it, "links")))
				return bad(L, pl, "is required");
			if (need_list(L, pl, links) < 0)
				return -1;
			if (links->nkid == 0)
				return bad(L, pl, "must not be empty");
			for (size_t j = 0; j < links->nkid; j++) {
				_cleanup_free_ char *pj = ipath(pl, j);

				if (load_link(L, pj, links->kid[j], NULL, folder, &l) < 0)
					return -1;
				add_link(s, &l);
			}
		} else {
			if (load_link(L, p, it, NULL, NULL, &l) < 0)
				return -1;
			add_link(s, &l);
		}
	}
	d = first_dup(folders, nfold, &first);
	if (d >= 0) {
		_cleanup_free_ char *p = ipath(path, (size_t)d);
		_cleanup_free_ char *pf = kpath(p, "folder");
		_cleanup_free_ char *po = ipath(path, first);

		return bad(L, pf, "'%s' is already used by %s", mget(n->kid[d], "folder")->s, po);
	}
	return 0;
}

static int platform_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	static const char *const words[] = { "linux", "darwin", "windows", NULL };
	int i = need_enum(L, path, n, words, "must be one of: linux, darwin, windows");

	if (i < 0)
		return -1;
	*out = xstrdup(words[i]);
	return 0;
}

static void service_release(struct pisb_service *s)
{
	free(s->name);
	free(s->command);
	free(s->cwd);
	map_release(&s->env);
	free(s->health_path);
	for (size_t i = 0; i < s->nlinks; i++)
		link_release(&s->links[i]);
	free(s->links);
	strv_free(s->platforms, s->nplatforms);
	strv_free(s->depends, s->ndepends);
	memset(s, 0, sizeof(*s));
}

static int load_service(struct ld *L, const char *path, const char *name,
			const struct ynode *n, struct pisb_service *s)
{
	static const char *const keys[] = { "command", "cwd", "port", "env", "health",
		"timeoutMs", "preview", "previews", "platforms", NULL };
	const struct ynode *v;
	long long ll = 0;

	s->name = xstrdup(name);
	s->timeout_ms = 30000;
	if (!pisb_service_name_valid(name))
		return bad(L, path, "invalid service name (must match ^[a-z0-9][a-z0-9-]{0,31}$)");
	if (need_map(L, path, n) < 0)
		return -1;
	if (mget(n, "review")) {
		_cleanup_free_ char *p = kpath(path, "review");
		return bad(L, p, "is not supported (Amp review is not available in pisb)");
	}
	if (check_keys(L, path, n, keys) < 0)
		return -1;

#define SUB(key) _cleanup_free_ char *p_##key = kpath(path, #key)
	SUB(command); SUB(cwd); SUB(port); SUB(env); SUB(health);
	SUB(timeoutMs); SUB(preview); SUB(previews); SUB(platforms);
#undef SUB
	if (!(v = mget(n, "command")))
		return bad(L, p_command, "is required");
	if (need_nonempty(L, p_command, v, &s->command) < 0)
		return -1;
	if ((v = mget(n, "cwd")) && rel_dir(L, p_cwd, v, "workspace", &s->cwd) < 0)
		return -1;
	if ((v = mget(n, "port"))) {
		if (need_int(L, p_port, v, 1, 65535, NULL, &ll) < 0)
			return -1;
		s->port = (int)ll;
	}
	if ((v = mget(n, "env")) && load_env(L, p_env, v, &s->env, ENV_SERVICE) < 0)
		return -1;
	if ((v = mget(n, "health"))) {
		_cleanup_free_ char *h = NULL;

		if (need_str(L, p_health, v, &h) < 0)
			return -1;
		if (!strcmp(h, "process")) {
			s->health = PISB_HEALTH_PROCESS;
		} else if (h[0] == '/' && url_ok(h)) {
			s->health = PISB_HEALTH_HTTP;
			s->health_path = PISB_STEAL(h);
		} else {
			return bad(L, p_health, "must be /PATH (HTTP check), process, or omitted (TCP check)");
		}
	}
	if ((v = mget(n, "timeoutMs"))) {
		if (need_int(L, p_timeoutMs, v, 100, 120000, NULL, &ll) < 0)
			return -1;
		s->timeout_ms = (int)ll;
	}
	if ((v = mget(n, "preview"))) {
		struct pisb_link l;

		if (v->t == YT_BOOL) {
			if (v->b) {
				memset(&l, 0, sizeof(l));
				l.title = xstrdup(name);
				add_link(s, &l);
				s->preview_main = true;
			}
		} else if (v->t == YT_MAP) {
			if (load_link(L, p_preview, v, name, NULL, &l) < 0)
				return -1;
			add_link(s, &l);
			s->preview_main = true;
		} else {
			return bad(L, p_preview, "must be true, false or a mapping");
		}
	}
	if ((v = mget(n, "previews")) && load_previews(L, p_previews, v, s) < 0)
		return -1;
	s->preview = s->nlinks > 0;
	if ((v = mget(n, "platforms"))) {
		if (need_list_of(L, p_platforms, v, platform_item, &s->platforms, &s->nplatforms) < 0)
			return -1;
		if (s->nplatforms == 0)
			return bad(L, p_platforms, "must not be empty");
	}
	return 0;
}

struct svc_ix {
	const char *name;
	size_t idx;
};

static int svc_ix_cmp(const void *a, const void *b)
{
	return strcmp(((const struct svc_ix *)a)->name, ((const struct svc_ix *)b)->name);
}

static long svc_find(const struct svc_ix *ix, size_t n, const char *name)
{
	struct svc_ix key = { name, 0 };
	const struct svc_ix *r = bsearch(&key, ix, n, sizeof(*ix), svc_ix_cmp);

	return r ? (long)r->idx : -1;
}

/* ${services.NAME.publicURL} references in each service's env -> depends. */
static int resolve_refs(struct ld *L, struct pisb_service *sv, size_t n,
			const struct svc_ix *ix)
{
	static const char pre[] = "${services.", suf[] = ".publicURL}";

	for (size_t i = 0; i < n; i++) {
		_cleanup_strv_ struct pisb_strv deps = PISB_STRV_INIT;

		for (size_t k = 0; k < sv[i].env.n; k++) {
			const char *val = sv[i].env.v[k].val;
			_cleanup_free_ char *p = xasprintf("services.%s.env.%s", sv[i].name,
							   sv[i].env.v[k].key);

			for (const char *r = strstr(val, pre); r; r = strstr(r + 1, pre)) {
				const char *close = strchr(r, '}');
				_cleanup_free_ char *ref = NULL, *target = NULL;
				size_t tl;
				long t;
				bool seen = false;

				if (!close)
					return bad(L, p, "unterminated reference '%s'", r);
				ref = xstrndup(r, (size_t)(close - r) + 1);
				tl = strlen(ref) - strlen(pre);
				if (tl <= strlen(suf) || !pisb_str_ends(ref, suf))
					return bad(L, p, "unsupported reference '%s' (only ${services.NAME.publicURL})", ref);
				target = xstrndup(ref + strlen(pre), tl - strlen(suf));
				if ((t = svc_find(ix, n, target)) < 0)
					return bad(L, p, "references unknown service '%s'", target);
				if (!pisb_service_enabled(&sv[t]))
					return bad(L, p, "references service '%s', which its platforms exclude (the guest is linux)", target);
				if (!sv[t].preview)
					return bad(L, p, "references service '%s', which has no preview", target);
				for (size_t d = 0; d < deps.n; d++)
					if (!strcmp(deps.v[d], target))
						seen = true;
				if (!seen)
					pisb_strv_push(&deps, target);
			}
		}
		sv[i].depends = deps.v;
		sv[i].ndepends = deps.n;
		deps.v = NULL;
		deps.n = deps.cap = 0;
	}
	return 0;
}

/* Start order: depth-first in file order, dependencies first.  Already
 * ordered input comes back unchanged, so printing and reloading is stable. */
static int order_services(struct ld *L, struct pisb_service *sv, size_t n,
			  const struct svc_ix *ix)
{
	_cleanup_free_ int *color = xcalloc(n ? n : 1, sizeof(int));   /* 0 white 1 grey 2 black */
	_cleanup_free_ size_t *stack = xcalloc(n ? n : 1, sizeof(size_t));
	_cleanup_free_ size_t *edge = xcalloc(n ? n : 1, sizeof(size_t));
	_cleanup_free_ size_t *order = xcalloc(n ? n : 1, sizeof(size_t));
	_cleanup_free_ struct pisb_service *tmp = NULL;
	size_t no = 0;

	for (size_t i = 0; i < n; i++) {
		size_t sp = 0;

		if (color[i])
			continue;
		stack[sp] = i;
		edge[sp++] = 0;
		color[i] = 1;
		while (sp) {
			size_t u = stack[sp - 1];

			if (edge[sp - 1] < sv[u].ndepends) {
				size_t v = (size_t)svc_find(ix, n, sv[u].depends[edge[sp - 1]++]);

				if (color[v] == 0) {
					color[v] = 1;
					stack[sp] = v;
					edge[sp++] = 0;
				} else if (color[v] == 1) {
					_cleanup_buf_ struct pisb_buf cyc = PISB_BUF_INIT;
					size_t j = sp;

					while (j > 0 && stack[j - 1] != v)
						j--;
					for (j = j - 1; j < sp; j++)
						pisb_buf_addf(&cyc, "%s -> ", sv[stack[j]].name);
					pisb_buf_adds(&cyc, sv[v].name);
					return bad(L, "services", "dependency cycle: %s", cyc.s);
				}
			} else {
				color[u] = 2;
				order[no++] = u;
				sp--;
			}
		}
	}
	tmp = xcalloc(n ? n : 1, sizeof(*tmp));
	for (size_t i = 0; i < n; i++)
		tmp[i] = sv[order[i]];
	memcpy(sv, tmp, n * sizeof(*sv));
	return 0;
}

static int load_services(struct ld *L, const struct ynode *n, struct pisb_config *c)
{
	size_t ns;
	_cleanup_free_ struct svc_ix *ix = NULL;

	if (need_map(L, "services", n) < 0)
		return -1;
	ns = NPAIRS(n);
	c->services = xcalloc(ns ? ns : 1, sizeof(*c->services));
	for (size_t k = 0; k < ns; k++) {
		_cleanup_free_ char *p = kpath("services", KEY(n, k)->s);

		c->nservices++;
		if (load_service(L, p, KEY(n, k)->s, VAL(n, k), &c->services[k]) < 0)
			return -1;
	}
	/* Fixed ports are unique among the services that run here (a few
	 * services: a look at the ones before, not a table of every port,
	 * which was half a MiB zeroed at each parse) */
	for (size_t k = 0; k < ns; k++) {
		const struct pisb_service *s = &c->services[k];

		if (!s->port || !pisb_service_enabled(s))
			continue;
		for (size_t j = 0; j < k; j++) {
			const struct pisb_service *o = &c->services[j];
			if (o->port == s->port && pisb_service_enabled(o)) {
				_cleanup_free_ char *p = xasprintf("services.%s.port", s->name);
				return bad(L, p, "%d is already used by services.%s", s->port, o->name);
			}
		}
	}
	ix = xcalloc(ns ? ns : 1, sizeof(*ix));
	for (size_t k = 0; k < ns; k++)
		ix[k] = (struct svc_ix){ c->services[k].name, k };
	qsort(ix, ns, sizeof(*ix), svc_ix_cmp);
	if (resolve_refs(L, c->services, ns, ix) < 0)
		return -1;
	return order_services(L, c->services, ns, ix);
}

/* ---- opensandbox: ------------------------------------------------------- */

static bool dns_label_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return s[0] != '-' && s[n - 1] != '-';
}

/* Kubernetes label name/value: alnum at both ends, [-A-Za-z0-9_.] inside. */
static bool label_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63)
		return false;
	if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

static bool label_key_ok(const char *k)
{
	const char *slash = strrchr(k, '/');

	if (slash) {
		size_t pl = (size_t)(slash - k);
		_cleanup_free_ char *prefix = xstrndup(k, pl);

		if (pl == 0 || pl > 253 || !hostname_ok(prefix))
			return false;
		for (const char *p = prefix; *p; p++)
			if (isupper((unsigned char)*p))
				return false;
		k = slash + 1;
	}
	return label_ok(k, strlen(k));
}

static int load_os_metadata(struct ld *L, const char *path, const struct ynode *n,
			    struct pisb_map *m)
{
	if (load_strmap(L, path, n, m) < 0)
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		_cleanup_free_ char *p = kpath(path, m->v[i].key);
		const char *k = m->v[i].key, *v = m->v[i].val;

		if (pisb_str_starts(k, "opensandbox.io/"))
			return bad(L, p, "keys under opensandbox.io/ are reserved");
		if (!strcmp(k, "pi-extension") || !strcmp(k, "pi-session-id"))
			return bad(L, p, "is set by pisb and cannot be replaced");
		if (!label_key_ok(k))
			return bad(L, p, "must be a Kubernetes label key ([prefix/]name; name at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)");
		if (*v && !label_ok(v, strlen(v)))
			return bad(L, p, "value must be a Kubernetes label value (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)");
	}
	return 0;
}

static int domain_check(struct ld *L, const char *path, const char *d)
{
	const char *colon = NULL, *host_end;
	_cleanup_free_ char *host = NULL;

	if (strstr(d, "://"))
		return bad(L, path, "must be host[:port] without a scheme (use protocol: https)");
	if (strchr(d, '/'))
		return bad(L, path, "must be host[:port] without a path");
	if (d[0] == '[') {
		const char *close = strchr(d, ']');

		if (!close || close == d + 1)
			return bad(L, path, "must be host[:port]");
		for (const char *p = d + 1; p < close; p++)
			if (!(isxdigit((unsigned char)*p) || *p == ':' || *p == '.'))
				return bad(L, path, "must be host[:port]");
		host_end = close + 1;
		if (*host_end && *host_end != ':')
			return bad(L, path, "must be host[:port]");
		colon = *host_end ? host_end : NULL;
	} else {
		colon = strchr(d, ':');
		host_end = colon ? colon : d + strlen(d);
		host = xstrndup(d, (size_t)(host_end - d));
		if (!hostname_ok(host))
			return bad(L, path, "must be host[:port]");
	}
	if (colon) {
		long long port;

		if (!all_digits(colon + 1) || pisb_parse_ll(colon + 1, 1, 65535, &port) < 0)
			return bad(L, path, "port must be 1-65535");
	}
	return 0;
}

static bool storage_ok(const char *s)
{
	static const char *const units[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", NULL };

	if (!isdigit((unsigned char)*s))
		return false;
	while (isdigit((unsigned char)*s))
		s++;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return false;
		while (isdigit((unsigned char)*s))
			s++;
	}
	for (int i = 0; units[i]; i++)
		if (!strcmp(s, units[i]))
			return true;
	return false;
}

static int access_mode_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	static const char *const words[] = { "ReadWriteOnce", "ReadOnlyMany",
		"ReadWriteMany", "ReadWriteOncePod", NULL };
	int i = need_enum(L, path, n, words,
			  "must be one of: ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod");

	if (i < 0)
		return -1;
	*out = xstrdup(words[i]);
	return 0;
}

static int ossfs_option_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	if (need_nonempty(L, path, n, out) < 0)
		return -1;
	if ((*out)[0] == '-') {
		free(*out);
		*out = NULL;
		return bad(L, path, "must not start with '-' (give the option without dashes)");
	}
	return 0;
}

static void volume_release(struct pisb_os_volume *v)
{
	free(v->name);
	free(v->mount_path);
	free(v->sub_path);
	free(v->claim_name);
	free(v->storage_class);
	free(v->storage);
	strv_free(v->access_modes, v->naccess_modes);
	free(v->bucket);
	free(v->endpoint);
	free(v->version);
	free(v->access_key_id);
	free(v->access_key_secret);
	strv_free(v->options, v->noptions);
	memset(v, 0, sizeof(*v));
}

static int load_pvc(struct ld *L, const char *path, const struct ynode *n,
		    struct pisb_os_volume *vol)
{
	static const char *const keys[] = { "claimName", "createIfNotExists",
		"deleteOnSandboxTermination", "storageClass", "storage", "accessModes", NULL };
	const struct ynode *v;

	if (need_map(L, path, n) < 0 || check_keys(L, path, n, keys) < 0)
		return -1;
	vol->is_pvc = true;
	vol->create_if_not_exists = true;
#define SUB(key) _cleanup_free_ char *p_##key = kpath(path, #key)
	SUB(claimName); SUB(createIfNotExists); SUB(deleteOnSandboxTermination);
	SUB(storageClass); SUB(storage); SUB(accessModes);
#undef SUB
	if (!(v = mget(n, "claimName")))
		return bad(L, p_claimName, "is required");
	if (need_nonempty(L, p_claimName, v, &vol->claim_name) < 0)
		return -1;
	if (!dns_label_ok(vol->claim_name, 253))
		return bad(L, p_claimName, "must be lowercase letters, digits and '-' (at most 253), alphanumeric at both ends");
	if ((v = mget(n, "createIfNotExists")) &&
	    need_bool(L, p_createIfNotExists, v, &vol->create_if_not_exists) < 0)
		return -1;
	if ((v = mget(n, "deleteOnSandboxTermination")) &&
	    need_bool(L, p_deleteOnSandboxTermination, v, &vol->delete_on_termination) < 0)
		return -1;
	if ((v = mget(n, "storageClass")) &&
	    need_nonempty(L, p_storageClass, v, &vol->storage_class) < 0)
		return -1;
	if ((v = mget(n, "storage"))) {
		if (need_text(L, p_storage, v, &vol->storage) < 0)
			return -1;
		if (!storage_ok(vol->storage))
			return bad(L, p_storage, "must be a size like 10Gi (a number with an optional Ki, Mi, Gi, Ti, Pi or Ei)");
	}
	if ((v = mget(n, "accessModes"))) {
		if (need_list_of(L, p_accessModes, v, access_mode_item, &vol->access_modes,
				 &vol->naccess_modes) < 0)
			return -1;
		if (vol->naccess_modes == 0)
			return bad(L, p_accessModes, "must not be empty");
	}
	return 0;
}

static int load_ossfs(struct ld *L, const char *path, const struct ynode *n,
		      struct pisb_os_volume *vol)
{
	static const char *const keys[] = { "bucket", "endpoint", "version", "options",
		"accessKeyId", "accessKeySecret", NULL };
	const struct ynode *v;

	if (need_map(L, path, n) < 0 || check_keys(L, path, n, keys) < 0)
		return -1;
#define SUB(key) _cleanup_free_ char *p_##key = kpath(path, #key)
	SUB(bucket); SUB(endpoint); SUB(version); SUB(options);
	SUB(accessKeyId); SUB(accessKeySecret);
#undef SUB
	if (!(v = mget(n, "bucket")))
		return bad(L, p_bucket, "is required");
	if (need_str(L, p_bucket, v, &vol->bucket) < 0)
		return -1;
	if (strlen(vol->bucket) < 3 || strlen(vol->bucket) > 63)
		return bad(L, p_bucket, "must be 3-63 characters");
	if (!(v = mget(n, "endpoint")))
		return bad(L, p_endpoint, "is required");
	if (need_nonempty(L, p_endpoint, v, &vol->endpoint) < 0)
		return -1;
	if ((v = mget(n, "version"))) {
		if (need_text(L, p_version, v, &vol->version) < 0)
			return -1;
		if (strcmp(vol->version, "1.0") && strcmp(vol->version, "2.0"))
			return bad(L, p_version, "must be \"1.0\" or \"2.0\"");
	} else {
		vol->version = xstrdup("2.0");
	}
	if ((v = mget(n, "options")) &&
	    need_list_of(L, p_options, v, ossfs_option_item, &vol->options, &vol->noptions) < 0)
		return -1;
	if (!(v = mget(n, "accessKeyId")))
		return bad(L, p_accessKeyId, "is required");
	if (need_nonempty(L, p_accessKeyId, v, &vol->access_key_id) < 0)
		return -1;
	if (!(v = mget(n, "accessKeySecret")))
		return bad(L, p_accessKeySecret, "is required");
	if (need_nonempty(L, p_accessKeySecret, v, &vol->access_key_secret) < 0)
		return -1;
	return 0;
}

static int load_volume(struct ld *L, const char *path, const struct ynode *n,
		       struct pisb_os_volume *vol)
{
	static const char *const keys[] = { "name", "mountPath", "readOnly", "subPath",
		"pvc", "ossfs", NULL };
	const struct ynode *v, *pvc, *oss;

	if (need_map(L, path, n) < 0 || check_keys(L, path, n, keys) < 0)
		return -1;
#define SUB(key) _cleanup_free_ char *p_##key = kpath(path, #key)
	SUB(name); SUB(mountPath); SUB(readOnly); SUB(subPath); SUB(pvc); SUB(ossfs);
#undef SUB
	if (!(v = mget(n, "name")))
		return bad(L, p_name, "is required");
	if (need_nonempty(L, p_name, v, &vol->name) < 0)
		return -1;
	if (!dns_label_ok(vol->name, 63))
		return bad(L, p_name, "must be a DNS label (at most 63 lowercase letters, digits and '-', alphanumeric at both ends)");
	if (!(v = mget(n, "mountPath")))
		return bad(L, p_mountPath, "is required");
	if (abs_dir(L, p_mountPath, v, false, &vol->mount_path) < 0)
		return -1;
	if ((v = mget(n, "readOnly")) && need_bool(L, p_readOnly, v, &vol->read_only) < 0)
		return -1;
	if ((v = mget(n, "subPath")) && rel_dir(L, p_subPath, v, "volume", &vol->sub_path) < 0)
		return -1;
	pvc = mget(n, "pvc");
	oss = mget(n, "ossfs");
	if (pvc && oss)
		return bad(L, path, "pvc and ossfs are mutually exclusive (give exactly one)");
	if (!pvc && !oss)
		return bad(L, path, "needs exactly one of pvc, ossfs");
	return pvc ? load_pvc(L, p_pvc, pvc, vol) : load_ossfs(L, p_ossfs, oss, vol);
}

static int load_opensandbox(struct ld *L, const struct ynode *n, struct pisb_os_config *os)
{
	static const char *const keys[] = { "domain", "protocol", "apiKeyFile", "image",
		"snapshotId", "sandboxId", "timeoutSeconds", "resourceLimits", "entrypoint",
		"env", "metadata", "volumes", "networkAllowlist", "lifecycle", "workspace", NULL };
	static const char *const create_only[] = { "resourceLimits", "entrypoint", "env",
		"metadata", "volumes", "networkAllowlist", NULL };
	static const char *const sources[] = { "image", "snapshotId", "sandboxId", NULL };
	const char *P = "opensandbox";
	const struct ynode *v;
	const char *given[3];
	int ngiven = 0;

	os->present = true;
	if (need_map(L, P, n) < 0)
		return -1;
	if (mget(n, "apiKey"))
		return bad(L, "opensandbox.apiKey", "API keys are not allowed in the config file; use apiKeyFile or OPEN_SANDBOX_API_KEY");
	if (check_keys(L, P, n, keys) < 0)
		return -1;
	if (!(v = mget(n, "domain")))
		return bad(L, "opensandbox.domain", "is required");
	if (need_nonempty(L, "opensandbox.domain", v, &os->domain) < 0 ||
	    domain_check(L, "opensandbox.domain", os->domain) < 0)
		return -1;
	if ((v = mget(n, "protocol"))) {
		static const char *const words[] = { "http", "https", NULL };
		int i = need_enum(L, "opensandbox.protocol", v, words, "must be http or https");

		if (i < 0)
			return -1;
		free(os->protocol);
		os->protocol = xstrdup(words[i]);
	}
	if ((v = mget(n, "apiKeyFile")) &&
	    host_path(L, "opensandbox.apiKeyFile", v, &os->api_key_file) < 0)
		return -1;

	for (int i = 0; sources[i]; i++)
		if (mget(n, sources[i]))
			given[ngiven++] = sources[i];
	if (ngiven == 0)
		return bad(L, P, "needs exactly one of image, snapshotId, sandboxId");
	if (ngiven > 1)
		return bad(L, P, "%s and %s are mutually exclusive (give exactly one of image, snapshotId, sandboxId)",
			   given[0], given[1]);
	if ((v = mget(n, "image")) && need_nonempty(L, "opensandbox.image", v, &os->image) < 0)
		return -1;
	if ((v = mget(n, "snapshotId")) &&
	    need_nonempty(L, "opensandbox.snapshotId", v, &os->snapshot_id) < 0)
		return -1;
	if ((v = mget(n, "sandboxId"))) {
		if (need_nonempty(L, "opensandbox.sandboxId", v, &os->sandbox_id) < 0)
			return -1;
		for (int i = 0; create_only[i]; i++)
			if (mget(n, create_only[i])) {
				_cleanup_free_ char *p = kpath(P, create_only[i]);
				return bad(L, p, "is create-only and cannot be used with sandboxId (connect)");
			}
	}
	if ((v = mget(n, "timeoutSeconds")) &&
	    need_int(L, "opensandbox.timeoutSeconds", v, 1, SAFE_INT_MAX,
		     "must be a positive safe integer (1-9007199254740991)", &os->timeout_seconds) < 0)
		return -1;
	if ((v = mget(n, "resourceLimits")) &&
	    load_strmap(L, "opensandbox.resourceLimits", v, &os->resource_limits) < 0)
		return -1;
	if ((v = mget(n, "entrypoint"))) {
		if (need_list_of(L, "opensandbox.entrypoint", v, cmd_item, &os->entrypoint,
				 &os->nentrypoint) < 0)
			return -1;
		if (os->nentrypoint == 0)
			return bad(L, "opensandbox.entrypoint", "must not be empty");
	}
	if ((v = mget(n, "env")) && load_env(L, "opensandbox.env", v, &os->env, ENV_REMOTE) < 0)
		return -1;
	if ((v = mget(n, "metadata")) &&
	    load_os_metadata(L, "opensandbox.metadata", v, &os->metadata) < 0)
		return -1;
	if ((v = mget(n, "volumes"))) {
		_cleanup_free_ struct keyref *names = NULL;
		size_t first;
		long d;

		if (need_list(L, "opensandbox.volumes", v) < 0)
			return -1;
		os->volumes = xcalloc(v->nkid ? v->nkid : 1, sizeof(*os->volumes));
		names = xcalloc(v->nkid ? v->nkid : 1, sizeof(*names));
		for (size_t i = 0; i < v->nkid; i++) {
			_cleanup_free_ char *p = ipath("opensandbox.volumes", i);

			os->nvolumes++;
			if (load_volume(L, p, v->kid[i], &os->volumes[i]) < 0)
				return -1;
			names[i] = (struct keyref){ os->volumes[i].name,
						    strlen(os->volumes[i].name), i };
		}
		d = first_dup(names, os->nvolumes, &first);
		if (d >= 0) {
			_cleanup_free_ char *p = xasprintf("opensandbox.volumes[%ld].name", d);
			return bad(L, p, "'%s' is already used by opensandbox.volumes[%zu]",
				   os->volumes[d].name, first);
		}
	}
	if ((v = mget(n, "networkAllowlist"))) {
		os->has_network_allowlist = true;
		if (need_list_of(L, "opensandbox.networkAllowlist", v, host_item,
				 &os->network_allowlist, &os->nnetwork_allowlist) < 0)
			return -1;
	}
	if ((v = mget(n, "lifecycle"))) {
		static const char *const lkeys[] = { "onSessionShutdown", NULL };
		static const char *const words[] = { "kill", "pause", "keep", NULL };
		const struct ynode *w;

		if (need_map(L, "opensandbox.lifecycle", v) < 0 ||
		    check_keys(L, "opensandbox.lifecycle", v, lkeys) < 0)
			return -1;
		if ((w = mget(v, "onSessionShutdown"))) {
			int i = need_enum(L, "opensandbox.lifecycle.onSessionShutdown", w, words,
					  "must be kill, pause or keep");
			if (i < 0)
				return -1;
			os->on_shutdown = (enum pisb_policy)i;
		}
	}
	if ((v = mget(n, "workspace"))) {
		free(os->workspace);
		os->workspace = NULL;
		if (abs_dir(L, "opensandbox.workspace", v, false, &os->workspace) < 0)
			return -1;
	}
	return 0;
}

/* ---- sbx: --------------------------------------------------------------- */

/* "4g", "8192m": at least 1 GiB; normalised to lower case. */
static int sbx_memory(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	const char *rule = "must be a size like 4g or 8192m";
	long long v;
	char unit;
	_cleanup_free_ char *digits = NULL;

	if (n->t != YT_STR || n->len < 2 || strlen(n->s) != n->len)
		return bad(L, path, "%s", rule);
	unit = (char)tolower((unsigned char)n->s[n->len - 1]);
	digits = xstrndup(n->s, n->len - 1);
	if ((unit != 'm' && unit != 'g') || !all_digits(digits) ||
	    pisb_parse_ll(digits, 0, 1LL << 40, &v) < 0)
		return bad(L, path, "%s", rule);
	if ((unit == 'g' && v < 1) || (unit == 'm' && v < 1024))
		return bad(L, path, "must be at least 1g");
	*out = xasprintf("%lld%c", v, unit);
	return 0;
}

static int load_sbx(struct ld *L, const struct ynode *n, struct pisb_sbx_config *x)
{
	static const char *const keys[] = { "cpus", "memory", "template", "workspaceReadOnly",
		"keepalive", "teardown", "envAllowlist", "envPassthrough", NULL };
	static const char *const words[] = { "remove", "stop", "none", NULL };
	const struct ynode *v;
	long long ll = 0;

	x->present = true;
	if (need_map(L, "sbx", n) < 0 || check_keys(L, "sbx", n, keys) < 0)
		return -1;
	if ((v = mget(n, "cpus"))) {
		if (need_int(L, "sbx.cpus", v, 1, 256, NULL, &ll) < 0)
			return -1;
		x->cpus = (int)ll;
	}
	if ((v = mget(n, "memory")) && sbx_memory(L, "sbx.memory", v, &x->memory) < 0)
		return -1;
	if ((v = mget(n, "template")) && need_nonempty(L, "sbx.template", v, &x->template_) < 0)
		return -1;
	if ((v = mget(n, "workspaceReadOnly")) &&
	    need_bool(L, "sbx.workspaceReadOnly", v, &x->workspace_read_only) < 0)
		return -1;
	if ((v = mget(n, "keepalive")) && need_bool(L, "sbx.keepalive", v, &x->keepalive) < 0)
		return -1;
	if ((v = mget(n, "teardown"))) {
		int i = need_enum(L, "sbx.teardown", v, words, "must be remove, stop or none");

		if (i < 0)
			return -1;
		x->teardown = (enum pisb_teardown)i;
	}
	if ((v = mget(n, "envAllowlist")) &&
	    need_list_of(L, "sbx.envAllowlist", v, envname_item, &x->env_allowlist,
			 &x->nenv_allowlist) < 0)
		return -1;
	if ((v = mget(n, "envPassthrough")) &&
	    need_list_of(L, "sbx.envPassthrough", v, envname_item, &x->env_passthrough,
			 &x->nenv_passthrough) < 0)
		return -1;
	return 0;
}

/* ---- project: ----------------------------------------------------------- */

/* A path glob (glob.h): relative, no NUL. */
static int glob_item(struct ld *L, const char *path, const struct ynode *n, char **out)
{
	if (need_nonempty(L, path, n, out) < 0)
		return -1;
	if ((*out)[0] == '/') {
		free(*out);
		*out = NULL;
		return bad(L, path, "must be a pattern relative to the project");
	}
	return 0;
}

static int load_project(struct ld *L, const struct ynode *n, struct pisb_project_config *p)
{
	static const char *const keys[] = { "dir", "mode", "include", "exclude", "git", "secrets",
		"secretPatterns", NULL };
	static const char *const modes[] = { "copy", "bind", "bind-ro", "none", NULL };
	static const char *const gits[] = { "none", "host", NULL };
	static const char *const secrets[] = { "hide", "include", NULL };
	const struct ynode *v;
	int i;

	p->present = true;
	if (need_map(L, "project", n) < 0 || check_keys(L, "project", n, keys) < 0)
		return -1;
	if ((v = mget(n, "dir")) && host_path(L, "project.dir", v, &p->dir) < 0)
		return -1;
	if ((v = mget(n, "mode"))) {
		if ((i = need_enum(L, "project.mode", v, modes, "must be copy, bind, bind-ro or none")) < 0)
			return -1;
		p->mode = (enum pisb_project_mode)i;
	}
	if ((v = mget(n, "include")) &&
	    need_list_of(L, "project.include", v, glob_item, &p->include, &p->ninclude) < 0)
		return -1;
	if ((v = mget(n, "exclude")) &&
	    need_list_of(L, "project.exclude", v, glob_item, &p->exclude, &p->nexclude) < 0)
		return -1;
	if ((v = mget(n, "git"))) {
		if ((i = need_enum(L, "project.git", v, gits, "must be none or host")) < 0)
			return -1;
		p->git_host = i == 1;
	}
	if ((v = mget(n, "secrets"))) {
		if ((i = need_enum(L, "project.secrets", v, secrets, "must be hide or include")) < 0)
			return -1;
		p->secrets_include = i == 1;
	}
	if ((v = mget(n, "secretPatterns")) &&
	    need_list_of(L, "project.secretPatterns", v, glob_item, &p->secret_patterns,
			 &p->nsecret_patterns) < 0)
		return -1;
	return 0;
}

/* ---- the document ------------------------------------------------------- */

static const struct {
	const char *name;
	int cpus, memory_gib;
} profiles[] = {
	{ "tiny", 1, 2 }, { "small", 2, 4 }, { "medium", 4, 8 },
	{ "large", 8, 16 }, { "xlarge", 16, 32 },
};

static int load_doc(struct ld *L, const struct ynode *root, struct pisb_config *c)
{
	static const char *const keys[] = { "version", "driver", "profile", "resources",
		"diskGiB", "image", "workspace", "setup", "resume", "services", "network",
		"preview", "env", "metadata", "opensandbox", "sbx", "docker", "project", NULL };
	const struct ynode *v;
	long long ll = 0;

	if (!root || root->t == YT_NULL)
		return 0;
	if (root->t != YT_MAP)
		return bad(L, NULL, "the top level must be a mapping");
	if (mget(root, "review"))
		return bad(L, "review", "is not supported (Amp review is not available in pisb)");
	if (check_keys(L, NULL, root, keys) < 0)
		return -1;

	if ((v = mget(root, "version"))) {
		if (v->t != YT_INT)
			return bad(L, "version", "must be an integer");
		if (v->i != 1)
			return bad(L, "version", "must be 1");
	}
	if ((v = mget(root, "driver"))) {
		/* the drivers of this build: the registry's names */
		const char *words[16];
		_cleanup_buf_ struct pisb_buf rule = PISB_BUF_INIT;
		size_t n = 0;
		int i;

		for (const struct pisb_driver *const *d = pisb_drivers; *d && n < 15; d++)
			words[n++] = (*d)->name;
		words[n] = NULL;
		pisb_buf_adds(&rule, "must be one of: ");
		pisb_driver_names(&rule, ", ");
		if ((i = need_enum(L, "driver", v, words, rule.s)) < 0)
			return -1;
		free(c->driver);
		c->driver = xstrdup(words[i]);
	}
	if ((v = mget(root, "profile"))) {
		static const char *const words[] = { "tiny", "small", "medium", "large", "xlarge", NULL };
		int i = need_enum(L, "profile", v, words,
				  "must be one of: tiny, small, medium, large, xlarge");

		if (i < 0)
			return -1;
		free(c->profile);
		c->profile = xstrdup(words[i]);
		c->profile_explicit = true;
		c->cpus = profiles[i].cpus;
		c->memory_gib = profiles[i].memory_gib;
	}
	if ((v = mget(root, "resources"))) {
		static const char *const rkeys[] = { "cpus", "memoryGiB", "pids", NULL };
		const struct ynode *w;

		if (need_map(L, "resources", v) < 0 || check_keys(L, "resources", v, rkeys) < 0)
			return -1;
		c->resources_explicit = true;
		if ((w = mget(v, "cpus"))) {
			if (need_int(L, "resources.cpus", w, 1, 64, NULL, &ll) < 0)
				return -1;
			c->cpus = (int)ll;
		}
		if ((w = mget(v, "memoryGiB"))) {
			if (need_int(L, "resources.memoryGiB", w, 1, 1024, NULL, &ll) < 0)
				return -1;
			c->memory_gib = (int)ll;
		}
		if ((w = mget(v, "pids"))) {
			if (need_int(L, "resources.pids", w, 16, 1000000, NULL, &ll) < 0)
				return -1;
			c->pids = (int)ll;
		}
	}
	if ((v = mget(root, "diskGiB"))) {
		if (need_int(L, "diskGiB", v, 2, 1048576,
			     v->t == YT_INT && v->i >= 2 ? "must be at most 1048576" :
			     "must be an integer >= 2", &ll) < 0)
			return -1;
		c->disk_gib = (int)ll;
		c->disk_explicit = true;
	}
	if ((v = mget(root, "image"))) {
		_cleanup_free_ char *img = NULL;

		if (v->t == YT_STR && v->len == 4 && !strcmp(v->s, "host")) {
			img = xstrdup("host");
		} else if (host_path(L, "image", v, &img) < 0) {
			return -1;
		}
		free(c->image);
		c->image = PISB_STEAL(img);
	}
	if ((v = mget(root, "workspace"))) {
		_cleanup_free_ char *w = NULL;

		if (abs_dir(L, "workspace", v, false, &w) < 0)
			return -1;
		free(c->workspace);
		c->workspace = PISB_STEAL(w);
	}
	if ((v = mget(root, "setup")) &&
	    need_list_of(L, "setup", v, cmd_item, &c->setup, &c->nsetup) < 0)
		return -1;
	if ((v = mget(root, "resume")) &&
	    need_list_of(L, "resume", v, cmd_item, &c->resume, &c->nresume) < 0)
		return -1;
	if ((v = mget(root, "env")) && load_env(L, "env", v, &c->env, ENV_TOP) < 0)
		return -1;
	if ((v = mget(root, "metadata")) && load_strmap(L, "metadata", v, &c->metadata) < 0)
		return -1;
	if ((v = mget(root, "network"))) {
		static const char *const nkeys[] = { "allowedHosts", NULL };
		const struct ynode *w;

		if (need_map(L, "network", v) < 0 || check_keys(L, "network", v, nkeys) < 0)
			return -1;
		if ((w = mget(v, "allowedHosts")) &&
		    need_list_of(L, "network.allowedHosts", w, allowed_host_item, &c->allowed_hosts,
				 &c->nallowed_hosts) < 0)
			return -1;
	}
	if ((v = mget(root, "preview"))) {
		static const char *const pkeys[] = { "auth", NULL };
		static const char *const auths[] = { "none", "token", NULL };
		const struct ynode *w;

		if (need_map(L, "preview", v) < 0 || check_keys(L, "preview", v, pkeys) < 0)
			return -1;
		if ((w = mget(v, "auth"))) {
			int i = need_enum(L, "preview.auth", w, auths, "must be one of: none, token");
			if (i < 0)
				return -1;
			c->preview_token = i == 1;
		}
	}
	if ((v = mget(root, "services")) && load_services(L, v, c) < 0)
		return -1;
	if ((v = mget(root, "docker"))) {
		if (need_bool(L, "docker", v, &c->docker) < 0)
			return -1;
		/* a sbx sandbox has its daemon anyway */
		if (c->docker && !pisb_driver_can(c->driver, PISB_DRV_DOCKER_OPT)) {
			_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
			pisb_driver_names_with(&b, PISB_DRV_DOCKER_OPT);
			return bad(L, "docker", "is for %s only (driver is %s%s)", b.s, c->driver,
				   pisb_driver_can(c->driver, PISB_DRV_DOCKER_ALWAYS)
					   ? ", whose sandboxes always have their own daemon" : "");
		}
		if (c->docker && strcmp(c->image, "host"))
			return bad(L, "docker", "needs image: host (the daemon is the host's dockerd, run inside the sandbox)");
		if (c->docker && pisb_config_service(c, PISB_DOCKER_SERVICE))
			return bad(L, "services." PISB_DOCKER_SERVICE, "is the name of the built-in docker daemon's service (docker: true)");
	}
	if ((v = mget(root, "opensandbox")) && load_opensandbox(L, v, &c->os) < 0)
		return -1;
	{
		/* a driver that needs its own section (opensandbox: the server) */
		const struct pisb_driver *d = pisb_driver_find(c->driver);
		if (d && (d->caps & PISB_DRV_CONFIG_SECTION) && !mget(root, d->name))
			return bad(L, d->name, "is required when driver is %s", d->name);
	}
	if ((v = mget(root, "sbx")) && load_sbx(L, v, &c->sbx) < 0)
		return -1;
	if ((v = mget(root, "project")) && load_project(L, v, &c->project) < 0)
		return -1;
	return 0;
}

/* ---- public API --------------------------------------------------------- */

struct pisb_config *pisb_config_default(void)
{
	struct pisb_config *c = xcalloc(1, sizeof(*c));

	c->version = 1;
	c->driver = xstrdup("local");
	c->profile = xstrdup("small");
	c->cpus = 2;
	c->memory_gib = 4;
	c->pids = 4096;
	c->disk_gib = 60;
	c->image = xstrdup("host");
	c->workspace = xstrdup("/workspace");
	c->os.protocol = xstrdup("http");
	c->os.timeout_seconds = 3600;
	c->os.on_shutdown = PISB_POLICY_KILL;
	c->os.workspace = xstrdup("/workspace");
	c->sbx.teardown = PISB_TEARDOWN_REMOVE;
	return c;
}

void pisb_config_proxy_env(const struct pisb_config *c, struct pisb_strv *out)
{
	if (!c->nallowed_hosts)
		return;
	pisb_strv_push(out, "HTTP_PROXY=http://127.0.0.1:3128");
	pisb_strv_push(out, "HTTPS_PROXY=http://127.0.0.1:3128");
	pisb_strv_push(out, "http_proxy=http://127.0.0.1:3128");
	pisb_strv_push(out, "https_proxy=http://127.0.0.1:3128");
	pisb_strv_push(out, "NO_PROXY=localhost,127.0.0.1,::1");
	pisb_strv_push(out, "no_proxy=localhost,127.0.0.1,::1");
}

void pisb_config_free(struct pisb_config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->driver);
	free(c->profile);
	free(c->image);
	free(c->workspace);
	strv_free(c->setup, c->nsetup);
	strv_free(c->resume, c->nresume);
	for (size_t i = 0; i < c->nservices; i++)
		service_release(&c->services[i]);
	free(c->services);
	strv_free(c->allowed_hosts, c->nallowed_hosts);
	map_release(&c->env);
	map_release(&c->metadata);

	free(c->os.domain);
	free(c->os.protocol);
	free(c->os.api_key_file);
	free(c->os.image);
	free(c->os.snapshot_id);
	free(c->os.sandbox_id);
	map_release(&c->os.resource_limits);
	strv_free(c->os.entrypoint, c->os.nentrypoint);
	map_release(&c->os.env);
	map_release(&c->os.metadata);
	for (size_t i = 0; i < c->os.nvolumes; i++)
		volume_release(&c->os.volumes[i]);
	free(c->os.volumes);
	strv_free(c->os.network_allowlist, c->os.nnetwork_allowlist);
	free(c->os.workspace);

	free(c->sbx.memory);
	free(c->sbx.template_);
	strv_free(c->sbx.env_allowlist, c->sbx.nenv_allowlist);
	strv_free(c->sbx.env_passthrough, c->sbx.nenv_passthrough);

	free(c->project.dir);
	strv_free(c->project.include, c->project.ninclude);
	strv_free(c->project.exclude, c->project.nexclude);
	strv_free(c->project.secret_patterns, c->project.nsecret_patterns);
	free(c);
}

static int load(const char *buf, size_t len, const char *name, const char *base,
		struct pisb_config **out, struct pisb_err *e)
{
	struct ld L = { name, base, buf, len, e };
	__attribute__((cleanup(ynode_freep))) struct ynode *root = NULL;
	struct pisb_config *c;

	*out = NULL;
	if (len > PISB_CONFIG_MAX)
		return bad(&L, NULL, "larger than 1 MiB");
	if (build_tree(&L, &root) < 0)
		return -1;
	if (root && check_tree(&L, NULL, root) < 0)
		return -1;
	c = pisb_config_default();
	if (load_doc(&L, root, c) < 0) {
		pisb_config_free(c);
		return -1;
	}
	/* The normalised JSON is what the guest copy and the instance record
	 * hold, and it is loaded again later: it must fit the same limit. */
	{
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;

		pisb_jw_init(&w, &b);
		pisb_config_json(c, &w);
		if (b.len > PISB_CONFIG_MAX) {
			pisb_config_free(c);
			return bad(&L, NULL, "larger than 1 MiB once normalised");
		}
	}
	*out = c;
	return 0;
}

int pisb_config_load_buf(const char *buf, size_t len, const char *name,
			 const char *base_dir, struct pisb_config **out,
			 struct pisb_err *e)
{
	return load(buf, len, name, base_dir, out, e);
}

int pisb_config_load(const char *path, struct pisb_config **out, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *abs = NULL, *dir = NULL;
	struct stat st;
	char *slash;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_USAGE,
				    "%s", path);
	if (fstat(fd, &st) < 0)
		return pisb_err_sys(e, PISB_EXIT_USAGE, "%s", path);
	if (S_ISDIR(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_USAGE, "%s: is a directory", path);
	if (S_ISREG(st.st_mode) && st.st_size > PISB_CONFIG_MAX)
		return pisb_err_set(e, PISB_EXIT_USAGE, "%s: larger than 1 MiB", path);
	if (pisb_read_fd(fd, &b, PISB_CONFIG_MAX) < 0) {
		if (errno == E2BIG)
			return pisb_err_set(e, PISB_EXIT_USAGE, "%s: larger than 1 MiB", path);
		return pisb_err_sys(e, PISB_EXIT_USAGE, "%s", path);
	}
	if (path[0] == '/') {
		abs = path_norm(path);
	} else {
		_cleanup_free_ char *cwd = getcwd(NULL, 0), *j = NULL;

		if (!cwd)
			return pisb_err_sys(e, PISB_EXIT_USAGE, "%s: getcwd", path);
		j = xasprintf("%s/%s", cwd, path);
		abs = path_norm(j);
	}
	dir = xstrdup(abs);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (load(b.s ? b.s : "", b.len, path, dir, out, e) < 0)
		return -1;
	(*out)->path = PISB_STEAL(abs);
	return 0;
}

const char *pisb_map_get(const struct pisb_map *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->v[i].key, key))
			return m->v[i].val;
	return NULL;
}

const struct pisb_service *pisb_config_service(const struct pisb_config *c,
					       const char *name)
{
	for (size_t i = 0; i < c->nservices; i++)
		if (!strcmp(c->services[i].name, name))
			return &c->services[i];
	return NULL;
}

bool pisb_service_enabled(const struct pisb_service *s)
{
	if (!s->platforms)
		return true;
	for (size_t i = 0; i < s->nplatforms; i++)
		if (!strcmp(s->platforms[i], "linux"))
			return true;
	return false;
}

/* ---- JSON --------------------------------------------------------------- */

static void jw_strv(struct pisb_jw *w, const char *k, char *const *v, size_t n)
{
	pisb_jw_key(w, k);
	pisb_jw_arr(w);
	for (size_t i = 0; i < n; i++)
		pisb_jw_str(w, v[i]);
	pisb_jw_arr_end(w);
}

static void jw_map(struct pisb_jw *w, const char *k, const struct pisb_map *m)
{
	pisb_jw_key(w, k);
	pisb_jw_obj(w);
	for (size_t i = 0; i < m->n; i++)
		pisb_jw_kstr(w, m->v[i].key, m->v[i].val);
	pisb_jw_obj_end(w);
}

static void jw_link(struct pisb_jw *w, const struct pisb_link *l)
{
	pisb_jw_obj(w);
	if (l->url)
		pisb_jw_kstr(w, "url", l->url);
	pisb_jw_kstr(w, "title", l->title);
	if (l->description)
		pisb_jw_kstr(w, "description", l->description);
	pisb_jw_obj_end(w);
}

static void jw_service(struct pisb_jw *w, const struct pisb_service *s)
{
	size_t i = 0;

	pisb_jw_key(w, s->name);
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "command", s->command);
	if (s->cwd)
		pisb_jw_kstr(w, "cwd", s->cwd);
	if (s->port)
		pisb_jw_kint(w, "port", s->port);
	jw_map(w, "env", &s->env);
	if (s->health == PISB_HEALTH_HTTP)
		pisb_jw_kstr(w, "health", s->health_path);
	else if (s->health == PISB_HEALTH_PROCESS)
		pisb_jw_kstr(w, "health", "process");
	pisb_jw_kint(w, "timeoutMs", s->timeout_ms);
	pisb_jw_key(w, "preview");
	if (s->preview_main && s->nlinks) {
		jw_link(w, &s->links[0]);
		i = 1;
	} else {
		pisb_jw_bool(w, false);
	}
	pisb_jw_key(w, "previews");
	pisb_jw_arr(w);
	while (i < s->nlinks) {
		const char *f = s->links[i].folder;

		if (!f) {
			jw_link(w, &s->links[i++]);
			continue;
		}
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "folder", f);
		pisb_jw_key(w, "links");
		pisb_jw_arr(w);
		while (i < s->nlinks && s->links[i].folder && !strcmp(s->links[i].folder, f))
			jw_link(w, &s->links[i++]);
		pisb_jw_arr_end(w);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
	if (s->platforms)
		jw_strv(w, "platforms", s->platforms, s->nplatforms);
	pisb_jw_obj_end(w);
}

static void jw_volume(struct pisb_jw *w, const struct pisb_os_volume *v)
{
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", v->name);
	pisb_jw_kstr(w, "mountPath", v->mount_path);
	pisb_jw_kbool(w, "readOnly", v->read_only);
	if (v->sub_path)
		pisb_jw_kstr(w, "subPath", v->sub_path);
	if (v->is_pvc) {
		pisb_jw_key(w, "pvc");
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "claimName", v->claim_name);
		pisb_jw_kbool(w, "createIfNotExists", v->create_if_not_exists);
		pisb_jw_kbool(w, "deleteOnSandboxTermination", v->delete_on_termination);
		if (v->storage_class)
			pisb_jw_kstr(w, "storageClass", v->storage_class);
		if (v->storage)
			pisb_jw_kstr(w, "storage", v->storage);
		if (v->naccess_modes)
			jw_strv(w, "accessModes", v->access_modes, v->naccess_modes);
		pisb_jw_obj_end(w);
	} else {
		pisb_jw_key(w, "ossfs");
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "bucket", v->bucket);
		pisb_jw_kstr(w, "endpoint", v->endpoint);
		pisb_jw_kstr(w, "version", v->version);
		if (v->noptions)
			jw_strv(w, "options", v->options, v->noptions);
		pisb_jw_kstr(w, "accessKeyId", v->access_key_id);
		/* a credential: the normalised form (records, validate, inspect)
		 * never carries it; only the in-memory config sent at create does */
		pisb_jw_kstr(w, "accessKeySecret", "<redacted>");
		pisb_jw_obj_end(w);
	}
	pisb_jw_obj_end(w);
}

static void jw_opensandbox(struct pisb_jw *w, const struct pisb_os_config *os)
{
	static const char *const policy[] = { "kill", "pause", "keep" };

	pisb_jw_key(w, "opensandbox");
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "domain", os->domain);
	pisb_jw_kstr(w, "protocol", os->protocol);
	if (os->api_key_file)
		pisb_jw_kstr(w, "apiKeyFile", os->api_key_file);
	if (os->image)
		pisb_jw_kstr(w, "image", os->image);
	if (os->snapshot_id)
		pisb_jw_kstr(w, "snapshotId", os->snapshot_id);
	if (os->sandbox_id)
		pisb_jw_kstr(w, "sandboxId", os->sandbox_id);
	pisb_jw_kint(w, "timeoutSeconds", os->timeout_seconds);
	if (!os->sandbox_id) {   /* create-only fields */
		jw_map(w, "resourceLimits", &os->resource_limits);
		if (os->nentrypoint)
			jw_strv(w, "entrypoint", os->entrypoint, os->nentrypoint);
		jw_map(w, "env", &os->env);
		jw_map(w, "metadata", &os->metadata);
		pisb_jw_key(w, "volumes");
		pisb_jw_arr(w);
		for (size_t i = 0; i < os->nvolumes; i++)
			jw_volume(w, &os->volumes[i]);
		pisb_jw_arr_end(w);
		if (os->has_network_allowlist)
			jw_strv(w, "networkAllowlist", os->network_allowlist,
				os->nnetwork_allowlist);
	}
	pisb_jw_key(w, "lifecycle");
	pisb_jw_obj(w);
	pisb_jw_kstr(w, "onSessionShutdown", policy[os->on_shutdown]);
	pisb_jw_obj_end(w);
	pisb_jw_kstr(w, "workspace", os->workspace);
	pisb_jw_obj_end(w);
}

static void jw_sbx(struct pisb_jw *w, const struct pisb_sbx_config *x)
{
	static const char *const teardown[] = { "remove", "stop", "none" };

	pisb_jw_key(w, "sbx");
	pisb_jw_obj(w);
	if (x->cpus)
		pisb_jw_kint(w, "cpus", x->cpus);
	if (x->memory)
		pisb_jw_kstr(w, "memory", x->memory);
	if (x->template_)
		pisb_jw_kstr(w, "template", x->template_);
	pisb_jw_kbool(w, "workspaceReadOnly", x->workspace_read_only);
	pisb_jw_kbool(w, "keepalive", x->keepalive);
	pisb_jw_kstr(w, "teardown", teardown[x->teardown]);
	jw_strv(w, "envAllowlist", x->env_allowlist, x->nenv_allowlist);
	jw_strv(w, "envPassthrough", x->env_passthrough, x->nenv_passthrough);
	pisb_jw_obj_end(w);
}

static void jw_project(struct pisb_jw *w, const struct pisb_project_config *p)
{
	static const char *const modes[] = { "copy", "bind", "bind-ro", "none" };

	pisb_jw_key(w, "project");
	pisb_jw_obj(w);
	if (p->dir)
		pisb_jw_kstr(w, "dir", p->dir);
	pisb_jw_kstr(w, "mode", modes[p->mode]);
	jw_strv(w, "include", p->include, p->ninclude);
	jw_strv(w, "exclude", p->exclude, p->nexclude);
	pisb_jw_kstr(w, "git", p->git_host ? "host" : "none");
	pisb_jw_kstr(w, "secrets", p->secrets_include ? "include" : "hide");
	jw_strv(w, "secretPatterns", p->secret_patterns, p->nsecret_patterns);
	pisb_jw_obj_end(w);
}

void pisb_config_json(const struct pisb_config *c, struct pisb_jw *w)
{
	pisb_jw_obj(w);
	pisb_jw_kint(w, "version", c->version);
	pisb_jw_kstr(w, "driver", c->driver);
	/* profile, resources and diskGiB only when the file gave them: the
	 * drivers treat limits asked for explicitly more strictly, and the
	 * printed form must load back to the same config. */
	if (c->profile_explicit)
		pisb_jw_kstr(w, "profile", c->profile);
	if (c->resources_explicit) {
		pisb_jw_key(w, "resources");
		pisb_jw_obj(w);
		pisb_jw_kint(w, "cpus", c->cpus);
		pisb_jw_kint(w, "memoryGiB", c->memory_gib);
		pisb_jw_kint(w, "pids", c->pids);
		pisb_jw_obj_end(w);
	}
	if (c->disk_explicit)
		pisb_jw_kint(w, "diskGiB", c->disk_gib);
	pisb_jw_kstr(w, "image", c->image);
	pisb_jw_kstr(w, "workspace", c->workspace);
	jw_strv(w, "setup", c->setup, c->nsetup);
	jw_strv(w, "resume", c->resume, c->nresume);
	jw_map(w, "env", &c->env);
	jw_map(w, "metadata", &c->metadata);
	pisb_jw_key(w, "network");
	pisb_jw_obj(w);
	jw_strv(w, "allowedHosts", c->allowed_hosts, c->nallowed_hosts);
	pisb_jw_obj_end(w);
	if (c->docker)
		pisb_jw_kbool(w, "docker", true);
	if (c->preview_token) {
		pisb_jw_key(w, "preview");
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "auth", "token");
		pisb_jw_obj_end(w);
	}
	pisb_jw_key(w, "services");
	pisb_jw_obj(w);
	for (size_t i = 0; i < c->nservices; i++)
		jw_service(w, &c->services[i]);
	pisb_jw_obj_end(w);
	if (c->os.present)
		jw_opensandbox(w, &c->os);
	if (c->sbx.present)
		jw_sbx(w, &c->sbx);
	if (c->project.present)
		jw_project(w, &c->project);
	pisb_jw_obj_end(w);
}

/* ---- YAML as JSON, for other readers (docker compose files) ---------- */

static int ynode_json(struct ld *L, const struct ynode *n, struct pisb_jw *w)
{
	switch (n->t) {
	case YT_NULL:
		pisb_jw_null(w);
		return 0;
	case YT_BOOL:
		pisb_jw_bool(w, n->b);
		return 0;
	case YT_SEQ:
		pisb_jw_arr(w);
		for (size_t i = 0; i < n->nkid; i++)
			if (ynode_json(L, n->kid[i], w) < 0)
				return -1;
		pisb_jw_arr_end(w);
		return 0;
	case YT_MAP:
		pisb_jw_obj(w);
		for (size_t k = 0; k < NPAIRS(n); k++) {
			for (size_t j = 0; j < k; j++)
				if (KEY(n, j)->len == KEY(n, k)->len &&
				    !memcmp(KEY(n, j)->s, KEY(n, k)->s, KEY(n, k)->len))
					return bad_at(L, KEY(n, k)->line, KEY(n, k)->col,
						      "duplicate key '%s'", KEY(n, k)->s);
			pisb_jw_key(w, KEY(n, k)->s ? KEY(n, k)->s : "");
			if (ynode_json(L, VAL(n, k), w) < 0)
				return -1;
		}
		pisb_jw_obj_end(w);
		return 0;
	default:
		pisb_jw_strn(w, n->s ? n->s : "", n->len);
		return 0;
	}
}

int pisb_yaml_to_json(const char *buf, size_t len, const char *name, struct pisb_buf *out,
		      struct pisb_err *e)
{
	struct ld L = { name, NULL, buf, len, e };
	struct ynode *root __attribute__((cleanup(ynode_freep))) = NULL;
	struct pisb_jw w;

	if (build_tree(&L, &root) < 0)
		return -1;
	pisb_jw_init(&w, out);
	if (!root) {
		pisb_jw_null(&w);
		return 0;
	}
	return ynode_json(&L, root, &w);
}
