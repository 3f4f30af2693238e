// A client of `fleetplan serve` in another language (Node 18+, no packages): concurrent clients
// for a bounded time, written against the service's OpenAPI document (read first: the routes
// and the error shape it promises are checked before the load starts).
//
//   node benchmarks/scripts/service_client.mjs URL TOKEN INSTANCE.json [--clients 8] [--seconds 20]
//
// Each client POSTs /v1/solve with the instance and its own seed, and checks every answer: 200
// with a plan whose options echo that seed, or 202 with an id that it then polls to the end.
// Every 20th request is a misspelled field ("solvr"), which must be a 422 in the documented
// error shape naming it. Prints one JSON line: sent, answered, lost, answers by code, wrong
// answers, throughput, p50/p99 of the valid solves.

import { readFileSync } from "node:fs";

const [url, token, instancePath, ...rest] = process.argv.slice(2);
const flag = (name, fallback) => {
  const at = rest.indexOf(name);
  return at >= 0 ? Number(rest[at + 1]) : fallback;
};
const clients = flag("--clients", 8);
const seconds = flag("--seconds", 20);
const headers = { "Content-Type": "application/json", Authorization: `Bearer ${token}` };
const instance = JSON.parse(readFileSync(instancePath, "utf8"));

const documentAnswer = await fetch(`${url}/openapi.json`, { headers });
const document = await documentAnswer.json();
const solve = document.paths["/v1/solve"].post;
const errorShape = document.components.schemas.ErrorBody;
if (!solve || !errorShape || !solve.responses["422"] || !errorShape.required.includes("error")) {
  throw new Error("the OpenAPI document does not describe /v1/solve and its error shape");
}

const codes = {};
const latencies = [];
let sent = 0, answered = 0, wrong = 0;
const stopAt = Date.now() + seconds * 1000;

async function poll(id) {
  for (let k = 0; k < 600; k++) {
    const state = await (await fetch(`${url}/v1/jobs/${id}`, { headers })).json();
    if (["done", "failed", "cancelled"].includes(state.state)) return state;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`job ${id} did not end`);
}

async function client(number) {
  for (let k = 0; Date.now() < stopAt && k < 5000; k++) {
    const seed = number * 100000 + k;
    const bad = k % 20 === 19;
    const body = bad ? { instance, solvr: "max-min-fairness" } : { instance, seed };
    const started = performance.now();
    sent += 1;
    let answer;
    try {
      answer = await fetch(`${url}/v1/solve`, { method: "POST", headers, body: JSON.stringify(body) });
    } catch {
      continue; // counted as lost
    }
    let data = await answer.json();
    let code = answer.status;
    if (code === 202) {
      const state = await poll(data.id);
      code = state.http;
      data = state.result;
    }
    answered += 1;
    codes[code] = (codes[code] || 0) + 1;
    if (bad) {
      if (code !== 422 || data.path !== "solvr" || typeof data.error !== "string") wrong += 1;
    } else if (code !== 200 || data.plan.options.seed !== seed) {
      wrong += 1;
    } else {
      latencies.push(performance.now() - started);
    }
  }
}

const began = performance.now();
await Promise.all(Array.from({ length: clients }, (_, number) => client(number)));
const elapsed = (performance.now() - began) / 1000;
latencies.sort((a, b) => a - b);
const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
console.log(JSON.stringify({
  clients, seconds: Number(elapsed.toFixed(1)), sent, answered, lost: sent - answered, codes, wrong,
  throughput_per_s: Number((answered / elapsed).toFixed(2)),
  p50_ms: Number(at(0.5).toFixed(1)), p99_ms: Number(at(0.99).toFixed(1)),
}));
