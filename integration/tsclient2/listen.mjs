// The official MCP TypeScript SDK v2 client, driven by
// integration/tsclient2_test.go: it negotiates the newest revision the
// server offers over the plan's transport, asks to be told of the
// violations resource's updates (subscriptions/listen on 2026-07-28,
// resources/subscribe on an older revision), makes a call that is refused,
// stops listening, makes it again, and prints one JSON line of what it saw.
//
// usage: node listen.mjs PLAN.json
//   plan: {transport: "stdio"|"http", command, args, env, cwd, url, path}
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const violationsURI = "evener://session/violations";
const transport = plan.transport === "http"
  ? new StreamableHTTPClientTransport(new URL(plan.url))
  : new StdioClientTransport({ command: plan.command, args: plan.args, env: plan.env, cwd: plan.cwd, stderr: "inherit" });
const client = new Client({ name: "evener-tsclient2", version: "1" }, { versionNegotiation: { mode: "auto" } });
const errors = [];
client.onerror = (e) => errors.push(String(e && e.message || e));
const updates = [];
let inCall = false, early = 0;
client.setNotificationHandler("notifications/resources/updated", (n) => {
  updates.push(n.params);
  if (inCall) early++;
});
const wait = (ms) => new Promise((r) => setTimeout(r, ms));

await client.connect(transport);
const version = client.getNegotiatedProtocolVersion();
let honored = null, closed = null, stop;
if (version >= "2026-07-28") {
  const sub = await client.listen({ resourceSubscriptions: [violationsURI], promptsListChanged: true });
  honored = sub.honoredFilter;
  stop = async () => { await sub.close(); closed = await sub.closed; };
} else {
  await client.subscribeResource({ uri: violationsURI });
  stop = () => client.unsubscribeResource({ uri: violationsURI });
}
inCall = true;
const first = await client.callTool({ name: "read_file", arguments: { path: plan.path } });
inCall = false;
for (let i = 0; i < 50 && updates.length === 0; i++) await wait(100);
const told = updates.length;
await stop();
await client.callTool({ name: "read_file", arguments: { path: plan.path } });
await wait(1000);
process.stdout.write(JSON.stringify({ version, honored, denied: first.isError === true, told, early, after: updates.length - told, updates, closed, errors }) + "\n");
await client.close();
