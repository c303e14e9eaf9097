"use strict";
// Shared helpers of the JavaScript conformance suite. The suite is run by
// conformance/js/js_test.go (go test), which starts the emulator and
// Azurite and passes their connection strings in the environment.

const { EventHubConsumerClient, EventHubProducerClient } = require("@azure/event-hubs");

// hangBoundMs bounds a wait for events so a broken emulator fails the test
// instead of hanging it; it is not a speed assertion.
const hangBoundMs = 90_000;

function env(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run this suite with go test ./conformance/js`);
  }
  return v;
}

// namespaceConnectionString is the emulator's connection string without
// EntityPath, with UseDevelopmentEmulator=true (plain AMQP on its port).
function namespaceConnectionString() {
  return env("EH_CONNECTION_STRING");
}

function producer(hub) {
  return new EventHubProducerClient(namespaceConnectionString(), hub);
}

function consumer(hub, options, checkpointStore) {
  if (checkpointStore) {
    return new EventHubConsumerClient("$Default", namespaceConnectionString(), hub, checkpointStore, options);
  }
  return new EventHubConsumerClient("$Default", namespaceConnectionString(), hub, options);
}

// send sends bodies in one batch with the batch options (partitionKey or
// partitionId).
async function send(p, batchOptions, bodies) {
  const batch = await p.createBatch(batchOptions);
  for (const body of bodies) {
    if (!batch.tryAdd({ body })) {
      throw new Error(`event ${JSON.stringify(body)} does not fit the batch`);
    }
  }
  await p.sendBatch(batch);
}

// receive subscribes to one partition from startPosition and resolves with
// the first count events, in the order they arrived. Errors the SDK reports
// meanwhile are kept and shown if the events never come.
function receive(client, partitionId, startPosition, count, subscribeOptions = {}) {
  const got = [];
  const errors = [];
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = async (fn) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      await sub.close();
      fn();
    };
    const timer = setTimeout(() => {
      finish(() => reject(new Error(`partition ${partitionId}: ${got.length} of ${count} events before the hang bound; errors: ${errors.join("; ") || "none"}`)));
    }, hangBoundMs);
    const sub = client.subscribe(
      partitionId,
      {
        processEvents: async (events) => {
          got.push(...events);
          if (got.length >= count) {
            await finish(() => resolve(got.slice(0, count)));
          }
        },
        processError: async (err) => {
          errors.push(`${err.code || err.name}: ${err.message}`);
        },
      },
      { startPosition, maxBatchSize: count, maxWaitTimeInSeconds: 1, ...subscribeOptions },
    );
  });
}

// collect subscribes to one partition and keeps what arrives: the events
// and the errors the SDK reports, until close is called.
function collect(client, partitionId, subscribeOptions) {
  const events = [];
  const errors = [];
  const sub = client.subscribe(
    partitionId,
    {
      processEvents: async (evs) => { events.push(...evs); },
      processError: async (err) => { errors.push(err); },
    },
    { maxWaitTimeInSeconds: 1, ...subscribeOptions },
  );
  return { events, errors, close: () => sub.close() };
}

// eventually polls cond every 200 ms until it returns a truthy value, which
// it resolves with, or fails after the hang bound.
async function eventually(what, cond) {
  const deadline = Date.now() + hangBoundMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

module.exports = { env, namespaceConnectionString, producer, consumer, send, receive, collect, eventually, hangBoundMs };
