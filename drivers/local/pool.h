/* pool.h - the local driver's pool: spare sandboxes of a config, booted
 * ahead of the creates that will take them (pisb pool, issue #21).
 *
 * A spare is a create of the config under a name of the pool's own
 * (pool/spare-HEX, its key in pool.key) that stops where a create tells
 * its controller to begin: the sandbox is booted (namespaces, root, init,
 * cgroup), nothing of the guest has run (no setup hook, no service), and
 * its controller waits, idle, on claim.sock.  A create of the same config
 * (the same normalised config and the same text: pisb_config_key; no
 * --template, --project, diskGiB image) takes one instead of booting:
 * it claims the spare (the first claim is the only one: the socket goes),
 * gives it its host id range and its record (name, owner, time), renames
 * it to instances/NAME and tells it to begin; the controller sets the
 * hostname inside to NAME and runs setup and services as after any boot,
 * and a moment later starts a replacement, in the background.
 *
 * State (in the state directory): pool/KEY.conf ("N\nFILE\n": how many
 * spares, the file they were asked for), pool/KEY.yaml (the config's
 * text, what a replacement is made from), pool/KEY.lock (held while
 * spares are made or retired), pool/spare-HEX/ (a spare: an instance
 * directory).  A spare whose controller is gone is removed by the next
 * pisb pool or pisb gc (with its cgroup and id range).
 */
#ifndef PISB_POOL_H
#define PISB_POOL_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_state;
struct pisb_config;
struct pisb_create_opts;
struct pisb_jw;
struct pisb_err;

/* Take a spare for create o (o->name): 1 with the sandbox running as
 * after pisb_local_create (*setup_error as its), 0 when there is none to
 * take (nothing done: the create boots), -1 with e when the claim failed
 * after it began (nothing of the spare is left). */
int pisb_pool_claim(struct pisb_state *st, const char *config_json,
		    const struct pisb_create_opts *o, char **setup_error, struct pisb_err *e);

/* Keep n spares of cfg (its text, from file, NULL for the default
 * config): made or retired now; n 0 ends the pool.  n -1: as many as the
 * pool of that config asks (a replacement after a claim; none when there
 * is no such pool).  0, or -1 with e. */
int pisb_pool_set(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  const char *text, size_t len, const char *file, int n, struct pisb_err *e);

/* Start a replacement for a spare of pool key that was taken (`pisb
 * pool --refill -f pool/KEY.yaml`, detached): from the controller of the
 * sandbox it became, REFILL_DELAY_MS after it runs (not beside the
 * create's first command, on the same CPUs).  Best effort: a pool not
 * refilled has a spare less, and its creates boot as without. */
void pisb_pool_refill(struct pisb_state *st, const char *key);

/* Every pool of the state directory, as objects into w's open array:
 * key, spares (asked), ready, file.  Spares whose controller is gone are
 * removed first. */
void pisb_pool_list(struct pisb_state *st, struct pisb_jw *w);

/* pisb gc: spares whose controller is gone, removed (not in a dry run),
 * each reported into r. */
struct pisb_gc_report;
void pisb_pool_gc(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r);

#endif
