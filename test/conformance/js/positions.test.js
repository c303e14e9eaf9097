"use strict";
// Every start position form: sequence number, offset and enqueued time
// (exclusive and inclusive where the SDK has both), earliest and latest.

const test = require("node:test");
const assert = require("node:assert/strict");
const { earliestEventPosition, latestEventPosition } = require("@azure/event-hubs");
const { producer, consumer, send, receive } = require("./helpers");

const hub = "js-positions";
const partitionId = "1";

test("start positions", async (t) => {
  const p = producer(hub);
  const c = consumer(hub);
  t.after(async () => {
    await c.close();
    await p.close();
  });
  await send(p, { partitionId }, ["0", "1", "2", "3", "4"]);
  const all = await receive(c, partitionId, earliestEventPosition, 5);
  assert.deepEqual(all.map((e) => e.sequenceNumber), [0, 1, 2, 3, 4]);

  const cases = [
    ["sequence number, exclusive", { sequenceNumber: 1 }, 2],
    ["sequence number, inclusive", { sequenceNumber: 1, isInclusive: true }, 1],
    ["offset, exclusive", { offset: all[2].offset }, 3],
    ["offset, inclusive", { offset: all[2].offset, isInclusive: true }, 2],
    ["enqueued time", { enqueuedOn: new Date(all[0].enqueuedTimeUtc.getTime() - 1) }, 0],
    ["earliest", earliestEventPosition, 0],
  ];
  for (const [name, position, first] of cases) {
    await t.test(name, async () => {
      const [ev] = await receive(c, partitionId, position, 1);
      assert.equal(ev.sequenceNumber, first);
      assert.equal(ev.body, String(first));
    });
  }

  await t.test("latest", async () => {
    // Markers are sent until one arrives: the receiver attaches at some
    // point, and must then see only events sent after that point.
    let n = 0;
    const sender = setInterval(() => {
      send(p, { partitionId }, [`marker-${n++}`]).catch(() => {});
    }, 300);
    try {
      const [ev] = await receive(c, partitionId, latestEventPosition, 1);
      assert.match(String(ev.body), /^marker-/, "latest never replays history");
      assert.ok(ev.sequenceNumber >= 5);
    } finally {
      clearInterval(sender);
    }
  });
});
