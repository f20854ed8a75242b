/* docker_policy.h - what `pisb docker` lets through to a sandbox's daemon.
 *
 * One policy for every driver: cmd/pisb-docker.c runs the arguments of a
 * verb through pisb_docker_policy_sandbox() before the driver's docker
 * slot sees them, and the driver gets the rewritten vector.
 *
 * The arguments are parsed with docker's own option grammar (pflag):
 * clustered short flags (`-dp 8080:80`, `-itd`), a value attached
 * (`-p8080:80`, `-p=8080:80`, `--publish=8080:80`) or in the next word,
 * boolean flags with an explicit value (`--privileged=false`), `--` ending
 * the options, and the first positional word (the image of run/create,
 * the container of exec) ending them too.  An option the table does not
 * know is refused (its arity is unknown, so what follows could not be
 * checked).
 *
 * Refused (exit 2, the option named): `--privileged`, `--pid/--ipc/--uts/
 * --userns/--cgroupns host`, `--network host`, `--device`,
 * `--device-cgroup-rule`, `--gpus`, `--cgroup-parent`, `--use-api-socket`,
 * `--cap-add` of a capability not in docker's default set (which it may
 * re-add after a `--cap-drop`), `--security-opt` seccomp (unconfined or a
 * profile), apparmor=unconfined, label=disable, systempaths=unconfined,
 * writable-cgroups, a bind (`-v SRC:DST`, `--mount type=bind`, a volume of
 * `volume-opt=device=`) or a build context, Dockerfile, build context
 * (`--build-context`), secret, output or compose file outside the
 * workspace, `build --allow`, and `-H`/`--host`/`--context` anywhere.
 *
 * Rewritten: options come out one to a word as the caller spelled them,
 * a cluster split (`-dp 8080:80` becomes `-d -p 8080:80`, `-p8080:80`
 * becomes `-p 8080:80`; `--publish=8080:80` stays); run, create and
 * compose run get `--label com.pi.sandbox=true` after the caller's options
 * (so it wins); `run -d` without `--restart` or `--rm` gets `--restart
 * unless-stopped`; with a read-only workspace, every workspace bind gets
 * `ro` (`-v` options, `--mount ...,readonly`).  The -p specs parsed are
 * in out->ports for a driver that publishes them.
 *
 * pisb_docker_policy_sandbox() also reads the compose files of a compose
 * subcommand that creates containers (its -f files, else the default and
 * its override), inside the sandbox through the driver's read_text (in a
 * child process: the file verbs enter the sandbox for good), and checks
 * every service with run's rules, naming the file and key; the defaults
 * found are passed with -f.  See pisb-docker(1) "Argument policy".
 *
 * Paths are checked lexically: relative ones against the workspace (the
 * docker command's working directory), `.` and `..` folded.  A symlink
 * inside the workspace is resolved by the daemon, inside the sandbox: it
 * can reach only the sandbox's own files, never the host's.
 */
#ifndef PISB_DOCKER_POLICY_H
#define PISB_DOCKER_POLICY_H

#include "util.h"

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_sandbox;

/* Where the sandbox's daemon sees the workspace. */
struct pisb_docker_scope {
	const char *workspace;  /* absolute path inside the sandbox */
	bool read_only;         /* binds of it get :ro */
};

/* One -p/--publish of run/create (ranges expanded). */
struct pisb_docker_port {
	char ip[64];            /* "" when none was given; IPv6 without [] */
	int host;               /* 0: docker picks */
	int cport;
	char proto[8];          /* tcp, udp or sctp */
};

struct pisb_docker_args {
	struct pisb_strv argv;  /* the rewritten arguments (NULL-terminated) */
	bool detached;          /* run/create with --detach */
	struct pisb_docker_port *ports;
	size_t nports;
	/* compose: its subcommand (argv.v[compose_at]), the -f files and
	 * --project-directory given (before the sandbox's files are read) */
	char *compose_sub;
	size_t compose_at;
	struct pisb_strv compose_files;
	char *compose_dir;
	bool compose_late;      /* a -f after the subcommand */
};
#define PISB_DOCKER_ARGS_INIT { PISB_STRV_INIT, false, NULL, 0, NULL, 0, PISB_STRV_INIT, NULL, false }
void pisb_docker_args_release(struct pisb_docker_args *a);
#define _cleanup_docker_args_ __attribute__((cleanup(pisb_docker_args_release)))

/* Check and rewrite args (n words) of pisb docker VERB.  run, create,
 * exec, build and compose are parsed in full; the other verbs are only
 * searched for -H/--host/--context.  -1 with e (exit 2, the option named)
 * when refused; out is filled either way and the caller releases it. */
int pisb_docker_policy(const struct pisb_docker_scope *s, const char *verb,
		       char *const *args, size_t n, struct pisb_docker_args *out,
		       struct pisb_err *e);

/* The same with the scope of sandbox sb: its workspace (the driver's
 * record says where it is inside when it differs from the config's) and
 * whether it is mounted read-only. */
int pisb_docker_policy_sandbox(struct pisb_sandbox *sb, const char *verb,
			       char *const *args, size_t n, struct pisb_docker_args *out,
			       struct pisb_err *e);

/* One publish spec, [IP:][HOST[-HOST2]:]CPORT[-CPORT2][/PROTO] with IP
 * possibly "[::]": appended to *ports (caller frees).  -1 with e (exit 2)
 * when it is not one. */
int pisb_docker_port_parse(const char *spec, struct pisb_docker_port **ports, size_t *n,
			   struct pisb_err *e);

/* The -p/--publish ports of run or create arguments that went through
 * the policy (docker's grammar: clusters, --publish=, [::]:H:C, ranges
 * expanded), for a driver that publishes them: *ports (caller frees). */
void pisb_docker_run_ports(char *const *args, size_t n, struct pisb_docker_port **ports,
			   size_t *np);

/* The index in ARGS (N words of a compose command that went through the
 * policy: one option a word, a value in the next word or after '=') of
 * compose's subcommand, past its global options; N when there is none. */
size_t pisb_docker_compose_sub(char *const *args, size_t n);

/* Whether the ARGS (N words) of compose run after its subcommand, as
 * the policy passed them (one option a word), ask for --detach. */
bool pisb_docker_compose_run_detached(char *const *args, size_t n);

/* The first compose file that compose's global options (the NOPTS words
 * before its subcommand, as pisb_docker_compose_sub counts them) name with
 * -f or --file, NULL when they name none.  It points into ARGS. */
const char *pisb_docker_compose_file(char *const *args, size_t nopts);

/* Whether an environment variable name is docker's or compose's own
 * (DOCKER_*, COMPOSE_*): refused in config env and pisb exec --env, since
 * it would point a docker client at another daemon. */
bool pisb_docker_env_refused(const char *name);

#endif
