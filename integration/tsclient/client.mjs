// The official MCP TypeScript SDK v1 client, driven by integration/tsclient_test.go
// as an agent host would drive evener-mcp: connect, list the tools first (so
// the SDK validates every structured result against its output schema),
// then make the plan's calls and print one JSON line per call.
//
// usage: node client.mjs PLAN.json
//   plan: {transport: "stdio"|"http", command, args, env, cwd, url,
//          setLevel, calls: [{name, arguments, progress}], repeat, concurrency,
//          violations: subscribe to the violations resource first, list and
//          read it last}
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const transport = plan.transport === "http"
  ? new StreamableHTTPClientTransport(new URL(plan.url))
  : new StdioClientTransport({ command: plan.command, args: plan.args, env: plan.env, cwd: plan.cwd, stderr: "inherit" });

const client = new Client({ name: "evener-tsclient", version: "1" }, { capabilities: {} });
// The SDK reports a progress notification for a token whose request has
// already completed as an error: that is a notification after its result.
let late = 0;
const errors = [];
client.onerror = (e) => {
  const m = String(e && e.message || e);
  if (/progress notification for an unknown token/i.test(m)) { late++; if (late <= 3) errors.push("late: " + m); }
  else errors.push(m);
};
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
const violationsURI = "evener://session/violations";
let updates = 0;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { if (n.params.uri === violationsURI) updates++; });

await client.connect(transport);
const listed = await client.listTools();
out({ listed: listed.tools.map((t) => t.name), outputSchemas: listed.tools.filter((t) => t.outputSchema).length });
if (plan.setLevel) await client.setLoggingLevel(plan.setLevel);
if (plan.violations) await client.subscribeResource({ uri: violationsURI });

const calls = [];
for (let r = 0; r < (plan.repeat || 1); r++) for (const c of plan.calls) calls.push(c);
let next = 0;
let progressEvents = 0;
async function worker() {
  while (next < calls.length) {
    const i = next++;
    const c = calls[i];
    const opts = { timeout: 120000 };
    if (c.progress) opts.onprogress = () => { progressEvents++; };
    try {
      const res = await client.callTool({ name: c.name, arguments: c.arguments }, undefined, opts);
      out({ i, name: c.name, ok: true, isError: !!res.isError, text: (res.content || []).filter((x) => x.type === "text").map((x) => x.text).join(""),
        contentTypes: (res.content || []).map((x) => x.type), structured: res.structuredContent ?? null, meta: res._meta ?? null });
    } catch (e) {
      out({ i, name: c.name, ok: false, error: String(e && e.message || e), code: e && e.code });
    }
  }
}
await Promise.all(Array.from({ length: plan.concurrency || 1 }, worker));
// Let any straggling notification arrive before counting.
await new Promise((r) => setTimeout(r, 300));
let resources = null, violations = null;
if (plan.violations) {
  resources = (await client.listResources()).resources.map((r) => r.uri + " " + r.mimeType);
  const read = await client.readResource({ uri: violationsURI });
  violations = JSON.parse(read.contents[0].text).violations;
}
out({ done: true, late, progressEvents, errors, logs, updates, resources, violations });
await client.close();
process.exit(0);
