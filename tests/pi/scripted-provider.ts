/**
 * Test harness: a model that plays a script instead of calling an LLM.
 * PI_SCRIPT names a JSON file: an array of steps, each either
 *   {"tools": [{"name": "bash", "args": {...}}, ...]}  -> one assistant message with tool calls
 *   {"text": "..."}                                     -> a final assistant message
 * In tool arguments, the string "{{fullOutputPath}}" stands for the last
 * "Full output: PATH" that a tool result named (Pi's saved bash output).
 * Built on pi-ai's faux provider; legacy package names so Pi 0.73.1 and current Pi both load it.
 * The faux stream is handed to Pi's registerProvider too: the interactive
 * mode refreshes the model registry (resetApiProviders), which drops the
 * faux registration ("No API provider registered for api: scripted-api")
 * and keeps only what was registered through Pi.
 */
import { readFileSync } from "node:fs";
import { fauxAssistantMessage, fauxToolCall, getApiProvider, registerFauxProvider } from "@mariozechner/pi-ai";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	const faux = registerFauxProvider({ api: "scripted-api", provider: "scripted", models: [{ id: "m1" }] });
	const file = process.env.PI_SCRIPT;
	const steps: any[] = file ? JSON.parse(readFileSync(file, "utf8")) : [{ text: "no script" }];
	const lastFullOutput = (context: any): string => {
		let found = "";
		for (const m of context?.messages ?? [])
			for (const c of Array.isArray(m?.content) ? m.content : [])
				for (const hit of String(c?.text ?? "").matchAll(/Full output: (\S+?)\]?$/gm)) found = hit[1];
		return found;
	};
	faux.setResponses(
		steps.map((s) =>
			s.tools
				? (context: any) =>
						fauxAssistantMessage(
							s.tools.map((t: any, i: number) => {
								const args = JSON.parse(JSON.stringify(t.args).replaceAll("{{fullOutputPath}}", lastFullOutput(context)));
								return fauxToolCall(t.name, args, { id: t.id ?? `call-${t.name}-${i}` });
							}),
							{ stopReason: "toolUse" },
						)
				: fauxAssistantMessage(String(s.text ?? "done")),
		),
	);
	const streamSimple = getApiProvider(faux.api as any)?.streamSimple;
	pi.registerProvider("scripted", {
		...(streamSimple ? { streamSimple: streamSimple as any } : {}),
		baseUrl: "http://127.0.0.1:9",
		apiKey: "none",
		api: "scripted-api" as any,
		models: [
			{
				id: "m1",
				name: "m1",
				reasoning: false,
				input: ["text"],
				cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
				contextWindow: 100000,
				maxTokens: 4096,
			},
		],
	});
}
