#!/usr/bin/env node
// Test harness: drives a real Pi AgentSession through the SDK, with the
// scripted (faux) model, for what Pi's CLI modes cannot script in 0.73.1:
// aborting a running tool call, and the user's ! / !! commands.
//
//   node drive.mjs EXTENSION_DIR
//     PI_SCRIPT         JSON steps for the scripted model (see scripted-provider.ts);
//                       a step {"host": "CMD"} ends one prompt, runs CMD on the host
//                       (sh -c, e.g. `pisb stop NAME`) and starts the next prompt;
//                       a step {"prompt": "/cmd ARGS"} ends one prompt and sends
//                       that text as the user's (an extension command runs)
//     DRIVE_UI=1        bind a UI whose notify() is printed as {"type":"notify",...},
//                       setStatus() as {"type":"status",...} and confirm() as
//                       {"type":"confirm",...}; confirm answers no
//     DRIVE_CONFIRM=1   confirm() answers yes
//     DRIVE_ABORT_MS    abort the agent this many ms after the first tool starts
//     DRIVE_USER_BASH   JSON array of user commands, run after the prompt as !CMD
//                       (a leading "!" in an entry means !!, excluded from context)
// Prints JSON lines: {"type":"tool",...} per finished tool call, {"type":"user_bash",...}
// per user command, {"type":"done"} at the end. A tool's text leaves out the
// extension's one-line project note (a text item starting "\n[pisb] "): that is its "note". Runs session_start and session_shutdown.
import { execSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fauxAssistantMessage, fauxToolCall, registerFauxProvider } from "@mariozechner/pi-ai";
import {
	AuthStorage,
	createAgentSession,
	DefaultResourceLoader,
	ModelRegistry,
	SessionManager,
	SettingsManager,
} from "@mariozechner/pi-coding-agent";

const extDir = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, "../../extensions/pi"));
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const cwd = process.cwd();
const agentDir = process.env.PI_CODING_AGENT_DIR ?? mkdtempSync(path.join(tmpdir(), "pi-agent-"));

const faux = registerFauxProvider();
const model = faux.getModel();
const steps = process.env.PI_SCRIPT ? JSON.parse(readFileSync(process.env.PI_SCRIPT, "utf8")) : [];
const segments = [[]];
for (const s of steps) {
	if (s.host !== undefined) segments.push({ host: s.host }, []);
	else if (s.prompt !== undefined) segments.push({ prompt: s.prompt }, []);
	else segments[segments.length - 1].push(s);
}
const toMessage = (s) =>
	s.tools
		? fauxAssistantMessage(
				s.tools.map((t, i) => fauxToolCall(t.name, t.args, { id: t.id ?? `call-${t.name}-${i}` })),
				{ stopReason: "toolUse" },
			)
		: fauxAssistantMessage(String(s.text));
const authStorage = AuthStorage.inMemory();
authStorage.setRuntimeApiKey(model.provider, "none");
const settingsManager = SettingsManager.inMemory({ compaction: { enabled: false } });
const resourceLoader = new DefaultResourceLoader({
	cwd,
	agentDir,
	settingsManager,
	additionalExtensionPaths: [extDir],
});
await resourceLoader.reload();
const { session, extensionsResult } = await createAgentSession({
	cwd,
	agentDir,
	model,
	authStorage,
	modelRegistry: ModelRegistry.inMemory(authStorage),
	settingsManager,
	resourceLoader,
	sessionManager: SessionManager.inMemory(),
	thinkingLevel: "off",
	tools: ["bash", "read", "write", "edit", "ls", "find", "grep", "sandbox"],
});
for (const e of extensionsResult?.errors ?? []) out({ type: "load_error", error: String(e.error ?? e) });
// a UI that records notifications (the rest does nothing): opt-in, since it
// makes ctx.hasUI true
const recordingUI = new Proxy(
	{
		notify: (message, level) => out({ type: "notify", message, level }),
		setStatus: (key, text) => out({ type: "status", key, text }),
		confirm: async (title, message) => {
			out({ type: "confirm", title, message });
			return Boolean(process.env.DRIVE_CONFIRM);
		},
		select: async () => undefined,
		input: async () => undefined,
	},
	{ get: (t, k) => (k in t ? t[k] : () => undefined) },
);
await session.bindExtensions(process.env.DRIVE_UI ? { uiContext: recordingUI } : {});

let abortTimer;
session.subscribe((ev) => {
	if (ev.type === "tool_execution_start" && process.env.DRIVE_ABORT_MS && !abortTimer)
		abortTimer = setTimeout(() => session.abort(), Number(process.env.DRIVE_ABORT_MS));
	if (ev.type === "tool_execution_end") {
		const items = ev.result?.content ?? [];
		const isNote = (c) => typeof c.text === "string" && c.text.startsWith("\n[pisb] ");
		const text = items.filter((c) => !isNote(c)).map((c) => c.text ?? "").join("");
		const note = items.filter(isNote).map((c) => c.text.slice(1)).join("");
		out({ type: "tool", toolName: ev.toolName, isError: Boolean(ev.isError), text, note, details: ev.result?.details });
	}
});
const t0 = Date.now();
for (const seg of segments) {
	if (!Array.isArray(seg) && seg.prompt !== undefined) {
		await session.prompt(seg.prompt);
		out({ type: "prompt", text: seg.prompt });
		continue;
	}
	if (!Array.isArray(seg)) {
		try {
			execSync(seg.host, { stdio: "ignore", shell: "/bin/sh" });
			out({ type: "host", command: seg.host, status: 0 });
		} catch (e) {
			out({ type: "host", command: seg.host, status: e.status ?? 1 });
		}
		continue;
	}
	if (!seg.length) continue;
	faux.setResponses([...seg, { text: "done" }].map(toMessage));
	await session.prompt("go");
}
for (let cmd of JSON.parse(process.env.DRIVE_USER_BASH ?? "[]")) {
	const excludeFromContext = cmd.startsWith("!");
	if (excludeFromContext) cmd = cmd.slice(1);
	// what Pi's interactive mode does for !CMD / !!CMD
	const ev = await session.extensionRunner.emitUserBash({ type: "user_bash", command: cmd, excludeFromContext, cwd });
	try {
		const r = ev?.result ?? (await session.executeBash(cmd, undefined, { excludeFromContext, operations: ev?.operations }));
		out({ type: "user_bash", command: cmd, handled: Boolean(ev?.operations || ev?.result), output: r.output, exitCode: r.exitCode, cancelled: r.cancelled });
	} catch (e) {
		out({ type: "user_bash", command: cmd, handled: Boolean(ev?.operations || ev?.result), error: e?.message ?? String(e) });
	}
}
await session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" });
session.dispose();
out({ type: "done", ms: Date.now() - t0 });
process.exit(0);
