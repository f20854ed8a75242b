/**
 * pisb for Pi: run Pi's tools inside a pisb sandbox.
 *
 * This file holds no sandbox logic. It maps Pi's tool operations onto the
 * pisb command line (argv arrays only, never a shell string built on the host)
 * and maps paths between the host working directory and the sandbox workspace.
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

export type Lifecycle = "remove" | "stop" | "keep";

export interface SandboxEvent {
	phase: "ready" | "released";
	sandboxId: string;
	driver?: string;
	workspace: string;
	createdByExtension: boolean;
	resumed: boolean;
	/** released only: what shutdown did */
	mode?: "removed" | "stopped" | "kept" | "disconnected";
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
	/** what session_shutdown does with a sandbox this extension manages; default "stop" */
	lifecycle?: Lifecycle;
	/** host variables passed into the sandbox besides PI_* */
	envAllowlist?: string[];
	/** copy the host working directory into the workspace when the sandbox is created */
	push?: boolean;
	/** bound on every pisb call except bash (ms); default 120000 */
	opTimeoutMs?: number;
	onSandboxEvent?: (event: SandboxEvent) => void | Promise<void>;
}

const NAME_RE = /^[a-z][a-z0-9-]{0,39}$/;
const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_KEY_RE = /KEY|TOKEN|SECRET|PASSW|CREDENTIAL/i;
const DEFAULT_ENV_ALLOWLIST = ["LANG", "LC_ALL", "LC_CTYPE", "TZ"];
const STATUS_KEY = "pisb";
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
	driver?: string;
	workspace: string;
	createdByExtension: boolean;
	resumed: boolean;
	/** only disconnect at shutdown */
	connected: boolean;
	lifecycle: Lifecycle;
	/** pisb's events since the last ready/released */
	events: unknown[];
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

/**
 * Reads one scalar from sandbox.yaml: the few keys the extension itself needs
 * (driver, connect id, lifecycle). Block mappings and JSON only; pisb parses
 * and validates the whole file.
 */
function yamlScalar(text: string, keys: string[]): string | undefined {
	if (text.trimStart().startsWith("{")) {
		try {
			let v: any = JSON.parse(text);
			for (const k of keys) v = v?.[k];
			return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : undefined;
		} catch {
			return undefined;
		}
	}
	const stack: { indent: number; key: string }[] = [];
	for (const raw of text.split(/\r?\n/)) {
		if (/^\s*(#|$)/.test(raw)) continue;
		const m = /^(\s*)("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*:(?:\s+(.*))?$/.exec(raw);
		if (!m) continue;
		const indent = m[1].length;
		const key = m[2].replace(/^["']|["']$/g, "");
		while (stack.length && stack[stack.length - 1].indent >= indent) stack.pop();
		const value = (m[3] ?? "").replace(/\s+#.*$/, "").trim();
		const at = [...stack.map((s) => s.key), key];
		if (!value) {
			stack.push({ indent, key });
			continue;
		}
		if (at.length === keys.length && at.every((k, i) => k === keys[i])) return value.replace(/^(["'])(.*)\1$/, "$2");
	}
	return undefined;
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

		function readConfig(cwd: string): { file?: string; text?: string } {
			if (options.config !== undefined) {
				const text = typeof options.config === "string" ? options.config : JSON.stringify(options.config);
				return { text };
			}
			const file = options.configFile ?? process.env.PISB_CONFIG ?? path.join(cwd, ".pi", "sandbox.yaml");
			try {
				return { file, text: readFileSync(file, "utf8") };
			} catch (e: any) {
				if (options.configFile || process.env.PISB_CONFIG) throw new SandboxUnavailableError(`cannot read ${file}: ${e.message}`);
				return {};
			}
		}

		async function configFileFor(cfg: { file?: string; text?: string }): Promise<string | undefined> {
			if (cfg.file || cfg.text === undefined) return cfg.file;
			const dir = await fsp.mkdtemp(path.join(tmpdir(), "pisb-pi-"));
			const file = path.join(dir, "sandbox.yaml");
			await fsp.writeFile(file, cfg.text, { mode: 0o600 });
			return file;
		}

		async function emit(ev: SandboxEvent, ctx?: ExtensionContext): Promise<void> {
			try {
				pi.events?.emit("pisb:sandbox", ev);
			} catch {}
			if (ev.phase === "ready") ctx?.ui?.setStatus?.(STATUS_KEY, `sandbox ${ev.sandboxId}${ev.driver ? ` (${ev.driver})` : ""}`);
			else ctx?.ui?.setStatus?.(STATUS_KEY, undefined);
			try {
				await options.onSandboxEvent?.(ev);
			} catch {}
		}

		async function startSandbox(cwd: string, ctx?: ExtensionContext): Promise<Sandbox> {
			const cfg = readConfig(cwd);
			const text = cfg.text ?? "";
			const lifecycle =
				options.lifecycle ??
				lifecycleOf(process.env.PISB_LIFECYCLE) ??
				lifecycleOf(yamlScalar(text, ["opensandbox", "lifecycle", "onSessionShutdown"])) ??
				lifecycleOf(yamlScalar(text, ["sbx", "teardown"])) ??
				"stop";
			const push = options.push ?? ["1", "true", "yes"].includes((process.env.PISB_PUSH ?? "").toLowerCase());
			const pinned = options.name ?? process.env.PISB_SANDBOX;
			const remoteId = yamlScalar(text, ["opensandbox", "sandboxId"]);
			let name: string;
			if (pinned) name = pinned;
			else {
				let real = cwd;
				try {
					real = realpathSync(cwd);
				} catch {}
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
			let info = await inspect(name);
			if (!info) {
				const file = await configFileFor(cfg);
				if (remoteId) {
					if (!file) throw new SandboxUnavailableError("connect needs a configuration file");
					// no --owner-pid: a connected sandbox is never the session's to reclaim
					const args = ["connect", name, "-f", file];
					if (sessionId) args.push("--session-id", sessionId);
					const r = await run(args, { timeoutMs: 600_000, events });
					if (r.code !== 0) throw failure(r, `connect '${name}'`, name);
					connected = true;
				} else {
					const args = ["create", name];
					if (file) args.push("-f", file);
					if (lifecycle === "remove") args.push("--owner-pid", String(process.pid));
					if (sessionId) args.push("--session-id", sessionId);
					ctx?.ui?.setStatus?.(STATUS_KEY, `creating sandbox ${name}…`);
					const r = await run(args, { timeoutMs: 1_800_000, events });
					if (r.code === 4 && pinned) connected = true; // someone else created it meanwhile
					else if (r.code !== 0) throw failure(r, `create '${name}'`, name);
					else createdByExtension = true;
				}
				if (file && file !== cfg.file) await fsp.rm(path.dirname(file), { recursive: true, force: true });
				info = await inspect(name);
				if (!info) throw new SandboxUnavailableError(`sandbox '${name}' vanished after it was created`);
			} else if (pinned) {
				connected = true;
			}
			if (info.status !== "running") {
				if (info.status === "unavailable") throw new SandboxUnavailableError(`sandbox '${name}' is unavailable`);
				const r = await run(["start", name], { timeoutMs: 600_000 });
				if (r.code !== 0) throw failure(r, `start '${name}'`, name);
				resumed = true;
				info = (await inspect(name)) ?? info;
				if (info.status !== "running")
					throw new SandboxUnavailableError(`sandbox '${name}' is ${info.status} after start`);
			}
			const sb: Sandbox = {
				name,
				driver: info.driver,
				workspace: typeof info.workspace === "string" && info.workspace.startsWith("/") ? info.workspace : "/workspace",
				createdByExtension,
				resumed,
				connected,
				lifecycle,
				events,
			};
			if (push && createdByExtension) {
				const r = await run(["push", name, cwd, "--to", sb.workspace], { timeoutMs: 1_800_000 });
				if (r.code !== 0) throw failure(r, `push '${cwd}' into '${name}'`, name);
			}
			return sb;
		}

		function ensure(ctx?: ExtensionContext): Promise<Sandbox> {
			if (sandbox) return Promise.resolve(sandbox);
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
						sandbox = sb;
						lastError = undefined;
						await emit(
							{
								phase: "ready",
								sandboxId: sb.name,
								driver: sb.driver,
								workspace: sb.workspace,
								createdByExtension: sb.createdByExtension,
								resumed: sb.resumed,
								pisbEvents: sb.events.splice(0),
							},
							ctx,
						);
						return sb;
					},
					(e) => {
						starting = undefined; // a later call may try again; nothing runs on the host meanwhile
						lastError = e?.message ?? String(e);
						ctx?.ui?.setStatus?.(STATUS_KEY, "sandbox unavailable");
						throw new SandboxUnavailableError(`pisb sandbox unavailable: ${lastError}; nothing was run on the host`);
					},
				);
			}
			return starting;
		}

		async function release(ctx?: ExtensionContext, reason?: string): Promise<void> {
			const pending = starting;
			starting = undefined;
			if (!sandbox && pending) await pending.catch(() => undefined);
			const sb = sandbox;
			sandbox = undefined;
			if (reason && reason !== "quit") {
				// the process goes on with a new session: the next instance adopts the sandbox
				if (sb) handoff.set(`${bin}\0${ctx?.cwd ?? sessionCwd}`, sb);
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

		async function applyPolicy(sb: Sandbox, ctx?: ExtensionContext): Promise<void> {
			let mode: SandboxEvent["mode"] = "disconnected";
			if (!sb.connected) {
				const events = sb.events;
				if (sb.lifecycle === "remove") {
					const r = await run(["destroy", sb.name, "--confirm", sb.name], { timeoutMs: opTimeoutMs, events }).catch(
						() => undefined,
					);
					mode = r?.code === 0 ? "removed" : "kept";
				} else if (sb.lifecycle === "stop") {
					const r = await run(["stop", sb.name], { timeoutMs: opTimeoutMs, events }).catch(() => undefined);
					mode = r?.code === 0 ? "stopped" : "kept";
				} else mode = "kept";
			}
			await emit(
				{
					phase: "released",
					sandboxId: sb.name,
					driver: sb.driver,
					workspace: sb.workspace,
					createdByExtension: sb.createdByExtension,
					resumed: sb.resumed,
					mode,
					pisbEvents: sb.events.splice(0),
				},
				ctx,
			);
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
					const args = ["exec", sb.name, "--cwd", toGuest(sb, cwd, cwd), ...sandboxEnv(env), "--sh", command];
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
				if (r.code === 3) throw fsError("ENOENT", `ENOENT: no such file or directory in sandbox, ${verb} '${guest}'`);
				if (r.code === 1 && /director/i.test(r.stderr))
					throw fsError("EISDIR", `EISDIR: illegal operation on a directory, read '${guest}'`);
				if (r.code !== 0) throw failure(r, `read '${guest}'`, sb.name);
				cache.set(p, r.stdout);
				return r.stdout;
			};
		}

		async function writeFile(ctx: ExtensionContext | undefined, p: string, content: string): Promise<void> {
			const sb = await ensure(ctx);
			const guest = toGuest(sb, ctx?.cwd ?? sessionCwd, p);
			const r = await run(["write", "--mkdir", "--", sb.name, guest], { input: content, timeoutMs: opTimeoutMs });
			if (r.code !== 0) throw failure(r, `write '${guest}'`, sb.name);
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
				if (r.code === 3) return false;
				if (r.code === 1 && /director/i.test(r.stderr)) {
					notDirs.add(p);
					return true;
				}
				if (r.code !== 0) throw failure(r, `ls '${guest}'`, sb.name);
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
					if (r.code === 3) throw new Error(`Path not found: ${searchPath}`);
					if (r.code !== 0) throw failure(r, `find '${pattern}' in '${guest}'`, sb.name);
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
				if (r.code === 3) throw new Error(`Path not found: ${searchPath}`);
				if (r.code !== 0) throw failure(r, "grep", sb.name);
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

		// The sandbox tool: pisb's JSON action surface, one string in.
		pi.registerTool({
			name: "sandbox",
			label: "sandbox",
			description:
				'Manage pisb sandboxes (list, create, start, stop, inspect, exec, services, previews, …). input is "help" for the list of actions, or one JSON action object such as {"action":"list"}. The session\'s own sandbox is named in the system prompt.',
			promptSnippet: "Manage pisb sandboxes and their services through JSON actions",
			parameters: Type.Object({
				input: Type.String({ description: 'help, or one JSON action object, e.g. {"action":"list"}' }),
			}),
			async execute(_id: string, params: any, signal: AbortSignal | undefined) {
				const input = String(params?.input ?? "").trim() || "help";
				if (input.startsWith("-")) throw new Error('input must be "help" or a JSON object');
				const r = await run(["action", input], { timeoutMs: 180_000, signal });
				const text = r.stdout.toString("utf8").trim();
				let parsed: any;
				try {
					parsed = JSON.parse(text);
				} catch {}
				if (r.code !== 0 || parsed?.error) {
					const msg = parsed?.error?.message ?? (r.stderr || text || `pisb action exited with status ${r.code}`);
					throw new Error(parsed?.error?.code ? `${parsed.error.code}: ${msg}` : msg);
				}
				return { content: [{ type: "text", text: text || "{}" }], details: parsed };
			},
		} as any);

		// ------------------------------------------------------------ user ! and !!

		pi.on("user_bash", (_event, ctx) => ({ operations: bashOps(ctx) }));

		// ------------------------------------------------------------ /sandbox

		pi.registerCommand("sandbox", {
			description: "Open a terminal in a sandbox: /sandbox [NAME [USER]] (default: this session's sandbox)",
			handler: async (argText: string, ctx: any) => {
				const words = String(argText ?? "").trim().split(/\s+/).filter(Boolean);
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
			// lazily, once: tools await the same promise; a failure is reported, never bypassed
			ensure(ctx).catch((e) => ctx.ui?.notify?.(e.message, "error"));
		});

		pi.on("session_shutdown", async (event: any, ctx) => {
			await release(ctx, event?.reason);
		});

		pi.on("before_agent_start", async (event: any, ctx) => {
			const cwd = ctx.cwd;
			await ensure(ctx).catch(() => undefined);
			const where = sandbox
				? `${sandbox.workspace} (inside pisb sandbox '${sandbox.name}'; the host directory ${cwd} maps to ${sandbox.workspace}, and every tool runs in the sandbox)`
				: `${cwd} (pisb sandbox not ready${lastError ? `: ${lastError}` : ""}; tools refuse to run until it is)`;
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
