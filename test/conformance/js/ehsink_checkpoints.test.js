"use strict";
// Checkpoints ehsink wrote to Blob Storage (its checkpoint package, over
// the emulator's connection string) are read by the JavaScript SDK's Blob
// checkpoint store, and a JavaScript consumer resumes right after them.

const test = require("node:test");
const assert = require("node:assert/strict");
const { BlobCheckpointStore } = require("@azure/eventhubs-checkpointstore-blob");
const { ContainerClient } = require("@azure/storage-blob");
const { env, consumer, eventually } = require("./helpers");

const hub = "js-ehsink";

test("ehsink's Blob checkpoints", async (t) => {
  const container = new ContainerClient(env("STORAGE_CONNECTION_STRING"), env("EHSINK_CHECKPOINT_CONTAINER"));
  const store = new BlobCheckpointStore(container);
  const want = JSON.parse(env("EHSINK_CHECKPOINTS")); // {partition: {sequenceNumber, offset}}
  // Greedy: claim every partition at once rather than one per update interval.
  const c = consumer(hub, { loadBalancingOptions: { strategy: "greedy", updateIntervalInMs: 500 } }, store);
  t.after(() => c.close());
  // The JavaScript SDK names an emulator endpoint's namespace after the
  // host alone; ehsink writes a copy of its checkpoints there.
  assert.equal(c.fullyQualifiedNamespace, "127.0.0.1");

  await t.test("are listed by the JavaScript checkpoint store", async () => {
    const cps = await store.listCheckpoints(c.fullyQualifiedNamespace, hub, "$Default");
    const got = Object.fromEntries(cps.map((cp) => [cp.partitionId, { sequenceNumber: cp.sequenceNumber, offset: String(cp.offset) }]));
    assert.deepEqual(got, want);
  });

  await t.test("a JavaScript consumer resumes after them", async () => {
    const seen = {};
    const sub = c.subscribe(
      {
        processEvents: async (events, ctx) => {
          for (const e of events) (seen[ctx.partitionId] ||= []).push(e.sequenceNumber);
        },
        processError: async () => {},
      },
      { maxWaitTimeInSeconds: 1 },
    );
    try {
      await eventually("events on every partition", () =>
        Object.keys(want).every((id) => (seen[id] || []).length >= 10 - (want[id].sequenceNumber + 1)));
    } finally {
      await sub.close();
    }
    for (const [id, cp] of Object.entries(want)) {
      assert.equal(seen[id][0], cp.sequenceNumber + 1, `partition ${id} starts right after ehsink's checkpoint`);
    }
  });
});
