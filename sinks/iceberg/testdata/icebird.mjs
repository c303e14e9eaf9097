// icebird.mjs reads an Iceberg table with icebird, an Iceberg reader
// nobody in ehsink wrote (it parses the metadata JSON, the Avro manifest
// list and manifests, and reads the data files with hyparquet), and prints
// what it read.
//
// Usage: node icebird.mjs TABLE_URL METADATA_FILE_NAME
// TABLE_URL is the table's file:// location. It prints one JSON object on
// stdout: {snapshot, summary, fields, rows: [{partition, seq}]} or, when
// icebird cannot read the manifests, rows_error instead of rows. The packages are
// found in $EHSINK_NODE_MODULES (the project's .tools/node_modules).
//
// icebird fetches everything with fetch(), which Node has only for http(s):
// the script gives fetch file:// URLs (with Range requests, as hyparquet
// makes them). That shim is all this script adds; the reading is icebird's.
import { open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const modules = process.env.EHSINK_NODE_MODULES
if (!modules) {
  console.error('icebird.mjs: EHSINK_NODE_MODULES is not set')
  process.exit(2)
}
// icebird exports only an import condition, which require.resolve does not
// take: its entry point is loaded by path.
const { icebergRead, icebergMetadata } = await import(pathToFileURL(join(modules, 'icebird', 'src', 'index.js')).href)

const realFetch = globalThis.fetch
globalThis.fetch = async (input, init = {}) => {
  const url = typeof input === 'string' ? input : input.url ?? String(input)
  if (!url.startsWith('file://')) return realFetch(input, init)
  const path = fileURLToPath(url)
  let size
  try {
    size = (await stat(path)).size
  } catch {
    return new Response('not found', { status: 404 })
  }
  if (init.method === 'HEAD') {
    return new Response(null, { status: 200, headers: { 'content-length': String(size) } })
  }
  const headers = new Headers(init.headers)
  const range = headers.get('range')
  let start = 0
  let end = size - 1
  if (range) {
    const m = /^bytes=(\d+)-(\d*)$/.exec(range)
    if (!m) return new Response('bad range', { status: 416 })
    start = Number(m[1])
    if (m[2] !== '') end = Math.min(Number(m[2]), size - 1)
  }
  const fh = await open(path)
  try {
    const buf = Buffer.alloc(end - start + 1)
    await fh.read(buf, 0, buf.length, start)
    return new Response(buf, {
      status: range ? 206 : 200,
      headers: { 'content-length': String(buf.length), 'content-range': `bytes ${start}-${end}/${size}` },
    })
  } finally {
    await fh.close()
  }
}

const [tableUrl, metadataFileName] = process.argv.slice(2)
const metadata = await icebergMetadata({ tableUrl, metadataFileName })
const current = metadata.snapshots.find(s => s['snapshot-id'] === metadata['current-snapshot-id'])
const schema = metadata.schemas.find(s => s['schema-id'] === metadata['current-schema-id'])
const out = {
  snapshot: String(metadata['current-snapshot-id']),
  summary: current?.summary ?? {},
  fields: schema.fields.map(f => ({ id: f.id, name: f.name, required: f.required, type: String(f.type) })),
}
try {
  const rows = await icebergRead({ tableUrl, metadata })
  out.rows = rows.map(r => ({ partition: r.partition, seq: Number(r.seq) }))
} catch (e) {
  // icebird 0.3.1 inflates the manifests' deflate blocks with
  // hyparquet-compressors' gunzip, which after a raw deflate stream (Avro's
  // deflate codec, which iceberg-go always writes) skips an 8-byte gzip
  // footer raw deflate does not have and decodes again from there.
  out.rows_error = String(e?.stack ?? e)
}
process.stdout.write(JSON.stringify(out))
