// The gateway's speed as an agent host sees it, measured with the official
// MCP TypeScript SDK v1 client: each side (a server run directly, the same
// server behind evener-mcp) gets its own client; after a warm-up the sides
// take turns, a short round of sequential calls each, in an order that
// flips every round; the median of the per-round ratios to the first side
// is printed with the totals. Driven by integration/bench_gateway_test.go.
//
// usage: node bench.mjs PLAN.json
//   plan: {sides: [{name, command, args, env, cwd, tool}], arguments, rounds, per, warm}
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const sides = [];
for (const s of plan.sides) {
  const transport = new StdioClientTransport({ command: s.command, args: s.args, env: s.env, cwd: s.cwd, stderr: "ignore" });
  const client = new Client({ name: "evener-tsbench", version: "1" }, { capabilities: {} });
  await client.connect(transport);
  await client.listTools();
  sides.push({ ...s, client, total: 0, last: 0, ratios: [] });
}
async function run(s, n) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const res = await client(s).callTool({ name: s.tool, arguments: plan.arguments });
    if (res.isError) throw new Error(s.name + ": " + JSON.stringify(res.content));
  }
  return performance.now() - t0;
}
function client(s) { return s.client; }
for (const s of sides) await run(s, plan.warm || 200);
for (let r = 0; r < plan.rounds; r++) {
  const order = r % 2 ? [...sides].reverse() : sides;
  for (const s of order) { s.last = await run(s, plan.per); s.total += s.last; }
  for (const s of sides) s.ratios.push(s.last / sides[0].last);
}
const median = (xs) => { const v = [...xs].sort((a, b) => a - b); return v[Math.floor(v.length / 2)]; };
const out = {};
for (const s of sides) {
  out[s.name + "-us/call"] = (s.total * 1000) / (plan.rounds * plan.per);
  out[s.name + "-ratio"] = median(s.ratios);
  out[s.name + "-ratio-total"] = s.total / sides[0].total;
}
process.stdout.write(JSON.stringify(out) + "\n");
for (const s of sides) await s.client.close();
