"use strict";
// Produces the Avro events of avro_test.go with clients nobody here wrote:
// @azure/schema-registry-avro serializes records against the emulator's
// Azure Schema Registry (content type avro/binary+<id>), and
// @kafkajs/confluent-schema-registry frames them for its Confluent
// registry (byte 0, 4-byte id, Avro); @azure/event-hubs sends both. Two
// schema versions (v2 adds `channel` with a default and removes `note`)
// and poison bodies. The records are a function of their index, which
// avro_test.go computes again to check the rows.
const crypto = require("node:crypto");
const { SchemaRegistryClient } = require("@azure/schema-registry");
const { AvroSerializer } = require("@azure/schema-registry-avro");
const { EventHubProducerClient } = require("@azure/event-hubs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const endpoint = env("SR_ENDPOINT");
const n = Number(env("AVRO_EVENTS"));

function sasCredential(keyName, key) {
  return {
    async getToken() {
      const expiresOnTimestamp = Date.now() + 3600 * 1000;
      const se = Math.floor(expiresOnTimestamp / 1000);
      const sr = encodeURIComponent(endpoint).toLowerCase();
      const sig = crypto.createHmac("sha256", key).update(`${sr}\n${se}`).digest("base64");
      return { token: `SharedAccessSignature sr=${sr}&sig=${encodeURIComponent(sig)}&se=${se}&skn=${keyName}`, expiresOnTimestamp };
    },
  };
}

const common = [
  { name: "id", type: "long" },
  { name: "name", type: "string" },
  { name: "amount", type: { type: "bytes", logicalType: "decimal", precision: 12, scale: 2 } },
  { name: "placed", type: { type: "long", logicalType: "timestamp-millis" } },
  { name: "day", type: { type: "int", logicalType: "date" } },
  { name: "ref", type: { type: "string", logicalType: "uuid" } },
  { name: "tags", type: { type: "array", items: "string" } },
];
const order = (fields) => JSON.stringify({ type: "record", name: "Order", namespace: "shop", fields: [...common, ...fields] });
const note = { name: "note", type: ["null", "string"], default: null };
const channel = { name: "channel", type: "string", default: "web" };
const v1 = order([note]);
const v2 = order([channel]);
// With AVRO_EVOLVE (avro_test.go's TestAvroSchemaEvolution) the versions
// follow one another: e1 has note; e2 adds channel with a default; e3
// removes note, which was optional. Phase 1 sends records 0..n-1 in e1;
// phase 2 sends n..2n-1 in e2, then 2n..3n-1 in e3.
const evolve = process.env.AVRO_EVOLVE;
const e1 = v1;
const e2 = order([note, channel]);
const e3 = v2;

// record i, as avro_test.go's avroRecord computes it.
function record(i) {
  const cents = ((i * 137) % 100000) - 500;
  const amount = Buffer.alloc(4);
  amount.writeInt32BE(cents);
  const r = {
    id: i + 1,
    name: `n-${i}`,
    amount,
    placed: 1700000000000 + i * 1001,
    day: 19000 + (i % 30),
    ref: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
    tags: [`t${i % 5}`],
  };
  if (evolve) {
    const version = Math.floor(i / n) + 1;
    if (version < 3) r.note = i % 3 === 0 ? null : `note ${i}`;
    if (version > 1) r.channel = i % 2 ? "app" : "store";
    return [r, [e1, e2, e3][version - 1]];
  }
  const isV2 = i % 4 === 3;
  if (isV2) r.channel = i % 8 === 3 ? "app" : "store";
  else r.note = i % 3 === 0 ? null : `note ${i}`;
  return [r, isV2 ? v2 : v1];
}

async function send(hub, events) {
  const producer = new EventHubProducerClient(env("EH_CONNECTION_STRING"), hub);
  try {
    for (const partitionId of ["0", "1"]) {
      const mine = events.filter((e) => e.partitionId === partitionId);
      for (let k = 0; k < mine.length; k += 50) {
        await producer.sendBatch(mine.slice(k, k + 50).map(({ partitionId: _, ...e }) => e), { partitionId });
      }
    }
  } finally {
    await producer.close();
  }
}

async function main() {
  const serializer = new AvroSerializer(new SchemaRegistryClient(endpoint, sasCredential(env("SR_KEY_NAME"), env("SR_KEY"))), {
    groupName: "shop",
    autoRegisterSchemas: true,
  });
  const confluent = new SchemaRegistry({ host: endpoint, auth: { username: env("CONFLUENT_USER"), password: env("CONFLUENT_PASSWORD") } });
  const ids = new Map();
  const register = async (schema) => {
    if (!ids.has(schema)) ids.set(schema, (await confluent.register({ type: SchemaType.AVRO, schema }, { subject: "orders-value" })).id);
    return ids.get(schema);
  };
  const [from, to] = evolve === "2" ? [n, 3 * n] : [0, n];
  const azure = [];
  const kafka = [];
  let v1Type;
  for (let i = from; i < to; i++) {
    const [value, schema] = record(i);
    const partitionId = String(i % 2);
    // The Azure serializer maps timestamp-millis to a Date (its DateType).
    const msg = await serializer.serialize({ ...value, placed: new Date(value.placed) }, schema);
    if (schema === v1) v1Type = msg.contentType;
    azure.push({ partitionId, body: msg.data, contentType: msg.contentType });
    kafka.push({ partitionId, body: await confluent.encode(await register(schema), value) });
  }
  if (evolve) {
    await send(env("AZURE_HUB"), azure);
    await send(env("KAFKA_HUB"), kafka);
    console.log(JSON.stringify({ azure: azure.length, kafka: kafka.length, confluentIds: [...ids.values()] }));
    return;
  }
  const [c1, c2] = [await register(v1), await register(v2)];
  // Poison: an id the registry does not know, and bodies that are not
  // Avro of their schema, one per partition.
  azure.push({ partitionId: "0", body: azure[0].body, contentType: "avro/binary+" + "f".repeat(32) });
  azure.push({ partitionId: "1", body: Buffer.from([0xff, 0xff, 0xff]), contentType: v1Type });
  kafka.push({ partitionId: "0", body: Buffer.concat([Buffer.from([0, 0, 0, 3, 231]), Buffer.from(kafka[0].body).subarray(5)]) });
  kafka.push({ partitionId: "1", body: Buffer.from('{"not":"framed"}') });
  await send(env("AZURE_HUB"), azure);
  await send(env("KAFKA_HUB"), kafka);
  console.log(JSON.stringify({ azure: azure.length, kafka: kafka.length, confluentIds: [c1, c2], v1: v1Type }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
