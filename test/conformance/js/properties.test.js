"use strict";
// Hub and partition properties through the $management node.

const test = require("node:test");
const assert = require("node:assert/strict");
const { earliestEventPosition } = require("@azure/event-hubs");
const { producer, consumer, send, receive } = require("./helpers");

const hub = "js-props";

test("event hub properties", async () => {
  const p = producer(hub);
  try {
    const props = await p.getEventHubProperties();
    assert.equal(props.name, hub);
    assert.deepEqual(props.partitionIds, ["0", "1", "2"]);
    assert.ok(props.createdOn instanceof Date && !Number.isNaN(props.createdOn.getTime()), "createdOn is a date");
    assert.deepEqual(await p.getPartitionIds(), ["0", "1", "2"]);
  } finally {
    await p.close();
  }
});

test("partition properties follow the events", async () => {
  const p = producer(hub);
  const c = consumer(hub);
  try {
    const empty = await p.getPartitionProperties("2");
    assert.equal(empty.partitionId, "2");
    assert.equal(empty.eventHubName, hub);
    assert.equal(empty.isEmpty, true);
    assert.equal(empty.lastEnqueuedSequenceNumber, -1);

    await send(p, { partitionId: "1" }, ["a", "b"]);
    const events = await receive(c, "1", earliestEventPosition, 2);
    const props = await c.getPartitionProperties("1");
    assert.equal(props.isEmpty, false);
    assert.equal(props.beginningSequenceNumber, 0);
    assert.equal(props.lastEnqueuedSequenceNumber, 1);
    assert.equal(String(props.lastEnqueuedOffset), String(events[1].offset));
    assert.equal(props.lastEnqueuedOnUtc.getTime(), events[1].enqueuedTimeUtc.getTime());
  } finally {
    await c.close();
    await p.close();
  }
});

test("an unknown partition is refused", async () => {
  const p = producer(hub);
  try {
    await assert.rejects(p.getPartitionProperties("9"), (err) => {
      assert.match(`${err.code} ${err.message}`, /partition|ArgumentOutOfRange|not.?found/i);
      return true;
    });
  } finally {
    await p.close();
  }
});
