#!/usr/bin/env node
// Per-call overhead of the Pi extension: the median time of a direct pisb call
// next to the same operation through the extension's tool (bash running
// `true`; read of a small file; grep of a small tree), and the same tool of
// Pi itself on the host (no sandbox: what a user of plain Pi pays; its grep
// is ripgrep, "n/a" without rg on PATH). The difference is what
// the extension adds; the goal is under 2 ms, reported on each row as ok or
// OVER (never an exit status: timings move with the machine's load). Exit
// status 2 when a call fails.
//
//   node extensions/pi/bench.mjs [N]        (N calls each, default 40)
//
// Needs pisb (PISB_BIN, default `pisb` on PATH) with a working driver, and Pi
// installed where the tests put it (tests/pi/node_modules; override with
// PI_NODE_MODULES). Creates a throwaway sandbox and removes it at the end.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const N = Number(process.argv[2] ?? process.env.BENCH_N ?? 40);
const modules = process.env.PI_NODE_MODULES ?? path.join(here, "../../tests/pi/node_modules");
const bin = process.env.PISB_BIN ?? "pisb";
const name = `pi-bench-${process.pid}`;

const req = createRequire(path.join(modules, "noop.js"));
const { createJiti } = req("jiti");
// the extension imports Pi and typebox the way Pi's own loader provides them
const jiti = createJiti(import.meta.url, {
	alias: {
		"@mariozechner/pi-coding-agent": path.join(modules, "@mariozechner/pi-coding-agent/dist/index.js"),
		typebox: req.resolve("typebox"),
	},
});

function pisb(args, input) {
	return new Promise((resolve, reject) => {
		const c = spawn(bin, args, { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
		let err = "";
		c.stdout.resume();
		c.stderr.on("data", (d) => (err += d));
		c.on("error", reject);
		c.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`pisb ${args[0]}: status ${code}: ${err.trim()}`))));
		if (input !== undefined) c.stdin.end(input);
	});
}

/** wall ms, and the CPU ms this node process itself spent (not its children): the latter does not depend on the machine's load */
async function time(fn) {
	const c0 = process.cpuUsage();
	const t0 = process.hrtime.bigint();
	await fn();
	const c = process.cpuUsage(c0);
	return [Number(process.hrtime.bigint() - t0) / 1e6, (c.user + c.system) / 1e3];
}

const mid = (t) => [...t].sort((a, b) => a - b)[Math.floor(t.length / 2)];

/** direct and via-extension calls alternate, so that the load of a shared machine falls on both alike */
async function medians(direct, viaExt) {
	await direct(); // warm-up
	await viaExt();
	const d = [];
	const e = [];
	const diff = [];
	const cpu = [];
	for (let i = 0; i < N; i++) {
		const [a, ca] = await time(direct);
		const [b, cb] = await time(viaExt);
		d.push(a);
		e.push(b);
		diff.push(b - a);
		cpu.push(cb - ca);
	}
	return [mid(d), mid(e), mid(diff), mid(cpu)];
}

/** median wall ms of N calls of fn (after one warm-up), or undefined if it fails */
async function alone(fn) {
	try {
		await fn();
		const t = [];
		for (let i = 0; i < N; i++) t.push((await time(fn))[0]);
		return mid(t);
	} catch {
		return undefined;
	}
}

const project = mkdtempSync(path.join(tmpdir(), "pisb-bench-"));
// the same files on the host, for Pi's own tools (the project copy takes them into the sandbox too)
writeFileSync(path.join(project, "small.txt"), "x");
mkdirSync(path.join(project, "src"));
for (let i = 1; i <= 8; i++) writeFileSync(path.join(project, "src", `f${i}.c`), `a\nTODO ${i}\nb\n`);
process.env.PI_OFFLINE = "1"; // Pi's grep never downloads ripgrep here
const piHost = await import(path.join(modules, "@mariozechner/pi-coding-agent/dist/index.js"));
process.env.PISB_SANDBOX = name;
process.env.PISB_LIFECYCLE = "remove";
const { createPisbExtension } = await jiti.import(path.join(here, "index.ts"));
const tools = new Map();
const handlers = new Map();
const pi = {
	registerTool: (d) => tools.set(d.name, d),
	registerCommand: () => {},
	on: (ev, h) => handlers.set(ev, h),
	events: { emit: () => {} },
};
createPisbExtension({ bin })(pi);
const ctx = {
	cwd: project,
	hasUI: false,
	ui: { setStatus: () => {}, notify: () => {} },
	sessionManager: { getSessionId: () => "bench" },
};
let code = 0;
try {
	await handlers.get("session_start")({ type: "session_start", reason: "startup" }, ctx);
	const bash = tools.get("bash");
	const read = tools.get("read");
	const grep = tools.get("grep");
	// the first call waits for the sandbox to be created (a failed creation is tried again by the next call)
	let first;
	for (let i = 0; i < 3 && !first; i++)
		first = await bash.execute("b0", { command: "printf x > small.txt; mkdir -p src; for i in 1 2 3 4 5 6 7 8; do printf 'a\\nTODO %s\\nb\\n' $i > src/f$i.c; done" }, undefined, undefined, ctx).catch((e) => {
			if (i === 2) throw e;
		});

	const hostBash = piHost.createBashTool(project);
	const hostRead = piHost.createReadTool(project);
	const hostGrep = piHost.createGrepTool(project);
	const rows = [
		["bash `true`", () => pisb(["exec", name, "--cwd", "/workspace", "--bash", "true"]), () => bash.execute("b", { command: "true" }, undefined, undefined, ctx), () => hostBash.execute("h", { command: "true" })],
		["read small file", () => pisb(["read", name, "/workspace/small.txt", "--raw"]), () => read.execute("r", { path: "small.txt" }, undefined, undefined, ctx), () => hostRead.execute("h", { path: "small.txt" })],
		["grep 8 files", () => pisb(["grep", "--json", "--path", "/workspace/src", "--limit", "100", "--", name, "TODO"]), () => grep.execute("g", { pattern: "TODO", path: "src" }, undefined, undefined, ctx), () => hostGrep.execute("h", { pattern: "TODO", path: "src" })],
	];
	console.log(`pisb extension overhead, ${N} calls each, median ms (driver sandbox '${name}')`);
	console.log(`load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores; "wall +" is the median of per-pair differences, "cpu +" the extra CPU of Pi's process, "pi on host" Pi's own tool without a sandbox`);
	console.log(["operation", "direct pisb", "via extension", "wall +", "cpu +", "pi on host"].map((s) => s.padEnd(18)).join(""));
	for (const [label, direct, viaExt, host] of rows) {
		try {
			const [d, e, over, cpu] = await medians(direct, viaExt);
			const h = await alone(host);
			// the 2 ms goal is reported, not enforced: a loaded machine moves wall times
			const verdict = over < 2 ? "ok" : "OVER";
			console.log([label, d.toFixed(2), e.toFixed(2), over.toFixed(2), cpu.toFixed(2), h === undefined ? "n/a" : h.toFixed(2), `(goal < 2 ms: ${verdict})`].map((s) => String(s).padEnd(18)).join(""));
		} catch (err) {
			console.log(`${label.padEnd(18)}failed: ${err.message.split("\n")[0]}`);
			code = 2;
		}
	}
} catch (e) {
	console.error(`bench: ${e.message}`);
	code = 2;
} finally {
	await handlers.get("session_shutdown")?.({ type: "session_shutdown", reason: "quit" }, ctx);
	rmSync(project, { recursive: true, force: true });
}
process.exit(code);
