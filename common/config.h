/* config.h - sandbox.yaml (pisb.yaml(5)): load, validate, normalise.
 *
 * pisb_config_load() reads YAML (JSON is YAML) with libyaml and checks every
 * rule of DESIGN §5; the first error names the key path and the rule, e.g.
 * "services.web.port: must be 1-65535", and YAML syntax errors give
 * "FILE:LINE:COL: ...".  The result is normalised: defaults filled in, the
 * profile expanded into cpus/memory, relative paths resolved against the
 * file's directory.  pisb_config_json() prints the normalised form; loading
 * that JSON back gives the same config (the instance record stores it).
 */
#ifndef PISB_CONFIG_H
#define PISB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* Larger files are rejected before parsing. */
#define PISB_CONFIG_MAX (1024 * 1024)

struct pisb_err;
struct pisb_jw;
struct pisb_buf;

/* A string->string map, in file order. */
struct pisb_kv {
	char *key, *val;
};
struct pisb_map {
	struct pisb_kv *v;
	size_t n;
};

/* The built-in service that runs the sandbox's own docker daemon
 * (docker: true), and the daemon's socket inside the sandbox. */
#define PISB_DOCKER_SERVICE "dockerd"
#define PISB_DOCKER_SOCK "/run/docker.sock"

struct pisb_link {          /* one preview link */
	char *url;              /* NULL: the service's own preview URL */
	char *title, *description;
	char *folder;           /* NULL at top level */
};

enum pisb_health { PISB_HEALTH_TCP, PISB_HEALTH_HTTP, PISB_HEALTH_PROCESS };

struct pisb_service {
	char *name;             /* ^[a-z0-9][a-z0-9-]{0,31}$ */
	char *command;
	char *cwd;              /* workspace-relative; NULL = workspace */
	int port;               /* 0 = allocate */
	struct pisb_map env;
	enum pisb_health health;
	char *health_path;      /* for PISB_HEALTH_HTTP, starts with '/' */
	int timeout_ms;         /* 100-120000, default 30000 */
	bool preview;           /* has a preview URL (any link): gets PUBLIC_URL */
	bool preview_main;      /* `preview:` was given: links[0] is that link */
	struct pisb_link *links;
	size_t nlinks;
	char **platforms;       /* NULL = all */
	size_t nplatforms;
	char **depends;         /* services referenced by ${services.X.publicURL} */
	size_t ndepends;
};

struct pisb_os_volume {
	char *name, *mount_path;
	bool read_only;
	char *sub_path;
	bool is_pvc;            /* else ossfs */
	/* pvc */
	char *claim_name, *storage_class, *storage;
	bool create_if_not_exists, delete_on_termination;
	char **access_modes;
	size_t naccess_modes;
	/* ossfs */
	char *bucket, *endpoint, *version, *access_key_id, *access_key_secret;
	char **options;
	size_t noptions;
};

enum pisb_policy { PISB_POLICY_KILL, PISB_POLICY_PAUSE, PISB_POLICY_KEEP };

struct pisb_os_config {
	bool present;
	char *domain;           /* required: host[:port] */
	char *protocol;         /* "http" (default) or "https" */
	char *api_key_file;     /* absolute after normalisation, or NULL */
	char *image;            /* exactly one of image, snapshot_id, sandbox_id */
	char *snapshot_id;
	char *sandbox_id;
	long long timeout_seconds;   /* default 3600 */
	struct pisb_map resource_limits;  /* e.g. cpu: "1", memory: "2Gi" */
	char **entrypoint;
	size_t nentrypoint;
	struct pisb_map env;    /* create-only, like every field down to volumes */
	struct pisb_map metadata;
	struct pisb_os_volume *volumes;
	size_t nvolumes;
	char **network_allowlist;
	size_t nnetwork_allowlist;
	bool has_network_allowlist;
	enum pisb_policy on_shutdown;
	char *workspace;        /* default /workspace */
};

enum pisb_teardown { PISB_TEARDOWN_REMOVE, PISB_TEARDOWN_STOP, PISB_TEARDOWN_NONE };

struct pisb_sbx_config {
	bool present;
	int cpus;               /* 0 = sbx default */
	char *memory;           /* e.g. "4g", NULL = default */
	char *template_;
	bool workspace_read_only;
	bool keepalive;
	enum pisb_teardown teardown;
	char **env_allowlist;
	size_t nenv_allowlist;
	char **env_passthrough;
	size_t nenv_passthrough;
};

/* project: the user's project in the sandbox (project.h) */
enum pisb_project_mode { PISB_PROJECT_COPY, PISB_PROJECT_BIND, PISB_PROJECT_BIND_RO,
			 PISB_PROJECT_NONE };
struct pisb_project_config {
	bool present;           /* a project: section was given */
	char *dir;              /* project.dir (absolute), or NULL: --project */
	enum pisb_project_mode mode;   /* default copy */
	char **include;         /* only paths matching one (none: every path) */
	size_t ninclude;
	char **exclude;         /* paths matching one are left out */
	size_t nexclude;
	bool git_host;          /* git: host, the host's .git comes along */
	bool secrets_include;   /* secrets: include, secret files come along */
	char **secret_patterns; /* hidden besides the built-in patterns */
	size_t nsecret_patterns;
};

struct pisb_config {
	char *path;             /* the file it came from (absolute), or NULL */
	int version;            /* 1 */
	char *driver;           /* local (default), vm, opensandbox, sbx */
	char *profile;          /* tiny|small|medium|large|xlarge; default small */
	bool profile_explicit;  /* profile given in the file */
	int cpus;               /* effective: resources.cpus or the profile's */
	int memory_gib;         /* effective */
	bool resources_explicit;/* resources.* given in the file */
	int pids;               /* resources.pids, default 4096 (pisb extension) */
	int disk_gib;           /* default 60 */
	bool disk_explicit;
	char *image;            /* "host" (default) or an absolute path */
	char *workspace;        /* absolute, default /workspace */
	char **setup;
	size_t nsetup;
	char **resume;
	size_t nresume;
	struct pisb_service *services;   /* in start order (dependencies first) */
	size_t nservices;
	char **allowed_hosts;   /* exact names or "*.domain", each with an optional ":port" */
	size_t nallowed_hosts;
	bool preview_token;     /* preview.auth: token (local driver) */
	bool docker;            /* docker: true - a private dockerd inside (local driver) */
	struct pisb_map env;
	struct pisb_map metadata;
	struct pisb_os_config os;
	struct pisb_sbx_config sbx;
	struct pisb_project_config project;
};

/* String lists (char **v, size_t n) are also NULL-terminated; empty ones may
 * be NULL.  Services whose platforms exclude linux are kept (see
 * pisb_service_enabled) but never started. */

/* Load and validate a file.  *out is the caller's (pisb_config_free). */
int pisb_config_load(const char *path, struct pisb_config **out,
		     struct pisb_err *e);
/* Same from a buffer; name is used in messages ("<workspace>/.sandbox.yaml"),
 * base_dir resolves relative paths (may be NULL: relative paths rejected). */
int pisb_config_load_buf(const char *buf, size_t len, const char *name,
			 const char *base_dir, struct pisb_config **out,
			 struct pisb_err *e);

/* Any YAML document (the reader above: one document, no anchors or
 * aliases, no duplicate keys) as JSON text appended to out: booleans and
 * nulls as YAML 1.2 core resolves them, every other scalar a string.  -1
 * with e (exit 2, "name:LINE:COL: ...") when it is not one. */
int pisb_yaml_to_json(const char *buf, size_t len, const char *name, struct pisb_buf *out,
		      struct pisb_err *e);
/* The built-in default config (local driver, host image, small profile). */
struct pisb_config *pisb_config_default(void);
void pisb_config_free(struct pisb_config *c);
/* The environment that points a sandbox's programs at its egress proxy
 * on the sandbox's own 127.0.0.1:3128 (HTTP_PROXY, HTTPS_PROXY, NO_PROXY
 * for loopback, and their lower-case forms) when c has
 * network.allowedHosts; nothing otherwise.  Every driver that runs the
 * proxy (local: the controller's socket in the sandbox's namespace; vm:
 * the agent's listener in the guest) gives its commands this. */
struct pisb_strv;
void pisb_config_proxy_env(const struct pisb_config *c, struct pisb_strv *out);

/* Normalised config as one JSON object. */
void pisb_config_json(const struct pisb_config *c, struct pisb_jw *w);

const char *pisb_map_get(const struct pisb_map *m, const char *key);
/* Does the service run here?  The guest is always Linux, so a service whose
 * platforms leave out "linux" is declared but excluded. */
bool pisb_service_enabled(const struct pisb_service *s);
const struct pisb_service *pisb_config_service(const struct pisb_config *c,
					       const char *name);

#endif
