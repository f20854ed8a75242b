/**
 * pisb for Pi: run Pi's tools inside a pisb sandbox.
 *
 * This file holds no sandbox logic. It maps Pi's tool operations onto the
 * pisb command line (argv arrays only, never a shell string built on the host)
 * and maps paths between the host working directory and the sandbox workspace.
 * What it decides itself: which requests of the model's sandbox tool reach
 * pisb (nothing of the host, only this project's sandboxes), and when the
 * session's sandbox is made, renewed and released (each step one pisb verb).
 *
 * Imports use the legacy @mariozechner names: Pi 0.73.1 resolves only those,
 * and current Pi maps them to its own modules.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { constants as fsConstants, promises as fsp, readFileSync, realpathSync } from "node:fs";
import { constants as osConstants, homedir, tmpdir } from "node:os";
import path from "node:path";
import {
	createBashToolDefinition,
	createEditToolDefinition,
	createFindToolDefinition,
	createGrepToolDefinition,
	createLsToolDefinition,
	createReadToolDefinition,
	createWriteToolDefinition,
	DEFAULT_MAX_BYTES,
	formatSize,
	truncateHead,
	truncateLine,
} from "@mariozechner/pi-coding-agent";
import type { BashOperations, ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

/** what session_shutdown does with a sandbox the extension created: pisb's words */
export type Lifecycle = "remove" | "stop" | "keep";
/** the same in the OpenSandbox seed's words */
export type SeedMode = "kill" | "pause" | "keep";

export interface SandboxEvent {
	phase: "ready" | "released";
	/** the backend's id: the OpenSandbox sandbox id for opensandbox, pisb's name otherwise */
	sandboxId: string;
	/** pisb's name of the sandbox */
	name: string;
	driver?: string;
	workspace: string;
	createdByExtension: boolean;
	/** true when an existing (stopped or paused) sandbox was resumed for this session */
	resumed: boolean;
	/** released only: the policy applied, in the seed's words (a connected sandbox: keep) */
	mode?: SeedMode;
	/** released only: what pisb did */
	pisbMode?: "removed" | "stopped" | "kept" | "disconnected";
	/** the lifecycle events pisb itself reported on --events-fd, as it wrote them */
	pisbEvents: unknown[];
}

export interface PisbExtensionOptions {
	/** pisb dispatcher; default $PISB_BIN or "pisb" */
	bin?: string;
	/** pisb --state-dir; default: pisb's own ($PI_SANDBOX_HOME, ...) */
	stateDir?: string;
	/** sandbox name; an existing one is connected to (never stopped or removed by us) */
	name?: string;
	/** sandbox.yaml path; default <cwd>/.pi/sandbox.yaml when it exists */
	configFile?: string;
	/** inline configuration (object, JSON or YAML text) instead of a file, for embedding */
	config?: string | Record<string, unknown>;
	/** what session_shutdown does with a sandbox this extension created; default: the config's, else "remove" (the seed's kill) */
	lifecycle?: Lifecycle | SeedMode;
	/** host variables passed into the sandbox besides PI_* */
	envAllowlist?: string[];
	/** copy the host working directory into the workspace when the sandbox is created */
	push?: boolean;
	/** bound on every pisb call except bash (ms); default 120000 */
	opTimeoutMs?: number;
	/** at session start, remove this user's session sandboxes stopped for more than this many hours (0: never); default $PISB_GC_HOURS, else 24 */
	gcHours?: number;
	/** throwing (or rejecting) on "ready" cleans the sandbox up and fails session_start */
	onSandboxEvent?: (event: SandboxEvent) => void | Promise<void>;
}

const NAME_RE = /^[a-z][a-z0-9-]{0,39}$/;
const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_KEY_RE = /KEY|TOKEN|SECRET|PASSW|CREDENTIAL/i;
const DEFAULT_ENV_ALLOWLIST = ["LANG", "LC_ALL", "LC_CTYPE", "TZ"];
const STATUS_KEY = "pisb";
/** metadata keys the extension adds to the configs it creates sandboxes from */
const META_PROJECT = "pisb.pi/project";
const META_ROLE = "pisb.pi/role";
/**
 * How the bash tool, ! commands and the sandbox tool's exec hand a command
 * string to `pisb exec`: `--bash` (bash when the sandbox has it, sh
 * otherwise, as Pi runs bash) when this pisb offers it (`pisb exec --help`
 * names it; issue 12 item 3), else `--sh` (/bin/sh).
 */
const SHELL_OPTIONS = { bash: "--bash", sh: "--sh" } as const;
const SEED_MODE: Record<Lifecycle, SeedMode> = { remove: "kill", stop: "pause", keep: "keep" };
/**
 * /reload, /new, /resume and /fork shut one extension instance down and start
 * another in the same process: the sandbox is handed over (by host cwd and
 * pisb binary) instead of being stopped or removed and made again.
 */
const HANDOFF = Symbol.for("pisb.pi.handoff");
const handoff: Map<string, unknown> = ((globalThis as any)[HANDOFF] ??= new Map());

/** Thrown when the sandbox cannot be used: the call fails and nothing runs on the host. */
class SandboxUnavailableError extends Error {}

interface RunResult {
	code: number;
	stdout: Buffer;
	stderr: string;
}

interface Sandbox {
	name: string;
	/** the backend's id (OpenSandbox id), else the name */
	backendId: string;
	driver?: string;
	workspace: string;
	createdByExtension: boolean;
	resumed: boolean;
	/** attached through opensandbox.sandboxId: at shutdown only disconnected (its record forgotten) */
	connected: boolean;
	/** existed before the session under a pinned name: left as it is at shutdown */
	adopted: boolean;
	lifecycle: Lifecycle;
	/** pisb's events since the last ready/released */
	events: unknown[];
	/** opensandbox: renewal every min(TTL/2, 1 h) while the session lives */
	renewal?: Renewal;
	/** lifecycle remove: a host process that destroys the sandbox if Pi dies without shutdown */
	watchdog?: ChildProcess;
	/** set once pisb says the sandbox no longer exists */
	gone?: boolean;
}

interface Renewal {
	timer?: NodeJS.Timeout;
	pending?: Promise<void>;
	stopped: boolean;
}

// ---------------------------------------------------------------- helpers

function envList(value: string | undefined): string[] | undefined {
	if (value === undefined) return undefined;
	return value.split(/[\s,]+/).filter(Boolean);
}

function lifecycleOf(value: string | undefined): Lifecycle | undefined {
	switch (value) {
		case "remove":
		case "kill":
			return "remove";
		case "stop":
		case "pause":
			return "stop";
		case "keep":
		case "none":
			return "keep";
		default:
			return undefined;
	}
}

function slug(s: string): string {
	const t = s
		.toLowerCase()
		.replace(/[^a-z0-9]+/g, "-")
		.replace(/^-+|-+$/g, "")
		.slice(0, 20)
		.replace(/-+$/, "");
	return t || "project";
}

function signalNumber(sig: NodeJS.Signals | null): number {
	const n = sig ? (osConstants.signals as Record<string, number>)[sig] : undefined;
	return n ?? 9;
}

function killGroup(child: ChildProcess, sig: NodeJS.Signals): void {
	if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
	try {
		process.kill(-child.pid, sig);
	} catch {
		try {
			child.kill(sig);
		} catch {}
	}
}

function imageMime(buf: Buffer): string | undefined {
	if (buf.length >= 8 && buf.readUInt32BE(0) === 0x89504e47) return "image/png";
	if (buf.length >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return "image/jpeg";
	if (buf.length >= 6 && buf.subarray(0, 4).toString("latin1") === "GIF8") return "image/gif";
	if (buf.length >= 12 && buf.subarray(0, 4).toString("latin1") === "RIFF" && buf.subarray(8, 12).toString("latin1") === "WEBP")
		return "image/webp";
	return undefined;
}

function fsError(code: string, message: string): Error {
	const err = new Error(message) as NodeJS.ErrnoException;
	err.code = code;
	return err;
}

// ---------------------------------------------------------------- extension

export function createPisbExtension(options: PisbExtensionOptions = {}) {
	return function pisbExtension(pi: ExtensionAPI): void {
		const bin = options.bin ?? process.env.PISB_BIN ?? "pisb";
		const stateDir = options.stateDir;
		const opTimeoutMs = options.opTimeoutMs ?? 120_000;
		const envAllowlist = options.envAllowlist ?? envList(process.env.PISB_ENV_ALLOWLIST) ?? DEFAULT_ENV_ALLOWLIST;
		const globalArgs = stateDir ? ["--state-dir", stateDir] : [];
		/** full-output files Pi wrote on the host for truncated bash output: read may open exactly these */
		const hostOutputFiles = new Set<string>();

		let sandbox: Sandbox | undefined;
		let starting: Promise<Sandbox> | undefined;
		let sessionCwd = process.cwd();
		let lastError: string | undefined;
		let sweeping: Promise<void> | undefined;
		/** "bash" once `pisb exec --help` offers --bash (learnt at session start) */
		let shell: keyof typeof SHELL_OPTIONS = "sh";
		/** the session's context, for warnings that arrive outside any call (renewal) */
		let uiCtx: ExtensionContext | undefined;

		// ------------------------------------------------------------ pisb calls

		function run(
			args: string[],
			opts: { input?: string | Buffer; timeoutMs?: number; signal?: AbortSignal; events?: unknown[] } = {},
		): Promise<RunResult> {
			return new Promise((resolve, reject) => {
				let child: ChildProcess;
				const stdio: any[] = [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"];
				// lifecycle verbs report events as JSON lines on an extra pipe
				if (opts.events) stdio.push("pipe");
				try {
					child = spawn(bin, [...globalArgs, ...args, ...(opts.events ? ["--events-fd", "3"] : [])], {
						stdio,
						detached: true,
					});
				} catch (e: any) {
					reject(new SandboxUnavailableError(`cannot run pisb ('${bin}'): ${e?.message ?? e}`));
					return;
				}
				const out: Buffer[] = [];
				let err = "";
				let timer: NodeJS.Timeout | undefined;
				let timedOut = false;
				let aborted = false;
				const onAbort = () => {
					aborted = true;
					killGroup(child, "SIGTERM");
				};
				if (opts.timeoutMs)
					timer = setTimeout(() => {
						timedOut = true;
						killGroup(child, "SIGKILL");
					}, opts.timeoutMs);
				if (opts.signal) {
					if (opts.signal.aborted) onAbort();
					else opts.signal.addEventListener("abort", onAbort, { once: true });
				}
				child.stdout!.on("data", (c: Buffer) => out.push(c));
				child.stderr!.on("data", (c: Buffer) => {
					if (err.length < 65536) err += c.toString("utf8");
				});
				let evText = "";
				(child.stdio[3] as NodeJS.ReadableStream | undefined)?.on("data", (c: Buffer) => {
					evText += c.toString("utf8");
				});
				child.on("error", (e: NodeJS.ErrnoException) => {
					if (timer) clearTimeout(timer);
					opts.signal?.removeEventListener("abort", onAbort);
					reject(
						new SandboxUnavailableError(
							e.code === "ENOENT"
								? `pisb not found ('${bin}'): install pisb or set PISB_BIN`
								: `cannot run pisb ('${bin}'): ${e.message}`,
						),
					);
				});
				child.on("close", (code, sig) => {
					if (timer) clearTimeout(timer);
					opts.signal?.removeEventListener("abort", onAbort);
					if (aborted) return reject(new Error("Operation aborted"));
					if (timedOut) return reject(new Error(`pisb ${args[0]} timed out after ${opts.timeoutMs} ms`));
					for (const line of evText.split("\n")) {
						if (!line.trim()) continue;
						try {
							opts.events!.push(JSON.parse(line));
						} catch {}
					}
					resolve({ code: code ?? 128 + signalNumber(sig), stdout: Buffer.concat(out), stderr: err.trim() });
				});
				if (opts.input !== undefined) {
					child.stdin!.on("error", () => {});
					child.stdin!.end(opts.input);
				}
			});
		}

		function describe(r: RunResult, what: string): string {
			return r.stderr ? `${what}: ${r.stderr.replace(/^pisb[^:]*:\s*/, "")}` : `${what}: pisb exited with status ${r.code}`;
		}

		/** exit status 5 means the backend is unavailable: fail closed with a clear message */
		function failure(r: RunResult, what: string, name?: string): Error {
			if (r.code === 5 || r.code === 125)
				return new SandboxUnavailableError(
					`sandbox${name ? ` '${name}'` : ""} is unavailable (${describe(r, what)}); nothing was run on the host`,
				);
			return new Error(describe(r, what));
		}

		/** a failed call on the session's sandbox: "gone" if pisb no longer has it, else failure() */
		async function failed(sb: Sandbox, r: RunResult, what: string): Promise<Error> {
			if (r.code === 3 || r.code === 5 || r.code === 125) await checkGone(sb);
			return failure(r, what, sb.name);
		}

		async function inspect(name: string): Promise<any | undefined> {
			const r = await run(["inspect", name, "--json"], { timeoutMs: opTimeoutMs });
			if (r.code === 3) return undefined;
			if (r.code !== 0) throw failure(r, `inspect '${name}'`, name);
			try {
				return JSON.parse(r.stdout.toString("utf8"));
			} catch {
				throw new SandboxUnavailableError(`pisb inspect '${name}' printed no JSON`);
			}
		}

		// ------------------------------------------------------------ lifecycle

		function projectRoot(cwd: string): string {
			try {
				return realpathSync(cwd);
			} catch {
				return path.resolve(cwd);
			}
		}

		/** what marks a sandbox as created from this project (metadata pisb.pi/project) */
		function projectKey(cwd: string): string {
			return createHash("sha256").update(projectRoot(cwd)).digest("hex").slice(0, 16);
		}

		async function privateTemp<T>(fn: (dir: string) => Promise<T>): Promise<T> {
			const dir = await fsp.mkdtemp(path.join(tmpdir(), "pisb-pi-"));
			try {
				return await fn(dir);
			} finally {
				await fsp.rm(dir, { recursive: true, force: true });
			}
		}

		/**
		 * pisb's normalised view of a sandbox.yaml (`pisb validate --json`): the
		 * extension never parses YAML itself. `quiet` keeps pisb's message out of
		 * the error (a file the model named: its content is never echoed).
		 */
		async function validate(file: string, quiet = false): Promise<any> {
			const r = await run(["validate", "--json", "-f", file], { timeoutMs: opTimeoutMs });
			let cfg: any;
			try {
				cfg = JSON.parse(r.stdout.toString("utf8"));
			} catch {}
			if (r.code !== 0 || !cfg || typeof cfg !== "object" || Array.isArray(cfg)) {
				if (quiet) refuse(`config '${path.basename(file)}' is not a valid sandbox.yaml ('pisb validate -f FILE' on the host says why)`);
				throw new SandboxUnavailableError(describe(r, `invalid configuration '${file}'`));
			}
			return cfg;
		}

		/** the session's configuration: file name (if any) and pisb's normalised form */
		async function sessionConfig(cwd: string): Promise<{ file?: string; cfg: any }> {
			if (options.config !== undefined) {
				const text = typeof options.config === "string" ? options.config : JSON.stringify(options.config);
				return privateTemp(async (dir) => {
					const file = path.join(dir, "sandbox.yaml");
					await fsp.writeFile(file, text, { mode: 0o600 });
					return { cfg: await validate(file) };
				});
			}
			const explicit = options.configFile ?? process.env.PISB_CONFIG;
			const file = explicit ?? path.join(cwd, ".pi", "sandbox.yaml");
			try {
				await fsp.access(file, fsConstants.R_OK);
			} catch (e: any) {
				if (explicit) throw new SandboxUnavailableError(`cannot read ${file}: ${e.message}`);
				return { cfg: { version: 1, metadata: {} } };
			}
			return { file, cfg: await validate(file) };
		}

		/** the policy: option, PISB_LIFECYCLE, the config's (opensandbox.lifecycle.onSessionShutdown, sbx.teardown), else remove */
		function policyOf(cfg: any): Lifecycle {
			return (
				lifecycleOf(options.lifecycle) ??
				lifecycleOf(process.env.PISB_LIFECYCLE) ??
				(cfg?.driver === "opensandbox" ? lifecycleOf(cfg?.opensandbox?.lifecycle?.onSessionShutdown) : undefined) ??
				(cfg?.driver === "sbx" ? lifecycleOf(cfg?.sbx?.teardown) : undefined) ??
				"remove"
			);
		}

		/** runs `pisb create NAME -f <cfg + markers>`: the normalised config, with this project's metadata added */
		async function createFrom(
			cfg: any,
			name: string,
			role: "session" | "tool",
			cwd: string,
			extra: string[],
			runOpts: { timeoutMs?: number; events?: unknown[]; signal?: AbortSignal } = {},
		): Promise<RunResult> {
			const marked = { ...cfg, metadata: { ...(cfg?.metadata ?? {}), [META_PROJECT]: projectKey(cwd), [META_ROLE]: role } };
			return privateTemp(async (dir) => {
				const file = path.join(dir, "sandbox.json");
				await fsp.writeFile(file, JSON.stringify(marked), { mode: 0o600 });
				return run(["create", name, "-f", file, ...extra], { timeoutMs: 1_800_000, ...runOpts });
			});
		}

		async function emit(ev: SandboxEvent, ctx?: ExtensionContext): Promise<void> {
			try {
				pi.events?.emit("pisb:sandbox", ev);
			} catch {}
			if (ev.phase === "ready") ctx?.ui?.setStatus?.(STATUS_KEY, `sandbox ${ev.name}${ev.driver ? ` (${ev.driver})` : ""}`);
			else ctx?.ui?.setStatus?.(STATUS_KEY, undefined);
			// a throw on ready is the caller's to handle (the seed: clean up, no sandbox)
			if (ev.phase === "ready") await options.onSandboxEvent?.(ev);
			else
				try {
					await options.onSandboxEvent?.(ev);
				} catch {}
		}

		function eventOf(sb: Sandbox, phase: SandboxEvent["phase"]): SandboxEvent {
			return {
				phase,
				sandboxId: sb.backendId,
				name: sb.name,
				driver: sb.driver,
				workspace: sb.workspace,
				createdByExtension: sb.createdByExtension,
				resumed: sb.resumed,
				pisbEvents: sb.events.splice(0),
			};
		}

		async function startSandbox(cwd: string, ctx?: ExtensionContext): Promise<Sandbox> {
			const { file, cfg } = await sessionConfig(cwd);
			const lifecycle = policyOf(cfg);
			const push = options.push ?? ["1", "true", "yes"].includes((process.env.PISB_PUSH ?? "").toLowerCase());
			const pinned = options.name ?? process.env.PISB_SANDBOX;
			const remoteId = cfg?.opensandbox?.sandboxId;
			let name: string;
			if (pinned) name = pinned;
			else {
				const real = projectRoot(cwd);
				const hash = createHash("sha256").update(real).digest("hex").slice(0, 6);
				name = `pi-${slug(path.basename(real))}-${hash}`;
				// a sandbox removed at shutdown belongs to this session alone
				if (lifecycle === "remove") name += `-${randomBytes(2).toString("hex")}`;
			}
			if (!NAME_RE.test(name)) throw new SandboxUnavailableError(`invalid sandbox name '${name}'`);

			const events: unknown[] = [];
			const sessionId = ctx?.sessionManager?.getSessionId?.();
			let createdByExtension = false;
			let resumed = false;
			let connected = false;
			let adopted = false;
			let info = await inspect(name);
			if (!info) {
				if (remoteId) {
					if (!file) throw new SandboxUnavailableError("connect needs a configuration file");
					// no --owner-pid: a connected sandbox is never the session's to reclaim
					const args = ["connect", name, "-f", file];
					if (sessionId) args.push("--session-id", sessionId);
					const r = await run(args, { timeoutMs: 600_000, events });
					if (r.code !== 0) throw failure(r, `connect '${name}'`, name);
					connected = true;
				} else {
					const extra: string[] = [];
					if (lifecycle === "remove") extra.push("--owner-pid", String(process.pid));
					if (sessionId) extra.push("--session-id", sessionId);
					ctx?.ui?.setStatus?.(STATUS_KEY, `creating sandbox ${name}…`);
					const r = await createFrom(cfg, name, "session", cwd, extra, { events });
					if (r.code === 4 && pinned) adopted = true; // someone else created it meanwhile
					else if (r.code !== 0) throw failure(r, `create '${name}'`, name);
					else createdByExtension = true;
				}
				info = await inspect(name);
				if (!info) throw new SandboxUnavailableError(`sandbox '${name}' vanished after it was created`);
			} else if (pinned) {
				adopted = true;
			}
			if (info.status !== "running") {
				if (info.status === "unavailable" || info.status === "gone")
					throw new SandboxUnavailableError(`sandbox '${name}' is ${info.status}`);
				const r = await run(["start", name], { timeoutMs: 600_000 });
				if (r.code !== 0) throw failure(r, `start '${name}'`, name);
				resumed = true;
				info = (await inspect(name)) ?? info;
				if (info.status !== "running")
					throw new SandboxUnavailableError(`sandbox '${name}' is ${info.status} after start`);
			}
			const sb: Sandbox = {
				name,
				backendId: typeof info.remote?.sandboxId === "string" ? info.remote.sandboxId : name,
				driver: info.driver,
				workspace: typeof info.workspace === "string" && info.workspace.startsWith("/") ? info.workspace : "/workspace",
				createdByExtension,
				resumed,
				connected,
				adopted,
				lifecycle,
				events,
			};
			try {
				// if Pi dies without a shutdown, the same teardown: destroy (remove), stop
				// (stop; a connected sandbox: disconnect); nothing for keep and adopted ones
				const verb = connected
					? ["stop", name]
					: !createdByExtension || lifecycle === "keep"
						? undefined
						: lifecycle === "remove"
							? ["destroy", name, "--confirm", name]
							: ["stop", name];
				if (verb) sb.watchdog = armWatchdog(verb);
				if (push && createdByExtension) {
					const r = await run(["push", name, cwd, "--to", sb.workspace], { timeoutMs: 1_800_000 });
					if (r.code !== 0) throw failure(r, `push '${cwd}' into '${name}'`, name);
				}
				if (sb.driver === "opensandbox") {
					const ttl = Number(info.config?.opensandbox?.timeoutSeconds ?? cfg?.opensandbox?.timeoutSeconds ?? 3600);
					// a reused (resumed) sandbox is renewed once before its timer starts; connect renews itself
					if (resumed) await renewOnce(name);
					sb.renewal = startRenewal(name, ttl);
				}
			} catch (e) {
				await cleanUp(sb);
				throw e;
			}
			return sb;
		}

		/**
		 * A detached host process holding the read end of a pipe whose write end
		 * only Pi holds: when Pi dies, even by SIGKILL, read returns and the
		 * policy's pisb verb runs. At shutdown it is ended first. Its argv is
		 * the extension's own, never the model's.
		 */
		function armWatchdog(verb: string[]): ChildProcess | undefined {
			try {
				const child = spawn(
					"/bin/sh",
					["-c", 'read -r _ || :; exec "$@"', "pisb-pi-watchdog", bin, ...globalArgs, "-q", ...verb],
					{ stdio: ["pipe", "ignore", "ignore"], detached: true },
				);
				child.on("error", () => {});
				child.stdin!.on("error", () => {});
				(child.stdin as any)?.unref?.();
				child.unref();
				return child;
			} catch {
				return undefined;
			}
		}

		function disarmWatchdog(sb: Sandbox): void {
			const w = sb.watchdog;
			sb.watchdog = undefined;
			if (w?.pid && w.exitCode === null && w.signalCode === null)
				try {
					process.kill(w.pid, "SIGKILL");
				} catch {}
		}

		/** `pisb renew NAME`: that sandbox, now, under its own lock (one roster with cron and --watch) */
		async function renewOnce(name: string): Promise<void> {
			const r = await run(["renew", name], { timeoutMs: opTimeoutMs }).catch((e) => ({ code: 1, stderr: String(e?.message ?? e) }) as any);
			if (r.code === 0) return;
			const msg = `pisb: renewal of '${name}' failed (tried again at the next interval): ${r.stderr || `status ${r.code}`}`;
			// the terminal UI owns the screen: a warning there, stderr otherwise
			if (uiCtx?.hasUI) uiCtx.ui?.notify?.(msg, "warning");
			else console.error(`warning: ${msg}`);
		}

		/** every min(TTL/2, 1 h); the next request is scheduled only once the last one is done */
		function startRenewal(name: string, ttlSeconds: number): Renewal {
			const every = Math.max(1000, Math.min((ttlSeconds > 0 ? ttlSeconds : 3600) * 500, 3_600_000));
			const rn: Renewal = { stopped: false };
			const schedule = () => {
				if (rn.stopped) return;
				rn.timer = setTimeout(() => {
					rn.timer = undefined;
					rn.pending = renewOnce(name).finally(() => {
						rn.pending = undefined;
						schedule();
					});
				}, every);
				rn.timer.unref?.();
			};
			schedule();
			return rn;
		}

		/** stops renewal and waits for a request in flight */
		async function stopRenewal(sb: Sandbox): Promise<void> {
			const rn = sb.renewal;
			if (!rn) return;
			rn.stopped = true;
			if (rn.timer) clearTimeout(rn.timer);
			await rn.pending;
		}

		/** the seed's cleanup: kill a sandbox the extension created, disconnect one it connected to */
		async function cleanUp(sb: Sandbox): Promise<void> {
			await stopRenewal(sb);
			disarmWatchdog(sb);
			if (sb.createdByExtension || sb.connected)
				await run(["destroy", sb.name, "--confirm", sb.name], { timeoutMs: opTimeoutMs }).catch(() => undefined);
		}

		/**
		 * Once per session (session_start): the sandbox, or the error that leaves
		 * the session without one. Tools await the same promise.
		 */
		function ensure(ctx?: ExtensionContext): Promise<Sandbox> {
			if (sandbox) {
				if (sandbox.gone) return Promise.reject(goneError(sandbox.name));
				return Promise.resolve(sandbox);
			}
			const key = `${bin}\0${ctx?.cwd ?? sessionCwd}`;
			const adopted = handoff.get(key) as Sandbox | undefined;
			if (adopted && !starting) {
				handoff.delete(key);
				sandbox = adopted;
				return Promise.resolve(adopted);
			}
			if (!starting) {
				const cwd = ctx?.cwd ?? sessionCwd;
				starting = startSandbox(cwd, ctx).then(
					async (sb) => {
						try {
							await emit(eventOf(sb, "ready"), ctx);
						} catch (e: any) {
							await cleanUp(sb);
							throw new SandboxUnavailableError(`the sandbox ready callback failed (${e?.message ?? e}); the sandbox was cleaned up`);
						}
						sandbox = sb;
						lastError = undefined;
						return sb;
					},
				);
				starting = starting.catch((e) => {
					// the session stays without a sandbox; /sandbox recreate tries again
					lastError = e?.message ?? String(e);
					ctx?.ui?.setStatus?.(STATUS_KEY, "sandbox unavailable");
					const said = /nothing was run on the host$/.test(lastError ?? "");
					throw new SandboxUnavailableError(
						`pisb sandbox unavailable: ${lastError}${said ? "" : "; nothing was run on the host"} (/sandbox recreate tries again)`,
					);
				});
			}
			return starting;
		}

		async function release(ctx?: ExtensionContext, reason?: string): Promise<void> {
			const pending = starting;
			starting = undefined;
			if (!sandbox && pending) await pending.catch(() => undefined);
			await sweeping;
			const sb = sandbox;
			sandbox = undefined;
			if (reason && reason !== "quit") {
				// the process goes on with a new session: the next instance adopts the sandbox
				if (sb && !sb.gone) handoff.set(`${bin}\0${ctx?.cwd ?? sessionCwd}`, sb);
				return;
			}
			if (sb) await applyPolicy(sb, ctx);
			// sandboxes handed over but never adopted (a session resumed elsewhere)
			for (const [key, other] of [...handoff]) {
				if (!key.startsWith(`${bin}\0`)) continue;
				handoff.delete(key);
				await applyPolicy(other as Sandbox, ctx);
			}
		}

		/** one pisb verb per policy: destroy (kill), stop (pause); a connected sandbox is disconnected (its record forgotten) */
		async function applyPolicy(sb: Sandbox, ctx?: ExtensionContext): Promise<void> {
			await stopRenewal(sb);
			disarmWatchdog(sb);
			let pisbMode: SandboxEvent["pisbMode"] = "kept";
			let mode: SeedMode = SEED_MODE[sb.lifecycle];
			const events = sb.events;
			if (sb.gone) pisbMode = "removed";
			else if (sb.connected) {
				mode = "keep";
				const r = await run(["stop", sb.name], { timeoutMs: opTimeoutMs, events }).catch(() => undefined);
				pisbMode = r?.code === 0 ? "disconnected" : "kept";
			} else if (sb.adopted) {
				mode = "keep";
				pisbMode = "disconnected";
			} else if (sb.lifecycle === "remove") {
				const r = await run(["destroy", sb.name, "--confirm", sb.name], { timeoutMs: opTimeoutMs, events }).catch(
					() => undefined,
				);
				pisbMode = r?.code === 0 ? "removed" : "kept";
			} else if (sb.lifecycle === "stop") {
				const r = await run(["stop", sb.name], { timeoutMs: opTimeoutMs, events }).catch(() => undefined);
				pisbMode = r?.code === 0 ? "stopped" : "kept";
			}
			await emit({ ...eventOf(sb, "released"), mode, pisbMode }, ctx);
		}

		/**
		 * The docker seed's sweep, at session start: this user's session
		 * sandboxes (metadata pisb.pi/role session, in this state directory)
		 * that are stopped and either have a dead owner (a Pi that died, --owner-pid)
		 * or have been stopped for more than gcHours, are destroyed. pisb decides
		 * both (`pisb gc --dry-run --json`); nothing else gc would clean is
		 * touched. Running sandboxes and sandboxes not made by a Pi session are
		 * never touched.
		 */
		async function sweep(): Promise<void> {
			const hours = options.gcHours ?? Number(process.env.PISB_GC_HOURS ?? 24);
			const args = ["gc", "--dry-run", "--json"];
			if (Number.isInteger(hours) && hours > 0) args.push("--hours", String(hours));
			const r = await run(args, { timeoutMs: opTimeoutMs }).catch(() => undefined);
			let report: any;
			try {
				report = JSON.parse(r?.stdout.toString("utf8") ?? "");
			} catch {
				return;
			}
			const candidates = [
				...(report?.removed ?? []),
				// a remote sandbox whose owner is gone is left by gc to its driver
				...(report?.kept ?? []).filter((k: any) => /^owner pid \d+ is gone/.test(String(k?.reason ?? ""))),
			];
			for (const item of candidates) {
				if (item?.kind !== "sandbox" || typeof item.name !== "string" || !NAME_RE.test(item.name)) continue;
				if (item.name === sandbox?.name) continue;
				const info = await inspect(item.name).catch(() => undefined);
				if (info?.status !== "stopped" || info?.config?.metadata?.[META_ROLE] !== "session") continue;
				await run(["-q", "destroy", item.name, "--confirm", item.name], { timeoutMs: opTimeoutMs }).catch(() => undefined);
			}
		}

		function goneError(name: string): SandboxUnavailableError {
			return new SandboxUnavailableError(
				`sandbox '${name}' is gone (it was destroyed); nothing was run on the host. ` +
					"Run /sandbox recreate for a new sandbox, or restart Pi",
			);
		}

		/** after a failed call: if pisb no longer knows the sandbox, say so (and remember it) */
		async function checkGone(sb: Sandbox): Promise<void> {
			if (sb.gone) throw goneError(sb.name);
			const r = await run(["inspect", sb.name, "--json"], { timeoutMs: opTimeoutMs }).catch(() => undefined);
			let info: any;
			try {
				info = r && r.code === 0 ? JSON.parse(r.stdout.toString("utf8")) : undefined;
			} catch {}
			if (r?.code === 3 || info?.status === "gone") {
				sb.gone = true;
				await stopRenewal(sb);
				disarmWatchdog(sb);
				throw goneError(sb.name);
			}
		}

		// ------------------------------------------------------------ paths

		function hostRoots(cwd: string): string[] {
			const roots = [path.resolve(cwd)];
			try {
				const real = realpathSync(cwd);
				if (real !== roots[0]) roots.push(real);
			} catch {}
			return roots;
		}

		/**
		 * host path -> sandbox path. The host cwd maps to the workspace; any other
		 * absolute path (e.g. /workspace/x that the model saw in command output) is
		 * already a sandbox path and is used as is: no host file is ever opened.
		 */
		function toGuest(sb: Sandbox, cwd: string, p: string): string {
			const abs = path.posix.resolve("/", p);
			for (const root of hostRoots(cwd)) {
				if (abs === root) return sb.workspace;
				const prefix = root.endsWith("/") ? root : `${root}/`;
				if (abs.startsWith(prefix)) return path.posix.join(sb.workspace, abs.slice(prefix.length));
			}
			return abs;
		}

		function sandboxEnv(env: NodeJS.ProcessEnv | undefined): string[] {
			const args: string[] = [];
			if (!env) return args;
			for (const [k, v] of Object.entries(env)) {
				if (v === undefined || !ENV_KEY_RE.test(k)) continue;
				const allowed = envAllowlist.includes(k) || (k.startsWith("PI_") && !SECRET_KEY_RE.test(k));
				if (allowed) args.push("--env", `${k}=${v}`);
			}
			return args;
		}

		function noteOutputFile(text: string | undefined): void {
			if (!text) return;
			const re = /Full output: (\S+\/pi-bash-[0-9a-f]+\.log)/g;
			for (let m = re.exec(text); m; m = re.exec(text)) if (path.dirname(m[1]) === tmpdir()) hostOutputFiles.add(m[1]);
		}

		// ------------------------------------------------------------ operations

		function bashOps(ctx?: ExtensionContext): BashOperations {
			return {
				exec: async (command, cwd, { onData, signal, timeout, env }) => {
					const sb = await ensure(ctx);
					const args = ["exec", sb.name, "--cwd", toGuest(sb, cwd, cwd), ...sandboxEnv(env), SHELL_OPTIONS[shell], command];
					return new Promise((resolve, reject) => {
						if (signal?.aborted) return reject(new Error("aborted"));
						let child: ChildProcess;
						try {
							child = spawn(bin, [...globalArgs, ...args], { stdio: ["ignore", "pipe", "pipe"], detached: true });
						} catch (e: any) {
							return reject(new SandboxUnavailableError(`cannot run pisb ('${bin}'): ${e?.message ?? e}`));
						}
						let timedOut = false;
						let aborted = false;
						let stderrTail = "";
						let escalate: NodeJS.Timeout | undefined;
						// pisb forwards TERM to the sandboxed process group; if pisb itself
						// does not go, KILL it, and pisb's death takes the group with it.
						const stop = () => {
							killGroup(child, "SIGTERM");
							escalate ??= setTimeout(() => killGroup(child, "SIGKILL"), 3000);
						};
						const timer =
							timeout !== undefined && timeout > 0
								? setTimeout(() => {
										timedOut = true;
										stop();
									}, timeout * 1000)
								: undefined;
						const onAbort = () => {
							aborted = true;
							stop();
						};
						signal?.addEventListener("abort", onAbort, { once: true });
						child.stdout!.on("data", onData);
						child.stderr!.on("data", (c: Buffer) => {
							stderrTail = (stderrTail + c.toString("utf8")).slice(-2000);
							onData(c);
						});
						child.on("error", (e: NodeJS.ErrnoException) => {
							if (timer) clearTimeout(timer);
							signal?.removeEventListener("abort", onAbort);
							reject(
								new SandboxUnavailableError(
									e.code === "ENOENT" ? `pisb not found ('${bin}'): install pisb or set PISB_BIN` : e.message,
								),
							);
						});
						child.on("close", async (code, sig) => {
							if (timer) clearTimeout(timer);
							if (escalate) clearTimeout(escalate);
							signal?.removeEventListener("abort", onAbort);
							if (aborted) return reject(new Error("aborted"));
							if (timedOut) return reject(new Error(`timeout:${timeout}`));
							const exitCode = code ?? 128 + signalNumber(sig);
							// 3 with pisb's own "no such sandbox": the sandbox was destroyed
							if (exitCode === 3 && stderrTail.includes(`no such sandbox '${sb.name}'`)) {
								const gone = await checkGone(sb).then(
									() => undefined,
									(e) => e,
								);
								if (gone) return reject(gone);
							}
							// 125 is pisb's own failure; 5 may be either pisb or the command: ask
							if (exitCode === 125 || exitCode === 5) {
								const info = await inspect(sb.name).catch(() => undefined);
								if (exitCode === 125 || !info || info.status !== "running")
									return reject(
										new SandboxUnavailableError(
											`sandbox '${sb.name}' is ${info?.status ?? "unavailable"}` +
												`${stderrTail.trim() ? ` (${stderrTail.trim().split("\n").pop()})` : ""}; nothing was run on the host`,
										),
									);
							}
							resolve({ exitCode });
						});
					});
				},
			};
		}

		/** reads through one pisb call per file, cached for the duration of one tool call */
		function fileReader(ctx: ExtensionContext | undefined) {
			const cache = new Map<string, Buffer>();
			const cwd = ctx?.cwd ?? sessionCwd;
			return async (p: string, verb: string): Promise<Buffer> => {
				const hit = cache.get(p);
				if (hit) return hit;
				if (hostOutputFiles.has(p)) {
					const fh = await fsp.open(p, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
					try {
						const buf = await fh.readFile();
						cache.set(p, buf);
						return buf;
					} finally {
						await fh.close();
					}
				}
				const sb = await ensure(ctx);
				const guest = toGuest(sb, cwd, p);
				const r = await run(["read", "--raw", "--", sb.name, guest], { timeoutMs: opTimeoutMs });
				if (r.code === 3) {
					await checkGone(sb);
					throw fsError("ENOENT", `ENOENT: no such file or directory in sandbox, ${verb} '${guest}'`);
				}
				if (r.code === 1 && /director/i.test(r.stderr))
					throw fsError("EISDIR", `EISDIR: illegal operation on a directory, read '${guest}'`);
				if (r.code !== 0) throw await failed(sb, r, `read '${guest}'`);
				cache.set(p, r.stdout);
				return r.stdout;
			};
		}

		async function writeFile(ctx: ExtensionContext | undefined, p: string, content: string): Promise<void> {
			const sb = await ensure(ctx);
			const guest = toGuest(sb, ctx?.cwd ?? sessionCwd, p);
			const r = await run(["write", "--mkdir", "--", sb.name, guest], { input: content, timeoutMs: opTimeoutMs });
			if (r.code !== 0) throw await failed(sb, r, `write '${guest}'`);
		}

		function readOps(ctx?: ExtensionContext) {
			const read = fileReader(ctx);
			return {
				access: async (p: string) => {
					await read(p, "access");
				},
				readFile: (p: string) => read(p, "open"),
				detectImageMimeType: async (p: string) => imageMime(await read(p, "open")),
			};
		}

		function writeOps(ctx?: ExtensionContext) {
			return {
				// write creates parent directories itself (--mkdir): one pisb call per write
				mkdir: async (_dir: string) => {},
				writeFile: (p: string, content: string) => writeFile(ctx, p, content),
			};
		}

		function editOps(ctx?: ExtensionContext) {
			const read = fileReader(ctx);
			return {
				access: async (p: string) => {
					await read(p, "access");
				},
				readFile: (p: string) => read(p, "open"),
				writeFile: (p: string, content: string) => writeFile(ctx, p, content),
			};
		}

		/** one `pisb ls` per tool call; the per-entry stat calls of Pi's ls are answered from it */
		function lsOps(ctx?: ExtensionContext) {
			const cwd = ctx?.cwd ?? sessionCwd;
			const dirs = new Map<string, { name: string; type: string }[]>();
			const notDirs = new Set<string>();
			const list = async (p: string): Promise<boolean> => {
				if (dirs.has(p) || notDirs.has(p)) return true;
				const sb = await ensure(ctx);
				const guest = toGuest(sb, cwd, p);
				const r = await run(["ls", "--json", "--", sb.name, guest], { timeoutMs: opTimeoutMs });
				if (r.code === 3) {
					await checkGone(sb);
					return false;
				}
				if (r.code === 1 && /director/i.test(r.stderr)) {
					notDirs.add(p);
					return true;
				}
				if (r.code !== 0) throw await failed(sb, r, `ls '${guest}'`);
				const parsed = JSON.parse(r.stdout.toString("utf8"));
				dirs.set(p, Array.isArray(parsed.entries) ? parsed.entries : []);
				return true;
			};
			const stat = async (p: string) => {
				if (dirs.has(p)) return { isDirectory: () => true };
				if (notDirs.has(p)) return { isDirectory: () => false };
				const entries = dirs.get(path.dirname(p));
				const entry = entries?.find((e) => e.name === path.basename(p));
				if (entry) return { isDirectory: () => entry.type === "dir" };
				if (!(await list(p))) throw fsError("ENOENT", `ENOENT: no such file or directory, stat '${p}'`);
				return stat(p);
			};
			return {
				exists: (p: string) => list(p),
				stat,
				readdir: async (p: string) => {
					if (!(await list(p)) || !dirs.has(p)) throw new Error(`not a directory: ${p}`);
					return dirs.get(p)!.map((e) => e.name);
				},
			};
		}

		function findOps(ctx?: ExtensionContext) {
			const cwd = ctx?.cwd ?? sessionCwd;
			return {
				// existence is learned from the one `pisb find` call below
				exists: () => true,
				glob: async (pattern: string, searchPath: string, o: { limit: number }) => {
					const sb = await ensure(ctx);
					const guest = toGuest(sb, cwd, searchPath);
					const r = await run(["find", "--json", "--path", guest, "--limit", String(o.limit), "--", sb.name, pattern], {
						timeoutMs: opTimeoutMs,
					});
					if (r.code === 3) {
						await checkGone(sb);
						throw new Error(`Path not found: ${searchPath}`);
					}
					if (r.code !== 0) throw await failed(sb, r, `find '${pattern}' in '${guest}'`);
					const parsed = JSON.parse(r.stdout.toString("utf8"));
					// relative to the search path as Pi named it, so Pi relativizes them back
					return (parsed.matches as string[]).map((m) => path.posix.join(searchPath, m));
				},
			};
		}

		// ------------------------------------------------------------ tools

		const hostCwdAtLoad = process.cwd();

		/** current Pi resolves against ctx.cwd, 0.73.1 against the factory cwd: give both the host cwd */
		function cwdOf(ctx?: ExtensionContext): string {
			return ctx?.cwd ?? sessionCwd;
		}

		const bashDef = createBashToolDefinition(hostCwdAtLoad);
		pi.registerTool({
			...bashDef,
			async execute(id: string, params: any, signal: AbortSignal | undefined, onUpdate: any, ctx: ExtensionContext) {
				const inner = createBashToolDefinition(cwdOf(ctx), { operations: bashOps(ctx) });
				try {
					const result: any = await inner.execute(id, params, signal, onUpdate, ctx);
					noteOutputFile(result?.details?.fullOutputPath && `Full output: ${result.details.fullOutputPath}`);
					for (const c of result?.content ?? []) if (c?.type === "text") noteOutputFile(c.text);
					return result;
				} catch (e: any) {
					noteOutputFile(e?.message);
					throw e;
				}
			},
		} as any);

		const simple: [string, (cwd: string, o?: any) => any, (ctx?: ExtensionContext) => any][] = [
			["read", createReadToolDefinition, readOps],
			["write", createWriteToolDefinition, writeOps],
			["edit", createEditToolDefinition, editOps],
			["ls", createLsToolDefinition, lsOps],
			["find", createFindToolDefinition, findOps],
		];
		for (const [, factory, ops] of simple) {
			const def = factory(hostCwdAtLoad);
			pi.registerTool({
				...def,
				async execute(id: string, params: any, signal: AbortSignal | undefined, onUpdate: any, ctx: ExtensionContext) {
					await ensure(ctx);
					return factory(cwdOf(ctx), { operations: ops(ctx) }).execute(id, params, signal, onUpdate, ctx);
				},
			} as any);
		}

		// Pi's grep always runs the host's rg: search through `pisb grep` instead.
		const grepDef = createGrepToolDefinition(hostCwdAtLoad);
		pi.registerTool({
			...grepDef,
			async execute(_id: string, params: any, signal: AbortSignal | undefined, _onUpdate: any, ctx: ExtensionContext) {
				const { pattern, path: searchDir, glob, ignoreCase, literal, context, limit } = params;
				const sb = await ensure(ctx);
				const cwd = cwdOf(ctx);
				let dir = String(searchDir || ".").replace(/^@/, "");
				if (dir === "~" || dir.startsWith("~/")) dir = homedir() + dir.slice(1);
				const searchPath = path.resolve(cwd, dir);
				const guest = toGuest(sb, cwd, searchPath);
				const effectiveLimit = Math.max(1, Number(limit ?? 100));
				const ctxLines = context && context > 0 ? Math.floor(context) : 0;
				const args = ["grep", "--json", "--path", guest, "--limit", String(effectiveLimit)];
				if (glob) args.push("--glob", glob);
				if (ignoreCase) args.push("-i");
				if (literal) args.push("--literal");
				if (ctxLines) args.push("-C", String(ctxLines));
				args.push("--", sb.name, pattern);
				const r = await run(args, { timeoutMs: opTimeoutMs, signal });
				if (r.code === 3) {
					await checkGone(sb);
					throw new Error(`Path not found: ${searchPath}`);
				}
				if (r.code !== 0) throw await failed(sb, r, "grep");
				const res = JSON.parse(r.stdout.toString("utf8"));
				const matches: { path: string; line: number; text: string; kind: string }[] = res.matches ?? [];
				if (!matches.length || !res.matchCount)
					return { content: [{ type: "text", text: "No matches found" }], details: undefined };
				let linesTruncated = Boolean(res.linesTruncated);
				const lines = matches.map((m) => {
					const p = m.path && m.path !== "." ? m.path : path.basename(searchPath);
					const { text, wasTruncated } = truncateLine(String(m.text ?? "").replace(/\r/g, ""));
					if (wasTruncated) linesTruncated = true;
					return m.kind === "context" ? `${p}-${m.line}- ${text}` : `${p}:${m.line}: ${text}`;
				});
				const truncation = truncateHead(lines.join("\n"), { maxLines: Number.MAX_SAFE_INTEGER });
				let output = truncation.content;
				const details: Record<string, unknown> = {};
				const notices: string[] = [];
				if (res.limitReached) {
					notices.push(`${effectiveLimit} matches limit reached. Use limit=${effectiveLimit * 2} for more, or refine pattern`);
					details.matchLimitReached = effectiveLimit;
				}
				if (truncation.truncated) {
					notices.push(`${formatSize(DEFAULT_MAX_BYTES)} limit reached`);
					details.truncation = truncation;
				}
				if (linesTruncated) {
					notices.push("Some lines truncated to 500 chars. Use read tool to see full lines");
					details.linesTruncated = true;
				}
				if (notices.length) output += `\n\n[${notices.join(". ")}]`;
				return {
					content: [{ type: "text", text: output }],
					details: Object.keys(details).length ? details : undefined,
				};
			},
		} as any);

		// The sandbox tool: the seed's actions on sandboxes of this project, and
		// nothing of the host. See README "The sandbox tool".
		type Kind = "string" | "integer" | "boolean" | "string[]" | "env";
		const N = { name: "string" } as const;
		const TOOL_ACTIONS: Record<string, { summary: string; args: Record<string, Kind> }> = {
			list: { summary: "sandboxes this session may use (its own and those created from this project)", args: { templates: "boolean" } },
			create: { summary: "create a sandbox from a config file inside the project, or from a prepared template", args: { ...N, config: "string", template: "string" } },
			prepare: { summary: "run a config's setup and save the disk as template NAME", args: { ...N, config: "string" } },
			start: { summary: "start a stopped sandbox", args: { ...N } },
			stop: { summary: "stop services, checkpoint the disk", args: { ...N } },
			destroy: { summary: "remove a sandbox for good; confirm must repeat the name", args: { ...N, confirm: "string" } },
			inspect: { summary: "status, limits, ports, previews", args: { ...N } },
			exec: { summary: "run cmd (a shell string) or command (argv); waits timeoutMs (0-60000, default 10000), then returns a handle", args: { ...N, cmd: "string", command: "string[]", cwd: "string", env: "env", timeoutMs: "integer" } },
			"exec-status": { summary: "new output and status of a handle (pid)", args: { ...N, pid: "string", handle: "string", timeoutMs: "integer" } },
			"exec-kill": { summary: "end a handle's process group", args: { ...N, pid: "string", handle: "string" } },
			read: { summary: "a text file inside the sandbox (64 KiB cap)", args: { ...N, path: "string", offset: "integer", limit: "integer" } },
			write: { summary: "replace a file inside the sandbox with content", args: { ...N, path: "string", content: "string", mkdir: "boolean", mode: "string" } },
			logs: { summary: "the controller's or a service's log", args: { ...N, service: "string", lines: "integer" } },
			services: { summary: "op ensure|status|restart|stop|start|remove, optionally one service (start: an ad-hoc service from command)", args: { ...N, op: "string", service: "string", command: "string[]", port: "integer", preview: "boolean", title: "string", description: "string", timeoutMs: "integer" } },
			preview: { summary: "a preview URL for a guest port already listening", args: { ...N, port: "integer", title: "string", description: "string" } },
		};
		/** keys that would reach the host, with the reason given in the refusal */
		const HOST_KEYS: Record<string, string> = {
			onReady: "it runs a command on the host",
			from: "it reads a host file",
			file: "it opens a host file (use config, a path inside the project)",
			hostDir: "it names a host directory",
			all: "it copies host files",
			stateDir: "it selects a host state directory",
			ownerPid: "it names a host process",
			eventsFd: "it names a host file descriptor",
			oldFile: "it reads a host file",
			newFile: "it reads a host file",
			driver: "the driver comes from the config",
			raw: "reads are capped here",
		};
		const HOST_ACTIONS: Record<string, string> = {
			push: "it copies a host directory into a sandbox",
			pull: "it writes into a host directory",
			docker: "docker goes through the docker tools",
			shell: "it opens a terminal on the host (the user has /sandbox)",
			connect: "it attaches a sandbox from a host config",
			gc: "it removes sandboxes of other sessions",
			renew: "renewal is the session's own",
			doctor: "it inspects the host",
			validate: "configs are read only by create and prepare",
		};
		const SERVICE_OPS = ["ensure", "status", "restart", "stop", "start", "remove"];

		function toolHelp() {
			return {
				usage: 'input is "help" or one JSON action object, e.g. {"action":"list"}; name defaults to this session\'s sandbox',
				session: sandbox?.name ?? null,
				actions: Object.entries(TOOL_ACTIONS).map(([action, a]) => ({ action, summary: a.summary, args: a.args })),
			};
		}

		function refuse(msg: string): never {
			throw new Error(`sandbox tool: ${msg}; nothing was run`);
		}

		function checkArgs(action: string, req: Record<string, unknown>): void {
			const spec = TOOL_ACTIONS[action];
			for (const [k, v] of Object.entries(req)) {
				if (k === "action") continue;
				if (HOST_KEYS[k]) refuse(`'${k}' is not accepted: ${HOST_KEYS[k]}`);
				const kind = spec.args[k];
				if (!kind) refuse(`'${action}' has no argument '${k}' (arguments: ${Object.keys(spec.args).join(", ") || "none"})`);
				const ok =
					kind === "string"
						? typeof v === "string"
						: kind === "integer"
							? Number.isSafeInteger(v)
							: kind === "boolean"
								? typeof v === "boolean"
								: kind === "string[]"
									? Array.isArray(v) && v.every((x) => typeof x === "string")
									: v !== null &&
										typeof v === "object" &&
										!Array.isArray(v) &&
										Object.entries(v as object).every(([ek, ev]) => ENV_KEY_RE.test(ek) && typeof ev === "string");
				if (!ok) refuse(`'${k}' must be ${kind === "env" ? "an object of NAME: string" : `a ${kind}`}`);
			}
		}

		/** a config the model names: a regular file inside the project directory (after symlinks) */
		async function projectConfig(p: string, cwd: string): Promise<string> {
			const root = projectRoot(cwd);
			let real: string;
			try {
				real = await fsp.realpath(path.resolve(root, p));
			} catch {
				refuse(`config '${p}': no such file in the project directory`);
			}
			if (real !== root && !real.startsWith(`${root}/`)) refuse(`config '${p}' is outside the project directory`);
			const st = await fsp.stat(real);
			if (!st.isFile()) refuse(`config '${p}' is not a regular file`);
			return real;
		}

		/** the sandboxes the tool may touch: the session's own, and those whose metadata names this project */
		async function mayTouch(name: string, cwd: string): Promise<any | undefined> {
			if (name === sandbox?.name) return true;
			const info = await inspect(name).catch(() => undefined);
			if (info?.config?.metadata?.[META_PROJECT] === projectKey(cwd)) return info;
			return undefined;
		}

		async function action(json: Record<string, unknown>): Promise<any> {
			const r = await run(["action", JSON.stringify(json)], { timeoutMs: 180_000 });
			const text = r.stdout.toString("utf8").trim();
			let parsed: any;
			try {
				parsed = JSON.parse(text);
			} catch {}
			if (r.code !== 0 || parsed?.error) {
				const msg = parsed?.error?.message ?? (r.stderr || text || `pisb action exited with status ${r.code}`);
				throw new Error(parsed?.error?.code ? `${parsed.error.code}: ${msg}` : msg);
			}
			return parsed ?? {};
		}

		async function sandboxTool(input: string, ctx?: ExtensionContext): Promise<any> {
			const cwd = cwdOf(ctx);
			if (input === "" || input === "help" || input === "{}") return toolHelp();
			let req: any;
			try {
				req = JSON.parse(input);
			} catch {
				refuse('input must be "help" or one JSON object');
			}
			if (!req || typeof req !== "object" || Array.isArray(req)) refuse("input must be one JSON object");
			const act = req.action;
			if (typeof act !== "string") refuse("'action' is required");
			if (act === "help") return toolHelp();
			if (HOST_ACTIONS[act]) refuse(`action '${act}' is not available: ${HOST_ACTIONS[act]}`);
			if (!TOOL_ACTIONS[act]) refuse(`unknown action '${act}' (actions: ${Object.keys(TOOL_ACTIONS).join(", ")})`);
			checkArgs(act, req);

			if (act === "list") {
				if (req.templates) return action({ action: "list", templates: true });
				const all = await action({ action: "list" });
				const out: any[] = [];
				for (const s of Array.isArray(all) ? all : []) if (await mayTouch(s?.name, cwd)) out.push(s);
				return out;
			}

			let name: string | undefined = req.name;
			if (name === undefined && act !== "create" && act !== "prepare") name = (await ensure(ctx)).name;
			if (typeof name !== "string" || !NAME_RE.test(name)) refuse(`'name' must be a sandbox name (${NAME_RE.source})`);

			if (act === "create" || act === "prepare") {
				let cfg: any = { version: 1, metadata: {} };
				if (req.config !== undefined) cfg = await validate(await projectConfig(req.config, cwd), true);
				else if (act === "prepare") refuse("'prepare' needs config");
				if (cfg?.opensandbox?.sandboxId) refuse("a config with opensandbox.sandboxId attaches an existing sandbox; not available here");
				if (act === "prepare")
					return privateTemp(async (dir) => {
						const file = path.join(dir, "sandbox.json");
						await fsp.writeFile(file, JSON.stringify(cfg), { mode: 0o600 });
						return action({ action: "prepare", name, file });
					});
				const extra: string[] = [];
				if (req.template !== undefined) extra.push("--template", req.template);
				const sid = ctx?.sessionManager?.getSessionId?.();
				if (sid) extra.push("--session-id", sid);
				const r = await createFrom(cfg, name, "tool", cwd, ["--json", ...extra]);
				if (r.code !== 0) throw new Error(describe(r, `create '${name}'`));
				const info = await inspect(name);
				return info ?? { name, created: true };
			}

			if (!(await mayTouch(name, cwd)))
				refuse(`sandbox '${name}' is not this session's and was not created from this project`);
			switch (act) {
				case "start":
				case "stop":
				case "inspect":
					return action({ action: act, name });
				case "destroy":
					if (req.confirm !== name) refuse(`destroy needs confirm equal to the name ('${name}')`);
					return action({ action: "destroy", name, confirm: name });
				case "exec": {
					if ((req.cmd === undefined) === (req.command === undefined)) refuse("exec needs exactly one of cmd (a shell string) and command (argv)");
					const timeoutMs = req.timeoutMs ?? 10_000;
					if (timeoutMs < 0 || timeoutMs > 60_000) refuse("timeoutMs must be 0-60000");
					const j: Record<string, unknown> = { action: "exec", name, timeoutMs };
					if (req.cmd !== undefined) j[shell] = req.cmd;
					else j.command = req.command;
					if (req.cwd !== undefined) j.cwd = req.cwd;
					if (req.env !== undefined) j.env = req.env;
					return action(j);
				}
				case "exec-status":
				case "exec-kill": {
					const handle = req.pid ?? req.handle;
					if (typeof handle !== "string") refuse(`${act} needs pid (the handle exec returned)`);
					const j: Record<string, unknown> = { action: act, name, handle };
					if (req.timeoutMs !== undefined && act === "exec-status") j.timeoutMs = req.timeoutMs;
					return action(j);
				}
				case "read":
				case "write":
				case "logs": {
					if (act !== "logs" && typeof req.path !== "string") refuse(`${act} needs path`);
					if (act === "write" && typeof req.content !== "string") refuse("write needs content");
					return action({ ...req, action: act, name });
				}
				case "services": {
					const op = req.op ?? "status";
					if (!SERVICE_OPS.includes(op)) refuse(`op must be one of ${SERVICE_OPS.join(", ")}`);
					return action({ ...req, action: "svc", name, op });
				}
				case "preview": {
					if (!Number.isSafeInteger(req.port)) refuse("preview needs port");
					const j: Record<string, unknown> = { action: "svc", name, op: "preview", service: String(req.port) };
					if (req.title !== undefined) j.title = req.title;
					if (req.description !== undefined) j.description = req.description;
					return action(j);
				}
			}
			refuse(`unknown action '${act}'`);
		}

		pi.registerTool({
			name: "sandbox",
			label: "sandbox",
			description:
				'Manage this project\'s pisb sandboxes: list, create, start, stop, destroy, inspect, prepare, exec, exec-status, exec-kill, read, write, logs, services, preview. input is "help" for the arguments, or one JSON action object such as {"action":"list"}. name defaults to the session\'s own sandbox. Everything happens inside sandboxes: no host path or host command is accepted.',
			promptSnippet: "Manage this project's pisb sandboxes and their services through JSON actions",
			parameters: Type.Object({
				input: Type.String({ description: 'help, or one JSON action object, e.g. {"action":"list"}' }),
			}),
			async execute(_id: string, params: any, _signal: AbortSignal | undefined, _onUpdate: any, ctx: ExtensionContext) {
				const input = String(params?.input ?? "").trim();
				const result = await sandboxTool(input, ctx);
				return { content: [{ type: "text", text: JSON.stringify(result) }], details: result };
			},
		} as any);

		// ------------------------------------------------------------ user ! and !!

		pi.on("user_bash", (_event, ctx) => ({ operations: bashOps(ctx) }));

		// ------------------------------------------------------------ /sandbox

		pi.registerCommand("sandbox", {
			description:
				"Open a terminal in a sandbox: /sandbox [NAME [USER]] (default: this session's sandbox); /sandbox recreate: a new sandbox for this session",
			handler: async (argText: string, ctx: any) => {
				const words = String(argText ?? "").trim().split(/\s+/).filter(Boolean);
				if (words[0] === "recreate" && words.length === 1) {
					// the session's sandbox is gone or never came up: make (or start) one again
					const old = sandbox;
					if (old && !old.gone) {
						ctx.ui.notify(`sandbox '${old.name}' is still there; destroy it first or keep using it`, "warning");
						return;
					}
					sandbox = undefined;
					starting = undefined;
					try {
						const sb = await ensure(ctx);
						ctx.ui.notify(`sandbox '${sb.name}' is ready`, "info");
					} catch (e: any) {
						ctx.ui.notify(e.message, "error");
					}
					return;
				}
				let name = words[0];
				const user = words[1];
				if (!name) name = (sandbox ?? (await ensure(ctx).catch(() => undefined)))?.name ?? "";
				if (!NAME_RE.test(name) || (user !== undefined && !USER_RE.test(user)) || words.length > 2) {
					ctx.ui.notify("usage: /sandbox [NAME [USER]]", "error");
					return;
				}
				if (!ctx.hasUI) {
					ctx.ui.notify(`run: pisb shell ${name}${user ? ` ${user}` : ""}`, "info");
					return;
				}
				const argv = [...globalArgs, "shell", name, ...(user ? [user] : [])];
				const status = await ctx.ui.custom((tui: any, _theme: any, _kb: any, done: (v: number | null) => void) => {
					tui.stop();
					process.stdout.write("\x1b[2J\x1b[H");
					const res = spawnSync(bin, argv, { stdio: "inherit" });
					tui.start();
					tui.requestRender(true);
					done(res.error ? 127 : (res.status ?? 1));
					return { render: () => [], invalidate: () => {} };
				});
				if (status !== 0) ctx.ui.notify(`pisb shell ${name} exited with status ${status}`, "warning");
			},
		});

		// ------------------------------------------------------------ session

		pi.on("session_start", async (_event, ctx) => {
			sessionCwd = ctx.cwd;
			uiCtx = ctx;
			const help = await run(["exec", "--help"], { timeoutMs: opTimeoutMs }).catch(() => undefined);
			shell = help?.stdout.toString("utf8").includes("--bash STRING") ? "bash" : "sh";
			// the seed: failing to make the sandbox fails session_start; the session
			// then has no sandbox and every tool refuses (nothing runs on the host)
			try {
				await ensure(ctx);
			} catch (e: any) {
				ctx.ui?.notify?.(e.message, "error");
				throw e;
			} finally {
				// the docker seed's sweep of stale session sandboxes, once the
				// session's own is made (gc never races its creation)
				sweeping ??= sweep().catch(() => undefined);
			}
		});

		pi.on("session_shutdown", async (event: any, ctx) => {
			await release(ctx, event?.reason);
		});

		pi.on("before_agent_start", async (event: any, ctx) => {
			const cwd = ctx.cwd;
			await (starting ?? ensure(ctx)).catch(() => undefined);
			const where = sandbox
				? `${sandbox.workspace} (inside pisb sandbox '${sandbox.name}'; the host directory ${cwd} maps to ${sandbox.workspace}, and every tool runs in the sandbox)`
				: `${cwd} (pisb sandbox not ready${lastError ? `: ${lastError}` : ""}; every tool refuses to run)`;
			const prompt = event.systemPrompt;
			if (typeof prompt !== "string") return undefined;
			const line = `Current working directory: ${cwd}`; // Pi 0.73
			if (prompt.includes(line)) return { systemPrompt: prompt.replace(line, `Current working directory: ${where}`) };
			const section = `<cwd>\n${cwd}\n</cwd>`; // current Pi
			if (prompt.includes(section)) return { systemPrompt: prompt.replace(section, `<cwd>\n${where}\n</cwd>`) };
			return undefined;
		});
	};
}

export default createPisbExtension();
