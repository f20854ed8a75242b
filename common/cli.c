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

/* ---- completions ---- */

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

static void extra_verbs(struct pisb_buf *b, const char *sep)
{
	pisb_buf_addf(b, "action%shelp%scompletion%s", sep, sep, sep);
}

static void comp_bash(struct pisb_buf *b)
{
	pisb_buf_adds(b, "# bash completion for pisb (generated by 'pisb completion bash')\n"
			 "_pisb() {\n"
			 "  local cur=${COMP_WORDS[COMP_CWORD]} verb=${COMP_WORDS[1]} opts\n"
			 "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
			 "    COMPREPLY=($(compgen -W \"");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden)
			pisb_buf_addf(b, "%s ", v->name);
	extra_verbs(b, " ");
	opt_words(b, pisb_global_opts, " ");
	strip_tail(b, 1);
	pisb_buf_adds(b, "\" -- \"$cur\")); return\n  fi\n  case $verb in\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		pisb_buf_addf(b, "    %s) opts=\"", v->name);
		opt_words(b, v->opts, " ");
		strip_tail(b, v->opts && v->opts->name ? 1 : 0);
		pisb_buf_adds(b, "\" ;;\n");
	}
	pisb_buf_adds(b, "    *) opts=\"\" ;;\n  esac\n  opts=\"$opts ");
	opt_words(b, pisb_global_opts, " ");
	strip_tail(b, 1);
	pisb_buf_adds(b, "\"\n"
			 "  case $cur in\n"
			 "    -*) COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")) ;;\n"
			 "    *) local names; names=$(pisb list -q 2>/dev/null)\n"
			 "       COMPREPLY=($(compgen -W \"$names\" -- \"$cur\")) ;;\n"
			 "  esac\n"
			 "}\n"
			 "complete -o default -F _pisb pisb\n");
}

static void zsh_opts(struct pisb_buf *b, const struct pisb_opt *o)
{
	for (; o && o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_buf_addf(b, " '--%s[", o->name);
		for (const char *c = o->help; *c; c++) {
			if (*c == '\'' || *c == '[' || *c == ']' || *c == ':')
				continue;
			pisb_buf_addc(b, *c);
		}
		pisb_buf_addf(b, "]%s'", o->arg == PISB_ARG_REQ ? ":value:" : "");
		if (o->shrt)
			pisb_buf_addf(b, " '-%c'", o->shrt);
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
			 "  if (( CURRENT == 2 )); then _describe verb verbs; return; fi\n"
			 "  case $words[2] in\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		pisb_buf_addf(b, "    %s) _arguments -s", v->name);
		zsh_opts(b, v->opts);
		zsh_opts(b, pisb_global_opts);
		pisb_buf_adds(b, " '*:name:_pisb_names' ;;\n");
	}
	pisb_buf_adds(b, "  esac\n}\n"
			 "_pisb_names() { local -a n; n=(${(f)\"$(pisb list -q 2>/dev/null)\"}); _describe sandbox n; }\n"
			 "_pisb \"$@\"\n");
}

static void fish_opts(struct pisb_buf *b, const char *verb, const struct pisb_opt *o)
{
	for (; o && o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_buf_addf(b, "complete -c pisb -n '__fish_seen_subcommand_from %s' -l %s",
			      verb, o->name);
		if (o->shrt)
			pisb_buf_addf(b, " -s %c", o->shrt);
		if (o->arg == PISB_ARG_REQ)
			pisb_buf_adds(b, " -r");
		pisb_buf_adds(b, " -d '");
		for (const char *c = o->help; *c; c++)
			if (*c != '\'')
				pisb_buf_addc(b, *c);
		pisb_buf_adds(b, "'\n");
	}
}

static void comp_fish(struct pisb_buf *b)
{
	pisb_buf_adds(b, "# fish completion for pisb (generated by 'pisb completion fish')\n"
			 "complete -c pisb -f\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++)
		if (!v->hidden) {
			pisb_buf_addf(b, "complete -c pisb -n '__fish_use_subcommand' -a %s -d '", v->name);
			add_quoted(b, v->summary, "\\'");
			pisb_buf_adds(b, "'\n");
		}
	pisb_buf_adds(b, "complete -c pisb -n '__fish_use_subcommand' -a action -d 'run one JSON action object'\n"
			 "complete -c pisb -n '__fish_use_subcommand' -a help -d 'open the manual page of a verb'\n"
			 "complete -c pisb -n '__fish_use_subcommand' -a completion -d 'print a completion script'\n");
	for (const struct pisb_verb *v = pisb_verbs; v->name; v++) {
		if (v->hidden)
			continue;
		fish_opts(b, v->name, v->opts);
		pisb_buf_addf(b, "complete -c pisb -n '__fish_seen_subcommand_from %s' -a '(pisb list -q 2>/dev/null)'\n",
			      v->name);
	}
	for (const struct pisb_opt *o = pisb_global_opts; o->name; o++) {
		if (o->flags & PISB_OPT_HIDDEN)
			continue;
		pisb_buf_addf(b, "complete -c pisb -l %s", o->name);
		if (o->shrt)
			pisb_buf_addf(b, " -s %c", o->shrt);
		pisb_buf_addf(b, "%s -d '", o->arg == PISB_ARG_REQ ? " -r" : "");
		for (const char *c = o->help; *c; c++)
			if (*c != '\'')
				pisb_buf_addc(b, *c);
		pisb_buf_adds(b, "'\n");
	}
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
