#include "action.h"
#include "cli.h"
#include "err.h"
#include "json.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *opt_type(const struct pisb_opt *o)
{
	if (o->arg == PISB_ARG_NONE)
		return "boolean";
	if (o->flags & PISB_OPT_MULTI)
		return strcmp(o->name, "env") ? "string[]" : "object|string[]";
	if (o->flags & PISB_OPT_INT)
		return "integer";
	return "string";
}

void pisb_action_help(struct pisb_buf *b)
{
	struct pisb_jw w;

	pisb_jw_init(&w, b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "usage", "pisb action '{\"action\":VERB, ...args}'; args are the verb's positional names and camelCase options");
	pisb_jw_key(&w, "actions");
	pisb_jw_arr(&w);
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "action", v->name);
		pisb_jw_kstr(&w, "summary", v->summary);
		pisb_jw_key(&w, "args");
		pisb_jw_obj(&w);
		for (int i = 0; i < 4 && v->pos[i]; i++) {
			char t[64];
			snprintf(t, sizeof(t), "string%s", i < v->npos_min ? " (required)" : "");
			pisb_jw_kstr(&w, v->pos[i], t);
		}
		if (v->dashdash)
			pisb_jw_kstr(&w, "command", "string[]");
		for (const struct pisb_opt *o = v->opts; o && o->name; o++) {
			char key[64];
			if (o->flags & PISB_OPT_HIDDEN)
				continue;
			pisb_opt_json_key(o->name, key, sizeof(key));
			pisb_jw_kstr(&w, key, opt_type(o));
		}
		pisb_jw_obj_end(&w);
		pisb_jw_obj_end(&w);
	}
	pisb_jw_arr_end(&w);
	pisb_jw_obj_end(&w);
}

static const struct pisb_opt *opt_by_key(const struct pisb_verb *v, const char *key,
					 size_t n)
{
	for (const struct pisb_opt *o = v->opts; o && o->name; o++) {
		char k[64];
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_opt_json_key(o->name, k, sizeof(k));
		if (strlen(k) == n && !memcmp(k, key, n))
			return o;
	}
	return NULL;
}

struct key { const char *s; size_t n; };

static int cmp_key(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	size_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->s, y->s, n);
	return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* A key that object token obj has twice, or -1 (keys compared as
 * written; sorted, so n log n however many).  *dup names it. */
static int dup_key(const struct pisb_json *j, int obj, struct key *dup)
{
	int n = j->tok[obj].size, i = obj + 1, found = -1;
	_cleanup_free_ struct key *k = xcalloc(n ? (size_t)n : 1, sizeof(*k));

	for (int m = 0; m < n && i >= 0; m++, i = pisb_json_skip(j, i + 1)) {
		k[m].s = j->js + j->tok[i].start;
		k[m].n = (size_t)(j->tok[i].end - j->tok[i].start);
	}
	qsort(k, (size_t)n, sizeof(*k), cmp_key);
	for (int m = 1; m < n; m++)
		if (!cmp_key(&k[m - 1], &k[m])) {
			*dup = k[m];
			found = m;
			break;
		}
	return found;
}

static int scalar(const struct pisb_json *j, int t, const char *key,
		  bool want_int, struct pisb_buf *out, struct pisb_err *e)
{
	long long n;

	pisb_buf_reset(out);
	if (want_int) {
		if (pisb_json_int(j, t, &n) < 0 || n < 0)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "action key '%s': must be a non-negative integer", key);
		pisb_buf_addf(out, "%lld", n);
		return 0;
	}
	if (!pisb_json_is_str(j, t) || pisb_json_str_buf(j, t, out) < 0 ||
	    memchr(out->s ? out->s : "", '\0', out->len))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "action key '%s': must be a string without NUL characters", key);
	return 0;
}

int pisb_action_argv(const char *json, size_t len, struct pisb_strv *argv,
		     const struct pisb_verb **verb, struct pisb_err *e)
{
	struct pisb_json j;
	_cleanup_buf_ struct pisb_buf val = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv pos = PISB_STRV_INIT;
	_cleanup_strv_ struct pisb_strv opts = PISB_STRV_INIT;
	_cleanup_strv_ struct pisb_strv cmd = PISB_STRV_INIT;
	_cleanup_free_ char *name = NULL;
	const struct pisb_verb *v;
	int a, i, n, ret = -1;
	bool have_timeout = false;

	if (pisb_json_parse(&j, json, len, e) < 0)
		return pisb_err_prefix(e, "action");
	if (j.tok[0].type != JSMN_OBJECT) {
		pisb_err_set(e, PISB_EXIT_USAGE, "action: expected a JSON object");
		goto out;
	}
	{
		struct key d;
		if (dup_key(&j, 0, &d) >= 0) {
			pisb_err_set(e, PISB_EXIT_USAGE, "action: key '%.*s' is given twice", (int)d.n, d.s);
			goto out;
		}
	}
	a = pisb_json_get(&j, 0, "action");
	if (a < 0) {
		pisb_err_set(e, PISB_EXIT_USAGE, "action: missing key 'action' (send {} for the list of actions)");
		goto out;
	}
	name = pisb_json_str(&j, a);
	if (!name) {
		pisb_err_set(e, PISB_EXIT_USAGE, "action key 'action': must be a string");
		goto out;
	}
	v = pisb_verb_find(name);
	if (!v || v->hidden) {
		pisb_err_set(e, PISB_EXIT_USAGE, "action key 'action': unknown action '%s' (send {} for the list)", name);
		goto out;
	}
	/* positionals are collected by index so key order does not matter */
	const char *posv[4] = { NULL, NULL, NULL, NULL };
	char *posown[4] = { NULL, NULL, NULL, NULL };

	n = j.tok[0].size;
	i = 1;
	for (int k = 0; k < n; k++, i = pisb_json_skip(&j, i + 1)) {
		const char *key = j.js + j.tok[i].start;
		size_t kl = (size_t)(j.tok[i].end - j.tok[i].start);
		int t = i + 1, p;
		const struct pisb_opt *o;

		if (kl == 6 && !memcmp(key, "action", 6))
			continue;
		for (p = 0; p < 4 && v->pos[p]; p++)
			if (strlen(v->pos[p]) == kl && !memcmp(v->pos[p], key, kl))
				break;
		if (p < 4 && v->pos[p]) {
			if (scalar(&j, t, v->pos[p], false, &val, e) < 0)
				goto outpos;
			/* these go before "--" CMD: a value that looks like an option
			 * would be read as one */
			if (v->dashdash && val.s && val.s[0] == '-') {
				pisb_err_set(e, PISB_EXIT_USAGE, "action key '%s': must not start with '-' ('%s')",
					     v->pos[p], val.s);
				goto outpos;
			}
			free(posown[p]);
			posown[p] = xstrdup(val.s ? val.s : "");
			posv[p] = posown[p];
			continue;
		}
		if (v->dashdash && kl == 7 && !memcmp(key, "command", 7)) {
			if (j.tok[t].type == JSMN_STRING) {
				/* a string command runs through the shell */
				if (scalar(&j, t, "command", false, &val, e) < 0)
					goto outpos;
				if (!strcmp(v->name, "exec")) {
					pisb_strv_push(&opts, "--sh");
					pisb_strv_push(&opts, val.s);
				} else {
					pisb_strv_push(&cmd, val.s);
				}
				continue;
			}
			if (j.tok[t].type != JSMN_ARRAY) {
				pisb_err_set(e, PISB_EXIT_USAGE, "action key 'command': must be an array of strings or a string");
				goto outpos;
			}
			for (int m = 0; m < j.tok[t].size; m++) {
				if (scalar(&j, pisb_json_at(&j, t, m), "command", false, &val, e) < 0)
					goto outpos;
				pisb_strv_push(&cmd, val.s ? val.s : "");
			}
			continue;
		}
		o = opt_by_key(v, key, kl);
		if (!o) {
			pisb_err_set(e, PISB_EXIT_USAGE, "action '%s': unknown key '%.*s'", v->name, (int)kl, key);
			goto outpos;
		}
		if (!strcmp(o->name, "timeout-ms"))
			have_timeout = true;
		if (o->arg == PISB_ARG_NONE) {
			bool b;
			if (pisb_json_bool(&j, t, &b) < 0) {
				pisb_err_set(e, PISB_EXIT_USAGE, "action key '%.*s': must be true or false", (int)kl, key);
				goto outpos;
			}
			if (b)
				pisb_strv_pushf(&opts, "--%s", o->name);
			continue;
		}
		if (o->flags & PISB_OPT_MULTI) {
			if (j.tok[t].type == JSMN_OBJECT && !strcmp(o->name, "env")) {
				int q = t + 1;
				struct key d;
				if (dup_key(&j, t, &d) >= 0) {
					pisb_err_set(e, PISB_EXIT_USAGE, "action key 'env': variable '%.*s' is given twice",
						     (int)d.n, d.s);
					goto outpos;
				}
				for (int m = 0; m < j.tok[t].size; m++, q = pisb_json_skip(&j, q + 1)) {
					_cleanup_free_ char *ek = pisb_json_str(&j, q);
					if (scalar(&j, q + 1, "env", false, &val, e) < 0)
						goto outpos;
					pisb_strv_push(&opts, "--env");
					pisb_strv_pushf(&opts, "%s=%s", ek ? ek : "", val.s ? val.s : "");
				}
				continue;
			}
			if (j.tok[t].type == JSMN_ARRAY) {
				for (int m = 0; m < j.tok[t].size; m++) {
					if (scalar(&j, pisb_json_at(&j, t, m), o->name, false, &val, e) < 0)
						goto outpos;
					pisb_strv_pushf(&opts, "--%s", o->name);
					pisb_strv_push(&opts, val.s ? val.s : "");
				}
				continue;
			}
		}
		{
			char k2[64];
			pisb_opt_json_key(o->name, k2, sizeof(k2));
			if (scalar(&j, t, k2, (o->flags & PISB_OPT_INT) != 0, &val, e) < 0)
				goto outpos;
		}
		pisb_strv_pushf(&opts, "--%s", o->name);
		pisb_strv_push(&opts, val.s ? val.s : "");
	}
	for (int p = 0; p < v->npos_min; p++) {
		if (!posv[p]) {
			pisb_err_set(e, PISB_EXIT_USAGE, "action '%s': missing key '%s'", v->name, v->pos[p]);
			goto outpos;
		}
	}
	for (int p = 0; p < 4 && v->pos[p]; p++) {
		if (!posv[p])
			break;
		pisb_strv_push(&pos, posv[p]);
	}
	/* exec in the action surface never streams: it waits and returns */
	if (!strcmp(v->name, "exec") && !have_timeout) {
		pisb_strv_push(&opts, "--timeout-ms");
		pisb_strv_push(&opts, "10000");
	}
	pisb_strv_push(argv, v->name);
	if (v->dashdash) {
		for (size_t q = 0; q < pos.n; q++)
			pisb_strv_push(argv, pos.v[q]);
	}
	for (size_t q = 0; q < opts.n; q++)
		pisb_strv_push(argv, opts.v[q]);
	pisb_strv_push(argv, "--json");
	pisb_strv_push(argv, "--json-errors");
	pisb_strv_push(argv, "--");
	if (v->dashdash) {
		for (size_t q = 0; q < cmd.n; q++)
			pisb_strv_push(argv, cmd.v[q]);
	} else {
		for (size_t q = 0; q < pos.n; q++)
			pisb_strv_push(argv, pos.v[q]);
	}
	*verb = v;
	ret = 0;
outpos:
	for (int p = 0; p < 4; p++)
		free(posown[p]);
out:
	pisb_json_release(&j);
	return ret;
}
