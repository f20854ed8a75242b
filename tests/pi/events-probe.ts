/**
 * Test harness: records what the pisb extension tells Pi. Appends JSON lines to
 * $PISB_PROBE_LOG: {"kind":"event",...} for each pisb:sandbox event on Pi's
 * event bus, {"kind":"prompt","systemPrompt":...} at before_agent_start.
 */
import { appendFileSync } from "node:fs";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	const log = (o: unknown) => {
		if (process.env.PISB_PROBE_LOG) appendFileSync(process.env.PISB_PROBE_LOG, `${JSON.stringify(o)}\n`);
	};
	pi.events.on("pisb:sandbox", (e) => log({ kind: "event", ...(e as object) }));
	pi.on("before_agent_start", (e: any) => {
		log({ kind: "prompt", systemPrompt: e.systemPrompt });
	});
}
