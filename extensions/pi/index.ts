/**
 * pisb for Pi: run Pi's tools inside a pisb sandbox.
 *
 * This file holds no sandbox logic. It maps Pi's tool operations onto the
 * pisb command line (argv arrays only, never a shell string built on the host)
 * and maps paths between the host working directory and the sandbox workspace.
 * What it decides itself: which requests of the model's sandbox tool reach
 * pisb (nothing of the host, only this project's sandboxes), and when the
 * session's sandbox is made, renewed and released (each step one pisb verb),
 * and which docker arguments the model's docker_* parameters become (typed
 * values only: no docker option, host path or host command of the model's).
 * The session's project goes in as `pisb create --project` (a verified copy)
 * and comes back only through the user: /sandbox diff, /sandbox apply.
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
	/**
	 * the host project (the session's cwd) in the workspace: "copy" (default:
	 * `pisb create --project`, unless the config's project.mode is none) or
	 * "none". Every driver whose table has the diff verb (`pisb drivers
	 * --json`: local, opensandbox, sbx) copies a project; on the others the
	 * workspace starts empty.
	 */
	project?: "copy" | "none";
	/** old name of the default (the project copy): an alias, it changes nothing */
	push?: boolean;
	/** bound on every pisb call except bash (ms); default 120000 */
	opTimeoutMs?: number;
	/** at session start, remove this user's session sandboxes stopped for more than this many hours (0: never); default $PISB_GC_HOURS, else 24 */
	gcHours?: number;
	/** the docker_* tools when the sandbox has a docker daemon of its own; default true ($PISB_DOCKER_TOOLS=0: false) */
	dockerTools?: boolean;
	/** throwing (or rejecting) on "ready" cleans the sandbox up and fails session_start */
	onSandboxEvent?: (event: SandboxEvent) => void | Promise<void>;
}

const NAME_RE = /^[a-z][a-z0-9-]{0,39}$/;
const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_KEY_RE = /KEY|TOKEN|SECRET|PASSW|CREDENTIAL/i;
const DEFAULT_ENV_ALLOWLIST = ["LANG", "LC_ALL", "LC_CTYPE", "TZ"];
const STATUS_KEY = "pisb";
/** starts the one-line project note appended to the session's first tool result */
const NOTE_PREFIX = "[pisb] ";
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
	/** the shell pisb ran the first --bash command under (its --events-fd "shell" event) */
	shellRan?: string;
	/** the model has been told that commands run with /bin/sh */
	shellNoted?: boolean;
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
	/** the host project copied into the workspace (pisb create --project): pisb diff and apply work on it */
	project?: string;
	/** files changed against the project's base, as the last `pisb diff --stat --json` counted them */
	changed?: number;
	/** the docker tools are offered (the status line says so) */
	docker?: boolean;
	/** project.mode bind or bind-ro: the host project itself is mounted at the workspace (no base, no diff) */
	bound?: { dir: string; readOnly: boolean };
}

interface Renewal {
	timer?: NodeJS.Timeout;
	pending?: Promise<void>;
	stopped: boolean;
}

// ---------------------------------------------------------------- helpers

/** docker_init's languages (pisb docker init --lang: common/docker_init.c holds their templates) */
const INIT_LANGS = ["node", "pnpm", "python", "go", "rust", "generic"] as const;

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
		/** the first tool result of the session (and the first after a new sandbox) has said where the project is */
		let noted = false;
		/** "bash" once `pisb exec --help` offers --bash (learnt at session start) */
		let shell: keyof typeof SHELL_OPTIONS = "sh";
		/** true once `pisb release --help` answers: the policy is applied by pisb's release verb */
		let hasRelease = false;
		/** true once `pisb exec --help` offers --events-fd: pisb says which shell ran a command */
		let execEvents = false;
		/** `pisb drivers --json`, asked once */
		let driversCache: Promise<any> | undefined;
		/** whether driver D offers VERB in `pisb drivers --json` (undefined: pisb did not say) */
		async function driverSupports(driver: string, verb: string): Promise<boolean | undefined> {
			driversCache ??= run(["drivers", "--json"], { timeoutMs: opTimeoutMs }).then((r) => JSON.parse(r.stdout.toString("utf8")));
			const drivers = await driversCache.catch(() => undefined);
			const v = (drivers?.drivers ?? []).find((d: any) => d?.name === driver)?.verbs?.[verb]?.supported;
			return typeof v === "boolean" ? v : undefined;
		}
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

		// Pi takes no slash command while session_start runs (one typed then
		// is dropped), so the status line says the sandbox is ready only once
		// session_start is done; until then it says "creating sandbox NAME…"
		let statusHeld = false;
		let heldStatus: { ctx?: ExtensionContext; text: string | undefined } | undefined;
		function setSandboxStatus(ctx: ExtensionContext | undefined, text: string | undefined): void {
			if (statusHeld) heldStatus = { ctx, text };
			else
				try {
					ctx?.ui?.setStatus?.(STATUS_KEY, text);
				} catch {
					// current Pi: a ctx of a session that has ended throws on .ui; nothing to show then
				}
		}

		async function emit(ev: SandboxEvent, ctx?: ExtensionContext): Promise<void> {
			try {
				pi.events?.emit("pisb:sandbox", ev);
			} catch {}
			setSandboxStatus(ctx, ev.phase === "ready" ? `sandbox ${ev.name}${ev.driver ? ` (${ev.driver})` : ""}` : undefined);
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

		/**
		 * the project directory to copy at creation (`pisb create --project`):
		 * the config's project.dir, else the session's cwd; none when the config
		 * says mode none, the option or PISB_PROJECT says none, or the driver
		 * has no project copy: every driver whose table has the diff verb in
		 * `pisb drivers --json` has one (pisb decides, not a list of names here)
		 */
		async function projectOf(cfg: any, cwd: string): Promise<string | undefined> {
			const want = options.project ?? (process.env.PISB_PROJECT === "none" ? "none" : "copy");
			if (want === "none" || cfg?.project?.mode === "none") return undefined;
			// a connected sandbox is someone else's: nothing is copied into it
			if (cfg?.opensandbox?.sandboxId) return undefined;
			if ((await driverSupports(cfg?.driver ?? "local", "diff")) !== true) return undefined;
			return typeof cfg?.project?.dir === "string" && cfg.project.dir ? cfg.project.dir : projectRoot(cwd);
		}

		/** `pisb diff NAME --stat --json`: sets sb.project and sb.changed (no project: both unset) */
		async function countChanges(sb: Sandbox): Promise<any | undefined> {
			const r = await run(["diff", sb.name, "--stat", "--json"], { timeoutMs: opTimeoutMs }).catch(() => undefined);
			let j: any;
			try {
				j = r?.code === 0 ? JSON.parse(r.stdout.toString("utf8")) : undefined;
			} catch {}
			if (!j || typeof j.project !== "string" || !Array.isArray(j.changes)) {
				sb.project = undefined;
				sb.changed = undefined;
				return undefined;
			}
			sb.project = j.project;
			sb.changed = j.changes.length;
			return j;
		}

		function showStatus(sb: Sandbox, ctx?: ExtensionContext): void {
			const changes = sb.bound
				? ` · project bind-mounted${sb.bound.readOnly ? " read-only" : ""}`
				: sb.project
					? ` · ${sb.changed ?? 0} file${sb.changed === 1 ? "" : "s"} changed${sb.changed ? " (/sandbox diff)" : ""}`
					: "";
			setSandboxStatus(ctx, `sandbox ${sb.name}${sb.driver ? ` (${sb.driver})` : ""}${sb.docker ? " + docker" : ""}${changes}`);
		}

		/** the status line's count, refreshed after tool calls: one diff at a time, one more if asked meanwhile */
		let refreshing: Promise<void> | undefined;
		let refreshAgain = false;
		/** true from session_shutdown on: no background work may start, it would outlive the session's ctx */
		let closing = false;
		function refreshChanges(ctx?: ExtensionContext): void {
			const sb = sandbox;
			if (closing || !sb?.project || sb.gone) return;
			if (refreshing) {
				refreshAgain = true;
				return;
			}
			refreshing = countChanges(sb)
				.then(() => showStatus(sb, ctx))
				.catch(() => undefined)
				.finally(() => {
					refreshing = undefined;
					if (refreshAgain) {
						refreshAgain = false;
						refreshChanges(ctx);
					}
				});
		}

		/** the one line the first tool result of a session carries: where the project is, how changes come back */
		function projectNote(sb: Sandbox): string {
			if (sb.bound)
				return sb.bound.readOnly
					? `${NOTE_PREFIX}the project ${sb.bound.dir} is mounted read-only at ${sb.workspace} (sandbox '${sb.name}', project.mode bind-ro): it can be read but not changed from the sandbox`
					: `${NOTE_PREFIX}the project ${sb.bound.dir} is mounted at ${sb.workspace} (sandbox '${sb.name}', project.mode bind): edits in ${sb.workspace} are made on the host at once; there is no copy, so nothing to review or apply`;
			if (sb.project)
				return `${NOTE_PREFIX}the project ${sb.project} is a copy in ${sb.workspace} (sandbox '${sb.name}'): changes stay in the sandbox until the user reviews them with /sandbox diff and writes them to the host with /sandbox apply`;
			return `${NOTE_PREFIX}the workspace ${sb.workspace} of sandbox '${sb.name}' holds no copy of the project ${projectRoot(sessionCwd)}: files come and go only through the user`;
		}

		async function startSandbox(cwd: string, ctx?: ExtensionContext): Promise<Sandbox> {
			const { file, cfg } = await sessionConfig(cwd);
			const lifecycle = policyOf(cfg);
			// PISB_PUSH (option push) is an alias of the default, the project copy: it changes nothing
			const projectDir = await projectOf(cfg, cwd);
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
					if (projectDir) extra.push("--project", projectDir);
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
				if (sb.driver === "opensandbox") {
					const ttl = Number(info.config?.opensandbox?.timeoutSeconds ?? cfg?.opensandbox?.timeoutSeconds ?? 3600);
					// a reused (resumed) sandbox is renewed once before its timer starts; connect renews itself
					if (resumed) await renewOnce(name);
					sb.renewal = startRenewal(name, ttl);
				}
				// bind and bind-ro mount the host project itself: no base, nothing for pisb diff
				const mode = info.config?.project?.mode;
				if ((mode === "bind" || mode === "bind-ro") && (projectDir || !createdByExtension))
					sb.bound = { dir: projectDir ?? projectRoot(cwd), readOnly: mode === "bind-ro" };
				// a reused sandbox may hold a project from its creation: pisb diff says
				else if (projectDir || !createdByExtension) await countChanges(sb);
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
			let shown = false;
			try {
				if (uiCtx?.hasUI) {
					uiCtx.ui?.notify?.(msg, "warning");
					shown = true;
				}
			} catch {} // a ctx of an ended session (current Pi throws on it)
			if (!shown) console.error(`warning: ${msg}`);
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
							showStatus(sb, ctx);
						} catch (e: any) {
							await cleanUp(sb);
							throw new SandboxUnavailableError(`the sandbox ready callback failed (${e?.message ?? e}); the sandbox was cleaned up`);
						}
						sandbox = sb;
						lastError = undefined;
						if (dockerRegistered) {
							// a fresh sandbox after docker_sandbox_rm: the tools are there already
							sb.docker = true;
							showStatus(sb, ctx);
						}
						return sb;
					},
				);
				starting = starting.catch((e) => {
					// the session stays without a sandbox; /sandbox recreate tries again
					lastError = e?.message ?? String(e);
					setSandboxStatus(ctx, "sandbox unavailable");
					const said = /nothing was run on the host$/.test(lastError ?? "");
					throw new SandboxUnavailableError(
						`pisb sandbox unavailable: ${lastError}${said ? "" : "; nothing was run on the host"} (/sandbox recreate tries again)`,
					);
				});
			}
			return starting;
		}

		/**
		 * The session's sandbox was removed on purpose (docker_sandbox_rm): it
		 * is released (event, status line) and the session has none, so the
		 * next tool call makes a fresh one as at session start, as the seed's
		 * next call did. A sandbox destroyed behind the session's back (pisb
		 * destroy, the server) stays "gone" until /sandbox recreate.
		 */
		async function forget(sb: Sandbox, ctx?: ExtensionContext): Promise<void> {
			if (sandbox !== sb) return;
			sandbox = undefined;
			starting = undefined;
			noted = false; // the next result says again where the project is
			await emit({ ...eventOf(sb, "released"), mode: "kill", pisbMode: "removed" }, ctx);
			setSandboxStatus(ctx, `sandbox ${sb.name} removed (the next tool call makes a new one)`);
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

		/**
		 * One pisb verb: `pisb release NAME --policy P` where pisb has it (a
		 * connected sandbox: `pisb release NAME`, which only disconnects), else
		 * destroy (kill), stop (pause), and stop for a connected sandbox (its
		 * record forgotten). Nothing for keep or a sandbox that existed before.
		 */
		async function applyPolicy(sb: Sandbox, ctx?: ExtensionContext): Promise<void> {
			await stopRenewal(sb);
			disarmWatchdog(sb);
			let pisbMode: SandboxEvent["pisbMode"] = "kept";
			let mode: SeedMode = SEED_MODE[sb.lifecycle];
			const events = sb.events;
			if (sb.gone) pisbMode = "removed";
			else if (sb.adopted) {
				mode = "keep";
				pisbMode = "disconnected";
			} else if (hasRelease) {
				// one verb for every driver: pisb applies the policy (a connected
				// sandbox is only disconnected, whatever the policy)
				if (sb.connected) mode = "keep";
				const args = ["release", sb.name, ...(sb.connected ? [] : ["--policy", sb.lifecycle])];
				const r = await run(args, { timeoutMs: opTimeoutMs, events }).catch(() => undefined);
				const info = r?.code === 0 ? await inspect(sb.name).catch(() => undefined) : undefined;
				pisbMode =
					r?.code !== 0
						? "kept"
						: !info
							? sb.connected
								? "disconnected"
								: "removed"
							: info.status === "stopped" || info.status === "paused"
								? "stopped"
								: "kept";
			} else if (sb.connected) {
				mode = "keep";
				const r = await run(["stop", sb.name], { timeoutMs: opTimeoutMs, events }).catch(() => undefined);
				pisbMode = r?.code === 0 ? "disconnected" : "kept";
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
		async function sweep(explicitHours?: number): Promise<{ removed: string[]; kept: string[] }> {
			const hours = explicitHours ?? options.gcHours ?? Number(process.env.PISB_GC_HOURS ?? 24);
			const done = { removed: [] as string[], kept: [] as string[] };
			const args = ["gc", "--dry-run", "--json"];
			// docker_gc's hours=0 is "any age"; at session start 0 means no age sweep
			if (Number.isInteger(hours) && (hours > 0 || (explicitHours !== undefined && hours === 0)))
				args.push("--hours", String(hours));
			const r = await run(args, { timeoutMs: opTimeoutMs }).catch(() => undefined);
			let report: any;
			try {
				report = JSON.parse(r?.stdout.toString("utf8") ?? "");
			} catch {
				return done;
			}
			const ageLimit = args.includes("--hours") ? hours * 3600_000 : undefined;
			const candidates = [
				...(report?.removed ?? []).map((item: any) => ({ item, judged: true })),
				// what gc leaves to the driver (sbx, vm; a remote sandbox whose owner is gone): judged below
				...(report?.kept ?? []).map((item: any) => ({ item, judged: false })),
			];
			for (const { item, judged } of candidates) {
				if (item?.kind !== "sandbox" || typeof item.name !== "string" || !NAME_RE.test(item.name)) continue;
				if (item.name === sandbox?.name) continue;
				const ownerGone = /^owner pid \d+ is gone/.test(String(item.reason ?? ""));
				if (!judged && !ownerGone && !/left to its driver/.test(String(item.reason ?? ""))) continue;
				const info = await inspect(item.name).catch(() => undefined);
				if (info?.status !== "stopped" || info?.config?.metadata?.[META_ROLE] !== "session") continue;
				// a live session's sandbox (stopped by hand, say) is its session's
				if (info?.ownerAlive === true) {
					done.kept.push(`${item.name} (owner pid ${info.ownerPid} alive)`);
					continue;
				}
				if (!judged && !ownerGone && !(await sweptByDriver(info, ageLimit))) continue;
				const d = await run(["-q", "destroy", item.name, "--confirm", item.name], { timeoutMs: opTimeoutMs }).catch(
					() => undefined,
				);
				if (d?.code === 0) done.removed.push(item.name);
				else done.kept.push(`${item.name} (destroy failed: ${d?.stderr || `status ${d?.code}`})`);
			}
			return done;
		}

		/**
		 * A stopped session sandbox that pisb gc leaves to its driver (the
		 * driver's gc verb is unsupported in `pisb drivers --json`: sbx, vm):
		 * the same rule as gc's own, from `pisb inspect`: stopped for longer
		 * than the age limit (its stoppedAt, else createdAt). Teardown is
		 * `pisb destroy`, the driver's own, never a host docker or sbx call.
		 */
		async function sweptByDriver(info: any, ageLimit: number | undefined): Promise<boolean> {
			if (ageLimit === undefined) return false;
			driversCache ??= run(["drivers", "--json"], { timeoutMs: opTimeoutMs }).then((r) => JSON.parse(r.stdout.toString("utf8")));
			const drivers = await driversCache.catch(() => undefined);
			const entry = (drivers?.drivers ?? []).find((d: any) => d?.name === info.driver);
			if (entry?.verbs?.gc?.supported !== false) return false; // gc judged it itself
			const since = Date.parse(String(info.stoppedAt ?? info.createdAt ?? ""));
			return Number.isFinite(since) && Date.now() - since > ageLimit;
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
					// until pisb has said which shell runs --bash here (its "shell" event on fd 3)
					const ask = execEvents && shell === "bash" && sb.shellRan === undefined;
					const args = ["exec", sb.name, "--cwd", toGuest(sb, cwd, cwd), ...sandboxEnv(env)];
					if (ask) args.push("--events-fd", "3");
					args.push(SHELL_OPTIONS[shell], command);
					return new Promise((resolve, reject) => {
						if (signal?.aborted) return reject(new Error("aborted"));
						let child: ChildProcess;
						try {
							child = spawn(bin, [...globalArgs, ...args], { stdio: ["ignore", "pipe", "pipe", ...(ask ? ["pipe" as const] : [])], detached: true });
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
						let evText = "";
						(child.stdio[3] as NodeJS.ReadableStream | undefined)?.on("data", (c: Buffer) => {
							if (evText.length < 4096) evText += c.toString("utf8");
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
							if (ask && sb.shellRan === undefined) sb.shellRan = shellOf(evText);
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

		/** the shell of pisb exec's "shell" event (a JSON line on --events-fd), if it named one */
		function shellOf(events: string): string | undefined {
			for (const line of events.split("\n")) {
				try {
					const ev = JSON.parse(line);
					if (ev?.event === "shell" && (ev.shell === "/bin/bash" || ev.shell === "/bin/sh")) return ev.shell;
				} catch {}
			}
			return undefined;
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
			apply: "only the user writes changes into the host project (/sandbox apply)",
			diff: "the user reviews changes (/sandbox diff); inside, git diff shows them",
			sync: "it reads the host project",
			push: "it copies a host directory into a sandbox",
			pull: "it writes into a host directory",
			docker: "docker goes through the docker tools",
			shell: "it opens a terminal on the host (the user has /sandbox)",
			connect: "it attaches a sandbox from a host config",
			gc: "it removes sandboxes of other sessions",
			renew: "renewal is the session's own",
			doctor: "it inspects the host",
			validate: "configs are read only by create and prepare",
			pool: "it keeps sandboxes booted on the host ahead of creates (the user runs pisb pool)",
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
				if (Object.hasOwn(HOST_KEYS, k)) refuse(`'${k}' is not accepted: ${HOST_KEYS[k]}`);
				const kind = Object.hasOwn(spec.args, k) ? spec.args[k] : undefined;
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
			// a key that would reach the host is named first, whatever the action
			for (const k of Object.keys(req))
				if (Object.hasOwn(HOST_KEYS, k))
					refuse(`'${k}' is not accepted: ${HOST_KEYS[k]}${Object.hasOwn(HOST_ACTIONS, act) ? `; action '${act}' is not available: ${HOST_ACTIONS[act]}` : ""}`);
			if (act === "help") return toolHelp();
			if (Object.hasOwn(HOST_ACTIONS, act)) refuse(`action '${act}' is not available: ${HOST_ACTIONS[act]}`);
			if (!Object.hasOwn(TOOL_ACTIONS, act)) refuse(`unknown action '${act}' (actions: ${Object.keys(TOOL_ACTIONS).join(", ")})`);
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

		// ------------------------------------------------------------ docker tools

		// The docker seed's deploy-target tools, registered when the session's
		// sandbox has a docker daemon of its own. Each is one
		// `pisb docker NAME VERB -- ARG...` on the session's sandbox: the
		// extension builds the argv from typed parameters, so the model names no
		// docker flag, no host path and no host command. Paths are the
		// workspace's (/workspace/<x>, the project's <x>, or relative) and stay
		// inside it; pisb's own argument policy (pisb-docker(1)) judges the rest
		// inside the sandbox, where symlinks are resolved. See README "Docker".

		let dockerRegistered = false;

		function dockerRefuse(tool: string, msg: string): never {
			throw new Error(`${tool}: ${msg}; nothing was run`);
		}

		/** a value that goes to docker as one argument: no option, no line break */
		function plainArg(tool: string, what: string, v: unknown): string {
			if (typeof v !== "string" || !v.trim()) dockerRefuse(tool, `${what} must be a non-empty string`);
			const t = v.trim();
			if (t.startsWith("-")) dockerRefuse(tool, `${what} '${t}' starts with '-' (docker would read an option)`);
			if (/[\r\n\0]/.test(t)) dockerRefuse(tool, `${what} contains a line break or NUL`);
			if (/\s/.test(t) && ["image", "tag", "url"].includes(what)) dockerRefuse(tool, `${what} '${t}' contains white space`);
			return t;
		}

		/**
		 * A path the model names, as a path relative to the workspace: relative
		 * paths, /workspace/<x> (the seed's convention), <workspace>/<x> and the
		 * host project's <x> all name the workspace's <x>. Any other absolute
		 * path, and `..` out of the workspace, are refused.
		 */
		function workspaceRel(tool: string, what: string, sb: Sandbox, cwd: string, p: unknown): string {
			const t = plainArg(tool, what, p);
			let rel: string | undefined;
			if (!t.startsWith("/")) rel = t;
			else
				for (const root of ["/workspace", sb.workspace, ...hostRoots(cwd)]) {
					if (root.length < 2) continue;
					const abs = path.posix.normalize(t);
					if (abs === root || abs === `${root}/`) rel = ".";
					else if (abs.startsWith(`${root.replace(/\/$/, "")}/`)) rel = abs.slice(root.replace(/\/$/, "").length + 1);
					if (rel !== undefined) break;
				}
			if (rel === undefined) dockerRefuse(tool, `${what} '${t}' is outside the workspace (a host path is never accepted; use /workspace/<dir>)`);
			const norm = path.posix.normalize(rel).replace(/\/+$/, "") || ".";
			if (norm === ".." || norm.startsWith("../") || norm.startsWith("/"))
				dockerRefuse(tool, `${what} '${t}' leaves the workspace`);
			return norm;
		}

		/** words of a command string, with '…' and "…" quoting (no escapes): argv for the container */
		function splitWords(cmd: string): string[] {
			const out: string[] = [];
			let cur = "";
			let quote: string | undefined;
			let any = false;
			for (const ch of cmd) {
				if (quote) {
					if (ch === quote) quote = undefined;
					else cur += ch;
				} else if (ch === "'" || ch === '"') {
					quote = ch;
					any = true;
				} else if (/\s/.test(ch)) {
					if (cur || any) out.push(cur);
					cur = "";
					any = false;
				} else cur += ch;
			}
			if (cur || any) out.push(cur);
			return out;
		}

		function commandArgv(tool: string, v: unknown): string[] {
			if (v === undefined) return [];
			const argv = typeof v === "string" ? splitWords(v) : v;
			if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string"))
				dockerRefuse(tool, "command must be a string or an array of strings");
			if (argv.some((a) => a.includes("\0"))) dockerRefuse(tool, "command contains NUL");
			return argv;
		}

		/** `pisb docker NAME VERB -- ARGS`: docker's output, pisb's notes (published ports...) after it */
		async function dockerCall(
			ctx: ExtensionContext | undefined,
			tool: string,
			verb: string,
			args: string[],
			opts: { timeoutMs?: number; signal?: AbortSignal; okCodes?: number[]; json?: boolean } = {},
		): Promise<{ text: string; code: number; stdout: string }> {
			const sb = await ensure(ctx);
			const argv = [...(opts.json ? ["--json"] : []), "docker", sb.name, verb, ...(args.length ? ["--", ...args] : [])];
			const r = await run(argv, { timeoutMs: opts.timeoutMs ?? opTimeoutMs, signal: opts.signal });
			const stdout = r.stdout.toString("utf8");
			const text = [stdout.trimEnd(), r.stderr].filter(Boolean).join("\n");
			if (r.code !== 0 && !(opts.okCodes ?? []).includes(r.code)) {
				if (r.code === 3 || r.code === 5) await checkGone(sb);
				if (r.code === 5)
					throw new SandboxUnavailableError(`${tool}: the sandbox's docker is unavailable (${r.stderr || `status ${r.code}`}); nothing was run on the host`);
				throw new Error(`${tool}: docker ${verb} failed with status ${r.code}${text ? `:\n${capText(text)}` : ""}`);
			}
			return { text: capText(text || "(no output)"), code: r.code, stdout };
		}

		function capText(text: string): string {
			const t = truncateHead(text, { maxLines: 2000 });
			return t.truncated ? `${t.content}\n\n[output cut to ${formatSize(DEFAULT_MAX_BYTES)} / 2000 lines]` : t.content;
		}

		function textOf(text: string, details?: unknown) {
			return { content: [{ type: "text", text }], details };
		}

		/**
		 * Whether the session's sandbox has a docker daemon, as pisb reports it:
		 * a `docker` key of `pisb inspect --json` when pisb prints one, else the
		 * driver's `docker` verb in `pisb drivers --json` and either the
		 * config's `docker: true` or, when the config says nothing,
		 * `pisb docker NAME status` answering (it refuses a sandbox without a
		 * daemon of its own: a local sandbox without docker: true).
		 */
		async function hasDocker(sb: Sandbox): Promise<boolean> {
			const info = await inspect(sb.name).catch(() => undefined);
			if (!info) return false;
			const own = info.docker;
			if (typeof own === "boolean") return own;
			if (own && typeof own === "object") return own.enabled !== false;
			driversCache ??= run(["drivers", "--json"], { timeoutMs: opTimeoutMs }).then((r) => JSON.parse(r.stdout.toString("utf8")));
			const drivers = await driversCache.catch(() => undefined);
			const entry = (drivers?.drivers ?? []).find((d: any) => d?.name === info.driver);
			if (entry?.verbs?.docker?.supported !== true) return false;
			const cfg = info.config?.docker;
			if (cfg === false || (cfg && typeof cfg === "object" && cfg.enabled === false)) return false;
			// the config asks for the daemon (docker: true): the driver runs it
			if (cfg === true || (cfg && typeof cfg === "object")) return true;
			const r = await run(["docker", sb.name, "status"], { timeoutMs: opTimeoutMs }).catch(() => undefined);
			return r?.code === 0;
		}

		const PORT_RE = /^\d{1,5}(?::\d{1,5})?(?:\/(?:tcp|udp))?$/;
		const CONTAINER_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
		const MEMORY_RE = /^\d+(?:\.\d+)?[bkmgBKMG]?$/;
		const CURL_METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"];
		/** compose options that would name a host file, another daemon or a project directory */
		const COMPOSE_DENIED = /^(?:-H|--host|--context|-c|-f|--file|--project-directory|--env-file|-p|--project-name|--privileged)(?:=|$)/;

		function containerId(tool: string, v: unknown): string {
			const id = plainArg(tool, "id", v);
			if (!CONTAINER_RE.test(id)) dockerRefuse(tool, `id '${id}' is not a container id or name`);
			return id;
		}

		function runArgs(tool: string, p: any, sb: Sandbox, cwd: string): { args: string[]; detach: boolean; restart: string } {
			const args = ["run", "--label", "com.pi.sandbox=true"];
			const detach = p.detach !== false;
			if (p.rm && detach) dockerRefuse(tool, "rm needs detach=false (a detached container is removed with docker_rm)");
			if (detach) args.push("-d");
			if (p.rm) args.push("--rm");
			if (p.name !== undefined) args.push("--name", containerId(tool, p.name));
			for (const spec of p.ports ?? []) {
				const t = plainArg(tool, "port", spec);
				if (!PORT_RE.test(t)) dockerRefuse(tool, `port '${t}' is not HOST:CONTAINER[/tcp|udp] (ports are published on the host's 127.0.0.1 only)`);
				args.push("-p", t);
			}
			const env = typeof p.env === "string" ? p.env.split(",").map((x: string) => x.trim()).filter(Boolean) : (p.env ?? []);
			for (const e of env) {
				const t = plainArg(tool, "env entry", e);
				if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(t)) dockerRefuse(tool, `env entry '${t}' is not NAME=VALUE`);
				args.push("-e", t);
			}
			if (p.memory !== undefined) {
				const m = plainArg(tool, "memory", p.memory);
				if (!MEMORY_RE.test(m)) dockerRefuse(tool, `memory '${m}' is not a size such as 512m or 1g`);
				args.push("-m", m);
			}
			for (const v of p.volumes ?? []) {
				const t = plainArg(tool, "volume", v);
				const parts = t.split(":");
				if (parts.length < 2 || parts.length > 3 || !parts[0] || !parts[1])
					dockerRefuse(tool, `volume '${t}' is not SOURCE:CONTAINER_PATH[:ro|rw]`);
				if (parts[2] !== undefined && parts[2] !== "ro" && parts[2] !== "rw") dockerRefuse(tool, `volume '${t}': the mode is ro or rw`);
				if (!parts[1].startsWith("/")) dockerRefuse(tool, `volume '${t}': the container path must be absolute`);
				const rel = workspaceRel(tool, "volume source", sb, cwd, parts[0]);
				const src = rel === "." ? sb.workspace : path.posix.join(sb.workspace, rel);
				args.push("-v", [src, ...parts.slice(1)].join(":"));
			}
			if (p.network !== undefined && p.network !== "bridge") {
				if (!["host", "none"].includes(p.network)) dockerRefuse(tool, "network is bridge, host or none");
				args.push("--network", p.network);
			}
			const restart = p.restart ?? (detach ? "unless-stopped" : "no");
			if (!["no", "always", "unless-stopped", "on-failure"].includes(restart))
				dockerRefuse(tool, "restart is no, always, unless-stopped or on-failure");
			if (restart !== "no") args.push("--restart", restart);
			if (p.workdir !== undefined) {
				const w = plainArg(tool, "workdir", p.workdir);
				if (!w.startsWith("/")) dockerRefuse(tool, "workdir must be an absolute path inside the container");
				args.push("-w", w);
			}
			args.push(plainArg(tool, "image", p.image), ...commandArgv(tool, p.command));
			return { args: args.slice(1), detach, restart };
		}

		function composeArgs(tool: string, p: any, sb: Sandbox, cwd: string): string[] {
			const args: string[] = [];
			if (p.file !== undefined) args.push("-f", workspaceRel(tool, "file", sb, cwd, p.file));
			const action = p.action ?? "up";
			if (typeof action !== "string" || !/^[a-z][a-z-]{0,30}$/.test(action)) dockerRefuse(tool, `action '${action}' is not a compose command`);
			args.push(action);
			if (action === "up" && p.action === undefined) args.push("-d", "--build");
			for (const a of p.extraArgs ?? []) {
				const t = typeof a === "string" ? a : "";
				if (!t || /[\r\n\0]/.test(t)) dockerRefuse(tool, "extraArgs must be non-empty strings without line breaks");
				if (COMPOSE_DENIED.test(t)) dockerRefuse(tool, `'${t}' is not accepted in extraArgs (it names a host file, daemon or project)`);
				const value = t.startsWith("-") ? t.slice(t.indexOf("=") + 1 || t.length) : t;
				if (value.startsWith("/") || value.split("/").includes("..")) dockerRefuse(tool, `'${t}' names a path (a host path is never accepted)`);
				args.push(t);
			}
			if (p.service !== undefined) args.push(containerId(tool, p.service));
			return args;
		}

		/**
		 * docker_init: the seed's scaffold, `pisb docker NAME init --json`: the
		 * templates are pisb's (common/docker_init.c, one copy for every driver
		 * and for this tool), written by a script inside the sandbox with its
		 * rights, in a workspace directory; it never opens a host path.
		 */
		async function scaffold(ctx: ExtensionContext, p: any) {
			const t = "docker_init";
			const sb = await ensure(ctx);
			const rel = p.context === undefined ? "." : workspaceRel(t, "context", sb, cwdOf(ctx), p.context);
			if (p.lang !== undefined && !INIT_LANGS.includes(p.lang)) dockerRefuse(t, `lang must be one of ${INIT_LANGS.join(", ")}`);
			for (const k of ["force", "compose"])
				if (p[k] !== undefined && typeof p[k] !== "boolean") dockerRefuse(t, `${k} must be true or false`);
			const args = [...(p.lang ? ["--lang", p.lang] : []), ...(p.force ? ["--force"] : []), ...(p.compose ? ["--compose"] : []), rel];
			const r = await run(["--json", "docker", sb.name, "init", "--", ...args], { timeoutMs: opTimeoutMs });
			if (r.code === 3) {
				await checkGone(sb);
				dockerRefuse(t, `context '${p.context}' is not a directory in the workspace`);
			}
			if (r.code !== 0 && r.code !== 4) throw await failed(sb, r, "docker init");
			let j: any = {};
			try {
				j = JSON.parse(r.stdout.toString("utf8"));
			} catch {}
			const files: any[] = Array.isArray(j.files) ? j.files : [];
			const done = files.map((f) =>
				f.status === "kept" ? `${f.existing ?? f.file}: kept (it exists; force=true overwrites it)` : `${f.file}: written`);
			const where = rel === "." ? sb.workspace : path.posix.join("/workspace", rel);
			const kept = files.some((f) => f.file === "Dockerfile" && f.status === "kept");
			return textOf(
				[`docker_init ${j.lang} in ${where}:`, ...done.map((d) => `  ${d}`),
					kept ? "(the Dockerfile there is kept)" : `next: docker_build(context=${where}, tag=…), then docker_run with ports ["${j.port}:${j.port}"]`].join("\n"),
				{ lang: j.lang, files: done },
			);
		}

		function registerDockerTools(): void {
			if (dockerRegistered) return;
			dockerRegistered = true;
			const S = Type.String;
			const O = Type.Optional;
			const tool = (name: string, label: string, description: string, parameters: any, exec: (p: any, ctx: ExtensionContext, signal?: AbortSignal) => Promise<any>) =>
				pi.registerTool({
					name,
					label,
					description: `${description} Runs in this session's pisb sandbox's own docker daemon, never the host's.`,
					parameters,
					async execute(_id: string, params: any, signal: AbortSignal | undefined, _u: any, ctx: ExtensionContext) {
						return exec(params ?? {}, ctx, signal);
					},
				} as any);
			const simpleText = async (ctx: ExtensionContext, t: string, verb: string, args: string[], signal?: AbortSignal, timeoutMs?: number) =>
				textOf((await dockerCall(ctx, t, verb, args, { signal, timeoutMs })).text);

			tool("docker_status", "Docker sandbox status", "The sandbox's state, its docker daemon (id, version) and the ports it publishes.", Type.Object({}), async (_p, ctx, signal) => {
				const r = await dockerCall(ctx, "docker_status", "status", [], { signal, json: true });
				let details: any;
				try {
					details = JSON.parse(r.stdout);
				} catch {}
				return textOf(r.text, details);
			});
			tool("docker_verify", "Verify sandbox isolation", "A live isolation audit of the sandbox's docker: PASS or FAIL per check with its evidence.", Type.Object({}), async (_p, ctx, signal) => {
				const r = await dockerCall(ctx, "docker_verify", "verify", [], { signal, okCodes: [1] });
				return textOf(r.code === 0 ? r.text : `${r.text}\n\nsome checks FAILED: do not deploy until they pass`, { pass: r.code === 0 });
			});
			tool("docker_resources", "Sandbox resource usage", "CPUs, memory, disk and docker's disk use inside the sandbox.", Type.Object({}), (_p, ctx, signal) =>
				simpleText(ctx, "docker_resources", "resources", [], signal));
			tool("docker_prune", "Reclaim sandbox space", "docker system prune --all --force inside the sandbox; volumes=true removes unused volumes too.",
				Type.Object({ volumes: O(Type.Boolean({ description: "also remove unused volumes (default false)" })) }),
				(p, ctx, signal) => simpleText(ctx, "docker_prune", "prune", p.volumes ? ["--volumes"] : [], signal, 600_000));
			tool("docker_ps", "List sandbox containers", "Containers in the sandbox (all=true: stopped ones too). Containers made here carry the label com.pi.sandbox=true.",
				Type.Object({ all: O(Type.Boolean({ description: "include stopped containers (default false)" })) }),
				(p, ctx, signal) => simpleText(ctx, "docker_ps", "ps", p.all ? ["-a"] : [], signal));
			tool("docker_images", "List sandbox images", "Images in the sandbox's daemon.", Type.Object({}), (_p, ctx, signal) =>
				simpleText(ctx, "docker_images", "images", [], signal));
			tool("docker_pull", "Pull image into sandbox", "Pull an image into the sandbox's daemon, e.g. nginx:1.27.",
				Type.Object({ image: S({ description: "image reference, e.g. nginx:1.27" }) }),
				(p, ctx, signal) => simpleText(ctx, "docker_pull", "pull", [plainArg("docker_pull", "image", p.image)], signal, 600_000));
			tool("docker_run", "Run a container in the sandbox",
				"Run a container. Detached by default (detach=false waits and returns its output). ports: [\"8080:3000\"] (HOST:CONTAINER[/udp]) are published on the host's 127.0.0.1 (probe them with docker_curl). volumes: [\"/workspace/app:/srv/app:ro\"]; sources are workspace paths only. env: [\"K=V\"]. Detached runs default to restart=unless-stopped.",
				Type.Object({
					image: S({ description: "image, e.g. nginx:1.27" }),
					name: O(S({ description: "container name" })),
					command: O(Type.Union([S(), Type.Array(S())], { description: "command: a string (split into words, quotes kept) or an argv array" })),
					detach: O(Type.Boolean({ description: "detach (default true); false waits for the exit and returns the output" })),
					rm: O(Type.Boolean({ description: "remove after a foreground run (detach=false)" })),
					ports: O(Type.Array(S(), { description: "HOST:CONTAINER[/tcp|udp], e.g. [\"8080:3000\"]" })),
					env: O(Type.Union([Type.Array(S()), S()], { description: "K=V entries (array or comma-separated)" })),
					memory: O(S({ description: "memory limit, e.g. 512m" })),
					volumes: O(Type.Array(S(), { description: "WORKSPACE_PATH:CONTAINER_PATH[:ro|rw]" })),
					network: O(Type.Union([Type.Literal("bridge"), Type.Literal("host"), Type.Literal("none")], { description: "network mode (default bridge)" })),
					restart: O(Type.Union([Type.Literal("no"), Type.Literal("always"), Type.Literal("unless-stopped"), Type.Literal("on-failure")], { description: "restart policy (default unless-stopped when detached, no otherwise)" })),
					workdir: O(S({ description: "working directory inside the container" })),
				}),
				async (p, ctx, signal) => {
					const sb = await ensure(ctx);
					const { args, detach, restart } = runArgs("docker_run", p, sb, cwdOf(ctx));
					const r = await dockerCall(ctx, "docker_run", "run", args, { signal, timeoutMs: detach ? opTimeoutMs : 600_000 });
					return textOf(detach ? `${r.text}\n(restart=${restart}; docker_logs and docker_exec to look inside, docker_rm to remove)` : r.text);
				});
			tool("docker_logs", "Sandbox container logs", "A container's logs (tail: last N lines, default 200; timestamps adds them).",
				Type.Object({
					id: S({ description: "container id or name" }),
					tail: O(Type.Number({ description: "last N lines (default 200)" })),
					timestamps: O(Type.Boolean({ description: "prefix timestamps" })),
				}),
				(p, ctx, signal) => {
					const tail = p.tail ?? 200;
					if (!Number.isSafeInteger(tail) || tail < 0) dockerRefuse("docker_logs", "tail must be a whole number");
					return simpleText(ctx, "docker_logs", "logs", [`--tail=${tail}`, ...(p.timestamps ? ["-t"] : []), containerId("docker_logs", p.id)], signal);
				});
			tool("docker_exec", "Exec in sandbox container", "Run a command in a running container and return its output; for shell syntax pass [\"sh\",\"-c\",\"…\"].",
				Type.Object({
					id: S({ description: "container id or name" }),
					command: Type.Union([S(), Type.Array(S())], { description: "command: a string (split into words) or an argv array" }),
				}),
				(p, ctx, signal) => {
					const argv = commandArgv("docker_exec", p.command);
					if (!argv.length) dockerRefuse("docker_exec", "command is required");
					return simpleText(ctx, "docker_exec", "exec", [containerId("docker_exec", p.id), ...argv], signal, 600_000);
				});
			tool("docker_build", "Build image in sandbox", "Build an image from a workspace directory (context, e.g. /workspace/app) with tag; dockerfile is relative to the context; buildargs a JSON object of ARG values.",
				Type.Object({
					context: S({ description: "workspace directory with the Dockerfile, e.g. /workspace/app" }),
					tag: S({ description: "image tag, e.g. myapp:latest" }),
					dockerfile: O(S({ description: "Dockerfile path relative to the context" })),
					buildargs: O(S({ description: "JSON object of build args, e.g. {\"VERSION\":\"1.0\"}" })),
				}),
				async (p, ctx, signal) => {
					const t = "docker_build";
					const sb = await ensure(ctx);
					const cwd = cwdOf(ctx);
					const context = workspaceRel(t, "context", sb, cwd, p.context);
					const args = ["-t", plainArg(t, "tag", p.tag)];
					if (p.dockerfile !== undefined) {
						const df = plainArg(t, "dockerfile", p.dockerfile);
						if (df.startsWith("/")) dockerRefuse(t, "dockerfile is relative to the context");
						args.push("-f", workspaceRel(t, "dockerfile", sb, cwd, path.posix.join(context, df)));
					}
					if (p.buildargs !== undefined) {
						let ba: any;
						try {
							ba = JSON.parse(String(p.buildargs));
						} catch {
							dockerRefuse(t, "buildargs must be a JSON object");
						}
						if (!ba || typeof ba !== "object" || Array.isArray(ba)) dockerRefuse(t, "buildargs must be a JSON object");
						for (const [k, v] of Object.entries(ba)) {
							if (!ENV_KEY_RE.test(k) || /[\r\n\0]/.test(String(v))) dockerRefuse(t, `build arg '${k}' is not NAME: value`);
							args.push("--build-arg", `${k}=${String(v)}`);
						}
					}
					args.push(context);
					return textOf((await dockerCall(ctx, t, "build", args, { signal, timeoutMs: 1_800_000 })).text);
				});
			tool("docker_init", "Scaffold a Dockerfile", "Write a starting Dockerfile, a .dockerignore and (compose=true) a compose.yaml into a workspace directory. lang: node, pnpm, python, go, rust or generic; detected when omitted (pnpm-lock.yaml, package.json, go.mod, Cargo.toml, requirements.txt or pyproject.toml, else generic). Existing files are kept unless force=true.",
				Type.Object({
					context: O(S({ description: "workspace directory (default: the workspace), e.g. /workspace/app" })),
					lang: O(S({ description: `one of ${INIT_LANGS.join(", ")} (default: detected)` })),
					force: O(Type.Boolean({ description: "overwrite an existing Dockerfile, .dockerignore or compose.yaml" })),
					compose: O(Type.Boolean({ description: "also write compose.yaml (one service, built from the context, its port published)" })),
				}),
				(p, ctx) => scaffold(ctx, p));
			tool("docker_compose", "Compose deploy in sandbox", "Run a compose project: file (in the workspace; default compose.yaml there), action up (default: up -d --build), down, ps, logs, restart, stop, config...; service optional; extraArgs extra compose arguments. Published ports land on the host's 127.0.0.1.",
				Type.Object({
					file: O(S({ description: "compose file in the workspace" })),
					action: O(S({ description: "up (default), down, ps, logs, restart, stop, config, ..." })),
					service: O(S({ description: "one service" })),
					extraArgs: O(Type.Array(S(), { description: "extra compose arguments" })),
				}),
				async (p, ctx, signal) => {
					const sb = await ensure(ctx);
					const args = composeArgs("docker_compose", p, sb, cwdOf(ctx));
					return textOf((await dockerCall(ctx, "docker_compose", "compose", args, { signal, timeoutMs: 1_800_000 })).text);
				});
			for (const [verb, label, pre] of [
				["stop", "Stop sandbox container", ["--time=10"]],
				["start", "Start sandbox container", []],
				["rm", "Remove sandbox container", ["-f", "-v"]],
			] as [string, string, string[]][])
				tool(`docker_${verb}`, label, `${verb === "rm" ? "Force-remove a container (and its anonymous volumes); its published ports are unpublished" : `${verb[0].toUpperCase()}${verb.slice(1)} a container`} by id or name.`,
					Type.Object({ id: S({ description: "container id or name" }) }),
					(p, ctx, signal) => simpleText(ctx, `docker_${verb}`, verb, [...pre, containerId(`docker_${verb}`, p.id)], signal));
			tool("docker_curl", "Probe a published container port", "An HTTP request from the host to http://127.0.0.1:PORT/PATH, only to ports this sandbox published (GET by default; POST, PUT... with body).",
				Type.Object({
					url: S({ description: "http://127.0.0.1:PORT/PATH of a published port" }),
					timeoutSec: O(Type.Number({ description: "give up after this many seconds (at most 10, pisb's bound)" })),
					method: O(S({ description: "GET (default), POST, PUT, DELETE, HEAD, PATCH, OPTIONS" })),
					body: O(S({ description: "request body" })),
				}),
				(p, ctx, signal) => {
					const t = "docker_curl";
					const url = plainArg(t, "url", p.url);
					const method = String(p.method ?? "GET").toUpperCase();
					if (!CURL_METHODS.includes(method)) dockerRefuse(t, `method '${method}' is not one of ${CURL_METHODS.join(", ")}`);
					const args = ["-X", method];
					if (p.body !== undefined) {
						if (typeof p.body !== "string" || p.body.includes("\0")) dockerRefuse(t, "body must be a string without NUL");
						args.push("-d", p.body);
					}
					const secs = Number(p.timeoutSec ?? 10);
					return simpleText(ctx, t, "curl", [...args, url], signal, (Number.isFinite(secs) && secs > 0 ? Math.min(secs, 10) : 10) * 1000 + 20_000);
				});
			tool("docker_sandbox_rm", "Remove this session's sandbox", "DESTRUCTIVE: destroy this session's sandbox and everything in it (its files, images, containers). The next tool call makes a fresh one (an empty workspace, or a new copy of the project).", Type.Object({}), async (_p, ctx) => {
				const sb = await ensure(ctx);
				await stopRenewal(sb);
				disarmWatchdog(sb);
				const r = await run(["destroy", sb.name, "--confirm", sb.name], { timeoutMs: opTimeoutMs });
				if (r.code !== 0 && r.code !== 3) throw failure(r, `destroy '${sb.name}'`, sb.name);
				sb.gone = true;
				await forget(sb, ctx);
				return textOf(`sandbox '${sb.name}' removed with everything inside it; the next tool call makes a fresh sandbox for the session`);
			});
			tool("docker_gc", "Garbage-collect stale sandboxes", "Remove this user's stale Pi session sandboxes: stopped, not this session's, owner gone or stopped longer than hours (default 24; 0: any age). Running and non-session sandboxes are never touched.",
				Type.Object({ hours: O(Type.Number({ description: "age threshold in hours (default 24, 0 = any age)" })) }),
				async (p) => {
					const hours = p.hours ?? 24;
					if (!Number.isSafeInteger(hours) || hours < 0) dockerRefuse("docker_gc", "hours must be a whole number of 0 or more");
					const done = await sweep(hours);
					return textOf(
						[`gc sweep (${hours > 0 ? `stopped more than ${hours} h, or owner gone` : "any age"}; this state directory's Pi session sandboxes, stopped only):`,
							`  removed: ${done.removed.join(", ") || "none"}`,
							`  kept: ${done.kept.join("; ") || "none"}`].join("\n"),
						done,
					);
				});
		}

		/** after the session's sandbox is ready: the docker tools when it has a daemon */
		async function offerDocker(ctx?: ExtensionContext): Promise<void> {
			const sb = sandbox;
			if (!sb || dockerRegistered || process.env.PISB_DOCKER_TOOLS === "0" || options.dockerTools === false) return;
			if (await hasDocker(sb).catch(() => false)) {
				registerDockerTools();
				sb.docker = true;
				showStatus(sb, ctx);
			}
		}

		// ------------------------------------------------------------ user ! and !!

		pi.on("user_bash", (_event, ctx) => {
			const ops = bashOps(ctx);
			return {
				operations: {
					// the user's command may change the project copy too: the status line's count follows
					exec: (...a: Parameters<BashOperations["exec"]>) =>
						ops.exec(...a).finally(() => refreshChanges(ctx)),
				},
			};
		});

		// ------------------------------------------------------------ /sandbox

		/** at most this many lines of a diff go into one notification */
		const DIFF_LINES = 400;

		/** the session's sandbox with a project, or a notification why not */
		async function projectSandbox(ctx: any): Promise<Sandbox | undefined> {
			const sb = sandbox ?? (await ensure(ctx).catch(() => undefined));
			if (!sb || sb.gone) {
				ctx.ui.notify(`no sandbox in this session${lastError ? `: ${lastError}` : ""}`, "error");
				return undefined;
			}
			if (sb.bound) {
				ctx.ui.notify(
					sb.bound.readOnly
						? `the project ${sb.bound.dir} is mounted read-only in sandbox '${sb.name}' (project.mode bind-ro): the sandbox cannot change it, so there is nothing to diff, apply or sync`
						: `the project ${sb.bound.dir} is mounted in sandbox '${sb.name}' (project.mode bind): the agent's edits are already on the host, so there is nothing to diff, apply or sync (git diff in ${sb.bound.dir} shows them)`,
					"info",
				);
				return undefined;
			}
			if (!sb.project) await countChanges(sb);
			if (!sb.project) {
				ctx.ui.notify(`sandbox '${sb.name}' holds no copy of the project (its config's project.mode, or its driver): nothing to diff or apply`, "warning");
				return undefined;
			}
			return sb;
		}

		/** /sandbox diff [PATH...]: pisb diff in a notification */
		async function showDiff(ctx: any, paths: string[]): Promise<void> {
			const sb = await projectSandbox(ctx);
			if (!sb) return;
			const r = await run(["diff", sb.name, "--", ...paths], { timeoutMs: opTimeoutMs });
			if (r.code !== 0) {
				ctx.ui.notify(describe(r, `pisb diff '${sb.name}'`), "error");
				return;
			}
			await countChanges(sb);
			showStatus(sb, ctx);
			const text = r.stdout.toString("utf8").replace(/\n$/, "");
			const warnings = r.stderr.toString("utf8").trim();
			if (!text) {
				ctx.ui.notify(`no changes in sandbox '${sb.name}' against the project ${sb.project}`, "info");
				return;
			}
			const lines = text.split("\n");
			const shown = lines.length > DIFF_LINES ? [...lines.slice(0, DIFF_LINES), `… ${lines.length - DIFF_LINES} more lines: pisb diff ${sb.name} on the host`] : lines;
			ctx.ui.notify(`${sb.changed ?? 0} file(s) changed in sandbox '${sb.name}' against ${sb.project}${warnings ? `\n${warnings}` : ""}\n${shown.join("\n")}`, "info");
		}

		/** /sandbox apply [--force] [PATH...]: pisb apply after the user confirms */
		async function applyChanges(ctx: any, args: string[]): Promise<void> {
			const force = args.includes("--force");
			const yes = args.includes("--yes");
			const paths = args.filter((a) => a !== "--force" && a !== "--yes");
			const bad = paths.find((a) => a.startsWith("-"));
			if (bad) {
				ctx.ui.notify(`unknown option '${bad}'; usage: /sandbox apply [--force] [--yes] [PATH...]`, "error");
				return;
			}
			const sb = await projectSandbox(ctx);
			if (!sb) return;
			const st = await run(["diff", sb.name, "--stat", "--", ...paths], { timeoutMs: opTimeoutMs });
			if (st.code !== 0) {
				ctx.ui.notify(describe(st, `pisb diff '${sb.name}'`), "error");
				return;
			}
			const stat = st.stdout.toString("utf8").trim();
			if (!stat) {
				ctx.ui.notify(`nothing to apply: no changes in sandbox '${sb.name}' against ${sb.project}`, "info");
				return;
			}
			const warnings = st.stderr.toString("utf8").trim();
			const title = `apply these changes to ${sb.project}${force ? " (--force: overwrites host files that changed too)" : ""}?`;
			const ok = ctx.hasUI ? await ctx.ui.confirm(title, `${stat}${warnings ? `\n${warnings}` : ""}`) : yes;
			if (!ok) {
				ctx.ui.notify(
					ctx.hasUI ? "apply cancelled: nothing written" : "apply needs confirmation: /sandbox apply --yes (nothing written)",
					"warning",
				);
				return;
			}
			const r = await run(["apply", sb.name, "--json", ...(force ? ["--force"] : []), "--", ...paths], { timeoutMs: 600_000 });
			await countChanges(sb);
			showStatus(sb, ctx);
			const err = r.stderr.toString("utf8").trim();
			if (r.code === 4) {
				ctx.ui.notify(
					`apply refused, nothing written: ${err || "a conflict"}\n(review with /sandbox diff; /sandbox apply --force overwrites the host's version)`,
					"error",
				);
				return;
			}
			if (r.code !== 0) {
				ctx.ui.notify(describe(r, `pisb apply '${sb.name}'`), "error");
				return;
			}
			let j: any = {};
			try {
				j = JSON.parse(r.stdout.toString("utf8"));
			} catch {}
			const list = Array.isArray(j.paths) ? j.paths : [];
			ctx.ui.notify(
				`applied to ${sb.project}: ${j.written ?? 0} written, ${j.deleted ?? 0} deleted${list.length ? ` (${list.join(", ")})` : ""}`,
				"info",
			);
		}

		/** /sandbox sync [--yes]: pisb sync (the host's edits since the base come in, three-way) after the user confirms */
		async function syncChanges(ctx: any, args: string[]): Promise<void> {
			const yes = args.includes("--yes");
			const bad = args.find((a) => a !== "--yes");
			if (bad) {
				ctx.ui.notify(`unknown argument '${bad}'; usage: /sandbox sync [--yes]`, "error");
				return;
			}
			const sb = await projectSandbox(ctx);
			if (!sb) return;
			const title = `bring the changes made to ${sb.project} since the base into sandbox '${sb.name}'?`;
			const body =
				"Files only the host changed are written (or deleted) in the sandbox; files the agent changed are kept; " +
				"a file both changed differently is a conflict and left alone on both sides.";
			const ok = ctx.hasUI ? await ctx.ui.confirm(title, body) : yes;
			if (!ok) {
				ctx.ui.notify(
					ctx.hasUI ? "sync cancelled: nothing changed in the sandbox" : "sync needs confirmation: /sandbox sync --yes (nothing changed)",
					"warning",
				);
				return;
			}
			const r = await run(["sync", sb.name, "--json"], { timeoutMs: 600_000 });
			await countChanges(sb);
			showStatus(sb, ctx);
			let j: any = {};
			try {
				j = JSON.parse(r.stdout.toString("utf8"));
			} catch {}
			const conflicts: string[] = Array.isArray(j.conflicts) ? j.conflicts.filter((c: unknown) => typeof c === "string") : [];
			if (r.code !== 0 && r.code !== 4) {
				ctx.ui.notify(describe(r, `pisb sync '${sb.name}'`), "error");
				return;
			}
			const done = `synced ${sb.project} into sandbox '${sb.name}': ${j.written ?? 0} written, ${j.deleted ?? 0} deleted`;
			if (conflicts.length)
				ctx.ui.notify(`${done}; ${conflicts.length} conflict${conflicts.length === 1 ? "" : "s"} left alone on both sides: ${conflicts.join(", ")}`, "warning");
			else ctx.ui.notify(done, "info");
		}

		pi.registerCommand("sandbox", {
			description:
				"Open a terminal in a sandbox: /sandbox [NAME [USER]] (default: this session's sandbox); /sandbox diff [PATH...]: what the agent changed in the project; /sandbox apply [--force] [PATH...]: write it into the project after confirmation; /sandbox sync: bring the host's edits since then into the sandbox after confirmation; /sandbox recreate: a new sandbox for this session",
			handler: async (argText: string, ctx: any) => {
				const words = String(argText ?? "").trim().split(/\s+/).filter(Boolean);
				if (words[0] === "diff") return showDiff(ctx, words.slice(1));
				if (words[0] === "apply") return applyChanges(ctx, words.slice(1));
				if (words[0] === "sync") return syncChanges(ctx, words.slice(1));
				if (words[0] === "recreate" && words.length === 1) {
					// the session's sandbox is gone or never came up: make (or start) one again
					const old = sandbox;
					if (old && !old.gone) {
						ctx.ui.notify(`sandbox '${old.name}' is still there; destroy it first or keep using it`, "warning");
						return;
					}
					sandbox = undefined;
					starting = undefined;
					noted = false; // the new sandbox's first result says where the project is
					try {
						const sb = await ensure(ctx);
						await offerDocker(ctx);
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
			const [help, rel] = await Promise.all(
				[["exec", "--help"], ["release", "--help"]].map((a) => run(a, { timeoutMs: opTimeoutMs }).catch(() => undefined)),
			);
			shell = help?.stdout.toString("utf8").includes("--bash STRING") ? "bash" : "sh";
			execEvents = help?.stdout.toString("utf8").includes("--events-fd N") ?? false;
			hasRelease = rel?.code === 0 && rel.stdout.toString("utf8").includes("--policy");
			// the seed: failing to make the sandbox fails session_start; the session
			// then has no sandbox and every tool refuses (nothing runs on the host)
			statusHeld = true;
			try {
				await ensure(ctx);
				await offerDocker(ctx);
			} catch (e: any) {
				ctx.ui?.notify?.(e.message, "error");
				throw e;
			} finally {
				statusHeld = false;
				if (heldStatus) setSandboxStatus(heldStatus.ctx, heldStatus.text);
				heldStatus = undefined;
				// the docker seed's sweep of stale session sandboxes, once the
				// session's own is made (gc never races its creation)
				sweeping ??= sweep().then(
					() => undefined,
					() => undefined,
				);
			}
		});

		pi.on("session_shutdown", async (event: any, ctx) => {
			// the status line's refresh runs in the background: none starts now, and the
			// one in flight ends before the session does (current Pi ends the session's
			// ctx once this handler returns, and a later ctx.ui throws: Pi exited 1)
			closing = true;
			await refreshing?.catch(() => undefined);
			// /new, /resume, /fork, /reload hand the sandbox to the next session: no warning then
			if (!event?.reason || event.reason === "quit") await unappliedWarning(ctx);
			await release(ctx, event?.reason);
			closing = false; // this instance may serve the next session (/new without a reload)
		});

		/** quitting with changes not applied to the project: say so, and where they are (or that they go) */
		async function unappliedWarning(ctx: any): Promise<void> {
			const sb = sandbox;
			if (!sb?.project || sb.gone) return;
			await refreshing?.catch(() => undefined);
			await countChanges(sb).catch(() => undefined);
			if (!sb.changed) return;
			const fate =
				sb.lifecycle === "remove" && sb.createdByExtension && !sb.adopted
					? "they are lost with the sandbox, which is removed now (lifecycle remove; 'stop' or 'keep' keeps them)"
					: `they stay in the sandbox: 'pisb diff ${sb.name}' and 'pisb apply ${sb.name}' on the host, or /sandbox apply in the next session`;
			const msg = `warning: ${sb.changed} changed file${sb.changed === 1 ? "" : "s"} in sandbox '${sb.name}' not applied to ${sb.project}: ${fate}`;
			if (ctx?.hasUI) ctx.ui.notify(msg, "warning");
			else process.stderr.write(`${msg}\n`);
		}

		// the first tool result of the session carries one line on the project; every result refreshes the status line's count
		const READ_ONLY_TOOLS = new Set(["read", "ls", "find", "grep"]);
		const FILE_TOOLS = new Set(["write", "edit"]);
		pi.on("tool_result", async (event: any, ctx) => {
			const sb = sandbox;
			if (!sb || sb.gone) return undefined;
			if (FILE_TOOLS.has(event.toolName) && sb.project) {
				// one file written: the count is current when the result is (a pisb diff of a few ms)
				await refreshing?.catch(() => undefined);
				await countChanges(sb).catch(() => undefined);
				showStatus(sb, ctx);
			} else if (!READ_ONLY_TOOLS.has(event.toolName)) refreshChanges(ctx); // bash and the rest: in the background
			const notes: string[] = [];
			if (!noted) {
				noted = true;
				notes.push(projectNote(sb));
			}
			// bash ran with sh (no bash in the sandbox, or a pisb without --bash): said once
			if (event.toolName === "bash" && !sb.shellNoted && (shell === "sh" || sb.shellRan === "/bin/sh")) {
				sb.shellNoted = true;
				notes.push(
					`${NOTE_PREFIX}commands run with /bin/sh, not bash (${shell === "sh" ? "the installed pisb has no exec --bash" : `sandbox '${sb.name}' has no /bin/bash`}): no [[ ]], arrays, {a,b} or $'...'`,
				);
			}
			if (!notes.length) return undefined;
			return { content: [...(event.content ?? []), ...notes.map((n) => ({ type: "text", text: `\n${n}` }))] };
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
