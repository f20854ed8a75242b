#include "cli.h"
#include "err.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct pisb_verb *pisb_verb_find(const char *name)
{
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!strcmp(v->name, name))
			return v;
	return NULL;
}

static const struct pisb_opt *find_in(const struct pisb_opt *o, const char *name,
				      size_t n, char shrt)
{
	for (; o && o->name; o++) {
		if (shrt ? o->shrt == shrt
			 : (strlen(o->name) == n && !strncmp(o->name, name, n)))
			return o;
	}
	return NULL;
}

const struct pisb_opt *pisb_verb_opt(const struct pisb_verb *v, const char *name)
{
	const struct pisb_opt *o = find_in(v ? v->opts : NULL, name, strlen(name), 0);
	return o ? o : find_in(pisb_global_opts, name, strlen(name), 0);
}

static int set_global(struct pisb_args *a, const struct pisb_opt *o,
		      const char *val, struct pisb_err *e)
{
	const char *n = o->name;

	if (!strcmp(n, "state-dir"))
		a->state_dir = val;
	else if (!strcmp(n, "json"))
		a->json = true;
	else if (!strcmp(n, "quiet"))
		a->quiet = true;
	else if (!strcmp(n, "verbose"))
		a->verbose++;
	else if (!strcmp(n, "help"))
		a->help = true;
	else if (!strcmp(n, "version"))
		a->version = true;
	else if (!strcmp(n, "wait")) {
		long long s;
		if (!val) {
			a->wait_ms = -1;
		} else if (pisb_parse_ll(val, 0, 86400, &s) < 0) {
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "--wait: '%s' is not a number of seconds (0-86400)", val);
		} else {
			a->wait_ms = (int)(s * 1000);
		}
	}
	/* json-errors is read from the table by main() */
	return 0;
}

static int add(struct pisb_args *a, const struct pisb_opt *o, const char *val,
	       bool global, struct pisb_err *e)
{
	if (o->flags & PISB_OPT_INT) {
		long long dummy;
		if (pisb_parse_ll(val, 0, 1LL << 53, &dummy) < 0)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "--%s: '%s' is not a non-negative integer", o->name, val);
	}
	if (!(o->flags & PISB_OPT_MULTI)) {
		for (size_t i = 0; i < a->nset; i++)
			if (a->set[i].opt == o && o->arg != PISB_ARG_NONE && !global)
				return pisb_err_set(e, PISB_EXIT_USAGE,
						    "--%s given twice", o->name);
	}
	a->set = xrealloc(a->set, (a->nset + 1) * sizeof(*a->set));
	a->set[a->nset].opt = o;
	a->set[a->nset].val = val;
	a->nset++;
	return global ? set_global(a, o, val, e) : 0;
}

int pisb_args_parse(struct pisb_args *a, const struct pisb_verb *v, int argc,
		    char **argv, struct pisb_err *e)
{
	const char *vname = v ? v->name : argv[0];

	memset(a, 0, sizeof(*a));
	a->verb = v;
	a->pos = xcalloc((size_t)argc + 1, sizeof(char *));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--")) {
			if (!v || !v->dashdash) {
				/* "--" only ends options: the rest are positionals */
				for (i++; i < argc; i++)
					a->pos[a->npos++] = argv[i];
				break;
			}
			a->cmd = argv + i + 1;
			a->ncmd = (size_t)(argc - i - 1);
			break;
		}
		if (s[0] == '-' && s[1] == '-' && s[2]) {
			const char *name = s + 2, *eq = strchr(name, '=');
			size_t n = eq ? (size_t)(eq - name) : strlen(name);
			const struct pisb_opt *o = find_in(v ? v->opts : NULL, name, n, 0);
			bool global = false;
			const char *val = NULL;

			if (!o) {
				o = find_in(pisb_global_opts, name, n, 0);
				global = o != NULL;
			}
			if (!o)
				return pisb_err_set(e, PISB_EXIT_USAGE,
						    "%s: unknown option '--%.*s' (see 'pisb %s --help')",
						    vname, (int)n, name, vname);
			if (o->arg == PISB_ARG_NONE && eq)
				return pisb_err_set(e, PISB_EXIT_USAGE,
						    "--%s takes no value", o->name);
			if (o->arg == PISB_ARG_REQ) {
				if (eq)
					val = eq + 1;
				else if (i + 1 < argc)
					val = argv[++i];
				else
					return pisb_err_set(e, PISB_EXIT_USAGE,
							    "--%s needs a value (%s)", o->name, o->metavar);
			} else if (o->arg == PISB_ARG_OPT && eq) {
				val = eq + 1;
			}
			if (add(a, o, val, global, e) < 0)
				return -1;
			continue;
		}
		if (s[0] == '-' && s[1] && s[1] != '-') {
			for (const char *c = s + 1; *c; c++) {
				const struct pisb_opt *o = find_in(v ? v->opts : NULL, NULL, 0, *c);
				bool global = false;
				const char *val = NULL;

				if (!o) {
					o = find_in(pisb_global_opts, NULL, 0, *c);
					global = o != NULL;
				}
				if (!o)
					return pisb_err_set(e, PISB_EXIT_USAGE,
							    "%s: unknown option '-%c' (see 'pisb %s --help')",
							    vname, *c, vname);
				if (o->arg == PISB_ARG_REQ) {
					if (c[1])
						val = c + 1;
					else if (i + 1 < argc)
						val = argv[++i];
					else
						return pisb_err_set(e, PISB_EXIT_USAGE,
								    "-%c needs a value (%s)", *c, o->metavar);
					if (add(a, o, val, global, e) < 0)
						return -1;
					break;
				}
				if (add(a, o, NULL, global, e) < 0)
					return -1;
			}
			continue;
		}
		a->pos[a->npos++] = s;
	}
	if (a->help || a->version || !v)
		return 0;
	if ((int)a->npos < v->npos_min)
		return pisb_err_set(e, PISB_EXIT_USAGE, "usage: pisb %s %s", v->name,
				    v->synopsis);
	if ((int)a->npos > v->npos_max)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "%s: unexpected argument '%s' (usage: pisb %s %s)",
				    v->name, a->pos[v->npos_max], v->name, v->synopsis);
	return 0;
}

void pisb_args_release(struct pisb_args *a)
{
	free(a->set);
	free(a->pos);
	a->set = NULL;
	a->pos = NULL;
}

const char *pisb_args_get(const struct pisb_args *a, const char *name)
{
	const char *val = NULL;

	for (size_t i = 0; i < a->nset; i++)
		if (!strcmp(a->set[i].opt->name, name))
			val = a->set[i].val ? a->set[i].val : "";
	return val;
}

bool pisb_args_has(const struct pisb_args *a, const char *name)
{
	return pisb_args_get(a, name) != NULL;
}

size_t pisb_args_all(const struct pisb_args *a, const char *name,
		     const char **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nset; i++)
		if (!strcmp(a->set[i].opt->name, name)) {
			if (n < max)
				out[n] = a->set[i].val;
			n++;
		}
	return n;
}

int pisb_args_int(const struct pisb_args *a, const char *name, long long lo,
		  long long hi, long long def, long long *out, struct pisb_err *e)
{
	const char *v = pisb_args_get(a, name);

	if (!v) {
		*out = def;
		return 0;
	}
	if (pisb_parse_ll(v, lo, hi, out) < 0)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "--%s: '%s' is out of range (%lld-%lld)", name, v, lo, hi);
	return 0;
}

static void opt_lines(struct pisb_buf *b, const struct pisb_opt *o)
{
	for (; o && o->name; o++) {
		char left[64];
		int n;

		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		if (o->shrt)
			n = snprintf(left, sizeof(left), "-%c, --%s", o->shrt, o->name);
		else
			n = snprintf(left, sizeof(left), "    --%s", o->name);
		if (o->arg == PISB_ARG_REQ)
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->metavar);
		else if (o->arg == PISB_ARG_OPT)
			snprintf(left + n, sizeof(left) - (size_t)n, "[=%s]", o->metavar);
		pisb_buf_addf(b, "  %-28s %s\n", left, o->help);
	}
}

void pisb_usage(struct pisb_buf *b, const struct pisb_verb *v, const char *binary)
{
	if (v) {
		pisb_buf_addf(b, "usage: pisb %s %s\n\n%s\n", v->name, v->synopsis, v->summary);
		if (v->opts && v->opts->name) {
			pisb_buf_adds(b, "\noptions:\n");
			opt_lines(b, v->opts);
		}
		pisb_buf_adds(b, "\nglobal options:\n");
		opt_lines(b, pisb_global_opts);
		pisb_buf_addf(b, "\nSee pisb help %s (man %s).\n", v->name, v->binary);
		return;
	}
	pisb_buf_addf(b, "usage: %s VERB [ARGS]... [OPTIONS]\n\nverbs:\n", binary);
	for (const struct pisb_verb *w = pisb_verbs; w->name; w++) {
		if (w->hidden)
			continue;
		if (strcmp(binary, "pisb") && strcmp(binary, w->binary))
			continue;
		pisb_buf_addf(b, "  %-12s %s\n", w->name, w->summary);
	}
	if (!strcmp(binary, "pisb"))
		pisb_buf_adds(b, "  action       run one JSON action object (the Pi sandbox tool)\n"
				 "  help         open the manual page of a verb\n"
				 "  completion   print the bash, zsh or fish completion script\n");
	pisb_buf_adds(b, "\nglobal options:\n");
	opt_lines(b, pisb_global_opts);
	pisb_buf_addf(b, "\nRun '%s VERB --help' for a verb's options.\n", binary);
}

void pisb_opt_json_key(const char *name, char *out, size_t n)
{
	size_t k = 0;
	bool up = false;

	for (const char *c = name; *c && k + 1 < n; c++) {
		if (*c == '-') {
			up = true;
			continue;
		}
		out[k++] = up && *c >= 'a' && *c <= 'z' ? (char)(*c - 32) : *c;
		up = false;
	}
	out[k] = '\0';
}

/* ---- completions ----
 *
 * What a word completes to is read from the table's placeholders (the
 * table has no field for it, so that it stays one line per option):
 *
 *   an option's value   FILE, HOSTFILE: host files; HOSTDIR: host
 *                       directories; DIR and PATH of a global option
 *                       (--state-dir): host directories (a verb's DIR or
 *                       PATH is inside the sandbox: nothing to offer);
 *                       NAME: sandbox names; numbers (PISB_OPT_INT) and
 *                       anything else: nothing
 *   a positional        its place in the synopsis: NAME: sandbox names;
 *                       HOSTDIR: host directories; FILE: host files;
 *                       a|b|c: those words; anything else: nothing
 *
 * The verb is the first word that is neither a global option nor the value
 * of one (pisb --state-dir D --json exec ...), as the dispatcher reads it.
 */

enum comp_kind { COMP_NONE, COMP_NAME, COMP_FILE, COMP_DIR, COMP_CHOICE, COMP_DRIVER };

/* a|b|c of lowercase words: a choice */
static bool is_choice(const char *m)
{
	if (!strchr(m, '|'))
		return false;
	for (const char *c = m; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '-' || *c == '|'))
			return false;
	return true;
}

static enum comp_kind placeholder_kind(const char *m, bool global)
{
	if (!m)
		return COMP_NONE;
	if (!strcmp(m, "FILE") || !strcmp(m, "HOSTFILE"))
		return COMP_FILE;
	if (!strcmp(m, "HOSTDIR"))
		return COMP_DIR;
	if (!strcmp(m, "DIR") || !strcmp(m, "PATH"))
		return global ? COMP_DIR : COMP_NONE;
	if (!strcmp(m, "NAME"))
		return COMP_NAME;
	if (!strcmp(m, "DRIVER"))
		return COMP_DRIVER;
	if (is_choice(m))
		return COMP_CHOICE;
	return COMP_NONE;
}

/* The kind of an option's value; COMP_NONE too for flags (see takes_value). */
static enum comp_kind opt_kind(const struct pisb_opt *o, bool global)
{
	if (o->arg == PISB_ARG_NONE || (o->flags & PISB_OPT_INT))
		return COMP_NONE;
	return placeholder_kind(o->metavar, global);
}

/* The i-th positional placeholder of a synopsis, brackets and "..." taken
 * off ("[SERVICE|PORT]" -> "SERVICE|PORT"); options with their values,
 * bracketed groups of options ("[--cwd DIR]", "(--sh S | -- CMD...)"),
 * "< CONTENT" and what follows "--" are not positionals.  False when
 * there is no i-th one. */
static bool synopsis_pos(const char *syn, int i, char *out, size_t n)
{
	const char *p = syn;
	bool skip_next = false;
	int k = 0;

	while (*p) {
		const char *w;
		size_t l;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		w = p;
		if ((w[0] == '[' || w[0] == '(') && w[1] == '-') {
			int depth = 0;
			for (; *p; p++) {
				if (*p == '[' || *p == '(')
					depth++;
				else if ((*p == ']' || *p == ')') && --depth == 0)
					break;
			}
			while (*p && *p != ' ')
				p++;
			continue;
		}
		while (*p && *p != ' ')
			p++;
		l = (size_t)(p - w);
		if (skip_next) {
			skip_next = false;
			continue;
		}
		if (l == 2 && !strncmp(w, "--", 2))
			break;
		if (w[0] == '-' || (l == 1 && w[0] == '<')) {
			skip_next = true;
			continue;
		}
		if (k++ != i)
			continue;
		if (w[0] == '[') {
			w++;
			l--;
		}
		while (l && (w[l - 1] == ']' || w[l - 1] == '.'))
			l--;
		snprintf(out, n, "%.*s", (int)l, w);
		return true;
	}
	return false;
}

/* The kind of positional i of v; buf gets its synopsis word (for
 * COMP_CHOICE the words to offer, "ensure|status|..."). */
static enum comp_kind pos_kind(const struct pisb_verb *v, int i, char *buf, size_t n)
{
	if (i >= v->npos_max || !synopsis_pos(v->synopsis, i, buf, n))
		return COMP_NONE;
	if (strchr(buf, '|') && !is_choice(buf))
		return COMP_NONE;
	return placeholder_kind(buf, false);
}

/* The verbs' names, joined by sep, with the dispatcher's own. */
static void verb_words(struct pisb_buf *b, const char *sep)
{
	const char *s = "";

	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden) {
			pisb_buf_addf(b, "%s%s", s, v->name);
			s = sep;
		}
	pisb_buf_addf(b, "%saction%shelp%scompletion", sep, sep, sep);
}

static void opt_words(struct pisb_buf *b, const struct pisb_opt *o, const char *sep)
{
	for (; o && o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_buf_addf(b, "--%s%s", o->name, sep);
		if (o->shrt)
			pisb_buf_addf(b, "-%c%s", o->shrt, sep);
	}
}

static void strip_tail(struct pisb_buf *b, size_t n)
{
	if (b->len >= n) {
		b->len -= n;
		b->s[b->len] = '\0';
	}
}

static const char *const bash_kinds[] = { "none", "name", "file", "dir", "choice", "driver", NULL };

/* "--file:file -f:file --wait:opt" for the options that take a value. */
static void bash_vals(struct pisb_buf *b, const struct pisb_opt *o, bool global)
{
	for (; o && o->name; o++) {
		enum comp_kind kind = opt_kind(o, global);
		/* a choice is its words: a|b|c */
		const char *k = o->arg == PISB_ARG_OPT ? "opt" : kind == COMP_CHOICE ? o->metavar : bash_kinds[kind];
		if ((o->flags & PISB_OPT_HIDDEN) || o->arg == PISB_ARG_NONE)
			continue;
		pisb_buf_addf(b, " --%s:%s", o->name, k);
		if (o->shrt)
			pisb_buf_addf(b, " -%c:%s", o->shrt, k);
	}
}

/* "name none dir", or a choice word, for each positional. */
static void bash_pos(struct pisb_buf *b, const struct pisb_verb *v)
{
	char w[256];

	for (int i = 0; i < v->npos_max; i++) {
		enum comp_kind k = pos_kind(v, i, w, sizeof(w));
		pisb_buf_addf(b, "%s%s", i ? " " : "", k == COMP_CHOICE ? w : bash_kinds[k]);
	}
}

static void comp_bash(struct pisb_buf *b)
{
	pisb_buf_adds(b, "# bash completion for pisb (generated by 'pisb completion bash')\n"
			 "# The verb is the first word that is not a global option or its value;\n"
			 "# an option's value and a positional complete by their placeholder:\n"
			 "# sandbox names, host files, host directories, a choice, or nothing.\n"
			 "_pisb_verb() {\n"
			 "  dd=\n"
			 "  case $1 in\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		pisb_buf_addf(b, "    %s) opts=\"", v->name);
		opt_words(b, v->opts, " ");
		strip_tail(b, v->opts && v->opts->name ? 1 : 0);
		pisb_buf_adds(b, "\"\n      vals=\"");
		bash_vals(b, v->opts, false);
		pisb_buf_adds(b, "\" pos=\"");
		bash_pos(b, v);
		pisb_buf_addf(b, "\"%s ;;\n", v->dashdash ? " dd=1" : "");
	}
	pisb_buf_adds(b, "    help) opts=\"\" vals=\"\" pos=\"");
	verb_words(b, "|");
	pisb_buf_adds(b, "\" ;;\n"
			 "    completion) opts=\"\" vals=\"\" pos=\"bash|zsh|fish\" ;;\n"
			 "    *) opts=\"\" vals=\"\" pos=\"\" ;;\n"
			 "  esac\n"
			 "  vals=\"$vals");
	bash_vals(b, pisb_global_opts, true);
	pisb_buf_adds(b, "\"\n}\n"
			 "_pisb_reply() {\n"
			 "  case $1 in\n"
			 "    name) COMPREPLY=($(compgen -W \"$(pisb list -q \"${sd[@]}\" 2>/dev/null)\" -- \"$2\")) ;;\n"
			 "    driver) COMPREPLY=($(compgen -W \"$(pisb drivers -q 2>/dev/null)\" -- \"$2\")) ;;\n"
			 "    file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- \"$2\") ;;\n"
			 "    dir) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- \"$2\") ;;\n"
			 "    *'|'*) COMPREPLY=($(compgen -W \"${1//|/ }\" -- \"$2\")) ;;\n"
			 "    *) COMPREPLY=() ;;\n"
			 "  esac\n"
			 "}\n"
			 "_pisb() {\n"
			 "  local cur=${COMP_WORDS[COMP_CWORD]} verb= opts= vals= pos= dd= w k i n=0\n"
			 "  local -a sd=() p\n"
			 "  # bash splits \"--opt=value\" at the =\n"
			 "  [ \"$cur\" = = ] && cur=\n"
			 "  _pisb_verb \"\"\n"
			 "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
			 "    w=${COMP_WORDS[i]}\n"
			 "    case $w in\n"
			 "      --) if [ -n \"$verb\" ]; then\n"
			 "            # the command's own words follow\n"
			 "            [ -n \"$dd\" ] && { COMPREPLY=(); return; }\n"
			 "          fi\n"
			 "          continue ;;\n"
			 "      --*=*) continue ;;\n"
			 "      # the rest of a word bash split at an = (K=V): part of it\n"
			 "      =) ((i + 1 >= COMP_CWORD)) && { COMPREPLY=(); return; }\n"
			 "         i=$((i + 1)); continue ;;\n"
			 "      -*) k=\" $vals \"; k=${k#* \"$w\":}\n"
			 "          [ \"$k\" = \" $vals \" ] && continue   # takes no value\n"
			 "          k=${k%% *}\n"
			 "          if [ \"$k\" = opt ]; then\n"
			 "            [ \"${COMP_WORDS[i + 1]}\" = = ] || continue\n"
			 "            k=none\n"
			 "          fi\n"
			 "          [ \"${COMP_WORDS[i + 1]}\" = = ] && ((i++))\n"
			 "          ((i + 1 >= COMP_CWORD)) && { _pisb_reply \"$k\" \"$cur\"; return; }\n"
			 "          i=$((i + 1))\n"
			 "          [ \"$w\" = --state-dir ] && sd=(--state-dir \"${COMP_WORDS[i]}\")\n"
			 "          continue ;;\n"
			 "    esac\n"
			 "    if [ -z \"$verb\" ]; then verb=$w; _pisb_verb \"$verb\"; else n=$((n + 1)); fi\n"
			 "  done\n"
			 "  if [ -z \"$verb\" ]; then\n"
			 "    COMPREPLY=($(compgen -W \"");
	verb_words(b, " ");
	pisb_buf_adds(b, " ");
	opt_words(b, pisb_global_opts, " ");
	strip_tail(b, 1);
	pisb_buf_adds(b, "\" -- \"$cur\")); return\n"
			 "  fi\n"
			 "  case $cur in\n"
			 "    -*) COMPREPLY=($(compgen -W \"$opts ");
	opt_words(b, pisb_global_opts, " ");
	strip_tail(b, 1);
	pisb_buf_adds(b, "\" -- \"$cur\")) ;;\n"
			 "    *) p=($pos); _pisb_reply \"${p[n]:-none}\" \"$cur\" ;;\n"
			 "  esac\n"
			 "}\n"
			 "complete -F _pisb pisb\n");
}

/* help text inside a zsh '…[help]…' spec */
static void zsh_help(struct pisb_buf *b, const char *h)
{
	for (const char *c = h; *c; c++) {
		if (*c == '\'' || *c == '[' || *c == ']' || *c == ':')
			continue;
		pisb_buf_addc(b, *c);
	}
}

static const char *zsh_action(enum comp_kind k)
{
	switch (k) {
	case COMP_NAME: return "_pisb_names";
	case COMP_DRIVER: return "_pisb_drivers";
	case COMP_FILE: return "_files";
	case COMP_DIR: return "_files -/";
	default: return " "; /* a message, no matches */
	}
}

static void zsh_opts(struct pisb_buf *b, const struct pisb_opt *o, bool global)
{
	for (; o && o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		for (int s = 0; s < (o->shrt ? 2 : 1); s++) {
			/* a value in the next word or joined: --file=F, -fF */
			if (s)
				pisb_buf_addf(b, " '-%c%s[", o->shrt, o->arg == PISB_ARG_REQ ? "+" : "");
			else
				pisb_buf_addf(b, " '--%s%s[", o->name,
					      o->arg == PISB_ARG_OPT ? "=-" : o->arg == PISB_ARG_REQ ? "=" : "");
			zsh_help(b, o->help);
			pisb_buf_adds(b, "]");
			if (o->arg != PISB_ARG_NONE && opt_kind(o, global) == COMP_CHOICE) {
				pisb_buf_addf(b, ":%s:(", o->name);
				for (const char *c = o->metavar; *c; c++)
					pisb_buf_addc(b, *c == '|' ? ' ' : *c);
				pisb_buf_adds(b, ")");
			} else if (o->arg != PISB_ARG_NONE) {
				pisb_buf_addf(b, ":%s:", o->metavar);
				pisb_buf_adds(b, zsh_action(opt_kind(o, global)));
			}
			pisb_buf_adds(b, "'");
		}
	}
}

static void zsh_pos(struct pisb_buf *b, const struct pisb_verb *v)
{
	char w[256];

	for (int i = 0; i < v->npos_max; i++) {
		enum comp_kind k = pos_kind(v, i, w, sizeof(w));
		pisb_buf_addf(b, " '%d:%s%s:", i + 1, i >= v->npos_min ? ":" : "",
			      k == COMP_NAME ? "sandbox" : w);
		if (k == COMP_CHOICE) {
			pisb_buf_adds(b, "(");
			for (const char *c = w; *c; c++)
				pisb_buf_addc(b, *c == '|' ? ' ' : *c);
			pisb_buf_adds(b, ")'");
		} else {
			pisb_buf_addf(b, "%s'", zsh_action(k));
		}
	}
}

/* s inside a single-quoted word: each ' becomes q ("'\\''" for zsh, "\\'" for fish) */
static void add_quoted(struct pisb_buf *b, const char *s, const char *q)
{
	for (; *s; s++) {
		if (*s == '\'')
			pisb_buf_adds(b, q);
		else
			pisb_buf_addc(b, *s);
	}
}

/* "--state-dir|--x": global options that take a value (for a case). */
static void global_valued(struct pisb_buf *b, const char *sep)
{
	const char *s = "";

	for (const struct pisb_opt *o = pisb_global_opts; o->name; o++)
		if (!(o->flags & PISB_OPT_HIDDEN) && o->arg == PISB_ARG_REQ) {
			pisb_buf_addf(b, "%s--%s", s, o->name);
			s = sep;
			if (o->shrt)
				pisb_buf_addf(b, "%s-%c", s, o->shrt);
		}
}

static void comp_zsh(struct pisb_buf *b)
{
	pisb_buf_adds(b, "#compdef pisb\n# zsh completion for pisb (generated by 'pisb completion zsh')\n"
			 "_pisb() {\n  local -a verbs\n  verbs=(\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden) {
			pisb_buf_addf(b, "    '%s:", v->name);
			add_quoted(b, v->summary, "'\\''");
			pisb_buf_adds(b, "'\n");
		}
	pisb_buf_adds(b, "    'action:run one JSON action object'\n"
			 "    'help:open the manual page of a verb'\n"
			 "    'completion:print a completion script'\n  )\n"
			 "  # the verb: the first word that is not a global option or its value\n"
			 "  local i=2\n"
			 "  while (( i < CURRENT )); do\n"
			 "    case $words[i] in\n"
			 "      (");
	global_valued(b, "|");
	pisb_buf_adds(b, ") (( i += 2 )) ;;\n"
			 "      (-*) (( i++ )) ;;\n"
			 "      (*) break ;;\n"
			 "    esac\n"
			 "  done\n"
			 "  if (( i >= CURRENT )); then\n"
			 "    if [[ $words[CURRENT] == -* || $words[CURRENT-1] == (");
	global_valued(b, "|");
	pisb_buf_adds(b, ") ]]; then\n      _arguments -s");
	zsh_opts(b, pisb_global_opts, true);
	pisb_buf_adds(b, "\n    else\n      _describe verb verbs\n    fi\n    return\n  fi\n"
			 "  # the state dir given on the line, for the sandbox names\n"
			 "  local -a sd\n"
			 "  local j\n"
			 "  for (( j = 2; j < CURRENT; j++ )); do\n"
			 "    case $words[j] in\n"
			 "      (--state-dir) sd=(--state-dir ${(Q)words[j+1]}) ;;\n"
			 "      (--state-dir=*) sd=(--state-dir ${(Q)words[j]#*=}) ;;\n"
			 "    esac\n"
			 "  done\n"
			 "  local verb=$words[i]\n"
			 "  shift $(( i - 1 )) words\n"
			 "  (( CURRENT -= i - 1 ))\n"
			 "  case $verb in\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		pisb_buf_addf(b, "    %s) _arguments -s%s", v->name, v->dashdash ? " -S" : "");
		zsh_opts(b, v->opts, false);
		zsh_opts(b, pisb_global_opts, true);
		zsh_pos(b, v);
		pisb_buf_adds(b, v->dashdash ? " '*:: : ' ;;\n" : " ;;\n");
	}
	pisb_buf_adds(b, "    help) _describe verb verbs ;;\n"
			 "    completion) _arguments '1:shell:(bash zsh fish)' ;;\n"
			 "  esac\n}\n"
			 "_pisb_names() { local -a n; n=(${(f)\"$(pisb list -q $sd 2>/dev/null)\"}); _describe sandbox n; }\n"
			 "_pisb_drivers() { local -a n; n=(${(f)\"$(pisb drivers -q 2>/dev/null)\"}); _describe driver n; }\n"
			 "_pisb \"$@\"\n");
}

static void fish_help(struct pisb_buf *b, const char *h)
{
	pisb_buf_adds(b, " -d '");
	for (const char *c = h; *c; c++)
		if (*c != '\'')
			pisb_buf_addc(b, *c);
	pisb_buf_adds(b, "'");
}

/* " -r -F", " -x -a '(…)'", " -x": how fish completes a value of kind k */
static void fish_value(struct pisb_buf *b, enum comp_kind k, const char *choice)
{
	switch (k) {
	case COMP_FILE:
		pisb_buf_adds(b, " -r -F");
		break;
	case COMP_DIR:
		pisb_buf_adds(b, " -x -a '(__fish_complete_directories (commandline -ct))'");
		break;
	case COMP_NAME:
		pisb_buf_adds(b, " -x -a '(__pisb_names)'");
		break;
	case COMP_DRIVER:
		pisb_buf_adds(b, " -x -a '(pisb drivers -q 2>/dev/null)'");
		break;
	case COMP_CHOICE:
		pisb_buf_adds(b, " -x -a '");
		for (const char *c = choice; *c; c++)
			pisb_buf_addc(b, *c == '|' ? ' ' : *c);
		pisb_buf_adds(b, "'");
		break;
	default:
		pisb_buf_adds(b, " -x");
	}
}

static void fish_opts(struct pisb_buf *b, const char *verb, const struct pisb_opt *o)
{
	for (; o && o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_buf_adds(b, "complete -c pisb");
		if (verb)
			pisb_buf_addf(b, " -n '__pisb_is %s'", verb);
		pisb_buf_addf(b, " -l %s", o->name);
		if (o->shrt)
			pisb_buf_addf(b, " -s %c", o->shrt);
		if (o->arg == PISB_ARG_REQ)
			fish_value(b, opt_kind(o, !verb), o->metavar);
		fish_help(b, o->help);
		pisb_buf_adds(b, "\n");
	}
}

/* 'create --file' 'create -f' ... for the options of v that take a value */
static void fish_takes(struct pisb_buf *b, const char *verb, const struct pisb_opt *o)
{
	for (; o && o->name; o++) {
		if ((o->flags & PISB_OPT_HIDDEN) || o->arg != PISB_ARG_REQ)
			continue;
		pisb_buf_addf(b, " '%s --%s'", verb, o->name);
		if (o->shrt)
			pisb_buf_addf(b, " '%s -%c'", verb, o->shrt);
	}
}

static void comp_fish(struct pisb_buf *b)
{
	pisb_buf_adds(b, "# fish completion for pisb (generated by 'pisb completion fish')\n"
			 "# __pisb_state prints the verb (- if none yet) and what the word being\n"
			 "# completed is: its place among the verb's positionals (1 = the first),\n"
			 "# 'value' (an option's) or 'rest' (after --).\n"
			 "function __pisb_takes -a verb opt\n"
			 "    switch \"$verb $opt\"\n"
			 "        case");
	fish_takes(b, "*", pisb_global_opts);
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden)
			fish_takes(b, v->name, v->opts);
	pisb_buf_adds(b, "\n            return 0\n"
			 "    end\n"
			 "    return 1\n"
			 "end\n"
			 "function __pisb_state\n"
			 "    set -l toks (commandline -opc)\n"
			 "    set -l verb -\n"
			 "    set -l n 0\n"
			 "    set -l skip 0\n"
			 "    for t in $toks[2..-1]\n"
			 "        if test $skip = 1\n"
			 "            set skip 0\n"
			 "            continue\n"
			 "        end\n"
			 "        switch $t\n"
			 "            case --\n"
			 "                if test $verb != -\n"
			 "                    echo $verb\n"
			 "                    echo rest\n"
			 "                    return\n"
			 "                end\n"
			 "            case '--*=*'\n"
			 "            case '-*'\n"
			 "                __pisb_takes $verb $t; and set skip 1\n"
			 "            case '*'\n"
			 "                if test $verb = -\n"
			 "                    set verb $t\n"
			 "                else\n"
			 "                    set n (math $n + 1)\n"
			 "                end\n"
			 "        end\n"
			 "    end\n"
			 "    echo $verb\n"
			 "    if test $skip = 1\n"
			 "        echo value\n"
			 "    else\n"
			 "        math $n + 1\n"
			 "    end\n"
			 "end\n"
			 "function __pisb_verb\n"
			 "    set -l s (__pisb_state)\n"
			 "    test \"$s[1]\" = - -a \"$s[2]\" = 1\n"
			 "end\n"
			 "function __pisb_is -a verb\n"
			 "    set -l s (__pisb_state)\n"
			 "    test \"$s[1]\" = $verb\n"
			 "end\n"
			 "function __pisb_pos -a verb n\n"
			 "    set -l s (__pisb_state)\n"
			 "    test \"$s[1]\" = $verb -a \"$s[2]\" = $n\n"
			 "end\n"
			 "function __pisb_names\n"
			 "    set -l toks (commandline -opc)\n"
			 "    set -l sd\n"
			 "    for i in (seq (count $toks))\n"
			 "        switch $toks[$i]\n"
			 "            case --state-dir\n"
			 "                test $i -lt (count $toks); and set sd --state-dir $toks[(math $i + 1)]\n"
			 "            case '--state-dir=*'\n"
			 "                set sd --state-dir (string replace -- --state-dir= '' $toks[$i])\n"
			 "        end\n"
			 "    end\n"
			 "    pisb list -q $sd 2>/dev/null\n"
			 "end\n"
			 "complete -c pisb -f\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden) {
			pisb_buf_addf(b, "complete -c pisb -n '__pisb_verb' -a %s -d '", v->name);
			add_quoted(b, v->summary, "\\'");
			pisb_buf_adds(b, "'\n");
		}
	pisb_buf_adds(b, "complete -c pisb -n '__pisb_verb' -a action -d 'run one JSON action object'\n"
			 "complete -c pisb -n '__pisb_verb' -a help -d 'open the manual page of a verb'\n"
			 "complete -c pisb -n '__pisb_verb' -a completion -d 'print a completion script'\n"
			 "complete -c pisb -n '__pisb_pos help 1' -a '");
	verb_words(b, " ");
	pisb_buf_adds(b, "'\n"
			 "complete -c pisb -n '__pisb_pos completion 1' -a 'bash zsh fish'\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		char w[256];

		if (v->hidden)
			continue;
		fish_opts(b, v->name, v->opts);
		for (int i = 0; i < v->npos_max; i++) {
			enum comp_kind k = pos_kind(v, i, w, sizeof(w));
			if (k == COMP_NONE)
				continue;
			pisb_buf_addf(b, "complete -c pisb -n '__pisb_pos %s %d'", v->name, i + 1);
			fish_value(b, k, w);
			pisb_buf_adds(b, "\n");
		}
	}
	fish_opts(b, NULL, pisb_global_opts);
}

int pisb_completion(struct pisb_buf *b, const char *shell, struct pisb_err *e)
{
	if (!strcmp(shell, "bash"))
		comp_bash(b);
	else if (!strcmp(shell, "zsh"))
		comp_zsh(b);
	else if (!strcmp(shell, "fish"))
		comp_fish(b);
	else
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "completion: unknown shell '%s' (bash, zsh or fish)", shell);
	return 0;
}
