/* cli_table.c - every verb and option pisb knows (see cli.h). */
#include "cli.h"

#include <stddef.h>

#define END { NULL, 0, 0, NULL, 0, NULL }
#define FLAG(n, s, h) { n, s, PISB_ARG_NONE, NULL, 0, h }
#define OPT(n, s, m, h) { n, s, PISB_ARG_REQ, m, 0, h }
#define INT(n, s, m, h) { n, s, PISB_ARG_REQ, m, PISB_OPT_INT, h }
#define MULTI(n, s, m, h) { n, s, PISB_ARG_REQ, m, PISB_OPT_MULTI, h }
#define HIDDEN(n, m, h) { n, 0, m ? PISB_ARG_REQ : PISB_ARG_NONE, m, PISB_OPT_HIDDEN, h }

const char *const pisb_binaries[] = {
	"pisb", "pisb-create", "pisb-exec", "pisb-fs", "pisb-svc",
	"pisb-docker", "pisb-gc", "pisb-renew", NULL,
};

const struct pisb_opt pisb_global_opts[] = {
	OPT("state-dir", 0, "DIR", "state directory (default $PI_SANDBOX_HOME, $XDG_STATE_HOME/pi-sandbox, ~/.local/state/pi-sandbox)"),
	FLAG("json", 0, "machine-readable output on stdout"),
	FLAG("quiet", 'q', "print nothing but errors"),
	FLAG("verbose", 'v', "print what is being done on stderr"),
	{ "wait", 0, PISB_ARG_OPT, "SECONDS", 0, "if the sandbox is busy, wait for it (at most SECONDS) instead of failing with 4" },
	FLAG("help", 'h', "show this help"),
	FLAG("version", 0, "print the version"),
	HIDDEN("json-errors", NULL, "print errors as a JSON object on stdout (pisb action)"),
	END,
};

static const struct pisb_opt create_opts[] = {
	OPT("file", 'f', "FILE", "sandbox.yaml to create from"),
	OPT("template", 0, "T", "copy the prepared template T instead of a fresh disk"),
	OPT("driver", 0, "DRIVER", "the driver to use, one of 'pisb drivers -q' (overrides the config)"),
	INT("owner-pid", 0, "PID", "the sandbox belongs to this process; pisb gc may remove it once the process is gone"),
	OPT("session-id", 0, "ID", "Pi session id, recorded in metadata"),
	OPT("on-ready", 0, "CMD", "run CMD (sh -c) once ready; if it fails the sandbox is removed and create fails"),
	INT("events-fd", 0, "N", "write lifecycle events as JSON lines to fd N"),
	FLAG("dry-run", 0, "validate and print the normalised config, create nothing"),
	OPT("project", 0, "DIR", "copy the project DIR into the workspace (its base for pisb diff and apply)"),
	END,
};
static const struct pisb_opt prepare_opts[] = {
	OPT("file", 'f', "FILE", "sandbox.yaml whose setup prepares the template"),
	END,
};
static const struct pisb_opt none_opts[] = { END };
static const struct pisb_opt stop_opts[] = {
	INT("events-fd", 0, "N", "write lifecycle events as JSON lines to fd N"),
	END,
};
static const struct pisb_opt destroy_opts[] = {
	OPT("confirm", 0, "NAME", "repeat the sandbox name to confirm"),
	FLAG("template", 0, "destroy the template NAME instead of an instance"),
	INT("events-fd", 0, "N", "write lifecycle events as JSON lines to fd N"),
	END,
};
static const struct pisb_opt release_opts[] = {
	OPT("policy", 0, "remove|stop|keep", "do this instead of the sandbox's own policy"),
	INT("events-fd", 0, "N", "write lifecycle events as JSON lines to fd N"),
	END,
};
static const struct pisb_opt list_opts[] = {
	FLAG("templates", 0, "list templates instead of instances"),
	END,
};
static const struct pisb_opt validate_opts[] = {
	OPT("file", 'f', "FILE", "sandbox.yaml to check"),
	END,
};
static const struct pisb_opt pool_opts[] = {
	OPT("file", 'f', "FILE", "sandbox.yaml whose creates the spares serve (default: the default config)"),
	OPT("driver", 0, "DRIVER", "the driver to use (overrides the config)"),
	HIDDEN("refill", NULL, "a replacement for a spare taken: as many as the pool asks"),
	END,
};
static const struct pisb_opt connect_opts[] = {
	OPT("file", 'f', "FILE", "config with opensandbox.sandboxId"),
	INT("owner-pid", 0, "PID", "the session process that uses the sandbox"),
	OPT("session-id", 0, "ID", "Pi session id"),
	OPT("on-ready", 0, "CMD", "run CMD (sh -c) once ready; if it fails the sandbox is disconnected and connect fails"),
	INT("events-fd", 0, "N", "write lifecycle events as JSON lines to fd N"),
	END,
};
static const struct pisb_opt exec_opts[] = {
	OPT("cwd", 0, "DIR", "working directory (workspace-relative or absolute inside the sandbox)"),
	MULTI("env", 'e', "K=V", "set a variable for the command (repeatable)"),
	OPT("sh", 0, "STRING", "run STRING with /bin/sh -c in a login shell's environment instead of CMD"),
	OPT("bash", 0, "STRING", "the same with /bin/bash when the sandbox has it (else /bin/sh)"),
	INT("timeout-ms", 0, "N", "wait at most N ms (0-60000), then return a handle; output is collected, not streamed"),
	INT("events-fd", 0, "N", "with --sh or --bash, write the shell the command runs under as a JSON line to fd N"),
	END,
};
static const struct pisb_opt exec_status_opts[] = {
	INT("timeout-ms", 0, "N", "wait at most N ms (0-60000) for the command to finish"),
	END,
};
static const struct pisb_opt read_opts[] = {
	INT("offset", 0, "LINE", "first line to return (1-based)"),
	INT("limit", 0, "LINES", "number of lines to return"),
	FLAG("raw", 0, "stream the exact bytes, any size"),
	END,
};
static const struct pisb_opt write_opts[] = {
	FLAG("mkdir", 0, "create missing parent directories"),
	OPT("mode", 0, "MODE", "octal file mode (default: keep the existing one, else 0644)"),
	OPT("from", 0, "FILE", "read the content from a host file instead of stdin"),
	OPT("content", 0, "TEXT", "the content itself instead of stdin"),
	END,
};
static const struct pisb_opt edit_opts[] = {
	MULTI("old", 0, "TEXT", "text to replace; must occur exactly once (repeatable)"),
	MULTI("new", 0, "TEXT", "replacement for the matching --old (repeatable)"),
	MULTI("old-file", 0, "FILE", "like --old, the text read from a host file"),
	MULTI("new-file", 0, "FILE", "like --new, the text read from a host file"),
	END,
};
static const struct pisb_opt find_opts[] = {
	OPT("path", 0, "DIR", "directory to search (default: the workspace)"),
	INT("limit", 0, "N", "at most N results (default 1000)"),
	FLAG("no-ignore", 0, "do not skip .git, node_modules and .gitignore'd paths"),
	END,
};
static const struct pisb_opt grep_opts[] = {
	OPT("path", 0, "DIR", "directory or file to search (default: the workspace)"),
	OPT("glob", 0, "G", "only files whose path matches G"),
	FLAG("ignore-case", 'i', "case-insensitive match"),
	FLAG("literal", 0, "REGEX is a fixed string"),
	INT("context", 'C', "N", "N lines of context around each match"),
	INT("limit", 0, "N", "at most N matches (default 100)"),
	FLAG("no-ignore", 0, "do not skip .git, node_modules and .gitignore'd paths"),
	END,
};
static const struct pisb_opt logs_opts[] = {
	INT("lines", 'n', "N", "last N lines (at most 500, default 100)"),
	END,
};
static const struct pisb_opt push_opts[] = {
	OPT("to", 0, "DIR", "target directory in the sandbox (default: the workspace)"),
	FLAG("all", 0, "every file, not only those git tracks"),
	END,
};
static const struct pisb_opt pull_opts[] = {
	FLAG("include-git", 0, "also pull .git directories (left out by default: git on the host would run their config and hooks)"),
	INT("max-bytes", 0, "N", "fail when the pull would write more than N bytes of file data (default 10737418240, 10 GiB)"),
	END,
};
static const struct pisb_opt diff_opts[] = {
	FLAG("stat", 0, "one line per changed file (git's --stat), not the patches"),
	FLAG("all", 0, "also ignored files and .sandbox.yaml"),
	END,
};
static const struct pisb_opt apply_opts[] = {
	FLAG("dry-run", 0, "check and say what would be written, write nothing"),
	FLAG("force", 0, "overwrite files that changed on the host since the base too"),
	END,
};
static const struct pisb_opt svc_opts[] = {
	INT("port", 0, "N", "guest port for an ad-hoc service"),
	FLAG("preview", 0, "give the ad-hoc service a preview URL"),
	OPT("title", 0, "T", "preview title"),
	OPT("description", 0, "D", "preview description"),
	INT("timeout-ms", 0, "N", "readiness deadline of an ad-hoc service, 100-120000 ms (default 60000)"),
	END,
};
static const struct pisb_opt gc_opts[] = {
	INT("hours", 0, "N", "also remove stopped sandboxes idle for more than N hours"),
	FLAG("dry-run", 0, "say what would be removed, remove nothing"),
	END,
};
static const struct pisb_opt renew_opts[] = {
	FLAG("watch", 0, "keep renewing in a loop"),
	INT("interval", 0, "SECONDS", "with --watch, seconds between passes (default 30)"),
	END,
};
static const struct pisb_opt supervise_opts[] = {
	HIDDEN("foreground", NULL, "do not detach"),
	HIDDEN("driver", "DRIVER", "whose supervisor runs (default local)"),
	HIDDEN("notify-fd", "FD", "its starter's socket: the word to begin, then the news that it runs"),
	HIDDEN("own-namespaces", NULL, "the boot makes the sandbox's namespaces itself (a disk image, a bound project): none are made ahead"),
	END,
};

#define V(name, bin, syn, p0, p1, p2, min, max, dd, summary, opts) \
	{ name, bin, syn, { p0, p1, p2, NULL }, min, max, dd, false, summary, opts }

const struct pisb_verb pisb_verbs[] = {
	V("create", "pisb-create", "NAME [-f FILE] [--template T] [--driver D] [--owner-pid PID] [--project DIR]", "name", NULL, NULL, 1, 1, false,
	  "create a sandbox: new disk, boot, setup, services", create_opts),
	V("prepare", "pisb-create", "NAME -f FILE", "name", NULL, NULL, 1, 1, false,
	  "run setup and save the disk as template NAME", prepare_opts),
	V("start", "pisb-create", "NAME", "name", NULL, NULL, 1, 1, false,
	  "start a stopped sandbox from its last checkpoint", stop_opts),
	V("stop", "pisb-create", "NAME", "name", NULL, NULL, 1, 1, false,
	  "stop services and processes, checkpoint the disk", stop_opts),
	V("destroy", "pisb-create", "NAME --confirm NAME", "name", NULL, NULL, 1, 1, false,
	  "remove a sandbox, its disk and logs, for good", destroy_opts),
	V("release", "pisb-create", "NAME [--policy remove|stop|keep]", "name", NULL, NULL, 1, 1, false,
	  "end a session's use of a sandbox: its own policy (remove, stop or keep)", release_opts),
	V("list", "pisb-create", "[--templates]", NULL, NULL, NULL, 0, 0, false,
	  "list sandboxes of every driver", list_opts),
	V("pool", "pisb-create", "[N] [-f FILE] [--driver D]", NULL, NULL, NULL, 0, 1, false,
	  "keep N spare sandboxes of a config booted for its creates; list the pools", pool_opts),
	V("inspect", "pisb-create", "NAME", "name", NULL, NULL, 1, 1, false,
	  "status, driver, limits, ports, previews of a sandbox", none_opts),
	V("connect", "pisb-create", "NAME -f FILE", "name", NULL, NULL, 1, 1, false,
	  "attach an existing remote sandbox under NAME", connect_opts),
	V("verify", "pisb-create", "NAME", "name", NULL, NULL, 1, 1, false,
	  "audit a running sandbox's isolation live", none_opts),
	V("doctor", "pisb-create", "", NULL, NULL, NULL, 0, 0, false,
	  "check this host for what each driver needs", none_opts),
	V("drivers", "pisb-create", "", NULL, NULL, NULL, 0, 0, false,
	  "what each driver can do: the verb x driver matrix", none_opts),
	V("validate", "pisb-create", "-f FILE", NULL, NULL, NULL, 0, 0, false,
	  "check a sandbox.yaml and print it normalised", validate_opts),
	V("exec", "pisb-exec", "NAME [--cwd DIR] [--env K=V]... [--timeout-ms N] [--events-fd N] (--sh STRING | --bash STRING | -- CMD [ARG]...)", "name", NULL, NULL, 1, 1, true,
	  "run a command in a sandbox", exec_opts),
	V("exec-status", "pisb-exec", "NAME HANDLE [--timeout-ms N]", "name", "handle", NULL, 2, 2, false,
	  "new output and status of a detached command", exec_status_opts),
	V("exec-kill", "pisb-exec", "NAME HANDLE", "name", "handle", NULL, 2, 2, false,
	  "end a detached command's process group", none_opts),
	V("shell", "pisb-exec", "NAME [USER]", "name", "user", NULL, 1, 2, false,
	  "interactive terminal in a sandbox", none_opts),
	V("read", "pisb-fs", "NAME PATH [--offset LINE] [--limit LINES] [--raw]", "name", "path", NULL, 2, 2, false,
	  "read a file (64 KiB cap unless --raw)", read_opts),
	V("write", "pisb-fs", "NAME PATH [--mkdir] [--mode MODE] < CONTENT", "name", "path", NULL, 2, 2, false,
	  "replace a file atomically with stdin", write_opts),
	V("edit", "pisb-fs", "NAME PATH --old TEXT --new TEXT...", "name", "path", NULL, 2, 2, false,
	  "replace texts that each occur exactly once", edit_opts),
	V("ls", "pisb-fs", "NAME [PATH]", "name", "path", NULL, 1, 2, false,
	  "list a directory with types, sizes and modes", none_opts),
	V("stat", "pisb-fs", "NAME PATH", "name", "path", NULL, 2, 2, false,
	  "type, size, mode and access of a path", none_opts),
	V("mkdir", "pisb-fs", "NAME PATH", "name", "path", NULL, 2, 2, false,
	  "create a directory and its parents", none_opts),
	V("find", "pisb-fs", "NAME GLOB [--path DIR] [--limit N]", "name", "glob", NULL, 2, 2, false,
	  "find files by glob (** allowed)", find_opts),
	V("grep", "pisb-fs", "NAME REGEX [--path DIR] [--glob G] [-i] [--literal] [-C N] [--limit N]", "name", "pattern", NULL, 2, 2, false,
	  "search file contents (REGEX in ripgrep's syntax)", grep_opts),
	V("logs", "pisb-fs", "NAME [SERVICE] [--lines N]", "name", "service", NULL, 1, 2, false,
	  "last lines of the controller's or a service's log", logs_opts),
	V("push", "pisb-fs", "NAME HOSTDIR [--to DIR] [--all]", "name", "hostDir", NULL, 2, 2, false,
	  "copy a host tree into the sandbox, verified", push_opts),
	V("pull", "pisb-fs", "NAME PATH HOSTDIR [--include-git] [--max-bytes N]", "name", "path", "hostDir", 3, 3, false,
	  "copy a sandbox tree out to a host directory", pull_opts),
	V("diff", "pisb-fs", "NAME [PATH] [--stat] [--all] [-- PATH...]", "name", "path", NULL, 1, 2, true,
	  "what changed in the workspace against the project's base", diff_opts),
	V("apply", "pisb-fs", "NAME [PATH] [--dry-run] [--force] [-- PATH...]", "name", "path", NULL, 1, 2, true,
	  "write the workspace's changes into the host project", apply_opts),
	V("sync", "pisb-fs", "NAME", "name", NULL, NULL, 1, 1, false,
	  "bring the host project's changes since the base into the workspace", none_opts),
	V("svc", "pisb-svc", "NAME ensure|status|restart|stop|start|preview|remove [SERVICE|PORT] [-- CMD...]", "name", "op", "service", 2, 3, true,
	  "manage services and previews", svc_opts),
	{ "supervise", "pisb-svc", "NAME", { "name", NULL }, 1, 1, false, true,
	  "run a sandbox's controller (internal)", supervise_opts },
	V("docker", "pisb-docker", "NAME status|verify|resources|prune|ps|images|pull|load|import|run|logs|exec|build|init|compose|stop|start|rm|curl [-- ARG...]", "name", "verb", NULL, 2, 2, true,
	  "docker inside the sandbox's own daemon", none_opts),
	V("gc", "pisb-gc", "[--hours N] [--dry-run]", NULL, NULL, NULL, 0, 0, false,
	  "remove dead-owner sandboxes, stale handles and caches", gc_opts),
	V("renew", "pisb-renew", "[NAME] [--watch]", "name", NULL, NULL, 0, 1, false,
	  "renew remote sandboxes whose TTL is due (NAME: that one, now)", renew_opts),
	{ NULL, NULL, NULL, { NULL }, 0, 0, false, false, NULL, NULL },
};
