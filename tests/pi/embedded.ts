/**
 * Test harness: the pisb extension embedded the seed's way, as a factory with
 * options, for what the environment variables cannot say. PISB_TEST_READY_THROW
 * set: the onSandboxEvent callback throws on "ready" (the seed: the sandbox is
 * cleaned up and the session has none). Events are appended to $PISB_PROBE_LOG.
 */
import { appendFileSync } from "node:fs";
import { createPisbExtension } from "../../extensions/pi/index.ts";

export default createPisbExtension({
	onSandboxEvent: (e) => {
		if (process.env.PISB_PROBE_LOG) appendFileSync(process.env.PISB_PROBE_LOG, `${JSON.stringify({ kind: "callback", ...e })}\n`);
		if (e.phase === "ready" && process.env.PISB_TEST_READY_THROW) throw new Error(process.env.PISB_TEST_READY_THROW);
	},
});
