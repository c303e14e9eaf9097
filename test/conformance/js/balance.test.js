"use strict";
// Two consumers with the JavaScript SDK's own Blob checkpoint store on
// Azurite share a hub: ownership settles two and two, no partition is read
// by both, and a later consumer resumes after their checkpoints.

const test = require("node:test");
const assert = require("node:assert/strict");
const { earliestEventPosition } = require("@azure/event-hubs");
const { BlobCheckpointStore } = require("@azure/eventhubs-checkpointstore-blob");
const { ContainerClient } = require("@azure/storage-blob");
const { env, producer, consumer, send, eventually } = require("./helpers");

const hub = "js-balance";
const loadBalancingOptions = { strategy: "balanced", updateIntervalInMs: 500, partitionOwnershipExpirationIntervalInMs: 20000 };

// start subscribes to every partition with the checkpoint store and
// checkpoints the last event of every batch.
function start(client, name, seen) {
  const errors = [];
  const sub = client.subscribe(
    {
      processEvents: async (events, ctx) => {
        for (const e of events) seen.push({ consumer: name, partitionId: ctx.partitionId, seq: e.sequenceNumber, body: e.body });
        if (events.length > 0) await ctx.updateCheckpoint(events[events.length - 1]);
      },
      processError: async (err) => { errors.push(err); },
    },
    { startPosition: earliestEventPosition, maxWaitTimeInSeconds: 1 },
  );
  return { sub, errors };
}

test("two consumers balance, then a third resumes from checkpoints", async (t) => {
  const container = new ContainerClient(env("STORAGE_CONNECTION_STRING"), env("JS_BALANCE_CONTAINER"));
  await container.createIfNotExists();
  const store = new BlobCheckpointStore(container);
  const p = producer(hub);
  const a = consumer(hub, { loadBalancingOptions, identifier: "a" }, store);
  const b = consumer(hub, { loadBalancingOptions, identifier: "b" }, store);
  const c = consumer(hub, { loadBalancingOptions, identifier: "c" }, store);
  t.after(async () => {
    await Promise.all([a.close(), b.close(), c.close()]);
    await p.close();
  });
  const ns = a.fullyQualifiedNamespace;
  const ids = await p.getPartitionIds();
  const seen = [];
  const runA = start(a, "a", seen);
  const runB = start(b, "b", seen);

  // Ownership settles at two partitions each and stays so for a while
  // (several update intervals).
  let last = "";
  let stableFor = 0;
  const settled = () => eventually("ownership to settle two and two", async () => {
    const own = await store.listOwnership(ns, hub, "$Default");
    const byOwner = {};
    for (const o of own) (byOwner[o.ownerId] ||= []).push(o.partitionId);
    const counts = Object.values(byOwner).map((l) => l.length).sort();
    const key = JSON.stringify(own.map((o) => [o.partitionId, o.ownerId]).sort());
    stableFor = key === last ? stableFor + 1 : 0;
    last = key;
    return own.length === ids.length && counts.join() === "2,2" && stableFor >= 5 ? own : null;
  });
  const identifiers = { a: a.identifier, b: b.identifier };

  // The ownership blobs move before the links do: a partition's previous
  // owner may read for a moment after the blob names the new one. So probe
  // rounds (one event per partition) run until every probe is read by the
  // owner the blobs name; only then does the checked phase start.
  // Rounds are bounded by time, not by count: on a loaded machine a round
  // takes well under an update interval, so a count alone could run out
  // before the previous owners' links close. A failed round waits one
  // update interval before the next.
  const probeDeadline = Date.now() + 60000;
  let probes = 0;
  let ownerOf;
  for (;;) {
    ownerOf = Object.fromEntries((await settled()).map((o) => [o.partitionId, o.ownerId]));
    const before = seen.length;
    for (const id of ids) await send(p, { partitionId: id }, [`probe-${id}-${probes}`]);
    probes++;
    await eventually("the probe round to be read", () => seen.length >= before + ids.length);
    const round = seen.slice(before);
    if (round.length === ids.length && round.every((s) => identifiers[s.consumer] === ownerOf[s.partitionId])) break;
    assert.ok(Date.now() < probeDeadline, `ownership did not settle onto the readers after ${probes} probe rounds (60 s)`);
    await new Promise((r) => setTimeout(r, loadBalancingOptions.updateIntervalInMs));
  }
  seen.length = 0;

  for (const id of ids) await send(p, { partitionId: id }, Array.from({ length: 10 }, (_, i) => `p${id}-${i}`));
  await eventually("all 40 events to be read", () => seen.length >= 40);
  await eventually("checkpoints at the last event of every partition", async () => {
    const cps = await store.listCheckpoints(ns, hub, "$Default");
    return cps.length === ids.length && cps.every((cp) => cp.sequenceNumber === probes + 9);
  });
  await runA.sub.close();
  await runB.sub.close();

  assert.equal(seen.length, 40, "no event read twice");
  const readers = {};
  for (const s of seen) (readers[s.partitionId] ||= new Set()).add(s.consumer);
  for (const id of ids) {
    assert.equal(readers[id].size, 1, `partition ${id} read by ${[...readers[id]]}`);
    const [reader] = readers[id];
    assert.equal(identifiers[reader], ownerOf[id], `partition ${id} read by its owner`);
    const seqs = seen.filter((s) => s.partitionId === id).map((s) => s.seq);
    assert.deepEqual(seqs, Array.from({ length: 10 }, (_, i) => probes + i), `partition ${id} in order`);
  }

  await t.test("a new consumer resumes after the checkpoints", async () => {
    for (const id of ids) await send(p, { partitionId: id }, Array.from({ length: 5 }, (_, i) => `p${id}-${10 + i}`));
    const resumed = [];
    const runC = start(c, "c", resumed);
    try {
      await eventually("the 20 new events", () => resumed.length >= 20);
    } finally {
      await runC.sub.close();
    }
    for (const id of ids) {
      const seqs = resumed.filter((s) => s.partitionId === id).map((s) => s.seq);
      assert.deepEqual(seqs, Array.from({ length: 5 }, (_, i) => probes + 10 + i), `partition ${id} resumed after its checkpoint`);
    }
  });
});
