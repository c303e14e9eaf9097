"use strict";
// The emulator's schema registries driven by clients nobody here wrote:
// @azure/schema-registry with @azure/schema-registry-avro registers and
// serializes records that @azure/event-hubs sends to the emulator and reads
// back deserialized; @kafkajs/confluent-schema-registry registers a schema
// on the Confluent routes and encodes and decodes Confluent-framed bodies.
// Run by js_schemaregistry_test.go, which starts an emulator with keys and
// the registry and trusts its certificate through NODE_EXTRA_CA_CERTS.

const test = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const { SchemaRegistryClient } = require("@azure/schema-registry");
const { AvroSerializer } = require("@azure/schema-registry-avro");
const { EventHubProducerClient, EventHubConsumerClient, earliestEventPosition } = require("@azure/event-hubs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");
const { receive } = require("../helpers");

function env(name) {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run this test with go test ./test/conformance/js -run SchemaRegistry`);
  }
  return v;
}

const endpoint = env("SR_ENDPOINT"); // https://127.0.0.1:PORT
const hub = env("SR_HUB");
const group = "shop";

// sasCredential is a TokenCredential whose tokens are SAS tokens signed
// with a key of the emulator's, as the namespace's Schema Registry takes
// them (in place of Microsoft Entra tokens).
function sasCredential(keyName, key) {
  return {
    async getToken() {
      const expiresOnTimestamp = Date.now() + 60 * 60 * 1000;
      const se = Math.floor(expiresOnTimestamp / 1000);
      const sr = encodeURIComponent(endpoint).toLowerCase();
      const sig = crypto.createHmac("sha256", key).update(`${sr}\n${se}`).digest("base64");
      const token = `SharedAccessSignature sr=${sr}&sig=${encodeURIComponent(sig)}&se=${se}&skn=${keyName}`;
      return { token, expiresOnTimestamp };
    },
  };
}

const credential = () => sasCredential(env("SR_KEY_NAME"), env("SR_KEY"));

const orderV1 = JSON.stringify({
  type: "record",
  name: "Order",
  namespace: "shop",
  fields: [
    { name: "id", type: "long" },
    { name: "item", type: "string" },
  ],
});
// v2 adds a field with a default: readers of either version resolve the other.
const orderV2 = JSON.stringify({
  type: "record",
  name: "Order",
  namespace: "shop",
  fields: [
    { name: "id", type: "long" },
    { name: "item", type: "string" },
    { name: "qty", type: "int", default: 1 },
  ],
});

test("Azure Schema Registry: register, get by id and version, get-id, refusals", async () => {
  const client = new SchemaRegistryClient(endpoint, credential());
  const v1 = await client.registerSchema({ groupName: group, name: "shop.Order", format: "Avro", definition: orderV1 });
  assert.match(v1.id, /^[0-9a-f]{32}$/);
  assert.deepEqual({ ...v1, id: undefined }, { id: undefined, format: "Avro", groupName: group, name: "shop.Order", version: 1 });
  const again = await client.registerSchema({ groupName: group, name: "shop.Order", format: "Avro", definition: orderV1 });
  assert.equal(again.id, v1.id, "the same schema keeps its id");

  const props = await client.getSchemaProperties({ groupName: group, name: "shop.Order", format: "Avro", definition: orderV1 });
  assert.equal(props.id, v1.id, "getSchemaProperties finds the id");

  const byId = await client.getSchema(v1.id);
  assert.equal(byId.definition, orderV1);
  assert.deepEqual(byId.properties, { id: v1.id, format: "Avro", groupName: group, name: "shop.Order", version: 1 });
  const byVersion = await client.getSchema("shop.Order", group, 1);
  assert.equal(byVersion.properties.id, v1.id);

  await assert.rejects(client.getSchema("0".repeat(32)), (e) => e.statusCode === 404 && e.code === "ItemNotFound");
  await assert.rejects(
    client.registerSchema({ groupName: group, name: "shop.Bad", format: "Avro", definition: '{"type":"record","name":"Bad","fields":[{"name":"a","type":"lung"}]}' }),
    (e) => e.statusCode === 400 && e.code === "InvalidSchema" && /lung/.test(e.message),
  );
  const forged = new SchemaRegistryClient(endpoint, sasCredential(env("SR_KEY_NAME"), "not-the-key"));
  await assert.rejects(forged.getSchema(v1.id), (e) => e.statusCode === 401);
  const reader = new SchemaRegistryClient(endpoint, sasCredential(env("SR_LISTEN_KEY_NAME"), env("SR_LISTEN_KEY")));
  assert.equal((await reader.getSchema(v1.id)).definition, orderV1, "a listen-only key reads");
  await assert.rejects(
    reader.registerSchema({ groupName: group, name: "shop.Order", format: "Avro", definition: orderV2 }),
    (e) => e.statusCode === 403,
    "a listen-only key may not register",
  );
});

test("AvroSerializer events through Event Hubs, two schema versions", async () => {
  const writer = new AvroSerializer(new SchemaRegistryClient(endpoint, credential()), { groupName: group, autoRegisterSchemas: true });
  const records = [
    [{ id: 1, item: "apple" }, orderV1],
    [{ id: 2, item: "pear", qty: 3 }, orderV2],
    [{ id: 3, item: "plum" }, orderV1],
  ];
  const messages = [];
  for (const [value, schema] of records) {
    messages.push(await writer.serialize(value, schema));
  }
  const [idV1, idV2] = [messages[0].contentType, messages[1].contentType];
  assert.match(idV1, /^avro\/binary\+[0-9a-f]{32}$/);
  assert.notEqual(idV1, idV2, "a new schema version has a new id");
  assert.equal(messages[2].contentType, idV1);

  // A serializer that does not register finds the ids with get-id.
  const lookup = new AvroSerializer(new SchemaRegistryClient(endpoint, credential()), { groupName: group });
  assert.equal((await lookup.serialize({ id: 9, item: "x", qty: 2 }, orderV2)).contentType, idV2);

  const conn = env("EH_CONNECTION_STRING");
  const producer = new EventHubProducerClient(conn, hub);
  const consumer = new EventHubConsumerClient("$Default", conn, hub);
  try {
    await producer.sendBatch(messages.map((m) => ({ body: m.data, contentType: m.contentType })), { partitionId: "0" });
    const events = await receive(consumer, "0", earliestEventPosition, records.length);
    assert.deepEqual(events.map((e) => e.contentType), messages.map((m) => m.contentType), "content types arrive as sent");

    // A fresh serializer has no cache: it fetches each writer schema by id.
    const readerSide = new AvroSerializer(new SchemaRegistryClient(endpoint, credential()));
    const decoded = [];
    const asV2 = [];
    for (const e of events) {
      const message = { data: e.body, contentType: e.contentType };
      decoded.push({ ...(await readerSide.deserialize(message)) });
      asV2.push({ ...(await readerSide.deserialize(message, { schema: orderV2 })) });
    }
    assert.deepEqual(decoded, records.map(([value]) => value), "each record decodes with its writer schema");
    assert.deepEqual(asV2, [
      { id: 1, item: "apple", qty: 1 },
      { id: 2, item: "pear", qty: 3 },
      { id: 3, item: "plum", qty: 1 },
    ], "v1 records resolve to the v2 reader schema with its default");
  } finally {
    await producer.close();
    await consumer.close();
  }
});

test("Confluent routes: kafkajs registers, encodes and decodes Confluent-framed bodies", async () => {
  const auth = { username: env("CONFLUENT_USER"), password: env("CONFLUENT_PASSWORD") };
  const registry = new SchemaRegistry({ host: endpoint, auth });
  const { id } = await registry.register({ type: SchemaType.AVRO, schema: orderV1 }, { subject: "orders-value" });
  assert.ok(Number.isInteger(id) && id >= 1, `id ${id}`);
  const { id: id2 } = await registry.register({ type: SchemaType.AVRO, schema: orderV2 }, { subject: "orders-value" });
  assert.equal(id2, id + 1, "the next schema gets the next id");
  assert.equal(await registry.getLatestSchemaId("orders-value"), id2);
  assert.equal(await registry.getRegistryIdBySchema("orders-value", { type: SchemaType.AVRO, schema: orderV1 }), id);
  assert.equal(await registry.getRegistryId("orders-value", 1), id);

  const body = await registry.encode(id, { id: 7, item: "fig" });
  assert.equal(body[0], 0, "magic byte");
  assert.equal(body.readInt32BE(1), id, "4-byte big-endian schema id");

  const conn = env("EH_CONNECTION_STRING");
  const producer = new EventHubProducerClient(conn, hub);
  const consumer = new EventHubConsumerClient("$Default", conn, hub);
  try {
    await producer.sendBatch([{ body }], { partitionId: "1" });
    const [event] = await receive(consumer, "1", earliestEventPosition, 1);
    // A fresh client fetches the schema by id from /schemas/ids/{id}.
    const fresh = new SchemaRegistry({ host: endpoint, auth });
    assert.deepEqual({ ...(await fresh.decode(event.body)) }, { id: 7, item: "fig" });
  } finally {
    await producer.close();
    await consumer.close();
  }
  const noAuth = new SchemaRegistry({ host: endpoint }, {});
  await assert.rejects(noAuth.getSchema(id), (e) => e.status === 401 || /401/.test(String(e.message)));
});
