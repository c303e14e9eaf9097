"use strict";
// Sending batches with partition keys and to explicit partitions, and
// receiving them from the earliest position with order and keys kept.

const test = require("node:test");
const assert = require("node:assert/strict");
const { earliestEventPosition } = require("@azure/event-hubs");
const { producer, consumer, send, receive } = require("./helpers");

const hub = "js-send";

test("batches with partition keys and to explicit partitions", async () => {
  const p = producer(hub);
  const c = consumer(hub);
  try {
    const keyed = { alpha: [], beta: [] };
    for (const key of Object.keys(keyed)) {
      keyed[key] = Array.from({ length: 5 }, (_, i) => `${key}-${i}`);
      await send(p, { partitionKey: key }, keyed[key]);
    }
    const explicit = Array.from({ length: 5 }, (_, i) => `explicit-${i}`);
    await send(p, { partitionId: "3" }, explicit.slice(0, 3));
    // sendBatch with an array and options, the other send form.
    await p.sendBatch(explicit.slice(3).map((body) => ({ body })), { partitionId: "3" });
    await p.sendBatch([{ body: "alpha-5" }], { partitionKey: "alpha" });
    keyed.alpha.push("alpha-5");

    const props = await p.getEventHubProperties();
    const byPartition = {};
    let total = 0;
    for (const id of props.partitionIds) {
      const pp = await p.getPartitionProperties(id);
      const n = pp.isEmpty ? 0 : pp.lastEnqueuedSequenceNumber + 1;
      total += n;
      byPartition[id] = n === 0 ? [] : await receive(c, id, earliestEventPosition, n);
    }
    assert.equal(total, 16, "every event stored once");
    assert.deepEqual(byPartition["3"].filter((e) => String(e.body).startsWith("explicit")).map((e) => e.body), explicit,
      "explicit-partition events in order on partition 3");

    for (const [key, bodies] of Object.entries(keyed)) {
      const homes = Object.entries(byPartition).filter(([, evs]) => evs.some((e) => e.partitionKey === key));
      assert.equal(homes.length, 1, `every event of key ${key} on one partition`);
      const [, evs] = homes[0];
      const mine = evs.filter((e) => e.partitionKey === key);
      assert.deepEqual(mine.map((e) => e.body), bodies, `key ${key}: order kept`);
    }
    for (const evs of Object.values(byPartition)) {
      evs.forEach((e, i) => assert.equal(e.sequenceNumber, i, "sequence numbers count from 0 without gaps"));
      for (const e of evs) {
        if (String(e.body).startsWith("explicit")) assert.equal(e.partitionKey, undefined, "no key on explicit sends");
      }
    }
  } finally {
    await c.close();
    await p.close();
  }
});
