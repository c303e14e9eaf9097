"use strict";
// Owner level (epoch) receivers: a higher owner level steals the
// partition, and the SDK reports ReceiverDisconnectedError with the
// service's text to the receiver that lost it; a lower one is refused.

const test = require("node:test");
const assert = require("node:assert/strict");
const { earliestEventPosition } = require("@azure/event-hubs");
const { producer, consumer, send, collect, eventually } = require("./helpers");

const hub = "js-epoch";
const partitionId = "0";

test("owner levels", async (t) => {
  const p = producer(hub);
  const clients = ["first", "second", "third"].map((identifier) => consumer(hub, { identifier }));
  const subs = [];
  t.after(async () => {
    await Promise.all(subs.map((s) => s.close()));
    await Promise.all(clients.map((c) => c.close()));
    await p.close();
  });
  await send(p, { partitionId }, ["0", "1", "2"]);
  const stolenCode = (errors) => errors.find((e) => e.code === "ReceiverDisconnectedError");

  const first = collect(clients[0], partitionId, { startPosition: earliestEventPosition, ownerLevel: 1 });
  subs.push(first);
  await eventually("the first receiver to read", () => first.events.length >= 3);

  const second = collect(clients[1], partitionId, { startPosition: earliestEventPosition, ownerLevel: 2 });
  subs.push(second);

  await t.test("a higher owner level steals", async () => {
    await eventually("the second receiver to read", () => second.events.length >= 3);
    assert.deepEqual(second.events.slice(0, 3).map((e) => e.sequenceNumber), [0, 1, 2]);
    const err = await eventually("the first receiver to be told", () => stolenCode(first.errors));
    assert.equal(err.name, "MessagingError");
    assert.equal(err.retryable, false);
    assert.match(err.message, /New receiver '.*' with higher epoch of '2' is created hence current receiver '.*' with epoch '1' is getting disconnected/);
  });

  await t.test("a lower owner level is refused", async () => {
    const third = collect(clients[2], partitionId, { startPosition: earliestEventPosition, ownerLevel: 1 });
    subs.push(third);
    const err = await eventually("the lower owner level to be refused", () => stolenCode(third.errors));
    assert.match(err.message, /with a higher epoch '2' already exists/);
    assert.equal(third.events.length, 0);
    assert.equal(stolenCode(second.errors), undefined, "the owner keeps the partition");
  });
});
