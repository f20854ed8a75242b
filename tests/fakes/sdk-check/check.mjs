// Drive the pisb fake OpenSandbox server with the OFFICIAL JavaScript SDK
// (@alibaba-group/opensandbox) and fail on any deviation.
//
// Usage:
//   node check.mjs                      # starts ../opensandbox_server.py itself
//   node check.mjs --port 12345 --api-key KEY   # use an already running fake
//   (or env OPENSANDBOX_FAKE_PORT / OPENSANDBOX_FAKE_API_KEY)
//
// Exit status: 0 when every check passed, 1 otherwise.  Every step is logged.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { ConnectionConfig, Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
function argValue(name) {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

let port = argValue("--port") ?? process.env.OPENSANDBOX_FAKE_PORT;
let apiKey = argValue("--api-key") ?? process.env.OPENSANDBOX_FAKE_API_KEY ?? "sdk-check-key";
let child = null;
let childDir = null;

const failures = [];
let checks = 0;
function log(msg) {
  console.log(`[sdk-check] ${msg}`);
}
function check(cond, what, detail) {
  checks++;
  if (cond) {
    log(`ok   ${what}`);
  } else {
    failures.push(what);
    log(`FAIL ${what}${detail !== undefined ? ` -- got ${JSON.stringify(detail)}` : ""}`);
  }
  return cond;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startFake() {
  childDir = mkdtempSync(join(tmpdir(), "sdk-check-"));
  const portFile = join(childDir, "port");
  const server = join(here, "..", "opensandbox_server.py");
  // the real interpreter, not a wrapper (pyenv shim), so child.kill() hits the fake
  const py = spawnSync("python3", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).stdout?.trim() || "python3";
  child = spawn(py, [server, "--port", "0", "--api-key", apiKey, "--port-file", portFile,
    "--state-dir", join(childDir, "state"), "--stream-grace-ms", "50"], { stdio: ["ignore", "ignore", "inherit"] });
  for (let i = 0; i < 100; i++) {
    if (existsSync(portFile)) {
      const p = readFileSync(portFile, "utf8").trim();
      if (p) return p;
    }
    await sleep(50);
  }
  throw new Error("fake server did not start");
}

async function stats(base) {
  const r = await fetch(`${base}/_fake/stats`);
  return await r.json();
}

async function waitState(sbx, want, timeoutMs = 5000) {
  const seen = [];
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const info = await sbx.getInfo();
    const st = info.status?.state;
    if (seen[seen.length - 1] !== st) seen.push(st);
    if (st === want) return seen;
    await sleep(25);
  }
  return seen;
}

async function main() {
  if (!port) {
    port = await startFake();
    log(`started fake server on 127.0.0.1:${port}`);
  } else {
    log(`using fake server on 127.0.0.1:${port}`);
  }
  const base = `http://127.0.0.1:${port}`;
  const connectionConfig = new ConnectionConfig({ domain: `127.0.0.1:${port}`, apiKey, requestTimeoutSeconds: 20 });

  // ---- create ------------------------------------------------------------
  const t0 = Date.now();
  const sbx = await Sandbox.create({
    connectionConfig,
    image: "python:3.11",
    timeoutSeconds: 600,
    readyTimeoutSeconds: 20,
    metadata: { suite: "pisb-sdk-check" },
    env: { SDK_CHECK_ENV: "from-create" },
  });
  log(`Sandbox.create -> id=${sbx.id} in ${Date.now() - t0} ms`);
  check(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(sbx.id), "sandbox id is a uuid4", sbx.id);
  const info0 = await sbx.getInfo();
  check(info0.status?.state === "Running", "state is Running after create+ready", info0.status);
  check(info0.image?.uri === "python:3.11", "GET returns image.uri", info0.image);
  check(info0.expiresAt instanceof Date && info0.expiresAt > new Date(), "expiresAt is a future Date", info0.expiresAt);
  check(info0.metadata?.suite === "pisb-sdk-check", "metadata round-trips", info0.metadata);
  const ep = await sbx.getEndpoint(44772);
  check(typeof ep.endpoint === "string" && !/^https?:\/\//.test(ep.endpoint), "execd endpoint has no scheme", ep.endpoint);

  const mgr = SandboxManager.create({ connectionConfig });
  const listed = await mgr.listSandboxInfos({ metadata: { suite: "pisb-sdk-check" } });
  check(listed.items.some((s) => s.id === sbx.id), "list with metadata filter finds the sandbox",
    listed.items.map((s) => s.id));

  // ---- command -------------------------------------------------------------
  const ex = await sbx.commands.run("echo hello-from-sdk; echo \"env=$SDK_CHECK_ENV\"; echo to-stderr >&2");
  const out = ex.logs.stdout.map((m) => m.text);
  const err = ex.logs.stderr.map((m) => m.text);
  log(`run echo -> stdout=${JSON.stringify(out)} stderr=${JSON.stringify(err)} exitCode=${ex.exitCode}`);
  check(JSON.stringify(out) === JSON.stringify(["hello-from-sdk", "env=from-create"]), "stdout lines", out);
  check(JSON.stringify(err) === JSON.stringify(["to-stderr"]), "stderr lines", err);
  check(ex.exitCode === 0, "exit code 0", ex.exitCode);
  check(ex.complete && ex.error === undefined, "execution_complete and no error", { complete: ex.complete, error: ex.error });
  check(/^[0-9a-f]{32}$/.test(ex.id ?? ""), "init event carried a 32-hex command id", ex.id);

  const ex7 = await sbx.commands.run("echo before-fail; exit 7");
  log(`run 'exit 7' -> exitCode=${ex7.exitCode} error=${JSON.stringify(ex7.error)}`);
  check(ex7.exitCode === 7, "failing command exit code 7", ex7.exitCode);
  check(ex7.error?.name === "CommandExecError" && ex7.error?.value === "7", "error event CommandExecError/7", ex7.error);
  check(ex7.complete === undefined, "no execution_complete for a failing command", ex7.complete);

  // ---- files ---------------------------------------------------------------
  const text = "line one\nline two ünïcode\n";
  const bin = new Uint8Array([0x00, 0x01, 0xff, 0x0a, 0x0d, 0x00, 0x7f, 0x80]);
  await sbx.files.writeFiles([
    { path: "/workspace/sdk/hello.txt", data: text, mode: 644 },
    { path: "/workspace/sdk/blob.bin", data: bin },
  ]);
  log("writeFiles hello.txt + blob.bin");
  const back = await sbx.files.readFile("/workspace/sdk/hello.txt");
  check(back === text, "readFile returns what was written", back);
  const backBin = await sbx.files.readBytes("/workspace/sdk/blob.bin");
  check(Buffer.from(backBin).equals(Buffer.from(bin)), "readBytes is byte-exact (NUL, 0xff, CR)", Array.from(backBin));
  const fi = await sbx.files.getFileInfo(["/workspace/sdk/hello.txt"]);
  const hi = fi["/workspace/sdk/hello.txt"];
  check(hi?.size === Buffer.byteLength(text) && hi?.mode === 644 && hi?.type === "file", "getFileInfo size/mode/type", hi);
  const found = await sbx.files.search({ path: "/workspace", pattern: "*.bin" });
  check(found.length === 1 && found[0].path === "/workspace/sdk/blob.bin", "search *.bin", found.map((f) => f.path));
  const cat = await sbx.commands.run("cat hello.txt", { workingDirectory: "/workspace/sdk" });
  check(JSON.stringify(cat.logs.stdout.map((m) => m.text)) === JSON.stringify(["line one", "line two ünïcode"]),
    "command sees the uploaded file", cat.logs.stdout.map((m) => m.text));

  // ---- pause / resume --------------------------------------------------------
  await sbx.pause();
  const pauseSeen = await waitState(sbx, "Paused");
  log(`pause -> states seen ${JSON.stringify(pauseSeen)}`);
  check(pauseSeen[pauseSeen.length - 1] === "Paused", "reaches Paused", pauseSeen);
  check(!(await sbx.isHealthy()), "execd unreachable while paused");
  let pauseAgain = null;
  try {
    await sbx.pause();
  } catch (e) {
    pauseAgain = e;
  }
  check(pauseAgain?.statusCode === 409, "pause while Paused -> 409", pauseAgain?.statusCode ?? pauseAgain?.message);

  const sbx2 = await sbx.resume({ readyTimeoutSeconds: 20 });
  const info2 = await sbx2.getInfo();
  log(`resume -> state ${info2.status?.state}`);
  check(info2.status?.state === "Running", "Running after resume()", info2.status);
  const after = await sbx2.files.readFile("/workspace/sdk/hello.txt");
  check(after === text, "file survives pause/resume", after);
  let resumeAgain = null;
  try {
    await mgr.resumeSandbox(sbx.id);
  } catch (e) {
    resumeAgain = e;
  }
  check(resumeAgain?.statusCode === 409, "resume while Running -> 409", resumeAgain?.statusCode ?? resumeAgain?.message);

  // ---- renew ---------------------------------------------------------------
  const before = info2.expiresAt;
  const renewed = await sbx2.renew(1800);
  log(`renew(1800) -> expiresAt ${renewed.expiresAt?.toISOString()} (was ${before?.toISOString()})`);
  check(renewed.expiresAt instanceof Date && renewed.expiresAt > before, "renew moves expiresAt forward", renewed);
  const info3 = await sbx2.getInfo();
  check(info3.expiresAt?.getTime() === renewed.expiresAt?.getTime(), "GET reflects renewed expiresAt",
    [info3.expiresAt, renewed.expiresAt]);

  // ---- kill ----------------------------------------------------------------
  await sbx2.kill();
  log("kill");
  let gone = null;
  try {
    await sbx2.getInfo();
  } catch (e) {
    gone = e;
  }
  check(gone?.statusCode === 404 && gone?.error?.code === "DOCKER::SANDBOX_NOT_FOUND", "GET after kill -> 404 SANDBOX_NOT_FOUND",
    { status: gone?.statusCode, code: gone?.error?.code });

  // ---- what went over the wire ---------------------------------------------
  const s = await stats(base);
  const r = s.by_route;
  check((r["POST /v1/sandboxes"] ?? 0) === 1, "exactly one create request", r["POST /v1/sandboxes"]);
  check((r["GET /v1/sandboxes/{id}/endpoints/{port}"] ?? 0) >= 4, "endpoint resolved for 44772+18080 on create and on resume",
    r["GET /v1/sandboxes/{id}/endpoints/{port}"]);
  check((r["POST /v1/sandboxes/{id}/renew-expiration"] ?? 0) === 1, "one renew request", r["POST /v1/sandboxes/{id}/renew-expiration"]);
  check((r["DELETE /v1/sandboxes/{id}"] ?? 0) === 1, "one delete request", r["DELETE /v1/sandboxes/{id}"]);
  log(`routes used: ${JSON.stringify(r)}`);

  await sbx.close();
  await sbx2.close();
  await mgr.close();
}

let crashed = null;
try {
  await main();
} catch (e) {
  crashed = e;
  console.error("[sdk-check] FAIL unexpected exception:", e?.name, e?.statusCode ?? "", e?.message);
  if (e?.rawBody !== undefined) console.error("[sdk-check] raw body:", JSON.stringify(e.rawBody));
  if (e?.stack) console.error(e.stack);
} finally {
  if (child) {
    child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
  }
  if (childDir) rmSync(childDir, { recursive: true, force: true });
}
if (crashed || failures.length) {
  console.log(`[sdk-check] FAILED: ${failures.length} of ${checks} checks failed${crashed ? " + exception" : ""}`);
  for (const f of failures) console.log(`[sdk-check]   - ${f}`);
  process.exit(1);
}
console.log(`[sdk-check] PASSED: ${checks} checks`);
process.exit(0);
