/**
 * Test harness: a model that plays a script instead of calling an LLM.
 * PI_SCRIPT names a JSON file: an array of steps, each either
 *   {"tools": [{"name": "bash", "args": {...}}, ...]}  -> one assistant message with tool calls
 *   {"text": "..."}                                     -> a final assistant message
 * Built on pi-ai's faux provider; legacy package names so Pi 0.73.1 and current Pi both load it.
 */
import { readFileSync } from "node:fs";
import { fauxAssistantMessage, fauxToolCall, registerFauxProvider } from "@mariozechner/pi-ai";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	const faux = registerFauxProvider({ api: "scripted-api", provider: "scripted", models: [{ id: "m1" }] });
	const file = process.env.PI_SCRIPT;
	const steps: any[] = file ? JSON.parse(readFileSync(file, "utf8")) : [{ text: "no script" }];
	faux.setResponses(
		steps.map((s) =>
			s.tools
				? fauxAssistantMessage(
						s.tools.map((t: any, i: number) => fauxToolCall(t.name, t.args, { id: t.id ?? `call-${t.name}-${i}` })),
						{ stopReason: "toolUse" },
					)
				: fauxAssistantMessage(String(s.text ?? "done")),
		),
	);
	pi.registerProvider("scripted", {
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
